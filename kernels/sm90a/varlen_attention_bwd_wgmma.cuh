// Varlen attention backward, key-block kernel on Hopper's warpgroup tensor cores (wgmma,
// sm_90a), with the FA2 contract of the mma.sync key-block kernel
// (kernels/varlen_attention_bwd.cuh): the same key-block walk, loaders, LSE / softmax_d
// reads, P and dS element rule, dq_accum addressing and dK / dV epilogue, called from there,
// so the two kernels cannot drift apart. The preprocess and dq conversion launches are the
// shared ones.
//
// Shape: a CTA keeps FA2's key block of 128 keys of one head (K and V resident in shared
// memory), two warpgroups of 64 keys each (256 threads), and walks the query blocks that see
// them in steps of 64 rows (Q, dO, LSE and softmax_d double-buffered by cp.async). Per step,
// warpgroup w (keys 64 w .. 64 w + 63):
//     Sᵀ  = K_w Qᵀ        wgmma m64n64k16, A = K (smem, K-major), B = Q (smem, K-major)
//     dPᵀ = V_w dOᵀ       the same with V and dO
//     Pᵀ = exp(Sᵀ - LSE), dSᵀ = Pᵀ ∘ (dPᵀ - softmax_d)   (p_and_ds, in registers)
//     dV_w += Pᵀ dO       wgmma m64nDk16, A = Pᵀ (registers), B = dO (smem, MN-major)
//     dK_w += dSᵀ Q       the same with dSᵀ and Q
//     dSᵀ -> shared memory, then dQ[:, w D/2 ..) = dS K[:, w D/2 ..)
//                         wgmma m64n(D/2)k16, A = dS (smem, MN-major: the dSᵀ tile read
//                         transposed), B = K (smem, MN-major); K = the block's 128 keys
//     dq_accum += dQ      through shared memory, one 16-byte fp32 reduction per chunk
//                         (add_dq_tile), as FA2's atomicAdd of its dQ tile.
// Pipeline: Q / dO / LSE / softmax_d three stages deep (step t + 2 loads while t runs), dSᵀ
// double-buffered, one CTA barrier per step; at d64 step t + 1's Sᵀ / dPᵀ are issued before
// step t's reductions and run under them (WgmmaBwdShape::kOverlap says why not at d128).
// The wgmma accumulator of a warp is the mma.m16n8 accumulator of its 16 rows, so the
// element rule, the fragments and the epilogue are the mma.sync kernel's, per warp. This is
// the structure of FA3's backward (Shah et al. 2024, "FlashAttention-3", section 3 and its
// backward benchmark; hopper/mainloop_bwd_sm90_tma_gmma_ws.hpp in Dao-AILab/flash-attention:
// K and V resident, dK and dV accumulated in registers by the warpgroups, dQ through shared
// memory), without its warp specialisation: the loads are cp.async issued by the compute
// warps, so the unchecked form reads FA2's addresses (TMA coordinates are signed 32-bit and
// out-of-bounds boxes are zero-filled: it would not reproduce the contract's unsigned row
// offsets nor crash like the real stack).
//
// Checked form: per CTA, key_block_in_bounds (the ends of every affine index range) decides
// whether every access of the key block lies inside its buffer; such a block runs this
// body with no per-access test (it cannot refuse anything). Any other block is left to a
// second launch (varlen_bwd_fallback_kernel) that runs the mma.sync kernel's checked body for
// it, which records and refuses exactly as that kernel does. A healthy batch therefore pays a
// few comparisons per CTA, and one short persistent launch, for its checks.
#pragma once

#include "../varlen_attention_bwd.cuh"
#include "varlen_attention_wgmma.cuh"
#include "wgmma.cuh"

