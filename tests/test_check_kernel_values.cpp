// seqused_k.range (45) and input.softcap (46): values flash-attn passes to the kernel without a
// check of its own. For each: a batch that breaks exactly it, one where it holds, and the
// symptom the report predicts.
#include <cfloat>

#include "test_check_helpers.hpp"

using namespace check_test;

TEST_CASE("seqused_k.range: a negative seqused_k is an error", "[check]") {
  auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 4, "head_dim": 8},
                   "varlen": {"cu_seqlens_q": [0, 4, 9], "seqused_k": [-5, -5]}})");
  INFO(r.describe());
  REQUIRE(r.ids() == std::vector<std::string>{"seqused_k.range"});
  const auto& v = r.get("seqused_k.range");
  CHECK(v.severity == ad::Severity::error);
  CHECK(v.evidence["index"] == 0);
  CHECK(v.evidence["value"] == -5);
  CHECK(v.evidence["negative_entries"] == 2);
  REQUIRE(v.symptom);
  CHECK(v.symptom->outcome == ad::Outcome::wrong_output);
  CHECK(v.symptom->basis == "model");
}

TEST_CASE("seqused_k.range leaves a count past its segment to the dynamic stages", "[check]") {
  // keys of the next sequence (result.reference) or rows past k and v (attention.access): the
  // checked kernels see exactly which keys it reaches (repro case fa2-seqused-k-past-last-segment)
  auto past = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 4, "head_dim": 8},
                      "varlen": {"cu_seqlens_q": [0, 4, 9], "seqused_k": [6, 7]}})");
  INFO(past.describe());
  CHECK_FALSE(past.has("seqused_k.range"));
}

TEST_CASE("seqused_k.range holds for counts within their segments, 0 included", "[check]") {
  auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 4, "head_dim": 8},
                   "varlen": {"cu_seqlens_q": [0, 4, 9], "seqused_k": [0, 5]}})");
  INFO(r.describe());
  CHECK_FALSE(r.has("seqused_k.range"));
}

TEST_CASE("input.softcap: a softcap below the smallest normal float32 is an error", "[check]") {
  // 1e-320 rounds to 0 as a float32: the kernel runs without softcap
  auto flushed = run(R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "2.6.3"},
                         "model": {"num_heads": 4, "head_dim": 8, "softcap": 1e-320},
                         "varlen": {"cu_seqlens_q": [0, 4, 9]}})");
  INFO(flushed.describe());
  REQUIRE(flushed.ids() == std::vector<std::string>{"input.softcap"});
  const auto& v = flushed.get("input.softcap");
  CHECK(v.evidence["rounds_to_zero"] == true);
  REQUIRE(v.symptom);
  CHECK(v.symptom->outcome == ad::Outcome::wrong_output);
  CHECK(v.symptom->basis == "model");
  // 1e-40 is a float32 subnormal: softmax_scale / softcap overflows to inf
  auto subnormal = run(R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "2.6.3"},
                           "model": {"num_heads": 4, "head_dim": 8, "softcap": 1e-40},
                           "varlen": {"cu_seqlens_q": [0, 4, 9]}})");
  INFO(subnormal.describe());
  REQUIRE(subnormal.has("input.softcap"));
  CHECK(subnormal.get("input.softcap").evidence["rounds_to_zero"] == false);
  CHECK_THAT(subnormal.get("input.softcap").message, Catch::Contains("overflows float32 to inf"));
}

TEST_CASE("input.softcap holds for 0, FLT_MIN and real caps, and leaves a release without softcap to input.feature", "[check]") {
  for (const char* cap : {"0", "1.1754944e-38", "50.0"}) {
    INFO(cap);
    auto r = run(std::string(R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "2.6.3"},
                   "model": {"num_heads": 4, "head_dim": 8, "softcap": )") + cap + R"(},
                   "varlen": {"cu_seqlens_q": [0, 4, 9]}})");
    INFO(r.describe());
    CHECK_FALSE(r.has("input.softcap"));
  }
  auto old = run(R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "2.5.8"},
                     "model": {"num_heads": 4, "head_dim": 8, "softcap": 1e-320},
                     "varlen": {"cu_seqlens_q": [0, 4, 9]}})");
  INFO(old.describe());
  CHECK(old.has("input.feature"));
  CHECK_FALSE(old.has("input.softcap"));
}
