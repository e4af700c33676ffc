// Invariants 1-5 (static: inputs). For each: a batch that breaks exactly it, one where it
// holds, one where an earlier invariant wins; plus the release-dependent severities.
#include "test_check_helpers.hpp"

using namespace check_test;

TEST_CASE("input.dtype: q/k/v share one dtype the release supports", "[check]") {
  SECTION("fp32 q on FA2 breaks exactly it, with the host check's message") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "2.6.3"},
                     "model": {"num_heads": 8, "head_dim": 64, "dtype": "fp32"},
                     "varlen": {"cu_seqlens_q": [0, 5, 9]}})");
    REQUIRE_ONLY(r, "input.dtype");
    CHECK(r.violations[0].severity == ad::Severity::error);
    CHECK(r.violations[0].evidence["upstream_message"] == "FlashAttention only support fp16 and bf16 data type");
  }
  SECTION("k in another dtype than q: \"query and key must have the same dtype\"") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64, "dtype": "bf16"},
                     "tensors": {"k": {"dtype": "fp16"}}, "varlen": {"cu_seqlens_q": [0, 5, 9]}})");
    REQUIRE_ONLY(r, "input.dtype");
    CHECK(r.violations[0].evidence["upstream_message"] == "query and key must have the same dtype");
  }
  SECTION("fp8 is an error on FA2 and holds on FA3") {
    const char* fp8 = R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "%s"},
                          "model": {"num_heads": 8, "head_dim": 64, "dtype": "fp8_e4m3"},
                          "varlen": {"cu_seqlens_q": [0, 5, 9]}})";
    char buf[512];
    std::snprintf(buf, sizeof buf, fp8, "2.8.3");
    REQUIRE_ONLY(run(buf), "input.dtype");
    std::snprintf(buf, sizeof buf, fp8, "3.0.0b1");
    REQUIRE_CLEAN(run(buf));
  }
  SECTION("bf16 holds") {
    REQUIRE_CLEAN(run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                          "varlen": {"cu_seqlens_q": [0, 5, 9]}})"));
  }
  SECTION("no invariant precedes it: it is number 1 of the catalogue") {
    REQUIRE(ad::catalogue().front().id == "input.dtype");
  }
}

TEST_CASE("input.head_dim: within the release's limits", "[check]") {
  SECTION("320 breaks exactly it") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 320},
                     "varlen": {"cu_seqlens_q": [0, 5, 9]}})");
    REQUIRE_ONLY(r, "input.head_dim");
    CHECK(r.violations[0].severity == ad::Severity::error);
    CHECK(r.violations[0].evidence["upstream_message"] == "FlashAttention forward only supports head dimension at most 256");
  }
  SECTION("100 is padded silently by FA2 (warning: in C++ before 2.7, in Python from 2.7) and rejected by FA3") {
    const char* json = R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "%s"},
                           "model": {"num_heads": 8, "head_dim": 100}, "varlen": {"cu_seqlens_q": [0, 5, 9]}})";
    char buf[512];
    std::snprintf(buf, sizeof buf, json, "2.6.3");
    auto fa26 = run(buf);
    REQUIRE_ONLY(fa26, "input.head_dim");
    CHECK(fa26.violations[0].severity == ad::Severity::warning);
    CHECK_THAT(fa26.violations[0].message, Catch::Contains("in C++"));
    std::snprintf(buf, sizeof buf, json, "2.7.0.post2");
    auto fa27 = run(buf);
    REQUIRE_ONLY(fa27, "input.head_dim");
    CHECK_THAT(fa27.violations[0].message, Catch::Contains("in Python"));
    std::snprintf(buf, sizeof buf, json, "3.0.0b1");
    auto fa3 = run(buf);
    REQUIRE_ONLY(fa3, "input.head_dim");
    CHECK(fa3.violations[0].severity == ad::Severity::error);
    CHECK(fa3.violations[0].evidence["upstream_message"] == "head_size should be a multiple of 8");
  }
  SECTION("FA1 stops at 128") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "1.0.9"},
                     "model": {"num_heads": 8, "head_dim": 192}, "varlen": {"cu_seqlens_q": [0, 5, 9]}})");
    REQUIRE_ONLY(r, "input.head_dim");
    CHECK(r.violations[0].evidence["max_head_dim"] == 128);
  }
  SECTION("256 holds") {
    REQUIRE_CLEAN(run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 256},
                          "varlen": {"cu_seqlens_q": [0, 5, 9]}})"));
  }
  SECTION("an fp32 q is reported first") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 320, "dtype": "fp32"},
                     "varlen": {"cu_seqlens_q": [0, 5, 9]}})");
    REQUIRE_EARLIER_WINS(r, "input.dtype", "input.head_dim");
  }
}

