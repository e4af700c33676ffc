// Transformer Engine's DotProductAttention with qkv_format "thd" (docs/spec/transformer-engine-thd.md):
// the te.* invariants on one rank's call, the host-check messages by release, and the group check
// of the per-rank captures of one context-parallel call.
#include "test_check_helpers.hpp"

#include "check/te_thd.hpp"

using namespace check_test;

namespace {

// One rank's THD call: global offsets as TE takes them, `rows` this rank's shard.
std::string te_call(const std::string& varlen, const std::string& cp = "", const std::string& env = "") {
  return R"({"format": "attn-doctor/batch@1", "environment": {)" + env + R"("device": "cuda:0"},
      "model": {"num_heads": 8, "num_kv_heads": 8, "head_dim": 64},
      "varlen": {"api": "transformer_engine.dot_product_attention", )" + varlen + "}" +
         (cp.empty() ? "" : R"(, "context_parallel": )" + cp) + "}";
}

ad::Batch load(const std::string& json, const std::string& file = "test.json") { return ad::parse_batch_text(json, file); }

}  // namespace

TEST_CASE("te thd: a healthy context-parallel rank holds", "[te_thd]") {
  // lengths 7, 6, 4 padded to 8, 8, 4; CP 2: rank 1 holds 10 rows, chunks 1 and 2
  auto r = run(te_call(R"("cu_seqlens_q": [0, 7, 13, 17], "cu_seqlens_q_padded": [0, 8, 16, 20],
                          "cu_seqlens_kv_padded": [0, 8, 16, 20], "max_seqlen_q": 8, "total_q": 10, "total_k": 10)",
                       R"({"size": 2, "rank": 1, "chunks": [[1, 2], [1, 2], [1, 2]]})"));
  INFO(r.describe());
  CHECK(r.violations.empty());
}

TEST_CASE("te thd: sequences not padded to 2 x CP", "[te_thd]") {
  // lengths 7 and 6 padded to 8 and 6: the second is not a multiple of 2 x CP = 4
  auto r = run(te_call(R"("cu_seqlens_q": [0, 7, 13], "cu_seqlens_q_padded": [0, 8, 14],
                          "cu_seqlens_kv_padded": [0, 8, 14], "total_q": 7, "total_k": 7)",
                       R"({"size": 2, "rank": 0})"));
  INFO(r.describe());
  REQUIRE(r.first() == "te.cp_padding_multiple");
  CHECK(r.get("te.cp_padding_multiple").evidence["segment"] == 1);
  CHECK(r.get("te.cp_padding_multiple").evidence["unaligned"] == 1);
  CHECK(r.ids() == std::vector<std::string>{"te.cp_padding_multiple"});  // pad_between_seqs inferred True
  REQUIRE(r.get("te.cp_padding_multiple").symptom);
  CHECK(r.get("te.cp_padding_multiple").symptom->outcome == ad::Outcome::wrong_output);
  // not padded at all: the padding-free path too (TE#3331's mechanism), and 13 rows do not split
  auto bare = run(te_call(R"("cu_seqlens_q": [0, 7, 13], "cu_seqlens_q_padded": [0, 7, 13],
                             "cu_seqlens_kv_padded": [0, 7, 13], "total_q": 7, "total_k": 7)",
                          R"({"size": 2, "rank": 0})"));
  INFO(bare.describe());
  CHECK(bare.first() == "te.cp_padding_multiple");
  CHECK(bare.has("te.pad_between_seqs"));
  CHECK(bare.has("te.cp_shard"));
}

TEST_CASE("te thd: tail padding infers pad_between_seqs False, and passing True fixes it", "[te_thd]") {
  const std::string v = R"("cu_seqlens_q": [0, 698], "cu_seqlens_q_padded": [0, 704], "cu_seqlens_kv_padded": [0, 704],
                           "total_q": 176, "total_k": 176)";
  auto inferred = run(te_call(v, R"({"size": 4, "rank": 0})"));
  INFO(inferred.describe());
  REQUIRE(inferred.first() == "te.pad_between_seqs");
  CHECK(inferred.get("te.pad_between_seqs").evidence["pad_between_seqs"] == "inferred");
  REQUIRE(inferred.get("te.pad_between_seqs").symptom);
  CHECK(inferred.get("te.pad_between_seqs").symptom->basis == "report NVIDIA/TransformerEngine#3331");
  auto given = run(te_call(v + R"(, "pad_between_seqs": true)", R"({"size": 4, "rank": 0})"));
  CHECK(given.violations.empty());
  // without CP the tail padding is harmless
  auto alone = run(te_call(R"("cu_seqlens_q": [0, 698], "cu_seqlens_q_padded": [0, 704], "cu_seqlens_kv_padded": [0, 704],
                              "total_q": 704, "total_k": 704)"));
  CHECK(alone.violations.empty());
}

