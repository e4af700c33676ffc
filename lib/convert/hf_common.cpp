// Pieces shared by the transformers rule sets: the explicit-kwargs route and the tests on
// position ids that decide packing.
#include "convert/rules.hpp"

namespace ad::replay {

VarlenArgs mask_or_dense(const Call& c, const UpadOptions& o) { return c.mask ? upad_input(c, o) : dense_call(c); }

bool all_kwargs(const Call& c) {
  return c.kwargs && c.kwargs->cu_seq_lens_q && c.kwargs->cu_seq_lens_k && c.kwargs->max_length_q &&
         c.kwargs->max_length_k;
}

VarlenArgs kwargs_path(const Call& c) {
  VarlenArgs a;
  a.path = VarlenPath::kwargs;
  // the caller's tensors pass through unchanged: int32 unless the batch says otherwise (a
  // collator that builds them with torch.cumsum's default int64: attn_doctor capture records it)
  a.cu_seqlens_q = int_tensor(*c.kwargs->cu_seq_lens_q, c.kwargs_dtype_q);
  a.cu_seqlens_k = int_tensor(*c.kwargs->cu_seq_lens_k, c.kwargs_dtype_k);
  auto max_of = [](const std::optional<int64_t>& m) {
    MaxSeqlen s;
    if (m) s.value = *m;
    else s.is_none = true;
    return s;
  };
  a.max_seqlen_q = max_of(c.kwargs->max_length_q);
  a.max_seqlen_k = max_of(c.kwargs->max_length_k);
  a.total_q = rows(c.batch, c.query_length);
  a.total_k = rows(c.batch, c.kv_length);
  a.steps.push_back("varlen kwargs passed through as given (cu_seq_lens_q/k, max_length_q/k)");
  if (a.max_seqlen_q.is_none || a.max_seqlen_k.is_none)
    a.steps.push_back("max_length_q/k missing: flash-attn receives max_seqlen=None");
  return a;
}

bool every_row_ends_at_last_position(const IntTensor& pos, std::optional<ReplayFailure>& failure) {
  if (pos.rank() < 2) {
    failure = raised("_flash_attention_forward", "IndexError",
                     "too many indices for tensor of dimension " + std::to_string(pos.rank()));
    return false;
  }
  // position_ids[:, -1] selects index -1 of dimension 1; compared with position_ids.size(1) - 1
  const int64_t d1 = pos.dim(1), want = d1 - 1;
  int64_t inner = 1;
  for (int i = 2; i < pos.rank(); ++i) inner *= pos.dim(i);
  for (int64_t a = 0; a < pos.dim(0); ++a)
    for (int64_t j = 0; j < inner; ++j)
      if (pos.values[static_cast<size_t>((a * d1 + d1 - 1) * inner + j)] != want) return false;
  return true;
}

bool non_decreasing(const IntTensor& pos) {
  const int64_t last = pos.dim(-1);
  for (size_t i = 0; i < pos.values.size(); ++i)
    if (static_cast<int64_t>(i) % last != 0 && pos.values[i] < pos.values[i - 1]) return false;
  return true;
}

}  // namespace ad::replay
