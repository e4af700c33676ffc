// A broken invariant, as a value: its id, stage, severity, message, evidence, where in the call
// it happens (Location) and what it does on the real stack (Symptom). The ground floor: the
// checks and the backends produce violations, the diagnosis orders them, renderers print them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vocab/symptom.hpp"

namespace ad {

// note: the invariant's statement is broken as written, but what reaches the kernel is what was
// meant (no intended sequence merged or split, no limit broken). A check reports it like a
// violation; the report carries it as a note, never as a violation (invariants.md#severity).
enum class Severity { error, warning, note };
std::string to_string(Severity s);

// The side of the call a location is on: the queries (q, out, cu_seqlens_q, indices_q) or the
// keys and values (k, v, cu_seqlens_k, indices_k).
enum class Side : uint8_t { q, k };
const char* to_string(Side s);  // "q" "k"

// Half-open [begin, end).
struct IndexRange {
  int64_t begin = 0, end = 0;
  bool operator==(const IndexRange&) const = default;
};

// Where in the call a violation happens, set by the check that found it (report-format.md
// `location`): the fields that apply are set, the others absent. The HTML page outlines it.
struct Location {
  std::optional<int64_t> row;              // a row of the padded batch (B rows; past them: phantom)
  std::optional<IndexRange> tokens;        // token columns of `row`; of every row when `row` is absent
  std::optional<int64_t> segment;          // a segment of cu_seqlens_<side>
  std::optional<IndexRange> packed_rows;   // rows of the packed <side> tensors (q/out or k/v)
  std::optional<IndexRange> index;         // positions in indices_<side> (the unpad gather, the pad scatter)
  std::optional<Side> side;

  bool empty() const { return !row && !tokens && !segment && !packed_rows && !index; }
  bool operator==(const Location&) const = default;

  // Tokens [begin, end) of `row` (at least one).
  static Location row_tokens(int64_t row, int64_t begin, int64_t end);
  static Location whole_row(int64_t row);
  // Columns [begin, end) of every row.
  static Location columns(int64_t begin, int64_t end);
  static Location segment_of(Side side, int64_t segment);
  // Packed rows between `a` and `b` (either order; at least one row).
  static Location packed(Side side, int64_t a, int64_t b);
  // Positions between `a` and `b` of indices_<side> (either order; at least one).
  static Location indices(Side side, int64_t a, int64_t b);
};

struct Violation {
  std::string id;                 // catalogue id, e.g. "mask.kv_length"
  std::string stage;              // "input" "conversion" "rotary" "launch" "unpad" "attention" ...
  Severity severity = Severity::error;
  std::string message;            // one line, with the concrete values
  nlohmann::json evidence = nlohmann::json::object();
  // Filled from the catalogue when the violation is added to a report:
  std::string explanation;
  std::string fix;
  std::vector<std::string> references;
  int order = 0;                  // catalogue position; decides "first"
  // What this violation alone does on the real stack (lib/predict): set by the check that
  // knows the amounts, else the symptom table's default for the id; absent when none is modelled.
  std::optional<Symptom> symptom;
  Location location;              // where, when the check can say
};

}  // namespace ad
