// The readout kernel of attn_doctor.ops (python/ops_readout.hpp): one block per launch read.
#include "ops_readout.hpp"

namespace ad::ops {
namespace {

constexpr int kThreads = 512;

struct Fold {
  unsigned long long unwritten, overwritten;
  long long first_unwritten, first_overwritten;  // rows when none
};

// Each thread reads kUnroll counters before it folds them: one memory latency per kUnroll
// counters, not one per counter (read one at a time, 16384 rows took about 20 us a launch on
// an H100: bench/results/attn-layer-h100-2026-11-28).
constexpr int kUnroll = 8;

__device__ void fold_counters(const uint32_t* __restrict__ w, int64_t n, Fold* shared) {
  unsigned long long zero = 0, many = 0;
  long long first_zero = n, first_many = n;
  for (int64_t base = threadIdx.x; base < n; base += int64_t(blockDim.x) * kUnroll) {
    uint32_t cs[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + int64_t(u) * blockDim.x;
      cs[u] = i < n ? w[i] : 1u;  // past the end: counted as written once
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + int64_t(u) * blockDim.x;
      const uint32_t c = cs[u];
      if (c == 0) {
        ++zero;
        if (i < first_zero) first_zero = i;
      } else if (c > 1) {
        ++many;
        if (i < first_many) first_many = i;
      }
    }
  }
  for (int d = 16; d > 0; d >>= 1) {
    zero += __shfl_down_sync(0xffffffffu, zero, d);
    many += __shfl_down_sync(0xffffffffu, many, d);
    first_zero = min(first_zero, __shfl_down_sync(0xffffffffu, first_zero, d));
    first_many = min(first_many, __shfl_down_sync(0xffffffffu, first_many, d));
  }
  if ((threadIdx.x & 31) == 0) {
    if (zero) atomicAdd(&shared->unwritten, zero);
    if (many) atomicAdd(&shared->overwritten, many);
    if (first_zero < n) atomicMin(&shared->first_unwritten, first_zero);
    if (first_many < n) atomicMin(&shared->first_overwritten, first_many);
  }
}

__device__ RowSummary summary_of(const Fold& f, int64_t n) {
  RowSummary s;
  s.unwritten = static_cast<int64_t>(f.unwritten);
  s.first_unwritten = f.first_unwritten < n ? f.first_unwritten : -1;
  s.overwritten = static_cast<int64_t>(f.overwritten);
  s.first_overwritten = f.first_overwritten < n ? f.first_overwritten : -1;
  return s;
}

__global__ void __launch_bounds__(kThreads) readout_kernel(AccessRecord* record, const uint32_t* counters0,
                                                           int64_t rows0, const uint32_t* counters1, int64_t rows1,
                                                           Slot* slot, AccessRecord empty) {
  __shared__ Fold fold[2];
  if (threadIdx.x < 2) {
    const int64_t n = threadIdx.x == 0 ? rows0 : rows1;
    fold[threadIdx.x] = Fold{0ull, 0ull, static_cast<long long>(n), static_cast<long long>(n)};
  }
  __syncthreads();
  if (counters0 != nullptr) fold_counters(counters0, rows0, &fold[0]);
  if (counters1 != nullptr) fold_counters(counters1, rows1, &fold[1]);
  __syncthreads();
  if (threadIdx.x != 0) return;
  slot->access = *record;
  slot->rows[0] = counters0 != nullptr ? summary_of(fold[0], rows0) : RowSummary{};
  slot->rows[1] = counters1 != nullptr ? summary_of(fold[1], rows1) : RowSummary{};
  // the slot's next launch starts from an empty record: reset before the state says "landed",
  // since the host may hand the slot to a launch on another stream as soon as it reads it
  *record = empty;
  __threadfence_system();  // the record, the summaries and the reset land before the state does
  *reinterpret_cast<volatile int32_t*>(&slot->state) = kSlotLanded;
}

}  // namespace

cudaError_t launch_readout(AccessRecord* record, const uint32_t* counters0, int64_t rows0, const uint32_t* counters1,
                           int64_t rows1, Slot* slot, const AccessRecord& empty, cudaStream_t stream) {
  readout_kernel<<<1, kThreads, 0, stream>>>(record, counters0, rows0, counters1, rows1, slot, empty);
  return cudaGetLastError();
}

}  // namespace ad::ops
