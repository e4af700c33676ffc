// Invariants 15-27: cu_seqlens / max_seqlen as they reach the kernel, the segments against the
// intended sequences, the grid, and the unpad indices.
#include <string>

#include "test_check_helpers.hpp"

using namespace check_test;

TEST_CASE("cu_seqlens.dtype: int32", "[check]") {
  SECTION("an int64 cu_seqlens (Qwen2-VL vision tower) breaks exactly it, reported once for q == k") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "tensors": {"cu_seqlens_q": {"dtype": "int64"}}, "varlen": {"cu_seqlens_q": [0, 5, 9]}})");
    REQUIRE_ONLY(r, "cu_seqlens.dtype");
    CHECK(r.violations.size() == 1);
    CHECK(r.violations[0].evidence["upstream_message"] == "cu_seqlens_q must have dtype int32");
  }
  SECTION("FA3 words it \"torch.int32\"; a separate int64 cu_seqlens_k is named as k") {
    auto fa3 = run(R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "3.0.0b1"},
                       "model": {"num_heads": 8, "head_dim": 64},
                       "tensors": {"cu_seqlens_q": {"dtype": "int64"}}, "varlen": {"cu_seqlens_q": [0, 5, 9]}})");
    REQUIRE_ONLY(fa3, "cu_seqlens.dtype");
    CHECK(fa3.violations[0].evidence["upstream_message"] == "cu_seqlens_q must have dtype torch.int32");
    auto k = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "tensors": {"cu_seqlens_k": {"dtype": "int64"}},
                     "varlen": {"cu_seqlens_q": [0, 5, 9], "cu_seqlens_k": [0, 5, 9]}})");
    REQUIRE_ONLY(k, "cu_seqlens.dtype");
    CHECK(k.violations[0].evidence["upstream_message"] == "cu_seqlens_k must have dtype int32");
  }
  SECTION("int32 holds") {
    REQUIRE_CLEAN(run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                          "tensors": {"cu_seqlens_q": {"dtype": "int32"}}, "varlen": {"cu_seqlens_q": [0, 5, 9]}})"));
  }
  SECTION("a head dim past the limit is reported first") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 300},
                     "tensors": {"cu_seqlens_q": {"dtype": "int64"}}, "varlen": {"cu_seqlens_q": [0, 5, 9]}})");
    REQUIRE_EARLIER_WINS(r, "input.head_dim", "cu_seqlens.dtype");
  }
}

TEST_CASE("cu_seqlens.device: on q's device", "[check]") {
  SECTION("on the CPU breaks exactly it (vllm#44180)") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "tensors": {"cu_seqlens_q": {"device": "cpu"}}, "varlen": {"cu_seqlens_q": [0, 5, 9]}})");
    REQUIRE_ONLY(r, "cu_seqlens.device");
    CHECK(r.violations[0].evidence["upstream_message"] == "cu_seqlens_q must be on CUDA");
  }
  SECTION("on another GPU passes the host check and faults in the kernel") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "tensors": {"cu_seqlens_q": {"device": "cuda:1"}}, "varlen": {"cu_seqlens_q": [0, 5, 9]}})");
    REQUIRE_ONLY(r, "cu_seqlens.device");
    CHECK(r.violations[0].evidence["upstream_message"] == "an illegal memory access was encountered");
  }
  SECTION("on q's device holds (q on cuda:1 too)") {
    REQUIRE_CLEAN(run(R"({"format": "attn-doctor/batch@1", "environment": {"device": "cuda:1"},
                          "model": {"num_heads": 8, "head_dim": 64},
                          "tensors": {"cu_seqlens_q": {"device": "cuda:1"}}, "varlen": {"cu_seqlens_q": [0, 5, 9]}})"));
  }
  SECTION("an int64 dtype is reported first") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "tensors": {"cu_seqlens_q": {"device": "cpu", "dtype": "int64"}},
                     "varlen": {"cu_seqlens_q": [0, 5, 9]}})");
    REQUIRE_EARLIER_WINS(r, "cu_seqlens.dtype", "cu_seqlens.device");
  }
}

