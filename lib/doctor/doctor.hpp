// The pipeline in one call: convert -> static checks -> execute -> report.
// `attn-doctor check` and `repro` are thin layers over `diagnose`.
#pragma once

#include <optional>
#include <string>

#include "batch/batch.hpp"
#include "convert/convert.hpp"
#include "exec/exec.hpp"
#include "report/report.hpp"

namespace ad {

enum class BackendChoice { automatic, cpu, cuda, none };
std::optional<BackendChoice> parse_backend_choice(std::string_view s);

struct CheckOptions {
  std::optional<Version> transformers;  // --transformers
  std::optional<Version> flash_attn;    // --flash-attn
  BackendChoice backend = BackendChoice::automatic;
  ExecOptions exec;
  bool strict = false;
};

// A capability the binary lacks or a device that is not there (exit 3).
class CapabilityError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

extern const char* const kToolVersion;  // the project version, "0.1.0"

// The report's `varlen` block (report-format.md) for one set of kernel arguments; long arrays
// summarised unless `full`.
nlohmann::json varlen_json(const VarlenArgs& args, bool full);

Report diagnose(const Batch& batch, const CheckOptions& options, const std::string& input_label);

}  // namespace ad
