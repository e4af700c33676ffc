// hf-5.20 (5.19 -): packing is checked after the mask and the kwargs, and never for B != 1 or
// one-token ids; given cu_seq_lens without max lengths are then ignored in favour of the ids.
// The change ships in 5.19.0 (modeling_flash_attention_utils.py `_flash_attention_forward`;
// golden 5.19.0 / 047); the name comes from 5.20.0, the first release recorded with it.
#include "convert/rules.hpp"

namespace ad::replay {

VarlenArgs hf_5_20(const Call& c) { return late_forward(c, {.boundary = Boundary::minimum, .max_rule = MaxRule::diff_tensor, .lazy_guarded_packing = true,
                           .none_max_dropped = true}); }

}  // namespace ad::replay
