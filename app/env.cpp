// `attn-doctor env`: what this binary is and what it can run on.
#include <dlfcn.h>

#include <iostream>
#include <thread>
#include <memory>

#include "cli.hpp"
#include "doctor/doctor.hpp"
#ifdef ATTN_DOCTOR_WITH_CUDA
#include "exec/cuda/device.hpp"
#endif

namespace ad::cli {

namespace {

// Whether the NVIDIA driver's library can be loaded (what the CUDA runtime needs); asked
// without the CUDA runtime, so a CPU-only build can say it too.
bool gpu_driver_present() {
  void* lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!lib) return false;
  dlclose(lib);
  return true;
}

std::string compiler_text() {
#if defined(__clang__)
  return std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  return std::string("g++ ") + __VERSION__;
#else
  return __VERSION__;
#endif
}

[[maybe_unused]] std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

}  // namespace

Subcommand add_env(CLI::App& root, const Globals&) {
  struct Args {
    std::string format = "text";
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = root.add_subcommand("env", "print the build, the backends and the GPU this binary can use");
  add_format_option(sub, args->format);
  Subcommand s;
  s.app = sub;
  s.run = [args]() {
    nlohmann::json j;
    j["version"] = kToolVersion;
    j["compiler"] = __VERSION__;
#ifdef ATTN_DOCTOR_WITH_CUDA
    j["cuda_backend_built"] = true;
    j["cuda_architectures"] = ATTN_DOCTOR_CUDA_ARCHS;
    // device name, compute capability, driver/runtime versions, and whether the binary holds
    // native code (SASS) for it; never throws without a device
    j["cuda"] = cuda::to_json(cuda::query_device());
#else
    j["cuda_backend_built"] = false;
#endif
    j["gpu_driver"] = gpu_driver_present();
    j["cpu_threads"] = std::thread::hardware_concurrency();
    if (args->format == "json") {
      print_json(j);
      return 0;
    }
    std::cout << "attn-doctor " << kToolVersion << " (" << compiler_text() << ")\n";
    std::cout << "CPU backend: " << j["cpu_threads"].get<unsigned>() << " threads\n";
#ifdef ATTN_DOCTOR_WITH_CUDA
    std::cout << "CUDA backend: built for sm_" << replace_all(ATTN_DOCTOR_CUDA_ARCHS, ",", ", sm_") << "\n";
    const nlohmann::json& c = j["cuda"];
    if (c.value("present", false)) {
      std::cout << "GPU: " << c.value("name", "?") << " (compute capability " << c.value("compute_capability", "?")
                << "), driver CUDA " << c.value("driver_version", "?") << ", runtime " << c.value("runtime_version", "?")
                << "\n";
      std::cout << "native code for this GPU: " << (c.value("native_code", false) ? "yes" : "no (PTX, compiled at load time)")
                << "\n";
    } else if (!j["gpu_driver"].get<bool>() || c.value("driver_version", "none") == "none") {
      std::cout << "GPU: none (no GPU driver): the CPU backend runs every stage\n";
    } else {
      std::cout << "GPU: none (" << c.value("why_absent", "no CUDA device") << "): the CPU backend runs every stage\n";
    }
#else
    std::cout << "CUDA backend: not built (no nvcc at build time)\n";
    std::cout << (j["gpu_driver"].get<bool>() ? "GPU: a GPU driver is installed; this build has no CUDA backend to use it\n"
                                              : "GPU: none (no GPU driver)\n");
#endif
    return 0;
  };
  return s;
}

}  // namespace ad::cli
