// Varlen attention backward with FA2's contract (flash-attn's mha_varlen_bwd), in a checked
// and an unchecked form. Kernels at the top (the small launches in varlen_attention_bwd_small.cuh),
// launchers in varlen_attention_bwd.cu.
//
//   q, dO, O, dq (total_q, H, D)   k, v (total_k, Hk, D)   dk, dv (total_k, H, D) expanded
//   lse        (H, total_q) from flash-attn 2.6 (the forward's layout, fa2::lse_index)
//   softmax_d  (H, total_q + 128 N) fp32      dq_accum (total_q + 128 N, H, D) fp32
//
// Three launches, as FA2's run_flash_bwd_seqk_parallel (flash_bwd_launch_template.h):
//  1. preprocess, grid (ceil(max_seqlen_q / 128), N, H): softmax_d = rowsum(dO * O) in fp32
//     and the CTA's dq_accum rows zeroed (flash_bwd_preprocess_kernel.h, dot_do_o and
//     clear_dQaccum);
//  2. the key-block kernel, grid (ceil(max_seqlen_k / kBlockN), N, H): each CTA keeps kBlockN
//     keys of one head in shared memory and walks the query blocks that can see them
//     (fa2 backward's m_block range), recomputing P = exp(S - LSE) from the forward's LSE:
//         dV += Pᵀ dO    dP = dO Vᵀ    dS = P ∘ (dP - softmax_d)    dK += dSᵀ Q
//         dq_accum += dS K   (fp32 atomics: several key blocks add into one query row)
//     (flash_bwd_kernel.h compute_dq_dk_dv_1colblock);
//  3. dq = dq_accum * scale over the query-block grid (convert_dQ); with H > Hk, dk / dv are
//     the per-query-head "expanded" tensors summed over each group of H / Hk heads.
// Why atomics for dQ rather than a second pass over key blocks: the second pass recomputes
// S and dP (two more of the five matrix products, 40 % more tensor work); the atomics cost
// one fp32 RED per dQ element per key block, which the memory system absorbs. It is what
// FA2 runs, so the dq_accum layout (and the 32-bit offset of releases before the fix) is the
// real one.
//
// The tensor-core kernel (bf16/fp16, head dim 64, 96 and 128: FA2's key blocks of 128; 192 and
// 256: varlen_attention_bwd_split.cuh, key blocks of 64): 8 warps, each owning 16 of the
// CTA's 128 keys; K and V stay in shared memory for the whole CTA; Q and dO tiles of 64 rows
// are double-buffered with cp.async. S and dP are computed transposed (keys are the MMA's M
// dimension), so Pᵀ and dSᵀ come out of the accumulators already as the A operands of the
// dV and dK products (no shared-memory round trip); dS goes through shared memory once for
// dQ = dS K. mma.sync.m16n8k16 with fp32 accumulators; shared tiles XOR-swizzled in 16-byte
// chunks (varlen_attention.cuh swz).
//
// Checked form: every row a CTA touches is compared with its buffer (q, dO, O, k, v, dk, dv,
// dq) and every workspace element with its size (lse, softmax_d, dq_accum); a refused access
// is recorded (contract/access_record.hpp) and not made: reads give zeros (LSE: +inf, so the
// row contributes nothing), writes and atomics are dropped. Each test is one comparison per
// tile in the common case, the per-row path only for a tile that reaches past a buffer.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "device_common.cuh"
#include "kernel_params.hpp"
#include "varlen_attention.cuh"

namespace ad::kern::bwd {

using attn::swz;
namespace oc = fa2::bwd::order_class;


// 4-byte asynchronous global -> shared copy (cp.async.ca: sizes 4 and 8 go through L1).
__device__ __forceinline__ void cp_async_4(void* smem_dst, const void* gmem_src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(smem_u32(smem_dst)), "l"(gmem_src));
}

// The key-block kernel's query rows per step by head dim (the instantiated shapes: d64 m64
// and m32, d128 m32 and m64). Head dim 128 takes 32: with 64 its dK, dV, Sᵀ and dPᵀ
// accumulators (192 registers) spill (ptxas: 72 bytes of spill loads unchecked, 756 checked),
// with 32 none do. Head dim 64 takes 64: m32 runs two CTAs per SM (128 registers), measured on
// an H100 1.2x faster unchecked but only 1.07x checked, whose body then spills (548 bytes
// stored), so its check overhead reaches 13-15 % (docs/performance.md).
// Head dim 96 takes 64 (FA2's query tile; with 32, the dQ product's 24-column groups would not
// split into 16-column ldmatrix steps), its accumulators 160 registers. Head dims 192 and 256
// take 32 (varlen_attention_bwd_split.cuh: the shared tiles fit an A100's 163 KB).
inline constexpr int default_block_m(int head_dim) { return head_dim >= 128 ? 32 : 64; }
// The wgmma key-block kernel's query rows per step (sm90a/varlen_attention_bwd_wgmma.cuh
// WgmmaBwdShape says why).
inline constexpr int kWgmmaBlockM = 64;

// The key-block kernel's shape: 128 keys per CTA, BM query rows per step (64, or 32 to
// keep the head dim 128 accumulators in registers; bench/gpu compares the two shapes of
// each head dim).
template <int D, int BM>
struct BwdShape {
  static constexpr int kWarps = 8;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kBlockN = 16 * kWarps;  // keys per CTA, 16 per warp
  static constexpr int kBlockM = BM;           // query rows per step
  // CTAs per SM the registers are budgeted for: two at d64 with 32 rows per step (128
  // registers a thread; its accumulators are 96), one otherwise
  static constexpr int kMinBlocks = (D == 64 && BM == 32) ? 2 : 1;
  static constexpr int kChunks = D / 8;
  // dQ = dS K: warps as (BM / 16 row tiles) x (column groups)
  static constexpr int kDqRowTiles = BM / 16;
  static constexpr int kDqColGroups = kWarps / kDqRowTiles;
  static constexpr int kDqCols = D / kDqColGroups;
  // elements of T: K, V, Q x2, dO x2, dS; then fp32 LSE x2, softmax_d x2
  static constexpr size_t smem_elems() {
    return 2 * size_t(kBlockN) * D + 4 * size_t(kBlockM) * D + size_t(kBlockN) * kBlockM;
  }
  static constexpr size_t smem_bytes(size_t elem) { return smem_elems() * elem + 4 * kBlockM * sizeof(float); }
};

// ---------------------------------------------------------------------------------------
// the backward's geometry as the release has it (flash-attn v2.6.3 flash_api.cpp
// mha_varlen_bwd, flash_bwd_launch_template.h, flash_bwd_kernel.h,
// flash_bwd_preprocess_kernel.h): FA2's tiles (tile_m x tile_n), not this kernel's steps.

