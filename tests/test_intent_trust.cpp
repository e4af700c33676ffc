// Intent provenance: the report says what the result stage compared against, and a reference
// derived from the input the conversion broke never makes that stage ok.
#include <catch2/catch.hpp>

#include "check/check.hpp"
#include "doctor/doctor.hpp"
#include "render/render.hpp"

using namespace ad;

namespace {

Diagnosis run_diagnosis(const std::string& json_or_file, BackendChoice backend, bool file = false) {
  Batch b = file ? load_batch_file(std::string(ATTN_DOCTOR_SOURCE_DIR) + "/" + json_or_file)
                 : parse_batch_text(json_or_file, "test.json");
  CheckOptions o;
  o.backend = backend;
  return diagnose(b, o, "test.json");
}
Report run(const std::string& json_or_file, BackendChoice backend, bool file = false) {
  return run_diagnosis(json_or_file, backend, file).report;
}

const StageRecord* stage(const Report& r, Stage name) {
  for (const auto& s : r.stages)
    if (s.name == name) return &s;
  return nullptr;
}

}  // namespace

TEST_CASE("intent: a reference derived from the slice the release broke is untrusted", "[intent]") {
  // transformers#35032: right padding with a partial query; the derived intent places the
  // queries where mask[:, -Lq:] does, so the rows agree with it and prove nothing
  const Diagnosis d = run_diagnosis("repro_cases/hf-4.46.3-partial-query-right-padding.json", BackendChoice::cpu, true);
  const Report& r = d.report;
  REQUIRE(r.intent);
  CHECK(r.intent->source == "mask");
  CHECK_FALSE(r.intent->trusted);
  CHECK_THAT(r.intent->why, Catch::Contains("mask.padding_side"));
  const StageRecord* result = stage(r, Stage::result);
  REQUIRE(result);
  CHECK(result->status != StageStatus::ok);
  CHECK(result->status == StageStatus::unverified);
  CHECK_THAT(result->detail, Catch::Contains("the reference is untrusted"));
  // the prediction stays from the static violation, with the rows that come back wrong
  REQUIRE(r.prediction);
  CHECK(r.prediction->invariant == "mask.padding_side");
  CHECK(r.prediction->symptom.outcome == Outcome::wrong_output);
  CHECK(r.prediction->symptom.rows == std::vector<RowRange>{{4, 7}});
  const nlohmann::json j = to_json(d, {});
  CHECK(j["intent"]["trusted"] == false);
  CHECK(j["intent"]["source"] == "mask");
  CHECK(render_text(d, {}).find("reference: untrusted:") != std::string::npos);
}

TEST_CASE("intent: the healthy twin's derived intent is trusted and the result stage ok", "[intent]") {
  Report r = run("repro_cases/hf-4.46.3-partial-query-left-padding-fixed.json", BackendChoice::cpu, true);
  REQUIRE(r.intent);
  CHECK(r.intent->source == "mask");
  CHECK(r.intent->trusted);
  CHECK(stage(r, Stage::result)->status == StageStatus::ok);
  CHECK(r.prediction->symptom.outcome == Outcome::ok);
}

TEST_CASE("intent: given, cu_seqlens_q under test, none", "[intent]") {
  SECTION("a given intent is trusted") {
    Report r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 4, "head_dim": 64},
      "batch": {"attention_mask": {"lengths": [6, 3], "width": 6, "padding_side": "right"}, "query_length": 2},
      "intent": {"sequences": [{"row": 0, "start": 0, "length": 6}, {"row": 1, "start": 0, "length": 3}]}})",
                   BackendChoice::none);
    CHECK(r.intent->source == "given");
    CHECK(r.intent->trusted);
  }
  SECTION("an intent derived from a broken cu_seqlens_q is not") {
    Report r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 16, "num_kv_heads": 4, "head_dim": 128},
      "varlen": {"cu_seqlens_q": [0, 100, 137, 400], "max_seqlen_q": 263, "total_q": 387}})",
                   BackendChoice::cpu);
    CHECK(r.intent->source == "cu_seqlens_q");
    CHECK_FALSE(r.intent->trusted);
    CHECK_THAT(r.intent->why, Catch::Contains("cu_seqlens.total"));
    CHECK(stage(r, Stage::result)->status != StageStatus::ok);
  }
  SECTION("a healthy explicit call: trusted") {
    Report r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 4, "head_dim": 64},
      "varlen": {"cu_seqlens_q": [0, 5, 9]}})",
                   BackendChoice::cpu);
    CHECK(r.intent->source == "cu_seqlens_q");
    CHECK(r.intent->trusted);
    CHECK(stage(r, Stage::result)->status == StageStatus::ok);
  }
  SECTION("no intended sequences: nothing to compare against") {
    Report r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 4, "head_dim": 64},
      "launch": {"signature": ["x", "N"], "passed": ["x", "N"], "autotune_keys": ["N"]}})",
                   BackendChoice::none);
    CHECK(r.intent->source == "none");
    CHECK_FALSE(r.intent->trusted);
  }
}
