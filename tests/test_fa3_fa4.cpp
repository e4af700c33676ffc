// FlashAttention-3 and -4 where they differ from FA2: the host adjustments of the window
// (contract/fa2_forward.hpp normalize_fa3 / normalize_fa4), seqused_q in the CPU twin against an
// fp64 reference, the seqused_q.range check, the signature tables and Python's binding
// (vocab/signature.hpp), and the positional-binding advisory by release.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>

#include "check/advisories.hpp"
#include "check/check.hpp"
#include "check/flash_attn_rules.hpp"
#include "doctor/doctor.hpp"
#include "exec/cpu/cpu_kernels.hpp"
#include "exec/plan/plan.hpp"
#include "vocab/signature.hpp"

using namespace ad;

namespace {

Batch batch_from(const nlohmann::json& j) { return parse_batch_text(j.dump(), "test.json"); }

std::set<std::string> static_ids(const Batch& b) {
  CheckOptions o;
  o.backend = BackendChoice::none;
  const Diagnosis d = diagnose(b, o, "test.json");
  std::set<std::string> ids;
  for (const auto& v : d.report.violations) ids.insert(v.id);
  return ids;
}

// Attention of query row i of a segment over its keys in fp64: bottom-right aligned on
// (len_q, len_k); causal is right window 0; -1 is an unlimited side.
std::vector<double> attend(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                           int64_t H, int64_t Hk, int64_t D, int64_t q_row, int64_t k_start, int64_t i, int64_t len_q,
                           int64_t len_k, int64_t h, int64_t left, int64_t right) {
  int64_t lo = 0, hi = len_k;
  if (right >= 0) hi = std::min<int64_t>(hi, i + 1 + len_k - len_q + right);
  if (left >= 0) lo = std::max<int64_t>(lo, i + len_k - len_q - left);
  const int64_t kh = h / (H / Hk);
  const double scale = 1.0 / std::sqrt(double(D));
  std::vector<double> s;
  double m = -INFINITY;
  for (int64_t j = lo; j < hi; ++j) {
    double dot = 0;
    for (int64_t d = 0; d < D; ++d)
      dot += double(q[size_t((q_row * H + h) * D + d)]) * double(k[size_t(((k_start + j) * Hk + kh) * D + d)]);
    s.push_back(dot * scale);
    m = std::max(m, dot * scale);
  }
  std::vector<double> out(size_t(D), 0.0);
  double sum = 0;
  for (size_t t = 0; t < s.size(); ++t) sum += std::exp(s[t] - m);
  for (size_t t = 0; t < s.size(); ++t) {
    const double p = std::exp(s[t] - m) / sum;
    for (int64_t d = 0; d < D; ++d) out[size_t(d)] += p * double(v[size_t(((k_start + lo + int64_t(t)) * Hk + kh) * D + d)]);
  }
  return out;
}

}  // namespace

