// The launch-order key: where an access stands in the order the kernel's programs (CTAs)
// are enumerated, so that "the first out-of-bounds access" means the same access on every
// run and on both backends, whatever the scheduling.
//
//   key = program << 26 | class << 24 | sub
//
//  program  the linear index of the program (CTA) in launch order; for a grid (x, y, z) =
//           (m blocks, segments, heads) it is (z * y_size + y) * x_size + x, i.e. heads
//           outermost, as grid_linear() computes it. Gather/scatter: the index position.
//  class    the access class within the program (AccessClass).
//  sub      24 bits within the class: the row of the segment (attention q/out/lse), the key
//           row (k; v adds kValueBit), or, for rotary, the row in the program << 16 | the
//           access number within that row. Larger values saturate.
// Keys compare as integers; the smallest is the first access.
#pragma once

#include <cstdint>

#include "contract/host_device.hpp"

namespace ad::order {

enum AccessClass : uint32_t {
  kRead = 0,       // gather/scatter/rotary element reads; attention: q rows
  kKeyRead = 1,    // attention: k and v rows
  kOutWrite = 2,   // attention: out rows
  kLseWrite = 3,   // attention: LSE elements
};
// gather/scatter and rotary use kRead for every access: their access number is in `sub`.
inline constexpr uint64_t kNone = ~uint64_t{0};    // no access recorded
inline constexpr uint64_t kSubMax = 0xFFFFFF;      // 24 bits
inline constexpr uint64_t kValueBit = uint64_t{1} << 23;  // sub of a v read: the k read's | this

AD_HD uint64_t key(uint64_t program, uint32_t cls, int64_t sub) {
  const uint64_t s = sub < 0 ? 0 : (uint64_t(sub) > kSubMax ? kSubMax : uint64_t(sub));
  return (program << 26) | (uint64_t(cls & 3u) << 24) | s;
}
AD_HD uint64_t program_of(uint64_t k) { return k >> 26; }
AD_HD uint32_t class_of(uint64_t k) { return uint32_t((k >> 24) & 3u); }
AD_HD uint64_t sub_of(uint64_t k) { return k & kSubMax; }

// (x, y, z) of a grid (x_size, y_size, z_size) in launch order.
AD_HD uint64_t grid_linear(uint64_t x, uint64_t y, uint64_t z, uint64_t x_size, uint64_t y_size) {
  return (z * y_size + y) * x_size + x;
}

// rotary: the sub of access `n` of row `row_in_program` of a program.
AD_HD int64_t rotary_sub(int64_t row_in_program, int64_t n) {
  return (row_in_program << 16) | (n < 0xFFFF ? n : 0xFFFF);
}

}  // namespace ad::order
