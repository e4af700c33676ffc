// The segment and the CTA as every attention kernel (forward and backward, mma.sync and
// wgmma) sees them: one type each, built from the contract's definitions
// (contract/fa2_forward.hpp fa2::segment, the ones the CPU twin runs) in the kernels'
// compact types, and the launch-order key of a CTA's accesses (contract/launch_order.hpp).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "contract/fa2_forward.hpp"
#include "contract/launch_order.hpp"
#include "kernel_params.hpp"

namespace ad::kern {

// A segment's rows: FA2 widens the int32 starts through uint32 (a negative cu_seqlens[0]
// becomes a row offset near 2^32: PrimeIntellect-ai/prime-rl PR#2392), so the starts are
// unsigned here; the lengths are the contract's (negative: the segment computes nothing).
struct Segment {
  uint32_t start_q;  // FA2: uint32_t(sum_s_q) * row_stride
  int32_t len_q;
  uint32_t start_k;
  int32_t len_k;
};

__device__ __forceinline__ Segment kernel_segment(const fa2::Segment& s) {
  return {static_cast<uint32_t>(s.start_q), s.len_q, static_cast<uint32_t>(s.start_k), s.len_k};
}
__device__ __forceinline__ fa2::Segment contract_segment(const Segment& s) {
  return {int64_t(s.start_q), s.len_q, int64_t(s.start_k), s.len_k};
}
// Segment b of the forward (seqused_k and the single-query GQA swap) and of the backward
// (neither: mha_varlen_bwd takes no seqused_k and does not swap).
__device__ __forceinline__ Segment segment_of(const VarlenFwdParams& p, int b) {
  return kernel_segment(
      fa2::segment(p.cu_seqlens_q.data, p.cu_seqlens_k.data, p.seqused_k, b, p.seqlenq_ngroups_swapped, p.ngroups));
}
__device__ __forceinline__ Segment segment_of(const VarlenBwdParams& p, int b) {
  return kernel_segment(fa2::segment(p.cu_seqlens_q.data, p.cu_seqlens_k.data, nullptr, b, false, 1));
}

// A CTA's place in its launch grid (x: blocks along the sequence, y: segments, z: heads) and
// the grid's x extent: what its records and launch-order keys name. A kernel's CTAs are their
// blockIdx (this_cta); the checked forms' second launches (the wgmma backward's fallback
// kernel, the forward's fwd_checked_fallback) run CTAs of FA2's grid by number.
struct Cta {
  int x, y, z;
  int64_t grid_x;
};
__device__ __forceinline__ Cta this_cta(int64_t grid_x) {
  return {int(blockIdx.x), int(blockIdx.y), int(blockIdx.z), grid_x};
}

// Launch-order key of an access of CTA `at` (grids of `batch` segments): its place in its
// grid (heads outermost), then the access class and its row.
__device__ __forceinline__ uint64_t cta_key(const Cta& at, int64_t batch, uint32_t cls, int64_t sub) {
  return order::key(order::grid_linear(uint64_t(at.x), uint64_t(at.y), uint64_t(at.z), uint64_t(at.grid_x), uint64_t(batch)),
                    cls, sub);
}

// A CTA over a tile of query rows (the forward's CTAs; the backward's preprocess and dq
// conversion): query tile at.x of segment at.y, head at.z, its first row of the segment
// row0 = at.x * block_m. FA2's per-tile exit: row0 >= len_q (a negative length computes
// nothing).
struct QueryTile {
  Cta at;
  Segment seg;
  int row0;
  __device__ bool exits() const { return row0 >= seg.len_q; }
};
template <class Params>
__device__ __forceinline__ QueryTile query_tile(const Params& p, const Cta& at, int block_m) {
  QueryTile t;
  t.at = at;
  t.seg = segment_of(p, at.y);
  t.row0 = at.x * block_m;
  return t;
}
template <class Params>
__device__ __forceinline__ QueryTile query_tile(const Params& p, int64_t grid_x, int block_m) {
  return query_tile(p, this_cta(grid_x), block_m);
}

}  // namespace ad::kern
