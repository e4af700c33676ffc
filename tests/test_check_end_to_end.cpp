// End to end: the parity batches (tests/golden/batches, the inputs the real releases ran on)
// through the C++ replay of a named transformers release and the static checks, as `check
// --transformers R` runs them. Each row reads: this batch, on this release, is first reported as
// this invariant (and also as these).
#include <filesystem>

#include "test_check_helpers.hpp"

namespace {

struct Row {
  const char* batch;
  const char* release;
  const char* first;                 // nullptr: every invariant holds
  std::vector<std::string> also;     // reported too
  bool only = false;                 // nothing but `first`
};

check_test::Result run_release(const Row& row) {
  const auto path = std::filesystem::path(ATTN_DOCTOR_SOURCE_DIR) / "tests/golden/batches" / row.batch;
  check_test::Result r{ad::load_batch_file(path), {}, {}};
  ad::ConvertOptions options;
  options.transformers = ad::parse_version(row.release);
  r.conversion = ad::convert(r.batch, options);
  r.violations = ad::run_static_checks(r.batch, r.conversion, {});
  return r;
}

void check_row(const Row& row) {
  auto r = run_release(row);
  INFO(row.batch << " on transformers " << row.release << " (rule set "
                 << (r.conversion.replayed ? r.conversion.replayed->rule_set : std::string("none")) << ")\n"
                 << r.describe());
  if (!row.first) {
    CHECK(r.violations.empty());
    return;
  }
  CHECK(r.first() == row.first);
  for (const auto& id : row.also) CHECK(r.has(id));
  if (row.only)
    for (const auto& v : r.violations) CHECK(v.id == row.first);
}

}  // namespace

TEST_CASE("end to end: mask-path batches on the replayed releases", "[check]") {
  const std::vector<Row> rows = {
      {"001-right-padding.json", "4.36.2", nullptr, {}},
      {"001-right-padding.json", "5.23.0", nullptr, {}},
      {"006-partial-query-left.json", "4.44.0", nullptr, {}},
      // transformers#35032: mask[:, -Lq:] on a right-padded row
      {"007-partial-query-right.json", "4.40.2", "mask.padding_side", {}, true},
      {"008-segment-id-mask.json", "4.44.0", "mask.binary", {"cu_seqlens.total", "indices.count", "cu_seqlens.segments"}},
      {"009-mask-narrower-prefill.json", "4.44.0", "mask.kv_length", {}, true},
      // >= 4.53 cuts the keys to the mask, not the queries: the partial-query slice has too few columns
      {"009-mask-narrower-prefill.json", "4.53.0", "mask.padding_side", {}, true},
      // FLA #206 / decoding past the cache: the release's own gather fails
      {"012-mask-wider-decode.json", "4.44.0", "mask.kv_length", {"indices.range"}},
      {"013-mask-4d-additive.json", "4.44.0", "mask.rank", {"indices.range"}},
      {"042-ones-mask-and-packed.json", "4.44.0", "cu_seqlens.segments", {}, true},
  };
  for (const auto& row : rows) check_row(row);
}

TEST_CASE("end to end: Gemma-2 generate (Dao-AILab/flash-attention#1156) across releases", "[check]") {
  const std::vector<Row> rows = {
      // 4.44.0: a 4-D static-shape mask reaches the unpad path; the key gather asserts
      // (flash-attention#1156, transformers#32309)
      {"054-gemma2-4.44.0-fa-call.json", "4.44.0", "mask.rank", {"mask.kv_length", "indices.range"}},
      {"056-gemma2-generate-prefill.json", "4.44.0", "mask.rank", {"mask.kv_length", "indices.range"}},
      // 4.44.1 - 4.46 (PR#32522): no crash, but the sliding layer's mask is cut to W columns while
      // all Lq queries are unpadded with it: queries read across rows, keys cut to the window
      {"056-gemma2-generate-prefill.json", "4.44.1", "mask.padding_side", {"cu_seqlens.segments"}},
      {"056-gemma2-generate-prefill.json", "4.46.3", "mask.padding_side", {"cu_seqlens.segments"}},
      {"056-gemma2-generate-prefill.json", "4.48.3", nullptr, {}},
      // decoding keeps the W cached keys: the window, not a split
      {"057-gemma2-generate-decode.json", "4.44.1", nullptr, {}},
  };
  for (const auto& row : rows) check_row(row);
}

TEST_CASE("end to end: packed position ids and varlen kwargs across releases", "[check]") {
  const std::vector<Row> rows = {
      {"024-packed-b1.json", "4.40.2", "route.packed_to_dense", {}, true},
      // 4.44 - 4.53 pass max_seqlen as a 0-d tensor: a warning on FA2
      {"024-packed-b1.json", "4.44.0", "max_seqlen.type", {}, true},
      {"024-packed-b1.json", "4.54.1", nullptr, {}},
      // 4.53.0 sends only B == 1 to the packed path
      {"025-packed-b2.json", "4.53.0", "route.packed_to_dense", {}, true},
      // transformers#39814: ids without the boundary value; 4.54.1 itself raises
      // ... and the single-entry cu_seqlens it builds is what makes it fail
      {"029-origin-2-packed.json", "4.54.1", "position_ids.origin", {"cu_seqlens.shape"}},
      {"029-origin-2-packed.json", "5.23.0", "max_seqlen.type", {}, true},
      {"031-offset-1024.json", "4.44.0", "position_ids.origin", {"cu_seqlens.shape"}},
      // LlamaFactory#10452: padding numbered 0
      {"033-padding-zeros.json", "4.54.1", "position_ids.consecutive", {}, true},
      // Qwen2-VL mRoPE ids read as packing: cu = [0, S, 2S, 3S]
      {"035-mrope-b1.json", "4.54.1", "position_ids.rank", {"cu_seqlens.total"}},
      // transformers PR#47170: cu_seq_lens without max_length
      {"046-kwargs-cu-only.json", "4.55.4", "route.partial_kwargs", {}, true},
      {"049-kwargs-with-mask.json", "4.55.4", "route.partial_kwargs", {}, true},
  };
  for (const auto& row : rows) check_row(row);
}

TEST_CASE("end to end: the replayed violation carries the release's own message", "[check]") {
  auto r = run_release({"012-mask-wider-decode.json", "4.44.0", nullptr, {}});
  REQUIRE(r.has("indices.range"));
  CHECK_THAT(r.get("indices.range").evidence["upstream_message"].get<std::string>(),
             Catch::Contains("out of bounds"));
  auto origin = run_release({"029-origin-2-packed.json", "4.54.1", nullptr, {}});
  REQUIRE(origin.has("position_ids.origin"));
  CHECK_THAT(origin.get("position_ids.origin").evidence["upstream_message"].get<std::string>(),
             Catch::Contains("max(): Expected reduction dim"));
}
