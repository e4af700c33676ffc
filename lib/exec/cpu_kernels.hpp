// The CPU twins of the checked kernels (internal to lib/exec). Each takes the plan and plain
// buffers, performs only in-bounds accesses, and returns what it observed; the backend
// (cpu_backend.cpp) turns observations into stage records and violations.
//
// Tensors are fp32 arrays holding values of the batch's dtype, row-major (rows, heads, dim).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "exec/access.hpp"
#include "exec/plan.hpp"

// The hot loops are compiled for x86-64, x86-64-v3 (AVX2) and x86-64-v4 (AVX-512), picked
// at load time by the CPU (GCC builds only, and not sanitizer builds).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define AD_CLONES __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define AD_CLONES
#endif

namespace ad::cpu {

// Runs f(item, worker) for item in [0, n) on `threads` workers (dynamic, in chunks of
// `grain`); the calling thread is worker 0.
template <class F>
void parallel_for(int threads, int64_t n, int64_t grain, F&& f) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int workers = static_cast<int>(std::min<int64_t>(std::max(threads, 1), (n + grain - 1) / grain));
  if (workers <= 1) {
    for (int64_t i = 0; i < n; ++i) f(i, 0);
    return;
  }
  std::atomic<int64_t> next{0};
  auto body = [&](int w) {
    for (;;) {
      const int64_t b = next.fetch_add(grain);
      if (b >= n) return;
      const int64_t e = std::min(n, b + grain);
      for (int64_t i = b; i < e; ++i) f(i, w);
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(workers - 1));
  for (int w = 1; w < workers; ++w) pool.emplace_back(body, w);
  body(0);
  for (auto& t : pool) t.join();
}

// ---- unpad / pad ------------------------------------------------------------------------

struct GatherResult {
  AccessRecord oob;       // out-of-range indices (row units), not performed
  int64_t rows_copied = 0;
};
// dst[i] = src[indices[i]] for the rows of a (rows, row_elems) tensor.
GatherResult gather_rows(const GatherPlan& g, const float* src, float* dst, int64_t row_elems, ExecBuffer src_buffer,
                         int threads);

struct ScatterResult {
  AccessRecord oob;
  int64_t rows_written = 0;
  std::vector<int64_t> source_of;  // final row -> packed row written there (-1: none)
};
// dst = zeros; dst[indices[i]] = src[i] (pad_input: sequential, a repeated index keeps the last).
ScatterResult scatter_rows(const PadPlan& pad, const float* src, int64_t src_rows, float* dst, int64_t row_elems);

// ---- rotary -----------------------------------------------------------------------------

struct RotaryResult {
  AccessRecord outside_tensor;   // past the ends of x / y (not performed)
  AccessRecord outside_head;     // inside the tensor but outside the head (performed: corruption)
  AccessRecord table;            // cos/sin reads out of the table (not performed)
  int64_t rows_rotated = 0;      // (row, head) pairs rotated
  int64_t rows_past_table = 0;   // (row, head) pairs left unrotated: position past the table
  int64_t rows_not_visited = 0;  // rows no program visited (flash_attn grid from max_seqlen)
};
// One rotary call on a packed tensor x (rows, heads, D) into y (in place when plan.inplace;
// y pre-filled by the caller with x or with poison as the contract says).
RotaryResult rotary_apply(const ExecPlan& plan, bool is_q, const float* x, float* y, int64_t rows, int64_t heads,
                          const float* cos, const float* sin, int threads);

// ---- attention --------------------------------------------------------------------------

struct AttentionResult {
  AccessRecord access;               // attention.access
  // coverage (per packed row of `out`; a row is written by every head of a segment at once)
  int64_t rows_written = 0;
  int64_t rows_never = 0, first_never = -1;
  int64_t rows_twice = 0, first_twice = -1, first_twice_count = 0;
  int64_t rows_foreign = 0, first_foreign = -1, first_foreign_segment = -1;
  std::vector<uint8_t> computed;     // per packed row: its values were computed (or zero-filled)
  std::vector<uint8_t> written;      // per packed row: some tile wrote it
  int64_t tiles = 0, empty_tiles = 0, rows_computed = 0;
  int64_t rows_no_keys = 0;          // computed rows with no visible key (0 output, +inf LSE)
  double macs = 0;                   // multiply-adds performed (QK + PV)
};
// FA2 varlen forward over packed q (total_q, H, D), k/v (total_k, Hk, D) into out and lse,
// following plan.attention (grid, exits, masks, swapped path, sampling).
AttentionResult fa2_varlen_forward(const ExecPlan& plan, const float* q, const float* k, const float* v, float* out,
                                   float* lse, int threads);

// ---- reference --------------------------------------------------------------------------

struct ReferenceResult {
  int64_t rows_checked = 0;          // (row) query rows compared
  int64_t rows_failed = 0;
  double worst_error = 0.0;          // max over rows and heads of ||o - ref||_2 / ||ref||_2
  int64_t worst_row = -1;            // final-frame row
  int64_t worst_head = -1;
  int64_t worst_sequence = -1;       // index into plan.reference.sequences
  double worst_value = 0.0, worst_expected = 0.0;  // the element with the largest difference
  int64_t worst_dim = -1;
  double macs = 0;
};
// `out_final` is the final output (rows_final, H, D); `checkable[r]` says whether final row r
// holds a value to compare (computed, or never written).
ReferenceResult reference_compare(const ExecPlan& plan, const float* q_src, const float* k_src, const float* v_src,
                                  const float* out_final, const std::vector<uint8_t>& checkable, int threads);

}  // namespace ad::cpu
