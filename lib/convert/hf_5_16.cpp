// hf-5.16 (5.16 - 5.19): sequences start at position_ids.min(), not 0, so ids with an origin of 2
// (RoBERTa-like) split correctly; otherwise as hf-5.14.
#include "convert/rules.hpp"

namespace ad::replay {

VarlenArgs hf_5_16(const Call& c) { return late_forward(c, {.boundary = Boundary::minimum, .max_rule = MaxRule::diff_tensor, .none_max_dropped = true}); }

}  // namespace ad::replay
