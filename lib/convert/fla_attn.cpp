// FLA's attention layer (fla/layers/attn.py) unpads with fla/layers/utils.py `unpad_input(q,
// (k, v), attention_mask, q_len)`: keys and values gathered with the full mask's indices from
// (B * Lk) rows, queries with the same indices when q_len == Lk or one per row when q_len == 1;
// anything else raises NotImplementedError. Nothing compares the mask width with the cached key
// length, so a full-width mask over a shorter K/V cache reads past it (fla-org/flash-linear-
// attention#206, #204). Golden: tests/golden/fla-<release>.json (0.2.2, 0.3.2, 0.6.0 agree).
#include "convert/rules.hpp"

namespace ad::replay {

VarlenArgs fla_attn(const Call& c) {
  VarlenArgs a;
  UnpadData u = unpad_data(*c.mask);
  a.unpad_mask_shape = c.mask->shape;  // the mask the unpad helper received
  if (u.pad_raises) {  // prepare_cu_seqlens_from_mask pads the 0-d cumsum of a rank-1 mask's lengths
    a.path = VarlenPath::mask;
    a.failure = pad_of_0d_failure("unpad_input > get_unpad_data");
    a.steps.push_back("get_unpad_data on a rank-1 mask: its lengths are 0-d, so F.pad(cumsum(lengths), (1, 0)) raises");
    return a;
  }
  set_key_side(a, u, rows(c.batch, c.kv_length), {u.max_seqlen, false, DType::int64});
  if (auto f = gather_failure(u.indices, a.gather_rows_k, GatherKind::torch_gather, "unpad_input > <genexpr> > forward")) {
    a.failure = f;
    return a;
  }
  if (c.query_length == c.kv_length) {
    set_queries_like_keys(a);
  } else if (c.query_length == 1) {
    set_one_query_per_row(a, c.batch);
  } else {
    a.failure = raised("unpad_input", "NotImplementedError",
                       "We only support either q_len == k_len (prefilling) or q_len == 1 (decoding)");
  }
  a.call.causal = true;
  return a;
}

}  // namespace ad::replay
