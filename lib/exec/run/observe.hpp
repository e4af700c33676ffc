// What the dynamic stages observed, turned into stage records and violations (ids 33-39),
// called by the stage driver (driver.cpp) for every engine: the engines observe the same
// accesses (the CPU twin of each kernel is the oracle), and this one translation makes their
// reports the same by construction instead of by copy. Internal to lib/exec.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "contract/access_record.hpp"
#include "exec/engine.hpp"
#include "exec/exec.hpp"
#include "exec/plan/plan.hpp"
#include "exec/reference/reference.hpp"

namespace ad::observe {

// The stage list of one run: stages in kDynamicStages order; `not_reached` closes the rest.
struct Stages {
  ExecResult& res;
  size_t count = kForwardStages;  // stage_count(training)
  StageRecord& add(Stage name);
  // The dynamic stages of this run after `last` (kDynamicStages order), skipped as not reached.
  void not_reached_after(Stage last, const std::string& why);
};

// A host raise before any launch of stage `s`: the stage is a violation, the stages after it
// are not reached, and no output row is ever written.
void host_raise(Stages& st, StageRecord& s, const HostRaise& r, const char* what, int64_t rows);

// The replayed conversion raises after the unpad gathers (e.g. unpacking flash-attn's
// five return values): the later stages are not reached; the raise is the violation unless
// the gathers already recorded one.
void conversion_raise(Stages& st, const HostRaise& r, int64_t rows);

// unpad: the first out-of-range gather index over the k, v, q gathers (launch order).
void unpad_gather(StageRecord& s, ExecResult& res, const AccessRecord& first, const std::string& first_tensor,
                  int64_t out_of_bounds_total);

// rotary: what one call (q or k) refused or let through.
struct RotaryCall {
  const AccessRecord& outside_tensor;  // past the end of the tensor (not performed)
  const AccessRecord& table;           // cos/sin read before the table (not performed)
  const AccessRecord& outside_head;    // inside the tensor, outside the head (performed)
};
void rotary_access(StageRecord& s, ExecResult& res, const RotaryPlan& r, int64_t head_dim, const RotaryCall& q,
                   const RotaryCall& k);

// attention: what the launch is (function, grid, tile, mask flags), before it runs.
void attention_launch(StageRecord& s, const ExecPlan& plan);

// attention: which output rows were written how often, from the writes per packed row
// (the segments whose CTAs wrote it). On the single-query swapped path segment b writes row
// b, which must lie in segment b of cu_seqlens_q.
struct Coverage {
  int64_t rows_written = 0;
  int64_t rows_never = 0, first_never = -1;
  int64_t rows_twice = 0, first_twice = -1, first_twice_count = 0;
  int64_t rows_foreign = 0, first_foreign = -1, first_foreign_segment = -1;
  int64_t rows_past_seqused_q = 0;  // unwritten by contract (FA3 / FA4 seqused_q), not a violation
};
Coverage coverage_of(const std::vector<uint32_t>& writes, const AttentionPlan& at);

// attention: the first refused access, and the coverage.
void attention(StageRecord& s, ExecResult& res, const AccessRecord& access, const Coverage& coverage, int64_t total_q);

// pad: the first out-of-range scatter index.
void pad_scatter(StageRecord& s, ExecResult& res, const AccessRecord& oob);

// result: result.finite over the rows whose value is known and the LSE of the computed rows,
// then result.reference against fp64 attention over the intended sequences.
struct ResultInputs {
  const float* out_final = nullptr;                // rows_final x H x D, as the caller gets it
  const std::vector<int64_t>* source_of = nullptr; // final row -> packed row (pad path)
  const std::vector<uint8_t>* written = nullptr;   // packed rows the attention kernel wrote
  const std::vector<uint8_t>* computed = nullptr;  // packed rows computed (not only zero-filled)
  const std::vector<float>* lse = nullptr;         // (H, total_q) when unpadded LSE
  const float* q_src = nullptr;                    // the inputs, for the reference
  const float* k_src = nullptr;
  const float* v_src = nullptr;
  const float* qv_src = nullptr;                   // FA3's q_v (nullptr: none)
  int64_t total_q = 0;
  int threads = 1;
  std::string output_name = "output";              // "GPU output" on the CUDA backend
};
void result(StageRecord& s, ExecResult& res, const ExecPlan& plan, const ResultInputs& in);

// attention_backward: the launch (grids, tile, release rules), before it runs.
void backward_launch(StageRecord& s, const ExecPlan& plan);

// attention_backward: refused accesses (the three launches, in order), gradient rows never
// written, dq rows accumulated at a misplaced dq_accum offset.
struct BackwardCoverage {
  int64_t dq_never = 0, dkv_never = 0;
  std::vector<std::pair<int64_t, int64_t>> dq_ranges, dkv_ranges;  // inclusive, packed rows
};
BackwardCoverage backward_coverage(const std::vector<uint32_t>& dq_writes, const std::vector<uint32_t>& dkv_writes);
void backward(StageRecord& s, ExecResult& res, const ExecPlan& plan, const AccessRecord* const launches[3],
              const BackwardCoverage& coverage, const DqMisroute& misroute, const std::vector<uint8_t>& misrouted);

// attention_backward: the gradients (dq, dk, dv) against fp64 gradients over the intended
// sequences (ref::gradient_reference); rows are source-frame rows.
void backward_reference(StageRecord& s, ExecResult& res, const ExecPlan& plan, const ref::GradientResult checks[3]);

}  // namespace ad::observe
