// torch.nn.attention.varlen.varlen_attn (docs/spec/torch-varlen-attn.md): environment.torch
// selects the torch release's rules and host-check messages for a "torch.varlen_attn" call,
// never flash-attn's; FA2 varlen's invariants speak for it (PyTorch's bundled FA2).
#include "test_check_helpers.hpp"

#include "check/flash_attn_rules.hpp"
#include "exec/plan/plan.hpp"
#include "vocab/api.hpp"
#include "vocab/host_checks.hpp"
#include "vocab/signature.hpp"

using namespace check_test;

namespace {

std::string torch_call(const std::string& torch, const std::string& tensors, const std::string& model = "") {
  return R"({"format": "attn-doctor/batch@1", "environment": {)" + torch + R"("device": "cuda:0"},
      "model": {"num_heads": 8, "num_kv_heads": 2, "head_dim": 64)" + model + R"(},
      "varlen": {"api": "torch.varlen_attn", "cu_seqlens_q": [0, 6, 11, 16], "max_seqlen_q": 6,
                 "window_size": [-1, 0]})" + tensors + "}";
}

ad::ExecPlan plan_of(const std::string& json) {
  ad::Batch b = ad::parse_batch_text(json, "test.json");
  return ad::make_exec_plan(b, ad::convert(b), ad::ExecOptions{});
}

}  // namespace

TEST_CASE("torch varlen_attn: the release's rule set, nearest known with a note", "[torch_varlen]") {
  auto resolve = [](const char* v) { return ad::resolve_torch_varlen(ad::parse_version(v)); };
  CHECK(resolve("2.11.0+cu130").rules->name == "torch-2.11");
  CHECK(resolve("2.11.0+cu130").note.empty());
  CHECK(resolve("2.10.0").rules->name == "torch-2.10");
  CHECK_FALSE(resolve("2.10.0").rules->window);
  CHECK(resolve("2.11.1").note.empty());  // a patch release of a known one
  const auto newer = resolve("2.12.0");
  CHECK(newer.rules->name == "torch-2.11");
  CHECK(newer.note.find("not a known release") != std::string::npos);
  const auto older = resolve("2.9.1");
  CHECK(older.rules->name == "torch-2.10");
  CHECK(older.note.find("no torch.nn.attention.varlen") != std::string::npos);
  const auto none = ad::resolve_torch_varlen(std::nullopt);
  CHECK(none.rules->name == "torch-2.11");
  CHECK_FALSE(none.note.empty());
  for (const auto& r : ad::torch_varlen_rule_sets()) {
    CHECK(r.host_check_table == "torch-varlen");
    CHECK_FALSE(r.dropout);  // varlen_attn hard-codes dropout_p = 0
    CHECK_FALSE(r.softcap);
  }
}

TEST_CASE("torch varlen_attn: FA2's invariants with torch's messages", "[torch_varlen]") {
  SECTION("cu_seq on the CPU: the dispatcher's device message (measured, torch 2.11.0)") {
    Result r = run(torch_call(R"("torch": "2.11.0", )", R"(, "tensors": {"cu_seqlens_q": {"device": "cpu"}})"));
    INFO(r.describe());
    REQUIRE(r.has("cu_seqlens.device"));
    CHECK(r.get("cu_seqlens.device").evidence.value("upstream_message", "").find("wrapper_CUDA___flash_attention_forward") !=
          std::string::npos);
  }
  SECTION("int64 cu_seq: torch's int32 check (measured message)") {
    Result r = run(torch_call(R"("torch": "2.11.0", )", R"(, "tensors": {"cu_seqlens_q": {"dtype": "int64"}})"));
    INFO(r.describe());
    REQUIRE(r.has("cu_seqlens.dtype"));
    CHECK(r.get("cu_seqlens.dtype").evidence.value("upstream_message", "") == "cu_seqlens_q must have dtype int32");
  }
  SECTION("a healthy call has no violation; flash-attn's release in the environment changes nothing") {
    Result r = run(torch_call(R"("torch": "2.11.0", "flash_attn": "2.5.0", )", ""));
    INFO(r.describe());
    CHECK(r.violations.empty());
  }
}

TEST_CASE("torch varlen_attn: the plan raises torch's first failing check and says which contract", "[torch_varlen][exec]") {
  ad::ExecPlan p = plan_of(torch_call(R"("torch": "2.11.0", )",
                                      R"(, "tensors": {"cu_seqlens_q": {"dtype": "int64", "device": "cpu"}})"));
  REQUIRE(p.attention.raises);
  // torch's dispatcher checks the device before mha_varlen_fwd checks the dtype (FA2's order is the reverse)
  CHECK(p.attention.raises->message.find("cum_seq_q is on cpu") != std::string::npos);
  bool noted = false;
  for (const auto& n : p.notes) {
    CHECK(n.find("flash-attn release not given") == std::string::npos);
    noted |= n.find("torch.varlen_attn (2.11.0 (rule set torch-2.11))") != std::string::npos;
  }
  CHECK(noted);
}

TEST_CASE("list apis: every API with its releases and contract page", "[torch_varlen][api]") {
  const auto contracts = ad::api_contracts();
  REQUIRE(contracts.size() == ad::kApiCount);
  for (size_t i = 0; i < contracts.size(); ++i) CHECK(contracts[i].api == static_cast<ad::Api>(i));
  const auto& torch = contracts[static_cast<size_t>(ad::Api::torch_varlen_attn)];
  CHECK(torch.releases == "torch 2.10.0 - 2.11.0");
  CHECK(torch.page == "docs/spec/torch-varlen-attn.md");
}

