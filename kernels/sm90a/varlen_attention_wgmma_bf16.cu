// The wgmma varlen forward's instantiations for bf16 (the kernel in varlen_attention_wgmma.cuh,
// its launcher in kernels/varlen_attention.cu), compiled for sm_90a only (CMakeLists.txt:
// attn_doctor_cuda_sm90a); one element type per file so the instantiations compile in parallel.
#include "varlen_attention_wgmma.cuh"
#include "launch.hpp"

namespace ad::kern::detail {
FwdKernel varlen_fwd_wgmma_bf16(int head_dim, bool checked, bool alt) {
  if (head_dim == 192 && !alt) return varlen_fwd_wgmma_d192_bf16(checked);
  return attn::wgmma_kernel<__nv_bfloat16>(head_dim, checked, alt);
}
}  // namespace ad::kern::detail
