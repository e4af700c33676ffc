// hf-4.56 (4.56 - 5.4): the window becomes (W - 1, W - 1) (transformers #39408 -> #40163), and
// the position-ids route always flattens (no last-position variant); otherwise as hf-4.55.
// Also the rule sets after it: hf-5.5 (max_seqlen a 0-d int32 tensor: cu.diff().max() without
// .item()), hf-5.16 (sequences start at position_ids.min(), not 0) and hf-5.20 (packing is checked
// after the mask and the kwargs, and never for B != 1 or single-token ids).
#include <algorithm>

#include "convert/rules.hpp"

namespace ad::replay {

UpadOptions upad_options_4_53();
bool is_packed_sequence(const Call& c, bool guard_single_token, std::optional<ReplayFailure>& failure);

namespace {

struct Late {
  Boundary boundary = Boundary::zero;
  MaxRule max_rule = MaxRule::diff_item;
  bool lazy_guarded_packing = false;
  bool unpad_max_tensor = false;
  bool none_max_dropped = false;
};

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

}  // namespace

VarlenArgs hf_4_56(const Call& c) { return late_forward(c, {}); }
VarlenArgs hf_5_4(const Call& c) { return late_forward(c, {Boundary::zero, MaxRule::diff_tensor, false, true, true}); }
VarlenArgs hf_5_14(const Call& c) { return late_forward(c, {Boundary::zero, MaxRule::diff_tensor, false, false, true}); }
VarlenArgs hf_5_16(const Call& c) { return late_forward(c, {Boundary::minimum, MaxRule::diff_tensor, false, false, true}); }
VarlenArgs hf_5_20(const Call& c) { return late_forward(c, {Boundary::minimum, MaxRule::diff_tensor, true, false, true}); }

}  // namespace ad::replay
