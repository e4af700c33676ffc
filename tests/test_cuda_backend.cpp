// The CUDA backend against its oracle, the CPU backend, on the shared generated sweep
// (tests/sweep.hpp): every valid batch and every broken-metadata class, run through both
// backends from the same ExecPlan and seed. Agreement means: the same set of dynamic
// violation ids, the same first violation, the same stage statuses, and on valid batches
// both outputs within the dtype's tolerance of the fp64 reference. Tagged [cuda]; without a
// device it prints "SKIPPED: <reason>" (reported skipped by ctest).
#include <catch2/catch.hpp>

#include <cmath>

#ifndef ATTN_DOCTOR_WITH_CUDA

TEST_CASE("cuda sweep: CUDA and CPU backends agree (not built)", "[cuda][cuda-sweep]") {
  WARN("SKIPPED: this attn-doctor was built without CUDA (ATTN_DOCTOR_CUDA=OFF or no nvcc)");
}

#else

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <tuple>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "exec/cuda/device.hpp"
#include "convert/convert.hpp"
#include "cuda_test_util.hpp"
#include "exec/plan/plan.hpp"
#include "sweep.hpp"

using namespace ad;

namespace {

struct RunSummary {
  std::vector<std::string> ids;  // in report order
  std::map<std::string, std::string> stage_status;
  double worst_error = -1;
  std::string describe;
};

RunSummary summarise(const ExecResult& r) {
  RunSummary o;
  std::vector<Violation> v = r.violations;
  std::stable_sort(v.begin(), v.end(), [](const Violation& a, const Violation& b) { return a.order < b.order; });
  for (const auto& x : v) o.ids.push_back(x.id);
  for (const auto& s : r.stages) {
    o.stage_status[to_string(s.name)] = to_string(s.status);
    if (s.name == Stage::result && s.facts.worst_error && std::isfinite(*s.facts.worst_error))
      o.worst_error = *s.facts.worst_error;
    o.describe += std::string("  ") + to_string(s.name) + ": " + to_string(s.status) + " " + s.detail.substr(0, 160) + "\n";
  }
  for (const auto& x : v) o.describe += "  " + x.id + ": " + x.message.substr(0, 200) + "\n";
  return o;
}

struct Backends {
  std::unique_ptr<Backend> cpu, gpu;
};
// Both backends; false (after the visible skip) where no device can run the CUDA one.
bool make_backends(Backends& b) {
  if (!cuda_test::have_device()) return false;
  std::string why;
  b.gpu = make_cuda_backend(&why);
  INFO(why);
  REQUIRE(b.gpu);
  b.cpu = make_cpu_backend();
  return true;
}

struct SweepTally {
  int agree = 0, valid = 0, broken = 0, with_violations = 0, disagree = 0;
  int backward_on_gpu = 0;                 // cases whose attention_backward ran on the CUDA engine
  std::map<std::string, int> agree_per_class;
  std::string mismatches;                  // what differed, per case
};
// Every case through both backends from the same ExecPlan and seed (as training steps when
// `training`). A case agrees when both report the same violation ids in the same order and
// the same stage statuses and, for a valid case, the CUDA backend reports no violation and
// its result is within the reference's tolerance (training: and its backward stage is ok,
// unless the plan skips it).
SweepTally compare_backends(const Backends& be, const std::vector<sweep::Case>& cases, bool training) {
  SweepTally t;
  std::ostringstream mismatches;
  for (sweep::Case c : cases) {
    if (training) c.batch["pass"] = "training";
    const Batch b = sweep::load(c);
    ExecOptions opt;
    opt.seed = c.seed;
    opt.threads = 8;
    const ExecPlan plan = make_exec_plan(b, sweep::conversion_for(c, b), opt);
    const RunSummary oc = summarise(be.cpu->run(plan, opt));
    const ExecResult rg = be.gpu->run(plan, opt);
    const RunSummary og = summarise(rg);
    for (const auto& st : rg.stages)
      if (st.name == Stage::attention_backward && st.engine == StageEngine::cuda) ++t.backward_on_gpu;
    const bool same_ids = oc.ids == og.ids;
    const bool same_stages = oc.stage_status == og.stage_status;
    bool within = true;
    if (c.klass == "valid") {
      ++t.valid;
      within = og.ids.empty() && og.worst_error >= 0 && og.worst_error <= plan.reference.tolerance;
      if (training) {
        const auto it = og.stage_status.find("attention_backward");
        within = within && (!plan.backward.skip_reason.empty() || (it != og.stage_status.end() && it->second == "ok"));
      }
    } else {
      ++t.broken;
    }
    t.with_violations += !og.ids.empty();
    if (same_ids && same_stages && within) {
      ++t.agree;
      ++t.agree_per_class[c.klass];
    } else {
      ++t.disagree;
      mismatches << c.klass << " / " << c.name << ": cpu [";
      for (auto& i : oc.ids) mismatches << i << " ";
      mismatches << "] cuda [";
      for (auto& i : og.ids) mismatches << i << " ";
      mismatches << "] worst error cpu " << oc.worst_error << " cuda " << og.worst_error << "\n"
                 << " cpu:\n" << oc.describe << " cuda:\n" << og.describe;
    }
  }
  t.mismatches = mismatches.str();
  return t;
}

}  // namespace

