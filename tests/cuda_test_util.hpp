// Helpers shared by the GPU tests (tests/test_cuda_*.cpp, built only with CUDA): the visible
// skip where no device can run them, seeded host tensors in the kernels' element types with
// their conversions to and from the 16-bit storage, and the defaults of a case's spec.
#pragma once

#include <catch2/catch.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "contract/vocabulary.hpp"
#include "exec/cuda/device.hpp"

namespace cuda_test {

// Returns false (and prints the visible skip, which ctest reports as skipped) when no device
// can run the tests.
inline bool have_device() {
  static const ad::cuda::DeviceInfo info = ad::cuda::query_device();
  if (!info.present) WARN("SKIPPED: no CUDA device (" + info.why_absent + ")");
  return info.present;
}

// ---- host element conversions -----------------------------------------------------------

inline uint16_t to_bits(float x, ad::ElemType t) {
  if (t == ad::ElemType::bf16) return __nv_bfloat16_raw(__float2bfloat16_rn(x)).x;
  return __half_raw(__float2half_rn(x)).x;
}
inline float from_bits(uint16_t b, ad::ElemType t) {
  if (t == ad::ElemType::bf16) {
    __nv_bfloat16_raw r;
    r.x = b;
    return __bfloat162float(__nv_bfloat16(r));
  }
  __half_raw r;
  r.x = b;
  return __half2float(__half(r));
}

// A tensor of `n` random values in [-1, 1), rounded to the element type; `values` holds
// what the device sees (after rounding), `bytes` the raw storage.
struct HostTensor {
  ad::ElemType elem = ad::ElemType::bf16;
  std::vector<float> values;
  std::vector<unsigned char> bytes;
};

inline HostTensor random_tensor(size_t n, ad::ElemType elem, std::mt19937& rng) {
  HostTensor t;
  t.elem = elem;
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  t.values.resize(n);
  t.bytes.resize(n * size_t(ad::elem_bytes(elem)));
  for (size_t i = 0; i < n; ++i) {
    const float x = u(rng);
    if (elem == ad::ElemType::fp32) {
      t.values[i] = x;
      std::memcpy(&t.bytes[i * 4], &x, 4);
    } else {
      const uint16_t b = to_bits(x, elem);
      t.values[i] = from_bits(b, elem);
      std::memcpy(&t.bytes[i * 2], &b, 2);
    }
  }
  return t;
}

// The values of raw storage (bytes of any element type, or 16-bit patterns) read back.
inline std::vector<float> decode(const std::vector<unsigned char>& bytes, ad::ElemType elem) {
  const size_t n = bytes.size() / size_t(ad::elem_bytes(elem));
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    if (elem == ad::ElemType::fp32) {
      std::memcpy(&out[i], &bytes[i * 4], 4);
    } else {
      uint16_t b;
      std::memcpy(&b, &bytes[i * 2], 2);
      out[i] = from_bits(b, elem);
    }
  }
  return out;
}
inline std::vector<float> decode(const std::vector<uint16_t>& bits, ad::ElemType elem) {
  std::vector<float> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) out[i] = from_bits(bits[i], elem);
  return out;
}

// ---- case specs --------------------------------------------------------------------------

// A case's spec (the forward tests' AttnSpec, the backward tests' BwdSpec) completed as the
// fixtures read it: cu_seqlens_k is cu_seqlens_q where not given, max_seqlen_q / _k the
// longest segment where not given (< 0); rows_q / rows_k, the buffers' rows, are the spec's
// or, where not given (< 0), cu_seqlens[-1].
template <class Spec>
void complete_spec(Spec& spec, int64_t& rows_q, int64_t& rows_k) {
  if (spec.cu_k.empty()) spec.cu_k = spec.cu_q;
  rows_q = spec.rows_q >= 0 ? spec.rows_q : spec.cu_q.back();
  rows_k = spec.rows_k >= 0 ? spec.rows_k : spec.cu_k.back();
  auto longest = [](const std::vector<int32_t>& cu) {
    int m = 0;
    for (size_t i = 0; i + 1 < cu.size(); ++i) m = std::max(m, cu[i + 1] - cu[i]);
    return m;
  };
  if (spec.max_seqlen_q < 0) spec.max_seqlen_q = longest(spec.cu_q);
  if (spec.max_seqlen_k < 0) spec.max_seqlen_k = longest(spec.cu_k);
}

}  // namespace cuda_test
