// Repro runner: expectation judging, isolation of crashing/hanging cases, JUnit, collection.
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "batch/batch.hpp"
#include "repro/repro.hpp"
#include "util/subprocess.hpp"
#include "util/xml.hpp"

using namespace ad;
namespace fs = std::filesystem;

namespace {

struct CaseDir {
  fs::path dir = fs::temp_directory_path() / ("attn-doctor-repro-" + std::to_string(::getpid()));
  CaseDir() { fs::create_directories(dir); }
  ~CaseDir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  fs::path write(const std::string& name, const std::string& text) const {
    std::ofstream(dir / name) << text;
    return dir / name;
  }
};

const char* kCase = R"({"format": "attn-doctor/batch@1", "name": "%s",
  "model": {"num_heads": 16, "num_kv_heads": 4, "head_dim": 128},
  "varlen": {"cu_seqlens_q": [0, 100, 137, 400], "max_seqlen_q": 263, "total_q": 387},
  "expect": %s})";

std::string make_case(const std::string& name, const std::string& expect) {
  char buf[1024];
  std::snprintf(buf, sizeof buf, kCase, name.c_str(), expect.c_str());
  return buf;
}

const char* kReport = R"({"status": "violation", "first_violation": {"id": "cu_seqlens.total"},
  "violations": [{"id": "cu_seqlens.total"}, {"id": "unpad.gather"}]})";

}  // namespace

TEST_CASE("judge: first violation, listed violations and exit code must all match", "[repro]") {
  CaseDir d;
  auto ok = d.write("ok.json", make_case("ok", R"({"first_violation": "cu_seqlens.total", "violations": ["unpad.gather"], "exit_code": 1})"));
  auto r = judge_case(ok, 1, kReport, "");
  CHECK(r.passed);
  CHECK(r.name == "ok");
  CHECK(r.got["first_violation"] == "cu_seqlens.total");

  auto wrong_first = d.write("wf.json", make_case("wf", R"({"first_violation": "mask.kv_length"})"));
  r = judge_case(wrong_first, 1, kReport, "");
  CHECK(!r.passed);
  CHECK(r.message == "first_violation: expected mask.kv_length, got cu_seqlens.total");

  auto missing = d.write("m.json", make_case("m", R"({"violations": ["result.reference"]})"));
  r = judge_case(missing, 1, kReport, "");
  CHECK(!r.passed);
  CHECK(r.message.find("expected result.reference among them") != std::string::npos);

  auto code = d.write("c.json", make_case("c", R"({"first_violation": "cu_seqlens.total", "exit_code": 0})"));
  r = judge_case(code, 1, kReport, "");
  CHECK(!r.passed);
  CHECK(r.message == "exit code: expected 0, got 1");

  auto healthy = d.write("h.json", make_case("h", R"({"first_violation": null, "exit_code": 0})"));
  r = judge_case(healthy, 0, R"({"status": "ok", "first_violation": null, "violations": []})", "");
  CHECK(r.passed);
}

TEST_CASE("judge: typos in expect ids, empty expect, no expect, no report", "[repro]") {
  CaseDir d;
  auto typo = d.write("t.json", make_case("t", R"({"first_violation": "cu_seqlens.totl"})"));
  auto r = judge_case(typo, 1, kReport, "");
  CHECK(!r.passed);
  CHECK(r.message.find("did you mean \"cu_seqlens.total\"?") != std::string::npos);
  auto empty = d.write("e.json", make_case("e", "{}"));
  CHECK(judge_case(empty, 1, kReport, "").message.find("the expect block is empty") != std::string::npos);
  auto noexpect = d.write("n.json", R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 1, "head_dim": 8},
                                       "varlen": {"cu_seqlens_q": [0, 1]}})");
  r = judge_case(noexpect, 0, kReport, "");
  CHECK(r.message.find("the case has no \"expect\" block") == 0);
  CHECK(r.error);  // JUnit <error>: nothing to judge against
  // --no-expect: a case needs no expect block and must simply pass
  CHECK(judge_case(noexpect, 0, kReport, "", true).passed);
  r = judge_case(noexpect, 1, kReport, "", true);
  CHECK(!r.passed);
  CHECK(!r.error);
  CHECK(r.message.find("first violation cu_seqlens.total") != std::string::npos);
  CHECK(!r.report.empty());  // kept for the JUnit <system-out>
  auto crashed = d.write("x.json", make_case("x", R"({"first_violation": "cu_seqlens.total"})"));
  r = judge_case(crashed, 3, "", "attn-doctor: cannot run: device lost\n");
  CHECK(!r.passed);
  CHECK(r.error);
  CHECK(r.message.find("no report (exit 3): attn-doctor: cannot run: device lost") != std::string::npos);
  auto unreadable = d.write("u.json", "{\"format\": \"attn-doctor/batch@1\"");
  r = judge_case(unreadable, 2, "", "");
  CHECK(!r.passed);
  CHECK(r.error);
  CHECK(r.message.find("the case cannot be read") != std::string::npos);
}