// The contract's functions (contract/fa2_backward.hpp) over the normalised params.
AD_HD int tile_m_of(const VarlenBwdParams& p) { return p.kernel.tile.block_m; }
AD_HD int tile_n_of(const VarlenBwdParams& p) { return p.kernel.tile.block_n; }
AD_HD int64_t dq_row_stride(const VarlenBwdParams& p) { return p.dq_accum_shape.row_stride(); }
AD_HD int64_t softmax_d_at(const VarlenBwdParams& p, int32_t cu_q_b, int64_t b, int64_t h, int64_t i) {
  return fa2::bwd::softmax_d_index(p.softmax_d_shape, cu_q_b, b, h, i);
}
// dq_accum element (row 0, column 0) of FA2's query tile m of segment b, head h, copy `split`,
// as the release computes it: per_tile (dot_do_o, convert_dQ) or dq_dk_dv's, stepped back
// from the tile m_top.
AD_HD int64_t dq_accum_tile(const VarlenBwdParams& p, fa2::bwd::DqKernel kernel, int32_t cu_q_b, int64_t b, int64_t h,
                            int64_t m, int64_t m_top, int64_t split) {
  return fa2::bwd::dq_accum_offset(p.release.dq_offset, kernel, p.dq_accum_shape, cu_q_b, b, h, m, m_top,
                                   tile_m_of(p), split);
}

// ---------------------------------------------------------------------------------------
// shared device helpers

// The segment, the CTA (its place in its grid) and the launch-order key of its accesses are
// segment.cuh's, the forward's too.
__device__ __noinline__ inline void record_bwd(const VarlenBwdParams& p, Cta at, Buffer buffer, AccessKind kind,
                                               Unit unit, int64_t index, int64_t bound, int64_t row, int64_t head, int64_t tile,
                                               uint32_t cls, int64_t sub, uint64_t n = 1,
                                               Region region = Region::tensor) {
  record_violation(p.record, buffer, kind, unit, region, index, bound, at.x, at.y, at.z, at.y, row, head, tile,
                   cta_key(at, p.batch, cls, sub), n);
}

// the grids: (grid_m, N, H) for the preprocess and the conversion, (grid_x, N, H) for the
// key-block kernel (nsplits CTAs along x when deterministic)
AD_HD int64_t pre_grid_m(const VarlenBwdParams& p) { return p.kernel.grid_m; }
AD_HD int64_t key_grid_x(const VarlenBwdParams& p) { return p.kernel.grid_x; }
inline constexpr int kBwdBlockN = 128;  // this kernel's key block (= FA2's tile_n for head dims 64, 96 and 128)
// FA2's tile_n above head dim 128 (contract tile_for: 64 x 64), the key block of the split
// kernel (varlen_attention_bwd_split.cuh)
inline constexpr int kSplitBlockN = 64;
inline constexpr int key_block_n(int head_dim) { return head_dim > 128 ? kSplitBlockN : kBwdBlockN; }

// The swizzled offset of (row, col) in the [128][BM] dSᵀ tile: 16-byte chunks XORed so that
// the 8 rows an ldmatrix phase reads hit distinct bank groups (BM 64: 8 chunks per row, as
// swz; BM 32: 4 chunks per row, two rows per 128 bytes).
template <int BM>
__device__ __forceinline__ int swz_ds(int row, int col) {
  if constexpr (BM == 64) return swz<64>(row, col);
  return row * BM + ((((col >> 3) ^ ((row >> 1) & 3))) << 3) + (col & 7);
}

// The preprocess, the dq conversion and the group sum are in varlen_attention_bwd_small.cuh.

// ---------------------------------------------------------------------------------------
// 2. the key-block kernel

// Rows [first, first + R) of a (rows, heads, D) operand (head `head`) into a swizzled [R][D]
// shared tile (Layout: the mma.sync kernel's row swizzle, or the wgmma kernel's 128-byte
// swizzled panels); rows at or past `valid` (the segment's end) zero-filled. Checked form: a
// row past the buffer is recorded (class `cls`, sub = its segment row, head: the CTA's query
// head, tile `tile_no`; `records` accesses, 0: counted with another operand's) and zero-filled.
// Unroll: how many of a thread's chunks the compiler unrolls (all by default; 1 keeps the
// loop rolled, for a caller short of registers).
template <class T, int D, int R, int NT, bool Checked, class Layout = attn::RowSwizzle<D>, int Unroll = R * D / 8 / NT>
__device__ __forceinline__ void load_rows(const VarlenBwdParams& p, const Cta& at, const T* base, int32_t heads,
                                          int64_t buf_rows, Buffer buffer, T* tile, uint32_t start, int first,
                                          int valid, int head, int tile_no, uint32_t cls, int64_t sub_bit,
                                          uint64_t records = 1) {
  constexpr int C = D / 8;
  const int64_t row_elems = int64_t(heads) * D;
  bool per_row = false;
  if constexpr (Checked) {
    const int end = min(first + R, valid);
    per_row = end > first && uint64_t(start) + uint64_t(end) > uint64_t(buf_rows);
  }
#pragma unroll Unroll
  for (int it = 0; it < R * C / NT; ++it) {
    const int i = threadIdx.x + it * NT;
    const int r = i / C, c = i % C;
    T* dst = tile + Layout::offset(r, c * 8);
    const int sr = first + r;
    const uint64_t row = uint64_t(start) + uint64_t(sr);
    bool ok = sr < valid;
    if (Checked && per_row && ok && row >= uint64_t(buf_rows)) {
      if (c == 0 && records > 0)
        record_bwd(p, at, buffer, AccessKind::read, Unit::rows, int64_t(row), buf_rows, int64_t(row), at.z,
                   tile_no, cls, int64_t(sr) | sub_bit, records);
      ok = false;
    }
    if (ok) {
      cp_async_16(dst, base + int64_t(row) * row_elems + int64_t(head) * D + c * 8);
    } else {
      *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
    }
  }
}

// The LSE and softmax_d of query rows [m0, m0 + BM) of the CTA's segment and head into the
// step's shared buffers (thread tid < BM: row m0 + tid). softmax_d of every row of the step,
// as FA2 reads it (a row past the segment has P = 0, so its value is never used); the LSE of
// the segment's rows whose q row is inside q (+inf past the segment: P = 0; a row past q
// reads no LSE, its q and dO are zeros). A refused read gives 0, as every refused read does.
// The reads are cp.async, in the step's group with its Q and dO: no load stalls the warp.
template <int BM, bool Checked>
__device__ __forceinline__ void load_row_stats(const VarlenBwdParams& p, const Cta& at, const Segment& seg, int32_t cu_q_b,
                                               int tm, int m0, float* s_lse, float* s_ds) {
  const int tid = threadIdx.x, b = at.y, h = at.z;
  if (tid >= BM) return;
  const int i = m0 + tid;
  const uint64_t row = uint64_t(seg.start_q) + uint64_t(i);
  const bool live = i < seg.len_q && (!Checked || row < uint64_t(p.q.rows));
  const int64_t tile_m_no = i / tm;
  float* l_dst = s_lse + tid;
  float* d_dst = s_ds + tid;
  const int64_t di = softmax_d_at(p, cu_q_b, b, h, i);
  bool d_ok = true;
  if constexpr (Checked) {
    if (di < 0 || di >= p.softmax_d_size) {
      record_bwd(p, at, Buffer::softmax_d, AccessKind::read, Unit::elements, di, p.softmax_d_size, int64_t(row), h,
                 tile_m_no, oc::kMainQueryReads, i);
      d_ok = false;
    }
  }
  if (d_ok)
    cp_async_4(d_dst, p.softmax_d + di);
  else
    *d_dst = 0.f;
  if (live) {
    const int64_t li =
        fa2::lse_index(fa2::LseShape{p.lse_layout, p.q.rows, p.num_heads, p.lse_max_seqlen_q}, false, cu_q_b, b, h, h, i);
    bool lse_ok = true;
    if constexpr (Checked) {
      if (li < 0 || li >= p.lse_size) {
        record_bwd(p, at, Buffer::lse, AccessKind::read, Unit::elements, li, p.lse_size, int64_t(row), h, tile_m_no,
                   oc::kMainQueryReads, i);
        lse_ok = false;
      }
    }
    if (lse_ok)
      cp_async_4(l_dst, p.lse + li);
    else
      *l_dst = 0.f;
  } else {
    *l_dst = INFINITY;
  }
}

