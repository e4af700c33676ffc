// CPU twin of the checked FA2 varlen backward (contract/fa2_backward.hpp): the three launches
// of run_flash_bwd_seqk_parallel (flash-attention v2.8.3 csrc/flash_attn/src/
// flash_bwd_launch_template.h) in order -- dot_do_o, dq_dk_dv, convert_dQ -- with the
// release's grids, exits, m-block ranges and dq_accum offsets, every access checked against
// its buffer and refused (recorded, never performed) when outside it.
//
// Buffers start as the real code allocates them: dq_accum, softmax_d, dq and dk/dv(_expanded)
// come from torch.empty (poison, NaN, stands for whatever they held), dq_accum from
// torch.zeros when deterministic. Values: fp32 accumulation of inputs in the dtype, P and dS
// rounded to the dtype before the products that use them (the kernel's gemm inputs), dq and
// dk scaled by the softmax scale at the end (convert_dQ, the dq_dk_dv epilogue), gradients
// rounded to the dtype, dk/dv summed over the head group under GQA (at::sum_out).
//
// Work is split over heads: a head's dq_accum tiles (its d_rounded columns), softmax_d and
// dk/dv_expanded columns are its own, so workers never write the same element, and within a
// head CTAs run in launch order (overlapping segments: the last writer wins, as the forward's
// twin resolves them). A wrapped offset could send a tile into another head's columns; it
// needs a dq_accum of 2^31 elements, which the memory budget never lets the values run on,
// and the offsets are analysed for every tile without values (reference/misroute.cpp).
#include <cmath>
#include <limits>

#include "exec/cpu/cpu_kernels.hpp"
#include "exec/plan/numeric.hpp"
#include "exec/reference/misroute.hpp"

