// The training step on the CPU: FA2's varlen backward (lib/exec/cpu/cpu_backward.cpp, the contract
// in kernels/contract/fa2_backward.hpp) run after the forward stages, its gradients against
// the fp64 gradient reference, and what only the backward breaks. Tag [exec][backward].
#include <catch2/catch.hpp>

#include <cmath>
#include <set>

#include "check/check.hpp"
#include "doctor/doctor.hpp"
#include "exec/cpu/cpu_kernels.hpp"
#include "exec/plan/plan.hpp"
#include "exec/reference/misroute.hpp"

using namespace ad;

namespace {

Report check_text(const std::string& text, const std::string& name = "test.json") {
  Batch b = parse_batch_text(text, name);
  CheckOptions o;
  o.backend = BackendChoice::cpu;
  o.exec.threads = 2;
  return diagnose(b, o, name).report;
}
Report check_file(const std::string& rel, bool training) {
  Batch b = load_batch_file(std::string(ATTN_DOCTOR_SOURCE_DIR) + "/" + rel);
  if (training) b.pass = CallPass::training;
  CheckOptions o;
  o.backend = BackendChoice::cpu;
  o.exec.threads = 2;
  return diagnose(b, o, rel).report;
}
const StageRecord* stage_of(const Report& r, Stage name) {
  for (const auto& s : r.stages)
    if (s.name == name) return &s;
  return nullptr;
}
std::set<std::string> ids(const Report& r) {
  std::set<std::string> out;
  for (const auto& v : r.violations) out.insert(v.id);
  return out;
}
const Violation* find(const Report& r, const std::string& id) {
  for (const auto& v : r.violations)
    if (v.id == id) return &v;
  return nullptr;
}
std::string describe(const Report& r) {
  std::string out;
  for (const auto& s : r.stages) out += std::string(to_string(s.name)) + ": " + to_string(s.status) + " " + s.detail + "\n";
  for (const auto& v : r.violations) out += v.id + ": " + v.message + "\n";
  return out;
}
std::string batch(const std::string& model, const std::string& varlen, const std::string& fa = "2.8.3") {
  return R"({"format": "attn-doctor/batch@1", "pass": "training", "environment": {"flash_attn": ")" + fa +
         R"("}, "model": )" + model + R"(, "varlen": )" + varlen + "}";
}
double worst(const StageRecord* s) {
  double w = 0;
  for (const GradientCheckFact& g : *s->facts.gradients) w = std::max(w, g.worst_error);
  return w;
}

}  // namespace

TEST_CASE("backward: a healthy training batch is ok, gradients within the dtype's tolerance", "[exec][backward]") {
  for (const char* model : {R"({"num_heads": 4, "num_kv_heads": 2, "head_dim": 64, "dtype": "bf16"})",
                            R"({"num_heads": 4, "num_kv_heads": 1, "head_dim": 128, "dtype": "fp16", "softcap": 30.0})",
                            R"({"num_heads": 2, "head_dim": 96, "dtype": "bf16", "causal": false, "sliding_window": 40})"}) {
    Report r = check_text(batch(model, R"({"cu_seqlens_q": [0, 1, 100, 300, 333], "max_seqlen_q": 200})"));
    INFO(model << "\n" << describe(r));
    CHECK(r.violations.empty());
    const StageRecord* s = stage_of(r, Stage::attention_backward);
    REQUIRE(s);
    CHECK(s->status == StageStatus::ok);
    REQUIRE(s->facts.gradients);
    CHECK((*s->facts.gradients)[0].rows_checked > 0);  // dq
    CHECK((*s->facts.gradients)[1].rows_checked > 0);  // dk
    CHECK(worst(s) < s->facts.tolerance.value());
    CHECK(r.stages.back().name == Stage::attention_backward);
  }
}

TEST_CASE("backward: an inference batch has no backward stage", "[exec][backward]") {
  std::string text = batch(R"({"num_heads": 2, "head_dim": 64, "dtype": "bf16"})", R"({"cu_seqlens_q": [0, 10, 30]})");
  text.replace(text.find(R"("pass": "training")"), 18, R"("pass": "forward")");
  Report r = check_text(text);
  CHECK_FALSE(stage_of(r, Stage::attention_backward));
  CHECK(stage_of(r, Stage::result));
}

