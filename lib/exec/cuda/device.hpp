// Host side of the CUDA backend: device discovery, typed device buffers, and the one way a
// kernel is launched by the backend (`checked_launch`): launch, synchronise, check the
// launch and execution errors, read the violation record, before anything else runs.
// What CUDA_LAUNCH_BLOCKING=1 gives, plus the reason (docs/spec/execution.md).
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cuda_check.hpp"
#include "contract/access_record.hpp"

namespace ad::cuda {

// ---------------------------------------------------------------------------------------
// device discovery (never throws)

struct DeviceInfo {
  bool present = false;
  std::string why_absent;        // "no CUDA device", "CUDA driver is older than the runtime", ...
  int device = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int driver_version = 0;        // cudaDriverGetVersion, e.g. 13000
  int runtime_version = 0;       // cudaRuntimeGetVersion
  int multiprocessors = 0;
  int64_t global_memory_bytes = 0;
  int64_t l2_bytes = 0;
  int shared_memory_per_block_optin = 0;
  std::string architectures;     // what the binary carries, "80,90" (SASS + PTX of each)
  bool native_code = false;      // the binary holds SASS this GPU runs without a JIT
  int kernel_binary_version = 0; // cudaFuncGetAttributes on one of our kernels
  int kernel_ptx_version = 0;
};

DeviceInfo query_device();
nlohmann::json to_json(const DeviceInfo& info);
std::string version_string(int cuda_version);  // 13000 -> "13.0"

// ---------------------------------------------------------------------------------------
// device memory

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t count) { allocate(count); }
  explicit DeviceBuffer(const std::vector<T>& host) {
    allocate(host.size());
    upload(host);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), count_(o.count_) { o.ptr_ = nullptr, o.count_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      ptr_ = o.ptr_, count_ = o.count_;
      o.ptr_ = nullptr, o.count_ = 0;
    }
    return *this;
  }
  ~DeviceBuffer() { release(); }

  void allocate(size_t count) {
    release();
    count_ = count;
    if (count > 0) AD_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&ptr_), count * sizeof(T)));
  }
  void upload(const std::vector<T>& host) {
    if (host.size() != count_) allocate(host.size());
    if (count_ > 0) AD_CUDA_CHECK(cudaMemcpy(ptr_, host.data(), count_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    if (count_ > 0) AD_CUDA_CHECK(cudaMemcpy(host.data(), ptr_, count_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  void fill_bytes(unsigned char byte) {
    if (count_ > 0) AD_CUDA_CHECK(cudaMemset(ptr_, byte, count_ * sizeof(T)));
  }
  T* get() const { return ptr_; }
  size_t size() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }

 private:
  void release() noexcept {
    if (ptr_ != nullptr) cudaFree(ptr_);  // never throws from a destructor
    ptr_ = nullptr;
    count_ = 0;
  }
  T* ptr_ = nullptr;
  size_t count_ = 0;
};

// ---------------------------------------------------------------------------------------
// the checked launch

struct LaunchOutcome {
  std::string kernel;               // e.g. "varlen_fwd_tc<bf16,d128,checked>"
  AccessRecord record;              // what the kernel refused (count 0: nothing)
  double ms = 0.0;                  // launch to completion, host clock
};

// A device-resident access record (contract/access_record.hpp), reset to `initial` (an
// empty record, or a detail_record) before each launch.
class RecordSlot {
 public:
  RecordSlot() : buffer_(1) {}
  AccessRecord* reset(const AccessRecord& initial = AccessRecord{}) {
    AD_CUDA_CHECK(cudaMemcpy(buffer_.get(), &initial, sizeof(initial), cudaMemcpyHostToDevice));
    return buffer_.get();
  }
  AccessRecord read() const { return buffer_.download().front(); }
  AccessRecord* get() const { return buffer_.get(); }

 private:
  DeviceBuffer<AccessRecord> buffer_;
};

// Resets the record (to `initial`), runs `launch` (which launches asynchronously),
// synchronises, turns a launch or execution error into CudaError (file/line of this call
// site), and returns the record the kernel wrote.
LaunchOutcome checked_launch(const std::string& kernel, RecordSlot& slot,
                             const std::function<void(AccessRecord*)>& launch,
                             const AccessRecord& initial = AccessRecord{});

// One-line description of a record, "q read of index 70 outside [0, 64) (block (0,1,3),
// thread 17, segment 1, row 70, head 3; 12 refused accesses)".
std::string describe(const AccessRecord& record);

}  // namespace ad::cuda
