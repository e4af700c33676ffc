// The wgmma varlen forward's instantiations for fp16 (the kernel in varlen_attention_wgmma.cuh,
// its launcher in kernels/varlen_attention.cu), compiled for sm_90a only (CMakeLists.txt:
// attn_doctor_cuda_sm90a). The benchmarks' other tile shape (ATTN_DOCTOR_WGMMA_ALT) is built
// for bf16 only.
#include "varlen_attention_wgmma.cuh"
#include "launch.hpp"

namespace ad::kern::detail {
FwdKernels varlen_fwd_wgmma_fp16(int head_dim, FwdForm form, bool alt) {
  if (head_dim == 192 && !alt) return varlen_fwd_wgmma_d192_fp16(form);
  if (alt) throw cuda::LaunchConfigError("the other wgmma tile shape is built for bf16 only");
  return attn::wgmma_kernel_cfg<__half, attn::WgmmaDefault>(head_dim, form);
}
}  // namespace ad::kern::detail
