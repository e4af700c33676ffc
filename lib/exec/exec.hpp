// Execution backends (docs/spec/execution.md): run the call stage by stage (unpad,
// rotary, attention, pad, result) under bounds checks, on the CPU or on a CUDA device.
//
// A backend receives one validated description of the call (`ExecPlan`, built on the host
// from the batch and the conversion) and runs it; it never parses input or decides policy.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "batch/batch.hpp"
#include "convert/convert.hpp"
#include "vocab/stage.hpp"
#include "vocab/violation.hpp"

namespace ad {

struct ExecOptions {
  uint64_t seed = 0;
  // Compute budget in multiply-adds for the attention and reference stages; above it a
  // sample of rows per segment is checked (first and last rows always).
  int64_t budget = int64_t{1} << 31;
  int64_t memory_budget_bytes = int64_t{4} << 30;  // device/host buffers the stages may hold
  bool raw = false;                                 // also run the unchecked failing stage
  bool full = false;                                // check every row regardless of budget
  std::optional<Version> flash_attn;                // --flash-attn: the kernel contract's release
  int threads = 0;                                  // CPU worker threads; 0 = all cores
};

// The validated description of one call. Built by make_exec_plan(); every size in it has
// been checked for overflow, and `skip_reason` says why the dynamic stages cannot run.
struct ExecPlan;

struct ExecResult {
  std::string backend;               // "cpu" | "cuda"
  std::vector<StageRecord> stages;
  std::vector<Violation> violations; // dynamic invariants (ids 33-39)
  std::vector<std::string> notes;    // e.g. how many rows were sampled
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual ExecResult run(const ExecPlan& plan, const ExecOptions& options) = 0;
};

std::unique_ptr<Backend> make_cpu_backend();

// CUDA: whether the binary carries the CUDA backend, and whether a device is usable now.
bool cuda_backend_built();
// nullptr with `why` set when no CUDA backend can run.
std::unique_ptr<Backend> make_cuda_backend(std::string* why);

}  // namespace ad