TEST_CASE("fa3/fa4: the host adjustments of causal and the window", "[fa3_fa4]") {
  using fa2::Call;
  SECTION("FA3 clamps the left window against max_seqlen_k - 1 and the right against max_seqlen_q - 1") {
    Call c{.max_seqlen_q = 8, .max_seqlen_k = 8, .num_heads = 4, .num_heads_k = 4, .head_dim = 64, .causal = false,
           .window_left = 7, .window_right = 7, .family = 3};
    fa2::Normalized n = fa2::normalize(c);
    CHECK_FALSE(n.local);  // both sides reach the whole segment: no window
    CHECK_FALSE(n.causal);
    c.family = 2;  // FA2 keeps them (clamps only at >= max_seqlen_k)
    CHECK(fa2::normalize(c).local);
    // a non-causal asymmetric window with right > 0 stays a local window
    c = {.max_seqlen_q = 64, .max_seqlen_k = 64, .num_heads = 4, .num_heads_k = 4, .head_dim = 64, .causal = false,
         .window_left = 5, .window_right = 2, .family = 3};
    n = fa2::normalize(c);
    CHECK(n.local);
    CHECK(n.window_left == 5);
    CHECK(n.window_right == 2);
    // (-1, 0) is causal in FA3, as in FA2
    c.window_left = -1;
    c.window_right = 0;
    CHECK(fa2::normalize(c).causal);
  }
  SECTION("FA3 has no single-query swap; FA2 swaps") {
    Call c{.max_seqlen_q = 1, .max_seqlen_k = 32, .num_heads = 8, .num_heads_k = 2, .head_dim = 64, .causal = true,
           .family = 3};
    CHECK_FALSE(fa2::normalize(c).swapped);
    c.family = 2;
    CHECK(fa2::normalize(c).swapped);
  }
  SECTION("FA4: (-1, 0) without causal=True is no window at all (the two sides sum below 0)") {
    Call c{.max_seqlen_q = 64, .max_seqlen_k = 64, .num_heads = 4, .num_heads_k = 4, .head_dim = 64, .causal = false,
           .window_left = -1, .window_right = 0, .family = 4};
    fa2::Normalized n = fa2::normalize(c);
    CHECK_FALSE(n.causal);
    CHECK_FALSE(n.local);
    c.causal = true;
    CHECK(fa2::normalize(c).causal);
    // no clamp against max_seqlen: a window past the segment stays a window
    c = {.max_seqlen_q = 8, .max_seqlen_k = 8, .num_heads = 4, .num_heads_k = 4, .head_dim = 64, .causal = false,
         .window_left = 100, .window_right = 3, .family = 4};
    n = fa2::normalize(c);
    CHECK(n.local);
    CHECK(n.window_left == 100);
    CHECK(n.window_right == 3);
  }
  SECTION("FA4 from 4.0.0b30: only both sides negative is no window; (-1, 0) is a window with no key") {
    Call c{.max_seqlen_q = 64, .max_seqlen_k = 64, .num_heads = 4, .num_heads_k = 4, .head_dim = 64, .causal = false,
           .window_left = -1, .window_right = 0, .family = 4, .fa4_literal_windows = true};
    fa2::Normalized n = fa2::normalize(c);
    CHECK_FALSE(n.causal);
    REQUIRE(n.local);
    CHECK(n.window_left == -1);  // taken as passed: row i sees keys i + 1 .. i
    CHECK(n.window_right == 0);
    const fa2::Flags f{.causal = n.causal, .local = n.local, .window_left = int32_t(n.window_left),
                       .window_right = int32_t(n.window_right), .block_m = 128, .block_n = 128};
    const fa2::KeyLimits k = fa2::row_keys(5, 64, 64, f);
    CHECK(k.hi == k.lo);  // no key
    // both negative: no window, causal as passed
    c.window_left = c.window_right = -1;
    n = fa2::normalize(c);
    CHECK_FALSE(n.local);
    CHECK_FALSE(n.causal);
    c.causal = true;
    CHECK(fa2::normalize(c).causal);
    // causal with a pair not both negative: right set to 0, the left side kept as passed
    c.window_left = 10;
    c.window_right = -1;
    n = fa2::normalize(c);
    CHECK(n.local);
    CHECK(n.window_left == 10);
    CHECK(n.window_right == 0);
    // before 4.0.0b30 the same causal call sums -1 + 0 for (-1, 3): no window, causal
    c = {.max_seqlen_q = 64, .max_seqlen_k = 64, .num_heads = 4, .num_heads_k = 4, .head_dim = 64, .causal = true,
         .window_left = -1, .window_right = 3, .family = 4};
    CHECK(fa2::normalize(c).causal);
    c.fa4_literal_windows = true;
    CHECK(fa2::normalize(c).local);
  }
}

TEST_CASE("fa4: window.fa4_resolution names a passed window FA4 reads otherwise than FA2", "[fa3_fa4]") {
  auto call = [](const char* release, nlohmann::json window, bool causal) {
    return batch_from({{"format", "attn-doctor/batch@1"},
                       {"environment", {{"flash_attn_4", release}}},
                       {"model", {{"num_heads", 4}, {"head_dim", 64}, {"dtype", "bf16"}, {"causal", causal}}},
                       {"varlen", {{"api", "flash_attn_4.varlen"}, {"cu_seqlens_q", {0, 8, 16}}, {"max_seqlen_q", 8},
                                   {"window_size", window}}}});
  };
  auto symptom_of = [](const Batch& b) -> std::string {
    CheckOptions o;
    o.backend = BackendChoice::none;
    const Diagnosis d = diagnose(b, o, "test.json");
    for (const auto& v : d.report.violations)
      if (v.id == "window.fa4_resolution") return v.symptom ? std::string(v.symptom->message) : "no symptom";
    return "";
  };
  // (-1, 0) without causal: full attention up to 4.0.0b29, no key from 4.0.0b30 (both measured)
  CHECK(symptom_of(call("4.0.0b19", {-1, 0}, false)).find("every key of its segment") != std::string::npos);
  CHECK(symptom_of(call("4.0.0b36", {-1, 0}, false)).find("zeros") != std::string::npos);
  // the same pair with causal=True is causal in both: nothing to report
  CHECK(symptom_of(call("4.0.0b19", {-1, 0}, true)).empty());
  CHECK(symptom_of(call("4.0.0b36", {-1, -1}, true)).empty());
  // non-negative pairs are read alike
  CHECK(symptom_of(call("4.0.0b36", {4, 2}, false)).empty());
  // causal=True with (-1, 3): causal up to 4.0.0b29, a window with no key from 4.0.0b30
  CHECK(symptom_of(call("4.0.0b26", {-1, 3}, true)).empty());
  CHECK_FALSE(symptom_of(call("4.0.0b30", {-1, 3}, true)).empty());
  // FA2's API: the invariant does not speak for it
  Batch fa2 = call("4.0.0b36", {-1, 0}, false);
  fa2.varlen->api = Api::flash_attn_2_varlen;
  CHECK(static_ids(fa2).count("window.fa4_resolution") == 0);
}

