// Varlen attention forward with FA2's indexing contract (docs/spec/execution.md), in a
// checked and an unchecked form. Kernels at the top, launchers in varlen_attention.cu.
//
//   q   (total_q, H, D)   k, v (total_k, Hk, D)   out (total_q, H, D)
//   lse (H, total_q) fp32 from flash-attn 2.6, (N, H, max_seqlen_q) before (lse_layout)
//   grid (ceil(max_seqlen_q / block_m), N, H); CTA (m, b, h) exits when m * block_m >= len_q.
//   The single-query GQA swap (max_seqlen_q == 1, H > Hk) runs (N, Hk) CTAs of H / Hk rows.
//
// Every decision below is a function of contract/fa2_forward.hpp, the definitions the CPU
// twin (lib/exec/cpu/cpu_attention.cpp) runs: segments, rows, key blocks, masks, the LSE index.
// What is reproduced from FA2 (csrc/flash_attn/src/flash_fwd_kernel.h compute_attn_1rowblock,
// block_info.h, flash_api.cpp mha_varlen_fwd), because the diagnosis depends on it:
//  - the grid comes from max_seqlen_q, so rows of a longer segment past the last tile are
//    never computed (their poison survives: attention.coverage);
//  - segment starts are read as int32 and widened through uint32 (a negative cu_seqlens[0]
//    becomes a row offset near 2^32: PrimeIntellect-ai/prime-rl PR#2392);
//  - rows are predicated on the segment length only, never on the tensor size, so an
//    overshooting cu_seqlens[-1] reads and writes past q/k/v/out in the unchecked form
//    (Dao-AILab/flash-attention#855);
//  - causal is bottom-right aligned, the window is inclusive around the same diagonal,
//    key tiles outside [n_min, n_max) are skipped, and an empty key range writes 0 / +inf;
//  - softcap: s = softcap * tanh(scale * s / softcap) before the softmax.
// The checked form compares every row it touches with its buffer's row count; a row outside
// is recorded (attention.access) and neither read (zero-filled) nor written. A key tile wholly
// past k/v is recorded at once; with skip_tiles_past_rows a CTA wholly past q/out returns at
// once and the host counts its accesses (lib/exec/plan/clip.cpp). The tensor-core kernels run
// it in two launches: the unchecked body on the CTAs whose accesses all lie in bounds
// (fwd_cta_in_bounds), the checked body on the others (fwd_checked_fallback); see below.
//
// Tensor-core kernel (head dims 64, 96, 128, 192 and 256, bf16/fp16, block_m 128; 64 too at
// head dim 256, FA2's H100 tile): TileShape<D, MT, BM>. The
// launcher's shape (kDefaultMT = 2) is FA2's warp layout: 4 warps of 32 query rows, Q re-read
// from shared memory every step, each K/V fragment feeding two MMAs, key tiles of 64 (D = 64)
// or 32 (D = 128) keys; MT = 1 (8 warps of 16 rows, Q in registers, 128 / 64 keys) is the
// other shape the benchmarks compare (ATTN_DOCTOR_TC_BOTH_SHAPES). K and V tiles are
// double-buffered in shared memory with cp.async; S = Q·Kᵀ and O += P·V on
// mma.sync.m16n8k16 (fp32 accumulators), online softmax in registers with exp2. Fragment
// layouts: PTX ISA, "mma.m16n8k16" and "ldmatrix". Shared tiles are XOR-swizzled in 16-byte
// chunks so that ldmatrix reads are bank-conflict free.
//
// The Hopper kernel (kernels/sm90a/varlen_attention_wgmma.cuh, wgmma on sm_90a) calls the
// segment, key-range, mask, loader, LSE and store functions below, so both kernels keep one
// contract and record the same refused accesses.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "device_common.cuh"
#include "kernel_params.hpp"
#include "segment.cuh"
#include "softmax.cuh"

