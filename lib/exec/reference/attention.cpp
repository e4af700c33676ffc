// The reference for `result.reference`: plain attention over each intended sequence in
// fp64, on the source inputs (before any gather), with the rotary the model means applied in
// fp64 and rounded to the dtype like any real pipeline stores it. Nothing here shares code
// with the kernel emulation: the reference knows sequences, not segments, tiles or indices.
#include "util/vector_loops.hpp"  // first: the compilation settings of the vector loops

#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

#include "exec/reference/reference.hpp"
#include "util/parallel.hpp"

namespace ad::ref {
namespace {

typedef double vd8 __attribute__((vector_size(64)));
typedef float vf8 __attribute__((vector_size(32)));
__attribute__((always_inline)) inline vd8 load_f8(const float* p) {
  vf8 v;
  std::memcpy(&v, p, sizeof v);
  return __builtin_convertvector(v, vd8);
}

// Scores s[j] = q . k_j in fp64 for keys [j0, j1) of a transposed key block kT (D, np);
// rows of kT are padded to a multiple of 32 so whole vectors can be read.
AD_CLONES void ref_scores(const float* __restrict q, const float* __restrict kT, int64_t np, int64_t D, int64_t j0,
                          int64_t j1, double* __restrict s) {
  for (int64_t j = j0 / 32 * 32; j < j1; j += 32) {
    vd8 a0{}, a1{}, a2{}, a3{};
    for (int64_t d = 0; d < D; ++d) {
      const float* kr = kT + d * np + j;
      const vd8 b = vd8{} + static_cast<double>(q[d]);
      a0 += b * load_f8(kr);
      a1 += b * load_f8(kr + 8);
      a2 += b * load_f8(kr + 16);
      a3 += b * load_f8(kr + 24);
    }
    std::memcpy(s + j, &a0, sizeof a0);
    std::memcpy(s + j + 8, &a1, sizeof a1);
    std::memcpy(s + j + 16, &a2, sizeof a2);
    std::memcpy(s + j + 24, &a3, sizeof a3);
  }
}

// The same for two query heads sharing the keys (GQA groups): each key load serves both.
AD_CLONES void ref_scores2(const float* __restrict q0, const float* __restrict q1, const float* __restrict kT, int64_t np,
                           int64_t D, int64_t j0, int64_t j1, double* __restrict s0, double* __restrict s1) {
  for (int64_t j = j0 / 32 * 32; j < j1; j += 32) {
    vd8 a0{}, a1{}, a2{}, a3{}, b0{}, b1{}, b2{}, b3{};
    for (int64_t d = 0; d < D; ++d) {
      const float* kr = kT + d * np + j;
      const vd8 x = vd8{} + static_cast<double>(q0[d]), y = vd8{} + static_cast<double>(q1[d]);
      const vd8 k0 = load_f8(kr), k1 = load_f8(kr + 8), k2 = load_f8(kr + 16), k3 = load_f8(kr + 24);
      a0 += x * k0;
      a1 += x * k1;
      a2 += x * k2;
      a3 += x * k3;
      b0 += y * k0;
      b1 += y * k1;
      b2 += y * k2;
      b3 += y * k3;
    }
    std::memcpy(s0 + j, &a0, sizeof a0);
    std::memcpy(s0 + j + 8, &a1, sizeof a1);
    std::memcpy(s0 + j + 16, &a2, sizeof a2);
    std::memcpy(s0 + j + 24, &a3, sizeof a3);
    std::memcpy(s1 + j, &b0, sizeof b0);
    std::memcpy(s1 + j + 8, &b1, sizeof b1);
    std::memcpy(s1 + j + 16, &b2, sizeof b2);
    std::memcpy(s1 + j + 24, &b3, sizeof b3);
  }
}

// exp(x) for x <= 0 in fp64, branch-free so the loop vectorises: x = n ln2 + r with |r| <=
// ln2/2 and a degree-13 Taylor polynomial (relative error below 1e-15); 0 below -708.
__attribute__((always_inline)) inline double exp_neg(double x) {
  const double xc = x < -708.0 ? -708.0 : x;
  const double n = __builtin_rint(xc * 1.4426950408889634);
  const double r = (xc - n * 6.93147180369123816490e-01) - n * 1.90821492927058770002e-10;
  double p = 1.0 / 6227020800.0;
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  const int64_t bits = (static_cast<int64_t>(n) + 1023) << 52;
  double sc;
  std::memcpy(&sc, &bits, sizeof sc);
  return x < -708.0 ? 0.0 : p * sc;
}

// p[j] = exp(s[j] - mx) for j in [j0, j1); returns their sum.
AD_CLONES double ref_exp(double* __restrict s, int64_t j0, int64_t j1, double mx) {
  for (int64_t j = j0; j < j1; ++j) s[j] = exp_neg(s[j] - mx);
  double sum = 0.0;
  for (int64_t j = j0; j < j1; ++j) sum += s[j];
  return sum;
}

// o[d] = sum_j p[j] v_j[d] in fp64 over keys [j0, j1); v rows `stride` floats apart.
AD_CLONES void ref_pv(const double* __restrict p, const float* __restrict v, int64_t stride, int64_t D, int64_t j0,
                      int64_t j1, double* __restrict o) {
  int64_t d = 0;
  for (; d + 32 <= D; d += 32) {
    vd8 a0{}, a1{}, a2{}, a3{};
    for (int64_t j = j0; j < j1; ++j) {
      const float* vr = v + j * stride + d;
      const vd8 b = vd8{} + p[j];
      a0 += b * load_f8(vr);
      a1 += b * load_f8(vr + 8);
      a2 += b * load_f8(vr + 16);
      a3 += b * load_f8(vr + 24);
    }
    std::memcpy(o + d, &a0, sizeof a0);
    std::memcpy(o + d + 8, &a1, sizeof a1);
    std::memcpy(o + d + 16, &a2, sizeof a2);
    std::memcpy(o + d + 24, &a3, sizeof a3);
  }
  for (; d + 8 <= D; d += 8) {
    vd8 a0{};
    for (int64_t j = j0; j < j1; ++j) a0 += (vd8{} + p[j]) * load_f8(v + j * stride + d);
    std::memcpy(o + d, &a0, sizeof a0);
  }
  for (; d < D; ++d) {
    double a = 0;
    for (int64_t j = j0; j < j1; ++j) a += p[j] * static_cast<double>(v[j * stride + d]);
    o[d] = a;
  }
}

// Rotates rows [first, first + count) of a (rows, heads, D) tensor in place, row t at
// position t + pos0, rounded to the dtype.
void rotate_rows_fp64(float* x, int64_t heads, int64_t D, int64_t first, int64_t count, int64_t pos0,
                      const ReferencePlan& ref, ElemType prec) {
  const auto round = [prec](double v) { return num::round_to(prec, static_cast<float>(v)); };
  for (int64_t t = 0; t < count; ++t)
    rotate_row_fp64(x + (first + t) * heads * D, heads, D, static_cast<double>(pos0 + t), ref, 1.0, round);
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
                                  const float* out_final, const std::vector<uint8_t>& checkable, int threads,
                                  const float* qv_src) {
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
      rotate_rows_fp64(k_rot.data(), Hk, D, s.k_src_first, s.k_count, 0, ref, plan.elem);
      rotate_rows_fp64(q_rot.data(), H, D, s.q_src_first, s.q_count, s.q_key_first, ref, plan.elem);
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

  // FA3: q_v's term and paged keys take the direct path below (one key at a time); a paged
  // sequence's key j is row j % page_size of page table[seq][j / page_size] (its own row,
  // every page inside the pool: plan_reference keeps only such sequences)
  const bool with_qv = ref.qv && qv_src != nullptr;
  const bool direct = with_qv || ref.paged.has_value();
  auto key_row = [&](const RefSequence& s, int64_t j) -> int64_t {
    if (!ref.paged) return s.k_src_first + j;
    const PagedPlan& pg = *ref.paged;
    const int64_t seq = s.k_src_first / std::max<int64_t>(ref.paged_seqlen_k, 1);
    return pg.table[static_cast<size_t>(seq * pg.pages_per_seq + j / pg.page_size)] * pg.page_size + j % pg.page_size;
  };

  // keys of one (sequence, kv head), transposed (D, n) so the score loop runs over keys
  auto padded = [](int64_t n) { return (n + 31) / 32 * 32; };
  auto transpose_keys = [&](const RefSequence& s, int64_t g, float* kT, int64_t j0, int64_t j1) {
    const int64_t np = padded(s.k_count);
    for (int64_t j = j0; j < j1; ++j) {
      const float* kr = kv + (s.k_src_first + j) * Hk * D + g * D;
      for (int64_t d = 0; d < D; ++d) kT[d * np + j] = kr[d];
    }
  };

  // one query row t of sequence si against kv head g (all q heads of the group)
  auto compare_row = [&](int64_t si, int64_t g, int64_t t, const float* kT, int w) {
    const RefSequence& s = ref.sequences[static_cast<size_t>(si)];
    const int64_t n = s.k_count;
    const int64_t fr = s.q_final_first + t;
    thread_local std::vector<double> sc, o;
    const int64_t np = padded(n);
    sc.resize(static_cast<size_t>(np * groups));
    o.resize(static_cast<size_t>(D));
    Worst& wst = worst[static_cast<size_t>(w)];
    const int64_t iq = s.q_key_first + t;  // the query's key index within the sequence
    int64_t lo = 0, hi = n;
    if (ref.causal) hi = std::min(hi, iq + 1);
    if (ref.window_left >= 0) lo = std::max(lo, iq - ref.window_left);
    if (ref.window_right >= 0 && !ref.causal) hi = std::min(hi, iq + ref.window_right + 1);
    if (ref.attention_chunk > 0) {  // the keys of the query's own chunk (iq >= 0 here)
      const int64_t start = iq / ref.attention_chunk * ref.attention_chunk;
      lo = std::max(lo, start);
      hi = std::min(hi, start + ref.attention_chunk);
    }
    const float* qrow = qv + (s.q_src_first + t) * H * D + g * groups * D;
    if (direct) kT = nullptr;
    if (kT && hi > lo) {
      // scores of the group's heads, two at a time
      for (int64_t x = 0; x < groups; x += 2) {
        if (x + 1 < groups)
          ref_scores2(qrow + x * D, qrow + (x + 1) * D, kT, np, D, lo, hi, sc.data() + x * np, sc.data() + (x + 1) * np);
        else
          ref_scores(qrow + x * D, kT, np, D, lo, hi, sc.data() + x * np);
      }
    }
    for (int64_t x = 0; x < groups; ++x) {
      const int64_t h = g * groups + x;
      const float* q = qrow + x * D;
      for (int64_t d = 0; d < D; ++d) o[static_cast<size_t>(d)] = 0.0;
      if (hi > lo) {
        double* __restrict scp = sc.data() + x * np;
        if (!kT) {
          const float* qvr = with_qv ? qv_src + (s.q_src_first + t) * H * D + h * D : nullptr;
          for (int64_t j = lo; j < hi; ++j) {
            const int64_t kr_row = key_row(s, j);
            const float* kr = kv + kr_row * Hk * D + g * D;
            double acc = 0.0;
            for (int64_t d = 0; d < D; ++d) acc += static_cast<double>(q[d]) * static_cast<double>(kr[d]);
            if (qvr) {
              const float* vr = v_src + kr_row * Hk * D + g * D;
              for (int64_t d = 0; d < D; ++d) acc += static_cast<double>(qvr[d]) * static_cast<double>(vr[d]);
            }
            scp[j] = acc;
          }
        }
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = lo; j < hi; ++j) scp[j] *= ref.softmax_scale;
        if (ref.softcap > 0)
          for (int64_t j = lo; j < hi; ++j) scp[j] = ref.softcap * std::tanh(scp[j] / ref.softcap);
        for (int64_t j = lo; j < hi; ++j) mx = std::max(mx, scp[j]);
        const double sum = ref_exp(scp, lo, hi, mx);
        for (int64_t j = lo; j < hi; ++j) scp[j] /= sum;
        if (ref.paged) {
          // page by page: each page's rows are contiguous in the pool
          for (int64_t j = lo; j < hi;) {
            const int64_t e = std::min(hi, (j / ref.paged->page_size + 1) * ref.paged->page_size);
            thread_local std::vector<double> part;
            part.assign(static_cast<size_t>(D), 0.0);
            ref_pv(scp + j, v_src + key_row(s, j) * Hk * D + g * D, Hk * D, D, 0, e - j, part.data());
            for (int64_t d = 0; d < D; ++d) o[static_cast<size_t>(d)] += part[static_cast<size_t>(d)];
            j = e;
          }
        } else {
          ref_pv(scp, v_src + s.k_src_first * Hk * D + g * D, Hk * D, D, lo, hi, o.data());
        }
        macs[static_cast<size_t>(w)] += 2.0 * double(hi - lo) * double(D);
      }
      // relative error of the head's row: ||o - ref||_2 / ||ref||_2 (the element with the
      // largest difference is reported with it); a non-finite output is infinitely off
      const float* got = out_final + fr * H * D + h * D;
      RowError re;
      for (int64_t d = 0; d < D; ++d) re.add(got[d], o[static_cast<size_t>(d)], d);
      const double err = re.relative(std::sqrt(re.den2));
      if (err > ref.tolerance) std::atomic_ref<uint8_t>(failed[static_cast<size_t>(fr)]).store(1, std::memory_order_relaxed);
      Worst cand{err, fr, h, si, re.dim, re.value, re.expected};
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
    if (!direct && ts.size() >= 16) {
      buf.assign(static_cast<size_t>(padded(s.k_count) * D), 0.f);
      transpose_keys(s, pr.g, buf.data(), 0, s.k_count);
      kT = buf.data();
    }
    for (int64_t t : ts) compare_row(pr.si, pr.g, t, kT, w);
  });
  std::vector<float> shared;
  for (const Pair& pr : large) {
    const RefSequence& s = ref.sequences[static_cast<size_t>(pr.si)];
    const auto& ts = rows_of[static_cast<size_t>(pr.si)];
    if (!direct) {
      shared.assign(static_cast<size_t>(padded(s.k_count) * D), 0.f);
      const int64_t chunk = 4096;
      parallel_for(workers, (s.k_count + chunk - 1) / chunk, 1, [&](int64_t c, int) {
        transpose_keys(s, pr.g, shared.data(), c * chunk, std::min(s.k_count, (c + 1) * chunk));
      });
    }
    parallel_for(workers, static_cast<int64_t>(ts.size()), 1, [&](int64_t i, int w) {
      compare_row(pr.si, pr.g, ts[static_cast<size_t>(i)], direct ? nullptr : shared.data(), w);
    });
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

}  // namespace ad::ref
