// `attn-doctor compare FILE [--releases a,b,...|all] [--format text|json]`: the conversion of one
// batch under several transformers rule sets side by side, with the first invariant each breaks.
// A row whose output differs from the row above is marked, so the release where behaviour
// changed stands out. Exit code: 0 when every row holds, 1 when some row violates an
// error-severity invariant or fails the way its release fails, 2 for invalid input.
#include <algorithm>
#include <iostream>
#include <memory>
#include <sstream>

#include "batch/batch.hpp"
#include "cli.hpp"
#include "html_file.hpp"
#include "convert/convert.hpp"
#include "doctor/doctor.hpp"
#include "html/html.hpp"
#include "render/render.hpp"
#include "util/terminal.hpp"

namespace ad::cli {
namespace {

struct Row {
  std::string label;  // the release asked for, or the rule set's first release
  const RuleSetInfo* rules = nullptr;
  std::string note;
  Diagnosis diagnosis;  // the replay of `rules`, its static checks and prediction
  bool changed = false;
  const VarlenArgs& args() const { return *diagnosis.conversion.replayed; }
  const Violation* first() const { return diagnosis.report.first_violation(); }  // warnings included
  const Prediction& prediction() const { return *diagnosis.report.prediction; }  // what this release's stack does
};

// The rows asked for: "all" (default) = every transformers rule set; otherwise each entry is a
// rule-set name or a release, resolved to the nearest rule set at or below it.
std::vector<Row> rows_for(const std::string& releases) {
  std::vector<Row> rows;
  if (releases.empty() || releases == "all") {
    for (const auto& r : rule_sets())
      if (r.library == "transformers") rows.push_back(Row{r.first, &r});
    return rows;
  }
  std::stringstream in(releases);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    if (const RuleSetInfo* named = find_rule_set(item)) {
      rows.push_back(Row{named->first, named});
      continue;
    }
    auto v = parse_version(item);
    if (!v) throw CLI::ValidationError("--releases", "expected releases such as 4.44.0 or rule sets such as hf-4.44.0, found \"" + item + "\"");
    ResolvedRules resolved = resolve_transformers(*v);
    rows.push_back(Row{item, resolved.rules, resolved.exact ? "" : resolved.note});
  }
  return rows;
}

std::string list(const IntTensor& t) {
  std::string s = "[";
  const size_t n = t.values.size();
  for (size_t i = 0; i < n; ++i) {
    if (n > 8 && i == 3) {
      s += "... (" + std::to_string(n) + "), ";
      i = n - 3;
    }
    s += std::to_string(t.values[i]) + (i + 1 < n ? ", " : "");
  }
  s += "]";
  if (t.rank() != 1) {
    s += " shape (";
    for (size_t i = 0; i < t.shape.size(); ++i) s += std::to_string(t.shape[i]) + (i + 1 < t.shape.size() ? ", " : "");
    s += ")";
  }
  if (t.dtype != DType::int32) s += " " + to_string(t.dtype);
  return s;
}

std::string max_text(const MaxSeqlen& m) {
  if (m.is_none) return "None";
  return std::to_string(m.value) + (m.is_tensor ? " (0-d " + to_string(m.dtype) + " tensor)" : "");
}

// What the kernel receives, as one comparable string.
std::string signature(const VarlenArgs& a) {
  std::ostringstream s;
  s << to_string(a.path) << "|" << a.call.function_name() << "|" << list(a.cu_seqlens_q) << "|" << list(a.cu_seqlens_k) << "|"
    << max_text(a.max_seqlen_q) << "|" << max_text(a.max_seqlen_k) << "|" << a.total_q << "|" << a.total_k << "|"
    << a.call.window_left << "," << a.call.window_right << "|" << a.call.softcap.value_or(0.0);
  if (a.failure) s << "|" << a.failure->type << ": " << a.failure->message;
  return s.str();
}

std::string outcome(const Row& r) {
  const VarlenArgs& a = r.args();
  if (a.failure) return "raises " + a.failure->type + ": " + a.failure->message;
  if (const Violation* first = r.first())
    return (first->severity == Severity::warning ? "(warning) " : "") + first->id + ": " + first->message;
  return "ok";
}

// What a row counts as in the headline: an error (an error-severity violation, or the release
// raises), warnings only, or every invariant holds.
enum class RowClass { error, warning, ok };
RowClass row_class(const Row& r) {
  const Report& report = r.diagnosis.report;
  if (report.has_error_severity(false) || r.args().failure) return RowClass::error;
  return report.violations.empty() ? RowClass::ok : RowClass::warning;
}

// "4 break an invariant (error), 2 only warn, 1 holds every invariant"
std::string headline(const std::vector<Row>& rows) {
  size_t errors = 0, warnings = 0;
  for (const Row& r : rows) {
    const RowClass k = row_class(r);
    errors += k == RowClass::error;
    warnings += k == RowClass::warning;
  }
  const size_t ok = rows.size() - errors - warnings;
  auto count = [](size_t n, const char* one, const char* many) { return std::to_string(n) + " " + (n == 1 ? one : many); };
  return count(errors, "breaks", "break") + " an invariant (error), " + count(warnings, "only warns", "only warn") + ", " +
         count(ok, "holds", "hold") + " every invariant";
}

std::string truncated(const std::string& text, size_t width) {
  if (text.size() <= width) return text;
  if (width <= 3) return text.substr(0, width);
  return text.substr(0, width - 3) + "...";
}

// Cells padded to the widest in their column, two spaces apart; the last cell as it is.
std::vector<std::string> aligned(const std::vector<std::vector<std::string>>& cells) {
  std::vector<size_t> widths;
  for (const auto& row : cells)
    for (size_t c = 0; c + 1 < row.size(); ++c) {
      if (widths.size() <= c) widths.push_back(0);
      widths[c] = std::max(widths[c], row[c].size());
    }
  std::vector<std::string> lines;
  for (const auto& row : cells) {
    std::string line;
    for (size_t c = 0; c + 1 < row.size(); ++c) line += row[c] + std::string(widths[c] - row[c].size() + 2, ' ');
    lines.push_back(line + (row.empty() ? "" : row.back()));
  }
  return lines;
}

std::string max_column(const VarlenArgs& a) {
  return max_text(a.max_seqlen_q) == max_text(a.max_seqlen_k) ? max_text(a.max_seqlen_q)
                                                              : max_text(a.max_seqlen_q) + " / " + max_text(a.max_seqlen_k);
}

// --wide: one line per release, every column, the first violation's whole message.
void print_wide(const std::vector<Row>& rows) {
  std::vector<std::vector<std::string>> cells = {{"  release", "rule set", "path", "cu_seqlens_q", "cu_seqlens_k",
                                                  "max_seqlen q/k", "total q/k", "predicted", "first violation"}};
  for (const Row& r : rows) {
    const VarlenArgs& a = r.args();
    const bool varlen = a.path != VarlenPath::dense;
    cells.push_back({(r.changed ? "* " : "  ") + r.label, r.rules->name, to_string(a.path), varlen ? list(a.cu_seqlens_q) : "-",
                     varlen ? list(a.cu_seqlens_k) : "-", varlen ? max_column(a) : "-",
                     varlen ? std::to_string(a.total_q) + "/" + std::to_string(a.total_k) : "-",
                     to_string(r.prediction().symptom.outcome), outcome(r)});
  }
  const std::vector<std::string> lines = aligned(cells);
  for (size_t k = 0; k < lines.size(); ++k) {
    std::cout << lines[k] << "\n";
    if (k > 0 && !rows[k - 1].note.empty()) std::cout << "   note: " << rows[k - 1].note << "\n";
  }
}

// Fitted to `width` columns: a line per release (release, rule set, path, prediction, the
// first violation cut to fit), and under a varlen release what reaches the kernel.
void print_fitted(const std::vector<Row>& rows, size_t width) {
  std::vector<std::vector<std::string>> cells = {{"  release", "rule set", "path", "predicted", "first violation"}};
  for (const Row& r : rows)
    cells.push_back({(r.changed ? "* " : "  ") + r.label, r.rules->name, to_string(r.args().path),
                     to_string(r.prediction().symptom.outcome), outcome(r)});
  // the last column starts after the others: cut it, not them
  std::vector<std::vector<std::string>> heads = cells;
  for (auto& row : heads) row.back() = "";
  const std::vector<std::string> prefix = aligned(heads);
  const std::string indent(std::min<size_t>(prefix.front().find("rule set"), 12), ' ');
  const size_t room = width > prefix.front().size() + 16 ? width - prefix.front().size() : 16;
  for (size_t k = 0; k < cells.size(); ++k) {
    std::cout << prefix[k] << truncated(cells[k].back(), room) << "\n";
    if (k == 0) continue;
    const Row& r = rows[k - 1];
    const VarlenArgs& a = r.args();
    if (a.path != VarlenPath::dense) {
      // the arguments, two spaces apart, as many to a line as fit
      const std::string q = list(a.cu_seqlens_q), kk = list(a.cu_seqlens_k);
      std::vector<std::string> fields;
      if (q == kk) fields.push_back("cu_seqlens_q/k " + q);
      else fields.insert(fields.end(), {"cu_seqlens_q " + q, "cu_seqlens_k " + kk});
      fields.push_back("max_seqlen q/k " + max_column(a));
      fields.push_back("total q/k " + std::to_string(a.total_q) + "/" + std::to_string(a.total_k));
      const size_t room = width - indent.size();
      std::string line;
      for (const std::string& f : fields) {
        if (!line.empty() && line.size() + 2 + f.size() > room) {
          std::cout << indent << line << "\n";
          line.clear();
        }
        line += (line.empty() ? "" : "  ") + truncated(f, room);
      }
      std::cout << indent << line << "\n";
    }
    if (!r.note.empty()) std::cout << indent << wrap_text("note: " + r.note, width - indent.size(), indent + "  ") << "\n";
  }
}

void print_text(const std::string& file, const std::vector<Row>& rows, bool wide) {
  const size_t width = static_cast<size_t>(output_width());
  const std::string count = ": " + std::to_string(rows.size()) + " release" + (rows.size() == 1 ? "" : "s");
  // a path too long for the width keeps its tail, the file's name, behind "..."
  std::string shown = file;
  const size_t room = width > 8 + count.size() + 16 ? width - 8 - count.size() : 16;
  if (!wide && shown.size() > room) shown = "..." + shown.substr(shown.size() - (room - 3));
  std::cout << "compare " << shown << count << "\n";
  std::cout << headline(rows) << "\n";
  std::cout << "* = what reaches the kernel differs from the release above\n\n";
  if (wide) print_wide(rows);
  else print_fitted(rows, width);
}

}  // namespace