TEST_CASE("fa3: the CPU twin computes only the first seqused_q rows, aligned on them, against fp64", "[fa3_fa4]") {
  // two segments of 6 and 5 rows; seqused_q 4 and 5; a non-causal asymmetric window (2, 1)
  const int64_t H = 4, Hk = 2, D = 32, total = 11;
  for (const bool causal : {false, true}) {
    INFO("causal " << causal);
    nlohmann::json j = {{"format", "attn-doctor/batch@1"},
                        {"environment", {{"flash_attn", "3.0.0b1"}}},
                        {"model", {{"num_heads", H}, {"num_kv_heads", Hk}, {"head_dim", D}, {"dtype", "fp16"}, {"causal", causal}}},
                        {"varlen", {{"api", "flash_attn_3.varlen"}, {"cu_seqlens_q", {0, 6, 11}}, {"max_seqlen_q", 6},
                                    {"seqused_q", {4, 5}}, {"window_size", {2, causal ? 0 : 1}}}}};
    Batch b = batch_from(j);
    ExecPlan p = make_exec_plan(b, convert(b), ExecOptions{});
    REQUIRE(p.skip_reason.empty());
    REQUIRE_FALSE(p.attention.raises);
    CHECK(p.attention.family == 3);
    REQUIRE(p.attention.seqused_q);
    std::vector<float> q(size_t(total * H * D)), k(size_t(total * Hk * D)), v(size_t(total * Hk * D));
    std::vector<float> out(size_t(total * H * D), NAN), lse(size_t(H * total), NAN);
    for (size_t i = 0; i < q.size(); ++i) q[i] = num::input_value(3, num::InputTensor::q, i, ElemType::fp16);
    for (size_t i = 0; i < k.size(); ++i) k[i] = num::input_value(3, num::InputTensor::k, i, ElemType::fp16);
    for (size_t i = 0; i < v.size(); ++i) v[i] = num::input_value(3, num::InputTensor::v, i, ElemType::fp16);
    const cpu::AttentionResult r = cpu::fa2_varlen_forward(p, q.data(), k.data(), v.data(), out.data(), lse.data(), 2);
    CHECK_FALSE(r.access.has_first());
    const std::vector<uint8_t> past = p.attention.rows_past_seqused_q();
    for (int64_t row = 0; row < total; ++row) {
      const bool unused = row == 4 || row == 5;  // segment 0's rows past seqused_q[0] = 4
      CHECK(bool(past[size_t(row)]) == unused);
      CHECK((r.writes[size_t(row)] == 0) == unused);
      if (unused) {
        CHECK(std::isnan(out[size_t(row * H * D)]));  // left as the buffer held it
        continue;
      }
      const int64_t seg = row < 6 ? 0 : 1, start = seg == 0 ? 0 : 6, len_k = seg == 0 ? 6 : 5, used = seg == 0 ? 4 : 5;
      for (int64_t h = 0; h < H; ++h) {
        const std::vector<double> want =
            attend(q, k, v, H, Hk, D, row, start, row - start, used, len_k, h, 2, causal ? 0 : 1);
        for (int64_t d = 0; d < D; ++d) CHECK(std::fabs(out[size_t((row * H + h) * D + d)] - want[size_t(d)]) < 3e-3);
      }
    }
  }
}

