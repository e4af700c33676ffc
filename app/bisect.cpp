// `attn-doctor bisect FILE [--axis transformers,flash-attn,fla,triton,torch] [--backend none|cpu]
// [--format text|json]`: the whole diagnosis of one batch under every known release of each
// release axis that decides it, the other environment keys held at the file's values, grouped
// into ranges of consecutive releases with the same verdict (exit code and status), first
// violation and prediction (outcome, pass, moment), with what changes at each boundary. Users
// otherwise bisect by downgrading by hand. Exit code (docs/spec/bisect.md): 0 nothing changes
// across any bisected axis, 1 something does (a boundary), 2 invalid input, 3 some release's
// diagnosis could not run a stage.
#include <algorithm>
#include <exception>
#include <iostream>
#include <memory>
#include <thread>

#include "batch/batch.hpp"
#include "check/flash_attn_rules.hpp"
#include "cli.hpp"
#include "convert/convert.hpp"
#include "doctor/doctor.hpp"
#include "render/render.hpp"
#include "util/parallel.hpp"
#include "util/terminal.hpp"
#include "vocab/releases.hpp"

namespace ad::cli {
namespace {
namespace bisect_cmd {  // its own names: app/ is built as one unity source

enum class Axis { transformers, flash_attn, fla, triton, torch };

std::string axis_name(Axis a) {
  switch (a) {
    case Axis::transformers: return "transformers";
    case Axis::flash_attn: return "flash-attn";
    case Axis::fla: return "fla";
    case Axis::triton: return "triton";
    case Axis::torch: return "torch";
  }
  return "?";
}

// The environment key of the batch format the axis varies.
std::string axis_key(Axis a) {
  switch (a) {
    case Axis::transformers: return "transformers";
    case Axis::flash_attn: return "flash_attn";
    case Axis::fla: return "fla";
    case Axis::triton: return "triton";
    case Axis::torch: return "torch";
  }
  return "?";
}

std::optional<Version>& env_release(Environment& env, Axis a) {
  switch (a) {
    case Axis::transformers: return env.transformers;
    case Axis::flash_attn: return env.flash_attn;
    case Axis::triton: return env.triton;
    case Axis::torch: return env.torch;
    case Axis::fla: break;
  }
  return env.fla;
}

// What one release's diagnosis comes to: the fields a range groups on, and what is shown.
struct Point {
  Version release;
  bool own = false;         // the file's own release
  std::string rule_set;     // the transformers, flash-attn or torch varlen_attn rule set that release maps to
                            // ("" for fla and triton)
  int exit_code = 0;
  std::string status;       // report.status(): ok | violation | error
  std::string first_id;     // "" when every invariant holds
  std::string first_severity, first_message;
  Prediction prediction;
  std::string stage_error;  // the message of a stage that could not run
  std::string refused;      // this release refuses the batch (an input error the file's own release
                            // does not raise, e.g. a 4-D mask only that release builds past the cap)

