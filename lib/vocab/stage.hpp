// The stages of a run and what each recorded (report-format.md#stages): the stage names,
// statuses and engines, and the typed facts a stage keeps (the report's per-stage keys). The
// ground floor: the pipeline and the backends fill stage records, renderers print them, and a
// renamed fact is a compile error in every one of them.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ad {

// The stages of a run, in report order (report-format.md#stages; the names are fixed): the
// pipeline's own steps, then the dynamic stages a backend runs (kDynamicStages, exec/plan/plan.hpp).
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

// The host check that raised before any launch (the stage's `raises`).
struct RaisedFact {
  std::string where, type, message;
};

// One gradient's comparison with its fp64 reference (the backward's `reference.dq` ...).
struct GradientCheckFact {
  int64_t rows_checked = 0, rows_failed = 0;
  double worst_error = 0.0;  // non-finite: reported as text ("nan", "inf")
};

// An unchecked kernel run in a child process (`--raw`): what it did.
struct RawRunFact {
  std::string symptom;
  int exit_code = 0;
  int signal = 0;
};

// What the engine that ran a dynamic stage reports about its own run.
struct EngineFacts {
  std::optional<std::string> kernel;      // the CUDA kernel launched
  std::optional<double> ms_kernel;        // its time (all launches of the stage)
  std::optional<std::string> why_cpu;     // the CUDA backend ran this call on the CPU twin: why
  std::optional<int64_t> tiles, empty_tiles, row_heads_without_keys;  // the CPU twin's forward
  std::optional<double> macs;             // multiply-adds of the CPU twin's forward
  std::optional<double> backward_macs;    // ... of its backward
  std::optional<bool> sampled;            // the engine computed a sample of the rows (budget)

  // A later observation of the stage wins (the unpad stage gathers k, v, then q).
  void merge(const EngineFacts& later);
};

// The facts a stage records, each under its report key (report-format.md#stages); absent ones
// are not printed. Which stage sets which is said per group.
struct StageFacts {
  std::optional<int64_t> checked;                 // static: invariants in the catalogue
  std::optional<RaisedFact> raises;               // a dynamic stage: the host check that raised
  EngineFacts engine;                             // a dynamic stage: what its engine reported

  // unpad: the rows each gather writes, and the indices outside the source rows
  std::optional<int64_t> rows_q, rows_k, rows_v, out_of_bounds;

  // rotary: the contract applied and its table; (row, head) pairs rotated, past the table,
  // rows no program visited
  std::optional<std::string> contract;            // "fla" | "flash_attn" | "hf"
  std::optional<int64_t> dim, table_rows;
  std::optional<bool> varlen;
  std::optional<int64_t> rotated, past_table, rows_not_visited;

  // attention and attention_backward: the launch
  std::optional<std::string> function;            // "mha_varlen_fwd" / "mha_fwd" / "mha_varlen_bwd"
  std::optional<std::array<int64_t, 3>> grid;     // forward grid (m blocks, batch, heads)
  std::optional<std::array<int64_t, 3>> grid_dot_do_o, grid_dq_dk_dv;
  std::optional<int64_t> block_m, block_n, head_dim_rounded;
  std::optional<bool> causal, local, deterministic;
  std::optional<std::array<int64_t, 2>> window_size;
  std::optional<double> softcap;
  std::optional<bool> seqlenq_ngroups_swapped;
  std::optional<std::string> dq_accum_offset;     // the release's dq_accum offset arithmetic
  std::optional<std::string> flash_attn;          // the flash-attn release whose backward ran

  // attention and pad: rows written and computed; CTAs wholly past the rows
  std::optional<int64_t> rows_written, rows_computed, ctas_past_rows;

  // result: the comparison with fp64 attention over the intended sequences
  bool reference_skipped = false;                 // `reference: false`
  std::optional<int64_t> rows_total, rows_checked, rows_failed;
  std::optional<double> tolerance;                // result and attention_backward
  std::optional<double> worst_error;              // non-finite: reported as text
  std::optional<double> reference_macs;           // `macs` of the result stage
  std::optional<bool> reference_sampled;          // `sampled` of the result stage

  // attention_backward
  std::optional<bool> offsets_only;               // the batch was too large: offsets checked, no values
  std::optional<double> ms_kernels;
  std::optional<uint64_t> refused_accesses;
  std::optional<int64_t> dq_rows_never_written, dkv_rows_never_written;
  std::optional<std::array<GradientCheckFact, 3>> gradients;  // `reference`: dq, dk, dv

  std::optional<RawRunFact> raw;                  // --raw: the unchecked kernel in a child
  std::optional<bool> reference_trusted;          // false: compared against an untrusted intent
};

struct StageRecord {
  Stage name = Stage::conversion;
  StageStatus status = StageStatus::ok;
  double ms = 0.0;
  std::string detail;             // why skipped / what failed / what was sampled
  StageFacts facts;
  StageEngine engine = StageEngine::unspecified;
};

}  // namespace ad
