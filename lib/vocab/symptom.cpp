// Names of the moments a symptom happens at, and rows as text (vocab/symptom.hpp).
#include "vocab/symptom.hpp"

namespace ad {

std::string to_string(Moment m) {
  switch (m) {
    case Moment::conversion: return "conversion";
    case Moment::gather: return "gather";
    case Moment::rotary: return "rotary";
    case Moment::attention: return "attention";
    case Moment::backward: return "backward";
  }
  return "?";
}

std::string rows_text(const std::vector<RowRange>& rows, size_t max_ranges) {
  std::string out;
  for (size_t i = 0; i < rows.size() && i < max_ranges; ++i) {
    if (i) out += ", ";
    out += std::to_string(rows[i].first);
    if (rows[i].last != rows[i].first) {
      out += '-';
      out += std::to_string(rows[i].last);
    }
  }
  if (rows.size() > max_ranges) out += ", ... (" + std::to_string(rows.size()) + " ranges)";
  return out;
}

}  // namespace ad
