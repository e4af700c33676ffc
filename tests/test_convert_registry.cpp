// The rule-set registry: release strings map to the nearest rule set at or below them, with a
// note when the mapping is not exact; a batch naming no release gets the newest rule set.
#include <catch2/catch.hpp>

#include <chrono>

#include "batch/batch.hpp"
#include "convert/convert.hpp"

namespace {

ad::ResolvedRules resolve(const char* release) { return ad::resolve_transformers(ad::version_literal(release)); }

}  // namespace

TEST_CASE("releases map to the nearest rule set at or below them", "[convert]") {
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
  CHECK(c.replayed->note.find("nearest lower") != std::string::npos);
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
