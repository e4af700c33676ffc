// The reference for `result.reference`: plain attention over each intended sequence in
// fp64, on the source inputs (before any gather), with the rotary the model means applied in
// fp64 and rounded to the dtype like any real pipeline stores it. Nothing here shares code
// with the kernel emulation: the reference knows sequences, not segments, tiles or indices.
#include <atomic>
#include <cmath>
#include <limits>

#include "exec/cpu_kernels.hpp"

namespace ad::cpu {
namespace {

// Rotates rows [first, first + count) of a (rows, heads, D) tensor in place, row t at
// position t + pos0 (fp64 angles, pairs as the contract pairs them).
void rotate_rows_fp64(float* x, int64_t heads, int64_t D, int64_t first, int64_t count, int64_t pos0,
                      const ReferencePlan& ref, num::Precision prec) {
  const int64_t half = ref.rotary_dim / 2;
  for (int64_t t = 0; t < count; ++t) {
    const double pos = static_cast<double>(pos0 + t);
    float* row = x + (first + t) * heads * D;
    for (int64_t i = 0; i < half; ++i) {
      const double freq = std::pow(ref.rotary_base, -2.0 * static_cast<double>(i) / static_cast<double>(ref.rotary_freq_dim));
      const double co = std::cos(pos * freq), si = std::sin(pos * freq);
      const int64_t i0 = ref.rotary_interleaved ? 2 * i : i, i1 = ref.rotary_interleaved ? 2 * i + 1 : i + half;
      for (int64_t h = 0; h < heads; ++h) {
        float* v = row + h * D;
        const double a = v[i0], b = v[i1];
        v[i0] = num::round_to(prec, static_cast<float>(a * co - b * si));
        v[i1] = num::round_to(prec, static_cast<float>(a * si + b * co));
      }
    }
  }
}

struct Worst {
  double err = -1.0;
  int64_t row = -1, head = -1, seq = -1, dim = -1;
  double value = 0, expected = 0;
  bool better_than(const Worst& o) const {
    if (err != o.err) return err > o.err;
    if (row != o.row) return row < o.row;
    return head < o.head;
  }
};

}  // namespace

ReferenceResult reference_compare(const ExecPlan& plan, const float* q_src, const float* k_src, const float* v_src,
                                  const float* out_final, const std::vector<uint8_t>& checkable, int threads) {
  const ReferencePlan& ref = plan.reference;
  ReferenceResult res;
  const int64_t H = plan.num_heads, Hk = plan.num_kv_heads, D = plan.head_dim;
  const int64_t groups = std::max<int64_t>(1, H / Hk);

  // the model's rotary on copies of the source rows each sequence uses
  std::vector<float> q_rot, k_rot;
  const float* qv = q_src;
  const float* kv = k_src;
  if (ref.rotary && ref.rotary_dim >= 2) {
    q_rot.assign(q_src, q_src + plan.rows_q_src * H * D);
    k_rot.assign(k_src, k_src + plan.rows_k_src * Hk * D);
    parallel_for(threads, static_cast<int64_t>(ref.sequences.size()), 1, [&](int64_t si, int) {
      const RefSequence& s = ref.sequences[static_cast<size_t>(si)];
      rotate_rows_fp64(k_rot.data(), Hk, D, s.k_src_first, s.k_count, 0, ref, plan.precision);
      rotate_rows_fp64(q_rot.data(), H, D, s.q_src_first, s.q_count, s.q_key_first, ref, plan.precision);
    });
    qv = q_rot.data();
    kv = k_rot.data();
  }

  const int workers = std::max(1, threads);
  std::vector<Worst> worst(static_cast<size_t>(workers));
  std::vector<double> macs(static_cast<size_t>(workers), 0.0);
  std::vector<uint8_t> failed(static_cast<size_t>(std::max<int64_t>(plan.rows_final, 0)), 0);
  std::vector<uint8_t> checked(failed.size(), 0);
  const bool sampled = !ref.sample.empty();

  // the query rows of each sequence that are compared
  std::vector<std::vector<int64_t>> rows_of(ref.sequences.size());
  for (size_t si = 0; si < ref.sequences.size(); ++si) {
    const RefSequence& s = ref.sequences[si];
    for (int64_t t = 0; t < s.q_count; ++t) {
      const int64_t fr = s.q_final_first + t;
      if (sampled && !ref.sample[static_cast<size_t>(fr)]) continue;
      if (!checkable[static_cast<size_t>(fr)]) continue;
      rows_of[si].push_back(t);
      checked[static_cast<size_t>(fr)] = 1;
    }
  }

  // keys of one (sequence, kv head), transposed (D, n) so the score loop runs over keys
  auto transpose_keys = [&](const RefSequence& s, int64_t g, float* kT, int64_t j0, int64_t j1) {
    const int64_t n = s.k_count;
    for (int64_t j = j0; j < j1; ++j) {
      const float* kr = kv + (s.k_src_first + j) * Hk * D + g * D;
      for (int64_t d = 0; d < D; ++d) kT[d * n + j] = kr[d];
    }
  };

  // one query row t of sequence si against kv head g (all q heads of the group)
  auto compare_row = [&](int64_t si, int64_t g, int64_t t, const float* kT, int w) {
    const RefSequence& s = ref.sequences[static_cast<size_t>(si)];
    const int64_t n = s.k_count;
    const int64_t fr = s.q_final_first + t;
    thread_local std::vector<double> sc, o;
    sc.resize(static_cast<size_t>(n));
    o.resize(static_cast<size_t>(D));
    Worst& wst = worst[static_cast<size_t>(w)];
    const int64_t iq = s.q_key_first + t;  // the query's key index within the sequence
    int64_t lo = 0, hi = n;
    if (ref.causal) hi = std::min(hi, iq + 1);
    if (ref.window_left >= 0) lo = std::max(lo, iq - ref.window_left);
    if (ref.window_right >= 0 && !ref.causal) hi = std::min(hi, iq + ref.window_right + 1);
    for (int64_t x = 0; x < groups; ++x) {
      const int64_t h = g * groups + x;
      const float* q = qv + (s.q_src_first + t) * H * D + h * D;
      for (int64_t d = 0; d < D; ++d) o[static_cast<size_t>(d)] = 0.0;
      if (hi > lo) {
        double* __restrict scp = sc.data();
        if (kT) {
          for (int64_t j = lo; j < hi; ++j) scp[j] = 0.0;
          for (int64_t d = 0; d < D; ++d) {
            const double qd = q[d];
            const float* __restrict kr = kT + d * n;
            for (int64_t j = lo; j < hi; ++j) scp[j] += qd * static_cast<double>(kr[j]);
          }
        } else {
          for (int64_t j = lo; j < hi; ++j) {
            const float* kr = kv + (s.k_src_first + j) * Hk * D + g * D;
            double acc = 0.0;
            for (int64_t d = 0; d < D; ++d) acc += static_cast<double>(q[d]) * static_cast<double>(kr[d]);
            scp[j] = acc;
          }
        }
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = lo; j < hi; ++j) {
          double v = scp[j] * ref.softmax_scale;
          if (ref.softcap > 0) v = ref.softcap * std::tanh(v / ref.softcap);
          scp[j] = v;
          mx = std::max(mx, v);
        }
        double sum = 0.0;
        for (int64_t j = lo; j < hi; ++j) {
          scp[j] = std::exp(scp[j] - mx);
          sum += scp[j];
        }
        double* __restrict od = o.data();
        for (int64_t j = lo; j < hi; ++j) {
          const double p = scp[j] / sum;
          const float* __restrict vr = v_src + (s.k_src_first + j) * Hk * D + g * D;
          for (int64_t d = 0; d < D; ++d) od[d] += p * static_cast<double>(vr[d]);
        }
        macs[static_cast<size_t>(w)] += 2.0 * double(hi - lo) * double(D);
      }
      // max|o - ref| / max|ref| over the head's D values; a non-finite output is infinitely off
      const float* got = out_final + fr * H * D + h * D;
      double num = 0.0, den = 0.0, worst_v = 0, worst_e = 0;
      int64_t worst_d = -1;
      bool finite = true;
      for (int64_t d = 0; d < D; ++d) {
        const double e = o[static_cast<size_t>(d)], gv = got[d];
        den = std::max(den, std::fabs(e));
        if (!std::isfinite(gv)) {
          if (finite) {
            finite = false;
            worst_d = d;
            worst_v = gv;
            worst_e = e;
          }
          continue;
        }
        const double diff = std::fabs(gv - e);
        if (finite && (worst_d < 0 || diff > num)) {
          num = diff;
          worst_d = d;
          worst_v = gv;
          worst_e = e;
        }
      }
      const double inf = std::numeric_limits<double>::infinity();
      const double err = !finite ? inf : den > 0 ? num / den : (num > 0 ? inf : 0.0);
      if (err > ref.tolerance) std::atomic_ref<uint8_t>(failed[static_cast<size_t>(fr)]).store(1, std::memory_order_relaxed);
      Worst cand{err, fr, h, si, worst_d, worst_v, worst_e};
      if (cand.better_than(wst)) wst = cand;
    }
  };

