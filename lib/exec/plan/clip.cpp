// The attention CTAs wholly past the tensors, counted on the host (see clip.hpp).
#include "exec/cpu/rotary_walk.hpp"

#include <algorithm>

#include "contract/rotary.hpp"

namespace ad {

TilesPastRows attention_tiles_past_rows(const ExecPlan& plan) {
  const AttentionPlan& at = plan.attention;
  TilesPastRows out;
  if (at.raises || at.zero_fill) return out;
  const int64_t total_q = std::max<int64_t>(at.total_q, 0), total_k = std::max<int64_t>(at.total_k, 0);
  const int64_t BM = at.flags.block_m, N = at.num_segments;
  const int64_t lse_n = at.lse_elements;
  const fa2::LseShape lse_shape = at.lse_shape();
  const Buffer q_buf = plan.rotary.enabled ? Buffer::q_rot : Buffer::q;
  const Buffer k_buf = plan.rotary.enabled ? Buffer::k_rot : Buffer::k;
  for (int64_t b = 0; b < N; ++b) {
    const fa2::Segment sg = at.segment(b);
    if (sg.len_q <= 0) continue;
    const int64_t m_end = std::min<int64_t>(at.grid_m, (int64_t(sg.len_q) + BM - 1) / BM);
    // the first CTA past the rows: m * BM >= total_q - start (or all of them)
    const int64_t live_rows = at.swapped ? (sg.start_q < total_q ? sg.len_q : 0) : std::max<int64_t>(0, total_q - sg.start_q);
    const int64_t m_past = std::min<int64_t>(m_end, (live_rows + BM - 1) / BM);
    out.live_grid_m = std::max(out.live_grid_m, m_past);
    if (m_past >= m_end) continue;
    ++out.segments;
    if (out.first_segment < 0) out.first_segment = b;
    out.tiles += (m_end - m_past) * at.grid_h;
    // k/v rows past the buffer over the CTAs (all heads read the same rows)
    int64_t kv_past = 0, first_kv = -1;
    const int64_t cap = int64_t{1} << 22;
    for (int64_t m = m_past; m < m_end && m - m_past < cap; ++m) {
      const fa2::TileRange t = fa2::tile_range(m, sg.len_q, sg.len_k, at.flags);
      if (t.exits || t.empty) continue;
      const int64_t lo = std::max(t.key_begin, total_k - sg.start_k);
      if (t.key_end > lo) {
        kv_past += t.key_end - lo;
        if (first_kv < 0) first_kv = sg.start_k + lo;
      }
    }
    const int64_t row0 = m_past * BM;
    const int64_t rows = std::min<int64_t>(sg.len_q, at.grid_m * BM) - row0;
    for (int64_t h = 0; h < at.grid_h; ++h) {
      const uint64_t program = order::grid_linear(uint64_t(m_past), uint64_t(b), uint64_t(h), uint64_t(at.grid_m), uint64_t(N));
      auto access = [&](Buffer buf, AccessKind kind, Unit unit, int64_t index, int64_t bound, int64_t row) {
        return Access{.buffer = buf, .kind = kind, .unit = unit, .index = index, .bound = bound, .block = {m_past, b, h},
                      .segment = b, .row = row, .head = h};
      };
      const int64_t q_row = sg.start_q + row0;
      out.access.note(order::key(program, order::kRead, row0), access(q_buf, AccessKind::read, Unit::rows, q_row, total_q, q_row),
                      uint64_t(rows));
      out.access.note(order::key(program, order::kOutWrite, row0),
                      access(Buffer::out, AccessKind::write, Unit::rows, q_row, total_q, q_row), uint64_t(rows));
      if (kv_past > 0)
        out.access.note(order::key(program, order::kKeyRead, first_kv - sg.start_k),
                        access(k_buf, AccessKind::read, Unit::rows, first_kv, total_k, first_kv), uint64_t(2 * kv_past));
      if (!at.swapped) {
        // the LSE elements of these rows outside the LSE buffer
        const int64_t i0 = fa2::lse_index(lse_shape, false, at.cu_seqlens_q[static_cast<size_t>(b)], b, h, h, row0);
        const int64_t i1 = i0 + rows;
        const int64_t in0 = std::max<int64_t>(i0, 0), in1 = std::min<int64_t>(i1, lse_n);
        const int64_t past = (i1 - i0) - std::max<int64_t>(0, in1 - in0);
        if (past > 0)
          out.access.note(order::key(program, order::kLseWrite, row0),
                          access(Buffer::lse, AccessKind::write, Unit::elements, i0 < 0 ? i0 : std::max(i0, lse_n), lse_n, -1),
                          uint64_t(past));
      }
    }
  }
  return out;
}

std::string clipped_note(const ExecPlan& plan) {
  const AttentionPlan& at = plan.attention;
  const TilesPastRows& t = at.past_rows;
  if (t.tiles <= 0 || t.first_segment < 0) return "";
  const fa2::Segment sg = at.segment(t.first_segment);
  std::string s = "segment " + std::to_string(t.first_segment) + " of cu_seqlens_q ends at row " +
                  std::to_string(sg.start_q + sg.len_q) + ", past the " + std::to_string(std::max<int64_t>(at.total_q, 0)) +
                  " rows of q";
  if (t.segments > 1) s += " (" + std::to_string(t.segments) + " segments do)";
  // the same unit as attention.access's total, which includes these
  s += ": its " + std::to_string(t.tiles) + " attention CTAs wholly past q are counted, not run (" +
       std::to_string(t.access.count) + " of the out-of-bounds accesses attention.access counts in all)";
  return s;
}

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