namespace ad::kern::attn {

inline constexpr int kBlockM = 128;  // the tensor-core kernels' block_m (FA2's kBlockM for D 64 and 128)
inline constexpr int kGenericThreads = 128;

// The tensor-core kernel's shape. MT: 16-row m tiles per warp. MT = 2 is FA2's layout (4
// warps of 32 rows: each K/V fragment read from shared memory feeds two MMAs, Q is re-read
// from shared memory every step); MT = 1 is 8 warps of 16 rows with Q held in registers
// (head dims up to 128; above, Q is re-read from shared memory as with MT = 2). BM: query rows
// per CTA, FA2's kBlockM: 128, or 64 for head dim 256 on an H100 (fa2::tile_for).
template <int D, int MT, int BM = kBlockM>
struct TileShape {
  // FA2: hdim64 128x128, hdim96 / hdim128 128x64, hdim192 128x64, hdim256 128x64 (A100) /
  // 64x64 (H100). With 32 rows per warp, 32 (d128) or 64 (d64, d96) keys keep S and O in
  // registers (d96 with 64 keys, FA2's tile: 1.23x the 32-key shape on an H100,
  // bench/results/headdims-h100-2026-11-27); at 192 and 256 a warp holds 16 rows (O alone is
  // D / 2 registers a thread), and 256 takes 32-key tiles so that Q and four K/V tiles fit an
  // A100's 163 KB.
  static constexpr int kBlockN = MT == 1 ? (D <= 64 ? 128 : D <= 192 ? 64 : 32) : (D <= 96 ? 64 : 32);
  static constexpr int kBlockM = BM;
  static constexpr int kChunks = D / 8;                // 16-byte chunks per row
  static constexpr int kWarps = BM / (16 * MT);
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kMinBlocks = kThreads <= 128 ? 2 : 1;  // CTAs per SM the registers allow
  static constexpr bool kQInRegisters = MT == 1 && D <= 128;
  static constexpr size_t smem_elems() { return size_t(BM) * D + 4 * size_t(kBlockN) * D; }
};
// The shape the launcher uses: 32 rows per warp up to head dim 128 (bench/gpu picks the other
// one through AttnKernel), 16 above (default_mt).
inline constexpr int kDefaultMT = 2;
inline constexpr int default_mt(int head_dim) { return head_dim <= 128 ? kDefaultMT : 1; }
// FA2's query rows per CTA the mma.sync kernel is instantiated for at each head dim: 128, and
// 64 at head dim 256 (an H100's tile).
inline constexpr bool tc_block_m_ok(int head_dim, int block_m) {
  return block_m == kBlockM || (head_dim == 256 && block_m == 64);
}

// ---------------------------------------------------------------------------------------
// row addressing (shared by both kernels): the contract's definitions
// (contract/fa2_forward.hpp), the ones the CPU twin runs, in the kernels' compact types; the
// segment and the CTA are segment.cuh's (one type each for every attention kernel).

// Query row `lr` of tile head `h` in segment `b`: which row and head of q/out/lse it is.
struct QueryRow {
  uint64_t row;
  int32_t head;
};
__device__ __forceinline__ QueryRow query_row(const VarlenFwdParams& p, const Segment& s, int b, int h, int lr) {
  const fa2::QueryRow q = fa2::query_row(contract_segment(s), p.seqlenq_ngroups_swapped, p.ngroups, h, lr);
  return {static_cast<uint64_t>(q.row), static_cast<int32_t>(q.head)};
}

struct KeyRange {
  int n_min, n_max;  // key tiles [n_min, n_max)
};
__device__ __forceinline__ KeyRange key_range(const VarlenFwdParams& p, const Segment& s, int m_block, int block_n) {
  const fa2::KeyBlocks k = fa2::key_blocks(m_block, s.len_q, s.len_k, fa2_flags(p, block_n));
  return {int(k.n_min), int(k.n_max)};
}

// This CTA's query tile (m_block, b, h) = blockIdx (segment.cuh QueryTile). It returns at
// once (`skips`) on FA2's per-tile exit (m_block * block_m >= len_q; a negative length
// computes nothing), or, in the checked form with skip_tiles_past_rows, when every row lies
// past q/out (the host counts its accesses, exec/plan/clip.cpp).
__device__ __forceinline__ QueryTile fwd_tile(const VarlenFwdParams& p, int block_m) {
  return query_tile(p, fa2_grid_m(p), block_m);
}
template <bool Checked>
__device__ __forceinline__ bool skips(const VarlenFwdParams& p, const QueryTile& t) {
  return t.exits() || (Checked && p.skip_tiles_past_rows &&
                       fa2::tile_past_rows(contract_segment(t.seg), p.seqlenq_ngroups_swapped, t.row0, p.q.rows));
}

// Launch-order key of an access of CTA `at` (contract/launch_order.hpp): its place in FA2's
// grid (heads outermost; at.grid_x is the full grid's m blocks even when the launch is
// clipped), then the access class and its row (q/out/LSE: row of the segment; k/v: key row).
__device__ __forceinline__ uint64_t attn_key(const VarlenFwdParams& p, const Cta& at, uint32_t cls, int64_t sub) {
  return cta_key(at, p.batch, cls, sub);
}

// Records a refused row access of CTA `at` (block = (m, b, h): its blockIdx, or the CTA of
// FA2's grid that the checked forward's second launch runs for it).
__device__ __forceinline__ void record_row(const VarlenFwdParams& p, const Cta& at, Buffer buffer, AccessKind kind,
                                           Unit unit, int64_t index, int64_t bound, int64_t row, int64_t head,
                                           int64_t tile, uint32_t cls, int64_t sub, uint64_t n = 1) {
  record_violation(p.record, buffer, kind, unit, Region::tensor, index, bound, at.x, at.y, at.z, at.y, row, head, tile,
                   attn_key(p, at, cls, sub), n);
}

// The LSE element of tile row `lr` of CTA `at` (query row `qr`).
__device__ __forceinline__ int64_t lse_index_of(const VarlenFwdParams& p, const Cta& at, const QueryRow& qr, int lr) {
  return fa2::lse_index(lse_shape(p), p.seqlenq_ngroups_swapped,
                        p.seqlenq_ngroups_swapped ? 0 : p.cu_seqlens_q.data[at.y], at.y, at.z, qr.head, lr);
}

template <bool Checked>
__device__ __forceinline__ void write_lse(const VarlenFwdParams& p, const Cta& at, const QueryRow& qr, int lr, float lse) {
  const int64_t idx = lse_index_of(p, at, qr, lr);
  if constexpr (Checked) {
    if (idx < 0 || idx >= p.lse_size) {
      record_row(p, at, Buffer::lse, AccessKind::write, Unit::elements, idx, p.lse_size, int64_t(qr.row), qr.head, at.x,
                 order::kLseWrite, lr);
      return;
    }
    if (!fa2::row_in_q(int64_t(qr.row), p.q.rows)) return;  // computes nothing (the CPU twin's rule)
  }
  p.lse[idx] = lse;
}

// The epilogue's LSE of this thread's two rows of a warp's 16-row tile, row_a and row_a + 8
// of the segment (rows past it are skipped); lane 0 of each quad writes.
template <bool Checked>
__device__ __forceinline__ void write_lse_rows(const VarlenFwdParams& p, const Cta& at, const Segment& seg, int row_a,
                                               int lane, const float (&lse)[2]) {
  if ((lane & 3) != 0) return;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int lr = row_a + half * 8;
    if (lr >= seg.len_q) continue;
    const QueryRow qr = query_row(p, seg, at.y, at.z, lr);
    write_lse<Checked>(p, at, qr, lr, lse[half]);
  }
}