TEST_CASE("input.gqa: num_heads is a multiple of num_kv_heads", "[check]") {
  SECTION("12 heads over 5 kv heads breaks exactly it") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 12, "num_kv_heads": 5, "head_dim": 64},
                     "varlen": {"cu_seqlens_q": [0, 5, 9]}})");
    REQUIRE_ONLY(r, "input.gqa");
    CHECK(r.violations[0].evidence["upstream_message"] == "Number of heads in key/value must divide number of heads in query");
  }
  SECTION("FA1 has no GQA at all; FA4 words it differently") {
    auto fa1 = run(R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "1.0.9"},
                       "model": {"num_heads": 16, "num_kv_heads": 4, "head_dim": 64}, "varlen": {"cu_seqlens_q": [0, 5, 9]}})");
    REQUIRE_ONLY(fa1, "input.gqa");
    auto fa4 = run(R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "4.0.0b3"},
                       "model": {"num_heads": 12, "num_kv_heads": 5, "head_dim": 64}, "varlen": {"cu_seqlens_q": [0, 5, 9]}})");
    REQUIRE_ONLY(fa4, "input.gqa");
    CHECK(fa4.violations[0].evidence["upstream_message"] == "num_head must be divisible by num_head_kv");
  }
  SECTION("16 over 4 holds") {
    REQUIRE_CLEAN(run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 16, "num_kv_heads": 4, "head_dim": 64},
                          "varlen": {"cu_seqlens_q": [0, 5, 9]}})"));
  }
  SECTION("a head dim past the limit is reported first") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 12, "num_kv_heads": 5, "head_dim": 512},
                     "varlen": {"cu_seqlens_q": [0, 5, 9]}})");
    REQUIRE_EARLIER_WINS(r, "input.head_dim", "input.gqa");
  }
}

TEST_CASE("input.feature: requested features exist in the release", "[check]") {
  SECTION("a sliding window on flash-attn 2.2.5 (no window_size) over longer key ranges: error") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "2.2.5"},
                     "model": {"num_heads": 8, "head_dim": 64, "sliding_window": 4},
                     "varlen": {"cu_seqlens_q": [0, 10, 13]}})");
    REQUIRE_ONLY(r, "input.feature");
    CHECK(r.violations[0].severity == ad::Severity::error);
    CHECK(r.violations[0].evidence["longest_key_range"] == 10);
  }
  SECTION("... and a warning when no key range is longer than the window") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "2.2.5"},
                     "model": {"num_heads": 8, "head_dim": 64, "sliding_window": 16},
                     "varlen": {"cu_seqlens_q": [0, 10, 13]}})");
    REQUIRE_ONLY(r, "input.feature");
    CHECK(r.violations[0].severity == ad::Severity::warning);
  }
  SECTION("softcap before 2.6.0: TypeError with transformers <= 4.54, dropped silently with 4.55") {
    auto old_tf = run(R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "2.5.8", "transformers": "4.44.0"},
                          "model": {"num_heads": 8, "head_dim": 64, "softcap": 50.0},
                          "varlen": {"cu_seqlens_q": [0, 5, 9]}})");
    REQUIRE_ONLY(old_tf, "input.feature");
    CHECK(old_tf.violations[0].evidence["upstream_message"] ==
          "flash_attn_varlen_func() got an unexpected keyword argument 'softcap'");
    auto new_tf = run(R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "2.5.8", "transformers": "4.55.4"},
                          "model": {"num_heads": 8, "head_dim": 64, "softcap": 50.0},
                          "varlen": {"cu_seqlens_q": [0, 5, 9]}})");
    REQUIRE_ONLY(new_tf, "input.feature");
    CHECK_THAT(new_tf.violations[0].message, Catch::Contains("silently"));
  }
  SECTION("softcap with dropout on 2.6.3 raises") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "2.6.3"},
                     "model": {"num_heads": 8, "head_dim": 64, "softcap": 50.0, "dropout": 0.1},
                     "varlen": {"cu_seqlens_q": [0, 5, 9]}})");
    REQUIRE_ONLY(r, "input.feature");
    CHECK(r.violations[0].evidence["upstream_message"] == "Softcapping does not support dropout for now");
  }
  SECTION("dropout on FA3 (no dropout argument) is a warning") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "3.0.0b1"},
                     "model": {"num_heads": 8, "head_dim": 64, "dropout": 0.1}, "varlen": {"cu_seqlens_q": [0, 5, 9]}})");
    REQUIRE_ONLY(r, "input.feature");
    CHECK(r.violations[0].severity == ad::Severity::warning);
  }
  SECTION("softcap on 2.6.0 and a window on 2.3.0 hold") {
    REQUIRE_CLEAN(run(R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "2.6.0"},
                          "model": {"num_heads": 8, "head_dim": 64, "softcap": 30.0}, "varlen": {"cu_seqlens_q": [0, 5, 9]}})"));
    REQUIRE_CLEAN(run(R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "2.3.0"},
                          "model": {"num_heads": 8, "head_dim": 64, "sliding_window": 4},
                          "varlen": {"cu_seqlens_q": [0, 10, 13]}})"));
  }
  SECTION("--flash-attn overrides the environment") {
    const char* json = R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "2.6.3"},
                           "model": {"num_heads": 8, "head_dim": 64, "softcap": 30.0}, "varlen": {"cu_seqlens_q": [0, 5, 9]}})";
    REQUIRE_CLEAN(run(json));
    ad::CheckContext older;
    older.flash_attn = ad::parse_version("2.5.8");
    REQUIRE_ONLY(run(json, Replay::none(), older), "input.feature");
  }
  SECTION("a GQA mismatch is reported first") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "2.5.8"},
                     "model": {"num_heads": 12, "num_kv_heads": 5, "head_dim": 64, "softcap": 50.0},
                     "varlen": {"cu_seqlens_q": [0, 5, 9]}})");
    REQUIRE_EARLIER_WINS(r, "input.gqa", "input.feature");
  }
}

