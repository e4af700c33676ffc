#include "vocab/gpu_arch.hpp"

namespace ad {

std::optional<GpuArch> parse_gpu_arch(std::string_view s) {
  if (s.substr(0, 3) != "sm_") return std::nullopt;
  s.remove_prefix(3);
  GpuArch a;
  if (!s.empty() && (s.back() == 'a' || s.back() == 'f')) {
    a.suffix = s.back();
    s.remove_suffix(1);
  }
  if (s.size() < 2 || s.size() > 3 || s.front() == '0') return std::nullopt;
  int value = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  a.major = value / 10;
  a.minor = value % 10;
  return a;
}

std::string to_string(const GpuArch& a) {
  std::string s = "sm_" + std::to_string(a.compute_capability());
  if (a.suffix) s += a.suffix;
  return s;
}

}  // namespace ad