// Coverage: counts the writes of an output row (head 0 only: a segment writes all heads).
__device__ __forceinline__ void count_row_write(const VarlenFwdParams& p, const QueryRow& qr) {
  if (p.row_writes != nullptr && qr.head == 0 && qr.row < uint64_t(p.row_writes_size)) atomicAdd(p.row_writes + qr.row, 1u);
}

// ---------------------------------------------------------------------------------------
// tensor-core kernel

// Swizzled element offset of (row, col) in a [rows][D] tile: 16-byte chunk c of row r is
// stored at chunk c ^ (r % 8), so the 8 rows an ldmatrix phase reads hit 8 distinct
// 128-byte bank groups.
// A row of 12 chunks (head dim 96) XORs with row % 4, which keeps each chunk inside its
// aligned group of four (two-way conflicts at most).
template <int D>
__device__ __forceinline__ int swz(int row, int col) {
  static_assert(D % 32 == 0, "rows of whole 4-chunk groups");
  constexpr int kMask = D % 64 == 0 ? 7 : 3;
  return row * D + ((((col >> 3) ^ (row & kMask))) << 3) + (col & 7);
}

// The mma.sync kernel's shared-memory layout of a [rows][D] tile (see swz).
template <int D>
struct RowSwizzle {
  __device__ __forceinline__ static int offset(int row, int col) { return swz<D>(row, col); }
};

// Streams BN key rows of the segment, [first, first + BN), into a K or V tile in shared
// memory (layout `Layout`, NT threads); rows outside [lo, hi) are zero-filled, not read. The
// pipeline and the tile must have the same role: a K pipeline cannot fill a V tile. Shared by
// the mma.sync and the wgmma kernels, so both read the same rows and refuse the same ones.
// Checked form: the rows are contiguous, so one comparison per tile decides whether every
// row lies inside the buffer; only a tile that reaches past it takes the per-row path that
// records and zero-fills, and the hot loop stays the unchecked one. A refused row is
// recorded with its key tile `kr / order_bn` (the mma.sync kernel's key-tile size); a tile
// whose rows all lie past the buffer (a segment running past k/v) is recorded at once, with
// its row count, and zero-filled.
// Interior (the wgmma kernel): a tile whose rows all lie inside [lo, hi) takes a path with the
// same addresses computed incrementally: row first + r of the segment is the tile's first
// row of this thread plus a multiple of NT / C rows, the same 64-bit sum modulo 2^64, so the
// unchecked form keeps FA2's addresses; a thread's 16-byte chunks then differ by constants
// (global) and immediates (shared: the layout's kRowElems), instead of a bounds test and a
// 64-bit product each.
template <class T, int D, int BN, int NT, bool Checked, class Layout, class Role, bool Interior = false>
__device__ __forceinline__ void load_key_rows(const VarlenFwdParams& p, const PipelineParams<Role>& pipe,
                                              SmemTile<Role, T> tile, const Segment& seg, const Cta& at, int h_kv,
                                              int first, int lo, int hi, int order_bn) {
  constexpr int C = D / 8;
  constexpr bool kIsValue = std::is_same<Role, ValueRole>::value;
  const T* src = static_cast<const T*>(pipe.src.data) + int64_t(h_kv) * D;
  const int64_t row_elems = int64_t(pipe.src.heads) * D;
  const int64_t head = p.seqlenq_ngroups_swapped ? -1 : int64_t(at.z);
  bool per_row = false;
  if constexpr (Checked) {
    const int begin = max(first, lo), end = min(first + BN, hi);
    per_row = end > begin && uint64_t(seg.start_k) + uint64_t(end) > uint64_t(pipe.src.rows);
    if (per_row && uint64_t(seg.start_k) + uint64_t(begin) >= uint64_t(pipe.src.rows)) {
      if (threadIdx.x == 0)
        record_row(p, at, pipe.src.buffer, AccessKind::read, Unit::rows, int64_t(uint64_t(seg.start_k) + uint64_t(begin)),
                   pipe.src.rows, int64_t(uint64_t(seg.start_k) + uint64_t(begin)), head, begin / order_bn,
                   order::kKeyRead, kIsValue ? int64_t(begin | order::kValueBit) : int64_t(begin), uint64_t(end - begin));
      for (int i = threadIdx.x; i < BN * C; i += NT)
        *reinterpret_cast<uint4*>(tile.data + Layout::offset(i / C, (i % C) * 8)) = make_uint4(0, 0, 0, 0);
      return;
    }
  }
  if (!per_row) {
    if constexpr (Interior && NT % C == 0 && (BN * C) % NT == 0) {
      if (first >= lo && first + BN <= hi) {
        constexpr int RS = NT / C;  // rows one pass of the threads covers
        const int r0 = int(threadIdx.x) / C, c = int(threadIdx.x) % C;
        static_assert(RS % 8 == 0, "the shared-memory step below needs rows 8 apart to share a swizzle");
        const T* g = src + int64_t(uint64_t(seg.start_k) + uint64_t(first + r0)) * row_elems + c * 8;
        const int64_t step = int64_t(RS) * row_elems;
        T* dst = tile.data + Layout::offset(r0, c * 8);
#pragma unroll
        for (int it = 0; it < BN / RS; ++it) cp_async_16(dst + it * RS * Layout::kRowElems, g + it * step);
        return;
      }
    }
#pragma unroll
    for (int it = 0; it < BN * C / NT; ++it) {
      const int i = threadIdx.x + it * NT;
      const int r = i / C, c = i % C;
      T* dst = tile.data + Layout::offset(r, c * 8);
      const int kr = first + r;
      if (kr >= lo && kr < hi) {
        cp_async_16(dst, src + int64_t(uint64_t(seg.start_k) + uint64_t(kr)) * row_elems + c * 8);
      } else {
        *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
      }
    }
    return;
  }
  for (int i = threadIdx.x; i < BN * C; i += NT) {
    const int r = i / C, c = i % C;
    T* dst = tile.data + Layout::offset(r, c * 8);
    const int kr = first + r;
    const uint64_t row = uint64_t(seg.start_k) + uint64_t(kr);
    bool ok = kr >= lo && kr < hi;
    if (ok && row >= uint64_t(pipe.src.rows)) {
      if (c == 0)
        record_row(p, at, pipe.src.buffer, AccessKind::read, Unit::rows, int64_t(row), pipe.src.rows, int64_t(row), head,
                   kr / order_bn, order::kKeyRead, kIsValue ? int64_t(kr | order::kValueBit) : int64_t(kr));
      ok = false;
    }
    if (ok) {
      cp_async_16(dst, src + int64_t(row) * row_elems + c * 8);
    } else {
      *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
    }
  }
}

