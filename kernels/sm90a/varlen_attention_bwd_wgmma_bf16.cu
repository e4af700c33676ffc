// The wgmma varlen backward's key-block kernel for bf16 (kernel and launcher in
// varlen_attention_bwd_wgmma.cuh), compiled for sm_90a only (CMakeLists.txt:
// attn_doctor_cuda_sm90a); one element type per file so the instantiations compile in parallel.
#include "varlen_attention_bwd_wgmma.cuh"
#include "launch.hpp"

namespace ad::kern::detail {
void launch_varlen_bwd_wgmma_bf16(const VarlenBwdParams& p, bool checked, cudaStream_t stream) {
  bwd::launch_bwd_wgmma<__nv_bfloat16>(p, checked, stream);
}
}  // namespace ad::kern::detail
