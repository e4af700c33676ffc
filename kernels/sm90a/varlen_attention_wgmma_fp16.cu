// The wgmma varlen forward for fp16 (kernel and launcher in varlen_attention_wgmma.cuh),
// compiled for sm_90a only (CMakeLists.txt: attn_doctor_cuda_sm90a).
#include "varlen_attention_wgmma.cuh"
#include "launch.hpp"

namespace ad::kern::detail {
void launch_varlen_fwd_wgmma_fp16(const VarlenFwdParams& p, bool checked, cudaStream_t stream) {
  attn::launch_wgmma<__half>(p, checked, stream);
}
}  // namespace ad::kern::detail
