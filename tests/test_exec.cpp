// Execution on the CPU: the generated sweeps (tests/sweep.hpp) and the kernel
// semantics they rest on. Tag [exec]; the whole file runs in well under a minute on 2 cores.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <set>

#include "check/check.hpp"
#include "doctor/doctor.hpp"
#include "exec/cpu/cpu_kernels.hpp"
#include "exec/plan/plan.hpp"
#include "sweep.hpp"

using namespace ad;

namespace {

struct Run {
  ExecPlan plan;
  ExecResult result;
  std::set<std::string> ids;
  const StageRecord* stage(Stage name) const {
    for (const auto& s : result.stages)
      if (s.name == name) return &s;
    return nullptr;
  }
  std::string describe() const {
    std::string out;
    for (const auto& s : result.stages) out += std::string(to_string(s.name)) + ": " + to_string(s.status) + " " + s.detail + "\n";
    for (const auto& v : result.violations) out += v.id + ": " + v.message + "\n";
    if (!plan.skip_reason.empty()) out += "skipped: " + plan.skip_reason + "\n";
    return out;
  }
};

Run run_case(const Batch& b, const Conversion& cv, ExecOptions opt = {}) {
  Run r;
  if (opt.threads == 0) opt.threads = 2;
  r.plan = make_exec_plan(b, cv, opt);
  r.result = make_cpu_backend()->run(r.plan, opt);
  for (const auto& v : r.result.violations) r.ids.insert(v.id);
  return r;
}

Run run_sweep_case(const sweep::Case& c) {
  Batch b = sweep::load(c);
  ExecOptions opt;
  opt.seed = c.seed;
  return run_case(b, sweep::conversion_for(c, b), opt);
}

Batch batch_from(const nlohmann::json& j) { return parse_batch_text(j.dump(), "test.json"); }

}  // namespace

// ---------------------------------------------------------------------------------------
// numeric building blocks

// IEEE binary16 rounding computed another way than lib/exec/plan/numeric.hpp: in double, where
// scaling by a power of two is exact, to the nearest multiple of the half-precision ulp at
// |x|'s binade (11 significant bits; no finer than 2^-24, the subnormal step), ties to even
// (nearbyint in the default rounding mode), overflow to infinity from 65520 (halfway between
// 65504 and 2^16). Not the compiler's _Float16: clang before 15 lacks it on x86-64 and its
// __fp16 needs compiler-rt helpers that Debian's default link does not bring.
static float reference_fp16(float x) {
  const double a = std::fabs(static_cast<double>(x));
  if (a == 0.0) return x;
  if (a >= 65520.0) return std::copysign(std::numeric_limits<float>::infinity(), x);
  int e = 0;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  const double ulp = std::ldexp(1.0, std::max(e - 11, -24));
  return static_cast<float>(std::copysign(std::nearbyint(a / ulp) * ulp, static_cast<double>(x)));
}

TEST_CASE("exec: fp16 and bf16 rounding match IEEE round-to-nearest-even", "[exec]") {
  // the reference itself, at the edges: the largest half, the overflow tie, the subnormal
  // tie to zero, ties to even in a normal binade
  CHECK(reference_fp16(65519.f) == 65504.f);
  CHECK(std::isinf(reference_fp16(65520.f)));
  CHECK(reference_fp16(std::ldexp(1.f, -25)) == 0.f);
  CHECK(reference_fp16(3 * std::ldexp(1.f, -25)) == std::ldexp(1.f, -23));
  CHECK(reference_fp16(1.f + std::ldexp(1.f, -11)) == 1.f);
  CHECK(reference_fp16(1.f + 3 * std::ldexp(1.f, -11)) == 1.f + std::ldexp(1.f, -9));

  sweep::Rng g(7);
  for (int i = 0; i < 200000; ++i) {
    // random bit patterns over the whole fp32 range, plus fp16's subnormal and overflow edges
    uint32_t u = static_cast<uint32_t>(g.next());
    if (i % 3 == 0) u = (u & 0x807fffffu) | (static_cast<uint32_t>(g.range(100, 145)) << 23);
    const float x = num::bits_float(u);
    if (std::isnan(x)) continue;
    const float want16 = reference_fp16(x);
    INFO("x = " << x);
    REQUIRE(num::float_bits(num::round_fp16(x)) == num::float_bits(want16));
  }
  // bf16: ties to even on the 16 dropped bits
  CHECK(num::round_bf16(num::bits_float(0x3f808000u)) == num::bits_float(0x3f800000u));  // tie, even stays
  CHECK(num::round_bf16(num::bits_float(0x3f818000u)) == num::bits_float(0x3f820000u));  // tie, odd rounds up
  CHECK(num::round_bf16(num::bits_float(0x3f808001u)) == num::bits_float(0x3f810000u));
  CHECK(std::isinf(num::round_bf16(num::bits_float(0x7f7fffffu))));
}

