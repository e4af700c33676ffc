// Varlen attention forward on Hopper's warpgroup tensor cores, warp-specialised (head dim 128):
// a producer warpgroup streams K and V through a ring of shared-memory stages guarded by
// mbarriers, two consumer warpgroups of 64 query rows each run the GEMMs and the softmax.
// The technique is FlashAttention-3's (Shah et al. 2024, "FlashAttention-3", sections 3.1-3.2;
// hopper/flash_fwd_kernel_sm90.h and mainloop_fwd_sm90_tma_gmma_ws.hpp in
// Dao-AILab/flash-attention, read, not copied); the contract is the wgmma kernel's
// (varlen_attention_wgmma.cuh: tile, key range, masks, descriptors, epilogue), whose functions
// and the loaders of kernels/varlen_attention.cuh this kernel calls.
//
//   grid (ceil(max_seqlen_q / 128), N, H); 384 threads: warpgroup 0 loads, 1 and 2 compute.
//
// Producer (warpgroup 0, setmaxnreg down to kProducerRegs): Q with the first key tile, then
// for each key tile i, K_i and V_i into stage i % S once the consumers released it (the
// stage's "empty" mbarrier), with load_key_rows (FA2's addresses, cp.async: not the tensor
// memory accelerator, so the unchecked form performs the accesses FA2 performs and `--raw`
// shows their symptom). A tile is published when its copies have landed: the producer
// waits for its copy group (cp.async.wait_group, one group behind the newest, so the next
// tile's copies are in flight meanwhile), orders its writes before the tensor cores' reads
// (fence.proxy.async, the writer's side as the PTX ISA gives it) and arrives on the stage's
// "full" mbarrier (128 arrivals). A zero-filled row (st.shared) is ordered by the same fence.
// The checked form's first launch, whose accesses all lie in bounds, loads the tiles that lie
// whole inside the key range (and a whole Q tile) with the tensor memory accelerator instead
// (FA3's loads; tma_maps.hpp): one thread tells the stage's full barrier to expect the tile's
// bytes and issues its boxes, the 128 arrivals stay as they are (the tile's cp.async group is
// then empty), so the phase completes once every producer thread has arrived and the bytes
// have landed, whichever path each tile took.
//
// Consumers (warpgroups 1 and 2, setmaxnreg up to kConsumerRegs): the wgmma kernel's
// intra-warpgroup overlap (S_i = Q·K_iᵀ and O += P_{i-1}·V_{i-1} issued back to back, the
// softmax of S_i under the P·V product), waiting on the full barriers instead of a CTA-wide
// barrier and releasing K_i once S_i is complete and V_{i-1} once its product is (one arrival
// per warp: 8 per stage). With PingPong the two warpgroups take turns issuing their GEMMs
// (named barriers 1 and 2, bar.sync / bar.arrive of 256 threads), so one warpgroup's softmax
// runs while the other's GEMMs hold the tensor cores.
//
// Forms: the unchecked kernel (FA2's accesses, as they are), and ExitIfUnsafe, the checked
// form's first launch: a CTA of which fwd_cta_in_bounds does not hold (some access may lie
// outside q, k, v, out or lse) returns at once, the others run this body with the coverage
// count; the second launch is the checked wgmma kernel's (varlen_fwd_wgmma_fallback_kernel:
// the same predicate, so every CTA runs in exactly one of the two).
#pragma once

#include "../tma_maps.hpp"
#include "varlen_attention_wgmma.cuh"

