// The CPU twins of the checked kernels (internal to lib/exec). Each takes the plan and plain
// buffers, performs only in-bounds accesses, and returns what it observed (engine.hpp); the
// CPU engine (cpu_engine.cpp) runs them, and the CUDA engine where its kernels do not cover
// a call. The references the driver compares against are not twins: exec/reference/.
//
// Tensors are fp32 arrays holding values of the batch's dtype, row-major (rows, heads, dim).
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <thread>
#include <vector>

#include "contract/access_record.hpp"
#include "contract/rotary.hpp"
#include "exec/engine.hpp"
#include "exec/plan/plan.hpp"
#include "util/parallel.hpp"

namespace ad::cpu {

// ---- unpad / pad ------------------------------------------------------------------------

// dst[i] = src[indices[i]] for the rows of a (rows, row_elems) tensor; a refused index is
// recorded as a read of `src_buffer`.
GatherObservation gather_rows(const GatherPlan& g, const float* src, float* dst, int64_t row_elems, Buffer src_buffer,
                              int threads);

// dst = zeros; dst[indices[i]] = src[i] (pad_input: sequential, a repeated index keeps the last).
ScatterObservation scatter_rows(const PadPlan& pad, const float* src, int64_t src_rows, float* dst, int64_t row_elems);

// ---- rotary -----------------------------------------------------------------------------

// The output tensor of a rotary call on x (rows, heads, D): a copy of x (the flash_attn layer
// rotates in place), or, for fla's new tensor, poison in the rotated columns.
std::vector<float> rotary_output(const ExecPlan& plan, const float* x, int64_t rows, int64_t heads);

// One rotary call on a packed tensor x (rows, heads, D) into y (prepared by rotary_output).
// `conjugate` runs its adjoint, the backward every implementation has (each pair rotated by
// the opposite angle: flash_attn's ApplyRotaryEmb.backward calls the same kernel with
// conjugate=True, flash_attn/layers/rotary.py; FLA's rotary backward and autograd through
// transformers' apply_rotary_pos_emb do the same).
RotaryCallObservation rotary_apply(const ExecPlan& plan, bool is_q, const float* x, float* y, int64_t rows,
                                   int64_t heads, const float* cos, const float* sin, int threads, bool conjugate = false);

// The rotary stage on the packed q (attention.total_q rows) and k (total_k rows) into q_rot and
// k_rot: what the CPU engine runs, and the CUDA engine on host copies where its kernel does not
// cover the call.
RotaryObservation rotary_stage(const ExecPlan& plan, const float* q, const float* k, const RotaryTable& table,
                               std::vector<float>& q_rot, std::vector<float>& k_rot, int threads);

// ---- attention --------------------------------------------------------------------------

struct AttentionResult {
  AccessRecord access;               // attention.access (the CTAs with a row inside q/out)
  std::vector<uint32_t> writes;      // per packed row of `out`: the segments that write it
  std::vector<uint8_t> computed;     // per packed row: its values were computed (or zero-filled)
  int64_t tiles = 0, empty_tiles = 0, rows_computed = 0;
  int64_t rows_no_keys = 0;          // computed rows with no visible key (0 output, +inf LSE)
  double macs = 0;                   // multiply-adds performed (QK + PV)
};
// FA2 varlen forward over packed q (total_q, H, D), k/v (total_k, Hk, D) into out and lse,
// following plan.attention (grid, exits, masks, swapped path, sampling). FA3's extensions:
// with plan.attention.paged, k/v are the pool and key j of segment b is read through the page
// table (contract/fa3_paged.hpp, every read checked); with plan.attention.qv, `qv` (q's shape)
// adds q_v . v_j to each score.
AttentionResult fa2_varlen_forward(const ExecPlan& plan, const float* q, const float* k, const float* v, float* out,
                                   float* lse, int threads, const float* qv = nullptr);

// The attention stage's observation of a forward the twin ran (the CPU engine's, and the CUDA
// engine's for the calls its kernels do not cover).
inline AttentionObservation attention_observation(AttentionResult&& r) {
  AttentionObservation ob;
  ob.access = std::move(r.access);
  ob.writes = std::move(r.writes);
  ob.computed = std::move(r.computed);
  ob.facts.tiles = r.tiles;
  ob.facts.macs = r.macs;
  ob.facts.empty_tiles = r.empty_tiles;
  ob.facts.row_heads_without_keys = r.rows_no_keys;
  return ob;
}

// ---- backward -----------------------------------------------------------------------------

// FA2 varlen backward (plan.backward) over the packed q, k (as rotated), v, the forward's out
// and LSE, and the packed dO.
AttentionBackwardObservation fa2_varlen_backward(const ExecPlan& plan, const float* q, const float* k, const float* v,
                                                 const float* out, const float* lse, const float* dout, int threads);

}  // namespace ad::cpu
