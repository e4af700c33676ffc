// The stage driver: runs an ExecPlan through an engine (engine.hpp) the way the real program
// runs the call — unpad (k, v, then q: _upad_input's order), rotary, attention, pad, and the
// result check — and turns what the engine observed into stage records and dynamic
// violations (observe.hpp). Every message of a dynamic stage is written here or in observe,
// once for all engines. Internal to lib/exec.
#pragma once

#include <optional>

#include "exec/engine.hpp"
#include "exec/exec.hpp"
#include "exec/plan/plan.hpp"

namespace ad {

struct DriveOptions {
  // The --raw child: the run ends after this stage (its kernel ran unchecked).
  std::optional<Stage> stop_after;
};

ExecResult drive(const ExecPlan& plan, Engine& engine, const DriveOptions& options = {});

// The seeded inputs of a plan (plan/numeric.hpp), filled on `threads` workers.
Inputs seeded_inputs(const ExecPlan& plan, int threads);

}  // namespace ad
