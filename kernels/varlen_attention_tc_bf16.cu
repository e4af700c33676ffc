// The tensor-core varlen forward for bf16 (kernel and launcher in varlen_attention.cuh);
// one element type per file so the instantiations compile in parallel.
#include "varlen_attention.cuh"
#include "launch.hpp"

namespace ad::kern::detail {
void launch_varlen_fwd_tc_bf16(const VarlenFwdParams& p, bool checked, bool alt_shape, cudaStream_t stream) {
  attn::launch_tc<__nv_bfloat16>(p, checked, alt_shape, stream);
}
}  // namespace ad::kern::detail
