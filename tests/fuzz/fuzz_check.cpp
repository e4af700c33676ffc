// libFuzzer target: the whole `check` pipeline on arbitrary bytes: load, replay, every static
// invariant, the CPU backend (tiny compute and memory budgets, one thread), and both report
// renderings. A clean report or an InputError is fine; anything else is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "batch/batch.hpp"
#include "doctor/doctor.hpp"
#include "render/render.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ad::LoadLimits limits;
  limits.max_array_elements = 1 << 14;
  limits.max_total_elements = 1 << 15;
  try {
    ad::Batch batch = ad::parse_batch_text(std::string_view(reinterpret_cast<const char*>(data), size),
                                           "tests/fuzz/input.json", limits);
    ad::CheckOptions options;
    options.backend = ad::BackendChoice::cpu;
    options.exec.budget = 1 << 16;                 // multiply-adds before rows are sampled
    options.exec.memory_budget_bytes = 16 << 20;   // larger batches: dynamic stages skipped
    options.exec.threads = 1;
    const ad::Diagnosis diagnosis = ad::diagnose(batch, options, "fuzz");
    (void)ad::to_json(diagnosis, {}).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    (void)ad::render_text(diagnosis, {});
    if (diagnosis.report.stage_error) __builtin_trap();  // a stage that throws is a bug, not an input error
  } catch (const ad::InputError&) {
  } catch (const ad::CapabilityError&) {
  }
  return 0;
}
