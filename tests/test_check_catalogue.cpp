// The catalogue itself (ids and order fixed by the spec, one check per static id, texts for
// explain), the docs generated from it, the flash-attn release resolution, the worked examples
// of batch-format.md, and the limits: huge batches checked by arithmetic, hostile values.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>

#include "check/flash_attn_rules.hpp"
#include "test_check_helpers.hpp"

using namespace check_test;

namespace {

// invariants.md, in its order: the order decides "first" and must never change.
const std::vector<std::string> kSpecIds = {
    "input.dtype", "input.head_dim", "input.gqa", "input.feature", "input.int32_range", "input.softcap",
    "mask.rank", "mask.binary", "mask.cast_to_bool", "mask.static_cache_slots", "mask.kv_length", "mask.padding_side",
    "position_ids.width", "position_ids.rank",
    "position_ids.origin", "position_ids.consecutive", "route.packed_to_dense", "route.partial_kwargs", "layers.same_boundaries",
    "cu_seqlens.dtype", "cu_seqlens.device", "cu_seqlens.shape", "cu_seqlens.start", "cu_seqlens.monotonic",
    "cu_seqlens.total", "seqused_k.range", "max_seqlen.type", "max_seqlen.covers", "max_seqlen.single_query",
    "cu_seqlens.segments", "cu_seqlens.grid", "indices.range", "indices.count", "rotary.dim", "rotary.even",
    "rotary.layout", "rotary.table", "rotary.positions", "unpad.gather", "rotary.access", "attention.access",
    "attention.coverage", "pad.scatter", "result.finite", "result.reference", "launch.autotune_keys",
    "launch.fla_grid", "backward.access", "backward.coverage", "backward.dq_offset", "backward.reference",
    "seqused_q.range",
    "te.thd_arguments", "te.padded_offsets", "te.cp_padding_multiple", "te.pad_between_seqs", "te.cp_shard",
    "te.cp_chunks", "te.cp_group", "te.sequences", "route.cu_seqlens_ignored", "window.fa4_resolution",
    "page_table.index", "page_table.coverage"};

// The numbers: the first revision's 44 ids numbered in their order, later ids numbered on
// (an id's number never changes, wherever the order places it).
const std::vector<std::string> kNumbered = {
    "input.dtype", "input.head_dim", "input.gqa", "input.feature", "input.int32_range",
    "mask.rank", "mask.binary", "mask.kv_length", "mask.padding_side", "position_ids.rank",
    "position_ids.origin", "position_ids.consecutive", "route.packed_to_dense", "route.partial_kwargs",
    "cu_seqlens.dtype", "cu_seqlens.device", "cu_seqlens.shape", "cu_seqlens.start", "cu_seqlens.monotonic",
    "cu_seqlens.total", "max_seqlen.type", "max_seqlen.covers", "max_seqlen.single_query", "cu_seqlens.segments",
    "cu_seqlens.grid", "indices.range", "indices.count", "rotary.dim", "rotary.even", "rotary.layout",
    "rotary.table", "rotary.positions", "unpad.gather", "rotary.access", "attention.access", "attention.coverage",
    "pad.scatter", "result.finite", "result.reference", "launch.autotune_keys", "backward.access",
    "backward.coverage", "backward.dq_offset", "backward.reference", "seqused_k.range", "input.softcap",
    "mask.cast_to_bool", "launch.fla_grid", "layers.same_boundaries", "seqused_q.range",
    "te.thd_arguments", "te.padded_offsets", "te.cp_padding_multiple", "te.pad_between_seqs", "te.cp_shard",
    "te.cp_chunks", "te.cp_group", "te.sequences", "position_ids.width", "mask.static_cache_slots",
    "route.cu_seqlens_ignored", "window.fa4_resolution", "page_table.index", "page_table.coverage"};

std::string read_text(const std::string& relative) {
  std::ifstream in(std::string(ATTN_DOCTOR_SOURCE_DIR) + "/" + relative);
  REQUIRE(in.good());
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The text between the generated markers of a doc.
std::string generated_section(const std::string& doc) {
  const std::string begin = "<!-- BEGIN GENERATED", end = "<!-- END GENERATED -->";
  auto b = doc.find(begin);
  REQUIRE(b != std::string::npos);
  b = doc.find("-->", b);
  REQUIRE(b != std::string::npos);
  b += 4;  // past "-->\n"
  auto e = doc.find(end, b);
  REQUIRE(e != std::string::npos);
  return doc.substr(b, e - b);
}

}  // namespace

TEST_CASE("catalogue: the spec's ids in the spec's order, one table", "[check]") {
  auto cat = ad::catalogue();
  REQUIRE(cat.size() == kSpecIds.size());
  REQUIRE(kNumbered.size() == kSpecIds.size());
  for (size_t i = 0; i < cat.size(); ++i) {
    INFO(cat[i].id);
    CHECK(cat[i].id == kSpecIds[i]);
    const auto n = std::find(kNumbered.begin(), kNumbered.end(), cat[i].id) - kNumbered.begin();
    CHECK(cat[i].number == static_cast<int>(n) + 1);
    // a violation's order is the table position, not the number
    if (cat[i].check) CHECK(ad::make_violation(cat[i].id, ad::Severity::error, "m").order == static_cast<int>(i) + 1);
  }
}

TEST_CASE("catalogue: every static id has its check and the texts explain prints", "[check]") {
  for (const auto& inv : ad::catalogue()) {
    INFO(inv.id);
    const bool dynamic = inv.group == ad::InvariantGroup::dynamic;
    // te.cp_group is checked over the per-rank captures of one call (check/te_thd.hpp), not per batch
    const bool group_checked = inv.id == "te.cp_group";
    CHECK((inv.check == nullptr) == (dynamic || group_checked));
    CHECK(!inv.statement.empty());
    CHECK(!inv.when_broken.empty());
    if (dynamic) continue;
    CHECK(!inv.severity_rule.empty());
    CHECK(inv.explanation.size() > 80);
    CHECK(!inv.fix.empty());
    CHECK(!inv.references.empty());
  }
}

TEST_CASE("catalogue: violations carry the entry's order, explanation, fix and references", "[check]") {
  auto v = ad::make_violation("mask.kv_length", ad::Severity::error, "m");
  CHECK(v.order == 11);  // table position (input.softcap sits before the mask ids, mask.cast_to_bool and
                         // mask.static_cache_slots before it)
  CHECK(v.stage == "conversion");
  CHECK_THAT(v.explanation, Catch::Contains("index out of bounds"));
  CHECK(!v.fix.empty());
  CHECK(std::find(v.references.begin(), v.references.end(), "Dao-AILab/flash-attention#1156") != v.references.end());
  CHECK(ad::closest_invariant_id("kv_lenght") == "mask.kv_length");
  CHECK(ad::closest_invariant_id("cu_seqlen.totl") == "cu_seqlens.total");
  CHECK_THROWS_AS(ad::make_violation("no.such", ad::Severity::error, "m"), std::logic_error);
}

TEST_CASE("check: first violation by catalogue order, then every other one", "[check]") {
  // breaks input.head_dim (2), cu_seqlens.start (18) and rotary.dim (28), found by checks that
  // run in catalogue order; the report lists them in that order whatever produced them
  auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 4, "head_dim": 300},
                   "rotary": {"implementation": "fla", "dim": 400}, "varlen": {"cu_seqlens_q": [3, 8]}})");
  INFO(r.describe());
  REQUIRE(r.ids() == std::vector<std::string>{"input.head_dim", "cu_seqlens.start", "rotary.dim"});
  for (size_t i = 1; i < r.violations.size(); ++i) CHECK(r.violations[i - 1].order < r.violations[i].order);
}

