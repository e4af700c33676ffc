// hf-5.14 (5.14.x; 5.15 moves the boundaries, hf-5.16): _get_unpad_data's max is a host int again; otherwise as hf-5.4.
#include "convert/rules.hpp"

namespace ad::replay {

VarlenArgs hf_5_14(const Call& c) { return late_forward(c, {.max_rule = MaxRule::diff_tensor, .none_max_dropped = true}); }

}  // namespace ad::replay
