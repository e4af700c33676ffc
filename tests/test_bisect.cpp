// `attn-doctor bisect`: one batch diagnosed under every known release of the axes that decide
// it, grouped into ranges; run as a user would, through the binary. The release lists it walks
// (vocab/releases.hpp) are checked here too.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "binary_run.hpp"
#include "vocab/releases.hpp"

namespace {

using binary_run::Run;
using nlohmann::json;

Run run(const std::string& args) { return binary_run::run("", args); }

std::string repro(const char* name) { return std::string(ATTN_DOCTOR_SOURCE_DIR) + "/repro_cases/" + name; }

std::set<std::string> keys(const json& j) {
  std::set<std::string> out;
  for (auto it = j.begin(); it != j.end(); ++it) out.insert(it.key());
  return out;
}

const json& axis(const json& report, const std::string& name) {
  for (const json& a : report.at("axes"))
    if (a.at("axis") == name) return a;
  FAIL("no axis " << name);
  throw std::logic_error("unreachable");
}

const json* boundary(const json& a, const std::string& from, const std::string& to) {
  for (const json& b : a.at("boundaries"))
    if (b.at("from") == from && b.at("to") == to) return &b;
  return nullptr;
}

std::string change(const json& b, const std::string& field) {
  for (const json& c : b.at("changes"))
    if (c.at("field") == field) return c.at("from").get<std::string>() + " -> " + c.at("to").get<std::string>();
  return "";
}

// The shape docs/spec/bisect.md documents, and the ranges tile the releases with a change at
// every boundary.
void check_shape(const json& r) {
  CHECK(keys(r) == std::set<std::string>{"tool", "command", "input", "name", "backend", "changed", "axes"});
  bool changed = false;
  for (const json& a : r.at("axes")) {
    CHECK(keys(a) ==
          std::set<std::string>{"axis", "key", "why", "source", "file_release", "releases", "ranges", "boundaries"});
    const auto& ranges = a.at("ranges");
    REQUIRE(!ranges.empty());
    REQUIRE(a.at("boundaries").size() == ranges.size() - 1);
    size_t total = 0, own = 0;
    for (size_t k = 0; k < ranges.size(); ++k) {
      const json& g = ranges[k];
      std::set<std::string> want{"first",           "last",       "releases", "own", "rule_sets", "verdict", "exit_code",
                                 "first_violation", "prediction"};
      if (g.contains("error")) want.insert("error");
      CHECK(keys(g) == want);
      if (g.at("verdict") == "invalid") {
        CHECK(g.at("prediction").is_null());
      } else {
        CHECK(keys(g.at("prediction")).count("outcome") == 1);
        CHECK(keys(g.at("prediction")).count("at") == 1);
      }
      total += g.at("releases").get<size_t>();
      own += g.at("own").get<bool>();
      if (k + 1 < ranges.size()) {
        const json& b = a.at("boundaries")[k];
        CHECK(b.at("from") == g.at("last"));
        CHECK(b.at("to") == ranges[k + 1].at("first"));
        CHECK(!b.at("changes").empty());
      }
    }
    CHECK(total == a.at("releases").get<size_t>());
    CHECK(own == (a.at("file_release").is_null() ? 0u : 1u));
    changed = changed || ranges.size() > 1;
  }
  CHECK(r.at("changed").get<bool>() == changed);
}

}  // namespace

