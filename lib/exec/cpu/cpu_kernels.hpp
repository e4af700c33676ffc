// The CPU twins of the checked kernels (internal to lib/exec). Each takes the plan and plain
// buffers, performs only in-bounds accesses, and returns what it observed (engine.hpp); the
// CPU engine (cpu_engine.cpp) runs them, and the CUDA engine where its kernels do not cover
// a call.
//
// Tensors are fp32 arrays holding values of the batch's dtype, row-major (rows, heads, dim).
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <thread>
#include <vector>

#include "contract/access_record.hpp"
#include "contract/rotary.hpp"
#include "exec/engine.hpp"
#include "exec/plan/plan.hpp"

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

// dst[i] = src[indices[i]] for the rows of a (rows, row_elems) tensor; a refused index is
// recorded as a read of `src_buffer`.
GatherObservation gather_rows(const GatherPlan& g, const float* src, float* dst, int64_t row_elems, Buffer src_buffer,
                              int threads);

// dst = zeros; dst[indices[i]] = src[i] (pad_input: sequential, a repeated index keeps the last).
ScatterObservation scatter_rows(const PadPlan& pad, const float* src, int64_t src_rows, float* dst, int64_t row_elems);

// ---- rotary -----------------------------------------------------------------------------

// The output tensor of a rotary call on x (rows, heads, D): a copy of x (the flash_attn layer
// rotates in place), or, for fla's new tensor, poison in the rotated columns.
std::vector<float> rotary_output(const ExecPlan& plan, const float* x, int64_t rows, int64_t heads);

// One rotary call on a packed tensor x (rows, heads, D) into y (prepared by rotary_output).
// `conjugate` runs its adjoint, the backward every implementation has (each pair rotated by
// the opposite angle: flash_attn's ApplyRotaryEmb.backward calls the same kernel with
// conjugate=True, flash_attn/layers/rotary.py; FLA's rotary backward and autograd through
// transformers' apply_rotary_pos_emb do the same).
RotaryCallObservation rotary_apply(const ExecPlan& plan, bool is_q, const float* x, float* y, int64_t rows,
                                   int64_t heads, const float* cos, const float* sin, int threads, bool conjugate = false);

// ---- attention --------------------------------------------------------------------------

struct AttentionResult {
  AccessRecord access;               // attention.access (the CTAs with a row inside q/out)
  std::vector<uint32_t> writes;      // per packed row of `out`: the segments that write it
  std::vector<uint8_t> computed;     // per packed row: its values were computed (or zero-filled)
  int64_t tiles = 0, empty_tiles = 0, rows_computed = 0;
  int64_t rows_no_keys = 0;          // computed rows with no visible key (0 output, +inf LSE)
  double macs = 0;                   // multiply-adds performed (QK + PV)
};
// FA2 varlen forward over packed q (total_q, H, D), k/v (total_k, Hk, D) into out and lse,
// following plan.attention (grid, exits, masks, swapped path, sampling).
AttentionResult fa2_varlen_forward(const ExecPlan& plan, const float* q, const float* k, const float* v, float* out,
                                   float* lse, int threads);

// ---- backward -----------------------------------------------------------------------------

// The dq_accum offsets of every tile of the three backward launches against the intended
// (64-bit) ones, without values (contract/fa2_backward.hpp): cheap enough for any batch, so it
// also runs where the tensors are too large to materialise. Either engine may call it.
struct MisrouteResult {
  std::vector<uint8_t> rows;  // per packed q row (total_q): its dq went through a misplaced tile
  DqMisroute misroute;
};
MisrouteResult backward_misroutes(const ExecPlan& plan);

// FA2 varlen backward (plan.backward) over the packed q, k (as rotated), v, the forward's out
// and LSE, and the packed dO.
AttentionBackwardObservation fa2_varlen_backward(const ExecPlan& plan, const float* q, const float* k, const float* v,
                                                 const float* out, const float* lse, const float* dout, int threads);

