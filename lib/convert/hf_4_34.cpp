// hf-4.34 (4.34 - 4.42): the conversion is a method of each model's FlashAttention2 class
// (LlamaFlashAttention2._flash_attention_forward / _upad_input; transformers 4.36.2, 4.40.2,
// 4.42.4 modeling_llama.py). A mask goes through _upad_input, anything else to flash_attn_func;
// position ids, sliding windows, softcap and varlen kwargs never reach this code.
#include "convert/rules.hpp"

namespace ad::replay {

VarlenArgs hf_4_34(const Call& c) {
  // `q, indices_q, cu_q, max_q = unpad_input(...)`
  VarlenArgs a = mask_or_dense(c, {.unpack_four = true});
  apply_kernel_flags(a, c, WindowRule::none, false);
  if (c.position_ids) a.steps.push_back("position ids are not an input of this release's conversion");
  return a;
}

}  // namespace ad::replay
