// The tensor-core varlen forward's instantiations for bf16 at head dim 256, with FA2's 128 (A100)
// and 64 (H100) query rows per CTA (the kernel in varlen_attention.cuh); one file of their own
// so that they compile in parallel with the other head dims'.
#include "varlen_attention.cuh"
#include "launch.hpp"

namespace ad::kern::detail {
FwdKernels varlen_fwd_tc_d256_bf16(int block_m, FwdForm form) { return attn::tc_kernel_wide<__nv_bfloat16, 256>(block_m, form); }
}  // namespace ad::kern::detail