TEST_CASE("fa3: a padded call through the whole pipeline: the rows past seqused_q are not a violation", "[fa3_fa4]") {
  nlohmann::json j = {{"format", "attn-doctor/batch@1"},
                      {"environment", {{"flash_attn", "3.0.0b1"}}},
                      {"model", {{"num_heads", 4}, {"head_dim", 64}, {"dtype", "bf16"}}},
                      {"varlen", {{"api", "flash_attn_3.varlen"}, {"cu_seqlens_q", {0, 8, 16}}, {"max_seqlen_q", 8},
                                  {"seqused_q", {5, 8}}, {"seqused_k", {5, 8}}}}};
  Batch b = batch_from(j);
  CheckOptions o;
  o.backend = BackendChoice::cpu;
  const Diagnosis d = diagnose(b, o, "test.json");
  for (const auto& v : d.report.violations) {
    INFO(v.id << ": " << v.message);
    CHECK(v.severity != Severity::error);
  }
  // the intent is the used rows: 5 + 8 of 16
  CHECK(b.intent.sequences.size() == 2);
  CHECK(b.intent.sequences[0].length == 5);

  // seqused_q without seqused_k: the diagonal aligns on (5 query rows, 8 keys), so the used rows
  // see the 3 padding keys (FA3's bottom-right alignment on the used lengths)
  j["varlen"].erase("seqused_k");
  Batch no_k = batch_from(j);
  const Diagnosis wrong = diagnose(no_k, o, "test.json");
  std::set<std::string> ids;
  for (const auto& v : wrong.report.violations) ids.insert(v.id);
  CHECK(ids.count("result.reference") == 1);
  CHECK(ids.count("attention.coverage") == 0);
  CHECK(ids.count("result.finite") == 0);
}

TEST_CASE("fa3/fa4: seqused_q.range for the APIs that take seqused_q", "[fa3_fa4]") {
  auto call = [](const char* api, nlohmann::json used) {
    return batch_from({{"format", "attn-doctor/batch@1"},
                       {"model", {{"num_heads", 4}, {"head_dim", 64}, {"dtype", "bf16"}}},
                       {"varlen", {{"api", api}, {"cu_seqlens_q", {0, 8, 16}}, {"max_seqlen_q", 8}, {"seqused_q", used}}}});
  };
  CHECK(static_ids(call("flash_attn_3.varlen", {5, 8})).count("seqused_q.range") == 0);
  CHECK(static_ids(call("flash_attn_3.varlen", {9, 8})).count("seqused_q.range") == 1);   // past its segment
  CHECK(static_ids(call("flash_attn_4.varlen", {-1, 8})).count("seqused_q.range") == 1);  // negative
  CHECK(static_ids(call("flash_attn_3.varlen", {5})).count("seqused_q.range") == 1);      // one entry for two
  // FA2's flash_attn_varlen_func has no seqused_q: the invariant does not speak for it
  CHECK(static_ids(call("flash_attn_2.varlen", {9, 8})).count("seqused_q.range") == 0);
  // the shape: the host check FA3 raises (its rules need its release)
  Batch b = call("flash_attn_3.varlen", {5});
  b.environment.flash_attn = version_literal("3.0.0b1");
  ExecPlan p = make_exec_plan(b, convert(b), ExecOptions{});
  REQUIRE(p.attention.raises);
  CHECK(p.attention.raises->message == "seqused_q must have shape (batch_size)");
}