TEST_CASE("input.int32_range: element counts and row offsets below 2^31, counted not materialised", "[check]") {
  SECTION("2^21 packed rows x 16 heads x 128 = 2^32 elements: the forward is right, a training step's dq is not") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 16, "head_dim": 128},
                     "varlen": {"cu_seqlens_q": [0, 1048576, 2097152]}})");
    REQUIRE_ONLY(r, "input.int32_range");
    CHECK(r.violations[0].severity == ad::Severity::warning);
    CHECK_THAT(r.violations[0].message, Catch::Contains("latent for inference"));
    auto training = run(R"({"format": "attn-doctor/batch@1", "pass": "training", "model": {"num_heads": 16, "head_dim": 128},
                            "varlen": {"cu_seqlens_q": [0, 1048576, 2097152]}})");
    REQUIRE_ONLY(training, "input.int32_range");
    CHECK(training.violations[0].severity == ad::Severity::error);
    CHECK_THAT(training.violations[0].message, Catch::Contains("segment 1 starts at row 1048576"));
    CHECK(training.violations[0].evidence["threshold_row"] == 1048576);
    // one segment of 2^21 rows starting at 0: no late segment, the element count is all there is
    auto one = run(R"({"format": "attn-doctor/batch@1", "pass": "training", "environment": {"flash_attn": "2.8.3"},
                       "model": {"num_heads": 16, "head_dim": 128}, "varlen": {"cu_seqlens_q": [0, 2097152]}})");
    REQUIRE_ONLY(one, "input.int32_range");
    CHECK(one.violations[0].severity == ad::Severity::warning);
    CHECK_THAT(one.violations[0].message, Catch::Contains("4294967296 elements"));
  }
  SECTION("3e9 packed rows (past int32 rows themselves) and a padded 64 x 131072 batch: no allocation") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 1, "head_dim": 8},
                     "varlen": {"cu_seqlens_q": [0, 3000000000]}})");
    REQUIRE_ONLY(r, "input.int32_range");
    auto padded = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 32, "head_dim": 128},
                          "batch": {"batch_size": 64, "kv_length": 131072}})");
    REQUIRE_ONLY(padded, "input.int32_range");
    CHECK(padded.violations[0].evidence["tensors"][0]["elements"] == "34359738368");
  }
  SECTION("FA3 (64-bit offsets) makes it a warning") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "3.0.0b1"},
                     "model": {"num_heads": 16, "head_dim": 128}, "varlen": {"cu_seqlens_q": [0, 1048576, 2097152]}})");
    REQUIRE_ONLY(r, "input.int32_range");
    CHECK(r.violations[0].severity == ad::Severity::warning);
  }
  SECTION("2^20 rows x 16 x 64 = 2^30 holds") {
    REQUIRE_CLEAN(run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 16, "head_dim": 64},
                          "varlen": {"cu_seqlens_q": [0, 524288, 1048576]}})"));
  }
  SECTION("a missing feature is reported first") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "2.5.8"},
                     "model": {"num_heads": 16, "head_dim": 128, "softcap": 50.0},
                     "varlen": {"cu_seqlens_q": [0, 1048576, 2097152]}})");
    REQUIRE_EARLIER_WINS(r, "input.feature", "input.int32_range");
  }
}