TEST_CASE("cu_seqlens.shape: 1-D, N + 1 >= 2 entries, the same N for q and k", "[check]") {
  SECTION("a 2-D cu_seqlens breaks exactly it") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "varlen": {"cu_seqlens_q": [[0, 5, 9]], "max_seqlen_q": 5}})");
    REQUIRE_ONLY(r, "cu_seqlens.shape");
    CHECK(r.violations[0].evidence["upstream_message"] == "cu_seqlens_q must have shape (batch_size + 1)");
  }
  SECTION("a single entry (no boundary found, transformers#39814): \"batch size must be positive\"") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "varlen": {"cu_seqlens_q": [0], "max_seqlen_q": 1}})");
    REQUIRE_ONLY(r, "cu_seqlens.shape");
    CHECK(r.violations[0].evidence["upstream_message"] == "batch size must be positive");
  }
  SECTION("q and k with different N") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "varlen": {"cu_seqlens_q": [0, 5, 9], "cu_seqlens_k": [0, 9], "max_seqlen_q": 5, "max_seqlen_k": 9}})");
    REQUIRE_ONLY(r, "cu_seqlens.shape");
    CHECK(r.violations[0].evidence["upstream_message"] == "cu_seqlens_k must have shape (batch_size + 1)");
  }
  SECTION("1-D with N + 1 entries holds") {
    REQUIRE_CLEAN(run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                          "varlen": {"cu_seqlens_q": [0, 9]}})"));
  }
  SECTION("an int64 dtype is reported first") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "tensors": {"cu_seqlens_q": {"dtype": "int64"}},
                     "varlen": {"cu_seqlens_q": [[0, 5, 9]], "max_seqlen_q": 5}})");
    REQUIRE_EARLIER_WINS(r, "cu_seqlens.dtype", "cu_seqlens.shape");
  }
}

TEST_CASE("cu_seqlens.start: cu[0] == 0", "[check]") {
  SECTION("a positive start breaks exactly it: leading rows never written") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "varlen": {"cu_seqlens_q": [2, 5, 9]}})");
    REQUIRE_ONLY(r, "cu_seqlens.start");
    CHECK_THAT(r.violations[0].message, Catch::Contains("rows 0-1 are never written"));
  }
  SECTION("a negative start: a huge unsigned offset") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "varlen": {"cu_seqlens_q": [-4, 5, 9]}})");
    REQUIRE_ONLY(r, "cu_seqlens.start");
    CHECK(r.violations[0].evidence["upstream_message"] == "an illegal memory access was encountered");
  }
  SECTION("0 holds") {
    REQUIRE_CLEAN(run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                          "varlen": {"cu_seqlens_q": [0, 5, 9]}})"));
  }
  SECTION("an int64 dtype is reported first") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "tensors": {"cu_seqlens_q": {"dtype": "int64"}}, "varlen": {"cu_seqlens_q": [2, 5, 9]}})");
    REQUIRE_EARLIER_WINS(r, "cu_seqlens.dtype", "cu_seqlens.start");
  }
}

TEST_CASE("cu_seqlens.monotonic: non-decreasing", "[check]") {
  SECTION("a decrease breaks exactly it") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "varlen": {"cu_seqlens_q": [0, 5, 3, 9]}})");
    REQUIRE_ONLY(r, "cu_seqlens.monotonic");
    CHECK(r.violations[0].evidence["segment"] == 1);
  }
  SECTION("equal entries (an empty sequence) hold") {
    REQUIRE_CLEAN(run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                          "varlen": {"cu_seqlens_q": [0, 5, 5, 9]}})"));
  }
  SECTION("a positive start is reported first") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "varlen": {"cu_seqlens_q": [2, 5, 3, 9]}})");
    REQUIRE_EARLIER_WINS(r, "cu_seqlens.start", "cu_seqlens.monotonic");
  }
}

