// hf-4.47 (4.47 - 4.48): `_flash_attention_forward` accepts cu_seq_lens_q/k and max_length_q/k
// (transformers PR #33932). The varlen route still needs position ids: it is taken when
// max_length_q is given or the ids decrease (and Lq != 1); given cu_seq_lens are then used as
// they are (max_length may be None), missing ones are rebuilt from the position ids. Without
// position ids every kwarg is ignored and flash_attn_func runs on the packed row.
#include "convert/rules.hpp"

namespace ad::replay {

VarlenArgs posids_route_4_47(const Call& c) {
  if (!c.kwargs || !c.kwargs->cu_seq_lens_q || !c.kwargs->cu_seq_lens_k)
    return packed_from_position_ids(c, Boundary::zero, MaxRule::plus_one_tensor, "");
  return kwargs_path(c);
}

bool posids_route_taken_4_47(const Call& c) {
  if (!c.position_ids) return false;
  bool max_given = c.kwargs && c.kwargs->max_length_q;
  return max_given || (c.query_length != 1 && !non_decreasing(*c.position_ids));
}

VarlenArgs forward_4_47(const Call& c, bool unpack_four) {
  VarlenArgs a;
  if (c.mask) {
    a = upad_input(c, {.unpack_four = unpack_four});
  } else if (posids_route_taken_4_47(c)) {
    a = posids_route_4_47(c);
  } else {
    a = dense_call(c);
    if (c.kwargs) a.steps.push_back("varlen kwargs ignored: the route needs position ids");
  }
  apply_kernel_flags(a, c, WindowRule::w_w, true);
  return a;
}

VarlenArgs hf_4_47(const Call& c) { return forward_4_47(c, true); }

}  // namespace ad::replay
