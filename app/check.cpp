// `attn-doctor check FILE|DIR...`: the whole pipeline on each batch file, one report each.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>

#include "batch/batch.hpp"
#include "check/te_thd.hpp"
#include "cli.hpp"
#include "html_file.hpp"
#include "doctor/doctor.hpp"
#include "html/html.hpp"
#include "render/render.hpp"
#include "repro/repro.hpp"
#include "util/log.hpp"
#include "util/xml.hpp"

namespace ad::cli {

namespace {

struct CheckArgs {
  std::vector<std::string> paths;
  std::string format = "text";
  std::string backend = "auto";
  std::string transformers, flash_attn;
  std::string html;
  uint64_t seed = 0;
  int64_t budget = 0;
  int threads = 0;
  bool full = false, strict = false, raw = false;
};

std::optional<Version> version_option(const std::string& text, const char* flag) {
  if (text.empty()) return std::nullopt;
  auto v = parse_version(text);
  if (!v) throw CLI::ValidationError(flag, "expected a version such as 4.44.0, found \"" + text + "\"");
  return v;
}

// GitHub Actions workflow commands (docs.github.com: "Workflow commands for GitHub Actions"):
// a message escapes %, CR and LF; a property value also ':' and ','. Bytes that are not
// UTF-8 (a file name, a quoted file's bytes) are written as U+FFFD: the log is UTF-8.
std::string github_escape(const std::string& raw, bool property) {
  const std::string s = valid_utf8(raw);
  std::string out;
  for (char c : s) {
    if (c == '%') out += "%25";
    else if (c == '\r') out += "%0D";
    else if (c == '\n') out += "%0A";
    else if (property && c == ':') out += "%3A";
    else if (property && c == ',') out += "%2C";
    else out += c;
  }
  return out;
}

// `check -`: the batch on standard input, named <stdin> in messages and reports; relative
// .npy paths are read from the working directory. Bounded as a file is (docs/limits.md).
constexpr const char* kStdinName = "<stdin>";

Batch load_stdin_batch() {
  const LoadLimits limits;
  if (isatty(STDIN_FILENO)) log::info("reading a batch from standard input (end it with Ctrl-D)");
  std::string text;
  char buffer[1 << 16];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, stdin)) {
    text.append(buffer, n);
    if (static_cast<int64_t>(text.size()) > limits.max_json_bytes)
      throw InputError(kStdinName, "", "a batch of at most " + std::to_string(limits.max_json_bytes) + " bytes",
                       "more than " + std::to_string(limits.max_json_bytes) + " bytes");
  }
  if (std::ferror(stdin)) throw InputError(kStdinName, "", "a batch on standard input", std::strerror(errno));
  if (text.empty()) throw InputError(kStdinName, "", "a batch file (JSON) on standard input", "nothing (empty input)");
  return parse_batch_text(text, kStdinName, limits);
}

}  // namespace

// One annotation line: `::error file=F,title=T::message`.
std::string github_annotation(const std::string& level, const std::string& file, const std::string& title,
                              const std::string& message) {
  return "::" + level + " file=" + github_escape(file, true) + ",title=" + github_escape(title, true) +
         "::" + github_escape(message, false) + "\n";
}