// One K or V tile of the mma.sync kernel: rows [n * BN, n * BN + BN) of the segment.
template <class T, int D, int MT, int BM, bool Checked, class Role>
__device__ __forceinline__ void load_kv_tile(const VarlenFwdParams& p, const PipelineParams<Role>& pipe,
                                             SmemTile<Role, T> tile, const Segment& seg, const Cta& at, int h_kv,
                                             int n) {
  using Shape = TileShape<D, MT, BM>;
  load_key_rows<T, D, Shape::kBlockN, Shape::kThreads, Checked, RowSwizzle<D>>(
      p, pipe, tile, seg, at, h_kv, n * Shape::kBlockN, 0, seg.len_k, Shape::kBlockN);
}

// The Q tile, rows [row0, row0 + BM) of the segment, into shared memory (layout `Layout`,
// NT threads); rows past the segment are zero-filled. Checked form with `q_rows_checked`
// (the tile reaches past q): row by row, a refused row recorded and zero-filled.
template <class T, int D, int NT, bool Checked, class Layout, int BM = kBlockM>
__device__ __forceinline__ void load_q_tile(const VarlenFwdParams& p, T* sQ, const Segment& seg, const Cta& at, int row0,
                                            bool q_rows_checked) {
  constexpr int C = D / 8;
  const T* qsrc = static_cast<const T*>(p.q.data);
  const int64_t q_row_elems = int64_t(p.q.heads) * D;
#pragma unroll
  for (int it = 0; it < BM * C / NT; ++it) {
    const int i = threadIdx.x + it * NT;
    const int r = i / C, c = i % C;
    T* dst = sQ + Layout::offset(r, c * 8);
    const int lr = row0 + r;
    bool ok = lr < seg.len_q;
    const QueryRow qr = query_row(p, seg, at.y, at.z, lr);
    if (Checked && q_rows_checked && ok && qr.row >= uint64_t(p.q.rows)) {
      if (c == 0)
        record_row(p, at, p.q.buffer, AccessKind::read, Unit::rows, int64_t(qr.row), p.q.rows, int64_t(qr.row), qr.head,
                   at.x, order::kRead, lr);
      ok = false;
    }
    if (ok) {
      cp_async_16(dst, qsrc + int64_t(qr.row) * q_row_elems + int64_t(qr.head) * D + c * 8);
    } else {
      *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
    }
  }
}

// Writes a warp's WR output rows, staged in shared memory at rows warp * WR + r (layout
// `Layout`), as 16-byte chunks; rows past the segment are skipped. Checked form with
// `q_rows_checked`: a row past `out` is recorded, not written. With CountRows (the checked
// forms: the one that checks, and the first launch of the two-launch form, whose rows are all
// inside `out`) every written row is counted (coverage).
template <class T, int D, int WR, bool Checked, class Layout, bool CountRows = Checked>
__device__ __forceinline__ void store_out_rows(const VarlenFwdParams& p, const T* sO, const Segment& seg, const Cta& at,
                                               int row0, int warp, int lane, bool q_rows_checked) {
  constexpr int C = D / 8;
  T* out = static_cast<T*>(p.out.data);
  const int64_t o_row_elems = int64_t(p.out.heads) * D;
#pragma unroll
  for (int it = 0; it < WR * C / 32; ++it) {
    const int i = lane + it * 32;
    const int r = i / C, c = i % C;
    const int lr = row0 + warp * WR + r;
    if (lr >= seg.len_q) continue;
    const QueryRow qr = query_row(p, seg, at.y, at.z, lr);
    if (Checked && q_rows_checked && qr.row >= uint64_t(p.out.rows)) {
      if (c == 0)
        record_row(p, at, p.out.buffer, AccessKind::write, Unit::rows, int64_t(qr.row), p.out.rows, int64_t(qr.row), qr.head,
                   at.x, order::kOutWrite, lr);
      continue;
    }
    if (CountRows && c == 0) count_row_write(p, qr);
    *reinterpret_cast<uint4*>(out + int64_t(qr.row) * o_row_elems + int64_t(qr.head) * D + c * 8) =
        *reinterpret_cast<const uint4*>(sO + Layout::offset(warp * WR + r, c * 8));
  }
}

// Whether the query rows [row0, row0 + bm) of a tile that the segment holds all lie inside
// the q/out buffers (false: the checked form goes row by row).
__device__ __forceinline__ bool query_tile_in_bounds(const VarlenFwdParams& p, const Segment& seg, int b, int h,
                                                     int row0, int bm = kBlockM) {
  const int valid = min(bm, seg.len_q - row0);
  if (p.seqlenq_ngroups_swapped) return uint64_t(b) < uint64_t(p.q.rows) && uint64_t(b) < uint64_t(p.out.rows);
  const uint64_t end = uint64_t(seg.start_q) + uint64_t(row0) + uint64_t(valid);
  return end <= uint64_t(p.q.rows) && end <= uint64_t(p.out.rows);
}

