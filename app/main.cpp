// attn-doctor: entry point. Parses the command line, sets up logging (stderr), runs the
// selected subcommand and maps every outcome to the documented exit codes:
// 0 ok, 1 violation, 2 invalid input or command line, 3 a stage could not run.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <vector>

#include "batch/batch.hpp"
#include "batch/json_node.hpp"
#include "build_info.hpp"
#include "cli.hpp"
#include "doctor/doctor.hpp"
#include "util/terminal.hpp"
#include "util/log.hpp"
#include "util/text.hpp"

namespace {

int run_guarded(const std::function<int()>& run) {
  try {
    return run();
  } catch (const ad::InputError& e) {
    std::fprintf(stderr, "attn-doctor: invalid input: %s\n", e.what());  // escaped where it was built
    return 2;
  } catch (const CLI::Error& e) {
    std::fprintf(stderr, "attn-doctor: %s\n", ad::escape_text(e.what()).c_str());
    return 2;
  } catch (const ad::CapabilityError& e) {
    std::fprintf(stderr, "attn-doctor: cannot run: %s\n", ad::escape_text(e.what()).c_str());
    return 3;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "attn-doctor: cannot run: out of memory\n");
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attn-doctor: internal error: %s\n", ad::escape_text(e.what()).c_str());
    return 3;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"attn-doctor: diagnose and reproduce variable-length (varlen) attention bugs.\n"
               "Reads a batch file (mask, lengths, dims, versions), replays the conversion the named\n"
               "transformers release performed, checks every invariant the kernels rely on, runs the\n"
               "kernels under bounds checks and reports which invariant breaks first.",
               "attn-doctor"};
  app.set_version_flag("--version", ad::cli::version_text(), "print the version, the commit and the build options");
  app.require_subcommand(1, 1);
  app.footer("Run `attn-doctor COMMAND --help` for a command's options. Exit codes: 0 every error-severity\n"
             "invariant holds, 1 a violation, 2 invalid input or command line, 3 a stage could not run.");
  app.fallthrough();
  ad::cli::Globals globals;
  app.add_flag("-v,--verbose", globals.verbosity, "more log output on stderr (-vv: trace)");
  app.add_flag("-q,--quiet", globals.quiet, "only errors on stderr; shortest output");

  app.add_option("--color", globals.color, "colour on stdout: auto (a terminal, NO_COLOR unset; FORCE_COLOR forces it), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->capture_default_str();

  std::vector<ad::cli::Subcommand> subcommands = {
      ad::cli::add_check(app, globals),   ad::cli::add_compare(app, globals), ad::cli::add_repro(app, globals),
      ad::cli::add_explain(app, globals), ad::cli::add_list(app, globals),    ad::cli::add_env(app, globals),
      ad::cli::add_bisect(app, globals),
      ad::cli::add_import(app, globals),
  };
  if (int rc = ad::cli::usage_problem(app, argc, argv); rc >= 0) return rc;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // CLI11 quotes the offending argument: escaped like every message that quotes user text
    std::fprintf(stderr, "%s\nRun with --help for more information.\n", ad::escape_text(e.what()).c_str());
    return 2;
  }
  ad::log::configure(globals.verbosity, globals.quiet);
  for (const auto& s : subcommands)
    if (s.app->parsed()) return run_guarded(s.run);
  return 2;
}

bool ad::cli::use_color(const Globals& globals) {
  if (globals.color == "always") return true;
  if (globals.color == "never") return false;
  return ad::stdout_wants_color();
}

// No subcommand, or a word that is none: the help (on stderr, exit 2) and, for a misspelt
// subcommand, the closest one. -1: the command line names a subcommand (CLI11 parses it).
int ad::cli::usage_problem(CLI::App& app, int argc, char** argv) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) names.push_back(sub->get_name());
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--help" || word == "-h" || word == "--version") return -1;
    if (word == "--color") {
      ++i;  // its value
      continue;
    }
    if (!word.empty() && word[0] == '-') continue;  // a global flag (CLI11 reports unknown ones)
    if (std::find(names.begin(), names.end(), word) != names.end()) return -1;
    std::string closest;
    size_t best = SIZE_MAX;
    for (const auto& n : names)
      if (size_t d = ad::edit_distance(word, n); d < best) best = d, closest = n;
    std::fprintf(stderr, "attn-doctor: unknown command \"%s\"%s\n\n", ad::escape_text(word).c_str(),
                 best <= 3 ? ("; did you mean \"" + closest + "\"?").c_str() : "");
    std::fprintf(stderr, "%s", app.help().c_str());
    return 2;
  }
  std::fprintf(stderr, "attn-doctor: a command is required\n\n%s", app.help().c_str());
  return 2;
}

int ad::cli::missing_capability(const std::string& what) {
  std::fprintf(stderr, "attn-doctor: cannot run: %s is not built into this attn-doctor yet\n", what.c_str());
  return 3;
}