TEST_CASE("exec: seeded inputs are reproducible, in the dtype, and never zero", "[exec]") {
  int differ = 0;
  for (uint64_t i = 0; i < 20000; ++i) {
    const float a = num::input_value(3, num::InputTensor::q, i, ElemType::bf16);
    REQUIRE(a == num::input_value(3, num::InputTensor::q, i, ElemType::bf16));
    REQUIRE(a != 0.f);
    REQUIRE(std::fabs(a) <= 1.f);
    REQUIRE(num::round_bf16(a) == a);
    const float h = num::input_value(3, num::InputTensor::k, i, ElemType::fp16);
    REQUIRE(num::round_fp16(h) == h);
    REQUIRE(h != 0.f);
    differ += a != num::input_value(4, num::InputTensor::q, i, ElemType::bf16);
  }
  CHECK(differ > 19000);
}

// ---------------------------------------------------------------------------------------
// FA2 host adjustments as the plan applies them (the rules: tests/test_contract.cpp)

TEST_CASE("exec: host adjustments of mha_varlen_fwd", "[exec]") {
  auto plan_for = [](nlohmann::json model, nlohmann::json varlen) {
    nlohmann::json j = {{"format", "attn-doctor/batch@1"}, {"model", model}, {"varlen", varlen}};
    Batch b = batch_from(j);
    return make_exec_plan(b, convert(b), ExecOptions{});
  };
  // max_seqlen_q == 1 with H > Hk: the swapped path
  ExecPlan p = plan_for({{"num_heads", 8}, {"num_kv_heads", 2}, {"head_dim", 64}},
                        {{"cu_seqlens_q", {0, 1, 2}}, {"cu_seqlens_k", {0, 5, 9}}, {"max_seqlen_q", 1}, {"max_seqlen_k", 5}});
  CHECK(p.attention.swapped);
  CHECK(p.attention.max_seqlen_q == 4);
  CHECK_FALSE(p.attention.flags.causal);
  CHECK_FALSE(p.attention.raises);
  // the same with a zero-length segment: the reshape raises (Dao-AILab/flash-attention#1537)
  p = plan_for({{"num_heads", 9}, {"num_kv_heads", 3}, {"head_dim", 64}},
               {{"cu_seqlens_q", {0, 1, 1, 2}}, {"cu_seqlens_k", {0, 5, 9, 12}}, {"max_seqlen_q", 1}, {"max_seqlen_k", 5}});
  REQUIRE(p.attention.raises);
  CHECK(p.attention.raises->message == "shape '[3, 3, 3, 64]' is invalid for input of size 1152");
  // a window not smaller than max_seqlen_k is dropped; causal keeps right = 0
  p = plan_for({{"num_heads", 4}, {"head_dim", 64}, {"sliding_window", 100}}, {{"cu_seqlens_q", {0, 10, 30}}, {"max_seqlen_q", 20}});
  CHECK(p.attention.flags.causal);
  CHECK_FALSE(p.attention.flags.local);
  p = plan_for({{"num_heads", 4}, {"head_dim", 64}, {"sliding_window", 8}}, {{"cu_seqlens_q", {0, 10, 30}}, {"max_seqlen_q", 20}});
  CHECK(p.attention.flags.local);
  CHECK(p.attention.flags.window_left == 7);
  CHECK(p.attention.flags.window_right == 0);
  // a window wider than the keys blocks the single-query swap (decided before the window is
  // dropped; contract test "FA2 decides the single-query swap ..."), then becomes unlimited
  p = plan_for({{"num_heads", 8}, {"num_kv_heads", 2}, {"head_dim", 64}, {"causal", false}, {"sliding_window", 200}},
               {{"cu_seqlens_q", {0, 1, 2}}, {"cu_seqlens_k", {0, 50, 100}}, {"max_seqlen_q", 1}, {"max_seqlen_k", 50}});
  CHECK_FALSE(p.attention.swapped);
  CHECK(p.attention.grid_h == 8);
  CHECK_FALSE(p.attention.flags.causal);
  CHECK_FALSE(p.attention.flags.local);
  // int64 cu_seqlens: TORCH_CHECK before launch
  nlohmann::json j = {{"format", "attn-doctor/batch@1"},
                      {"model", {{"num_heads", 4}, {"head_dim", 64}}},
                      {"varlen", {{"cu_seqlens_q", {0, 10}}, {"max_seqlen_q", 10}}},
                      {"tensors", {{"cu_seqlens_q", {{"dtype", "int64"}}}}}};
  Batch b = batch_from(j);
  p = make_exec_plan(b, convert(b), ExecOptions{});
  REQUIRE(p.attention.raises);
  CHECK(p.attention.raises->message == "cu_seqlens_q must have dtype int32");
}

