// The product: what one run of the pipeline found about a batch, as typed values. Each phase
// hands the next a typed value (Batch -> Conversion -> violations -> ExecPlan -> stage records
// -> Prediction) and the Diagnosis keeps them; the renderers (lib/render, lib/html, compare,
// JUnit, GitHub, Python) read only a `const Diagnosis&`.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "check/check.hpp"
#include "convert/convert.hpp"
#include "exec/plan/plan.hpp"
#include "vocab/stage.hpp"
#include "vocab/symptom.hpp"
#include "vocab/version.hpp"
#include "vocab/violation.hpp"

namespace ad {

// The release rules a run applied (report-format.md `rules`): the transformers release the
// replay was asked for and the rule set that replayed it, and the kernel releases in force.
struct RulesApplied {
  std::optional<std::string> transformers;          // the release asked for ("hf-..." when a rule set was named)
  std::optional<std::string> rule_set;              // the rule set replayed
  std::optional<std::string> transformers_nearest;  // the known release used for an unknown one
  std::optional<Version> flash_attn;
  std::optional<Version> triton;
};

// The findings and the stage records of a run (report-format.md's top-level fields but the
// ones derived from the typed call: `rules`, `varlen`, `replayed`).
struct Report {
  std::string tool = "attn-doctor";
  std::string version;
  std::string input;              // the batch file as given on the command line
  std::string name;
  std::string backend = "none";
  std::vector<Violation> violations;                  // kept sorted: first violation first
  std::optional<Prediction> prediction;               // what the real stack does with the call
  std::optional<IntentTrust> intent;                  // what the reference compares against
  std::vector<StageRecord> stages;
  std::vector<std::string> notes;                     // rule-set mapping, sampling, ...
  std::optional<CollatorRecord> collator;             // what a `collator` block emitted
  std::vector<AdvisoryMatch> advisories;              // advisory-table rows the call matches
  bool stage_error = false;                           // a stage could not run (status "error")
  std::string error_message;

  // Adds a violation and keeps the list in catalogue order (`order`; stable for equal order).
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

// A Transformer Engine THD call's own arguments, as the report shows them (report-format.md
// "transformer_engine"): what the varlen block and the context_parallel block recorded.
struct TeThdFacts {
  std::optional<Version> release;                      // environment.transformer_engine
  std::optional<std::vector<int64_t>> cu_seqlens_q_padded, cu_seqlens_kv_padded;
  bool pad_between_seqs = false;
  bool pad_between_seqs_given = false;                 // false: inferred as TE does
  std::string attn_mask_type;                          // "" when not recorded
  std::optional<ContextParallel> context_parallel;
  int64_t rows = 0;                                    // q's rows on this rank
};

struct Diagnosis {
  std::optional<TeThdFacts> te_thd;       // a transformer_engine.dot_product_attention call
  Conversion conversion;                  // the replay and/or the batch's `varlen` block (empty when
                                          // the conversion stage failed)
  const RuleSetInfo* rule_set = nullptr;  // the rule set replayed (nullptr: none)
  std::optional<Version> transformers;    // the transformers release that chose it (none named: absent)
  std::optional<Version> flash_attn;      // the flash-attn contract applied: --flash-attn, else the batch's
  RulesApplied rules;
  std::optional<ExecPlan> plan;           // what the backend ran (absent: --backend none, or no plan)
  int64_t layers_width = 0;               // Lq: the row width of the layers' segments (report `layers`)
  Report report;
};

}  // namespace ad
