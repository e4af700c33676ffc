// A varlen rotary call's walk, and the rows it visits wholly outside the tensor counted on
// the host (rotary_walk.hpp).
#include "exec/cpu/rotary_walk.hpp"

#include <algorithm>

#include "contract/rotary.hpp"

namespace ad {

RotaryWalk::RotaryWalk(const ExecPlan& plan, bool is_q, int64_t rows, int64_t heads)
    : r_(plan.rotary), cu_(is_q ? &plan.rotary.cu_q : &plan.rotary.cu_k),
      offsets_(is_q ? &plan.rotary.offsets_q : &plan.rotary.offsets_k) {
  segments_ = std::max<int64_t>(static_cast<int64_t>(cu_->size()) - 1, 0);
  rows_ = rows;
  block_ = std::max<int64_t>(r_.block_rows, 1);
  // a rotation wider than the head reaches into the next heads: a row this many rows before
  // x can still touch its first elements (0 when the rotation stays inside the head)
  const int64_t row_elems = heads * plan.head_dim;
  margin_ = row_elems > 0 ? ((heads - 1) * plan.head_dim + 2 * r_.half - 1) / row_elems : 0;
  if (r_.contract == RotaryContract::flash_attn) {
    grid_m_ = rope::grid_m(is_q ? r_.max_seqlen_q : r_.max_seqlen_k, block_);
  } else {
    chunk_base_.assign(static_cast<size_t>(segments_) + 1, 0);
    for (int64_t b = 0; b < segments_; ++b)
      chunk_base_[static_cast<size_t>(b) + 1] = chunk_base_[static_cast<size_t>(b)] + (visited(b) + block_ - 1) / block_;
    chunks_ = chunk_base_.back();
  }
}

int64_t RotaryWalk::visited(int64_t b) const {
  const int32_t a = (*cu_)[static_cast<size_t>(b)], e = (*cu_)[static_cast<size_t>(b) + 1];
  // flash_attn reads the length as an int32 difference; fla as int64 (prepare_chunk_indices)
  if (r_.contract == RotaryContract::flash_attn) return rope::rows_visited(fa2::wrap_sub(e, a), grid_m_, block_);
  return std::max<int64_t>(int64_t(e) - int64_t(a), 0);
}

int64_t RotaryWalk::not_visited(int64_t b) const {
  if (r_.contract != RotaryContract::flash_attn) return 0;
  const int32_t len = fa2::wrap_sub((*cu_)[static_cast<size_t>(b) + 1], (*cu_)[static_cast<size_t>(b)]);
  return std::max<int64_t>(len, 0) - visited(b);
}

int64_t RotaryWalk::offset(int64_t b) const {
  const auto& offs = *offsets_;
  if (offs.empty()) return 0;
  if (!r_.offsets_per_sequence) return offs.front();
  return b < static_cast<int64_t>(offs.size()) ? offs[static_cast<size_t>(b)] : 0;
}

std::pair<int64_t, int64_t> RotaryWalk::run(int64_t b) const {
  const int64_t lo = std::clamp<int64_t>(-margin_ - start(b), 0, visited(b));
  const int64_t hi = std::clamp<int64_t>(rows_ - start(b), lo, visited(b));
  return {lo, hi};
}

uint64_t RotaryWalk::program(int64_t b, int64_t rm, int64_t h) const {
  if (r_.contract == RotaryContract::flash_attn) return rope::flash_attn_program(rm / block_, b, h, grid_m_, segments_);
  return uint64_t(h) * uint64_t(chunks_) + uint64_t(chunk_base_[static_cast<size_t>(b)] + rm / block_);
}

std::array<int64_t, 3> RotaryWalk::block(int64_t b, int64_t rm, int64_t h) const {
  if (r_.contract == RotaryContract::flash_attn) return {rm / block_, b, h};
  return {chunk_base_[static_cast<size_t>(b)] + rm / block_, 0, h};
}

void count_rotary_rows_outside(const ExecPlan& plan, bool is_q, const RotaryWalk& walk, int64_t rows, int64_t heads,
                               RotaryCallObservation& out) {
  const RotaryPlan& r = plan.rotary;
  const int64_t D = plan.head_dim, R = r.half, numel = rows * heads * D;
  const int64_t per_pair = rope::accesses_per_row_head(R, r.interleaved);
  const bool fla = r.contract == RotaryContract::fla;
  const Buffer x_read = r.inplace ? (is_q ? Buffer::q_rot : Buffer::k_rot) : (is_q ? Buffer::q : Buffer::k);
  for (int64_t b = 0; b < walk.segments(); ++b) {
    const int64_t visited = walk.visited(b), start = walk.start(b), off = walk.offset(b);
    const auto [lo, hi] = walk.run(b);
    // rows [a, e) of the segment, wholly outside x, for every head
    auto count = [&](int64_t a, int64_t e) {
      if (e <= a) return;
      // positions below the table, in it, past it
      const int64_t t0 = std::clamp<int64_t>(-off, a, e), t1 = std::clamp<int64_t>(r.table_rows - off, t0, e);
      const int64_t below = t0 - a, inside = t1 - t0, past = e - t1;
      for (int64_t h = 0; h < heads; ++h) {
        auto access = [&](Buffer buf, Region region, int64_t rm, int64_t index, int64_t bound) {
          const std::array<int64_t, 3> blk = walk.block(b, rm, h);
          return Access{.buffer = buf, .kind = AccessKind::read, .unit = Unit::elements, .region = region,
                        .index = index, .bound = bound, .block = {blk[0], blk[1], blk[2]}, .segment = b,
                        .row = start + rm, .head = h};
        };
        auto key = [&](int64_t rm) {
          return order::key(walk.program(b, rm, h), order::kRead, order::rotary_sub(walk.row_in_program(rm), 0));
        };
        auto base = [&](int64_t rm) { return (start + rm) * heads * D + h * D; };
        if (fla) {
          // fla masks a row whose position is outside [0, TR): nothing read or written
          out.past_table += below + past;
          out.rotated += inside;
          if (inside > 0)
            out.outside_tensor.note(key(t0), access(x_read, Region::tensor, t0, base(t0), numel), uint64_t(inside * per_pair));
          continue;
        }
        // flash_attn masks the table only from above: a negative position reads before it
        if (below > 0)
          out.table.note(key(a), access(Buffer::cos, Region::table, a, (a + off) * R, r.table_rows * R), uint64_t(below));
        out.past_table += below + past;
        out.rotated += inside;
        out.outside_tensor.note(key(a), access(x_read, Region::tensor, a, base(a), numel), uint64_t((e - a) * per_pair));
      }
    };
    count(0, std::min(lo, visited));
    count(std::max(lo, hi), visited);
  }
}

}  // namespace ad
