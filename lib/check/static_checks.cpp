// run_static_checks(): every static group, then the violations in catalogue order.
#include <algorithm>

#include "check/static_checks.hpp"

namespace ad {

std::vector<Violation> run_static_checks(const Batch& batch, const Conversion& conversion, const CheckContext& context) {
  std::vector<Violation> out;
  checks::Ctx ctx{batch, conversion, conversion.effective(), context, out};
  checks::cu_seqlens(ctx);
  std::stable_sort(out.begin(), out.end(), [](const Violation& a, const Violation& b) { return a.order < b.order; });
  return out;
}

}  // namespace ad