  // The fields that make a boundary; messages (which quote the release) do not.
  bool same_outcome(const Point& o) const {
    return verdict() == o.verdict() && first_id == o.first_id &&
           prediction.symptom.outcome == o.prediction.symptom.outcome &&
           prediction.symptom.pass == o.prediction.symptom.pass && prediction.symptom.at == o.prediction.symptom.at;
  }
  // error (exit 1), warning (exit 0, warnings only), ok, stage_error (exit 3), invalid (exit 2)
  std::string verdict() const {
    if (!refused.empty()) return "invalid";
    if (!stage_error.empty()) return "stage_error";
    if (exit_code == 1) return "error";
    return status == "violation" ? "warning" : "ok";
  }
  // "device_assert at gather"; the pass where the moment does not say it
  std::string prediction_text() const {
    const Symptom& s = prediction.symptom;
    if (!refused.empty()) return "-";  // nothing ran
    if (s.outcome == Outcome::ok) return "ok";
    std::string text = to_string(s.outcome) + " at " + to_string(s.at);
    if (s.pass == Pass::backward && s.at != Moment::backward) text += " (backward)";
    return text;
  }
};

struct Range {
  size_t first = 0, last = 0;  // indices into the axis's points, inclusive
  bool own = false;
};

struct AxisRun {
  Axis axis;
  std::string why;                  // why this axis is bisected
  std::string source;               // where its release list comes from
  std::optional<Version> file_release;
  std::vector<Point> points;        // oldest first
  std::vector<Range> ranges;
};

// The releases an axis walks, oldest first, with the file's own release put in its place when
// the list lacks it.
std::vector<Version> releases_for(Axis axis, const Batch& batch, std::string& source) {
  std::vector<Version> out;
  if (axis == Axis::transformers) {
    for (const KnownRelease& k : known_transformers_releases())
      if (k.status != KnownStatus::pre_release) out.push_back(version_literal(k.release));
    source = "the transformers releases attn-doctor knows (docs/spec/releases.md)";
  } else if (axis == Axis::flash_attn) {
    // the family of the file's release (none named: FA2, as the contract assumes); a family's
    // releases come from the lists whose releases resolve to that family's rule sets
    const int family = resolve_flash_attn(batch.environment.flash_attn).rules->family;
    const Version oldest = version_literal(flash_attn_rule_sets().front().first);
    for (const PublishedReleases& list : published_release_lists()) {
      if (!list.package.starts_with("flash-attn")) continue;
      bool used = false;
      for (const Version& v : release_versions(list))
        if (!(v < oldest) && resolve_flash_attn(v).rules->family == family) out.push_back(v), used = true;
      if (used) source += std::string(source.empty() ? "" : "; ") + std::string(list.source);
    }
    std::sort(out.begin(), out.end());
  } else {
    const PublishedReleases& list = published_releases(axis == Axis::fla     ? "flash-linear-attention"
                                                       : axis == Axis::torch ? "torch"
                                                                             : "triton");
    out = release_versions(list);
    source = std::string(list.source);
  }
  Environment env = batch.environment;
  if (const std::optional<Version>& own = env_release(env, axis)) {
    if (std::find(out.begin(), out.end(), *own) == out.end()) {
      out.push_back(*own);
      std::sort(out.begin(), out.end());
    }
  }
  return out;
}

// The axes that decide this batch, from the file's own diagnosis: transformers where the
// `batch` block is replayed, flash-attn for a call of a flash-attn API (or flash-attn's
// rotary), FLA where the batch names an FLA release, calls FLA or uses its rotary, Triton for
// a `launch` block (its autotuner's key lookup), torch for a call of torch's varlen_attn
// (environment.torch selects its rule set and host checks).
std::vector<std::pair<Axis, std::string>> deciding_axes(const Batch& batch, const Diagnosis& own) {
  std::vector<std::pair<Axis, std::string>> out;
  if (batch.batch) out.push_back({Axis::transformers, "the batch block is replayed by transformers"});
  const VarlenArgs* call = own.conversion.effective();
  const bool fla_rotary = batch.rotary && batch.rotary->implementation == "fla";
  if (call && flash_attn_family(call->call.api) != 0)
    out.push_back({Axis::flash_attn, "the call goes to " + call->call.function_name() + " (" + to_string(call->call.api) + ")"});
  else if (batch.rotary && batch.rotary->implementation == "flash_attn")
    out.push_back({Axis::flash_attn, "the rotary is flash-attn's"});
  if (batch.environment.fla) out.push_back({Axis::fla, "the environment names an FLA release"});
  else if (fla_rotary) out.push_back({Axis::fla, "the rotary is FLA's"});
  else if (call && (call->call.api == Api::fla_ops || call->call.api == Api::fla_layers))
    out.push_back({Axis::fla, "the call goes to FLA (" + to_string(call->call.api) + ")"});
  if (batch.launch) out.push_back({Axis::triton, "the launch block's autotune keys are looked up by Triton"});
  if (call && call->call.api == Api::torch_varlen_attn)
    out.push_back({Axis::torch, "the call goes to " + call->call.function_name() + " (" + to_string(call->call.api) +
                                    "): the torch release selects its rules"});
  return out;
}

std::optional<Axis> parse_axis(const std::string& s) {
  if (s == "transformers") return Axis::transformers;
  if (s == "flash-attn" || s == "flash_attn") return Axis::flash_attn;
  if (s == "fla") return Axis::fla;
  if (s == "triton") return Axis::triton;
  if (s == "torch") return Axis::torch;
  return std::nullopt;
}

Point point_for(const Diagnosis& d, const Version& release, Axis axis) {
  Point p;
  p.release = release;
  const Report& r = d.report;
  p.exit_code = exit_code_for(r, false);
  p.status = r.status();
  if (r.stage_error) p.stage_error = r.error_message;
  if (const Violation* v = r.first_violation()) {
    p.first_id = v->id;
    p.first_severity = to_string(v->severity);
    p.first_message = v->message;
  }
  if (r.prediction) p.prediction = *r.prediction;
  if (axis == Axis::transformers && d.rule_set) p.rule_set = d.rule_set->name;
  if (axis == Axis::flash_attn) p.rule_set = std::string(resolve_flash_attn(release).rules->name);
  if (axis == Axis::torch) p.rule_set = std::string(resolve_torch_varlen(release).rules->name);
  return p;
}

// Every release of the axis diagnosed, the other keys as the file has them. The releases are
// spread over the cores (util/parallel.hpp); each worker diagnoses its own copy of the batch,
// and the points land at their release's index, so the output order is the releases' order.
void run_axis(AxisRun& run, const Batch& batch, const CheckOptions& base, const std::string& file, int threads) {
  std::vector<Version> releases = releases_for(run.axis, batch, run.source);
  run.points.resize(releases.size());
  std::vector<std::exception_ptr> failures(releases.size());
  const int workers = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(threads, static_cast<int64_t>(releases.size()))));
  std::vector<std::unique_ptr<Batch>> copies(static_cast<size_t>(workers));
  parallel_for(workers, static_cast<int64_t>(releases.size()), 1, [&](int64_t i, int w) {
    try {
      std::unique_ptr<Batch>& mine = copies[static_cast<size_t>(w)];
      if (!mine) mine = std::make_unique<Batch>(batch);  // the shared batch is only read
      env_release(mine->environment, run.axis) = releases[static_cast<size_t>(i)];
      try {
        Diagnosis d = diagnose(*mine, base, file);
        run.points[static_cast<size_t>(i)] = point_for(d, releases[static_cast<size_t>(i)], run.axis);
      } catch (const InputError& e) {
        Point& p = run.points[static_cast<size_t>(i)];
        p.release = releases[static_cast<size_t>(i)];
        p.exit_code = 2;
        p.status = "invalid";
        p.refused = e.what();
      }
    } catch (...) {
      failures[static_cast<size_t>(i)] = std::current_exception();  // rethrown below, in release order
    }
  });
  for (const auto& f : failures)
    if (f) std::rethrow_exception(f);
  for (Point& p : run.points) p.own = run.file_release && p.release == *run.file_release;
  for (size_t i = 0; i < run.points.size(); ++i) {
    if (run.ranges.empty() || !run.points[i].same_outcome(run.points[run.ranges.back().last])) run.ranges.push_back(Range{i, i});
    run.ranges.back().last = i;
    run.ranges.back().own = run.ranges.back().own || run.points[i].own;
  }
}

struct Change {
  std::string field, from, to;
};

std::vector<Change> changes(const Point& a, const Point& b) {
  std::vector<Change> out;
  if (a.verdict() != b.verdict()) out.push_back({"verdict", a.verdict(), b.verdict()});
  if (a.first_id != b.first_id)
    out.push_back({"first_violation", a.first_id.empty() ? "none" : a.first_id, b.first_id.empty() ? "none" : b.first_id});
  if (a.prediction_text() != b.prediction_text()) out.push_back({"prediction", a.prediction_text(), b.prediction_text()});
  return out;
}

std::string range_text(const AxisRun& run, const Range& r) {
  const std::string& a = run.points[r.first].release.text;
  return r.first == r.last ? a : a + " - " + run.points[r.last].release.text;
}

std::string rule_sets_text(const AxisRun& run, const Range& r) {
  std::vector<std::string> names;
  for (size_t i = r.first; i <= r.last; ++i)
    if (!run.points[i].rule_set.empty() && (names.empty() || names.back() != run.points[i].rule_set))
      names.push_back(run.points[i].rule_set);
  if (names.empty()) return "";
  return names.size() == 1 ? names.front() : names.front() + " .. " + names.back();
}

nlohmann::json point_json(const Point& p) {
  nlohmann::json j;
  j["verdict"] = p.verdict();
  j["exit_code"] = p.exit_code;
  j["first_violation"] = p.first_id.empty() ? nlohmann::json(nullptr)
                                            : nlohmann::json{{"id", p.first_id}, {"severity", p.first_severity},
                                                             {"message", p.first_message}};
  nlohmann::json pred = prediction_json(p.prediction);
  pred["at"] = to_string(p.prediction.symptom.at);
  j["prediction"] = p.refused.empty() ? pred : nlohmann::json(nullptr);
  if (!p.stage_error.empty()) j["error"] = p.stage_error;
  if (!p.refused.empty()) j["error"] = p.refused;
  return j;
}

nlohmann::json axis_json(const AxisRun& run) {
  nlohmann::json a;
  a["axis"] = axis_name(run.axis);
  a["key"] = axis_key(run.axis);
  a["why"] = run.why;
  a["source"] = run.source;
  a["file_release"] = run.file_release ? nlohmann::json(run.file_release->text) : nlohmann::json(nullptr);
  a["releases"] = run.points.size();
  a["ranges"] = nlohmann::json::array();
  for (const Range& r : run.ranges) {
    nlohmann::json j = point_json(run.points[r.first]);
    j["first"] = run.points[r.first].release.text;
    j["last"] = run.points[r.last].release.text;
    j["releases"] = r.last - r.first + 1;
    j["own"] = r.own;
    nlohmann::json sets = nlohmann::json::array();
    for (size_t i = r.first; i <= r.last; ++i)
      if (!run.points[i].rule_set.empty() && (sets.empty() || sets.back() != run.points[i].rule_set))
        sets.push_back(run.points[i].rule_set);
    j["rule_sets"] = sets;
    a["ranges"].push_back(j);
  }
  a["boundaries"] = nlohmann::json::array();
  for (size_t k = 0; k + 1 < run.ranges.size(); ++k) {
    const Point& from = run.points[run.ranges[k].last];
    const Point& to = run.points[run.ranges[k + 1].first];
    nlohmann::json b;
    b["from"] = from.release.text;
    b["to"] = to.release.text;
    b["changes"] = nlohmann::json::array();
    for (const Change& c : changes(from, to)) b["changes"].push_back({{"field", c.field}, {"from", c.from}, {"to", c.to}});
    a["boundaries"].push_back(b);
  }
  return a;
}

std::string truncated(const std::string& text, size_t width) {
  if (text.size() <= width) return text;
  if (width <= 3) return text.substr(0, width);
  return text.substr(0, width - 3) + "...";
}

void print_axis(const AxisRun& run, size_t width) {
  const std::string own = run.file_release ? run.file_release->text : "";
  std::cout << axis_name(run.axis) << ": " << run.points.size() << " release" << (run.points.size() == 1 ? "" : "s") << ", "
            << run.ranges.size() << " range" << (run.ranges.size() == 1 ? "" : "s") << "; "
            << (own.empty() ? "the file names none" : "the file's is " + own + " (>)") << "\n";
  std::cout << "  " << wrap_text(run.why, width > 4 ? width - 2 : width, "  ") << "\n";
  // one line per range: marker, releases, count, verdict, first violation, prediction, rule
  // sets; the rule sets go first when the lines would not fit
  std::vector<std::vector<std::string>> cells = {{"  releases", "n", "verdict", "first violation", "predicted", "rule sets"}};
  for (const Range& r : run.ranges) {
    const Point& p = run.points[r.first];
    cells.push_back({(r.own ? "> " : "  ") + range_text(run, r), std::to_string(r.last - r.first + 1), p.verdict(),
                     p.first_id.empty() ? "-" : (p.first_severity == "warning" ? "(warning) " : "") + p.first_id,
                     p.prediction_text(), rule_sets_text(run, r)});
  }
  auto lines_of = [&](size_t columns) {
    std::vector<size_t> widths(columns, 0);
    for (const auto& row : cells)
      for (size_t c = 0; c < columns; ++c) widths[c] = std::max(widths[c], row[c].size());
    std::vector<std::string> lines;
    for (const auto& row : cells) {
      std::string line = "  ";
      for (size_t c = 0; c < columns; ++c) line += c + 1 < columns ? row[c] + std::string(widths[c] - row[c].size() + 2, ' ') : row[c];
      while (!line.empty() && line.back() == ' ') line.pop_back();
      lines.push_back(line);
    }
    return lines;
  };
  const bool rule_sets = std::any_of(run.points.begin(), run.points.end(), [](const Point& p) { return !p.rule_set.empty(); });
  std::vector<std::string> lines = lines_of(cells.front().size() - (rule_sets ? 0 : 1));
  const auto too_wide = [&](const std::vector<std::string>& ls) {
    return std::any_of(ls.begin(), ls.end(), [&](const std::string& l) { return l.size() > width; });
  };
  if (rule_sets && too_wide(lines)) lines = lines_of(cells.front().size() - 1);
  for (const std::string& line : lines) std::cout << truncated(line, width) << "\n";
  for (const Range& r : run.ranges)
    if (const Point& p = run.points[r.first]; !p.refused.empty()) {
      const std::string head = "  " + range_text(run, r) + " refuse" + (r.first == r.last ? "s" : "") + " the batch: ";
      std::cout << head << wrap_text(p.refused, width > head.size() + 16 ? width - head.size() : 16, std::string(head.size(), ' '))
                << "\n";
    }
  if (run.ranges.size() == 1) {
    std::cout << "  no change across these releases\n";
    return;
  }
  for (size_t k = 0; k + 1 < run.ranges.size(); ++k) {
    const Point& from = run.points[run.ranges[k].last];
    const Point& to = run.points[run.ranges[k + 1].first];
    std::string text;
    for (const Change& c : changes(from, to))
      text += (text.empty() ? "" : "; ") + (c.field == "first_violation" ? std::string("first violation") : c.field) + " " +
              c.from + " -> " + c.to;
    const std::string head = "  " + from.release.text + " -> " + to.release.text + ": ";
    const size_t room = width > head.size() + 16 ? width - head.size() : 16;
    std::cout << head << wrap_text(text, room, std::string(head.size(), ' ')) << "\n";
  }
}

}  // namespace bisect_cmd
}  // namespace

