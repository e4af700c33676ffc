// The report model (docs/spec/report-format.md) and its two renderings, text and JSON.
// Stages fill a Report; nothing in a stage knows how it will be printed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "predict/predict.hpp"

namespace ad {

enum class Severity { error, warning };
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

// The stages of a run, in report order (report-format.md#stages; the names are fixed): the
// pipeline's own steps, then the dynamic stages a backend runs (kDynamicStages, exec/plan.hpp).
// `plan` and `execute` appear only as the stage that failed (status error).
enum class Stage : uint8_t { conversion, static_checks, plan, execute, unpad, rotary, attention, pad, result, attention_backward };
const char* to_string(Stage s);                      // "conversion" "static" "plan" "execute" "unpad" ... "attention_backward"
std::optional<Stage> stage_named(std::string_view name);

enum class StageStatus : uint8_t {
  ok,
  violation,   // the stage found one, or the release raises there
  skipped,     // did not run (not applicable, not reached, no backend)
  error,       // could not run (the report's status is then "error")
  unverified,  // result only: compared against an untrusted reference
};
const char* to_string(StageStatus s);                // "ok" "violation" "skipped" "error" "unverified"

// Where a dynamic stage's kernel ran, when the backend says (the CUDA backend runs some calls
// on the CPU twin): the stage record's `engine`.
enum class StageEngine : uint8_t { unspecified, cuda, cpu_twin };
const char* to_string(StageEngine e);                // "" "cuda" "cpu-twin"

struct StageRecord {
  Stage name = Stage::conversion;
  StageStatus status = StageStatus::ok;
  double ms = 0.0;
  std::string detail;             // why skipped / what failed / what was sampled
  nlohmann::json data = nlohmann::json::object();  // stage-specific numbers
  StageEngine engine = StageEngine::unspecified;
};

// What the result stage's reference is built from (report-format.md `intent`): the given or
// derived intended sequences, and whether they can vouch for the output. An intent derived from
// the very input the conversion broke reproduces the breakage and is not trusted.
struct IntentTrust {
  std::string source = "none";  // given | mask | position_ids | cu_seqlens_q | none
  bool trusted = false;
  std::string why;
};

struct Report {
  std::string tool = "attn-doctor";
  std::string version;
  std::string input;              // the batch file as given on the command line
  std::string name;
  nlohmann::json rules = nlohmann::json::object();    // {"transformers": ..., "flash_attn": ...}
  std::string backend = "none";
  std::vector<Violation> violations;                  // kept sorted: first violation first
  std::optional<Prediction> prediction;               // what the real stack does with the call
  std::optional<IntentTrust> intent;                  // what the reference compares against
  nlohmann::json varlen;                              // null when nothing reached a kernel
  nlohmann::json replayed;                            // the replay, when `varlen` is explicit
  std::vector<StageRecord> stages;
  std::vector<std::string> notes;                     // rule-set mapping, sampling, ...
  bool stage_error = false;                           // a stage could not run (status "error")
  std::string error_message;

  // Adds a violation, filling explanation/fix/references/order from the catalogue when the
  // id is known, and keeps the list in catalogue order (stable for equal order).
  void add(Violation v);
  const Violation* first_violation() const {
    return violations.empty() ? nullptr : &violations.front();
  }
  bool has_error_severity(bool strict) const;
  std::string status() const;  // "ok" | "violation" | "error"
};

// Exit code per report-format.md: 0 all error-severity invariants hold, 1 violated,
// 3 a stage could not run.
int exit_code_for(const Report& report, bool strict);

struct RenderOptions {
  bool color = false;    // ANSI colours (terminal, NO_COLOR unset)
  bool full = false;     // do not summarise long arrays
  bool verbose = false;  // explanations and evidence for every violation
};

nlohmann::json to_json(const Report& report, const RenderOptions& options);
// The JSON of a symptom (violation `symptom`) and of a prediction (report `prediction`).
nlohmann::json symptom_json(const Symptom& s);
nlohmann::json prediction_json(const Prediction& p);
// The JSON of a violation's `location` (only the fields set).
nlohmann::json location_json(const Location& l);
// "wrong_output (forward): no error; ...  [model]" and "rows 128-199, 300-310" (empty: no rows).
std::string prediction_line(const Prediction& p);
std::string rows_text(const std::vector<RowRange>& rows, size_t max_ranges = 8);
std::string render_text(const Report& report, const RenderOptions& options);

// Arrays longer than this are summarised in JSON output unless --full.
inline constexpr size_t kSummariseAbove = 32;
// {"count": N, "head": [...16], "tail": [...16], "summarised": true} for long arrays.
nlohmann::json summarise_array(const std::vector<int64_t>& values, bool full);

// Whether stdout should get colour: NO_COLOR unset, and FORCE_COLOR set (not "0") or a terminal.
bool stdout_wants_color();

// The width text output is fitted to: COLUMNS when it is set to a number, else the terminal's
// width when stdout is one, else `fallback`; never below 40.
int output_width(int fallback = 100);

// `text` broken at spaces into lines of at most `width` characters (a longer word stands
// alone); each line but the first is prefixed with `indent` (not counted in `width`); no
// trailing newline.
std::string wrap_text(const std::string& text, size_t width, const std::string& indent = "");

}  // namespace ad
