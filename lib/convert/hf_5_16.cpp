// hf-5.16 (5.15 - 5.18): sequences start at position_ids.min(), not 0, so ids with an origin of 2
// (RoBERTa-like) split correctly; otherwise as hf-5.14. The change ships in 5.15.0
// (modeling_flash_attention_utils.py `_prepare_from_posids`: `position_ids == position_ids.min()`;
// golden 5.15.1 / 029); the name comes from 5.16.0, the first release recorded with it.
#include "convert/rules.hpp"

namespace ad::replay {

VarlenArgs hf_5_16(const Call& c) { return late_forward(c, {.boundary = Boundary::minimum, .max_rule = MaxRule::diff_tensor, .none_max_dropped = true}); }

}  // namespace ad::replay
