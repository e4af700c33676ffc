// Invariants 6-14 (static: the mask / position ids -> varlen conversion and the route). Where a
// check depends on what the transformers release computed, the test hands it a replay built by
// hand (what `_upad_input` / the packed path returns for that batch) or none at all.
#include <algorithm>

#include "test_check_helpers.hpp"

using namespace check_test;

// ---- 6 mask.rank ---------------------------------------------------------------------------

// Generate's static-cache mask: (B, 1, Q, K) built from a left-padded 2-D mask.
static const char* kFourDMask = R"({"format": "attn-doctor/batch@1", "environment": {"transformers": "4.44.0"},
  "model": {"num_heads": 8, "head_dim": 64},
  "batch": {"attention_mask": {"shape": [2, 1, 4, 4], "style": "boolean", "causal": true,
                               "from": {"lengths": [4, 2], "width": 4, "padding_side": "left"}}}})";

TEST_CASE("mask.rank: the mask reaching the unpad path is 2-D", "[check]") {
  SECTION("a 4-D boolean mask breaks exactly it") {
    auto r = run(kFourDMask);
    REQUIRE_ONLY(r, "mask.rank");
    const auto& ev = r.violations[0].evidence;
    CHECK(ev["cu_seqlens_shape"] == std::vector<int64_t>{2, 1, 5});
    // 13 attended entries, the last at flat index 31 >= 2 x 4 key rows: the gather faults first
    CHECK(ev["upstream_message"] == "index out of bounds");
  }
  SECTION("with the replay's rank-3 cu_seqlens, it comes before cu_seqlens.shape and indices.range") {
    MaskReplay m;
    m.cu_q = m.cu_k = {0, 1, 3};  // stand-in values: the shape is what matters
    auto replay = mask_replay(m);
    replay.cu_seqlens_q.shape = replay.cu_seqlens_k.shape = {3, 1, 1};
    replay.indices_k = int64_vector({0, 4, 5, 31});
    replay.gather_rows_k = 8;
    replay.max_seqlen_q = replay.max_seqlen_k = {4, false, ad::DType::int64};
    auto r = run(kFourDMask, Replay::given(replay));
    REQUIRE(r.first() == "mask.rank");
    CHECK(r.has("cu_seqlens.shape"));
    CHECK(r.has("indices.range"));
  }
  SECTION("a 2-D mask the release turned into a 4-D one (Gemma-2 on 4.44.0): seen in the replay's cu_seqlens rank") {
    // What the 4.44.0 replay records for generate's prefill (tests/golden/gemma2-generate-4.44.0.json
    // on branch replay): the gather fails before the kernel, with cu_seqlens_k of shape (2, 1, 9).
    ad::VarlenArgs failed;
    failed.path = ad::VarlenPath::mask;
    failed.rule_set = "hf-4.44.0";
    failed.cu_seqlens_k.shape = {2, 1, 9};
    failed.cu_seqlens_k.values.assign(18, 0);
    failed.cu_seqlens_k.dtype = ad::DType::int32;
    failed.indices_k = int64_vector({1, 2, 3, 13, 175});
    failed.gather_rows_k = 2;
    failed.failure = ad::ReplayFailure{"_upad_input: index_first_axis(key_layer, indices_k)", "RuntimeError",
                                       "index 2 is out of bounds for dimension 0 with size 2",
                                       "CUDA error: device-side assert triggered"};
    auto r = run(R"({"format": "attn-doctor/batch@1", "environment": {"transformers": "4.44.0", "flash_attn": "2.6.3"},
                     "model": {"num_heads": 2, "num_kv_heads": 1, "head_dim": 16, "sliding_window": 4, "softcap": 50.0,
                               "architecture": "gemma2"},
                     "batch": {"attention_mask": {"lengths": [8, 5], "width": 8, "padding_side": "left"},
                               "cache": {"kind": "hybrid", "max_cache_len": 11, "past_length": 0}}})",
                 Replay::given(failed));
    INFO(r.describe());
    REQUIRE(r.first() == "mask.rank");
    CHECK(r.get("mask.rank").evidence["cu_seqlens_shape"] == std::vector<int64_t>{2, 1, 9});
    CHECK(r.get("mask.rank").evidence["upstream_message"] == "CUDA error: device-side assert triggered");
    CHECK(r.has("mask.kv_length"));
    CHECK(r.has("indices.range"));
    for (const auto& v : r.violations) CHECK(v.id.rfind("cu_seqlens.", 0) != 0);  // the kernel was never called
  }
  SECTION("a 2-D mask holds") {
    REQUIRE_CLEAN(run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                          "batch": {"attention_mask": {"lengths": [4, 2], "width": 4, "padding_side": "left"}}})"));
  }
  SECTION("an fp32 model is reported first") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64, "dtype": "fp32"},
                     "batch": {"attention_mask": {"shape": [2, 1, 4, 4], "style": "additive", "causal": true,
                                                  "from": {"lengths": [4, 2], "width": 4}}}})");
    REQUIRE_EARLIER_WINS(r, "input.dtype", "mask.rank");
  }
}

