// CPU twins of the checked unpad gather, pad scatter and rotary kernels.
//
// Gather and scatter follow torch's index_first_axis / pad_input (flash_attn.bert_padding;
// transformers.modeling_flash_attention_utils). Rotary follows the three contracts of
// docs/spec/execution.md (geometry in contract/rotary.hpp): flash_attn v2.6.3 flash_attn/ops/triton/rotary.py
// (rotary_kernel: grid (cdiv(max_seqlen, BLOCK_M), batch, heads), rows past max_seqlen's
// programs untouched, table rows masked with cos=1/sin=0), fla fla/modules/rotary.py
// (rotary_embedding_kernel: chunks of every segment, columns bounded by R = dim/2 only,
// masked rows left as the output was allocated), and transformers' apply_rotary_pos_emb.
#include <cmath>
#include <cstring>
#include <limits>

#include "exec/cpu/rotary_walk.hpp"
#include "exec/cpu/cpu_kernels.hpp"

namespace ad::cpu {

GatherObservation gather_rows(const GatherPlan& g, const float* src, float* dst, int64_t row_elems, Buffer src_buffer,
                              int threads) {
  GatherObservation res;
  const int64_t n = static_cast<int64_t>(g.indices.size());
  const int workers = std::max(1, threads);
  std::vector<AccessRecord> rec(static_cast<size_t>(workers));
  parallel_for(workers, n, 4096, [&](int64_t i, int w) {
    const int64_t s = g.indices[static_cast<size_t>(i)];
    if (s < 0 || s >= g.src_rows) {
      // torch.gather: "index out of bounds" device assert; the row is not copied
      rec[static_cast<size_t>(w)].note(order::key(uint64_t(i), order::kRead, 0),
                                       Access{.buffer = src_buffer, .kind = AccessKind::read, .unit = Unit::rows,
                                              .index = s, .bound = g.src_rows, .block = {i, -1, -1}, .row = i});
      return;
    }
    std::memcpy(dst + i * row_elems, src + s * row_elems, static_cast<size_t>(row_elems) * sizeof(float));
  });
  for (auto& r : rec) res.out_of_range.merge(r);
  return res;
}

ScatterObservation scatter_rows(const PadPlan& pad, const float* src, int64_t src_rows, float* dst, int64_t row_elems) {
  ScatterObservation res;
  res.source_of.assign(static_cast<size_t>(std::max<int64_t>(pad.dst_rows, 0)), -1);
  std::fill_n(dst, std::max<int64_t>(pad.dst_rows, 0) * row_elems, 0.f);  // torch.zeros
  const int64_t n = std::min<int64_t>(static_cast<int64_t>(pad.indices.size()), src_rows);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = pad.indices[static_cast<size_t>(i)];
    if (t < 0 || t >= pad.dst_rows) {
      res.out_of_range.note(order::key(uint64_t(i), order::kRead, 0),
                   Access{.buffer = Buffer::out_final, .kind = AccessKind::write, .unit = Unit::rows, .index = t,
                          .bound = pad.dst_rows, .block = {i, -1, -1}, .row = i});
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
  ElemType prec;
  const float* x;
  float* y;
  int64_t rows, heads, D, numel;
  const float* cos;
  const float* sin;
  int64_t table_elems;
  bool is_q;
  bool conjugate;  // the adjoint: every pair rotated by the opposite angle
};

// Rotates one (row, head) with the flash_attn / fla element addressing: columns are taken
// relative to the head start without any bound but the rotary width, every element access
// checked against the tensor (and the head, for the record). `program` and `rin` (the row in
// the program) place its accesses in launch order (contract/launch_order.hpp).
void rotate_row_head(const RotaryCtx& c, RotaryCallObservation& res, int64_t xrow, int64_t head, int64_t pos, uint64_t program,
                     int64_t rin, std::array<int64_t, 3> blk, int64_t seg) {
  const int64_t R = c.r.half;
  const int64_t base = xrow * c.heads * c.D + head * c.D;
  // reads come from x, writes go to y (the same tensor when the call rotates in place)
  const Buffer xb_read = c.r.inplace ? (c.is_q ? Buffer::q_rot : Buffer::k_rot) : (c.is_q ? Buffer::q : Buffer::k);
  const Buffer xb_write = c.is_q ? Buffer::q_rot : Buffer::k_rot;
  auto access = [&](Buffer b, AccessKind k, Region region, int64_t idx, int64_t bound) {
    return Access{.buffer = b, .kind = k, .unit = Unit::elements, .region = region, .index = idx, .bound = bound,
                  .block = {blk[0], blk[1], blk[2]}, .segment = seg, .row = xrow, .head = head};
  };
  // cos/sin row (flash_attn masks pos >= seqlen_ro only; fla masks pos < 0 as well)
  bool table_ok = pos < c.r.table_rows;
  if (c.r.contract == RotaryContract::fla) table_ok = table_ok && pos >= 0;
  if (table_ok && pos < 0) {
    res.table.note(order::key(program, order::kRead, order::rotary_sub(rin, 0)),
                   access(Buffer::cos, AccessKind::read, Region::table, pos * R, c.table_elems));
    table_ok = false;  // not performed
  }
  if (!table_ok) {
    ++res.past_table;
    if (c.r.contract == RotaryContract::fla) return;  // whole row masked: nothing read or written
  } else {
    ++res.rotated;
  }
  // A row wholly outside the tensor (a segment running past it): every access is refused,
  // the first being the read of column 0; counted at once.
  if (base >= c.numel || base + 2 * R <= 0) {
    res.outside_tensor.note(order::key(program, order::kRead, order::rotary_sub(rin, 0)),
                            access(xb_read, AccessKind::read, Region::tensor, base, c.numel),
                            uint64_t(rope::accesses_per_row_head(R, c.r.interleaved)));
    return;
  }
  int64_t n = 0;  // refused accesses of this row so far
  auto check = [&](int64_t col, AccessKind k) -> bool {
    const int64_t idx = base + col;
    const Buffer xb = k == AccessKind::read ? xb_read : xb_write;
    const uint64_t key = order::key(program, order::kRead, order::rotary_sub(rin, n));
    if (idx < 0 || idx >= c.numel) {
      ++n;
      res.outside_tensor.note(key, access(xb, k, Region::tensor, idx, c.numel));
      return false;
    }
    if (col >= c.D) {
      ++n;
      res.outside_head.note(key, access(xb, k, Region::head, idx, c.numel));
    }
    return true;
  };
  auto load = [&](int64_t col) -> float { return check(col, AccessKind::read) ? c.x[base + col] : 0.f; };
  auto store = [&](int64_t col, float v) {
    if (check(col, AccessKind::write)) c.y[base + col] = num::round_to(c.prec, v);
  };
  auto cs = [&](int64_t i, float& co, float& si) {
    if (table_ok) {
      co = c.cos[pos * R + i];
      si = c.conjugate ? -c.sin[pos * R + i] : c.sin[pos * R + i];
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
}

// transformers' apply_rotary_pos_emb on one (row, head), computed in the dtype (each
// product and sum rounded), cos/sin from fp32 freqs rounded to the dtype.
void rotate_row_head_hf(const RotaryCtx& c, RotaryCallObservation& res, int64_t xrow, int64_t head, int64_t pos) {
  const int64_t R = c.r.half;
  const int64_t base = xrow * c.heads * c.D + head * c.D;
  auto rd = [&](float v) { return num::round_to(c.prec, v); };
  for (int64_t i = 0; i < R; ++i) {
    const float co = num::rotary_cos(pos, i, c.r.dim, c.r.base, c.prec);
    const float sn = num::rotary_sin(pos, i, c.r.dim, c.r.base, c.prec), si = c.conjugate ? -sn : sn;
    int64_t i0 = i, i1 = i + R;
    if (c.r.interleaved) {
      i0 = 2 * i;
      i1 = 2 * i + 1;
    }
    const float x0 = c.x[base + i0], x1 = c.x[base + i1];
    c.y[base + i0] = rd(rd(x0 * co) - rd(x1 * si));
    c.y[base + i1] = rd(rd(x1 * co) + rd(x0 * si));
  }
  ++res.rotated;
}

}  // namespace

std::vector<float> rotary_output(const ExecPlan& plan, const float* x, int64_t rows, int64_t heads) {
  const int64_t D = plan.head_dim;
  std::vector<float> y(x, x + rows * heads * D);
  if (plan.rotary.contract == RotaryContract::fla) {
    // a new tensor: its rotary columns are uninitialised, the others copied
    const int64_t cols = std::min<int64_t>(2 * plan.rotary.half, D);
    for (int64_t i = 0; i < rows * heads; ++i)
      std::fill_n(y.data() + i * D, cols, std::numeric_limits<float>::quiet_NaN());
  }
  return y;
}

RotaryCallObservation rotary_apply(const ExecPlan& plan, bool is_q, const float* x, float* y, int64_t rows,
                                   int64_t heads, const float* cos, const float* sin, int threads, bool conjugate) {
  const RotaryPlan& r = plan.rotary;
  RotaryCallObservation res;
  RotaryCtx c{r, plan.elem, x, y, rows, heads, plan.head_dim, rows * heads * plan.head_dim, cos, sin,
              r.table_rows * r.half, is_q, conjugate};
  const bool stays_in_head = 2 * r.half <= plan.head_dim;
  const int workers = stays_in_head ? std::max(1, threads) : 1;  // cross-head writes: launch order
  std::vector<RotaryCallObservation> part(static_cast<size_t>(workers));

  if (r.contract == RotaryContract::flash_attn && !r.varlen) {
    // Padding rows rotated before the gather drops them: flash_attn's kernel masks the cos/sin
    // load only from above (position < seqlen_ro), so a negative position (FLA's left-padding
    // offsets) reads before the start of the table (flash_attn/ops/triton/rotary.py).
    const auto& dropped = is_q ? r.dropped_rows_q : r.dropped_rows_k;
    for (const auto& [row, pos] : dropped)
      if (pos < 0)
        for (int64_t h = 0; h < heads; ++h)
          res.table.note(order::key(uint64_t(h) * uint64_t(dropped.size()) + uint64_t(row), order::kRead, 0),
                         Access{.buffer = Buffer::cos, .kind = AccessKind::read, .region = Region::table,
                                .index = pos * c.r.half, .bound = c.table_elems, .block = {row, 0, h}, .row = row,
                                .head = h});
  }
  if (r.contract == RotaryContract::hf || !r.varlen) {
    const auto& pos = is_q ? r.positions_q : r.positions_k;
    const int64_t n = std::min<int64_t>(rows, static_cast<int64_t>(pos.size()));
    parallel_for(workers, n, 256, [&](int64_t i, int w) {
      for (int64_t h = 0; h < heads; ++h) {
        if (r.contract == RotaryContract::hf) rotate_row_head_hf(c, part[static_cast<size_t>(w)], i, h, pos[static_cast<size_t>(i)]);
        else rotate_row_head(c, part[static_cast<size_t>(w)], i, h, pos[static_cast<size_t>(i)], uint64_t(h) * uint64_t(n) + uint64_t(i),
                             0, {i, 0, h}, -1);
      }
    });
  } else {
    // varlen: the programs of every segment, rows that can touch x rotated one by one, the
    // rest of each segment (wholly outside x) counted at once
    const RotaryWalk walk(plan, is_q, rows, heads);
    for (int64_t b = 0; b < walk.segments(); ++b) res.not_visited += walk.not_visited(b);
    // one work item per head (programs of different heads touch disjoint columns)
    parallel_for(workers, heads, 1, [&](int64_t h, int w) {
      RotaryCallObservation& out = part[static_cast<size_t>(w)];
      for (int64_t b = 0; b < walk.segments(); ++b) {
        const auto [lo, hi] = walk.run(b);
        for (int64_t rm = lo; rm < hi; ++rm)
          rotate_row_head(c, out, walk.start(b) + rm, h, rm + walk.offset(b), walk.program(b, rm, h),
                          walk.row_in_program(rm), walk.block(b, rm, h), b);
      }
    });
    count_rotary_rows_outside(plan, is_q, walk, rows, heads, res);
  }
  for (const RotaryCallObservation& p : part) {
    res.outside_tensor.merge(p.outside_tensor);
    res.outside_head.merge(p.outside_head);
    res.table.merge(p.table);
    res.rotated += p.rotated;
    res.past_table += p.past_table;
  }
  return res;
}

RotaryObservation rotary_stage(const ExecPlan& plan, const float* q, const float* k, const RotaryTable& table,
                               std::vector<float>& q_rot, std::vector<float>& k_rot, int threads) {
  const int64_t total_q = std::max<int64_t>(plan.attention.total_q, 0), total_k = std::max<int64_t>(plan.attention.total_k, 0);
  q_rot = rotary_output(plan, q, total_q, plan.num_heads);
  k_rot = rotary_output(plan, k, total_k, plan.num_kv_heads);
  RotaryObservation ob;
  ob.q = rotary_apply(plan, true, q, q_rot.data(), total_q, plan.num_heads, table.cos.data(), table.sin.data(), threads);
  ob.k = rotary_apply(plan, false, k, k_rot.data(), total_k, plan.num_kv_heads, table.cos.data(), table.sin.data(),
                      threads);
  return ob;
}

}  // namespace ad::cpu

namespace ad {

void host_rotary_adjoint(const ExecPlan& plan, const RotaryTable& table, bool is_q, std::vector<float>& g, int64_t rows,
                         int64_t heads, int threads) {
  if (g.empty()) return;
  std::vector<float> y = cpu::rotary_output(plan, g.data(), rows, heads);
  cpu::rotary_apply(plan, is_q, g.data(), y.data(), rows, heads, table.cos.data(), table.sin.data(), threads, true);
  g = std::move(y);
}

}  // namespace ad