TEST_CASE("te thd: pad_between_seqs passed False over padding between sequences", "[te_thd]") {
  auto r = run(te_call(R"("cu_seqlens_q": [0, 3, 5], "cu_seqlens_q_padded": [0, 4, 8], "cu_seqlens_kv_padded": [0, 4, 8],
                          "pad_between_seqs": false, "total_q": 8, "total_k": 8)"));
  INFO(r.describe());
  REQUIRE(r.first() == "te.pad_between_seqs");
  CHECK(r.get("te.pad_between_seqs").evidence["segment"] == 1);
}

TEST_CASE("te thd: padded offsets that do not hold the actual tokens", "[te_thd]") {
  // the two arrays swapped: sequence 0's 4 actual tokens in 3 padded rows
  auto r = run(te_call(R"("cu_seqlens_q": [0, 4, 8], "cu_seqlens_q_padded": [0, 3, 5], "cu_seqlens_kv_padded": [0, 3, 5],
                          "total_q": 8, "total_k": 8)"));
  INFO(r.describe());
  REQUIRE(r.first() == "te.padded_offsets");
  CHECK(r.get("te.padded_offsets").evidence["segment"] == 0);
  CHECK(r.get("te.padded_offsets").message.find("do not fit its 3 padded rows") != std::string::npos);
  auto count = run(te_call(R"("cu_seqlens_q": [0, 4, 8], "cu_seqlens_q_padded": [0, 8], "total_q": 8, "total_k": 8)"));
  CHECK(count.first() == "te.padded_offsets");
  auto past = run(te_call(R"("cu_seqlens_q": [0, 4, 8], "cu_seqlens_q_padded": [0, 4, 12], "cu_seqlens_kv_padded": [0, 4, 12],
                             "total_q": 8, "total_k": 8)"));
  REQUIRE(past.first() == "te.padded_offsets");
  REQUIRE(past.get("te.padded_offsets").symptom);
  CHECK(past.get("te.padded_offsets").symptom->outcome == ad::Outcome::out_of_bounds);
}

TEST_CASE("te thd: a rank that passed its own offsets, a local max_seqlen, the wrong chunks", "[te_thd]") {
  auto own = run(te_call(R"("cu_seqlens_q": [0, 4, 8], "cu_seqlens_q_padded": [0, 4, 8], "cu_seqlens_kv_padded": [0, 4, 8],
                            "total_q": 8, "total_k": 8)",
                         R"({"size": 2, "rank": 0})"));
  INFO(own.describe());
  REQUIRE(own.first() == "te.cp_shard");
  CHECK(own.get("te.cp_shard").message.find("already divided by CP") != std::string::npos);
  auto local_max = run(te_call(R"("cu_seqlens_q": [0, 8, 16], "cu_seqlens_q_padded": [0, 8, 16],
                                  "cu_seqlens_kv_padded": [0, 8, 16], "max_seqlen_q": 4, "total_q": 8, "total_k": 8)",
                               R"({"size": 2, "rank": 1})"));
  REQUIRE(local_max.first() == "te.cp_shard");
  CHECK(local_max.get("te.cp_shard").evidence["largest"] == 8);
  auto chunks = run(te_call(R"("cu_seqlens_q": [0, 8, 16], "cu_seqlens_q_padded": [0, 8, 16],
                               "cu_seqlens_kv_padded": [0, 8, 16], "total_q": 8, "total_k": 8)",
                            R"({"size": 2, "rank": 1, "chunks": [[1, 2], [2, 3]]})"));
  REQUIRE(chunks.first() == "te.cp_chunks");
  CHECK(chunks.get("te.cp_chunks").evidence["segment"] == 1);
}

