// Unpad gather (flash_attn.bert_padding.index_first_axis) and pad scatter (pad_input):
//
//   gather:  dst[i, :] = src[indices[i], :]     dst (num_indices, row)   src (B * S, row)
//   scatter: dst[indices[i], :] = src[i, :]     dst (B * S, row), zeroed by the caller
//
// The real ops index with int64 and assert on a bad index on the GPU (PyTorch's
// ScatterGatherKernel / IndexKernel "index out of bounds" device assert: Dao-AILab/
// flash-attention#1156, fla-org/flash-linear-attention#206). The checked form compares the source and destination row of every copy with
// their buffers and, when one is outside, records it (unpad.gather / pad.scatter) and copies
// nothing for that row. One warp per row, 16-byte accesses when the row allows them.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda_check.hpp"
#include "device_common.cuh"
#include "launch.hpp"

// The device-side assert of PyTorch's index kernels (CUDA_KERNEL_ASSERT), kept in release
// builds: the unchecked form fails the way the real op fails.
extern "C" __device__ void __assertfail(const char* message, const char* file, unsigned int line,
                                        const char* function, size_t char_size);

namespace ad::kern {

namespace {

constexpr int kCopyThreads = 256;

// V: the access width (uint4 16 B, uint2 8 B, uint32_t 4 B, uint16_t 2 B, uint8_t 1 B).
template <class V, bool Checked, bool Scatter>
__global__ void __launch_bounds__(kCopyThreads) index_copy_kernel(const IndexCopyParams p) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = int64_t(gridDim.x) * (kCopyThreads / 32);
  const int64_t chunks = p.row_bytes / int64_t(sizeof(V));
  for (int64_t i = int64_t(blockIdx.x) * (kCopyThreads / 32) + (threadIdx.x >> 5); i < p.num_indices; i += warps) {
    const int64_t idx = p.indices[i];
    const int64_t src_row = Scatter ? i : idx;
    const int64_t dst_row = Scatter ? idx : i;
    if constexpr (Checked) {
      bool ok = true;
      // one record per refused copy, keyed by its position i (the CPU twin's order)
      if (src_row < 0 || src_row >= p.src_rows) {
        if (lane == 0)
          record_violation(p.record, p.src_buffer, AccessKind::read, Unit::rows, Region::tensor, src_row, p.src_rows, i,
                           -1, -1, -1, i, -1, -1, order::key(uint64_t(i), order::kRead, 0), 1);
        ok = false;
      }
      if (dst_row < 0 || dst_row >= p.dst_rows) {
        if (lane == 0)
          record_violation(p.record, p.dst_buffer, AccessKind::write, Unit::rows, Region::tensor, dst_row, p.dst_rows, i,
                           -1, -1, -1, i, -1, -1, order::key(uint64_t(i), order::kRead, 0), 1);
        ok = false;
      }
      if (!ok) continue;
    } else {
      // index_first_axis / pad_input on the GPU: torch.gather / index_put assert the index
      // ("index out of bounds", ScatterGatherKernel.cu: Dao-AILab/flash-attention#1156,
      // fla-org/flash-linear-attention#206).
      if (idx < 0 || idx >= (Scatter ? p.dst_rows : p.src_rows))
        __assertfail("idx_dim >= 0 && idx_dim < index_size && \"index out of bounds\"", __FILE__, __LINE__,
                     "index_copy_kernel", sizeof(char));
    }
    const V* s = reinterpret_cast<const V*>(static_cast<const char*>(p.src) + src_row * p.row_bytes);
    V* d = reinterpret_cast<V*>(static_cast<char*>(p.dst) + dst_row * p.row_bytes);
    // Four independent loads in flight per lane before the stores.
    int64_t c = lane;
    for (; c + 96 < chunks; c += 128) {
      const V a0 = s[c], a1 = s[c + 32], a2 = s[c + 64], a3 = s[c + 96];
      d[c] = a0;
      d[c + 32] = a1;
      d[c + 64] = a2;
      d[c + 96] = a3;
    }
    for (; c < chunks; c += 32) d[c] = s[c];
  }
}

template <bool Checked, bool Scatter>
void launch_width(const IndexCopyParams& p, cudaStream_t stream) {
  int sms = 132;
  int device = 0;
  AD_CUDA_CHECK(cudaGetDevice(&device));
  AD_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t warps_needed = p.num_indices;
  const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>((warps_needed + 7) / 8, int64_t(sms) * 16));
  const auto addr = reinterpret_cast<uintptr_t>(p.src) | reinterpret_cast<uintptr_t>(p.dst) |
                    static_cast<uintptr_t>(p.row_bytes);
  const dim3 grid{unsigned(blocks)};
  const dim3 block{unsigned(kCopyThreads)};
  if (addr % 16 == 0)
    index_copy_kernel<uint4, Checked, Scatter><<<grid, block, 0, stream>>>(p);
  else if (addr % 8 == 0)
    index_copy_kernel<uint2, Checked, Scatter><<<grid, block, 0, stream>>>(p);
  else if (addr % 4 == 0)
    index_copy_kernel<uint32_t, Checked, Scatter><<<grid, block, 0, stream>>>(p);
  else if (addr % 2 == 0)
    index_copy_kernel<uint16_t, Checked, Scatter><<<grid, block, 0, stream>>>(p);
  else
    index_copy_kernel<uint8_t, Checked, Scatter><<<grid, block, 0, stream>>>(p);
}

// Validates and launches one index copy (gather or scatter) in the checked or unchecked form.
template <bool Scatter>
void launch_index_copy(const IndexCopyParams& p, Checks checks, cudaStream_t stream) {
  const char* what = Scatter ? "pad scatter" : "unpad gather";
  if (p.num_indices < 0 || p.row_bytes < 0 || (p.num_indices > 0 && p.indices == nullptr))
    throw cuda::LaunchConfigError(std::string(what) + ": invalid sizes");
  if (checks == Checks::checked && p.record == nullptr)
    throw cuda::LaunchConfigError(std::string(what) + ": checked launch without a violation record");
  if (p.num_indices == 0 || p.row_bytes == 0) return;
  if (checks == Checks::checked)
    launch_width<true, Scatter>(p, stream);
  else
    launch_width<false, Scatter>(p, stream);
}

}  // namespace

void launch_unpad_gather(const IndexCopyParams& p, Checks checks, cudaStream_t stream) {
  launch_index_copy<false>(p, checks, stream);
}

void launch_pad_scatter(const IndexCopyParams& p, Checks checks, cudaStream_t stream) {
  launch_index_copy<true>(p, checks, stream);
}

}  // namespace ad::kern
