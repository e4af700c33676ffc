// The tensor-core varlen backward's key-block kernels for fp16 (head dims 96, 192 and 256 in
// varlen_attention_bwd_tc_d{96,192,256}_fp16.cu; varlen_attention_bwd.cuh; their
// launcher in varlen_attention_bwd.cu); one element type per file so the instantiations
// compile in parallel.
#include "varlen_attention_bwd.cuh"
#include "launch.hpp"

namespace ad::kern::detail {
BwdKernel varlen_bwd_tc_fp16(int head_dim, int block_m, bool checked) {
  if (head_dim == 96) return varlen_bwd_tc_d96_fp16(block_m, checked);
  if (head_dim == 192) return varlen_bwd_tc_d192_fp16(block_m, checked);
  if (head_dim == 256) return varlen_bwd_tc_d256_fp16(block_m, checked);
  return bwd::bwd_kernel<__half>(head_dim, block_m, checked);
}
}  // namespace ad::kern::detail
