// The typed model of the call (vocab/api.hpp, KernelCall): each front-end names the API that
// received the call, its release and how the arguments were bound; the static runner runs an
// invariant only for a call of an API it declares.
#include "test_check_helpers.hpp"

#include "vocab/api.hpp"
#include "vocab/gpu_arch.hpp"

using namespace check_test;

TEST_CASE("api: ids, names and sets", "[api]") {
  SECTION("every id parses back to its API, and unknown ids do not parse") {
    REQUIRE(ad::api_names().size() == ad::kApiCount);
    for (size_t i = 0; i < ad::kApiCount; ++i) {
      const auto api = static_cast<ad::Api>(i);
      CHECK(ad::parse_api(ad::to_string(api)) == api);
    }
    CHECK_FALSE(ad::parse_api("flash_attn_varlen_func").has_value());
    CHECK_FALSE(ad::parse_api("").has_value());
  }
  SECTION("the report's function names are the callables' own names") {
    CHECK(ad::function_name(ad::Api::flash_attn_2_varlen) == "flash_attn_varlen_func");
    CHECK(ad::function_name(ad::Api::flash_attn_2_dense) == "flash_attn_func");
    CHECK(ad::function_name(ad::Api::flash_attn_3_varlen) == "flash_attn_varlen_func");
    CHECK(ad::qualified_name(ad::Api::flash_attn_3_varlen) == "flash_attn_interface.flash_attn_varlen_func");
    CHECK(ad::qualified_name(ad::Api::torch_varlen_attn) == "torch.nn.attention.varlen.varlen_attn");
  }
  SECTION("sets") {
    CHECK(ad::kFlashAttnApis.contains(ad::Api::flash_attn_4_varlen));
    CHECK_FALSE(ad::kFlashAttnApis.contains(ad::Api::te_dot_product_attention));
    CHECK_FALSE(ad::kFlashAttn2Apis.contains(ad::Api::flash_attn_3_varlen));
    CHECK(ad::kAllApis.members().size() == ad::kApiCount);
    CHECK(ad::to_string(ad::ApiSet{ad::Api::flash_attn_2_varlen, ad::Api::fla_ops}) == "flash_attn_2.varlen, fla.ops");
  }
  SECTION("a release's major picks the flash-attn family; no release is flash-attn 2") {
    CHECK(ad::flash_attn_api(std::nullopt, false) == ad::Api::flash_attn_2_varlen);
    CHECK(ad::flash_attn_api(ad::version_literal("2.8.3"), true) == ad::Api::flash_attn_2_dense);
    CHECK(ad::flash_attn_api(ad::version_literal("3.0.0b1"), false) == ad::Api::flash_attn_3_varlen);
    CHECK(ad::flash_attn_api(ad::version_literal("4.0.0b10"), true) == ad::Api::flash_attn_4_dense);
  }
}

TEST_CASE("api: GPU architectures parse as CUDA names them", "[api]") {
  for (const char* name : {"sm_80", "sm_86", "sm_90a", "sm_100a", "sm_100f", "sm_120", "sm_121"})
    CHECK(ad::to_string(*ad::parse_gpu_arch(name)) == name);
  CHECK(ad::parse_gpu_arch("sm_100a")->major == 10);
  CHECK(ad::parse_gpu_arch("sm_120")->minor == 0);
  for (const char* name : {"", "sm_", "sm_9", "sm_0", "sm_09", "sm_1000", "sm_90b", "SM_90", "compute_90", "sm_9a0"})
    CHECK_FALSE(ad::parse_gpu_arch(name).has_value());
}

