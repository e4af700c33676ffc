// The prediction (lib/predict): the combination rule, the symptom table and its release and
// pass selection, the allocator model, and the symptoms the checks set from the amounts they
// know, through the whole pipeline (diagnose with --backend none) as a user sees them.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <chrono>
#include <regex>

#include "check/check.hpp"
#include "doctor/doctor.hpp"
#include "predict/predict.hpp"
#include "repro/repro.hpp"

using namespace ad;

namespace {

Report diagnose_text(std::string_view json) {
  Batch b = parse_batch_text(json, "test.json");
  CheckOptions o;
  o.backend = BackendChoice::none;
  return diagnose(b, o, "test.json").report;
}

const Violation* find(const Report& r, std::string_view id) {
  for (const auto& v : r.violations)
    if (v.id == id) return &v;
  return nullptr;
}

Symptom make(Outcome o, Moment at, Pass pass = Pass::forward) {
  Symptom s;
  s.outcome = o;
  s.at = at;
  s.pass = pass;
  s.basis = "model";
  return s;
}

}  // namespace

TEST_CASE("predict: outcome and pass names round-trip", "[predict]") {
  for (std::string_view name : outcome_names()) {
    auto o = parse_outcome(name);
    REQUIRE(o);
    CHECK(to_string(*o) == name);
  }
  CHECK(outcome_names().size() == 8);
  CHECK(outcome_names().back() == "hang");  // appended: the earlier ids keep their places
  CHECK_FALSE(parse_outcome("crash"));
  CHECK(parse_call_pass("training") == CallPass::training);
  CHECK_FALSE(parse_call_pass("backward"));
  CHECK(parse_pass("backward") == Pass::backward);
  CHECK(is_loud(Outcome::raises));
  CHECK(is_loud(Outcome::illegal_address));
  CHECK_FALSE(is_loud(Outcome::out_of_bounds));
  CHECK(is_loud(Outcome::hang));
}

TEST_CASE("predict: a hang in the backward is what a training step shows over a silent forward", "[predict]") {
  Symptom wrong{Outcome::wrong_output, Pass::forward, Moment::attention, "rows wrong", {}, "model"};
  Symptom hang{Outcome::hang, Pass::backward, Moment::backward, "does not return", {}, "model"};
  Symptom fault{Outcome::illegal_address, Pass::backward, Moment::backward, "fault", {}, "model"};
  const Finding silent_then_hang[] = {{"a", 1, &wrong}, {"b", 2, &hang}};
  CHECK(combine(silent_then_hang, CallPass::training).symptom.outcome == Outcome::hang);
  CHECK(combine(silent_then_hang, CallPass::forward).symptom.outcome == Outcome::wrong_output);
  // at one moment a fault comes before a hang, whatever the catalogue order
  const Finding hang_and_fault[] = {{"b", 1, &hang}, {"c", 2, &fault}};
  CHECK(combine(hang_and_fault, CallPass::training).symptom.outcome == Outcome::illegal_address);
}

