// Varlen attention backward, key-block kernel on Hopper's warpgroup tensor cores,
// warp-specialised: the wgmma key-block kernel's steps (varlen_attention_bwd_wgmma.cuh, WgStep:
// the same products, element rule, dSᵀ and dQ tiles) with the loads and the dq_accum
// reductions taken off the compute warpgroups by a producer warpgroup, so that the compute
// warpgroups hold dK, dV and a step's products in registers without spilling (the kernel of
// varlen_attention_bwd_wgmma.cuh spills at head dim 128: 255 registers a thread, ptxas) and go
// from one step's dQ to the next step's Sᵀ without waiting for the reductions. FlashAttention-3's
// backward is warp-specialised the same way (Shah et al. 2024; hopper/mainloop_bwd_sm90_tma_gmma_ws.hpp
// and flash_bwd_kernel_sm90.hpp in Dao-AILab/flash-attention, read, not copied: a producer warp
// loads, a separate warp adds dQ into the fp32 accumulator, the compute warpgroups at 240
// registers).
//
//   grid: the key-block grid (for_each_key_block); 384 threads.
//
// Producer (warpgroup 0, setmaxnreg down to kProducerRegs): per key block, K and V, then per
// query step t the step's Q, dO, LSE and softmax_d into stage t % S of a ring once the compute
// warpgroups released the stage (its "empty" mbarrier, one arrival per compute warp); then the
// dq_accum reductions of step t - 2 (the checked form: one bulk tensor reduction per 32-column
// panel of the dQ tile, issued by one thread; the cp.async form: add_dq_tile,
// red.global.add.v4.f32 from the tile, rows past the segment skipped) while step t's copies
// land; then it waits for
// its copies, orders them before the tensor cores' reads (fence.proxy.async) and arrives on the
// stage's "full" mbarrier (128 arrivals). The dQ tile is single-buffered: the compute warps
// write step t's once the reductions of step t - 1 are done ("dq empty"), and publish it ("dq
// full"). The loads come in two forms (Tma):
//   - the checked form (the kernel the launcher runs for the checked d128 backward's in-bounds
//     key blocks, where the call has tensor maps of q, k, v and dout: kernels/tma_maps.hpp): K,
//     V, Q and dO as whole boxes by the tensor memory accelerator, issued by one thread. A
//     whole block's bytes complete on the stage's "full" barrier beside the arrivals; a block
//     with rows past the segment (keys past the segment's end, the segment's last query block)
//     completes on `aux`, which the producer waits for to zero those rows (what load_rows
//     leaves there: the products read zeros, as in the unchecked kernel) before it arrives.
//     LSE and softmax_d stay cp.async (load_row_stats).
//   - Tma false (built only with ATTN_DOCTOR_BWD_WGMMA_WS=1, for the benchmarks): every load by
//     cp.async (load_rows / load_row_stats: FA2's addresses, so the unchecked form performs the
//     accesses FA2 performs).
//
// Compute (warpgroups 1 and 2, setmaxnreg up to kConsumerRegs; warpgroup w: keys 64 w ..): per
// step, wait "full"; Sᵀ, dPᵀ; P and dS; dV, dK; dSᵀ to shared memory (double-buffered); a
// named barrier of the 256 compute threads (both halves of dSᵀ in); dQ; release the stage; dQ
// to shared memory. The epilogue (dK, dV through sK / sV into dk / dv) is the kernels' shared
// one, the producer's threads writing rows with the compute threads.
//
// Deterministic: in a call with dq_accum copies, one CTA adds a copy's blocks in order (the
// checked form waits for a block's bulk reductions to complete before the next block), and a
// step adds each dq_accum element once (one bulk reduction, or one producer thread), so the
// sum's order is fixed, as in the other kernels.
//
// Checked form: as the wgmma kernel's (key_block_in_bounds per block, with each dQ row within
// a row of dq_accum; the others to varlen_bwd_fallback_kernel, whose records are the mma.sync
// kernel's).
//
// Status (H100, bench/results/bwd-ws-tma-h100-2026-11-28): with TMA loads, the checked d128
// backward runs 1.005-1.04x the wgmma kernel on dense batches and 1.01-1.03x on varlen ones,
// so the launcher takes it there (ATTN_DOCTOR_BWD_WS_TMA=0 keeps the wgmma kernel); at d64 it
// ran 0.92-0.97x (with or without step t + 1's products issued under step t's dQ store), so d64
// keeps the wgmma kernel. Its gradients: the backward's GPU tests, the CUDA vs CPU training
// sweep and memcheck there; dK and dV bit for bit those of the unchecked wgmma kernel. With
// cp.async loads (Tma false) it ran 0.82-0.84x the wgmma kernel
// (bench/results/bwd-spill-h100-2026-11-27, bench/results/bwd-ws-h100-2026-11-27): its
// producer spilled the loaders' state. With the dQ tiles added by bulk tensor reductions
// instead of the producer's red.global.add.v4.f32 (H200, bench/results/bwd-dq-bulk-h200-2026-11-28):
// +9 to +16 %, 0.72-0.74x cuDNN's backward on dense batches and 1.28-1.34x FA2 on varlen ones.
// With the compute warps' dQ tile stores free of bank conflicts (WgStep::store_dq; H200,
// bench/results/bwd-dq-store-h200-2026-11-28): +1.8 to +3.7 %, 0.77-0.79x cuDNN's and 1.37-1.43x
// FA2's. Measured there and not kept: a ping-pong form (each warpgroup's dQ over its own keys,
// summed in shared memory, turns to issue), 0.78-0.83x this kernel's speed at d128.
#pragma once

