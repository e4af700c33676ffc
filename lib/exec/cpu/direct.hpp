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

}  // namespace ad::direct