TEST_CASE("predict: the combination rule", "[predict]") {
  const Symptom silent_wrong = make(Outcome::wrong_output, Moment::attention);
  const Symptom oob = make(Outcome::out_of_bounds, Moment::attention);
  const Symptom fault = make(Outcome::illegal_address, Moment::attention);
  const Symptom host = make(Outcome::raises, Moment::attention);
  const Symptom gather = make(Outcome::device_assert, Moment::gather);
  const Symptom backward = make(Outcome::wrong_gradient, Moment::backward, Pass::backward);
  const Symptom backward_fault = make(Outcome::illegal_address, Moment::backward, Pass::backward);

  SECTION("loud outcomes win, in the order they happen") {
    const Finding f[] = {{"cu_seqlens.total", 20, &fault}, {"mask.rank", 6, &gather}, {"x.silent", 1, &silent_wrong}};
    Prediction p = combine(f, CallPass::forward);
    CHECK(p.symptom.outcome == Outcome::device_assert);  // the gather runs before the attention kernel
    CHECK(p.invariant == "mask.rank");
  }
  SECTION("at one moment a host raise comes before a launch's fault, whatever the catalogue order") {
    const Finding f[] = {{"a", 1, &fault}, {"b", 2, &host}};
    CHECK(combine(f, CallPass::forward).invariant == "b");
  }
  SECTION("silent outcomes: wrong_output > wrong_gradient > out_of_bounds") {
    const Finding f[] = {{"a", 1, &oob}, {"b", 2, &backward}, {"c", 3, &silent_wrong}};
    CHECK(combine(f, CallPass::training).invariant == "c");
    const Finding g[] = {{"a", 1, &oob}, {"b", 2, &backward}};
    CHECK(combine(g, CallPass::training).symptom.outcome == Outcome::wrong_gradient);
  }
  SECTION("the backward counts only for a training call") {
    const Finding f[] = {{"a", 1, &oob}, {"b", 2, &backward_fault}};
    CHECK(combine(f, CallPass::forward).symptom.outcome == Outcome::out_of_bounds);
    CHECK(combine(f, CallPass::training).symptom.outcome == Outcome::illegal_address);
    CHECK(combine(f, CallPass::training).symptom.pass == Pass::backward);
  }
  SECTION("a forward fault beats a backward one") {
    const Finding f[] = {{"b", 1, &backward_fault}, {"a", 2, &fault}};
    CHECK(combine(f, CallPass::training).invariant == "a");
  }
  SECTION("nothing to combine: ok in the last pass the call runs") {
    const Symptom ok = make(Outcome::ok, Moment::attention);
    const Finding f[] = {{"a", 1, &ok}, {"b", 2, nullptr}};
    Prediction p = combine(f, CallPass::forward);
    CHECK(p.symptom.outcome == Outcome::ok);
    CHECK(p.symptom.pass == Pass::forward);
    CHECK(p.invariant.empty());
    CHECK(combine({}, CallPass::training).symptom.pass == Pass::backward);
  }
}

TEST_CASE("predict: PyTorch's caching allocator placement", "[predict]") {
  // c10/cuda/CUDACachingAllocator.cpp: 512-byte blocks; <= 1 MiB from 2 MiB segments; < 10 MiB
  // from 20 MiB segments; larger ones in their own segment rounded to 2 MiB
  CHECK(caching_allocator_placement(1).block_bytes == 512);
  CHECK(caching_allocator_placement(1).segment_bytes == 2 << 20);
  CHECK(caching_allocator_placement(1 << 20).segment_bytes == 2 << 20);
  CHECK(caching_allocator_placement((1 << 20) + 1).segment_bytes == 20 << 20);
  CHECK(caching_allocator_placement((10 << 20) - 512).segment_bytes == 20 << 20);
  CHECK(caching_allocator_placement(10 << 20).segment_bytes == 10 << 20);
  CHECK(caching_allocator_placement((10 << 20) + 1).segment_bytes == 12 << 20);
}

TEST_CASE("predict: the symptom table is well formed", "[predict]") {
  const std::regex basis(R"(model|report [A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+#[0-9]+|golden [A-Za-z0-9_.+-]+)");
  for (const SymptomRow& row : symptom_table()) {
    INFO(row.invariant << " / " << row.variant);
    CHECK(find_invariant(row.invariant) != nullptr);
    CHECK(std::regex_match(std::string(row.basis), basis));
    CHECK_FALSE(row.message.empty());
    CHECK_FALSE(row.when.empty());
    CHECK((row.library.empty() || row.library == "flash_attn" || row.library == "fla" || row.library == "transformers"));
    if (!row.from.empty()) CHECK(parse_version(row.from));
    if (!row.to.empty()) CHECK(parse_version(row.to));
    CHECK((row.pass == Pass::backward) == row.training_only);
    // a silent outcome's message says there is no error
    if (!is_loud(row.outcome)) CHECK(row.message.find("no error") == 0);
  }
}