TEST_CASE("te thd: host checks in order, with the release's message", "[te_thd]") {
  auto mask = run(te_call(R"("cu_seqlens_q": [0, 8], "cu_seqlens_k": [0, 4, 8], "attn_mask_type": "causal")"));
  REQUIRE(mask.first() == "te.thd_arguments");
  CHECK(mask.get("te.thd_arguments").evidence["check"] == "attn_mask_type");  // before the shapes
  auto shape = run(te_call(R"("cu_seqlens_q": [0, 8], "cu_seqlens_k": [0, 4, 8])"));
  CHECK(shape.get("te.thd_arguments").evidence["check"] == "cu_seqlens_shape");
  const std::string no_padded = R"("cu_seqlens_q": [0, 8, 16], "total_q": 8, "total_k": 8)";
  auto message = [&](const std::string& release) {
    auto r = run(te_call(no_padded, R"({"size": 2, "rank": 0})", R"("transformer_engine": ")" + release + R"(", )"));
    return r.get("te.thd_arguments").evidence.value("upstream_message", std::string());
  };
  CHECK(message("1.13.0") == "cu_seqlens_q_padded and cu_seqlens_kv_padded cannot be None with context parallelism!");
  CHECK(message("2.5.0") == "cu_seqlens_padded cannot be None with context parallelism + THD format!");
  CHECK(message("2.12.0") == "cu_seqlens_padded can not be None for context parallelism and qkv_format = 'thd'!");
  // none given: 2.12's
  auto none = run(te_call(no_padded, R"({"size": 2, "rank": 0})"));
  CHECK(none.get("te.thd_arguments").evidence["release"] == "not given (2.12 assumed)");
}

TEST_CASE("te thd: the te.* invariants speak only for TE calls, and FA2's do not run on them", "[te_thd]") {
  // a healthy CP rank: FA2's cu_seqlens.total would flag cu[-1] (global) against the shard's rows
  auto r = run(te_call(R"("cu_seqlens_q": [0, 8, 16], "cu_seqlens_q_padded": [0, 8, 16], "cu_seqlens_kv_padded": [0, 8, 16],
                          "total_q": 8, "total_k": 8)",
                       R"({"size": 2, "rank": 0})"));
  CHECK_FALSE(r.has("cu_seqlens.total"));
  CHECK(r.violations.empty());
}

TEST_CASE("te thd group: one call's ranks against each other and the global batch", "[te_thd]") {
  const std::string v0 = R"("cu_seqlens_q": [0, 7, 13, 17], "cu_seqlens_q_padded": [0, 8, 16, 20],
                            "cu_seqlens_kv_padded": [0, 8, 16, 20], "max_seqlen_q": 8, "total_q": 10, "total_k": 10)";
  ad::Batch r0 = load(te_call(v0, R"({"size": 2, "rank": 0, "call": "c", "chunks": [[0, 3], [0, 3], [0, 3]]})"), "r0.json");
  ad::Batch r1 = load(te_call(v0, R"({"size": 2, "rank": 1, "call": "c", "chunks": [[1, 2], [1, 2], [1, 2]]})"), "r1.json");
  SECTION("healthy") {
    auto g = ad::check_cp_group({{"r1.json", &r1}, {"r0.json", &r0}});
    CHECK(g.findings.empty());
    CHECK(g.files == std::vector<std::string>{"r0.json", "r1.json"});  // by rank
  }
  SECTION("a rank with other offsets") {
    ad::Batch bad = load(te_call(R"("cu_seqlens_q": [0, 7, 12, 17], "cu_seqlens_q_padded": [0, 8, 16, 20],
                                    "cu_seqlens_kv_padded": [0, 8, 16, 20], "max_seqlen_q": 8, "total_q": 10, "total_k": 10)",
                                 R"({"size": 2, "rank": 1, "call": "c"})"),
                         "bad.json");
    auto g = ad::check_cp_group({{"r0.json", &r0}, {"bad.json", &bad}});
    REQUIRE(g.findings.size() == 1);
    CHECK(g.findings[0].rank == 1);
    CHECK(g.findings[0].file == "bad.json");
    CHECK(g.findings[0].segment == 1);
    CHECK(g.findings[0].violation.id == "te.cp_group");
  }
  SECTION("a chunk held twice") {
    ad::Batch dup = load(te_call(v0, R"({"size": 2, "rank": 1, "call": "c", "chunks": [[1, 2], [0, 3], [1, 2]]})"), "dup.json");
    auto g = ad::check_cp_group({{"r0.json", &r0}, {"dup.json", &dup}});
    REQUIRE(g.findings.size() == 1);
    CHECK(g.findings[0].segment == 1);
    CHECK(g.findings[0].violation.message.find("holds chunks 0 and 3 of sequence 1") != std::string::npos);
  }
  SECTION("hostile: a rank missing, a rank twice, sizes that differ") {
    ad::Batch r3 = load(te_call(v0, R"({"size": 4, "rank": 3, "call": "c"})"), "r3.json");
    try {
      ad::check_cp_group({{"r0.json", &r0}, {"r0b.json", &r0}});
      FAIL("a rank held twice was accepted");
    } catch (const ad::InputError& e) {
      CHECK(e.file() == "r0b.json");
      CHECK(e.json_path() == "/context_parallel/rank");
      CHECK(e.found().find("also held by r0.json") != std::string::npos);
    }
    try {
      ad::check_cp_group({{"r0.json", &r0}, {"r3.json", &r3}});
      FAIL("sizes that differ were accepted");
    } catch (const ad::InputError& e) {
      CHECK(e.json_path() == "/context_parallel/size");
      CHECK(e.found() == "size 4");
    }
    ad::Batch q0 = load(te_call(v0, R"({"size": 3, "rank": 0, "call": "c"})"), "q0.json");
    ad::Batch q2 = load(te_call(v0, R"({"size": 3, "rank": 2, "call": "c"})"), "q2.json");
    try {
      ad::check_cp_group({{"q0.json", &q0}, {"q2.json", &q2}});
      FAIL("a missing rank was accepted");
    } catch (const ad::InputError& e) {
      CHECK(e.json_path() == "/context_parallel");
      CHECK(e.found() == "2 captures: rank(s) 1 missing");
    }
  }
}