TEST_CASE("backward: the mask route (pad's and unpad's adjoints) and rotary, healthy", "[exec][backward]") {
  for (const char* f : {"tests/golden/batches/001-right-padding.json", "tests/golden/batches/016-gqa-right-padding.json",
                        "repro_cases/flash-attn-rotary-packed-cu-seqlens-fixed.json"}) {
    Report r = check_file(f, true);
    INFO(f << "\n" << describe(r));
    CHECK(r.violations.empty());
    REQUIRE(stage_of(r, Stage::attention_backward));
    CHECK(stage_of(r, Stage::attention_backward)->status == StageStatus::ok);
  }
}

TEST_CASE("backward: rows past cu_seqlens[-1] get no gradient (flash-attention#1661)", "[exec][backward]") {
  Report r = check_text(batch(R"({"num_heads": 8, "head_dim": 64, "dtype": "bf16"})",
                              R"({"cu_seqlens_q": [0, 144, 432, 944], "max_seqlen_q": 512, "total_q": 946, "total_k": 946})"));
  INFO(describe(r));
  const Violation* v = find(r, "backward.coverage");
  REQUIRE(v);
  CHECK(v->evidence["dq_rows"] == nlohmann::json::array({{944, 945}}));
  CHECK(v->evidence["dkv_rows"] == nlohmann::json::array({{944, 945}}));
  CHECK(v->stage == "attention_backward");
  // the intended rows' gradients are right
  CHECK_FALSE(ids(r).count("backward.reference"));
  // the fix: q, k, v sliced to cu_seqlens[-1]
  Report fixed = check_text(batch(R"({"num_heads": 8, "head_dim": 64, "dtype": "bf16"})",
                                  R"({"cu_seqlens_q": [0, 144, 432, 944], "max_seqlen_q": 512})"));
  INFO(describe(fixed));
  CHECK(fixed.violations.empty());
}

TEST_CASE("backward: a max_seqlen_q short of the row tiles leaves dq rows unconverted and dk/dv wrong", "[exec][backward]") {
  // one 200-row segment, max_seqlen_q 64: the backward's dot_do_o / convert_dQ grids cover rows 0-127
  // (kBlockM 128 at head dim 64), the forward's too, so rows 128-199 are never written
  Report r = check_text(batch(R"({"num_heads": 2, "head_dim": 64, "dtype": "bf16"})",
                              R"({"cu_seqlens_q": [0, 200], "max_seqlen_q": 64})"));
  INFO(describe(r));
  const Violation* v = find(r, "backward.coverage");
  REQUIRE(v);
  CHECK(v->evidence["dq_rows"] == nlohmann::json::array({{128, 199}}));
}

TEST_CASE("backward: cu_seqlens past the rows are refused accesses, never performed", "[exec][backward]") {
  Report r = check_text(batch(R"({"num_heads": 2, "head_dim": 64, "dtype": "bf16"})",
                              R"({"cu_seqlens_q": [0, 100, 212], "max_seqlen_q": 112, "total_q": 200, "total_k": 200})"));
  INFO(describe(r));
  const Violation* v = find(r, "backward.access");
  REQUIRE(v);
  CHECK(v->evidence["launch"] == "dot_do_o");
  CHECK(v->evidence["buffer"] == "dout");
  CHECK(v->evidence["index"] == 200);
  CHECK(v->evidence["count_all_launches"].get<int64_t>() > 0);
}