namespace ad::kern::bwd {

template <int D>
struct WgmmaBwdShape {
  static constexpr int kThreads = 256;  // two warpgroups
  static constexpr int kBlockN = kBwdBlockN;
  // query rows per step. 128 at d64 (twice the products per step's barriers and waits) was
  // measured at 0.97x on an H100 (before the branch-free P / dS rule): its Sᵀ / dPᵀ (128
  // registers) leave no room to overlap the next step's with the reductions
  // (docs/performance.md)
  static constexpr int kBlockM = kWgmmaBlockM;
  static_assert(kBlockM == 64, "the warpgroups split dQ by columns: 64 rows per step");
  static constexpr int kStages = 3;   // Q / dO / LSE / softmax_d buffers (steps t, t + 1 in use, t + 2 loading)
  static constexpr int kKVBytes = kBlockN * D * 2;
  static constexpr int kQBytes = kBlockM * D * 2;
  static constexpr int kDsBytes = kBlockN * kBlockM * 2;
  static constexpr int kStatBytes = 2 * kStages * kBlockM * 4;
  // Whether step t + 1's Sᵀ / dPᵀ are issued before step t's dq_accum reductions (they then
  // run under them). At d128 the 64 accumulators in flight beside dK and dV (128) exceed the
  // registers and ptxas serialises every wgmma (C7512), so d128 issues them at the step's start.
  static constexpr bool kOverlap = D == 64;
  static constexpr int kDqBytes = kBlockM * D * 4;  // the step's dQ in fp32, for the reductions
  // How many of a thread's 16-byte chunks of a step's Q / dO load are unrolled (load_rows).
  // At d128 the unrolled loads' chunk addresses are loop invariants that ptxas hoists out of
  // the step loop and, at 255 registers, spills: 176 bytes of spill and 9 local-memory
  // reloads a step; the rolled loop recomputes them (8 bytes of spill, none in the step loop;
  // ptxas, sm_90a, bf16 and fp16) and ran 3-6 % faster checked on an H100
  // (bench/results/bwd-spill-h100-2026-11-27). d64 is spill-free unrolled.
  static constexpr int kStepLoadUnroll = D == 128 ? 1 : kBlockM * D / 8 / kThreads;
  // 1 KB to align the base to a swizzle atom
  static constexpr int kSmemBytes =
      2 * kKVBytes + 2 * kStages * kQBytes + 2 * kDsBytes + kStatBytes + kDqBytes + 1024;
  static_assert(kSmemBytes <= 227 * 1024, "a CTA may have 227 KB of shared memory");
};

// 16-byte chunk c of row r of a warpgroup's [64][N] fp32 dQ tile: chunks XORed with 2 (r % 4),
// so the m16n8 accumulator's 8-byte stores (4 rows of 4 lanes per phase) and the 16-byte
// row reads both hit 32 distinct banks.
template <int N>
__host__ __device__ __forceinline__ int dq_chunk(int r, int c) {
  return r * (N / 4) + (c ^ ((r & 3) << 1));
}
// The layouts of a warpgroup's [64][N] fp32 dQ tile in shared memory: at(r, c) is the offset
// (in floats) of 16-byte chunk c of row r. DqChunks: dq_chunk's swizzle (the wgmma kernel's).
// DqSw128: 32-column panels of [64][32], chunk c of a row at c ^ (r % 8) of its 128 bytes, each
// panel on a 1024-byte boundary: the tensor memory accelerator's 128-byte swizzle, the layout
// of a box of the dq_accum map (kernels/tma_maps.hpp). kOddRowGroupXor: the column group (8
// columns) a lane of an odd accumulator row stores in group nb's turn (store_dq): nb in
// DqChunks, whose 8-byte stores (4 rows x 4 lanes a 16-lane phase) hit 32 distinct banks as
// they come. In DqSw128 rows r and r ^ 1 put a group's two chunks in the same two bank slots
// (swapped), so a phase's stores took two wavefronts where one holds them (ncu, H200: 4 per
// 8-byte store where 2 are ideal); with odd rows storing group nb ^ 2 the phase's four rows
// take four distinct slot pairs (group g of row r in slot pair (g ^ r / 2) % 4). Both layouts' 16-byte row
// reads take the fewest wavefronts.
template <int N>
struct DqChunks {
  static constexpr int kOddRowGroupXor = 0;
  __host__ __device__ __forceinline__ static int at(int r, int c) { return dq_chunk<N>(r, c) * 4; }
};
template <int N>
struct DqSw128 {
  static_assert(N % 32 == 0, "whole 32-column panels");
  static constexpr int kOddRowGroupXor = 2;
  __host__ __device__ __forceinline__ static int at(int r, int c) {
    return (c >> 3) * 64 * 32 + r * 32 + (((c & 7) ^ (r & 7)) << 2);
  }
};

// dq_accum += a warpgroup's dQ tile (step rows [m0, m0 + 64), columns [col0, col0 + N)) from
// shared memory (Layout), one 16-byte reduction per chunk (red.global.add.v4.f32, sm_90); rows past the
// segment add zeros in FA2 and are skipped (add_dq's rule; unchecked: in-bounds blocks only).
template <int N, class Layout = DqChunks<N>>
__device__ __forceinline__ void add_dq_tile(const VarlenBwdParams& p, const Cta& at, const Segment& seg, int32_t cu_q_b, int tm,
                                            int64_t m_top, int split, int m0, int col0, const float* tile) {
  constexpr int CPR = N / 4;  // chunks per row
  const int t = threadIdx.x & 127;
  // the step's rows lie in one FA2 tile (tm is a multiple of 64), so row m0 + r is r rows on
  float* const row0 = p.dq_accum + dq_accum_row(p, at, cu_q_b, tm, m_top, split, m0) + col0;
  const int64_t stride = dq_row_stride(p);
#pragma unroll
  for (int k = 0; k < 64 * CPR / 128; ++k) {
    const int x = t + 128 * k, r = x / CPR, c = x % CPR;
    if (m0 + r >= seg.len_q) continue;
    const float4 v = *reinterpret_cast<const float4*>(tile + Layout::at(r, c));
    float* dst = row0 + r * stride + 4 * c;
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(dst), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w)
                 : "memory");
  }
}

