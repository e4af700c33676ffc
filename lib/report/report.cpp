// Report model, exit codes, and the JSON and text renderings (report-format.md).
#include "report/report.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace ad {

std::string to_string(Severity s) { return s == Severity::error ? "error" : "warning"; }

namespace {
constexpr Stage kStages[] = {Stage::conversion, Stage::static_checks, Stage::plan, Stage::execute, Stage::unpad,
                             Stage::rotary,     Stage::attention,     Stage::pad,  Stage::result, Stage::attention_backward};
}  // namespace

const char* to_string(Side s) { return s == Side::q ? "q" : "k"; }

Location Location::row_tokens(int64_t row, int64_t begin, int64_t end) {
  Location l;
  l.row = row;
  l.tokens = IndexRange{begin, std::max(end, begin + 1)};
  return l;
}

Location Location::whole_row(int64_t row) {
  Location l;
  l.row = row;
  return l;
}

Location Location::columns(int64_t begin, int64_t end) {
  Location l;
  l.tokens = IndexRange{begin, end};
  return l;
}

Location Location::segment_of(Side side, int64_t segment) {
  Location l;
  l.side = side;
  l.segment = segment;
  return l;
}

namespace {
IndexRange ordered(int64_t a, int64_t b) {
  IndexRange r{std::min(a, b), std::max(a, b)};
  if (r.end == r.begin) r.end = r.begin + 1;
  return r;
}
}  // namespace

Location Location::packed(Side side, int64_t a, int64_t b) {
  Location l;
  l.side = side;
  l.packed_rows = ordered(a, b);
  return l;
}

Location Location::indices(Side side, int64_t a, int64_t b) {
  Location l;
  l.side = side;
  l.index = ordered(a, b);
  return l;
}

nlohmann::json location_json(const Location& l) {
  nlohmann::json j = nlohmann::json::object();
  auto range = [](const IndexRange& r) { return nlohmann::json::array({r.begin, r.end}); };
  if (l.row) j["row"] = *l.row;
  if (l.tokens) j["tokens"] = range(*l.tokens);
  if (l.segment) j["segment"] = *l.segment;
  if (l.packed_rows) j["packed_rows"] = range(*l.packed_rows);
  if (l.index) j["index"] = range(*l.index);
  if (l.side) j["side"] = to_string(*l.side);
  return j;
}

const char* to_string(Stage s) {
  switch (s) {
    case Stage::conversion: return "conversion";
    case Stage::static_checks: return "static";
    case Stage::plan: return "plan";
    case Stage::execute: return "execute";
    case Stage::unpad: return "unpad";
    case Stage::rotary: return "rotary";
    case Stage::attention: return "attention";
    case Stage::pad: return "pad";
    case Stage::result: return "result";
    case Stage::attention_backward: return "attention_backward";
  }
  return "?";
}

std::optional<Stage> stage_named(std::string_view name) {
  for (Stage s : kStages)
    if (name == to_string(s)) return s;
  return std::nullopt;
}

const char* to_string(StageStatus s) {
  switch (s) {
    case StageStatus::ok: return "ok";
    case StageStatus::violation: return "violation";
    case StageStatus::skipped: return "skipped";
    case StageStatus::error: return "error";
    case StageStatus::unverified: return "unverified";
  }
  return "?";
}

const char* to_string(StageEngine e) {
  switch (e) {
    case StageEngine::unspecified: return "";
    case StageEngine::cuda: return "cuda";
    case StageEngine::cpu_twin: return "cpu-twin";
  }
  return "?";
}

void Report::add(Violation v) {
  auto pos = std::upper_bound(violations.begin(), violations.end(), v,
                              [](const Violation& a, const Violation& b) { return a.order < b.order; });
  violations.insert(pos, std::move(v));
}

bool Report::has_error_severity(bool strict) const {
  return std::any_of(violations.begin(), violations.end(),
                     [&](const Violation& v) { return strict || v.severity == Severity::error; });
}

std::string Report::status() const {
  if (stage_error) return "error";
  return violations.empty() ? "ok" : "violation";
}

int exit_code_for(const Report& report, bool strict) {
  if (report.has_error_severity(strict)) return 1;
  if (report.stage_error) return 3;
  return 0;
}