// A segment past the rows carries its softmax_d rows into the next head's part (unpadded
// layout, flash-attn >= 2.6): on the GPU those writes race with the next head's CTAs. They are
// refused, so the next head keeps its own softmax_d and its gradients, on every run.
TEST_CASE("backward: softmax_d writes into another head's part are refused and never raced", "[exec][backward]") {
  const std::string text = batch(R"({"num_heads": 2, "head_dim": 64, "dtype": "bf16"})",
                                 R"({"cu_seqlens_q": [0, 100, 700], "max_seqlen_q": 600, "total_q": 300, "total_k": 300})");
  for (int run = 0; run < 3; ++run) {
    Report r = check_text(text);
    INFO(describe(r));
    CHECK(ids(r).count("backward.access") == 1);
    CHECK(ids(r).count("backward.reference") == 0);
    const StageRecord* s = stage_of(r, Stage::attention_backward);
    REQUIRE(s);
    CHECK(worst(s) <= s->facts.tolerance.value());
  }
}

TEST_CASE("backward: a phantom segment (a million rows past 12) is answered at once, its backward not run",
          "[exec][backward]") {
  // quadratic in rows that do not exist: the stage says why it did not run, the forward reports the accesses
  Report r = check_text(batch(R"({"num_heads": 16, "num_kv_heads": 4, "head_dim": 128, "dtype": "bf16"})",
                              R"({"cu_seqlens_q": [0, 4, 7, 1000012], "max_seqlen_q": 1000005, "total_q": 12, "total_k": 12})"));
  INFO(describe(r));
  const StageRecord* s = stage_of(r, Stage::attention_backward);
  REQUIRE(s);
  CHECK(s->detail.find("phantom segment") != std::string::npos);
  CHECK(ids(r).count("cu_seqlens.total") == 1);
}

TEST_CASE("backward: dq past the 32-bit dq_accum offset, before the fix and after it", "[exec][backward]") {
  // 16 heads x d_rounded 128 = 2048 fp32 elements per dq_accum row: offsets wrap from row 2^20
  const std::string model = R"({"num_heads": 16, "head_dim": 128, "dtype": "bf16"})";
  const std::string varlen = R"({"cu_seqlens_q": [0, 1048576, 1300000], "max_seqlen_q": 1048576})";
  for (const char* fa : {"2.5.0", "2.7.4", "2.8.3"}) {
    Report r = check_text(batch(model, varlen, fa));
    INFO(fa << "\n" << describe(r));
    const Violation* v = find(r, "backward.dq_offset");
    REQUIRE(v);
    CHECK(v->evidence["rows"] == nlohmann::json::array({{1048576, 1299999}}));
    CHECK(v->evidence["segment"] == 1);
    CHECK(v->evidence["offset"].get<int64_t>() < 0);  // before dq_accum: another tensor's memory
    CHECK(stage_of(r, Stage::attention_backward)->facts.offsets_only == true);
    REQUIRE(r.prediction);
    CHECK(r.prediction->symptom.outcome == Outcome::wrong_gradient);
  }
  Report fixed = check_text(batch(model, varlen, "2.8.4"));
  INFO(describe(fixed));
  CHECK_FALSE(ids(fixed).count("backward.dq_offset"));
  CHECK(stage_of(fixed, Stage::attention_backward)->status == StageStatus::skipped);  // values too large to run; offsets fine
}

TEST_CASE("backward: before 2.8.0 one long segment wraps through the tile term (PR#1500)", "[exec][backward]") {
  ExecOptions o;
  Batch b = parse_batch_text(batch(R"({"num_heads": 16, "head_dim": 128, "dtype": "bf16"})",
                                   R"({"cu_seqlens_q": [0, 1100000], "max_seqlen_q": 1100000})", "2.7.4"),
                             "t.json");
  ExecPlan p = make_exec_plan(b, convert(b), o);
  ref::MisrouteResult m = ref::backward_misroutes(p);
  REQUIRE(m.misroute.rows > 0);
  CHECK(m.misroute.segment == 0);
  // 2.8.0 computes the tile term in 64 bits: the segment starts at 0, nothing wraps
  b.environment.flash_attn = parse_version("2.8.0");
  CHECK(ref::backward_misroutes(make_exec_plan(b, convert(b), o)).misroute.rows == 0);
}

