// hf-4.49 (4.49 - 4.52): as hf-4.47, but `_upad_input` unpacks flash-attn's unpad_input with
// `*_`, so flash-attn >= 2.7 (five return values) no longer breaks a partial query.
#include "convert/rules.hpp"

namespace ad::replay {

VarlenArgs posids_route_4_47(const Call& c);
bool posids_route_taken_4_47(const Call& c);

VarlenArgs hf_4_49(const Call& c) {
  VarlenArgs a;
  if (c.mask) {
    a = upad_input(c, UpadOptions{});
  } else if (posids_route_taken_4_47(c)) {
    a = posids_route_4_47(c);
  } else {
    a = dense_call(c);
    if (c.kwargs) a.steps.push_back("varlen kwargs ignored: the route needs position ids");
  }
  apply_kernel_flags(a, c, WindowRule::w_w, true);
  return a;
}

}  // namespace ad::replay