TEST_CASE("exec: an empty key range writes 0 and +inf LSE", "[exec]") {
  // segment 1 has no keys; segment 0 has 3 queries over 2 keys (row 0 sees none, causal)
  nlohmann::json j = {{"format", "attn-doctor/batch@1"},
                      {"model", {{"num_heads", 2}, {"head_dim", 32}, {"dtype", "fp16"}}},
                      {"varlen", {{"cu_seqlens_q", {0, 3, 5}}, {"cu_seqlens_k", {0, 2, 2}}, {"max_seqlen_q", 3}, {"max_seqlen_k", 2}}}};
  Batch b = batch_from(j);
  ExecPlan p = make_exec_plan(b, convert(b), ExecOptions{});
  REQUIRE(p.skip_reason.empty());
  const int64_t H = 2, D = 32;
  std::vector<float> q(5 * H * D), k(2 * H * D), v(2 * H * D), out(5 * H * D, NAN), lse(H * 5, NAN);
  for (size_t i = 0; i < q.size(); ++i) q[i] = num::input_value(1, num::InputTensor::q, i, ElemType::fp16);
  for (size_t i = 0; i < k.size(); ++i) k[i] = num::input_value(1, num::InputTensor::k, i, ElemType::fp16);
  for (size_t i = 0; i < v.size(); ++i) v[i] = num::input_value(1, num::InputTensor::v, i, ElemType::fp16);
  cpu::AttentionResult r = cpu::fa2_varlen_forward(p, q.data(), k.data(), v.data(), out.data(), lse.data(), 2);
  CHECK_FALSE(r.access.has_first());
  CHECK(std::all_of(r.writes.begin(), r.writes.end(), [](uint32_t w) { return w == 1; }));
  for (int64_t h = 0; h < H; ++h) {
    CHECK(std::isinf(lse[static_cast<size_t>(h * 5 + 0)]));  // row 0: no visible key
    CHECK(std::isinf(lse[static_cast<size_t>(h * 5 + 3)]));  // segment 1: no keys at all
    CHECK(std::isinf(lse[static_cast<size_t>(h * 5 + 4)]));
    CHECK(std::isfinite(lse[static_cast<size_t>(h * 5 + 1)]));
    for (int64_t d = 0; d < D; ++d) {
      CHECK(out[static_cast<size_t>(0 * H * D + h * D + d)] == 0.f);
      CHECK(out[static_cast<size_t>(4 * H * D + h * D + d)] == 0.f);
    }
  }
  // row 2 sees both keys: a plain softmax over two keys
  const float* o = out.data() + 2 * H * D;
  double s0 = 0, s1 = 0;
  for (int64_t d = 0; d < D; ++d) {
    s0 += double(q[static_cast<size_t>(2 * H * D + d)]) * k[static_cast<size_t>(d)];
    s1 += double(q[static_cast<size_t>(2 * H * D + d)]) * k[static_cast<size_t>(H * D + d)];
  }
  const double sc = 1.0 / std::sqrt(double(D)), m = std::max(s0, s1) * sc;
  const double p0 = std::exp(s0 * sc - m), p1 = std::exp(s1 * sc - m);
  for (int64_t d = 0; d < D; ++d) {
    const double want = (p0 * v[static_cast<size_t>(d)] + p1 * v[static_cast<size_t>(H * D + d)]) / (p0 + p1);
    CHECK(std::fabs(o[d] - want) < 2e-3);
  }
}

