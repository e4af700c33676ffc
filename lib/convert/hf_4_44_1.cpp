// hf-4.44.1 (4.44.1 - 4.46): packing is detected by a decrease along the last axis
// (`not (torch.diff(position_ids, dim=-1) >= 0).all()`, transformers PR #32241 follow-up), still
// only when Lq != 1. Offsets without a 0 (a chunk at 1024) and plain rows go dense.
#include "convert/rules.hpp"

namespace ad::replay {

VarlenArgs hf_4_44_1(const Call& c) {
  VarlenArgs a;
  if (c.mask) {
    a = upad_input(c, {.unpack_four = true});
  } else if (c.position_ids && !non_decreasing(*c.position_ids) && c.query_length != 1) {
    a = packed_from_position_ids(c, Boundary::zero, MaxRule::plus_one_tensor, "");
  } else {
    a = dense_call(c);
  }
  apply_kernel_flags(a, c, WindowRule::w_w, true);
  return a;
}

}  // namespace ad::replay
