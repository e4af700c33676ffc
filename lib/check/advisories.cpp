// The kernel-release advisory table (advisories.hpp). Every row cites the public report it was
// read from; `fixed_in` names a release only where a release is known to carry the fix.
#include "check/advisories.hpp"

#include <algorithm>
#include <sstream>

#include "check/call_site.hpp"
#include "check/flash_attn_rules.hpp"

namespace ad {

namespace {

// Segment lengths of a cu_seqlens tensor (empty when it is not a monotone 1-D prefix sum).
std::vector<int64_t> lengths(const IntTensor& cu) {
  std::vector<int64_t> out;
  if (cu.rank() != 1 || cu.values.size() < 2) return out;
  for (size_t i = 1; i < cu.values.size(); ++i) out.push_back(cu.values[i] - cu.values[i - 1]);
  return out;
}

// A segment whose query is empty while its keys are not (the first such segment).
std::optional<std::string> empty_query_segment(const AdvisoryCall& c) {
  if (!c.args) return std::nullopt;
  const auto q = lengths(c.args->cu_seqlens_q), k = lengths(c.args->cu_seqlens_k);
  for (size_t i = 0; i < q.size() && i < k.size(); ++i)
    if (q[i] == 0 && k[i] > 0)
      return "segment " + std::to_string(i) + " has 0 query rows and " + std::to_string(k[i]) + " key rows";
  for (size_t i = 0; i < q.size(); ++i)
    if (q[i] == 0) return "segment " + std::to_string(i) + " has 0 query rows";
  return std::nullopt;
}

// FA-2023-001: causal, a segment with more query than key rows.
std::optional<std::string> causal_query_longer(const AdvisoryCall& c) {
  if (!c.args || !c.args->call.causal) return std::nullopt;
  const auto q = lengths(c.args->cu_seqlens_q), k = lengths(c.args->cu_seqlens_k);
  for (size_t i = 0; i < q.size() && i < k.size(); ++i)
    if (q[i] > k[i] && k[i] > 0)
      return "causal, segment " + std::to_string(i) + " has " + std::to_string(q[i]) + " query rows and " +
             std::to_string(k[i]) + " key rows";
  return std::nullopt;
}

// FA-2025-001: a q/k/v tensor of 2^31 elements or more.
std::optional<std::string> elements_past_int32(const AdvisoryCall& c) {
  if (!c.args || !c.batch) return std::nullopt;
  const Model& m = c.batch->model;
  // in double: exact far past 2^31, and no overflow for any row count a batch can state
  const double q = static_cast<double>(c.args->total_q) * static_cast<double>(m.num_heads) * static_cast<double>(m.head_dim);
  const double k = static_cast<double>(c.args->total_k) * static_cast<double>(m.num_kv_heads ? m.num_kv_heads : m.num_heads) *
                   static_cast<double>(m.head_dim);
  constexpr double limit = 2147483648.0;  // 2^31
  auto count = [](double v) { return v < 9.0e18 ? std::to_string(static_cast<long long>(v)) : std::to_string(v); };
  if (q >= limit)
    return "q has " + count(q) + " elements (total_q " + std::to_string(c.args->total_q) + " x " +
           std::to_string(m.num_heads) + " heads x " + std::to_string(m.head_dim) + "), past 2^31 - 1";
  if (k >= limit) return "k/v have " + count(k) + " elements, past 2^31 - 1";
  return std::nullopt;
}

// FA-2026-001: head dim 256 and an empty query segment.
std::optional<std::string> hdim256_empty_query(const AdvisoryCall& c) {
  if (!c.batch || c.batch->model.head_dim != 256) return std::nullopt;
  auto why = empty_query_segment(c);
  if (why) *why = "head_dim 256 (its own kernel), " + *why;
  return why;
}

// FA-2026-002: 4 or more segments and a varlen grid that provisions more query tiles than the
// segments fill. The grid is ceil-free: (total_q + N*(tile_m - 1)) / tile_m per head
// (SingleTileVarlenScheduler.get_grid_shape, quoted in the report); tile_m 128 is this model's
// assumption, the thread does not state it.
std::optional<std::string> overprovisioned_tiles(const AdvisoryCall& c) {
  if (!c.args) return std::nullopt;
  const auto q = lengths(c.args->cu_seqlens_q);
  if (q.size() < 4) return std::nullopt;
  constexpr int64_t tile = 128;
  int64_t total = 0, valid = 0;
  for (int64_t l : q) {
    if (l < 0) return std::nullopt;
    total += l;
    valid += (l + tile - 1) / tile;
  }
  const int64_t grid = (total + static_cast<int64_t>(q.size()) * (tile - 1)) / tile;
  if (grid <= valid) return std::nullopt;
  return std::to_string(q.size()) + " segments; the varlen grid provisions " + std::to_string(grid) +
         " query tiles per head where the segments fill " + std::to_string(valid) + " (tile_m 128 assumed)";
}

// FA-2026-003: the arguments bound by position, bound by the release's signature table
// (vocab/signature.cpp) to other parameters than the caller meant.
std::optional<std::string> positional_binding(const AdvisoryCall& c) {
  if (!c.batch || !c.batch->varlen || !c.batch->varlen->binding || *c.batch->varlen->binding != Bound::positional)
    return std::nullopt;
  if (!c.args || !is_varlen(c.args->call.api)) return std::nullopt;
  const std::optional<CallSite> site = call_site(*c.batch, *c.args);
  if (!site || site->binding.moved.empty()) return std::nullopt;
  std::string moved;
  for (const BoundPair& p : site->binding.moved)
    moved += (moved.empty() ? "" : ", ") + p.argument + " binds to " + p.parameter;
  return "the arguments are bound by position (varlen.binding \"positional\"): " + moved + " (" +
         std::string(site->signature->source) + ")";
}

// FA-2026-004: pack_gqa=True on a GQA call with a causal or local mask and a segment of more
// than one query row (row 0's limits are right by accident: 0 / ratio = 0).
std::optional<std::string> packed_gqa_masked(const AdvisoryCall& c) {
  if (!c.batch || !c.batch->varlen || !c.batch->varlen->pack_gqa || !*c.batch->varlen->pack_gqa) return std::nullopt;
  const Model& m = c.batch->model;
  const int64_t hk = m.num_kv_heads > 0 ? m.num_kv_heads : m.num_heads;
  if (hk <= 0 || m.num_heads <= hk) return std::nullopt;
  if (!c.args) return std::nullopt;
  const bool local = c.args->call.window_left >= 0 || c.args->call.window_right > 0;
  if (!c.args->call.causal && !local) return std::nullopt;
  const auto q = lengths(c.args->cu_seqlens_q);
  const auto longest = std::max_element(q.begin(), q.end());
  if (longest == q.end() || *longest < 2) return std::nullopt;
  return "pack_gqa=True, " + std::to_string(m.num_heads / hk) + " query heads per KV head, " +
         (c.args->call.causal ? std::string("causal") : std::string("a local window")) + ", a segment of " +
         std::to_string(*longest) + " query rows: every row but row 0 gets its column limit divided by " +
         std::to_string(m.num_heads / hk);
}

// TORCH-2026-001: torch's varlen_attn on its cuDNN backend (check/flash_attn_rules.hpp
// torch_backend) with a q, k or v whose storage or row stride is not 16-byte aligned
// (tensors.<name>.aligned false).
std::optional<std::string> torch_cudnn_unaligned(const AdvisoryCall& c) {
  if (!c.batch || !c.batch->varlen || c.batch->varlen->api != Api::torch_varlen_attn) return std::nullopt;
  std::string unaligned;
  for (const char* t : {"q", "k", "v"}) {
    const TensorOverride* o = c.batch->override_for(t);
    if (o && o->aligned16 && !*o->aligned16) unaligned += (unaligned.empty() ? "" : ", ") + std::string(t);
  }
  if (unaligned.empty()) return std::nullopt;
  const TorchBackend backend = torch_backend(*c.batch);
  if (!backend.cudnn && backend.known) return std::nullopt;
  return backend.why + "; " + unaligned + " not 16-byte aligned (tensors." + unaligned.substr(0, 1) + ".aligned false)";
}

// TRANSFORMERS-2025-001: torch.compile(fullgraph=True) around a model whose flash-attention path
// gets one row with position ids and neither a mask nor the varlen kwargs: _flash_attention_forward
// then decides whether the row is packed from the position ids' values (_is_packed_sequence).
std::optional<std::string> compile_fullgraph_packed_check(const AdvisoryCall& c) {
  if (!c.batch || c.batch->environment.compile != "fullgraph" || !c.batch->batch) return std::nullopt;
  const BatchInputs& in = *c.batch->batch;
  if (in.attention_mask || in.flash_kwargs || !in.position_ids) return std::nullopt;
  if (in.batch_size != 1 || in.query_length < 2) return std::nullopt;
  return "torch.compile(fullgraph=True) (environment.compile), one row of " + std::to_string(in.query_length) +
         " query tokens with position ids and no attention mask or varlen kwargs: _is_packed_sequence reads the "
         "position ids' values to choose the path (data-dependent control flow)";
}

// TRANSFORMERS-2025-002: the release's flash-attention path hands a model's sliding window W to
// flash-attn as window_size=(W, W). flash-attn's window is inclusive (query i sees keys
// i - left .. i + right), so each query sees W + 1 keys where the model's window is W; the extra
// key exists only for a query with W keys before it in its segment (a key segment longer than W).
std::optional<std::string> sliding_window_w_w(const AdvisoryCall& c) {
  if (!c.batch || !c.args || c.args->library != "transformers") return std::nullopt;
  const std::optional<int64_t>& window = c.batch->model.sliding_window;
  if (!window || *window <= 0) return std::nullopt;
  const int64_t W = *window;
  if (c.args->call.window_left != W) return std::nullopt;
  int64_t longest = 0;
  for (int64_t l : lengths(c.args->cu_seqlens_k)) longest = std::max(longest, l);
  if (c.args->cu_seqlens_k.values.empty() && c.batch->batch) longest = c.batch->batch->kv_length;  // dense call
  if (longest <= W) return std::nullopt;
  return "model.sliding_window " + std::to_string(W) + " reaches flash-attn as window_size=(" + std::to_string(W) +
         ", " + std::to_string(c.args->call.window_right) + "), and a key segment of " + std::to_string(longest) +
         " tokens: each query past the first " + std::to_string(W) + " of its segment attends " +
         std::to_string(W + 1) + " keys, one more than the model's window";
}

// DIFFUSERS-2026-001: a training step through diffusers' ring attention (ring_degree > 1).
std::optional<std::string> diffusers_ring_training(const AdvisoryCall& c) {
  if (!c.batch || !c.batch->dispatch || c.batch->dispatch->library != "diffusers") return std::nullopt;
  const Dispatch& d = *c.batch->dispatch;
  if (d.ring_degree < 2) return std::nullopt;
  return "ContextParallelConfig(ring_degree=" + std::to_string(d.ring_degree) +
         ") in a training step: TemplatedRingAttention's backward recomputes every ring step against the K/V "
         "saved at step 0 (ctx.saved_tensors)" +
         (d.backend.empty() ? std::string() : ", backend \"" + d.backend + "\"");
}

// DIFFUSERS-2026-002: diffusers' flash_varlen_hub backend, whose registry names
// _wrapped_flash_attn_varlen_forward / _backward in kernels-community/flash-attn2.
std::optional<std::string> diffusers_varlen_hub(const AdvisoryCall& c) {
  if (!c.batch || !c.batch->dispatch || c.batch->dispatch->library != "diffusers") return std::nullopt;
  if (c.batch->dispatch->backend != "flash_varlen_hub") return std::nullopt;
  return "backend \"flash_varlen_hub\": the release resolves flash_attn_interface._wrapped_flash_attn_varlen_forward "
         "in the kernels-community/flash-attn2 hub kernel (version 1), which exports _flash_attn_varlen_forward";
}

// XFORMERS-2024-001: a causal block-diagonal bias moved with .to(device), which such a release
// answers with BlockDiagonalMask.to: a plain BlockDiagonalMask.
std::optional<std::string> xformers_causal_bias_moved(const AdvisoryCall& c) {
  if (!c.batch || !c.batch->dispatch || c.batch->dispatch->library != "xformers") return std::nullopt;
  const Dispatch& d = *c.batch->dispatch;
  if (!d.attn_bias_moved) return std::nullopt;
  static constexpr std::string_view kInherit[] = {"BlockDiagonalCausalMask", "BlockDiagonalCausalFromBottomRightMask",
                                                  "BlockDiagonalCausalLocalAttentionMask",
                                                  "BlockDiagonalCausalLocalAttentionFromBottomRightMask"};
  if (std::find(std::begin(kInherit), std::end(kInherit), d.attn_bias) == std::end(kInherit)) return std::nullopt;
  std::string seg;
  if (d.seqlens) {
    const auto longest = std::max_element(d.seqlens->begin(), d.seqlens->end());
    if (*longest < 2) return std::nullopt;  // a one-row segment is the same with or without the causal mask
    seg = ", a sequence of " + std::to_string(*longest) + " rows";
  }
  return d.attn_bias + " moved with .to(device) (dispatch.attn_bias_moved): the release returns a plain "
         "BlockDiagonalMask" + seg;
}

// clang-format off
const std::vector<Advisory>& table() {
  static const std::vector<Advisory> t = {
      {"FA-2023-001", "flash_attn", 2, "2.0.0", "2.1.0", "",
       "v2.1.0 aligns the causal mask to the bottom-right corner when seqlen_q != seqlen_k (flash-attention README, "
       "\"Changes in v2.1\")",
       "", 0, 0, "", Pass::backward,
       "causal, a segment with more query rows than key rows",
       Outcome::wrong_gradient, Moment::backward,
       "NaN in the query gradient (\"Q gradient: NaNs!\"; key and value gradients finite)",
       "Dao-AILab/flash-attention#443", causal_query_longer},
      {"FA-2024-001", "flash_attn", 3, "3.0.0b1", "", "3.0.0b1", "open when read", "sm_90", 90, 90, "", Pass::backward,
       "a segment with zero query rows",
       Outcome::hang, Moment::backward,
       "the varlen backward does not return",
       "Dao-AILab/flash-attention#1254", empty_query_segment},
      {"FA-2025-001", "flash_attn", 3, "3.0.0b1", "", "3.0.0b1",
       "Dao-AILab/flash-attention PR#1841 (2025-08-26) casts the size fields to 64-bit; the hopper/ package version "
       "(3.0.0b1) did not change with it, so a 3.0.0b1 build may or may not carry it",
       "sm_90", 90, 90, "", Pass::forward,
       "q, k or v with 2^31 elements or more",
       Outcome::raises, Moment::attention,
       "Floating Point Exception (int32 overflow of the tensor-size parameters)",
       "Dao-AILab/flash-attention PR#1841", elements_past_int32, true},
      {"FA-2026-001", "flash_attn_4", 4, "", "", "4.0.0b13",
       "Dao-AILab/flash-attention PR#2568 (merged 2026-05-15): zero-length query and key segments in the sm100 "
       "head-dim-256 kernels",
       "sm_100", 100, 109, "256", Pass::backward,
       "head_dim 256, a segment with zero query rows",
       Outcome::illegal_address, Moment::backward,
       "CUDA error 700 (cudaErrorIllegalAddress) in _flash_attn_bwd; the forward is fine",
       "Dao-AILab/flash-attention#2562", hdim256_empty_query},
      {"FA-2026-002", "flash_attn_4", 4, "", "", "4.0.0b29",
       "open when read; Dao-AILab/flash-attention PR#2763 (merged 2026-08-07) and PR#2862 guard the "
       "over-provisioned tiles of the SM80/SM120 forward",
       "sm_120", 120, 121, "", Pass::forward,
       "4 or more segments whose lengths leave over-provisioned query tiles",
       Outcome::illegal_address, Moment::attention,
       "illegal memory access in FlashAttentionForwardSm120 (a 16-byte load far past the nearest allocation)",
       "Dao-AILab/flash-attention#2860", overprovisioned_tiles},
      // introduced: the PyPI wheels show qv 4th from 4.0.0b9 (4.0.0b8 has the old order); the
      // reports name 4.0.0b19, the release they met it in
      {"FA-2026-003", "flash_attn_4", 4, "4.0.0b9", "", "",
       "none in the library (the signature change is deliberate): call by keyword, as allenai/OLMo-core PR#857 and "
       "Dao-AILab/flash-attention PR#2527 do",
       "", 0, 0, "", Pass::forward,
       "flash_attn_varlen_func called with its arguments by position (4.0.0b9 inserted qv as the 4th parameter)",
       Outcome::raises, Moment::attention,
       "AttributeError: 'int' object has no attribute 'shape'",
       "allenai/OLMo-core PR#857", positional_binding},
      // through: the newest wheel when the report was filed (4.0.0b11, built 2026-04-29)
      {"FA-2026-004", "flash_attn_4", 4, "", "", "4.0.0b11",
       "open when read (Dao-AILab/flash-attention PR#2528 passes 1 as the pack ratio of the SM80 forward); "
       "Dao-AILab/flash-attention#2444's thread reports the SM80 / SM120 Pack-GQA path implemented end to end "
       "by PR#2656 (2026-07-24)",
       "sm_120", 120, 121, "", Pass::forward,
       "pack_gqa=True with grouped-query heads and a causal or local mask (the SM80 forward, which SM120 inherits)",
       Outcome::wrong_output, Moment::attention,
       "wrong GQA outputs: the causal column limit and the key-block range are wrong for every row but row 0",
       "Dao-AILab/flash-attention PR#2528", packed_gqa_masked},
      // introduced: 2.14.0 is the first varlen_attn that selects cuDNN (_should_use_cudnn returns
      // False through 2.13.0); fixed: 2.15.0's libtorch_cuda.so is the first to carry the
      // all-varlen alignment check (2.14.0 and 2.14.1 check the KV-cache path only)
      {"TORCH-2026-001", "torch", 0, "2.14.0", "2.15.0", "",
       "pytorch/pytorch PR#194818 (2026-08-25): the forward enforces 16-byte-aligned varlen layouts on every call and "
       "the backward makes grad_out contiguous",
       "sm_90, sm_100", 90, 109, "", Pass::forward,
       "varlen_attn on its cuDNN backend with a q, k or v whose base pointer or row stride is not 16-byte aligned",
       Outcome::wrong_output, Moment::attention,
       "unaligned q/k/v silently produce wrong results (compute-sanitizer clean); a 16-byte-misaligned base pointer "
       "raises a sticky misaligned-address fault",
       "pytorch/pytorch PR#194818", torch_cudnn_unaligned},
      // The libraries around the kernel (family 0: the release is environment.<library>).
      // through: the newest release read (5.24.0) still decides the path from the values
      {"TRANSFORMERS-2025-001", "transformers", 0, "4.55.0", "", "5.24.0",
       "open when read: huggingface/transformers PR#41827 (a draft) would skip the position-ids packing detection "
       "under compile. _is_packed_sequence reads the position ids' values at batch size 1 in every release read, "
       "4.55.0 to 5.24.0 (until 4.54 the detection, torch.diff of the position ids, read them at every batch size)",
       "", 0, 0, "", Pass::forward,
       "torch.compile(fullgraph=True), the flash-attention path, one row with position ids and no attention mask "
       "or varlen kwargs",
       Outcome::raises, Moment::conversion,
       "torch.compile(fullgraph=True) fails at a graph break in the flash_attention_2 backend "
       "(PR#41827's table, batch size 1, no mask: \"No full graph, recompilations\")",
       "huggingface/transformers#41803", compile_fullgraph_packed_check},
      // introduced: 4.43.0, the first release whose shared _flash_attention_forward passes (W, W)
      // (4.43.4 - 4.55.4 read; 4.56.0 passes (W - 1, W - 1)) while the eager masks attend W keys
      // (Mistral's _update_causal_mask, 4.43.4; masking_utils from 4.53.0). The per-model copies
      // of 4.34 - 4.42 pass (W, W) too, but their eager masks moved between W + 1 keys (4.34.0's
      // Mistral mask, 4.40's AttentionMaskConverter) and W, so the report's comparison is not
      // established there
      {"TRANSFORMERS-2025-002", "transformers", 0, "4.43.0", "4.56.0", "",
       "huggingface/transformers PR#40163: _flash_attention_forward passes "
       "window_size=(sliding_window - 1, sliding_window - 1); first in the 4.56.0 wheel (4.55.4 still passes (W, W))",
       "", 0, 0, "", Pass::forward,
       "the flash-attention path with a model's sliding_window W, a key segment longer than W",
       Outcome::wrong_output, Moment::attention,
       "off by one: flash-attn's window is inclusive, so window_size=(W, W) lets each query attend W + 1 keys, one "
       "more than the eager and sdpa masks",
       "huggingface/transformers#39408", sliding_window_w_w},
      {"DIFFUSERS-2026-001", "diffusers", 0, "0.36.0", "0.40.0", "",
       "huggingface/diffusers PR#14274 (merged 2026-08): the ring backward passes each step's rotated key and value "
       "to the backward op (read in the 0.40.0 wheel)",
       "", 0, 0, "", Pass::backward,
       "a training step through ring attention (ContextParallelConfig ring_degree > 1)",
       Outcome::wrong_gradient, Moment::backward,
       "incorrect gradients; the forward is correct, and with the flash backend there is no error and no NaN",
       "huggingface/diffusers#14265", diffusers_ring_training},
      {"DIFFUSERS-2026-002", "diffusers", 0, "0.39.0", "0.42.0", "",
       "the 0.42.0 registry names flash_attn_interface._flash_attn_varlen_forward / _backward (hub kernel version 3); "
       "huggingface/diffusers PR#14015 and PR#14016 proposed the same names",
       "", 0, 0, "", Pass::forward,
       "attention backend flash_varlen_hub (the kernels-community/flash-attn2 hub kernel)",
       Outcome::raises, Moment::attention,
       "AttributeError: ... does not define attribute path 'flash_attn_interface._wrapped_flash_attn_varlen_forward'",
       "huggingface/diffusers PR#14015", diffusers_varlen_hub},
      {"XFORMERS-2024-001", "xformers", 0, "0.0.27", "0.0.29.post1", "",
       "facebookresearch/xformers commit a8746f3 (2024-12-27): BlockDiagonalCausalMask.to returns a "
       "BlockDiagonalCausalMask; first in the 0.0.29.post1 wheel (0.0.29 still returns BlockDiagonalMask)",
       "", 0, 0, "", Pass::forward,
       "a causal block-diagonal attn_bias (BlockDiagonalCausalMask and the subclasses that inherit "
       "BlockDiagonalMask.to) moved with .to(device), a sequence of 2 rows or more",
       Outcome::wrong_output, Moment::attention,
       "silently non-causal attention: the moved mask materialises as a plain block-diagonal mask",
       "facebookresearch/xformers#1185", xformers_causal_bias_moved},
  };
  return t;
}
// clang-format on

// The release of the advisory's library the batch names: flash_attn_4 rows read
// environment.flash_attn_4, else a 4.x environment.flash_attn; the others environment.flash_attn
// (or --flash-attn) when its family is the row's.
std::optional<Version> release_for(const Advisory& a, const Batch& batch, const std::optional<Version>& fa) {
  if (a.library == "torch") {  // torch's own varlen_attn: environment.torch, its local part ignored
    if (!batch.varlen || batch.varlen->api != Api::torch_varlen_attn || !batch.environment.torch) return std::nullopt;
    Version plain = *batch.environment.torch;
    plain.local.clear();
    return plain;
  }
  auto family_of = [](const std::optional<Version>& v) {
    return v && !v->release.empty() ? static_cast<int>(v->release.front()) : 0;
  };
  if (a.family == 0) {
    if (a.library == "transformers") return batch.environment.transformers;
    if (a.library == "diffusers") return batch.environment.diffusers;
    if (a.library == "xformers") return batch.environment.xformers;
    return std::nullopt;
  }
  // the flash_attn/cute copy bundled in a flash-attn 2 release is neither flash-attn 2's kernels
  // nor a flash-attn-4 wheel: no flash-attn row speaks for it
  if (batch.environment.flash_attn_cute) return std::nullopt;
  if (a.family == 4) {
    if (batch.environment.flash_attn_4) return batch.environment.flash_attn_4;
    if (family_of(fa) == 4) return fa;
    return std::nullopt;
  }
  if (family_of(fa) == a.family) return fa;
  return std::nullopt;
}

bool in_range(const Advisory& a, const Version& v) {
  if (!a.introduced.empty() && v < version_literal(a.introduced)) return false;
  if (!a.fixed_in.empty() && !(v < version_literal(a.fixed_in))) return false;
  if (a.fixed_in.empty() && !a.through.empty() && version_literal(a.through) < v) return false;
  return true;
}

}  // namespace

std::span<const Advisory> advisories() { return table(); }

std::string affected_range(const Advisory& a) {
  std::string r = a.introduced.empty() ? std::string() : ">= " + std::string(a.introduced);
  auto add = [&r](const std::string& part) { r += (r.empty() ? "" : ", ") + part; };
  if (!a.fixed_in.empty()) add("< " + std::string(a.fixed_in));
  else if (!a.through.empty()) add("<= " + std::string(a.through) + " (the last reported)");
  return r.empty() ? std::string("every release") : r;
}

const Advisory* find_advisory(std::string_view id) {
  for (const Advisory& a : table())
    if (a.id == id) return &a;
  return nullptr;
}

std::vector<AdvisoryMatch> match_advisories(const Batch& batch, const Conversion& conversion,
                                            const std::optional<Version>& flash_attn_override) {
  std::vector<AdvisoryMatch> out;
  const std::optional<Version> fa = flash_attn_override ? flash_attn_override : kernel_release(batch);
  AdvisoryCall call;
  call.batch = &batch;
  call.args = conversion.effective();
  call.arch = batch.environment.gpu_arch;
  for (const Advisory& a : table()) {
    if (a.pass == Pass::backward && batch.pass != CallPass::training) continue;
    const std::optional<Version> release = release_for(a, batch, fa);
    if (!release || !in_range(a, *release)) continue;
    std::string arch_note;
    if (a.min_cc != 0) {
      if (call.arch) {
        const int cc = call.arch->compute_capability();
        if (cc < a.min_cc || cc > a.max_cc) continue;
      } else {
        arch_note = "; the batch does not record environment.gpu_arch: the advisory applies on " + std::string(a.archs);
      }
    }
    std::optional<std::string> why = a.matches(call);
    if (!why) continue;
    AdvisoryMatch m;
    m.advisory = &a;
    m.release = release->text;
    m.why = *why + arch_note;
    // a release that names builds from before and after the fix (FA3's 3.0.0b1 and PR#1841):
    // the match is possible only, listed but kept out of the prediction (check/prediction.cpp)
    m.possible = a.possible_only;
    m.symptom.outcome = a.outcome;
    m.symptom.pass = a.pass;
    m.symptom.at = a.at;
    m.symptom.message = std::string(a.symptom) + " (advisory " + std::string(a.id) + ")";
    m.symptom.basis = "report " + std::string(a.reference);
    out.push_back(std::move(m));
  }
  return out;
}

std::string advisories_markdown() {
  std::ostringstream md;
  md << "| id | library | affected | fixed in | architecture | head dim | pass | condition | outcome | symptom | "
        "reference | fix |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const Advisory& a : table()) {
    md << "| `" << a.id << "` | " << a.library << " | " << affected_range(a) << " | "
       << (a.fixed_in.empty() ? std::string("-") : std::string(a.fixed_in)) << " | "
       << (a.archs.empty() ? std::string("any") : std::string(a.archs)) << " | "
       << (a.head_dims.empty() ? std::string("any") : std::string(a.head_dims)) << " | " << to_string(a.pass) << " | "
       << a.condition << " | " << to_string(a.outcome) << " | " << a.symptom << " | " << a.reference << " | " << a.fix
       << " |\n";
  }
  return md.str();
}

}  // namespace ad