// What one query step of a key block needs to turn S and dP into P and dS.
struct StepMath {
  float scale_log2;  // S scale before exp, times log2(e) (1 under softcap: the cap applies it)
  float cap_in;      // softmax_scale / softcap (0 without softcap)
  float softcap;
  float softcap_log2;  // softcap * log2(e)
  int len_q, len_k;
  fa2::Flags flags;  // the call's masks, with this kernel's block sizes
};
__device__ __forceinline__ StepMath step_math(const VarlenBwdParams& p, const Segment& seg, fa2::Flags flags) {
  const SoftmaxScale sc = softmax_scale_of(p);  // softmax.cuh: the forward's scales
  return {sc.log2, sc.cap_in, sc.softcap, sc.softcap * kLog2e, seg.len_q, seg.len_k, flags};
}

// One element of Sᵀ / dPᵀ (key `key` of the segment, of a query row with LSE lse2 and
// softmax_d dsm) in place: s becomes P = exp(S - LSE) = 2^(S log2(e) - LSE log2(e)) (lse2: the
// row's LSE times log2(e), one multiply per row, as FA2 scales it), dp becomes
// dS = P (dP - softmax_d) (times the softcap's derivative). Mask: the step's block needs the
// per-element test (fa2::block_needs_mask), and keys outside the row's kl (fa2::row_keys:
// causal diagonal, window, past the segment) get 0. The forms are template arguments so that
// a step's elements are one straight line of code (with_p_ds_form): a branch per element
// serialises them, and the exp latency is no longer hidden.
template <bool Softcap, bool Mask>
__device__ __forceinline__ void p_and_ds(const StepMath& c, const fa2::KeyLimits& kl, int key, float lse2, float dsm,
                                         float& s, float& dp) {
  const float x = s;
  float pv, factor = 1.f;
  if constexpr (Softcap) {
    const float t = tanhf(x * c.cap_in);
    pv = fast_exp2(fmaf(c.softcap_log2, t, -lse2));
    factor = 1.f - t * t;
  } else {
    pv = fast_exp2(fmaf(x, c.scale_log2, -lse2));
  }
  if constexpr (Mask) {
    if (key < kl.lo || key >= kl.hi) pv = 0.f;
  }
  s = pv;
  dp = pv == 0.f ? 0.f : pv * (dp - dsm) * factor;
}
// Runs f(softcap, mask) with the step's form as two std::bool_constant arguments.
template <class F>
__device__ __forceinline__ void with_p_ds_form(const StepMath& c, bool mask, F&& f) {
  using yes = std::true_type;
  using no = std::false_type;
  if (c.softcap > 0.f) {
    if (mask) f(yes{}, yes{}); else f(yes{}, no{});
  } else {
    if (mask) f(no{}, yes{}); else f(no{}, no{});
  }
}
// The keys query row `row` of the segment sees (only read by the Mask form).
template <bool Mask>
__device__ __forceinline__ fa2::KeyLimits row_keys_if(const StepMath& c, int row) {
  if constexpr (Mask) return fa2::row_keys(row, c.len_q, c.len_k, c.flags);
  return fa2::KeyLimits{};
}

// dq_accum += one thread's part of a step's dQ tile (BM x D, fp32): segment rows i0 and i0 + 8,
// columns d0 + 8 nb + {0, 1} for nb < NB, held as the m16n8 accumulator (dq[4 nb + 2 half + e]).
// FA2 adds the whole tile (unpredicated): rows past the segment add zeros, so they are
// checked (and recorded, by the threads with `records`, when outside dq_accum) but not
// performed.
// dq_accum element of column 0 of segment row i of the CTA's head in its key block's walk
// (DqKernel::dq_dk_dv: FA2's tile of the row, stepped back from m_top).
__device__ __forceinline__ int64_t dq_accum_row(const VarlenBwdParams& p, const Cta& at, int32_t cu_q_b, int tm,
                                                int64_t m_top,
                                                int split, int i) {
  const int64_t m_c = i / tm;  // FA2's tile of the row
  return dq_accum_tile(p, fa2::bwd::DqKernel::dq_dk_dv, cu_q_b, at.y, at.z, m_c, m_top, split) +
         (i - m_c * tm) * dq_row_stride(p);
}

template <int NB, bool Checked>
__device__ __forceinline__ void add_dq(const VarlenBwdParams& p, const Cta& at, const Segment& seg, int32_t cu_q_b, int tm,
                                       int64_t m_top, int split, int i0, int d0, bool records,
                                       const float (&dq)[NB * 4]) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int i = i0 + half * 8;  // segment row
    const int64_t base = dq_accum_row(p, at, cu_q_b, tm, m_top, split, i);
    if constexpr (Checked) {
      if (base < 0 || base + p.dq_accum_shape.d_rounded > p.dq_accum_size) {
        if (records)
          record_bwd(p, at, Buffer::dq_accum, AccessKind::write, Unit::elements, base, p.dq_accum_size,
                     int64_t(uint64_t(seg.start_q) + uint64_t(i)), at.z, i / tm, oc::kMainDqAccum, i,
                     uint64_t(p.dq_accum_shape.d_rounded));
        continue;
      }
    }
    if (i >= seg.len_q) continue;
    float* acc = p.dq_accum + base + d0;
#pragma unroll
    for (int nb = 0; nb < NB; ++nb) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      // one 8-byte reduction per column pair (sm_90; the offsets are even: 8-byte aligned)
      atomicAdd(reinterpret_cast<float2*>(acc + nb * 8), make_float2(dq[4 * nb + 2 * half], dq[4 * nb + 2 * half + 1]));
#else
      atomicAdd(acc + nb * 8, dq[4 * nb + 2 * half]);
      atomicAdd(acc + nb * 8 + 1, dq[4 * nb + 2 * half + 1]);
#endif
    }
  }
}

