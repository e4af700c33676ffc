// diagnose(): convert -> static checks -> execute -> report, with per-stage timing.
#include "doctor/doctor.hpp"

#include <algorithm>
#include <chrono>

#include "check/te_thd.hpp"
#include "check/check.hpp"
#include "exec/plan/plan.hpp"
#include "util/log.hpp"

namespace ad {

// CMake's project version (CMakeLists.txt), the one place it is written.
const char* const kToolVersion = ATTN_DOCTOR_VERSION;

std::optional<BackendChoice> parse_backend_choice(std::string_view s) {
  if (s == "auto") return BackendChoice::automatic;
  if (s == "cpu") return BackendChoice::cpu;
  if (s == "cuda") return BackendChoice::cuda;
  if (s == "none") return BackendChoice::none;
  return std::nullopt;
}

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// CheckOptions::index_values_unread: what can be judged without the index tensors' values.
bool needs_no_index_values(const Violation& v) {
  const Invariant* inv = find_invariant(v.id);
  return inv && inv->group == InvariantGroup::input && v.id != "input.int32_range";
}

}  // namespace

namespace {

// A stage that throws ends the run with status "error" naming the stage and the reason; what
// the earlier stages found stays in the report (results are never lost).
template <class Fn>
bool guarded_stage(Report& r, Stage stage, Clock::time_point t0, Fn&& fn) {
  std::string why;
  try {
    fn();
    return true;
  } catch (const InputError&) {
    throw;  // a batch past the documented limits is bad input (exit 2), not a failed stage
  } catch (const std::bad_alloc&) {
    why = "out of memory";
  } catch (const std::exception& e) {
    why = e.what();
  }
  r.stage_error = true;
  r.error_message = std::string("stage ") + to_string(stage) + " failed: " + why;
  r.stages.push_back(StageRecord{stage, StageStatus::error, ms_since(t0), r.error_message});
  return false;
}

}  // namespace