TEST_CASE("bisect names the Gemma-2 4.44.0 -> 4.44.1 boundary", "[bisect]") {
  Run r = run("bisect " + repro("gemma2-4.44.0-sliding-window-generate.json") + " --format json");
  CHECK(r.exit_code == 1);  // the verdict changes across the releases
  const json j = json::parse(r.out);
  check_shape(j);
  const json& tf = axis(j, "transformers");
  CHECK(tf.at("file_release") == "4.44.0");
  const json* fixed = boundary(tf, "4.44.0", "4.44.1");
  REQUIRE(fixed);
  CHECK(change(*fixed, "verdict") == "error -> ok");
  CHECK(change(*fixed, "first_violation") == "mask.rank -> none");
  CHECK(change(*fixed, "prediction") == "device_assert at gather -> ok");
  const json* broke = boundary(tf, "4.43.4", "4.44.0");
  REQUIRE(broke);
  CHECK(change(*broke, "first_violation") == "none -> mask.rank");
  // the file's own release is a range of its own, marked
  for (const json& g : tf.at("ranges"))
    if (g.at("own").get<bool>()) {
      CHECK(g.at("first") == "4.44.0");
      CHECK(g.at("last") == "4.44.0");
      CHECK(g.at("first_violation").at("id") == "mask.rank");
      CHECK(g.at("prediction").at("outcome") == "device_assert");
    }

  // the fixed twin: the same boundaries (every release is diagnosed, whatever the file names),
  // the mark on 4.44.1's range
  Run twin = run("bisect " + repro("gemma2-4.44.1-generate-fixed.json") + " --format json");
  const json t = json::parse(twin.out);
  CHECK(axis(t, "transformers").at("boundaries") == tf.at("boundaries"));
  for (const json& g : axis(t, "transformers").at("ranges"))
    if (g.at("own").get<bool>()) CHECK(g.at("first") == "4.44.1");

  // the text form prints the boundary as one line
  Run text = binary_run::run("COLUMNS=200", "bisect " + repro("gemma2-4.44.0-sliding-window-generate.json"));
  CHECK(text.exit_code == 1);
  CHECK_THAT(text.out, Catch::Contains("4.44.0 -> 4.44.1: verdict error -> ok; first violation mask.rank -> none; "
                                       "prediction device_assert at gather -> ok"));
  CHECK_THAT(text.out, Catch::Contains("> 4.44.0 "));
}

TEST_CASE("bisect walks the flash-attn releases of the call's family", "[bisect]") {
  // the dq_accum tile offset of the backward is an int product before 2.8.0 (Dao-AILab/flash-attention
  // PR#1500): every FA2 release up to 2.7.4.post1 is predicted to crash, 2.8.0.post2 on is not
  Run r = run("bisect " + repro("fa2-2.7.4-backward-15000-segments-dq-accum-tile.json") + " --format json");
  CHECK(r.exit_code == 1);
  const json j = json::parse(r.out);
  check_shape(j);
  REQUIRE(j.at("axes").size() == 1);  // no `batch` block: only flash-attn decides
  const json& fa = axis(j, "flash-attn");
  CHECK(fa.at("key") == "flash_attn");
  REQUIRE(fa.at("ranges").size() == 2);
  const json& broken = fa.at("ranges")[0];
  CHECK(broken.at("first") == "2.0.0.post1");
  CHECK(broken.at("last") == "2.7.4.post1");
  CHECK(broken.at("own").get<bool>());  // 2.7.4 (no longer on PyPI) placed among the published ones
  CHECK(broken.at("first_violation").at("id") == "input.int32_range");
  CHECK(broken.at("prediction").at("outcome") == "illegal_address");
  CHECK(broken.at("prediction").at("pass") == "backward");
  const json* b = boundary(fa, "2.7.4.post1", "2.8.0.post2");
  REQUIRE(b);
  CHECK(change(*b, "verdict") == "error -> ok");
  CHECK(change(*b, "prediction") == "illegal_address at backward -> ok");
  // FA3 and FA4 releases are another family: not walked for an FA2 call
  for (const json& g : fa.at("ranges")) CHECK(g.at("last").get<std::string>().rfind("2.", 0) == 0);

  // the fixed twin names 2.8.0: it is put in its place, in the fixed range, and starts it; each
  // file adds its own unpublished release to the 57 of FA2 PyPI lists, not the other's
  CHECK(fa.at("releases").get<int>() == 58);
  Run twin = run("bisect " + repro("fa2-2.8.0-backward-15000-segments-dq-accum-tile-fixed.json") + " --format json");
  const json t = json::parse(twin.out);
  const json& tfa = axis(t, "flash-attn");
  CHECK(tfa.at("releases").get<int>() == 58);
  REQUIRE(tfa.at("ranges").size() == 2);
  CHECK(tfa.at("ranges")[1].at("first") == "2.8.0");
  CHECK(tfa.at("ranges")[1].at("own").get<bool>());
}