namespace ad::kern::attn {

// Stages: K/V tiles in the ring (2: 160 KB with Q; 3: 224 KB). Registers: 168 a thread at
// launch (384 threads, one CTA per SM); the producer gives back down to 56 and the consumers
// take up to 224 (128 * 56 + 256 * 224 = 64,512 = 384 * 168; ptxas allocates each side within
// its count: the consumers' loop uses 220, the producer's 40 spilled its loader's state).
template <int D, int Stages, bool PingPong>
struct WgmmaWsShape {
  static constexpr int kBlockN = 128;
  static constexpr int kThreads = 384;
  static constexpr int kStages = Stages;
  static constexpr int kProducerRegs = 56, kConsumerRegs = 224;
  static constexpr int kRangeBlockN = TileShape<D, default_mt(D)>::kBlockN;  // key-range granularity
  static constexpr int kQBytes = kBlockM * D * 2;
  static constexpr int kKVBytes = kBlockN * D * 2;
  static constexpr int kBarOffset = kQBytes + 2 * Stages * kKVBytes;  // 4 x Stages mbarriers
  static constexpr int kSmemBytes = kBarOffset + 4 * Stages * 8 + 1024;
  static_assert(kSmemBytes <= 227 * 1024, "Q, the K/V ring and its barriers must fit a CTA's shared memory");
};
// The launcher's configuration.
struct WgmmaWsDefault {
  static constexpr int kStages = 2;
  static constexpr bool kPingPong = true;
};
// The variant the benchmarks time beside it (AttnKernel::wgmma_ws_alt): no ping-pong. Measured
// on an H100 the ping-pong adds 0.2-2.7 % (bench/results/fwd-ws-h100-2026-11-27). A persistent
// form (one CTA per SM looping over the query tiles) ran at 0.82-1.00x this kernel and was
// removed (bench/results/fwd-persistent-h100-2026-11-27).
struct WgmmaWsAlt {
  static constexpr int kStages = 2;
  static constexpr bool kPingPong = false;
};

template <class T, int D, int Stages, bool PingPong, bool ExitIfUnsafe>
__global__ void __launch_bounds__(384, 1)
    varlen_fwd_wgmma_ws_kernel(const VarlenFwdParams p, const __grid_constant__ FwdTmaMaps tma) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Shape = WgmmaWsShape<D, Stages, PingPong>;
  using LayoutQ = Sw128Panels<D, kBlockM>;
  constexpr int BN = Shape::kBlockN;
  using LayoutKV = Sw128Panels<D, BN>;
  constexpr int S = Stages;
  constexpr int RB = Shape::kRangeBlockN;
  constexpr int NB = BN / 8;
  constexpr int DB = D / 8;
  constexpr int KP = BN / 16;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* base = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  T* sQ = reinterpret_cast<T*>(base);
  const uint32_t sbase = smem_u32(base);
  auto k_tile = [&](int i) { return SmemTile<KeyRole, T>{reinterpret_cast<T*>(base + Shape::kQBytes + i * Shape::kKVBytes)}; };
  auto v_tile = [&](int i) {
    return SmemTile<ValueRole, T>{reinterpret_cast<T*>(base + Shape::kQBytes + (S + i) * Shape::kKVBytes)};
  };
  // mbarriers: full K, full V, empty K, empty V, one per stage each
  auto bar = [&](int kind, int s) -> uint32_t { return sbase + uint32_t(Shape::kBarOffset + (kind * S + s) * 8); };
  enum { kFullK = 0, kFullV = 1, kEmptyK = 2, kEmptyV = 3 };

  if constexpr (ExitIfUnsafe) pdl_launch_dependents();  // the second launch may start (launch_fwd)
  const QueryTile tile = fwd_tile(p, kBlockM);
  if (skips<false>(p, tile)) return;  // FA2's per-tile exit: accesses nothing, in both forms
  const int m_block = tile.at.x, h = tile.at.z, row0 = tile.row0;
  const Segment seg = tile.seg;
  const KeyRange kr = key_range(p, seg, m_block, RB);
  const int key_lo = kr.n_min * RB;
  const int key_hi = min(kr.n_max * RB, seg.len_k);
  const bool has_keys = kr.n_max > kr.n_min;
  const int t_hi = has_keys ? (key_hi - 1) / BN : 0;
  const int num_tiles = has_keys ? t_hi - key_lo / BN + 1 : 0;  // tile i covers keys [(t_hi - i) BN, + BN)