TEST_CASE("backward: deterministic mode (split dq_accum) gives the same gradients", "[exec][backward]") {
  Batch b = parse_batch_text(batch(R"({"num_heads": 2, "num_kv_heads": 1, "head_dim": 64, "dtype": "fp32"})",
                                   R"({"cu_seqlens_q": [0, 150, 400], "max_seqlen_q": 250})"),
                             "t.json");
  ExecOptions o;
  o.threads = 2;
  ExecPlan p = make_exec_plan(b, convert(b), o);
  std::vector<float> q(static_cast<size_t>(400 * 2 * 64)), k(static_cast<size_t>(400 * 64)), v(k.size()),
      dout(q.size());
  for (size_t i = 0; i < q.size(); ++i) q[i] = dout[i] = std::sin(0.37f * float(i)) * 0.5f;
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = std::cos(0.11f * float(i));
    v[i] = std::sin(0.23f * float(i) + 1.f);
  }
  std::vector<float> out(q.size()), lse(static_cast<size_t>(p.attention.lse_elements));
  cpu::fa2_varlen_forward(p, q.data(), k.data(), v.data(), out.data(), lse.data(), 2);
  const AttentionBackwardObservation a = cpu::fa2_varlen_backward(p, q.data(), k.data(), v.data(), out.data(), lse.data(),
                                                                  dout.data(), 2);
  ExecPlan pd = p;
  fa2::bwd::Call c{.max_seqlen_q = 250, .max_seqlen_k = 250, .num_heads = 2, .num_heads_k = 1, .head_dim = 64,
                   .num_segments = 2, .causal = true, .deterministic = true};
  pd.backward.kernel = fa2::bwd::normalize(pd.backward.release, c);
  pd.backward.deterministic = true;
  pd.backward.dq_accum.nsplits = pd.backward.kernel.nsplits;
  REQUIRE(pd.backward.kernel.nsplits == 33);  // ceil(132 / (2 x 2))
  const AttentionBackwardObservation d = cpu::fa2_varlen_backward(pd, q.data(), k.data(), v.data(), out.data(), lse.data(),
                                                                  dout.data(), 2);
  REQUIRE(a.dq.size() == d.dq.size());
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.dq.size(); ++i) {
    diff = std::max(diff, double(std::fabs(a.dq[i] - d.dq[i])));
    norm = std::max(norm, double(std::fabs(a.dq[i])));
  }
  CHECK(norm > 0);
  CHECK(diff <= 1e-5 * norm);
  CHECK(a.dk == d.dk);  // dk/dv never go through dq_accum
  CHECK(d.dq_dk_dv.count == 0);
  CHECK(d.convert_dq.count == 0);
}

TEST_CASE("backward: the CUDA engine's default says the stage did not run", "[exec][backward]") {
  struct NoBackward final : Engine {
    const char* name() const override { return "cuda"; }
    std::string output_name() const override { return "output"; }
    void load(const ExecPlan&, const Inputs&) override {}
    GatherObservation gather(const ExecPlan&, Operand) override { return {}; }
    RotaryObservation rotary(const ExecPlan&, const RotaryTable&) override { return {}; }
    AttentionObservation attention(const ExecPlan&) override { return {}; }
    ScatterObservation scatter(const ExecPlan&) override { return {}; }
    Output output(const ExecPlan&) override { return {}; }
  } e;
  const AttentionBackwardObservation ob = e.attention_backward(ExecPlan{}, {});
  CHECK_FALSE(ob.ran);
  CHECK(ob.not_run.find("not implemented on the cuda engine") != std::string::npos);
}

TEST_CASE("backward: \"deterministic\": true in the batch runs the split accumulator", "[exec][backward]") {
  Report r = check_text(batch(R"({"num_heads": 4, "num_kv_heads": 2, "head_dim": 64, "dtype": "bf16", "deterministic": true})",
                              R"({"cu_seqlens_q": [0, 100, 300], "max_seqlen_q": 200})"));
  INFO(describe(r));
  CHECK(r.violations.empty());
  const StageRecord* s = stage_of(r, Stage::attention_backward);
  REQUIRE(s);
  CHECK(s->status == StageStatus::ok);
  CHECK(s->facts.deterministic == true);
  CHECK(s->facts.grid_dq_dk_dv.value()[0] == 17);  // nsplits = ceil(132 / (2 x 4))
}