namespace {

// Fills `d` stage by stage; a stage that fails ends the run with what came before it kept.
void run_pipeline(Diagnosis& d, const Batch& batch, const CheckOptions& options, const std::string& input_label) {
  Report& r = d.report;
  r.version = kToolVersion;
  r.input = input_label;
  r.name = batch.name;
  if (batch.collator) {
    r.collator = batch.collator;
    for (const std::string& n : batch.collator->notes) r.notes.push_back("collator: " + n);
  }
  d.flash_attn = options.flash_attn ? options.flash_attn : kernel_release(batch);
  if (batch.varlen && batch.varlen->api == Api::te_dot_product_attention) {
    const ExplicitVarlen& v = *batch.varlen;
    TeThdFacts f;
    f.release = batch.environment.transformer_engine;
    f.cu_seqlens_q_padded = v.cu_seqlens_q_padded;
    f.cu_seqlens_kv_padded = v.cu_seqlens_kv_padded;
    f.pad_between_seqs_given = v.pad_between_seqs.has_value();
    // TE's inference when None: the padded offsets differ from the actual ones before the last
    auto differs = [](const std::optional<std::vector<int64_t>>& padded, const std::vector<int64_t>& actual) {
      return padded && padded->size() == actual.size() && !std::equal(actual.begin(), actual.end() - (actual.empty() ? 0 : 1), padded->begin());
    };
    f.pad_between_seqs = v.pad_between_seqs ? *v.pad_between_seqs
                                            : differs(v.cu_seqlens_q_padded, v.cu_seqlens_q.values) ||
                                                  differs(v.cu_seqlens_kv_padded, v.cu_seqlens_k.values);
    f.attn_mask_type = v.attn_mask_type;
    f.context_parallel = batch.context_parallel;
    f.rows = v.total_q;
    d.te_thd = std::move(f);
  }

  // 1. conversion
  auto t0 = Clock::now();
  Conversion& conversion = d.conversion;
  auto convert_batch = [&] {
    if (!options.rule_set) {
      conversion = convert(batch, ConvertOptions{options.transformers, options.flash_attn});
      return;
    }
    if (!options.flash_attn) {
      conversion.replayed = replay_with(batch, *options.rule_set, options.transformers);
      return;
    }
    Batch effective = batch;  // the --flash-attn release replaces the batch's, as convert() does
    effective.environment.flash_attn = options.flash_attn;
    conversion.replayed = replay_with(effective, *options.rule_set, options.transformers);
  };
  auto convert_all = [&] {
    convert_batch();
    if (options.rule_set) conversion.layers = replay_layers(batch, conversion, options.transformers);
    if (batch.batch) d.layers_width = batch.batch->query_length;
  };
  if (!guarded_stage(r, Stage::conversion, t0, convert_all)) return;
  StageRecord conv_stage{Stage::conversion, StageStatus::ok, ms_since(t0), ""};
  if (conversion.replayed) {
    const VarlenArgs& rep = *conversion.replayed;
    d.rule_set = find_rule_set(rep.rule_set);
    if (!options.rule_set) d.transformers = options.transformers ? options.transformers : batch.environment.transformers;
    d.rules.transformers = rep.requested.empty() ? rep.rule_set : rep.requested;
    d.rules.rule_set = rep.rule_set;
    if (!rep.nearest_release.empty()) d.rules.transformers_nearest = rep.nearest_release;
    if (!rep.note.empty()) r.notes.push_back(rep.note);
    if (rep.failure) {
      conv_stage.status = StageStatus::violation;
      conv_stage.detail = rep.failure->where + ": " + rep.failure->type + ": " + rep.failure->message;
    }
  }
  d.rules.flash_attn = d.flash_attn;
  d.rules.triton = batch.environment.triton;
  r.stages.push_back(conv_stage);

  // 2. static checks
  t0 = Clock::now();
  std::vector<Violation> found;
  if (!guarded_stage(r, Stage::static_checks, t0, [&] {
        found = run_static_checks(batch, conversion, CheckContext{options.strict, options.flash_attn, options.transformers});
      }))
    return;
  if (options.index_values_unread) std::erase_if(found, [](const Violation& v) { return !needs_no_index_values(v); });
  // a note is a finding on a benign layout: said in the notes, no violation (invariants.md#severity)
  for (const Violation& v : found)
    if (v.severity == Severity::note) r.notes.push_back(v.id + ": " + v.message);
  std::erase_if(found, [](const Violation& v) { return v.severity == Severity::note; });
  StageRecord static_stage{Stage::static_checks, found.empty() ? StageStatus::ok : StageStatus::violation, ms_since(t0), ""};
  static_stage.facts.checked = static_cast<int64_t>(catalogue().size());
  for (auto& v : found) r.add(std::move(v));
  r.intent = assess_intent(batch, r.violations);
  r.stages.push_back(static_stage);
  if (options.index_values_unread) {
    r.notes.push_back("guard without device reads: the index tensors were not read; only the input invariants were checked");
    r.backend = "none";
    return;
  }

  // 3. dynamic stages: run after static violations too, so the report shows the symptom
  // next to its cause. auto = CUDA when a CUDA backend can run, else CPU; cuda without one
  // is a capability error (exit 3); none = static checks only.
  if (options.backend == BackendChoice::none) {
    r.backend = "none";
    return;
  }
  if (const std::string why = te_static_only_reason(batch); !why.empty()) {
    r.backend = "none";
    r.notes.push_back(why);
    return;
  }
  std::unique_ptr<Backend> backend;
  if (options.backend == BackendChoice::automatic || options.backend == BackendChoice::cuda) {
    std::string why;
    backend = make_cuda_backend(&why);
    if (!backend && options.backend == BackendChoice::cuda) throw CapabilityError("--backend cuda: " + why);
  }
  if (!backend) backend = make_cpu_backend();
  r.backend = backend->name();
  ExecOptions exec = options.exec;
  if (options.flash_attn) exec.flash_attn = options.flash_attn;
  t0 = Clock::now();
  if (!guarded_stage(r, Stage::plan, t0, [&] { d.plan.emplace(make_exec_plan(batch, conversion, exec)); })) return;
  const ExecPlan& plan = *d.plan;
  const double plan_ms = ms_since(t0);
  for (const std::string& n : plan.notes) r.notes.push_back(n);
  log::debug("plan: the dynamic stages need about " + std::to_string(plan.memory.bytes) + " bytes of host memory (budget " +
             std::to_string(exec.memory_budget_bytes) + ")");
  guarded_stage(r, Stage::execute, t0, [&] {
    ExecResult res;
    try {
      res = backend->run(plan, exec);
    } catch (const std::bad_alloc&) {
      // The plan's estimate let the stages run, but the host could not give them the memory (a
      // smaller machine, a ulimit, other processes): the batch is still legal and its static
      // verdict stands, as for a batch over the budget.
      res = ExecResult{};
      res.backend = backend->name();
      const std::string why = "the dynamic stages ran out of host memory (estimated " +
                              std::to_string(plan.memory.bytes >> 20) + " MiB); the batch was checked statically only";
      res.stages = skipped_stages(why, plan.backward.enabled);
      res.notes.push_back(why);
    }
    r.backend = res.backend;
    bool first = true;
    for (StageRecord& st : res.stages) {
      if (first) st.ms += plan_ms;  // building the plan is part of the first dynamic stage
      first = false;
      r.stages.push_back(std::move(st));
    }
    for (Violation& v : res.violations) r.add(std::move(v));
    for (std::string& n : res.notes) r.notes.push_back(std::move(n));
  });
}

// The result stage against an untrusted reference (intent.trusted false) never says ok: the
// rows agree with sequences that carry the breakage, which proves nothing.
void qualify_result_stage(Report& r) {
  if (!r.intent || r.intent->trusted) return;
  for (StageRecord& st : r.stages) {
    if (st.status == StageStatus::skipped || st.status == StageStatus::error) continue;
    if (st.name != Stage::result && !(st.name == Stage::attention_backward && st.facts.gradients)) continue;
    st.facts.reference_trusted = false;
    if (st.status == StageStatus::ok) st.status = StageStatus::unverified;
    st.detail += std::string(st.detail.empty() ? "" : "; ") + "the reference is untrusted: " + r.intent->why;
  }
}

}  // namespace

Diagnosis diagnose(const Batch& batch, const CheckOptions& options, const std::string& input_label) {
  Diagnosis d;
  run_pipeline(d, batch, options, input_label);
  Report& r = d.report;
  qualify_result_stage(r);
  // the prediction: from every violation found, whatever stage ended the run (a comparison
  // with an untrusted reference cannot decide it)
  // the advisory table: known bugs of the named kernel releases this very call runs into
  r.advisories = match_advisories(batch, d.conversion, options.flash_attn);
  r.prediction =
      predict_call(r.violations, batch, options.flash_attn, !r.intent || r.intent->trusted, &r.advisories,
                   options.transformers);
  return d;
}

}  // namespace ad
