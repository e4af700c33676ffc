// FA2's varlen forward as the checked kernels reproduce it: one small function per decision
// the real kernel (and its host code) makes. The CPU twin (lib/exec/cpu/cpu_attention.cpp), the
// plan (lib/exec/plan/plan.cpp) and the CUDA kernels (kernels/varlen_attention*, sm90a/) call
// these definitions, so the backends agree by construction and a CPU test of a rule tests
// what the kernels run.
//
// Sources (read, not copied), Dao-AILab/flash-attention v2.6.3 unless said otherwise:
//   csrc/flash_attn/flash_api.cpp          mha_varlen_fwd: host adjustments, the swapped path
//                                           (same order in v2.5.0 through v2.8.3)
//   csrc/flash_attn/src/flash_fwd_launch_template.h  tile sizes per head dim, grid
//   csrc/flash_attn/src/flash_fwd_kernel.h compute_attn_1rowblock: exits, n-block range
//   csrc/flash_attn/src/block_info.h       unsigned 32-bit row offsets
//   csrc/flash_attn/src/mask.h             causal / local limits
//   csrc/flash_attn/src/softmax.h          empty row -> 0 output, +inf LSE
#pragma once

#include <cstdint>

#include "contract/host_device.hpp"

namespace ad::fa2 {

// ---------------------------------------------------------------------------------------
// integers as the kernel computes them

// cute::ceil_div on ints: (a + b - 1) / b with C truncation (so a <= 0 gives <= 0).
AD_HD int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// An int32 difference as the kernel computes it (wraps instead of overflowing).
AD_HD int32_t wrap_sub(int32_t a, int32_t b) { return int32_t(uint32_t(a) - uint32_t(b)); }

// BlockInfo::q_offset / k_offset in the varlen case: the start is converted to uint32 before
// the multiplication by the row stride in 64 bits, so a negative start becomes a huge row.
AD_HD int64_t row_offset(int32_t start) { return int64_t(uint32_t(start)); }

// ---------------------------------------------------------------------------------------
// tile sizes

// GPU generation whose tile choice is reproduced (the choice differs for head dims 96-160 on
// sm86/sm89 and for 256 between A100 and H100).
enum class GpuArch : uint8_t { sm80, sm90 };

struct Tile {
  int head_dim_rounded;  // kHeadDim of the compiled kernel (HEADDIM_SWITCH)
  int block_m;           // kBlockM: query rows per CTA
  int block_n;           // kBlockN: keys per inner iteration
};

// run_mha_fwd_hdim{32..256} in flash_fwd_launch_template.h (v2.6.x-v2.8.x). `head_dim` is
// the user's head dim; the host rounds it up to a multiple of 8 and dispatches on that.
AD_HD Tile tile_for(int head_dim, bool dropout, GpuArch arch) {
  const int d8 = (head_dim + 7) / 8 * 8;
  const int hd = d8 <= 32 ? 32 : d8 <= 64 ? 64 : d8 <= 96 ? 96 : d8 <= 128 ? 128 : d8 <= 160 ? 160 : d8 <= 192 ? 192 : 256;
  switch (hd) {
    case 32: return {32, 128, 128};
    case 64: return dropout ? Tile{64, 128, 64} : Tile{64, 128, 128};
    case 96: return {96, 128, 64};
    case 128: return dropout ? Tile{128, 128, 32} : Tile{128, 128, 64};
    case 160: return {160, 128, 32};
    case 192: return dropout ? Tile{192, 64, 64} : Tile{192, 128, 64};
    default:  // 256: 128 x 64 where two CTAs do not fit one SM (A100), else 64 x 64 (H100)
      return arch == GpuArch::sm80 ? Tile{256, 128, 64} : Tile{256, 64, 64};
  }
}

// ---------------------------------------------------------------------------------------
// the host's adjustments (mha_varlen_fwd, then set_params_fprop)

struct Call {
  int64_t max_seqlen_q = 0, max_seqlen_k = 0;
  int64_t num_heads = 0, num_heads_k = 0;
  int64_t head_dim = 0;               // head_size_og: the user's head dim
  bool causal = false;
  int64_t window_left = -1, window_right = -1;  // as passed (-1: unlimited)
  bool dropout = false;
  int family = 2;                     // 3: FA3's host adjustments (hopper/flash_api.cpp mha_fwd);
                                      // 4: FA4's (flash_attn/cute/interface.py)
  bool fa4_literal_windows = false;   // FA4 4.0.0b30 onward: only both sides negative is no window,
                                      // any other pair is taken as passed (normalize_fa4)
  int64_t attention_chunk = 0;        // FA3's attention_chunk (normalize_fa3; 0: none)
};

// The call the kernel runs.
struct Normalized {
  bool causal = false;                // Is_causal: window_left < 0 && window_right == 0
  bool local = false;                 // Is_local: some window and not causal
  int64_t window_left = -1, window_right = -1;  // params.window_size_*, after set_params_fprop
  bool swapped = false;               // seqlenq_ngroups_swapped
  int64_t ngroups = 1;                // num_heads / num_heads_k
  int64_t max_seqlen_q = 0;           // the kernel's (ngroups on the swapped path)
  int64_t num_heads = 0;              // the kernel's (num_heads_k on the swapped path)
  int64_t attention_chunk = 0;        // FA3: keys of the query's own chunk only (row_keys)
};

// In mha_varlen_fwd's order: causal is dropped when max_seqlen_q == 1 ("causal=true is the
// same as causal=false in this case"), causal sets window_right = 0, the single-query GQA
// swap is decided on the windows as passed, and only then windows not smaller than
// max_seqlen_k become unlimited. set_params_fprop: causal is (left < 0, right == 0); a
// one-sided window gets max_seqlen_k on its open side.
AD_HD Normalized normalize_fa3(const Call& c);
AD_HD Normalized normalize_fa4(const Call& c);
AD_HD Normalized normalize(const Call& c) {
  if (c.family == 3) return normalize_fa3(c);
  if (c.family == 4) return normalize_fa4(c);
  Normalized n;
  bool causal = c.causal;
  int64_t wl = c.window_left, wr = c.window_right;
  if (c.max_seqlen_q == 1) causal = false;
  if (causal) wr = 0;
  n.ngroups = c.num_heads_k > 0 && c.num_heads / c.num_heads_k > 1 ? c.num_heads / c.num_heads_k : 1;
  n.swapped = c.max_seqlen_q == 1 && c.num_heads_k > 0 && c.num_heads > c.num_heads_k && wl < 0 && wr < 0 && !c.dropout &&
              c.head_dim % 8 == 0;
  n.max_seqlen_q = n.swapped ? n.ngroups : c.max_seqlen_q;
  n.num_heads = n.swapped ? c.num_heads_k : c.num_heads;
  if (wl >= c.max_seqlen_k) wl = -1;
  if (wr >= c.max_seqlen_k) wr = -1;
  n.causal = wl < 0 && wr == 0;
  if (wl < 0 && wr >= 0) wl = c.max_seqlen_k;
  if (wl >= 0 && wr < 0) wr = c.max_seqlen_k;
  n.local = (wl >= 0 || wr >= 0) && !n.causal;
  n.window_left = wl;
  n.window_right = wr;
  return n;
}

// FA3 (Dao-AILab/flash-attention hopper/flash_api.cpp mha_fwd, then set_params_fprop): the
// windows are clamped first, the left against max_seqlen_k - 1 and the right against
// max_seqlen_q - 1; a single query row without a window drops causal; causal sets the right
// window to 0; causal is then (left < 0, right == 0). There is no single-query swap (FA3 packs
// GQA heads into the tile instead, pack_gqa, which changes no value). A one-sided window gets
// max_seqlen_k - 1 (left) or max_seqlen_q - 1 (right) on its open side. The mask itself is
// FA2's: bottom-right aligned on the segment's lengths (hopper/mask.h), where the query length
// is seqused_q[b] when given (hopper/seqlen.h SeqlenInfoQK).
//
// attention_chunk (Dao-AILab/flash-attention since v2.8.0, "Implement attention_chunk"): a chunk
// of C > 0 keeps the single-query causal flag, makes the call local rather than causal, opens
// both sides (left max_seqlen_k - 1, right max_seqlen_q - 1) and caps each at C - 1
// (set_params_fprop); hopper/mask.h then also cuts each row to the keys of its chunk
// (row_keys). A chunk <= 0 is no chunk (the mask tests divisor > 0).
AD_HD Normalized normalize_fa3(const Call& c) {
  Normalized n;
  bool causal = c.causal;
  int64_t wl = c.window_left, wr = c.window_right;
  const int64_t chunk = c.attention_chunk > 0 ? c.attention_chunk : 0;
  if (wl >= c.max_seqlen_k - 1) wl = -1;
  if (wr >= c.max_seqlen_q - 1) wr = -1;
  if (c.max_seqlen_q == 1 && wl == -1 && wr == -1 && c.attention_chunk == 0) causal = false;
  if (causal) wr = 0;
  n.ngroups = c.num_heads_k > 0 && c.num_heads / c.num_heads_k > 1 ? c.num_heads / c.num_heads_k : 1;
  n.swapped = false;
  n.max_seqlen_q = c.max_seqlen_q;
  n.num_heads = c.num_heads;
  n.causal = wl < 0 && wr == 0 && c.attention_chunk == 0;
  if (chunk > 0 && !n.causal) {
    if (wl < 0) wl = c.max_seqlen_k - 1;
    if (wr < 0) wr = c.max_seqlen_q - 1;
    wl = wl < chunk - 1 ? wl : chunk - 1;
    wr = wr < chunk - 1 ? wr : chunk - 1;
  }
  n.attention_chunk = n.causal ? 0 : chunk;
  if (wl < 0 && wr >= 0) wl = c.max_seqlen_k - 1;
  if (wl >= 0 && wr < 0) wr = c.max_seqlen_q - 1;
  n.local = (wl >= 0 || wr >= 0 || chunk >= 1) && !n.causal;
  n.window_left = wl;
  n.window_right = wr;
  return n;
}

// FA4 (flash_attn/cute/interface.py _resolve_causal_local_window). 4.0.0b4 through 4.0.0b29:
// causal sets the right window to 0; a window whose two sides sum below 0 is no window at all,
// so (-1, 0), FA2's spelling of causal, is full attention unless causal=True (measured,
// 4.0.0b19 and 4.0.0b26 on an H100: bench/results/fa4-h100-2026-11-27); a window of (None, 0) is
// causal, any other a local window. The batch's -1 is taken as the value passed for the sum,
// and as None (unlimited) after it. 4.0.0b30 onward (`fa4_literal_windows`): a window with both
// sides negative is no window, tested before causal sets the right side to 0; any other pair is
// a local window of the ints passed, a negative side included (the masks subtract it as it is),
// so (-1, 0) without causal=True lets row i see keys i + 1 .. i: none (measured, 4.0.0b36: every
// output row zeros). Nothing is clamped against max_seqlen. No single-query swap.
AD_HD Normalized normalize_fa4(const Call& c) {
  Normalized n;
  constexpr int64_t kOpen = int64_t(1) << 30;  // an unlimited side as the kernel's masks see it
  bool causal = c.causal;
  int64_t wl = c.window_left, wr = c.window_right;
  if (c.fa4_literal_windows) {
    const bool none = wl < 0 && wr < 0;
    n.ngroups = c.num_heads_k > 0 && c.num_heads / c.num_heads_k > 1 ? c.num_heads / c.num_heads_k : 1;
    n.swapped = false;
    n.max_seqlen_q = c.max_seqlen_q;
    n.num_heads = c.num_heads;
    n.causal = none && causal;
    n.local = !none;
    n.window_left = n.local ? wl : -1;
    n.window_right = n.local ? (causal ? 0 : wr) : (causal ? 0 : -1);
    return n;
  }
  if (causal) wr = 0;
  if (wl + wr < 0) wl = wr = -1;
  const bool some = wl >= 0 || wr >= 0;
  n.ngroups = c.num_heads_k > 0 && c.num_heads / c.num_heads_k > 1 ? c.num_heads / c.num_heads_k : 1;
  n.swapped = false;
  n.max_seqlen_q = c.max_seqlen_q;
  n.num_heads = c.num_heads;
  n.causal = some ? (wl < 0 && wr == 0) : causal;
  n.local = some && !n.causal;
  n.window_left = n.causal ? -1 : (n.local && wl < 0 ? kOpen : wl);
  n.window_right = n.causal ? 0 : (n.local && wr < 0 ? kOpen : wr);
  return n;
}

// ---------------------------------------------------------------------------------------
// one CTA (m_block, bidb, bidh)

struct Flags {
  bool causal;        // Is_causal (bottom-right aligned)
  bool local;         // Is_local (sliding window, inclusive)
  int32_t window_left, window_right;  // as the kernel receives them
  int block_m, block_n;
  int32_t chunk = 0;  // FA3's attention_chunk (row_keys); 0 in every FA2 / FA4 call
};

// Segment b as the kernel addresses it. The single-query swapped path drops cu_seqlens_q:
// "sequence" b is q row b and its ngroups heads become rows.
struct Segment {
  int64_t start_q;   // row_offset(cu_seqlens_q[b]) (swapped: b)
  int32_t len_q;
  int64_t start_k;
  int32_t len_k;     // seqused_k[b] when given
};
// FA3's seqused_q (hopper/seqlen.h SeqlenInfoQK): only the first seqused_q[b] query rows of
// the segment are computed and written, and the causal / window diagonal is aligned on that
// length; the rows after them are left as the output buffer held them (torch::empty).
AD_HD Segment segment(const int32_t* cu_q, const int32_t* cu_k, const int32_t* seqused_k, int64_t b, bool swapped,
                      int32_t ngroups, const int32_t* seqused_q = nullptr) {
  Segment s;
  if (swapped) {
    s.start_q = b;
    s.len_q = ngroups;
  } else {
    s.start_q = row_offset(cu_q[b]);
    s.len_q = seqused_q != nullptr ? seqused_q[b] : wrap_sub(cu_q[b + 1], cu_q[b]);
  }
  s.start_k = row_offset(cu_k[b]);
  s.len_k = seqused_k != nullptr ? seqused_k[b] : wrap_sub(cu_k[b + 1], cu_k[b]);
  return s;
}

// The query row and head that tile row `i` of tile head `h` stands for.
struct QueryRow {
  int64_t row;
  int64_t head;
};
AD_HD QueryRow query_row(const Segment& s, bool swapped, int64_t ngroups, int64_t h, int64_t i) {
  if (swapped) return {s.start_q, h * ngroups + i};
  return {s.start_q + i, h};
}

// Key blocks [n_min, n_max) a CTA iterates (from n_max - 1 down).
struct KeyBlocks {
  int64_t n_min, n_max;
};
AD_HD KeyBlocks key_blocks(int64_t m_block, int32_t len_q, int32_t len_k, const Flags& f) {
  const int64_t bm = f.block_m, bn = f.block_n;
  int64_t n_min = 0;
  if (f.local) {
    const int64_t v = (m_block * bm + len_k - len_q - f.window_left) / bn;
    n_min = v > 0 ? v : 0;
  }
  int64_t n_max = ceil_div(len_k, bn);
  if (f.causal || f.local) {
    const int64_t lim = ceil_div((m_block + 1) * bm + len_k - len_q + f.window_right, bn);
    n_max = lim < n_max ? lim : n_max;
  }
  return {n_min, n_max};
}

struct TileRange {
  bool exits;          // m_block * kBlockM >= actual_seqlen_q: the CTA returns at once
  bool empty;          // n_block_max <= n_block_min: writes 0 to O and +inf to LSE, reads nothing
  int64_t row_begin;   // rows of the segment this CTA writes: [row_begin, row_end)
  int64_t row_end;
  int64_t key_begin;   // keys of the segment it reads: [key_begin, key_end)
  int64_t key_end;
};

// compute_attn_1rowblock's prologue. len_q / len_k are the CTA's actual_seqlen_q/k (int32,
// possibly negative when cu_seqlens decreases).
AD_HD TileRange tile_range(int64_t m_block, int32_t len_q, int32_t len_k, const Flags& f) {
  TileRange t{};
  const int64_t bm = f.block_m, bn = f.block_n;
  t.exits = m_block * bm >= int64_t(len_q);
  if (t.exits) return t;
  t.row_begin = m_block * bm;
  t.row_end = (m_block + 1) * bm < int64_t(len_q) ? (m_block + 1) * bm : int64_t(len_q);
  const KeyBlocks kb = key_blocks(m_block, len_q, len_k, f);
  t.empty = kb.n_max <= kb.n_min;  // varlen is never Is_even_MN, so this exit is always taken
  if (t.empty) return t;
  t.key_begin = kb.n_min * bn;
  t.key_end = kb.n_max * bn < int64_t(len_k) ? kb.n_max * bn : int64_t(len_k);
  return t;
}

// The keys of the segment row i sees (mask.h): [0, len_k) cut by the causal diagonal
// (bottom-right aligned) or the inclusive window around it. Causal is the local mask with an
// unlimited left window and right window 0.
struct KeyLimits {
  int64_t lo, hi;
};
AD_HD KeyLimits row_keys(int64_t i, int32_t len_q, int32_t len_k, const Flags& f) {
  int64_t lo = 0, hi = len_k;
  if (f.causal || f.local) {
    const int64_t right = i + 1 + int64_t(len_k) - len_q + (f.causal ? 0 : f.window_right);
    if (right < hi) hi = right;
  }
  if (f.local) {
    const int64_t left = i + int64_t(len_k) - len_q - f.window_left;
    if (left > lo) lo = left;
  }
  // FA3's attention_chunk (hopper/mask.h): only the keys of the chunk that holds the row's
  // diagonal, [round_down(i + len_k - len_q, chunk), + chunk). A diagonal before the first key
  // (len_q > len_k) is rounded toward -inf here; the kernel's FastDivmod takes it as unsigned.
  if (f.chunk > 0) {
    const int64_t d = i + int64_t(len_k) - len_q;
    const int64_t start = (d >= 0 ? d / f.chunk : -((-d + f.chunk - 1) / f.chunk)) * f.chunk;
    if (start > lo) lo = start;
    if (start + f.chunk < hi) hi = start + f.chunk;
  }
  if (hi < lo) hi = lo;
  return {lo, hi};
}
// The same, within the keys the CTA reads.
AD_HD KeyLimits key_limits(int64_t i, int32_t len_q, int32_t len_k, const Flags& f, const TileRange& t) {
  KeyLimits k = row_keys(i, len_q, len_k, f);
  if (t.key_begin > k.lo) k.lo = t.key_begin;
  if (t.key_end < k.hi) k.hi = t.key_end;
  if (k.hi < k.lo) k.hi = k.lo;
  return k;
}

// Whether keys [n0, n0 + bn) hide a key from some row of [row0, row0 + bm): row_keys' bounds
// grow with the row, so the first row has the lowest upper bound and the last the highest
// lower bound.
AD_HD bool block_needs_mask(int64_t n0, int64_t bn, int64_t row0, int64_t bm, int32_t len_q, int32_t len_k,
                            const Flags& f) {
  return n0 + bn > row_keys(row0, len_q, len_k, f).hi || n0 < row_keys(row0 + bm - 1, len_q, len_k, f).lo;
}

// A CTA whose rows all lie past the q/out rows (the rest of a segment that runs past the
// tensors). The stages count its accesses on the host instead of running it.
AD_HD bool tile_past_rows(const Segment& s, bool swapped, int64_t row0, int64_t rows) {
  return swapped ? s.start_q >= rows : s.start_q + row0 >= rows;
}

// ---------------------------------------------------------------------------------------
// the LSE

// (H, total_q) "unpadded" from 2.6.0; (N, H, max_seqlen_q) before.
enum class LseLayout : int32_t { unpadded = 0, padded = 1 };

struct LseShape {
  LseLayout layout = LseLayout::unpadded;
  int64_t total_q = 0;       // rows of q (the unpadded row stride)
  int64_t num_heads = 0;     // H of the kernel
  int64_t max_seqlen_q = 0;  // the padded layout's per-segment stride
};

// get_lse_tile: the LSE element of tile row `i` (segment b, tile head h, query head `head`).
// Unpadded: the offset is computed in int, so the uint32 start wraps back to a negative int
// for a negative cu_seqlens_q[b]. The swapped path writes (H, N) with N = total_q rows.
AD_HD int64_t lse_index(const LseShape& l, bool swapped, int32_t cu_q_b, int64_t b, int64_t h, int64_t head,
                        int64_t i) {
  if (swapped) return head * l.total_q + b;
  if (l.layout == LseLayout::padded) return (b * l.num_heads + h) * l.max_seqlen_q + i;
  return int64_t(int32_t(uint32_t(cu_q_b))) + h * l.total_q + i;
}

// A query row past q's rows (a segment that runs past the tensors) computes nothing in the
// checked engines: its q read and out write are refused and its LSE is not written. Unpadded,
// that LSE element lies in the next head's part (cu_seqlens_q[b] + i >= total_q), where that
// head's CTAs write the same element in the same launch: a race neither engine reproduces
// (the backward reads that LSE).
AD_HD bool row_in_q(int64_t row, int64_t q_rows) { return row < q_rows; }

}  // namespace ad::fa2