namespace {

// The group check (docs/spec/transformer-engine-thd.md "The group check"): the captures that
// name one call are checked against each other; a group of one capture is not a group. Prints
// one group report per call after the files' own reports; returns the worst exit code.
int check_cp_groups(const std::vector<std::pair<std::string, std::shared_ptr<const Batch>>>& captures,
                    const std::string& format, bool strict, bool first_output, bool quiet) {
  std::vector<std::string> calls;  // in the order first seen
  std::map<std::string, std::vector<CpGroupMember>> groups;
  for (const auto& [file, batch] : captures) {
    const std::string& call = batch->context_parallel->call;
    if (!groups.count(call)) calls.push_back(call);
    groups[call].push_back(CpGroupMember{file, batch.get()});
  }
  int worst = 0;
  for (const std::string& call : calls) {
    const auto& members = groups[call];
    if (members.size() < 2) continue;
    CpGroupReport g;
    try {
      g = check_cp_group(members);
    } catch (const InputError& e) {
      std::fprintf(stderr, "attn-doctor: invalid input: %s\n", e.what());
      if (format == "json")
        std::cout << nlohmann::json{{"group", call}, {"input", e.file()}, {"status", "invalid"}, {"error", e.what()}}.dump()
                  << std::endl;
      else if (format == "github")
        std::cout << github_annotation("error", e.file(), "attn-doctor: invalid input", e.what());
      worst = 2;
      continue;
    }
    const bool failed = !g.findings.empty();
    (void)strict;  // every group finding is an error
    worst = std::max(worst, failed ? 1 : 0);
    if (format == "json") {
      nlohmann::json j;
      j["tool"] = "attn-doctor";
      j["kind"] = "context_parallel_group";
      j["call"] = g.call;
      j["size"] = g.size;
      j["status"] = failed ? "violation" : "ok";
      j["ranks"] = nlohmann::json::array();
      for (size_t r = 0; r < g.files.size(); ++r) j["ranks"].push_back({{"rank", r}, {"input", g.files[r]}});
      j["violations"] = nlohmann::json::array();
      for (const CpGroupFinding& f : g.findings) {
        nlohmann::json v = {{"id", f.violation.id},           {"severity", to_string(f.violation.severity)},
                            {"message", f.violation.message}, {"rank", f.rank},
                            {"input", f.file},                {"segment", f.segment ? nlohmann::json(*f.segment) : nlohmann::json(nullptr)},
                            {"evidence", f.violation.evidence}, {"fix", f.violation.fix},
                            {"references", f.violation.references}};
        j["violations"].push_back(v);
      }
      std::cout << j.dump() << std::endl;
    } else if (format == "github") {
      for (const CpGroupFinding& f : g.findings)
        std::cout << github_annotation("error", f.file, "attn-doctor: " + f.violation.id,
                                       f.violation.message + "\nfix: " + f.violation.fix);
    } else if (quiet) {
      std::cout << (failed ? "violation te.cp_group" : "ok") << "  group " << g.call << std::endl;
    } else {
      if (!first_output) std::cout << "\n";
      std::cout << "attn-doctor group check: call " << g.call << ", " << g.size << " ranks\n";
      for (size_t r = 0; r < g.files.size(); ++r) std::cout << "  rank " << r << ": " << g.files[r] << "\n";
      if (!failed) std::cout << "ok: the shards agree with each other and with the global batch\n";
      for (const CpGroupFinding& f : g.findings) {
        std::cout << "error te.cp_group: rank " << f.rank << (f.segment ? ", sequence " + std::to_string(*f.segment) : "")
                  << "\n  " << f.violation.message << "\n  fix: " << f.violation.fix << "\n";
      }
    }
    first_output = false;
  }
  return worst;
}

}  // namespace

