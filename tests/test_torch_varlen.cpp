// torch.nn.attention.varlen.varlen_attn (docs/spec/torch-varlen-attn.md): environment.torch
// selects the torch release's rules and host-check messages for a "torch.varlen_attn" call,
// never flash-attn's; FA2 varlen's invariants speak for it (PyTorch's bundled FA2).
#include "test_check_helpers.hpp"

#include "check/flash_attn_rules.hpp"
#include "exec/plan/plan.hpp"
#include "vocab/api.hpp"
#include "vocab/host_checks.hpp"
#include "vocab/signature.hpp"
#include "vocab/releases.hpp"

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
  // every release PyPI lists, read from its wheel: its own rule set, no note
  const std::vector<std::pair<const char*, const char*>> releases = {
      {"2.10.0", "torch-2.10"}, {"2.11.0", "torch-2.11"}, {"2.12.0", "torch-2.12"}, {"2.12.1", "torch-2.12"},
      {"2.13.0", "torch-2.12"}, {"2.14.0", "torch-2.14"}, {"2.14.1", "torch-2.14"}, {"2.15.0", "torch-2.15"}};
  REQUIRE(releases.size() == ad::published_releases("torch").releases.size());
  for (const auto& [release, rules] : releases) {
    INFO(release);
    CHECK(resolve(release).rules->name == std::string(rules));
    CHECK(resolve(release).note.empty());
  }
  const auto newer = resolve("2.16.0");
  CHECK(newer.rules->name == "torch-2.15");
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
  CHECK(torch.releases == "torch 2.10.0 - 2.15.0");
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
  SECTION("2.12.0 - 2.15.0 take seqused_k and enable_gqa (read from each wheel); a later unknown release takes their signature") {
    for (const char* v : {R"("torch": "2.12.0", )", R"("torch": "2.12.1", )", R"("torch": "2.13.0", )",
                          R"("torch": "2.14.0", )", R"("torch": "2.14.1+cu130", )", R"("torch": "2.15.0", )",
                          R"("torch": "2.16.0", )"}) {
      Result r = run(with(v, R"(, "window_size": [-1, 0], "seqused_k": [6, 5, 5], "enable_gqa": true)"));
      INFO(v << r.describe());
      CHECK_FALSE(r.has("input.feature"));
    }
  }
  SECTION("enable_gqa on 2.10 / 2.11 is their TypeError") {
    for (const char* v : {R"("torch": "2.10.0", )", R"("torch": "2.11.0", )"}) {
      Result r = run(with(v, R"(, "enable_gqa": true)"));
      INFO(v << r.describe());
      REQUIRE(r.has("input.feature"));
      CHECK(r.get("input.feature").evidence.value("upstream_message", "") ==
            "varlen_attn() got an unexpected keyword argument 'enable_gqa'");
    }
  }
  SECTION("from 2.12.0 a GQA call without enable_gqa is varlen_attn's ValueError (2.11 runs it)") {
    for (const char* v : {R"("torch": "2.12.0", )", R"("torch": "2.13.0", )", R"("torch": "2.14.1", )", R"("torch": "2.15.0", )"}) {
      Result r = run(with(v, R"(, "window_size": [-1, 0])"));
      INFO(v << r.describe());
      REQUIRE(r.has("input.feature"));
      CHECK(r.get("input.feature").evidence.value("upstream_message", "") ==
            "Expect query and key/value to have the same number of heads but got Hq=8 and Hkv=2. "
            "Try setting enable_gqa=True for GQA.");
      REQUIRE(r.get("input.feature").symptom);
      CHECK(r.get("input.feature").symptom->outcome == ad::Outcome::raises);
    }
    ad::ExecPlan p = plan_of(with(R"("torch": "2.12.0", )", R"(, "window_size": [-1, 0])"));
    REQUIRE(p.attention.raises);
    CHECK(p.attention.raises->type == "ValueError");
    Result ok = run(with(R"("torch": "2.12.0", )", R"(, "window_size": [-1, 0], "enable_gqa": false)"));
    CHECK(ok.has("input.feature"));  // passed as False: the same ValueError
    Result gqa = run(with(R"("torch": "2.12.0", )", R"(, "window_size": [-1, 0], "enable_gqa": true)"));
    INFO(gqa.describe());
    CHECK(gqa.violations.empty());
  }
  SECTION("enable_gqa=True with heads that do not divide: the release's other ValueError") {
    const std::string three = R"({"format": "attn-doctor/batch@1", "environment": {"torch": "2.14.0"},
      "model": {"num_heads": 8, "num_kv_heads": 3, "head_dim": 64},
      "varlen": {"api": "torch.varlen_attn", "cu_seqlens_q": [0, 6, 11, 16], "enable_gqa": true}})";
    Result r = run(three);
    INFO(r.describe());
    REQUIRE(r.has("input.feature"));
    CHECK(r.get("input.feature").evidence.value("upstream_message", "") ==
          "Expect number of query heads to be a multiple of kv heads for GQA but got Hq=8 and Hkv=3.");
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
  for (const char* v : {"2.12.0", "2.12.1", "2.13.0", "2.14.0", "2.14.1", "2.15.0"}) {
    INFO(v);
    const ad::Signature* s = ad::signature_for(ad::Api::torch_varlen_attn, ad::version_literal(v));
    REQUIRE(s);
    CHECK(s->first == "2.12.0");
    CHECK(s->source.find("torch 2.12.0 torch/nn/attention/varlen.py") == 0);
    CHECK_FALSE(bind(*s, seven, {"window_size", "enable_gqa", "seqused_k", "block_table", "num_splits", "return_aux", "scale"}));
    CHECK(bind(*s, seven, {"is_causal"}) == "varlen_attn() got an unexpected keyword argument 'is_causal'");
    std::vector<std::string> eight_args = seven;
    eight_args.push_back("scale");  // everything after max_k is keyword-only
    CHECK(bind(*s, eight_args, {}) == "varlen_attn() takes 7 positional arguments but 8 were given");
  }
  CHECK(ad::signature_for(ad::Api::flash_attn_2_varlen, ad::version_literal("2.8.3")) == nullptr);
  std::vector<std::string> eight = seven;
  eight.push_back("is_causal");
  CHECK(bind(*s211, eight, {}) == "varlen_attn() takes 7 positional arguments but 8 were given");
  const ad::Signature* s210 = ad::signature_for(ad::Api::torch_varlen_attn, ad::version_literal("2.10.0"));
  CHECK_FALSE(bind(*s210, eight, {}));  // is_causal may be the eighth
  CHECK_FALSE(bind(*s211, seven, {"scale"}));
}

