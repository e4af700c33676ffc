// flash-attn's `bert_padding.unpad_input(hidden_states, attention_mask)` applied to the keys
// (B, Lk, Hk, D): the same bookkeeping as transformers' `_get_unpad_data`, rows gathered with
// torch.gather. It returns four values before 2.7 and five from 2.7.0 (the fifth: the used
// lengths, flash-attention "unused_mask" change), which broke callers unpacking four
// (transformers <= 4.48, see hf_4_34.cpp). Golden: tests/golden/flash_attn-<release>.json.
#include "convert/rules.hpp"

namespace ad::replay {

VarlenArgs fa_unpad_input(const Call& c) {
  VarlenArgs a;
  UnpadData u = unpad_data(*c.mask);
  a.unpad_mask_shape = c.mask->shape;  // the mask the unpad helper received
  set_key_side(a, u, rows(c.batch, c.kv_length), {u.max_seqlen, false, DType::int64});
  set_queries_like_keys(a);  // one call unpads one tensor: the same arguments serve q and k
  const bool five = c.flash_attn >= version_literal("2.7.0");
  if (five) a.seqused_k = u.lengths;  // used lengths: the mask's own sums (no unused_mask given)
  a.steps.push_back(std::string("flash_attn.bert_padding.unpad_input returns ") + (five ? "5" : "4") +
                    " values in flash-attn " + c.flash_attn.text);
  a.failure = gather_failure(u.indices, a.gather_rows_k, GatherKind::torch_gather, "unpad_input > forward");
  return a;
}

}  // namespace ad::replay
