// The dq_accum misroute arithmetic of the varlen backward (contract/fa2_backward.hpp): which
// packed q rows have their dq accumulated through a dq_accum tile at an offset other than the
// intended (64-bit) one, from the plan's integers alone. Not a twin of a kernel: no value is
// computed, so it runs for any batch and any engine. Internal to lib/exec.
#pragma once

#include <cstdint>
#include <vector>

#include "contract/fa2_backward.hpp"
#include "exec/engine.hpp"
#include "exec/plan/plan.hpp"

namespace ad::ref {

// One segment as the backward's launches read it: cu_seqlens_q[b] as read, its row offset and
// length, and the keys' (cu_k[b + 1] - cu_k[b]: mha_varlen_bwd takes no seqused_k). The CPU
// twin of the backward (cpu/cpu_backward.cpp) reads segments the same way.
struct BackwardSegment {
  int32_t cu_q;       // cu_seqlens_q[b] as read
  int64_t start_q;    // uint32(cu_q[b])
  int32_t len_q;
  int64_t start_k;
  int32_t len_k;      // cu_k[b + 1] - cu_k[b]: mha_varlen_bwd takes no seqused_k
};
inline BackwardSegment backward_segment(const AttentionPlan& at, int64_t b) {
  const auto& cq = at.cu_seqlens_q;
  const auto& ck = at.cu_seqlens_k;
  BackwardSegment s;
  s.cu_q = cq[static_cast<size_t>(b)];
  s.start_q = fa2::row_offset(s.cu_q);
  s.len_q = fa2::wrap_sub(cq[static_cast<size_t>(b) + 1], cq[static_cast<size_t>(b)]);
  s.start_k = fa2::row_offset(ck[static_cast<size_t>(b)]);
  s.len_k = fa2::wrap_sub(ck[static_cast<size_t>(b) + 1], ck[static_cast<size_t>(b)]);
  return s;
}

// The m blocks of a segment the three launches may touch: those of its rows (the dq_dk_dv
// range never exceeds ceil(len_q / kBlockM)).
inline int64_t backward_m_blocks(int32_t len_q, int bm) { return len_q > 0 ? (int64_t(len_q) + bm - 1) / bm : 0; }

// The dq_accum offsets of every tile of the three backward launches against the intended
// (64-bit) ones, without values (contract/fa2_backward.hpp): cheap enough for any batch, so it
// also runs where the tensors are too large to materialise. The driver runs it for
// every engine (an engine may also leave its own `dq_misrouted` empty).
struct MisrouteResult {
  std::vector<uint8_t> rows;  // per packed q row (total_q): its dq went through a misplaced tile
  DqMisroute misroute;
};
MisrouteResult backward_misroutes(const ExecPlan& plan);

}  // namespace ad::ref