// ---- 7 mask.binary -------------------------------------------------------------------------

TEST_CASE("mask.binary: mask values are 0/1", "[check]") {
  SECTION("a segment-id mask breaks exactly it: sum 6 vs 4 nonzero") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "batch": {"attention_mask": {"values": [[1, 1, 2, 2, 0], [1, 1, 1, 1, 1]]}}})");
    REQUIRE_ONLY(r, "mask.binary");
    const auto& ev = r.violations[0].evidence;
    CHECK(ev["row"] == 0);
    CHECK(ev["column"] == 2);
    CHECK(ev["sum"] == 11);
    CHECK(ev["nonzero"] == 9);
  }
  SECTION("booleans and 0/1 hold") {
    REQUIRE_CLEAN(run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                          "batch": {"attention_mask": {"values": [[true, true, false], [true, true, true]]}}})"));
  }
  SECTION("a 4-D mask of segment ids: mask.rank is reported first") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "batch": {"attention_mask": {"values": [[[[1, 2, 0]]]]}}})");
    REQUIRE_EARLIER_WINS(r, "mask.rank", "mask.binary");
  }
}

// ---- 8 mask.kv_length ----------------------------------------------------------------------

// FLA decoding (#206): the full 8-column mask against 5 cached keys.
static const char* kWideDecode = R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
  "batch": {"attention_mask": {"values": [[1, 1, 1, 1, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1, 1, 1]]},
            "query_length": 1, "kv_length": 5}})";

TEST_CASE("mask.kv_length: mask width == key length", "[check]") {
  SECTION("an 8-wide mask over 5 keys breaks exactly it: indices past 2 x 5 rows") {
    auto r = run(kWideDecode);
    REQUIRE_ONLY(r, "mask.kv_length");
    const auto& v = r.violations[0];
    CHECK_THAT(v.message, Catch::StartsWith("attention mask has 8 columns but keys have 5 rows per sequence"));
    CHECK(v.evidence["indices_past_end"] == 5);
    CHECK(v.evidence["upstream_message"] == "index out of bounds");
  }
  SECTION("a narrower mask computes no error but wrong keys") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "batch": {"attention_mask": {"values": [[1, 1, 1, 1, 1, 1], [0, 0, 1, 1, 1, 1]]},
                               "query_length": 1, "kv_length": 8}})");
    REQUIRE_ONLY(r, "mask.kv_length");
    CHECK_THAT(r.violations[0].message, Catch::Contains("wrong keys"));
    CHECK_FALSE(r.violations[0].evidence.contains("upstream_message"));
  }
  SECTION("the key length comes from the replay's gather view when there is one") {
    MaskReplay m{{0, 1, 2}, {0, 3, 6}, {0, 1}, {0, 1, 2, 3, 4, 5}, 2, 6, 1, 3};
    // the gather view has 6 rows = 2 x 3 keys, as wide as the mask: holds
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "batch": {"attention_mask": {"values": [[1, 1, 1], [1, 1, 1]]}, "query_length": 1, "kv_length": 3}})",
                 Replay::given(mask_replay(m)));
    REQUIRE_CLEAN(r);
  }
  SECTION("matching widths hold") {
    REQUIRE_CLEAN(run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                          "batch": {"attention_mask": {"values": [[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]]},
                                    "query_length": 1, "kv_length": 5}})"));
  }
  SECTION("a segment-id mask is reported first") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "batch": {"attention_mask": {"values": [[1, 1, 2, 2, 2, 2]]}, "query_length": 1, "kv_length": 4}})");
    REQUIRE_EARLIER_WINS(r, "mask.binary", "mask.kv_length");
  }
}

