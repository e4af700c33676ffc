// `attn-doctor repro DIR|FILE...`: run repro cases and compare with their `expect`.
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>

#include "batch/batch.hpp"
#include "cli.hpp"
#include "render/render.hpp"
#include "repro/repro.hpp"
#include "util/subprocess.hpp"

namespace ad::cli {

Subcommand add_repro(CLI::App& root, const Globals& globals) {
  struct Args {
    std::vector<std::string> paths;
    std::string format = "text", junit, backend = "auto", binary;
    unsigned jobs = 0;
    double timeout = 300;
    bool no_expect = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = root.add_subcommand("repro", "run repro cases (batch files with an expect block) and compare");
  sub->add_option("PATHS", args->paths, "case files or folders of them")->required();
  sub->add_option("--format", args->format, "text, json, github (GitHub Actions annotations for the failed cases)")
      ->check(CLI::IsMember({"text", "json", "github"}))
      ->capture_default_str();
  sub->add_flag("--no-expect", args->no_expect,
                "ignore expect blocks: every case must simply pass (a folder of captures, say)");
  sub->add_option("--junit", args->junit, "also write JUnit XML (one testcase per case) to this file");
  sub->add_option("--backend", args->backend, "auto, cpu, cuda, none (as in check)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda", "none"}))
      ->capture_default_str();
  sub->add_option("-j,--jobs", args->jobs, "cases run at once (default: one per core)");
  sub->add_option("--timeout", args->timeout, "seconds per case before it is stopped and failed")->capture_default_str();
  sub->add_option("--attn-doctor", args->binary,
                  "run each case with this attn-doctor binary (default: this one), e.g. another release's");
  Subcommand s;
  s.app = sub;
  s.run = [args, &globals]() {
    auto cases = collect_cases(args->paths);
    ReproOptions options;
    options.executable = args->binary.empty() ? self_executable() : args->binary;
    options.backend = args->backend;
    options.jobs = args->jobs;
    options.timeout_seconds = args->timeout;
    options.no_expect = args->no_expect;
    // A Ctrl-C or a CI job's cancel (SIGINT, SIGTERM) reaches the running cases, which are
    // waited for; the cases that ran are reported (JUnit included), the others as skipped.
    // Kept until the report is written: a second signal (a CI runner's SIGTERM after its
    // SIGINT) does not cut the JUnit file short.
    StopSignals stop({SIGINT, SIGTERM});
    options.stop = &stop;
    std::vector<ReproResult> results = run_repro(cases, options);
    const int interrupted = stop.signal();
    int failed = 0, skipped = 0;
    for (const auto& r : results) {
      skipped += r.skipped;
      failed += !r.passed && !r.skipped;
    }
    int passed = static_cast<int>(results.size()) - failed - skipped;
    if (!args->junit.empty()) {
      std::ofstream out(args->junit);
      out << junit_xml(results, "attn-doctor repro");
      if (!out) throw InputError(args->junit, "", "a writable file for --junit", "it cannot be written");
    }
    const std::string stopped_line = interrupted ? "interrupted by " + signal_name(interrupted) + ": " +
                                                       std::to_string(skipped) + " of " + std::to_string(results.size()) +
                                                       " cases not run or stopped (skipped)"
                                                 : "";
    if (args->format == "json") {
      print_json(repro_json(results, interrupted));
    } else if (args->format == "github") {
      for (const auto& r : results)
        if (!r.passed && !r.skipped)
          std::cout << github_annotation("error", r.file.string(), "attn-doctor repro: " + r.name, r.message);
      if (interrupted) std::cout << "::warning title=attn-doctor repro::" << stopped_line << "\n";
      std::cout << passed << " passed, " << failed << " failed" << std::endl;
    } else {
      bool color = use_color(globals);
      for (const auto& r : results) {
        if ((globals.quiet && r.passed) || r.skipped) continue;
        std::string tag = r.passed ? (color ? "\033[32mPASS\033[0m" : "PASS") : (color ? "\033[31mFAIL\033[0m" : "FAIL");
        char ms[32];
        std::snprintf(ms, sizeof ms, "%6.0f ms", r.ms);
        std::cout << tag << " " << ms << "  " << r.name;
        if (!r.passed) std::cout << "  (" << r.file.string() << ")\n       " << r.message;
        std::cout << "\n";
      }
      if (interrupted) std::cout << stopped_line << "\n";
      std::cout << passed << " passed, " << failed << " failed" << std::endl;
    }
    // the shell's convention for a process ended by a signal
    if (interrupted) return 128 + interrupted;
    return failed == 0 ? 0 : 1;
  };
  return s;
}

}  // namespace ad::cli
