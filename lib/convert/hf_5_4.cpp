// hf-5.4 (5.4 - 5.13): max_seqlen stays a 0-d int32 tensor (cu.diff().max(), and mask.sum().max()
// in _get_unpad_data); a max_length kwarg that is None is no longer passed, so
// flash_attn_varlen_func misses its required max_seqlen arguments (TypeError).
#include "convert/rules.hpp"

namespace ad::replay {

VarlenArgs hf_5_4(const Call& c) { return late_forward(c, {.max_rule = MaxRule::diff_tensor, .unpad_max_tensor = true, .none_max_dropped = true}); }

}  // namespace ad::replay
