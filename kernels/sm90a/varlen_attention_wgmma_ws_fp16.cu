// The warp-specialised wgmma forward's instantiations for fp16 (head dim 128; the kernel in
// varlen_attention_wgmma_ws.cuh, its launcher in kernels/varlen_attention.cu), compiled for
// sm_90a only (CMakeLists.txt: attn_doctor_cuda_sm90a).
#include "varlen_attention_wgmma_ws.cuh"
#include "launch.hpp"

namespace ad::kern::detail {
FwdWsKernel varlen_fwd_wgmma_ws_fp16(bool checked, bool alt) {
  if (alt) throw cuda::LaunchConfigError("the warp-specialised wgmma forward's other variant is built for bf16 only");
  return attn::wgmma_ws_kernel<__half, attn::WgmmaWsDefault>(checked);
}
}  // namespace ad::kern::detail