TEST_CASE("docs/spec/invariants.md is generated from the catalogue", "[check]") {
  const std::string doc = read_text("docs/spec/invariants.md");
  CHECK(generated_section(doc) == ad::catalogue_markdown());
  for (const auto& inv : ad::catalogue()) {
    INFO(inv.id);
    std::string quoted(1, '`');
    quoted.append(inv.id).push_back('`');
    CHECK(doc.find(quoted) != std::string::npos);
  }
}

TEST_CASE("docs/spec/flash-attn-features.md is generated from the release table", "[check]") {
  const std::string doc = read_text("docs/spec/flash-attn-features.md");
  CHECK(generated_section(doc) == ad::flash_attn_features_markdown());
}

TEST_CASE("flash-attn releases map to the nearest rule set at or below them", "[check]") {
  auto name = [](const char* release) {
    return std::string(ad::resolve_flash_attn(ad::parse_version(release)).rules->name);
  };
  CHECK(name("2.2.5") == "fa2-2.0");
  CHECK(name("2.3.0") == "fa2-2.3");
  CHECK(name("2.5.8") == "fa2-2.5");
  CHECK(name("2.6.3") == "fa2-2.6");
  CHECK(name("2.7.0.post2") == "fa2-2.7");
  CHECK(name("2.8.3") == "fa2-2.7");
  CHECK(name("3.0.0.b1") == "fa3");
  CHECK(name("4.0.0b9") == "fa4");
  CHECK(name("4.0.0b27") == "fa4-fp8");
  CHECK(name("1.0.9") == "fa1");
  auto old = ad::resolve_flash_attn(ad::parse_version("0.2.8"));
  CHECK(std::string(old.rules->name) == "fa1");
  CHECK_THAT(old.note, Catch::Contains("older than every known rule set"));
  auto none = ad::resolve_flash_attn(std::nullopt);
  CHECK(std::string(none.rules->name) == "fa2-2.7");
  CHECK_THAT(none.label(), Catch::Contains("none given"));
  // the thresholds the issue names
  auto rules = [](const char* release) { return *ad::resolve_flash_attn(ad::parse_version(release)).rules; };
  CHECK_FALSE(rules("2.2.5").window);
  CHECK(rules("2.3.0").window);
  CHECK_FALSE(rules("2.5.9.post1").softcap);
  CHECK(rules("2.6.0").softcap);
  CHECK_FALSE(rules("2.6.0").softcap_with_dropout);
}