// ---------------------------------------------------------------------------------------
// the checked forward in two launches (the wgmma kernel's; the backward's wgmma kernel does
// the same, kernels/sm90a/varlen_attention_bwd_wgmma.cuh)
//
// The first launch runs the unchecked body, with the coverage count, on every CTA of which
// fwd_cta_in_bounds holds: there the checked body would refuse and record nothing, and does
// what the unchecked body does. A CTA of which it does not hold exits before touching
// anything, and the second launch (fwd_checked_fallback, persistent) runs the checked body
// for it as the CTA of FA2's grid it is: its records, launch-order keys and coverage counts
// are the ones the checked body writes in one launch.

// Whether every access the checked forward body would test for query tile `t` (rows of
// `block_m`, the body's key-range granularity `block_n`: the mma.sync kernel's key tile)
// lies inside its buffer, in kFwdBoundsParts independent parts (so that a CTA can test them
// side by side, fwd_cta_in_bounds_split): 0, the Q rows read and the out rows written
// (query_tile_in_bounds); 1 and 2, the LSE elements written (their index is affine in the
// tile row, so its two ends, the first row's and the last row's); 3, the key rows
// [n_min * block_n, min(n_max * block_n, len_k)) read from k and from v (contiguous from the
// segment's start: the last one). cu_seqlens_q/k (batch + 1 entries) and seqused_k (batch)
// are read by every form and sized on the host (launch_varlen_fwd, the backend). A tile that
// exits at once (FA2's per-tile exit) accesses nothing; a tile the checked form skips
// (skip_tiles_past_rows: its rows lie past q) is not in bounds (part 0).
inline constexpr int kFwdBoundsParts = 4;
__device__ __forceinline__ bool fwd_cta_part_in_bounds(const VarlenFwdParams& p, const QueryTile& t, int block_m,
                                                       int block_n, int part) {
  if (t.exits()) return true;
  const Segment& seg = t.seg;
  const int b = t.at.y, h = t.at.z;
  if (part == 0) return !skips<true>(p, t) && query_tile_in_bounds(p, seg, b, h, t.row0, block_m);
  if (part <= 2) {
    const int row = part == 1 ? t.row0 : t.row0 + min(block_m, seg.len_q - t.row0) - 1;
    const int64_t i = lse_index_of(p, t.at, query_row(p, seg, b, h, row), row);
    return i >= 0 && i < p.lse_size;
  }
  const KeyRange kr = key_range(p, seg, t.at.x, block_n);
  if (kr.n_max <= kr.n_min) return true;
  const uint64_t end = uint64_t(seg.start_k) + uint64_t(min(kr.n_max * block_n, seg.len_k));
  return end <= uint64_t(key_pipeline(p).src.rows) && end <= uint64_t(value_pipeline(p).src.rows);
}
// The whole test in one thread (the second launch's scan).
__device__ __forceinline__ bool fwd_cta_in_bounds(const VarlenFwdParams& p, const QueryTile& t, int block_m,
                                                  int block_n) {
#pragma unroll
  for (int part = 0; part < kFwdBoundsParts; ++part)
    if (!fwd_cta_part_in_bounds(p, t, block_m, block_n, part)) return false;
  return true;
}
// The whole test for the CTA of NT threads, every thread calling: warp w tests part w (and
// w + NT / 32, ... when the CTA has fewer warps than parts), and the CTA's barrier combines
// them (bar.red.and), so that the CTA waits for the longest part rather than for their sum;
// the verdict is broadcast from lane 0, so that ptxas sees a warp-uniform exit. Measured on
// an H100 (bench/results/fwd-bounds-split-h100-2026-11-27): the warp-specialised d128
// forward's check overhead on dense 16 x 2048 fell from +4.5 to +2.8 %.
template <int NT>
__device__ __forceinline__ bool fwd_cta_in_bounds_split(const VarlenFwdParams& p, const QueryTile& t, int block_m,
                                                        int block_n) {
  constexpr int kWarps = NT / 32;
  static_assert(NT % 32 == 0 && kWarps >= 1, "whole warps");
  const int warp = int(threadIdx.x) >> 5;
  bool ok = true;
  if constexpr (kWarps >= kFwdBoundsParts) {
    ok = warp >= kFwdBoundsParts || fwd_cta_part_in_bounds(p, t, block_m, block_n, warp);
  } else {
    for (int part = warp; part < kFwdBoundsParts; part += kWarps)
      ok = ok && fwd_cta_part_in_bounds(p, t, block_m, block_n, part);
  }
  return __shfl_sync(0xffffffffu, __syncthreads_and(ok), 0) != 0;
}

// The second launch's body: a persistent grid takes the launch grid's CTAs (launch_grid_m x
// batch x heads, in FA2's order) NT at a time, each thread testing one, then runs
// tile_body(tile) (the checked body) for those that need it, in grid order (deterministic:
// a warp ballot, not an atomic, places them). On a healthy batch it costs one test per
// thread per NT CTAs and a launch. A CTA the checked form skips is not run (it would return
// at once). Dynamic shared memory: the body's; static: the scan's kFwdFallbackScanBytes, which
// must fit beside it (the wgmma d128 body takes 225 of the 227 KB a CTA may have). On compute
// capability 9.0 it is the first launch's programmatic dependent (launch_fwd; the first launch's
// CTAs call pdl_launch_dependents as they start): it may start while the first launch's last
// CTAs still run, instead of after them, and waits for the first launch at its end, so that the
// pair completes as one launch would for the stream's later work.
template <int NT>
inline constexpr int kFwdFallbackScanBytes = NT * 2 + NT / 32 * 4;
template <int NT, class TileBody>
__device__ __forceinline__ void fwd_checked_fallback(const VarlenFwdParams& p, int block_m, int block_n,
                                                     TileBody&& tile_body) {
  static_assert(NT % 32 == 0 && NT <= 1024, "whole warps");
  __shared__ uint16_t found[NT];  // the pass's CTAs to run, as offsets from its first
  __shared__ int warp_found[NT / 32];
  const int64_t gx = launch_grid_m(p);
  const int64_t ctas = gx * p.batch * p.num_heads;
  auto tile_of = [&](int64_t v) {
    return query_tile(p, Cta{int(v % gx), int((v / gx) % p.batch), int(v / (gx * p.batch)), fa2_grid_m(p)}, block_m);
  };
  const int warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  bool ran = false;
  for (int64_t first = int64_t(blockIdx.x) * NT; first < ctas; first += int64_t(gridDim.x) * NT) {
    const int64_t v = first + threadIdx.x;
    bool need = false;
    if (v < ctas) {
      const QueryTile t = tile_of(v);
      need = !skips<true>(p, t) && !fwd_cta_in_bounds(p, t, block_m, block_n);
    }
    const unsigned ballot = __ballot_sync(0xffffffffu, need);
    if (lane == 0) warp_found[warp] = __popc(ballot);
    __syncthreads();
    int base = 0, count = 0;
    for (int w = 0; w < NT / 32; ++w) {
      base += w < warp ? warp_found[w] : 0;
      count += warp_found[w];
    }
    if (need) found[base + __popc(ballot & ((1u << lane) - 1u))] = uint16_t(threadIdx.x);
    __syncthreads();
    for (int j = 0; j < count; ++j) {
      if (ran) __syncthreads();  // the previous tile's epilogue reads of shared memory are done
      ran = true;
      tile_body(tile_of(first + found[j]));
    }
    __syncthreads();  // found and warp_found are rewritten by the next pass
  }
  pdl_wait_primary();  // complete only once the first launch is: the stream's later work reads both
}