  const int tid = threadIdx.x;
  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < S; ++s) {
      ws::mbar_init(bar(kFullK, s), 128);
      ws::mbar_init(bar(kFullV, s), 128);
      ws::mbar_init(bar(kEmptyK, s), 8);
      ws::mbar_init(bar(kEmptyV, s), 8);
    }
  }
  if constexpr (ExitIfUnsafe) {  // the in-bounds test's parts side by side, combined by this barrier
    if (!fwd_cta_in_bounds_split<Shape::kThreads>(p, tile, kBlockM, RB)) return;
  } else {
    __syncthreads();
  }
  const int warpgroup = __shfl_sync(0xffffffffu, tid / 128, 0);

  if (warpgroup == 0) {
    // ---- producer ----
    ws::regs_dec<Shape::kProducerRegs>();
    if (num_tiles == 0) return;
    const KeyPipelineParams kpipe = key_pipeline(p);
    const ValuePipelineParams vpipe = value_pipeline(p);
    const int h_kv = h / kpipe.group;
    // The first launch of the checked form (every access of this CTA in bounds) loads by the
    // tensor memory accelerator each K / V tile whose rows all lie inside the key range
    // (load_key_rows' interior tiles) and the Q tile when the segment holds all its rows; the
    // others (the key range's partial tiles, whose rows outside it must be zeros: V rows past
    // the segment must not reach the product, 0 * NaN is NaN; a partial Q tile; the single-
    // query GQA swap's Q rows) keep the cp.async loaders. In bounds, every row index lies
    // below the operand's rows, which tma_operand_ok keeps below 2^31: the signed coordinates
    // hold it. The unchecked kernel keeps cp.async for every tile: `--raw` performs FA2's
    // addresses as they are (a TMA box would clamp, zero-fill or refuse them instead).
    constexpr bool kTma = ExitIfUnsafe && ATTN_DOCTOR_FWD_TMA;
    const bool tma_k = kTma && tma.has_k, tma_v = kTma && tma.has_v;
    const bool tma_q = kTma && tma.has_q && !p.seqlenq_ngroups_swapped && row0 + kBlockM <= seg.len_q;
    auto whole = [&](int i) { return (t_hi - i) * BN >= key_lo && (t_hi - i) * BN + BN <= key_hi; };
    auto k_addr = [&](int buf) { return sbase + uint32_t(Shape::kQBytes + buf * Shape::kKVBytes); };
    auto v_addr = [&](int buf) { return sbase + uint32_t(Shape::kQBytes + (S + buf) * Shape::kKVBytes); };
    if (kTma && tid == 0) {
      if (tma_q) ws::tma_prefetch_map(&tma.q);
      if (tma_k) ws::tma_prefetch_map(&tma.k);
      if (tma_v) ws::tma_prefetch_map(&tma.v);
    }
    auto load_k = [&](int i, int buf) {
      if (tma_k && whole(i)) {
        if (tid == 0) tma_load_tile<T, D, BN>(&tma.k, k_addr(buf), bar(kFullK, buf), h_kv, int(seg.start_k) + (t_hi - i) * BN);
        return;
      }
      load_key_rows<T, D, BN, 128, false, LayoutKV, KeyRole, true>(p, kpipe, k_tile(buf), seg, tile.at, h_kv,
                                                                    (t_hi - i) * BN, key_lo, key_hi, RB);
    };
    auto load_v = [&](int i, int buf) {
      if (tma_v && whole(i)) {
        if (tid == 0) tma_load_tile<T, D, BN>(&tma.v, v_addr(buf), bar(kFullV, buf), h_kv, int(seg.start_k) + (t_hi - i) * BN);
        return;
      }
      load_key_rows<T, D, BN, 128, false, LayoutKV, ValueRole, true>(p, vpipe, v_tile(buf), seg, tile.at, h_kv,
                                                                      (t_hi - i) * BN, key_lo, key_hi, RB);
    };
    // Q joins K_0's copy group and full barrier (stage 0 starts empty: no wait).
    if (tma_q) {
      if (tid == 0) tma_load_tile<T, D, kBlockM>(&tma.q, sbase, bar(kFullK, 0), h, int(seg.start_q) + row0);
    } else {
      load_q_tile<T, D, 128, false, LayoutQ>(p, sQ, seg, tile.at, row0, false);
    }
    int s = 0;
    uint32_t phase = 0;
    for (int i = 0; i < num_tiles; ++i) {
      ws::mbar_wait(bar(kEmptyK, s), phase ^ 1);
      load_k(i, s);
      cp_async_commit();
      if (i > 0) {  // V_{i-1} landed (K_i still in flight)
        cp_async_wait<1>();
        gmma::fence_proxy_async_smem();
        ws::mbar_arrive(bar(kFullV, s == 0 ? S - 1 : s - 1));
      }
      ws::mbar_wait(bar(kEmptyV, s), phase ^ 1);
      load_v(i, s);
      cp_async_commit();
      cp_async_wait<1>();  // (Q and) K_i landed
      gmma::fence_proxy_async_smem();
      ws::mbar_arrive(bar(kFullK, s));
      if (++s == S) s = 0, phase ^= 1;
    }
    cp_async_wait<0>();
    gmma::fence_proxy_async_smem();
    ws::mbar_arrive(bar(kFullV, s == 0 ? S - 1 : s - 1));
    return;
  }

  // ---- consumers ----
  ws::regs_inc<Shape::kConsumerRegs>();
  const int ctid = tid - 128, warp = ctid >> 5, lane = tid & 31;
  const int wg = warpgroup - 1;  // Q rows [64 wg, 64 wg + 64) of the tile
  const fa2::Flags flags = fa2_flags(p, RB);
  const SoftmaxScale sc = softmax_scale_of(p);
  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
  float m_i[2] = {-INFINITY, -INFINITY}, l_i[2] = {0.f, 0.f};
  const int row_a = row0 + warp * 16 + (lane >> 2);

  if (num_tiles > 0) {
    float s_acc[NB * 4];
#pragma unroll
    for (int i = 0; i < NB * 4; ++i) s_acc[i] = 0.f;
    uint32_t pf[KP][4];
    float corr[2];
    auto softmax = [&](int n0) {
      softcap_tile<NB>(s_acc, sc);
      if (tile_needs_mask(n0, BN, row0, kBlockM, seg.len_q, seg.len_k, flags, key_lo, key_hi))
        mask_tile<NB>(s_acc, n0, row_a, lane, seg.len_q, seg.len_k, flags, key_lo, key_hi);
      online_softmax<NB>(s_acc, m_i, l_i, corr, sc.log2);
    };
    auto pack_p = [&]() {
#pragma unroll
      for (int kc = 0; kc < KP; ++kc) {
        pf[kc][0] = Elem<T>::pack(s_acc[8 * kc + 0], s_acc[8 * kc + 1]);
        pf[kc][1] = Elem<T>::pack(s_acc[8 * kc + 2], s_acc[8 * kc + 3]);
        pf[kc][2] = Elem<T>::pack(s_acc[8 * kc + 4], s_acc[8 * kc + 5]);
        pf[kc][3] = Elem<T>::pack(s_acc[8 * kc + 6], s_acc[8 * kc + 7]);
      }
    };
    auto k_addr = [&](int s) { return sbase + uint32_t(Shape::kQBytes + s * Shape::kKVBytes); };
    auto v_addr = [&](int s) { return sbase + uint32_t(Shape::kQBytes + (S + s) * Shape::kKVBytes); };
    auto release = [&](uint32_t addr) {
      __syncwarp();
      if (lane == 0) ws::mbar_arrive(addr);
    };
    // Ping-pong: warpgroup 0 issues first; each then waits for its turn before issuing its
    // GEMMs and hands the turn over after. Steps per warpgroup: num_tiles + 1 (tile 0, tiles
    // 1.., the last P·V); the second warpgroup's last hand-over is left out, so that every
    // arrival is matched by a sync.
    auto turn_wait = [&]() {
      if constexpr (PingPong) ws::named_sync(1 + wg, 256);
    };
    auto turn_pass = [&](bool last) {
      if constexpr (PingPong) {
        if (!(last && wg == 1)) ws::named_arrive(2 - wg, 256);
      }
    };
    if constexpr (PingPong) {
      if (wg == 1) ws::named_arrive(1, 256);
    }

    // Tile 0: S_0 alone (its full barrier also publishes Q).
    ws::mbar_wait(bar(kFullK, 0), 0);
    turn_wait();
    gmma::pin(s_acc);
    gmma::wgmma_fence();
    gemm_qk<T, D, BN>(s_acc, sbase, wg, k_addr(0));
    gmma::wgmma_commit();
    turn_pass(false);
    gmma::wgmma_wait<0>();
    gmma::pin(s_acc);
    release(bar(kEmptyK, 0));
    softmax(t_hi * BN);
    pack_p();

    int cur = 0;
    uint32_t phase = 0;  // of stage cur's barriers
    for (int i = 1; i < num_tiles; ++i) {
      const int prev = cur;
      const uint32_t prev_phase = phase;
      if (++cur == S) cur = 0, phase ^= 1;
      ws::mbar_wait(bar(kFullK, cur), phase);
      ws::mbar_wait(bar(kFullV, prev), prev_phase);
      turn_wait();
      gmma::pin(o);
      gmma::pin(pf);
      gmma::wgmma_fence();
      gemm_qk<T, D, BN>(s_acc, sbase, wg, k_addr(cur));
      gmma::wgmma_commit();
      gemm_pv<T, D, BN>(o, pf, v_addr(prev));  // P_{i-1}
      gmma::wgmma_commit();
      turn_pass(false);
      gmma::wgmma_wait<1>();  // S_i
      gmma::pin(s_acc);
      release(bar(kEmptyK, cur));
      softmax((t_hi - i) * BN);
      gmma::pin(s_acc);
      gmma::pin(corr);
      gmma::pin(l_i);
      gmma::pin(m_i);
      gmma::wgmma_wait<0>();  // P_{i-1}·V_{i-1}
      gmma::pin(o);
      gmma::pin(pf);
      release(bar(kEmptyV, prev));
      rescale_rows<DB>(o, corr);
      pack_p();
    }
    ws::mbar_wait(bar(kFullV, cur), phase);
    turn_wait();
    gmma::pin(o);
    gmma::pin(pf);
    gmma::wgmma_fence();
    gemm_pv<T, D, BN>(o, pf, v_addr(cur));  // P_{last}
    gmma::wgmma_commit();
    turn_pass(true);
    gmma::wgmma_wait<0>();
    gmma::pin(o);
    gmma::pin(pf);
  }

  // Epilogue as the wgmma kernel's: the warp's 16 rows staged in its own Q rows (its
  // warpgroup's reads of them completed at the last wait), 16-byte stores, the LSE.
  float lse[2];
  finish_rows<DB>(o, m_i, l_i, sc.nat, lse);
  stage_rows<T, DB, LayoutQ>(sQ, o, warp * 16, lane);
  __syncwarp();
  store_out_rows<T, D, 16, false, LayoutQ, ExitIfUnsafe>(p, sQ, seg, tile.at, row0, warp, lane, false);
  write_lse_rows<false>(p, tile.at, seg, row_a, lane, lse);
#else
  __trap();  // built for a target without wgmma: the launcher never selects it there
#endif
}

// The instantiations (kernels/sm90a/varlen_attention_wgmma_ws_{bf16,fp16}.cu): head dim 128
// (64: benchmarks, bf16, a build with ATTN_DOCTOR_WGMMA_WS_D64), the unchecked form or (checked)
// the checked form's first launch.
template <class T, class Cfg, int D = 128>
detail::FwdWsKernel wgmma_ws_kernel(bool checked) {
  using Shape = WgmmaWsShape<D, Cfg::kStages, Cfg::kPingPong>;
  constexpr int S = Cfg::kStages;
  constexpr bool PP = Cfg::kPingPong;
  return detail::FwdWsKernel{checked ? &varlen_fwd_wgmma_ws_kernel<T, D, S, PP, true>
                                   : &varlen_fwd_wgmma_ws_kernel<T, D, S, PP, false>,
                           Shape::kThreads, Shape::kSmemBytes};
}

}  // namespace ad::kern::attn