// The gradients of the loss sum(dO * out) over the intended sequences in fp64 (the reference
// of `backward.reference`), compared with the gradients the call returns, mapped to source
// rows (unpad's adjoint): dq and dk against the gradients of the rotated q and k the
// attention receives (the model's rotary applied as the forward reference applies it; a
// rotation neither creates nor hides an attention-gradient error), dv against v's. `dout`
// is the seeded dO of the final frame. Rows with no reference value (padding) are not
// compared; dq only where `dq_known[src row]`, dk/dv only where `dkv_known`.
struct GradientResult {
  int64_t rows_checked = 0, rows_failed = 0;
  double worst_error = 0.0;
  int64_t worst_row = -1, worst_head = -1, worst_sequence = -1, worst_dim = -1;
  double worst_value = 0.0, worst_expected = 0.0;
};
struct GradientInputs {
  const float *q_src, *k_src, *v_src;            // source frame inputs
  const float *dq_src, *dk_src, *dv_src;         // the call's gradients mapped to source rows
  const std::vector<uint8_t>* dq_known;          // per source q row
  const std::vector<uint8_t>* dkv_known;         // per source k row
};
void gradient_reference(const ExecPlan& plan, const GradientInputs& in, GradientResult out[3], int threads);

// ---- reference --------------------------------------------------------------------------

// The references' rotary on one row of `heads` heads (D each) at position `pos`: fp64 angles
// (inv_freq = base^(-2i / rotary_freq_dim)), pairs as the contract pairs them, each result
// passed through `round`. `sign` -1 rotates by the opposite angle (the adjoint, which takes a
// gradient with respect to the rotated row back to the source row).
template <class T, class Round>
void rotate_row_fp64(T* row, int64_t heads, int64_t D, double pos, const ReferencePlan& ref, double sign, Round round) {
  const int64_t half = ref.rotary_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double freq = std::pow(ref.rotary_base, -2.0 * static_cast<double>(i) / static_cast<double>(ref.rotary_freq_dim));
    const double co = std::cos(pos * freq), si = sign * std::sin(pos * freq);
    const int64_t i0 = ref.rotary_interleaved ? 2 * i : i, i1 = ref.rotary_interleaved ? 2 * i + 1 : i + half;
    for (int64_t h = 0; h < heads; ++h) {
      T* v = row + h * D;
      const double a = static_cast<double>(v[i0]), b = static_cast<double>(v[i1]);
      v[i0] = round(a * co - b * si);
      v[i1] = round(a * si + b * co);
    }
  }
}

// One row of a reference comparison (one head's D elements, the call's value against the
// reference's): ||got - ref||_2^2 and ||ref||_2^2, and the element reported with the row: the
// first non-finite one if any, else the one with the largest difference. The forward
// (reference_compare) and the gradient reference (gradient_reference) both judge rows by it.
struct RowError {
  double num2 = 0, den2 = 0;
  bool finite = true;
  int64_t dim = -1;
  double value = 0, expected = 0, diff = -1;
  // always inlined: it runs per element in the references' row loops
  __attribute__((always_inline)) void add(double got, double want, int64_t d) {
    den2 += want * want;
    if (!std::isfinite(got)) {
      if (finite) {
        finite = false;
        dim = d;
        value = got;
        expected = want;
      }
      return;
    }
    const double x = got - want;
    num2 += x * x;
    if (finite && std::fabs(x) > diff) {
      diff = std::fabs(x);
      dim = d;
      value = got;
      expected = want;
    }
  }
  // ||got - ref||_2 / den: a non-finite output is infinitely off, and so is any difference
  // from a row whose scale `den` is 0
  double relative(double den) const {
    const double inf = std::numeric_limits<double>::infinity(), num = std::sqrt(num2);
    return !finite ? inf : den > 0 ? num / den : (num > 0 ? inf : 0.0);
  }
};

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
