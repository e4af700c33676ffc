// libFuzzer target: the batch loader on arbitrary bytes. Any outcome but a clean Batch or an
// InputError (crash, sanitizer report, other exception, hang, unbounded allocation) is a bug.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "batch/batch.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ad::LoadLimits limits;
  limits.max_array_elements = 1 << 16;  // keep each run small; the limits themselves are what is tested
  limits.max_total_elements = 1 << 17;
  try {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    ad::Batch b = ad::parse_batch_text(text, "tests/fuzz/input.json", limits);
    // the limits at their edges: one object and nothing after it (a NUL ends nothing), and
    // B x max(Lq, Lk) below the dimension cap
    if (text.find('\0') != std::string_view::npos) __builtin_trap();
    if (b.batch && b.batch->batch_size * std::max(b.batch->query_length, b.batch->kv_length) >= limits.max_dimension)
      __builtin_trap();
  } catch (const ad::InputError&) {
  }
  return 0;
}
