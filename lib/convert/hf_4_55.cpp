// hf-4.55 (4.55.1 - 4.55.x; 4.55.0 still has the 4.54 route): packing is decided by `_is_packed_sequence` (B == 1 and the ids are not one
// arange starting at their minimum), evaluated before anything else, so rank-1 ids fail on
// `position_ids.shape[1]` even next to a mask. On the packed route with Lq != Lk the cu_seqlens
// come from each row's last position (`prepare_fa_kwargs_from_position_ids(...,
// is_packed_sequence=False)`); with Lq == Lk from the zeros of the flattened ids, max as a host int.
#include <algorithm>

#include "convert/rules.hpp"

namespace ad::replay {

// `_is_packed_sequence` of 4.55 - 5.19 (and, with `guard_single_token`, 5.20 -).
bool is_packed_sequence(const Call& c, bool guard_single_token, std::optional<ReplayFailure>& failure) {
  if (!c.position_ids) return false;
  const IntTensor& pos = *c.position_ids;
  if (guard_single_token && (c.batch != 1 || pos.dim(-1) == 1)) return false;
  if (pos.rank() < 2) {
    failure = raised("_flash_attention_forward > _is_packed_sequence", "IndexError", "tuple index out of range");
    return false;
  }
  if (c.batch != 1) return false;
  // arange(position_ids.shape[1]) + min, broadcast against the ids along the last axis
  const int64_t n = pos.dim(1), last = pos.dim(-1);
  int64_t lo = pos.values.empty() ? 0 : *std::min_element(pos.values.begin(), pos.values.end());
  for (size_t i = 0; i < pos.values.size(); ++i) {
    int64_t expected = lo + (n == 1 ? 0 : static_cast<int64_t>(i) % last);
    if (pos.values[i] != expected) return true;
  }
  return false;
}

// Lq != Lk on the position-ids route of 4.55: one query run per row of length last + 1 (or 1 for
// single-token ids), keys of length last + 1.
VarlenArgs from_last_positions(const Call& c) {
  const IntTensor& pos = *c.position_ids;
  VarlenArgs a;
  a.path = VarlenPath::position_ids;
  const int64_t rows_n = pos.dim(0), last = pos.dim(-1);
  std::vector<int64_t> cu_q{0}, cu_k{0};
  int64_t max_q = 0, max_last = 0;
  for (int64_t r = 0; r < rows_n; ++r) {
    int64_t p = pos.values[static_cast<size_t>(r * last + last - 1)];
    int64_t q_len = last == 1 ? 1 : p + 1;
    cu_q.push_back(static_cast<int32_t>(cu_q.back() + q_len));
    cu_k.push_back(static_cast<int32_t>(cu_k.back() + p + 1));
    max_q = std::max(max_q, q_len);
    max_last = r == 0 ? p : std::max(max_last, p);
  }
  a.cu_seqlens_q = int_tensor(cu_q, DType::int32);
  a.cu_seqlens_k = int_tensor(cu_k, DType::int32);
  a.max_seqlen_q = {max_q, false, DType::int64};
  a.max_seqlen_k = {max_last + 1, false, DType::int64};
  a.total_q = rows(c.batch, c.query_length);
  a.total_k = rows(c.batch, c.kv_length);
  a.steps.push_back("Lq != Lk: cu_seqlens from each row's last position id");
  return a;
}

VarlenArgs hf_4_55(const Call& c) {
  VarlenArgs a;
  std::optional<ReplayFailure> failure;
  bool packed = is_packed_sequence(c, false, failure);
  if (failure) {
    a.path = c.mask ? VarlenPath::mask : VarlenPath::position_ids;
    a.failure = failure;
    a.steps.push_back("_is_packed_sequence reads position_ids.shape[1] of rank-1 ids");
  } else if (c.mask) {
    a = upad_input(c, upad_options_4_53());
  } else if (all_kwargs(c) || packed) {
    if (!c.kwargs || !c.kwargs->cu_seq_lens_q || !c.kwargs->cu_seq_lens_k) {
      a = c.query_length == c.kv_length
              ? packed_from_position_ids(c, Boundary::zero, MaxRule::diff_item,
                                         "_flash_attention_forward > _prepare_from_posids > "
                                         "prepare_fa_kwargs_from_position_ids")
              : from_last_positions(c);
    } else {
      a = kwargs_path(c);
    }
  } else {
    a = dense_call(c);
  }
  apply_kernel_flags(a, c, WindowRule::w_w, true);
  return a;
}

}  // namespace ad::replay
