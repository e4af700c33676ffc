// CPU twins of the checked unpad gather, pad scatter and rotary kernels.
//
// Gather and scatter follow torch's index_first_axis / pad_input (flash_attn.bert_padding;
// transformers.modeling_flash_attention_utils). Rotary follows the three contracts of
// docs/spec/execution.md: flash_attn v2.6.3 flash_attn/ops/triton/rotary.py
// (rotary_kernel: grid (cdiv(max_seqlen, BLOCK_M), batch, heads), rows past max_seqlen's
// programs untouched, table rows masked with cos=1/sin=0), fla fla/modules/rotary.py
// (rotary_embedding_kernel: chunks of every segment, columns bounded by R = dim/2 only,
// masked rows left as the output was allocated), and transformers' apply_rotary_pos_emb.
#include <cmath>
#include <cstring>

#include "exec/cpu_kernels.hpp"

namespace ad::cpu {

GatherResult gather_rows(const GatherPlan& g, const float* src, float* dst, int64_t row_elems, ExecBuffer src_buffer,
                         int threads) {
  GatherResult res;
  const int64_t n = static_cast<int64_t>(g.indices.size());
  const int workers = std::max(1, threads);
  std::vector<AccessRecord> rec(static_cast<size_t>(workers));
  std::vector<int64_t> copied(static_cast<size_t>(workers), 0);
  parallel_for(workers, n, 4096, [&](int64_t i, int w) {
    const int64_t s = g.indices[static_cast<size_t>(i)];
    if (s < 0 || s >= g.src_rows) {
      // torch.gather: "index out of bounds" device assert; the row is not copied
      rec[static_cast<size_t>(w)].note({static_cast<uint64_t>(i), 0}, AccessKind::read, src_buffer, s, g.src_rows, true,
                                       {i, -1, -1}, i, -1, -1);
      return;
    }
    std::memcpy(dst + i * row_elems, src + s * row_elems, static_cast<size_t>(row_elems) * sizeof(float));
    ++copied[static_cast<size_t>(w)];
  });
  for (auto& r : rec) res.oob.merge(r);
  for (int64_t c : copied) res.rows_copied += c;
  return res;
}

ScatterResult scatter_rows(const PadPlan& pad, const float* src, int64_t src_rows, float* dst, int64_t row_elems) {
  ScatterResult res;
  res.source_of.assign(static_cast<size_t>(std::max<int64_t>(pad.dst_rows, 0)), -1);
  std::fill_n(dst, std::max<int64_t>(pad.dst_rows, 0) * row_elems, 0.f);  // torch.zeros
  const int64_t n = std::min<int64_t>(static_cast<int64_t>(pad.indices.size()), src_rows);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = pad.indices[static_cast<size_t>(i)];
    if (t < 0 || t >= pad.dst_rows) {
      res.oob.note({static_cast<uint64_t>(i), 0}, AccessKind::write, ExecBuffer::out_final, t, pad.dst_rows, true,
                   {i, -1, -1}, i, -1, -1);
      continue;
    }
    std::memcpy(dst + t * row_elems, src + i * row_elems, static_cast<size_t>(row_elems) * sizeof(float));
    res.source_of[static_cast<size_t>(t)] = i;
    ++res.rows_written;
  }
  return res;
}

// ---------------------------------------------------------------------------------------
// rotary