  // (sequence, kv head) pairs: small ones in parallel, each with its own transposed keys
  // (or none, for a handful of rows); large ones one at a time with the rows in parallel.
  struct Pair {
    int64_t si, g;
  };
  std::vector<Pair> small, large;
  for (size_t si = 0; si < ref.sequences.size(); ++si) {
    const int64_t c = static_cast<int64_t>(rows_of[si].size());
    if (c == 0) continue;
    const double work = double(c) * double(ref.sequences[si].k_count);
    for (int64_t g = 0; g < Hk; ++g) (work < double(1 << 20) ? small : large).push_back({static_cast<int64_t>(si), g});
  }
  parallel_for(workers, static_cast<int64_t>(small.size()), 1, [&](int64_t pi, int w) {
    const Pair pr = small[static_cast<size_t>(pi)];
    const RefSequence& s = ref.sequences[static_cast<size_t>(pr.si)];
    const auto& ts = rows_of[static_cast<size_t>(pr.si)];
    const float* kT = nullptr;
    thread_local std::vector<float> buf;
    if (ts.size() >= 16) {
      buf.resize(static_cast<size_t>(s.k_count * D));
      transpose_keys(s, pr.g, buf.data(), 0, s.k_count);
      kT = buf.data();
    }
    for (int64_t t : ts) compare_row(pr.si, pr.g, t, kT, w);
  });
  std::vector<float> shared;
  for (const Pair& pr : large) {
    const RefSequence& s = ref.sequences[static_cast<size_t>(pr.si)];
    const auto& ts = rows_of[static_cast<size_t>(pr.si)];
    shared.resize(static_cast<size_t>(s.k_count * D));
    const int64_t chunk = 4096;
    parallel_for(workers, (s.k_count + chunk - 1) / chunk, 1, [&](int64_t c, int) {
      transpose_keys(s, pr.g, shared.data(), c * chunk, std::min(s.k_count, (c + 1) * chunk));
    });
    parallel_for(workers, static_cast<int64_t>(ts.size()), 1,
                 [&](int64_t i, int w) { compare_row(pr.si, pr.g, ts[static_cast<size_t>(i)], shared.data(), w); });
  }
  Worst best;
  for (const Worst& w : worst)
    if (w.better_than(best)) best = w;
  for (size_t i = 0; i < failed.size(); ++i) {
    res.rows_failed += failed[i];
    res.rows_checked += checked[i];
  }
  if (best.err >= 0) {
    res.worst_error = best.err;
    res.worst_row = best.row;
    res.worst_head = best.head;
    res.worst_sequence = best.seq;
    res.worst_dim = best.dim;
    res.worst_value = best.value;
    res.worst_expected = best.expected;
  }
  for (double m : macs) res.macs += m;
  return res;
}

}  // namespace ad::cpu