TEST_CASE("exec: a NaN key spreads to the rows that see it, as ex2.approx does on the GPU", "[exec]") {
  // a key row the rotary kernel never wrote holds the poison (NaN): its score is NaN, the
  // running max ignores it (fmaxf), exp2 of it is NaN, and so is every output row that sees it
  nlohmann::json j = {{"format", "attn-doctor/batch@1"},
                      {"model", {{"num_heads", 2}, {"head_dim", 32}, {"dtype", "fp16"}}},
                      {"varlen", {{"cu_seqlens_q", {0, 3, 5}}, {"cu_seqlens_k", {0, 2, 4}}, {"max_seqlen_q", 3}, {"max_seqlen_k", 2}}}};
  Batch b = batch_from(j);
  ExecPlan p = make_exec_plan(b, convert(b), ExecOptions{});
  REQUIRE(p.skip_reason.empty());
  const int64_t H = 2, D = 32;
  std::vector<float> q(5 * H * D), k(4 * H * D), v(4 * H * D), out(5 * H * D, 0.f), lse(H * 5, 0.f);
  for (size_t i = 0; i < q.size(); ++i) q[i] = num::input_value(2, num::InputTensor::q, i, ElemType::fp16);
  for (size_t i = 0; i < k.size(); ++i) k[i] = num::input_value(2, num::InputTensor::k, i, ElemType::fp16);
  for (size_t i = 0; i < v.size(); ++i) v[i] = num::input_value(2, num::InputTensor::v, i, ElemType::fp16);
  k[static_cast<size_t>(1 * H * D + 0 * D + 5)] = NAN;  // segment 0, key 1, head 0
  cpu::fa2_varlen_forward(p, q.data(), k.data(), v.data(), out.data(), lse.data(), 2);
  auto finite_row = [&](int64_t row, int64_t h) {
    for (int64_t d = 0; d < D; ++d)
      if (!std::isfinite(out[static_cast<size_t>(row * H * D + h * D + d)])) return false;
    return true;
  };
  // causal, bottom-right: row 1 sees key 0 only, row 2 sees keys 0 and 1
  CHECK(finite_row(1, 0));
  CHECK(std::isnan(out[static_cast<size_t>(2 * H * D + 0 * D + 0)]));
  CHECK_FALSE(finite_row(2, 0));
  for (int64_t row = 0; row < 5; ++row) CHECK(finite_row(row, 1));  // the other head
  CHECK(finite_row(3, 0));                                          // the other segment
  CHECK(finite_row(4, 0));
}

// ---------------------------------------------------------------------------------------
// the sweeps

TEST_CASE("exec: sweep of generated valid batches passes result.reference", "[exec]") {
  const auto cases = sweep::valid_cases(20240605, 240);
  REQUIRE(cases.size() >= 200);
  int checked_rows = 0, swapped = 0, rotary = 0, masked = 0, windowed = 0, capped = 0;
  std::set<std::string> dtypes;
  for (const sweep::Case& c : cases) {
    Run r = run_sweep_case(c);
    INFO(c.name << "\n" << c.batch.dump() << "\n" << r.describe());
    REQUIRE(r.plan.skip_reason.empty());
    REQUIRE(r.result.violations.empty());
    const StageRecord* res = r.stage(Stage::result);
    REQUIRE(res);
    REQUIRE(res->status == StageStatus::ok);
    REQUIRE(res->facts.rows_checked.value_or(0) > 0);  // the reference really ran
    checked_rows += res->facts.rows_checked.value_or(0);
    swapped += r.plan.attention.swapped;
    rotary += r.plan.rotary.enabled;
    masked += r.plan.path == VarlenPath::mask;
    windowed += r.plan.attention.flags.local;
    capped += r.plan.attention.softcap > 0;
    dtypes.insert(to_string(r.plan.dtype));
  }
  // the sweep covers what it claims to
  CHECK(swapped > 5);
  CHECK(rotary > 30);
  CHECK(masked > 30);
  CHECK(windowed > 20);
  CHECK(capped > 20);
  CHECK(dtypes.size() == 3);
  CHECK(checked_rows > 20000);
}

TEST_CASE("exec: sweep of broken metadata yields the expected dynamic violations", "[exec]") {
  for (const sweep::Case& c : sweep::broken_cases(77, 4)) {
    Run r = run_sweep_case(c);
    INFO(c.klass << " / " << c.name << "\n" << c.batch.dump() << "\n" << r.describe());
    REQUIRE(r.plan.skip_reason.empty());
    for (const std::string& id : c.expect) CHECK(r.ids.count(id) == 1);
    if (!c.expect_raise.empty()) {
      bool found = false;
      for (const auto& s : r.result.stages) found = found || s.detail.find(c.expect_raise) != std::string::npos;
      CHECK(found);
    }
  }
}

// ---------------------------------------------------------------------------------------
// symptoms next to causes, budget, memory, reproducibility

TEST_CASE("exec: the key gather overrun is attributed to the gather (mask wider than keys)", "[exec]") {
  // one row, 8 keys, a mask of 18 columns with the last 10 attended: indices 8..17
  nlohmann::json j = {{"format", "attn-doctor/batch@1"},
                      {"model", {{"num_heads", 4}, {"head_dim", 64}}},
                      {"batch", {{"attention_mask", {{"lengths", {10}}, {"width", 18}, {"padding_side", "left"}}},
                                 {"query_length", 8}, {"kv_length", 8}}}};
  sweep::Case c;
  c.route = sweep::Route::mask;
  c.batch = j;
  Batch b = sweep::load(c);
  Run r = run_case(b, sweep::conversion_for(c, b));
  INFO(r.describe());
  REQUIRE(r.ids.count("unpad.gather"));
  const Violation& v = r.result.violations.front();
  CHECK(v.message.rfind("index 8 >= 8 in the key gather", 0) == 0);
  CHECK(v.evidence["count"] == 10);
  // later stages are not reached: the release fails in the gather
  REQUIRE(r.stage(Stage::attention));
  CHECK(r.stage(Stage::attention)->status == StageStatus::skipped);
  CHECK(r.stage(Stage::attention)->detail.find("not reached") == 0);
}

