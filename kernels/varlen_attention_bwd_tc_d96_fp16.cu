// The tensor-core varlen backward's key-block kernel for fp16 at head dim 96, FA2's 64 x 128
// tile walked in steps of 64 query rows (varlen_attention_bwd.cuh default_block_m); a file of
// its own so that it compiles in parallel with the other head dims'.
#include "varlen_attention_bwd.cuh"
#include "launch.hpp"

namespace ad::kern::detail {
BwdKernel varlen_bwd_tc_d96_fp16(int block_m, bool checked) {
  const int bm = block_m > 0 ? block_m : bwd::default_block_m(96);
  if (bm == 64) return bwd::bwd_kernel_shape<__half, 96, 64>(checked);
  throw cuda::LaunchConfigError("tensor-core varlen backward: head_dim 96 block_m " + std::to_string(bm) +
                                " has no instantiation (d96 m64)");
}
}  // namespace ad::kern::detail