// ---- 9 mask.padding_side -------------------------------------------------------------------

TEST_CASE("mask.padding_side: a partial query needs left padding", "[check]") {
  SECTION("right padding with Lq = 2 of 6 breaks exactly it (transformers#35032)") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "batch": {"attention_mask": {"lengths": [6, 3], "width": 6, "padding_side": "right"},
                               "query_length": 2, "kv_length": 6}})");
    REQUIRE_ONLY(r, "mask.padding_side");
    const auto& ev = r.violations[0].evidence;
    CHECK(ev["row"] == 1);
    CHECK(ev["tokens_in_slice"] == 0);
    CHECK(ev["tokens_in_row"] == 3);
  }
  SECTION("left padding holds; so does right padding for a full prefill and for decode") {
    REQUIRE_CLEAN(run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                          "batch": {"attention_mask": {"lengths": [6, 3], "width": 6, "padding_side": "left"},
                                    "query_length": 2, "kv_length": 6}})"));
    REQUIRE_CLEAN(run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                          "batch": {"attention_mask": {"lengths": [6, 3], "width": 6, "padding_side": "right"}}})"));
    REQUIRE_CLEAN(run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                          "batch": {"attention_mask": {"lengths": [6, 3], "width": 6, "padding_side": "right"},
                                    "query_length": 1}})"));
  }
  SECTION("a mask with fewer columns than queries (Gemma-2's sliding layer on 4.44.1) breaks exactly it") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 2, "num_kv_heads": 1, "head_dim": 16},
                     "batch": {"attention_mask": {"values": [[1, 1, 1, 1], [1, 1, 1, 1]]},
                               "query_length": 8, "kv_length": 4}})");
    REQUIRE_ONLY(r, "mask.padding_side");
    CHECK(r.violations[0].evidence["mask_columns"] == 4);
  }
  SECTION("a mask narrower than the keys is reported first") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "batch": {"attention_mask": {"lengths": [6, 3], "width": 6, "padding_side": "right"},
                               "query_length": 2, "kv_length": 7}})");
    REQUIRE_EARLIER_WINS(r, "mask.kv_length", "mask.padding_side");
  }
}

// ---- 10 position_ids.rank ------------------------------------------------------------------

static const char* kMropeIds = R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
  "batch": {"position_ids": {"values": [[0, 1, 2, 3, 4, 5]], "mrope": true}}})";

TEST_CASE("position_ids.rank: ids reaching packing detection are (B, S)", "[check]") {
  SECTION("3-D mRoPE ids break exactly it") {
    auto r = run(kMropeIds);
    REQUIRE_ONLY(r, "position_ids.rank");
    const auto& ev = r.violations[0].evidence;
    CHECK(ev["flattened"] == 18);
    CHECK(ev["segments"] == 3);
    CHECK(ev["upstream_message"] == "an illegal memory access was encountered");
  }
  SECTION("the replay's cu = [0, S, 2S, 3S] over 6 rows: it comes before cu_seqlens.total") {
    auto r = run(kMropeIds, Replay::given(packed_replay({0, 6, 12, 18}, 6, 6)));
    REQUIRE_EARLIER_WINS(r, "position_ids.rank", "cu_seqlens.total");
  }
  SECTION("(B, S) ids hold, and 3-D ids on a path that ignores them are not checked") {
    REQUIRE_CLEAN(run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                          "batch": {"position_ids": {"values": [[0, 1, 2, 3, 4, 5]]}}})"));
    REQUIRE_CLEAN(run(kMropeIds, Replay::given(dense_replay())));
  }
  SECTION("a GQA mismatch is reported first") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "num_kv_heads": 3, "head_dim": 64},
                     "batch": {"position_ids": {"values": [[0, 1, 2, 3, 4, 5]], "mrope": true}}})");
    REQUIRE_EARLIER_WINS(r, "input.gqa", "position_ids.rank");
  }
}

