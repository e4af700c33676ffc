// The CPU backend's host memory: the plan's estimate bounds what the stages really hold, and a
// legal batch whose buffers the host cannot give falls back to the static verdict (exit 0/1 with
// a note), never exit 3.
#include <catch2/catch.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "batch/batch.hpp"
#include "convert/convert.hpp"
#include "exec/plan/plan.hpp"
#include "util/subprocess.hpp"

namespace {

const std::string kBatch = std::string(ATTN_DOCTOR_SOURCE_DIR) + "/tests/data/cli/packed-100k.json";

}  // namespace

// AddressSanitizer reserves terabytes of shadow address space at start-up: under `ulimit -v`
// an instrumented binary cannot start at all, so this test needs the plain build.
#if defined(__SANITIZE_ADDRESS__)
#define AD_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AD_ASAN 1
#endif
#endif

TEST_CASE("an allocation failure in the dynamic stages falls back to the static verdict", "[exec]") {
#ifdef AD_ASAN
  WARN("SKIPPED: AddressSanitizer cannot start under ulimit -v (its shadow memory); the release lane runs this test");
  return;
#endif
  // 400 MiB of address space: enough for the static stages, not for the ~0.8 GB of q, k, v and
  // out the CPU backend allocates for 100000 tokens x 8 heads x 64
  const std::string cmd = "ulimit -v 409600 && exec '" + std::string(ATTN_DOCTOR_BINARY) + "' check '" + kBatch +
                          "' --backend cpu --format json";
  const ad::ProcessResult r = ad::run_process({"/bin/sh", "-c", cmd}, 120.0);
  INFO(r.err);
  REQUIRE(r.exited);
  CHECK(r.exit_code == 0);  // the batch is healthy: its static verdict
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["status"] == "ok");
  bool skipped = false;
  for (const auto& s : j["stages"])
    if (s["name"] == "attention") {
      skipped = s["status"] == "skipped";
      CHECK_THAT(s["detail"].get<std::string>(), Catch::Contains("ran out of host memory"));
    }
  CHECK(skipped);
  bool noted = false;
  for (const auto& n : j["notes"]) noted = noted || n.get<std::string>().find("checked statically only") != std::string::npos;
  CHECK(noted);
}

namespace {

ad::ExecPlan plan_for_packed(int64_t tokens) {
  const std::string json = R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "2.6.3"},
      "model": {"num_heads": 8, "head_dim": 64, "dtype": "bf16"}, "varlen": {"cu_seqlens_q": [0, )" +
                           std::to_string(tokens / 2) + ", " + std::to_string(tokens) + "]}}";
  const ad::Batch batch = ad::parse_batch_text(json, "packed.json");
  ad::Conversion conversion;
  conversion.explicit_args = ad::explicit_varlen_args(batch);
  ad::ExecOptions options;
  options.threads = 2;
  return ad::make_exec_plan(batch, conversion, options);
}

}  // namespace

TEST_CASE("the memory estimate bounds the measured peak and leaves the process its share of the budget", "[exec]") {
  // measured peak RSS on 2 cores (/usr/bin/time -v): 480k packed tokens (H 8, D 64) 4025 MB,
  // 496k 4159 MB; the process itself (binary, batch, static stages) 6-12 MB
  const ad::ExecPlan runs = plan_for_packed(480000);
  CHECK(runs.skip_reason.empty());
  CHECK(runs.memory.bytes >= int64_t{4025} * 1000 * 1000);
  const ad::ExecPlan over = plan_for_packed(496000);
  CHECK(over.memory.bytes >= int64_t{4159} * 1000 * 1000);
  CHECK(over.memory.bytes > int64_t{4} << 30);  // q, k, v and out fit 4 GiB, the process with them does not
  CHECK_THAT(over.skip_reason, Catch::Contains("checked statically only"));
}