TEST_CASE("api: each front-end names the API it models", "[api]") {
  SECTION("the explicit varlen block: flash-attn's varlen function of the environment's release, binding unknown") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "2.6.3"},
                     "model": {"num_heads": 8, "head_dim": 64}, "varlen": {"cu_seqlens_q": [0, 5, 9]}})");
    const ad::KernelCall& c = r.conversion.explicit_args->call;
    CHECK(c.api == ad::Api::flash_attn_2_varlen);
    REQUIRE(c.release);
    CHECK(c.release->text == "2.6.3");
    CHECK(c.binding.empty());
    auto fa3 = run(R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "3.0.0b1"},
                       "model": {"num_heads": 8, "head_dim": 64}, "varlen": {"cu_seqlens_q": [0, 5, 9]}})");
    CHECK(fa3.conversion.explicit_args->call.api == ad::Api::flash_attn_3_varlen);
  }
  SECTION("the explicit varlen block's call-site facts: api, seqused_q, window_size, binding, gpu_arch") {
    const char* text = R"({"format": "attn-doctor/batch@1",
                     "environment": {"flash_attn": "2.8.3", "gpu_arch": "sm_90a"},
                     "model": {"num_heads": 8, "head_dim": 64},
                     "varlen": {"cu_seqlens_q": [0, 5, 9], "api": "torch.varlen_attn", "seqused_q": [4, 4],
                                "window_size": [127, 3], "binding": "positional", "pack_gqa": true, "num_splits": 2}})";
    auto r = run(text);
    const ad::VarlenArgs& a = *r.conversion.explicit_args;
    CHECK(a.call.api == ad::Api::torch_varlen_attn);
    CHECK(a.call.function_name() == "varlen_attn");
    CHECK_FALSE(a.call.release.has_value());  // flash_attn's release is not torch's
    CHECK(a.call.window_left == 127);
    CHECK(a.call.window_right == 3);
    REQUIRE(a.seqused_q);
    CHECK(*a.seqused_q == std::vector<int64_t>{4, 4});
    ad::Batch b = ad::parse_batch_text(text, "test.json");
    REQUIRE(b.environment.gpu_arch);
    CHECK(ad::to_string(*b.environment.gpu_arch) == "sm_90a");
    CHECK(b.environment.gpu_arch->compute_capability() == 90);
    CHECK(b.varlen->binding == ad::Bound::positional);
    CHECK(b.varlen->pack_gqa == true);
    CHECK(b.varlen->num_splits == 2);
    SECTION("--flash-attn keeps the API the file names") {
      ad::Conversion c = ad::convert(b, {std::nullopt, ad::version_literal("3.0.0b1")});
      CHECK(c.explicit_args->call.api == ad::Api::torch_varlen_attn);
    }
    SECTION("a flash-attn API takes the environment's release") {
      ad::Batch fa3 = ad::parse_batch_text(R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "3.0.0b1"},
          "model": {"num_heads": 8, "head_dim": 64}, "varlen": {"cu_seqlens_q": [0, 5], "api": "flash_attn_3.varlen"}})", "t.json");
      ad::Conversion c = ad::convert(fa3, {});
      CHECK(c.explicit_args->call.api == ad::Api::flash_attn_3_varlen);
      CHECK(c.explicit_args->call.release->text == "3.0.0b1");
    }
  }
  SECTION("bad call-site facts are exit-2 errors naming the key") {
    auto bad = [](const char* env, const char* varlen) {
      std::string text = std::string(R"({"format": "attn-doctor/batch@1", "environment": )") + env +
                         R"(, "model": {"num_heads": 8, "head_dim": 64}, "varlen": )" + varlen + "}";
      try {
        ad::parse_batch_text(text, "bad.json");
      } catch (const ad::InputError& e) {
        return std::string(e.what());
      }
      return std::string("accepted");
    };
    CHECK_THAT(bad(R"({"gpu_arch": "sm_9"})", R"({"cu_seqlens_q": [0, 5]})"), Catch::Contains("/environment/gpu_arch"));
    CHECK_THAT(bad(R"({"gpu_arch": "hopper"})", R"({"cu_seqlens_q": [0, 5]})"), Catch::Contains("sm_90a"));
    CHECK_THAT(bad("{}", R"({"cu_seqlens_q": [0, 5], "api": "flash_attn_varlen_func"})"),
               Catch::Contains("torch.varlen_attn"));
    CHECK_THAT(bad("{}", R"({"cu_seqlens_q": [0, 5], "api": "flash_attn_2.dense"})"), Catch::Contains("takes cu_seqlens"));
    CHECK_THAT(bad("{}", R"({"cu_seqlens_q": [0, 5], "window_size": [3]})"), Catch::Contains("/varlen/window_size"));
    CHECK_THAT(bad("{}", R"({"cu_seqlens_q": [0, 5], "window_size": [-2, 0]})"), Catch::Contains("/varlen/window_size"));
    CHECK_THAT(bad("{}", R"({"cu_seqlens_q": [0, 5], "binding": "by_name"})"), Catch::Contains("/varlen/binding"));
  }
  const char* masked = R"({"format": "attn-doctor/batch@1", "environment": {"transformers": "4.46.3", "flash_attn": "2.6.3"},
      "model": {"num_heads": 8, "head_dim": 64},
      "batch": {"attention_mask": {"values": [[1, 1, 1, 1], [0, 0, 1, 1]]}}})";
  SECTION("a transformers release on the mask route: the varlen function, q/k/v by position, the rest by keyword") {
    auto r = run(masked, Replay::convert());
    REQUIRE(r.conversion.replayed);
    const ad::KernelCall& c = r.conversion.replayed->call;
    CHECK(r.conversion.replayed->library == "transformers");
    CHECK(c.api == ad::Api::flash_attn_2_varlen);
    CHECK(c.function_name() == "flash_attn_varlen_func");
    REQUIRE(c.binding.size() == 8);
    CHECK(c.binding[0] == ad::BoundArgument{"q", ad::Bound::positional});
    CHECK(c.binding[3] == ad::BoundArgument{"cu_seqlens_q", ad::Bound::keyword});
    CHECK(c.binding.back() == ad::BoundArgument{"causal", ad::Bound::keyword});
  }
  SECTION("a transformers release on the dense route: flash_attn_func") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "environment": {"transformers": "4.46.3"},
                     "model": {"num_heads": 8, "head_dim": 64}, "batch": {"batch_size": 2, "query_length": 4, "kv_length": 4}})",
                 Replay::convert());
    const ad::KernelCall& c = r.conversion.replayed->call;
    CHECK(c.api == ad::Api::flash_attn_2_dense);
    CHECK(c.function_name() == "flash_attn_func");
    CHECK_FALSE(c.release.has_value());
    CHECK(c.binding.size() == 4);
  }
  SECTION("FLA's attention layer and flash-attn's own unpad_input hand the varlen function their arguments") {
    ad::Batch b = ad::parse_batch_text(masked, "test.json");
    for (const char* name : {"fla-attn", "flash_attn-2.7"}) {
      const ad::RuleSetInfo* rules = ad::find_rule_set(name);
      REQUIRE(rules);
      ad::VarlenArgs a = ad::replay_with(b, *rules);
      INFO(name);
      CHECK(a.call.api == ad::Api::flash_attn_2_varlen);
      CHECK(a.call.binding.empty());  // user or library code whose binding the replay does not model
    }
  }
  SECTION("--flash-attn 3.x makes the replayed call FA3's") {
    ad::Batch b = ad::parse_batch_text(masked, "test.json");
    ad::Conversion c = ad::convert(b, {std::nullopt, ad::version_literal("3.0.0b1")});
    CHECK(c.replayed->call.api == ad::Api::flash_attn_3_varlen);
    CHECK(c.replayed->call.release->text == "3.0.0b1");
  }
}