TEST_CASE("torch varlen_attn: the backend each release selects (torch_backend)", "[torch_varlen]") {
  auto call = [](const std::string& torch, const std::string& arch, const std::string& varlen,
                 const std::string& model = R"("num_heads": 8, "num_kv_heads": 8, "head_dim": 64, "causal": false)") {
    return ad::parse_batch_text(R"({"format": "attn-doctor/batch@1", "environment": {"torch": ")" + torch + "\"" +
                                    (arch.empty() ? "" : R"(, "gpu_arch": ")" + arch + "\"") + R"(}, "model": {)" + model +
                                    R"(}, "varlen": {"api": "torch.varlen_attn", "cu_seqlens_q": [0, 200, 456], )" + varlen + "}}",
                                "test.json");
  };
  const std::string full = R"("max_seqlen_q": 256)";
  // 2.10 - 2.13: _should_use_cudnn returns False
  for (const char* v : {"2.10.0", "2.11.0", "2.12.1", "2.13.0"}) {
    INFO(v);
    CHECK_FALSE(ad::torch_backend(call(v, "sm_90", full)).cudnn);
  }
  // 2.14: SM90 / SM100, max_q > 128, non-causal, equal heads
  CHECK(ad::torch_backend(call("2.14.0", "sm_90", full)).cudnn);
  CHECK(ad::torch_backend(call("2.14.1", "sm_100a", full)).cudnn);
  CHECK_FALSE(ad::torch_backend(call("2.14.0", "sm_80", full)).cudnn);
  CHECK_FALSE(ad::torch_backend(call("2.14.0", "sm_120", full)).cudnn);
  CHECK_FALSE(ad::torch_backend(call("2.14.0", "sm_90", R"("max_seqlen_q": 128)")).cudnn);
  CHECK_FALSE(ad::torch_backend(call("2.14.0", "sm_90", full + R"(, "window_size": [-1, 0])")).cudnn);
  CHECK_FALSE(ad::torch_backend(call("2.14.0", "sm_90", full + R"(, "num_splits": 1)")).cudnn);
  CHECK_FALSE(ad::torch_backend(call("2.14.0", "sm_90", full + R"(, "enable_gqa": true)",
                                     R"("num_heads": 8, "num_kv_heads": 2, "head_dim": 64, "causal": false)")).cudnn);
  // 2.15: causal with one cu_seq (the batch gives no cu_seqlens_k), short queries, GQA admitted
  CHECK(ad::torch_backend(call("2.15.0", "sm_90", full + R"(, "window_size": [-1, 0])")).cudnn);
  CHECK_FALSE(ad::torch_backend(call("2.15.0", "sm_90", full + R"(, "window_size": [-1, 0], "cu_seqlens_k": [0, 200, 456])")).cudnn);
  CHECK(ad::torch_backend(call("2.15.0", "sm_90", R"("max_seqlen_q": 6)")).cudnn);
  CHECK(ad::torch_backend(call("2.15.0", "sm_90", full + R"(, "enable_gqa": true)",
                               R"("num_heads": 8, "num_kv_heads": 2, "head_dim": 64, "causal": false)")).cudnn);
  CHECK_FALSE(ad::torch_backend(call("2.15.0", "sm_90", full, R"("num_heads": 8, "num_kv_heads": 8, "head_dim": 256, "causal": false)")).cudnn);
  CHECK(ad::torch_backend(call("2.15.0", "sm_100", full, R"("num_heads": 8, "num_kv_heads": 8, "head_dim": 256, "causal": false)")).cudnn);
  // the model's causal mask when the batch records no window: a causal 2.14 call stays on FA2
  CHECK_FALSE(ad::torch_backend(call("2.14.0", "sm_90", full, R"("num_heads": 8, "num_kv_heads": 8, "head_dim": 64)")).cudnn);
  // no architecture: not known, said so
  const ad::TorchBackend unknown = ad::torch_backend(call("2.14.0", "", full));
  CHECK_FALSE(unknown.cudnn);
  CHECK_FALSE(unknown.known);
  CHECK(unknown.why.find("environment.gpu_arch not given") != std::string::npos);
}