TEST_CASE("cuda sweep: CUDA and CPU backends report the same violations on >= 200 batches", "[cuda][cuda-sweep]") {
  Backends be;
  if (!make_backends(be)) return;
  std::vector<sweep::Case> cases = sweep::valid_cases(20240605, 220);
  for (auto& c : sweep::broken_cases(77, 4)) cases.push_back(c);
  const SweepTally t = compare_backends(be, cases, false);
  std::printf("cuda sweep: %d batches (%d valid, %d broken, %d with dynamic violations): %d agree, %d differ\n",
              int(cases.size()), t.valid, t.broken, t.with_violations, t.agree, t.disagree);
  for (const auto& [k, n] : t.agree_per_class) std::printf("  %-20s %d agree\n", k.c_str(), n);
  INFO(t.mismatches);
  CHECK(cases.size() >= 200);
  CHECK(t.disagree == 0);
}

// The same sweep as training steps ("pass": "training"): the forward stages and then
// attention_backward, whose CUDA kernels (kernels/varlen_attention_bwd*) and CPU twin
// (lib/exec/cpu/cpu_backward.cpp) run one contract. Agreement: the same violation ids in the same
// order and the same stage statuses; on valid batches the backward stage is ok on both and
// the result within tolerance.
TEST_CASE("cuda sweep: CUDA and CPU backends agree on the training sweep", "[cuda][cuda-sweep]") {
  Backends be;
  if (!make_backends(be)) return;
  std::vector<sweep::Case> cases = sweep::valid_cases(20251125, 120);
  for (auto& c : sweep::broken_cases(78, 3)) cases.push_back(c);
  const SweepTally t = compare_backends(be, cases, true);
  std::printf("cuda sweep (training): %d batches (%d valid, %d broken, %d with dynamic violations, backward on the GPU "
              "in %d): %d agree, %d differ\n",
              int(cases.size()), t.valid, t.broken, t.with_violations, t.backward_on_gpu, t.agree, t.disagree);
  INFO(t.mismatches);
  CHECK(t.disagree == 0);
  CHECK(t.backward_on_gpu > 0);
}

// The sweeps above at the head dims the mma.sync kernels gained, 96, 192 and 256, bf16 and
// fp16: the valid cases of those head dims (forward, then 20 of each as training steps, whose
// backward runs on the GPU at each), and the broken classes with their head dim set to each of them
// (the classes that pick their own head dim left out), through both backends.
TEST_CASE("cuda sweep: head dims 96, 192 and 256 agree with the CPU backend", "[cuda][cuda-sweep]") {
  Backends be;
  if (!make_backends(be)) return;
  auto wide = [](const nlohmann::json& m) {
    const int64_t d = m.value("head_dim", int64_t(0));
    return (d == 96 || d == 192 || d == 256) && m.value("dtype", std::string()) != "fp32";
  };
  std::vector<sweep::Case> cases;
  for (sweep::Case& c : sweep::valid_cases(20261127, 900))
    if (wide(c.batch["model"])) cases.push_back(c);
  int broken = 0;
  for (const int64_t d : {96, 192, 256})
    for (sweep::Case c : sweep::broken_cases(79 + uint64_t(d), 2)) {
      if (c.klass == "single_query" || c.klass == "single_query_raises" || c.klass == "rotary_dim") continue;
      const int64_t old = c.batch["model"]["head_dim"].get<int64_t>();
      c.batch["model"]["head_dim"] = d;
      c.batch["model"]["dtype"] = (broken % 2) ? "fp16" : "bf16";
      if (c.batch.contains("rotary") && c.batch["rotary"].value("dim", int64_t(0)) == old) c.batch["rotary"]["dim"] = d;
      c.name += "-d" + std::to_string(d);
      cases.push_back(c);
      ++broken;
    }
  std::map<int64_t, int> per_dim;
  for (const sweep::Case& c : cases) ++per_dim[c.batch["model"]["head_dim"].get<int64_t>()];
  const SweepTally t = compare_backends(be, cases, false);
  // 20 valid cases of each head dim as training steps
  std::map<int64_t, std::vector<sweep::Case>> steps;
  for (const sweep::Case& c : cases) {
    std::vector<sweep::Case>& v = steps[c.batch["model"]["head_dim"].get<int64_t>()];
    if (c.klass == "valid" && v.size() < 20) v.push_back(c);
  }
  SweepTally tt;
  std::map<int64_t, int> gpu_bwd;
  int n_steps = 0;
  for (const auto& [d, v] : steps) {
    const SweepTally x = compare_backends(be, v, true);
    tt.agree += x.agree, tt.disagree += x.disagree, tt.mismatches += x.mismatches;
    tt.backward_on_gpu += x.backward_on_gpu;
    gpu_bwd[d] = x.backward_on_gpu;
    n_steps += int(v.size());
  }
  std::printf("cuda sweep (head dims 96 / 192 / 256: %d / %d / %d batches, %d broken): forward %d agree, %d differ; "
              "training %d batches, backward on the GPU in %d (%d / %d / %d): %d agree, %d differ\n",
              per_dim[96], per_dim[192], per_dim[256], broken, t.agree, t.disagree, n_steps, tt.backward_on_gpu,
              gpu_bwd[96], gpu_bwd[192], gpu_bwd[256], tt.agree, tt.disagree);
  INFO(t.mismatches << tt.mismatches);
  CHECK(per_dim[96] >= 20);
  CHECK(per_dim[192] >= 20);
  CHECK(per_dim[256] >= 20);
  CHECK(t.disagree == 0);
  CHECK(tt.disagree == 0);
  // the backward of every head dim runs on the GPU (the checked kernels at 96, 192 and 256)
  CHECK(gpu_bwd[96] > 0);
  CHECK(gpu_bwd[192] > 0);
  CHECK(gpu_bwd[256] > 0);
}

