// Shared pieces of the command line: global options, subcommand registration, output helpers.
// Each subcommand lives in its own file and is a thin layer: parse options, call lib/, print.
#pragma once

#include <functional>
#include <string>

#include <CLI/CLI.hpp>

namespace ad::cli {

struct Globals {
  int verbosity = 0;  // -v, -vv
  bool quiet = false; // -q
};

// A registered subcommand: its CLI11 node and what to run when it was selected. `run`
// returns the process exit code (report-format.md).
struct Subcommand {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Subcommand add_check(CLI::App& root, const Globals& globals);
Subcommand add_compare(CLI::App& root, const Globals& globals);
Subcommand add_repro(CLI::App& root, const Globals& globals);
Subcommand add_explain(CLI::App& root, const Globals& globals);
Subcommand add_list(CLI::App& root, const Globals& globals);
Subcommand add_env(CLI::App& root, const Globals& globals);

// The capability is not in this binary: say so on stderr and return exit code 3.
int missing_capability(const std::string& what);

// `--format text|json` validator shared by subcommands.
inline CLI::Option* add_format_option(CLI::App* app, std::string& format) {
  return app->add_option("--format", format, "output format")->check(CLI::IsMember({"text", "json"}))->capture_default_str();
}

}  // namespace ad::cli
