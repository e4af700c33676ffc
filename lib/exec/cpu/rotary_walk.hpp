// What the checked rotary stage does not run: the rows a varlen rotary call's programs visit
// wholly outside the tensor, i.e. the rest of a segment whose cu_seqlens run past it (a
// phantom segment, such as cu_seqlens [0, 4, 7, 1000012] on 12 rows). Every access such a row
// makes is out of bounds, so it is counted here, on the host, from the plan alone, instead of
// being refused one by one: the work of a checked stage stays bounded by the tensors it was
// given. The CPU twin of the rotary (cpu_stages.cpp) walks a call with it, and the CUDA engine
// counts the rows its kernel does not launch for. The attention's CTAs past the tensors are
// counted in the plan (plan/clip.cpp).
#pragma once

#include <cstdint>
#include <string>

#include <array>
#include <utility>
#include <vector>

#include "contract/access_record.hpp"
#include "exec/engine.hpp"
#include "exec/plan/plan.hpp"

namespace ad {

// A varlen rotary call (flash_attn or fla) on x (rows, heads, D) as its kernel walks it: the
// rows of each segment its programs visit, the program that holds each row (launch order),
// and the rows that can touch the tensor, which the engines rotate (`run`). Every other
// visited row lies wholly outside x (a segment running past it, or starting before it): its
// accesses are counted at once by count_rotary_rows_outside.
class RotaryWalk {
 public:
  RotaryWalk(const ExecPlan& plan, bool is_q, int64_t rows, int64_t heads);
  int64_t segments() const { return segments_; }
  int64_t start(int64_t b) const { return (*cu_)[static_cast<size_t>(b)]; }  // signed int32, as the kernels read it
  int64_t visited(int64_t b) const;      // rows of segment b some program visits
  int64_t not_visited(int64_t b) const;  // rows of segment b past the grid (flash_attn's max_seqlen)
  int64_t offset(int64_t b) const;       // seqlen offset: position = row in segment + offset
  std::pair<int64_t, int64_t> run(int64_t b) const;  // [lo, hi) rows of segment b that can touch x
  int64_t block_rows() const { return block_; }
  uint64_t program(int64_t b, int64_t rm, int64_t h) const;  // launch order of row rm's program
  int64_t row_in_program(int64_t rm) const { return rm % block_; }
  std::array<int64_t, 3> block(int64_t b, int64_t rm, int64_t h) const;  // flash_attn (m, b, h); fla (chunk, 0, h)

 private:
  const RotaryPlan& r_;
  const std::vector<int32_t>* cu_;
  const std::vector<int64_t>* offsets_;
  int64_t segments_ = 0, rows_ = 0, margin_ = 0, block_ = 1, grid_m_ = 0, chunks_ = 0;
  std::vector<int64_t> chunk_base_;  // fla: chunks before segment b
};

// The visited rows of a varlen rotary call outside every segment's `run`: each (row, head)
// is refused as a whole (rope::accesses_per_row_head accesses, the first its column-0 read),
// and counted as rotated or past the table as the CPU twin counts it.
void count_rotary_rows_outside(const ExecPlan& plan, bool is_q, const RotaryWalk& walk, int64_t rows, int64_t heads,
                               RotaryCallObservation& out);

}  // namespace ad
