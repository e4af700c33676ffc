// `attn-doctor compare FILE [--releases a,b,...|all] [--format text|json]`: the conversion of one
// batch under several transformers rule sets side by side, with the first invariant each breaks.
// A row whose output differs from the row above is marked, so the release where behaviour
// changed stands out. Exit code: 0 when every row holds, 1 when some row violates an
// error-severity invariant or fails the way its release fails, 2 for invalid input.
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>

#include "batch/batch.hpp"
#include "cli.hpp"
#include "html_file.hpp"
#include "convert/convert.hpp"
#include "doctor/doctor.hpp"
#include "html/html.hpp"
#include "report/report.hpp"

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
  s << to_string(a.path) << "|" << a.call.function << "|" << list(a.cu_seqlens_q) << "|" << list(a.cu_seqlens_k) << "|"
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

void print_text(const std::string& file, const std::vector<Row>& rows) {
  std::cout << "compare " << file << ": " << rows.size() << " rule sets (* = output differs from the row above)\n\n";
  std::cout << std::left << "  " << std::setw(10) << "release" << std::setw(11) << "rule set" << std::setw(13) << "path"
            << std::setw(26) << "cu_seqlens_q" << std::setw(26) << "cu_seqlens_k" << std::setw(24) << "max_seqlen q/k"
            << std::setw(10) << "total q/k" << std::setw(17) << "predicted" << "first violation\n";
  for (const Row& r : rows) {
    const VarlenArgs& a = r.args();
    bool varlen = a.path != VarlenPath::dense;
    std::string max = !varlen ? "-"
                      : max_text(a.max_seqlen_q) == max_text(a.max_seqlen_k)
                          ? max_text(a.max_seqlen_q)
                          : max_text(a.max_seqlen_q) + " / " + max_text(a.max_seqlen_k);
    std::cout << (r.changed ? "* " : "  ") << std::setw(10) << r.label << std::setw(11) << r.rules->name << std::setw(13)
              << to_string(a.path) << std::setw(26)
              << (varlen ? list(a.cu_seqlens_q) : "-") << std::setw(26) << (varlen ? list(a.cu_seqlens_k) : "-")
              << std::setw(24) << max << std::setw(10)
              << (varlen ? std::to_string(a.total_q) + "/" + std::to_string(a.total_k) : "-") << std::setw(17)
              << to_string(r.prediction().symptom.outcome) << outcome(r) << "\n";
    if (!r.note.empty()) std::cout << "              note: " << r.note << "\n";
  }
}

}  // namespace

Subcommand add_compare(CLI::App& root, const Globals&) {
  struct Args {
    std::string file, releases, format = "text", html;
    bool full = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = root.add_subcommand("compare", "replay one batch under several transformers releases, side by side");
  sub->add_option("FILE", args->file, "batch file")->required();
  sub->add_option("--releases", args->releases,
                  "comma-separated releases (4.44.0) or rule sets (hf-4.44.0), or all (default: every rule set)");
  sub->add_flag("--full", args->full, "print arrays in full (json)");
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
      print_text(args->file, rows);
    }
    return violated ? 1 : 0;
  };
  return s;
}

}  // namespace ad::cli