// ---- the worked examples of batch-format.md, through convert() as `check` runs them --------

TEST_CASE("worked example cu-overrun gives cu_seqlens.total", "[check]") {
  auto r = run(R"({"format": "attn-doctor/batch@1", "name": "cu-overrun",
                   "model": {"num_heads": 16, "num_kv_heads": 4, "head_dim": 128},
                   "varlen": {"cu_seqlens_q": [0, 100, 137, 400], "max_seqlen_q": 263, "total_q": 387}})",
               Replay::convert());
  REQUIRE_ONLY(r, "cu_seqlens.total");
}

TEST_CASE("worked example rotary-model-width gives rotary.dim", "[check]") {
  auto r = run(R"({"format": "attn-doctor/batch@1", "name": "rotary-model-width",
                   "model": {"num_heads": 16, "head_dim": 64, "hidden_size": 1024},
                   "rotary": {"implementation": "fla", "dim": 1024},
                   "varlen": {"cu_seqlens_q": [0, 512, 1024], "max_seqlen_q": 512}})",
               Replay::convert());
  REQUIRE_ONLY(r, "rotary.dim");
}

static const char* kPartialQueryRightPadding = R"({"format": "attn-doctor/batch@1", "name": "partial-query-right-padding",
  "environment": {"transformers": "4.40.0", "flash_attn": "2.5.8"},
  "model": {"num_heads": 8, "head_dim": 64},
  "batch": {"attention_mask": {"lengths": [6, 3], "width": 6, "padding_side": "right"},
            "query_length": 2, "kv_length": 6}})";

TEST_CASE("worked example partial-query-right-padding gives mask.padding_side (batch description)", "[check]") {
  // Without a replay the checks read the route from the batch itself (a mask -> the unpad path).
  auto r = run(kPartialQueryRightPadding, Replay::none());
  REQUIRE_ONLY(r, "mask.padding_side");
}

// End to end: the 4.40 release's conversion (rule set hf-4.34: mask -> _upad_input, queries
// unpadded with mask[:, -2:]) as convert() replays it.
TEST_CASE("worked example partial-query-right-padding gives mask.padding_side (4.40 replay)", "[check]") {
  auto r = run(kPartialQueryRightPadding, Replay::convert());
  REQUIRE(r.conversion.replayed.has_value());
  CHECK(r.conversion.replayed->rule_set == "hf-4.34");
  CHECK(r.conversion.replayed->path == ad::VarlenPath::mask);
  // the slice keeps row 1's padding columns: cu_seqlens_q = [0, 2, 2]
  CHECK(r.conversion.replayed->cu_seqlens_q.values == std::vector<int64_t>{0, 2, 2});
  REQUIRE_ONLY(r, "mask.padding_side");
}

// ---- limits ---------------------------------------------------------------------------------

TEST_CASE("check: 2^31+ element batches are checked by arithmetic, fast", "[check]") {
  const auto t0 = std::chrono::steady_clock::now();
  auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 64, "num_kv_heads": 8, "head_dim": 128},
                   "batch": {"batch_size": 1024, "kv_length": 1048576},
                   "varlen": {"cu_seqlens_q": [0, 4294967296, 8589934592], "max_seqlen_q": 4294967296}})");
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  CHECK(ms < 1000.0);
  REQUIRE(r.has("input.int32_range"));
  CHECK(r.get("input.int32_range").evidence["tensors"].size() >= 4);
}

TEST_CASE("check: values near +-2^62 never overflow", "[check]") {
  auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 1048576, "head_dim": 1048576},
                   "varlen": {"cu_seqlens_q": [-4611686018427387904, 4611686018427387904, -4611686018427387904],
                              "max_seqlen_q": 4611686018427387904, "total_q": 4611686018427387904}})");
  INFO(r.describe());
  CHECK(r.first() == "input.head_dim");
  CHECK(r.has("cu_seqlens.start"));
  CHECK(r.has("cu_seqlens.monotonic"));
  CHECK(r.has("input.int32_range"));
  CHECK(r.get("input.int32_range").evidence["tensors"][0]["elements"] == "more than 2^63");
  // without max_seqlen_q the loader derives it from the same entries (its difference overflows)
  auto derived = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                         "varlen": {"cu_seqlens_q": [-4611686018427387904, 4611686018427387904]}})");
  CHECK(derived.first() == "input.int32_range");
  CHECK(derived.has("cu_seqlens.start"));
}
