// The backward's small launches: the preprocess (softmax_d = rowsum(dO * O), dq_accum zeroed,
// the launch check), the dq conversion and GQA's group sum. Included by the launcher
// (varlen_attention_bwd.cu) alone: the key-block kernels' translation units do not compile them.
//
// The params are __grid_constant__: a kernel that hands `p` (or a struct built from it) by
// reference to a __noinline__ function (the records, the launch check) otherwise gets a copy of
// the 608-byte struct in every thread's local memory, made at entry by every CTA, empty ones
// included. The checked preprocess did: 464 MB of local stores per call at 16k tokens x 32
// heads, 276 µs a call where its bytes take about 100 (ncu on an H100:
// bench/results/bwd-launches-h100-2026-11-27); without the copy, 107 µs.
#pragma once

#include "varlen_attention_bwd.cuh"

namespace ad::kern::bwd {

inline constexpr int kPreThreads = 128;
// The preprocess's rows in flight per thread: each thread issues the dO and O loads of this
// many rows (2 x 16 bytes each) before the first row sum and the first store.
inline constexpr int kPreRowsInFlight = 4;

// A 16-byte read-only global load (ld.global.nc: dO and O are not written during the launch).
__device__ __forceinline__ uint4 ldg_nc_v4(const void* ptr) { return __ldg(static_cast<const uint4*>(ptr)); }

// ---------------------------------------------------------------------------------------
// The preprocess grid's CTA (dot_do_o and convert_dQ): query tile blockIdx.x of segment
// blockIdx.y, head blockIdx.z; 128 threads, tpr per row: D / 8 rounded up to a power of two
// (8 elements each; at head dims 96 and 192 the lanes past the row, col_live false, touch no
// memory and add 0 to the row sum), the tile's rows in turn: this thread takes rows r_in,
// r_in + rows_per_pass, ... (tpr a power of two: shifts and masks, no division)
__device__ __forceinline__ int log2_threads_per_row(int head_dim) {
  int l = 0;
  while ((1 << l) < head_dim / 8) ++l;
  return l;
}
struct PreTile : QueryTile {
  int bm, tpr, rows_per_pass, r_in, lane, c;
  bool col_live;
  __device__ PreTile(const VarlenBwdParams& p, int log2_tpr)
      : QueryTile(query_tile(p, pre_grid_m(p), tile_m_of(p))), bm(tile_m_of(p)), tpr(1 << log2_tpr),
        rows_per_pass(kPreThreads >> log2_tpr), r_in(int(threadIdx.x) >> log2_tpr), lane(int(threadIdx.x) & (tpr - 1)),
        c(lane * 8), col_live(c < p.head_dim) {}
  __device__ explicit PreTile(const VarlenBwdParams& p) : PreTile(p, log2_threads_per_row(p.head_dim)) {}
};

// ---------------------------------------------------------------------------------------
// 1. preprocess: softmax_d = rowsum(dO * O), dq_accum rows zeroed

// 128 threads, D / 8 threads per row (8 elements each); rows of the CTA's tile in turn.
// dot_do_o reads dO and O of the segment's rows only, and writes softmax_d (0 past the
// segment) and zeroes dq_accum for every row of the tile (FA2 predicates neither: the
// 128-row padding per segment takes them).
// The launch check (p.launch_check): CTA (0, b, h), one thread, records the keys of segment b
// the backward leaves out while the forward used them (contract/fa2_backward.hpp), as the CPU
// twin notes them (lib/exec/cpu/direct.cpp): key row, the covered extent as the bound.
// The CTA and the segment by value: a reference would put the caller's tile in local memory.
__device__ __noinline__ inline void record_keys_left_out(const VarlenBwdParams& p, Cta at, uint32_t start_k,
                                                         int32_t len_k) {
  const int b = at.y, h = at.z;
  const fa2::bwd::KeysLeftOut g = fa2::bwd::keys_past_grid(len_k, p.kernel.n_blocks, tile_n_of(p));
  if (g.count > 0) {
    const int64_t row = int64_t(start_k) + g.first;
    record_bwd(p, at, Buffer::k, AccessKind::read, Unit::rows, row, g.first, row, h, 0, oc::kDotReads,
               oc::kLaunchCheckGrid, uint64_t(g.count), Region::max_seqlen);
  }
  if (p.seqused_k != nullptr) {
    const fa2::bwd::KeysLeftOut u = fa2::bwd::keys_past_seqused(len_k, p.seqused_k[b]);
    if (u.count > 0) {
      const int64_t row = int64_t(start_k) + u.first;
      record_bwd(p, at, Buffer::k, AccessKind::read, Unit::rows, row, u.first, row, h, 0, oc::kDotReads,
                 oc::kLaunchCheckSeqused, uint64_t(u.count), Region::seqused);
    }
  }
}

// Whether the tile's last live row lies inside a buffer of `rows` rows (its rows are the
// segment's, consecutive from start_q + row0: the last decides).
__device__ __forceinline__ bool tile_rows_in(const PreTile& t, int64_t rows) {
  const int live = min(t.bm, t.seg.len_q - t.row0);  // >= 1: the tile did not exit
  return uint64_t(t.seg.start_q) + uint64_t(t.row0 + live - 1) < uint64_t(rows);
}

// Whether every access of the preprocess's tile lies inside its buffer: the segment's rows in
// dO and out, the tile's softmax_d elements in softmax_d and in the head's part (affine in the
// row unless the 32-bit sum wraps: the ends and their distance decide), and its dq_accum rows
// (zeroed unless deterministic). Such a tile runs the body without per-row tests (it cannot
// refuse anything), as the key-block kernels do (key_block_in_bounds); the per-row tests cost
// the checked preprocess about 25 % (18 µs a call at d64, 16 x 2048 x 16 heads; ncu on an H200,
// bench/results/bwd-check-overhead-h200-2026-11-28, with kCheckedPreCtas below).
__device__ __forceinline__ bool pre_tile_in_bounds(const VarlenBwdParams& p, const PreTile& t, int32_t cu_q_b,
                                                   int64_t tile) {
  const int b = t.at.y, h = t.at.z;
  const int64_t last = t.row0 + t.bm - 1;
  if (!tile_rows_in(t, p.dout.rows) || !tile_rows_in(t, p.out.rows) || !softmax_d_rows_in(p, cu_q_b, b, h, t.row0, last))
    return false;
  // the ends in the head's part (the write's rule; the elements between them are consecutive)
  if (!fa2::bwd::softmax_d_in_head(p.softmax_d_shape, h, softmax_d_at(p, cu_q_b, b, h, t.row0)) ||
      !fa2::bwd::softmax_d_in_head(p.softmax_d_shape, h, softmax_d_at(p, cu_q_b, b, h, last)))
    return false;
  return p.kernel.deterministic || dq_tile_in(p, tile, t.bm);
}

// The preprocess of one tile; RowChecks: each row's accesses tested (recorded and refused when
// outside), else none (the checked form's in-bounds tiles and the unchecked form).
template <class T, bool RowChecks>
__device__ __forceinline__ void preprocess_tile(const VarlenBwdParams& p, const PreTile& t, int32_t cu_q_b,
                                                int64_t tile) {
  const int m_block = t.at.x, b = t.at.y, h = t.at.z, bm = t.bm, row0 = t.row0, D = p.head_dim, tpr = t.tpr, c = t.c;
  const Segment& seg = t.seg;
  const Cta& at = t.at;
  const T* dout = static_cast<const T*>(p.dout.data);
  const T* out = static_cast<const T*>(p.out.data);
  const int64_t stride = dq_row_stride(p);
  bool reads_ok = true;  // checked form: false when every row of the tile lies past dO and out
  if constexpr (RowChecks) {
    const uint64_t first = uint64_t(seg.start_q) + uint64_t(row0);
    if (first >= uint64_t(p.dout.rows) && first >= uint64_t(p.out.rows)) {
      reads_ok = false;
      if (threadIdx.x == 0) {
        const uint64_t n = uint64_t(min(bm, seg.len_q - row0));
        record_bwd(p, at, p.dout.buffer, AccessKind::read, Unit::rows, int64_t(first), p.dout.rows, int64_t(first),
                   h, m_block, oc::kDotReads, row0, n);
        record_bwd(p, at, p.out.buffer, AccessKind::read, Unit::rows, int64_t(first), p.out.rows, int64_t(first), h,
                   m_block, oc::kDotReads, row0 | int64_t(order::kValueBit), n);
      }
    }
  }
  // Rows in chunks of kPreRowsInFlight per thread, each chunk in three phases so that its
  // loads are in flight together (no store between them that the compiler must order them
  // against): (a) the checks of every row's dO and O reads (records only on a refused row),
  // then every load; (b) the dot products and the row sums (a shuffle over the row's lanes);
  // (c) the softmax_d and dq_accum stores. Every lane runs every pass: the trip count is the
  // same for all lanes (rows_per_pass divides the tile).
  for (int r_base = t.r_in; r_base < bm; r_base += kPreRowsInFlight * t.rows_per_pass) {
    uint4 a[kPreRowsInFlight], o[kPreRowsInFlight];
#pragma unroll
    for (int j = 0; j < kPreRowsInFlight; ++j) {
      const int r = r_base + j * t.rows_per_pass;
      const int i = row0 + r;
      const bool live = r < bm && i < seg.len_q;
      const uint64_t row = uint64_t(seg.start_q) + uint64_t(i);
      bool ok_do = live && reads_ok, ok_o = live && reads_ok;
      if constexpr (RowChecks) {
        if (ok_do && row >= uint64_t(p.dout.rows)) {
          if (c == 0)
            record_bwd(p, at, p.dout.buffer, AccessKind::read, Unit::rows, int64_t(row), p.dout.rows, int64_t(row), h,
                       m_block, oc::kDotReads, i);
          ok_do = false;
        }
        if (ok_o && row >= uint64_t(p.out.rows)) {
          if (c == 0)
            record_bwd(p, at, p.out.buffer, AccessKind::read, Unit::rows, int64_t(row), p.out.rows, int64_t(row), h,
                       m_block, oc::kDotReads, i | int64_t(order::kValueBit));
          ok_o = false;
        }
      }
      a[j] = make_uint4(0u, 0u, 0u, 0u);
      o[j] = make_uint4(0u, 0u, 0u, 0u);
      if (ok_do && ok_o && t.col_live) {
        a[j] = ldg_nc_v4(dout + (int64_t(row) * p.dout.heads + h) * D + c);
        o[j] = ldg_nc_v4(out + (int64_t(row) * p.out.heads + h) * D + c);
      }
    }
    float acc[kPreRowsInFlight];
#pragma unroll
    for (int j = 0; j < kPreRowsInFlight; ++j) {
      // zeros where the row was not read: its sum is 0, as before
      const T* ae = reinterpret_cast<const T*>(&a[j]);
      const T* oe = reinterpret_cast<const T*>(&o[j]);
      float s = 0.f;
#pragma unroll
      for (int e = 0; e < 8; ++e) s = fmaf(Elem<T>::to_float(ae[e]), Elem<T>::to_float(oe[e]), s);
      acc[j] = s;
    }
#pragma unroll
    for (int j = 0; j < kPreRowsInFlight; ++j)
      for (int off = tpr / 2; off > 0; off >>= 1) acc[j] += __shfl_xor_sync(0xffffffffu, acc[j], off, tpr);
#pragma unroll
    for (int j = 0; j < kPreRowsInFlight; ++j) {
      const int r = r_base + j * t.rows_per_pass;
      if (r >= bm) break;
      const int i = row0 + r;
      const uint64_t row = uint64_t(seg.start_q) + uint64_t(i);
      if (c == 0) {
        const int64_t di = softmax_d_at(p, cu_q_b, b, h, i);
        bool ok = true;
        if constexpr (RowChecks) {
          if (di < 0 || di >= p.softmax_d_size) {
            record_bwd(p, at, Buffer::softmax_d, AccessKind::write, Unit::elements, di, p.softmax_d_size,
                       int64_t(row), h, m_block, oc::kDotSoftmaxD, i);
            ok = false;
          } else if (!fa2::bwd::softmax_d_in_head(p.softmax_d_shape, h, di)) {
            record_bwd(p, at, Buffer::softmax_d, AccessKind::write, Unit::elements, di, p.softmax_d_size,
                       int64_t(row), h, m_block, oc::kDotSoftmaxD, i, 1, Region::head);
            ok = false;
          }
        }
        if (ok) p.softmax_d[di] = acc[j];
      }
      if (p.kernel.deterministic) continue;  // the copies are zeroed by the caller (torch.zeros)
      // clear_dQaccum: row r of the tile; the row's live lanes (D / 8 of them) write its D / 4
      // float4s, lane l the l-th and the (l + D / 8)-th, so that each store instruction's lanes
      // cover whole 32-byte sectors
      const int64_t qi = tile + int64_t(r) * stride;
      bool ok = true;
      if constexpr (RowChecks) {
        const int64_t row_first = tile + int64_t(r) * stride;  // the row's first element: its whole row is one access
        if (row_first < 0 || row_first + p.dq_accum_shape.d_rounded > p.dq_accum_size) {
          if (c == 0)
            record_bwd(p, at, Buffer::dq_accum, AccessKind::write, Unit::elements, row_first, p.dq_accum_size,
                       int64_t(row), h, m_block, oc::kDotClear, i, uint64_t(p.dq_accum_shape.d_rounded));
          ok = false;
        }
      }
      if (ok && t.col_live) {
        float4* z = reinterpret_cast<float4*>(p.dq_accum + qi);
        z[t.lane] = make_float4(0.f, 0.f, 0.f, 0.f);
        z[t.lane + D / 8] = make_float4(0.f, 0.f, 0.f, 0.f);
      }
    }
  }
}

// The checked forms' CTAs per SM (__launch_bounds__; the unchecked forms leave it to ptxas).
// Their record calls, on paths a healthy tile never takes, made ptxas give the kernels 106
// (preprocess) and 133 (conversion) registers, so 4 and 3 CTAs per SM where the unchecked
// forms run 10 and 6. With these bounds they get 56 and 80 registers; the record paths spill
// around their calls, the in-bounds paths not at all (preprocess) or two values reloaded once per
// dq_accum copy (conversion; SASS, sm_90a). Checked against unchecked, per call (ncu, H200, the
// run above): preprocess 89 -> 73 µs against 71, conversion 60 -> 51 µs against 49.
inline constexpr int kCheckedPreCtas = 9, kCheckedConvertCtas = 6;

template <class T, bool Checked>
__global__ void __launch_bounds__(kPreThreads, Checked ? kCheckedPreCtas : 0) varlen_bwd_preprocess_kernel(const __grid_constant__ VarlenBwdParams p) {
  const PreTile t(p);
  if (t.exits()) return;
  const int32_t cu_q_b = p.cu_seqlens_q.data[t.at.y];
  const int64_t tile = dq_accum_tile(p, fa2::bwd::DqKernel::per_tile, cu_q_b, t.at.y, t.at.z, t.at.x, t.at.x, 0);
  if constexpr (Checked) {
    if (p.launch_check && t.at.x == 0 && threadIdx.x == 0) record_keys_left_out(p, t.at, t.seg.start_k, t.seg.len_k);
    if (!pre_tile_in_bounds(p, t, cu_q_b, tile)) return preprocess_tile<T, true>(p, t, cu_q_b, tile);
  }
  preprocess_tile<T, false>(p, t, cu_q_b, tile);
}

// ---------------------------------------------------------------------------------------
// 3. dq = dq_accum * scale over the preprocess grid (convert_dQ: the segment's rows of the
// tile; deterministic: the sum of the copies)

// Whether every access of the conversion's tile lies inside its buffer: its dq_accum rows in
// every copy, the segment's rows in dq (as pre_tile_in_bounds; the per-row tests cost the
// checked conversion about 22 %, 11 µs in the call timed there).
__device__ __forceinline__ bool convert_tile_in_bounds(const VarlenBwdParams& p, const PreTile& t, int32_t cu_q_b) {
  if (!tile_rows_in(t, p.dq.rows)) return false;
  for (int sp = 0; sp < int(p.kernel.nsplits); ++sp)
    if (!dq_tile_in(p, dq_accum_tile(p, fa2::bwd::DqKernel::per_tile, cu_q_b, t.at.y, t.at.z, t.at.x, t.at.x, sp), t.bm))
      return false;
  return true;
}

// The conversion of one tile. RowChecks: each row's accesses tested (recorded and refused when
// outside); Counted (the checked form): each dq row written counted in p.dq_writes.
template <class T, bool Counted, bool RowChecks>
__device__ __forceinline__ void convert_dq_tile(const VarlenBwdParams& p, const PreTile& t, int32_t cu_q_b) {
  const int m_block = t.at.x, b = t.at.y, h = t.at.z, bm = t.bm, row0 = t.row0, D = p.head_dim, c = t.c;
  const Segment& seg = t.seg;
  const Cta& at = t.at;
  const int64_t stride = dq_row_stride(p);
  const int splits = int(p.kernel.nsplits);
  T* dq = static_cast<T*>(p.dq.data);
  if constexpr (RowChecks) {
    // a tile wholly past dq (a segment running past it): recorded at once, its dq_accum reads
    // (every row of the tile, each copy) as one record per copy from the first refused row
    const uint64_t first = uint64_t(seg.start_q) + uint64_t(row0);
    if (first >= uint64_t(p.dq.rows)) {
      if (threadIdx.x == 0) {
        const int64_t dr = p.dq_accum_shape.d_rounded;
        for (int sp = 0; sp < splits; ++sp) {
          const int64_t t0 = dq_accum_tile(p, fa2::bwd::DqKernel::per_tile, cu_q_b, b, h, m_block, m_block, sp);
          int64_t n = 0, r_first = -1;
          for (int r = 0; r < bm; ++r) {
            const int64_t e0 = t0 + int64_t(r) * stride;
            if (e0 >= 0 && e0 + dr <= p.dq_accum_size) continue;
            if (r_first < 0) r_first = r;
            ++n;
          }
          if (n > 0)
            record_bwd(p, at, Buffer::dq_accum, AccessKind::read, Unit::elements, t0 + r_first * stride,
                       p.dq_accum_size, int64_t(first) + r_first, h, m_block, oc::kConvertRead, row0 + r_first,
                       uint64_t(n * dr));
        }
        record_bwd(p, at, p.dq.buffer, AccessKind::write, Unit::rows, int64_t(first), p.dq.rows, int64_t(first), h,
                   m_block, oc::kConvertWrite, row0, uint64_t(min(bm, seg.len_q - row0)));
      }
      return;
    }
  }
  if (!t.col_live) return;  // no shuffle below: a lane past the row has nothing to do
  // Rows in chunks of kPreRowsInFlight per thread: for each copy, the dq_accum loads of every
  // row of the chunk (2 x 16 bytes each) are issued before they are summed, and the dq stores
  // come after all of them (no store between loads that the compiler must order them against).
  for (int r_base = t.r_in; r_base < bm; r_base += kPreRowsInFlight * t.rows_per_pass) {
    float v[kPreRowsInFlight][8];
#pragma unroll
    for (int j = 0; j < kPreRowsInFlight; ++j)
#pragma unroll
      for (int e = 0; e < 8; ++e) v[j][e] = 0.f;
    for (int sp = 0; sp < splits; ++sp) {
      const int64_t t0 = dq_accum_tile(p, fa2::bwd::DqKernel::per_tile, cu_q_b, b, h, m_block, m_block, sp);
      float4 x[kPreRowsInFlight], y[kPreRowsInFlight];
#pragma unroll
      for (int j = 0; j < kPreRowsInFlight; ++j) {
        const int r = r_base + j * t.rows_per_pass;
        x[j] = make_float4(0.f, 0.f, 0.f, 0.f);
        y[j] = x[j];
        if (r >= bm) continue;
        const int i = row0 + r;
        // FA2 reads the whole tile of dq_accum (unpredicated) and writes the segment's rows
        const bool live = i < seg.len_q;
        const uint64_t row = uint64_t(seg.start_q) + uint64_t(i);
        const int64_t row_first = t0 + int64_t(r) * stride;
        if constexpr (RowChecks) {
          if (row_first < 0 || row_first + p.dq_accum_shape.d_rounded > p.dq_accum_size) {
            if (c == 0)
              record_bwd(p, at, Buffer::dq_accum, AccessKind::read, Unit::elements, row_first, p.dq_accum_size,
                         int64_t(row), h, m_block, oc::kConvertRead, i, uint64_t(p.dq_accum_shape.d_rounded));
            continue;
          }
        }
        if (!live) continue;  // the value of a row past the segment is not used
        const float4* a = reinterpret_cast<const float4*>(p.dq_accum + row_first + c);
        x[j] = __ldg(a);
        y[j] = __ldg(a + 1);
      }
#pragma unroll
      for (int j = 0; j < kPreRowsInFlight; ++j) {
        v[j][0] += x[j].x, v[j][1] += x[j].y, v[j][2] += x[j].z, v[j][3] += x[j].w;
        v[j][4] += y[j].x, v[j][5] += y[j].y, v[j][6] += y[j].z, v[j][7] += y[j].w;
      }
    }
#pragma unroll
    for (int j = 0; j < kPreRowsInFlight; ++j) {
      const int r = r_base + j * t.rows_per_pass;
      if (r >= bm) break;
      const int i = row0 + r;
      if (i >= seg.len_q) continue;
      const uint64_t row = uint64_t(seg.start_q) + uint64_t(i);
      if constexpr (RowChecks) {
        if (row >= uint64_t(p.dq.rows)) {
          if (c == 0)
            record_bwd(p, at, p.dq.buffer, AccessKind::write, Unit::rows, int64_t(row), p.dq.rows, int64_t(row), h,
                       m_block, oc::kConvertWrite, i);
          continue;
        }
      }
      if constexpr (Counted) {
        if (c == 0 && h == 0 && p.dq_writes != nullptr && row < uint64_t(p.dq_writes_size))
          atomicAdd(p.dq_writes + row, 1u);
      }
      uint4 o;
      uint32_t* ow = reinterpret_cast<uint32_t*>(&o);
#pragma unroll
      for (int e = 0; e < 4; ++e)
        ow[e] = Elem<T>::pack(v[j][2 * e] * p.softmax_scale, v[j][2 * e + 1] * p.softmax_scale);
      *reinterpret_cast<uint4*>(dq + (int64_t(row) * p.dq.heads + h) * D + c) = o;
    }
  }
}

template <class T, bool Checked>
__global__ void __launch_bounds__(kPreThreads, Checked ? kCheckedConvertCtas : 0) varlen_bwd_convert_dq_kernel(const __grid_constant__ VarlenBwdParams p) {
  const PreTile t(p);
  if (t.exits()) return;
  const int32_t cu_q_b = p.cu_seqlens_q.data[t.at.y];
  if constexpr (Checked) {
    if (!convert_tile_in_bounds(p, t, cu_q_b)) return convert_dq_tile<T, true, true>(p, t, cu_q_b);
    return convert_dq_tile<T, true, false>(p, t, cu_q_b);
  }
  convert_dq_tile<T, false, false>(p, t, cu_q_b);
}

// dk_out[r, hk, :] = sum over the group of dk[r, hk * G + g, :] (and dv), fp32 sums rounded
// once (at::sum over the expanded tensors). Rows [0, rows): the expanded tensors' own rows.
// Two forms, the same sums in the same order (bit-identical): 16-byte pieces of 8 columns when
// the four tensors are 16-byte aligned (head dims are multiples of 8), a thread's G loads
// issued four at a time before their sums; else one element a thread.
inline constexpr int kGroupSumThreads = 256;
template <class T>
__global__ void __launch_bounds__(kGroupSumThreads) varlen_bwd_group_sum_v8_kernel(const VarlenBwdParams p) {
  const int G = p.num_heads / p.num_heads_k;
  const int D8 = p.head_dim / 8;
  const int64_t n = p.dk.rows * p.num_heads_k * D8;  // 8-column pieces of one output tensor
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < 2 * n; e += int64_t(gridDim.x) * blockDim.x) {
    const bool is_v = e >= n;
    const int64_t x = is_v ? e - n : e;
    const int64_t r = x / (int64_t(p.num_heads_k) * D8), hk = (x / D8) % p.num_heads_k, d8 = x % D8;
    const uint4* src = static_cast<const uint4*>(is_v ? p.dv.data : p.dk.data) + (r * p.num_heads + hk * G) * D8 + d8;
    float s[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) s[k] = 0.f;
    int g = 0;
    for (; g + 4 <= G; g += 4) {
      uint4 u[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) u[j] = __ldg(src + int64_t(g + j) * D8);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const T* ue = reinterpret_cast<const T*>(&u[j]);
#pragma unroll
        for (int k = 0; k < 8; ++k) s[k] += Elem<T>::to_float(ue[k]);
      }
    }
    for (; g < G; ++g) {
      const uint4 u = __ldg(src + int64_t(g) * D8);
      const T* ue = reinterpret_cast<const T*>(&u);
#pragma unroll
      for (int k = 0; k < 8; ++k) s[k] += Elem<T>::to_float(ue[k]);
    }
    uint4 o;
    uint32_t* ow = reinterpret_cast<uint32_t*>(&o);
#pragma unroll
    for (int k = 0; k < 4; ++k) ow[k] = Elem<T>::pack(s[2 * k], s[2 * k + 1]);
    static_cast<uint4*>(is_v ? p.dv_out : p.dk_out)[x] = o;
  }
}
template <class T>
__global__ void varlen_bwd_group_sum_kernel(const VarlenBwdParams p) {
  const int G = p.num_heads / p.num_heads_k;
  const int D = p.head_dim;
  const int64_t n = p.dk.rows * p.num_heads_k * D;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < 2 * n; e += int64_t(gridDim.x) * blockDim.x) {
    const bool is_v = e >= n;
    const int64_t x = is_v ? e - n : e;
    const int64_t r = x / (int64_t(p.num_heads_k) * D), hk = (x / D) % p.num_heads_k, d = x % D;
    const T* src = static_cast<const T*>(is_v ? p.dv.data : p.dk.data);
    float s = 0.f;
    for (int g = 0; g < G; ++g) s += Elem<T>::to_float(src[(r * p.num_heads + hk * G + g) * D + d]);
    static_cast<T*>(is_v ? p.dv_out : p.dk_out)[x] = Elem<T>::from_float(s);
  }
}

}  // namespace ad::kern::bwd