Subcommand add_check(CLI::App& root, const Globals& globals) {
  auto args = std::make_shared<CheckArgs>();
  CLI::App* sub = root.add_subcommand("check", "check batch files: replay, static invariants, checked execution");
  sub->add_option("FILE", args->paths,
                  "batch files (attn-doctor/batch@1 JSON) or folders of them (every *.json below): one report each; "
                  "- reads one batch from standard input")
      ->required();
  sub->add_option("--format", args->format,
                  "text, json (one document; JSON lines, one report per line, for several files or a folder), "
                  "github (GitHub Actions annotations)")
      ->check(CLI::IsMember({"text", "json", "github"}))
      ->capture_default_str();
  sub->add_option("--backend", args->backend, "auto (CUDA when a device is present), cpu, cuda, none (static checks only)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda", "none"}))
      ->capture_default_str();
  sub->add_option("--transformers", args->transformers, "replay this transformers release (overrides the file)");
  sub->add_option("--flash-attn", args->flash_attn, "apply this flash-attn release's contract (overrides the file)");
  sub->add_option("--seed", args->seed, "seed of the random inputs of the dynamic stages")->capture_default_str();
  sub->add_option("--budget", args->budget,
                  "multiply-adds the attention and reference stages may spend before sampling rows (0: default)");
  sub->add_option("--threads", args->threads,
                  "host worker threads of the dynamic stages, 1 to 64 (default: one per core, at most 64); the "
                  "memory estimate counts each worker's buffers")
      ->check(CLI::Range(1, 64));
  sub->add_flag("--full", args->full, "print arrays in full and check every row regardless of the budget");
  sub->add_flag("--strict", args->strict, "treat warnings as failures (exit 1)");
  sub->add_flag("--raw", args->raw, "also run the unchecked form of the failing stage in a child process");
  sub->add_option("--html", args->html, "also write a picture of the batch and the report to this HTML file (one FILE)");

  Subcommand s;
  s.app = sub;
  s.run = [args, &globals]() {
    CheckOptions options;
    options.transformers = version_option(args->transformers, "--transformers");
    options.flash_attn = version_option(args->flash_attn, "--flash-attn");
    options.backend = *parse_backend_choice(args->backend);
    options.exec.seed = args->seed;
    if (args->budget > 0) options.exec.budget = args->budget;
    options.exec.threads = args->threads;
    options.exec.full = args->full;
    options.exec.raw = args->raw;
    options.strict = args->strict;

    // folders: every *.json below them; a file as given (a missing one is the loader's error)
    std::vector<std::filesystem::path> files;
    if (std::count(args->paths.begin(), args->paths.end(), "-") > 1)
      throw CLI::ValidationError("FILE", "standard input (-) can be read once: give - at most once");
    for (const auto& p : args->paths) {
      if (p != "-" && std::filesystem::is_directory(p)) {
        auto found = collect_cases({p});
        files.insert(files.end(), found.begin(), found.end());
      } else {
        files.emplace_back(p);
      }
    }
    // one file as given: one report as before (pretty JSON); several (or a folder): JSON lines
    const bool several = files.size() > 1 || std::any_of(args->paths.begin(), args->paths.end(), [](const auto& p) {
                           return p != "-" && std::filesystem::is_directory(p);
                         });
    if (several && !args->html.empty())
      throw CLI::ValidationError("--html", "draws one batch: give one FILE with --html");
    HtmlFile html(args->html);
    RenderOptions render{use_color(globals) && args->format == "text", args->full, globals.verbosity > 0};

    int worst = 0;
    bool first_output = true;
    // the captures of a context-parallel call (context_parallel.call), kept for the group check
    std::vector<std::pair<std::string, std::shared_ptr<const Batch>>> cp_captures;
    for (const auto& path : files) {
      const bool from_stdin = path == "-";
      const std::string file = from_stdin ? kStdinName : path.string();
      Diagnosis diagnosis;
      int code = 0;
      try {
        Batch batch = from_stdin ? load_stdin_batch() : load_batch_file(path);
        log::debug("loaded " + file + " (" + batch.name + ")");
        diagnosis = diagnose(batch, options, file);
        if (html.wanted()) {
          html.write(render_check_html(batch, diagnosis, HtmlOptions{.full = args->full}));
          log::info("wrote " + args->html);
        }
        code = exit_code_for(diagnosis.report, args->strict);
        if (several && batch.context_parallel && !batch.context_parallel->call.empty())
          cp_captures.emplace_back(file, std::make_shared<const Batch>(std::move(batch)));
      } catch (const InputError& e) {
        if (!several) throw;  // main: exit 2 with the message
        // the others are still checked; this one is reported where its report would be
        std::fprintf(stderr, "attn-doctor: invalid input: %s\n", e.what());
        if (args->format == "json")
          std::cout << nlohmann::json{{"input", file}, {"status", "invalid"}, {"error", e.what()}}.dump() << std::endl;
        else if (args->format == "github")
          std::cout << github_annotation("error", file, "attn-doctor: invalid input", e.what());
        worst = std::max(worst, 2);
        continue;
      }
      worst = std::max(worst, code);
      const Report& report = diagnosis.report;
      if (args->format == "json") {
        print_json(to_json(diagnosis, render), several);
      } else if (args->format == "github") {
        for (const Violation& v : report.violations)
          std::cout << github_annotation(v.severity == Severity::error ? "error" : "warning", file,
                                         "attn-doctor: " + v.id, v.message + (v.fix.empty() ? "" : "\nfix: " + v.fix));
        if (report.stage_error) std::cout << github_annotation("error", file, "attn-doctor: stage error", report.error_message);
      } else if (globals.quiet) {
        const Violation* first = report.first_violation();
        std::cout << report.status() << (first ? " " + first->id : std::string()) << (several ? "  " + file : "")
                  << std::endl;
      } else {
        if (!first_output) std::cout << "\n";
        std::cout << render_text(diagnosis, render);
      }
      first_output = false;
    }
    worst = std::max(worst, check_cp_groups(cp_captures, args->format, args->strict, first_output, globals.quiet));
    return worst;
  };
  return s;
}

}  // namespace ad::cli
