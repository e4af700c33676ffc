// flash-attn's host checks, one ordered table per release family (vocab/host_checks.hpp): the
// tables hold upstream's order and messages, and the execution plan, the static checks and
// the symptom table quote them.
#include "test_check_helpers.hpp"

#include "check/flash_attn_rules.hpp"
#include "exec/plan/plan.hpp"
#include "predict/predict.hpp"
#include "vocab/host_checks.hpp"

using namespace check_test;
using ad::HostCheck;

namespace {

std::vector<HostCheck> order(const ad::HostCheckTable& t, bool dense) {
  std::vector<HostCheck> out;
  for (const auto& e : t.entries)
    if (t.applies(e, dense)) out.push_back(e.check);
  return out;
}

ad::ExecPlan plan_of(const std::string& json) {
  ad::Batch b = ad::parse_batch_text(json, "test.json");
  return ad::make_exec_plan(b, ad::convert(b), ad::ExecOptions{});
}

}  // namespace

TEST_CASE("host checks: each family's table in upstream's order", "[host_checks]") {
  SECTION("FA2: mha_varlen_fwd and mha_fwd (v2.6.3 flash_api.cpp)") {
    const auto& t = ad::fa2_host_checks();
    CHECK(order(t, false) == std::vector<HostCheck>{
                                 HostCheck::q_dtype, HostCheck::k_dtype, HostCheck::v_dtype, HostCheck::cu_seqlens_q_dtype,
                                 HostCheck::cu_seqlens_k_dtype, HostCheck::cu_seqlens_q_device, HostCheck::cu_seqlens_k_device,
                                 HostCheck::softcap_dropout, HostCheck::batch_size_positive, HostCheck::head_dim_max,
                                 HostCheck::heads_divide, HostCheck::cu_seqlens_q_shape, HostCheck::cu_seqlens_k_shape,
                                 HostCheck::seqused_k_shape});
    // mha_fwd refuses softcap with dropout after the head checks
    CHECK(order(t, true) == std::vector<HostCheck>{HostCheck::q_dtype, HostCheck::k_dtype, HostCheck::v_dtype,
                                                   HostCheck::batch_size_positive, HostCheck::head_dim_max,
                                                   HostCheck::heads_divide, HostCheck::softcap_dropout});
    CHECK(t.message(HostCheck::cu_seqlens_q_dtype) == "cu_seqlens_q must have dtype int32");
    CHECK(t.find(HostCheck::cu_seqlens_q_dtype)->raised() == "RuntimeError: cu_seqlens_q must have dtype int32");
  }
  SECTION("FA3 checks each cu_seqlens' device before its dtype; FA4 asserts shapes first") {
    const auto& fa3 = ad::host_checks("fa3");
    CHECK(fa3.first_of({HostCheck::cu_seqlens_q_dtype, HostCheck::cu_seqlens_q_device})->check ==
          HostCheck::cu_seqlens_q_device);
    CHECK(ad::fa2_host_checks().first_of({HostCheck::cu_seqlens_q_dtype, HostCheck::cu_seqlens_q_device})->check ==
          HostCheck::cu_seqlens_q_dtype);
    const auto& fa4 = ad::host_checks("fa4");
    CHECK(fa4.entries.front().check == HostCheck::cu_seqlens_k_shape);
    CHECK(fa4.find(HostCheck::k_dtype)->raised() == "AssertionError: inputs must have the same dtype");
    CHECK(fa4.message(HostCheck::batch_size_positive).empty());
  }
  SECTION("every entry names its condition, message and source; every table is reachable from a rule set") {
    for (const auto& t : ad::host_check_tables())
      for (const auto& e : t.entries) {
        INFO(t.name);
        CHECK_FALSE(e.condition.empty());
        CHECK_FALSE(e.message.empty());
        CHECK_FALSE(e.type.empty());
        CHECK_FALSE(e.source.empty());
      }
    for (const auto& r : ad::flash_attn_rule_sets()) CHECK_NOTHROW(r.host_checks());
    CHECK_THROWS_AS(ad::host_checks("fa5"), std::logic_error);
  }
}

TEST_CASE("host checks: the first failing check in the family's order raises", "[host_checks][exec]") {
  // cu_seqlens_q both int64 and on the CPU: FA2 checks dtypes first, FA3 the device first
  const char* json = R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "%s"},
      "model": {"num_heads": 4, "head_dim": 64},
      "varlen": {"cu_seqlens_q": [0, 10], "max_seqlen_q": 10},
      "tensors": {"cu_seqlens_q": {"dtype": "int64", "device": "cpu"}}})";
  char buf[512];
  std::snprintf(buf, sizeof buf, json, "2.6.3");
  ad::ExecPlan fa2 = plan_of(buf);
  REQUIRE(fa2.attention.raises);
  CHECK(fa2.attention.raises->type == "RuntimeError");
  CHECK(fa2.attention.raises->message == "cu_seqlens_q must have dtype int32");
  std::snprintf(buf, sizeof buf, json, "3.0.0b1");
  ad::ExecPlan fa3 = plan_of(buf);
  REQUIRE(fa3.attention.raises);
  CHECK(fa3.attention.raises->message == "cu_seqlens_q must be on CUDA");
  SECTION("a head dim past 256 with GQA heads that do not divide: the head dim is checked first") {
    ad::ExecPlan p = plan_of(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 6, "num_kv_heads": 4, "head_dim": 320},
                               "varlen": {"cu_seqlens_q": [0, 10], "max_seqlen_q": 10}})");
    REQUIRE(p.attention.raises);
    CHECK(p.attention.raises->message == ad::fa2_host_checks().message(HostCheck::head_dim_max));
  }
}