nlohmann::json summarise_array(const std::vector<int64_t>& values, bool full) {
  if (full || values.size() <= kSummariseAbove) return values;
  const size_t half = kSummariseAbove / 2;
  nlohmann::json head = std::vector<int64_t>(values.begin(), values.begin() + static_cast<long>(half));
  nlohmann::json tail = std::vector<int64_t>(values.end() - static_cast<long>(half), values.end());
  return {{"summarised", true}, {"count", values.size()}, {"head", head}, {"tail", tail}};
}

bool stdout_wants_color() {
  const char* no_color = std::getenv("NO_COLOR");
  if (no_color && *no_color) return false;
  // FORCE_COLOR (set and not "0"): colour off a terminal too, as CI logs that render ANSI ask
  const char* force = std::getenv("FORCE_COLOR");
  if (force && *force && std::string_view(force) != "0") return true;
  return isatty(fileno(stdout)) != 0;
}

int output_width(int fallback) {
  int width = fallback;
  const char* columns = std::getenv("COLUMNS");
  char* end = nullptr;
  const long parsed = columns && *columns ? std::strtol(columns, &end, 10) : 0;
  if (parsed > 0 && end && *end == '\0') {
    width = parsed > 1000 ? 1000 : static_cast<int>(parsed);
  } else if (isatty(fileno(stdout))) {
    winsize ws{};
    if (ioctl(fileno(stdout), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) width = ws.ws_col;
  }
  return std::max(width, 40);
}

std::string wrap_text(const std::string& text, size_t width, const std::string& indent) {
  std::istringstream words(text);
  std::string word, line, out;
  bool first = true;
  while (words >> word) {
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out += (first ? "" : "\n" + indent) + line;
      first = false;
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty()) out += (first ? "" : "\n" + indent) + line;
  return out;
}

nlohmann::json symptom_json(const Symptom& s) {
  nlohmann::json j = {{"outcome", to_string(s.outcome)}, {"pass", to_string(s.pass)}, {"message", s.message}};
  if (!s.rows.empty()) {
    j["rows"] = nlohmann::json::array();
    for (const RowRange& r : s.rows) j["rows"].push_back({r.first, r.last});
  }
  j["basis"] = s.basis;
  return j;
}

nlohmann::json prediction_json(const Prediction& p) {
  nlohmann::json j = symptom_json(p.symptom);
  if (!p.invariant.empty()) j["invariant"] = p.invariant;
  return j;
}

std::string rows_text(const std::vector<RowRange>& rows, size_t max_ranges) {
  std::string out;
  for (size_t i = 0; i < rows.size() && i < max_ranges; ++i) {
    if (i) out += ", ";
    out += std::to_string(rows[i].first);
    if (rows[i].last != rows[i].first) {
      out += '-';
      out += std::to_string(rows[i].last);
    }
  }
  if (rows.size() > max_ranges) out += ", ... (" + std::to_string(rows.size()) + " ranges)";
  return out;
}

std::string prediction_line(const Prediction& p) {
  return to_string(p.symptom.outcome) + " (" + to_string(p.symptom.pass) + "): " + p.symptom.message + "  [" +
         p.symptom.basis + "]";
}

namespace {

nlohmann::json violation_json(const Violation& v) {
  nlohmann::json j = {{"id", v.id},
                      {"stage", v.stage},
                      {"severity", to_string(v.severity)},
                      {"message", v.message},
                      {"evidence", v.evidence},
                      {"explanation", v.explanation},
                      {"fix", v.fix},
                      {"references", v.references}};
  if (v.symptom) j["symptom"] = symptom_json(*v.symptom);
  if (!v.location.empty()) j["location"] = location_json(v.location);
  return j;
}

struct Palette {
  bool on;
  std::string red() const { return on ? "\033[31m" : ""; }
  std::string yellow() const { return on ? "\033[33m" : ""; }
  std::string green() const { return on ? "\033[32m" : ""; }
  std::string bold() const { return on ? "\033[1m" : ""; }
  std::string dim() const { return on ? "\033[2m" : ""; }
  std::string reset() const { return on ? "\033[0m" : ""; }
};

// One evidence value as text: a string as it is, a number or flag as written, a list of
// scalars as "[a, b, c]" (long ones shortened to their first values and the count), an object
// as "key value, key value", a list of objects as one "(key value, ...)" group per element.
std::string evidence_value(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object()) {
    // what the group is about first ("tensors q/out, rows 387, ..."), then the rest in key order
    std::string out;
    const char* subject = nullptr;
    for (const char* key : {"tensors", "tensor", "argument", "buffer", "name"})
      if (!subject && v.contains(key) && v[key].is_string()) subject = key;
    if (subject) out = std::string(subject) + " " + v[subject].get<std::string>();
    for (auto it = v.begin(); it != v.end(); ++it)
      if (!subject || it.key() != subject) out += (out.empty() ? "" : ", ") + it.key() + " " + evidence_value(*it);
    return out.empty() ? "(none)" : out;
  }
  if (v.is_array()) {
    const bool groups = std::any_of(v.begin(), v.end(), [](const nlohmann::json& e) { return e.is_object() || e.is_array(); });
    if (groups) {
      std::string out;
      for (const auto& e : v) out += (out.empty() ? "(" : " (") + evidence_value(e) + ")";
      return out.empty() ? "(none)" : out;
    }
    const size_t shown = v.size() > 12 ? 6 : v.size();
    std::string out = "[";
    for (size_t k = 0; k < shown; ++k) out += (k ? ", " : "") + evidence_value(v[k]);
    if (shown < v.size()) out += ", ... (" + std::to_string(v.size()) + " values)";
    return out + "]";
  }
  return v.dump();
}

// Evidence as "key: value" entries on one line, separated by "; ".
std::string evidence_line(const nlohmann::json& evidence) {
  if (!evidence.is_object()) return evidence_value(evidence);
  std::string out;
  for (auto it = evidence.begin(); it != evidence.end(); ++it)
    out += (out.empty() ? "" : "; ") + it.key() + ": " + evidence_value(*it);
  return out;
}

std::string wrap(const std::string& text, const std::string& indent, size_t width = 96) {
  std::istringstream words(text);
  std::string word, line, out;
  while (words >> word) {
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out += indent + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty()) out += indent + line + "\n";
  return out;
}

std::string short_array(const nlohmann::json& a) {
  // the first 6 values of `head`, the last 3 of `tail`, and the count: "[0,1,2,3,4,5, ... 7,8,9] (N values)"
  auto elided = [](const nlohmann::json& head_values, const nlohmann::json& tail_values, size_t count) {
    nlohmann::json head = nlohmann::json::array(), tail = nlohmann::json::array();
    for (size_t k = 0; k < 6 && k < head_values.size(); ++k) head.push_back(head_values[k]);
    for (size_t k = tail_values.size() >= 3 ? tail_values.size() - 3 : 0; k < tail_values.size(); ++k)
      tail.push_back(tail_values[k]);
    std::string h = head.dump(), t = tail.dump();
    h.pop_back();
    t.erase(0, 1);
    return h + ", ... " + t + " (" + std::to_string(count) + " values)";
  };
  if (a.is_object() && a.value("summarised", false)) return elided(a["head"], a["tail"], a["count"].get<size_t>());
  if (a.is_array() && a.empty()) return "(not computed)";
  if (a.is_array() && a.size() > 16) return elided(a, a, a.size());
  return a.dump();
}

std::string format_ms(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, ms < 10 ? "%.2f ms" : "%.0f ms", ms);
  return buf;
}

}  // namespace