TEST_CASE("bisect of a batch whose diagnosis no release changes prints one range and exits 0", "[bisect]") {
  Run r = run("bisect " + repro("fa2-fp32-qkv.json") + " --format json");
  CHECK(r.exit_code == 0);
  const json j = json::parse(r.out);
  check_shape(j);
  CHECK_FALSE(j.at("changed").get<bool>());
  for (const json& a : j.at("axes")) {
    CHECK(a.at("ranges").size() == 1);
    CHECK(a.at("boundaries").empty());
  }
  // the fp32 inputs stay an error in every release: the verdict is reported, the exit code is
  // about change
  CHECK(axis(j, "flash-attn").at("ranges")[0].at("verdict") == "error");
  Run text = run("bisect " + repro("fa2-fp32-qkv.json"));
  CHECK(text.exit_code == 0);
  CHECK_THAT(text.out, Catch::Contains("no change across these releases"));
  CHECK_THAT(text.out, !Catch::Contains(" -> "));
}

TEST_CASE("bisect --axis walks the axes asked for, in that order", "[bisect]") {
  Run r = run("bisect " + repro("fla-rotary-odd-dim.json") + " --axis fla,transformers --format json");
  const json j = json::parse(r.out);
  check_shape(j);
  REQUIRE(j.at("axes").size() == 2);
  CHECK(j.at("axes")[0].at("axis") == "fla");
  CHECK(j.at("axes")[1].at("axis") == "transformers");
  // FLA 0.6.0 asserts on an odd rotary dim (fla/modules/rotary.py); older releases compute
  const json* b = boundary(j.at("axes")[0], "0.5.2", "0.6.0");
  REQUIRE(b);
  CHECK(change(*b, "prediction") == "wrong_output at rotary -> raises at rotary");

  // triton decides a launch block: keys by position up to 3.1, by name from 3.2
  Run t = run("bisect " + repro("fla-autotune-keys-triton-3.1.json") + " --format json");
  const json tj = json::parse(t.out);
  CHECK(boundary(axis(tj, "triton"), "3.1.0", "3.2.0"));
}

TEST_CASE("bisect records a release that refuses the batch as invalid, not the whole run", "[bisect]") {
  // the file names 4.44.1, which replays this Gemma-2 generate call; 4.52 would build a 4-D mask
  // past the cap and refuses it (tests/data/hostile/gemma2-4.52-four-d-past-cap.json names 4.52.0)
  json batch = json::parse(std::ifstream(std::string(ATTN_DOCTOR_SOURCE_DIR) +
                                         "/tests/data/hostile/gemma2-4.52-four-d-past-cap.json"));
  batch["environment"]["transformers"] = "4.44.1";
  const std::string path = (std::filesystem::temp_directory_path() / "attn-doctor-bisect-refused.json").string();
  std::ofstream(path) << batch.dump();
  Run r = run("bisect " + path + " --axis transformers --format json");
  std::filesystem::remove(path);
  CHECK(r.exit_code == 1);
  const json j = json::parse(r.out);
  check_shape(j);
  bool seen = false;
  for (const json& g : axis(j, "transformers").at("ranges"))
    if (g.at("verdict") == "invalid") {
      seen = true;
      CHECK(g.at("first") == "4.52.0");
      CHECK(g.at("last") == "4.52.4");
      CHECK(g.at("exit_code") == 2);
      CHECK_THAT(g.at("error").get<std::string>(), Catch::Contains("/batch/query_length"));
      CHECK_FALSE(g.at("own").get<bool>());
    }
  CHECK(seen);
}