TEST_CASE("te thd: the sequences TE attends against the intended ones (te.sequences)", "[te_thd]") {
  // two sources of 5 and 3 tokens padded to 8 and 8 (the pack of NVIDIA-NeMo/RL PR#4105's review)
  auto call = [](const std::string& varlen, bool causal) {
    return std::string(R"({"format": "attn-doctor/batch@1", "environment": {"device": "cuda:0"},
      "model": {"num_heads": 8, "num_kv_heads": 8, "head_dim": 64, "causal": )") + (causal ? "true" : "false") + R"(},
      "varlen": {"api": "transformer_engine.dot_product_attention", "total_q": 16, "total_k": 16, )" + varlen + R"(},
      "intent": {"sequences": [{"start": 0, "length": 5}, {"start": 8, "length": 3}]}})";
  };
  const std::string as_actual = R"("cu_seqlens_q": [0, 8, 16], "cu_seqlens_q_padded": [0, 8, 16],
      "cu_seqlens_kv_padded": [0, 8, 16], "pad_between_seqs": false)";
  SECTION("the padded offsets passed as the actual lengths, causal: the padding after each sequence, a warning") {
    auto r = run(call(as_actual + R"(, "attn_mask_type": "padding_causal")", true));
    INFO(r.describe());
    REQUIRE(r.first() == "te.sequences");
    CHECK(r.get("te.sequences").severity == ad::Severity::warning);
    CHECK(r.get("te.sequences").evidence["padding_tokens"] == 3);
  }
  SECTION("the same without a causal mask: real queries attend the padding, an error") {
    auto r = run(call(as_actual + R"(, "attn_mask_type": "padding")", false));
    INFO(r.describe());
    REQUIRE(r.first() == "te.sequences");
    CHECK(r.get("te.sequences").severity == ad::Severity::error);
  }
  SECTION("the true lengths with the padded offsets: every sequence is an intended one") {
    auto r = run(call(R"("cu_seqlens_q": [0, 5, 8], "cu_seqlens_q_padded": [0, 8, 16], "cu_seqlens_kv_padded": [0, 8, 16],
                         "pad_between_seqs": true, "attn_mask_type": "padding_causal")", true));
    INFO(r.describe());
    CHECK_FALSE(r.has("te.sequences"));
  }
  SECTION("one sequence over both sources: merged, an error") {
    auto r = run(call(R"("cu_seqlens_q": [0, 16], "attn_mask_type": "padding_causal")", true));
    INFO(r.describe());
    REQUIRE(r.has("te.sequences"));
    CHECK(r.get("te.sequences").severity == ad::Severity::error);
    CHECK(r.get("te.sequences").evidence["intended_other"] == "rows 8-10");
  }
  SECTION("without an explicit intent nothing is compared") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "environment": {"device": "cuda:0"},
      "model": {"num_heads": 8, "num_kv_heads": 8, "head_dim": 64},
      "varlen": {"api": "transformer_engine.dot_product_attention", "total_q": 16, "total_k": 16, )" + as_actual + "}}");
    CHECK_FALSE(r.has("te.sequences"));
  }
}