// One warpgroup's part of a query step (keys 64 wg .. 64 wg + 63 of the block, BM = 64 query
// rows), shared by the kernel below and the warp-specialised one
// (varlen_attention_bwd_wgmma_ws.cuh). `warp` is the warp's index among the 8 compute warps
// (its 16 keys: 16 warp ..), `lane` its lane.
template <class T, int D>
struct WgStep {
  static constexpr int BM = WgmmaBwdShape<D>::kBlockM, BN = kBwdBlockN;
  static constexpr int KD = D / 16;   // k16 steps over the head dim (Sᵀ, dPᵀ)
  static constexpr int KM = BM / 16;  // k16 steps over the step's queries (dV, dK)
  static constexpr int KN = BN / 16;  // k16 steps over the block's keys (dQ)
  static constexpr int DQN = D / 2;   // dQ columns per warpgroup
  using LayoutDs = attn::Sw128Panels<BM, BN>;

  // Sᵀ = K_w Qᵀ and dPᵀ = V_w dOᵀ (64 keys x 64 queries), issued and committed; ka_lo / va_lo:
  // the warpgroup's K / V rows (kmajor_lo), q_addr / do_addr: the step's Q / dO tiles
  __device__ __forceinline__ static void issue_s_dp(float (&s)[BM / 2], float (&dp)[BM / 2], uint32_t ka_lo,
                                                    uint32_t va_lo, uint32_t q_addr, uint32_t do_addr) {
    const uint32_t qb_lo = attn::kmajor_lo(q_addr, 0), ob_lo = attn::kmajor_lo(do_addr, 0);
    gmma::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < KD; ++kk)
      gmma::WgmmaSS<T, BM>::run(s, gmma::sw128_desc_words(ka_lo + attn::kmajor_step<BN>(kk)),
                                gmma::sw128_desc_words(qb_lo + attn::kmajor_step<BM>(kk)), kk > 0 ? 1u : 0u);
#pragma unroll
    for (int kk = 0; kk < KD; ++kk)
      gmma::WgmmaSS<T, BM>::run(dp, gmma::sw128_desc_words(va_lo + attn::kmajor_step<BN>(kk)),
                                gmma::sw128_desc_words(ob_lo + attn::kmajor_step<BM>(kk)), kk > 0 ? 1u : 0u);
    gmma::wgmma_commit();
  }

  // Pᵀ = exp(Sᵀ - LSE), dSᵀ = Pᵀ ∘ (dPᵀ - softmax_d) in place (p_and_ds), then packed as the A
  // fragments of dV and dK (k16 step kc: query columns 16 kc .. 16 kc + 15)
  // key_a: the segment key of the warp's accumulator rows e < 2 (e >= 2: + 8), key_of_rows
  __device__ __forceinline__ static int key_of_rows(const KeyBlockWalk& w, int warp, int lane) {
    return w.n0 + warp * 16 + (lane >> 2);
  }
  __device__ __forceinline__ static void p_ds(const KeyBlockWalk& w, int m0, const float* lse, const float* dsm,
                                              int key_a, int lane, float (&s)[BM / 2], float (&dp)[BM / 2],
                                              uint32_t (&pa)[KM][4], uint32_t (&da)[KM][4]) {
    const bool mask = fa2::block_needs_mask(w.n0, BN, m0, BM, w.seg.len_q, w.seg.len_k, w.flags);
    with_p_ds_form(w.sm, mask, [&](auto softcap, auto masked) {
#pragma unroll
      for (int i = 0; i < BM / 8; ++i)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int col = i * 8 + 2 * (lane & 3) + c;
          const float lse2 = lse[col] * kLog2e, d = dsm[col];
          const fa2::KeyLimits kl = row_keys_if<masked.value>(w.sm, m0 + col);
#pragma unroll
          for (int e = c; e < 4; e += 2)
            p_and_ds<softcap.value, masked.value>(w.sm, kl, key_a + (e >> 1) * 8, lse2, d, s[4 * i + e],
                                                  dp[4 * i + e]);
        }
    });