Subcommand add_bisect(CLI::App& root, const Globals&) {
  struct Args {
    std::string file, format = "text", backend = "none";
    std::vector<std::string> axes;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = root.add_subcommand(
      "bisect", "diagnose one batch under every known release: the ranges across which the diagnosis changes");
  sub->add_option("FILE", args->file, "batch file")->required();
  sub->add_option("--axis", args->axes,
                  "release axes to walk, comma-separated: transformers, flash-attn, fla, triton, torch (default: those that decide this "
                  "batch); the other releases stay the file's")
      ->delimiter(',')
      ->check(CLI::IsMember({"transformers", "flash-attn", "flash_attn", "fla", "triton", "torch"}));
  sub->add_option("--backend", args->backend, "none (static checks and prediction), cpu (also the checked CPU run of each release)")
      ->check(CLI::IsMember({"none", "cpu"}))
      ->capture_default_str();
  add_format_option(sub, args->format);
  Subcommand s;
  s.app = sub;
  s.run = [args]() {
    using namespace bisect_cmd;
    Batch batch = load_batch_file(args->file);
    CheckOptions options;
    options.backend = *parse_backend_choice(args->backend);
    const int threads = static_cast<int>(std::max(1u, std::min(64u, std::thread::hardware_concurrency())));
    if (threads > 1) options.exec.threads = 1;  // the releases are the parallel loop
    const Diagnosis own = diagnose(batch, CheckOptions{.backend = BackendChoice::none}, args->file);

    std::vector<std::pair<Axis, std::string>> axes;
    if (args->axes.empty()) {
      axes = deciding_axes(batch, own);
    } else {
      const auto decide = deciding_axes(batch, own);
      for (const std::string& name : args->axes) {
        const Axis a = *parse_axis(name);
        if (std::any_of(axes.begin(), axes.end(), [&](const auto& x) { return x.first == a; })) continue;
        auto it = std::find_if(decide.begin(), decide.end(), [&](const auto& x) { return x.first == a; });
        axes.push_back({a, it != decide.end() ? it->second : "asked for with --axis"});
      }
    }
    std::vector<AxisRun> runs;
    for (const auto& [axis, why] : axes) {
      AxisRun run{axis, why};
      Environment env = batch.environment;
      run.file_release = env_release(env, axis);
      run_axis(run, batch, options, args->file, threads);
      runs.push_back(std::move(run));
    }
    bool changed = false, stage_error = false;
    for (const AxisRun& r : runs) {
      changed = changed || r.ranges.size() > 1;
      for (const Point& p : r.points) stage_error = stage_error || !p.stage_error.empty();
    }
    if (args->format == "json") {
      nlohmann::json out;
      out["tool"] = "attn-doctor";
      out["command"] = "bisect";
      out["input"] = args->file;
      out["name"] = batch.name;
      out["backend"] = args->backend;
      out["changed"] = changed;
      out["axes"] = nlohmann::json::array();
      for (const AxisRun& r : runs) out["axes"].push_back(axis_json(r));
      print_json(out);
    } else {
      const size_t width = static_cast<size_t>(std::max(output_width(), 40));
      std::string shown = args->file;
      if (shown.size() + 7 > width) shown = "..." + shown.substr(shown.size() - (width - 10));
      std::cout << "bisect " << shown << "\n";
      if (runs.empty())
        std::cout << "no release axis decides this batch (no `batch` block, no flash-attn, FLA or torch varlen_attn call, no `launch` "
                     "block): nothing to "
                     "bisect; --axis names one\n";
      for (size_t k = 0; k < runs.size(); ++k) {
        std::cout << "\n";
        print_axis(runs[k], width);
      }
    }
    if (stage_error) return 3;
    return changed ? 1 : 0;
  };
  return s;
}

}  // namespace ad::cli
