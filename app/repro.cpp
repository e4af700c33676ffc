// `attn-doctor repro DIR|FILE...`: run repro cases and compare with their `expect`.
#include <memory>

#include "cli.hpp"

namespace ad::cli {

Subcommand add_repro(CLI::App& root, const Globals&) {
  struct Args {
    std::vector<std::string> paths;
    std::string format = "text", junit, backend = "auto";
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = root.add_subcommand("repro", "run repro cases (batch files with an expect block) and compare");
  sub->add_option("PATHS", args->paths, "case files or folders of them")->required();
  add_format_option(sub, args->format);
  sub->add_option("--junit", args->junit, "also write JUnit XML here");
  sub->add_option("--backend", args->backend, "auto, cpu, cuda, none")->check(CLI::IsMember({"auto", "cpu", "cuda", "none"}));
  Subcommand s;
  s.app = sub;
  s.run = []() { return missing_capability("the repro runner"); };
  return s;
}

}  // namespace ad::cli