TEST_CASE("predict: rows are chosen by release and pass", "[predict]") {
  SymptomContext c;
  c.fla = parse_version("0.5.2");
  CHECK(symptom_for("rotary.dim", "fla", c)->outcome == Outcome::wrong_output);
  CHECK(symptom_for("rotary.dim", "fla", c)->basis == "golden fla-rotary-dim-hidden-size");
  c.fla = parse_version("0.6.0");
  CHECK(symptom_for("rotary.dim", "fla", c)->outcome == Outcome::raises);
  c.fla.reset();  // unknown: the newest behaviour
  CHECK(symptom_for("rotary.dim", "fla", c)->outcome == Outcome::raises);

  // a forward-silent case with a backward row: the forward's wrong output comes first
  c.pass = CallPass::training;
  CHECK(symptom_for("cu_seqlens.total", "under", c)->outcome == Outcome::wrong_output);
  // a case only the backward has
  CHECK(symptom_for("input.int32_range", "dq_accum_offset", c)->outcome == Outcome::wrong_gradient);
  c.pass = CallPass::forward;
  CHECK_FALSE(symptom_for("input.int32_range", "dq_accum_offset", c));
  CHECK_FALSE(symptom_for("position_ids.rank", "", c));  // predicted through the cu_seqlens it builds
  CHECK(symptom_for("cu_seqlens.dtype", "", c, "RuntimeError: custom")->message == "RuntimeError: custom");
}

TEST_CASE("predict: cu_seqlens overruns by how far the accesses reach", "[predict]") {
  SECTION("a few rows past the tensor stay inside its allocator segment: no error, intended rows right") {
    Report r = diagnose_text(R"({"format": "attn-doctor/batch@1",
      "model": {"num_heads": 16, "num_kv_heads": 4, "head_dim": 128},
      "varlen": {"cu_seqlens_q": [0, 100, 137, 400], "max_seqlen_q": 263, "total_q": 387}})");
    REQUIRE(r.prediction);
    CHECK(r.prediction->symptom.outcome == Outcome::out_of_bounds);
    CHECK(r.prediction->invariant == "cu_seqlens.total");
    CHECK(r.prediction->symptom.basis == "model");
    const Violation* v = find(r, "cu_seqlens.total");
    REQUIRE(v);
    CHECK(v->evidence["reach"][0]["furthest_row"] == 399);
    CHECK(v->evidence["reach"][0]["inside_segment"] == true);
  }
  SECTION("a phantom segment of a million rows faults") {
    Report r = diagnose_text(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 4, "head_dim": 64},
      "varlen": {"cu_seqlens_q": [0, 4, 7, 1000012], "max_seqlen_q": 1000005, "total_q": 12}})");
    CHECK(r.prediction->symptom.outcome == Outcome::illegal_address);
    CHECK(r.prediction->symptom.message == "CUDA error: an illegal memory access was encountered");
  }
  SECTION("the same phantom segment with a max_seqlen that stops the row tiles early") {
    // one 128-row tile of the phantom segment: 123 rows past the 12-row tensor, inside its 2 MiB segment
    Report r = diagnose_text(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 4, "head_dim": 64},
      "varlen": {"cu_seqlens_q": [0, 4, 7, 1000012], "max_seqlen_q": 4, "total_q": 12}})");
    const Violation* v = find(r, "cu_seqlens.total");
    REQUIRE(v);
    REQUIRE(v->symptom);
    CHECK(v->symptom->outcome == Outcome::out_of_bounds);
    CHECK(v->evidence["reach"][0]["furthest_row"] == 7 + 128 - 1);
    CHECK(v->evidence["reach"][1]["furthest_row"] == 7 + 128 - 1);  // causal: keys up to the tile's last row
  }
  SECTION("short of the rows: the tail rows are never written") {
    Report r = diagnose_text(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
      "varlen": {"cu_seqlens_q": [0, 144, 432, 944], "max_seqlen_q": 512, "total_q": 946, "total_k": 946}})");
    CHECK(r.prediction->symptom.outcome == Outcome::wrong_output);
    CHECK(r.prediction->symptom.rows == std::vector<RowRange>{{944, 945}});
  }
}

