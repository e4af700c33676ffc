// The report (docs/spec/report-format.md) as JSON and as text: views of the Diagnosis the
// pipeline returns, reading its typed values and nothing else. The HTML page, compare, the
// JUnit and GitHub forms and the Python extension print through these too.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "doctor/diagnosis.hpp"

namespace ad {

struct RenderOptions {
  bool color = false;    // ANSI colours (terminal, NO_COLOR unset)
  bool full = false;     // do not summarise long arrays
  bool verbose = false;  // explanations and evidence for every violation
};

// The report (report-format.md) as JSON and as text: views of one diagnosis.
nlohmann::json to_json(const Diagnosis& diagnosis, const RenderOptions& options);
std::string render_text(const Diagnosis& diagnosis, const RenderOptions& options);
// The JSON of a symptom (violation `symptom`) and of a prediction (report `prediction`).
nlohmann::json symptom_json(const Symptom& s);
nlohmann::json prediction_json(const Prediction& p);
// The JSON of a violation's `location` (only the fields set).
nlohmann::json location_json(const Location& l);
// "wrong_output (forward): no error; ...  [model]".
std::string prediction_line(const Prediction& p);
// The report's `varlen` block for one set of kernel arguments (long arrays summarised unless
// `full`), its `rules`, and one stage record with its facts under their report keys.
nlohmann::json varlen_json(const VarlenArgs& args, bool full);
nlohmann::json rules_json(const RulesApplied& rules);
nlohmann::json stage_json(const StageRecord& stage);

// Arrays longer than this are summarised in JSON output unless --full.
inline constexpr size_t kSummariseAbove = 32;
// {"count": N, "head": [...16], "tail": [...16], "summarised": true} for long arrays.
nlohmann::json summarise_array(const std::vector<int64_t>& values, bool full);

}  // namespace ad
