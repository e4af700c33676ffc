// Compile-fail test (Dao-AILab/flash-attention#1476/#1478: "no suitable
// user-defined conversion from PipelineParamsK to PipelineParamsV"): in this project K and
// V roles are distinct types, so each AD_SWAP_* variant below must NOT compile. Built
// without any AD_SWAP_* define, the file is the control and must compile: the failing
// variants then fail for the swap alone. Registered with ctest by tests/CMakeLists.txt
// through run_compile_fail.cmake.
#include "kernel_params.hpp"

using namespace ad::kern;

// A stand-in for the kernels' tile loader: takes a pipeline and a shared tile of one role.
template <class Role>
int load_tile(const PipelineParams<Role>& pipe, SmemTile<Role, unsigned short> tile) {
  return pipe.head_dim + (tile.data != nullptr ? 1 : 0);
}

int main() {
  VarlenFwdParams p;
  p.head_dim = 128;
  p.num_heads = 8;
  p.num_heads_k = 2;
  unsigned short smem[16] = {};
  SmemTile<KeyRole, unsigned short> k_tile{smem};
  SmemTile<ValueRole, unsigned short> v_tile{smem + 8};

#if defined(AD_SWAP_PIPELINE)
  // The upstream bug: a K pipeline's params where the V pipeline's are expected.
  const ValuePipelineParams v_pipe = key_pipeline(p);
#else
  const ValuePipelineParams v_pipe = value_pipeline(p);
#endif
  const KeyPipelineParams k_pipe = key_pipeline(p);

#if defined(AD_SWAP_OPERAND)
  // The value pipeline fed from the key tensor.
  const ValuePipelineParams from_k{p.k, p.head_dim, 4};
  (void)from_k;
#endif

#if defined(AD_SWAP_TILE)
  // The key pipeline filling the value tile.
  return load_tile(k_pipe, v_tile);
#else
  return load_tile(k_pipe, k_tile) + load_tile(v_pipe, v_tile) > 0 ? 0 : 1;
#endif
}