// The rows of a key block's dK and dV (scaled and rounded, in sK and sV: the swizzled [BN][D]
// tiles) into dk and dv, in 16-byte row chunks, the key rows [n0, key_valid) of the segment.
// Checked form: a row past dk / dv is recorded and not written.
template <class T, int D, int BN, int NT, bool Checked>
__device__ __forceinline__ void write_dk_dv_rows(const VarlenBwdParams& p, const Cta& at, const Segment& seg,
                                                 int n_block, int n0, int key_valid, const T* sK, const T* sV) {
  constexpr int C = D / 8;
  const int tid = threadIdx.x, h = at.z;
  T* gdk = static_cast<T*>(p.dk.data);
  T* gdv = static_cast<T*>(p.dv.data);
  for (int x = tid; x < BN * C; x += NT) {
    const int r = x / C, c = x % C;
    const int j = n0 + r;
    if (j >= key_valid) break;
    const uint64_t row = uint64_t(seg.start_k) + uint64_t(j);
    bool k_ok = true, v_ok = true;
    if constexpr (Checked) {
      if (row >= uint64_t(p.dk.rows)) {
        if (c == 0)
          record_bwd(p, at, p.dk.buffer, AccessKind::write, Unit::rows, int64_t(row), p.dk.rows, int64_t(row), h,
                     n_block, oc::kMainDkDv, j);
        k_ok = false;
      }
      if (row >= uint64_t(p.dv.rows)) {
        if (c == 0)
          record_bwd(p, at, p.dv.buffer, AccessKind::write, Unit::rows, int64_t(row), p.dv.rows, int64_t(row), h,
                     n_block, oc::kMainDkDv, int64_t(j) | int64_t(order::kValueBit));
        v_ok = false;
      }
    }
    if (c == 0 && k_ok && h == 0 && p.dkv_writes != nullptr && row < uint64_t(p.dkv_writes_size))
      atomicAdd(p.dkv_writes + row, 1u);
    const int64_t off = (int64_t(row) * p.dk.heads + h) * D + c * 8;
    if (k_ok) *reinterpret_cast<uint4*>(gdk + off) = *reinterpret_cast<const uint4*>(sK + swz<D>(r, c * 8));
    if (v_ok)
      *reinterpret_cast<uint4*>(gdv + (int64_t(row) * p.dv.heads + h) * D + c * 8) =
          *reinterpret_cast<const uint4*>(sV + swz<D>(r, c * 8));
  }
}

// Epilogue of a key block: dK * scale and dV, held as m16n8 accumulators by warp w for keys
// 16 w .. 16 w + 15 of the block (dk[4 i + 2 half + e]: key 16 w + lane / 4 + 8 half, column
// 8 i + 2 (lane % 4) + e), through shared memory (sK, sV: the block's K and V, no longer
// read) into 16-byte row chunks. A key block no query block sees writes zeros (FA2 does the
// same). Checked form: a row past dk / dv is recorded and not written.
// stage_dk_dv: compute thread `tid`'s part (warp tid / 32: keys 16 (tid / 32) ..) rounded into
// sK and sV; store_dk_dv: the whole epilogue, by the CTA's threads (the warp-specialised kernel
// calls the two halves itself: its producer warps write rows but hold no accumulators).
template <class T, int D>
__device__ __forceinline__ void stage_dk_dv(const VarlenBwdParams& p, int tid, const float (&dk)[D / 2],
                                            const float (&dv)[D / 2], T* sK, T* sV) {
  constexpr int DB = D / 8;
  const int warp = tid >> 5, lane = tid & 31;
  const float dk_scale = p.softmax_scale;
#pragma unroll
  for (int i = 0; i < DB; ++i)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = warp * 16 + (lane >> 2) + half * 8, c = i * 8 + 2 * (lane & 3);
      *reinterpret_cast<uint32_t*>(sK + swz<D>(r, c)) =
          Elem<T>::pack(dk[4 * i + 2 * half] * dk_scale, dk[4 * i + 2 * half + 1] * dk_scale);
      *reinterpret_cast<uint32_t*>(sV + swz<D>(r, c)) = Elem<T>::pack(dv[4 * i + 2 * half], dv[4 * i + 2 * half + 1]);
    }
}
template <class T, int D, int NT, bool Checked>
__device__ __forceinline__ void store_dk_dv(const VarlenBwdParams& p, const Cta& at, const Segment& seg, int n_block,
                                            int n0, int key_valid, const float (&dk)[D / 2], const float (&dv)[D / 2],
                                            T* sK, T* sV) {
  __syncthreads();
  stage_dk_dv<T, D>(p, threadIdx.x, dk, dv, sK, sV);
  __syncthreads();
  write_dk_dv_rows<T, D, kBwdBlockN, NT, Checked>(p, at, seg, n_block, n0, key_valid, sK, sV);
}

// What a CTA knows about key block n_block of its segment (at.y) and head (at.z) before it
// walks the query steps (one definition for the mma.sync and the wgmma bodies).
struct KeyBlockWalk {
  Segment seg;
  fa2::bwd::KeyBlockRange kb;  // FA2's range of query tiles and the block's keys
  int n0;                      // the block's first key in the segment
  int h_kv;                    // the K/V head of the CTA's query head
  int tm;                      // FA2's query tile
  int key_valid;               // keys at or past it are zero-filled, their gradients not written
  Cta at;                   // the CTA (its records and launch-order keys)
  int64_t m_top;               // the tile FA2 sets its dq_accum pointer at (DqKernel::dq_dk_dv)
  int32_t cu_q_b;
  fa2::Flags flags;  // the masks (row_keys) of the call; block sizes: this kernel's steps
  StepMath sm;
  struct {
    int64_t m_min, m_max;
  } steps;  // FA2's query tiles [m_min, m_max) walked as steps of bm rows; empty: zeros only
};
__device__ __forceinline__ KeyBlockWalk key_block_walk(const VarlenBwdParams& p, const Cta& at, int n_block,
                                                      int bm, int bn = kBwdBlockN) {
  KeyBlockWalk w;
  const int b = at.y, h = at.z;
  w.seg = segment_of(p, b);
  w.kb = fa2::bwd::key_block_range(n_block, w.seg.len_q, w.seg.len_k, p.kernel.flags);
  w.n0 = n_block * bn;
  w.h_kv = h / (p.num_heads / p.num_heads_k);
  w.tm = tile_m_of(p);  // a multiple of bm: the launcher checks it
  w.key_valid = int(w.kb.key_end);
  w.at = at;
  w.m_top = w.kb.m_max - 1;
  w.cu_q_b = p.cu_seqlens_q.data[b];
  w.flags = p.kernel.flags;
  w.flags.block_m = bm;
  w.flags.block_n = bn;
  // FA3's attention_chunk never reaches these kernels (varlen_bwd_unsupported sends such a call
  // to the CPU twin; FA3's own backward refuses it). Said here as a constant, the chunk term of
  // row_keys folds away: read from the params, its 64-bit division stayed in the element loop
  // (about 3,000 more instructions in each wgmma kernel, 64 more bytes of spill at d128): without
  // it the d128 backward runs 17-23 % faster on an H100 (bench/results/gpu-check-h100-2026-11-27-merged7).
  w.flags.chunk = 0;
  w.sm = step_math(p, w.seg, w.flags);
  w.steps.m_min = w.kb.m_min * w.tm / bm;
  w.steps.m_max = w.kb.empty ? w.steps.m_min : w.kb.m_max * w.tm / bm;
  return w;
}

