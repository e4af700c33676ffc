// The tensor-core varlen forward for fp16 (kernel and launcher in varlen_attention.cuh);
// one element type per file so the instantiations compile in parallel.
#include "varlen_attention.cuh"
#include "launch.hpp"

namespace ad::kern::detail {
void launch_varlen_fwd_tc_fp16(const VarlenFwdParams& p, bool checked, bool alt_shape, cudaStream_t stream) {
  attn::launch_tc<__half>(p, checked, alt_shape, stream);
}
}  // namespace ad::kern::detail
