// What a violation does on the real stack, as values: the Symptom one violation carries and the
// Prediction for the call as a whole (report-format.md#prediction). The ground floor: checks
// attach symptoms to violations, lib/predict/ chooses and combines them, renderers print them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vocab/outcome.hpp"

namespace ad {

// Where on the real stack a symptom happens, in the order things run: the conversion
// (transformers' mask / position-ids code), the unpad gather, the rotary kernel, the attention
// forward (host checks, then the kernel, then pad_input), the backward pass.
enum class Moment { conversion, gather, rotary, attention, backward };
std::string to_string(Moment m);

struct RowRange {
  int64_t first = 0, last = 0;  // inclusive
  bool operator==(const RowRange&) const = default;
};

// What one violation alone does on the real stack.
struct Symptom {
  Outcome outcome = Outcome::ok;
  Pass pass = Pass::forward;
  Moment at = Moment::attention;  // orders loud outcomes; not part of the JSON
  std::string message;            // what the user sees (exact where measured or cited)
  std::vector<RowRange> rows;     // output rows (wrong_gradient: rows of the gradient named)
  std::string basis;              // "golden <id>" | "report <owner/repo#N>" | "model"
};

// For the call as a whole: the chosen symptom and the invariant it belongs to ("" for ok).
struct Prediction {
  Symptom symptom;
  std::string invariant;
};

// "128-199, 300-310": at most `max_ranges` ranges, then how many there are (empty: no rows).
std::string rows_text(const std::vector<RowRange>& rows, size_t max_ranges = 8);

}  // namespace ad
