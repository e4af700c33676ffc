// The warp-specialised wgmma forward's instantiations for bf16 (head dim 128; the kernel in
// varlen_attention_wgmma_ws.cuh, its launcher in kernels/varlen_attention.cu), compiled for
// sm_90a only (CMakeLists.txt: attn_doctor_cuda_sm90a). alt: the variant without ping-pong
// (benchmarks), bf16 only;
// head dim 64 (benchmarks, a build with ATTN_DOCTOR_WGMMA_WS_D64).
#include "varlen_attention_wgmma_ws.cuh"
#include "launch.hpp"

namespace ad::kern::detail {
FwdWsKernel varlen_fwd_wgmma_ws_bf16(bool checked, bool alt) {
  return alt ? attn::wgmma_ws_kernel<__nv_bfloat16, attn::WgmmaWsAlt>(checked)
             : attn::wgmma_ws_kernel<__nv_bfloat16, attn::WgmmaWsDefault>(checked);
}
FwdWsKernel varlen_fwd_wgmma_ws_d64_bf16(bool checked) {
#ifdef ATTN_DOCTOR_WGMMA_WS_D64
  return attn::wgmma_ws_kernel<__nv_bfloat16, attn::WgmmaWsDefault, 64>(checked);
#else
  (void)checked;
  throw cuda::LaunchConfigError("the warp-specialised wgmma forward at head dim 64 is built with "
                                "ATTN_DOCTOR_WGMMA_WS_D64 only");
#endif
}
}  // namespace ad::kern::detail
