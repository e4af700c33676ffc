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
  if (u.pad_raises) {  // the same F.pad of the 0-d cumsum, inside unpad_input itself
    a.path = VarlenPath::mask;
    a.failure = pad_of_0d_failure("unpad_input");
    a.steps.push_back("unpad_input on a rank-1 mask: its lengths are 0-d, so F.pad(cumsum(lengths), (1, 0)) raises");
    return a;
  }
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