#pragma unroll
    for (int kc = 0; kc < KM; ++kc)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        pa[kc][r] = Elem<T>::pack(s[8 * kc + 2 * r], s[8 * kc + 2 * r + 1]);
        da[kc][r] = Elem<T>::pack(dp[8 * kc + 2 * r], dp[8 * kc + 2 * r + 1]);
      }
  }

  // dV_w += Pᵀ dO and dK_w += dSᵀ Q (A from registers, B: the step's dO / Q, MN-major), issued
  // and committed
  __device__ __forceinline__ static void issue_dv_dk(float (&dv)[D / 2], float (&dk)[D / 2], const uint32_t (&pa)[KM][4],
                                                     const uint32_t (&da)[KM][4], uint32_t q_addr, uint32_t do_addr) {
    const uint32_t dob_lo = attn::mnmajor_lo<BM>(do_addr), qt_lo = attn::mnmajor_lo<BM>(q_addr);
    gmma::wgmma_fence();
#pragma unroll
    for (int kc = 0; kc < KM; ++kc)
      gmma::WgmmaRS<T, D>::run(dv, pa[kc], gmma::sw128_desc_words(dob_lo + attn::mnmajor_step(kc)));
#pragma unroll
    for (int kc = 0; kc < KM; ++kc)
      gmma::WgmmaRS<T, D>::run(dk, da[kc], gmma::sw128_desc_words(qt_lo + attn::mnmajor_step(kc)));
    gmma::wgmma_commit();
  }

  // where in the [BN][BM] dSᵀ tile (elements) lane `lane` of compute warp `warp` puts da[kc][j]
  // (a pair of queries: row 16 warp + lane / 4 (+ 8 for odd j), column 16 kc + 2 (lane % 4)
  // (+ 8 for j >= 2))
  __host__ __device__ __forceinline__ static int ds_pair_at(int warp, int lane, int kc, int j) {
    return LayoutDs::offset(warp * 16 + (lane >> 2) + (j & 1) * 8, kc * 16 + 2 * (lane & 3) + (j >> 1) * 8);
  }
  // the warp's rows of dSᵀ (rows: keys, columns: queries) into the [BN][BM] tile
  // (tests/bwd_smem_stores.cu: one wavefront a store)
  __device__ __forceinline__ static void store_ds(T* ds_tile, int warp, int lane, const uint32_t (&da)[KM][4]) {
#pragma unroll
    for (int kc = 0; kc < KM; ++kc)
#pragma unroll
      for (int j = 0; j < 4; ++j) *reinterpret_cast<uint32_t*>(ds_tile + ds_pair_at(warp, lane, kc, j)) = da[kc][j];
  }

  // dQ (64 queries x the warpgroup's D / 2 columns) = dS (64 x 128 keys, both warpgroups' dSᵀ
  // tile read transposed) K (kb_lo: the warpgroup's columns of K, MN-major), issued and committed
  __device__ __forceinline__ static void issue_dq(float (&dq)[DQN / 2], const T* ds_tile, uint32_t kb_lo) {
    const uint32_t ds_lo = attn::mnmajor_lo<BN>(smem_u32(ds_tile));
    gmma::wgmma_fence();
#pragma unroll
    for (int kc = 0; kc < KN; ++kc)
      gmma::WgmmaSSTT<T, DQN>::run(dq, gmma::sw128_desc_words(ds_lo + attn::mnmajor_step(kc)),
                                   gmma::sw128_desc_words(kb_lo + attn::mnmajor_step(kc)), kc > 0 ? 1u : 0u);
    gmma::wgmma_commit();
  }

  // dQ of the step (issue_dq), then the wait for the step's dV, dK and dQ; the operands and
  // accumulators are pinned so that no register use moves above the wait
  __device__ __forceinline__ static void dq_and_wait(float (&dq)[DQN / 2], const T* ds_tile, uint32_t kb_lo,
                                                     uint32_t (&pa)[KM][4], uint32_t (&da)[KM][4],
                                                     float (&dk)[D / 2], float (&dv)[D / 2]) {
    issue_dq(dq, ds_tile, kb_lo);
    gmma::wgmma_wait<0>();
    gmma::pin(pa);
    gmma::pin(da);
    gmma::pin(dk);
    gmma::pin(dv);
    gmma::pin(dq);
  }

  // store_dq's turn nb for lane `lane`: the accumulator's column group (8 columns) it stores,
  // nb or, on odd rows (dq_odd_row), nb ^ Layout::kOddRowGroupXor
  __host__ __device__ __forceinline__ static bool dq_odd_row(int lane) { return (lane >> 2) & 1; }
  template <class Layout>
  __host__ __device__ __forceinline__ static int dq_group(int lane, int nb) {
    return dq_odd_row(lane) ? nb ^ Layout::kOddRowGroupXor : nb;
  }
  // where in the tile (floats) lane `lane` of warp `warp` puts its pair of group g, row half
  // `half` (the m64nNk16 accumulator's: row 16 (warp % 4) + lane / 4 + 8 half, columns
  // 8 g + 2 (lane % 4) ..)
  template <class Layout>
  __host__ __device__ __forceinline__ static int dq_pair_at(int warp, int lane, int g, int half) {
    const int r = (warp & 3) * 16 + (lane >> 2) + half * 8, c = g * 8 + 2 * (lane & 3);
    return Layout::at(r, c >> 2) + (c & 3);
  }
  // the warp's rows of dQ into the warpgroup's [64][DQN] fp32 tile (Layout: DqChunks, DqSw128),
  // a column group a turn (dq_group; tests/bwd_smem_stores.cu: one wavefront per 16-lane phase)
  template <class Layout = DqChunks<DQN>>
  __device__ __forceinline__ static void store_dq(float* dq_tile, int warp, int lane, const float (&dq)[DQN / 2]) {
    constexpr int X = Layout::kOddRowGroupXor;
    static_assert(X < DQN / 8, "the swapped groups lie in the tile");
    const bool odd = dq_odd_row(lane);
#pragma unroll
    for (int nb = 0; nb < DQN / 8; ++nb)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        // group dq_group(lane, nb)'s registers, chosen between two constant indices (an index
        // known only at run time would put dq in local memory)
        const int e = 4 * nb + 2 * half, ex = 4 * (nb ^ X) + 2 * half;
        *reinterpret_cast<float2*>(dq_tile + dq_pair_at<Layout>(warp, lane, dq_group<Layout>(lane, nb), half)) =
            make_float2(odd ? dq[ex] : dq[e], odd ? dq[ex + 1] : dq[e + 1]);
      }
  }

  // A of Sᵀ / dPᵀ: the warpgroup's 64 key rows of K or V
  __device__ __forceinline__ static uint32_t key_rows_lo(const T* tile, int wg) {
    return attn::kmajor_lo(smem_u32(tile), wg * 64);
  }
  // B of dQ: the warpgroup's D / 2 columns of K (d128: the second 64-column panel; d64: 64
  // bytes into each 128-byte row of the one panel)
  __device__ __forceinline__ static uint32_t k_cols_lo(const T* sK, int wg) {
    return attn::mnmajor_lo<BN>(smem_u32(sK) + uint32_t(D == 128 ? wg * BN * 128 : wg * 64));
  }
};

