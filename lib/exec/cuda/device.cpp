// Device discovery, the checked launch, and violation-record rendering.
#include "exec/cuda/device.hpp"

#include <chrono>
#include <sstream>

#include "launch.hpp"

namespace ad::cuda {

std::string version_string(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

namespace {

// Whether one of the SASS targets the binary carries runs natively on cc major.minor (SASS
// is compatible within a major version, upward in minor).
bool has_native_sass(const std::string& archs, int major, int minor) {
  std::stringstream ss(archs);
  std::string item;
  while (std::getline(ss, item, ',')) {
    std::string digits;
    for (char c : item)
      if (c >= '0' && c <= '9') digits += c;
    if (digits.size() < 2) continue;
    const int a = std::stoi(digits);  // "90" (CMake) or "900" (__CUDA_ARCH_LIST__)
    const int a_major = a >= 100 ? a / 100 : a / 10;
    const int a_minor = a >= 100 ? (a % 100) / 10 : a % 10;
    if (a_major == major && a_minor <= minor) return true;
  }
  return false;
}

}  // namespace

DeviceInfo query_device() {
  DeviceInfo info;
  info.architectures = kern::compiled_architectures();
  cudaGetLastError();
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  cudaDriverGetVersion(&info.driver_version);
  cudaRuntimeGetVersion(&info.runtime_version);
  if (e != cudaSuccess) {
    info.why_absent = std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
    cudaGetLastError();
    return info;
  }
  if (count == 0) {
    info.why_absent = "no CUDA device";
    return info;
  }
  cudaDeviceProp prop{};
  if (cudaGetDevice(&info.device) != cudaSuccess || cudaGetDeviceProperties(&prop, info.device) != cudaSuccess) {
    info.why_absent = "cudaGetDeviceProperties failed";
    cudaGetLastError();
    return info;
  }
  info.present = true;
  info.name = prop.name;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.multiprocessors = prop.multiProcessorCount;
  info.global_memory_bytes = int64_t(prop.totalGlobalMem);
  info.l2_bytes = prop.l2CacheSize;
  info.shared_memory_per_block_optin = int(prop.sharedMemPerBlockOptin);
  info.native_code = has_native_sass(info.architectures, prop.major, prop.minor);
  kern::probe_kernel_versions(&info.kernel_binary_version, &info.kernel_ptx_version);
  return info;
}

nlohmann::json to_json(const DeviceInfo& d) {
  nlohmann::json j;
  j["present"] = d.present;
  if (!d.present) j["why_absent"] = d.why_absent;
  j["driver_version"] = d.driver_version > 0 ? version_string(d.driver_version) : "none";
  j["runtime_version"] = version_string(d.runtime_version);
  j["architectures_built"] = d.architectures;
  if (d.present) {
    j["device"] = d.device;
    j["name"] = d.name;
    j["compute_capability"] = std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor);
    j["multiprocessors"] = d.multiprocessors;
    j["global_memory_gib"] = double(d.global_memory_bytes) / double(1ll << 30);
    j["l2_mib"] = double(d.l2_bytes) / double(1 << 20);
    j["native_code"] = d.native_code;
    j["kernel_binary_version"] = d.kernel_binary_version;
    j["kernel_ptx_version"] = d.kernel_ptx_version;
  }
  return j;
}

LaunchOutcome checked_launch(const std::string& kernel, RecordSlot& slot,
                             const std::function<void(AccessRecord*)>& launch, const AccessRecord& initial) {
  LaunchOutcome out;
  out.kernel = kernel;
  AccessRecord* rec = slot.reset(initial);
  const auto t0 = std::chrono::steady_clock::now();
  launch(rec);
  check(cudaGetLastError(), ("launch " + kernel).c_str(), __FILE__, __LINE__);
  check(cudaDeviceSynchronize(), ("execute " + kernel).c_str(), __FILE__, __LINE__);
  out.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  out.record = slot.read();
  return out;
}

std::string describe(const AccessRecord& r) {
  if (r.count == 0) return "no refused access";
  const Access& a = r.first;
  std::ostringstream s;
  s << to_string(a.buffer) << " " << to_string(a.kind);
  if (a.region == Region::head) s << " outside its head";
  s << " of index " << a.index << " outside [0, " << a.bound << ") " << to_string(a.unit);
  s << " (block (" << a.block[0] << "," << a.block[1] << "," << a.block[2] << "), thread " << r.thread;
  if (a.segment >= 0) s << ", segment " << a.segment;
  if (a.row >= 0) s << ", row " << a.row;
  if (a.head >= 0) s << ", head " << a.head;
  s << "; " << r.count << " refused access" << (r.count == 1 ? "" : "es") << ")";
  return s.str();
}

}  // namespace ad::cuda
