// `attn-doctor explain ID`: one catalogue entry, as text or JSON.
#include <iostream>
#include <memory>

#include "check/check.hpp"
#include "cli.hpp"
#include "util/terminal.hpp"
#include "util/text.hpp"

namespace ad::cli {

namespace {

nlohmann::json entry_json(const Invariant& inv) {
  std::vector<std::string> refs(inv.references.begin(), inv.references.end());
  return {{"id", inv.id},
          {"number", inv.number},
          {"group", to_string(inv.group)},
          {"stage", inv.stage},
          {"static", inv.check != nullptr},
          {"severity", inv.severity_rule},
          {"statement", inv.statement},
          {"when_broken", inv.when_broken},
          {"explanation", inv.explanation},
          {"fix", inv.fix},
          {"references", refs},
          {"upstream_message", inv.upstream_message}};
}

}  // namespace

Subcommand add_explain(CLI::App& root, const Globals&) {
  struct Args {
    std::string id;
    std::string format = "text";
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = root.add_subcommand("explain", "print what an invariant means, what breaks, and the fix");
  sub->add_option("ID", args->id, "invariant id, e.g. mask.kv_length")->required();
  add_format_option(sub, args->format);
  Subcommand s;
  s.app = sub;
  s.run = [args]() {
    const Invariant* inv = find_invariant(args->id);
    if (!inv) {
      std::cerr << "attn-doctor: unknown invariant id \"" << escape_text(args->id) << "\"; did you mean \""
                << closest_invariant_id(args->id) << "\"? (attn-doctor list invariants)\n";
      return 2;
    }
    if (args->format == "json") {
      print_json(entry_json(*inv));
      return 0;
    }
    // each paragraph wrapped to the output width, continued with a hanging indent
    const size_t width = static_cast<size_t>(output_width());
    auto para = [&](const std::string& text, const std::string& indent) { return wrap_text(text, width - indent.size(), indent); };
    std::cout << inv->id << "  (#" << inv->number << ", " << to_string(inv->group) << ", stage " << inv->stage << ")\n\n";
    std::cout << para("holds when: " + std::string(inv->statement), "  ") << "\n";
    std::cout << para("when broken, the real stack: " + std::string(inv->when_broken), "  ") << "\n";
    if (!inv->severity_rule.empty()) std::cout << para("severity: " + std::string(inv->severity_rule), "  ") << "\n";
    if (!inv->upstream_message.empty())
      std::cout << para("message users see: \"" + std::string(inv->upstream_message) + "\"", "  ") << "\n";
    if (!inv->explanation.empty()) std::cout << "\n" << para(std::string(inv->explanation), "") << "\n";
    if (!inv->fix.empty()) std::cout << "\n" << para("fix: " + std::string(inv->fix), "  ") << "\n";
    if (!inv->references.empty()) {
      std::cout << "\nreferences:\n";
      for (auto r : inv->references) std::cout << "  " << r << "\n";
    }
    return 0;
  };
  return s;
}

}  // namespace ad::cli
