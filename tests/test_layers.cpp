// Hybrid models: the boundaries each layer kind receives (lib/convert/layers.cpp) and
// layers.same_boundaries (lib/check/checks_layers.cpp).
#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "batch/batch.hpp"
#include "check/check.hpp"
#include "convert/convert.hpp"

namespace {

ad::Batch load(const std::string& text) { return ad::parse_batch_text(text, "layers.json"); }

// A packed row of three sequences (3, 2, 4): what every layer should see.
const std::vector<int32_t> kThree = {0, 0, 0, 1, 1, 2, 2, 2, 2};

std::string qwen(const std::string& env, const std::string& batch, const std::string& layers) {
  return R"({"format": "attn-doctor/batch@1", "environment": )" + env +
         R"(, "model": {"num_heads": 8, "num_kv_heads": 2, "head_dim": 64}, "batch": )" + batch +
         R"(, "layers": )" + layers + "}";
}

const ad::LayerPart& part(const ad::Conversion& c, size_t layer, const std::string& name) {
  for (const auto& p : c.layers.at(layer).parts)
    if (p.part == name) return p;
  FAIL("no part " << name);
  throw;
}

std::vector<ad::Violation> check(const ad::Batch& b) { return ad::run_static_checks(b, ad::convert(b)); }

bool has(const std::vector<ad::Violation>& v, const std::string& id) {
  for (const auto& x : v)
    if (x.id == id) return true;
  return false;
}

const std::string kPacked = R"({"position_ids": {"from": "packed", "lengths": [3, 2, 4]}})";
const std::string kKwargs = R"({"position_ids": {"from": "packed", "lengths": [3, 2, 4]},
  "flash_kwargs": {"cu_seq_lens_q": [0, 3, 5, 9], "cu_seq_lens_k": [0, 3, 5, 9], "max_length_q": 4, "max_length_k": 4}})";
const std::string kHybrid = R"([{"kind": "gated_deltanet"}, {"kind": "attention"}])";

}  // namespace

TEST_CASE("layers: the attention layers see the conversion's boundaries", "[layers]") {
  auto b = load(qwen(R"({"transformers": "5.24.0", "fla": "0.6.0"})", kPacked, kHybrid));
  auto c = ad::convert(b);
  REQUIRE(c.layers.size() == 2);
  CHECK(part(c, 1, "attention").labels == kThree);
}

