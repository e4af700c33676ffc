// One error-checking helper for every CUDA runtime call (the idea is
// llm.c's cudaCheck): a failing return code becomes a typed `ad::cuda::CudaError` that
// names the call, the file and the line. No CUDA return code is ever ignored.
//
// Plain C++ (no device code): the host side of the backend and the tests include it.
#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace ad::cuda {

class CudaError : public std::runtime_error {
 public:
  CudaError(cudaError_t code, std::string expr, std::string file, int line)
      : std::runtime_error(compose(code, expr, file, line)),
        code_(code), expr_(std::move(expr)), file_(std::move(file)), line_(line) {}

  cudaError_t code() const { return code_; }
  // "an illegal memory access was encountered" (cudaGetErrorString)
  std::string symptom() const { return cudaGetErrorString(code_); }
  std::string code_name() const { return cudaGetErrorName(code_); }
  const std::string& expr() const { return expr_; }
  const std::string& file() const { return file_; }
  int line() const { return line_; }

 private:
  static std::string compose(cudaError_t code, const std::string& expr, const std::string& file, int line) {
    return std::string(cudaGetErrorName(code)) + ": " + cudaGetErrorString(code) + " (" + expr + " at " + file +
           ":" + std::to_string(line) + ")";
  }
  cudaError_t code_;
  std::string expr_, file_;
  int line_;
};

inline void check(cudaError_t code, const char* expr, const char* file, int line) {
  if (code != cudaSuccess) throw CudaError(code, expr, file, line);
}

// A launch that the kernel's own limits refuse before it reaches the driver (grid too large,
// unsupported head dim): the message says which limit.
class LaunchConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace ad::cuda

#define AD_CUDA_CHECK(expr) ::ad::cuda::check((expr), #expr, __FILE__, __LINE__)
// After a launch: the launch error (configuration) and then the execution error.
#define AD_CUDA_CHECK_LAUNCH(name)                                                         \
  do {                                                                                     \
    ::ad::cuda::check(cudaGetLastError(), "launch " name, __FILE__, __LINE__);             \
    ::ad::cuda::check(cudaDeviceSynchronize(), "execute " name, __FILE__, __LINE__);       \
  } while (0)
