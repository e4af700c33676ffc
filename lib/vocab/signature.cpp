// Signature tables (vocab/signature.hpp). FlashAttention-4: flash_attn/cute/interface.py of the
// PyPI wheels `flash-attn-4` 4.0.0b3 - 4.0.0b36 (b1, b2 and b6 are not on PyPI), one table per
// release where the parameter list changed (the releases between two tables have the earlier
// one's list); before them the flash_attn/cute copy bundled in flash-attn 2.8.3 (the same files
// in 2.8.3.post1 and 2.8.3.post2), whose tables sort first (environment.flash_attn_cute). FlashAttention-3: hopper/flash_attn_interface.py (package version 3.0.0b1, the
// only one the hopper/ build has carried). Parameter names and defaults only.
#include "vocab/signature.hpp"

#include <algorithm>

namespace ad {

namespace {

// ---- FlashAttention-3 (hopper/flash_attn_interface.py, 3.0.0b1; Dao-AILab/flash-attention)
constexpr Parameter kFa3Varlen[] = {
    {"q", ""}, {"k", ""}, {"v", ""}, {"cu_seqlens_q", ""}, {"cu_seqlens_k", ""}, {"max_seqlen_q", ""},
    {"max_seqlen_k", ""}, {"seqused_q", "None"}, {"seqused_k", "None"}, {"softmax_scale", "None"},
    {"causal", "False"}, {"qv", "None"}, {"q_descale", "None"}, {"k_descale", "None"}, {"v_descale", "None"},
    {"window_size", "(-1, -1)"}, {"attention_chunk", "0"}, {"softcap", "0.0"}, {"num_splits", "1"},
    {"pack_gqa", "None"}, {"deterministic", "False"}, {"sm_margin", "0"}, {"return_attn_probs", "False"},
};
constexpr Parameter kFa3Dense[] = {
    {"q", ""}, {"k", ""}, {"v", ""}, {"softmax_scale", "None"}, {"causal", "False"}, {"qv", "None"},
    {"q_descale", "None"}, {"k_descale", "None"}, {"v_descale", "None"}, {"window_size", "(-1, -1)"},
    {"attention_chunk", "0"}, {"softcap", "0.0"}, {"num_splits", "1"}, {"pack_gqa", "None"},
    {"deterministic", "False"}, {"sm_margin", "0"}, {"return_attn_probs", "False"},
};
// flash_attn_with_kvcache: the same list at v2.8.3 and on the hopper/ 3.0.0 release
constexpr Parameter kFa3KvCache[] = {
    {"q", ""}, {"k_cache", ""}, {"v_cache", ""}, {"k", "None"}, {"v", "None"}, {"qv", "None"},
    {"rotary_cos", "None"}, {"rotary_sin", "None"}, {"cache_seqlens", "None"}, {"cache_batch_idx", "None"},
    {"cache_leftpad", "None"}, {"page_table", "None"}, {"cu_seqlens_q", "None"}, {"cu_seqlens_k_new", "None"},
    {"max_seqlen_q", "None"}, {"rotary_seqlens", "None"}, {"q_descale", "None"}, {"k_descale", "None"},
    {"v_descale", "None"}, {"softmax_scale", "None"}, {"causal", "False"}, {"window_size", "(-1, -1)"},
    {"attention_chunk", "0"}, {"softcap", "0.0"}, {"rotary_interleaved", "True"}, {"scheduler_metadata", "None"},
    {"num_splits", "0"}, {"pack_gqa", "None"}, {"sm_margin", "0"}, {"return_softmax_lse", "False"},
};

// ---- the flash_attn/cute copy in the flash-attn 2.8.3 sdist: no max_seqlen parameters
constexpr Parameter kCuteVarlen_283[] = {
    {"q", ""}, {"k", ""}, {"v", ""}, {"cu_seqlens_q", "None"}, {"cu_seqlens_k", "None"}, {"seqused_q", "None"},
    {"seqused_k", "None"}, {"page_table", "None"}, {"softmax_scale", "None"}, {"causal", "False"},
    {"window_size", "(None, None)"}, {"learnable_sink", "None"}, {"softcap", "0.0"}, {"pack_gqa", "None"},
};
constexpr Parameter kCuteDense_283[] = {
    {"q", ""}, {"k", ""}, {"v", ""}, {"softmax_scale", "None"}, {"causal", "False"}, {"window_size", "(None, None)"},
    {"learnable_sink", "None"}, {"softcap", "0.0"}, {"pack_gqa", "None"},
};

// ---- FlashAttention-4 (flash_attn/cute/interface.py of each wheel). 4.0.0b9 inserted qv as
// the 4th parameter of flash_attn_varlen_func (and min_seqlen_k, gather_kv_indices).
constexpr Parameter kFa4Varlen_b4[] = {
    {"q", ""}, {"k", ""}, {"v", ""}, {"cu_seqlens_q", "None"}, {"cu_seqlens_k", "None"}, {"max_seqlen_q", "None"},
    {"max_seqlen_k", "None"}, {"seqused_q", "None"}, {"seqused_k", "None"}, {"page_table", "None"},
    {"softmax_scale", "None"}, {"causal", "False"}, {"window_size", "(None, None)"}, {"learnable_sink", "None"},
    {"softcap", "0.0"}, {"num_splits", "1"}, {"pack_gqa", "None"}, {"deterministic", "False"}, {"score_mod", "None"},
    {"aux_tensors", "None"}, {"return_lse", "False"},
};
constexpr Parameter kFa4Varlen_b9[] = {
    {"q", ""}, {"k", ""}, {"v", ""}, {"qv", "None"}, {"cu_seqlens_q", "None"}, {"cu_seqlens_k", "None"},
    {"max_seqlen_q", "None"}, {"max_seqlen_k", "None"}, {"min_seqlen_k", "None"}, {"seqused_q", "None"},
    {"seqused_k", "None"}, {"gather_kv_indices", "None"}, {"page_table", "None"}, {"softmax_scale", "None"},
    {"causal", "False"}, {"window_size", "(None, None)"}, {"learnable_sink", "None"}, {"softcap", "0.0"},
    {"num_splits", "1"}, {"pack_gqa", "None"}, {"deterministic", "False"}, {"score_mod", "None"},
    {"aux_tensors", "None"}, {"return_lse", "False"},
};
constexpr Parameter kFa4Varlen_b11[] = {
    {"q", ""}, {"k", ""}, {"v", ""}, {"qv", "None"}, {"cu_seqlens_q", "None"}, {"cu_seqlens_k", "None"},
    {"max_seqlen_q", "None"}, {"max_seqlen_k", "None"}, {"min_seqlen_k", "None"}, {"seqused_q", "None"},
    {"seqused_k", "None"}, {"gather_kv_indices", "None"}, {"page_table", "None"}, {"softmax_scale", "None"},
    {"causal", "False"}, {"window_size", "(None, None)"}, {"learnable_sink", "None"}, {"softcap", "0.0"},
    {"num_splits", "1"}, {"pack_gqa", "None"}, {"deterministic", "False"}, {"score_mod", "None"},
    {"score_mod_bwd", "None"}, {"aux_tensors", "None"}, {"return_lse", "False"},
};
constexpr Parameter kFa4Varlen_b13[] = {
    {"q", ""}, {"k", ""}, {"v", ""}, {"qv", "None"}, {"cu_seqlens_q", "None"}, {"cu_seqlens_k", "None"},
    {"max_seqlen_q", "None"}, {"max_seqlen_k", "None"}, {"min_seqlen_k", "None"}, {"seqused_q", "None"},
    {"seqused_k", "None"}, {"gather_kv_indices", "None"}, {"page_table", "None"}, {"softmax_scale", "None"},
    {"causal", "False"}, {"window_size", "(None, None)"}, {"learnable_sink", "None"}, {"softcap", "0.0"},
    {"num_splits", "1"}, {"pack_gqa", "None"}, {"deterministic", "False"}, {"score_mod", "None"},
    {"score_mod_bwd", "None"}, {"mask_mod", "None"}, {"block_sparse_tensors", "None"}, {"aux_tensors", "None"},
    {"return_lse", "False"},
};
constexpr Parameter kFa4Varlen_b17[] = {
    {"q", ""}, {"k", ""}, {"v", ""}, {"qv", "None"}, {"cu_seqlens_q", "None"}, {"cu_seqlens_k", "None"},
    {"max_seqlen_q", "None"}, {"max_seqlen_k", "None"}, {"min_seqlen_k", "None"}, {"seqused_q", "None"},
    {"seqused_k", "None"}, {"gather_kv_indices", "None"}, {"page_table", "None"}, {"softmax_scale", "None"},
    {"causal", "False"}, {"window_size", "(None, None)"}, {"learnable_sink", "None"}, {"softcap", "0.0"},
    {"num_splits", "1"}, {"pack_gqa", "None"}, {"deterministic", "False"}, {"score_mod", "None"},
    {"score_mod_bwd", "None"}, {"mask_mod", "None"}, {"block_sparse_tensors", "None"}, {"aux_tensors", "None"},
    {"aux_scalars", "None"}, {"return_lse", "False"},
};
constexpr Parameter kFa4Varlen_b25[] = {
    {"q", ""}, {"k", ""}, {"v", ""}, {"qv", "None"}, {"cu_seqlens_q", "None"}, {"cu_seqlens_k", "None"},
    {"max_seqlen_q", "None"}, {"max_seqlen_k", "None"}, {"min_seqlen_k", "None"}, {"seqused_q", "None"},
    {"seqused_k", "None"}, {"gather_kv_indices", "None"}, {"page_table", "None"}, {"softmax_scale", "None"},
    {"causal", "False"}, {"window_size", "(None, None)"}, {"learnable_sink", "None"}, {"softcap", "0.0"},
    {"num_splits", "1"}, {"pack_gqa", "None"}, {"deterministic", "False"}, {"score_mod", "None"},
    {"score_mod_bwd", "None"}, {"mask_mod", "None"}, {"block_sparse_tensors", "None"}, {"aux_tensors", "None"},
    {"aux_scalars", "None"}, {"return_lse", "False"}, {"scheduler_metadata", "None"}, {"seqlen_k_per_split", "None"},
    {"disable_scheduler_metadata", "False"},
};
constexpr Parameter kFa4Varlen_b32[] = {
    {"q", ""}, {"k", ""}, {"v", ""}, {"qv", "None"}, {"cu_seqlens_q", "None"}, {"cu_seqlens_k", "None"},
    {"max_seqlen_q", "None"}, {"max_seqlen_k", "None"}, {"min_seqlen_k", "None"}, {"seqused_q", "None"},
    {"seqused_k", "None"}, {"gather_kv_indices", "None"}, {"page_table", "None"}, {"softmax_scale", "None"},
    {"causal", "False"}, {"window_size", "(None, None)"}, {"learnable_sink", "None"}, {"softcap", "0.0"},
    {"num_splits", "1"}, {"pack_gqa", "None"}, {"deterministic", "False"}, {"score_mod", "None"},
    {"score_mod_bwd", "None"}, {"mask_mod", "None"}, {"block_sparse_tensors", "None"}, {"aux_tensors", "None"},
    {"aux_scalars", "None"}, {"return_lse", "False"}, {"scheduler_metadata", "None"}, {"seqlen_k_per_split", "None"},
    {"disable_scheduler_metadata", "False"}, {"gather_bwd_recompute_p", "False"}, {"gather_bwd_token_chunk", "None"},
};
constexpr Parameter kFa4Dense_b4[] = {
    {"q", ""}, {"k", ""}, {"v", ""}, {"softmax_scale", "None"}, {"causal", "False"}, {"window_size", "(None, None)"},
    {"learnable_sink", "None"}, {"softcap", "0.0"}, {"num_splits", "1"}, {"pack_gqa", "None"},
    {"deterministic", "False"}, {"mask_mod", "None"}, {"full_block_cnt", "None"}, {"full_block_idx", "None"},
    {"mask_block_cnt", "None"}, {"mask_block_idx", "None"}, {"block_size", "None"}, {"return_lse", "False"},
};
constexpr Parameter kFa4Dense_b9[] = {
    {"q", ""}, {"k", ""}, {"v", ""}, {"qv", "None"}, {"gather_kv_indices", "None"}, {"softmax_scale", "None"},
    {"causal", "False"}, {"window_size", "(None, None)"}, {"learnable_sink", "None"}, {"softcap", "0.0"},
    {"num_splits", "1"}, {"pack_gqa", "None"}, {"deterministic", "False"}, {"mask_mod", "None"},
    {"full_block_cnt", "None"}, {"full_block_idx", "None"}, {"mask_block_cnt", "None"}, {"mask_block_idx", "None"},
    {"block_size", "None"}, {"return_lse", "False"},
};
constexpr Parameter kFa4Dense_b11[] = {
    {"q", ""}, {"k", ""}, {"v", ""}, {"qv", "None"}, {"gather_kv_indices", "None"}, {"softmax_scale", "None"},
    {"causal", "False"}, {"window_size", "(None, None)"}, {"learnable_sink", "None"}, {"softcap", "0.0"},
    {"num_splits", "1"}, {"pack_gqa", "None"}, {"deterministic", "False"}, {"score_mod", "None"},
    {"score_mod_bwd", "None"}, {"mask_mod", "None"}, {"aux_tensors", "None"}, {"block_sparse_tensors", "None"},
    {"block_sparse_tensors_bwd", "None"}, {"return_lse", "False"},
};
constexpr Parameter kFa4Dense_b17[] = {
    {"q", ""}, {"k", ""}, {"v", ""}, {"qv", "None"}, {"gather_kv_indices", "None"}, {"softmax_scale", "None"},
    {"causal", "False"}, {"window_size", "(None, None)"}, {"learnable_sink", "None"}, {"softcap", "0.0"},
    {"num_splits", "1"}, {"pack_gqa", "None"}, {"deterministic", "False"}, {"score_mod", "None"},
    {"score_mod_bwd", "None"}, {"mask_mod", "None"}, {"aux_tensors", "None"}, {"aux_scalars", "None"},
    {"block_sparse_tensors", "None"}, {"block_sparse_tensors_bwd", "None"}, {"return_lse", "False"},
};
constexpr Parameter kFa4Dense_b32[] = {
    {"q", ""}, {"k", ""}, {"v", ""}, {"qv", "None"}, {"gather_kv_indices", "None"}, {"softmax_scale", "None"},
    {"causal", "False"}, {"window_size", "(None, None)"}, {"learnable_sink", "None"}, {"softcap", "0.0"},
    {"num_splits", "1"}, {"pack_gqa", "None"}, {"deterministic", "False"}, {"score_mod", "None"},
    {"score_mod_bwd", "None"}, {"mask_mod", "None"}, {"aux_tensors", "None"}, {"aux_scalars", "None"},
    {"block_sparse_tensors", "None"}, {"block_sparse_tensors_bwd", "None"}, {"return_lse", "False"},
    {"gather_bwd_recompute_p", "False"}, {"gather_bwd_token_chunk", "None"},
};

constexpr std::string_view kFa3Source = "flash_attn_3 3.0.0b1 hopper/flash_attn_interface.py";

// ---- torch.nn.attention.varlen.varlen_attn: read from torch/nn/attention/varlen.py of each
// release's PyPI wheel (2.10.0, 2.11.0, 2.12.0, 2.12.1, 2.13.0, 2.14.0, 2.14.1, 2.15.0). 2.12.0
// added enable_gqa, seqused_k, block_table and num_splits (keyword-only); 2.12.1 through 2.15.0
// keep that parameter list unchanged. Measured on 2.11.0: seqused_k= raises TypeError (oracle
// case oracle-torch-varlen-seqused-k).
constexpr Parameter kTorch210[] = {
    {"query", ""}, {"key", ""}, {"value", ""}, {"cu_seq_q", ""}, {"cu_seq_k", ""}, {"max_q", ""}, {"max_k", ""},
    {"is_causal", "False"}, {"return_aux", "None"},
};
constexpr Parameter kTorch211[] = {
    {"query", ""}, {"key", ""}, {"value", ""}, {"cu_seq_q", ""}, {"cu_seq_k", ""}, {"max_q", ""}, {"max_k", ""},
    {"return_aux", "None", true}, {"scale", "None", true}, {"window_size", "(-1, -1)", true},
};
constexpr Parameter kTorch212[] = {
    {"query", ""}, {"key", ""}, {"value", ""}, {"cu_seq_q", ""}, {"cu_seq_k", ""}, {"max_q", ""}, {"max_k", ""},
    {"return_aux", "None", true}, {"scale", "None", true}, {"window_size", "(-1, -1)", true},
    {"enable_gqa", "False", true}, {"seqused_k", "None", true}, {"block_table", "None", true},
    {"num_splits", "None", true},
};

// clang-format off
// Appended per API; an API's tables in release order.
const Signature kSignatures[] = {
    {Api::flash_attn_3_varlen, "", kFa3Source, kFa3Varlen},
    {Api::flash_attn_3_dense, "", kFa3Source, kFa3Dense},
    {Api::flash_attn_3_kvcache, "", "flash_attn_3 3.0.0b1 hopper/flash_attn_interface.py (v2.8.3; same in 3.0.0)", kFa3KvCache},
    {Api::flash_attn_4_varlen, "2.8.3", "flash-attn 2.8.3 flash_attn/cute/interface.py (the bundled copy; same in 2.8.3.post1 and 2.8.3.post2)", kCuteVarlen_283},
    {Api::flash_attn_4_varlen, "4.0.0b3", "flash-attn-4 4.0.0b3 flash_attn/cute/interface.py (same through 4.0.0b8)", kFa4Varlen_b4},
    {Api::flash_attn_4_varlen, "4.0.0b9", "flash-attn-4 4.0.0b9 flash_attn/cute/interface.py (same in 4.0.0b10)", kFa4Varlen_b9},
    {Api::flash_attn_4_varlen, "4.0.0b11", "flash-attn-4 4.0.0b11 flash_attn/cute/interface.py (same in 4.0.0b12)", kFa4Varlen_b11},
    {Api::flash_attn_4_varlen, "4.0.0b13", "flash-attn-4 4.0.0b13 flash_attn/cute/interface.py (same through 4.0.0b16)", kFa4Varlen_b13},
    {Api::flash_attn_4_varlen, "4.0.0b17", "flash-attn-4 4.0.0b17 flash_attn/cute/interface.py (same through 4.0.0b24)", kFa4Varlen_b17},
    {Api::flash_attn_4_varlen, "4.0.0b25", "flash-attn-4 4.0.0b25 flash_attn/cute/interface.py (same through 4.0.0b31)", kFa4Varlen_b25},
    {Api::flash_attn_4_varlen, "4.0.0b32", "flash-attn-4 4.0.0b32 flash_attn/cute/interface.py (same through 4.0.0b36)", kFa4Varlen_b32},
    {Api::flash_attn_4_dense, "2.8.3", "flash-attn 2.8.3 flash_attn/cute/interface.py (the bundled copy; same in 2.8.3.post1 and 2.8.3.post2)", kCuteDense_283},
    {Api::flash_attn_4_dense, "4.0.0b3", "flash-attn-4 4.0.0b3 flash_attn/cute/interface.py (same through 4.0.0b8)", kFa4Dense_b4},
    {Api::flash_attn_4_dense, "4.0.0b9", "flash-attn-4 4.0.0b9 flash_attn/cute/interface.py (same in 4.0.0b10)", kFa4Dense_b9},
    {Api::flash_attn_4_dense, "4.0.0b11", "flash-attn-4 4.0.0b11 flash_attn/cute/interface.py (same through 4.0.0b16)", kFa4Dense_b11},
    {Api::flash_attn_4_dense, "4.0.0b17", "flash-attn-4 4.0.0b17 flash_attn/cute/interface.py (same through 4.0.0b31)", kFa4Dense_b17},
    {Api::flash_attn_4_dense, "4.0.0b32", "flash-attn-4 4.0.0b32 flash_attn/cute/interface.py (same through 4.0.0b36)", kFa4Dense_b32},
    {Api::torch_varlen_attn, "2.10.0", "torch 2.10.0 torch/nn/attention/varlen.py", kTorch210},
    {Api::torch_varlen_attn, "2.11.0", "torch 2.11.0 torch/nn/attention/varlen.py", kTorch211},
    {Api::torch_varlen_attn, "2.12.0", "torch 2.12.0 torch/nn/attention/varlen.py (same through 2.15.0)", kTorch212},
};
// clang-format on

std::string py_quote(std::string_view s) { return "'" + std::string(s) + "'"; }

// "'a'", "'a' and 'b'", "'a', 'b' and 'c'" (CPython's format_missing)
std::string name_list(const std::vector<std::string_view>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? (names.size() > 2 ? ", and " : " and ") : ", ";
    out += py_quote(names[i]);
  }
  return out;
}

}  // namespace