TEST_CASE("layers: transformers' GatedDeltaNet layer by release", "[layers]") {
  SECTION("5.24.0, position ids only: the delta rule and the conv see one sequence per row") {
    auto b = load(qwen(R"({"transformers": "5.24.0", "fla": "0.6.0"})", kPacked, kHybrid));
    auto c = ad::convert(b);
    CHECK(part(c, 0, "delta_rule").source == "none");
    CHECK(part(c, 0, "delta_rule").labels == std::vector<int32_t>(9, 0));
    auto v = ad::run_static_checks(b, c);
    REQUIRE(has(v, "layers.same_boundaries"));
  }
  SECTION("5.24.0 with cu_seq_lens_q and seq_idx: every layer agrees") {
    auto batch = kKwargs + "";
    batch.insert(batch.size() - 1, R"(, "seq_idx": [[7, 7, 7, 8, 8, 9, 9, 9, 9]])");
    auto b = load(qwen(R"({"transformers": "5.24.0", "fla": "0.6.0"})", batch, kHybrid));
    auto c = ad::convert(b);
    CHECK(part(c, 0, "delta_rule").source == "flash_kwargs.cu_seq_lens_q");
    CHECK(part(c, 0, "delta_rule").labels == kThree);
    CHECK(part(c, 0, "conv1d").source == "seq_idx");
    CHECK(part(c, 0, "conv1d").labels == kThree);
    CHECK_FALSE(has(ad::run_static_checks(b, c), "layers.same_boundaries"));
  }
  SECTION("5.8.0 ignores the kwargs the collator passes") {
    auto batch = kKwargs + "";
    batch.insert(batch.size() - 1, R"(, "seq_idx": [[0, 0, 0, 1, 1, 2, 2, 2, 2]])");
    auto b = load(qwen(R"({"transformers": "5.8.0", "fla": "0.6.0"})", batch, kHybrid));
    auto v = check(b);
    REQUIRE(has(v, "layers.same_boundaries"));
  }
  SECTION("without the fla package the torch fallback ignores cu_seqlens (5.9 - 5.19)") {
    auto batch = kKwargs + "";
    batch.insert(batch.size() - 1, R"(, "seq_idx": [[0, 0, 0, 1, 1, 2, 2, 2, 2]])");
    auto b = load(qwen(R"({"transformers": "5.16.0"})", batch, kHybrid));
    auto c = ad::convert(b);
    CHECK(part(c, 0, "delta_rule").source == "none");
    CHECK_FALSE(part(c, 0, "delta_rule").note.empty());
    CHECK(has(ad::run_static_checks(b, c), "layers.same_boundaries"));
  }
  SECTION("from 5.20.0 the torch fallbacks refuse cu_seqlens and seq_idx (hybrid-qwen3next-5.20.0.json)") {
    auto batch = kKwargs + "";
    batch.insert(batch.size() - 1, R"(, "seq_idx": [[0, 0, 0, 1, 1, 2, 2, 2, 2]])");
    auto b = load(qwen(R"({"transformers": "5.20.0"})", batch,
                       R"([{"kind": "gated_deltanet", "causal_conv1d": false}, {"kind": "attention"}])"));
    auto c = ad::convert(b);
    // the convolution runs first and raises: the delta rule is not reached
    REQUIRE(part(c, 0, "conv1d").failure);
    CHECK(part(c, 0, "conv1d").failure->type == "ValueError");
    CHECK_THAT(part(c, 0, "conv1d").failure->message, Catch::Contains("without `causal_conv1d`"));
    CHECK_FALSE(part(c, 0, "delta_rule").failure);
    CHECK_THAT(part(c, 0, "delta_rule").note, Catch::Contains("not reached"));
    CHECK(has(ad::run_static_checks(b, c), "layers.same_boundaries"));
    // without seq_idx the convolution runs, and the delta rule raises on cu_seqlens
    auto b2 = load(qwen(R"({"transformers": "5.20.0"})", kKwargs,
                        R"([{"kind": "gated_deltanet", "causal_conv1d": false}, {"kind": "attention"}])"));
    auto c2 = ad::convert(b2);
    CHECK_FALSE(part(c2, 0, "conv1d").failure);
    REQUIRE(part(c2, 0, "delta_rule").failure);
    CHECK_THAT(part(c2, 0, "delta_rule").failure->message, Catch::Contains("without `flash-linear-attention`"));
  }
  SECTION("without causal-conv1d the conv runs over the whole row (up to 5.19)") {
    auto batch = kKwargs + "";
    batch.insert(batch.size() - 1, R"(, "seq_idx": [[0, 0, 0, 1, 1, 2, 2, 2, 2]])");
    auto b = load(qwen(R"({"transformers": "5.19.0", "fla": "0.6.0"})", batch,
                       R"([{"kind": "gated_deltanet", "causal_conv1d": false}, {"kind": "attention"}])"));
    auto v = check(b);
    REQUIRE(has(v, "layers.same_boundaries"));
    for (const auto& x : v)
      if (x.id == "layers.same_boundaries") {
        CHECK(x.evidence["part"] == "conv1d");
        CHECK(x.evidence["difference"] == "merges");
        CHECK(x.evidence["other_sequence"]["length"] == 3);
        CHECK(x.evidence["sequence"]["start"] == 3);
      }
  }
}

