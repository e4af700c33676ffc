// The tensor-core varlen forward's instantiations for bf16 (the kernel in varlen_attention.cuh,
// its launcher in varlen_attention.cu); one element type per file so the instantiations
// compile in parallel.
#include "varlen_attention.cuh"
#include "launch.hpp"

namespace ad::kern::detail {
FwdKernel varlen_fwd_tc_bf16(int head_dim, bool checked, bool alt_shape) {
  return attn::tc_kernel<__nv_bfloat16>(head_dim, checked, alt_shape);
}
}  // namespace ad::kern::detail
