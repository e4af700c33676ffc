// The wgmma varlen forward's instantiations for bf16 (the kernel in varlen_attention_wgmma.cuh,
// its launcher in kernels/varlen_attention.cu), compiled for sm_90a only (CMakeLists.txt:
// attn_doctor_cuda_sm90a); one element type per file so the instantiations compile in parallel.
#include "varlen_attention_wgmma.cuh"
#include "launch.hpp"

namespace ad::kern::detail {
FwdKernels varlen_fwd_wgmma_bf16(int head_dim, FwdForm form, bool alt) {
  if (head_dim == 192 && !alt) return varlen_fwd_wgmma_d192_bf16(form);
  return attn::wgmma_kernel<__nv_bfloat16>(head_dim, form, alt);
}
}  // namespace ad::kern::detail