// Checked form: work wholly past the tensors is not run (a segment whose cu_seqlens run past
// them). Zero K and V rows add nothing to dq, zero Q and dO rows nothing to dk and dv, so
// the gradients are those of the full walk; the refused rows are recorded at once, each
// buffer with its row count.
// Returns false when the key block lies wholly past k, v, dk and dv (recorded: nothing runs);
// otherwise trims `run` to the query steps whose rows lie inside q and dO (BM rows a step, BN
// keys a block: the body's shape).
template <int BM, int BN>
__device__ __forceinline__ bool trim_walk(const VarlenBwdParams& p, const KeyBlockWalk& w, int n_block,
                                          decltype(KeyBlockWalk::steps)& run) {
  const Segment& seg = w.seg;
  const Cta& at = w.at;
  const int n0 = w.n0, key_valid = w.key_valid, tm = w.tm, h = at.z, tid = threadIdx.x;
  const auto& qb = w.steps;
  const uint64_t k_first = uint64_t(seg.start_k) + uint64_t(n0);
  if (k_first >= uint64_t(p.k.rows) && k_first >= uint64_t(p.v.rows) && k_first >= uint64_t(p.dk.rows) &&
      k_first >= uint64_t(p.dv.rows)) {
    if (tid == 0) {
      const uint64_t n = uint64_t(min(BN, key_valid - n0));
      record_bwd(p, at, p.k.buffer, AccessKind::read, Unit::rows, int64_t(k_first), p.k.rows, int64_t(k_first),
                 h, n_block, oc::kMainKeyReads, n0, n);
      record_bwd(p, at, p.v.buffer, AccessKind::read, Unit::rows, int64_t(k_first), p.v.rows, int64_t(k_first),
                 h, n_block, oc::kMainKeyReads, int64_t(n0) | int64_t(order::kValueBit), n);
      record_bwd(p, at, p.dk.buffer, AccessKind::write, Unit::rows, int64_t(k_first), p.dk.rows,
                 int64_t(k_first), h, n_block, oc::kMainDkDv, n0, n);
      record_bwd(p, at, p.dv.buffer, AccessKind::write, Unit::rows, int64_t(k_first), p.dv.rows,
                 int64_t(k_first), h, n_block, oc::kMainDkDv, int64_t(n0) | int64_t(order::kValueBit), n);
    }
    return false;
  }
  const int64_t q_inside = min(p.q.rows, p.dout.rows) - int64_t(seg.start_q);  // segment rows inside q and dO
  const int64_t m_live = q_inside > 0 ? fa2::ceil_div(q_inside, BM) : 0;
  if (m_live < qb.m_max) {
    const int64_t first = (m_live > qb.m_min ? m_live : qb.m_min) * BM;
    const int64_t last = min(int64_t(seg.len_q), qb.m_max * BM);
    if (tid == 0 && last > first) {
      const int64_t row = int64_t(uint64_t(seg.start_q) + uint64_t(first));
      // q and dO rows (one record of two accesses per row, as for a tile that is run)
      record_bwd(p, at, p.q.buffer, AccessKind::read, Unit::rows, row, p.q.rows, row, h, first / tm,
                 oc::kMainQueryReads, first, 2 * uint64_t(last - first));
    }
    run.m_max = m_live > qb.m_min ? m_live : qb.m_min;
  }
  return true;
}

// ---------------------------------------------------------------------------------------
// The steps the two mma.sync key-block bodies share (key_block_body below: 128 keys, a warp's
// 16 keys across the whole head dim; key_block_body_split, varlen_attention_bwd_split.cuh: 64
// keys, a warp's 16 keys across half of it): one definition each, so both make the same
// accesses, checks and records.

// Zeroes a thread's m16n8 accumulator fragments (NB n8 blocks each) of two products: a key
// block's dK and dV, a step's Sᵀ and dPᵀ.
template <int NB>
__device__ __forceinline__ void zero_frags(float (&a)[NB][4], float (&b)[NB][4]) {
#pragma unroll
  for (int i = 0; i < NB; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) a[i][e] = b[i][e] = 0.f;
}

// The query steps a key block's body walks into `run`: all of w.steps, or, checked, what
// trim_walk leaves of them (BM rows a step, BN keys a block). False: the block lies wholly
// past k, v, dk and dv (recorded), and nothing runs.
template <int BM, int BN, bool Checked>
__device__ __forceinline__ bool steps_to_walk(const VarlenBwdParams& p, const KeyBlockWalk& w, int n_block,
                                              decltype(KeyBlockWalk::steps)& run) {
  run = w.steps;
  if constexpr (Checked) return trim_walk<BM, BN>(p, w, n_block, run);
  else return true;
}

// K and V of the key block (its BN rows from key n0 of the segment, head h_kv) into the
// swizzled [BN][D] tiles sK and sV.
template <class T, int D, int BN, int NT, bool Checked>
__device__ __forceinline__ void load_key_block(const VarlenBwdParams& p, const KeyBlockWalk& w, int n_block, T* sK,
                                               T* sV) {
  load_rows<T, D, BN, NT, Checked>(p, w.at, static_cast<const T*>(p.k.data), p.k.heads, p.k.rows, p.k.buffer, sK,
                                   w.seg.start_k, w.n0, w.key_valid, w.h_kv, n_block, oc::kMainKeyReads, 0);
  load_rows<T, D, BN, NT, Checked>(p, w.at, static_cast<const T*>(p.v.data), p.v.heads, p.v.rows, p.v.buffer, sV,
                                   w.seg.start_k, w.n0, w.key_valid, w.h_kv, n_block, oc::kMainKeyReads,
                                   int64_t(order::kValueBit));
}

// Q / dO / LSE / softmax_d of query step m (BM rows) into buffer `buf` of the step's double
// buffers: sQ0 and sdO0 [2][BM][D], sLse and sDs [2][BM].
template <class T, int D, int BM, int NT, bool Checked>
__device__ __forceinline__ void load_query_step(const VarlenBwdParams& p, const KeyBlockWalk& w, int m, int buf, T* sQ0,
                                                T* sdO0, float* sLse, float* sDs) {
  const Segment& seg = w.seg;
  const int m0 = m * BM, h = w.at.z, tm = w.tm;
  load_rows<T, D, BM, NT, Checked>(p, w.at, static_cast<const T*>(p.q.data), p.q.heads, p.q.rows, p.q.buffer,
                                   sQ0 + buf * BM * D, seg.start_q, m0, seg.len_q, h, m0 / tm, oc::kMainQueryReads, 0,
                                   p.dout.rows == p.q.rows ? 2 : 1);  // a q row past q: its dO row too
  load_rows<T, D, BM, NT, Checked>(p, w.at, static_cast<const T*>(p.dout.data), p.dout.heads, p.dout.rows,
                                   p.dout.buffer, sdO0 + buf * BM * D, seg.start_q, m0, seg.len_q, h, m0 / tm,
                                   oc::kMainQueryReads, 0, p.dout.rows == p.q.rows ? 0 : 1);
  load_row_stats<BM, Checked>(p, w.at, seg, w.cu_q_b, tm, m0, sLse + buf * BM, sDs + buf * BM);
}

// The start of a key block's walk (run: the steps steps_to_walk leaves, not empty): K and V,
// and the first step's (m_max - 1) Q / dO / LSE / softmax_d into buffer 0, one cp.async group.
template <class T, int D, int BM, int BN, int NT, bool Checked>
__device__ __forceinline__ void start_walk(const VarlenBwdParams& p, const KeyBlockWalk& w, int n_block,
                                           const decltype(KeyBlockWalk::steps)& run, T* sK, T* sV, T* sQ0, T* sdO0,
                                           float* sLse, float* sDs) {
  load_key_block<T, D, BN, NT, Checked>(p, w, n_block, sK, sV);
  load_query_step<T, D, BM, NT, Checked>(p, w, int(run.m_max) - 1, 0, sQ0, sdO0, sLse, sDs);
  cp_async_commit();
}

