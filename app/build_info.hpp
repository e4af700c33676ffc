// What this binary is: its version, the commit it was built from and the build's options,
// written by CMake at configure time (app/build_info.cpp.in). `--version` and `env` print it.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

namespace ad::cli {

struct BuildInfo {
  std::string version;
  std::string commit;            // "unknown" outside a git checkout
  std::string build_type;        // Release, RelWithDebInfo, ...
  std::string compiler;          // CMake's id and version: "GNU 12.2.0"
  bool cuda = false;             // the CUDA backend is built in
  std::string cuda_off_reason;   // without it: why ("no CUDA compiler (nvcc) found", ...)
  std::string cuda_architectures;  // "80;90" (empty without CUDA)
  bool wgmma = false;            // the sm_90a (wgmma) kernels are built in
  std::string sanitizers;        // "address,undefined", or empty
  bool python_extension = false; // the build folder makes attn_doctor._native (nanobind found)
};

const BuildInfo& build_info();

// `attn-doctor --version`: the version line, then the commit and the build options (app/env.cpp).
std::string version_text();
nlohmann::json build_info_json();

// The text of python/attn_doctor/_env.py (what `env` runs in the Python it finds).
extern const char* const kEnvScript;

}  // namespace ad::cli
