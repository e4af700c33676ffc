// The fp64 references the stage driver compares the call against (internal to lib/exec): plain
// attention over each intended sequence (`result.reference`, attention.cpp) and its gradients
// (`backward.reference`, gradients.cpp), on the source inputs, with the rotary the model means
// applied in fp64. Not twins of the kernels: a reference knows sequences, not segments, tiles
// or indices, and shares no code with the kernels' emulation.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "exec/plan/plan.hpp"

namespace ad::ref {

// ---- what both references share ------------------------------------------------------------

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

// ---- the forward: result.reference (attention.cpp) -----------------------------------------

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
// holds a value to compare (computed, or never written). FA3: `qv_src` (q's shape) adds q_v . v_j
// to each score (plan.reference.qv); a paged call's keys are read through its own table row
// (plan.reference.paged).
ReferenceResult reference_compare(const ExecPlan& plan, const float* q_src, const float* k_src, const float* v_src,
                                  const float* out_final, const std::vector<uint8_t>& checkable, int threads,
                                  const float* qv_src = nullptr);

// ---- the backward: backward.reference (gradients.cpp) -------------------------------------

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

}  // namespace ad::ref