TEST_CASE("layers: FLA's GatedDeltaNet layer, mask against caller cu_seqlens by release", "[layers]") {
  auto text = [](const std::string& fla) {
    return R"({"format": "attn-doctor/batch@1", "environment": {"fla": ")" + fla + R"("},
      "model": {"num_heads": 8, "head_dim": 64},
      "batch": {"attention_mask": {"values": [[1, 1, 1, 1, 1, 1, 1, 1, 1]]}},
      "varlen": {"cu_seqlens_q": [0, 3, 5, 9]},
      "layers": [{"kind": "gated_deltanet", "implementation": "fla", "cu_seqlens": [0, 3, 5, 9]}, {"kind": "attention"}]})";
  };
  SECTION("0.4.2: the mask replaces them (fla-org/flash-linear-attention#838)") {
    auto b = load(text("0.4.2"));
    auto c = ad::convert(b);
    CHECK(part(c, 0, "gated_deltanet").source == "attention_mask (replaces the caller's cu_seqlens)");
    CHECK(part(c, 0, "gated_deltanet").labels == std::vector<int32_t>(9, 0));
    auto v = ad::run_static_checks(b, c);
    REQUIRE(has(v, "layers.same_boundaries"));
  }
  SECTION("0.5.2: the caller's win, but the mask makes the layer repad with no indices") {
    auto b = load(text("0.5.2"));
    auto c = ad::convert(b);
    CHECK(part(c, 0, "gated_deltanet").labels == kThree);
    REQUIRE(part(c, 0, "gated_deltanet").failure);
    CHECK(part(c, 0, "gated_deltanet").failure->type == "UnboundLocalError");
  }
  SECTION("0.6.0: the caller's win") {
    auto b = load(text("0.6.0"));
    auto c = ad::convert(b);
    CHECK(part(c, 0, "gated_deltanet").labels == kThree);
    CHECK_FALSE(part(c, 0, "gated_deltanet").failure);
    CHECK_FALSE(has(ad::run_static_checks(b, c), "layers.same_boundaries"));
  }
  SECTION("cu_seqlens on two padded rows raise in chunk_gated_delta_rule") {
    auto b = load(R"({"format": "attn-doctor/batch@1", "environment": {"fla": "0.6.0"},
      "model": {"num_heads": 8, "head_dim": 64},
      "batch": {"attention_mask": {"lengths": [3, 2], "width": 3}},
      "layers": [{"kind": "gated_deltanet", "implementation": "fla", "cu_seqlens": [0, 3, 5]}, {"kind": "attention"}]})");
    auto c = ad::convert(b);
    REQUIRE(part(c, 0, "gated_deltanet").failure);
    CHECK(part(c, 0, "gated_deltanet").failure->type == "ValueError");
    CHECK(has(ad::run_static_checks(b, c), "layers.same_boundaries"));
  }
  SECTION("a padded batch without cu_seqlens: the mask unpads, as the attention does") {
    auto b = load(R"({"format": "attn-doctor/batch@1", "environment": {"fla": "0.4.2", "transformers": "5.24.0"},
      "model": {"num_heads": 8, "head_dim": 64},
      "batch": {"attention_mask": {"lengths": [3, 1], "width": 3}},
      "layers": [{"kind": "gated_deltanet", "implementation": "fla"}, {"kind": "attention"}]})");
    auto c = ad::convert(b);
    CHECK(part(c, 0, "gated_deltanet").labels == std::vector<int32_t>{0, 0, 0, 1, -1, -1});
    CHECK(part(c, 1, "attention").labels == std::vector<int32_t>{0, 0, 0, 1, -1, -1});
    CHECK_FALSE(has(ad::run_static_checks(b, c), "layers.same_boundaries"));
  }
}

