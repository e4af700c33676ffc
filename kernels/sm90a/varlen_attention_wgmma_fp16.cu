// The wgmma varlen forward for fp16 (kernel and launcher in varlen_attention_wgmma.cuh),
// compiled for sm_90a only (CMakeLists.txt: attn_doctor_cuda_sm90a). The benchmarks' other tile
// shape (ATTN_DOCTOR_WGMMA_ALT) is built for bf16 only.
#include "varlen_attention_wgmma.cuh"
#include "launch.hpp"

namespace ad::kern::detail {
void launch_varlen_fwd_wgmma_fp16(const VarlenFwdParams& p, bool checked, bool alt, cudaStream_t stream) {
  if (alt) throw cuda::LaunchConfigError("the other wgmma tile shape is built for bf16 only");
  attn::launch_wgmma_cfg<__half, attn::WgmmaDefault>(p, checked, stream);
}
}  // namespace ad::kern::detail