TEST_CASE("cu_seqlens.total: cu[-1] == rows", "[check]") {
  SECTION("the worked example cu-overrun: 400 over 387 rows breaks exactly it") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "name": "cu-overrun",
                     "model": {"num_heads": 16, "num_kv_heads": 4, "head_dim": 128},
                     "varlen": {"cu_seqlens_q": [0, 100, 137, 400], "max_seqlen_q": 263, "total_q": 387}})");
    REQUIRE_ONLY(r, "cu_seqlens.total");
    CHECK(r.violations[0].evidence["last"] == 400);
    CHECK(r.violations[0].evidence["rows"] == 387);
  }
  SECTION("undershoot: tail rows never written; k checked on its own") {
    auto q = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "varlen": {"cu_seqlens_q": [0, 5, 9], "total_q": 12}})");
    REQUIRE_ONLY(q, "cu_seqlens.total");
    CHECK_THAT(q.violations[0].message, Catch::Contains("the last 3 rows are never written"));
    auto k = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "varlen": {"cu_seqlens_q": [0, 5, 9], "cu_seqlens_k": [0, 5, 9], "total_k": 8}})");
    REQUIRE_ONLY(k, "cu_seqlens.total");
    CHECK(k.violations[0].evidence["tensor"] == "cu_seqlens_k");
  }
  SECTION("matching rows hold") {
    REQUIRE_CLEAN(run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                          "varlen": {"cu_seqlens_q": [0, 5, 9], "total_q": 9}})"));
  }
  SECTION("a decrease is reported first") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "varlen": {"cu_seqlens_q": [0, 5, 3, 9], "total_q": 8}})");
    REQUIRE_EARLIER_WINS(r, "cu_seqlens.monotonic", "cu_seqlens.total");
  }
}

TEST_CASE("max_seqlen.type: a host int > 0, severity follows the release", "[check]") {
  const char* tensor = R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "%s"},
                           "model": {"num_heads": 8, "head_dim": 64},
                           "varlen": {"cu_seqlens_q": [0, 5, 9], "max_seqlen_q": {"tensor": 5}}})";
  char buf[512];
  SECTION("a 0-d tensor is a warning on FA2 (host sync) ...") {
    std::snprintf(buf, sizeof buf, tensor, "2.6.3");
    auto r = run(buf);
    REQUIRE_ONLY(r, "max_seqlen.type");
    CHECK(r.violations.size() == 1);
    CHECK(r.violations[0].severity == ad::Severity::warning);
  }
  SECTION("... and an error on FA4, which needs an int") {
    std::snprintf(buf, sizeof buf, tensor, "4.0.0b5");
    auto r = run(buf);
    REQUIRE_ONLY(r, "max_seqlen.type");
    CHECK(r.violations[0].severity == ad::Severity::error);
  }
  SECTION("the packed path of transformers 4.44 - 4.53 passes a tensor: a warning from the replay") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "batch": {"position_ids": {"values": [[0, 1, 2, 0, 1, 2]]}}})",
                 Replay::given(packed_replay({0, 3, 6}, 3, 6, /*max_is_tensor=*/true)));
    REQUIRE_ONLY(r, "max_seqlen.type");
    CHECK(r.violations[0].severity == ad::Severity::warning);
  }
  SECTION("None (varlen kwargs without max_length) is an error") {
    auto replay = packed_replay({0, 3, 6}, 0, 6);
    replay.path = ad::VarlenPath::kwargs;
    replay.max_seqlen_q.is_none = replay.max_seqlen_k.is_none = true;
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "batch": {"position_ids": {"values": [[0, 1, 2, 0, 1, 2]]},
                               "flash_kwargs": {"cu_seq_lens_q": [0, 3, 6], "cu_seq_lens_k": [0, 3, 6],
                                                "max_length_q": 3, "max_length_k": 3}}})",
                 Replay::given(replay));
    REQUIRE_ONLY(r, "max_seqlen.type");
    CHECK(r.violations.size() == 1);
    CHECK(r.violations[0].evidence["is_none"] == true);
  }
  SECTION("0 is an error") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "varlen": {"cu_seqlens_q": [0, 5, 9], "max_seqlen_q": 0}})");
    REQUIRE_ONLY(r, "max_seqlen.type");
    CHECK(r.violations[0].severity == ad::Severity::error);
  }
  SECTION("an int holds") {
    REQUIRE_CLEAN(run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                          "varlen": {"cu_seqlens_q": [0, 5, 9], "max_seqlen_q": 5}})"));
  }
  SECTION("an overrun is reported first") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "varlen": {"cu_seqlens_q": [0, 5, 9], "max_seqlen_q": {"tensor": 5}, "total_q": 8}})");
    REQUIRE_EARLIER_WINS(r, "cu_seqlens.total", "max_seqlen.type");
  }
}