// The top of query step m (buffer buf) of the walk, steps m_max - 1 down to m_min: waits for
// its tiles, then (__syncthreads: every warp is done with the other buffer and with the
// body's shared tiles of the step before) loads step m - 1 into the other buffer, in flight
// while step m runs.
template <class T, int D, int BM, int NT, bool Checked>
__device__ __forceinline__ void begin_query_step(const VarlenBwdParams& p, const KeyBlockWalk& w,
                                                 const decltype(KeyBlockWalk::steps)& run, int m, int buf, T* sQ0,
                                                 T* sdO0, float* sLse, float* sDs) {
  cp_async_wait<0>();
  __syncthreads();
  if (m > run.m_min) load_query_step<T, D, BM, NT, Checked>(p, w, m - 1, buf ^ 1, sQ0, sdO0, sLse, sDs);
  cp_async_commit();
}

// Sᵀ = K Qᵀ and dPᵀ = V dOᵀ of a warp's 16 keys (rows kr .. kr + 15 of sK and sV, [BN][D])
// x NB n8 blocks of the step's query columns from q0 (rows of sQ and sdO, [BM][D]).
template <class T, int D, int NB>
__device__ __forceinline__ void s_dp_product(float (&s)[NB][4], float (&dp)[NB][4], const T* sK, const T* sV,
                                             const T* sQ, const T* sdO, int kr, int q0) {
  constexpr int KD = D / 16;  // k16 steps over the head dim
  const int tid = threadIdx.x, lane = tid & 31;
  zero_frags(s, dp);
#pragma unroll
  for (int kk = 0; kk < KD; ++kk) {
    uint32_t ka[4], va[4];
    ldmatrix_x4(ka, sK + swz<D>(kr + (lane & 7) + ((lane >> 3) & 1) * 8, kk * 16 + (lane >> 4) * 8));
    ldmatrix_x4(va, sV + swz<D>(kr + (lane & 7) + ((lane >> 3) & 1) * 8, kk * 16 + (lane >> 4) * 8));
#pragma unroll
    for (int nb2 = 0; nb2 < NB / 2; ++nb2) {
      uint32_t qf[4], of[4];
      const int qr = q0 + nb2 * 16 + (lane & 7) + ((lane >> 4) << 3), qc = kk * 16 + ((lane >> 3) & 1) * 8;
      ldmatrix_x4(qf, sQ + swz<D>(qr, qc));
      Mma<T>::run(s[2 * nb2], ka, qf[0], qf[1]);
      Mma<T>::run(s[2 * nb2 + 1], ka, qf[2], qf[3]);
      ldmatrix_x4(of, sdO + swz<D>(qr, qc));
      Mma<T>::run(dp[2 * nb2], va, of[0], of[1]);
      Mma<T>::run(dp[2 * nb2 + 1], va, of[2], of[3]);
    }
  }
}

// P = exp(S - LSE) (s becomes Pᵀ) and dS = P (dP - softmax_d) (dp becomes dSᵀ) in place, for
// the fragments s_dp_product left (key_a: the segment key of accumulator rows e < 2, e >= 2:
// + 8; query columns from q0 of the step at row m0, whose LSE and softmax_d are lse and dsm).
// mask: the step's block needs the per-element test (fa2::block_needs_mask); keys a row does
// not see (fa2::row_keys: causal diagonal, window, past the segment) get 0.
template <int NB>
__device__ __forceinline__ void p_ds_step(const StepMath& sm, bool mask, const float* lse, const float* dsm, int m0,
                                          int q0, int key_a, float (&s)[NB][4], float (&dp)[NB][4]) {
  const int tid = threadIdx.x, lane = tid & 31;
  with_p_ds_form(sm, mask, [&](auto softcap, auto masked) {
#pragma unroll
    for (int i = 0; i < NB; ++i)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int col = q0 + i * 8 + 2 * (lane & 3) + c;
        const float lse2 = lse[col] * kLog2e, d = dsm[col];
        const fa2::KeyLimits kl = row_keys_if<masked.value>(sm, m0 + col);
#pragma unroll
        for (int e = c; e < 4; e += 2)
          p_and_ds<softcap.value, masked.value>(sm, kl, key_a + (e >> 1) * 8, lse2, d, s[i][e], dp[i][e]);
      }
  });
}

// dQ (BM x D) = dS (BM x BN) K (BN x D) of the step at row m0, from dSᵀ (sdS, [BN][BM]) and
// K (sK, [BN][D]) in shared memory, added into dq_accum copy `split` (add_dq): warp = (row
// tile mt, column group ch) of Shape's dQ layout (kDqRowTiles x kDqCols columns).
template <class Shape, class T, int D, bool Checked>
__device__ __forceinline__ void dq_step(const VarlenBwdParams& p, const KeyBlockWalk& w, int split, int m0,
                                        const T* sdS, const T* sK) {
  constexpr int BM = Shape::kBlockM, BN = Shape::kBlockN, DQ_COLS = Shape::kDqCols, DQB = DQ_COLS / 8;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int mt = warp % Shape::kDqRowTiles, ch = warp / Shape::kDqRowTiles;
  float dq[DQB][4];
#pragma unroll
  for (int i = 0; i < DQB; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) dq[i][e] = 0.f;
#pragma unroll
  for (int kc = 0; kc < BN / 16; ++kc) {
    uint32_t a[4];
    ldmatrix_x4_trans(a, sdS + swz_ds<BM>(kc * 16 + (lane & 7) + (lane >> 4) * 8, mt * 16 + ((lane >> 3) & 1) * 8));
#pragma unroll
    for (int db2 = 0; db2 < DQB / 2; ++db2) {
      uint32_t kf[4];
      ldmatrix_x4_trans(kf, sK + swz<D>(kc * 16 + (lane & 7) + ((lane >> 3) & 1) * 8,
                                        ch * DQ_COLS + db2 * 16 + (lane >> 4) * 8));
      Mma<T>::run(dq[2 * db2], a, kf[0], kf[1]);
      Mma<T>::run(dq[2 * db2 + 1], a, kf[2], kf[3]);
    }
  }
  add_dq<DQB, Checked>(p, w.at, w.seg, w.cu_q_b, w.tm, w.m_top, split, m0 + mt * 16 + (lane >> 2),
                       ch * DQ_COLS + 2 * (lane & 3), (lane & 3) == 0 && ch == 0,
                       reinterpret_cast<const float(&)[DQB * 4]>(dq));
}

