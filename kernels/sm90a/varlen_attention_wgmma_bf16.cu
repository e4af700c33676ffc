// The wgmma varlen forward for bf16 (kernel and launcher in varlen_attention_wgmma.cuh),
// compiled for sm_90a only (CMakeLists.txt: attn_doctor_cuda_sm90a); one element type per
// file so the instantiations compile in parallel.
#include "varlen_attention_wgmma.cuh"
#include "launch.hpp"

namespace ad::kern::detail {
void launch_varlen_fwd_wgmma_bf16(const VarlenFwdParams& p, bool checked, bool alt, cudaStream_t stream) {
  attn::launch_wgmma<__nv_bfloat16>(p, checked, alt, stream);
}
bool varlen_fwd_wgmma_loadable() { return attn::wgmma_loadable<__nv_bfloat16>(); }
}  // namespace ad::kern::detail
