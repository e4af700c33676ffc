// Overflow-checked integer arithmetic for values that come from the user (cu_seqlens entries up
// to +-2^62, dimensions up to 2^40). Every product or difference of such values goes through
// these (the loader, the checks, the execution plan): nullopt means "does not fit in int64",
// which the checks report as the value being out of range instead of wrapping silently.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ad::checked {

inline std::optional<int64_t> add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<int64_t> sub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<int64_t> mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// a * b * c ..., nullopt on overflow.
inline std::optional<int64_t> product(std::initializer_list<int64_t> factors) {
  int64_t r = 1;
  for (int64_t f : factors) {
    auto next = mul(r, f);
    if (!next) return std::nullopt;
    r = *next;
  }
  return r;
}

// Ceiling division for a >= 0, b > 0 (no overflow: the quotient is at most a).
inline int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

// For messages: the number, or "more than 2^63" when it did not fit.
inline std::string to_text(const std::optional<int64_t>& v) {
  return v ? std::to_string(*v) : std::string("more than 2^63");
}

// Tensor sizes where any overflow makes the whole estimate unusable: each operation gives 0
// after an overflow (or a negative factor) and `overflow` stays set (the plan's buffer sizes).
struct Sizes {
  bool overflow = false;
  int64_t mul(int64_t a, int64_t b) {
    const std::optional<int64_t> r = a < 0 || b < 0 ? std::nullopt : checked::mul(a, b);
    overflow = overflow || !r;
    return r.value_or(0);
  }
  int64_t mul(int64_t a, int64_t b, int64_t c) { return mul(mul(a, b), c); }
  int64_t add(int64_t a, int64_t b) {
    const std::optional<int64_t> r = checked::add(a, b);
    overflow = overflow || !r;
    return r.value_or(0);
  }
};

constexpr int64_t kInt32Limit = int64_t{1} << 31;  // first value a signed 32-bit index cannot hold

}  // namespace ad::checked
