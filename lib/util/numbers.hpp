// A double as the reports print it: text with four significant digits ("0.01234", "nan",
// "inf"), and JSON that keeps a finite value a number and spells a non-finite one as that text.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

namespace ad {

inline std::string number_text(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

inline nlohmann::json number_json(double v) {
  if (std::isfinite(v)) return v;
  return number_text(v);
}

}  // namespace ad