nlohmann::json to_json(const Report& r, const RenderOptions& options) {
  nlohmann::json j;
  j["tool"] = r.tool;
  j["version"] = r.version;
  j["input"] = r.input;
  j["name"] = r.name;
  j["status"] = r.status();
  j["rules"] = r.rules;
  j["backend"] = r.backend;
  if (r.prediction) j["prediction"] = prediction_json(*r.prediction);
  j["first_violation"] = r.violations.empty() ? nlohmann::json(nullptr) : violation_json(r.violations.front());
  j["violations"] = nlohmann::json::array();
  for (const auto& v : r.violations) j["violations"].push_back(violation_json(v));
  j["varlen"] = r.varlen;
  if (r.intent) j["intent"] = {{"source", r.intent->source}, {"trusted", r.intent->trusted}, {"why", r.intent->why}};
  if (!r.replayed.is_null()) j["replayed"] = r.replayed;
  j["stages"] = nlohmann::json::array();
  for (const auto& s : r.stages) {
    nlohmann::json st = {{"name", to_string(s.name)}, {"status", to_string(s.status)}, {"ms", s.ms}};
    if (!s.detail.empty()) st["detail"] = s.detail;
    if (s.data.is_object())
      for (auto it = s.data.begin(); it != s.data.end(); ++it) st[it.key()] = *it;
    if (s.engine != StageEngine::unspecified) st["engine"] = to_string(s.engine);
    j["stages"].push_back(st);
  }
  j["notes"] = r.notes;
  if (r.stage_error) j["error"] = r.error_message;
  (void)options;
  return j;
}