#include "../tma_maps.hpp"
#include "varlen_attention_bwd_wgmma.cuh"

namespace ad::kern::bwd {

// The cp.async form (Tma false) is off by default: measured slower than the wgmma kernel on an
// H100 (docs/performance.md, bench/results/bwd-ws-h100-2026-11-27); a build with
// -DATTN_DOCTOR_BWD_WGMMA_WS=1 launches it for the unchecked d128 backward, for the benchmarks.
#ifndef ATTN_DOCTOR_BWD_WGMMA_WS
#define ATTN_DOCTOR_BWD_WGMMA_WS 0
#endif
// The checked form's key blocks run the warp-specialised kernel with loads by the tensor memory
// accelerator (1) where the call's operands have tensor maps, else the wgmma kernel (0: always).
#ifndef ATTN_DOCTOR_BWD_WS_TMA
#define ATTN_DOCTOR_BWD_WS_TMA 1
#endif
// The checked form's dQ tiles go into dq_accum by the tensor memory accelerator (1: one bulk
// tensor reduction per 32-column panel) or by red.global.add.v4.f32 from the producer's 128
// threads (0: 0.86-0.92x, bench/results/bwd-dq-bulk-h200-2026-11-28).
#ifndef ATTN_DOCTOR_BWD_DQ_BULK
#define ATTN_DOCTOR_BWD_DQ_BULK 1
#endif
// The checked form at head dim 64 too (1), or the wgmma kernel there (0: with bulk dQ
// reductions, the warp-specialised kernel ran 0.93-0.96x the wgmma kernel at d64 on an H200,
// bench/results/bwd-dq-bulk-h200-2026-11-28).
#ifndef ATTN_DOCTOR_BWD_WS_D64
#define ATTN_DOCTOR_BWD_WS_D64 0
#endif
#ifndef ATTN_DOCTOR_BWD_WS_STAGES
#define ATTN_DOCTOR_BWD_WS_STAGES 2
#endif
inline constexpr int kWsBwdStages = ATTN_DOCTOR_BWD_WS_STAGES;
// the producer warpgroup's registers (setmaxnreg; the compute warpgroups get what remains).
// 40 / 232 ran 1.06-1.09x checked (1.04-1.06x unchecked) FA3's 24 / 240
// (bench/results/bwd-spill-h100-2026-11-27): the producer's spill falls more (ptxas: 412 ->
// 244 bytes unchecked; 182 -> 107 local-memory instructions in its code) than the compute
// warpgroups' rises (their step loop: 7 -> 43). At 56 / 224 ptxas serialises every wgmma
// of the compute warpgroups.
#ifndef ATTN_DOCTOR_BWD_WS_PRODUCER_REGS
#define ATTN_DOCTOR_BWD_WS_PRODUCER_REGS 40
#endif
inline constexpr int kWsBwdProducerRegs = ATTN_DOCTOR_BWD_WS_PRODUCER_REGS;

template <int D, int Stages>
struct WgmmaWsBwdShape {
  static constexpr int kThreads = 384;  // producer + two compute warpgroups
  static constexpr int kBlockN = kBwdBlockN, kBlockM = WgmmaBwdShape<D>::kBlockM;
  static constexpr int kStages = Stages;
  // setmaxnreg split of the 168 registers a thread the launch gives (384 threads, one CTA an
  // SM): the producer's count, and the compute warpgroups' what remains
  static constexpr int kProducerRegs = kWsBwdProducerRegs;
  static constexpr int kConsumerRegs = (168 * 384 - 128 * kProducerRegs) / 256 / 8 * 8;
  // The producer's loads keep load_rows' chunk loop rolled: unrolled, at 24 registers, its
  // chunk state spilled (1,708 bytes of spill in the kernel, 750 local-memory instructions
  // in the producer's code); rolled, 412 bytes and 182 (ptxas, cuobjdump; sm_90a, bf16
  // unchecked).
  static constexpr int kLoadUnroll = 1;
  static constexpr int kKVBytes = kBlockN * D * 2;
  static constexpr int kQBytes = kBlockM * D * 2;
  static constexpr int kDsBytes = kBlockN * kBlockM * 2;
  static constexpr int kDqBytes = kBlockM * D * 4;
  static constexpr int kStatBytes = 2 * Stages * kBlockM * 4;
  static constexpr int kBarriers = 2 * Stages + 3;  // full[S], empty[S], dq full, dq empty, aux
  static constexpr int kSmemBytes =
      2 * kKVBytes + 2 * Stages * kQBytes + 2 * kDsBytes + kDqBytes + kStatBytes + 8 * kBarriers + 1024;
  static_assert(kSmemBytes <= 227 * 1024, "a CTA may have 227 KB of shared memory");
  static_assert(kProducerRegs % 8 == 0 && 128 * kProducerRegs + 256 * kConsumerRegs <= 168 * 384,
                "setmaxnreg takes multiples of 8 out of the launch's registers");
};

// Rows [valid, R) of a Sw128Panels<D, R> tile set to zeros by NT threads (thread i of them):
// what load_rows leaves in the rows past the segment, over a tile the tensor memory
// accelerator filled whole.
template <class T, int D, int R, int NT>
__device__ __forceinline__ void zero_rows_from(T* tile, int valid, int i) {
  using Layout = attn::Sw128Panels<D, R>;
  constexpr int C = D / 8;
  for (int x = max(valid, 0) * C + i; x < R * C; x += NT)
    *reinterpret_cast<uint4*>(tile + Layout::offset(x / C, (x % C) * 8)) = make_uint4(0, 0, 0, 0);
}

template <class T, int D, int Stages, bool Checked, bool Tma>
__global__ void __launch_bounds__(384, 1)
    varlen_bwd_wgmma_ws_kernel(const VarlenBwdParams p, const __grid_constant__ BwdTmaMaps maps) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Shape = WgmmaWsBwdShape<D, Stages>;
  using Step = WgStep<T, D>;
  using LayoutKV = attn::Sw128Panels<D, kBwdBlockN>;
  using LayoutQ = attn::Sw128Panels<D, Shape::kBlockM>;
  constexpr int BN = Shape::kBlockN, BM = Shape::kBlockM, S = Stages, KM = Step::KM, DQN = Step::DQN;
  constexpr int U = Shape::kLoadUnroll;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  unsigned char* base = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  T* sK = reinterpret_cast<T*>(base);
  T* sV = sK + BN * D;
  T* sQ0 = sV + BN * D;        // Q [S][BM][D]
  T* sdO0 = sQ0 + S * BM * D;  // dO [S][BM][D]
  T* sdS = sdO0 + S * BM * D;  // dSᵀ [2][BN][BM]
  float* sDq = reinterpret_cast<float*>(sdS + 2 * BN * BM);  // [2 warpgroups][BM][DQN] (DqSw128)
  float* sLse = sDq + BM * D;                                // [S][BM]
  float* sDs = sLse + S * BM;                                // [S][BM]
  const uint32_t bar0 = smem_u32(sDs + S * BM);
  auto full = [&](int s) { return bar0 + 8u * uint32_t(s); };
  auto empty = [&](int s) { return bar0 + 8u * uint32_t(S + s); };
  const uint32_t dq_full = bar0 + 8u * (2 * S), dq_empty = dq_full + 8u, aux = dq_empty + 8u;