namespace ad::cpu {
namespace {

constexpr float kPoison = std::numeric_limits<float>::quiet_NaN();

template <ElemType P>
float rnd(float x) {
  return num::round_to(P, x);
}

// Two dot products over the head dim in 8 fp32 lanes (an order the compiler vectorises; the
// kernel's MMA has its own order, the values agree within the tolerance).
inline void dot2(const float* __restrict a, const float* __restrict b, const float* __restrict c,
                 const float* __restrict d, int64_t n, float& ab, float& cd) {
  float x[8] = {}, y[8] = {};
  int64_t e = 0;
  for (; e + 8 <= n; e += 8)
    for (int l = 0; l < 8; ++l) {
      x[l] += a[e + l] * b[e + l];
      y[l] += c[e + l] * d[e + l];
    }
  float sx = 0.f, sy = 0.f;
  for (int l = 0; l < 8; ++l) {
    sx += x[l];
    sy += y[l];
  }
  for (; e < n; ++e) {
    sx += a[e] * b[e];
    sy += c[e] * d[e];
  }
  ab = sx;
  cd = sy;
}

}  // namespace

// ---- values ------------------------------------------------------------------------------

namespace {

struct Ctx {
  const ExecPlan& plan;
  const AttentionPlan& at;
  const BackwardPlan& bw;
  const float *q, *k, *v, *out, *lse, *dout;
  int64_t H, Hk, D, G, total_q, total_k, N;
  int bm, bn;
  float scale, softcap;
  bool sampled;
  Buffer q_buf, k_buf;
};

Access acc(Buffer buf, AccessKind kind, Unit unit, int64_t index, int64_t bound, int64_t x, int64_t b, int64_t h,
           int64_t row, int64_t tile) {
  return Access{.buffer = buf, .kind = kind, .unit = unit, .index = index, .bound = bound, .block = {x, b, h},
                .segment = b, .row = row, .head = h, .tile = tile};
}

// The CTAs of dot_do_o and convert_dQ for head h (their grid: (grid_m, N, H)) in launch
// order, the m blocks at and past the segment's exit skipped:
// f(segment b, its BackwardSegment, m block, its QTile, the CTA's program index).
template <class F>
void for_each_q_tile_cta(const Ctx& c, int64_t h, F&& f) {
  const fa2::bwd::Normalized& kn = c.bw.kernel;
  for (int64_t b = 0; b < c.N; ++b) {
    const ref::BackwardSegment s = ref::backward_segment(c.at, b);
    for (int64_t m = 0; m < kn.grid_m; ++m) {
      const fa2::bwd::QTile t = fa2::bwd::q_tile(m, s.len_q, c.bm);
      if (t.exits) break;
      f(b, s, m, t, order::grid_linear(uint64_t(m), uint64_t(b), uint64_t(h), uint64_t(kn.grid_m), uint64_t(c.N)));
    }
  }
}

// dot_do_o for one head: softmax_d = rowsum(dO * O) and the dq_accum tile cleared.
void dot_do_o(const Ctx& c, int64_t h, std::vector<float>& softmax_d, std::vector<float>& dq_accum, AccessRecord& rec) {
  const fa2::bwd::Normalized& kn = c.bw.kernel;
  const fa2::bwd::DqAccumShape& a = c.bw.dq_accum;
  const int64_t sd_n = c.bw.softmax_d.elements(), acc_n = a.elements();
  for_each_q_tile_cta(c, h, [&](int64_t b, const ref::BackwardSegment& s, int64_t m, const fa2::bwd::QTile&, uint64_t program) {
    const int64_t off = fa2::bwd::dq_accum_offset(c.bw.release.dq_offset, fa2::bwd::DqKernel::per_tile, a, s.cu_q, b, h,
                                                  m, m, c.bm, 0);
    for (int64_t i = m * c.bm; i < (m + 1) * c.bm; ++i) {
      const int64_t r = s.start_q + i;
      float d = 0.f;
      if (i < s.len_q) {
        if (r < c.total_q) {
          const float* o = c.out + (r * c.H + h) * c.D;
          const float* g = c.dout + (r * c.H + h) * c.D;
          for (int64_t e = 0; e < c.D; ++e) d += g[e] * o[e];
        } else {
          rec.note(order::key(program, fa2::bwd::order_class::kDotReads, i),
                   acc(Buffer::dout, AccessKind::read, Unit::rows, r, c.total_q, m, b, h, r, m), 2);
        }
      }
      const int64_t idx = fa2::bwd::softmax_d_index(c.bw.softmax_d, s.cu_q, b, h, i);
      const uint64_t key = order::key(program, fa2::bwd::order_class::kDotSoftmaxD, i);
      if (idx < 0 || idx >= sd_n) {
        rec.note(key, acc(Buffer::softmax_d, AccessKind::write, Unit::elements, idx, sd_n, m, b, h, r, m));
      } else if (!fa2::bwd::softmax_d_in_head(c.bw.softmax_d, h, idx)) {
        Access a = acc(Buffer::softmax_d, AccessKind::write, Unit::elements, idx, sd_n, m, b, h, r, m);
        a.region = Region::head;
        rec.note(key, a);
      } else {
        softmax_d[static_cast<size_t>(idx)] = d;
      }
      if (kn.deterministic) continue;
      const int64_t e0 = off + (i - m * c.bm) * a.row_stride();
      if (e0 >= 0 && e0 + a.d_rounded <= acc_n)
        std::fill_n(dq_accum.begin() + e0, a.d_rounded, 0.f);
      else
        rec.note(order::key(program, fa2::bwd::order_class::kDotClear, i),
                 acc(Buffer::dq_accum, AccessKind::write, Unit::elements, e0, acc_n, m, b, h, r, m),
                 uint64_t(a.d_rounded));
    }
  });
}

struct KeyGrad {
  std::vector<float> kb, vb, dk, dv, dqrow;
};

// dq_dk_dv for one head: every key block of every segment in launch order.
template <ElemType P>
void dq_dk_dv(const Ctx& c, int64_t h, const std::vector<float>& softmax_d, std::vector<float>& dq_accum,
              std::vector<float>& dk_exp, std::vector<float>& dv_exp, std::vector<uint32_t>* dkv_writes,
              AccessRecord& rec, double& macs) {
  const fa2::bwd::Normalized& kn = c.bw.kernel;
  const fa2::bwd::DqAccumShape& a = c.bw.dq_accum;
  const int64_t sd_n = c.bw.softmax_d.elements(), acc_n = a.elements(), lse_n = c.at.lse_elements;
  const fa2::LseShape lse_shape = c.at.lse_shape();
  const int64_t D = c.D, H = c.H, Hk = c.Hk, hk = fa2::bwd::kv_head(h, c.G);
  const bool values = !c.sampled;  // a sampled forward leaves O and the LSE of most rows unknown
  KeyGrad w;
  w.kb.resize(static_cast<size_t>(c.bn * D));
  w.vb.resize(w.kb.size());
  w.dk.resize(w.kb.size());
  w.dv.resize(w.kb.size());
  w.dqrow.resize(static_cast<size_t>(D));
  for (int64_t b = 0; b < c.N; ++b) {
    const ref::BackwardSegment s = ref::backward_segment(c.at, b);
    for (int64_t n = 0; n < kn.n_blocks; ++n) {
      const fa2::bwd::KeyBlockRange r = fa2::bwd::key_block_range(n, s.len_q, s.len_k, kn.flags);
      if (r.exits) break;
      const int64_t x = kn.deterministic ? n % kn.grid_x : n;
      const int64_t split = fa2::bwd::split_of(n, kn);
      const uint64_t program = order::grid_linear(uint64_t(x), uint64_t(b), uint64_t(h), uint64_t(kn.grid_x), uint64_t(c.N));
      const int64_t nk = r.key_end - r.key_begin;
      // key rows inside k/v (rows past them: refused reads and writes)
      const int64_t k_in = std::clamp<int64_t>(c.total_k - (s.start_k + r.key_begin), 0, nk);
      auto note_keys = [&](AccessKind kind, uint32_t cls, Buffer kb, Buffer vb) {
        if (k_in >= nk) return;
        const int64_t j = r.key_begin + k_in, row = s.start_k + j;
        rec.note(order::key(program, cls, j), acc(kb, kind, Unit::rows, row, c.total_k, x, b, h, row, n), uint64_t(nk - k_in));
        rec.note(order::key(program, cls, j | int64_t(order::kValueBit)),
                 acc(vb, kind, Unit::rows, row, c.total_k, x, b, h, row, n), uint64_t(nk - k_in));
      };
      auto write_kv = [&](bool zeros) {
        for (int64_t jj = 0; jj < k_in; ++jj) {
          const int64_t row = s.start_k + r.key_begin + jj;
          float* dko = dk_exp.data() + (row * H + h) * D;
          float* dvo = dv_exp.data() + (row * H + h) * D;
          for (int64_t e = 0; e < D; ++e) {
            dko[e] = zeros ? 0.f : rnd<P>(w.dk[static_cast<size_t>(jj * D + e)] * c.scale);
            dvo[e] = zeros ? 0.f : rnd<P>(w.dv[static_cast<size_t>(jj * D + e)]);
          }
          if (dkv_writes) ++(*dkv_writes)[static_cast<size_t>(row)];
        }
        note_keys(AccessKind::write, fa2::bwd::order_class::kMainDkDv, Buffer::dk, Buffer::dv);
      };
      if (r.empty) {
        write_kv(true);
        continue;
      }
      note_keys(AccessKind::read, fa2::bwd::order_class::kMainKeyReads, c.k_buf, Buffer::v);
      for (int64_t jj = 0; jj < nk; ++jj) {
        const int64_t row = s.start_k + r.key_begin + jj;
        const bool in = jj < k_in;
        for (int64_t e = 0; e < D; ++e) {
          w.kb[static_cast<size_t>(jj * D + e)] = in ? c.k[(row * Hk + hk) * D + e] : 0.f;
          w.vb[static_cast<size_t>(jj * D + e)] = in ? c.v[(row * Hk + hk) * D + e] : 0.f;
        }
      }
      std::fill(w.dk.begin(), w.dk.end(), 0.f);
      std::fill(w.dv.begin(), w.dv.end(), 0.f);
      for (int64_t m = r.m_max - 1; m >= r.m_min; --m) {
        const int64_t off = fa2::bwd::dq_accum_offset(c.bw.release.dq_offset, fa2::bwd::DqKernel::dq_dk_dv, a, s.cu_q, b,
                                                      h, m, r.m_max - 1, c.bm, split);
        for (int64_t i = m * c.bm; i < (m + 1) * c.bm; ++i) {
          const int64_t qr = s.start_q + i;
          // softmax_d: every row of the tile
          const int64_t sdi = fa2::bwd::softmax_d_index(c.bw.softmax_d, s.cu_q, b, h, i);
          const bool sd_ok = sdi >= 0 && sdi < sd_n;
          if (!sd_ok)
            rec.note(order::key(program, fa2::bwd::order_class::kMainQueryReads, i),
                     acc(Buffer::softmax_d, AccessKind::read, Unit::elements, sdi, sd_n, x, b, h, qr, m));
          const int64_t e0 = off + (i - m * c.bm) * a.row_stride();
          const bool acc_ok = e0 >= 0 && e0 + a.d_rounded <= acc_n;
          if (!acc_ok)
            rec.note(order::key(program, fa2::bwd::order_class::kMainDqAccum, i),
                     acc(Buffer::dq_accum, AccessKind::write, Unit::elements, e0, acc_n, x, b, h, qr, m),
                     uint64_t(a.d_rounded));
          if (i >= s.len_q) continue;  // q, dO and the LSE are predicated: the row adds 0
          const bool q_ok = qr < c.total_q;
          if (!q_ok) {
            rec.note(order::key(program, fa2::bwd::order_class::kMainQueryReads, i),
                     acc(c.q_buf, AccessKind::read, Unit::rows, qr, c.total_q, x, b, h, qr, m), 2);
            continue;  // q and dO read as 0: nothing to add
          }
          const int64_t li = fa2::lse_index(lse_shape, false, s.cu_q, b, h, h, i);
          const bool lse_ok = li >= 0 && li < lse_n;
          if (!lse_ok)
            rec.note(order::key(program, fa2::bwd::order_class::kMainQueryReads, i),
                     acc(Buffer::lse, AccessKind::read, Unit::elements, li, lse_n, x, b, h, qr, m));
          if (!values && !c.at.sample[static_cast<size_t>(qr)]) continue;
          const float L = lse_ok ? c.lse[li] : 0.f;
          const float Dsum = sd_ok ? softmax_d[static_cast<size_t>(sdi)] : 0.f;
          const float* qi = c.q + (qr * H + h) * D;
          const float* gi = c.dout + (qr * H + h) * D;
          const fa2::KeyLimits kl = fa2::row_keys(i, s.len_q, s.len_k, kn.flags);
          const int64_t lo = std::max(kl.lo, r.key_begin), hi = std::min(kl.hi, r.key_end);
          std::fill(w.dqrow.begin(), w.dqrow.end(), 0.f);
          for (int64_t j = lo; j < hi; ++j) {
            const int64_t jj = j - r.key_begin;
            const float* kj = w.kb.data() + jj * D;
            const float* vj = w.vb.data() + jj * D;
            float sc = 0.f, dp = 0.f;
            dot2(qi, kj, gi, vj, D, sc, dp);
            float score = sc * c.scale, dfac = 1.f;
            if (c.softcap > 0.f) {
              const float t = std::tanh(sc * c.scale / c.softcap);
              score = c.softcap * t;
              dfac = 1.f - t * t;
            }
            const float p = std::exp(score - L);
            const float ds = rnd<P>(p * (dp - Dsum) * dfac);
            const float pr = rnd<P>(p);
            for (int64_t e = 0; e < D; ++e) w.dqrow[static_cast<size_t>(e)] += ds * kj[e];
            if (!values) continue;  // sampled: dk and dv are not computed
            float* dkj = w.dk.data() + jj * D;
            float* dvj = w.dv.data() + jj * D;
            for (int64_t e = 0; e < D; ++e) {
              dkj[e] += ds * qi[e];
              dvj[e] += pr * gi[e];
            }
          }
          macs += double(hi > lo ? hi - lo : 0) * double(D) * (values ? 5.0 : 3.0);
          if (acc_ok)
            for (int64_t e = 0; e < D; ++e) dq_accum[static_cast<size_t>(e0 + e)] += w.dqrow[static_cast<size_t>(e)];
        }
      }
      if (values) write_kv(false);
      else {
        for (int64_t jj = 0; jj < k_in; ++jj) {  // the rows are written; their values are not computed
          const int64_t row = s.start_k + r.key_begin + jj;
          if (dkv_writes) ++(*dkv_writes)[static_cast<size_t>(row)];
        }
        note_keys(AccessKind::write, fa2::bwd::order_class::kMainDkDv, Buffer::dk, Buffer::dv);
      }
    }
  }
}

// convert_dQ for one head.
template <ElemType P>
void convert_dq(const Ctx& c, int64_t h, const std::vector<float>& dq_accum, std::vector<float>& dq,
                std::vector<uint32_t>* dq_writes, AccessRecord& rec) {
  const fa2::bwd::Normalized& kn = c.bw.kernel;
  const fa2::bwd::DqAccumShape& a = c.bw.dq_accum;
  const int64_t acc_n = a.elements();
  std::vector<float> row(static_cast<size_t>(c.D));
  for_each_q_tile_cta(c, h, [&](int64_t b, const ref::BackwardSegment& s, int64_t m, const fa2::bwd::QTile& t, uint64_t program) {
    for (int64_t i = m * c.bm; i < (m + 1) * c.bm; ++i) {
      const int64_t r = s.start_q + i;
      std::fill(row.begin(), row.end(), 0.f);
      for (int64_t sp = 0; sp < kn.nsplits; ++sp) {
        const int64_t off = fa2::bwd::dq_accum_offset(c.bw.release.dq_offset, fa2::bwd::DqKernel::per_tile, a, s.cu_q, b,
                                                      h, m, m, c.bm, sp);
        const int64_t e0 = off + (i - m * c.bm) * a.row_stride();
        if (e0 >= 0 && e0 + a.d_rounded <= acc_n) {
          for (int64_t e = 0; e < c.D; ++e) row[static_cast<size_t>(e)] += dq_accum[static_cast<size_t>(e0 + e)];
        } else {
          rec.note(order::key(program, fa2::bwd::order_class::kConvertRead, i),
                   acc(Buffer::dq_accum, AccessKind::read, Unit::elements, e0, acc_n, m, b, h, r, m),
                   uint64_t(a.d_rounded));
        }
      }
      if (i >= t.row_end) continue;
      if (r >= c.total_q) {
        rec.note(order::key(program, fa2::bwd::order_class::kConvertWrite, i),
                 acc(Buffer::dq, AccessKind::write, Unit::rows, r, c.total_q, m, b, h, r, m));
        continue;
      }
      float* o = dq.data() + (r * c.H + h) * c.D;
      for (int64_t e = 0; e < c.D; ++e) o[e] = rnd<P>(row[static_cast<size_t>(e)] * c.scale);
      if (dq_writes) ++(*dq_writes)[static_cast<size_t>(r)];
    }
  });
}

template <ElemType P>
void run_backward(const Ctx& c, AttentionBackwardObservation& ob, int threads) {
  const BackwardPlan& bw = c.bw;
  const fa2::bwd::Normalized& kn = bw.kernel;
  const int64_t H = c.H, D = c.D;
  std::vector<float> dq_accum(static_cast<size_t>(bw.dq_accum.elements()), kn.deterministic ? 0.f : kPoison);
  std::vector<float> softmax_d(static_cast<size_t>(bw.softmax_d.elements()), kPoison);
  std::vector<float> dk_exp(static_cast<size_t>(c.total_k * H * D), kPoison), dv_exp(dk_exp.size(), kPoison);
  ob.dq.assign(static_cast<size_t>(c.total_q * H * D), kPoison);
  ob.dq_writes.assign(static_cast<size_t>(c.total_q), 0);
  ob.dkv_writes.assign(static_cast<size_t>(c.total_k), 0);
  if (!kn.launches) {  // max_seqlen_q <= 0: dk, dv zero-filled, no launch
    std::fill(dk_exp.begin(), dk_exp.end(), 0.f);
    std::fill(dv_exp.begin(), dv_exp.end(), 0.f);
    std::fill(ob.dkv_writes.begin(), ob.dkv_writes.end(), 1u);
  } else {
    const int workers = static_cast<int>(std::clamp<int64_t>(threads, 1, H));
    std::vector<AccessRecord> r1(static_cast<size_t>(H)), r2(r1.size()), r3(r1.size());
    std::vector<double> macs(static_cast<size_t>(H), 0.0);
    parallel_for(workers, H, 1, [&](int64_t h, int) { dot_do_o(c, h, softmax_d, dq_accum, r1[static_cast<size_t>(h)]); });
    parallel_for(workers, H, 1, [&](int64_t h, int) {
      dq_dk_dv<P>(c, h, softmax_d, dq_accum, dk_exp, dv_exp, h == 0 ? &ob.dkv_writes : nullptr, r2[static_cast<size_t>(h)],
                  macs[static_cast<size_t>(h)]);
    });
    parallel_for(workers, H, 1,
                 [&](int64_t h, int) { convert_dq<P>(c, h, dq_accum, ob.dq, h == 0 ? &ob.dq_writes : nullptr, r3[static_cast<size_t>(h)]); });
    for (int64_t h = 0; h < H; ++h) {
      ob.dot_do_o.merge(r1[static_cast<size_t>(h)]);
      ob.dq_dk_dv.merge(r2[static_cast<size_t>(h)]);
      ob.convert_dq.merge(r3[static_cast<size_t>(h)]);
    }
    double total = 0;
    for (double m : macs) total += m;
    ob.facts.backward_macs = total;
  }
  // dk, dv: the expanded (total_k, H, D) copies summed over each group (at::sum_out in the dtype)
  const int64_t Hk = c.Hk, G = c.G;
  ob.dk.assign(static_cast<size_t>(c.total_k * Hk * D), 0.f);
  ob.dv.assign(ob.dk.size(), 0.f);
  parallel_for(threads, c.total_k, 256, [&](int64_t row, int) {
    for (int64_t hk = 0; hk < Hk; ++hk)
      for (int64_t e = 0; e < D; ++e) {
        float sk = 0.f, sv = 0.f;
        for (int64_t g = 0; g < G; ++g) {
          sk += dk_exp[static_cast<size_t>((row * H + hk * G + g) * D + e)];
          sv += dv_exp[static_cast<size_t>((row * H + hk * G + g) * D + e)];
        }
        ob.dk[static_cast<size_t>((row * Hk + hk) * D + e)] = G == 1 ? sk : rnd<P>(sk);
        ob.dv[static_cast<size_t>((row * Hk + hk) * D + e)] = G == 1 ? sv : rnd<P>(sv);
      }
  });
}

}  // namespace

AttentionBackwardObservation fa2_varlen_backward(const ExecPlan& plan, const float* q, const float* k, const float* v,
                                                 const float* out, const float* lse, const float* dout, int threads) {
  const AttentionPlan& at = plan.attention;
  const BackwardPlan& bw = plan.backward;
  AttentionBackwardObservation ob;
  ob.ran = true;
  const int64_t H = plan.num_heads, Hk = plan.num_kv_heads;
  Ctx c{plan, at, bw, q, k, v, out, lse, dout,
        H, Hk, plan.head_dim, std::max<int64_t>(1, H / std::max<int64_t>(1, Hk)),
        std::max<int64_t>(at.total_q, 0), std::max<int64_t>(at.total_k, 0),
        std::min<int64_t>(at.num_segments, static_cast<int64_t>(at.cu_seqlens_q.size()) - 1),
        bw.kernel.tile.block_m, bw.kernel.tile.block_n,
        at.softmax_scale, at.softcap, !at.sample.empty(),
        plan.rotary.enabled ? Buffer::q_rot : Buffer::q, plan.rotary.enabled ? Buffer::k_rot : Buffer::k};
  c.N = std::max<int64_t>(0, std::min<int64_t>(c.N, static_cast<int64_t>(at.cu_seqlens_k.size()) - 1));
  switch (plan.elem) {
    case ElemType::bf16: run_backward<ElemType::bf16>(c, ob, threads); break;
    case ElemType::fp16: run_backward<ElemType::fp16>(c, ob, threads); break;
    default: run_backward<ElemType::fp32>(c, ob, threads); break;
  }
  ref::MisrouteResult mr = ref::backward_misroutes(plan);
  ob.dq_misrouted = std::move(mr.rows);
  ob.misroute = mr.misroute;
  if (c.sampled) {
    ob.facts.sampled = true;
    ob.detail = "dq computed for the sampled rows only, dk and dv values not computed (budget); offsets, accesses and "
                "coverage checked for every row";
  }
  return ob;
}

}  // namespace ad::cpu
