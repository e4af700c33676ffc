// Stage, status and engine names (vocab/stage.hpp).
#include "vocab/stage.hpp"

namespace ad {

namespace {
constexpr Stage kStages[] = {Stage::conversion, Stage::static_checks, Stage::plan, Stage::execute, Stage::unpad,
                             Stage::rotary,     Stage::attention,     Stage::pad,  Stage::result, Stage::attention_backward};
}  // namespace

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

void EngineFacts::merge(const EngineFacts& later) {
  auto take = [](auto& mine, const auto& theirs) {
    if (theirs) mine = theirs;
  };
  take(kernel, later.kernel);
  take(ms_kernel, later.ms_kernel);
  take(why_cpu, later.why_cpu);
  take(tiles, later.tiles);
  take(empty_tiles, later.empty_tiles);
  take(row_heads_without_keys, later.row_heads_without_keys);
  take(macs, later.macs);
  take(backward_macs, later.backward_macs);
  take(sampled, later.sampled);
}

}  // namespace ad