TEST_CASE("max_seqlen.type speaks per argument", "[check]") {
  SECTION("a host-int max_seqlen_q beside a 0-d max_seqlen_k (the decode path of transformers 5.4 - 5.13)") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "varlen": {"cu_seqlens_q": [0, 1, 2], "cu_seqlens_k": [0, 5, 9],
                                "max_seqlen_q": 1, "max_seqlen_k": {"tensor": 5}}})");
    REQUIRE_ONLY(r, "max_seqlen.type");
    REQUIRE(r.violations.size() == 1);
    const auto& v = r.violations[0];
    CHECK(v.evidence["argument"] == "max_seqlen_k");
    CHECK(v.evidence["arguments"] == nlohmann::json{"max_seqlen_k"});
    CHECK(v.evidence["max_seqlen_q_is_tensor"] == false);
    CHECK(v.evidence["max_seqlen_k_is_tensor"] == true);
    CHECK(v.message.rfind("max_seqlen_k is a 0-d int32 tensor, not a host int (max_seqlen_q is a host int)", 0) == 0);
  }
  SECTION("the same 0-d tensor for both arguments is one violation naming both") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "varlen": {"cu_seqlens_q": [0, 5, 9], "max_seqlen_q": {"tensor": 5}, "max_seqlen_k": {"tensor": 5}}})");
    REQUIRE_ONLY(r, "max_seqlen.type");
    REQUIRE(r.violations.size() == 1);
    const auto& v = r.violations[0];
    CHECK(v.evidence["arguments"] == nlohmann::json{"max_seqlen_q", "max_seqlen_k"});
    CHECK(v.evidence["max_seqlen_q_is_tensor"] == true);
    CHECK(v.evidence["max_seqlen_k_is_tensor"] == true);
    CHECK(v.message.rfind("max_seqlen_q and max_seqlen_k are 0-d int32 tensors, not host ints", 0) == 0);
  }
  SECTION("two different tensors are two violations, one per argument") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "varlen": {"cu_seqlens_q": [0, 2, 4], "cu_seqlens_k": [0, 5, 9],
                                "max_seqlen_q": {"tensor": 2}, "max_seqlen_k": {"tensor": 5}}})");
    REQUIRE_ONLY(r, "max_seqlen.type");
    REQUIRE(r.violations.size() == 2);
    CHECK(r.violations[0].evidence["argument"] == "max_seqlen_q");
    CHECK(r.violations[1].evidence["argument"] == "max_seqlen_k");
  }
}

TEST_CASE("max_seqlen.covers: max_seqlen >= every segment", "[check]") {
  SECTION("max_seqlen_q 3 under a 5-query segment breaks exactly it (flash-attention#1773)") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "varlen": {"cu_seqlens_q": [0, 5, 9], "max_seqlen_q": 3}})");
    REQUIRE_ONLY(r, "max_seqlen.covers");
    CHECK(r.violations.size() == 1);
    CHECK(r.violations[0].evidence["segment"] == 0);
    CHECK(r.violations[0].evidence["length"] == 5);
  }
  SECTION("a short max_seqlen_k is reported for k") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "varlen": {"cu_seqlens_q": [0, 5, 9], "max_seqlen_q": 5, "max_seqlen_k": 2}})");
    REQUIRE_ONLY(r, "max_seqlen.covers");
    CHECK(r.violations[0].evidence["argument"] == "max_seqlen_k");
  }
  SECTION("the largest segment holds") {
    REQUIRE_CLEAN(run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                          "varlen": {"cu_seqlens_q": [0, 5, 9], "max_seqlen_q": 5}})"));
  }
  SECTION("a 0-d tensor max_seqlen is reported first (a warning, but first)") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "varlen": {"cu_seqlens_q": [0, 5, 9], "max_seqlen_q": {"tensor": 3}}})");
    REQUIRE_EARLIER_WINS(r, "max_seqlen.type", "max_seqlen.covers");
  }
}

