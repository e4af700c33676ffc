// attn-doctor: entry point. Parses the command line, sets up logging (stderr), runs the
// selected subcommand and maps every outcome to the documented exit codes:
// 0 ok, 1 violation, 2 invalid input or command line, 3 a stage could not run.
#include <cstdio>
#include <exception>
#include <vector>

#include "batch/batch.hpp"
#include "cli.hpp"
#include "doctor/doctor.hpp"
#include "util/log.hpp"

namespace {

int run_guarded(const std::function<int()>& run) {
  try {
    return run();
  } catch (const ad::InputError& e) {
    std::fprintf(stderr, "attn-doctor: invalid input: %s\n", e.what());
    return 2;
  } catch (const CLI::Error& e) {
    std::fprintf(stderr, "attn-doctor: %s\n", e.what());
    return 2;
  } catch (const ad::CapabilityError& e) {
    std::fprintf(stderr, "attn-doctor: cannot run: %s\n", e.what());
    return 3;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "attn-doctor: cannot run: out of memory\n");
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attn-doctor: internal error: %s\n", e.what());
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
  app.set_version_flag("--version", std::string("attn-doctor ") + ad::kToolVersion);
  app.require_subcommand(1, 1);
  app.fallthrough();
  ad::cli::Globals globals;
  app.add_flag("-v,--verbose", globals.verbosity, "more log output on stderr (-vv: trace)");
  app.add_flag("-q,--quiet", globals.quiet, "only errors on stderr; shortest output");

  std::vector<ad::cli::Subcommand> subcommands = {
      ad::cli::add_check(app, globals),   ad::cli::add_compare(app, globals), ad::cli::add_repro(app, globals),
      ad::cli::add_explain(app, globals), ad::cli::add_list(app, globals),    ad::cli::add_env(app, globals),
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  ad::log::configure(globals.verbosity, globals.quiet);
  for (const auto& s : subcommands)
    if (s.app->parsed()) return run_guarded(s.run);
  return 2;
}

int ad::cli::missing_capability(const std::string& what) {
  std::fprintf(stderr, "attn-doctor: cannot run: %s is not built into this attn-doctor yet\n", what.c_str());
  return 3;
}
