// Report model: the JSON schema of report-format.md, first-violation order, exit codes,
// array summaries, and the text rendering (no colour unless asked).
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>

#include "batch/batch.hpp"
#include "check/check.hpp"
#include "doctor/doctor.hpp"
#include "render/render.hpp"
#include "util/terminal.hpp"

using namespace ad;
using nlohmann::json;

namespace {

Diagnosis sample_report() {
  Diagnosis d;
  Report& r = d.report;
  r.version = "0.1.0";
  r.input = "repro_cases/x.json";
  r.name = "x";
  d.rules.transformers = "4.44.0";
  d.rules.flash_attn = parse_version("2.6.3");
  r.backend = "cpu";
  r.add(make_violation("unpad.gather", Severity::error, "gather index 17 >= 8 in the key gather", {{"index", 17}, {"bound", 8}}));
  r.add(make_violation("mask.kv_length", Severity::error, "attention mask has 4096 columns but keys have 5000 rows",
                       {{"mask_width", 4096}, {"kv_length", 5000}}));
  r.add(make_violation("max_seqlen.type", Severity::warning, "max_seqlen_q is a 0-d tensor"));
  VarlenArgs a;
  a.path = VarlenPath::mask;
  a.cu_seqlens_q = IntTensor{{3}, {0, 5, 9}, DType::int32};
  a.cu_seqlens_k = a.cu_seqlens_q;
  a.max_seqlen_q.value = a.max_seqlen_k.value = 5;
  a.total_q = a.total_k = 9;
  d.conversion.replayed = a;
  r.stages.push_back({Stage::conversion, StageStatus::ok, 0.21, ""});
  return d;
}

// A symptom or prediction: outcome class, pass, message, basis, optional rows.
void check_symptom(const json& s) {
  REQUIRE(s.is_object());
  REQUIRE(s["outcome"].is_string());
  CHECK(parse_outcome(s["outcome"].get<std::string>()));
  CHECK((s["pass"] == "forward" || s["pass"] == "backward"));
  CHECK(s["message"].is_string());
  REQUIRE(s["basis"].is_string());
  const std::string basis = s["basis"];
  CHECK((basis == "model" || basis.rfind("report ", 0) == 0 || basis.rfind("golden ", 0) == 0));
  if (s.contains("rows")) {
    REQUIRE(s["rows"].is_array());
    for (const auto& r : s["rows"]) {
      REQUIRE(r.size() == 2);
      CHECK(r[0].get<int64_t>() <= r[1].get<int64_t>());
    }
  }
}

// Required keys and their JSON types (report-format.md `check --format json`).
void require_schema(const json& j) {
  for (const char* k : {"tool", "version", "input", "name", "status", "backend"}) {
    INFO(k);
    REQUIRE(j.contains(k));
    CHECK(j[k].is_string());
  }
  CHECK(j["tool"] == "attn-doctor");
  CHECK((j["status"] == "ok" || j["status"] == "violation" || j["status"] == "error"));
  REQUIRE(j["rules"].is_object());
  REQUIRE(j.contains("first_violation"));
  REQUIRE(j["violations"].is_array());
  REQUIRE(j.contains("varlen"));
  REQUIRE(j["stages"].is_array());
  auto check_violation = [](const json& v) {
    for (const char* k : {"id", "stage", "severity", "message", "explanation", "fix"}) {
      INFO(k);
      REQUIRE(v.contains(k));
      CHECK(v[k].is_string());
    }
    CHECK(v["evidence"].is_object());
    CHECK(v["references"].is_array());
    CHECK((v["severity"] == "error" || v["severity"] == "warning"));
    if (v.contains("symptom")) check_symptom(v["symptom"]);
    if (v.contains("location")) {  // only the fields that apply, never an empty object
      const json& l = v["location"];
      REQUIRE(l.is_object());
      CHECK(!l.empty());
      for (auto it = l.begin(); it != l.end(); ++it) {
        INFO(it.key());
        const std::string k = it.key();
        if (k == "row" || k == "segment") {
          CHECK(it->is_number_integer());
        } else if (k == "tokens" || k == "packed_rows" || k == "index") {
          REQUIRE((it->is_array() && it->size() == 2));
          CHECK((*it)[0].get<int64_t>() < (*it)[1].get<int64_t>());
        } else {
          CHECK(k == "side");
          CHECK((*it == "q" || *it == "k"));
        }
      }
    }
  };
  if (!j["first_violation"].is_null()) {
    check_violation(j["first_violation"]);
    CHECK(j["first_violation"] == j["violations"][0]);
  }
  for (const auto& v : j["violations"]) check_violation(v);
  for (const auto& s : j["stages"]) {
    CHECK(s["name"].is_string());
    CHECK(s["status"].is_string());
    CHECK(s["ms"].is_number());
  }
  if (j["varlen"].is_object()) {
    const auto& v = j["varlen"];
    for (const char* k : {"path", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k", "max_seqlen_is_tensor",
                          "total_q", "total_k"}) {
      INFO(k);
      CHECK(v.contains(k));
    }
  }
}

}  // namespace

