// `attn-doctor env`: what this binary is (path, version, commit, build options), what it can
// run on, and the Python side (python/attn_doctor/_env.py run in the Python it finds: the
// attn_doctor package and its extension, torch, transformers, flash-attn, FA3, FLA, triton,
// the GPU as torch sees it), ready to paste into an issue.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <filesystem>
#include <iostream>
#include <thread>
#include <memory>

#include "build_info.hpp"
#include "cli.hpp"
#include "doctor/doctor.hpp"
#include "util/subprocess.hpp"
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

bool executable(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec) && access(p.c_str(), X_OK) == 0;
}

// The Python to ask: ATTN_DOCTOR_ENV_PYTHON (`python -m attn_doctor env` names itself), the
// one beside this binary (a venv's bin/, where pip put the binary), else python3 on PATH.
std::string find_python() {
  if (const char* given = std::getenv("ATTN_DOCTOR_ENV_PYTHON"); given && *given) return given;
  const std::filesystem::path self = self_executable();
  for (const char* name : {"python3", "python"})
    if (!self.empty() && executable(self.parent_path() / name)) return (self.parent_path() / name).string();
  if (const char* path = std::getenv("PATH")) {
    std::string dirs = path;
    size_t start = 0;
    while (start <= dirs.size()) {
      size_t end = dirs.find(':', start);
      if (end == std::string::npos) end = dirs.size();
      std::filesystem::path candidate = std::filesystem::path(dirs.substr(start, end - start)) / "python3";
      if (end > start && executable(candidate)) return candidate.string();
      start = end + 1;
    }
  }
  return "";
}

// _env.py's report (with its text under "text"), or {"error": why}.
nlohmann::json python_side() {
  const std::string python = find_python();
  if (python.empty()) return {{"error", "no Python found (ATTN_DOCTOR_ENV_PYTHON, beside this binary, python3 on PATH)"}};
  ProcessOptions options;
  options.timeout_seconds = 120;  // importing torch to ask torch.cuda can take a while
  options.max_output_bytes = 1 << 20;
  options.own_process_group = true;
  ProcessResult r = run_process({python, "-c", kEnvScript, "--json"}, options);
  auto failed = [&](const std::string& why) { return nlohmann::json{{"executable", python}, {"error", why}}; };
  if (!r.spawn_error.empty()) return failed("cannot start " + python + ": " + r.spawn_error);
  if (r.timed_out) return failed(python + " did not answer within 120 s");
  if (!r.exited || r.exit_code != 0) {
    std::string err = r.err.size() > 400 ? r.err.substr(r.err.size() - 400) : r.err;
    return failed(python + " failed (" + (r.exited ? "exit " + std::to_string(r.exit_code) : "signal " + std::to_string(r.signal)) +
                  "): " + err);
  }
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return failed(python + " printed no JSON report");
  return j;
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
    j["binary"] = self_executable();
    j["build"] = build_info_json();
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
    nlohmann::json py = python_side();
    std::string python_text = py.value("text", "");
    py.erase("text");
    j["python"] = py;
    if (args->format == "json") {
      print_json(j);
      return 0;
    }
    const BuildInfo& b = build_info();
    std::cout << "attn-doctor " << kToolVersion << " (" << compiler_text() << ")\n";
    std::cout << "binary: " << j["binary"].get<std::string>() << "\n";
    std::cout << "commit: " << b.commit << "\n";
    std::cout << "build: " << b.build_type << ", sanitizers: " << (b.sanitizers.empty() ? "none" : b.sanitizers)
              << ", Python extension: " << (b.python_extension ? "on" : "off") << "\n";
    std::cout << "CPU backend: " << j["cpu_threads"].get<unsigned>() << " threads\n";
#ifdef ATTN_DOCTOR_WITH_CUDA
    std::cout << "CUDA backend: built for sm_" << replace_all(ATTN_DOCTOR_CUDA_ARCHS, ",", ", sm_")
              << (b.wgmma ? ", wgmma kernels for sm_90a" : "") << "\n";
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
    std::cout << "CUDA backend: not built (" << b.cuda_off_reason << ")\n";
    std::cout << (j["gpu_driver"].get<bool>() ? "GPU: a GPU driver is installed; this build has no CUDA backend to use it\n"
                                              : "GPU: none (no GPU driver)\n");
#endif
    if (!python_text.empty())
      std::cout << python_text << "\n";
    else
      std::cout << "python: " << py.value("error", "?") << "\n";
    return 0;
  };
  return s;
}

}  // namespace ad::cli

// ---- `attn-doctor --version` and the build half of `env` (app/build_info.hpp) ----

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
  t += std::string("Python extension: ") + (b.python_extension ? "on" : "off");
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