  const int tid = threadIdx.x;
  if (tid == 0) {
    for (int s = 0; s < S; ++s) {
      ws::mbar_init(full(s), 128);
      ws::mbar_init(empty(s), 8);
    }
    ws::mbar_init(dq_full, 8);
    ws::mbar_init(dq_empty, 128);
    ws::mbar_init(aux, 1);
    if (Tma) {
      ws::tma_prefetch_map(&maps.q);
      ws::tma_prefetch_map(&maps.k);
      ws::tma_prefetch_map(&maps.v);
      ws::tma_prefetch_map(&maps.dout);
      ws::tma_prefetch_map(&maps.dq);
    }
  }
  __syncthreads();
  const Cta at = this_cta(key_grid_x(p));
  const int warpgroup = __shfl_sync(0xffffffffu, tid / 128, 0);
  // step g of the CTA (over its key blocks): stage g % S, phase (g / S) & 1 of its barriers;
  // dQ tile g: phase g & 1 of the dq barriers
  int g = 0;
  // The key block's opening and closing, the same in both roles (the barriers match).
  auto in_block = [&](int n, int split, auto&& body) {
    const KeyBlockWalk w = key_block_walk(p, at, n, BM);
    if (Checked && !__shfl_sync(0xffffffffu, int(key_block_in_bounds<Tma>(p, w, split)), 0)) return;
    // the previous block's epilogue reads of sK / sV are done, and ordered before the tensor
    // memory accelerator's writes of this block's K and V
    gmma::fence_proxy_async_smem();
    if (n != at.x) __syncthreads();
    if (w.kb.exits) return;  // FA2: n_block * kBlockN >= actual_seqlen_k
    const int steps = int(w.steps.m_max - w.steps.m_min);
    body(w, steps);
    write_dk_dv_rows<T, D, BN, Shape::kThreads, false>(p, w.at, w.seg, n, w.n0, w.key_valid, sK, sV);
    g += steps;
  };