TEST_CASE("predict: max_seqlen.covers by the kernel's tile rows", "[predict]") {
  auto batch = [](int max, const char* cu, const char* pass = "forward") {
    return std::string(R"({"format": "attn-doctor/batch@1", "pass": ")") + pass +
           R"(", "environment": {"flash_attn": "2.6.3"}, "model": {"num_heads": 16, "head_dim": 128},
             "varlen": {"cu_seqlens_q": )" + cu + R"(, "max_seqlen_q": )" + std::to_string(max) + "}}";
  };
  SECTION("max 3, a segment of 5: one 128-row tile covers it, a latent warning") {
    Report r = diagnose_text(batch(3, "[0, 5, 8]"));
    const Violation* v = find(r, "max_seqlen.covers");
    REQUIRE(v);
    CHECK(v->severity == Severity::warning);
    CHECK(v->message.find("latent") != std::string::npos);
    CHECK(v->message.find("longer than 128 rows") != std::string::npos);
    CHECK(v->symptom->outcome == Outcome::ok);
    CHECK(r.prediction->symptom.outcome == Outcome::ok);
    CHECK(exit_code_for(r, false) == 0);
  }
  SECTION("max 64, a segment of 200: exactly rows 128-199 are wrong, stale values") {
    Report r = diagnose_text(batch(64, "[0, 200, 300]"));
    const Violation* v = find(r, "max_seqlen.covers");
    REQUIRE(v);
    CHECK(v->severity == Severity::error);
    CHECK(r.prediction->symptom.outcome == Outcome::wrong_output);
    CHECK(r.prediction->symptom.rows == std::vector<RowRange>{{128, 199}});
    CHECK(r.prediction->symptom.message.find("stale finite values, not NaN") != std::string::npos);
  }
  SECTION("max 60, a segment of 100: the forward's tile covers it, the backward's 64-row tiles do not") {
    Report fwd = diagnose_text(batch(60, "[0, 100]"));
    CHECK(find(fwd, "max_seqlen.covers")->severity == Severity::warning);
    Report tr = diagnose_text(batch(60, "[0, 100]", "training"));
    const Violation* v = find(tr, "max_seqlen.covers");
    REQUIRE(v);
    CHECK(v->severity == Severity::error);
    CHECK(tr.prediction->symptom.outcome == Outcome::wrong_gradient);
    CHECK(tr.prediction->symptom.pass == Pass::backward);
    CHECK(tr.prediction->symptom.rows == std::vector<RowRange>{{64, 99}});
  }
  SECTION("max_seqlen_k below a key segment: latent in the forward, the backward drops keys") {
    const char* k = R"({"format": "attn-doctor/batch@1", "pass": "%s", "model": {"num_heads": 16, "head_dim": 128},
      "varlen": {"cu_seqlens_q": [0, 100, 400], "cu_seqlens_k": [0, 100, 400], "max_seqlen_q": 300, "max_seqlen_k": 100}})";
    char buf[512];
    std::snprintf(buf, sizeof buf, k, "forward");
    Report fwd = diagnose_text(buf);
    CHECK(find(fwd, "max_seqlen.covers")->severity == Severity::warning);
    CHECK(fwd.prediction->symptom.outcome == Outcome::ok);
    std::snprintf(buf, sizeof buf, k, "training");
    Report tr = diagnose_text(buf);
    CHECK(find(tr, "max_seqlen.covers")->severity == Severity::error);
    CHECK(tr.prediction->symptom.outcome == Outcome::wrong_gradient);
  }
  SECTION("the split-KV decode path: keys past its splits are dropped only when the heuristic splits") {
    // one query per sequence, 16 query heads over 4 kv heads: FA2 swaps heads into rows and
    // sizes its KV splits from max_seqlen_k (num_splits_heuristic on 132 SMs)
    const char* k = R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "2.6.3"},
      "model": {"num_heads": 16, "num_kv_heads": 4, "head_dim": 128},
      "varlen": {"cu_seqlens_q": [0, 1, 2], "cu_seqlens_k": [0, 3000, 6000], "max_seqlen_q": 1, "max_seqlen_k": %d}})";
    char buf[512];
    std::snprintf(buf, sizeof buf, k, 1000);  // 8 key blocks: split, covering 1024 keys
    Report split = diagnose_text(buf);
    CHECK(find(split, "max_seqlen.covers")->evidence["split_kv_keys_covered"] == 1024);
    CHECK(split.prediction->symptom.outcome == Outcome::wrong_output);
    std::snprintf(buf, sizeof buf, k, 100);  // one key block: one split, the standard kernel
    Report one = diagnose_text(buf);
    CHECK(find(one, "max_seqlen.covers")->severity == Severity::warning);
    CHECK(one.prediction->symptom.outcome == Outcome::ok);
  }
}