namespace {

struct RotaryCtx {
  const RotaryPlan& r;
  num::Precision prec;
  const float* x;
  float* y;
  int64_t rows, heads, D, numel;
  const float* cos;
  const float* sin;
  int64_t table_elems;
  bool is_q;
};

// Rotates one (row, head) with the flash_attn / fla element addressing: columns are taken
// relative to the head start without any bound but the rotary width, every element access
// checked against the tensor (and the head, for the record).
void rotate_row_head(const RotaryCtx& c, RotaryResult& res, int64_t xrow, int64_t head, int64_t pos, AccessOrder order,
                     std::array<int64_t, 3> blk, int64_t seg) {
  const int64_t R = c.r.half;
  const int64_t base = xrow * c.heads * c.D + head * c.D;
  // reads come from x, writes go to y (the same tensor when the call rotates in place)
  const ExecBuffer xb_read = c.r.inplace ? (c.is_q ? ExecBuffer::q_rot : ExecBuffer::k_rot) : (c.is_q ? ExecBuffer::q : ExecBuffer::k);
  const ExecBuffer xb_write = c.is_q ? ExecBuffer::q_rot : ExecBuffer::k_rot;
  // cos/sin row (flash_attn masks pos >= seqlen_ro only; fla masks pos < 0 as well)
  bool table_ok = pos < c.r.table_rows;
  if (c.r.contract == RotaryContract::fla) table_ok = table_ok && pos >= 0;
  if (table_ok && pos < 0) {
    res.table.note(order, AccessKind::read, ExecBuffer::cos, pos * R, c.table_elems, false, blk, xrow, seg, head);
    table_ok = false;  // not performed
  }
  if (!table_ok) {
    ++res.rows_past_table;
    if (c.r.contract == RotaryContract::fla) return;  // whole row masked: nothing read or written
  }
  uint64_t seq = order.seq;
  auto check = [&](int64_t col, AccessKind k) -> bool {
    const int64_t idx = base + col;
    const ExecBuffer xb = k == AccessKind::read ? xb_read : xb_write;
    if (idx < 0 || idx >= c.numel) {
      res.outside_tensor.note({order.block, seq++}, k, xb, idx, c.numel, false, blk, xrow, seg, head);
      return false;
    }
    if (col >= c.D) res.outside_head.note({order.block, seq++}, k, xb, idx, c.numel, false, blk, xrow, seg, head);
    return true;
  };
  auto load = [&](int64_t col) -> float { return check(col, AccessKind::read) ? c.x[base + col] : 0.f; };
  auto store = [&](int64_t col, float v) {
    if (check(col, AccessKind::write)) c.y[base + col] = num::round_to(c.prec, v);
  };
  auto cs = [&](int64_t i, float& co, float& si) {
    if (table_ok) {
      co = c.cos[pos * R + i];
      si = c.sin[pos * R + i];
    } else {
      co = 1.f;
      si = 0.f;
    }
  };
  if (!c.r.interleaved) {
    // load both halves for the whole row first (the kernel loads before it stores)
    thread_local std::vector<float> x0, x1;
    x0.resize(static_cast<size_t>(R));
    x1.resize(static_cast<size_t>(R));
    for (int64_t i = 0; i < R; ++i) {
      x0[static_cast<size_t>(i)] = load(i);
      x1[static_cast<size_t>(i)] = load(R + i);
    }
    for (int64_t i = 0; i < R; ++i) {
      float co, si;
      cs(i, co, si);
      store(i, x0[static_cast<size_t>(i)] * co - x1[static_cast<size_t>(i)] * si);
    }
    for (int64_t i = 0; i < R; ++i) {
      float co, si;
      cs(i, co, si);
      store(R + i, x0[static_cast<size_t>(i)] * si + x1[static_cast<size_t>(i)] * co);
    }
  } else {
    const int64_t W = 2 * R;
    thread_local std::vector<float> a, b;
    a.resize(static_cast<size_t>(W));
    b.resize(static_cast<size_t>(W));
    for (int64_t i = 0; i < W; ++i) {
      a[static_cast<size_t>(i)] = load(i);
      b[static_cast<size_t>(i)] = load(i ^ 1);
    }
    for (int64_t i = 0; i < W; ++i) {
      float co, si;
      cs(i / 2, co, si);
      const float o0 = a[static_cast<size_t>(i)] * co, o1 = b[static_cast<size_t>(i)] * si;
      store(i, (i % 2 == 0) ? o0 - o1 : o0 + o1);
    }
  }
  if (table_ok) ++res.rows_rotated;
}

// transformers' apply_rotary_pos_emb on one (row, head), computed in the dtype (each
// product and sum rounded), cos/sin from fp32 freqs rounded to the dtype.
void rotate_row_head_hf(const RotaryCtx& c, RotaryResult& res, int64_t xrow, int64_t head, int64_t pos) {
  const int64_t R = c.r.half;
  const int64_t base = xrow * c.heads * c.D + head * c.D;
  auto rd = [&](float v) { return num::round_to(c.prec, v); };
  for (int64_t i = 0; i < R; ++i) {
    const float co = num::rotary_cos(pos, i, c.r.dim, c.r.base, c.prec);
    const float si = num::rotary_sin(pos, i, c.r.dim, c.r.base, c.prec);
    int64_t i0 = i, i1 = i + R;
    if (c.r.interleaved) {
      i0 = 2 * i;
      i1 = 2 * i + 1;
    }
    const float x0 = c.x[base + i0], x1 = c.x[base + i1];
    c.y[base + i0] = rd(rd(x0 * co) - rd(x1 * si));
    c.y[base + i1] = rd(rd(x1 * co) + rd(x0 * si));
  }
  ++res.rows_rotated;
}

}  // namespace

