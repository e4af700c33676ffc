// Varlen attention forward on Hopper's warpgroup tensor cores (wgmma, sm_90a), checked and
// unchecked, with the FA2 indexing contract and the violation records of the mma.sync kernel
// (kernels/varlen_attention.cuh, whose segment, key-range, mask, loader, LSE and epilogue
// functions this kernel calls, so the two cannot drift apart).
//
//   q   (total_q, H, D)   k, v (total_k, Hk, D)   out (total_q, H, D)   lse (H, total_q) fp32
//   grid (ceil(max_seqlen_q / 128), N, H); tile (m, b, h) exits when m * 128 >= len_q.
//
// Shape: a CTA is FA2's 128-row tile, two warpgroups of 64 query rows (256 threads); keys in
// tiles of BN (128 for d128, one CTA per SM; 64 for d64, two CTAs per SM; 64 for d192, one CTA
// per SM: WgmmaDefault). Head dims 64, 128 and 192 (96 is not a whole number of the 64-column
// panels below; 256 takes FA2's 64-row tile on an H100): the others run the mma.sync kernel.
// S = Q·Kᵀ is wgmma m64nBNk16 with Q and K from shared memory (both K-major); O += P·V is
// wgmma m64nDk16 with P from registers (the S accumulators converted in place: the wgmma
// accumulator and A-fragment layouts are the mma.m16n8k16 ones, per warp) and V from shared
// memory read MN-major (transposed by the descriptor); a variant the benchmarks compare
// (--wgmma-alt) passes P through shared memory instead (WgmmaAlt says why it is not the
// default). Tiles are 128-byte swizzled in 64-column panels, the canonical layout the
// descriptors name (wgmma.cuh).
//
// Schedule (FA3's intra-warpgroup overlap, Shah et al. 2024, "FlashAttention-3", section 3.2;
// hopper/mainloop_fwd_sm90_tma_gmma_ws.hpp in Dao-AILab/flash-attention): in iteration i
// a warpgroup issues S_i = Q·K_iᵀ and O += P_{i-1}·V_{i-1} back to back, waits for S_i only,
// runs the softmax of S_i (and stores P_i) while the P·V product is still on the tensor
// cores, then waits for it and rescales O (with P in registers ptxas hoists that wait above
// the softmax: see WgmmaAlt). Loads are cp.async (not the tensor memory accelerator: TMA
// coordinates are signed 32-bit and would clamp, not reproduce, the unsigned row offsets of
// the contract), three stages deep where they fit (two for d128 with P in shared memory),
// published by cp.async.wait_group + fence.proxy.async + one CTA barrier per iteration.
// Registers: S (BN / 2) + P (BN / 4) + O (D / 2) fp32/b32 per thread.
//
// Checked form, in two launches (as the wgmma backward's): the first runs this body unchecked,
// with the coverage count, on every CTA whose accesses all lie inside their buffers
// (fwd_cta_in_bounds in varlen_attention.cuh: Q / out rows, LSE elements, the key range in k
// and v); a CTA that fails the test exits before touching anything, and the second launch
// (varlen_fwd_wgmma_fallback_kernel, persistent) runs the checked body for it as the CTA of
// FA2's grid it is, so the records, launch-order keys and coverage counts are the one-launch
// checked body's. A healthy batch pays a test per CTA and the second launch's scan; the first
// launch's image has the unchecked form's main loop (bench/fwd_sass.py). The checked body
// itself: the key rows a CTA reads are contiguous, so one comparison per buffer picks between
// two copies of the main loop: the unchecked loop when every row is inside k and v, the
// per-tile checked loader otherwise (see mainloop below); the Q/out test per tile, the LSE
// bound and the coverage count. (In one launch the checked body cost +6 % at d64, +11 to
// +13 % at d128 on an H100: the checked image at the register cap reloads kernel parameters
// and recomputes addresses in the hot loop, bench/results/fwd-merged-h100-2026-11-27.)
//
// Key range: the rows a CTA reads are the mma.sync kernel's, [n_min, n_max) in its key tiles
// of RB = 64 (d64) / 32 (d128) keys, clipped to the segment; this kernel covers them with
// BN-key compute tiles and zero-fills (and masks) what lies outside. The same rows are read,
// so the checked forms refuse and record the same accesses, with the same launch-order keys.
#pragma once

#include <type_traits>

#include "../varlen_attention.cuh"
#include "wgmma.cuh"

