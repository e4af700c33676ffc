// The GPU architecture a call ran on, as CUDA names it ("sm_90a"): FlashAttention-4 and
// cuDNN pick a different kernel per architecture, so a batch may record it
// (`environment.gpu_arch`, docs/spec/batch-format.md).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ad {

struct GpuArch {
  int major = 0;         // 9 for sm_90a
  int minor = 0;         // 0 for sm_90a
  char suffix = '\0';    // 'a' (architecture-specific features) or 'f' (family), '\0' for none

  int compute_capability() const { return major * 10 + minor; }  // 90 for sm_90a
  bool operator==(const GpuArch&) const = default;
};

// "sm_80", "sm_90a", "sm_100f", "sm_120": "sm_" then the compute capability (2 or 3 digits, the
// last one the minor version) and an optional 'a' or 'f'. nullopt for anything else.
std::optional<GpuArch> parse_gpu_arch(std::string_view s);
std::string to_string(const GpuArch& a);  // the inverse of parse_gpu_arch

}  // namespace ad