// A continuous-batching decode step: 3 sequences, one finished (empty), 16 heads over 4.
static const char* kDecodeGqa = R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "%s"},
  "model": {"num_heads": 16, "num_kv_heads": 4, "head_dim": 64%s},
  "varlen": {"cu_seqlens_q": %s, "cu_seqlens_k": [0, 10, 20, 30], "max_seqlen_q": 1, "max_seqlen_k": 10}})";

static std::string decode_gqa(const char* fa, const char* cu_q, const char* extra = "") {
  char buf[1024];
  std::snprintf(buf, sizeof buf, kDecodeGqa, fa, extra, cu_q);
  return buf;
}

TEST_CASE("max_seqlen.single_query: one query per segment on the swapped GQA path", "[check]") {
  SECTION("an empty segment breaks exactly it: the reshape fails (flash-attention#1537)") {
    auto r = run(decode_gqa("2.6.3", "[0, 1, 1, 2]"));
    REQUIRE_ONLY(r, "max_seqlen.single_query");
    CHECK(r.violations[0].evidence["upstream_message"] == "shape '[3, 4, 4, 64]' is invalid for input of size 2048");
    CHECK(r.violations[0].evidence["segment"] == 1);
  }
  SECTION("not checked where the swap is not taken: a window, or a release before 2.5.0") {
    REQUIRE_CLEAN(run(decode_gqa("2.6.3", "[0, 1, 1, 2]", R"(, "sliding_window": 4)")));
    REQUIRE_CLEAN(run(decode_gqa("2.4.2", "[0, 1, 1, 2]")));
  }
  SECTION("a window wider than the keys still blocks the swap: FA2 decides it before dropping the window") {
    auto r = run(decode_gqa("2.6.3", "[0, 1, 1, 2]", R"(, "causal": false, "sliding_window": 64)"));
    CHECK_FALSE(r.has("max_seqlen.single_query"));
  }
  SECTION("one query per segment holds") { REQUIRE_CLEAN(run(decode_gqa("2.6.3", "[0, 1, 2, 3]"))); }
  SECTION("a two-query segment under max_seqlen_q 1: max_seqlen.covers is reported first") {
    auto r = run(decode_gqa("2.6.3", "[0, 2, 2, 3]"));
    REQUIRE_EARLIER_WINS(r, "max_seqlen.covers", "max_seqlen.single_query");
    CHECK_THAT(r.get("max_seqlen.single_query").message, Catch::Contains("wrong sequences"));
  }
}