TEST_CASE("exec: fla rotary with the model width runs into the next heads and past the tensor", "[exec]") {
  sweep::Case c = sweep::broken_case("rotary_dim", 5, 0);
  Run r = run_sweep_case(c);
  INFO(r.describe());
  REQUIRE(r.ids.count("rotary.access"));
  for (const auto& v : r.result.violations)
    if (v.id == "rotary.access") {
      CHECK(v.evidence["outside_tensor"].get<int64_t>() > 0);
      CHECK(v.evidence["outside_head"].get<int64_t>() > 0);
    }
  // flash_attn's contract asserts instead (on the host), and nothing after it runs
  c.batch["rotary"]["implementation"] = "flash_attn";
  r = run_sweep_case(c);
  REQUIRE(r.stage(Stage::rotary));
  CHECK(r.stage(Stage::rotary)->detail.find("rotary_dim must be <= headdim") != std::string::npos);
  CHECK(r.stage(Stage::attention)->detail.find("not reached") == 0);
  // the call fails, so the report does not pass: nothing is written
  CHECK(r.ids == std::set<std::string>{"attention.coverage"});
}

TEST_CASE("exec: --seed reproduces a run and another seed changes the inputs", "[exec]") {
  sweep::Case c = sweep::valid_cases(99, 1).front();
  Batch b = sweep::load(c);
  Conversion cv = sweep::conversion_for(c, b);
  ExecOptions o;
  o.seed = 11;
  Run a = run_case(b, cv, o), a2 = run_case(b, cv, o);
  o.seed = 12;
  Run bb = run_case(b, cv, o);
  auto worst = [](const Run& r) { return nlohmann::json(r.stage(Stage::result)->facts.worst_error.value_or(-1.0)).dump(); };
  CHECK(worst(a) == worst(a2));
  CHECK(worst(a) != worst(bb));
}

TEST_CASE("exec: above the budget, a sample of rows per segment is checked and reported", "[exec]") {
  nlohmann::json j = {{"format", "attn-doctor/batch@1"},
                      {"model", {{"num_heads", 4}, {"num_kv_heads", 2}, {"head_dim", 64}}},
                      {"varlen", {{"cu_seqlens_q", {0, 700, 1500, 1510}}, {"max_seqlen_q", 800}}}};
  Batch b = batch_from(j);
  ExecOptions o;
  o.budget = 20'000'000;
  Run r = run_case(b, convert(b), o);
  INFO(r.describe());
  REQUIRE(r.plan.sampled);
  REQUIRE(r.result.violations.empty());
  const StageRecord* res = r.stage(Stage::result);
  const int64_t checked = res->facts.rows_checked.value_or(0), total = res->facts.rows_total.value_or(0);
  CHECK(total == 1510);
  CHECK(checked < total / 2);
  CHECK(checked >= 6);
  // first and last rows of every sequence are in the sample
  for (int64_t row : {0, 699, 700, 1499, 1500, 1509}) CHECK(r.plan.reference.sample[static_cast<size_t>(row)] == 1);
  bool noted = false;
  for (const auto& n : r.plan.notes) noted = noted || n.find("checked a sample of") != std::string::npos;
  CHECK(noted);
  // --full checks everything
  o.full = true;
  Run full = run_case(b, convert(b), o);
  CHECK(full.stage(Stage::result)->facts.rows_checked == 1510);
}

TEST_CASE("exec: a batch over the memory bound is checked statically and dynamic stages say why", "[exec]") {
  nlohmann::json j = {{"format", "attn-doctor/batch@1"},
                      {"model", {{"num_heads", 32}, {"head_dim", 128}}},
                      {"varlen", {{"cu_seqlens_q", {0, 600000, 1000000}}, {"max_seqlen_q", 600000}}}};
  Batch b = batch_from(j);
  ExecOptions o;
  Run r = run_case(b, convert(b), o);
  REQUIRE_FALSE(r.plan.skip_reason.empty());
  CHECK(r.plan.skip_reason.find("of host memory, over the budget") != std::string::npos);
  REQUIRE(r.result.stages.size() == 5);
  for (const auto& s : r.result.stages) CHECK(s.status == StageStatus::skipped);
}