TEST_CASE("run_repro isolates a case that crashes or hangs and reports every case", "[repro]") {
  CaseDir d;
  auto a = d.write("a.json", make_case("a", R"({"first_violation": "cu_seqlens.total"})"));
  auto b = d.write("crash.json", make_case("crash", R"({"first_violation": "cu_seqlens.total"})"));
  auto c = d.write("hang.json", make_case("hang", R"({"first_violation": "cu_seqlens.total"})"));
  // A stand-in for attn-doctor: answers case a, dies on "crash", hangs on "hang".
  auto fake = d.write("fake.sh", std::string("#!/bin/sh\ncase \"$2\" in\n") + "  *crash.json) kill -SEGV $$ ;;\n" +
                                     "  *hang.json) sleep 30 ;;\n" + "  *) echo '" + kReport + "'; exit 1 ;;\nesac\n");
  fs::permissions(fake, fs::perms::owner_all);
  ReproOptions options;
  options.executable = fake.string();
  options.timeout_seconds = 2;
  auto results = run_repro({a, b, c}, options);
  REQUIRE(results.size() == 3);
  CHECK(results[0].passed);
  CHECK(!results[1].passed);
  CHECK(results[1].message.find("died with signal 11") != std::string::npos);
  CHECK(!results[2].passed);
  CHECK(results[2].message == "timed out after 2 s");
  auto j = repro_json(results);
  CHECK(j["passed"] == 1);
  CHECK(j["failed"] == 2);
  std::string xml = junit_xml(results, "suite");
  // a crash and a timeout are errors (nothing was judged), not expectation failures
  CHECK(xml.find("<testsuite name=\"suite\" tests=\"3\" failures=\"0\" errors=\"2\"") != std::string::npos);
  CHECK(xml.find("<error message=\"timed out after 2 s\"") != std::string::npos);
  CHECK(xml.find("<system-out>") != std::string::npos);  // case a's report
}

TEST_CASE("collect_cases: folders recursively and sorted, missing paths are input errors", "[repro]") {
  CaseDir d;
  fs::create_directories(d.dir / "sub");
  d.write("b.json", "{}");
  d.write("sub/a.json", "{}");
  d.write("notes.txt", "x");
  auto cases = collect_cases({d.dir.string()});
  REQUIRE(cases.size() == 2);
  CHECK(cases[0].filename() == "b.json");
  CHECK(cases[1].filename() == "a.json");
  CHECK_THROWS_AS(collect_cases({(d.dir / "nope").string()}), InputError);
  fs::create_directories(d.dir / "empty");
  CHECK_THROWS_WITH(collect_cases({(d.dir / "empty").string()}), Catch::Contains("no .json files"));
}

