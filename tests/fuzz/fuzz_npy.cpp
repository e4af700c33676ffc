// libFuzzer target: the strict .npy parser on arbitrary bytes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "batch/batch.hpp"
#include "batch/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ad::LoadLimits limits;
  limits.max_array_elements = 1 << 16;
  try {
    ad::IntTensor t = ad::parse_npy(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.npy",
                                    "/batch/attention_mask/file", limits);
    // a parsed array must be self-consistent
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    if (n != t.numel()) __builtin_trap();
    // every dimension within the widths' cap, an empty array's included
    for (int64_t d : t.shape)
      if (d > limits.max_dimension) __builtin_trap();
  } catch (const ad::InputError&) {
  }
  return 0;
}
