// The rotary kernels' geometry as the checked stages reproduce it: rows per program, which
// rows a grid visits, the program of a row in launch order, and how many element accesses
// one (row, head) makes. The CPU twin (lib/exec/cpu/cpu_stages.cpp), the plan and the CUDA
// kernel (kernels/rotary.cu) call these definitions.
//
// Sources (read, not copied):
//   Dao-AILab/flash-attention flash_attn/ops/triton/rotary.py (apply_rotary, rotary_kernel),
//     v2.1.2 through v2.8.3: grid (cdiv(max_seqlen, BLOCK_M), batch, nheads) in varlen; a
//     program returns when pid_m * BLOCK_M >= seqlen; loads x0 and x1 (the swapped copy when
//     interleaved) and stores the rotated row.
//   fla-org/flash-linear-attention fla/modules/rotary.py (rotary_embedding_fwdbwd,
//     rotary_embedding_kernel): chunks of BT rows of every segment (prepare_chunk_indices).
#pragma once

#include <cstdint>

#include "contract/host_device.hpp"
#include "contract/launch_order.hpp"

namespace ad::rope {

// apply_rotary's BLOCK_M (rows per program), by release (`fa_minor`: the 2.x minor version):
//   2.1.2-2.6.3  4 if interleaved else (8 if rotary_dim <= 64 else 4)
//   2.7.0-2.7.4  4 if interleaved else (8 if rotary_dim <= 128 else 4)
//   2.8.0-2.8.3  8 if rotary_dim <= 128 else 4
AD_HD int flash_attn_block_m(int64_t rotary_dim, bool interleaved, int fa_minor) {
  if (fa_minor >= 8) return rotary_dim <= 128 ? 8 : 4;
  if (interleaved) return 4;
  return rotary_dim <= (fa_minor >= 7 ? 128 : 64) ? 8 : 4;
}

// triton.next_power_of_2
AD_HD int64_t next_power_of_2(int64_t n) {
  int64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

// fla's BT: min(128, next_power_of_2(cdiv(T, multiprocessor count))); the count of an H100
// (132) is what the plan assumes.
AD_HD int64_t fla_block_t(int64_t T, int64_t multiprocessors = 132) {
  const int64_t c = (T + multiprocessors - 1) / multiprocessors;
  const int64_t p = next_power_of_2(c > 1 ? c : 1);
  return p < 128 ? p : 128;
}

// flash_attn: programs per segment (cdiv(max_seqlen, BLOCK_M), 0 for max_seqlen <= 0), and
// the rows of a segment of `len` rows that some program visits (the rest keep their values).
AD_HD int64_t grid_m(int64_t max_seqlen, int64_t block_m) {
  return max_seqlen > 0 ? (max_seqlen + block_m - 1) / block_m : 0;
}
AD_HD int64_t rows_visited(int64_t len, int64_t grid_m, int64_t block_m) {
  const int64_t l = len > 0 ? len : 0;
  return l < grid_m * block_m ? l : grid_m * block_m;
}

// Launch-order program of flash_attn's program (m, b, h) in a grid (grid_m, N, H).
AD_HD uint64_t flash_attn_program(int64_t m, int64_t b, int64_t h, int64_t grid_m, int64_t num_segments) {
  return order::grid_linear(uint64_t(m), uint64_t(b), uint64_t(h), uint64_t(grid_m), uint64_t(num_segments));
}

// Element accesses of one (row, head) rotation of `half` column pairs: the kernels load both
// halves (interleaved: the row and its pair-swapped copy, 2 * rotary_dim) and store the
// rotated columns.
AD_HD int64_t accesses_per_row_head(int64_t half, bool interleaved) { return interleaved ? 6 * half : 4 * half; }

}  // namespace ad::rope