TEST_CASE("signatures: Python's binding against each release's table", "[fa3_fa4]") {
  const Signature* b8 = signature_for(Api::flash_attn_4_varlen, version_literal("4.0.0b8"));
  const Signature* b9 = signature_for(Api::flash_attn_4_varlen, version_literal("4.0.0b9"));
  const Signature* b36 = signature_for(Api::flash_attn_4_varlen, version_literal("4.0.0b36"));
  REQUIRE(b8);
  REQUIRE(b9);
  REQUIRE(b36);
  CHECK(b8->parameters[3].name == "cu_seqlens_q");
  CHECK(b9->parameters[3].name == "qv");
  CHECK(b36->first == "4.0.0b32");
  // 4.0.0b3, the first wheel, has b4's table; before it only the copy flash-attn 2.8.3 bundles
  CHECK(signature_for(Api::flash_attn_4_varlen, version_literal("4.0.0b3")) == b8);
  CHECK(signature_for(Api::flash_attn_4_varlen, version_literal("2.8.2")) == nullptr);  // before the first table
  // a flash-attn-4 release before every wheel (the fa4 beta0 tag) is no bundled copy
  CHECK(signature_for(Api::flash_attn_4_varlen, version_literal("4.0.0b0")) == nullptr);
  CHECK(signature_for(Api::flash_attn_2_varlen, version_literal("2.6.3")) == nullptr);

  const CallArguments positional{{"q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k"}, {"causal"}};
  const Binding old = bind_arguments(*b8, "flash_attn_varlen_func", positional);
  CHECK_FALSE(old.type_error);
  CHECK(old.moved.empty());
  const Binding now = bind_arguments(*b9, "flash_attn_varlen_func", positional);
  CHECK_FALSE(now.type_error);
  REQUIRE(now.moved.size() == 4);
  CHECK(now.moved[0] == BoundPair{"qv", "cu_seqlens_q", Bound::positional});
  CHECK(now.moved[2] == BoundPair{"cu_seqlens_k", "max_seqlen_q", Bound::positional});

  const Signature* fa3 = signature_for(Api::flash_attn_3_varlen, std::nullopt);
  REQUIRE(fa3);
  // FA3 has no dropout: Python's message
  CHECK(bind_arguments(*fa3, "flash_attn_varlen_func", {{"q", "k", "v"}, {"cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q",
                                                                             "max_seqlen_k", "dropout_p"}})
            .type_error == "flash_attn_varlen_func() got an unexpected keyword argument 'dropout_p'");
  CHECK(bind_arguments(*fa3, "flash_attn_varlen_func", {{"q", "k", "v"}, {"cu_seqlens_q", "cu_seqlens_k"}}).type_error ==
        "flash_attn_varlen_func() missing 2 required positional arguments: 'max_seqlen_q' and 'max_seqlen_k'");
  CHECK(bind_arguments(*fa3, "flash_attn_varlen_func", {{"q", "k", "v", "a", "b", "c", "d"}, {"q"}}).type_error ==
        "flash_attn_varlen_func() got multiple values for argument 'q'");
  std::vector<std::string> many(30, "x");
  CHECK(bind_arguments(*fa3, "flash_attn_varlen_func", {many, {}}).type_error ==
        "flash_attn_varlen_func() takes from 7 to 23 positional arguments but 30 were given");
  // every table names its source and starts with q, k, v (torch: query, key, value)
  for (const Signature& s : signatures()) {
    INFO(s.source);
    CHECK_FALSE(s.source.empty());
    REQUIRE(s.parameters.size() >= 3);
    CHECK(s.parameters[0].name == (s.api == Api::torch_varlen_attn ? "query" : "q"));
  }
}

TEST_CASE("advisories: the positional binding matches from 4.0.0b9, where qv became the 4th parameter", "[fa3_fa4]") {
  auto run = [](const char* release) {
    Batch b = batch_from({{"format", "attn-doctor/batch@1"},
                          {"environment", {{"flash_attn_4", release}}},
                          {"model", {{"num_heads", 4}, {"head_dim", 64}, {"dtype", "bf16"}}},
                          {"varlen", {{"api", "flash_attn_4.varlen"}, {"cu_seqlens_q", {0, 8, 16}}, {"max_seqlen_q", 8},
                                      {"binding", "positional"}}}});
    return match_advisories(b, convert(b));
  };
  CHECK(run("4.0.0b8").empty());
  const auto m = run("4.0.0b9");
  REQUIRE(m.size() == 1);
  CHECK(m[0].advisory->id == "FA-2026-003");
  CHECK(m[0].why.find("max_seqlen_q binds to cu_seqlens_k") != std::string::npos);
}