  if (warpgroup == 0) {
    // ---- producer ----
    ws::regs_dec<Shape::kProducerRegs>();
    uint32_t aux_phase = 0;  // the parity of aux's next phase (the producer's blocks through it)
    for_each_key_block(p, at, [&](int n, int split) {
      in_block(n, split, [&](const KeyBlockWalk& w, int steps) {
        const Segment& seg = w.seg;
        const int h = at.z;
        auto m0_of = [&](int t) { return (int(w.steps.m_max) - 1 - t) * BM; };
        // Step t's dQ tile into dq_accum. The checked form (Tma): one thread hands each
        // 32-column panel of both warpgroups' tiles to the tensor memory accelerator
        // (cp.reduce.async.bulk.tensor .add into the dq_accum map, tma_maps.hpp: the whole
        // 64-row box, as FA2 adds its whole tile, the rows past the segment adding the zeros
        // the element rule left there; key_block_in_bounds puts the box's rows inside dq_accum
        // and each within one row of the map), and frees the tile once the accelerator has
        // read it. Otherwise (and with ATTN_DOCTOR_BWD_DQ_BULK=0) the 128 threads add it by
        // red.global.add.v4.f32, rows past the segment skipped (add_dq_tile); compiled into
        // the checked form, that branch raised its spill (ptxas, spill stores: 548 bytes with
        // it, 256 without), so it is compiled only where taken. Measured slower: one
        // cp.reduce.async.bulk of a row per thread (docs/performance.md).
        auto reduce = [&](int t) {
          ws::mbar_wait(dq_full, uint32_t(g + t) & 1u);
          if constexpr (Tma && ATTN_DOCTOR_BWD_DQ_BULK) {
            if (tid == 0) {
              const int64_t off = dq_accum_row(p, at, w.cu_q_b, w.tm, w.m_top, split, m0_of(t)),
                            row = off / dq_row_stride(p), col = off - row * dq_row_stride(p);
#pragma unroll
              for (int c = 0; c < 2 * DQN; c += 32)  // both warpgroups' tiles, panel by panel
                ws::tma_reduce_add_2d(&maps.dq, smem_u32(sDq + (c / DQN) * BM * DQN + (c % DQN) * BM), int(col) + c,
                                      int(row));
              ws::bulk_commit_group();
              ws::bulk_wait_read<0>();
            }
          } else {
            add_dq_tile<DQN, DqSw128<DQN>>(p, at, seg, w.cu_q_b, w.tm, w.m_top, split, m0_of(t), 0, sDq);
            add_dq_tile<DQN, DqSw128<DQN>>(p, at, seg, w.cu_q_b, w.tm, w.m_top, split, m0_of(t), DQN, sDq + BM * DQN);
          }
          ws::mbar_arrive(dq_empty);
        };
        if (!Tma && steps > 0) {
          load_rows<T, D, BN, 128, false, LayoutKV, U>(p, w.at, static_cast<const T*>(p.k.data), p.k.heads,
                                                       p.k.rows, p.k.buffer, sK, seg.start_k, w.n0, w.key_valid,
                                                       w.h_kv, n, oc::kMainKeyReads, 0);
          load_rows<T, D, BN, 128, false, LayoutKV, U>(p, w.at, static_cast<const T*>(p.v.data), p.v.heads,
                                                       p.v.rows, p.v.buffer, sV, seg.start_k, w.n0, w.key_valid,
                                                       w.h_kv, n, oc::kMainKeyReads, int64_t(order::kValueBit));
        }
        for (int t = 0; t < steps; ++t) {
          const int st = (g + t) % S, m0 = m0_of(t);
          T* const q_tile = sQ0 + st * BM * D;
          T* const do_tile = sdO0 + st * BM * D;
          ws::mbar_wait(empty(st), (uint32_t((g + t) / S) & 1u) ^ 1u);
          // Tma: the step's Q and dO blocks (and, at the first step, K and V) as whole boxes. A
          // block with rows past the segment comes through `aux`, which the producer waits for
          // to zero those rows (load_rows' zeros) before it publishes the stage; the others
          // complete on the stage's full barrier itself (its bytes expected beside the arrivals).
          const bool kv = t == 0, kv_whole = w.n0 + BN <= w.key_valid, q_whole = m0 + BM <= seg.len_q;
          const bool direct = q_whole && (!kv || kv_whole);
          if constexpr (Tma) {
            if (tid == 0) {
              const uint32_t bar = direct ? full(st) : aux;
              ws::mbar_expect_tx(bar, 2 * attn::tile_bytes<T, D, BM>() + (kv ? 2 * attn::tile_bytes<T, D, BN>() : 0u));
              if (kv) {
                const int row = int(seg.start_k) + w.n0;
                attn::tma_copy_tile<T, D, BN>(&maps.k, smem_u32(sK), bar, w.h_kv, row);
                attn::tma_copy_tile<T, D, BN>(&maps.v, smem_u32(sV), bar, w.h_kv, row);
              }
              const int row = int(seg.start_q) + m0;
              attn::tma_copy_tile<T, D, BM>(&maps.q, smem_u32(q_tile), bar, h, row);
              attn::tma_copy_tile<T, D, BM>(&maps.dout, smem_u32(do_tile), bar, h, row);
              if (!direct) ws::mbar_arrive(aux);
            }
          } else {
            load_rows<T, D, BM, 128, false, LayoutQ, U>(p, w.at, static_cast<const T*>(p.q.data), p.q.heads,
                                                        p.q.rows, p.q.buffer, q_tile, seg.start_q, m0, seg.len_q, h,
                                                        m0 / w.tm, oc::kMainQueryReads, 0);
            load_rows<T, D, BM, 128, false, LayoutQ, U>(p, w.at, static_cast<const T*>(p.dout.data), p.dout.heads,
                                                        p.dout.rows, p.dout.buffer, do_tile, seg.start_q, m0,
                                                        seg.len_q, h, m0 / w.tm, oc::kMainQueryReads, 0);
          }
          load_row_stats<BM, false>(p, w.at, seg, w.cu_q_b, w.tm, m0, sLse + st * BM, sDs + st * BM);
          cp_async_commit();
          if (t >= 2) reduce(t - 2);  // while step t's copies land
          cp_async_wait<0>();
          if (Tma && !direct) {
            ws::mbar_wait(aux, aux_phase);
            aux_phase ^= 1u;
            if (!kv_whole && kv) {
              zero_rows_from<T, D, BN, 128>(sK, w.key_valid - w.n0, tid);
              zero_rows_from<T, D, BN, 128>(sV, w.key_valid - w.n0, tid);
            }
            if (!q_whole) {
              zero_rows_from<T, D, BM, 128>(q_tile, seg.len_q - m0, tid);
              zero_rows_from<T, D, BM, 128>(do_tile, seg.len_q - m0, tid);
            }
          }
          gmma::fence_proxy_async_smem();
          ws::mbar_arrive(full(st));
        }
        for (int t = steps < 2 ? 0 : steps - 2; t < steps; ++t) reduce(t);
        // the block's additions performed before the next block's (a dq_accum copy's blocks
        // add in a fixed order: deterministic)
        if (Tma && ATTN_DOCTOR_BWD_DQ_BULK && tid == 0) ws::bulk_wait<0>();
        __syncthreads();  // the compute warpgroups are done with sK / sV
        __syncthreads();  // dK and dV are in sK / sV
      });
    });
    return;
  }

