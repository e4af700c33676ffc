// libFuzzer target: the batch loader on arbitrary bytes. Any outcome but a clean Batch or an
// InputError (crash, sanitizer report, other exception, hang, unbounded allocation) is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "batch/batch.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ad::LoadLimits limits;
  limits.max_array_elements = 1 << 16;  // keep each run small; the limits themselves are what is tested
  limits.max_total_elements = 1 << 17;
  try {
    ad::Batch b = ad::parse_batch_text(std::string_view(reinterpret_cast<const char*>(data), size),
                                       "tests/fuzz/input.json", limits);
    (void)b;
  } catch (const ad::InputError&) {
  }
  return 0;
}
