// `attn-doctor check FILE`: the whole pipeline on one batch file.
#include <cstdio>
#include <iostream>
#include <memory>

#include "batch/batch.hpp"
#include "cli.hpp"
#include "html_file.hpp"
#include "doctor/doctor.hpp"
#include "html/html.hpp"
#include "report/report.hpp"
#include "util/log.hpp"

namespace ad::cli {

namespace {

struct CheckArgs {
  std::string file;
  std::string format = "text";
  std::string backend = "auto";
  std::string transformers, flash_attn;
  std::string html;
  uint64_t seed = 0;
  int64_t budget = 0;
  bool full = false, strict = false, raw = false;
};

std::optional<Version> version_option(const std::string& text, const char* flag) {
  if (text.empty()) return std::nullopt;
  auto v = parse_version(text);
  if (!v) throw CLI::ValidationError(flag, "expected a version such as 4.44.0, found \"" + text + "\"");
  return v;
}

}  // namespace

Subcommand add_check(CLI::App& root, const Globals& globals) {
  auto args = std::make_shared<CheckArgs>();
  CLI::App* sub = root.add_subcommand("check", "check one batch file: replay, static invariants, checked execution");
  sub->add_option("FILE", args->file, "batch file (attn-doctor/batch@1 JSON)")->required();
  add_format_option(sub, args->format);
  sub->add_option("--backend", args->backend, "auto (CUDA when a device is present), cpu, cuda, none (static checks only)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda", "none"}))
      ->capture_default_str();
  sub->add_option("--transformers", args->transformers, "replay this transformers release (overrides the file)");
  sub->add_option("--flash-attn", args->flash_attn, "apply this flash-attn release's contract (overrides the file)");
  sub->add_option("--seed", args->seed, "seed of the random inputs of the dynamic stages")->capture_default_str();
  sub->add_option("--budget", args->budget,
                  "multiply-adds the attention and reference stages may spend before sampling rows (0: default)");
  sub->add_flag("--full", args->full, "print arrays in full and check every row regardless of the budget");
  sub->add_flag("--strict", args->strict, "treat warnings as failures (exit 1)");
  sub->add_flag("--raw", args->raw, "also run the unchecked form of the failing stage in a child process");
  sub->add_option("--html", args->html, "also write a picture of the batch and the report to this HTML file");

  Subcommand s;
  s.app = sub;
  s.run = [args, &globals]() {
    CheckOptions options;
    options.transformers = version_option(args->transformers, "--transformers");
    options.flash_attn = version_option(args->flash_attn, "--flash-attn");
    options.backend = *parse_backend_choice(args->backend);
    options.exec.seed = args->seed;
    if (args->budget > 0) options.exec.budget = args->budget;
    options.exec.full = args->full;
    options.exec.raw = args->raw;
    options.strict = args->strict;

    HtmlFile html(args->html);
    Batch batch = load_batch_file(args->file);
    log::debug("loaded " + args->file + " (" + batch.name + ")");
    Report report = diagnose(batch, options, args->file);
    if (html.wanted()) {
      Conversion conversion = convert(batch, ConvertOptions{options.transformers, options.flash_attn});
      html.write(render_check_html(batch, conversion, report, HtmlOptions{.full = args->full}));
      log::info("wrote " + args->html);
    }
    RenderOptions render{stdout_wants_color() && args->format == "text", args->full, globals.verbosity > 0};
    if (args->format == "json") {
      std::cout << to_json(report, render).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
    } else if (globals.quiet) {
      const Violation* first = report.first_violation();
      std::cout << report.status() << (first ? " " + first->id : std::string()) << std::endl;
    } else {
      std::cout << render_text(report, render);
    }
    return exit_code_for(report, args->strict);
  };
  return s;
}

}  // namespace ad::cli