Subcommand add_compare(CLI::App& root, const Globals&) {
  struct Args {
    std::string file, releases, format = "text", html;
    bool full = false, wide = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = root.add_subcommand("compare", "replay one batch under several transformers releases, side by side");
  sub->add_option("FILE", args->file, "batch file")->required();
  sub->add_option("--releases", args->releases,
                  "comma-separated releases (4.44.0) or rule sets (hf-4.44.0), or all (default: every rule set)");
  sub->add_flag("--full", args->full, "print arrays in full (json)");
  sub->add_flag("--wide", args->wide,
                "text: one line per release with every column and whole messages (default: fitted to COLUMNS or the "
                "terminal, else 100 columns)");
  sub->add_option("--html", args->html, "also write the releases as aligned pictures of the batch to this HTML file");
  add_format_option(sub, args->format);
  Subcommand s;
  s.app = sub;
  s.run = [args]() {
    HtmlFile html(args->html);
    Batch batch = load_batch_file(args->file);
    if (!batch.batch) throw InputError(args->file, "/batch", "a `batch` block to replay", "none");
    std::vector<Row> rows = rows_for(args->releases);
    std::string previous;
    bool violated = false;
    for (Row& r : rows) {
      // the conversion and the static checks only: what each release hands the kernel
      CheckOptions options;
      options.backend = BackendChoice::none;
      options.rule_set = r.rules;
      r.diagnosis = diagnose(batch, options, args->file);
      const Report& report = r.diagnosis.report;
      if (report.stage_error) throw std::runtime_error(report.error_message);
      std::string sig = signature(r.args());
      r.changed = !previous.empty() && sig != previous;
      previous = sig;
      violated = violated || report.has_error_severity(false) || r.args().failure;
    }
    if (html.wanted()) {
      std::vector<CompareBand> bands;
      for (const Row& r : rows) bands.push_back({r.label, &r.diagnosis, r.note, r.changed});
      html.write(render_compare_html(batch, bands, args->file, HtmlOptions{.full = args->full}));
    }
    if (args->format == "json") {
      nlohmann::json out;
      out["tool"] = "attn-doctor";
      out["input"] = args->file;
      out["rules"] = nlohmann::json::array();
      for (const Row& r : rows) {
        nlohmann::json j;
        j["transformers"] = r.label;
        j["rule_set"] = r.rules->name;
        const Violation* first = r.first();
        j["path"] = to_string(r.args().path);
        j["varlen"] = varlen_json(r.args(), args->full);
        j["first_violation"] = first ? nlohmann::json{{"id", first->id},
                                                      {"stage", first->stage},
                                                      {"severity", to_string(first->severity)},
                                                      {"message", first->message}}
                                     : nlohmann::json(nullptr);
        j["prediction"] = prediction_json(r.prediction());
        j["changed"] = r.changed;
        if (!r.note.empty()) j["note"] = r.note;
        out["rules"].push_back(j);
      }
      print_json(out);
    } else {
      print_text(args->file, rows, args->wide);
    }
    return violated ? 1 : 0;
  };
  return s;
}

}  // namespace ad::cli