std::span<const Signature> signatures() { return kSignatures; }

const Signature* signature_for(Api api, const std::optional<Version>& release) {
  const Signature* best = nullptr;
  for (const Signature& s : kSignatures) {
    if (s.api != api) continue;
    // the tables of the flash_attn/cute copy a flash-attn 2 release bundles (first "2.x") speak
    // only for that copy's 2.x release, not for a flash-attn-4 release older than every wheel's
    const bool bundled_copy = (api == Api::flash_attn_4_varlen || api == Api::flash_attn_4_dense) && s.first.starts_with("2.");
    if (bundled_copy && (!release || release->release.empty() || release->release.front() != 2)) continue;
    if (!release || s.first.empty() || !(*release < version_literal(s.first))) best = &s;  // tables in release order
  }
  return best;
}

Binding bind_arguments(const Signature& sig, std::string_view function, const CallArguments& args) {
  Binding b;
  const std::string fn = std::string(function) + "()";
  std::vector<const Parameter*> positional;  // parameters that take a positional argument
  for (const Parameter& p : sig.parameters)
    if (!p.keyword_only) positional.push_back(&p);
  // too many positional arguments
  if (args.positional.size() > positional.size()) {
    size_t required = 0;
    for (const Parameter* p : positional) required += p->default_value.empty() ? 1 : 0;
    const std::string takes = required == positional.size()
                                  ? std::to_string(required)
                                  : "from " + std::to_string(required) + " to " + std::to_string(positional.size());
    b.type_error = fn + " takes " + takes + " positional argument" + (positional.size() == 1 ? "" : "s") + " but " +
                   std::to_string(args.positional.size()) + (args.positional.size() == 1 ? " was" : " were") + " given";
    return b;
  }
  std::vector<std::string_view> given;
  for (size_t i = 0; i < args.positional.size(); ++i) {
    const BoundPair pair{std::string(positional[i]->name), args.positional[i], Bound::positional};
    if (pair.parameter != pair.argument) b.moved.push_back(pair);
    b.bound.push_back(pair);
    given.push_back(positional[i]->name);
  }
  for (const std::string& kw : args.keywords) {
    const auto p = std::find_if(sig.parameters.begin(), sig.parameters.end(),
                                [&](const Parameter& q) { return q.name == kw; });
    if (p == sig.parameters.end()) {
      b.type_error = fn + " got an unexpected keyword argument " + py_quote(kw);
      return b;
    }
    if (std::find(given.begin(), given.end(), p->name) != given.end()) {
      b.type_error = fn + " got multiple values for argument " + py_quote(kw);
      return b;
    }
    b.bound.push_back({kw, kw, Bound::keyword});
    given.push_back(p->name);
  }
  std::vector<std::string_view> missing;
  for (const Parameter& p : sig.parameters)
    if (p.default_value.empty() && std::find(given.begin(), given.end(), p.name) == given.end()) missing.push_back(p.name);
  if (!missing.empty())
    b.type_error = fn + " missing " + std::to_string(missing.size()) + " required positional argument" +
                   (missing.size() == 1 ? "" : "s") + ": " + name_list(missing);
  return b;
}

}  // namespace ad