TEST_CASE("bisect walks torch's releases for a call of torch's varlen_attn", "[bisect]") {
  // a model with a sliding window called through torch.nn.attention.varlen: 2.10's varlen_attn
  // has no window_size (full attention), 2.11 takes one (docs/spec/torch-varlen-attn.md)
  json batch = json::parse(std::ifstream(std::string(ATTN_DOCTOR_SOURCE_DIR) +
                                         "/tests/oracle/cases/oracle-torch-varlen-healthy-causal.json"));
  batch["environment"]["torch"] = "2.10.0";
  batch["model"]["sliding_window"] = 3;
  const std::string path = (std::filesystem::temp_directory_path() / "attn-doctor-bisect-torch.json").string();
  std::ofstream(path) << batch.dump();
  Run r = run("bisect " + path + " --format json");
  Run text = run("bisect " + path);
  std::filesystem::remove(path);
  CHECK(r.exit_code == 1);
  const json j = json::parse(r.out);
  check_shape(j);
  REQUIRE(j.at("axes").size() == 1);  // neither flash-attn's nor transformers' release decides
  const json& a = axis(j, "torch");
  CHECK(a.at("key") == "torch");
  CHECK(a.at("file_release") == "2.10.0");
  CHECK(a.at("releases").get<size_t>() == ad::published_releases("torch").releases.size());
  const json* b = boundary(a, "2.10.0", "2.11.0");
  REQUIRE(b);
  CHECK(change(*b, "first_violation") == "input.feature -> none");
  CHECK(a.at("ranges")[0].at("rule_sets") == json::array({"torch-2.10"}));
  CHECK(a.at("ranges")[1].at("rule_sets") == json::array({"torch-2.11"}));
  CHECK_THAT(text.out, Catch::Contains("2.10.0 -> 2.11.0: verdict error -> ok"));

  // the healthy 2.11 call (8 query heads over 2, window_size, no enable_gqa): 2.10's varlen_attn
  // does not take window_size (TypeError), 2.11 runs it, 2.12.0 on check the head counts in
  // Python and raise ValueError without enable_gqa (varlen.py of each wheel)
  Run healthy = run("bisect " + std::string(ATTN_DOCTOR_SOURCE_DIR) +
                    "/tests/oracle/cases/oracle-torch-varlen-healthy-causal.json --format json");
  CHECK(healthy.exit_code == 1);
  const json healthy_json = json::parse(healthy.out);
  const json& h = axis(healthy_json, "torch");
  REQUIRE(h.at("ranges").size() == 3);
  CHECK(h.at("ranges")[0].at("verdict") == "error");
  CHECK(h.at("ranges")[1].at("verdict") == "ok");
  CHECK(h.at("ranges")[1].at("rule_sets") == json::array({"torch-2.11"}));
  CHECK(h.at("ranges")[2].at("verdict") == "error");
  CHECK(h.at("ranges")[2].at("rule_sets") == json::array({"torch-2.12", "torch-2.14", "torch-2.15"}));
  const json* to212 = boundary(h, "2.11.0", "2.12.0");
  REQUIRE(to212);
  CHECK(change(*to212, "first_violation") == "none -> input.feature");

  // the same call with enable_gqa=True: 2.10 and 2.11 lack the keyword (TypeError), 2.12.0 on run it
  json gqa = json::parse(std::ifstream(std::string(ATTN_DOCTOR_SOURCE_DIR) +
                                       "/tests/oracle/cases/oracle-torch-varlen-healthy-causal.json"));
  gqa["environment"]["torch"] = "2.12.0";
  gqa["varlen"]["enable_gqa"] = true;
  const std::string gqa_path = (std::filesystem::temp_directory_path() / "attn-doctor-bisect-torch-gqa.json").string();
  std::ofstream(gqa_path) << gqa.dump();
  Run g = run("bisect " + gqa_path + " --format json");
  std::filesystem::remove(gqa_path);
  const json gj = json::parse(g.out);
  const json& ga = axis(gj, "torch");
  REQUIRE(ga.at("ranges").size() == 2);
  CHECK(ga.at("ranges")[0].at("verdict") == "error");
  CHECK(ga.at("ranges")[1].at("verdict") == "ok");
  CHECK(ga.at("ranges")[1].at("rule_sets") == json::array({"torch-2.12", "torch-2.14", "torch-2.15"}));
  CHECK(boundary(ga, "2.11.0", "2.12.0"));
}

TEST_CASE("bisect: the published release lists are in version order", "[bisect]") {
  for (const auto& list : ad::published_release_lists()) {
    const auto versions = ad::release_versions(list);
    REQUIRE(!versions.empty());
    for (size_t i = 1; i < versions.size(); ++i) {
      INFO(list.package << " " << versions[i - 1].text << " < " << versions[i].text);
      CHECK(versions[i - 1] < versions[i]);
    }
  }
  CHECK(ad::published_releases("torch").releases.front() == "2.10.0");  // the first with torch.nn.attention.varlen
  CHECK_THROWS_AS(ad::published_releases("jax"), std::logic_error);
}