TEST_CASE("flash_attn_cute: the copy bundled in flash-attn 2.8.3 has no varlen backward", "[fa3_fa4]") {
  auto call = [](nlohmann::json environment, const char* pass, nlohmann::json varlen_extra = nlohmann::json::object()) {
    nlohmann::json varlen = {{"api", "flash_attn_4.varlen"}, {"cu_seqlens_q", {0, 8, 24}}};
    varlen.update(varlen_extra);
    return batch_from({{"format", "attn-doctor/batch@1"},
                       {"pass", pass},
                       {"environment", environment},
                       {"model", {{"num_heads", 4}, {"head_dim", 64}, {"dtype", "bf16"}}},
                       {"varlen", varlen}});
  };
  auto diagnosis = [](const Batch& b) {
    CheckOptions o;
    o.backend = BackendChoice::none;
    return diagnose(b, o, "test.json");
  };
  const nlohmann::json cute = {{"flash_attn", "2.8.3"}, {"flash_attn_cute", "2.8.3"}, {"gpu_arch", "sm_100a"}};
  const Batch training = call(cute, "training");
  // the copy names its release; its rules are FA4's, labelled with the copy
  REQUIRE(kernel_release(training));
  CHECK(kernel_release(training)->text == "2.8.3");
  const ResolvedFlashAttn rules = resolve_flash_attn_cute(*kernel_release(training));
  CHECK(rules.rules->family == 4);
  CHECK(rules.rules->name == "fa4-cute-2.8.3");
  CHECK(rules.label() == "2.8.3 (rule set fa4-cute-2.8.3)");

  const Diagnosis d = diagnosis(training);
  const Violation* feature = nullptr;
  for (const auto& v : d.report.violations)
    if (v.id == "input.feature") feature = &v;
  REQUIRE(feature);
  CHECK(feature->severity == Severity::error);
  CHECK(feature->evidence.value("feature", "") == "varlen_backward");
  CHECK(feature->evidence.value("needs", "").find("flash-attn-4 >= 4.0.0b3 on SM100") != std::string::npos);
  REQUIRE(feature->symptom);
  CHECK(feature->symptom->outcome == Outcome::raises);
  CHECK(feature->symptom->pass == Pass::backward);
  CHECK(feature->symptom->message ==
        "NotImplementedError: Backward pass for FlashAttention with variable length sequences is not implemented yet.");
  CHECK(feature->symptom->basis == "model");
  REQUIRE(d.report.prediction);
  CHECK(d.report.prediction->symptom.outcome == Outcome::raises);
  CHECK(d.report.prediction->invariant == "input.feature");

  // the forward alone, the dense API and a flash-attn-4 wheel over the copy have a backward to run
  CHECK(static_ids(call(cute, "forward")).count("input.feature") == 0);
  CHECK(static_ids(call({{"flash_attn", "2.8.3"}, {"flash_attn_4", "4.0.0b3"}, {"gpu_arch", "sm_100a"}}, "training"))
            .count("input.feature") == 0);
  // the copy takes no max_seqlen: one the file passes is a TypeError in the forward, and the
  // backward's refusal is not reported for a call that never ran
  const Diagnosis typed = diagnosis(call(cute, "training", {{"max_seqlen_q", 16}}));
  const Violation* type_error = nullptr;
  int features = 0;
  for (const auto& v : typed.report.violations)
    if (v.id == "input.feature") {
      ++features;
      type_error = &v;
    }
  CHECK(features == 1);
  REQUIRE(type_error);
  CHECK(type_error->evidence.value("feature", "") == "signature");
  CHECK(type_error->message.find("unexpected keyword argument 'max_seqlen_q'") != std::string::npos);
  // no flash-attn advisory speaks for the copy (FA-2026-003 would for a 4.x positional call)
  const Batch positional = call(cute, "forward", {{"binding", "positional"}});
  CHECK(match_advisories(positional, convert(positional)).empty());
}

TEST_CASE("flash_attn_cute: signatures of the copy and of flash-attn-4 4.0.0b3", "[fa3_fa4]") {
  const Signature* copy = signature_for(Api::flash_attn_4_varlen, version_literal("2.8.3.post2"));
  REQUIRE(copy);
  CHECK(copy->source.find("flash-attn 2.8.3") != std::string_view::npos);
  CHECK(std::none_of(copy->parameters.begin(), copy->parameters.end(),
                     [](const Parameter& p) { return p.name == "max_seqlen_q"; }));
  // 4.0.0b3, the first flash-attn-4 wheel, has 4.0.0b4's lists (read in both wheels)
  const Signature* b3 = signature_for(Api::flash_attn_4_varlen, version_literal("4.0.0b3"));
  REQUIRE(b3);
  CHECK(b3->source.find("flash-attn-4 4.0.0b3") != std::string_view::npos);
  CHECK(b3 == signature_for(Api::flash_attn_4_varlen, version_literal("4.0.0b8")));
  const Signature* dense = signature_for(Api::flash_attn_4_dense, version_literal("2.8.3"));
  REQUIRE(dense);
  CHECK(dense->parameters.size() == 9);
}