TEST_CASE("layers: a cu_seqlens that splits a sequence, and none without an attention layer", "[layers]") {
  SECTION("split") {
    auto b = load(R"({"format": "attn-doctor/batch@1", "environment": {"fla": "0.6.0"},
      "model": {"num_heads": 8, "head_dim": 64},
      "batch": {"position_ids": {"from": "packed", "lengths": [3, 2, 4]}},
      "layers": [{"kind": "gated_deltanet", "implementation": "fla", "cu_seqlens": [0, 3, 5, 7, 9]}, {"kind": "attention"}]})");
    auto v = check(b);
    REQUIRE(has(v, "layers.same_boundaries"));
    for (const auto& x : v)
      if (x.id == "layers.same_boundaries") {
        CHECK(x.evidence["difference"] == "splits");
        CHECK(x.evidence["token"]["column"] == 7);
      }
  }
  SECTION("against the intent when no attention layer is listed") {
    auto b = load(R"({"format": "attn-doctor/batch@1", "environment": {"fla": "0.6.0"},
      "model": {"num_heads": 8, "head_dim": 64},
      "batch": {"position_ids": {"from": "packed", "lengths": [3, 2, 4]}},
      "layers": [{"kind": "gated_deltanet", "implementation": "fla"}]})");
    auto v = check(b);
    REQUIRE(has(v, "layers.same_boundaries"));
  }
  SECTION("no layers: nothing replayed, nothing reported") {
    auto b = load(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
      "batch": {"position_ids": {"from": "packed", "lengths": [3, 2, 4]}}})");
    CHECK(ad::convert(b).layers.empty());
  }
}

TEST_CASE("layers: the loader's rules", "[layers][loader]") {
  auto rejects = [](const std::string& text, const std::string& path) {
    try {
      load(text);
    } catch (const ad::InputError& e) {
      CHECK(e.json_path() == path);
      return true;
    }
    return false;
  };
  const std::string head = R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64}, )";
  CHECK(rejects(head + R"("batch": {"query_length": 4}, "layers": [{"kind": "attention", "cu_seqlens": [0, 4]}]})",
                "/layers/0/cu_seqlens"));
  CHECK(rejects(head + R"("batch": {"query_length": 4}, "layers": [{"kind": "gated_deltanet", "cu_seqlens": [0, 4]}]})",
                "/layers/0/cu_seqlens"));
  CHECK(rejects(head + R"("batch": {"query_length": 4}, "layers": [{"kind": "mamba"}]})", "/layers/0/kind"));
  CHECK(rejects(head + R"("batch": {"query_length": 4}, "layers": []})", "/layers"));
  CHECK(rejects(head + R"("varlen": {"cu_seqlens_q": [0, 4]}, "layers": [{"kind": "attention"}]})", "/layers"));
  CHECK(rejects(head + R"("batch": {"query_length": 4, "seq_idx": [[0, 0, 1]]}})", "/batch/seq_idx"));
  CHECK(rejects(head + R"("batch": {"query_length": 4, "seq_idx": [[0, 0, 1, 1], [0, 0, 1, 1]]}})", "/batch/seq_idx"));
}

namespace {

// AReaL's Qwen3.5 layer on the packed row of three (3, 2, 4), cu_seqlens as the caller passes them
std::string areal(const std::string& cu, bool causal_conv1d) {
  return R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "num_kv_heads": 2, "head_dim": 64},
    "batch": {"position_ids": {"from": "packed", "lengths": [3, 2, 4]}},
    "layers": [{"kind": "gated_deltanet", "implementation": "areal", "cu_seqlens": )" + cu +
         R"(, "causal_conv1d": )" + (causal_conv1d ? "true" : "false") + R"(}, {"kind": "attention"}],
    "varlen": {"cu_seqlens_q": )" + cu + R"(, "max_seqlen_q": 4}})";
}

}  // namespace

