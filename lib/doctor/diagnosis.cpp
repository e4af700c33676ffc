// The report's findings: ordering, status and exit code (doctor/diagnosis.hpp).
#include "doctor/diagnosis.hpp"

#include <algorithm>

namespace ad {

void Report::add(Violation v) {
  auto pos = std::upper_bound(violations.begin(), violations.end(), v,
                              [](const Violation& a, const Violation& b) { return a.order < b.order; });
  violations.insert(pos, std::move(v));
}

bool Report::has_error_severity(bool strict) const {
  return std::any_of(violations.begin(), violations.end(),
                     [&](const Violation& v) { return strict || v.severity == Severity::error; });
}

std::string Report::status() const {
  if (stage_error) return "error";
  return violations.empty() ? "ok" : "violation";
}

int exit_code_for(const Report& report, bool strict) {
  if (report.has_error_severity(strict)) return 1;
  if (report.stage_error) return 3;
  return 0;
}

}  // namespace ad