std::string render_text(const Report& r, const RenderOptions& options) {
  Palette c{options.color};
  std::ostringstream out;
  out << c.bold() << "attn-doctor " << r.version << c.reset() << "  " << r.input;
  if (!r.name.empty() && r.name != r.input) out << "  (" << r.name << ")";
  out << "\n";
  std::string rules;
  for (auto it = r.rules.begin(); it != r.rules.end(); ++it)
    rules += (rules.empty() ? "" : ", ") + it.key() + " " + (it->is_string() ? it->get<std::string>() : it->dump());
  out << c.dim() << "rules: " << (rules.empty() ? "none" : rules) << "   backend: " << r.backend << c.reset() << "\n";
  for (const auto& n : r.notes) out << c.dim() << wrap("note: " + n, "  ").substr(2) << c.reset();
  if (r.prediction) {
    // one line, continued with a hanging indent when long
    const std::string line = "prediction: " + prediction_line(*r.prediction);
    const std::string text = line.size() <= 100 ? line + "\n" : wrap(line, "  ").substr(2);
    const size_t label = std::string("prediction:").size();
    out << c.bold() << text.substr(0, label) << c.reset() << text.substr(label);
    if (!r.prediction->symptom.rows.empty()) out << wrap("rows: " + rows_text(r.prediction->symptom.rows), "  ");
  }
  if (r.intent && !r.intent->trusted && r.intent->source != "none")
    out << c.dim() << wrap("reference: untrusted: " + r.intent->why, "  ").substr(2) << c.reset();
  out << "\n";

  auto marker = [&](const Violation& v) {
    return v.severity == Severity::error ? c.red() + "error" + c.reset() : c.yellow() + "warning" + c.reset();
  };
  if (const Violation* first = r.first_violation()) {
    out << c.bold() << "first violation: " << first->id << c.reset() << "  [" << first->stage << ", " << marker(*first)
        << "]\n";
    out << wrap(first->message, "  ");
    if (!first->evidence.empty()) out << c.dim() << wrap("evidence: " + evidence_line(first->evidence), "  ") << c.reset();
    if (!first->explanation.empty()) out << wrap("what the real stack does: " + first->explanation, "  ");
    if (!first->fix.empty()) out << c.green() << wrap("fix: " + first->fix, "  ") << c.reset();
    if (!first->references.empty()) {
      std::string refs;
      for (const auto& ref : first->references) refs += (refs.empty() ? "" : ", ") + ref;
      out << c.dim() << wrap("references: " + refs, "  ") << c.reset();
    }
    if (r.violations.size() > 1) {
      out << "\nalso violated:\n";
      for (size_t k = 1; k < r.violations.size(); ++k) {
        const auto& v = r.violations[k];
        out << "  " << c.bold() << v.id << c.reset() << "  [" << v.stage << ", " << marker(v) << "]\n";
        out << wrap(v.message, "    ");
        if (options.verbose) {
          if (!v.evidence.empty()) out << c.dim() << wrap("evidence: " + evidence_line(v.evidence), "    ") << c.reset();
          if (!v.fix.empty()) out << wrap("fix: " + v.fix, "    ");
        }
      }
    }
  } else if (!r.stage_error) {
    out << c.green() << "every invariant holds" << c.reset() << "\n";
  }

  if (r.varlen.is_object()) {
    const auto& v = r.varlen;
    out << "\nvarlen (path " << v.value("path", std::string("?")) << "):\n";
    for (const char* key : {"cu_seqlens_q", "cu_seqlens_k"}) {
      if (!v.contains(key)) continue;
      out << "  " << key;
      // a cu_seqlens that is not 1-D (a 4-D mask gives (B, 1, Q + 1)): say its shape
      if (v.contains("shapes") && v["shapes"].contains(key) && v["shapes"][key].size() > 1)
        out << " of shape " << v["shapes"][key].dump();
      out << " " << short_array(v[key]) << "\n";
    }
    auto num = [&](const char* key) {
      return !v.contains(key) ? std::string("-") : v[key].is_null() ? std::string("None") : v[key].dump();
    };
    // each argument's type: the 5.4 - 5.13 decode path passes a host-int q beside a 0-d tensor k
    auto tensor_mark = [&](const char* key) { return v.value(key, false) ? " (0-d tensor)" : ""; };
    out << "  max_seqlen_q " << num("max_seqlen_q") << tensor_mark("max_seqlen_q_is_tensor") << "  max_seqlen_k "
        << num("max_seqlen_k") << tensor_mark("max_seqlen_k_is_tensor");
    out << "  total_q " << num("total_q") << "  total_k " << num("total_k") << "\n";
    if (v.contains("error") && v["error"].is_object()) {
      const auto& e = v["error"];
      std::string text = "the release fails here: " + e.value("type", std::string()) + ": " + e.value("message", std::string()) +
                         " (in " + e.value("where", std::string()) + ")";
      std::string gpu = e.value("cuda_symptom", std::string());
      if (!gpu.empty()) text += "; on a GPU: " + gpu;
      out << c.red() << wrap(text, "  ") << c.reset();
    }
  }
  if (!r.stages.empty()) {
    // "NAME STATUS TIME" per stage, two spaces apart, as many to a line as fit in 100 columns;
    // a time counts as 8 characters whatever it reads, so the lines break at the same stages
    // from run to run
    out << "\nstages:";
    size_t column = std::string("stages:").size();
    for (const auto& s : r.stages) {
      std::string colour = s.status == StageStatus::ok ? c.green()
                           : (s.status == StageStatus::violation || s.status == StageStatus::error) ? c.red()
                                                                                                  : c.dim();
      const std::string name = to_string(s.name), status = to_string(s.status), ms = format_ms(s.ms);
      const size_t width = name.size() + 1 + status.size() + 1 + 8;
      if (column + 2 + width > 100) {
        out << "\n       ";
        column = 7;
      }
      out << "  " << name << " " << colour << status << c.reset() << " " << c.dim() << ms << c.reset();
      column += 2 + width;
    }
    out << "\n";
    // details, stages with the same detail (e.g. "not reached: ...") on one line
    for (size_t k = 0; k < r.stages.size(); ++k) {
      const auto& st = r.stages[k];
      if (st.detail.empty()) continue;
      bool seen = false;
      for (size_t j = 0; j < k; ++j) seen = seen || r.stages[j].detail == st.detail;
      if (seen) continue;
      std::string names = to_string(st.name);
      for (size_t j = k + 1; j < r.stages.size(); ++j)
        if (r.stages[j].detail == st.detail) names += std::string(", ") + to_string(r.stages[j].name);
      out << c.dim() << wrap(names + ": " + st.detail, "  ") << c.reset();
    }
  }
  int errors = 0, warnings = 0;
  for (const auto& v : r.violations) (v.severity == Severity::error ? errors : warnings)++;
  out << "\n" << c.bold() << "verdict: ";
  if (r.stage_error && errors == 0) out << c.red() << "ERROR" << c.reset() << c.bold() << " (" << r.error_message << ")";
  else if (errors) out << c.red() << "VIOLATION" << c.reset() << c.bold();
  else if (warnings) out << c.yellow() << "OK WITH WARNINGS" << c.reset() << c.bold();
  else out << c.green() << "OK" << c.reset() << c.bold();
  out << " (" << errors << " error" << (errors == 1 ? "" : "s") << ", " << warnings << " warning"
      << (warnings == 1 ? "" : "s") << ")" << c.reset() << "\n";
  return out.str();
}

}  // namespace ad
