// One varlen attention call on the caller's buffers, run by the CPU twins (no batch file, no
// stage driver): what attn_doctor.ops runs for a CPU tensor. The call is described by its
// operands (any strides), cu_seqlens as read, the masks and the scale; the plan is built the
// way make_exec_plan builds the attention part of a batch's (FA2's normalisation, tile,
// grid, LSE layout), so the accesses refused and the rows written are the kernel's.
//
// Output rows no CTA writes keep NaN (what stands for torch.empty's contents), so a row the
// call leaves unreliable is marked in the tensor itself as well as counted.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "contract/access_record.hpp"
#include "contract/vocabulary.hpp"

namespace ad::direct {

// A (rows, heads, dim) tensor as the caller holds it: element strides, element type.
struct TensorView {
  const void* data = nullptr;
  int64_t rows = 0, heads = 0, dim = 0;
  int64_t stride[3] = {0, 0, 1};
};

struct VarlenCall {
  ElemType elem = ElemType::bf16;
  TensorView q, k, v;
  std::vector<int32_t> cu_seqlens_q, cu_seqlens_k;  // as the kernel reads them
  int64_t max_seqlen_q = 0, max_seqlen_k = 0;
  float softmax_scale = 0.f;
  float softcap = 0.f;  // 0: none
  bool causal = false;
  int64_t window_left = -1, window_right = -1;
  // seqused_k (FA2's mha_varlen_fwd, torch's varlen_attn from 2.12, FA3): the keys segment b
  // uses in the forward. The backward takes none (mha_varlen_bwd): its launch check records
  // the keys between seqused_k[b] and the segment's length (contract/fa2_backward.hpp).
  std::optional<std::vector<int32_t>> seqused_k;
};

// What mha_varlen_fwd / the launch would refuse on the host for this call ("" when nothing):
// the shapes the kernels cannot take (heads not dividing, head dim past 256, no segment, a
// max_seqlen past a C int), as the release's message says it where it has one.
std::string host_refusal(const VarlenCall& c);

// Rows of one output written by no launch (NaN) or by more than one segment.
struct Coverage {
  int64_t unwritten = 0, first_unwritten = -1;
  int64_t overwritten = 0, first_overwritten = -1;
};

struct ForwardResult {
  AccessRecord access;      // refused accesses, the CTAs wholly past q/out included
  Coverage rows;            // of out (packed rows)
};
// out: contiguous (q.rows, H, D) of c.elem; lse: fp32 (H, q.rows), FA2's unpadded layout.
ForwardResult varlen_forward(const VarlenCall& c, void* out, float* lse, int threads);

struct BackwardResult {
  // one record per launch; dot_do_o's holds the launch check too (the keys the backward leaves
  // out while the forward used them: Region::max_seqlen, Region::seqused), as the checked CUDA
  // preprocess kernel records it
  AccessRecord dot_do_o, dq_dk_dv, convert_dq;
  Coverage dq_rows, dkv_rows;
};
// out, dout: as the forward returned / the caller holds them; lse: the forward's. dq (q.rows,
// H, D), dk and dv (k.rows, Hk, D): contiguous, of c.elem.
BackwardResult varlen_backward(const VarlenCall& c, const TensorView& out, const TensorView& dout, const float* lse,
                               void* dq, void* dk, void* dv, int threads);

// ---- rotary --------------------------------------------------------------------------------

// One rotary call (flash_attn's apply_rotary_emb, FLA's rotary_embedding) on the caller's x,
// run by the CPU twin of the rotary kernels (cpu::rotary_apply, the plan built as
// make_exec_plan builds a batch's RotaryPlan: contract/rotary.hpp's geometry). Positions are
// those the kernel computes: varlen, row in segment + offset (cu_seqlens, flash_attn's grid
// from max_seqlen); dense (batch * seqlen rows), row in sequence + offset.
struct RotaryCall {
  ElemType elem = ElemType::bf16;
  RotaryContract contract = RotaryContract::flash_attn;
  TensorView x;                      // (rows, heads, dim)
  int64_t half = 0;                  // cos/sin columns: the rotation covers 2 * half columns
  bool interleaved = false;
  bool inplace = false;              // fla: false writes a new tensor (torch.empty_like)
  std::vector<float> cos, sin;       // (table_rows, half), fp32
  int64_t table_rows = 0;
  bool varlen = false;
  std::vector<int32_t> cu_seqlens;   // varlen
  int64_t max_seqlen = 0;            // varlen: flash_attn's grid
  int64_t seqlen = 0;                // dense: rows per sequence
  bool per_sequence = false;         // offsets: one per sequence, else one for all
  std::vector<int64_t> offsets;
  int fa_minor = 8;                  // flash-attn 2.x minor release (its BLOCK_M)
  bool conjugate = false;            // the backward: the opposite angle
};

struct RotaryResult {
  AccessRecord outside_tensor, outside_head, table;  // refused (tensor, table) or performed (head)
  int64_t rotated = 0;       // (row, head) pairs rotated
  int64_t left = 0;          // (row, head) pairs at a position outside the table: not rotated
  int64_t not_visited = 0;   // rows no program visited (flash_attn's grid from max_seqlen)
  Coverage rows;             // output rows whose rotated columns no program wrote (a new tensor: NaN)
};
// out: contiguous (x.rows, heads, dim) of c.elem.
RotaryResult rotary(const RotaryCall& c, void* out, int threads);

}  // namespace ad::direct
