// The tensor-core varlen forward's instantiations (head dims 64 and 128; the others in
// varlen_attention_tc_wide_fp16.cu) for fp16 (the kernel in varlen_attention.cuh,
// its launcher in varlen_attention.cu); one element type per file so the instantiations
// compile in parallel.
#include "varlen_attention.cuh"
#include "launch.hpp"

namespace ad::kern::detail {
FwdKernels varlen_fwd_tc_fp16(int head_dim, int block_m, FwdForm form, bool alt_shape) {
  if (head_dim != 64 && head_dim != 128) return varlen_fwd_tc_wide_fp16(head_dim, block_m, form, alt_shape);
  return attn::tc_kernel<__half>(head_dim, form, alt_shape);
}
}  // namespace ad::kern::detail
