// The catalogue and the flash-attn release table as Markdown. docs/spec/invariants.md and
// docs/spec/flash-attn-features.md embed these between "generated" markers; a test keeps them equal
// (regenerate with `attn-doctor list invariants --format markdown` / `list flash-attn`).
#include <sstream>

#include "check/check.hpp"
#include "check/flash_attn_rules.hpp"

namespace ad {

namespace {

// Table cells must not contain a bare '|'.
std::string cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += "\\|";
    else out += c;
  }
  return out;
}

const char* yes_no(bool b) { return b ? "yes" : "no"; }

// "flash_attn < 2.8.0", "fla >= 0.6.0", "" (any release)
std::string release_range(const SymptomRow& row) {
  if (row.library.empty() || (row.from.empty() && row.to.empty())) return "";
  std::string out(row.library);
  if (!row.from.empty()) out += " >= " + std::string(row.from);
  if (!row.from.empty() && !row.to.empty()) out += ",";
  if (!row.to.empty()) out += " < " + std::string(row.to);
  return out;
}

// The symptom table's rows for one invariant (lib/predict/symptoms.cpp), as a list.
void symptom_rows(std::ostringstream& md, std::string_view id) {
  bool any = false;
  for (const SymptomRow& row : symptom_table()) {
    if (row.invariant != id) continue;
    if (!any) md << "\n**Predicted symptoms** (case: outcome, pass: what the user sees [basis]):\n\n";
    any = true;
    std::string when(row.when);
    if (const std::string r = release_range(row); !r.empty()) when += "; " + r;
    if (row.training_only) when += "; training only";
    md << "- " << (row.variant.empty() ? std::string("default") : "`" + std::string(row.variant) + "`") << " (" << when
       << "): **" << to_string(row.outcome) << "**, " << to_string(row.pass) << ": " << row.message << " [" << row.basis
       << "]\n";
  }
  if (!any) md << "\n**Predicted symptoms:** none of its own (its effect is predicted by the invariants it leads to).\n";
}

}  // namespace

std::string catalogue_markdown() {
  std::ostringstream md;
  md << "| # | id | stage | holds when | severity |\n|---|---|---|---|---|\n";
  for (const Invariant& inv : catalogue())
    md << "| " << inv.number << " | `" << inv.id << "` | " << inv.stage << " | " << cell(inv.statement) << " | "
       << cell(inv.severity_rule.empty() ? std::string_view("observed while the kernels run (lib/exec)") : inv.severity_rule)
       << " |\n";
  for (const Invariant& inv : catalogue()) {
    md << "\n### " << inv.number << ". `" << inv.id << "`\n\n";
    md << "- **Stage:** " << inv.stage << " (" << to_string(inv.group) << ")\n";
    md << "- **Holds when:** " << inv.statement << "\n";
    md << "- **When broken, the real stack:** " << inv.when_broken << "\n";
    if (!inv.severity_rule.empty()) md << "- **Severity:** " << inv.severity_rule << "\n";
    if (!inv.upstream_message.empty()) md << "- **Message users saw:** `" << inv.upstream_message << "`\n";
    if (!inv.explanation.empty()) md << "\n" << inv.explanation << "\n";
    symptom_rows(md, inv.id);
    if (!inv.fix.empty()) md << "\n**Fix:** " << inv.fix << "\n";
    if (!inv.references.empty()) {
      md << "\n**References:**";
      for (size_t i = 0; i < inv.references.size(); ++i) md << (i ? ";" : "") << " " << inv.references[i];
      md << "\n";
    }
  }
  return md.str();
}

std::string flash_attn_features_markdown() {
  std::ostringstream md;
  md << "| rule set | first release | family | dtypes | max head dim | head dim not a multiple of 8 | GQA | window "
        "| alibi | softcap | softcap + dropout | dropout | single-query GQA swap | 0-d tensor max_seqlen | "
        "N and H <= 65535 (grid y/z) | 64-bit offsets | read from |\n";
  md << "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const FlashAttnRules& r : flash_attn_rule_sets()) {
    const char* align = r.alignment == HeadDimAlignment::required        ? "raises"
                        : r.alignment == HeadDimAlignment::padded_in_cpp ? "padded in C++"
                                                                         : "padded in Python";
    md << "| " << r.name << " | " << r.first << " | FA" << r.family << " | "
       << (r.fp8 ? "fp16, bf16, fp8_e4m3" : "fp16, bf16") << " | " << r.max_head_dim << " | " << align << " | "
       << yes_no(r.gqa) << " | " << yes_no(r.window) << " | " << yes_no(r.alibi) << " | " << yes_no(r.softcap) << " | "
       << (r.softcap ? (r.softcap_with_dropout ? "yes" : (r.dropout ? "raises" : "n/a (no dropout)")) : "n/a") << " | "
       << yes_no(r.dropout) << " | " << yes_no(r.varlen_single_query_swap) << " | "
       << (r.max_seqlen_tensor_ok ? "accepted (host sync)" : "fails") << " | "
       << (r.grid_batch_on_y ? "yes" : "not checked") << " | " << yes_no(r.offsets_64bit) << " | " << cell(r.source)
       << " |\n";
  }
  return md.str();
}

}  // namespace ad