// SIGINT / SIGTERM to `repro` (a Ctrl-C, a CI cancel): the running case gets the signal and is
// waited for, no case starts after it, and the report still lists every case: the judged ones
// as they came out, the stopped and the unstarted ones as skipped.
TEST_CASE("run_repro: a stop signal stops the running case, starts no other, skips the rest", "[repro]") {
  CaseDir d;
  auto a = d.write("a.json", make_case("a", R"({"first_violation": "cu_seqlens.total"})"));
  auto b = d.write("slow.json", make_case("slow", R"({"first_violation": "cu_seqlens.total"})"));
  auto c = d.write("c.json", make_case("c", R"({"first_violation": "cu_seqlens.total"})"));
  const fs::path pid_file = d.dir / "slow.pid";
  // A stand-in for attn-doctor: answers a and c, writes its pid and waits on "slow".
  auto fake = d.write("fake.sh", std::string("#!/bin/sh\ncase \"$2\" in\n") + "  *slow.json) echo $$ > " +
                                     pid_file.string() + "; exec sleep 60 ;;\n" + "  *) echo '" + kReport +
                                     "'; exit 1 ;;\nesac\n");
  fs::permissions(fake, fs::perms::owner_all);
  StopSignals stop({SIGINT, SIGTERM});
  ReproOptions options;
  options.executable = fake.string();
  options.timeout_seconds = 120;
  options.jobs = 1;
  options.stop = &stop;
  std::thread sender([&] {
    for (int k = 0; k < 1000 && !fs::exists(pid_file); ++k) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the pid is written before the exec
    kill(getpid(), SIGINT);
  });
  const auto start = std::chrono::steady_clock::now();
  auto results = run_repro({a, b, c}, options);
  sender.join();
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));
  REQUIRE(results.size() == 3);
  CHECK(results[0].passed);
  CHECK_FALSE(results[0].skipped);
  CHECK(results[1].skipped);
  CHECK(results[1].message == "interrupted by SIGINT while it ran");
  CHECK(results[2].skipped);
  CHECK(results[2].file == c);
  CHECK(results[2].message == "not run: interrupted by SIGINT");
  long pid = 0;
  std::ifstream(pid_file) >> pid;
  REQUIRE(pid > 0);
  CHECK(::kill(pid, 0) != 0);  // the case's process is gone (reaped by run_process)
  auto j = repro_json(results, SIGINT);
  CHECK(j["passed"] == 1);
  CHECK(j["failed"] == 0);
  CHECK(j["skipped"] == 2);
  CHECK(j["interrupted"] == "SIGINT");
  const std::string xml = junit_xml(results, "suite");
  CHECK(xml.find("tests=\"3\" failures=\"0\" errors=\"0\" skipped=\"2\"") != std::string::npos);
  CHECK(xml.find("<skipped message=\"not run: interrupted by SIGINT\"/>") != std::string::npos);
}

// Whatever bytes the file names, batch names and messages hold, the JUnit file is UTF-8 XML
// 1.0: no ill-formed sequence, no control character but tab / LF / CR, no U+FFFE / U+FFFF.
TEST_CASE("junit_xml: hostile names and messages give well-formed XML", "[repro]") {
  ReproResult r;
  r.file = fs::path("cases\xFF") / "bad\xC0\xAF.json";
  r.name = "name \xEF\xBF\xBE\xEF\xBF\xBF \x01<tag>";
  r.error = true;
  r.message = "the case cannot be read: " + std::string("\xFF\xFE{\0\"\0", 6) + "\r\n";
  ReproResult f;
  f.file = "f.json";
  f.name = "f";
  f.expected = {{"first_violation", "mask.rank"}};
  f.got = {{"first_violation", std::string("x\xFF")}};
  f.message = "first_violation: expected mask.rank, got x\xFF";
  const std::string xml = junit_xml({r, f}, "suite\x02");
  CHECK(valid_utf8(xml) == xml);
  for (unsigned char c : xml) CHECK((c >= 0x20 || c == '\n' || c == '\t'));
  CHECK(xml.find("\xEF\xBF\xBE") == std::string::npos);
  CHECK(xml.find("\xEF\xBF\xBF") == std::string::npos);
  CHECK(xml.find("name=\"name \xEF\xBF\xBD\xEF\xBF\xBD \xEF\xBF\xBD&lt;tag&gt;\"") != std::string::npos);
  CHECK(xml.find("file=\"cases\xEF\xBF\xBD/bad\xEF\xBF\xBD\xEF\xBF\xBD.json\"") != std::string::npos);
  CHECK(xml.find("&#13;&#10;\"") != std::string::npos);  // CR LF of an attribute survive parsing
  CHECK(xml.find("<failure message=\"first_violation: expected mask.rank, got x\xEF\xBF\xBD\"") != std::string::npos);
}