TEST_CASE("predict: input.int32_range counts the tensors that reach a kernel, per pass and release", "[predict]") {
  SECTION("a padded 2^31-element q on the unpad route never reaches the kernel") {
    // 64 x 16384 positions, 16 x 128: the padded q is exactly 2^31 elements
    std::string lengths;
    for (int i = 0; i < 64; ++i) lengths += (i ? ", " : "") + std::to_string(9750);
    for (const char* pass : {"forward", "training"}) {
      Report r = diagnose_text(std::string(R"({"format": "attn-doctor/batch@1", "pass": ")") + pass +
                               R"(", "environment": {"transformers": "4.46.3", "flash_attn": "2.6.3"},
        "model": {"num_heads": 16, "head_dim": 128},
        "batch": {"attention_mask": {"lengths": [)" + lengths + R"(], "width": 16384}}})");
      INFO(pass);
      CHECK_FALSE(find(r, "input.int32_range"));
      CHECK(r.prediction->symptom.outcome == Outcome::ok);
    }
  }
  SECTION("the dense route hands the padded tensors to the kernel") {
    Report r = diagnose_text(R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "2.6.3"},
      "model": {"num_heads": 16, "head_dim": 128}, "batch": {"batch_size": 64, "query_length": 16384}})");
    const Violation* v = find(r, "input.int32_range");
    REQUIRE(v);
    CHECK(v->severity == Severity::error);
    CHECK(r.prediction->symptom.outcome == Outcome::illegal_address);
  }
  const char* late = R"({"format": "attn-doctor/batch@1", "pass": "%s", "environment": {"flash_attn": "%s"},
    "model": {"num_heads": 16, "head_dim": 128},
    "varlen": {"cu_seqlens_q": [0, 1000000, 1100000, 1250000], "max_seqlen_q": 1000000}})";
  char buf[512];
  SECTION("varlen forward past 2^31 elements: right (a warning about training)") {
    std::snprintf(buf, sizeof buf, late, "forward", "2.8.3");
    Report r = diagnose_text(buf);
    const Violation* v = find(r, "input.int32_range");
    REQUIRE(v);
    CHECK(v->severity == Severity::warning);
    CHECK(r.prediction->symptom.outcome == Outcome::ok);
    CHECK(exit_code_for(r, false) == 0);
  }
  SECTION("training: the segments past row 2^31 / (H x d_rounded) get a wrong dq") {
    std::snprintf(buf, sizeof buf, late, "training", "2.8.3");
    Report r = diagnose_text(buf);
    const Violation* v = find(r, "input.int32_range");
    REQUIRE(v);
    CHECK(v->severity == Severity::error);
    CHECK(r.prediction->symptom.outcome == Outcome::wrong_gradient);
    CHECK(r.prediction->symptom.pass == Pass::backward);
    // segment 1 starts at 1,000,000 < 1,048,576: right; segment 2 starts at 1,100,000
    CHECK(r.prediction->symptom.rows == std::vector<RowRange>{{1100000, 1249999}});
  }
  SECTION("training before 2.8.0: a 1.1M-row segment's tile offset overflows first (PR#1500)") {
    const char* longer = R"({"format": "attn-doctor/batch@1", "pass": "training", "environment": {"flash_attn": "%s"},
      "model": {"num_heads": 16, "head_dim": 128}, "varlen": {"cu_seqlens_q": [0, 1100000, 1250000], "max_seqlen_q": 1100000}})";
    std::snprintf(buf, sizeof buf, longer, "2.7.4");
    Report r = diagnose_text(buf);
    CHECK(r.prediction->symptom.outcome == Outcome::illegal_address);
    CHECK(r.prediction->symptom.basis == "report Dao-AILab/flash-attention#1500");
    std::snprintf(buf, sizeof buf, longer, "2.8.0");  // fixed: the late segment's wrong dq remains
    CHECK(diagnose_text(buf).prediction->symptom.outcome == Outcome::wrong_gradient);
  }
  SECTION("FA3: a warning at most") {
    std::snprintf(buf, sizeof buf, late, "training", "3.0.0b1");
    Report r = diagnose_text(buf);
    CHECK(find(r, "input.int32_range")->severity == Severity::warning);
    CHECK(r.prediction->symptom.outcome == Outcome::ok);
  }
}

