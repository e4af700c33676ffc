// `attn-doctor compare FILE`: the conversion of one batch under every rule set.
#include <memory>

#include "cli.hpp"

namespace ad::cli {

Subcommand add_compare(CLI::App& root, const Globals&) {
  struct Args {
    std::string file, releases, format = "text";
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = root.add_subcommand("compare", "replay one batch under several transformers releases, side by side");
  sub->add_option("FILE", args->file, "batch file")->required();
  sub->add_option("--releases", args->releases, "comma-separated releases, or all (default)");
  add_format_option(sub, args->format);
  Subcommand s;
  s.app = sub;
  s.run = []() { return missing_capability("the release-by-release conversion replay (compare)"); };
  return s;
}

}  // namespace ad::cli