// ---- 11 position_ids.origin ----------------------------------------------------------------

TEST_CASE("position_ids.origin: sequences start at the origin, where boundaries are detected", "[check]") {
  SECTION("an offset chunk (ids from 1024, transformers#39814) breaks exactly it") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "batch": {"position_ids": {"values": [[1024, 1025, 1026, 1027, 1028, 1029]]}}})");
    REQUIRE_ONLY(r, "position_ids.origin");
    CHECK(r.violations[0].severity == ad::Severity::error);
    CHECK(r.violations[0].evidence["position"] == 1024);
  }
  SECTION("... a warning when the replayed release still found the boundary (minimum-based detection)") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "batch": {"position_ids": {"values": [[1024, 1025, 1026, 1027, 1028, 1029]]}}})",
                 Replay::given(packed_replay({0, 6}, 6, 6)));
    REQUIRE_ONLY(r, "position_ids.origin");
    CHECK(r.violations[0].severity == ad::Severity::warning);
  }
  SECTION("RoBERTa-like: ids numbered from 0 for a model whose positions start at 2 (transformers#47496)") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64, "position_origin": 2},
                     "batch": {"position_ids": {"values": [[0, 1, 2, 0, 1]]}},
                     "intent": {"sequences": [{"row": 0, "start": 0, "length": 3}, {"row": 0, "start": 3, "length": 2}]}})");
    REQUIRE_ONLY(r, "position_ids.origin");
    CHECK_THAT(r.violations[0].message, Catch::Contains("below its origin"));
  }
  SECTION("starts at the origin but the release detects boundaries at another value: missed boundary") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64, "position_origin": 2},
                     "batch": {"position_ids": {"values": [[2, 3, 4, 2, 3, 4]]}}})",
                 Replay::given(packed_replay({0, 6}, 6, 6)));
    REQUIRE(r.first() == "position_ids.origin");
    CHECK(r.get("position_ids.origin").evidence["missed_boundaries"] == 1);
    CHECK(r.has("cu_seqlens.segments"));  // the consequence: two sequences merged
  }
  SECTION("ids restarting at 0 hold") {
    REQUIRE_CLEAN(run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                          "batch": {"position_ids": {"values": [[0, 1, 2, 3, 0, 1, 2]]}}})",
                      Replay::given(packed_replay({0, 4, 7}, 4, 7))));
  }
  SECTION("3-D ids are reported first") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "batch": {"position_ids": {"values": [[[5, 6, 7]], [[5, 6, 7]], [[5, 6, 7]]]}}})");
    REQUIRE_EARLIER_WINS(r, "position_ids.rank", "position_ids.origin");
  }
}

// ---- 12 position_ids.consecutive -----------------------------------------------------------