// One query tile (CTA `tile` of FA2's grid), unchecked or checked; CountRows: count the out
// rows written (coverage: the checked forms). smem_raw: the kernel's dynamic shared memory.
template <class T, int D, int MT, bool Checked, int BM, bool CountRows>
__device__ __forceinline__ void tc_fwd_tile(const VarlenFwdParams& p, const QueryTile& tile, unsigned char* smem_raw) {
  using Shape = TileShape<D, MT, BM>;
  constexpr int BN = Shape::kBlockN;
  constexpr int NT = Shape::kThreads;
  constexpr int NB = BN / 8;   // n8 blocks of S per m tile
  constexpr int DB = D / 8;    // n8 blocks of O
  constexpr int KQ = D / 16;   // k16 steps of Q·Kᵀ
  constexpr int WR = 16 * MT;  // rows per warp
  T* sQ = reinterpret_cast<T*>(smem_raw);
  // Double-buffered K and V tiles (buffer index by arithmetic, not a local array: a
  // run-time index into an array would put it on the stack).
  auto k_tile = [&](int i) { return SmemTile<KeyRole, T>{sQ + BM * D + i * BN * D}; };
  auto v_tile = [&](int i) { return SmemTile<ValueRole, T>{sQ + BM * D + (2 + i) * BN * D}; };

  if (skips<Checked>(p, tile)) return;
  const int m_block = tile.at.x, b = tile.at.y, h = tile.at.z, row0 = tile.row0;
  const Segment seg = tile.seg;

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const KeyPipelineParams kpipe = key_pipeline(p);
  const ValuePipelineParams vpipe = value_pipeline(p);
  const int h_kv = h / kpipe.group;
  const fa2::Flags flags = fa2_flags(p, BN);
  const KeyRange kr = key_range(p, seg, m_block, BN);
  // the keys this CTA reads: its key tiles, clipped to the segment
  const int64_t key_lo = int64_t(kr.n_min) * BN, key_hi = min(kr.n_max * BN, seg.len_k);
  bool q_rows_checked = false;  // checked form, tile reaching past q/out: row by row
  if constexpr (Checked) q_rows_checked = !query_tile_in_bounds(p, seg, b, h, row0, BM);
  const SoftmaxScale sc = softmax_scale_of(p);

  float o[MT][DB][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int i = 0; i < DB; ++i) o[mt][i][0] = o[mt][i][1] = o[mt][i][2] = o[mt][i][3] = 0.f;
  float m_i[MT][2], l_i[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) m_i[mt][0] = m_i[mt][1] = -INFINITY, l_i[mt][0] = l_i[mt][1] = 0.f;
  const int row_a = row0 + warp * WR + (lane >> 2);  // m tile mt: rows row_a + 16 mt (+ 8)

  if (kr.n_max > kr.n_min) {
    // Q tile -> shared (rows past the segment zero-filled).
    load_q_tile<T, D, NT, Checked, RowSwizzle<D>, BM>(p, sQ, seg, tile.at, row0, q_rows_checked);
    load_kv_tile<T, D, MT, BM, Checked>(p, kpipe, k_tile(0), seg, tile.at, h_kv, kr.n_max - 1);
    cp_async_commit();
    load_kv_tile<T, D, MT, BM, Checked>(p, vpipe, v_tile(0), seg, tile.at, h_kv, kr.n_max - 1);
    cp_async_commit();

    uint32_t qf[Shape::kQInRegisters ? KQ : 1][4];
    int buf = 0;
    for (int n = kr.n_max - 1; n >= kr.n_min; --n) {
      const bool has_next = n > kr.n_min;
      if (has_next) load_kv_tile<T, D, MT, BM, Checked>(p, kpipe, k_tile(buf ^ 1), seg, tile.at, h_kv, n - 1);
      cp_async_commit();
      cp_async_wait<2>();
      __syncthreads();
      if constexpr (Shape::kQInRegisters) {
        if (n == kr.n_max - 1) {
#pragma unroll
          for (int kk = 0; kk < KQ; ++kk)
            ldmatrix_x4(qf[kk], sQ + swz<D>(warp * WR + (lane & 7) + ((lane >> 3) & 1) * 8, kk * 16 + (lane >> 4) * 8));
        }
      }

      // S = Q Kᵀ: each K fragment read once from shared memory feeds MT MMAs.
      float s[MT][NB][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int i = 0; i < NB; ++i) s[mt][i][0] = s[mt][i][1] = s[mt][i][2] = s[mt][i][3] = 0.f;
#pragma unroll
      for (int kk = 0; kk < KQ; ++kk) {
        uint32_t a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          if constexpr (Shape::kQInRegisters) {
#pragma unroll
            for (int e = 0; e < 4; ++e) a[mt][e] = qf[kk][e];
          } else {
            ldmatrix_x4(a[mt], sQ + swz<D>(warp * WR + mt * 16 + (lane & 7) + ((lane >> 3) & 1) * 8,
                                          kk * 16 + (lane >> 4) * 8));
          }
        }
#pragma unroll
        for (int nb2 = 0; nb2 < NB / 2; ++nb2) {
          uint32_t kf[4];
          ldmatrix_x4(kf, k_tile(buf).data + swz<D>(nb2 * 16 + (lane & 7) + ((lane >> 4) << 3),
                                                   kk * 16 + ((lane >> 3) & 1) * 8));
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            Mma<T>::run(s[mt][2 * nb2], a[mt], kf[0], kf[1]);
            Mma<T>::run(s[mt][2 * nb2 + 1], a[mt], kf[2], kf[3]);
          }
        }
      }

      // Softcap, mask (only tiles that reach past the segment's keys or cross the window) and
      // the online softmax (softmax.cuh), then O rescaled.
      const bool need_mask = tile_needs_mask(n * BN, BN, row0, BM, seg.len_q, seg.len_k, flags, key_lo, key_hi);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        softcap_tile<NB>(s[mt], sc);
        if (need_mask)
          mask_tile<NB>(s[mt], n * BN, row_a + mt * 16, lane, seg.len_q, seg.len_k, flags, key_lo, key_hi);
        float corr[2];
        online_softmax<NB>(s[mt], m_i[mt], l_i[mt], corr, sc.log2);
        rescale_rows<DB>(o[mt], corr);
      }

      if (has_next) load_kv_tile<T, D, MT, BM, Checked>(p, vpipe, v_tile(buf ^ 1), seg, tile.at, h_kv, n - 1);
      cp_async_commit();
      cp_async_wait<2>();
      __syncthreads();

      // O += P V  (P from the S accumulators: two n8 blocks form one k16 A fragment); each
      // V fragment read once feeds MT MMAs.