// Key block n_block (every access inside its buffer, or the unchecked form) of segment
// blockIdx.y, head blockIdx.z, walked as w (key_block_walk with WgmmaBwdShape's kBlockM, which
// the kernel computes before its check); its dq goes into dq_accum copy `split`.
template <class T, int D>
__device__ __forceinline__ void wgmma_key_block(const VarlenBwdParams& p, const KeyBlockWalk& w, int n_block,
                                                int split, unsigned char* smem_raw) {
  using Shape = WgmmaBwdShape<D>;
  using LayoutKV = attn::Sw128Panels<D, kBwdBlockN>;
  using LayoutQ = attn::Sw128Panels<D, Shape::kBlockM>;
  constexpr int BN = Shape::kBlockN, BM = Shape::kBlockM, NT = Shape::kThreads, S = Shape::kStages;
  constexpr int KM = WgStep<T, D>::KM, DQN = WgStep<T, D>::DQN;
  constexpr int U = Shape::kStepLoadUnroll;
  // Align to a swizzle atom by offsetting the shared pointer itself (wgmma reads 1024-byte
  // aligned 128-byte-swizzle atoms; see the forward kernel).
  unsigned char* base = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  T* sK = reinterpret_cast<T*>(base);
  T* sV = sK + BN * D;
  T* sQ0 = sV + BN * D;           // Q [S][BM][D]
  T* sdO0 = sQ0 + S * BM * D;     // dO [S][BM][D]
  T* sdS = sdO0 + S * BM * D;     // dSᵀ [2][BN][BM], one 64-column panel each
  float* sLse = reinterpret_cast<float*>(sdS + 2 * BN * BM);  // [S][BM]
  float* sDs = sLse + S * BM;                              // [S][BM]
  float* sDq = sDs + S * BM;  // [2 warpgroups][64][DQN] fp32, 16-byte chunks swizzled (dq_chunk)

  const Cta& at = w.at;
  const int h = at.z;
  if (w.kb.exits) return;  // FA2: n_block * kBlockN >= actual_seqlen_k
  const Segment& seg = w.seg;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  // the warpgroup, broadcast from lane 0: warp-uniform, so descriptors stay in uniform registers
  const int wg = __shfl_sync(0xffffffffu, tid / 128, 0);

  float dk[D / 2], dv[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) dk[i] = dv[i] = 0.f;

  if (w.steps.m_max > w.steps.m_min) {
    // step t of the walk is query block m_max - 1 - t; its Q / dO / LSE / softmax_d in stage t % S
    const int steps = int(w.steps.m_max - w.steps.m_min);
    auto m_of = [&](int t) { return int(w.steps.m_max) - 1 - t; };
    auto load_step = [&](int t) {
      const int m0 = m_of(t) * BM, st = t % S;
      load_rows<T, D, BM, NT, false, LayoutQ, U>(p, w.at, static_cast<const T*>(p.q.data), p.q.heads, p.q.rows,
                                                 p.q.buffer, sQ0 + st * BM * D, seg.start_q, m0, seg.len_q, h,
                                                 m0 / w.tm, oc::kMainQueryReads, 0);
      load_rows<T, D, BM, NT, false, LayoutQ, U>(p, w.at, static_cast<const T*>(p.dout.data), p.dout.heads,
                                                 p.dout.rows, p.dout.buffer, sdO0 + st * BM * D, seg.start_q, m0,
                                                 seg.len_q, h, m0 / w.tm, oc::kMainQueryReads, 0);
      load_row_stats<BM, false>(p, w.at, seg, w.cu_q_b, w.tm, m0, sLse + st * BM, sDs + st * BM);
    };
    load_rows<T, D, BN, NT, false, LayoutKV>(p, w.at, static_cast<const T*>(p.k.data), p.k.heads, p.k.rows,
                                             p.k.buffer, sK, seg.start_k, w.n0, w.key_valid, w.h_kv, n_block,
                                             oc::kMainKeyReads, 0);
    load_rows<T, D, BN, NT, false, LayoutKV>(p, w.at, static_cast<const T*>(p.v.data), p.v.heads, p.v.rows,
                                             p.v.buffer, sV, seg.start_k, w.n0, w.key_valid, w.h_kv, n_block,
                                             oc::kMainKeyReads, int64_t(order::kValueBit));
    load_step(0);
    cp_async_commit();
    if (steps > 1) load_step(1);
    cp_async_commit();

    using Step = WgStep<T, D>;
    const uint32_t ka_lo = Step::key_rows_lo(sK, wg), va_lo = Step::key_rows_lo(sV, wg);
    const uint32_t kb_lo = Step::k_cols_lo(sK, wg);
    const int key_a = Step::key_of_rows(w, warp, lane);
    auto q_addr = [&](int t) { return smem_u32(sQ0 + (t % S) * BM * D); };
    auto do_addr = [&](int t) { return smem_u32(sdO0 + (t % S) * BM * D); };

    // Sᵀ and dPᵀ of step t (64 keys x 64 queries of this warpgroup), issued and committed
    float s[BM / 2], dp[BM / 2];
    auto issue_s_dp = [&](int t) { Step::issue_s_dp(s, dp, ka_lo, va_lo, q_addr(t), do_addr(t)); };
    cp_async_wait<1>();  // K, V and step 0
    gmma::fence_proxy_async_smem();
    __syncthreads();
    if constexpr (Shape::kOverlap) issue_s_dp(0);

    // Step t: wait for Sᵀ / dPᵀ; P and dS; issue dV, dK; dSᵀ to shared memory; one barrier
    // (dSᵀ of both warpgroups, step t + 1's tiles); issue dQ and step t + 1's Sᵀ / dPᵀ; the
    // dq_accum reductions of step t run while step t + 1's products are on the tensor cores.
    for (int t = 0; t < steps; ++t) {
      const int m0 = m_of(t) * BM, st = t % S;
      if constexpr (!Shape::kOverlap) issue_s_dp(t);
      gmma::wgmma_wait<0>();
      gmma::pin(s);
      gmma::pin(dp);
      uint32_t pa[KM][4], da[KM][4];
      Step::p_ds(w, m0, sLse + st * BM, sDs + st * BM, key_a, lane, s, dp, pa, da);
      Step::issue_dv_dk(dv, dk, pa, da, q_addr(t), do_addr(t));
      // dSᵀ -> shared memory (buffer t % 2), while dV and dK run
      T* ds_tile = sdS + (t & 1) * BN * BM;
      Step::store_ds(ds_tile, warp, lane, da);
      cp_async_wait<0>();  // step t + 1's tiles (this thread's part)
      gmma::fence_proxy_async_smem();
      // dSᵀ of both warpgroups and step t + 1's tiles are in; every warpgroup is done with
      // step t - 1 (its dQ and its stage, which step t + 2 now takes, and the other dSᵀ buffer)
      __syncthreads();
      if (t + 2 < steps) load_step(t + 2);
      cp_async_commit();

      float dq[DQN / 2];
      Step::dq_and_wait(dq, ds_tile, kb_lo, pa, da, dk, dv);  // dV, dK and dQ of step t
      // dQ to shared memory (this warpgroup's part), then step t + 1's Sᵀ / dPᵀ on the tensor
      // cores while this warpgroup adds its dQ rows into dq_accum
      float* dq_tile = sDq + wg * BM * DQN;
      Step::store_dq(dq_tile, warp, lane, dq);
      if (Shape::kOverlap && t + 1 < steps) issue_s_dp(t + 1);
      asm volatile("bar.sync %0, 128;\n" ::"r"(1 + wg) : "memory");  // the warpgroup's dQ tile is in
      add_dq_tile<DQN>(p, at, seg, w.cu_q_b, w.tm, w.m_top, split, m0, wg * DQN, dq_tile);
    }
    gmma::wgmma_wait<0>();  // (the last step waited already; said here for the compiler)
  }
  store_dk_dv<T, D, NT, false>(p, w.at, seg, n_block, w.n0, w.key_valid, dk, dv, sK, sV);
}

