// CPU twin of the checked FA2 varlen forward: the kernel's grid, per-CTA exits, key-block
// loop, online softmax and rounding, with every q/k/v/out/lse access checked against its
// buffer (flash-attention v2.6.3 csrc/flash_attn/src/flash_fwd_kernel.h
// compute_attn_1rowblock and softmax.h; indexing from exec/semantics.hpp).
//
// Work is split over CTAs (m_block, bidb, bidh). Rows written by several CTAs (overlapping
// segments) are resolved before computing: the last CTA in launch order (largest bidb)
// keeps the row, so the output is deterministic and threads never write the same row.
#if defined(__GNUC__) && !defined(__clang__)  // clang has no optimize pragma (it contracts a*b+c within an expression by default)
#pragma GCC optimize("fp-contract=fast")
#endif
#pragma GCC diagnostic ignored "-Wpsabi"  // vector helpers are always inlined: no ABI boundary

#include <cmath>
#include <cstring>
#include <limits>

#include "exec/cpu_kernels.hpp"

namespace ad::cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// 2^x in fp32, branch-free (vectorises): range reduction to [-0.5, 0.5] and a degree-7
// polynomial (error below 1 ulp); flushes results below 2^-126 to 0 like ex2.approx.ftz, and
// returns NaN for NaN like it (a poisoned row's scores are NaN). The clamp sends NaN to -127
// so the float-to-int conversion below is always defined.
__attribute__((always_inline)) inline float exp2_vec(float x) {
  const float xc = x >= -127.f ? (x <= 127.f ? x : 127.f) : -127.f;
  const float n = __builtin_rintf(xc);
  const float f = xc - n;
  float p = 1.5252734e-5f;
  p = p * f + 1.5403530e-4f;
  p = p * f + 1.3333558e-3f;
  p = p * f + 9.6181291e-3f;
  p = p * f + 5.5504109e-2f;
  p = p * f + 2.4022651e-1f;
  p = p * f + 6.9314718e-1f;
  p = p * f + 1.0f;
  int32_t e;
  const int32_t ni = static_cast<int32_t>(n);
  e = (ni + 127) << 23;
  float scale;
  std::memcpy(&scale, &e, sizeof scale);
  const float r = p * scale;
  return x != x ? x : x < -126.f ? 0.f : (x > 128.f ? std::numeric_limits<float>::infinity() : r);
}

struct RowDesc {
  const float* q;    // D values (nullptr: read out of bounds, zeros)
  float* out;        // D values to write
  float* lse;        // one value (nullptr: out of bounds)
  int64_t lo, hi;    // visible keys of the segment
  int32_t acc_slot;  // index into the scratch accumulators
};

// Scratch of one worker. Rows of V and of the accumulators are padded to Dp (a multiple of
// 16 floats) so the register-blocked loops below run on whole vectors.
struct Scratch {
  std::vector<float> kT, vb, s, p, acc, rmax, rsum, zeros;
  int64_t Dp = 0;
  void ensure(int64_t D, int64_t BN, int64_t BM) {
    Dp = (D + 15) / 16 * 16;
    kT.assign(static_cast<size_t>(Dp * BN), 0.f);
    vb.assign(static_cast<size_t>(BN * Dp), 0.f);
    s.resize(static_cast<size_t>(BM * BN));
    p.resize(static_cast<size_t>(BM * BN));
    acc.resize(static_cast<size_t>(BM * Dp));
    rmax.resize(static_cast<size_t>(BM));
    rsum.resize(static_cast<size_t>(BM));
    zeros.assign(static_cast<size_t>(Dp), 0.f);
  }
};

struct KeySource {
  const float* k;       // packed k (total_k, Hk, D)
  const float* v;
  int64_t row_elems;    // Hk * D
  int64_t head_off;     // kv_head * D
  int64_t start;        // uint32(cu_k[b]) as a row
  int64_t total;        // total_k
};

