// The shared forward of the rule sets from 4.56 on (hf-4.56 ... hf-5.20): they differ only in
// the options of `Late` (rules.hpp), each documented in its rule set's file.
#include <algorithm>

#include "convert/rules.hpp"

namespace ad::replay {

namespace {

// From 5.4 `_process_flash_attention_kwargs` passes max_seqlen_q/k only when not None; the
// kernel's signature requires both.
void drop_none_max(VarlenArgs& a) {
  std::vector<std::string> missing;
  if (a.max_seqlen_q.is_none) missing.push_back("'max_seqlen_q'");
  if (a.max_seqlen_k.is_none) missing.push_back("'max_seqlen_k'");
  if (missing.empty()) return;
  std::string names = missing.size() == 2 ? missing[0] + " and " + missing[1] : missing[0];
  a.failure = raised("_flash_attention_forward", "TypeError",
                     "flash_attn_varlen_func() missing " + std::to_string(missing.size()) + " required positional argument" +
                         (missing.size() == 2 ? "s" : "") + ": " + names,
                     "the same TypeError (host side)");
}

}  // namespace

VarlenArgs late_forward(const Call& c, const Late& v) {
  VarlenArgs a;
  std::optional<ReplayFailure> failure;
  bool packed = false;
  if (!v.lazy_guarded_packing) packed = is_packed_sequence(c, false, failure);
  const char* where = "_flash_attention_forward > _prepare_from_posids > prepare_fa_kwargs_from_position_ids";
  if (failure) {
    a.path = c.mask ? VarlenPath::mask : VarlenPath::position_ids;
    a.failure = failure;
    a.steps.push_back("_is_packed_sequence reads position_ids.shape[1] of rank-1 ids");
  } else if (c.mask) {
    UpadOptions o = upad_options_4_53();
    o.max_as_tensor = v.unpad_max_tensor;
    a = upad_input(c, o);
  } else if (v.lazy_guarded_packing && all_kwargs(c)) {
    a = kwargs_path(c);
  } else if (v.lazy_guarded_packing && is_packed_sequence(c, true, failure)) {
    a = packed_from_position_ids(c, v.boundary, v.max_rule, where);  // given cu_seq_lens are ignored here
  } else if (!v.lazy_guarded_packing && (all_kwargs(c) || packed)) {
    bool cu_given = c.kwargs && c.kwargs->cu_seq_lens_q && c.kwargs->cu_seq_lens_k;
    a = cu_given ? kwargs_path(c) : packed_from_position_ids(c, v.boundary, v.max_rule, where);
    if (cu_given && v.none_max_dropped) drop_none_max(a);
  } else if (failure) {
    a.path = VarlenPath::position_ids;
    a.failure = failure;
  } else {
    a = dense_call(c);
  }
  apply_kernel_flags(a, c, WindowRule::w1_w1, true);
  return a;
}


}  // namespace ad::replay
