// The flash-attn release table (see flash_attn_rules.hpp). Each row was read from the tagged
// release in Dao-AILab/flash-attention; the thresholds (window 2.3.0, alibi 2.4.0, varlen
// single-query swap 2.5.0, softcap 2.6.0, padding moved to Python 2.7.0, FA4 fp8 4.0.0b10) are the
// first tags whose source has the feature. docs/spec/flash-attn-features.md shows the same rows.
#include "check/flash_attn_rules.hpp"

#include <vector>

#include "vocab/releases.hpp"

namespace ad {

namespace {

using A = HeadDimAlignment;

// clang-format off
const std::vector<FlashAttnRules>& table() {
  static const std::vector<FlashAttnRules> t = {
      // name      first       fam fp8    maxD  alignment          gqa    window alibi  softcap sc+drop dropout swap   tensor grid   off64
      {"fa1",     "1.0.0",     1, false, 128, A::required,        false, false, false, false, false,  true,  false, true,  false, false,
       "fa1",
       "v1.0.9 csrc/flash_attn/fmha_api.cpp mha_fwd (k/v take num_heads: no MQA/GQA)"},
      {"fa2-2.0", "2.0.0",     2, false, 256, A::padded_in_cpp,   true,  false, false, false, false,  true,  false, true,  true,  false,
       "fa2",
       "v2.0.0 csrc/flash_attn/flash_api.cpp mha_varlen_fwd (pads head_size_og % 8 != 0 in C++)"},
      {"fa2-2.3", "2.3.0",     2, false, 256, A::padded_in_cpp,   true,  true,  false, false, false,  true,  false, true,  true,  false,
       "fa2",
       "v2.3.0 flash_api.cpp: window_size_left/right first appear"},
      {"fa2-2.4", "2.4.0",     2, false, 256, A::padded_in_cpp,   true,  true,  true,  false, false,  true,  false, true,  true,  false,
       "fa2",
       "v2.4.0 flash_api.cpp: alibi_slopes first appear"},
      {"fa2-2.5", "2.5.0",     2, false, 256, A::padded_in_cpp,   true,  true,  true,  false, false,  true,  true,  true,  true,  false,
       "fa2",
       "v2.5.0 flash_api.cpp mha_varlen_fwd: seqlenq_ngroups_swapped when max_seqlen_q == 1"},
      {"fa2-2.6", "2.6.0",     2, false, 256, A::padded_in_cpp,   true,  true,  true,  true,  false,  true,  true,  true,  true,  false,
       "fa2",
       "v2.6.0 flash_api.cpp: softcap; \"Softcapping does not support dropout for now\""},
      {"fa2-2.7", "2.7.0",     2, false, 256, A::padded_in_python, true, true,  true,  true,  false,  true,  true,  true,  true,  false,
       "fa2",
       "v2.7.0 flash_attn_interface.py pads head_size_og % 8 != 0; flash_api.cpp then requires a multiple of 8 "
       "(unchanged through v2.8.3)"},
      {"fa3",     "3.0.0b1",   3, true,  256, A::required,        true,  true,  false, true,  false,  false, false, true,  false, true,
       "fa3",
       "hopper/flash_api.cpp and hopper/flash_attn_interface.py as of v2.8.3 (no dropout argument; "
       "64-bit offsets per Dao-AILab/flash-attention#767)"},
      {"fa4",     "4.0.0b0",   4, false, 256, A::required,        true,  true,  false, true,  false,  false, false, false, false, false,
       "fa4",
       "fa4-v4.0.0.beta0 flash_attn/cute/interface.py (max_seqlen typed Optional[int], used in tile arithmetic)"},
      {"fa4-fp8", "4.0.0b10",  4, true,  256, A::required,        true,  true,  false, true,  false,  false, false, false, false, false,
       "fa4-fp8",
       "fa4-v4.0.0.beta10 flash_attn/cute/interface.py (fp8 accepted; alignment 16 bytes)"},
  };
  return t;
}
// clang-format on

}  // namespace

std::span<const FlashAttnRules> flash_attn_rule_sets() { return table(); }

ResolvedFlashAttn resolve_flash_attn_cute(const Version& bundled) {
  // name  first  family fp8  maxD alignment gqa window alibi softcap sc+drop dropout swap tensor grid off64:
  // fa4's row (the copy has no max_seqlen parameter at all; its signature: vocab/signature.cpp)
  static const FlashAttnRules cute = {
      "fa4-cute-2.8.3", "2.8.3", 4, false, 256, HeadDimAlignment::required, true, true, false, true, false, false,
      false, false, false, false, "fa4",
      "flash-attn 2.8.3 flash_attn/cute/interface.py (the bundled copy; the same files in 2.8.3.post1 and 2.8.3.post2)"};
  ResolvedFlashAttn out;
  out.rules = &cute;
  out.release = bundled.text;
  out.note = "flash_attn.cute is the copy bundled in flash-attn " + bundled.text + " (environment.flash_attn_cute)";
  return out;
}

std::string ResolvedFlashAttn::label() const {
  std::string r = release.empty() ? std::string("none given") : release;
  return r + " (rule set " + std::string(rules->name) + ")";
}

ResolvedFlashAttn resolve_flash_attn(const std::optional<Version>& release) {
  const auto& t = table();
  ResolvedFlashAttn out;
  if (!release) {
    for (const auto& r : t)
      if (r.family == 2) out.rules = &r;  // the newest FA2 row
    out.note = "no flash_attn release given: the newest FA2 rule set (" + std::string(out.rules->name) + ") applies";
    return out;
  }
  out.release = release->text;
  for (const auto& r : t)
    if (version_literal(r.first) <= *release) out.rules = &r;
  if (!out.rules) {
    out.rules = &t.front();
    out.note = "flash_attn " + release->text + " is older than every known rule set; " + std::string(t.front().name) +
               " applies";
  } else if (!(version_literal(out.rules->first) == *release)) {
    out.note = "flash_attn " + release->text + " mapped to rule set " + std::string(out.rules->name) + " (first release " +
               std::string(out.rules->first) + ")";
  }
  return out;
}

namespace {

// torch.nn.attention.varlen.varlen_attn by torch release (docs/spec/torch-varlen-attn.md), read
// from torch/nn/attention/varlen.py of each release's wheel. 2.10 - 2.13 go to PyPI's bundled
// FA2 (aten::_flash_attention_forward; _should_use_cudnn returns False); 2.14 and 2.15 choose
// cuDNN (aten::_cudnn_attention_forward) where their selector allows, else FA2 (torch_backend
// below). Both: no dropout, softcap or alibi argument, the head dim checked, not padded; a 0-d
// tensor max_q runs (measured, torch 2.11.0 on an H100). 2.10 has `is_causal` and no window;
// 2.11 has `window_size` (is_causal derived from window_size == (-1, 0)); 2.12 adds
// enable_gqa (a GQA call without it is a ValueError); 2.15 adds the scale check and the SDPA
// priority order.
// clang-format off
const std::vector<FlashAttnRules>& torch_table() {
  static const std::vector<FlashAttnRules> t = {
      // name        first     fam fp8    maxD  alignment     gqa   window alibi  softcap sc+drop dropout swap  tensor grid  off64
      {"torch-2.10", "2.10.0", 2, false, 256, A::required,   true, false, false, false, false,  false,  true, true,  true, false,
       "torch-varlen",
       "torch 2.10.0 torch/nn/attention/varlen.py varlen_attn(..., is_causal=False, return_aux=None)"},
      {"torch-2.11", "2.11.0", 2, false, 256, A::required,   true, true,  false, false, false,  false,  true, true,  true, false,
       "torch-varlen",
       "torch 2.11.0 torch/nn/attention/varlen.py varlen_attn(..., *, return_aux=None, scale=None, window_size=(-1, -1))"},
      {"torch-2.12", "2.12.0", 2, false, 256, A::required,   true, true,  false, false, false,  false,  true, true,  true, false,
       "torch-varlen",
       "torch 2.12.0 torch/nn/attention/varlen.py (same in 2.12.1 and 2.13.0): enable_gqa, seqused_k, block_table, "
       "num_splits; H != Hk without enable_gqa=True is a ValueError"},
      {"torch-2.14", "2.14.0", 2, false, 256, A::required,   true, true,  false, false, false,  false,  true, true,  true, false,
       "torch-varlen",
       "torch 2.14.0 torch/nn/attention/varlen.py (same in 2.14.1): _can_use_cudnn selects cuDNN on SM90 / SM100 with "
       "cuDNN >= 9.18"},
      {"torch-2.15", "2.15.0", 2, false, 256, A::required,   true, true,  false, false, false,  false,  true, true,  true, false,
       "torch-varlen",
       "torch 2.15.0 torch/nn/attention/varlen.py: _select_backend (cuDNN first in the SDPA priority order), "
       "_validate_scale"},
  };
  return t;
}
// clang-format on

}  // namespace

std::span<const FlashAttnRules> torch_varlen_rule_sets() { return torch_table(); }

namespace {

// The torch release a call's Python layer follows: environment.torch (its local part ignored),
// else the rule set's (2.11.0, the measured one); a release before varlen_attn existed reads the
// first release.
Version torch_release_of(const Batch& batch) {
  const Version first = version_literal(torch_varlen_rule_sets().front().first);
  const std::optional<Version>& torch = batch.environment.torch;
  if (!torch) return version_literal(resolve_torch_varlen(torch).rules->first);
  Version plain = *torch;
  plain.local.clear();
  return plain < first ? first : plain;
}

}  // namespace

std::optional<TorchSignatureError> torch_signature_error(const Batch& batch) {
  if (!batch.varlen) return std::nullopt;
  const ExplicitVarlen& v = *batch.varlen;
  // the release's table; no release: the rule set's (the newest known); a release before
  // varlen_attn existed reads the first table
  const Version release = torch_release_of(batch);
  const Signature* sig = signature_for(Api::torch_varlen_attn, release);
  if (!sig) return std::nullopt;
  // the seven tensors and lengths by position (as torch's documentation calls it), the
  // call-site facts the batch records by keyword (2.11 makes them keyword-only)
  CallArguments args;
  args.positional = {"query", "key", "value", "cu_seq_q", "cu_seq_k", "max_q", "max_k"};
  if (v.window_size) args.keywords.push_back("window_size");
  if (v.seqused_k) args.keywords.push_back("seqused_k");
  if (v.num_splits) args.keywords.push_back("num_splits");
  if (v.seqused_q) args.keywords.push_back("seqused_q");
  if (v.pack_gqa) args.keywords.push_back("pack_gqa");
  if (v.enable_gqa) args.keywords.push_back("enable_gqa");
  Binding binding = bind_arguments(*sig, function_name(Api::torch_varlen_attn), args);
  if (binding.type_error) return TorchSignatureError{std::move(*binding.type_error), sig, "TypeError"};
  // 2.12.0 on: varlen_attn compares the head counts before the custom op (varlen.py); the
  // messages are the release's f-strings
  if (!(release < version_literal("2.12.0"))) {
    const Model& m = batch.model;
    const int64_t hq = m.num_heads, hk = m.num_kv_heads > 0 ? m.num_kv_heads : m.num_heads;
    const bool gqa = v.enable_gqa.value_or(false);
    const std::string counts = "Hq=" + std::to_string(hq) + " and Hkv=" + std::to_string(hk) + ".";
    if (!gqa && hq != hk)
      return TorchSignatureError{"Expect query and key/value to have the same number of heads but got " + counts +
                                     " Try setting enable_gqa=True for GQA.",
                                 sig, "ValueError"};
    if (gqa && hk > 0 && hq % hk != 0)
      return TorchSignatureError{"Expect number of query heads to be a multiple of kv heads for GQA but got " + counts,
                                 sig, "ValueError"};
  }
  return std::nullopt;
}

TorchBackend torch_backend(const Batch& batch) {
  TorchBackend out;
  if (!batch.varlen) return out;
  const ExplicitVarlen& v = *batch.varlen;
  const Version release = torch_release_of(batch);
  if (release < version_literal("2.14.0")) {
    out.why = "torch " + release.text + ": _should_use_cudnn returns False (FA2 only)";
    return out;
  }
  // the selector of 2.14.0 (_can_use_cudnn) and 2.15.0 (_cudnn_rejection_reasons), in its order
  std::vector<std::string> no;
  const std::optional<GpuArch>& arch = batch.environment.gpu_arch;
  const int major = arch ? arch->compute_capability() / 10 : 0;
  if (arch && major != 9 && major != 10) no.push_back("compute capability " + std::to_string(major) + ".x (cuDNN needs 9 or 10)");
  const Model& m = batch.model;
  const int64_t max_q = v.max_seqlen_q.value;
  const bool v215 = !(release < version_literal("2.15.0"));
  // 2.15 with cuDNN 9.24 or newer (PyPI's 2.15.0 pins 9.26) admits max_q <= 128
  if (max_q <= 128 && !v215) no.push_back("max_q " + std::to_string(max_q) + " <= 128");
  if (m.dtype != DType::fp16 && m.dtype != DType::bf16) no.push_back("dtype not fp16 / bf16");
  if (m.head_dim % 8 != 0) no.push_back("head_dim not a multiple of 8");
  // 2.15's _cudnn_supports_head_dims: above 128 only on SM100, forward (192, 192) / (256, 256)
  // (the batch's one head_dim for q and v; the backward's one pair, (192, 128), needs two)
  if (v215 && m.head_dim > 128 && !(major == 10 && batch.pass != CallPass::training && (m.head_dim == 192 || m.head_dim == 256)))
    no.push_back("head_dim " + std::to_string(m.head_dim) + " (cuDNN varlen " +
                 (batch.pass == CallPass::training ? "backward" : "forward") + " does not take it here)");
  // the window as passed, else the model's (varlen.window_size's default, batch-format.md)
  std::pair<int64_t, int64_t> window{-1, m.causal ? 0 : -1};
  if (m.sliding_window && *m.sliding_window > 0) window.first = *m.sliding_window;
  if (v.window_size) window = *v.window_size;
  const bool causal = window == std::pair<int64_t, int64_t>{-1, 0};
  if (window != std::pair<int64_t, int64_t>{-1, -1}) {
    if (!v215 || !causal) no.push_back("window_size (" + std::to_string(window.first) + ", " + std::to_string(window.second) + ")");
    else if (v.cu_seqlens_k_given && !v.seqused_k) no.push_back("causal with a cu_seq_k of its own");
  }
  const int64_t hk = m.num_kv_heads > 0 ? m.num_kv_heads : m.num_heads;
  if (!v215 && (v.enable_gqa.value_or(false) || m.num_heads != hk)) no.push_back("grouped-query heads");
  if (v.num_splits) no.push_back("num_splits given");
  std::string reasons;
  for (const std::string& r : no) reasons += (reasons.empty() ? "" : "; ") + r;
  if (!no.empty()) {
    out.why = "torch " + release.text + " keeps FA2: " + reasons;
    return out;
  }
  if (!arch) {  // everything else admits cuDNN: the architecture decides
    out.known = false;
    out.why = "torch " + release.text + " selects cuDNN on SM90 / SM100 for this call (environment.gpu_arch not given)";
    return out;
  }
  out.cudnn = true;
  out.why = "torch " + release.text + " selects cuDNN (SM" + std::to_string(major) + "0, max_q " + std::to_string(max_q) +
            ", the cuDNN PyPI's wheel pins)";
  return out;
}

ResolvedFlashAttn resolve_torch_varlen(const std::optional<Version>& torch) {
  const auto& t = torch_table();
  ResolvedFlashAttn out;
  if (!torch) {
    // the release measured on the GPU (2.11.0), not the newest read
    for (const auto& r : t)
      if (r.name == std::string_view("torch-2.11")) out.rules = &r;
    out.note = "no torch release given: varlen_attn follows torch " + std::string(out.rules->first) + " (rule set " +
               std::string(out.rules->name) + ", the release measured on the GPU)";
    return out;
  }
  out.release = torch->text;
  // the release without its local part ("2.11.0+cu130" -> 2.11.0)
  Version plain = *torch;
  plain.local.clear();
  for (const auto& r : t)
    if (version_literal(r.first) <= plain) out.rules = &r;
  // a release PyPI lists (vocab/releases.cpp) or a patch release of one's minor
  auto known = [&] {
    for (const Version& r : release_versions(published_releases("torch")))
      if (r.release.size() >= 2 && plain.release.size() >= 2 && r.release[0] == plain.release[0] &&
          r.release[1] == plain.release[1])
        return true;
    return false;
  };
  if (!out.rules) {
    out.rules = &t.front();
    out.note = "torch " + torch->text + " has no torch.nn.attention.varlen (first in " + std::string(t.front().first) +
               "): the nearest known release's rules (" + std::string(t.front().name) + ") apply";
  } else if (!known()) {
    out.note = "torch " + torch->text + " is not a known release: the nearest known one's varlen_attn rules (" +
               std::string(out.rules->name) + ") apply";
  }
  return out;
}

int64_t head_dim_alignment(const FlashAttnRules& rules, DType dtype) {
  if (rules.family >= 3 && dtype == DType::fp8_e4m3) return 16;  // 16 bytes of 1-byte elements
  return 8;
}

}  // namespace ad
