// The rule-set registry: release strings map through the table of published releases (an unknown
// one to the nearest known release at or below it, with a note); a batch naming no release gets
// the newest rule set.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>

#include "render/render.hpp"
#include "batch/batch.hpp"
#include "convert/convert.hpp"
#include "doctor/doctor.hpp"

namespace {

ad::ResolvedRules resolve(const char* release) { return ad::resolve_transformers(ad::version_literal(release)); }

}  // namespace

TEST_CASE("releases map to their rule set, unknown ones to the nearest known release's", "[convert]") {
  CHECK(resolve("4.44.0").rules->name == "hf-4.44.0");
  CHECK(resolve("4.44.0").exact);
  CHECK(resolve("4.44.2").rules->name == "hf-4.44.1");
  CHECK(resolve("4.53.2").rules->name == "hf-4.53.1");
  CHECK(resolve("4.46.0.dev0").rules->name == "hf-4.44.1");  // a dev release sorts before 4.46.0
  CHECK(resolve("5.23.0").rules->name == "hf-5.20");
  auto old = resolve("4.30.0");
  CHECK(old.rules->name == "hf-4.34");
  CHECK_FALSE(old.note.empty());
  auto none = ad::resolve_transformers(std::nullopt);
  CHECK(none.rules->name == "hf-5.20");
  CHECK(none.note.find("no transformers release named") != std::string::npos);
}

TEST_CASE("every rule set names its releases and its source", "[convert]") {
  for (const auto& r : ad::rule_sets()) {
    CHECK_FALSE(r.name.empty());
    CHECK_FALSE(r.first.empty());
    CHECK_FALSE(r.source.empty());
    CHECK_FALSE(r.summary.empty());
    CHECK(ad::parse_version(r.first).has_value());
  }
}

TEST_CASE("convert() says which rule set replayed the batch", "[convert]") {
  ad::Batch b = ad::parse_batch_text(R"({"format": "attn-doctor/batch@1",
      "environment": {"transformers": "4.51.9"},
      "model": {"num_heads": 4, "head_dim": 8},
      "batch": {"position_ids": {"values": [[0, 1, 2, 0, 1]]}}})", "inline.json");
  ad::Conversion c = ad::convert(b);
  REQUIRE(c.replayed);
  CHECK(c.replayed->rule_set == "hf-4.49");
  CHECK(c.replayed->requested == "4.51.9");
  // 4.51.9 was never published: replayed as the nearest known release, 4.51.3 (docs/spec/releases.md)
  CHECK(c.replayed->nearest_release == "4.51.3");
  CHECK(c.replayed->note.find("not a release attn-doctor knows") != std::string::npos);
  CHECK(c.replayed->path == ad::VarlenPath::position_ids);
  CHECK(c.replayed->cu_seqlens_q.values == std::vector<int64_t>{0, 3, 5});
}

TEST_CASE("the replay is linear in tokens: a 1M-token mask", "[convert]") {
  // 16 rows x 65536 columns, right padded; every rule set must get through it quickly
  std::string text = R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
      "batch": {"attention_mask": {"lengths": [)";
  for (int i = 0; i < 16; ++i) text += std::to_string(65536 - i * 1000) + (i < 15 ? "," : "");
  text += R"(], "width": 65536, "padding_side": "right"}}})";
  ad::Batch b = ad::parse_batch_text(text, "large.json");
  auto t0 = std::chrono::steady_clock::now();
  for (const auto& r : ad::rule_sets()) {
    ad::VarlenArgs a = ad::replay_with(b, r);
    CHECK_FALSE(a.failure.has_value());
    CHECK(a.cu_seqlens_k.values.back() == a.total_k);
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(seconds < 30.0);
}

TEST_CASE("the report's varlen block gives max_seqlen's tensor-ness per argument", "[convert]") {
  // recorded: transformers 5.5.0 on a decode step passes max_seqlen_q = 1 (host int) and
  // max_seqlen_k = 6 (a 0-d int32 tensor from _get_unpad_data); tests/golden/transformers-5.5.0.json
  const auto batches = std::filesystem::path(ATTN_DOCTOR_SOURCE_DIR) / "tests" / "golden" / "batches";
  auto varlen = [&](const char* batch, const char* release) {
    ad::ConvertOptions o;
    o.transformers = ad::version_literal(release);
    ad::Conversion c = ad::convert(ad::load_batch_file(batches / batch), o);
    REQUIRE(c.replayed);
    return ad::varlen_json(*c.replayed, false);
  };
  auto decode = varlen("004-decode-left-padding.json", "5.5.0");
  CHECK(decode["max_seqlen_q_is_tensor"] == false);
  CHECK(decode["max_seqlen_k_is_tensor"] == true);
  CHECK(decode["max_seqlen_is_tensor"] == true);  // either
  auto packed = varlen("024-packed-b1.json", "4.44.0");
  CHECK(packed["max_seqlen_q_is_tensor"] == true);
  CHECK(packed["max_seqlen_k_is_tensor"] == true);
  auto host = varlen("004-decode-left-padding.json", "5.14.1");
  CHECK(host["max_seqlen_q_is_tensor"] == false);
  CHECK(host["max_seqlen_k_is_tensor"] == false);
  CHECK(host["max_seqlen_is_tensor"] == false);
}
