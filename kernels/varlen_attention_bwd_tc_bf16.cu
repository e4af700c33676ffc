// The tensor-core varlen backward's key-block kernel for bf16 (varlen_attention_bwd.cuh); one
// element type per file so the instantiations compile in parallel.
#include "varlen_attention_bwd.cuh"
#include "launch.hpp"

namespace ad::kern::detail {
void launch_varlen_bwd_tc_bf16(const VarlenBwdParams& p, bool checked, cudaStream_t stream) {
  bwd::launch_bwd_main<__nv_bfloat16>(p, checked, stream);
}
}  // namespace ad::kern::detail
