// CUDA backend entry points for builds without CUDA (-DATTN_DOCTOR_CUDA=OFF, or no nvcc).
// The CUDA build defines ATTN_DOCTOR_WITH_CUDA and provides these two functions in
// lib/exec/cuda/ instead; this file then compiles to nothing.
#include "exec/exec.hpp"

#if !defined(ATTN_DOCTOR_WITH_CUDA)

namespace ad {

bool cuda_backend_built() { return false; }

std::unique_ptr<Backend> make_cuda_backend(std::string* why) {
  if (why) *why = "this attn-doctor was built without the CUDA backend (configure with -DATTN_DOCTOR_CUDA=ON on a machine with nvcc)";
  return nullptr;
}

}  // namespace ad

#endif
