// The reference of `backward.reference` (reference.hpp): the gradients of the loss
// sum(dO * out) over each intended sequence in fp64, with the model's rotary applied to q and k
// and its adjoint taking dq and dk back to the source rows, compared row by row with the
// gradients the call returns.
#include <algorithm>
#include <cmath>
#include <limits>

#include "contract/fa2_backward.hpp"
#include "exec/plan/numeric.hpp"
#include "exec/reference/reference.hpp"
#include "util/parallel.hpp"

namespace ad::ref {
namespace {

// mag2: the squared norm of the sum of |terms| (the scale rounding acts on); den2 < 0: the
// row is not compared
struct RowErr : RowError {
  double mag2 = 0;
};

}  // namespace

void gradient_reference(const ExecPlan& plan, const GradientInputs& in, GradientResult out[3], int threads) {
  const ReferencePlan& ref = plan.reference;
  const int64_t H = plan.num_heads, Hk = plan.num_kv_heads, D = plan.head_dim, G = std::max<int64_t>(1, H / Hk);
  const bool rot = ref.rotary && ref.rotary_dim >= 2;
  const auto to_dtype = [&](double v) { return num::round_to(plan.elem, static_cast<float>(v)); };
  const auto exact = [](double v) { return v; };
  const bool sampled = !ref.sample.empty();
  struct Pair {
    int64_t si, g;
  };
  std::vector<Pair> pairs;
  for (size_t si = 0; si < ref.sequences.size(); ++si)
    for (int64_t g = 0; g < Hk; ++g) pairs.push_back({static_cast<int64_t>(si), g});
  // per (pair): the errors of its dq rows (q_count x G), dk and dv rows (k_count)
  struct PairErr {
    std::vector<RowErr> dq, dk, dv;
  };
  std::vector<PairErr> errs(pairs.size());
  parallel_for(std::max(1, threads), static_cast<int64_t>(pairs.size()), 1, [&](int64_t pi, int) {
    const Pair pr = pairs[static_cast<size_t>(pi)];
    const RefSequence& s = ref.sequences[static_cast<size_t>(pr.si)];
    const int64_t n = s.k_count, nq = s.q_count;
    if (n <= 0 || nq <= 0) return;
    // the sequence's keys (rotated), values, and accumulators
    std::vector<float> kr(static_cast<size_t>(n * D));
    for (int64_t j = 0; j < n; ++j) {
      std::vector<float> row(in.k_src + (s.k_src_first + j) * Hk * D, in.k_src + (s.k_src_first + j + 1) * Hk * D);
      if (rot) rotate_row_fp64(row.data(), Hk, D, double(j), ref, 1.0, to_dtype);
      std::copy_n(row.data() + pr.g * D, D, kr.data() + j * D);
    }
    std::vector<double> dk(static_cast<size_t>(n * D), 0.0), dv(dk.size(), 0.0), dk_abs(dk.size(), 0.0),
        dv_abs(dk.size(), 0.0), p(static_cast<size_t>(n)), dp(static_cast<size_t>(n)), raw(static_cast<size_t>(n)),
        o(static_cast<size_t>(D)), dq(static_cast<size_t>(D)), dq_abs(static_cast<size_t>(D));
    PairErr& pe = errs[static_cast<size_t>(pi)];
    pe.dq.resize(static_cast<size_t>(nq * G));
    std::vector<float> qrow(static_cast<size_t>(H * D));
    const bool do_kv = !sampled;
    for (int64_t t = 0; t < nq; ++t) {
      const int64_t fr = s.q_final_first + t;
      const bool check_q = !sampled || ref.sample[static_cast<size_t>(fr)];
      if (!check_q && !do_kv) continue;
      std::copy_n(in.q_src + (s.q_src_first + t) * H * D, H * D, qrow.data());
      const int64_t iq = s.q_key_first + t;
      if (rot) rotate_row_fp64(qrow.data(), H, D, double(iq), ref, 1.0, to_dtype);
      int64_t lo = 0, hi = n;
      if (ref.causal) hi = std::min(hi, iq + 1);
      if (ref.window_left >= 0) lo = std::max(lo, iq - ref.window_left);
      if (ref.window_right >= 0 && !ref.causal) hi = std::min(hi, iq + ref.window_right + 1);
      if (ref.attention_chunk > 0) {
        const int64_t start = iq / ref.attention_chunk * ref.attention_chunk;
        lo = std::max(lo, start);
        hi = std::min(hi, start + ref.attention_chunk);
      }
      for (int64_t x = 0; x < G; ++x) {
        const int64_t h = pr.g * G + x;
        const float* q = qrow.data() + h * D;
        double go[512];
        for (int64_t e = 0; e < D; ++e)
          go[e] = num::input_value(plan.seed, num::InputTensor::dout, static_cast<uint64_t>((fr * H + h) * D + e), plan.elem);
        std::fill(dq.begin(), dq.end(), 0.0);
        std::fill(dq_abs.begin(), dq_abs.end(), 0.0);
        if (hi > lo) {
          double mx = -std::numeric_limits<double>::infinity();
          for (int64_t j = lo; j < hi; ++j) {
            double a = 0, lanes[4] = {};
            const float* kj = kr.data() + j * D;
            int64_t e = 0;
            for (; e + 4 <= D; e += 4)
              for (int l = 0; l < 4; ++l) lanes[l] += double(q[e + l]) * double(kj[e + l]);
            for (; e < D; ++e) a += double(q[e]) * double(kj[e]);
            a += (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
            raw[static_cast<size_t>(j)] = a;
            double sc = a * ref.softmax_scale;
            if (ref.softcap > 0) sc = ref.softcap * std::tanh(sc / ref.softcap);
            p[static_cast<size_t>(j)] = sc;
            mx = std::max(mx, sc);
          }
          double sum = 0;
          for (int64_t j = lo; j < hi; ++j) sum += (p[static_cast<size_t>(j)] = std::exp(p[static_cast<size_t>(j)] - mx));
          std::fill(o.begin(), o.end(), 0.0);
          for (int64_t j = lo; j < hi; ++j) {
            p[static_cast<size_t>(j)] /= sum;
            const float* vj = in.v_src + (s.k_src_first + j) * Hk * D + pr.g * D;
            double d2 = 0;
            for (int64_t e = 0; e < D; ++e) {
              o[static_cast<size_t>(e)] += p[static_cast<size_t>(j)] * double(vj[e]);
              d2 += go[e] * double(vj[e]);
            }
            dp[static_cast<size_t>(j)] = d2;
          }
          double Dt = 0, Dabs = 0;  // Dabs: the scale of D's rounding (the kernel reads O in the dtype)
          for (int64_t e = 0; e < D; ++e) {
            Dt += go[e] * o[static_cast<size_t>(e)];
            Dabs += std::fabs(go[e] * o[static_cast<size_t>(e)]);
          }
          for (int64_t j = lo; j < hi; ++j) {
            const double pj = p[static_cast<size_t>(j)];
            const double dsc = fa2::bwd::dscore(raw[static_cast<size_t>(j)], ref.softmax_scale, ref.softcap);
            const double ds = pj * (dp[static_cast<size_t>(j)] - Dt) * dsc;
            // the scale of dS's rounding: dP - D cancels, its terms do not
            const double ds_mag = pj * (std::fabs(dp[static_cast<size_t>(j)]) + Dabs) * std::fabs(dsc);
            for (int64_t e = 0; e < D; ++e) {
              const double kv = double(kr[static_cast<size_t>(j * D + e)]);
              dq[static_cast<size_t>(e)] += ds * kv;
              dq_abs[static_cast<size_t>(e)] += ds_mag * std::fabs(kv);
              if (do_kv) {
                dk[static_cast<size_t>(j * D + e)] += ds * double(q[e]);
                dk_abs[static_cast<size_t>(j * D + e)] += ds_mag * std::fabs(double(q[e]));
                dv[static_cast<size_t>(j * D + e)] += pj * go[e];
                dv_abs[static_cast<size_t>(j * D + e)] += std::fabs(pj * go[e]);
              }
            }
          }
        }
        // back through the rotary to the source row (the adjoint: the opposite angle)
        if (rot) rotate_row_fp64(dq.data(), 1, D, double(iq), ref, -1.0, exact);
        const int64_t src = s.q_src_first + t;
        if (check_q && (*in.dq_known)[static_cast<size_t>(src)]) {
          RowErr& re = pe.dq[static_cast<size_t>(t * G + x)];
          const float* got = in.dq_src + (src * H + h) * D;
          for (int64_t e = 0; e < D; ++e) {
            re.add(got[e], dq[static_cast<size_t>(e)], e);
            re.mag2 += dq_abs[static_cast<size_t>(e)] * dq_abs[static_cast<size_t>(e)];
          }
        } else {
          pe.dq[static_cast<size_t>(t * G + x)].den2 = -1;  // not compared
        }
      }
    }
    if (!do_kv) return;
    if (rot)
      for (int64_t j = 0; j < n; ++j) rotate_row_fp64(dk.data() + j * D, 1, D, double(j), ref, -1.0, exact);
    pe.dk.resize(static_cast<size_t>(n));
    pe.dv.resize(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) {
      const int64_t src = s.k_src_first + j;
      if (!(*in.dkv_known)[static_cast<size_t>(src)]) {
        pe.dk[static_cast<size_t>(j)].den2 = pe.dv[static_cast<size_t>(j)].den2 = -1;
        continue;
      }
      for (int64_t e = 0; e < D; ++e) {
        const size_t x = static_cast<size_t>(j * D + e);
        pe.dk[static_cast<size_t>(j)].add(in.dk_src[(src * Hk + pr.g) * D + e], dk[x], e);
        pe.dv[static_cast<size_t>(j)].add(in.dv_src[(src * Hk + pr.g) * D + e], dv[x], e);
        pe.dk[static_cast<size_t>(j)].mag2 += dk_abs[x] * dk_abs[x];
        pe.dv[static_cast<size_t>(j)].mag2 += dv_abs[x] * dv_abs[x];
      }
    }
  });
  // errors per (row, head): ||got - ref|| / ||sum of |terms| ||. A gradient row is a sum of
  // terms that cancel (sum_j dS_j = 0 for each query row), and the dtype's rounding acts on the
  // terms, so the error is measured against their magnitude; it equals ||ref|| where nothing
  // cancels, and a row with no term must be exactly 0.
  for (int tensor = 0; tensor < 3; ++tensor) {
    GradientResult& r = out[tensor];
    for (size_t pi = 0; pi < pairs.size(); ++pi) {
      const RefSequence& s = ref.sequences[static_cast<size_t>(pairs[pi].si)];
      const auto& v = tensor == 0 ? errs[pi].dq : tensor == 1 ? errs[pi].dk : errs[pi].dv;
      for (size_t i = 0; i < v.size(); ++i) {
        const RowErr& e = v[i];
        if (e.den2 < 0) continue;
        const int64_t row = tensor == 0 ? s.q_src_first + static_cast<int64_t>(i) / G : s.k_src_first + static_cast<int64_t>(i);
        const int64_t head = tensor == 0 ? pairs[pi].g * G + static_cast<int64_t>(i) % G : pairs[pi].g;
        const double err = e.relative(std::max(std::sqrt(e.den2), std::sqrt(e.mag2)));
        ++r.rows_checked;
        if (err > plan.backward.tolerance) ++r.rows_failed;
        if (err > r.worst_error || r.worst_row < 0) {
          r.worst_error = err;
          r.worst_row = row;
          r.worst_head = head;
          r.worst_sequence = pairs[pi].si;
          r.worst_dim = e.dim;
          r.worst_value = e.value;
          r.worst_expected = e.expected;
        }
      }
    }
  }
}

}  // namespace ad::ref