// Key block n_block of CTA `at` (segment at.y, head at.z); its dq goes into dq_accum copy
// `split`.
template <class T, int D, int BM, bool Checked>
__device__ __forceinline__ void key_block_body(const VarlenBwdParams& p, const Cta& cta, int n_block, int split,
                                               unsigned char* smem_raw) {
  using Shape = BwdShape<D, BM>;
  constexpr int BN = Shape::kBlockN, NT = Shape::kThreads;
  constexpr int NBM = BM / 8;  // n8 blocks of Sᵀ / dPᵀ (query columns)
  constexpr int DB = D / 8;    // n8 blocks of dK / dV
  constexpr int DQB = Shape::kDqCols / 8;
  static_assert(BN == kBwdBlockN && DQB % 2 == 0 && Shape::kDqRowTiles * Shape::kDqColGroups == Shape::kWarps,
                "the dQ warp layout covers BM x D");

  T* sK = reinterpret_cast<T*>(smem_raw);
  T* sV = sK + BN * D;
  T* sQ0 = sV + BN * D;          // Q [2][BM][D]
  T* sdO0 = sQ0 + 2 * BM * D;    // dO [2][BM][D]
  T* sdS = sdO0 + 2 * BM * D;    // dSᵀ [BN][BM]
  float* sLse = reinterpret_cast<float*>(sdS + BN * BM);  // [2][BM], the LSE
  float* sDs = sLse + 2 * BM;                              // [2][BM], softmax_d

  const KeyBlockWalk w = key_block_walk(p, cta, n_block, BM);
  if (w.kb.exits) return;  // FA2: n_block * kBlockN >= actual_seqlen_k
  const Segment& seg = w.seg;
  const int n0 = w.n0, key_valid = w.key_valid;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const Cta& at = w.at;
  const fa2::Flags& flags = w.flags;

  float dk[DB][4], dv[DB][4];
  zero_frags(dk, dv);

  decltype(KeyBlockWalk::steps) run;
  if (!steps_to_walk<BM, BN, Checked>(p, w, n_block, run)) return;

  if (run.m_max > run.m_min) {
    start_walk<T, D, BM, BN, NT, Checked>(p, w, n_block, run, sK, sV, sQ0, sdO0, sLse, sDs);
    int buf = 0;
    const int kr = warp * 16;                 // the warp's first key row in the tile
    const int key_a = n0 + kr + (lane >> 2);  // segment key of accumulator rows e < 2 (e >= 2: + 8)
    for (int m = int(run.m_max) - 1; m >= int(run.m_min); --m) {
      const int m0 = m * BM;
      // this step's tiles are in; every warp is done with the other buffer and sdS
      begin_query_step<T, D, BM, NT, Checked>(p, w, run, m, buf, sQ0, sdO0, sLse, sDs);
      const T* sQ = sQ0 + buf * BM * D;
      const T* sdO = sdO0 + buf * BM * D;

      // Sᵀ = K Qᵀ and dPᵀ = V dOᵀ for the warp's 16 keys x BM queries, then Pᵀ and dSᵀ in place.
      float s[NBM][4], dp[NBM][4];
      s_dp_product<T, D>(s, dp, sK, sV, sQ, sdO, kr, 0);
      p_ds_step(w.sm, fa2::block_needs_mask(n0, BN, m0, BM, seg.len_q, seg.len_k, flags), sLse + buf * BM,
                sDs + buf * BM, m0, 0, key_a, s, dp);

      // dV += Pᵀ dO and dK += dSᵀ Q: the accumulators are the A operands already.
#pragma unroll
      for (int kc = 0; kc < NBM / 2; ++kc) {
        uint32_t pa[4], da[4];
        pa[0] = Elem<T>::pack(s[2 * kc][0], s[2 * kc][1]);
        pa[1] = Elem<T>::pack(s[2 * kc][2], s[2 * kc][3]);
        pa[2] = Elem<T>::pack(s[2 * kc + 1][0], s[2 * kc + 1][1]);
        pa[3] = Elem<T>::pack(s[2 * kc + 1][2], s[2 * kc + 1][3]);
        da[0] = Elem<T>::pack(dp[2 * kc][0], dp[2 * kc][1]);
        da[1] = Elem<T>::pack(dp[2 * kc][2], dp[2 * kc][3]);
        da[2] = Elem<T>::pack(dp[2 * kc + 1][0], dp[2 * kc + 1][1]);
        da[3] = Elem<T>::pack(dp[2 * kc + 1][2], dp[2 * kc + 1][3]);
        // dSᵀ -> shared memory for dQ (rows: keys, columns: queries)
        const int r0 = kr + (lane >> 2), c0 = kc * 16 + 2 * (lane & 3);
        *reinterpret_cast<uint32_t*>(sdS + swz_ds<BM>(r0, c0)) = da[0];
        *reinterpret_cast<uint32_t*>(sdS + swz_ds<BM>(r0 + 8, c0)) = da[1];
        *reinterpret_cast<uint32_t*>(sdS + swz_ds<BM>(r0, c0 + 8)) = da[2];
        *reinterpret_cast<uint32_t*>(sdS + swz_ds<BM>(r0 + 8, c0 + 8)) = da[3];
#pragma unroll
        for (int db2 = 0; db2 < DB / 2; ++db2) {
          uint32_t of[4], qf[4];
          ldmatrix_x4_trans(of, sdO + swz<D>(kc * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, db2 * 16 + (lane >> 4) * 8));
          Mma<T>::run(dv[2 * db2], pa, of[0], of[1]);
          Mma<T>::run(dv[2 * db2 + 1], pa, of[2], of[3]);
          ldmatrix_x4_trans(qf, sQ + swz<D>(kc * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, db2 * 16 + (lane >> 4) * 8));
          Mma<T>::run(dk[2 * db2], da, qf[0], qf[1]);
          Mma<T>::run(dk[2 * db2 + 1], da, qf[2], qf[3]);
        }
      }
      __syncthreads();  // dSᵀ complete

      dq_step<Shape, T, D, Checked>(p, w, split, m0, sdS, sK);
      buf ^= 1;
    }
  }

  store_dk_dv<T, D, NT, Checked>(p, at, seg, n_block, n0, key_valid, reinterpret_cast<const float(&)[D / 2]>(dk),
                                 reinterpret_cast<const float(&)[D / 2]>(dv), sK, sV);
}

// The range rules of the checked kernels' in-bounds tests (key_block_in_bounds, the small
// launches' pre_tile_in_bounds and convert_tile_in_bounds), one definition each:
// softmax_d_rows_in: the softmax_d elements of rows [first, last] of segment b, head h lie
// inside softmax_d and are consecutive (the 32-bit sum did not wrap between the ends);
// dq_tile_in: the `rows` dq_accum rows from element `tile` (each d_rounded wide) lie inside
// dq_accum.
__device__ __forceinline__ bool softmax_d_rows_in(const VarlenBwdParams& p, int32_t cu_q_b, int b, int h,
                                                  int64_t first, int64_t last) {
  const int64_t d0 = softmax_d_at(p, cu_q_b, b, h, first), d1 = softmax_d_at(p, cu_q_b, b, h, last);
  return d0 >= 0 && d1 < p.softmax_d_size && d1 - d0 == last - first;
}
__device__ __forceinline__ bool dq_tile_in(const VarlenBwdParams& p, int64_t tile, int64_t rows) {
  return tile >= 0 && tile + (rows - 1) * dq_row_stride(p) + p.dq_accum_shape.d_rounded <= p.dq_accum_size;
}