// CTA (x, b, h) of the key-block grid (for_each_key_block). The checked form leaves a key
// block that can reach past a buffer to varlen_bwd_fallback_kernel.
template <class T, int D, bool Checked>
__global__ void __launch_bounds__(WgmmaBwdShape<D>::kThreads, 1) varlen_bwd_wgmma_kernel(const VarlenBwdParams p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const Cta at = this_cta(key_grid_x(p));
  for_each_key_block(p, at, [&](int n, int split) {
    // the test broadcast from lane 0: ptxas must see the branch warp-uniform, or it serialises
    // every wgmma of the kernel (C7518, a dependence "in divergent path")
    const KeyBlockWalk w = key_block_walk(p, at, n, WgmmaBwdShape<D>::kBlockM);
    if (Checked && !__shfl_sync(0xffffffffu, int(key_block_in_bounds(p, w, split)), 0)) return;
    if (n != at.x) __syncthreads();  // the previous block's epilogue reads are done
    wgmma_key_block<T, D>(p, w, n, split, smem_raw);
  });
#else
  __trap();  // built for a target without wgmma: the launcher never selects it there
#endif
}

// The checked form's second launch: the key blocks the wgmma kernel left, those that can
// reach past a buffer, run with the mma.sync kernel's checked body as the CTAs of FA2's grid
// they are (their records and launch-order keys are those CTAs'). A persistent grid takes the
// grid's CTAs 256 at a time: each thread tests one (key_block_in_bounds of its key blocks),
// then the CTA runs the ones found. On a healthy batch the launch costs one test per thread
// per 256 CTAs. Why not in the wgmma kernel: inlined there, the checked body's registers made
// ptxas spill in the wgmma body (checked +23 % on an H100, d128); out of line, the call
// spilled 1.5 KB around it. Deterministic: a copy's blocks still add in a fixed order (its
// in-bounds blocks first, then these, all by one CTA).
template <class T, int D>
__global__ void __launch_bounds__(BwdShape<D, default_block_m(D)>::kThreads, 1)
    varlen_bwd_fallback_kernel(const VarlenBwdParams p) {
  constexpr int NT = BwdShape<D, default_block_m(D)>::kThreads;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  __shared__ int64_t found[NT];
  __shared__ int count;
  const int64_t gx = key_grid_x(p);
  const int64_t ctas = gx * p.batch * p.num_heads;
  auto cta = [&](int64_t v) { return Cta{int(v % gx), int((v / gx) % p.batch), int(v / (gx * p.batch)), gx}; };
  bool ran = false;
  auto first_launch_took = [&](const Cta& at, int n, int split) {
    return p.dq_rows_whole ? key_block_in_bounds<true>(p, at, n, split) : key_block_in_bounds(p, at, n, split);
  };
  for (int64_t first = int64_t(blockIdx.x) * NT; first < ctas; first += int64_t(gridDim.x) * NT) {
    if (threadIdx.x == 0) count = 0;
    __syncthreads();
    const int64_t v = first + threadIdx.x;
    if (v < ctas) {
      const Cta at = cta(v);
      bool inside = true;
      for_each_key_block(p, at, [&](int n, int split) { inside = inside && first_launch_took(at, n, split); });
      if (!inside) found[atomicAdd(&count, 1)] = v;
    }
    __syncthreads();
    for (int j = 0; j < count; ++j) {
      const Cta at = cta(found[j]);
      for_each_key_block(p, at, [&](int n, int split) {
        if (first_launch_took(at, n, split)) return;
        if (ran) __syncthreads();  // the previous block's epilogue reads are done
        ran = true;
        key_block_body<T, D, default_block_m(D), true>(p, at, n, split, smem_raw);
      });
    }
    __syncthreads();  // found and count are rewritten by the next pass
  }
}

}  // namespace ad::kern::bwd
