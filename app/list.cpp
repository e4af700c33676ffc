// `attn-doctor list invariants|rules|flash-attn|apis|advisories`. `--format markdown` prints what
// docs/spec/invariants.md, docs/spec/flash-attn-features.md and docs/prediction.md embed.
#include <algorithm>
#include <iostream>
#include <memory>
#include <sstream>
#include <vector>

#include "check/advisories.hpp"
#include "check/check.hpp"
#include "check/flash_attn_rules.hpp"
#include "convert/convert.hpp"
#include "cli.hpp"
#include "util/terminal.hpp"

namespace ad::cli {
namespace {

// Columns as wide as their widest cell, two spaces apart; the last column is wrapped to the
// output width (output_width) with its continuation lines under its first, and a "\n" in it
// starts a new line there.
void print_table(const std::vector<std::vector<std::string>>& rows, bool right_align_first = false) {
  if (rows.empty()) return;
  const size_t columns = rows.front().size();
  std::vector<size_t> widths(columns, 0);
  for (const auto& row : rows)
    for (size_t c = 0; c + 1 < columns; ++c) widths[c] = std::max(widths[c], row[c].size());
  size_t indent = 0;
  for (size_t c = 0; c + 1 < columns; ++c) indent += widths[c] + 2;
  const size_t total = static_cast<size_t>(output_width());
  const size_t room = total > indent + 30 ? total - indent : 30;
  const std::string pad(indent, ' ');
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c + 1 < columns; ++c) {
      const std::string fill(widths[c] - row[c].size(), ' ');
      line += (c == 0 && right_align_first ? fill + row[c] : row[c] + fill) + "  ";
    }
    std::istringstream paragraphs(row.back());
    std::string paragraph, text;
    while (std::getline(paragraphs, paragraph))
      text += (text.empty() ? "" : "\n" + pad) + wrap_text(paragraph, room, pad);
    std::cout << line << text << "\n";
  }
}

}  // namespace

Subcommand add_list(CLI::App& root, const Globals&) {
  struct Args {
    std::string what;
    std::string format = "text";
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = root.add_subcommand(
      "list", "list invariants (in the order that decides \"first\"), rule sets, the flash-attn release rules, or the "
      "APIs with the releases and contract page of each, or the kernel-release advisories");
  sub->add_option("WHAT", args->what, "invariants | rules | flash-attn | apis | advisories")
      ->required()
      ->check(CLI::IsMember({"invariants", "rules", "flash-attn", "apis", "advisories"}));
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
      std::vector<std::vector<std::string>> table;
      if (markdown) std::cout << "| rule set | library | releases | summary | source |\n|---|---|---|---|---|\n";
      for (const auto& r : rule_sets()) {
        std::string range = r.first + (r.last == r.first ? "" : " - " + (r.last.empty() ? std::string("...") : r.last));
        if (markdown) {
          std::cout << "| `" << r.name << "` | " << r.library << " | " << range << " | " << r.summary << " | " << r.source
                    << " |\n";
        } else {
          table.push_back({r.name, r.library, range, r.summary + "\nsource: " + r.source});
        }
      }
      if (!markdown) print_table(table);
      return 0;
    }
    if (args->what == "apis") {
      if (args->format == "json") {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& c : api_contracts())
          out.push_back({{"api", to_string(c.api)}, {"function", qualified_name(c.api)}, {"releases", c.releases},
                         {"contract", c.page}});
        print_json(out);
        return 0;
      }
      const bool markdown = args->format == "markdown";
      std::vector<std::vector<std::string>> table;
      if (markdown) std::cout << "| api | function | releases modelled | contract |\n|---|---|---|---|\n";
      for (const auto& c : api_contracts()) {
        const std::string releases = c.releases.empty() ? "not modelled" : std::string(c.releases);
        if (markdown)
          std::cout << "| `" << to_string(c.api) << "` | `" << qualified_name(c.api) << "` | " << releases << " | "
                    << (c.page.empty() ? "" : std::string(c.page)) << " |\n";
        else
          table.push_back({to_string(c.api), std::string(qualified_name(c.api)), releases, std::string(c.page)});
      }
      if (!markdown) print_table(table);
      return 0;
    }
    if (args->what == "advisories") {
      if (args->format == "markdown") {
        std::cout << advisories_markdown();
        return 0;
      }
      if (args->format == "json") {
        nlohmann::json out = nlohmann::json::array();
        for (const Advisory& a : advisories())
          out.push_back({{"id", a.id}, {"library", a.library}, {"introduced", a.introduced}, {"affected", affected_range(a)},
                         {"fixed_in", a.fixed_in.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.fixed_in)},
                         {"fix", a.fix}, {"architectures", a.archs}, {"head_dims", a.head_dims},
                         {"pass", to_string(a.pass)}, {"condition", a.condition}, {"outcome", to_string(a.outcome)},
                         {"symptom", a.symptom}, {"reference", a.reference}});
        print_json(out);
        return 0;
      }
      std::vector<std::vector<std::string>> table;
      for (const Advisory& a : advisories()) {
        table.push_back({std::string(a.id), std::string(a.library), affected_range(a),
                         std::string(a.condition) + " (" + to_string(a.pass) + (a.archs.empty() ? "" : ", " + std::string(a.archs)) +
                             ")\n" + to_string(a.outcome) + ": " + std::string(a.symptom) + "\nreference: " +
                             std::string(a.reference) + "\nfix: " + std::string(a.fix)});
      }
      print_table(table);
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
    std::vector<std::vector<std::string>> table;
    for (const auto& inv : catalogue())
      table.push_back({std::to_string(inv.number), std::string(inv.id), std::string(inv.stage), std::string(inv.statement)});
    print_table(table, /*right_align_first=*/true);
    return 0;
  };
  return s;
}

}  // namespace ad::cli