TEST_CASE("predict: FLA's rotary by release", "[predict]") {
  const char* dim = R"({"format": "attn-doctor/batch@1", "environment": {"fla": "%s"},
    "model": {"num_heads": 16, "head_dim": 64, "hidden_size": 1024},
    "batch": {"batch_size": 2, "query_length": 128}, "rotary": {"implementation": "fla", "dim": 1024, "varlen": false}})";
  char buf[512];
  std::snprintf(buf, sizeof buf, dim, "0.5.2");
  CHECK(diagnose_text(buf).prediction->symptom.outcome == Outcome::wrong_output);
  std::snprintf(buf, sizeof buf, dim, "0.6.0");
  Report r = diagnose_text(buf);
  CHECK(r.prediction->symptom.outcome == Outcome::raises);
  CHECK(r.prediction->symptom.message ==
        "AssertionError: Rotary dimension must not exceed head dimension, got rotary_dim=1024 and head_dim=64");

  // the table against T
  auto table = [](const char* fla, const char* rest) {
    return std::string(R"({"format": "attn-doctor/batch@1", "environment": {"fla": ")") + fla +
           R"("}, "model": {"num_heads": 8, "head_dim": 128}, )" + rest + "}";
  };
  SECTION("without cu_seqlens every release asserts TR >= T") {
    for (const char* fla : {"0.5.2", "0.6.0"}) {
      Report t = diagnose_text(table(fla, R"("batch": {"batch_size": 1, "query_length": 706},
        "rotary": {"implementation": "fla", "dim": 128, "table_length": 256, "varlen": false})"));
      INFO(fla);
      CHECK(t.prediction->symptom.outcome == Outcome::raises);
      CHECK(t.prediction->symptom.message == "AssertionError: TR must be >= T, got 256 and 706");
    }
  }
  SECTION("a rotary call alone: T from tensors.q.rows") {
    Report t = diagnose_text(table("0.6.0", R"("tensors": {"q": {"rows": 706}},
      "rotary": {"implementation": "fla", "dim": 128, "table_length": 256, "varlen": false})"));
    REQUIRE(find(t, "rotary.table"));
    CHECK(t.prediction->symptom.outcome == Outcome::raises);
  }
  SECTION("varlen: before 0.6.0 TR >= T on the packed length; 0.6.0 asserts offset + T <= TR") {
    const char* packed = R"("varlen": {"cu_seqlens_q": [0, 256, 456, 606, 706], "max_seqlen_q": 256},
      "rotary": {"implementation": "fla", "dim": 128, "table_length": 256, "varlen": true})";
    Report old = diagnose_text(table("0.5.2", packed));
    CHECK(old.prediction->symptom.message == "AssertionError: TR must be >= T, got 256 and 706");
    Report now = diagnose_text(table("0.6.0", packed));
    CHECK(now.prediction->symptom.outcome == Outcome::raises);
    CHECK(now.prediction->symptom.message == "AssertionError");
  }
  SECTION("per-sequence offsets past the table: unrotated before 0.6.0, a device-side assert in 0.6.0") {
    const char* offsets = R"("varlen": {"cu_seqlens_q": [0, 100, 200], "max_seqlen_q": 100},
      "rotary": {"implementation": "fla", "dim": 128, "table_length": 256, "varlen": true, "seqlen_offset": [0, 200]})";
    CHECK(diagnose_text(table("0.5.2", offsets)).prediction->symptom.outcome == Outcome::wrong_output);
    CHECK(diagnose_text(table("0.6.0", offsets)).prediction->symptom.outcome == Outcome::device_assert);
  }
}