TEST_CASE("exec: diagnose runs dynamic stages after static violations and picks the backend", "[exec]") {
  nlohmann::json j = {{"format", "attn-doctor/batch@1"},
                      {"model", {{"num_heads", 16}, {"num_kv_heads", 4}, {"head_dim", 128}}},
                      {"varlen", {{"cu_seqlens_q", {0, 100, 137, 400}}, {"max_seqlen_q", 263}, {"total_q", 387}}}};
  Batch b = batch_from(j);
  CheckOptions o;
  o.backend = BackendChoice::automatic;
  Report rep = diagnose(b, o, "test.json").report;
  // auto: CUDA when a device can run it, else the CPU
  std::string why;
  CHECK(rep.backend == (make_cuda_backend(&why) ? "cuda" : "cpu"));
  REQUIRE(rep.first_violation());
  CHECK(rep.first_violation()->id == "cu_seqlens.total");  // the cause first
  bool symptom = false;
  for (const auto& v : rep.violations) symptom = symptom || v.id == "attention.access";
  CHECK(symptom);  // ... and the symptom next to it
  int dynamic = 0;
  for (const auto& s : rep.stages) dynamic += s.name == Stage::attention || s.name == Stage::result;
  CHECK(dynamic == 2);
  o.backend = BackendChoice::none;
  rep = diagnose(b, o, "test.json").report;
  CHECK(rep.backend == "none");
  for (const auto& v : rep.violations) CHECK(v.stage != "attention");
  if (!make_cuda_backend(&why)) {  // no device (or not built): --backend cuda is exit 3
    o.backend = BackendChoice::cuda;
    CHECK_THROWS_AS(diagnose(b, o, "test.json"), CapabilityError);
  }
}

TEST_CASE("exec: diagnose returns the conversion, the plan and the report, typed", "[exec]") {
  // a Gemma-2 style mask reaching transformers 4.44.0: the replay, the rule set and release it
  // chose, the plan the CPU backend ran, and the report printed from them
  Batch b = load_batch_file(std::filesystem::path(ATTN_DOCTOR_SOURCE_DIR) / "repro_cases/gemma2-4.44.0-sliding-window-generate.json");
  CheckOptions o;
  o.backend = BackendChoice::cpu;
  Diagnosis d = diagnose(b, o, "gemma2.json");
  REQUIRE(d.conversion.replayed);
  REQUIRE(d.rule_set);
  CHECK(d.rule_set->name == "hf-4.44.0");
  CHECK(d.conversion.replayed->rule_set == d.rule_set->name);
  REQUIRE(d.transformers);
  CHECK(*d.transformers == version_literal("4.44.0"));
  REQUIRE(d.plan);
  CHECK(d.plan->path == d.conversion.effective()->path);
  CHECK(d.conversion.effective()->path == d.plan->path);
  REQUIRE(d.report.first_violation());
  CHECK(d.report.first_violation()->id == "mask.rank");
  // --backend none: no plan; a rule set asked for replaces the release the batch names
  o.backend = BackendChoice::none;
  o.rule_set = find_rule_set("hf-4.44.1");
  REQUIRE(o.rule_set);
  d = diagnose(b, o, "gemma2.json");
  CHECK_FALSE(d.plan);
  CHECK(d.rule_set == o.rule_set);
  CHECK_FALSE(d.transformers);
  CHECK(d.conversion.replayed->rule_set == "hf-4.44.1");
}

TEST_CASE("exec: max_seqlen_q == 1 turns causal off for every row the grid covers", "[exec]") {
  // H == Hk: not the swapped path; one CTA per segment computes its 3 rows without the mask
  nlohmann::json j = {{"format", "attn-doctor/batch@1"},
                      {"model", {{"num_heads", 2}, {"head_dim", 64}, {"dtype", "fp16"}}},
                      {"varlen", {{"cu_seqlens_q", {0, 3}}, {"max_seqlen_q", 1}}}};
  Batch b = batch_from(j);
  Run r = run_case(b, convert(b));
  INFO(r.describe());
  CHECK_FALSE(r.plan.attention.swapped);
  CHECK_FALSE(r.plan.attention.flags.causal);
  CHECK(r.ids.count("attention.coverage") == 0);  // all 3 rows are written...
  REQUIRE(r.ids.count("result.reference") == 1);  // ... but rows 0 and 1 see future keys
  for (const auto& v : r.result.violations)
    if (v.id == "result.reference") CHECK(v.evidence["rows_failed"] == 2);
}

TEST_CASE("exec: results do not depend on the number of threads", "[exec]") {
  for (const sweep::Case& c : sweep::broken_cases(5, 1)) {
    Batch b = sweep::load(c);
    Conversion cv = sweep::conversion_for(c, b);
    ExecOptions o1, o2;
    o1.threads = 1;
    o2.threads = 2;
    o1.seed = o2.seed = c.seed;
    Run a = run_case(b, cv, o1), z = run_case(b, cv, o2);
    INFO(c.name);
    REQUIRE(a.result.violations.size() == z.result.violations.size());
    for (size_t i = 0; i < a.result.violations.size(); ++i) {
      CHECK(a.result.violations[i].message == z.result.violations[i].message);
      CHECK(a.result.violations[i].evidence == z.result.violations[i].evidence);
    }
  }
}