// Whether every access key block n of CTA (x, b, h) makes lies inside its buffer: its key
// rows in k, v, dk, dv; the query rows it walks in q and dO; their LSE and the softmax_d and
// dq_accum rows of FA2's tiles it walks in theirs. The indices are affine in the row (LSE),
// in the row unless the 32-bit sum wraps (softmax_d: its ends and their distance decide), and
// in the tile (dq_dk_dv steps its dq_accum pointer back in 64 bits from m_max - 1), so the
// ends of each range decide. The checked kernel then runs the unchecked body: the checks
// cost a few comparisons per CTA on a healthy batch. WholeDqRows: one more condition, for the
// kernel that adds dQ through a tensor map of dq_accum's rows (varlen_attention_bwd_wgmma_ws.cuh;
// p.dq_rows_whole tells its fallback launch): each dQ row of the block lies within one row of
// dq_accum (its tiles' offsets, a1's stepped back by whole rows, start at a column that leaves
// head_dim columns in the row). Only offsets that wrapped past 2^32 and came back positive
// break it; such a block runs with the checked body. A template argument, not a test of
// p.dq_rows_whole in every kernel: in the mma.sync kernels and the wgmma kernel the modulo
// raised ptxas's spill (wgmma, d128, checked: 8 -> 32 bytes).
// The kernels that walk the block next pass their walk (key_block_walk: its segment, FA2's key
// block range and cu_seqlens_q[b]), so that the segment and the range's 64-bit divisions are
// computed once per block (about 170 fewer instructions before the d64 wgmma kernel's first
// load; bench/results/bwd-check-overhead-h200-2026-11-28).
template <bool WholeDqRows = false>
__device__ __forceinline__ bool key_block_in_bounds(const VarlenBwdParams& p, const Cta& at, const Segment& seg,
                                                    const fa2::bwd::KeyBlockRange& kb, int32_t cu_q_b, int split) {
  const int b = at.y, h = at.z;
  if (kb.exits) return true;
  const uint64_t k_end = uint64_t(seg.start_k) + uint64_t(kb.key_end);
  if (k_end > uint64_t(p.k.rows) || k_end > uint64_t(p.v.rows) || k_end > uint64_t(p.dk.rows) ||
      k_end > uint64_t(p.dv.rows))
    return false;
  if (kb.empty) return true;
  const int64_t tm = tile_m_of(p);
  const int64_t first = kb.m_min * tm, tile_end = kb.m_max * tm;  // rows of FA2's tiles walked
  const int64_t live_end = tile_end < int64_t(seg.len_q) ? tile_end : int64_t(seg.len_q);
  if (first < live_end) {
    const uint64_t q_end = uint64_t(seg.start_q) + uint64_t(live_end);
    if (q_end > uint64_t(p.q.rows) || q_end > uint64_t(p.dout.rows)) return false;
    const fa2::LseShape ls{p.lse_layout, p.q.rows, p.num_heads, p.lse_max_seqlen_q};
    const int64_t l0 = fa2::lse_index(ls, false, cu_q_b, b, h, h, first);
    const int64_t l1 = fa2::lse_index(ls, false, cu_q_b, b, h, h, live_end - 1);
    if (l0 < 0 || l1 >= p.lse_size || l1 - l0 != live_end - 1 - first) return false;
  }
  if (!softmax_d_rows_in(p, cu_q_b, b, h, first, tile_end - 1)) return false;
  const int64_t m_top = kb.m_max - 1, stride = dq_row_stride(p), dr = p.dq_accum_shape.d_rounded;
  const int64_t a0 = dq_accum_tile(p, fa2::bwd::DqKernel::dq_dk_dv, cu_q_b, b, h, kb.m_min, m_top, split);
  const int64_t a1 = dq_accum_tile(p, fa2::bwd::DqKernel::dq_dk_dv, cu_q_b, b, h, m_top, m_top, split);
  return dq_tile_in(p, a0, tm) && dq_tile_in(p, a1, tm) && (!WholeDqRows || a1 % stride + dr <= stride);
}
template <bool WholeDqRows = false>
__device__ __forceinline__ bool key_block_in_bounds(const VarlenBwdParams& p, const Cta& at, int n_block, int split) {
  const Segment seg = segment_of(p, at.y);
  return key_block_in_bounds<WholeDqRows>(
      p, at, seg, fa2::bwd::key_block_range(n_block, seg.len_q, seg.len_k, p.kernel.flags),
      p.cu_seqlens_q.data[at.y], split);
}
template <bool WholeDqRows = false>
__device__ __forceinline__ bool key_block_in_bounds(const VarlenBwdParams& p, const KeyBlockWalk& w, int split) {
  return key_block_in_bounds<WholeDqRows>(p, w.at, w.seg, w.kb, w.cu_q_b, split);
}

// The key blocks CTA `at` of the key-block grid runs, in order, as f(n_block, split): block x,
// or, deterministic, blocks x, x + nsplits, ... into dq_accum copy x (one CTA per copy, so its
// atomics never race: the sum is in a fixed order).
template <class F>
__device__ __forceinline__ void for_each_key_block(const VarlenBwdParams& p, const Cta& at, F&& f) {
  const int end = p.kernel.deterministic ? int(p.kernel.n_blocks) : at.x + 1;
  const int split = int(fa2::bwd::split_of(at.x, p.kernel));
  for (int n = at.x; n < end; n += int(at.grid_x)) f(n, split);
}

// CTA (x, b, h) of the key-block grid (for_each_key_block). The checked form runs the checked
// body only for a key block that can reach past a buffer.
template <class T, int D, int BM, bool Checked>
__global__ void __launch_bounds__(BwdShape<D, BM>::kThreads, BwdShape<D, BM>::kMinBlocks)
    varlen_bwd_kernel(const VarlenBwdParams p) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const Cta at = this_cta(key_grid_x(p));
  for_each_key_block(p, at, [&](int n, int split) {
    if (n != at.x) __syncthreads();  // the previous block's epilogue reads are done
    if (Checked && !key_block_in_bounds(p, at, n, split))
      key_block_body<T, D, BM, true>(p, at, n, split, smem_raw);
    else
      key_block_body<T, D, BM, false>(p, at, n, split, smem_raw);
  });
}

}  // namespace ad::kern::bwd

// ---------------------------------------------------------------------------------------
// the key-block kernel's instantiations: varlen_attention_bwd_tc_{bf16,fp16}.cu name them (one
// element type per file), varlen_attention_bwd.cu launches them

#include "cuda_check.hpp"
#include "launch.hpp"

namespace ad::kern::bwd {

template <class T, int D, int BM>
detail::BwdKernel bwd_kernel_shape(bool checked) {
  using Shape = BwdShape<D, BM>;
  return {checked ? &varlen_bwd_kernel<T, D, BM, true> : &varlen_bwd_kernel<T, D, BM, false>, Shape::kThreads,
          int(Shape::smem_bytes(sizeof(T)))};
}

// block_m: the query rows per step (kernel_params.hpp VarlenBwdParams::block_m; 0 = the
// default of the head dim, default_block_m).
template <class T>
detail::BwdKernel bwd_kernel(int head_dim, int block_m, bool checked) {
  const int bm = block_m > 0 ? block_m : default_block_m(head_dim);
  if (head_dim == 64 && bm == 64) return bwd_kernel_shape<T, 64, 64>(checked);
  if (head_dim == 64 && bm == 32) return bwd_kernel_shape<T, 64, 32>(checked);
  if (head_dim == 128 && bm == 64) return bwd_kernel_shape<T, 128, 64>(checked);
  if (head_dim == 128 && bm == 32) return bwd_kernel_shape<T, 128, 32>(checked);
  throw cuda::LaunchConfigError("tensor-core varlen backward: head_dim " + std::to_string(head_dim) + " block_m " +
                                std::to_string(bm) + " has no instantiation (d64 m64 and m32, d96 m64, d128 m64 and m32)");
}

}  // namespace ad::kern::bwd