TEST_CASE("host checks: the plan applies the release family's limits and messages", "[host_checks][exec]") {
  const char* json = R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "%s"},
      "model": {"num_heads": 4, "head_dim": 192}, "varlen": {"cu_seqlens_q": [0, 10], "max_seqlen_q": 10}})";
  char buf[512];
  std::snprintf(buf, sizeof buf, json, "1.0.9");  // FA1: head_size <= 128, one TORCH_CHECK with the alignment
  ad::ExecPlan fa1 = plan_of(buf);
  REQUIRE(fa1.attention.raises);
  CHECK(fa1.attention.raises->message == "Expected (head_size % 8 == 0) && (head_size <= 128) to be true, but got false.");
  std::snprintf(buf, sizeof buf, json, "2.6.3");
  CHECK_FALSE(plan_of(buf).attention.raises);
}

TEST_CASE("host checks: the static checks quote their release family's messages", "[host_checks][check]") {
  auto upstream = [](const char* fa, const char* model, const char* tensors) {
    char buf[1024];
    std::snprintf(buf, sizeof buf, R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "%s"},
        "model": {"num_heads": 8, "head_dim": 64%s}, "tensors": {%s}, "varlen": {"cu_seqlens_q": [0, 5, 9]}})",
                  fa, model, tensors);
    auto r = run(buf);
    INFO(r.describe());
    REQUIRE_FALSE(r.violations.empty());
    return r.violations.front().evidence.value("upstream_message", std::string());
  };
  CHECK(upstream("2.6.3", "", R"("v": {"dtype": "fp16"})") == "query and value must have the same dtype");
  CHECK(upstream("1.0.9", "", R"("v": {"dtype": "fp16"})") == "Expected v.dtype() == q_dtype to be true, but got false.");
  CHECK(upstream("4.0.0b0", "", R"("k": {"dtype": "fp16"})") == "inputs must have the same dtype");
  CHECK(upstream("3.0.0b1", "", R"("cu_seqlens_k": {"dtype": "int64"})") == "cu_seqlens_k must have dtype torch.int32");
  CHECK(upstream("4.0.0b0", "", R"("cu_seqlens_q": {"device": "cpu"})") == "inputs must be on CUDA device");
  CHECK(upstream("2.8.3", "", R"("cu_seqlens_q": {"device": "cpu"})") == "cu_seqlens_q must be on CUDA");
  SECTION("the symptom table's default rows are flash-attn 2's raises") {
    ad::SymptomContext ctx;
    auto s = ad::symptom_for("cu_seqlens.dtype", "", ctx);
    REQUIRE(s);
    CHECK(s->message == ad::fa2_host_checks().find(HostCheck::cu_seqlens_q_dtype)->raised());
  }
}

TEST_CASE("host checks: FLA's rotary TR >= T assertion, the plan and the static check by release", "[host_checks][exec]") {
  // four sequences (256 + 200 + 150 + 100 = 706 packed rows), a table of 256 rows
  const char* json = R"({"format": "attn-doctor/batch@1", "environment": {"fla": "%s"},
      "model": {"num_heads": 8, "head_dim": 128},
      "varlen": {"cu_seqlens_q": [0, 256, 456, 606, 706], "max_seqlen_q": 256},
      "rotary": {"implementation": "fla", "dim": 128, "table_length": 256, "varlen": true}})";
  char buf[768];
  auto message = [&](const char* fla) -> std::string {
    std::snprintf(buf, sizeof buf, json, fla);
    const ad::ExecPlan p = plan_of(buf);
    const std::string planned = p.rotary.raises ? p.rotary.raises->message : "";
    const auto checked = run(buf);
    const std::string quoted =
        checked.has("rotary.table") ? checked.get("rotary.table").evidence.value("upstream_message", "") : "";
    // one rule: the execution plan raises what the static check quotes (the int-offset assert
    // is a bare AssertionError: the plan names its condition)
    CHECK(planned == (quoted == "AssertionError" ? "seqlen_offsets + T <= TR" : quoted));
    return planned;
  };
  CHECK(message("0.1.2") == "");  // T = max_seqlen = 256 fits
  CHECK(message("0.2.2") == "TR must be >= T");
  CHECK(message("0.5.0") == "TR must be >= T, got 256 and 706");
  const ad::FlaRotaryTableAssert newest = ad::fla_rotary_table_assert(std::nullopt, true, 706, 256, 256);
  CHECK_FALSE(newest.makes);  // 0.6.0 keeps TR >= T only without cu_seqlens
  CHECK(ad::fla_rotary_table_assert(std::nullopt, false, 706, 0, 256).message == "TR must be >= T, got 256 and 706");
}