TEST_CASE("api: an invariant runs only for a call of an API it declares", "[api][check]") {
  SECTION("max_seqlen.single_query is flash-attn 2's varlen swap: not run for a call of another API") {
    REQUIRE(ad::find_invariant("max_seqlen.single_query")->apis == ad::ApiSet{ad::Api::flash_attn_2_varlen});
    const char* json = R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "2.6.3"},
      "model": {"num_heads": 16, "num_kv_heads": 4, "head_dim": 64},
      "varlen": {"cu_seqlens_q": [0, 1, 1, 2], "cu_seqlens_k": [0, 10, 20, 30], "max_seqlen_q": 1, "max_seqlen_k": 10}})";
    auto fa2 = run(json);
    REQUIRE_ONLY(fa2, "max_seqlen.single_query");
    ad::Conversion other = fa2.conversion;
    other.explicit_args->call.api = ad::Api::te_dot_product_attention;
    CHECK(ad::run_static_checks(fa2.batch, other).empty());
  }
  SECTION("flash-attn's host checks are not run for a call of another API; the conversion's are") {
    const char* json = R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 512},
      "batch": {"attention_mask": {"values": [[1, 1, 1, 1, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1, 1, 1]]},
                "query_length": 1, "kv_length": 5}})";
    auto fa2 = run(json, Replay::convert());
    REQUIRE(fa2.has("input.head_dim"));
    REQUIRE(fa2.has("mask.kv_length"));
    ad::Conversion other = fa2.conversion;
    other.replayed->call.api = ad::Api::te_dot_product_attention;
    std::vector<ad::Violation> found = ad::run_static_checks(fa2.batch, other);
    bool head_dim = false, kv_length = false;
    for (const auto& v : found) {
      head_dim |= v.id == "input.head_dim";
      kv_length |= v.id == "mask.kv_length";
    }
    CHECK_FALSE(head_dim);
    CHECK(kv_length);
  }
}
