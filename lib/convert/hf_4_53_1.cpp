// hf-4.53.1 (4.53.1 - 4.53.x): the four varlen kwargs together select the varlen route without
// position ids (transformers #39121); otherwise as hf-4.53.0.
#include "convert/rules.hpp"

namespace ad::replay {

VarlenArgs posids_route_4_47(const Call& c);
bool posids_route_taken_4_47(const Call& c);
UpadOptions upad_options_4_53();

VarlenArgs hf_4_53_1(const Call& c) {
  VarlenArgs a;
  if (c.mask) {
    a = upad_input(c, upad_options_4_53());
  } else if (all_kwargs(c) || (c.batch == 1 && posids_route_taken_4_47(c))) {
    a = posids_route_4_47(c);
  } else {
    a = dense_call(c);
  }
  apply_kernel_flags(a, c, WindowRule::w_w, true);
  return a;
}

}  // namespace ad::replay
