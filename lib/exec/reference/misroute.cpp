// The dq_accum offsets of every tile of the three backward launches against the intended ones
// (misroute.hpp): the release's offset rule (fa2::bwd::dq_accum_offset) replayed on integers.
#include "exec/reference/misroute.hpp"

#include <algorithm>

namespace ad::ref {

// Every tile of every launch, no values.
MisrouteResult backward_misroutes(const ExecPlan& plan) {
  MisrouteResult res;
  const BackwardPlan& bw = plan.backward;
  const AttentionPlan& at = plan.attention;
  const int64_t total_q = std::max<int64_t>(at.total_q, 0);
  if (!bw.enabled || !bw.kernel.launches || at.cu_seqlens_q.size() < 2 || at.cu_seqlens_k.size() < 2) return res;
  const fa2::bwd::DqAccumShape& a = bw.dq_accum;
  const fa2::bwd::Normalized& kn = bw.kernel;
  const int bm = kn.tile.block_m;
  const fa2::bwd::DqOffset rule = bw.release.dq_offset;
  const int64_t H = a.num_heads;
  const int64_t N = std::min<int64_t>(at.num_segments, static_cast<int64_t>(at.cu_seqlens_q.size()) - 1);
  res.rows.assign(static_cast<size_t>(total_q), 0);
  // the dense kernel's backward (mha_bwd) lays dq_accum out per batch row, not from cu_seqlens:
  // its offsets are not this contract's
  if (rule == fa2::bwd::DqOffset::int64 || plan.function != "flash_attn_varlen_func") return res;
  const int64_t limit = int64_t{1} << 31;
  for (int64_t b = 0; b < N && b + 1 < static_cast<int64_t>(at.cu_seqlens_k.size()); ++b) {
    const BackwardSegment s = backward_segment(at, b);
    const int64_t M = backward_m_blocks(s.len_q, bm);
    if (M == 0 || s.start_q >= total_q) continue;
    // nothing can wrap while the largest intended offset of the segment stays below 2^31
    const int64_t top_off = fa2::bwd::dq_accum_offset_intended(a, s.cu_q, b, H - 1, M - 1, bm, 0) + a.d_rounded;
    if (top_off < limit) continue;
    for (int64_t m = 0; m < M; ++m) {
      const int64_t row0 = s.start_q + m * bm;
      if (row0 >= total_q) break;
      for (int64_t h = 0; h < H; ++h) {
        const int64_t want = fa2::bwd::dq_accum_offset_intended(a, s.cu_q, b, h, m, bm, 0);
        int64_t got = want;
        // dot_do_o and convert_dQ (their grid: m < grid_m)
        if (m < kn.grid_m) {
          const int64_t t = fa2::bwd::dq_accum_offset(rule, fa2::bwd::DqKernel::per_tile, a, s.cu_q, b, h, m, m, bm, 0);
          if (t != want) got = t;
        }
        // dq_dk_dv: stepped back from the top m block of each key block visiting m
        if (got == want) {
          if (!kn.flags.local) {
            const fa2::bwd::KeyBlockRange r = fa2::bwd::key_block_range(0, s.len_q, std::max<int32_t>(s.len_k, 1), kn.flags);
            const int64_t top = r.m_max - 1;
            if (m <= top) {
              const int64_t t = fa2::bwd::dq_accum_offset(rule, fa2::bwd::DqKernel::dq_dk_dv, a, s.cu_q, b, h, m, top, bm, 0);
              if (t != want) got = t;
            }
          } else {
            for (int64_t n = 0; n < kn.n_blocks && got == want; ++n) {
              const fa2::bwd::KeyBlockRange r = fa2::bwd::key_block_range(n, s.len_q, s.len_k, kn.flags);
              if (r.exits) break;
              if (r.empty || m < r.m_min || m >= r.m_max) continue;
              const int64_t t =
                  fa2::bwd::dq_accum_offset(rule, fa2::bwd::DqKernel::dq_dk_dv, a, s.cu_q, b, h, m, r.m_max - 1, bm, 0);
              if (t != want) got = t;
            }
          }
        }
        if (got == want) continue;
        const int64_t r_end = std::min<int64_t>({s.start_q + std::min<int64_t>((m + 1) * bm, s.len_q), total_q});
        for (int64_t r = row0; r < r_end; ++r) {
          if (!res.rows[static_cast<size_t>(r)]) ++res.misroute.rows;
          res.rows[static_cast<size_t>(r)] = 1;
        }
        if (res.misroute.first_row < 0 || row0 < res.misroute.first_row) {
          res.misroute.first_row = row0;
          res.misroute.segment = b;
          res.misroute.head = h;
          res.misroute.m_block = m;
          res.misroute.intended = want;
          res.misroute.offset = got;
        }
        break;  // the rows are counted; other heads add nothing
      }
    }
  }
  return res;
}

}  // namespace ad::ref