TEST_CASE("report JSON follows report-format.md", "[report]") {
  const Diagnosis d = sample_report();
  json j = to_json(d, {});
  require_schema(j);
  CHECK(j["status"] == "violation");
  CHECK(j["first_violation"]["id"] == "mask.kv_length");  // catalogue order, not insertion order
  CHECK(j["first_violation"]["stage"] == "conversion");
  CHECK(j["first_violation"]["evidence"]["mask_width"] == 4096);
  CHECK(j["violations"].size() == 3);
  CHECK(j["violations"][1]["id"] == "max_seqlen.type");
  CHECK(j["violations"][2]["id"] == "unpad.gather");
  CHECK(!j["first_violation"]["explanation"].get<std::string>().empty());
  // round trip through text
  CHECK(json::parse(j.dump()) == j);
}

TEST_CASE("status and exit codes", "[report]") {
  Report ok;
  CHECK(ok.status() == "ok");
  CHECK(exit_code_for(ok, false) == 0);
  Report warn;
  warn.add(make_violation("max_seqlen.type", Severity::warning, "0-d tensor"));
  CHECK(warn.status() == "violation");
  CHECK(exit_code_for(warn, false) == 0);
  CHECK(exit_code_for(warn, true) == 1);  // --strict
  Report err = sample_report().report;
  CHECK(exit_code_for(err, false) == 1);
  Diagnosis failed_d;
  Report& failed = failed_d.report;
  failed.stage_error = true;
  failed.error_message = "device lost";
  CHECK(failed.status() == "error");
  CHECK(exit_code_for(failed, false) == 3);
  json j = to_json(failed_d, {});
  require_schema(j);
  CHECK(j["error"] == "device lost");
  CHECK(j["first_violation"].is_null());
}

TEST_CASE("long arrays are summarised unless --full", "[report]") {
  std::vector<int64_t> v(100);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>(i * 3);
  json s = summarise_array(v, false);
  CHECK(s["summarised"] == true);
  CHECK(s["count"] == 100);
  CHECK(s["head"].size() == 16);
  CHECK(s["head"][0] == 0);
  CHECK(s["tail"].back() == 297);
  CHECK(summarise_array(v, true).size() == 100);
  std::vector<int64_t> shortv{0, 5, 9};
  CHECK(summarise_array(shortv, false) == json({0, 5, 9}));
}

