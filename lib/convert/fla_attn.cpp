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
  a.path = VarlenPath::mask;
  UnpadData u = unpad_data(*c.mask);
  a.unpad_mask_shape = c.mask->shape;
  a.indices_k = u.indices;
  a.cu_seqlens_k = u.cu_seqlens;
  a.max_seqlen_k = {u.max_seqlen, false, DType::int64};
  a.gather_rows_k = rows(c.batch, c.kv_length);
  a.total_k = u.indices.numel();
  if (auto f = gather_failure(u.indices, a.gather_rows_k, GatherKind::torch_gather, "unpad_input > <genexpr> > forward")) {
    a.failure = f;
    return a;
  }
  if (c.query_length == c.kv_length) {
    a.indices_q = a.indices_k;
    a.cu_seqlens_q = a.cu_seqlens_k;
    a.max_seqlen_q = a.max_seqlen_k;
    a.total_q = a.total_k;
  } else if (c.query_length == 1) {
    std::vector<int64_t> ar;
    for (int64_t i = 0; i <= c.batch; ++i) ar.push_back(i);
    a.cu_seqlens_q = int_tensor(ar, DType::int32);
    ar.pop_back();
    a.indices_q = int_tensor(ar, DType::int32);
    a.max_seqlen_q = {1, false, DType::int64};
    a.total_q = c.batch;
  } else {
    a.failure = raised("unpad_input", "NotImplementedError",
                       "We only support either q_len == k_len (prefilling) or q_len == 1 (decoding)");
  }
  a.call.causal = true;
  return a;
}

}  // namespace ad::replay