TEST_CASE("torch varlen_attn: FA2 varlen's own invariants run for it (the bundled FA2 swaps single-query GQA too)",
          "[torch_varlen][api]") {
  const char* json = R"({"format": "attn-doctor/batch@1", "environment": {"torch": "2.11.0"},
      "model": {"num_heads": 16, "num_kv_heads": 4, "head_dim": 64},
      "varlen": {"api": "torch.varlen_attn", "cu_seqlens_q": [0, 1, 1, 2], "cu_seqlens_k": [0, 10, 20, 30],
                 "max_seqlen_q": 1, "max_seqlen_k": 10}})";
  Result r = run(json);
  INFO(r.describe());
  CHECK(r.has("max_seqlen.single_query"));
}

TEST_CASE("torch varlen_attn: an argument the release's signature does not take is its TypeError", "[torch_varlen][api]") {
  auto with = [](const std::string& torch, const std::string& extra) {
    return R"({"format": "attn-doctor/batch@1", "environment": {)" + torch + R"("device": "cuda:0"},
      "model": {"num_heads": 8, "num_kv_heads": 2, "head_dim": 64},
      "varlen": {"api": "torch.varlen_attn", "cu_seqlens_q": [0, 6, 11, 16], "max_seqlen_q": 6)" +
           extra + "}}";
  };
  SECTION("2.11 has no seqused_k (measured: oracle-torch-varlen-seqused-k)") {
    Result r = run(with(R"("torch": "2.11.0", )", R"(, "window_size": [-1, 0], "seqused_k": [6, 5, 5])"));
    INFO(r.describe());
    REQUIRE(r.has("input.feature"));
    CHECK(r.get("input.feature").evidence.value("upstream_message", "") ==
          "varlen_attn() got an unexpected keyword argument 'seqused_k'");
    REQUIRE(r.get("input.feature").symptom);
    CHECK(r.get("input.feature").symptom->outcome == ad::Outcome::raises);
  }
  SECTION("2.12 documents seqused_k: no TypeError; a later unknown release takes 2.12's signature") {
    for (const char* v : {R"("torch": "2.12.0", )", R"("torch": "2.14.1+cu130", )"}) {
      Result r = run(with(v, R"(, "window_size": [-1, 0], "seqused_k": [6, 5, 5])"));
      INFO(r.describe());
      CHECK_FALSE(r.has("input.feature"));
    }
  }
  SECTION("2.10 has no window_size (is_causal instead)") {
    Result r = run(with(R"("torch": "2.10.0", )", R"(, "window_size": [-1, 0])"));
    INFO(r.describe());
    REQUIRE(r.has("input.feature"));
    CHECK(r.get("input.feature").evidence.value("upstream_message", "") ==
          "varlen_attn() got an unexpected keyword argument 'window_size'");
  }
  SECTION("the 2.11 call without extra arguments is healthy") {
    Result r = run(with(R"("torch": "2.11.0", )", R"(, "window_size": [-1, 0])"));
    INFO(r.describe());
    CHECK(r.violations.empty());
  }
  SECTION("the execution plan raises the TypeError before anything runs") {
    ad::ExecPlan p = plan_of(with(R"("torch": "2.11.0", )", R"(, "seqused_k": [6, 5, 5], "cu_seqlens_k": [0, 6, 11, 17])"));
    REQUIRE(p.attention.raises);
    CHECK(p.attention.raises->type == "TypeError");
    CHECK(p.attention.raises->message == "varlen_attn() got an unexpected keyword argument 'seqused_k'");
  }
}

TEST_CASE("signatures: by release, keyword and positional errors", "[api]") {
  const ad::Signature* s211 = ad::signature_for(ad::Api::torch_varlen_attn, ad::version_literal("2.11.0+cu130"));
  REQUIRE(s211);
  CHECK(s211->first == "2.11.0");
  auto bind = [](const ad::Signature& s, std::vector<std::string> positional, std::vector<std::string> keywords) {
    return ad::bind_arguments(s, "varlen_attn", {std::move(positional), std::move(keywords)}).type_error;
  };
  const std::vector<std::string> seven = {"query", "key", "value", "cu_seq_q", "cu_seq_k", "max_q", "max_k"};
  CHECK_FALSE(bind(*s211, seven, {"window_size"}));
  CHECK(bind(*s211, seven, {"seqused_k"}) == "varlen_attn() got an unexpected keyword argument 'seqused_k'");
  CHECK(ad::signature_for(ad::Api::torch_varlen_attn, ad::version_literal("2.9.1")) == nullptr);  // no varlen_attn
  CHECK(ad::signature_for(ad::Api::torch_varlen_attn, ad::version_literal("2.13.0"))->first == "2.12.0");
  CHECK(ad::signature_for(ad::Api::flash_attn_2_varlen, ad::version_literal("2.8.3")) == nullptr);
  std::vector<std::string> eight = seven;
  eight.push_back("is_causal");
  CHECK(bind(*s211, eight, {}) == "varlen_attn() takes 7 positional arguments but 8 were given");
  const ad::Signature* s210 = ad::signature_for(ad::Api::torch_varlen_attn, ad::version_literal("2.10.0"));
  CHECK_FALSE(bind(*s210, eight, {}));  // is_causal may be the eighth
  CHECK_FALSE(bind(*s211, seven, {"scale"}));
}
