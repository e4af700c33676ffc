// What the checked stages do not run: the attention CTAs that lie wholly past the tensors, i.e.
// the rest of a segment whose cu_seqlens run past q/out (a phantom segment, such as
// cu_seqlens [0, 4, 7, 1000012] on 12 rows). Every access such a CTA makes is out of bounds,
// so it is counted here, on the host, from the plan alone, the same for both engines, instead
// of being refused one by one: the work of a checked stage stays bounded by the tensors it was
// given. The rotary rows wholly past the tensors are counted the same way (cpu/rotary_walk.hpp).
#include "exec/plan/plan.hpp"

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
    // paged (FA3): the refused reads through the table (contract/fa3_paged.hpp), the first
    // CTA's first of each
    int64_t pool_refused = 0, table_refused = 0, first_pool_key = -1, first_pool_row = 0, first_entry_key = -1,
            first_entry = 0;
    const int64_t cap = int64_t{1} << 22;
    for (int64_t m = m_past; m < m_end && m - m_past < cap; ++m) {
      const fa2::TileRange t = fa2::tile_range(m, sg.len_q, sg.len_k, at.flags);
      if (t.exits || t.empty) continue;
      if (at.paged) {
        const fa3::PagedKV pk = at.paged->view();
        const fa3::PagedRefusals rf = fa3::paged_refusals(pk, b, t.key_begin, t.key_end);
        if (rf.outside_pool > 0 && first_pool_key < 0) {
          first_pool_key = rf.first_outside;
          first_pool_row = rf.first_outside_row.row;
        }
        if (rf.past_table > 0 && first_entry_key < 0) {
          first_entry_key = rf.first_past;
          first_entry = fa3::paged_row(pk, b, rf.first_past).entry;
        }
        pool_refused += rf.outside_pool;
        table_refused += rf.past_table;
        continue;
      }
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
      if (pool_refused > 0)
        out.access.note(order::key(program, order::kKeyRead, first_pool_key),
                        access(k_buf, AccessKind::read, Unit::rows, first_pool_row, at.paged->view().pool_rows(), first_pool_row),
                        uint64_t(2 * pool_refused));
      if (table_refused > 0)
        out.access.note(order::key(program, order::kKeyRead, first_entry_key),
                        access(Buffer::page_table, AccessKind::read, Unit::elements, first_entry, at.paged->view().entries, -1),
                        uint64_t(table_refused));
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

}  // namespace ad
