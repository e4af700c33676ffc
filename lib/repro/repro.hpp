// Repro cases: batch files with an `expect` block (or, with no_expect, any batch files that
// must simply pass). Each case runs `attn-doctor check` in a
// child process (isolation: a case that crashes or hangs cannot take the others with it),
// cases run in parallel, and the outcome is compared with the expectation.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ad {

class StopSignals;

struct ReproOptions {
  std::string executable;               // attn-doctor binary to run each case with
  std::string backend = "auto";         // --backend for every case
  std::vector<std::string> extra_args;  // further `check` arguments
  unsigned jobs = 0;                    // 0: one per core
  double timeout_seconds = 300.0;       // per case
  bool no_expect = false;               // ignore expect blocks: every case must pass (exit 0)
  // A signal asks the run to stop (SIGINT, SIGTERM): the running cases get the signal and are
  // waited for, no further case starts; each case not judged is returned as skipped.
  const StopSignals* stop = nullptr;
};

struct ReproResult {
  std::filesystem::path file;
  std::string name;
  nlohmann::json expected;  // {"first_violation", "violations", "exit_code"} as given
  nlohmann::json got;       // {"first_violation", "violations", "exit_code", "status"}
  bool passed = false;
  bool error = false;       // not judged: unreadable case, no report, crash, timeout (JUnit <error>)
  bool skipped = false;     // not run, or stopped, because the run was interrupted (JUnit <skipped>)
  std::string message;      // why it failed (expected vs got), or the error
  std::string report;       // the report `check --format json` printed ("" without one)
  double ms = 0.0;
};

// Case files from files and folders (folders: every *.json below them, sorted). Throws
// InputError for a path that does not exist or a folder without cases.
std::vector<std::filesystem::path> collect_cases(const std::vector<std::string>& paths);

// Compares one `check --format json` outcome with the case's expect block (no_expect: the
// case passes when the check exits 0, whatever its file expects).
ReproResult judge_case(const std::filesystem::path& file, int exit_code, const std::string& stdout_text,
                       const std::string& stderr_text, bool no_expect = false);

std::vector<ReproResult> run_repro(const std::vector<std::filesystem::path>& cases, const ReproOptions& options);

// `interrupted`: the signal that stopped the run (0: it ran to the end), named in the output.
nlohmann::json repro_json(const std::vector<ReproResult>& results, int interrupted = 0);
// Well-formed XML 1.0 whatever the names, files and messages hold (util/xml.hpp).
std::string junit_xml(const std::vector<ReproResult>& results, const std::string& suite_name);

}  // namespace ad
