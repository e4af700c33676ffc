// `attn-doctor env`: what this binary is and what it can run on.
#include <iostream>
#include <thread>
#include <memory>

#include "cli.hpp"
#include "doctor/doctor.hpp"
#ifdef ATTN_DOCTOR_WITH_CUDA
#include "exec/cuda/device.hpp"
#endif

namespace ad::cli {

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
    j["cpu_threads"] = std::thread::hardware_concurrency();
    if (args->format == "json") {
      std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
    } else {
      for (auto it = j.begin(); it != j.end(); ++it)
        std::cout << it.key() << ": " << (it->is_string() ? it->get<std::string>() : it->dump()) << "\n";
    }
    return 0;
  };
  return s;
}

}  // namespace ad::cli
