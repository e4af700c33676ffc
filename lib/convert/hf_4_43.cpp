// hf-4.43 (4.43.x): the conversion moves to transformers/modeling_flash_attention_utils.py
// (`_flash_attention_forward`, `_upad_input`, `_get_unpad_data`); it gains the sliding window
// (W, W) when the keys are longer than W, and softcap. Still no position-ids route: the
// function has no position_ids parameter.
#include "convert/rules.hpp"

namespace ad::replay {

VarlenArgs hf_4_43(const Call& c) {
  VarlenArgs a = mask_or_dense(c, {.unpack_four = true});
  apply_kernel_flags(a, c, WindowRule::w_w, true);
  if (c.position_ids) a.steps.push_back("position ids are not an input of this release's conversion");
  return a;
}

}  // namespace ad::replay