struct Numerics {
  int64_t D, BN;
  float scale_log2;     // softmax_scale_log2 (softcap * log2e with softcap)
  float scale_softmax;  // for the LSE
  float softcap_in;     // softmax_scale / softcap (0: off)
};

// 16 fp32 lanes; GCC lowers it to SSE, AVX2 or AVX-512 per clone. Unaligned loads via memcpy.
typedef float vf16 __attribute__((vector_size(64)));
__attribute__((always_inline)) inline vf16 vload(const float* p) {
  vf16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
__attribute__((always_inline)) inline void vstore(float* p, const vf16& v) { std::memcpy(p, &v, sizeof v); }

// S = Q K^T for two rows and NV*16 keys starting at key column c of the transposed block:
// the accumulators stay in registers over the head dim (the kernel's first gemm).
template <int NV>
__attribute__((always_inline)) inline void qk_pair(const float* __restrict q0, const float* __restrict q1,
                                                   const float* __restrict kT, int64_t D, int64_t BN, int64_t c,
                                                   float* __restrict s0, float* __restrict s1) {
  vf16 a0[NV], a1[NV];
  for (int v = 0; v < NV; ++v) a0[v] = a1[v] = vf16{};
  for (int64_t d = 0; d < D; ++d) {
    const float* kr = kT + d * BN + c;
    const vf16 b0 = vf16{} + q0[d], b1 = vf16{} + q1[d];
    for (int v = 0; v < NV; ++v) {
      const vf16 kv = vload(kr + 16 * v);
      a0[v] += b0 * kv;
      a1[v] += b1 * kv;
    }
  }
  for (int v = 0; v < NV; ++v) {
    vstore(s0 + c + 16 * v, a0[v]);
    vstore(s1 + c + 16 * v, a1[v]);
  }
}

// O += P V for two rows over keys [lo, hi) and NV*16 columns from c (the second gemm).
template <int NV>
__attribute__((always_inline)) inline void pv_pair(const float* __restrict p0, const float* __restrict p1,
                                                   const float* __restrict vb, int64_t Dp, int64_t lo, int64_t hi,
                                                   int64_t c, float* __restrict o0, float* __restrict o1) {
  vf16 a0[NV], a1[NV];
  for (int v = 0; v < NV; ++v) {
    a0[v] = vload(o0 + c + 16 * v);
    a1[v] = vload(o1 + c + 16 * v);
  }
  for (int64_t j = lo; j < hi; ++j) {
    const float* vr = vb + j * Dp + c;
    const vf16 b0 = vf16{} + p0[j], b1 = vf16{} + p1[j];
    for (int v = 0; v < NV; ++v) {
      const vf16 x = vload(vr + 16 * v);
      a0[v] += b0 * x;
      a1[v] += b1 * x;
    }
  }
  for (int v = 0; v < NV; ++v) {
    vstore(o0 + c + 16 * v, a0[v]);
    vstore(o1 + c + 16 * v, a1[v]);
  }
}

// One block of keys [j0, j0 + nb) for every row of a CTA: the body of the kernel's n-block
// loop (softmax_rescale_o between the two gemms; P converted to the input dtype for PV).
template <num::Precision P>
AD_CLONES void block_step(const RowDesc* rows, int nrows, const KeySource& ks, int64_t j0, int64_t nb, const Numerics& nm,
                          Scratch& sc, double& macs) {
  const int64_t D = nm.D, BN = nm.BN, Dp = sc.Dp;
  float* __restrict kT = sc.kT.data();
  float* __restrict vb = sc.vb.data();
  // load K (transposed) and V; out-of-bounds rows were recorded by the caller and read as 0
  for (int64_t jj = 0; jj < BN; ++jj) {
    const int64_t kr = ks.start + j0 + jj;
    const bool ok = jj < nb && kr >= 0 && kr < ks.total;
    const float* krow = ok ? ks.k + kr * ks.row_elems + ks.head_off : sc.zeros.data();
    const float* vrow = ok ? ks.v + kr * ks.row_elems + ks.head_off : sc.zeros.data();
    for (int64_t d = 0; d < D; ++d) kT[d * BN + jj] = krow[d];
    std::memcpy(vb + jj * Dp, vrow, static_cast<size_t>(D) * sizeof(float));
  }
  // the rows with a visible key in this block
  int act[512];
  int nact = 0;
  for (int r = 0; r < nrows; ++r)
    if (std::min<int64_t>(rows[r].hi - j0, nb) > std::max<int64_t>(rows[r].lo - j0, 0)) act[nact++] = r;
  if (nact == 0) return;
  // scores, two rows at a time
  for (int a = 0; a < nact; a += 2) {
    const RowDesc& r0 = rows[act[a]];
    const RowDesc& r1 = rows[act[a + 1 < nact ? a + 1 : a]];
    const float* q0 = r0.q ? r0.q : sc.zeros.data();
    const float* q1 = r1.q ? r1.q : sc.zeros.data();
    float* s0 = sc.s.data() + static_cast<int64_t>(r0.acc_slot) * BN;
    float* s1 = sc.s.data() + static_cast<int64_t>(r1.acc_slot) * BN;
    int64_t c = 0;
    for (; c + 64 <= BN; c += 64) qk_pair<4>(q0, q1, kT, D, BN, c, s0, s1);
    for (; c < BN; c += 32) qk_pair<2>(q0, q1, kT, D, BN, c, s0, s1);
  }
  // online softmax per row
  for (int a = 0; a < nact; ++a) {
    const RowDesc& row = rows[act[a]];
    const size_t slot = static_cast<size_t>(row.acc_slot);
    float* __restrict s = sc.s.data() + static_cast<int64_t>(slot) * BN;
    float* __restrict pr = sc.p.data() + static_cast<int64_t>(slot) * BN;
    const int64_t lo = std::max<int64_t>(row.lo - j0, 0), hi = std::min<int64_t>(row.hi - j0, nb);
    if (nm.softcap_in > 0.f)
      for (int64_t jj = 0; jj < BN; ++jj) s[jj] = std::tanh(s[jj] * nm.softcap_in);
    const float m_prev = sc.rmax[slot];
    float m_new = m_prev;
    for (int64_t jj = 0; jj < BN; ++jj) {
      s[jj] = (jj >= lo && jj < hi) ? s[jj] : kNegInf;
      m_new = s[jj] > m_new ? s[jj] : m_new;
    }
    // softmax_rescale_o with Check_inf (varlen): a still-empty row rescales by exp2(-inf) = 0
    const float cur = m_new == kNegInf ? 0.f : m_new;
    const float rescale = exp2_vec((m_prev - cur) * nm.scale_log2);
    float* __restrict acc = sc.acc.data() + static_cast<int64_t>(slot) * Dp;
    for (int64_t d = 0; d < Dp; ++d) acc[d] *= rescale;
    const float max_scaled = m_new == kNegInf ? 0.f : m_new * nm.scale_log2;
    for (int64_t jj = 0; jj < BN; ++jj) s[jj] = exp2_vec(s[jj] * nm.scale_log2 - max_scaled);
    float block_sum = 0.f;
    for (int64_t jj = lo; jj < hi; ++jj) block_sum += s[jj];  // the row sum keeps fp32 P
    for (int64_t jj = 0; jj < BN; ++jj) pr[jj] = num::round_to(P, s[jj]);  // P in the input dtype
    sc.rmax[slot] = m_new;
    sc.rsum[slot] = sc.rsum[slot] * rescale + block_sum;
    macs += double(nb) * double(D) + double(hi - lo) * double(D);
  }
  // O += P V, two rows at a time over the union of their visible keys (P is 0 elsewhere)
  for (int a = 0; a < nact; a += 2) {
    const bool pair = a + 1 < nact;
    const RowDesc& r0 = rows[act[a]];
    const RowDesc& r1 = rows[act[pair ? a + 1 : a]];
    const int64_t lo = std::max<int64_t>(std::min(r0.lo, r1.lo) - j0, 0);
    const int64_t hi = std::min<int64_t>(std::max(r0.hi, r1.hi) - j0, nb);
    const float* p0 = sc.p.data() + static_cast<int64_t>(r0.acc_slot) * BN;
    const float* p1 = sc.p.data() + static_cast<int64_t>(r1.acc_slot) * BN;
    float* o0 = sc.acc.data() + static_cast<int64_t>(r0.acc_slot) * Dp;
    float* o1 = pair ? sc.acc.data() + static_cast<int64_t>(r1.acc_slot) * Dp : sc.zeros.data();
    if (!pair) {
      // single row: accumulate into a throw-away copy for the second lane
      thread_local std::vector<float> dummy;
      dummy.assign(static_cast<size_t>(Dp), 0.f);
      o1 = dummy.data();
    }
    int64_t c = 0;
    for (; c + 64 <= Dp; c += 64) pv_pair<4>(p0, p1, vb, Dp, lo, hi, c, o0, o1);
    for (; c + 32 <= Dp; c += 32) pv_pair<2>(p0, p1, vb, Dp, lo, hi, c, o0, o1);
    for (; c < Dp; c += 16) pv_pair<1>(p0, p1, vb, Dp, lo, hi, c, o0, o1);
  }
}

// normalize_softmax_lse and the conversion of O to the input dtype.
template <num::Precision P>
void finish_rows(const RowDesc* rows, int nrows, const Numerics& nm, Scratch& sc, int64_t& no_keys) {
  const int64_t D = nm.D;
  for (int r = 0; r < nrows; ++r) {
    const RowDesc& row = rows[r];
    const float sum = sc.rsum[static_cast<size_t>(row.acc_slot)];
    const float m = sc.rmax[static_cast<size_t>(row.acc_slot)];
    const bool empty = sum == 0.f || sum != sum;
    const float inv = empty ? 1.f : 1.f / sum;
    const float* acc = sc.acc.data() + static_cast<int64_t>(row.acc_slot) * sc.Dp;
    for (int64_t d = 0; d < D; ++d) row.out[d] = num::round_to(P, acc[d] * inv);
    if (row.lse) *row.lse = empty ? std::numeric_limits<float>::infinity() : m * nm.scale_softmax + std::log(sum);
    no_keys += empty ? 1 : 0;
  }
}

template <num::Precision P>
void run_rows(RowDesc* rows, int nrows, const KeySource& ks, int64_t key_begin, int64_t key_end, const Numerics& nm,
              Scratch& sc, double& macs, int64_t& no_keys) {
  for (int r = 0; r < nrows; ++r) {
    sc.rmax[static_cast<size_t>(r)] = kNegInf;
    sc.rsum[static_cast<size_t>(r)] = 0.f;
    std::fill_n(sc.acc.data() + static_cast<int64_t>(r) * sc.Dp, sc.Dp, 0.f);
    rows[r].acc_slot = r;
  }
  // blocks from n_block_max - 1 down to n_block_min, as the kernel iterates
  if (key_end > key_begin) {
    const int64_t n_min = key_begin / nm.BN, n_max = (key_end + nm.BN - 1) / nm.BN;
    for (int64_t n = n_max - 1; n >= n_min; --n) {
      const int64_t j0 = n * nm.BN;
      const int64_t nb = std::min(nm.BN, key_end - j0);
      block_step<P>(rows, nrows, ks, j0, nb, nm, sc, macs);
    }
  }
  finish_rows<P>(rows, nrows, nm, sc, no_keys);
}

struct Tile {
  int32_t b;
  int32_t h;
  int64_t m;
};

}  // namespace