TEST_CASE("exec: the LSE layout follows the flash-attn release", "[exec]") {
  nlohmann::json j = {{"format", "attn-doctor/batch@1"},
                      {"environment", {{"flash_attn", "2.5.8"}}},
                      {"model", {{"num_heads", 4}, {"head_dim", 64}}},
                      {"varlen", {{"cu_seqlens_q", {0, 10, 30}}, {"max_seqlen_q", 20}}}};
  Batch b = batch_from(j);
  ExecPlan p = make_exec_plan(b, convert(b), ExecOptions{});
  CHECK_FALSE(p.attention.unpadded_lse);
  CHECK(p.attention.lse_elements == 2 * 4 * 20);  // (N, H, max_seqlen_q)
  j["environment"]["flash_attn"] = "2.6.3";
  b = batch_from(j);
  p = make_exec_plan(b, convert(b), ExecOptions{});
  CHECK(p.attention.unpadded_lse);
  CHECK(p.attention.lse_elements == 4 * 30);  // (H, total_q)
  Run r = run_case(b, convert(b));
  CHECK(r.result.violations.empty());
}

// ---------------------------------------------------------------------------------------
// end to end with the transformers replay (tests/golden/batches, the replay lane's inputs)

namespace {
Diagnosis check_diagnosis(const std::string& rel) {
  Batch b = load_batch_file(std::string(ATTN_DOCTOR_SOURCE_DIR) + "/" + rel);
  CheckOptions o;
  o.backend = BackendChoice::cpu;
  o.exec.threads = 2;
  return diagnose(b, o, rel);
}
Report check_file(const std::string& rel) { return check_diagnosis(rel).report; }
VarlenPath path_of(const Diagnosis& d) { return d.conversion.effective()->path; }
bool has(const Report& r, const std::string& id) {
  for (const auto& v : r.violations)
    if (v.id == id) return true;
  return false;
}
const StageRecord* stage_of(const Report& r, Stage name) {
  for (const auto& s : r.stages)
    if (s.name == name) return &s;
  return nullptr;
}
}  // namespace

TEST_CASE("exec: end to end, a 4-D mask reaching _upad_input overruns the key gather", "[exec]") {
  for (const char* f : {"tests/golden/batches/013-mask-4d-additive.json", "tests/golden/batches/014-mask-4d-boolean.json",
                        "tests/golden/batches/054-gemma2-4.44.0-fa-call.json"}) {
    const Diagnosis d = check_diagnosis(f);
    const Report& r = d.report;
    INFO(f);
    CHECK(path_of(d) == VarlenPath::mask);
    CHECK(has(r, "unpad.gather"));
    REQUIRE(stage_of(r, Stage::unpad));
    CHECK(stage_of(r, Stage::unpad)->status == StageStatus::violation);
    CHECK(stage_of(r, Stage::attention)->detail.find("not reached") == 0);
    CHECK(exit_code_for(r, false) == 1);
  }
}

TEST_CASE("exec: end to end, correct replayed calls pass and silent bugs show in result.reference", "[exec]") {
  for (const char* f : {"tests/golden/batches/001-right-padding.json", "tests/golden/batches/002-left-padding.json",
                        "tests/golden/batches/016-gqa-right-padding.json", "tests/golden/batches/019-softcap-mask.json",
                        "tests/golden/batches/004-decode-left-padding.json"}) {
    Report r = check_file(f);
    INFO(f);
    CHECK(r.violations.empty());
    CHECK(stage_of(r, Stage::result)->facts.rows_checked.value_or(0) > 0);
  }
  // packed sequences reaching the dense kernel (B > 1 on a release that packs only B == 1):
  // silent cross-contamination, visible only against the intended sequences
  const Diagnosis packed = check_diagnosis("tests/golden/batches/025-packed-b2.json");
  Report r = packed.report;
  CHECK(path_of(packed) == VarlenPath::dense);
  CHECK(has(r, "result.reference"));
  // an all-ones mask wins over packed position ids: one segment per row
  r = check_file("tests/golden/batches/042-ones-mask-and-packed.json");
  CHECK(has(r, "result.reference"));
  // segment ids in the mask: sum != number of nonzero -> overrun of the packed tensor
  r = check_file("tests/golden/batches/008-segment-id-mask.json");
  CHECK(has(r, "cu_seqlens.total"));
  CHECK(has(r, "attention.access"));
}

// ---------------------------------------------------------------------------------------
// always an answer

