// hf-4.44.0: `_flash_attention_forward` gains position_ids and the packed path
// (prepare_fa2_from_position_ids, transformers PR #31629): taken when some row's last position
// id is not S - 1 and Lq != 1. Sequences start where position_ids == 0 in the flattened ids;
// max_seqlen is position_ids.max() + 1, a 0-d tensor. 3-D mRoPE ids are flattened whole
// (cu = [0, S, 2S, 3S] for one plain row). Rank-1 ids fail on `position_ids[:, -1]`.
#include "convert/rules.hpp"

namespace ad::replay {

VarlenArgs hf_4_44_0(const Call& c) {
  VarlenArgs a;
  if (c.mask) {
    a = upad_input(c, {.unpack_four = true});
  } else if (c.position_ids) {
    std::optional<ReplayFailure> failure;
    bool one_per_row = every_row_ends_at_last_position(*c.position_ids, failure);
    if (failure) {
      a = VarlenArgs{};
      a.path = VarlenPath::position_ids;
      a.failure = failure;
      a.steps.push_back("position_ids[:, -1] on rank-1 position ids");
    } else if (!one_per_row && c.query_length != 1) {
      a = packed_from_position_ids(c, Boundary::zero, MaxRule::plus_one_tensor, "");
    } else {
      a = dense_call(c);
    }
  } else {
    a = dense_call(c);
  }
  apply_kernel_flags(a, c, WindowRule::w_w, true);
  return a;
}

}  // namespace ad::replay
