// The tensor-core varlen forward's instantiations for bf16 at head dims 96 and 192 (the kernel in
// varlen_attention.cuh, its launcher in varlen_attention.cu); 256 is in
// varlen_attention_tc_d256_bf16.cu, so that the instantiations compile in parallel.
#include "varlen_attention.cuh"
#include "launch.hpp"

namespace ad::kern::detail {
FwdKernels varlen_fwd_tc_wide_bf16(int head_dim, int block_m, FwdForm form, bool alt_shape) {
  if (alt_shape) throw cuda::LaunchConfigError("the other tensor-core shape is built for head dims 64 and 128 only");
  if (head_dim == 96) return attn::tc_kernel_wide<__nv_bfloat16, 96>(block_m, form);
  if (head_dim == 192) return attn::tc_kernel_wide<__nv_bfloat16, 192>(block_m, form);
  if (head_dim == 256) return varlen_fwd_tc_d256_bf16(block_m, form);
  throw cuda::LaunchConfigError("tensor-core varlen forward: head_dim " + std::to_string(head_dim) +
                                " has no instantiation (64, 96, 128, 192, 256)");
}
}  // namespace ad::kern::detail
