// Internal: the static check groups, one file each, called in catalogue order by
// run_static_checks(). Each appends violations; none allocates per token beyond O(tokens).
#pragma once

#include <vector>

#include "check/check.hpp"

namespace ad::checks {

struct Ctx {
  const Batch& batch;
  const Conversion& conversion;
  const VarlenArgs* args;  // what reached the kernel (nullptr: no varlen call)
  const CheckContext& options;
  std::vector<Violation>& out;
};

void cu_seqlens(Ctx& ctx);  // cu_seqlens.dtype/device/shape/start/monotonic/total, max_seqlen.type/covers

}  // namespace ad::checks
