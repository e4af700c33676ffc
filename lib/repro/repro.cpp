// The repro runner: collect, run in isolated children on all cores, judge, render.
#include "repro/repro.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "batch/batch.hpp"
#include "check/check.hpp"
#include "util/subprocess.hpp"
#include "util/xml.hpp"

namespace ad {

namespace fs = std::filesystem;

std::vector<fs::path> collect_cases(const std::vector<std::string>& paths) {
  std::vector<fs::path> out;
  for (const auto& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<fs::path> found;
      for (auto it = fs::recursive_directory_iterator(p, fs::directory_options::skip_permission_denied, ec);
           !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
        if (it->is_regular_file() && it->path().extension() == ".json") found.push_back(it->path());
      if (found.empty()) throw InputError(p, "", "a folder holding repro cases (*.json)", "no .json files");
      std::sort(found.begin(), found.end());
      out.insert(out.end(), found.begin(), found.end());
    } else if (fs::is_regular_file(p, ec)) {
      out.emplace_back(p);
    } else {
      throw InputError(p, "", "a repro case file or a folder of them", "nothing at that path");
    }
  }
  return out;
}

namespace {

nlohmann::json expect_json(const Expect& e) {
  nlohmann::json j = nlohmann::json::object();
  if (e.first_violation_given) j["first_violation"] = e.first_violation ? nlohmann::json(*e.first_violation) : nlohmann::json();
  if (!e.violations.empty()) j["violations"] = e.violations;
  if (e.exit_code) j["exit_code"] = *e.exit_code;
  if (e.prediction) {
    j["prediction"] = {{"outcome", to_string(e.prediction->outcome)}};
    if (e.prediction->pass) j["prediction"]["pass"] = to_string(*e.prediction->pass);
  }
  return j;
}

std::string first_line(const std::string& s) {
  auto nl = s.find('\n');
  std::string line = s.substr(0, nl);
  return line.size() > 400 ? line.substr(0, 400) + "..." : line;
}

}  // namespace

ReproResult judge_case(const fs::path& file, int exit_code, const std::string& stdout_text, const std::string& stderr_text,
                       bool no_expect) {
  ReproResult r;
  r.file = file;
  r.name = file.stem().string();
  Expect expect;
  bool invalid_case = false;
  try {
    Batch b = load_batch_file(file);
    r.name = b.name;
    if (no_expect) {
      expect = Expect{};
      expect.exit_code = 0;  // every case must simply pass
    } else if (!b.expect) {
      r.message = "the case has no \"expect\" block (--no-expect: every case must simply pass)";
      r.error = true;
      return r;
    } else {
      expect = *b.expect;
    }
  } catch (const InputError& e) {
    // A case may be an invalid batch on purpose (expect exit 2): then it cannot carry a
    // readable expect block, and only exit code 2 can pass. Such cases live in hostile/
    // fixtures with an .expect file instead; here an unreadable case fails with the reason.
    invalid_case = true;
    r.error = true;
    r.message = std::string("the case cannot be read: ") + e.what();
  }
  r.expected = expect_json(expect);
  r.got = {{"exit_code", exit_code}};
  nlohmann::json report;
  bool have_report = false;
  if (!stdout_text.empty()) {
    try {
      report = nlohmann::json::parse(stdout_text);
      have_report = report.is_object();
    } catch (const nlohmann::json::exception&) {
    }
  }
  std::vector<std::string> got_ids;
  if (have_report) {
    r.report = stdout_text;
    r.got["status"] = report.value("status", "");
    const auto& first = report["first_violation"];
    r.got["first_violation"] = first.is_object() ? first["id"] : nlohmann::json();
    for (const auto& v : report["violations"]) got_ids.push_back(v.value("id", ""));
    r.got["violations"] = got_ids;
    if (report.contains("prediction") && report["prediction"].is_object())
      r.got["prediction"] = {{"outcome", report["prediction"].value("outcome", "")},
                             {"pass", report["prediction"].value("pass", "")}};
  } else if (!(expect.exit_code && *expect.exit_code == exit_code && exit_code >= 2)) {
    r.error = true;  // no report to judge (and no expected failure to run)
  }
  if (invalid_case) return r;

  std::vector<std::string> problems;
  for (const auto& id : expect.violations)
    if (!find_invariant(id)) problems.push_back("expect names unknown invariant \"" + id + "\" (did you mean \"" + closest_invariant_id(id) + "\"?)");
  if (expect.first_violation && !find_invariant(*expect.first_violation))
    problems.push_back("expect names unknown invariant \"" + *expect.first_violation + "\" (did you mean \"" +
                       closest_invariant_id(*expect.first_violation) + "\"?)");
  if (!have_report && !(expect.exit_code && *expect.exit_code == exit_code && exit_code >= 2)) {
    problems.push_back("no report (exit " + std::to_string(exit_code) + "): " + first_line(stderr_text));
  } else if (have_report) {
    if (expect.first_violation_given) {
      std::string want = expect.first_violation ? *expect.first_violation : "none";
      std::string got = r.got["first_violation"].is_string() ? r.got["first_violation"].get<std::string>() : "none";
      if (want != got) problems.push_back("first_violation: expected " + want + ", got " + got);
    }
    for (const auto& id : expect.violations)
      if (std::find(got_ids.begin(), got_ids.end(), id) == got_ids.end())
        problems.push_back("violations: expected " + id + " among them, not reported");
    if (expect.prediction) {
      const std::string want = to_string(expect.prediction->outcome);
      const std::string got = r.got.contains("prediction") ? r.got["prediction"]["outcome"].get<std::string>() : "none";
      if (want != got) problems.push_back("prediction.outcome: expected " + want + ", got " + got);
      if (expect.prediction->pass) {
        const std::string want_pass = to_string(*expect.prediction->pass);
        const std::string got_pass = r.got.contains("prediction") ? r.got["prediction"]["pass"].get<std::string>() : "none";
        if (want_pass != got_pass) problems.push_back("prediction.pass: expected " + want_pass + ", got " + got_pass);
      }
    }
  }
  if (expect.exit_code && *expect.exit_code != exit_code)
    problems.push_back("exit code: expected " + std::to_string(*expect.exit_code) + ", got " + std::to_string(exit_code) +
                       (exit_code >= 2 ? " (" + first_line(stderr_text) + ")" : ""));
  if (!expect.first_violation_given && expect.violations.empty() && !expect.exit_code && !expect.prediction)
    problems.push_back("the expect block is empty");
  if (no_expect && have_report && exit_code == 1 && r.got["first_violation"].is_string())
    problems.push_back("first violation " + r.got["first_violation"].get<std::string>());
  r.passed = problems.empty();
  for (const auto& p : problems) r.message += (r.message.empty() ? "" : "; ") + p;
  return r;
}

std::vector<ReproResult> run_repro(const std::vector<fs::path>& cases, const ReproOptions& options) {
  std::vector<ReproResult> results(cases.size());
  std::vector<char> done(cases.size(), 0);
  std::atomic<size_t> next{0};
  unsigned jobs = options.jobs ? options.jobs : std::max(1u, std::thread::hardware_concurrency());
  jobs = static_cast<unsigned>(std::min<size_t>(jobs, std::max<size_t>(1, cases.size())));
  const auto stop_requested = [&] { return options.stop && options.stop->signal() != 0; };
  auto worker = [&] {
    for (size_t i = next++; i < cases.size() && !stop_requested(); i = next++) {
      std::vector<std::string> argv = {options.executable, "check", cases[i].string(), "--format", "json",
                                       "--backend", options.backend};
      argv.insert(argv.end(), options.extra_args.begin(), options.extra_args.end());
      ProcessOptions process;
      process.timeout_seconds = options.timeout_seconds;
      process.stop = options.stop;
      ProcessResult p = run_process(argv, process);
      ReproResult r;
      // Stopped on the way (by the signal forwarded to it, or by a Ctrl-C that reached the
      // whole process group first): nothing to judge, and not a failure of the case.
      const int stopped_by = p.stopped ? p.stopped : (options.stop ? options.stop->signal() : 0);
      if (stopped_by != 0 && !p.exited) {
        r.file = cases[i];
        r.name = cases[i].stem().string();
        r.skipped = true;
        r.message = "interrupted by " + signal_name(stopped_by) + " while it ran";
        r.ms = p.seconds * 1000.0;
        results[i] = std::move(r);
        done[i] = 1;
        continue;
      }
      int code = p.exited ? p.exit_code : -1;
      r = judge_case(cases[i], code, p.out, p.err, options.no_expect);
      if (!p.spawn_error.empty()) {
        r.passed = false;
        r.error = true;
        r.message = "could not start " + options.executable + ": " + p.spawn_error;
      } else if (p.timed_out) {
        r.passed = false;
        r.error = true;
        r.message = "timed out after " + std::to_string(static_cast<int>(options.timeout_seconds)) + " s";
      } else if (!p.exited) {
        r.passed = false;
        r.error = true;
        r.message = "attn-doctor died with signal " + std::to_string(p.signal) + (r.message.empty() ? "" : "; " + r.message);
      }
      r.ms = p.seconds * 1000.0;
      results[i] = std::move(r);
      done[i] = 1;
    }
  };
  std::vector<std::thread> pool;
  for (unsigned k = 0; k < jobs; ++k) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  for (size_t i = 0; i < cases.size(); ++i) {
    if (done[i]) continue;  // a case never started: the run was stopped first
    ReproResult& r = results[i];
    r.file = cases[i];
    r.name = cases[i].stem().string();
    r.skipped = true;
    r.message = "not run: interrupted by " + signal_name(options.stop ? options.stop->signal() : 0);
  }
  return results;
}

nlohmann::json repro_json(const std::vector<ReproResult>& results, int interrupted) {
  nlohmann::json cases = nlohmann::json::array();
  int passed = 0, skipped = 0;
  for (const auto& r : results) {
    cases.push_back({{"file", r.file.string()},
                     {"name", r.name},
                     {"expected", r.expected},
                     {"got", r.got},
                     {"passed", r.passed},
                     {"error", r.error},
                     {"skipped", r.skipped},
                     {"ms", r.ms},
                     {"message", r.message}});
    passed += r.passed;
    skipped += r.skipped;
  }
  nlohmann::json out = {{"cases", cases},
                        {"passed", passed},
                        {"failed", static_cast<int>(results.size()) - passed - skipped},
                        {"skipped", skipped}};
  if (interrupted) out["interrupted"] = signal_name(interrupted);
  return out;
}

// JUnit XML: a case that met its expectation passes; one that did not is a <failure>; one that
// could not be judged (unreadable, no report, crash, timeout) is an <error>; one that an
// interrupt stopped or kept from starting is <skipped>. Each testcase's <system-out> holds
// the case's report (the JSON `check` printed). Every string goes through xml_escape, so the
// document is well-formed whatever bytes a file name, a batch name or a message holds.
std::string junit_xml(const std::vector<ReproResult>& results, const std::string& suite_name) {
  int failures = 0, errors = 0, skipped = 0;
  double total_ms = 0;
  for (const auto& r : results) {
    skipped += r.skipped;
    failures += !r.passed && !r.error && !r.skipped;
    errors += !r.passed && r.error && !r.skipped;
    total_ms += r.ms;
  }
  const auto attr = [](const std::string& s) { return xml_escape(s, true); };
  const auto text = [](const std::string& s) { return xml_escape(s, false); };
  const auto dump = [](const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); };
  const std::string counts = "tests=\"" + std::to_string(results.size()) + "\" failures=\"" + std::to_string(failures) +
                             "\" errors=\"" + std::to_string(errors) + "\" skipped=\"" + std::to_string(skipped) + "\"";
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<testsuites " + counts + ">\n";
  out += "  <testsuite name=\"" + attr(suite_name) + "\" " + counts + " time=\"" + std::to_string(total_ms / 1000.0) +
         "\">\n";
  for (const auto& r : results) {
    out += "    <testcase classname=\"" + attr(r.file.parent_path().string()) + "\" name=\"" + attr(r.name) +
           "\" file=\"" + attr(r.file.string()) + "\" time=\"" + std::to_string(r.ms / 1000.0) + "\">\n";
    if (r.skipped)
      out += "      <skipped message=\"" + attr(r.message) + "\"/>\n";
    else if (!r.passed && r.error)
      out += "      <error message=\"" + attr(r.message) + "\" type=\"unreadable\">" + text(r.message) + "</error>\n";
    else if (!r.passed)
      out += "      <failure message=\"" + attr(r.message) + "\" type=\"expectation\">expected: " + text(dump(r.expected)) +
             "\ngot: " + text(dump(r.got)) + "</failure>\n";
    if (!r.report.empty()) out += "      <system-out>" + text(r.report) + "</system-out>\n";
    out += "    </testcase>\n";
  }
  out += "  </testsuite>\n</testsuites>\n";
  return out;
}

}  // namespace ad