TEST_CASE("layers: AReaL's GatedDeltaNet convolution on an empty segment", "[layers]") {
  SECTION("without causal-conv1d each segment is convolved alone: an empty one raises (areal-project/AReaL#1103)") {
    for (const char* cu : {"[0, 3, 5, 9, 9]", "[0, 3, 3, 5, 9]"}) {
      auto b = load(areal(cu, false));
      auto c = ad::convert(b);
      REQUIRE(part(c, 0, "conv1d").failure);
      CHECK(part(c, 0, "conv1d").failure->type == "RuntimeError");
      CHECK(part(c, 0, "conv1d").failure->message ==
            "Only zero batch or zero channel inputs are supported, but got input shape: [1, conv_dim, 1, 0]");
      CHECK_FALSE(part(c, 0, "delta_rule").failure);
      CHECK_THAT(part(c, 0, "delta_rule").note, Catch::Contains("not reached"));
      auto v = ad::run_static_checks(b, c);
      REQUIRE(has(v, "layers.same_boundaries"));
    }
  }
  SECTION("the same segments without the empty one: every layer agrees") {
    auto b = load(areal("[0, 3, 5, 9]", false));
    auto c = ad::convert(b);
    CHECK_FALSE(part(c, 0, "conv1d").failure);
    CHECK(part(c, 0, "conv1d").labels == kThree);
    CHECK(part(c, 0, "delta_rule").labels == kThree);
    CHECK_FALSE(has(ad::run_static_checks(b, c), "layers.same_boundaries"));
  }
  SECTION("with causal-conv1d the conv takes seq_idx from cu_seqlens: an empty segment is no input") {
    auto b = load(areal("[0, 3, 5, 9, 9]", true));
    auto c = ad::convert(b);
    CHECK_FALSE(part(c, 0, "conv1d").failure);
    CHECK(part(c, 0, "conv1d").labels == kThree);
    CHECK_FALSE(has(ad::run_static_checks(b, c), "layers.same_boundaries"));
  }
  SECTION("without cu_seqlens the layer synthesises [0, T]: one sequence for the whole row") {
    auto b = load(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "num_kv_heads": 2, "head_dim": 64},
      "batch": {"position_ids": {"from": "packed", "lengths": [3, 2, 4]}},
      "layers": [{"kind": "gated_deltanet", "implementation": "areal", "causal_conv1d": false}, {"kind": "attention"}]})");
    auto c = ad::convert(b);
    CHECK(part(c, 0, "conv1d").labels == std::vector<int32_t>(9, 0));
    CHECK(has(ad::run_static_checks(b, c), "layers.same_boundaries"));
  }
  SECTION("the message is torch's, as measured (tests/golden/conv1d-empty-segment.json)") {
    std::ifstream in(std::string(ATTN_DOCTOR_SOURCE_DIR) + "/tests/golden/conv1d-empty-segment.json");
    REQUIRE(in.good());
    const auto golden = nlohmann::json::parse(in);
    const auto& call = golden["call"];
    // the golden's cu_seqlens on a row of their width, its channels in place of conv_dim
    std::string cu = call["cu_seqlens"].dump();
    const int64_t width = call["cu_seqlens"].back().get<int64_t>();
    auto b = load(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "num_kv_heads": 2, "head_dim": 64},
      "batch": {"query_length": )" + std::to_string(width) + R"(},
      "layers": [{"kind": "gated_deltanet", "implementation": "areal", "cu_seqlens": )" + cu +
                  R"(, "causal_conv1d": false}]})");
    auto c = ad::convert(b);
    REQUIRE(part(c, 0, "conv1d").failure);
    std::string predicted = part(c, 0, "conv1d").failure->message;
    predicted.replace(predicted.find("conv_dim"), 8, std::to_string(call["channels"].get<int64_t>()));
    REQUIRE(golden["records"].size() >= 3);
    for (const auto& rec : golden["records"]) {
      INFO("torch " << rec["torch"].get<std::string>());
      size_t raised = 0;
      for (const auto& seg : rec["segments"]) {
        const bool empty = seg["start"] == seg["end"];
        CHECK(seg.contains("raises") == empty);
        if (!seg.contains("raises")) continue;
        ++raised;
        CHECK(seg["raises"]["type"] == part(c, 0, "conv1d").failure->type);
        CHECK(seg["raises"]["message"] == predicted);
      }
      CHECK(raised == 1);
    }
  }
}
