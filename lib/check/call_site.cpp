// The call site of an explicit call (call_site.hpp).
#include "check/call_site.hpp"

namespace ad {

std::optional<CallSite> call_site(const Batch& batch, const VarlenArgs& args) {
  if (!batch.varlen || args.path != VarlenPath::explicit_varlen) return std::nullopt;
  const ExplicitVarlen& e = *batch.varlen;
  const Api api = args.call.api;
  // torch's varlen_attn has its own parameter names and no causal: torch_signature_error binds it
  if (api == Api::torch_varlen_attn) return std::nullopt;
  const Signature* sig = signature_for(api, args.call.release);
  if (!sig) return std::nullopt;
  CallSite site;
  site.signature = sig;
  site.function = std::string(function_name(api));
  CallArguments& a = site.args;
  if (api == Api::flash_attn_3_kvcache) {
    // flash_attn_with_kvcache(q, k_cache, v_cache, ...): the cache's counts are cache_seqlens,
    // its queries cu_seqlens_q / max_seqlen_q; no cu_seqlens_k, max_seqlen_k or seqused_q
    a.positional = {"q", "k_cache", "v_cache"};
    a.keywords = {"cu_seqlens_q", "max_seqlen_q"};
    if (e.seqused_k) a.keywords.push_back("cache_seqlens");
    if (e.seqused_q) a.keywords.push_back("seqused_q");
  } else {
    a.positional = {"q", "k", "v"};
  }
  if (is_varlen(api) && api != Api::flash_attn_3_kvcache) {
    std::vector<std::string> four = {"cu_seqlens_q", "cu_seqlens_k"};
    // the flash_attn/cute copy a flash-attn 2 release bundles has no max_seqlen parameters: its
    // caller passes them only where the file gives them (a default is not an argument)
    const bool cute_copy = batch.environment.flash_attn_cute.has_value();
    if (!cute_copy || e.max_seqlen_q_given) four.push_back("max_seqlen_q");
    if (!cute_copy || e.max_seqlen_k_given) four.push_back("max_seqlen_k");
    std::vector<std::string>& to = e.binding && *e.binding == Bound::positional ? a.positional : a.keywords;
    to.insert(to.end(), four.begin(), four.end());
    if (e.seqused_q) a.keywords.push_back("seqused_q");
    if (e.seqused_k) a.keywords.push_back("seqused_k");
  }
  a.keywords.push_back("causal");
  if (e.window_size) a.keywords.push_back("window_size");
  if (batch.model.softcap && *batch.model.softcap > 0) a.keywords.push_back("softcap");
  if (e.pack_gqa) a.keywords.push_back("pack_gqa");
  if (e.num_splits) a.keywords.push_back("num_splits");
  if (e.page_table) a.keywords.push_back("page_table");
  if (e.qv) a.keywords.push_back("qv");
  if (e.attention_chunk) a.keywords.push_back("attention_chunk");
  site.binding = bind_arguments(*sig, site.function, a);
  return site;
}

}  // namespace ad
