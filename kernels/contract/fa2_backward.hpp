// FA2's varlen backward as the checked kernels reproduce it: one small function per decision
// the real kernels (and mha_varlen_bwd on the host) make. The CPU twin
// (lib/exec/cpu/cpu_backward.cpp), the static check of 32-bit offsets (lib/check/checks_input.cpp)
// and the CUDA backward kernels call these definitions, so they agree by construction.
//
// Sources (read, not copied), Dao-AILab/flash-attention, v2.8.3 unless said otherwise; the
// releases differ only where a function below takes a `Release`:
//   csrc/flash_attn/flash_api.cpp                mha_varlen_bwd: head_size_rounded, the windows,
//                                                dq_accum / softmax_d shapes, dk/dv_expanded for
//                                                GQA summed over the group after the launch
//   csrc/flash_attn/src/flash_bwd_launch_template.h  run_flash_bwd_seqk_parallel: three launches
//                                                (dot_do_o, dq_dk_dv, convert_dQ), their grids,
//                                                and the tile per head dim (run_mha_bwd_hdim*)
//   csrc/flash_attn/src/flash_bwd_preprocess_kernel.h  compute_dot_do_o, convert_dQ
//   csrc/flash_attn/src/flash_bwd_kernel.h       compute_dq_dk_dv_1colblock, _seqk_parallel
//   csrc/flash_attn/src/block_info.h             q_offset: uint32(cu_seqlens_q[b]) x row_stride
//                                                in the type of the strides passed
//
// The three launches of one backward (non-deterministic unless said):
//   1. dot_do_o   grid (ceil(max_seqlen_q / kBlockM), N, H). CTA (m, b, h) exits when
//                 m x kBlockM >= len_q; else reads dO and O rows [m kBlockM, +kBlockM) of the
//                 segment (predicated by len_q: rows past it read 0), writes softmax_d =
//                 rowsum(dO * O) for all kBlockM rows (unpredicated: the rows past the segment
//                 get 0), and zero-fills its kBlockM x d_rounded tile of dq_accum (unpredicated).
//                 Deterministic: dq_accum is torch.zeros instead and the kernel does not clear.
//   2. dq_dk_dv   grid (X, N, H) with X = ceil(max_seqlen_k / kBlockN), or X = nsplits when
//                 deterministic; CTA (x, b, h) runs key blocks n = x, x + X, ... below
//                 ceil(max_seqlen_k / kBlockN) (key_block_range below); per key block: k and v
//                 rows (predicated by len_k), then for m from m_max - 1 down to m_min: q, dO rows
//                 (predicated by len_q), LSE (rows past len_q read +inf), softmax_d (all kBlockM
//                 rows), and an unpredicated atomicAdd of the kBlockM x d_rounded dq tile into
//                 dq_accum (split x when deterministic); at the end dk, dv rows (predicated by
//                 len_k) into dk/dv, or dk/dv_expanded (total_k, H, d) under GQA.
//   3. convert_dQ grid as dot_do_o; CTA (m, b, h) exits when m x kBlockM >= len_q; reads its
//                 dq_accum tile (every split), scales it by the softmax scale, converts to the
//                 dtype and writes dq rows (predicated by len_q).
// Rows of a segment past ceil(max_seqlen_q / kBlockM) x kBlockM are therefore accumulated by
// dq_dk_dv (whose m range comes from the actual length) into a tile nobody cleared (dq_accum is
// torch.empty), use a softmax_d nobody wrote, and are never converted: dq keeps torch.empty's
// contents, and dk/dv of the keys they see are wrong too. Keys past ceil(max_seqlen_k /
// kBlockN) x kBlockN are never visited: their dk/dv rows are never written and dq misses them.
// Gradient rows of q/k past cu_seqlens[-1] are never written (torch.empty_like: garbage, NaN
// reported in Dao-AILab/flash-attention#1661 and pytorch/pytorch#176793).
#pragma once

#include <cmath>
#include <cstdint>

#include "contract/fa2_forward.hpp"
#include "contract/host_device.hpp"
#include "contract/launch_order.hpp"