RotaryResult rotary_apply(const ExecPlan& plan, bool is_q, const float* x, float* y, int64_t rows, int64_t heads,
                          const float* cos, const float* sin, int threads) {
  const RotaryPlan& r = plan.rotary;
  RotaryResult res;
  RotaryCtx c{r, plan.precision, x, y, rows, heads, plan.head_dim, rows * heads * plan.head_dim, cos, sin,
              r.table_rows * r.half, is_q};
  const bool stays_in_head = 2 * r.half <= plan.head_dim;
  const int workers = stays_in_head ? std::max(1, threads) : 1;  // cross-head writes: launch order
  std::vector<RotaryResult> part(static_cast<size_t>(workers));

  if (r.contract == RotaryContract::flash_attn && !r.varlen) {
    // Padding rows rotated before the gather drops them: flash_attn's kernel masks the cos/sin
    // load only from above (position < seqlen_ro), so a negative position (FLA's left-padding
    // offsets) reads before the start of the table (flash_attn/ops/triton/rotary.py).
    const auto& dropped = is_q ? r.dropped_rows_q : r.dropped_rows_k;
    for (const auto& [row, pos] : dropped)
      if (pos < 0)
        for (int64_t h = 0; h < heads; ++h)
          res.table.note({static_cast<uint64_t>(h) * static_cast<uint64_t>(dropped.size()) + static_cast<uint64_t>(row), 0},
                         AccessKind::read, ExecBuffer::cos, pos * c.r.half, c.table_elems, false, {row, 0, h}, row, -1, h);
  }
  if (r.contract == RotaryContract::hf || !r.varlen) {
    const auto& pos = is_q ? r.positions_q : r.positions_k;
    const int64_t n = std::min<int64_t>(rows, static_cast<int64_t>(pos.size()));
    parallel_for(workers, n, 256, [&](int64_t i, int w) {
      for (int64_t h = 0; h < heads; ++h) {
        if (r.contract == RotaryContract::hf) rotate_row_head_hf(c, part[static_cast<size_t>(w)], i, h, pos[static_cast<size_t>(i)]);
        else rotate_row_head(c, part[static_cast<size_t>(w)], i, h, pos[static_cast<size_t>(i)],
                             {static_cast<uint64_t>(h) * static_cast<uint64_t>(n) + static_cast<uint64_t>(i), 0}, {i, 0, h}, -1);
      }
    });
  } else {
    const auto& cu = is_q ? r.cu_q : r.cu_k;
    const auto& offs = is_q ? r.offsets_q : r.offsets_k;
    const int64_t batch = static_cast<int64_t>(cu.size()) - 1;
    const int64_t BM = std::max<int64_t>(r.block_rows, 1);
    auto offset_of = [&](int64_t b) -> int64_t {
      if (offs.empty()) return 0;
      if (!r.offsets_per_sequence) return offs.front();
      return b < static_cast<int64_t>(offs.size()) ? offs[static_cast<size_t>(b)] : 0;
    };
    if (r.contract == RotaryContract::flash_attn) {
      const int64_t max_seqlen = is_q ? r.max_seqlen_q : r.max_seqlen_k;
      const int64_t grid_m = (max_seqlen + BM - 1) / BM;
      // rows of the segments that no program visits (max_seqlen too small)
      for (int64_t b = 0; b < batch; ++b) {
        const int64_t len = sem::wrap_sub(cu[static_cast<size_t>(b) + 1], cu[static_cast<size_t>(b)]);
        const int64_t visited = std::min<int64_t>(std::max<int64_t>(len, 0), std::max<int64_t>(grid_m, 0) * BM);
        res.rows_not_visited += std::max<int64_t>(len, 0) - visited;
      }
      // one work item per head (programs of different heads touch disjoint columns)
      parallel_for(workers, heads, 1, [&](int64_t h, int w) {
        RotaryResult& out = part[static_cast<size_t>(w)];
        for (int64_t b = 0; b < batch; ++b) {
          const int64_t start = cu[static_cast<size_t>(b)];
          const int64_t len = sem::wrap_sub(cu[static_cast<size_t>(b) + 1], cu[static_cast<size_t>(b)]);
          const int64_t m_end = std::min<int64_t>(grid_m, (len + BM - 1) / BM);
          for (int64_t m = 0; m < m_end; ++m) {
            const uint64_t blk = (static_cast<uint64_t>(h) * static_cast<uint64_t>(batch) + static_cast<uint64_t>(b)) *
                                     static_cast<uint64_t>(grid_m) + static_cast<uint64_t>(m);
            for (int64_t rm = m * BM; rm < std::min<int64_t>((m + 1) * BM, len); ++rm)
              rotate_row_head(c, out, start + rm, h, rm + offset_of(b), {blk, static_cast<uint64_t>(rm - m * BM) << 20},
                              {m, b, h}, b);
          }
        }
      });
    } else {
      // fla: chunk_indices over every segment; program (chunk, 0, head)
      std::vector<std::pair<int64_t, int64_t>> chunks;  // (segment, chunk)
      for (int64_t b = 0; b < batch; ++b) {
        const int64_t len = int64_t(cu[static_cast<size_t>(b) + 1]) - int64_t(cu[static_cast<size_t>(b)]);
        const int64_t n = len > 0 ? (len + BM - 1) / BM : 0;
        for (int64_t t = 0; t < n; ++t) chunks.emplace_back(b, t);
      }
      const int64_t NT = static_cast<int64_t>(chunks.size());
      parallel_for(workers, heads, 1, [&](int64_t h, int w) {
        RotaryResult& out = part[static_cast<size_t>(w)];
        for (int64_t ci = 0; ci < NT; ++ci) {
          const auto [b, t] = chunks[static_cast<size_t>(ci)];
          const int64_t bos = cu[static_cast<size_t>(b)];
          const int64_t len = int64_t(cu[static_cast<size_t>(b) + 1]) - bos;
          const uint64_t blk = static_cast<uint64_t>(h) * static_cast<uint64_t>(NT) + static_cast<uint64_t>(ci);
          for (int64_t ot = t * BM; ot < std::min<int64_t>((t + 1) * BM, len); ++ot)
            rotate_row_head(c, out, bos + ot, h, ot + offset_of(b), {blk, static_cast<uint64_t>(ot - t * BM) << 20},
                            {ci, 0, h}, b);
        }
      });
    }
  }
  for (const RotaryResult& p : part) {
    res.outside_tensor.merge(p.outside_tensor);
    res.outside_head.merge(p.outside_head);
    res.table.merge(p.table);
    res.rows_rotated += p.rows_rotated;
    res.rows_past_table += p.rows_past_table;
  }
  return res;
}

}  // namespace ad::cpu