TEST_CASE("position_ids.consecutive: +1 steps inside a sequence, padding not at the origin", "[check]") {
  SECTION("zeros after a packed row, intent derived from the ids: each its own segment, a note") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "batch": {"position_ids": {"values": [[0, 1, 2, 3, 0, 0, 0, 0]]}}})");
    REQUIRE_ONLY(r, "position_ids.consecutive");
    CHECK(r.violations[0].severity == ad::Severity::note);
    CHECK(r.violations[0].evidence["length_one_segments_at_origin"] == 4);
    CHECK(r.violations[0].evidence["segments"] == 5);
  }
  SECTION("one-token examples (a 0 followed by a 0) are counted once each, as notes") {
    // DataCollatorWithFlattening: examples of 4, 1, 1 and 3 tokens
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "batch": {"position_ids": {"values": [[0, 1, 2, 3, 0, 0, 0, 1, 2]]}}})");
    REQUIRE_ONLY(r, "position_ids.consecutive");
    CHECK(r.violations[0].severity == ad::Severity::note);
    CHECK(r.violations[0].evidence["length_one_segments_at_origin"] == 2);
    CHECK(r.violations[0].evidence["token"] == 4);
    CHECK_THAT(r.violations[0].message, Catch::Contains("no sequence is merged or split"));
  }
  SECTION("a single one-token example at the end of the row is no finding") {
    REQUIRE_CLEAN(run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                          "batch": {"position_ids": {"values": [[0, 1, 2, 3, 0]]}}})"));
  }
  SECTION("with a given intent, padding outside it numbered 0: a note") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "batch": {"position_ids": {"values": [[0, 1, 2, 3, 0, 0]]}},
                     "intent": {"sequences": [{"row": 0, "start": 0, "length": 4}]}})");
    REQUIRE_ONLY(r, "position_ids.consecutive");
    CHECK(r.violations[0].severity == ad::Severity::note);
    CHECK(r.violations[0].evidence["token"] == 4);
    CHECK(r.violations[0].evidence["padding_tokens_at_origin"] == 2);
  }
  SECTION("padding numbered 0 is an error once the call's segments reach 2048 (FLA's GDN grid, LlamaFactory#10452)") {
    auto padded = [](int pad) {
      std::string lengths = "4";
      for (int i = 0; i < pad; ++i) lengths += ", 1";
      return std::string(R"({"format": "attn-doctor/batch@1", "environment": {"transformers": "4.57.0"},
        "model": {"num_heads": 8, "head_dim": 64},
        "batch": {"position_ids": {"from": "packed", "lengths": [)") + lengths + R"(]}},
        "intent": {"sequences": [{"row": 0, "start": 0, "length": 4}]}})";
    };
    auto below = run(padded(2046), Replay::convert());  // 2047 segments
    REQUIRE(below.has("position_ids.consecutive"));
    CHECK(below.get("position_ids.consecutive").severity == ad::Severity::note);
    CHECK(below.get("position_ids.consecutive").evidence["segments"] == 2047);
    auto at = run(padded(2047), Replay::convert());  // 2048 segments
    REQUIRE(at.has("position_ids.consecutive"));
    CHECK(at.get("position_ids.consecutive").severity == ad::Severity::error);
    CHECK(at.get("position_ids.consecutive").evidence["padding_tokens_at_origin"] == 2047);
  }
  SECTION("a jump inside an intended sequence") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "batch": {"position_ids": {"values": [[0, 1, 2, 4, 5]]}},
                     "intent": {"sequences": [{"row": 0, "start": 0, "length": 5}]}})");
    REQUIRE_ONLY(r, "position_ids.consecutive");
    CHECK(r.violations[0].evidence["from"] == 2);
    CHECK(r.violations[0].evidence["to"] == 4);
  }
  SECTION("packed sequences restarting at 0 hold") {
    REQUIRE_CLEAN(run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                          "batch": {"position_ids": {"values": [[0, 1, 2, 0, 1, 2]]}}})"));
  }
  SECTION("a sequence off the origin is reported first") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "batch": {"position_ids": {"values": [[5, 6, 7, 0, 0]]}},
                     "intent": {"sequences": [{"row": 0, "start": 0, "length": 3}]}})");
    REQUIRE_EARLIER_WINS(r, "position_ids.origin", "position_ids.consecutive");
  }
}

// ---- 13 route.packed_to_dense --------------------------------------------------------------

static const char* kPackedRow = R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
  "batch": {"kv_length": 8},
  "intent": {"sequences": [{"row": 0, "start": 0, "length": 4}, {"row": 0, "start": 4, "length": 4}]}})";

TEST_CASE("route.packed_to_dense: a packed row reaches a path with varlen metadata", "[check]") {
  SECTION("two sequences in one row on the dense kernel break exactly it (trl PR#3942)") {
    auto r = run(kPackedRow);
    REQUIRE_ONLY(r, "route.packed_to_dense");
    CHECK(r.violations[0].evidence["sequences_in_row"] == 2);
  }
  SECTION("... also when the replayed release chose the dense path for packed position ids") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "batch": {"position_ids": {"values": [[0, 1, 2, 0, 1, 2]]}}})",
                 Replay::given(dense_replay()));
    REQUIRE_ONLY(r, "route.packed_to_dense");
  }
  SECTION("the same row with cu_seqlens holds") {
    REQUIRE_CLEAN(run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                          "batch": {"kv_length": 8}, "varlen": {"cu_seqlens_q": [0, 4, 8]},
                          "intent": {"sequences": [{"row": 0, "start": 0, "length": 4}, {"row": 0, "start": 4, "length": 4}]}})"));
  }
  SECTION("a GQA mismatch is reported first") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "num_kv_heads": 3, "head_dim": 64},
                     "batch": {"kv_length": 8},
                     "intent": {"sequences": [{"row": 0, "start": 0, "length": 4}, {"row": 0, "start": 4, "length": 4}]}})");
    REQUIRE_EARLIER_WINS(r, "input.gqa", "route.packed_to_dense");
  }
}