// A cu_seqlens whose last segment runs a million rows past the tensors (cu [0, 4, 7, 1000012]
// on 12 rows). Before the CTAs wholly past q/out were counted on the host, the checked kernels
// refused their accesses one by one and the CUDA backend ran for minutes at 100 % GPU; the
// CPU backend answered in milliseconds. Both must answer within 10 s, with the same report.
TEST_CASE("cuda: a phantom segment is answered within 10 s, as on the CPU", "[cuda]") {
  Backends be;
  if (!make_backends(be)) return;
  // the last one: every segment starts past q (the launch still runs one row of CTAs, which return)
  for (const auto& [head_dim, causal, rotary, past_only] :
       {std::tuple{64, true, false, false}, std::tuple{96, false, false, false}, std::tuple{128, true, true, false},
        std::tuple{64, false, true, true}}) {
    DYNAMIC_SECTION("head_dim " << head_dim << (causal ? " causal" : "") << (rotary ? " rotary" : "")
                                << (past_only ? " every segment past q" : "")) {
      const nlohmann::json cu = past_only ? nlohmann::json{20, 30, 1000020} : nlohmann::json{0, 4, 7, 1000012};
      nlohmann::json j = {{"format", "attn-doctor/batch@1"},
                          {"name", "phantom-segment"},
                          {"model", {{"num_heads", 4}, {"num_kv_heads", 2}, {"head_dim", head_dim}, {"causal", causal}}},
                          {"varlen", {{"cu_seqlens_q", cu}, {"max_seqlen_q", past_only ? 999990 : 1000005}, {"total_q", 12}}}};
      if (rotary) j["rotary"] = {{"implementation", "flash_attn"}, {"dim", 32}};
      const Batch b = parse_batch_text(j.dump(), "phantom.json");
      ExecOptions opt;
      opt.threads = 8;
      const ExecPlan plan = make_exec_plan(b, convert(b), opt);
      REQUIRE(plan.skip_reason.empty());
      const auto t0 = std::chrono::steady_clock::now();
      const RunSummary og = summarise(be.gpu->run(plan, opt));
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const RunSummary oc = summarise(be.cpu->run(plan, opt));
      INFO("cpu:\n" << oc.describe << "cuda:\n" << og.describe << "cuda: " << seconds << " s");
      // under compute-sanitizer (scripts/gpu-check sets ATTN_DOCTOR_SANITIZER) every launch runs
      // many times slower, so the 10 s a batch gets does not apply there
      if (std::getenv("ATTN_DOCTOR_SANITIZER") == nullptr)
        CHECK(seconds < 10.0);
      else
        WARN("under " << std::getenv("ATTN_DOCTOR_SANITIZER") << ": " << seconds << " s, not held to 10 s");
      CHECK(og.ids == oc.ids);
      CHECK(og.stage_status == oc.stage_status);
      CHECK(std::find(og.ids.begin(), og.ids.end(), "attention.access") != og.ids.end());
    }
  }
}

#endif  // ATTN_DOCTOR_WITH_CUDA
