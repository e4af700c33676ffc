// Masks and kwargs at the edges of what the releases accept: a rank-1 mask raises inside the
// unpad helper (before cu_seqlens exists), and cu_seq_lens kwargs without max lengths pass None,
// which the report writes as null.
#include <catch2/catch.hpp>

#include <filesystem>

#include "render/render.hpp"
#include "batch/batch.hpp"
#include "convert/convert.hpp"
#include "doctor/doctor.hpp"
#include "test_check_helpers.hpp"

namespace {

const std::filesystem::path kCli = std::filesystem::path(ATTN_DOCTOR_SOURCE_DIR) / "tests" / "data" / "cli";
const std::filesystem::path kGoldenBatches = std::filesystem::path(ATTN_DOCTOR_SOURCE_DIR) / "tests" / "golden" / "batches";

constexpr const char* kPadError =
    "Padding length should be less than or equal to two times the input dimension but got padding length 2 and input "
    "of dimension 0";

}  // namespace

TEST_CASE("a rank-1 mask raises at _get_unpad_data's F.pad in every transformers rule set", "[convert]") {
  // measured: transformers 4.38.2 - 5.24.0 on the CPU raise this RuntimeError from
  // F.pad(torch.cumsum(seqlens_in_batch, dim=0), (1, 0)) on the 0-d sum of a (S,) mask
  const ad::Batch batch = ad::load_batch_file(kCli / "mask-rank1.json");
  size_t checked = 0;
  for (const ad::RuleSetInfo& rules : ad::rule_sets()) {
    if (rules.library != "transformers") continue;
    INFO(rules.name);
    const ad::VarlenArgs a = ad::replay_with(batch, rules);
    REQUIRE(a.failure);
    CHECK(a.failure->type == "RuntimeError");
    CHECK(a.failure->message == kPadError);
    CHECK(a.failure->where == "_flash_attention_forward > _upad_input > _get_unpad_data");
    CHECK(a.path == ad::VarlenPath::mask);
    // the helper returned nothing: no cu_seqlens, no indices, nothing gathered
    CHECK(a.cu_seqlens_k.values.empty());
    CHECK(a.cu_seqlens_q.values.empty());
    CHECK_FALSE(a.indices_k);
    CHECK(a.total_k == 0);
    ++checked;
  }
  CHECK(checked >= 10);
  // flash-attn's own unpad_input and FLA's get_unpad_data pad the same 0-d cumsum
  for (const char* name : {"flash_attn-2.0", "flash_attn-2.7", "fla-attn"}) {
    INFO(name);
    const ad::RuleSetInfo* rules = ad::find_rule_set(name);
    REQUIRE(rules);
    const ad::VarlenArgs a = ad::replay_with(batch, *rules);
    REQUIRE(a.failure);
    CHECK(a.failure->message == kPadError);
    CHECK(a.cu_seqlens_k.values.empty());
  }
}

TEST_CASE("a 2-D mask of one row still unpads (the rank-1 failure is the rank's, not B = 1's)", "[convert]") {
  const ad::Batch batch = ad::load_batch_file(kGoldenBatches / "022-mask-b1-ones.json");
  const ad::VarlenArgs a = ad::replay_with(batch, *ad::find_rule_set("hf-4.44.0"));
  CHECK_FALSE(a.failure);
  CHECK(a.cu_seqlens_k.values == std::vector<int64_t>{0, 5});
}

TEST_CASE("the report writes a max_seqlen passed as None as null", "[convert]") {
  // transformers 4.47 - 5.0 with cu_seq_lens_q/k and no max_length_q/k: flash-attn gets None
  // (tests/golden/transformers-4.47.1.json, 047-kwargs-cu-only-posids)
  ad::ConvertOptions o;
  o.transformers = ad::version_literal("4.47.1");
  ad::Conversion c = ad::convert(ad::load_batch_file(kCli / "kwargs-cu-only.json"), o);
  REQUIRE(c.replayed);
  REQUIRE(c.replayed->path == ad::VarlenPath::kwargs);
  const auto j = ad::varlen_json(*c.replayed, false);
  CHECK(j["max_seqlen_q"].is_null());
  CHECK(j["max_seqlen_k"].is_null());
  // a value that was passed stays a number
  o.transformers = ad::version_literal("4.44.0");
  ad::Conversion mask = ad::convert(ad::load_batch_file(kGoldenBatches / "001-right-padding.json"), o);
  REQUIRE(mask.replayed);
  CHECK(ad::varlen_json(*mask.replayed, false)["max_seqlen_q"].is_number_integer());
}

TEST_CASE("mask.rank on a rank-1 mask predicts the release's F.pad error, not flash-attn's shape check", "[check]") {
  auto r = check_test::run(R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "2.6.3", "transformers": "4.44.0"},
                               "model": {"num_heads": 4, "head_dim": 8},
                               "batch": {"attention_mask": {"values": [1, 1, 1, 0, 0]}}})",
                           check_test::Replay::convert());
  INFO(r.describe());
  REQUIRE(r.first() == "mask.rank");
  const ad::Violation& v = r.get("mask.rank");
  CHECK_THAT(v.message, Catch::Contains("0-d"));
  CHECK(v.evidence["upstream_message"] == kPadError);
  CHECK_FALSE(v.evidence.contains("cu_seqlens_shape"));  // none is built
  CHECK(v.evidence["lengths_shape"] == nlohmann::json::array());
  REQUIRE(v.symptom);
  CHECK(v.symptom->outcome == ad::Outcome::raises);
  CHECK(v.symptom->message == std::string("RuntimeError: ") + kPadError);
  CHECK(v.symptom->message.find("must have shape") == std::string::npos);
  // nothing reached flash-attn: no kernel-argument finding follows from an invented cu_seqlens
  CHECK_FALSE(r.has("cu_seqlens.shape"));
}
