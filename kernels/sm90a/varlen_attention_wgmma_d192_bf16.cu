// The wgmma varlen forward's head dim 192 instantiations for bf16 (the kernel in
// varlen_attention_wgmma.cuh), compiled for sm_90a only (CMakeLists.txt: attn_doctor_cuda_sm90a);
// a file of their own so that they compile in parallel with head dims 64 and 128.
#include "varlen_attention_wgmma.cuh"
#include "launch.hpp"

namespace ad::kern::detail {
FwdKernels varlen_fwd_wgmma_d192_bf16(FwdForm form) {
  return attn::wgmma_kernel_d<__nv_bfloat16, 192>(form);
}
}  // namespace ad::kern::detail