// ---- 14 route.partial_kwargs ---------------------------------------------------------------

static const char* kPartialKwargs = R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
  "batch": {"position_ids": {"values": [[0, 1, 2, 0, 1, 2]]},
            "flash_kwargs": {"cu_seq_lens_q": [0, 3, 6], "cu_seq_lens_k": [0, 3, 6]}}})";

TEST_CASE("route.partial_kwargs: varlen kwargs all together, not overridden by a mask", "[check]") {
  SECTION("cu_seq_lens without max_length (transformers PR#47170) breaks exactly it") {
    auto r = run(kPartialKwargs);
    REQUIRE_ONLY(r, "route.partial_kwargs");
    CHECK(r.violations[0].evidence["missing"] == std::vector<std::string>{"max_length_q", "max_length_k"});
  }
  SECTION("a mask next to all four kwargs wins over them") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "batch": {"attention_mask": {"values": [[1, 1, 1, 1, 1, 1]]},
                               "flash_kwargs": {"cu_seq_lens_q": [0, 3, 6], "cu_seq_lens_k": [0, 3, 6],
                                                "max_length_q": 3, "max_length_k": 3}}})");
    REQUIRE(r.has("route.partial_kwargs"));
    CHECK_THAT(r.get("route.partial_kwargs").message, Catch::Contains("mask path wins"));
  }
  SECTION("all four without a mask hold") {
    REQUIRE_CLEAN(run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                          "batch": {"position_ids": {"values": [[0, 1, 2, 0, 1, 2]]},
                                    "flash_kwargs": {"cu_seq_lens_q": [0, 3, 6], "cu_seq_lens_k": [0, 3, 6],
                                                     "max_length_q": 3, "max_length_k": 3}}})"));
  }
  SECTION("when the release then ran the dense kernel, route.packed_to_dense is reported first") {
    auto r = run(kPartialKwargs, Replay::given(dense_replay()));
    REQUIRE_EARLIER_WINS(r, "route.packed_to_dense", "route.partial_kwargs");
  }
}

// ---- a replay that fails the way the release fails ------------------------------------------

TEST_CASE("a failed replay feeds the conversion checks, not the kernel-argument ones", "[check]") {
  // tests/golden/transformers-4.44.0.json (branch replay), 012-mask-wider-decode: the key gather
  // raises before flash_attn_varlen_func; only indices_k, cu_seqlens_k and max_seqlen_k exist.
  MaskReplay m{{}, {0, 8, 13}, {}, {0, 1, 2, 3, 4, 5, 6, 7, 11, 12, 13, 14, 15}, 0, 10, 0, 8};
  auto failed = mask_replay(m);
  failed.cu_seqlens_q = {};
  failed.indices_q.reset();
  failed.failure = ad::ReplayFailure{"_upad_input: index_first_axis(key_layer, indices_k)", "RuntimeError",
                                     "index 11 is out of bounds for dimension 0 with size 10", ""};
  auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                   "batch": {"attention_mask": {"values": [[1, 1, 1, 1, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1, 1, 1]]},
                             "query_length": 1, "kv_length": 5}})",
               Replay::given(failed));
  INFO(r.describe());
  REQUIRE(r.ids() == std::vector<std::string>{"mask.kv_length", "indices.range"});
  CHECK(r.get("indices.range").evidence["upstream_message"] == "index 11 is out of bounds for dimension 0 with size 10");
}

// ---- 58 route.cu_seqlens_ignored -------------------------------------------------------------