TEST_CASE("predict: repro judges expect.prediction", "[predict][repro]") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("attn-doctor-predict-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& expect) {
    std::ofstream(dir / name) << R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 4, "head_dim": 64},
      "varlen": {"cu_seqlens_q": [0, 4]}, "expect": )" << expect << "}";
    return dir / name;
  };
  const std::string report = R"({"status": "ok", "first_violation": null, "violations": [],
    "prediction": {"outcome": "out_of_bounds", "pass": "forward", "message": "m", "basis": "model"}})";
  auto r = judge_case(write("a.json", R"({"prediction": {"outcome": "out_of_bounds"}})"), 0, report, "");
  CHECK(r.passed);
  CHECK(r.got["prediction"]["outcome"] == "out_of_bounds");
  r = judge_case(write("b.json", R"({"prediction": {"outcome": "illegal_address"}})"), 0, report, "");
  CHECK_FALSE(r.passed);
  CHECK(r.message == "prediction.outcome: expected illegal_address, got out_of_bounds");
  r = judge_case(write("c.json", R"({"prediction": {"outcome": "out_of_bounds", "pass": "backward"}})"), 0, report, "");
  CHECK_FALSE(r.passed);
  CHECK(r.message == "prediction.pass: expected backward, got forward");
  CHECK(r.expected["prediction"]["pass"] == "backward");
  std::filesystem::remove_all(dir);
}

TEST_CASE("predict: the batch's pass, FLA and FA4 releases, and a pinned prediction load", "[predict][loader]") {
  Batch b = parse_batch_text(R"({"format": "attn-doctor/batch@1", "pass": "training",
    "environment": {"fla": "0.6.0", "flash_attn_4": "4.0.0b9"}, "model": {"num_heads": 4, "head_dim": 64},
    "varlen": {"cu_seqlens_q": [0, 4]},
    "expect": {"prediction": {"outcome": "wrong_gradient", "pass": "backward"}}})",
                             "t.json");
  CHECK(b.pass == CallPass::training);
  REQUIRE(b.environment.fla);
  CHECK(b.environment.fla->text == "0.6.0");
  REQUIRE(b.environment.flash_attn_4);
  CHECK(b.environment.flash_attn_4->text == "4.0.0b9");
  REQUIRE(b.expect);
  REQUIRE(b.expect->prediction);
  CHECK(b.expect->prediction->outcome == Outcome::wrong_gradient);
  CHECK(b.expect->prediction->pass == Pass::backward);
  // defaults
  Batch d = parse_batch_text(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 4, "head_dim": 64},
    "varlen": {"cu_seqlens_q": [0, 4]}, "expect": {"prediction": {"outcome": "ok"}}})",
                             "d.json");
  CHECK(d.pass == CallPass::forward);
  CHECK_FALSE(d.environment.fla);
  CHECK_FALSE(d.expect->prediction->pass);
  // an expect block with only a prediction is not empty
  CHECK_THROWS_WITH(parse_batch_text(R"({"format": "attn-doctor/batch@1", "pass": "inference",
    "model": {"num_heads": 4, "head_dim": 64}, "varlen": {"cu_seqlens_q": [0, 4]}})", "e.json"),
                    Catch::Contains("e.json") && Catch::Contains("/pass") && Catch::Contains("\"training\""));
}

// A sanitizer build is several times slower: the time bound holds for the release build only.
#if defined(__SANITIZE_ADDRESS__)
#define AD_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AD_TEST_SANITIZED 1
#endif
#endif

TEST_CASE("predict: the 1M-position padded batch is answered statically in under 0.5 s", "[predict]") {
  // 64 x 16384 positions, 624,000 real tokens, 16 x 128, transformers 4.46.3, flash-attn 2.6.3
  const std::string file = std::string(ATTN_DOCTOR_SOURCE_DIR) + "/repro_cases/hf-4.46.3-padded-1m-positions-624k-tokens.json";
  const auto t0 = std::chrono::steady_clock::now();
  Batch b = load_batch_file(file);
  CheckOptions o;
  o.backend = BackendChoice::none;
  Report r = diagnose(b, o, file).report;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(exit_code_for(r, false) == 0);
  CHECK_FALSE(find(r, "input.int32_range"));
  CHECK(r.prediction->symptom.outcome == Outcome::ok);
#ifdef AD_TEST_SANITIZED
  WARN("SKIPPED: the time bound (took " << seconds << " s) is checked in the release build only");
#else
  CHECK(seconds < 0.5);
#endif
}
