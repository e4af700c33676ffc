// CPU twin of the checked FA2 varlen forward: the kernel's grid, per-CTA exits, key-block
// loop, online softmax and rounding, with every q/k/v/out/lse access checked against its
// buffer (flash-attention v2.6.3 csrc/flash_attn/src/flash_fwd_kernel.h
// compute_attn_1rowblock and softmax.h; indexing from contract/fa2_forward.hpp, the
// definitions the CUDA kernels run).
//
// Work is split over CTAs (m_block, bidb, bidh). Rows written by several CTAs (overlapping
// segments) are resolved before computing: the last CTA in launch order (largest bidb)
// keeps the row, so the output is deterministic and threads never write the same row.
#include "util/vector_loops.hpp"  // first: the compilation settings of the vector loops

#include <cmath>
#include <cstring>
#include <limits>

#include <optional>

#include "contract/fa3_paged.hpp"
#include "exec/cpu/cpu_kernels.hpp"

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
  const float* qv;   // FA3's q_v row (nullptr: no q_v)
  float* out;        // D values to write
  float* lse;        // one value (nullptr: out of bounds)
  int64_t lo, hi;    // visible keys of the segment
  int32_t acc_slot;  // index into the scratch accumulators
};

// Scratch of one worker. Rows of V and of the accumulators are padded to Dp (a multiple of
// 16 floats) so the register-blocked loops below run on whole vectors.
struct Scratch {
  std::vector<float> kT, vb, s, p, acc, rmax, rsum, zeros;
  std::vector<float> vT, s2;  // q_v: V transposed and the q_v . v scores
  int64_t Dp = 0;
  void ensure(int64_t D, int64_t BN, int64_t BM, bool qv) {
    Dp = (D + 15) / 16 * 16;
    kT.assign(static_cast<size_t>(Dp * BN), 0.f);
    if (qv) {
      vT.assign(static_cast<size_t>(Dp * BN), 0.f);
      s2.resize(static_cast<size_t>(BM * BN));
    }
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
  const fa3::PagedKV* paged = nullptr;  // FA3's paged KV: key j is read through the table
  int64_t seq = 0;                      // the segment (the table's row)
  // The row of k / v holding key j of the segment (-1: refused, read as zeros).
  int64_t row(int64_t j) const {
    if (paged) {
      const fa3::PagedRow r = fa3::paged_row(*paged, seq, j);
      return r.status == fa3::PagedStatus::ok ? r.row : -1;
    }
    const int64_t kr = start + j;
    return kr >= 0 && kr < total ? kr : -1;
  }
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
template <ElemType P>
AD_CLONES void block_step(const RowDesc* rows, int nrows, const KeySource& ks, int64_t j0, int64_t nb, const Numerics& nm,
                          Scratch& sc, double& macs) {
  const int64_t D = nm.D, BN = nm.BN, Dp = sc.Dp;
  float* __restrict kT = sc.kT.data();
  float* __restrict vb = sc.vb.data();
  // load K (transposed) and V; out-of-bounds rows were recorded by the caller and read as 0
  const bool with_qv = !sc.vT.empty();
  for (int64_t jj = 0; jj < BN; ++jj) {
    const int64_t kr = jj < nb ? ks.row(j0 + jj) : -1;
    const bool ok = kr >= 0;
    const float* krow = ok ? ks.k + kr * ks.row_elems + ks.head_off : sc.zeros.data();
    const float* vrow = ok ? ks.v + kr * ks.row_elems + ks.head_off : sc.zeros.data();
    for (int64_t d = 0; d < D; ++d) kT[d * BN + jj] = krow[d];
    if (with_qv)
      for (int64_t d = 0; d < D; ++d) sc.vT[static_cast<size_t>(d * BN + jj)] = vrow[d];
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
    if (with_qv) {
      // FA3's q_v: a second gemm into the same fp32 scores, S += Qv V^T (the v rows just loaded)
      const float* x0 = r0.qv ? r0.qv : sc.zeros.data();
      const float* x1 = r1.qv ? r1.qv : sc.zeros.data();
      float* t0 = sc.s2.data() + static_cast<int64_t>(r0.acc_slot) * BN;
      float* t1 = sc.s2.data() + static_cast<int64_t>(r1.acc_slot) * BN;
      c = 0;
      for (; c + 64 <= BN; c += 64) qk_pair<4>(x0, x1, sc.vT.data(), D, BN, c, t0, t1);
      for (; c < BN; c += 32) qk_pair<2>(x0, x1, sc.vT.data(), D, BN, c, t0, t1);
      for (int64_t jj = 0; jj < BN; ++jj) s0[jj] += t0[jj];
      if (s1 != s0)
        for (int64_t jj = 0; jj < BN; ++jj) s1[jj] += t1[jj];
    }
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

// The key blocks of [z0, z1) (whole blocks of the kernel's loop, iterated first: the highest
// ones) when they lie wholly past k/v (a segment running past them): the kernel reads their
// rows as zeros, so every visible score is q . 0 (0, or NaN for a q row holding a non-finite
// value) and P V adds P * 0. block_step's online-softmax update for all of them at once (the
// first block a row sees sets its running max, the others add exp2(-max) per key), so a
// segment of 2^31 phantom keys costs a few operations per row.
template <ElemType P>
void zero_blocks_step(const RowDesc* rows, int nrows, int64_t z0, int64_t z1, const Numerics& nm, Scratch& sc,
                      double& macs) {
  const int64_t D = nm.D, BN = nm.BN, Dp = sc.Dp;
  for (int r = 0; r < nrows; ++r) {
    const RowDesc& row = rows[r];
    const int64_t lo = std::max(row.lo, z0), hi = std::min(row.hi, z1);
    if (hi <= lo) continue;
    bool finite = true;
    for (int64_t d = 0; d < D && row.q; ++d) finite = finite && std::isfinite(row.q[d]);
    for (int64_t d = 0; d < D && row.qv; ++d) finite = finite && std::isfinite(row.qv[d]);
    float score = finite ? 0.f : std::numeric_limits<float>::quiet_NaN();
    if (nm.softcap_in > 0.f) score = std::tanh(score * nm.softcap_in);
    const size_t slot = static_cast<size_t>(row.acc_slot);
    const float m_prev = sc.rmax[slot];
    const float m_new = score > m_prev ? score : m_prev;
    const float cur = m_new == kNegInf ? 0.f : m_new;
    const float rescale = exp2_vec((m_prev - cur) * nm.scale_log2);
    float* acc = sc.acc.data() + static_cast<int64_t>(slot) * Dp;
    for (int64_t d = 0; d < Dp; ++d) acc[d] *= rescale;
    const float max_scaled = m_new == kNegInf ? 0.f : m_new * nm.scale_log2;
    const float p = exp2_vec(score * nm.scale_log2 - max_scaled);
    if (std::isnan(p))  // P V with a NaN P: NaN * 0
      for (int64_t d = 0; d < Dp; ++d) acc[d] = std::numeric_limits<float>::quiet_NaN();
    sc.rmax[slot] = m_new;
    sc.rsum[slot] = sc.rsum[slot] * rescale + p * static_cast<float>(hi - lo);
    // the work block_step counts: every key of each block the row is active in, and the visible ones
    const int64_t first = lo / BN * BN, last = std::min(z1, (hi - 1) / BN * BN + BN);
    macs += double(last - first) * double(D) + double(hi - lo) * double(D);
  }
}

// normalize_softmax_lse and the conversion of O to the input dtype.
template <ElemType P>
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

template <ElemType P>
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
    // the blocks wholly past k/v come first (from the top), all at once
    // (paged: the keys past the end of the table, refused and read as zeros)
    const int64_t zero_from = ks.paged ? fa3::first_key_past_table(*ks.paged, ks.seq) : ks.total - ks.start;
    const int64_t n_zero = std::clamp<int64_t>((zero_from + nm.BN - 1) / nm.BN, n_min, n_max);
    if (n_zero < n_max) zero_blocks_step<P>(rows, nrows, n_zero * nm.BN, key_end, nm, sc, macs);
    for (int64_t n = n_zero - 1; n >= n_min; --n) {
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
                                   float* lse, int threads, const float* qv) {
  const AttentionPlan& at = plan.attention;
  AttentionResult res;
  const int64_t total_q = std::max<int64_t>(at.total_q, 0), total_k = std::max<int64_t>(at.total_k, 0);
  const int64_t H = at.num_heads, Hk = at.num_kv_heads, D = at.head_dim;
  const int64_t BM = at.flags.block_m, BN = at.flags.block_n;
  const int64_t N = at.num_segments;
  const int64_t lse_n = at.lse_elements;
  const fa2::LseShape lse_shape = at.lse_shape();
  const auto& cq = at.cu_seqlens_q;  // the LSE index reads cu_seqlens_q[b] as the kernel does

  // ---- coverage: which segments write each row (the last in launch order keeps it) ------
  res.writes.assign(static_cast<size_t>(total_q), 0);
  std::vector<int32_t> winner(static_cast<size_t>(total_q), -1);
  for (int64_t b = 0; b < N; ++b) {
    const fa2::Segment sg = at.segment(b);
    if (sg.len_q <= 0) continue;
    const int64_t rows = at.swapped ? 1 : std::min<int64_t>(sg.len_q, at.grid_m * BM);  // rows past the grid: never
    const int64_t r0 = std::min(sg.start_q, total_q), r1 = std::min(sg.start_q + rows, total_q);
    for (int64_t r = r0; r < r1; ++r) {
      ++res.writes[static_cast<size_t>(r)];
      winner[static_cast<size_t>(r)] = static_cast<int32_t>(b);
    }
  }
  res.computed.assign(static_cast<size_t>(total_q), 0);

  // ---- CTAs -----------------------------------------------------------------------------
  // CTAs with a row inside q/out are computed; those wholly past the tensors are counted by
  // attention_tiles_past_rows (exec/plan/clip.cpp), not run.
  const Buffer q_buf = plan.rotary.enabled ? Buffer::q_rot : Buffer::q;
  const Buffer k_buf = plan.rotary.enabled ? Buffer::k_rot : Buffer::k;
  std::vector<Tile> tiles;
  for (int64_t b = 0; b < N; ++b) {
    const fa2::Segment sg = at.segment(b);
    if (sg.len_q <= 0) continue;
    const int64_t m_end = std::min<int64_t>(at.grid_m, (int64_t(sg.len_q) + BM - 1) / BM);
    for (int64_t h = 0; h < at.grid_h; ++h)
      for (int64_t m = 0; m < m_end && !fa2::tile_past_rows(sg, at.swapped, m * BM, total_q); ++m)
        tiles.push_back({static_cast<int32_t>(b), static_cast<int32_t>(h), m});
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
  const bool with_qv = at.qv && qv != nullptr;
  for (auto& s : scratch) s.ensure(D, BN, BM, with_qv);
  const std::optional<fa3::PagedKV> paged = at.paged ? std::optional<fa3::PagedKV>(at.paged->view()) : std::nullopt;
  std::vector<std::vector<RowDesc>> rowbuf(static_cast<size_t>(workers), std::vector<RowDesc>(static_cast<size_t>(BM)));

  parallel_for(workers, static_cast<int64_t>(tiles.size()), 4, [&](int64_t ti, int w) {
    const Tile& tl = tiles[static_cast<size_t>(ti)];
    const int64_t b = tl.b, h = tl.h, m = tl.m;
    AccessRecord& rec = records[static_cast<size_t>(w)];
    const uint64_t program = order::grid_linear(uint64_t(m), uint64_t(b), uint64_t(h), uint64_t(at.grid_m), uint64_t(N));
    const fa2::Segment sg = at.segment(b);
    const fa2::TileRange t = fa2::tile_range(m, sg.len_q, sg.len_k, at.flags);
    if (t.exits) return;
    const int64_t kv_head = at.swapped ? h : h / std::max<int64_t>(1, H / Hk);
    auto access = [&](Buffer buf, AccessKind kind, Unit unit, int64_t index, int64_t bound, int64_t row, int64_t head) {
      return Access{.buffer = buf, .kind = kind, .unit = unit, .index = index, .bound = bound, .block = {m, b, h},
                    .segment = b, .row = row, .head = head};
    };
    // K/V rows read by this CTA
    if (!t.empty && paged) {
      // through the page table: a page outside the pool refuses its k / v rows, an entry past
      // the end of the table refuses the table read (and the rows it would name)
      const fa3::PagedRefusals rf = fa3::paged_refusals(*paged, b, t.key_begin, t.key_end);
      if (rf.outside_pool > 0)
        rec.note(order::key(program, order::kKeyRead, rf.first_outside),
                 access(k_buf, AccessKind::read, Unit::rows, rf.first_outside_row.row, paged->pool_rows(),
                        rf.first_outside_row.row, at.swapped ? -1 : h),
                 uint64_t(2 * rf.outside_pool));
      if (rf.past_table > 0)
        rec.note(order::key(program, order::kKeyRead, rf.first_past),
                 access(Buffer::page_table, AccessKind::read, Unit::elements,
                        fa3::paged_row(*paged, b, rf.first_past).entry, paged->entries, -1, at.swapped ? -1 : h),
                 uint64_t(rf.past_table));
    } else if (!t.empty) {
      const int64_t lo = std::max(t.key_begin, total_k - sg.start_k);
      if (t.key_end > lo)
        rec.note(order::key(program, order::kKeyRead, lo),
                 access(k_buf, AccessKind::read, Unit::rows, sg.start_k + lo, total_k, sg.start_k + lo, at.swapped ? -1 : h),
                 uint64_t(2 * (t.key_end - lo)));
    } else {
      ++empty_tiles[static_cast<size_t>(w)];
    }
    RowDesc* rows = rowbuf[static_cast<size_t>(w)].data();
    int nrows = 0;
    for (int64_t i = t.row_begin; i < t.row_end; ++i) {
      const fa2::QueryRow qr = fa2::query_row(sg, at.swapped, at.ngroups, h, i);
      const bool q_ok = fa2::row_in_q(qr.row, total_q);
      if (!q_ok) {
        rec.note(order::key(program, order::kRead, i), access(q_buf, AccessKind::read, Unit::rows, qr.row, total_q, qr.row, qr.head));
        rec.note(order::key(program, order::kOutWrite, i),
                 access(Buffer::out, AccessKind::write, Unit::rows, qr.row, total_q, qr.row, qr.head));
      }
      const int64_t lidx = fa2::lse_index(lse_shape, at.swapped, cq[static_cast<size_t>(b)], b, h, qr.head, i);
      const bool lse_ok = lidx >= 0 && lidx < lse_n;
      if (!lse_ok)
        rec.note(order::key(program, order::kLseWrite, i),
                 access(Buffer::lse, AccessKind::write, Unit::elements, lidx, lse_n, qr.row, qr.head));
      if (!q_ok) continue;
      if (winner[static_cast<size_t>(qr.row)] != b) continue;  // a later CTA overwrites this row
      if (sampled && !at.sample[static_cast<size_t>(qr.row)] && !t.empty) continue;
      RowDesc rd{};
      rd.q = q + qr.row * H * D + qr.head * D;
      rd.qv = with_qv ? qv + qr.row * H * D + qr.head * D : nullptr;
      rd.out = out + qr.row * H * D + qr.head * D;
      rd.lse = lse_ok ? lse + lidx : nullptr;
      if (t.empty) {
        rd.lo = rd.hi = 0;
      } else {
        const fa2::KeyLimits kl = fa2::key_limits(i, sg.len_q, sg.len_k, at.flags, t);
        rd.lo = kl.lo;
        rd.hi = kl.hi;
      }
      rows[nrows++] = rd;
    }
    if (nrows == 0) return;
    const KeySource ks{k, v, Hk * D, kv_head * D, sg.start_k, total_k, paged ? &*paged : nullptr, b};
    Scratch& sc = scratch[static_cast<size_t>(w)];
    double& mc = macs[static_cast<size_t>(w)];
    int64_t& nk = no_keys[static_cast<size_t>(w)];
    const int64_t kb = t.empty ? 0 : t.key_begin, ke = t.empty ? 0 : t.key_end;
    switch (plan.elem) {
      case ElemType::bf16: run_rows<ElemType::bf16>(rows, nrows, ks, kb, ke, nm, sc, mc, nk); break;
      case ElemType::fp16: run_rows<ElemType::fp16>(rows, nrows, ks, kb, ke, nm, sc, mc, nk); break;
      default: run_rows<ElemType::fp32>(rows, nrows, ks, kb, ke, nm, sc, mc, nk); break;
    }
  });

  // a row counts as computed once its winning CTA produced it (all heads share the flag)
  for (int64_t r = 0; r < total_q; ++r) {
    if (res.writes[static_cast<size_t>(r)] == 0) continue;
    if (!sampled || at.sample[static_cast<size_t>(r)]) res.computed[static_cast<size_t>(r)] = 1;
  }
  // rows of empty CTAs are zero-filled whether sampled or not
  if (sampled) {
    for (int64_t b = 0; b < N; ++b) {
      const fa2::Segment sg = at.segment(b);
      if (sg.len_q <= 0 || at.swapped) continue;
      const int64_t m_end = std::min<int64_t>(at.grid_m, (int64_t(sg.len_q) + BM - 1) / BM);
      for (int64_t m = 0; m < m_end && !fa2::tile_past_rows(sg, false, m * BM, total_q); ++m) {
        const fa2::TileRange t = fa2::tile_range(m, sg.len_q, sg.len_k, at.flags);
        if (t.exits || !t.empty) continue;
        for (int64_t i = t.row_begin; i < t.row_end; ++i) {
          const int64_t r = sg.start_q + i;
          if (r < total_q && winner[static_cast<size_t>(r)] == b) res.computed[static_cast<size_t>(r)] = 1;
        }
      }
    }
  }
  for (int64_t r = 0; r < total_q; ++r) res.rows_computed += res.computed[static_cast<size_t>(r)];
  for (auto& r : records) res.access.merge(r);
  for (double m : macs) res.macs += m;
  for (int64_t n : no_keys) res.rows_no_keys += n;
  for (int64_t n : empty_tiles) res.empty_tiles += n;
  return res;
}

}  // namespace ad::cpu