namespace ad::fa2::bwd {

// ---------------------------------------------------------------------------------------
// what differs between releases

// How the dq_accum row offset of a varlen segment is computed (row_offset_dq_accum in
// flash_bwd_kernel.h and flash_bwd_preprocess_kernel.h):
//  int32_sum    v2.5.0 - v2.7.4: q_offset(int, int) = uint32(cu_q[b]) x (H x d_rounded) in 32
//               bits, plus ((m_block x kBlockM + 128 x b) x H x d_rounded + h x d_rounded) in
//               int: the whole sum wraps at 2^32 and is sign-extended to 64 bits.
//  int32_start  v2.8.0 - v2.8.3 (Dao-AILab/flash-attention#1500: 128ll x b): the start term
//               still wraps (q_offset with int strides), the tile term is 64-bit.
//  int64        Dao-AILab/flash-attention#2260 (on main after v2.8.3; v2.8.3.post1 was cut
//               without it): 64-bit strides, no wrap. A release after 2.8.3 is taken to
//               carry it.
enum class DqOffset : int32_t { int32_sum = 0, int32_start = 1, int64 = 2 };

// head_size_rounded in mha_varlen_bwd (the dq_accum column count per head, = kHeadDim):
//  v2.5.0 - v2.6.1 round_multiple(d, 32) (kHeadDim 224 exists)
//  v2.6.2 - v2.7.4 d <= 192 ? round_multiple(d, 32) : 256
//  v2.8.0 -        round_multiple(d, d <= 128 ? 32 : 64) (no kHeadDim 160)
enum class HeadRounding : int32_t { multiple_32 = 0, multiple_32_to_256 = 1, multiple_32_or_64 = 2 };

struct Release {
  LseLayout lse = LseLayout::unpadded;  // softmax_lse and softmax_d: padded before 2.6.0
  DqOffset dq_offset = DqOffset::int32_start;
  HeadRounding rounding = HeadRounding::multiple_32_or_64;
};

// The rules of flash-attn 2.<minor>.<patch> (a release before 2.5 gets 2.5's; a newer one
// the newest).
AD_HD Release release_rules(int major, int minor, int patch) {
  Release r;
  const int v = major != 2 ? (major < 2 ? 0 : 999999) : minor * 1000 + patch;  // 2.m.p as m*1000+p
  r.lse = v < 6000 ? LseLayout::padded : LseLayout::unpadded;
  r.dq_offset = v < 8000 ? DqOffset::int32_sum : v <= 8003 ? DqOffset::int32_start : DqOffset::int64;
  r.rounding = v < 6002 ? HeadRounding::multiple_32 : v < 8000 ? HeadRounding::multiple_32_to_256
                                                                : HeadRounding::multiple_32_or_64;
  return r;
}

// ---------------------------------------------------------------------------------------
// tile sizes

// `head_dim` is the user's head dim (the Python wrapper pads it to a multiple of 8 first).
AD_HD int64_t head_dim_rounded(const Release& r, int64_t head_dim) {
  const int64_t d = (head_dim + 7) / 8 * 8;
  switch (r.rounding) {
    case HeadRounding::multiple_32: return (d + 31) / 32 * 32;
    case HeadRounding::multiple_32_to_256: return d <= 192 ? (d + 31) / 32 * 32 : 256;
    default: return d <= 128 ? (d + 31) / 32 * 32 : (d + 63) / 64 * 64;
  }
}

struct Tile {
  int head_dim_rounded;  // kHeadDim (= head_size_rounded, the dq_accum columns per head)
  int block_m;           // kBlockM: query rows per m block
  int block_n;           // kBlockN: keys per CTA iteration
};

// run_mha_bwd_hdim{32..256} (v2.5.0 - v2.8.3) on an A100 or H100 (at least 144 KB of shared
// memory per block, so the same choice on sm80 and sm90): 32 and 64 run 128 x 128, 96 and 128
// run 64 x 128, 160 / 192 / 224 / 256 run 64 x 64.
AD_HD Tile tile_for(const Release& r, int64_t head_dim) {
  const int hd = static_cast<int>(head_dim_rounded(r, head_dim));
  if (hd <= 64) return {hd, 128, 128};
  if (hd <= 128) return {hd, 64, 128};
  return {hd, 64, 64};
}

// SMs of the GPU (get_num_sm): the deterministic grid depends on it.
AD_HD int num_sm(GpuArch arch) { return arch == GpuArch::sm80 ? 108 : 132; }

// ---------------------------------------------------------------------------------------
// the host's adjustments (mha_varlen_bwd, then set_params_dgrad -> set_params_fprop)

struct Call {
  int64_t max_seqlen_q = 0, max_seqlen_k = 0;
  int64_t num_heads = 0, num_heads_k = 0;
  int64_t head_dim = 0;
  int64_t num_segments = 0;  // batch_size = cu_seqlens_q.numel() - 1
  bool causal = false;
  int64_t window_left = -1, window_right = -1;
  bool deterministic = false;
  GpuArch arch = GpuArch::sm90;
};

// Unlike the forward, the backward neither drops causal for max_seqlen_q == 1 nor takes the
// swapped single-query path: causal sets window_right = 0, windows not smaller than
// max_seqlen_k become unlimited, then set_params_fprop's rules (fa2::normalize).
struct Normalized {
  Flags flags;            // causal/local/windows with the backward's kBlockM / kBlockN
  Tile tile;
  int64_t ngroups = 1;    // H / Hk (dk and dv are summed over it)
  int64_t grid_m = 0;     // dot_do_o / convert_dQ: ceil(max_seqlen_q / kBlockM)
  int64_t n_blocks = 0;   // key blocks: ceil(max_seqlen_k / kBlockN)
  int64_t grid_x = 0;     // dq_dk_dv CTAs along x: n_blocks, or nsplits when deterministic
  int64_t nsplits = 1;    // dq_accum copies: 1, or ceil(num_sm / (N x H)) when deterministic
  bool deterministic = false;
  bool launches = true;   // max_seqlen_q > 0; else dk/dv are zero-filled and nothing runs
};
AD_HD Normalized normalize(const Release& r, const Call& c) {
  Normalized n;
  int64_t wl = c.window_left, wr = c.window_right;
  if (c.causal) wr = 0;
  if (wl >= c.max_seqlen_k) wl = -1;
  if (wr >= c.max_seqlen_k) wr = -1;
  const bool causal = wl < 0 && wr == 0;
  if (wl < 0 && wr >= 0) wl = c.max_seqlen_k;
  if (wl >= 0 && wr < 0) wr = c.max_seqlen_k;
  n.tile = tile_for(r, c.head_dim);
  n.flags.causal = causal;
  n.flags.local = (wl >= 0 || wr >= 0) && !causal;
  n.flags.window_left = static_cast<int32_t>(wl);
  n.flags.window_right = static_cast<int32_t>(wr);
  n.flags.block_m = n.tile.block_m;
  n.flags.block_n = n.tile.block_n;
  n.ngroups = c.num_heads_k > 0 && c.num_heads / c.num_heads_k > 1 ? c.num_heads / c.num_heads_k : 1;
  n.grid_m = ceil_div(c.max_seqlen_q, n.tile.block_m);
  n.n_blocks = ceil_div(c.max_seqlen_k, n.tile.block_n);
  n.deterministic = c.deterministic;
  const int64_t bh = c.num_segments * c.num_heads;
  n.nsplits = c.deterministic && bh > 0 ? ceil_div(num_sm(c.arch), bh) : 1;
  n.grid_x = c.deterministic ? n.nsplits : n.n_blocks;
  n.launches = c.max_seqlen_q > 0;
  return n;
}

// ---------------------------------------------------------------------------------------
// one m block of dot_do_o / convert_dQ: CTA (m, b, h)

struct QTile {
  bool exits;         // m x kBlockM >= len_q
  int64_t row_begin;  // rows of the segment it reads / writes (predicated): [row_begin, row_end)
  int64_t row_end;    // the unpredicated dq_accum / softmax_d accesses cover kBlockM rows
};
AD_HD QTile q_tile(int64_t m_block, int32_t len_q, int block_m) {
  QTile t{};
  t.exits = m_block * block_m >= int64_t(len_q);
  if (t.exits) return t;
  t.row_begin = m_block * block_m;
  t.row_end = (m_block + 1) * block_m < int64_t(len_q) ? (m_block + 1) * block_m : int64_t(len_q);
  return t;
}

// ---------------------------------------------------------------------------------------
// one key block of dq_dk_dv: block n of segment b, head h

struct KeyBlockRange {
  bool exits;          // n x kBlockN >= len_k: nothing read or written
  bool empty;          // m_max - 1 < m_min: dk, dv rows written as 0, no q block visited
  int64_t m_min;       // m blocks visited: from m_max - 1 down to m_min
  int64_t m_max;
  int64_t key_begin;   // keys of the segment read and whose dk/dv rows are written
  int64_t key_end;
};
// compute_dq_dk_dv_1colblock's prologue: m_max = ceil(len_q / kBlockM), with a window
// limited to ceil(((n + 1) kBlockN + len_q - len_k + window_left) / kBlockM); m_min = 0, or
// max(0, (n kBlockN + len_q - len_k - window_right) / kBlockM) (C division) when causal or
// local (causal's window_right is 0). Varlen is never Is_even_MN, so the empty exit is taken.
AD_HD KeyBlockRange key_block_range(int64_t n_block, int32_t len_q, int32_t len_k, const Flags& f) {
  KeyBlockRange r{};
  const int64_t bm = f.block_m, bn = f.block_n;
  r.exits = n_block * bn >= int64_t(len_k);
  if (r.exits) return r;
  r.key_begin = n_block * bn;
  r.key_end = (n_block + 1) * bn < int64_t(len_k) ? (n_block + 1) * bn : int64_t(len_k);
  r.m_max = ceil_div(len_q, bm);
  if (f.local) {
    const int64_t lim = ceil_div((n_block + 1) * bn + int64_t(len_q) - len_k + f.window_left, bm);
    if (lim < r.m_max) r.m_max = lim;
  }
  r.m_min = 0;
  if (f.causal || f.local) {
    const int64_t v = (n_block * bn + int64_t(len_q) - len_k - (f.causal ? 0 : f.window_right)) / bm;
    r.m_min = v > 0 ? v : 0;
  }
  r.empty = r.m_max - 1 < r.m_min;
  return r;
}

// The launch check of a backward (what attn_doctor.ops runs; not part of FA2): key rows of
// segment b that the launch leaves out of the gradients while the forward used them, or
// the reverse. Two rules, the CPU twin (lib/exec/cpu/direct.cpp) and the checked CUDA
// preprocess kernel (kernels/varlen_attention_bwd.cuh) call both:
//  - keys_past_grid: dq_dk_dv's grid covers ceil(max_seqlen_k / kBlockN) key blocks, so the
//    keys of a longer segment past n_blocks x kBlockN are never visited (their dk/dv rows are
//    not written, dq misses them) while the forward, whose key range comes from the segment,
//    used them;
//  - keys_past_seqused: mha_varlen_bwd takes no seqused_k, so the backward runs the segment's
//    len_k keys where the forward ran seqused_k[b] (flash_api.cpp mha_varlen_fwd / mha_varlen_bwd,
//    block_info.h actual_seqlen_k): the keys between them enter one pass and not the other.
// first: the first such key of the segment (-1: none); count: how many.
struct KeysLeftOut {
  int64_t first = -1, count = 0;
};
AD_HD KeysLeftOut keys_past_grid(int32_t len_k, int64_t n_blocks, int32_t block_n) {
  const int64_t covered = n_blocks * int64_t(block_n);
  if (int64_t(len_k) <= covered) return {};
  return {covered, int64_t(len_k) - covered};
}
AD_HD KeysLeftOut keys_past_seqused(int32_t len_k, int32_t used) {
  if (used == len_k || (used <= 0 && len_k <= 0)) return {};
  const int64_t lo = used < len_k ? (used > 0 ? used : 0) : (len_k > 0 ? len_k : 0);
  const int64_t hi = used < len_k ? len_k : used;
  return {lo, hi - lo};
}

// The key blocks CTA x of dq_dk_dv runs, in order: n = x, x + grid_x, ... < n_blocks. Its
// split of dq_accum (deterministic) is x.
AD_HD int64_t split_of(int64_t n_block, const Normalized& n) { return n.deterministic ? n_block % n.grid_x : 0; }

// The key/value head query head h reads (and whose dk/dv it adds to).
AD_HD int64_t kv_head(int64_t h, int64_t ngroups) { return h / ngroups; }

// ---------------------------------------------------------------------------------------
// buffers and their offsets

// dq_accum: (nsplits, total_q + 128 N, H, d_rounded) fp32. Segment b's rows start at
// cu_q[b] + 128 b, so a tile's unpredicated kBlockM rows stay clear of the next segment.
struct DqAccumShape {
  int64_t total_q = 0, num_segments = 0, num_heads = 0, d_rounded = 0, nsplits = 1;
  AD_HD int64_t row_stride() const { return num_heads * d_rounded; }  // elements per row
  AD_HD int64_t rows() const { return total_q + 128 * num_segments; }
  AD_HD int64_t split_stride() const { return rows() * row_stride(); }
  AD_HD int64_t elements() const { return nsplits * split_stride(); }
};

// The element offset of dq_accum element (row 0, column 0) of the tile of m block `m_block` of
// segment b, head h, split s, in 64 bits: what the arithmetic means (Dao-AILab/flash-attention
// #2260's form).
AD_HD int64_t dq_accum_offset_intended(const DqAccumShape& a, int32_t cu_q_b, int64_t b, int64_t h, int64_t m_block,
                                       int block_m, int64_t split) {
  return int64_t(uint32_t(cu_q_b)) * a.row_stride() + (m_block * block_m + 128 * b) * a.row_stride() +
         h * a.d_rounded + split * a.split_stride();
}

// Which launch computes the offset: dot_do_o and convert_dQ compute it for their own m block;
// dq_dk_dv computes it once for m_max - 1 and steps the pointer back by kBlockM rows (in 64-bit
// pointer arithmetic) for each lower m block.
enum class DqKernel : int32_t { per_tile = 0, dq_dk_dv = 1 };

// The same offset as the release computes it. `m_top` is the m block the offset is computed
// for (dq_dk_dv: m_max - 1; per_tile: m_block).
AD_HD int64_t dq_accum_offset(DqOffset rule, DqKernel kernel, const DqAccumShape& a, int32_t cu_q_b, int64_t b,
                              int64_t h, int64_t m_block, int64_t m_top, int block_m, int64_t split) {
  const int64_t top = kernel == DqKernel::dq_dk_dv ? m_top : m_block;
  const int64_t step_back = (top - m_block) * block_m * a.row_stride();
  const int64_t split_term = split * a.split_stride();  // 64-bit in every release
  const uint32_t stride32 = uint32_t(a.row_stride());
  const uint32_t start32 = uint32_t(cu_q_b) * stride32;  // q_offset with int strides: wraps at 2^32
  switch (rule) {
    case DqOffset::int32_sum: {
      const uint32_t tile32 = (uint32_t(top) * uint32_t(block_m) + 128u * uint32_t(b)) * stride32;
      const uint32_t sum = start32 + tile32 + uint32_t(h) * uint32_t(a.d_rounded);
      return int64_t(int32_t(sum)) - step_back + split_term;
    }
    case DqOffset::int32_start:
      return int64_t(int32_t(start32)) + (top * block_m + 128 * b) * a.row_stride() + h * a.d_rounded - step_back +
             split_term;
    default:
      return dq_accum_offset_intended(a, cu_q_b, b, h, m_block, block_m, split);
  }
}

// The first row of q whose segment start makes the 32-bit start term wrap:
// ceil(2^31 / (H x d_rounded)). Segments starting at or past it get a wrong dq_accum offset
// under int32_sum and int32_start.
AD_HD int64_t first_wrapping_row(const DqAccumShape& a) {
  const int64_t s = a.row_stride() > 0 ? a.row_stride() : 1;
  return ceil_div(int64_t{1} << 31, s);
}

// softmax_d (dsoftmax_sum), fp32: unpadded (H, total_q + 128 N) from 2.6.0, its offset
// h x (total_q + 128 N) + uint32(cu_q[b]) + 128 b + row computed in int; padded
// (N, H, seqlen_q_rounded) before, seqlen_q_rounded = round_multiple(max_seqlen_q, 128).
struct SoftmaxDShape {
  LseLayout layout = LseLayout::unpadded;
  int64_t total_q = 0, num_segments = 0, num_heads = 0, max_seqlen_q = 0;
  AD_HD int64_t seqlen_q_rounded() const { return (max_seqlen_q + 127) / 128 * 128; }
  AD_HD int64_t elements() const {
    return layout == LseLayout::unpadded ? num_heads * (total_q + 128 * num_segments)
                                         : num_segments * num_heads * seqlen_q_rounded();
  }
};
// Element of row `i` of segment b (i may pass the segment: the tile's unpredicated rows).
AD_HD int64_t softmax_d_index(const SoftmaxDShape& s, int32_t cu_q_b, int64_t b, int64_t h, int64_t i) {
  if (s.layout == LseLayout::padded) return (b * s.num_heads + h) * s.seqlen_q_rounded() + i;
  const uint32_t sum = uint32_t(h) * uint32_t(s.total_q + 128 * s.num_segments) + uint32_t(cu_q_b) + 128u * uint32_t(b) +
                       uint32_t(i);
  return int64_t(int32_t(sum));
}

// Whether element `idx` of softmax_d lies in head h's part. Unpadded, a head owns its
// (total_q + 128 N) elements; a segment that runs past the rows (cu_seqlens_q[-1] > total_q)
// carries its rows into the next head's part, whose own CTAs write the same elements in the
// same launch: a race whose winner the hardware picks. Such a write is refused (recorded,
// not performed) like one outside the buffer, so both engines keep the owner's value. Padded,
// a segment's rows never leave its (max_seqlen_q rounded) stride.
AD_HD bool softmax_d_in_head(const SoftmaxDShape& s, int64_t h, int64_t idx) {
  if (s.layout == LseLayout::padded) return true;
  const int64_t part = s.total_q + 128 * s.num_segments;
  return idx >= h * part && idx < (h + 1) * part;
}

// The LSE the backward reads is the forward's (fa2::lse_index, never swapped here); rows
// past len_q read +inf instead (no access).

// ---------------------------------------------------------------------------------------
// the gradient of one score

// d score / d s for the raw product s = q . k: the softmax scale, or with softcap c the
// derivative of c tanh(s scale / c): scale (1 - tanh^2) (calculate_dtanh in the kernel;
// set_params_fprop passes scale / c and c as the kernel's softcap and softmax scale).
AD_HD double dscore(double s, double scale, double softcap) {
  if (softcap <= 0.0) return scale;
  const double t = tanh(s * scale / softcap);
  return scale * (1.0 - t * t);
}

// ---------------------------------------------------------------------------------------
// launch order (contract/launch_order.hpp): one record per launch; the classes of each

namespace order_class {
// dot_do_o, CTA (m, b, h) of grid (grid_m, N, H): sub = row of the segment (O reads | kValueBit)
inline constexpr uint32_t kDotReads = order::kRead;         // dO, O
inline constexpr uint32_t kDotSoftmaxD = order::kOutWrite;  // softmax_d writes
inline constexpr uint32_t kDotClear = order::kLseWrite;     // dq_accum zero-fill
// dq_dk_dv, CTA (x, b, h) of grid (grid_x, N, H): sub = key row (v, dv | kValueBit) or query row
inline constexpr uint32_t kMainQueryReads = order::kRead;   // q, dO, LSE, softmax_d
inline constexpr uint32_t kMainKeyReads = order::kKeyRead;  // k, v
inline constexpr uint32_t kMainDqAccum = order::kOutWrite;  // dq_accum atomicAdd
inline constexpr uint32_t kMainDkDv = order::kLseWrite;     // dk, dv writes
// convert_dQ, CTA (m, b, h) of grid (grid_m, N, H): sub = row of the segment
inline constexpr uint32_t kConvertRead = order::kRead;      // dq_accum
inline constexpr uint32_t kConvertWrite = order::kOutWrite; // dq
// the launch check of dot_do_o's CTA (0, b, h) (keys_past_grid, keys_past_seqused): class
// kDotReads, after every row's reads
inline constexpr int64_t kLaunchCheckGrid = int64_t(order::kValueBit) - 2;
inline constexpr int64_t kLaunchCheckSeqused = int64_t(order::kValueBit) - 1;
}  // namespace order_class

}  // namespace ad::fa2::bwd