AttentionResult fa2_varlen_forward(const ExecPlan& plan, const float* q, const float* k, const float* v, float* out,
                                   float* lse, int threads) {
  const AttentionPlan& at = plan.attention;
  AttentionResult res;
  const int64_t total_q = std::max<int64_t>(at.total_q, 0), total_k = std::max<int64_t>(at.total_k, 0);
  const int64_t H = at.num_heads, Hk = at.num_kv_heads, D = at.head_dim;
  const int64_t BM = at.flags.block_m, BN = at.flags.block_n;
  const int64_t N = at.num_segments;
  const int64_t lse_n = at.lse_elements;
  const auto& cq = at.cu_seqlens_q;
  const auto& ck = at.cu_seqlens_k;
  auto seg_len_k = [&](int64_t b) -> int32_t {
    if (at.seqused_k) return (*at.seqused_k)[static_cast<size_t>(b)];
    return sem::wrap_sub(ck[static_cast<size_t>(b) + 1], ck[static_cast<size_t>(b)]);
  };
  // rows of segment b as the kernel addresses them
  auto seg_q = [&](int64_t b, int64_t& start, int32_t& len) {
    if (at.swapped) {
      start = b;  // q reshaped to (batch * ngroups, Hk, D): "sequence" b is q row b
      len = static_cast<int32_t>(at.ngroups);
    } else {
      start = sem::fa2_row_offset(cq[static_cast<size_t>(b)]);
      len = sem::wrap_sub(cq[static_cast<size_t>(b) + 1], cq[static_cast<size_t>(b)]);
    }
  };

  // ---- coverage: which segment writes each row (launch order resolves overlaps) ----------
  std::vector<int32_t> count(static_cast<size_t>(total_q), 0), winner(static_cast<size_t>(total_q), -1);
  for (int64_t b = 0; b < N; ++b) {
    int64_t start;
    int32_t len;
    seg_q(b, start, len);
    if (len <= 0) continue;
    if (at.swapped) {
      if (start < total_q) {
        ++count[static_cast<size_t>(start)];
        winner[static_cast<size_t>(start)] = static_cast<int32_t>(b);
      }
      continue;
    }
    const int64_t rows = std::min<int64_t>(len, at.grid_m * BM);  // rows past the grid: never
    const int64_t r0 = std::min(start, total_q), r1 = std::min(start + rows, total_q);
    for (int64_t r = r0; r < r1; ++r) {
      ++count[static_cast<size_t>(r)];
      winner[static_cast<size_t>(r)] = static_cast<int32_t>(b);
    }
  }
  res.written.assign(static_cast<size_t>(total_q), 0);
  res.computed.assign(static_cast<size_t>(total_q), 0);
  for (int64_t r = 0; r < total_q; ++r) {
    const int32_t c = count[static_cast<size_t>(r)];
    res.written[static_cast<size_t>(r)] = c > 0;
    if (c == 0) {
      if (res.rows_never++ == 0) res.first_never = r;
    } else {
      ++res.rows_written;
      if (c > 1 && res.rows_twice++ == 0) {
        res.first_twice = r;
        res.first_twice_count = c;
      }
      if (at.swapped) {
        const int64_t b = winner[static_cast<size_t>(r)];
        const int64_t s0 = cq[static_cast<size_t>(b)], s1 = cq[static_cast<size_t>(b) + 1];
        if (!(s0 <= r && r < s1) && res.rows_foreign++ == 0) {
          res.first_foreign = r;
          res.first_foreign_segment = b;
        }
      }
    }
  }

  // ---- CTAs -----------------------------------------------------------------------------
  // Live CTAs (some row inside q/out) are computed; CTAs entirely past the tensors only
  // record their out-of-bounds accesses.
  const int64_t grid_h = at.grid_h;
  const ExecBuffer q_buf = plan.rotary.enabled ? ExecBuffer::q_rot : ExecBuffer::q;
  const ExecBuffer k_buf = plan.rotary.enabled ? ExecBuffer::k_rot : ExecBuffer::k;
  std::vector<Tile> tiles;
  std::vector<AccessRecord> dead_records;
  AccessRecord dead;
  for (int64_t b = 0; b < N; ++b) {
    int64_t start;
    int32_t len_q;
    seg_q(b, start, len_q);
    if (len_q <= 0) continue;
    const int64_t m_end = std::min<int64_t>(at.grid_m, (int64_t(len_q) + BM - 1) / BM);
    const int64_t live_rows = at.swapped ? (start < total_q ? len_q : 0) : std::max<int64_t>(0, total_q - start);
    const int64_t m_live = std::min<int64_t>(m_end, (live_rows + BM - 1) / BM);
    for (int64_t h = 0; h < grid_h; ++h)
      for (int64_t m = 0; m < m_live; ++m) tiles.push_back({static_cast<int32_t>(b), static_cast<int32_t>(h), m});
    if (m_live < m_end) {
      // dead CTAs: every q read and O write is out of bounds; LSE and K/V accounted per row
      const int32_t len_k = seg_len_k(b);
      const int64_t k_start = sem::fa2_row_offset(ck[static_cast<size_t>(b)]);
      int64_t kv_oob = 0;
      int64_t first_kv = -1;
      const int64_t cap = int64_t{1} << 22;
      for (int64_t m = m_live; m < m_end && m - m_live < cap; ++m) {
        const sem::Fa2TileRange t = sem::fa2_tile_range(m, len_q, len_k, at.flags);
        if (t.exits || t.empty) continue;
        const int64_t lo = std::max(t.key_begin, total_k - k_start);
        if (t.key_end > lo) {
          kv_oob += t.key_end - lo;
          if (first_kv < 0) first_kv = k_start + lo;
        }
      }
      const int64_t rows_dead = std::min<int64_t>(len_q, at.grid_m * BM) - m_live * BM;
      for (int64_t h = 0; h < grid_h; ++h) {
        const uint64_t blk = (static_cast<uint64_t>(h) * static_cast<uint64_t>(N) + static_cast<uint64_t>(b)) *
                                 static_cast<uint64_t>(at.grid_m) + static_cast<uint64_t>(m_live);
        const int64_t row0 = m_live * BM;
        dead.note({blk, static_cast<uint64_t>(row0)}, AccessKind::read, q_buf, start + row0, total_q, true,
                  {m_live, b, h}, start + row0, b, h, rows_dead);
        dead.note({blk, (uint64_t{1} << 40) + static_cast<uint64_t>(row0)}, AccessKind::write, ExecBuffer::out,
                  start + row0, total_q, true, {m_live, b, h}, start + row0, b, h, rows_dead);
        if (kv_oob > 0)
          dead.note({blk, uint64_t{1} << 20}, AccessKind::read, k_buf, first_kv, total_k, true,
                    {m_live, b, h}, -1, b, h, 2 * kv_oob);
        if (!at.swapped) {
          const int64_t base = at.unpadded_lse ? sem::fa2_lse_index_unpadded(cq[static_cast<size_t>(b)], 0, h, total_q)
                                               : sem::fa2_lse_index_padded(b, h, 0, H, at.max_seqlen_q);
          const int64_t i0 = base + row0, i1 = base + row0 + rows_dead;
          const int64_t in0 = std::max<int64_t>(i0, 0), in1 = std::min<int64_t>(i1, lse_n);
          const int64_t oob = (i1 - i0) - std::max<int64_t>(0, in1 - in0);
          if (oob > 0) {
            const int64_t first_idx = i0 < 0 ? i0 : std::max(i0, lse_n);
            dead.note({blk, (uint64_t{1} << 41)}, AccessKind::write, ExecBuffer::lse, first_idx, lse_n, false,
                      {m_live, b, h}, -1, b, h, oob);
          }
        }
      }
    }
  }
  res.tiles = static_cast<int64_t>(tiles.size());

  const Numerics nm{D, BN,
                    (at.softcap > 0 ? at.softcap : at.softmax_scale) * static_cast<float>(M_LOG2E),
                    at.softcap > 0 ? at.softcap : at.softmax_scale,
                    at.softcap > 0 ? at.softmax_scale / at.softcap : 0.f};
  const bool sampled = !at.sample.empty();
  const int workers = std::max(1, threads);
  std::vector<AccessRecord> records(static_cast<size_t>(workers));
  std::vector<Scratch> scratch(static_cast<size_t>(workers));
  std::vector<double> macs(static_cast<size_t>(workers), 0.0);
  std::vector<int64_t> no_keys(static_cast<size_t>(workers), 0), empty_tiles(static_cast<size_t>(workers), 0);
  for (auto& s : scratch) s.ensure(D, BN, BM);
  std::vector<std::vector<RowDesc>> rowbuf(static_cast<size_t>(workers), std::vector<RowDesc>(static_cast<size_t>(BM)));

  parallel_for(workers, static_cast<int64_t>(tiles.size()), 4, [&](int64_t ti, int w) {
    const Tile& tl = tiles[static_cast<size_t>(ti)];
    const int64_t b = tl.b, h = tl.h, m = tl.m;
    AccessRecord& rec = records[static_cast<size_t>(w)];
    const uint64_t blk =
        (static_cast<uint64_t>(h) * static_cast<uint64_t>(N) + static_cast<uint64_t>(b)) * static_cast<uint64_t>(at.grid_m) +
        static_cast<uint64_t>(m);
    int64_t start;
    int32_t len_q;
    seg_q(b, start, len_q);
    const int32_t len_k = seg_len_k(b);
    sem::Fa2Flags flags = at.flags;
    if (at.swapped) flags.causal = flags.local = false;
    const sem::Fa2TileRange t = sem::fa2_tile_range(m, len_q, len_k, flags);
    if (t.exits) return;
    const int64_t k_start = sem::fa2_row_offset(ck[static_cast<size_t>(b)]);
    const int64_t kv_head = at.swapped ? h : h / std::max<int64_t>(1, H / Hk);
    const std::array<int64_t, 3> cta{m, b, h};
    // K/V rows read by this CTA
    if (!t.empty) {
      const int64_t lo = std::max(t.key_begin, total_k - k_start);
      if (t.key_end > lo) {
        rec.note({blk, (uint64_t{1} << 20) + static_cast<uint64_t>(lo)}, AccessKind::read, k_buf, k_start + lo,
                 total_k, true, cta, k_start + lo, b, at.swapped ? -1 : h, 2 * (t.key_end - lo));
      }
    } else {
      ++empty_tiles[static_cast<size_t>(w)];
    }
    RowDesc* rows = rowbuf[static_cast<size_t>(w)].data();
    int nrows = 0;
    for (int64_t i = t.row_begin; i < t.row_end; ++i) {
      // query row and head this tile row stands for
      const int64_t qrow = at.swapped ? start : start + i;
      const int64_t qhead = at.swapped ? h * at.ngroups + i : h;
      const bool q_ok = qrow < total_q;
      if (!q_ok)
        rec.note({blk, static_cast<uint64_t>(i)}, AccessKind::read, q_buf, qrow, total_q, true, cta, qrow, b, qhead);
      if (!q_ok) {
        rec.note({blk, (uint64_t{1} << 40) + static_cast<uint64_t>(i)}, AccessKind::write, ExecBuffer::out, qrow, total_q,
                 true, cta, qrow, b, qhead);
      }
      int64_t lidx;
      if (at.swapped) lidx = qhead * total_q + start;
      else lidx = at.unpadded_lse ? sem::fa2_lse_index_unpadded(cq[static_cast<size_t>(b)], i, h, total_q)
                                  : sem::fa2_lse_index_padded(b, h, i, H, at.max_seqlen_q);
      const bool lse_ok = lidx >= 0 && lidx < lse_n;
      if (!lse_ok)
        rec.note({blk, (uint64_t{1} << 41) + static_cast<uint64_t>(i)}, AccessKind::write, ExecBuffer::lse, lidx, lse_n,
                 false, cta, qrow, b, qhead);
      if (!q_ok) continue;
      if (winner[static_cast<size_t>(qrow)] != b) continue;  // a later CTA overwrites this row
      if (sampled && !at.sample[static_cast<size_t>(qrow)] && !t.empty) continue;
      RowDesc rd{};
      rd.q = q + qrow * H * D + qhead * D;
      rd.out = out + qrow * H * D + qhead * D;
      rd.lse = lse_ok ? lse + lidx : nullptr;
      if (t.empty) {
        rd.lo = rd.hi = 0;
      } else {
        const sem::KeyLimits kl = sem::fa2_key_limits(i, len_q, len_k, flags, t);
        rd.lo = kl.lo;
        rd.hi = kl.hi;
      }
      rows[nrows++] = rd;
    }
    if (nrows == 0) return;
    const KeySource ks{k, v, Hk * D, kv_head * D, k_start, total_k};
    Scratch& sc = scratch[static_cast<size_t>(w)];
    double& mc = macs[static_cast<size_t>(w)];
    int64_t& nk = no_keys[static_cast<size_t>(w)];
    const int64_t kb = t.empty ? 0 : t.key_begin, ke = t.empty ? 0 : t.key_end;
    switch (plan.precision) {
      case num::Precision::bf16: run_rows<num::Precision::bf16>(rows, nrows, ks, kb, ke, nm, sc, mc, nk); break;
      case num::Precision::fp16: run_rows<num::Precision::fp16>(rows, nrows, ks, kb, ke, nm, sc, mc, nk); break;
      default: run_rows<num::Precision::fp32>(rows, nrows, ks, kb, ke, nm, sc, mc, nk); break;
    }
  });

  // a row counts as computed once its winning CTA produced it (all heads share the flag)
  for (int64_t r = 0; r < total_q; ++r) {
    if (!res.written[static_cast<size_t>(r)]) continue;
    if (!sampled || at.sample[static_cast<size_t>(r)]) res.computed[static_cast<size_t>(r)] = 1;
  }
  // rows of empty CTAs are zero-filled whether sampled or not
  if (sampled) {
    for (int64_t b = 0; b < N; ++b) {
      int64_t start;
      int32_t len_q;
      seg_q(b, start, len_q);
      if (len_q <= 0 || at.swapped) continue;
      const int32_t len_k = seg_len_k(b);
      const int64_t m_end = std::min<int64_t>(at.grid_m, (int64_t(len_q) + BM - 1) / BM);
      for (int64_t m = 0; m < m_end; ++m) {
        const sem::Fa2TileRange t = sem::fa2_tile_range(m, len_q, len_k, at.flags);
        if (t.exits || !t.empty) continue;
        for (int64_t i = t.row_begin; i < t.row_end; ++i) {
          const int64_t r = start + i;
          if (r < total_q && winner[static_cast<size_t>(r)] == b) res.computed[static_cast<size_t>(r)] = 1;
        }
      }
    }
  }
  for (int64_t r = 0; r < total_q; ++r) res.rows_computed += res.computed[static_cast<size_t>(r)];
  for (auto& r : records) res.access.merge(r);
  res.access.merge(dead);
  for (double m : macs) res.macs += m;
  for (int64_t n : no_keys) res.rows_no_keys += n;
  for (int64_t n : empty_tiles) res.empty_tiles += n;
  return res;
}

}  // namespace ad::cpu
