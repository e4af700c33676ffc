// `attn-doctor list invariants|rules`.
#include <iomanip>
#include <iostream>
#include <memory>

#include "check/check.hpp"
#include "cli.hpp"

namespace ad::cli {

Subcommand add_list(CLI::App& root, const Globals&) {
  struct Args {
    std::string what;
    std::string format = "text";
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = root.add_subcommand("list", "list invariants (in the order that decides \"first\") or rule sets");
  sub->add_option("WHAT", args->what, "invariants | rules")->required()->check(CLI::IsMember({"invariants", "rules"}));
  add_format_option(sub, args->format);
  Subcommand s;
  s.app = sub;
  s.run = [args]() {
    if (args->what == "rules") return missing_capability("the conversion replay (list rules)");
    if (args->format == "json") {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& inv : catalogue())
        out.push_back({{"number", inv.number}, {"id", inv.id}, {"stage", inv.stage}, {"statement", inv.statement}});
      std::cout << out.dump(2) << std::endl;
      return 0;
    }
    for (const auto& inv : catalogue())
      std::cout << std::setw(3) << inv.number << "  " << std::left << std::setw(26) << inv.id << std::setw(11) << inv.stage
                << std::right << inv.statement << "\n";
    return 0;
  };
  return s;
}

}  // namespace ad::cli