#pragma unroll
      for (int kc = 0; kc < NB / 2; ++kc) {
        uint32_t a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          a[mt][0] = Elem<T>::pack(s[mt][2 * kc][0], s[mt][2 * kc][1]);
          a[mt][1] = Elem<T>::pack(s[mt][2 * kc][2], s[mt][2 * kc][3]);
          a[mt][2] = Elem<T>::pack(s[mt][2 * kc + 1][0], s[mt][2 * kc + 1][1]);
          a[mt][3] = Elem<T>::pack(s[mt][2 * kc + 1][2], s[mt][2 * kc + 1][3]);
        }
#pragma unroll
        for (int db2 = 0; db2 < DB / 2; ++db2) {
          uint32_t vf[4];
          ldmatrix_x4_trans(vf, v_tile(buf).data + swz<D>(kc * 16 + (lane & 7) + ((lane >> 3) & 1) * 8,
                                                         db2 * 16 + (lane >> 4) * 8));
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            Mma<T>::run(o[mt][2 * db2], a[mt], vf[0], vf[1]);
            Mma<T>::run(o[mt][2 * db2 + 1], a[mt], vf[2], vf[3]);
          }
        }
      }
      buf ^= 1;
    }
  }

  // Epilogue (softmax.cuh finish_rows): normalise, stage the warp's rows in shared memory (its
  // own Q rows: no other warp reads them), store 16-byte chunks, then the LSE. An empty key
  // range ends here with O = 0 and LSE = +inf (FA2: row_sum == 0).
  float lse[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) finish_rows<DB>(o[mt], m_i[mt], l_i[mt], sc.nat, lse[mt]);
  if constexpr (!Shape::kQInRegisters) __syncwarp();  // this warp's last Q reads are done
  T* sO = sQ;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) stage_rows<T, DB, RowSwizzle<D>>(sO, o[mt], warp * WR + mt * 16, lane);
  __syncwarp();
  store_out_rows<T, D, WR, Checked, RowSwizzle<D>, CountRows>(p, sO, seg, tile.at, row0, warp, lane, q_rows_checked);
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) write_lse_rows<Checked>(p, tile.at, seg, row_a + mt * 16, lane, lse[mt]);
}

// The unchecked form (Checked false), and the checked form's first launch (Checked true): the
// unchecked body, with the coverage count, on the CTAs of which fwd_cta_in_bounds holds; the
// others exit at once and varlen_fwd_tc_fallback_kernel runs them checked.
template <class T, int D, int MT, bool Checked, int BM = kBlockM>
__global__ void __launch_bounds__(TileShape<D, MT, BM>::kThreads, TileShape<D, MT, BM>::kMinBlocks)
    varlen_fwd_tc_kernel(const VarlenFwdParams p) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const QueryTile tile = fwd_tile(p, BM);
  using Shape = TileShape<D, MT, BM>;
  if constexpr (Checked) {
    pdl_launch_dependents();
    if (!fwd_cta_in_bounds_split<Shape::kThreads>(p, tile, BM, Shape::kBlockN)) return;
  }
  tc_fwd_tile<T, D, MT, false, BM, Checked>(p, tile, smem_raw);
}

// The checked form's second launch: the CTAs the first left, with the checked body, as the
// CTAs of FA2's grid they are (fwd_checked_fallback: a persistent grid).
template <class T, int D, int MT, int BM = kBlockM>
__global__ void __launch_bounds__(TileShape<D, MT, BM>::kThreads, TileShape<D, MT, BM>::kMinBlocks)
    varlen_fwd_tc_fallback_kernel(const VarlenFwdParams p) {
  using Shape = TileShape<D, MT, BM>;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  fwd_checked_fallback<Shape::kThreads>(p, BM, Shape::kBlockN, [&](const QueryTile& t) {
    tc_fwd_tile<T, D, MT, true, BM, true>(p, t, smem_raw);
  });
}