TEST_CASE("cu_seqlens.segments: the segments are the intended sequences", "[check]") {
  SECTION("segments that straddle the intended boundary break exactly it") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "varlen": {"cu_seqlens_q": [0, 4, 8]},
                     "intent": {"sequences": [{"row": 0, "start": 0, "length": 3}, {"row": 0, "start": 3, "length": 5}]}})");
    REQUIRE_ONLY(r, "cu_seqlens.segments");
    CHECK(r.violations[0].severity == ad::Severity::error);
    CHECK(r.violations[0].evidence["merged"] == 1);
    CHECK(r.violations[0].evidence["split"] == 1);
  }
  SECTION("a mask with a hole merges the two runs into one segment (mask path, through indices_k)") {
    MaskReplay m{{0, 4}, {0, 4}, {0, 1, 3, 4}, {0, 1, 3, 4}, 5, 5, 4, 4};
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "batch": {"attention_mask": {"values": [[1, 1, 0, 1, 1]]}}})",
                 Replay::given(mask_replay(m)));
    REQUIRE_ONLY(r, "cu_seqlens.segments");
    CHECK_THAT(r.violations[0].message, Catch::Contains("spans 2 intended sequences"));
  }
  SECTION("segments of padding alone inside the batch are a note; so is causal trailing padding") {
    auto pad = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                       "varlen": {"cu_seqlens_q": [0, 3, 4, 5]},
                       "intent": {"sequences": [{"row": 0, "start": 0, "length": 3}]}})");
    REQUIRE_ONLY(pad, "cu_seqlens.segments");
    CHECK(pad.violations[0].severity == ad::Severity::note);
    CHECK(pad.violations[0].evidence["padding_only"] == 2);
    CHECK(pad.violations[0].evidence["segments"] == 3);
    CHECK_THAT(pad.violations[0].message, Catch::Contains("no intended sequence is merged or split"));
    auto trailing = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                            "batch": {"position_ids": {"values": [[0, 1, 2, 3, 4]]}},
                            "intent": {"sequences": [{"row": 0, "start": 0, "length": 3}]}})",
                        Replay::given(packed_replay({0, 5}, 5, 5)));
    REQUIRE_ONLY(trailing, "cu_seqlens.segments");
    CHECK(trailing.violations[0].severity == ad::Severity::note);
  }
  SECTION("a segment past the batch's rows is a warning, not padding (mRoPE ids read as packing)") {
    auto past = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                        "batch": {"position_ids": {"values": [[0, 1, 2, 3]]}},
                        "intent": {"sequences": [{"row": 0, "start": 0, "length": 4}]}})",
                    Replay::given(packed_replay({0, 4, 8}, 4, 4)));
    REQUIRE(past.has("cu_seqlens.segments"));
    CHECK(past.get("cu_seqlens.segments").severity == ad::Severity::warning);
  }
  SECTION("matching segments hold (empty segments are ignored)") {
    REQUIRE_CLEAN(run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                          "varlen": {"cu_seqlens_q": [0, 3, 3, 8]},
                          "intent": {"sequences": [{"row": 0, "start": 0, "length": 3}, {"row": 0, "start": 3, "length": 5}]}})"));
  }
  SECTION("a max_seqlen below a segment is reported first") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "varlen": {"cu_seqlens_q": [0, 4, 8], "max_seqlen_q": 2},
                     "intent": {"sequences": [{"row": 0, "start": 0, "length": 3}, {"row": 0, "start": 3, "length": 5}]}})");
    REQUIRE_EARLIER_WINS(r, "max_seqlen.covers", "cu_seqlens.segments");
  }
}

static std::string many_segments(int64_t n, bool with_empty, const char* env_and_model, const char* extra = "") {
  std::string cu = "[0";
  int64_t at = 0;
  for (int64_t i = 1; i <= n; ++i) {
    if (!(with_empty && i == 2)) ++at;
    cu += ", " + std::to_string(at);
  }
  cu += "]";
  return std::string(R"({"format": "attn-doctor/batch@1", )") + env_and_model + extra +
         R"(, "varlen": {"cu_seqlens_q": )" + cu + R"(, "max_seqlen_q": 1}})";
}

TEST_CASE("cu_seqlens.grid: the segment count fits the launch grid", "[check]") {
  const char* fa2 = R"("model": {"num_heads": 8, "head_dim": 64})";
  SECTION("70000 length-1 segments break exactly it: N on gridDim.y > 65535") {
    auto r = run(many_segments(70000, false, fa2));
    REQUIRE_ONLY(r, "cu_seqlens.grid");
    CHECK(r.violations[0].evidence["segments"] == 70000);
  }
  SECTION("FA3 schedules differently (not checked), but a varlen rotary kernel still has N on a grid axis") {
    const char* fa3 = R"("environment": {"flash_attn": "3.0.0b1"}, "model": {"num_heads": 8, "head_dim": 64})";
    REQUIRE_CLEAN(run(many_segments(70000, false, fa3)));
    auto r = run(many_segments(70000, false, fa3, R"(, "rotary": {"implementation": "fla", "dim": 64})"));
    REQUIRE_ONLY(r, "cu_seqlens.grid");
    CHECK(r.violations[0].evidence["upstream_message"] == "Triton Error [CUDA]: invalid argument");
  }
  SECTION("65535 segments hold") { REQUIRE_CLEAN(run(many_segments(65535, false, fa2))); }
  SECTION("with GQA and an empty segment, max_seqlen.single_query is reported first") {
    auto r = run(many_segments(70000, true, R"("model": {"num_heads": 16, "num_kv_heads": 4, "head_dim": 64})"));
    REQUIRE_EARLIER_WINS(r, "max_seqlen.single_query", "cu_seqlens.grid");
  }
}