// HunyuanVideo's layout: rows of 8 tokens, each one valid and one padding segment.
static std::string hunyuan(const char* mode, const char* cu) {
  return std::string(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 2, "head_dim": 16, "causal": false},
    "varlen": {"api": "flash_attn_2.varlen", "cu_seqlens_q": )") +
         cu + R"(, "max_seqlen_q": 8}, "dispatch": {"library": "hunyuanvideo", "backend": ")" + mode + R"("}})";
}

TEST_CASE("route.cu_seqlens_ignored: each HunyuanVideo mode attends within the cu_seqlens segments or is named",
          "[check]") {
  SECTION("vanilla: the whole row, across its valid/padding boundary") {
    auto r = run(hunyuan("vanilla", "[0, 5, 8]"));
    REQUIRE_ONLY(r, "route.cu_seqlens_ignored");
    const auto& ev = r.violations[0].evidence;
    CHECK(ev["boundary"] == 5);
    CHECK(ev["block_start"] == 0);
    CHECK(ev["block_end"] == 8);
  }
  SECTION("torch, one row: the split at cu_seqlens_q[1] is the row's own boundary") {
    CHECK(run(hunyuan("torch", "[0, 5, 8]")).violations.empty());
  }
  SECTION("torch, two rows of other lengths: row 1's boundary is not kept") {
    auto r = run(hunyuan("torch", "[0, 5, 8, 15, 16]"));
    REQUIRE_ONLY(r, "route.cu_seqlens_ignored");
    CHECK(r.violations[0].evidence["boundary"] == 15);
    CHECK(r.violations[0].evidence["row"] == 1);
  }
  SECTION("torch: row 1 is one segment, split at row 0's boundary (every boundary kept, a segment cut)") {
    auto r = run(hunyuan("torch", "[0, 5, 8, 16]"));
    REQUIRE_ONLY(r, "route.cu_seqlens_ignored");
    CHECK(r.violations[0].evidence["split"] == 13);
  }
  SECTION("torch, two rows of the same lengths: the same split in each row is right") {
    CHECK(run(hunyuan("torch", "[0, 5, 8, 13, 16]")).violations.empty());
  }
  SECTION("flash: cu_seqlens reach the kernel") {
    CHECK(run(hunyuan("flash", "[0, 5, 8, 15, 16]")).violations.empty());
  }
  SECTION("vanilla over rows that are each one segment: nothing to cross") {
    CHECK(run(hunyuan("vanilla", "[0, 8, 16]")).violations.empty());
  }
}

TEST_CASE("route.cu_seqlens_ignored: a HunyuanVideo violation carries HunyuanVideo's text only", "[check]") {
  auto r = run(hunyuan("vanilla", "[0, 5, 8]"));
  REQUIRE_ONLY(r, "route.cu_seqlens_ignored");
  const ad::Violation& v = r.violations[0];
  CHECK(v.explanation.find("HunyuanVideo") != std::string::npos);
  CHECK(v.explanation.find("axolotl") == std::string::npos);
  CHECK(v.fix.find("axolotl") == std::string::npos);
  CHECK(v.references == std::vector<std::string>{"Tencent-Hunyuan/HunyuanVideo PR#310", "Tencent-Hunyuan/HunyuanVideo#296"});
  // the catalogue entry names both frameworks (docs, explain)
  const ad::Invariant* inv = ad::find_invariant("route.cu_seqlens_ignored");
  REQUIRE(inv);
  CHECK(inv->explanation.find("HunyuanVideo") != std::string_view::npos);
  CHECK(inv->explanation.find("batch_ring") != std::string_view::npos);
  CHECK(std::find(inv->references.begin(), inv->references.end(), "axolotl-ai-cloud/axolotl#3608") != inv->references.end());
}

// axolotl's context parallelism: one row given by its documents' lengths, ring_attn_func and
// context_parallel_size as dispatch facts (axolotl-ai-cloud/axolotl#3608).
static std::string axolotl(const char* backend, const char* lengths, int ring = 2, const char* release = "0.18.0",
                           bool causal = true) {
  return std::string(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 9, "num_kv_heads": 3, "head_dim": 64, "causal": )") +
         (causal ? "true" : "false") + R"(}, "environment": {"transformers": "5.14.1", "flash_attn": "2.8.3")" +
         (release ? std::string(R"(, "axolotl": ")") + release + "\"" : std::string()) +
         R"(}, "batch": {"position_ids": {"from": "packed", "lengths": )" + lengths +
         R"(}}, "dispatch": {"library": "axolotl", "backend": ")" + backend + R"(", "ring_degree": )" +
         std::to_string(ring) + "}}";
}

