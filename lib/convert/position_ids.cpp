// The packed path from position ids (transformers >= 4.44: prepare_fa2_from_position_ids,
// _prepare_flash_attention_from_position_ids, _prepare_from_posids,
// prepare_fa_kwargs_from_position_ids): where sequences start and what max_seqlen becomes.
// Linear in position ids.
#include <algorithm>
#include <limits>

#include "convert/replay.hpp"

namespace ad::replay {

VarlenArgs packed_from_position_ids(const Call& c, Boundary boundary, MaxRule max_rule, const std::string& where) {
  const IntTensor& pos = *c.position_ids;
  VarlenArgs a;
  a.path = VarlenPath::position_ids;
  int64_t boundary_value = 0;
  if (boundary == Boundary::minimum && !pos.values.empty())
    boundary_value = *std::min_element(pos.values.begin(), pos.values.end());
  std::vector<int64_t> cu;
  int64_t max_pos = std::numeric_limits<int64_t>::min();
  for (size_t i = 0; i < pos.values.size(); ++i) {
    if (pos.values[i] == boundary_value) cu.push_back(static_cast<int64_t>(i));
    max_pos = std::max(max_pos, pos.values[i]);
  }
  cu.push_back(pos.numel());
  a.cu_seqlens_q = int_tensor(cu, DType::int32);
  a.cu_seqlens_k = a.cu_seqlens_q;
  a.total_q = rows(c.batch, c.query_length);
  a.total_k = rows(c.batch, c.kv_length);
  a.steps.push_back(std::string("packed path: a sequence starts wherever position_ids == ") +
                    (boundary == Boundary::zero ? "0" : "position_ids.min() (" + std::to_string(boundary_value) + ")") +
                    " in the flattened ids (" + std::to_string(pos.numel()) + " entries)");
  if (max_rule == MaxRule::plus_one_tensor) {
    a.max_seqlen_q = {max_pos + 1, true, DType::int64};
    a.steps.push_back("max_seqlen = position_ids.max() + 1, a 0-d int64 tensor");
  } else {
    if (cu.size() < 2) {
      a.failure = raised(where, "RuntimeError",
                         "max(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
                         "reduction dim with the 'dim' argument.");
      a.steps.push_back("no position equals the boundary value: cu_seqlens.diff() is empty and max() raises");
    }
    int64_t longest = 0;
    for (size_t i = 1; i < cu.size(); ++i) longest = std::max(longest, cu[i] - cu[i - 1]);
    a.max_seqlen_q = {longest, max_rule == MaxRule::diff_tensor, DType::int32};
    a.steps.push_back(max_rule == MaxRule::diff_item ? "max_seqlen = cu_seqlens.diff().max().item(), a host int"
                                                     : "max_seqlen = cu_seqlens.diff().max(), a 0-d int32 tensor");
  }
  a.max_seqlen_k = a.max_seqlen_q;
  return a;
}

}  // namespace ad::replay
