// The wgmma varlen backward's key-block kernels for bf16 (varlen_attention_bwd_wgmma.cuh; their
// launcher in kernels/varlen_attention_bwd.cu), compiled for sm_90a only (CMakeLists.txt:
// attn_doctor_cuda_sm90a); one element type per file so the instantiations compile in parallel.
#include "varlen_attention_bwd_wgmma_ws.cuh"
#include "launch.hpp"

namespace ad::kern::detail {
BwdWgmmaKernels varlen_bwd_wgmma_bf16(int head_dim, bool checked) { return bwd::bwd_wgmma_kernels<__nv_bfloat16>(head_dim, checked); }
}  // namespace ad::kern::detail