TEST_CASE("text report names the first violation, its evidence, fix and verdict", "[report]") {
  std::string text = render_text(sample_report(), {});
  CHECK(text.find("first violation: mask.kv_length") != std::string::npos);
  CHECK(text.find("evidence: kv_length: 5000; mask_width: 4096") != std::string::npos);
  CHECK(text.find("also violated:") != std::string::npos);
  CHECK(text.find("unpad.gather") != std::string::npos);
  CHECK(text.find("verdict: VIOLATION (2 errors, 1 warning)") != std::string::npos);
  CHECK(text.find("\033[") == std::string::npos);  // no colour unless asked
  std::string coloured = render_text(sample_report(), {true, false, false});
  CHECK(coloured.find("\033[31m") != std::string::npos);
}

TEST_CASE("report: evidence is printed as text, nested values included, never as JSON", "[report]") {
  Diagnosis d;
  Report& r = d.report;
  r.version = "0.1.0";
  json reach = json::array();
  reach.push_back({{"tensors", "q/out"}, {"rows", 387}, {"bytes_past", "53248"}, {"inside_segment", true}});
  reach.push_back({{"tensors", "k/v"}, {"rows", 387}, {"bytes_past", "13312"}, {"inside_segment", false}});
  std::vector<int64_t> many(40);
  for (size_t i = 0; i < many.size(); ++i) many[i] = static_cast<int64_t>(i);
  r.add(make_violation("cu_seqlens.total", Severity::error, "cu_seqlens_q[-1] is 400 but q has 387 rows",
                       {{"last", 400},
                        {"reach", reach},
                        {"shape", {2, 1, 25}},
                        {"indices", many},
                        {"raises", {{"type", "RuntimeError"}, {"message", "index 2 is out of bounds"}}},
                        {"upstream_message", "an illegal memory access was encountered"}}));
  const std::string wrapped = render_text(d, {});
  INFO(wrapped);
  // the report wraps long lines: read it unwrapped
  const std::string text = std::regex_replace(wrapped, std::regex("\n +"), " ");
  // no JSON punctuation from the evidence: no quotes, braces or "key":value pairs
  const std::string evidence = text.substr(text.find("evidence:"), text.find("\n\n", text.find("evidence:")) - text.find("evidence:"));
  CHECK(evidence.find('"') == std::string::npos);
  CHECK(evidence.find('{') == std::string::npos);
  // key: value entries; a list of objects as one group per element, its subject first
  CHECK(text.find("indices: [0, 1, 2, 3, 4, 5, ... (40 values)]") != std::string::npos);
  CHECK(text.find("last: 400;") != std::string::npos);
  CHECK(text.find("raises: message index 2 is out of bounds, type RuntimeError;") != std::string::npos);
  CHECK(text.find("reach: (tensors q/out, bytes_past 53248, inside_segment true, rows 387) (tensors k/v, bytes_past 13312,") !=
        std::string::npos);
  CHECK(text.find("shape: [2, 1, 25];") != std::string::npos);
  CHECK(text.find("upstream_message: an illegal memory access was encountered") != std::string::npos);
  // the JSON keeps the evidence as it was
  CHECK(to_json(d, {})["first_violation"]["evidence"]["reach"] == reach);
}

TEST_CASE("report: wrap_text and output_width", "[report]") {
  CHECK(wrap_text("aaa bbb ccc ddd", 7, "  ") == "aaa bbb\n  ccc ddd");
  CHECK(wrap_text("a-very-long-word x", 5, "") == "a-very-long-word\nx");
  CHECK(wrap_text("", 10, "  ").empty());
  setenv("COLUMNS", "123", 1);
  CHECK(output_width() == 123);
  setenv("COLUMNS", "10", 1);
  CHECK(output_width() == 40);  // never below 40
  // not a number: the terminal's width, or the fallback off a terminal
  setenv("COLUMNS", "wide", 1);
  if (!isatty(fileno(stdout))) CHECK(output_width(100) == 100);
  unsetenv("COLUMNS");
  if (!isatty(fileno(stdout))) CHECK(output_width(77) == 77);
}

