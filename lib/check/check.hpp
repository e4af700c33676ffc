// The invariant catalogue (docs/spec/invariants.md) and the static checks.
//
// The catalogue is one table: id, stage, statement, explanation, fix, references. Its order
// decides which violation is reported first. `explain`, the report and docs/ read it.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "batch/batch.hpp"
#include "check/advisories.hpp"
#include "convert/convert.hpp"
#include "predict/predict.hpp"
#include "vocab/violation.hpp"

namespace ad {

enum class InvariantGroup { input, conversion, rotary, dynamic, launch };
std::string to_string(InvariantGroup g);

namespace checks {
struct Ctx;
}
// The host-side check of one static invariant: appends its violations through the context
// (checks::Ctx::report), never another invariant's. nullptr for dynamic invariants, which the
// execution backends observe.
using CheckFn = void (*)(checks::Ctx&);

struct Invariant {
  int number;                      // position in the catalogue (1-based); decides "first"
  std::string_view id;             // "mask.kv_length"
  InvariantGroup group;
  std::string_view stage;          // stage named in violations: "input", "conversion", ...
  std::string_view severity_rule;  // when a violation is an error and when a warning
  std::string_view statement;      // holds when ...
  std::string_view when_broken;    // what the real stack does
  std::string_view explanation;    // longer: why, and what the user saw
  std::string_view fix;            // what to change
  std::vector<std::string_view> references;
  std::string_view upstream_message;  // the message users most likely saw, if any
  CheckFn check = nullptr;         // static invariants: the host check; dynamic: nullptr
  // The APIs whose calls the invariant speaks for (vocab/api.hpp); the static runner skips it
  // for a call of any other API. flash-attn's host checks and kernel contract: the flash-attn
  // families the release table describes; the conversions' and rotary's: every API.
  ApiSet apis = kFlashAttnApis;
};

std::span<const Invariant> catalogue();
const Invariant* find_invariant(std::string_view id);
// Closest known id by edit distance (for "unknown id" messages).
std::string closest_invariant_id(std::string_view id);

// A violation of catalogue entry `id`, with stage, order and the catalogue's explanation,
// fix and references filled in. Throws std::logic_error for an id not in the catalogue.
Violation make_violation(std::string_view id, Severity severity, std::string message,
                         nlohmann::json evidence = nlohmann::json::object());

struct CheckContext {
  bool strict = false;
  std::optional<Version> flash_attn;    // --flash-attn: overrides environment.flash_attn
  std::optional<Version> transformers;  // --transformers: overrides environment.transformers
};

// The releases and pass the symptom table reads (lib/predict): the batch's environment, the
// --flash-attn and --transformers overrides, the flash-attn family of the rule set that applies, the batch's pass.
SymptomContext symptom_context(const Batch& batch, const std::optional<Version>& flash_attn_override = std::nullopt,
                               const std::optional<Version>& transformers_override = std::nullopt);

// Gives every violation without a symptom the symptom table's default for its id (its
// "warning" case for a warning; a dynamic observation's case from its evidence; a raise takes
// the violation's own upstream message), then combines them into the call's prediction.
// Backward symptoms count for a training batch only. `trusted_reference` false: a
// result.reference finding compared against an intent derived from the broken input, which
// cannot vouch for the outcome, and is left out.
// `advisories`: the advisory-table rows the call matches (advisories.hpp); their symptoms
// combine with the violations' (after them in catalogue order).
Prediction predict_call(std::vector<Violation>& violations, const Batch& batch,
                        const std::optional<Version>& flash_attn_override = std::nullopt, bool trusted_reference = true,
                        const std::vector<AdvisoryMatch>* advisories = nullptr,
                        const std::optional<Version>& transformers_override = std::nullopt);

// What the result stage's reference is built from (report-format.md `intent`): the given or
// derived intended sequences, and whether they can vouch for the output. An intent derived from
// the very input the conversion broke reproduces the breakage and is not trusted.
struct IntentTrust {
  std::string source = "none";  // given | mask | position_ids | cu_seqlens_q | none
  bool trusted = false;
  std::string why;
};

// Where the reference's intended sequences come from and whether they can vouch for the output:
// an intent derived from the input the conversion broke (the mask a partial-query slice read
// with the wrong padding side, the segment ids of a mask, position ids whose boundaries the
// release misread, the cu_seqlens_q under test) reproduces the breakage, so it is not trusted.
// `found`: the static violations.
IntentTrust assess_intent(const Batch& batch, const std::vector<Violation>& found);

// The catalogue as Markdown (docs/spec/invariants.md embeds it between generated markers) and the
// flash-attn release table as Markdown (docs/spec/flash-attn-features.md).
std::string catalogue_markdown();
std::string flash_attn_features_markdown();

// Every static invariant (groups input, conversion, rotary, launch) evaluated against the
// batch and the conversion. Linear in tokens; allocates nothing proportional to B*S*H*D.
std::vector<Violation> run_static_checks(const Batch& batch, const Conversion& conversion,
                                         const CheckContext& context = {});

}  // namespace ad