// A cu_seqlens whose last segment runs a million rows past the tensors (cu [0, 4, 7, 1000012]
// on 12 rows, or the same in cu_seqlens_k only). What lies wholly past the tensors is counted,
// not run, on every stage, so each variant is answered in well under the 10 s every batch
// gets (on 2 cores), reports the refused accesses, and names the clipped segment.
TEST_CASE("exec: a phantom segment is answered within seconds, clipped to the tensors and reported", "[exec]") {
  struct Variant {
    const char* what;
    int64_t head_dim;
    bool causal;
    nlohmann::json rotary;
    bool keys_only;
    int64_t end = 1000012;  // cu_seqlens[-1]
    std::vector<int64_t> cu = {};  // instead of [0, 4, 7, end]
  };
  const std::vector<Variant> variants = {
      {"causal d64", 64, true, nullptr, false},
      {"non-causal d96", 96, false, nullptr, false},
      {"flash_attn rotary", 64, true, {{"implementation", "flash_attn"}, {"dim", 32}}, false},
      {"fla rotary", 64, true, {{"implementation", "fla"}, {"dim", 64}}, false},
      {"keys only, non-causal", 64, false, nullptr, true},
      {"int32 max, non-causal", 64, false, nullptr, false, 2147483647},
      {"int32 max, keys only", 64, false, nullptr, true, 2147483647},
      {"int32 max, fla rotary", 64, true, {{"implementation", "fla"}, {"dim", 64}}, false, 2147483647},
      {"every segment past q", 64, false, nullptr, false, 1000020, {20, 30, 1000020}},
  };
  for (const Variant& v : variants) {
    DYNAMIC_SECTION(v.what) {
      nlohmann::json j = {{"format", "attn-doctor/batch@1"},
                          {"model", {{"num_heads", 4}, {"num_kv_heads", 2}, {"head_dim", v.head_dim}, {"causal", v.causal}}}};
      if (v.keys_only)
        j["varlen"] = {{"cu_seqlens_q", {0, 4, 7, 12}},     {"cu_seqlens_k", {0, 4, 7, v.end}}, {"max_seqlen_q", 5},
                       {"max_seqlen_k", v.end - 7},         {"total_q", 12},                    {"total_k", 12}};
      else if (!v.cu.empty())
        j["varlen"] = {{"cu_seqlens_q", v.cu}, {"max_seqlen_q", v.end - v.cu[v.cu.size() - 2]}, {"total_q", 12}};
      else
        j["varlen"] = {{"cu_seqlens_q", {0, 4, 7, v.end}}, {"max_seqlen_q", v.end - 7}, {"total_q", 12}};
      if (!v.rotary.is_null()) j["rotary"] = v.rotary;
      const Batch b = batch_from(j);
      ExecOptions opt;
      opt.threads = 2;
      const auto t0 = std::chrono::steady_clock::now();
      const Run r = run_case(b, convert(b), opt);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      INFO(r.describe() << seconds << " s");
      CHECK(seconds < 10.0);
      CHECK(r.ids.count("attention.access"));
      if (!v.keys_only) {
        CHECK(r.stage(Stage::attention)->facts.ctas_past_rows.value_or(0) > 0);
        const std::string segment = v.cu.empty() ? "segment 2" : "segment 0";
        bool noted = false;
        for (const auto& n : r.plan.notes) noted = noted || n.find(segment + " of cu_seqlens_q ends at row ") == 0;
        CHECK(noted);
      }
      if (!v.rotary.is_null()) CHECK(r.ids.count("rotary.access"));
    }
  }
}

// The training sweep on the CPU (the GPU's twin runs it on the CUDA backend too): every valid
// batch as a training step reaches attention_backward ok and its dq, dk, dv within the
// gradient tolerance of the fp64 reference over the intended sequences, rotary included.
TEST_CASE("exec: sweep of generated valid training batches passes the gradient reference", "[exec][backward]") {
  const auto cases = sweep::valid_cases(20251125, 120);
  int judged = 0, rotary = 0;
  for (sweep::Case c : cases) {
    c.batch["pass"] = "training";
    Run r = run_sweep_case(c);
    INFO(c.name << "\n" << c.batch.dump() << "\n" << r.describe());
    REQUIRE(r.plan.skip_reason.empty());
    CHECK(r.result.violations.empty());
    const StageRecord* bw = r.stage(Stage::attention_backward);
    REQUIRE(bw);
    if (!r.plan.backward.skip_reason.empty()) continue;
    CHECK(bw->status == StageStatus::ok);
    if (!bw->facts.gradients) continue;
    ++judged;
    rotary += r.plan.rotary.enabled;
    for (const GradientCheckFact& g : *bw->facts.gradients) {
      CHECK(g.worst_error <= r.plan.backward.tolerance);
    }
  }
  CHECK(judged > 80);
  CHECK(rotary > 20);
}
