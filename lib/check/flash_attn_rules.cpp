// The flash-attn release table (see flash_attn_rules.hpp). Each row was read from the tagged
// release in Dao-AILab/flash-attention; the thresholds (window 2.3.0, alibi 2.4.0, varlen
// single-query swap 2.5.0, softcap 2.6.0, padding moved to Python 2.7.0, FA4 fp8 4.0.0b10) are the
// first tags whose source has the feature. docs/spec/flash-attn-features.md shows the same rows.
#include "check/flash_attn_rules.hpp"

#include <vector>

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
// from torch/nn/attention/varlen.py of each release's wheel. Both go to PyTorch's bundled FA2
// (aten::_flash_attention_forward; the cuDNN branch is off: _should_use_cudnn returns False):
// no dropout, softcap or alibi argument, the head dim checked, not padded; a 0-d tensor max_q
// runs (measured, torch 2.11.0 on an H100). 2.10 has `is_causal` and no window; 2.11 has
// `window_size` (is_causal derived from window_size == (-1, 0)).
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
  };
  return t;
}
// clang-format on

}  // namespace

std::span<const FlashAttnRules> torch_varlen_rule_sets() { return torch_table(); }

std::optional<TorchSignatureError> torch_signature_error(const Batch& batch) {
  if (!batch.varlen) return std::nullopt;
  const ExplicitVarlen& v = *batch.varlen;
  // the release's table; no release: the rule set's (the newest known); a release before
  // varlen_attn existed reads the first table
  const Version first = version_literal(torch_varlen_rule_sets().front().first);
  const std::optional<Version>& torch = batch.environment.torch;
  const Version release = !torch ? version_literal(resolve_torch_varlen(torch).rules->first) : *torch < first ? first : *torch;
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
  Binding binding = bind_arguments(*sig, function_name(Api::torch_varlen_attn), args);
  if (!binding.type_error) return std::nullopt;
  return TorchSignatureError{std::move(*binding.type_error), sig};
}

ResolvedFlashAttn resolve_torch_varlen(const std::optional<Version>& torch) {
  const auto& t = torch_table();
  ResolvedFlashAttn out;
  if (!torch) {
    out.rules = &t.back();
    out.note = "no torch release given: varlen_attn follows torch " + std::string(t.back().first) + " (rule set " +
               std::string(t.back().name) + ", the newest known)";
    return out;
  }
  out.release = torch->text;
  // the release without its local part ("2.11.0+cu130" -> 2.11.0)
  Version plain = *torch;
  plain.local.clear();
  for (const auto& r : t)
    if (version_literal(r.first) <= plain) out.rules = &r;
  if (!out.rules) {
    out.rules = &t.front();
    out.note = "torch " + torch->text + " has no torch.nn.attention.varlen (first in " + std::string(t.front().first) +
               "): the nearest known release's rules (" + std::string(t.front().name) + ") apply";
  } else if (plain.release.size() >= 2 && version_literal(out.rules->first).release.size() >= 2 &&
             plain.release[1] != version_literal(out.rules->first).release[1]) {
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
