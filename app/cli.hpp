// Shared pieces of the command line: global options, subcommand registration, output helpers.
// Each subcommand lives in its own file and is a thin layer: parse options, call lib/, print.
#pragma once

#include <functional>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

namespace ad::cli {

struct Globals {
  int verbosity = 0;           // -v, -vv
  bool quiet = false;          // -q
  std::string color = "auto";  // --color auto|always|never
};

// Whether stdout gets ANSI colour: --color always/never, else (auto) FORCE_COLOR or a
// terminal, and never with NO_COLOR (stdout_wants_color).
bool use_color(const Globals& globals);

// No subcommand or an unknown one: prints the help (and the closest subcommand) on stderr and
// returns the exit code (2); -1 when the command line names a subcommand.
int usage_problem(CLI::App& app, int argc, char** argv);

// A registered subcommand: its CLI11 node and what to run when it was selected. `run`
// returns the process exit code (report-format.md).
struct Subcommand {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Subcommand add_check(CLI::App& root, const Globals& globals);
Subcommand add_compare(CLI::App& root, const Globals& globals);
Subcommand add_bisect(CLI::App& root, const Globals& globals);
Subcommand add_repro(CLI::App& root, const Globals& globals);
Subcommand add_explain(CLI::App& root, const Globals& globals);
Subcommand add_list(CLI::App& root, const Globals& globals);
Subcommand add_env(CLI::App& root, const Globals& globals);
Subcommand add_import(CLI::App& root, const Globals& globals);

// One GitHub Actions workflow command: `::error file=FILE,title=TITLE::message` (escaped).
std::string github_annotation(const std::string& level, const std::string& file, const std::string& title,
                              const std::string& message);

// The capability is not in this binary: say so on stderr and return exit code 3.
int missing_capability(const std::string& what);

// A JSON document on stdout and a newline: indented, or on one line (`one_line`: JSON lines,
// one report per line); a string that is not valid UTF-8 is written with U+FFFD, not thrown on.
inline void print_json(const nlohmann::json& j, bool one_line = false) {
  std::cout << j.dump(one_line ? -1 : 2, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
}

// `--format text|json` validator shared by subcommands.
inline CLI::Option* add_format_option(CLI::App* app, std::string& format) {
  return app->add_option("--format", format, "output format")->check(CLI::IsMember({"text", "json"}))->capture_default_str();
}

}  // namespace ad::cli