  // ---- compute ----
  ws::regs_inc<Shape::kConsumerRegs>();
  const int ctid = tid - 128, warp = ctid >> 5, lane = tid & 31;
  const int wg = warpgroup - 1;
  for_each_key_block(p, at, [&](int n, int split) {
    in_block(n, split, [&](const KeyBlockWalk& w, int steps) {
      float dk[D / 2], dv[D / 2];
#pragma unroll
      for (int i = 0; i < D / 2; ++i) dk[i] = dv[i] = 0.f;
      const uint32_t ka_lo = Step::key_rows_lo(sK, wg), va_lo = Step::key_rows_lo(sV, wg);
      const uint32_t kb_lo = Step::k_cols_lo(sK, wg);
      const int key_a = Step::key_of_rows(w, warp, lane);
      for (int t = 0; t < steps; ++t) {
        const int st = (g + t) % S, m0 = (int(w.steps.m_max) - 1 - t) * BM;
        const uint32_t q_addr = smem_u32(sQ0 + st * BM * D), do_addr = smem_u32(sdO0 + st * BM * D);
        ws::mbar_wait(full(st), uint32_t((g + t) / S) & 1u);
        float s[BM / 2], dp[BM / 2];
        Step::issue_s_dp(s, dp, ka_lo, va_lo, q_addr, do_addr);
        gmma::wgmma_wait<0>();
        gmma::pin(s);
        gmma::pin(dp);
        uint32_t pa[KM][4], da[KM][4];
        Step::p_ds(w, m0, sLse + st * BM, sDs + st * BM, key_a, lane, s, dp, pa, da);
        Step::issue_dv_dk(dv, dk, pa, da, q_addr, do_addr);
        // dSᵀ -> shared memory (buffer t % 2: the other one may still be read by the other
        // warpgroup's dQ of step t - 1), while dV and dK run
        T* ds_tile = sdS + (t & 1) * BN * BM;
        Step::store_ds(ds_tile, warp, lane, da);
        gmma::fence_proxy_async_smem();
        ws::named_sync(1, 256);  // both warpgroups' dSᵀ rows are in
        float dq[DQN / 2];
        Step::dq_and_wait(dq, ds_tile, kb_lo, pa, da, dk, dv);  // dV, dK and dQ of step t
        __syncwarp();
        if (lane == 0) ws::mbar_arrive(empty(st));  // Q, dO, LSE, softmax_d of the stage are read
        ws::mbar_wait(dq_empty, (uint32_t(g + t) & 1u) ^ 1u);
        Step::template store_dq<DqSw128<DQN>>(sDq + wg * BM * DQN, warp, lane, dq);
        gmma::fence_proxy_async_smem();  // before the tensor memory accelerator reads the tile
        __syncwarp();
        if (lane == 0) ws::mbar_arrive(dq_full);
      }
      __syncthreads();  // both warpgroups are done with sK / sV
      stage_dk_dv<T, D>(p, ctid, dk, dv, sK, sV);
      __syncthreads();
    });
  });
#else
  __trap();  // built for a target without wgmma: the launcher never selects it there
#endif
}

}  // namespace ad::kern::bwd