TEST_CASE("route.cu_seqlens_ignored: axolotl's batch ring adapters attend a packed row as one sequence", "[check]") {
  SECTION("batch_ring, a row of five documents: named, with the documents and the adapter's function") {
    auto r = run(axolotl("batch_ring", "[300, 180, 240, 150, 154]"), Replay::convert());
    REQUIRE_ONLY(r, "route.cu_seqlens_ignored");
    const ad::Violation& v = r.violations[0];
    CHECK(v.severity == ad::Severity::error);
    CHECK(v.evidence["function"] == "ring_flash_attn_func");
    CHECK(v.evidence["sequences_in_row"] == 5);
    CHECK(v.evidence["ring_degree"] == 2);
    CHECK(v.evidence["axolotl"] == "0.18.0");
    CHECK(v.evidence["sequences"].size() == 4);  // the first four listed
    CHECK(v.message.find("one causal sequence") != std::string::npos);
    REQUIRE(v.symptom);
    CHECK(v.symptom->outcome == ad::Outcome::wrong_output);
    CHECK(v.symptom->basis == "report axolotl-ai-cloud/axolotl#3608");
    CHECK(v.explanation.find("HunyuanVideo") == std::string::npos);
    CHECK(v.references.front() == "axolotl-ai-cloud/axolotl#3608");
  }
  SECTION("the same row on varlen_llama3: the boundaries reach ring-flash-attn, and max_seqlen is its host int") {
    auto r = run(axolotl("varlen_llama3", "[300, 180, 240, 150, 154]"), Replay::convert());
    INFO(r.describe());
    CHECK(r.violations.empty());
  }
  SECTION("one document per row on batch_ring: the row is the sequence") {
    CHECK(run(axolotl("batch_ring", "[1024]"), Replay::convert()).violations.empty());
  }
  SECTION("context parallel size 1: axolotl installs no ring attention") {
    auto r = run(axolotl("batch_ring", "[300, 724]", 1), Replay::convert());
    CHECK_FALSE(r.has("route.cu_seqlens_ignored"));
  }
  SECTION("0.9.x's zigzag and stripe adapters, and no release named") {
    auto z = run(axolotl("batch_zigzag", "[4, 4]", 4, "0.9.2"), Replay::convert());
    REQUIRE_ONLY(z, "route.cu_seqlens_ignored");
    CHECK(z.violations[0].evidence["function"] == "zigzag_ring_flash_attn_func");
    auto s = run(axolotl("batch_stripe", "[4, 4]", 2, nullptr), Replay::convert());
    REQUIRE_ONLY(s, "route.cu_seqlens_ignored");
    CHECK(s.violations[0].evidence["function"] == "stripe_flash_attn_func");
    CHECK(s.violations[0].evidence["axolotl"].is_null());
    CHECK(s.violations[0].message.find("axolotl (0.9.0 - 0.19.0)") != std::string::npos);
  }
  SECTION("not causal: every document attends to the others") {
    auto r = run(axolotl("batch_ring", "[4, 4]", 2, "0.18.0", false), Replay::convert());
    REQUIRE(r.has("route.cu_seqlens_ignored"));
    CHECK(r.get("route.cu_seqlens_ignored").message.find("every sequence attending to the others") != std::string::npos);
  }
  SECTION("0.20.0 onwards ignores ring_attn_func: a note, no error") {
    auto r = run(axolotl("batch_ring", "[300, 724]", 2, "0.20.0"), Replay::convert());
    REQUIRE(r.has("route.cu_seqlens_ignored"));
    const ad::Violation& v = r.get("route.cu_seqlens_ignored");
    CHECK(v.severity == ad::Severity::note);
    CHECK(v.message.find("ringmaster") != std::string::npos);
  }
}