namespace ad::kern::attn {

// BN: keys per compute tile (S is 64 x BN per warpgroup); MinBlocks: CTAs per SM the launch
// bounds ask for (2 caps the registers at 128 per thread, and needs BN = 64 to fit); PSmem: P
// goes through shared memory (P·V reads both operands there) instead of registers.
template <int D, int BN, int MinBlocks, bool PSmem>
struct WgmmaShape {
  static constexpr int kBlockN = BN;
  static constexpr int kMinBlocks = MinBlocks;
  static constexpr int kWarpgroups = kBlockM / 64;            // 2: one per 64 query rows
  static constexpr int kThreads = kWarpgroups * 128;
  static constexpr int kRangeBlockN = TileShape<D, default_mt(D)>::kBlockN;  // key-range granularity
  static constexpr int kQBytes = kBlockM * D * 2;
  static constexpr int kKVBytes = kBlockN * D * 2;
  static constexpr int kPBytes = PSmem ? 2 * kBlockM * kBlockN * 2 : 0;  // 2 x 64 x BN per warpgroup
  // Three K/V stages where they fit in the 227 KB a CTA may have, else two; 1 KB to align the
  // base to a swizzle atom.
  static constexpr int kStages = kQBytes + 6 * kKVBytes + kPBytes + 1024 <= 227 * 1024 ? 3 : 2;
  static constexpr int kSmemBytes = kQBytes + 2 * kStages * kKVBytes + kPBytes + 1024;
};
// The shape the launcher uses for each head dim, measured on an H200 (bench/results/):
// d64: 64-key tiles, two CTAs per SM (S, P and O fit 128 registers), 1.16-1.22x the one-CTA
// 128-key shape; d128: 128-key tiles, one CTA per SM (64-key tiles at 128 registers spill, and
// a 128-key CTA's shared memory leaves no room for a second). P stays in registers.
// d192: 64-key tiles, one CTA per SM (O alone is 96 registers; Q and three K/V stages take
// 193 KB of the 227), as FA3 keeps its head dim 192 tiles below 128 keys.
// Interior K/V tiles (every row inside the key range) are loaded with incrementally computed
// addresses (load_key_rows' Interior path): 3 instructions per 16-byte chunk instead of 13.
template <int D> struct WgmmaDefault {
  static constexpr int kBlockN = D == 128 ? 128 : 64, kMinBlocks = D == 64 ? 2 : 1;
  static constexpr bool kPSmem = false, kInteriorLoads = true;
};
// The variant bench/gpu times against it (--wgmma-alt): P through shared memory. With P in
// registers ptxas reuses them as scratch for the next softmax as soon as it may, so it places
// the wait for P·V ahead of the softmax and the two do not overlap (SASS: WARPGROUP.DEPBAR
// before the SHFL/MUFU.EX2 of the softmax); with P in shared memory the wait stays after the
// softmax and its stores. Measured, the overlap does not pay for the P stores, the shared-
// memory A operand and (d128) the third K/V stage it costs: 0.94-0.97x the register variant.
template <int D> struct WgmmaAlt {
  static constexpr int kBlockN = D == 64 ? 64 : 128, kMinBlocks = D == 64 ? 2 : 1;
  static constexpr bool kPSmem = true, kInteriorLoads = true;
};

// [ROWS][D] tile in 64-column panels of ROWS x 128 bytes; 16-byte chunk c of row r stored at
// chunk c ^ (r % 8) of its 128-byte row: the 128-byte swizzle wgmma reads (PTX ISA, "Shared
// Memory Matrix Layout", 128B swizzling mode), given 1024-byte aligned panels.
template <int D, int ROWS>
struct Sw128Panels {
  // Rows 8 apart have the same swizzle: offset(row + 8 n, col) == offset(row, col) + 8 n * kRowElems
  // inside a panel (the interior K/V loads step through a tile by it).
  static constexpr int kRowElems = 64;
  __host__ __device__ __forceinline__ static int offset(int row, int col) {
    return (col >> 6) * (ROWS * 64) + row * 64 + ((((col >> 3) & 7) ^ (row & 7)) << 3) + (col & 7);
  }
};

// Descriptors (gmma::sw128_desc_words): the high word is a constant (8-row groups 1024 bytes
// apart, 128-byte swizzle), the low word holds the start address and the leading byte offset,
// and a k16 step adds its byte offset / 16 to the low word (no carry out of the 14-bit address
// field: shared addresses are below 2^18), as CUTLASS's descriptor iterator does. Cheap to
// rebuild per tile, in uniform registers.
// K-major operand (Q as A, K as B of Q·Kᵀ): rows from row_base of a [ROWS][D] panel tile; the
// leading byte offset is unused by swizzled K-major layouts (encoded as 1). Step kk (columns
// [16 kk, 16 kk + 16)) is panel kk / 4, 32 bytes per step inside it.
__device__ __forceinline__ uint32_t kmajor_lo(uint32_t tile_addr, int row_base) {
  return (((tile_addr + uint32_t(row_base) * 128u) & 0x3FFFFu) >> 4) | (1u << 16);
}
template <int ROWS>
__device__ __forceinline__ constexpr uint32_t kmajor_step(int kk) {
  return uint32_t(((kk >> 2) * ROWS * 128 + (kk & 3) * 32) >> 4);
}
// MN-major B operand (V in P·V, transposed by the descriptor): all D columns of a [ROWS][D]
// panel tile, 64-column panels ROWS * 128 bytes apart (leading byte offset). Step kc (keys
// [16 kc, 16 kc + 16)) is 16 rows of 128 bytes further.
template <int ROWS>
__device__ __forceinline__ uint32_t mnmajor_lo(uint32_t tile_addr) {
  return ((tile_addr & 0x3FFFFu) >> 4) | (uint32_t((ROWS * 128) >> 4) << 16);
}
__device__ __forceinline__ constexpr uint32_t mnmajor_step(int kc) { return uint32_t((kc * 16 * 128) >> 4); }

// Rows [row, row + ROWS) of head `head` of an operand, by the tensor memory accelerator through
// its map (kernels/tma_maps.hpp: boxes of 64 columns x 1 head x ROWS rows; `map` the generic
// address of its CUtensorMap), into a Sw128Panels<D, ROWS> tile at `smem`: one box per
// 64-column panel. The map's 128-byte swizzle is the panels' layout: it stores 16-byte chunk c
// of the box's row r at chunk c ^ (r % 8) of a 128-byte row, computed from the shared address
// (bits [4,7) XOR bits [7,10)), and every panel starts on a 1024-byte boundary. The tile's bytes
// (tile_bytes) complete transactions on the mbarrier at `bar`: tma_copy_tile leaves telling the
// barrier to expect them to the caller (several tiles on one barrier), tma_load_tile tells it.
// One thread issues it all. The warp-specialised forward's tiles and backward's blocks.
template <class T, int D, int ROWS>
__device__ __forceinline__ constexpr uint32_t tile_bytes() {
  return uint32_t(ROWS * D * sizeof(T));
}
template <class T, int D, int ROWS>
__device__ __forceinline__ void tma_copy_tile(const void* map, uint32_t smem, uint32_t bar, int head, int row) {
  static_assert(D % 64 == 0 && ROWS % 8 == 0 && ROWS <= 256, "whole 64-column boxes of at most 256 rows");
#pragma unroll
  for (int c = 0; c < D / 64; ++c) ws::tma_load_3d(smem + uint32_t(c * ROWS * 128), map, bar, c * 64, head, row);
}
template <class T, int D, int ROWS>
__device__ __forceinline__ void tma_load_tile(const void* map, uint32_t smem, uint32_t bar, int head, int row) {
  ws::mbar_expect_tx(bar, tile_bytes<T, D, ROWS>());
  tma_copy_tile<T, D, ROWS>(map, smem, bar, head, row);
}

// The operands come by shared-memory address (the kernel computes them: desc_base in the kernel).
// S (64 x BN, this warpgroup's rows) = Q · Kᵀ, K the key tile at k_addr.
template <class T, int D, int BN>
__device__ __forceinline__ void gemm_qk(float (&s)[BN / 2], uint32_t q_addr, int wg, uint32_t k_addr) {
  const uint32_t q_lo = kmajor_lo(q_addr, wg * 64);
  const uint32_t k_lo = kmajor_lo(k_addr, 0);
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    gmma::WgmmaSS<T, BN>::run(s, gmma::sw128_desc_words(q_lo + kmajor_step<kBlockM>(kk)),
                              gmma::sw128_desc_words(k_lo + kmajor_step<BN>(kk)), kk > 0 ? 1u : 0u);
}

// O (64 x D) += P (64 x BN, registers) · V (BN x D), V the value tile at v_addr.
// (ptxas reuses the P registers as scratch for the next softmax as soon as it may, so it
// waits for this product before that softmax: no overlap. gemm_pv_smem avoids that.)
template <class T, int D, int BN>
__device__ __forceinline__ void gemm_pv(float (&o)[D / 2], const uint32_t (&pf)[BN / 16][4], uint32_t v_addr) {
  const uint32_t v_lo = mnmajor_lo<BN>(v_addr);
#pragma unroll
  for (int kc = 0; kc < BN / 16; ++kc) gmma::WgmmaRS<T, D>::run(o, pf[kc], gmma::sw128_desc_words(v_lo + mnmajor_step(kc)));
}

// O (64 x D) += P (64 x BN, this warpgroup's shared-memory P tile, K-major) · V (BN x D).
template <class T, int D, int BN>
__device__ __forceinline__ void gemm_pv_smem(float (&o)[D / 2], uint32_t p_addr, uint32_t v_addr) {
  const uint32_t p_lo = kmajor_lo(p_addr, 0);
  const uint32_t v_lo = mnmajor_lo<BN>(v_addr);
#pragma unroll
  for (int kc = 0; kc < BN / 16; ++kc)
    gmma::WgmmaSSTransB<T, D>::run(o, gmma::sw128_desc_words(p_lo + kmajor_step<64>(kc)),
                                   gmma::sw128_desc_words(v_lo + mnmajor_step(kc)));
}

// One query tile (CTA `tile` of FA2's grid), unchecked or checked; CountRows: count the
// out rows written (coverage: the checked forms). smem_raw: the kernel's dynamic shared memory.
template <class T, int D, int BN, int MinBlocks, bool PSmem, bool Checked, bool InteriorLoads, bool CountRows>
__device__ __forceinline__ void wgmma_fwd_tile(const VarlenFwdParams& p, const QueryTile& tile,
                                               unsigned char* smem_raw) {
  using Shape = WgmmaShape<D, BN, MinBlocks, PSmem>;
  using LayoutP = Sw128Panels<BN, 64>;      // a warpgroup's P tile: 64 rows of BN keys
  using LayoutQ = Sw128Panels<D, kBlockM>;  // Q (and the staged O): 128 rows
  using LayoutKV = Sw128Panels<D, BN>;      // K and V tiles: BN rows
  constexpr int NT = Shape::kThreads;
  constexpr int RB = Shape::kRangeBlockN;
  constexpr int NB = BN / 8;   // 8-column blocks of S: s[4 i + e]
  constexpr int DB = D / 8;    // 8-column blocks of O: o[4 i + e]
  constexpr int KP = BN / 16;  // k16 steps of P·V
  // Align to a swizzle atom by adding an offset to the shared pointer itself (rounding the
  // generic address through an integer would make every access below a generic one, ST/LD
  // instead of STS/LDS, with 64-bit addresses).
  unsigned char* base = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
  T* sQ = reinterpret_cast<T*>(base);
  auto k_tile = [&](int i) { return SmemTile<KeyRole, T>{reinterpret_cast<T*>(base + Shape::kQBytes + i * Shape::kKVBytes)}; };
  auto v_tile = [&](int i) {
    return SmemTile<ValueRole, T>{reinterpret_cast<T*>(base + Shape::kQBytes + (Shape::kStages + i) * Shape::kKVBytes)};
  };
  constexpr int S = Shape::kStages;

  if (skips<Checked>(p, tile)) return;
  const int m_block = tile.at.x, b = tile.at.y, h = tile.at.z, row0 = tile.row0;
  const Segment seg = tile.seg;

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  // The warpgroup index, broadcast from lane 0 so the compiler sees a warp-uniform value and
  // keeps the descriptors built from it in uniform registers (as CUTLASS's
  // canonical_warp_group_idx does); otherwise each wgmma waits on register-to-uniform moves.
  const int wg = __shfl_sync(0xffffffffu, tid / 128, 0);
  // The shared-memory address of the aligned base, which the wgmma descriptors are built from
  // (Q at the base, then the K and V stages). The checked form reads it from the array's
  // symbol at each use (an asm statement, so the compiler neither hoists nor shares it): its
  // refusal branches call record_access, and a value computed once before the loop then lives
  // in an ordinary register, so every descriptor built from it went through an ordinary
  // register and a register-to-uniform move before each wgmma (SASS: 48 R2UR per d128
  // iteration, 24 at d64). Read from the symbol it is a uniform constant, and the descriptors
  // stay in uniform registers as in the unchecked form. (The name is smem_raw's, mangled in
  // this namespace: renaming either fails the build at ptxas, it cannot go wrong silently.)
  // The warpgroup index (Q's rows), for the same reason, is re-broadcast at each use in the
  // checked form (tid.x / 128 from lane 0: the SHFL result is warp-uniform); kept from before
  // the loop, the d64 image (at its 128-register cap) reloaded it from local memory.
  auto desc_base = [&]() -> uint32_t {
    if constexpr (Checked) {
      uint32_t a;
      asm volatile("mov.u32 %0, _ZN2ad4kern4attn8smem_rawE;" : "=r"(a));
      return a + ((1024u - (a & 1023u)) & 1023u);  // base's offset, as above
    } else {
      return smem_u32(base);
    }
  };
  auto desc_wg = [&]() -> int {
    if constexpr (Checked) {
      int w;
      asm volatile("{ .reg .u32 t; mov.u32 t, %%tid.x; shr.u32 t, t, 7; shfl.sync.idx.b32 %0, t, 0, 0x1f, 0xffffffff; }"
                   : "=r"(w));
      return w;
    } else {
      return wg;
    }
  };
  // K and V stage i (the unchecked form keeps the expressions it was built from, and its image)
  auto k_addr = [&](uint32_t sb, int i) -> uint32_t {
    if constexpr (Checked) return sb + uint32_t(Shape::kQBytes + i * Shape::kKVBytes);
    else return smem_u32(k_tile(i).data);
  };
  auto v_addr = [&](uint32_t sb, int i) -> uint32_t {
    if constexpr (Checked) return sb + uint32_t(Shape::kQBytes + (S + i) * Shape::kKVBytes);
    else return smem_u32(v_tile(i).data);
  };
  // P tiles (PSmem): two per warpgroup, P_i in tile i % 2, so P_i is written while P_{i-1}·V
  // is still reading the other one.
  T* sP = reinterpret_cast<T*>(base + Shape::kQBytes + 2 * S * Shape::kKVBytes + wg * (2 * 64 * BN * 2));
  const KeyPipelineParams kpipe = key_pipeline(p);
  const ValuePipelineParams vpipe = value_pipeline(p);
  const int h_kv = h / kpipe.group;
  const fa2::Flags flags = fa2_flags(p, RB);
  const KeyRange kr = key_range(p, seg, m_block, RB);
  const int key_lo = kr.n_min * RB;
  const int key_hi = min(kr.n_max * RB, seg.len_k);
  bool q_rows_checked = false;  // checked form, tile reaching past q/out: row by row
  if constexpr (Checked) q_rows_checked = !query_tile_in_bounds(p, seg, b, h, row0);
  const SoftmaxScale sc = softmax_scale_of(p);

  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
  float m_i[2] = {-INFINITY, -INFINITY}, l_i[2] = {0.f, 0.f};
  const int row_a = row0 + warp * 16 + (lane >> 2);  // this thread's rows: row_a, row_a + 8

  if (kr.n_max > kr.n_min) {
    const int t_hi = (key_hi - 1) / BN;
    const int num_tiles = t_hi - key_lo / BN + 1;  // tile i covers keys [(t_hi - i) BN, + BN)
    float s[NB * 4];
#pragma unroll
    for (int i = 0; i < NB * 4; ++i) s[i] = 0.f;
    uint32_t pf[PSmem ? 1 : KP][4];
    float corr[2];
    const uint32_t p_addr = smem_u32(sP);
    int pbuf = 0;  // i % 2: the P tile the softmax of tile i writes

    // Softcap, mask and the online softmax of S_i (keys [n0, n0 + BN); softmax.cuh): leaves
    // exp(S - m) in s, the running max and (per-thread partial) sum updated, and the factor O
    // must be rescaled by in corr.
    auto softmax = [&](int n0) {
      softcap_tile<NB>(s, sc);
      if (tile_needs_mask(n0, BN, row0, kBlockM, seg.len_q, seg.len_k, flags, key_lo, key_hi))
        mask_tile<NB>(s, n0, row_a, lane, seg.len_q, seg.len_k, flags, key_lo, key_hi);
      online_softmax<NB>(s, m_i, l_i, corr, sc.log2);
    };
    // P from exp(S - m): the A fragments of P·V in registers (two 8-column blocks form one
    // k16 step), or this warpgroup's P tile in shared memory (row = the accumulator's row,
    // swizzled like every other operand; conflict-free: the 8 rows of a store land in 8
    // distinct 16-byte chunks). The shared tile is published by the fence.proxy.async and the
    // CTA barrier that start the next iteration.
    auto pack_p = [&]() {
      if constexpr (PSmem) {
        const int r0 = (warp & 3) * 16 + (lane >> 2);
        T* dst = sP + pbuf * (64 * BN);
#pragma unroll
        for (int i = 0; i < NB; ++i)
#pragma unroll
          for (int half = 0; half < 2; ++half)
            *reinterpret_cast<uint32_t*>(dst + LayoutP::offset(r0 + half * 8, i * 8 + 2 * (lane & 3))) =
                Elem<T>::pack(s[4 * i + 2 * half], s[4 * i + 2 * half + 1]);
      } else {
#pragma unroll
        for (int kc = 0; kc < KP; ++kc) {
          pf[kc][0] = Elem<T>::pack(s[8 * kc + 0], s[8 * kc + 1]);
          pf[kc][1] = Elem<T>::pack(s[8 * kc + 2], s[8 * kc + 3]);
          pf[kc][2] = Elem<T>::pack(s[8 * kc + 4], s[8 * kc + 5]);
          pf[kc][3] = Elem<T>::pack(s[8 * kc + 6], s[8 * kc + 7]);
        }
      }
    };
    auto pin_p = [&]() {
      if constexpr (!PSmem) gmma::pin(pf);
    };
    auto pv = [&](uint32_t sb, int vbuf, int pb) {  // P (tile pb) · V (stage vbuf); sb: desc_base()
      if constexpr (PSmem)
        gemm_pv_smem<T, D, BN>(o, p_addr + pb * (64 * BN * 2), v_addr(sb, vbuf));
      else
        gemm_pv<T, D, BN>(o, pf, v_addr(sb, vbuf));
    };
    auto rescale_o = [&]() { rescale_rows<DB>(o, corr); };

    // The main loop, in two copies in the checked form: the key rows this CTA reads,
    // [key_lo, key_hi) of the segment, are contiguous, so one comparison per buffer decides
    // whether all of them lie inside k and v. Then the loads are the unchecked ones (nothing
    // they read can be out of bounds) and the loop is the unchecked loop; otherwise every
    // tile goes through the checked loader (per-tile test, per-row path that records and
    // zero-fills). The Q tile is checked either way (q_rows_checked).
    auto mainloop = [&](auto kv_checked_tag) {
      constexpr bool KVChecked = Checked && decltype(kv_checked_tag)::value;
      auto load_k = [&](int i, int buf) {
        load_key_rows<T, D, BN, NT, KVChecked, LayoutKV, KeyRole, InteriorLoads>(p, kpipe, k_tile(buf), seg, tile.at, h_kv, (t_hi - i) * BN, key_lo,
                                                         key_hi, RB);
      };
      auto load_v = [&](int i, int buf) {
        load_key_rows<T, D, BN, NT, KVChecked, LayoutKV, ValueRole, InteriorLoads>(p, vpipe, v_tile(buf), seg, tile.at, h_kv, (t_hi - i) * BN, key_lo,
                                                         key_hi, RB);
      };
      // S stages (3, or 2 where three do not fit): tile i in buffer i % S. Copy groups:
      // {Q, K_0}, {K_1, V_0} (, {K_2, V_1}), then one per iteration i >= 1,
      // {K_{i+S-1}, V_{i+S-2}} (possibly empty): iteration i needs the group committed S - 2
      // before the newest, so with three stages each load has a whole iteration to land.
      // (a literal last argument: each copy is specialised, the usual one is the unchecked load)
      if (q_rows_checked)
        load_q_tile<T, D, NT, Checked, LayoutQ>(p, sQ, seg, tile.at, row0, true);
      else
        load_q_tile<T, D, NT, Checked, LayoutQ>(p, sQ, seg, tile.at, row0, false);
      load_k(0, 0);
      cp_async_commit();
      if (num_tiles > 1) load_k(1, 1);
      load_v(0, 0);
      cp_async_commit();
      if constexpr (S == 3) {
        if (num_tiles > 2) load_k(2, 2);
        if (num_tiles > 1) load_v(1, 1);
        cp_async_commit();
      }
      cp_async_wait<S - 1>();  // Q and K_0
      gmma::fence_proxy_async_smem();
      __syncthreads();

      // Tile 0: S_0 alone.
      gmma::pin(s);
      gmma::wgmma_fence();
      {
        const uint32_t sb = desc_base();
        gemm_qk<T, D, BN>(s, sb, desc_wg(), k_addr(sb, 0));  // (Q at the base)
      }
      gmma::wgmma_commit();
      gmma::wgmma_wait<0>();
      gmma::pin(s);
      softmax(t_hi * BN);
      pack_p();

      int cur = 0;  // i % S
      for (int i = 1; i < num_tiles; ++i) {
        const int prev = cur;
        cur = cur == S - 1 ? 0 : cur + 1;
        const int vload = S == 3 ? (cur == 2 ? 0 : cur + 1) : cur;  // (i + S - 2) % S == (i - 2) % S
        cp_async_wait<S - 2>();  // K_i and V_{i-1} (and P_{i-1} written)
        gmma::fence_proxy_async_smem();
        __syncthreads();     // ... visible to all; every warpgroup is done with tiles i - 1 / i - 2
        gmma::pin(o);
        pin_p();
        gmma::wgmma_fence();
        const uint32_t sb = desc_base();
        gemm_qk<T, D, BN>(s, sb, desc_wg(), k_addr(sb, cur));
        gmma::wgmma_commit();
        pbuf = i & 1;
        pv(sb, prev, pbuf ^ 1);  // P_{i-1}
        gmma::wgmma_commit();
        if (i + S - 1 < num_tiles) load_k(i + S - 1, prev);  // (i + S - 1) % S == (i - 1) % S: K_{i-1} is done
        if (i + S - 2 < num_tiles) load_v(i + S - 2, vload);  // V_{i-2} is done
        cp_async_commit();
        gmma::wgmma_wait<1>();  // S_i
        gmma::pin(s);
        softmax((t_hi - i) * BN);
        // P_i goes to shared memory before the wait (the other P tile is the one being read);
        // in registers it must wait, the P registers being the product's operand.
        if constexpr (PSmem) pack_p();
        // Pin the softmax results before the wait: they are pure register arithmetic, which
        // the compiler may otherwise sink below the (volatile) wait.
        gmma::pin(s);
        gmma::pin(corr);
        gmma::pin(l_i);
        gmma::pin(m_i);
        gmma::wgmma_wait<0>();  // P_{i-1}·V_{i-1}
        gmma::pin(o);
        pin_p();
        rescale_o();
        if constexpr (!PSmem) pack_p();
      }
      cp_async_wait<0>();  // V_{last}
      gmma::fence_proxy_async_smem();
      __syncthreads();
      gmma::pin(o);
      pin_p();
      gmma::wgmma_fence();
      pv(desc_base(), cur, pbuf);  // P_{last}
      gmma::wgmma_commit();
      gmma::wgmma_wait<0>();
      gmma::pin(o);
      pin_p();
    };
    // (The unchecked form takes the same branch between two identical copies: ptxas then lays
    // out and schedules its loop as it does the checked form's, descriptors in uniform
    // registers; with a single copy it hoists them into ordinary registers and moves them to
    // uniform ones before every wgmma, which cost the unchecked form about 9% at d128.)
    const uint64_t end = uint64_t(seg.start_k) + uint64_t(key_hi);
    if (end > uint64_t(kpipe.src.rows) || end > uint64_t(vpipe.src.rows))
      mainloop(std::true_type{});
    else
      mainloop(std::false_type{});
  }

  // Epilogue (softmax.cuh finish_rows): normalise, stage the warp's 16 rows in its own Q rows
  // (its warpgroup's wgmma reads of them completed at the last wait), store 16-byte chunks,
  // then the LSE. An empty key range ends here with O = 0 and LSE = +inf (FA2: row_sum == 0).
  float lse[2];
  finish_rows<DB>(o, m_i, l_i, sc.nat, lse);
  stage_rows<T, DB, LayoutQ>(sQ, o, warp * 16, lane);
  __syncwarp();
  if (q_rows_checked)
    store_out_rows<T, D, 16, Checked, LayoutQ, CountRows>(p, sQ, seg, tile.at, row0, warp, lane, true);
  else
    store_out_rows<T, D, 16, Checked, LayoutQ, CountRows>(p, sQ, seg, tile.at, row0, warp, lane, false);
  write_lse_rows<Checked>(p, tile.at, seg, row_a, lane, lse);
}

// The unchecked form (Checked false), and the checked form's first launch (Checked true): the
// unchecked body, with the coverage count, on the CTAs of which fwd_cta_in_bounds holds (its
// parts side by side over the warps, fwd_cta_in_bounds_split); the others exit at once
// and varlen_fwd_wgmma_fallback_kernel runs them checked. The body is the unchecked form's
// code in both: the checks cost the hot loop nothing.
template <class T, int D, int BN, int MinBlocks, bool PSmem, bool Checked, bool InteriorLoads>
__global__ void __launch_bounds__(WgmmaShape<D, BN, MinBlocks, PSmem>::kThreads, MinBlocks)
    varlen_fwd_wgmma_kernel(const VarlenFwdParams p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  const QueryTile tile = fwd_tile(p, kBlockM);
  if constexpr (Checked) {
    using Shape = WgmmaShape<D, BN, MinBlocks, PSmem>;
    pdl_launch_dependents();
    if (!fwd_cta_in_bounds_split<Shape::kThreads>(p, tile, kBlockM, Shape::kRangeBlockN)) return;
  }
  wgmma_fwd_tile<T, D, BN, MinBlocks, PSmem, false, InteriorLoads, Checked>(p, tile, smem_raw);
#else
  __trap();  // built for a target without wgmma: the launcher never selects it there
#endif
}

// The checked form's second launch: the CTAs the first left (those of which some access may
// lie outside its buffer), with the checked body (the per-tile and per-row tests, the
// records), as the CTAs of FA2's grid they are (fwd_checked_fallback: a persistent grid).
template <class T, int D, int BN, int MinBlocks, bool PSmem, bool InteriorLoads>
__global__ void __launch_bounds__(WgmmaShape<D, BN, MinBlocks, PSmem>::kThreads, MinBlocks)
    varlen_fwd_wgmma_fallback_kernel(const VarlenFwdParams p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Shape = WgmmaShape<D, BN, MinBlocks, PSmem>;
  extern __shared__ unsigned char smem_raw[];
  fwd_checked_fallback<Shape::kThreads>(p, kBlockM, Shape::kRangeBlockN, [&](const QueryTile& t) {
    wgmma_fwd_tile<T, D, BN, MinBlocks, PSmem, true, InteriorLoads, true>(p, t, smem_raw);
  });
#else
  __trap();
#endif
}

#ifdef ATTN_DOCTOR_FWD_ONE_LAUNCH
// The checked form in one launch, as before the two-launch form: the checked body on every
// CTA (benchmarks only: AttnKernel::wgmma_one_launch, a build with ATTN_DOCTOR_FWD_ONE_LAUNCH).
template <class T, int D, int BN, int MinBlocks, bool PSmem, bool InteriorLoads>
__global__ void __launch_bounds__(WgmmaShape<D, BN, MinBlocks, PSmem>::kThreads, MinBlocks)
    varlen_fwd_wgmma_one_launch_kernel(const VarlenFwdParams p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char smem_raw[];
  wgmma_fwd_tile<T, D, BN, MinBlocks, PSmem, true, InteriorLoads, true>(p, fwd_tile(p, kBlockM), smem_raw);
#else
  __trap();
#endif
}
#endif

}  // namespace ad::kern::attn