// ---------------------------------------------------------------------------------------
// the instantiations: kernels/sm90a/varlen_attention_bwd_wgmma_{bf16,fp16}.cu name them (one
// element type per file), kernels/varlen_attention_bwd.cu launches them

#include "../cuda_check.hpp"
#include "../launch.hpp"

namespace ad::kern::bwd {

template <class T, int D>
detail::BwdWgmmaKernels bwd_wgmma_kernels_d(bool checked) {
  using Fallback = BwdShape<D, default_block_m(D)>;
  using Ws = WgmmaWsBwdShape<D, kWsBwdStages>;
  detail::BwdWgmmaKernels k;
  k.main = {checked ? &varlen_bwd_wgmma_kernel<T, D, true> : &varlen_bwd_wgmma_kernel<T, D, false>,
            WgmmaBwdShape<D>::kThreads, WgmmaBwdShape<D>::kSmemBytes};
  // the warp-specialised kernel at d128 only: at d64 it ran 3-8 % slower than the wgmma kernel
  // on an H100 (bench/results/bwd-ws-tma-h100-2026-11-28), 4-7 % with bulk dQ reductions on an
  // H200 (ATTN_DOCTOR_BWD_WS_D64)
  if constexpr (D == 128 || ATTN_DOCTOR_BWD_WS_D64) {
    if (checked && ATTN_DOCTOR_BWD_WS_TMA)
      k.ws = {&varlen_bwd_wgmma_ws_kernel<T, D, kWsBwdStages, true, true>, Ws::kThreads, Ws::kSmemBytes};
#if ATTN_DOCTOR_BWD_WGMMA_WS
    if (!checked) k.ws = {&varlen_bwd_wgmma_ws_kernel<T, D, kWsBwdStages, false, false>, Ws::kThreads, Ws::kSmemBytes};
#endif
  }
  if (checked) k.fallback = {&varlen_bwd_fallback_kernel<T, D>, Fallback::kThreads, int(Fallback::smem_bytes(sizeof(T)))};
  return k;
}

template <class T>
detail::BwdWgmmaKernels bwd_wgmma_kernels(int head_dim, bool checked) {
  if (head_dim == 64) return bwd_wgmma_kernels_d<T, 64>(checked);
  if (head_dim == 128) return bwd_wgmma_kernels_d<T, 128>(checked);
  throw cuda::LaunchConfigError("wgmma varlen backward: head_dim " + std::to_string(head_dim) +
                                " has no instantiation (64, 128)");
}

}  // namespace ad::kern::bwd