// FLA decoding (#206): the full 8-column mask against 5 cached keys.
static const char* kWideDecodeForIndices() {
  return R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
    "batch": {"attention_mask": {"values": [[1, 1, 1, 1, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1, 1, 1]]},
              "query_length": 1, "kv_length": 5}})";
}

TEST_CASE("indices.range: every unpad index inside the view it gathers from", "[check]") {
  const char* decode = R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
    "batch": {"attention_mask": {"values": [[1, 1, 1], [1, 1, 0]]}, "query_length": 1, "kv_length": 3}})";
  SECTION("a query index past the (B x 1)-row view breaks exactly it") {
    MaskReplay m{{0, 1, 2}, {0, 3, 5}, {0, 2}, {0, 1, 2, 3, 4}, 2, 6, 1, 3};
    auto r = run(decode, Replay::given(mask_replay(m)));
    REQUIRE_ONLY(r, "indices.range");
    CHECK(r.violations[0].evidence["tensor"] == "indices_q");
    CHECK(r.violations[0].evidence["upstream_message"] == "index out of bounds");
  }
  SECTION("consistent indices hold") {
    MaskReplay m{{0, 1, 2}, {0, 3, 5}, {0, 1}, {0, 1, 2, 3, 4}, 2, 6, 1, 3};
    REQUIRE_CLEAN(run(decode, Replay::given(mask_replay(m))));
  }
  SECTION("FLA decoding (#206): the too-wide mask is reported first, the gather fault after it") {
    MaskReplay m{{0, 1, 2}, {0, 8, 13}, {0, 1}, {0, 1, 2, 3, 4, 5, 6, 7, 11, 12, 13, 14, 15}, 2, 10, 1, 8};
    auto r = run(kWideDecodeForIndices(), Replay::given(mask_replay(m)));
    REQUIRE_EARLIER_WINS(r, "mask.kv_length", "indices.range");
    CHECK(r.get("indices.range").evidence["out_of_range"] == 5);
  }
}

TEST_CASE("indices.count: one unpad index per packed row", "[check]") {
  const char* one_row = R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
    "batch": {"attention_mask": {"values": [[1, 1, 1, 1]]}}})";
  SECTION("five indices for cu_seqlens[-1] = 4 break exactly it") {
    MaskReplay m{{0, 4}, {0, 4}, {0, 1, 2, 3}, {0, 1, 2, 3, 3}, 4, 4, 4, 4};
    auto replay = mask_replay(m);
    replay.total_k = 4;
    auto r = run(one_row, Replay::given(replay));
    REQUIRE_ONLY(r, "indices.count");
    CHECK(r.violations[0].evidence["indices"] == 5);
  }
  SECTION("as many indices as cu_seqlens[-1] hold") {
    MaskReplay m{{0, 4}, {0, 4}, {0, 1, 2, 3}, {0, 1, 2, 3}, 4, 4, 4, 4};
    REQUIRE_CLEAN(run(one_row, Replay::given(mask_replay(m))));
  }
  SECTION("a segment-id mask (sum 6, 4 nonzero): mask.binary is reported first") {
    MaskReplay m{{0, 6}, {0, 6}, {0, 1, 2, 3}, {0, 1, 2, 3}, 5, 5, 6, 6};
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "batch": {"attention_mask": {"values": [[1, 1, 2, 2, 0]]}}})",
                 Replay::given(mask_replay(m)));
    REQUIRE_EARLIER_WINS(r, "mask.binary", "indices.count");
    CHECK(r.has("cu_seqlens.total"));
  }
  SECTION("a segment past the last unpad index (cu_seqlens from sums, indices from nonzero)") {
    MaskReplay m{{0, 2, 3}, {0, 2, 3}, {0, 1}, {0, 1}, 2, 2, 2, 2};
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "batch": {"attention_mask": {"values": [[2], [1]]}}})",
                 Replay::given(mask_replay(m)));
    REQUIRE_EARLIER_WINS(r, "mask.binary", "indices.count");
  }
}