TEST_CASE("diagnose: explicit overrun with --backend none gives the JSON schema and cu_seqlens.total", "[report]") {
  Batch b = parse_batch_text(R"({"format": "attn-doctor/batch@1", "name": "cu-overrun",
      "model": {"num_heads": 16, "num_kv_heads": 4, "head_dim": 128},
      "varlen": {"cu_seqlens_q": [0, 100, 137, 400], "max_seqlen_q": 263, "total_q": 387}})",
                             "cu-overrun.json");
  CheckOptions options;
  options.backend = BackendChoice::none;
  const Diagnosis d = diagnose(b, options, "cu-overrun.json");
  const Report& r = d.report;
  json j = to_json(d, {});
  require_schema(j);
  CHECK(j["name"] == "cu-overrun");
  CHECK(j["backend"] == "none");
  CHECK(j["first_violation"]["id"] == "cu_seqlens.total");
  CHECK(j["first_violation"]["evidence"]["last"] == 400);
  CHECK(j["first_violation"]["evidence"]["rows"] == 387);
  // where: the 13 packed q rows past the tensor that the kernel reads and writes
  CHECK(j["first_violation"]["location"] == json{{"packed_rows", {387, 400}}, {"side", "q"}});
  CHECK(j["varlen"]["path"] == "explicit");
  CHECK(j["varlen"]["cu_seqlens_q"] == json({0, 100, 137, 400}));
  CHECK(exit_code_for(r, false) == 1);
  // the prediction for the call, and the symptom of the violation it comes from
  REQUIRE(j.contains("prediction"));
  check_symptom(j["prediction"]);
  CHECK(j["prediction"]["outcome"] == "out_of_bounds");
  CHECK(j["prediction"]["invariant"] == "cu_seqlens.total");
  CHECK(j["first_violation"]["symptom"]["outcome"] == "out_of_bounds");
  CHECK_FALSE(j["first_violation"]["symptom"].contains("invariant"));
  // the text report: right after the header, before the first violation
  const std::string text = render_text(d, {});
  const auto at = text.find("prediction: out_of_bounds (forward): no error;");
  REQUIRE(at != std::string::npos);
  CHECK(at < text.find("first violation:"));
  CHECK(text.find("[model]") != std::string::npos);
}

TEST_CASE("report: a prediction with rows prints them on the next line", "[report]") {
  Diagnosis d;
  Report& r = d.report;
  r.version = "0.1.0";
  Prediction p;
  p.symptom.outcome = Outcome::wrong_output;
  p.symptom.message = "no error; output rows 128-199 are never computed";
  p.symptom.rows = {{128, 199}, {300, 300}};
  p.symptom.basis = "model";
  p.invariant = "max_seqlen.covers";
  r.prediction = p;
  const std::string text = render_text(d, {});
  CHECK(text.find("prediction: wrong_output (forward): no error; output rows 128-199 are never computed  [model]\n  rows: 128-199, 300\n") !=
        std::string::npos);
  const json j = to_json(d, {});
  CHECK(j["prediction"]["rows"] == json::parse("[[128, 199], [300, 300]]"));
  CHECK(j["prediction"]["invariant"] == "max_seqlen.covers");
}

TEST_CASE("check --format json stays valid JSON for a file name that is not UTF-8", "[report]") {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("attn-doctor-utf8-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::path file = dir / std::string("bad\xff" "name.json");
  fs::copy_file(fs::path(ATTN_DOCTOR_SOURCE_DIR) / "tests/data/cli/cu-overrun.json", file,
                fs::copy_options::overwrite_existing);
  std::string cmd = std::string(ATTN_DOCTOR_BINARY) + " check '" + file.string() + "' --format json --backend none";
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  int status = pclose(pipe);
  fs::remove_all(dir);
  CHECK(WEXITSTATUS(status) == 1);
  json j = json::parse(out);  // throws (and fails the test) if not valid JSON
  CHECK(j["status"] == "violation");
  CHECK(j["input"].get<std::string>().find("name.json") != std::string::npos);
}
