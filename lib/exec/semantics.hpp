// The indexing semantics the checked kernels reproduce, as small pure functions: one per
// decision the real kernel makes (tile size, tile exit, key range, mask, row offsets, rotary
// program geometry). The CPU backend calls them; the CUDA kernels mirror them (AD_HD), so
// the two backends agree by construction and are tested by the same sweep.
//
// Sources (read, not copied): flash-attention v2.6.3
//   csrc/flash_attn/flash_api.cpp          mha_varlen_fwd: host adjustments, swapped path
//   csrc/flash_attn/src/flash_fwd_launch_template.h  tile sizes per head dim, grid
//   csrc/flash_attn/src/flash_fwd_kernel.h compute_attn_1rowblock: exits, n-block range
//   csrc/flash_attn/src/block_info.h       unsigned 32-bit row offsets
//   csrc/flash_attn/src/mask.h             causal / local limits
//   csrc/flash_attn/src/softmax.h          empty row -> 0 output, +inf LSE
//   flash_attn/ops/triton/rotary.py        flash_attn rotary program geometry
// fla-org/flash-linear-attention fla/modules/rotary.py (rotary_embedding_kernel).
#pragma once

#include <cstdint>

#include "exec/numeric.hpp"

namespace ad::sem {

// ---------------------------------------------------------------------------------------
// FA2 tile sizes

// GPU generation whose tile choice is reproduced (the choice differs for head dims 96-160 on
// sm86/sm89 and for 256 between A100 and H100).
enum class GpuArch : uint8_t { sm80, sm90 };

struct Fa2Tile {
  int head_dim_rounded;  // kHeadDim of the compiled kernel (HEADDIM_SWITCH)
  int block_m;           // kBlockM: query rows per CTA
  int block_n;           // kBlockN: keys per inner iteration
};

// run_mha_fwd_hdim{32..256} in flash_fwd_launch_template.h (v2.6.x-v2.8.x). `head_dim` is
// the user's head dim; the host rounds it up to a multiple of 8 and dispatches on that.
AD_HD Fa2Tile fa2_tile(int head_dim, bool dropout, GpuArch arch) {
  const int d8 = (head_dim + 7) / 8 * 8;
  const int hd = d8 <= 32 ? 32 : d8 <= 64 ? 64 : d8 <= 96 ? 96 : d8 <= 128 ? 128 : d8 <= 160 ? 160 : d8 <= 192 ? 192 : 256;
  switch (hd) {
    case 32: return {32, 128, 128};
    case 64: return dropout ? Fa2Tile{64, 128, 64} : Fa2Tile{64, 128, 128};
    case 96: return {96, 128, 64};
    case 128: return dropout ? Fa2Tile{128, 128, 32} : Fa2Tile{128, 128, 64};
    case 160: return {160, 128, 32};
    case 192: return dropout ? Fa2Tile{192, 64, 64} : Fa2Tile{192, 128, 64};
    default:  // 256: 128 x 64 where two CTAs do not fit one SM (A100), else 64 x 64 (H100)
      return arch == GpuArch::sm80 ? Fa2Tile{256, 128, 64} : Fa2Tile{256, 64, 64};
  }
}

// cute::ceil_div on ints: (a + b - 1) / b with C truncation (so a <= 0 gives <= 0).
AD_HD int64_t fa2_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// An int32 difference as the kernel computes it (wraps instead of overflowing).
AD_HD int32_t wrap_sub(int32_t a, int32_t b) { return int32_t(uint32_t(a) - uint32_t(b)); }

// ---------------------------------------------------------------------------------------
// FA2 varlen forward: one CTA (m_block, bidb, bidh)

struct Fa2Flags {
  bool causal;        // Is_causal (bottom-right aligned)
  bool local;         // Is_local (sliding window, inclusive)
  int32_t window_left, window_right;  // as the kernel receives them
  int block_m, block_n;
};

struct Fa2TileRange {
  bool exits;          // m_block * kBlockM >= actual_seqlen_q: the CTA returns at once
  bool empty;          // n_block_max <= n_block_min: writes 0 to O and +inf to LSE, reads nothing
  int64_t row_begin;   // rows of the segment this CTA writes: [row_begin, row_end)
  int64_t row_end;
  int64_t key_begin;   // keys of the segment it reads: [key_begin, key_end)
  int64_t key_end;
};

// compute_attn_1rowblock's prologue. len_q / len_k are the CTA's actual_seqlen_q/k (int32,
// possibly negative when cu_seqlens decreases).
AD_HD Fa2TileRange fa2_tile_range(int64_t m_block, int32_t len_q, int32_t len_k, const Fa2Flags& f) {
  Fa2TileRange t{};
  const int64_t bm = f.block_m, bn = f.block_n;
  t.exits = m_block * bm >= int64_t(len_q);
  if (t.exits) return t;
  t.row_begin = m_block * bm;
  t.row_end = (m_block + 1) * bm < int64_t(len_q) ? (m_block + 1) * bm : int64_t(len_q);
  int64_t n_min = 0;
  if (f.local) {
    const int64_t v = (m_block * bm + len_k - len_q - f.window_left) / bn;
    n_min = v > 0 ? v : 0;
  }
  int64_t n_max = fa2_ceil_div(len_k, bn);
  if (f.causal || f.local) {
    const int64_t lim = fa2_ceil_div((m_block + 1) * bm + len_k - len_q + f.window_right, bn);
    n_max = lim < n_max ? lim : n_max;
  }
  t.empty = n_max <= n_min;  // varlen is never Is_even_MN, so this exit is always taken
  if (t.empty) return t;
  t.key_begin = n_min * bn;
  t.key_end = n_max * bn < int64_t(len_k) ? n_max * bn : int64_t(len_k);
  return t;
}

// The visible keys of segment row i (mask.h): [lo, hi) intersected with the CTA's key range.
// Causal is the local mask with an unlimited left window and right window 0.
struct KeyLimits {
  int64_t lo, hi;
};
AD_HD KeyLimits fa2_key_limits(int64_t i, int32_t len_q, int32_t len_k, const Fa2Flags& f, const Fa2TileRange& t) {
  int64_t lo = t.key_begin, hi = t.key_end;
  if (f.causal || f.local) {
    const int64_t right = i + 1 + int64_t(len_k) - len_q + (f.causal ? 0 : f.window_right);
    if (right < hi) hi = right;
  }
  if (f.local) {
    const int64_t left = i + int64_t(len_k) - len_q - f.window_left;
    if (left > lo) lo = left;
  }
  if (hi < lo) hi = lo;
  return {lo, hi};
}

// BlockInfo::q_offset / k_offset in the varlen case: the start is converted to uint32 before
// the multiplication by the row stride in 64 bits, so a negative start becomes a huge row.
AD_HD int64_t fa2_row_offset(int32_t start) { return int64_t(uint32_t(start)); }

// get_lse_tile with unpadded_lse (>= 2.6): (H, total_q), offset computed in int: the uint32
// start wraps back to a negative int for a negative start.
AD_HD int64_t fa2_lse_index_unpadded(int32_t start, int64_t row, int64_t h, int64_t total_q) {
  return int64_t(int32_t(uint32_t(start))) + h * total_q + row;
}
// Before 2.6: (B, H, max_seqlen_q) padded per segment.
AD_HD int64_t fa2_lse_index_padded(int64_t b, int64_t h, int64_t row, int64_t num_heads, int64_t max_seqlen_q) {
  return (b * num_heads + h) * max_seqlen_q + row;
}

// ---------------------------------------------------------------------------------------
// Rotary

// flash_attn/ops/triton/rotary.py apply_rotary: BLOCK_M rows per program.
AD_HD int flash_attn_rotary_block_m(int64_t rotary_dim, bool interleaved) {
  return interleaved ? 4 : (rotary_dim <= 64 ? 8 : 4);
}

// triton.next_power_of_2
AD_HD int64_t next_power_of_2(int64_t n) {
  int64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

// ---------------------------------------------------------------------------------------
// Reference tolerance: a row passes when max|out - ref| / max|ref| is within this.

AD_HD double tolerance_for(num::Precision p) {
  return p == num::Precision::bf16 ? 1e-2 : p == num::Precision::fp16 ? 2e-3 : 1e-5;
}

}  // namespace ad::sem
