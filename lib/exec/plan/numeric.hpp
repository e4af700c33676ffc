// Numeric building blocks shared by the CPU backend and its CUDA twin: dtype rounding
// (bf16/fp16 emulated on fp32 storage), the seeded input generator, and the cos/sin table.
//
// Everything here is a pure function of its arguments, header-only and usable from device
// code (AD_HD), so both backends produce bit-identical inputs for one --seed. Values are kept
// in fp32 and rounded to the element type (contract/vocabulary.hpp) wherever the real kernel
// stores (or converts to) it.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "contract/host_device.hpp"
#include "contract/vocabulary.hpp"

namespace ad::num {

AD_HD uint32_t float_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
AD_HD float bits_float(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// fp32 -> bf16 -> fp32, round to nearest even (what `tensor.to(torch.bfloat16)` and
// cutlass' NumericConverter do). NaN stays NaN; branch-free apart from the NaN select so
// loops over it vectorise.
AD_HD float round_bf16(float x) {
  uint32_t u = float_bits(x);
  uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  return (u & 0x7fffffffu) > 0x7f800000u ? x : bits_float(r);
}

// fp32 -> fp16 -> fp32, round to nearest even, with fp16 subnormals and overflow to inf.
// Rounds |x| to a multiple of its fp16 quantum by adding and subtracting a power of two
// whose fp32 ulp is that quantum (2^(e-10) for normals, 2^-24 below 2^-14).
AD_HD float round_fp16(float x) {
  const float a = std::fabs(x);
  const uint32_t e = (float_bits(a) >> 23) & 0xffu;             // biased exponent of |x|
  const uint32_t ce = e < 113u ? 126u : (e > 200u ? 200u : e + 13u);  // 113 = bias(127) - 14
  const float c = bits_float(ce << 23);                          // 2^(e-127+13) or 2^-1
  float r = (a + c) - c;
  r = r > 65504.0f ? INFINITY : r;
  r = a != a ? a : r;                                            // NaN
  return std::copysign(r, x);
}

AD_HD float round_to(ElemType p, float x) {
  return p == ElemType::bf16 ? round_bf16(x) : p == ElemType::fp16 ? round_fp16(x) : x;
}

// ---------------------------------------------------------------------------------------
// Seeded inputs: a counter-based generator, so any element can be produced independently
// (in parallel, on either backend) from (seed, tensor, element index).

enum class InputTensor : uint32_t { q = 1, k = 2, v = 3, dout = 4, qv = 5 };  // dout: the training step's seeded dO (final frame); qv: FA3's q_v

AD_HD uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in [-1, 1), rounded to the dtype, never zero (a zero would hide unwritten rows
// and make every score equal): exact zeros become +-2^-7.
AD_HD float input_value(uint64_t seed, InputTensor tensor, uint64_t index, ElemType p) {
  const uint64_t h = splitmix64(splitmix64(seed ^ (uint64_t(tensor) << 58)) + index);
  const float u = float(h >> 40) * (1.0f / 16777216.0f);  // [0, 1), 24 bits
  float v = round_to(p, 2.0f * u - 1.0f);
  if (v == 0.0f) v = (h & 1u) ? 0.0078125f : -0.0078125f;
  return v;
}

// ---------------------------------------------------------------------------------------
// Rotary cos/sin table as flash_attn's and FLA's RotaryEmbedding build it
// (`_update_cos_sin_cache`, pos_idx_in_fp32=True): inv_freq = 1 / base^(2i/dim) in fp32,
// t in fp32, freqs = t * inv_freq in fp32, cos/sin in fp32, then `.to(dtype)`.
// `dim` is the value passed to RotaryEmbedding (half = ceil(dim / 2) columns).
AD_HD float rotary_inv_freq(int64_t i, int64_t dim, double base) {
  const float expo = float(2 * i) / float(dim);
  return 1.0f / std::pow(float(base), expo);
}
AD_HD float rotary_cos(int64_t pos, int64_t i, int64_t dim, double base, ElemType p) {
  return round_to(p, std::cos(float(pos) * rotary_inv_freq(i, dim, base)));
}
AD_HD float rotary_sin(int64_t pos, int64_t i, int64_t dim, double base, ElemType p) {
  return round_to(p, std::sin(float(pos) * rotary_inv_freq(i, dim, base)));
}

// ---------------------------------------------------------------------------------------
// Reference tolerance: a (row, head) passes when ||out - ref||_2 / ||ref||_2 is within this.

AD_HD double tolerance_for(ElemType p) { return p == ElemType::bf16 ? 1e-2 : p == ElemType::fp16 ? 2e-3 : 1e-5; }

}  // namespace ad::num
