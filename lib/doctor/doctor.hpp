// The pipeline in one call: convert -> static checks -> execute -> report.
// `attn-doctor check`, `compare`, `repro`, the HTML pages and the Python extension are thin
// layers over `diagnose`: they read the Diagnosis it returns and convert nothing themselves.
#pragma once

#include <optional>
#include <string>

#include "batch/batch.hpp"
#include "convert/convert.hpp"
#include "exec/exec.hpp"
#include "doctor/diagnosis.hpp"
#include "exec/plan/plan.hpp"

namespace ad {

enum class BackendChoice { automatic, cpu, cuda, none };
std::optional<BackendChoice> parse_backend_choice(std::string_view s);

struct CheckOptions {
  std::optional<Version> transformers;  // --transformers
  std::optional<Version> flash_attn;    // --flash-attn
  BackendChoice backend = BackendChoice::automatic;
  ExecOptions exec;
  bool strict = false;
  // The batch's index tensors (mask, position ids, cu_seqlens, a 0-d max_seqlen) hold no real
  // values: the Python guard without device reads describes a call by q/k/v's sizes alone, as
  // one dense call. Only the invariants that need no index values are kept (the input group,
  // less input.int32_range, which counts what the unpadding lets through), the dynamic stages
  // do not run (they would run on the stand-in values), and a note says so.
  bool index_values_unread = false;
  // Replay exactly this rule set instead of the release the batch or --transformers names, and
  // leave the batch's `varlen` block aside (`compare`: one diagnosis per rule set).
  const RuleSetInfo* rule_set = nullptr;
};

// A capability the binary lacks or a device that is not there (exit 3).
class CapabilityError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

extern const char* const kToolVersion;  // the project version, "0.1.0"

Diagnosis diagnose(const Batch& batch, const CheckOptions& options, const std::string& input_label);

}  // namespace ad
