// The tensor-core varlen backward's key-block kernels for fp16 (head dim 96 in
// varlen_attention_bwd_tc_d96_fp16.cu; varlen_attention_bwd.cuh; their
// launcher in varlen_attention_bwd.cu); one element type per file so the instantiations
// compile in parallel.
#include "varlen_attention_bwd.cuh"
#include "launch.hpp"

namespace ad::kern::detail {
BwdKernel varlen_bwd_tc_fp16(int head_dim, int block_m, bool checked) {
  if (head_dim == 96) return varlen_bwd_tc_d96_fp16(block_m, checked);
  return bwd::bwd_kernel<__half>(head_dim, block_m, checked);
}
}  // namespace ad::kern::detail
