// `attn-doctor --version` and the build half of `attn-doctor env`: app/build_info.hpp.
#include "build_info.hpp"

#include <string>

namespace ad::cli {

namespace {

std::string architectures_text(const std::string& list) {  // "80;90" -> "sm_80, sm_90"
  std::string out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(';', start);
    if (end == std::string::npos) end = list.size();
    if (end > start) out += (out.empty() ? "sm_" : ", sm_") + list.substr(start, end - start);
    start = end + 1;
  }
  return out;
}

}  // namespace

std::string version_text() {
  const BuildInfo& b = build_info();
  std::string t = "attn-doctor " + b.version + "\n";
  t += "commit: " + b.commit + "\n";
  t += "build: " + b.build_type + ", " + b.compiler + "\n";
  t += "CUDA backend: " +
       (b.cuda ? "on (" + architectures_text(b.cuda_architectures) + "; wgmma sm_90a: " + (b.wgmma ? "on" : "off") + ")"
               : "off (" + b.cuda_off_reason + ")") +
       "\n";
  t += "sanitizers: " + (b.sanitizers.empty() ? std::string("none") : b.sanitizers) + "\n";
  t += std::string("Python extension: ") + (b.python_extension ? "built" : "not built");
  return t;
}

nlohmann::json build_info_json() {
  const BuildInfo& b = build_info();
  nlohmann::json archs = nlohmann::json::array();
  size_t start = 0;
  while (b.cuda && start <= b.cuda_architectures.size()) {
    size_t end = b.cuda_architectures.find(';', start);
    if (end == std::string::npos) end = b.cuda_architectures.size();
    if (end > start) archs.push_back(b.cuda_architectures.substr(start, end - start));
    start = end + 1;
  }
  return {{"version", b.version},       {"commit", b.commit},
          {"build_type", b.build_type}, {"compiler", b.compiler},
          {"cuda", b.cuda},             {"cuda_architectures", archs},
          {"cuda_off_reason", b.cuda ? "" : b.cuda_off_reason},
          {"wgmma", b.wgmma},           {"sanitizers", b.sanitizers},
          {"python_extension", b.python_extension}};
}

}  // namespace ad::cli
