// The tensor-core varlen backward's key-block kernel for bf16 at head dim 256, FA2's 64 x 64
// tile with the dK / dV columns split between two warps (varlen_attention_bwd_split.cuh); a
// file of its own so that it compiles in parallel with the other head dims'.
#include "varlen_attention_bwd_split.cuh"
#include "launch.hpp"

namespace ad::kern::detail {
BwdKernel varlen_bwd_tc_d256_bf16(int block_m, bool checked) { return bwd::bwd_kernel_split<__nv_bfloat16, 256>(block_m, checked); }
}  // namespace ad::kern::detail