// ---------------------------------------------------------------------------------------
// the instantiations: kernels/sm90a/varlen_attention_wgmma_{bf16,fp16}.cu name them (one
// element type per file), kernels/varlen_attention.cu launches them

namespace ad::kern::attn {

// The launches of one configuration in form `form` (detail::FwdForm).
template <class T, int D, class C>
detail::FwdKernels wgmma_kernels(detail::FwdForm form) {
  using Shape = WgmmaShape<D, C::kBlockN, C::kMinBlocks, C::kPSmem>;
  static_assert(Shape::kSmemBytes + kFwdFallbackScanBytes<Shape::kThreads> <= 227 * 1024,
                "the second launch's scan must fit beside the body's shared memory");
  const auto entry = [](void (*fn)(VarlenFwdParams)) {
    return detail::FwdKernel{fn, Shape::kThreads, Shape::kSmemBytes};
  };
  detail::FwdKernels k;
  switch (form) {
    case detail::FwdForm::unchecked:
      k.main = entry(&varlen_fwd_wgmma_kernel<T, D, C::kBlockN, C::kMinBlocks, C::kPSmem, false, C::kInteriorLoads>);
      break;
    case detail::FwdForm::checked:
      k.main = entry(&varlen_fwd_wgmma_kernel<T, D, C::kBlockN, C::kMinBlocks, C::kPSmem, true, C::kInteriorLoads>);
      k.fallback =
          entry(&varlen_fwd_wgmma_fallback_kernel<T, D, C::kBlockN, C::kMinBlocks, C::kPSmem, C::kInteriorLoads>);
      break;
    case detail::FwdForm::checked_one_launch:
#ifdef ATTN_DOCTOR_FWD_ONE_LAUNCH
      k.main =
          entry(&varlen_fwd_wgmma_one_launch_kernel<T, D, C::kBlockN, C::kMinBlocks, C::kPSmem, C::kInteriorLoads>);
      break;
#else
      throw cuda::LaunchConfigError("this build carries the checked wgmma forward in two launches only "
                                    "(ATTN_DOCTOR_FWD_ONE_LAUNCH off)");
#endif
  }
  return k;
}

template <class T, template <int> class Cfg>
detail::FwdKernels wgmma_kernel_cfg(int head_dim, detail::FwdForm form) {
  return with_tensor_core_head_dim(head_dim, form != detail::FwdForm::unchecked, "wgmma varlen forward",
                                   [&](auto d, auto) {
                                     constexpr int D = decltype(d)::value;
                                     return wgmma_kernels<T, D, Cfg<D>>(form);
                                   });
}

// Head dim 192 in the default shape (kernels/sm90a/varlen_attention_wgmma_d192_{bf16,fp16}.cu).
template <class T, int D>
detail::FwdKernels wgmma_kernel_d(detail::FwdForm form) {
  return wgmma_kernels<T, D, WgmmaDefault<D>>(form);
}

// alt: the other tile shape (WgmmaAlt), compiled only with ATTN_DOCTOR_WGMMA_ALT (benchmarks of
// the shape choice).
template <class T>
detail::FwdKernels wgmma_kernel(int head_dim, detail::FwdForm form, bool alt) {
#ifdef ATTN_DOCTOR_WGMMA_ALT
  if (alt) return wgmma_kernel_cfg<T, WgmmaAlt>(head_dim, form);
#else
  if (alt) throw cuda::LaunchConfigError("this build carries one wgmma tile shape (ATTN_DOCTOR_WGMMA_ALT off)");
#endif
  return wgmma_kernel_cfg<T, WgmmaDefault>(head_dim, form);
}

}  // namespace ad::kern::attn
