// `attn-doctor list invariants|rules|flash-attn`. `--format markdown` prints what
// docs/spec/invariants.md and docs/spec/flash-attn-features.md embed.
#include <iomanip>
#include <iostream>
#include <memory>

#include "check/check.hpp"
#include "check/flash_attn_rules.hpp"
#include "convert/convert.hpp"
#include "cli.hpp"

namespace ad::cli {

Subcommand add_list(CLI::App& root, const Globals&) {
  struct Args {
    std::string what;
    std::string format = "text";
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = root.add_subcommand(
      "list", "list invariants (in the order that decides \"first\"), rule sets, or the flash-attn release rules");
  sub->add_option("WHAT", args->what, "invariants | rules | flash-attn")
      ->required()
      ->check(CLI::IsMember({"invariants", "rules", "flash-attn"}));
  sub->add_option("--format", args->format, "output format (markdown: the tables docs/ embeds)")
      ->check(CLI::IsMember({"text", "json", "markdown"}))
      ->capture_default_str();
  Subcommand s;
  s.app = sub;
  s.run = [args]() {
    if (args->what == "rules") {
      if (args->format == "json") {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& r : rule_sets())
          out.push_back({{"name", r.name}, {"library", r.library}, {"first", r.first}, {"last", r.last},
                         {"source", r.source}, {"summary", r.summary}});
        print_json(out);
        return 0;
      }
      bool markdown = args->format == "markdown";
      if (markdown) std::cout << "| rule set | library | releases | summary | source |\n|---|---|---|---|---|\n";
      for (const auto& r : rule_sets()) {
        std::string range = r.first + (r.last == r.first ? "" : " - " + (r.last.empty() ? std::string("...") : r.last));
        if (markdown) {
          std::cout << "| `" << r.name << "` | " << r.library << " | " << range << " | " << r.summary << " | " << r.source
                    << " |\n";
        } else {
          std::cout << std::left << std::setw(14) << r.name << std::setw(13) << r.library << std::setw(20) << range
                    << r.summary << "\n" << std::string(47, ' ') << "source: " << r.source << std::right << "\n";
        }
      }
      return 0;
    }
    if (args->what == "flash-attn") {
      if (args->format == "json") {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& r : flash_attn_rule_sets())
          out.push_back({{"rule_set", r.name}, {"first", r.first}, {"family", r.family}, {"fp8", r.fp8},
                         {"max_head_dim", r.max_head_dim}, {"gqa", r.gqa}, {"window", r.window}, {"alibi", r.alibi},
                         {"softcap", r.softcap}, {"softcap_with_dropout", r.softcap_with_dropout}, {"dropout", r.dropout},
                         {"varlen_single_query_swap", r.varlen_single_query_swap},
                         {"max_seqlen_tensor_ok", r.max_seqlen_tensor_ok}, {"source", r.source}});
        print_json(out);
      } else {
        std::cout << flash_attn_features_markdown();
      }
      return 0;
    }
    if (args->format == "markdown") {
      std::cout << catalogue_markdown();
      return 0;
    }
    if (args->format == "json") {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& inv : catalogue())
        out.push_back({{"number", inv.number}, {"id", inv.id}, {"stage", inv.stage}, {"statement", inv.statement},
                       {"static", inv.check != nullptr}});
      print_json(out);
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