#ifdef ATTN_DOCTOR_FWD_ONE_LAUNCH
// The checked form in one launch, as before the two-launch form (benchmarks only:
// AttnKernel::tensor_core_one_launch, a build with ATTN_DOCTOR_FWD_ONE_LAUNCH).
template <class T, int D, int MT, int BM = kBlockM>
__global__ void __launch_bounds__(TileShape<D, MT, BM>::kThreads, TileShape<D, MT, BM>::kMinBlocks)
    varlen_fwd_tc_one_launch_kernel(const VarlenFwdParams p) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  tc_fwd_tile<T, D, MT, true, BM, true>(p, fwd_tile(p, BM), smem_raw);
}
#endif

}  // namespace ad::kern::attn

// ---------------------------------------------------------------------------------------
// the tensor-core kernel's instantiations: varlen_attention_tc_{bf16,fp16}.cu (head dims 64,
// 128) and varlen_attention_tc_wide_{bf16,fp16}.cu (96, 192, 256) name them (one element type
// and head-dim set per file, so they compile in parallel), varlen_attention.cu launches them

#include "cuda_check.hpp"
#include "launch.hpp"

namespace ad::kern::attn {

// pick(D, Checked) (std::integral_constant / std::bool_constant) for the head dims the
// wgmma kernels are instantiated for, 64 and 128; `kernel` names them in the error.
template <class Pick>
auto with_tensor_core_head_dim(int head_dim, bool checked, const char* kernel, Pick&& pick) {
  auto form = [&](auto d) { return checked ? pick(d, std::true_type{}) : pick(d, std::false_type{}); };
  if (head_dim == 64) return form(std::integral_constant<int, 64>{});
  if (head_dim == 128) return form(std::integral_constant<int, 128>{});
  throw cuda::LaunchConfigError(std::string(kernel) + ": head_dim " + std::to_string(head_dim) +
                                " has no instantiation (64, 128)");
}

// The launches of one shape in form `form` (detail::FwdForm).
template <class T, int D, int MT, int BM = kBlockM>
detail::FwdKernels tc_kernel_shape(detail::FwdForm form) {
  using Shape = TileShape<D, MT, BM>;
  static_assert(Shape::smem_elems() * sizeof(T) + kFwdFallbackScanBytes<Shape::kThreads> <= 227 * 1024,
                "the second launch's scan must fit beside the body's shared memory");
  const auto entry = [](void (*fn)(VarlenFwdParams)) {
    return detail::FwdKernel{fn, Shape::kThreads, int(Shape::smem_elems() * sizeof(T))};
  };
  detail::FwdKernels k;
  switch (form) {
    case detail::FwdForm::unchecked: k.main = entry(&varlen_fwd_tc_kernel<T, D, MT, false, BM>); break;
    case detail::FwdForm::checked:
      k.main = entry(&varlen_fwd_tc_kernel<T, D, MT, true, BM>);
      k.fallback = entry(&varlen_fwd_tc_fallback_kernel<T, D, MT, BM>);
      break;
    case detail::FwdForm::checked_one_launch:
#ifdef ATTN_DOCTOR_FWD_ONE_LAUNCH
      k.main = entry(&varlen_fwd_tc_one_launch_kernel<T, D, MT, BM>);
      break;
#else
      throw cuda::LaunchConfigError("this build carries the checked forward in two launches only "
                                    "(ATTN_DOCTOR_FWD_ONE_LAUNCH off)");
#endif
  }
  return k;
}

template <class T, int MT>
detail::FwdKernels tc_kernel_mt(int head_dim, detail::FwdForm form) {
  return with_tensor_core_head_dim(head_dim, form != detail::FwdForm::unchecked, "tensor-core varlen forward",
                                   [&](auto d, auto) { return tc_kernel_shape<T, decltype(d)::value, MT>(form); });
}

// Head dims 64 and 128 (varlen_attention_tc_{bf16,fp16}.cu). alt_shape: the other warp layout
// (MT 1 <-> 2), compiled only with ATTN_DOCTOR_TC_BOTH_SHAPES (benchmarks of the layout choice).
template <class T>
detail::FwdKernels tc_kernel(int head_dim, detail::FwdForm form, bool alt_shape) {
#ifdef ATTN_DOCTOR_TC_BOTH_SHAPES
  if (alt_shape) return tc_kernel_mt<T, 3 - kDefaultMT>(head_dim, form);
#else
  if (alt_shape) throw cuda::LaunchConfigError("this build carries one tensor-core shape (ATTN_DOCTOR_TC_BOTH_SHAPES off)");
#endif
  return tc_kernel_mt<T, kDefaultMT>(head_dim, form);
}

// Head dim D of 96, 192 and 256 in the launcher's shape only (default_mt), with FA2's query
// rows per CTA (tc_block_m_ok): kernels/varlen_attention_tc_wide_{bf16,fp16}.cu (96, 192) and
// varlen_attention_tc_d256_{bf16,fp16}.cu (256: 128 rows, A100, and 64 rows, H100).
template <class T, int D>
detail::FwdKernels tc_kernel_wide(int block_m, detail::FwdForm form) {
  if (block_m == kBlockM) return tc_kernel_shape<T, D, default_mt(D)>(form);
  if constexpr (D == 256) {
    if (block_m == 64) return tc_kernel_shape<T, D, default_mt(D), 64>(form);
  }
  throw cuda::LaunchConfigError("tensor-core varlen forward: head_dim " + std::to_string(D) + " block_m " +
                                std::to_string(block_m) + " has no instantiation");
}

}  // namespace ad::kern::attn
