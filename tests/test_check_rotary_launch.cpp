// Invariants 28-32 (rotary) and 40 (Triton autotune keys).
#include "test_check_helpers.hpp"

using namespace check_test;

TEST_CASE("rotary.dim: the rotary dim is per head", "[check]") {
  SECTION("the worked example rotary-model-width (FLA #180) breaks exactly it") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "name": "rotary-model-width", "environment": {"fla": "0.5.2"},
                     "model": {"num_heads": 16, "head_dim": 64, "hidden_size": 1024},
                     "rotary": {"implementation": "fla", "dim": 1024},
                     "varlen": {"cu_seqlens_q": [0, 512, 1024], "max_seqlen_q": 512}})");
    REQUIRE_ONLY(r, "rotary.dim");
    const auto& v = r.violations[0];
    CHECK_THAT(v.message, Catch::Contains("model width"));
    CHECK(v.evidence["elements_past_head"] == 960);
    CHECK(v.evidence["upstream_message"] == "an illegal memory access was encountered");
  }
  SECTION("fla-core 0.6.0 (and no release named: the newest) asserts it before the launch") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 16, "head_dim": 64, "hidden_size": 1024},
                     "rotary": {"implementation": "fla", "dim": 1024}, "varlen": {"cu_seqlens_q": [0, 512, 1024]}})");
    REQUIRE_ONLY(r, "rotary.dim");
    CHECK(r.violations[0].evidence["upstream_message"] ==
          "Rotary dimension must not exceed head dimension, got rotary_dim=1024 and head_dim=64");
    CHECK(r.violations[0].symptom->outcome == ad::Outcome::raises);
  }
  SECTION("flash_attn's apply_rotary rejects it on the host") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 16, "head_dim": 64},
                     "rotary": {"implementation": "flash_attn", "dim": 128, "layout": "THD"},
                     "varlen": {"cu_seqlens_q": [0, 512, 1024]}})");
    REQUIRE_ONLY(r, "rotary.dim");
    CHECK(r.violations[0].evidence["upstream_message"] == "rotary_dim must be <= headdim");
  }
  SECTION("the head dim (or less) holds") {
    REQUIRE_CLEAN(run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 16, "head_dim": 64},
                          "rotary": {"implementation": "fla", "dim": 32}, "varlen": {"cu_seqlens_q": [0, 512, 1024]}})"));
  }
  SECTION("a head dim past the release limit is reported first") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 4, "head_dim": 300},
                     "rotary": {"implementation": "fla", "dim": 400}, "varlen": {"cu_seqlens_q": [0, 8]}})");
    REQUIRE_EARLIER_WINS(r, "input.head_dim", "rotary.dim");
  }
}

TEST_CASE("rotary.even: an even rotary dim (16 for the fused kv-cache rotary)", "[check]") {
  SECTION("an odd dim breaks exactly it") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "rotary": {"implementation": "fla", "dim": 63}, "varlen": {"cu_seqlens_q": [0, 8]}})");
    REQUIRE_ONLY(r, "rotary.even");
  }
  SECTION("flash_attn with a cache (flash_attn_with_kvcache) needs a multiple of 16") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "batch": {"kv_length": 16, "query_length": 1, "cache": {"kind": "dynamic"}},
                     "rotary": {"implementation": "flash_attn", "dim": 40}})");
    REQUIRE_ONLY(r, "rotary.even");
    CHECK(r.violations[0].evidence["upstream_message"] == "Only rotary dimensions divisible by 16 are currently supported");
  }
  SECTION("an even dim holds (40 without a cache)") {
    REQUIRE_CLEAN(run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                          "rotary": {"implementation": "fla", "dim": 40}, "varlen": {"cu_seqlens_q": [0, 8]}})"));
  }
  SECTION("an odd dim past the head: rotary.dim is reported first") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "rotary": {"implementation": "fla", "dim": 65}, "varlen": {"cu_seqlens_q": [0, 8]}})");
    REQUIRE_EARLIER_WINS(r, "rotary.dim", "rotary.even");
  }
}

TEST_CASE("rotary.layout: a layout the kernel supports, batch 1 with cu_seqlens", "[check]") {
  SECTION("flash_attn with cu_seqlens given a 4-D tensor breaks exactly it") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "rotary": {"implementation": "flash_attn", "dim": 64}, "varlen": {"cu_seqlens_q": [0, 4, 8]}})");
    REQUIRE_ONLY(r, "rotary.layout");
    CHECK(r.violations[0].evidence["upstream_message"] == "too many values to unpack (expected 3)");
  }
  SECTION("FLA with cu_seqlens on a padded batch of 2, and FLA on a (B, H, T, D) tensor") {
    auto padded = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                          "batch": {"batch_size": 2, "kv_length": 8},
                          "rotary": {"implementation": "fla", "dim": 64, "varlen": true}})");
    REQUIRE_ONLY(padded, "rotary.layout");
    CHECK(padded.violations[0].evidence["batch"] == 2);
    auto bhtd = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                        "batch": {"batch_size": 2, "kv_length": 8},
                        "rotary": {"implementation": "fla", "dim": 64, "layout": "BHTD"}})");
    REQUIRE_ONLY(bhtd, "rotary.layout");
  }
  SECTION("THD for flash_attn varlen and BTHD for FLA varlen hold") {
    REQUIRE_CLEAN(run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                          "rotary": {"implementation": "flash_attn", "dim": 64, "layout": "THD"},
                          "varlen": {"cu_seqlens_q": [0, 4, 8]}})"));
    REQUIRE_CLEAN(run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                          "rotary": {"implementation": "fla", "dim": 64}, "varlen": {"cu_seqlens_q": [0, 4, 8]}})"));
  }
  SECTION("an odd rotary dim is reported first") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "rotary": {"implementation": "flash_attn", "dim": 63}, "varlen": {"cu_seqlens_q": [0, 4, 8]}})");
    REQUIRE_EARLIER_WINS(r, "rotary.even", "rotary.layout");
  }
}

TEST_CASE("rotary.table: the cos/sin table covers every position", "[check]") {
  SECTION("FLA varlen needs the packed length, not the longest sequence (FLA #515): breaks exactly it") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "environment": {"fla": "0.5.2"}, "model": {"num_heads": 8, "head_dim": 64},
                     "rotary": {"implementation": "fla", "dim": 64, "table_length": 512},
                     "varlen": {"cu_seqlens_q": [0, 512, 1024]}})");
    REQUIRE_ONLY(r, "rotary.table");
    CHECK(r.violations[0].evidence["needed"] == 1024);
    CHECK(r.violations[0].evidence["upstream_message"] == "TR must be >= T, got 512 and 1024");
    // fla-core 0.6.0 drops TR >= T in varlen but still asserts offset + T <= TR on the packed length
    auto now = run(R"({"format": "attn-doctor/batch@1", "environment": {"fla": "0.6.0"}, "model": {"num_heads": 8, "head_dim": 64},
                       "rotary": {"implementation": "fla", "dim": 64, "table_length": 512},
                       "varlen": {"cu_seqlens_q": [0, 512, 1024]}})");
    REQUIRE_ONLY(now, "rotary.table");
    CHECK(now.violations[0].evidence["upstream_message"] == "AssertionError");
  }
  SECTION("flash_attn: seqlen_ro < max_seqlen raises; per-sequence offsets past the table are left unrotated") {
    auto short_table = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                               "rotary": {"implementation": "flash_attn", "dim": 64, "layout": "THD", "table_length": 500},
                               "varlen": {"cu_seqlens_q": [0, 512, 1024]}})");
    REQUIRE_ONLY(short_table, "rotary.table");
    CHECK(short_table.violations[0].evidence["upstream_message"] == "seqlen_ro must be >= seqlen");
    auto offsets = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                           "rotary": {"implementation": "flash_attn", "dim": 64, "layout": "THD", "table_length": 512,
                                      "seqlen_offset": [0, 450]},
                           "varlen": {"cu_seqlens_q": [0, 100, 200]}})");
    REQUIRE_ONLY(offsets, "rotary.table");
    CHECK_THAT(offsets.violations[0].message, Catch::Contains("unrotated"));
  }
  SECTION("a table covering the packed length holds; no table_length means it grows") {
    REQUIRE_CLEAN(run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                          "rotary": {"implementation": "fla", "dim": 64, "table_length": 1024},
                          "varlen": {"cu_seqlens_q": [0, 512, 1024]}})"));
    REQUIRE_CLEAN(run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                          "rotary": {"implementation": "fla", "dim": 64}, "varlen": {"cu_seqlens_q": [0, 512, 1024]}})"));
  }
  SECTION("a 4-D tensor for flash_attn varlen is reported first") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "rotary": {"implementation": "flash_attn", "dim": 64, "table_length": 100},
                     "varlen": {"cu_seqlens_q": [0, 512, 1024]}})");
    REQUIRE_EARLIER_WINS(r, "rotary.layout", "rotary.table");
  }
}

TEST_CASE("rotary.positions: packed sequences restart their positions", "[check]") {
  SECTION("a packed tensor rotated without cu_seqlens breaks exactly it") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "rotary": {"implementation": "fla", "dim": 64, "varlen": false},
                     "varlen": {"cu_seqlens_q": [0, 4, 8]}})");
    REQUIRE_ONLY(r, "rotary.positions");
    CHECK(r.violations[0].evidence["sequences_in_row"] == 2);
  }
  SECTION("hf rotary follows the position ids: an arange over a packed row") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "batch": {"position_ids": {"values": [[0, 1, 2, 3, 4, 5, 6, 7]]}},
                     "intent": {"sequences": [{"row": 0, "start": 0, "length": 4}, {"row": 0, "start": 4, "length": 4}]},
                     "rotary": {"implementation": "hf", "dim": 64}})",
                 Replay::given(packed_replay({0, 4, 8}, 4, 8)));
    // the ids do not restart: detection (position_ids.origin) is reported first, rotary after it
    REQUIRE_EARLIER_WINS(r, "position_ids.origin", "rotary.positions");
  }
  SECTION("cu_seqlens reaching the rotary kernel hold (the default with cu_seqlens)") {
    REQUIRE_CLEAN(run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                          "rotary": {"implementation": "fla", "dim": 64}, "varlen": {"cu_seqlens_q": [0, 4, 8]}})"));
  }
  SECTION("a short table is reported first") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
                     "rotary": {"implementation": "fla", "dim": 64, "varlen": false, "table_length": 4},
                     "varlen": {"cu_seqlens_q": [0, 4, 8]}})");
    REQUIRE_EARLIER_WINS(r, "rotary.table", "rotary.positions");
  }
}

// FLA #354: chunk_scaled_dot_kkt_fwd_kernel as it was declared then. BK comes from the autotune
// configs and sits before the IS_VARLEN key (filled by an outer @triton.heuristics).
static std::string kkt_launch(const char* triton, const char* dtype = "bf16") {
  std::string env = triton ? std::string(R"("environment": {"triton": ")") + triton + R"("}, )" : std::string();
  return std::string(R"({"format": "attn-doctor/batch@1", )") + env + R"("model": {"num_heads": 8, "head_dim": 64, "dtype": ")" +
         dtype + R"("},
    "launch": {"kernel": "chunk_scaled_dot_kkt_fwd_kernel",
               "signature": ["k", "beta", "A", "cu_seqlens", "chunk_indices", "T", "H", "K", "BT", "BK", "IS_VARLEN"],
               "passed": ["k", "beta", "A", "cu_seqlens", "chunk_indices", "T", "H", "K", "BT"],
               "heuristics": ["IS_VARLEN"], "config_params": ["BK"],
               "autotune_keys": ["H", "K", "BT", "IS_VARLEN"]}})";
}

TEST_CASE("launch.autotune_keys: Triton's key lookup, by position up to 3.1 and by name after", "[check]") {
  SECTION("Triton 3.1.0 (FLA #354) breaks exactly it: IndexError, pointing at BK") {
    auto r = run(kkt_launch("3.1.0"));
    REQUIRE_ONLY(r, "launch.autotune_keys");
    const auto& v = r.violations[0];
    CHECK(v.severity == ad::Severity::error);
    CHECK(v.evidence["key"] == "IS_VARLEN");
    CHECK(v.evidence["shifted_by"] == std::vector<std::string>{"BK"});
    CHECK(v.evidence["upstream_message"] == "IndexError: list index out of range");
    CHECK_THAT(v.message, Catch::Contains("\"BK\" (supplied by the autotune configs)"));
  }
  SECTION("a shift that stays in range reads another parameter's value: a warning") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "environment": {"triton": "3.0.0"},
                     "model": {"num_heads": 8, "head_dim": 64},
                     "launch": {"signature": ["x", "BLOCK", "N", "M"], "passed": ["x", "N", "M"],
                                "config_params": ["BLOCK"], "autotune_keys": ["N"]}})");
    REQUIRE_ONLY(r, "launch.autotune_keys");
    CHECK(r.violations[0].severity == ad::Severity::warning);
    CHECK(r.violations[0].evidence["read_instead"] == "M");
  }
  SECTION("a key that is no parameter raises at decoration on Triton <= 3.1") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "environment": {"triton": "2.3.1"},
                     "model": {"num_heads": 8, "head_dim": 64},
                     "launch": {"signature": ["x", "N"], "passed": ["x", "N"], "autotune_keys": ["n_elements"]}})");
    REQUIRE_ONLY(r, "launch.autotune_keys");
    CHECK(r.violations[0].evidence["upstream_message"] == "ValueError: 'n_elements' is not in list");
  }
  SECTION("Triton 3.2 looks keys up by name: the same kernel holds; a config-supplied key is only a warning") {
    REQUIRE_CLEAN(run(kkt_launch("3.2.0")));
    auto r = run(R"({"format": "attn-doctor/batch@1", "environment": {"triton": "3.3.1"},
                     "model": {"num_heads": 8, "head_dim": 64},
                     "launch": {"signature": ["x", "N", "BLOCK"], "passed": ["x", "N"],
                                "config_params": ["BLOCK"], "autotune_keys": ["N", "BLOCK"]}})");
    REQUIRE_ONLY(r, "launch.autotune_keys");
    CHECK(r.violations[0].severity == ad::Severity::warning);
  }
  SECTION("no triton release given: the positional analysis, as a warning") {
    auto r = run(kkt_launch(nullptr));
    REQUIRE_ONLY(r, "launch.autotune_keys");
    CHECK(r.violations[0].severity == ad::Severity::warning);
  }
  SECTION("keys before every config parameter hold on Triton 3.1") {
    REQUIRE_CLEAN(run(R"({"format": "attn-doctor/batch@1", "environment": {"triton": "3.1.0"},
                          "model": {"num_heads": 8, "head_dim": 64},
                          "launch": {"signature": ["k", "T", "H", "K", "BT", "IS_VARLEN", "BK"],
                                     "passed": ["k", "T", "H", "K", "BT"], "heuristics": ["IS_VARLEN"],
                                     "config_params": ["BK"], "autotune_keys": ["H", "K", "BT", "IS_VARLEN"]}})"));
  }
  SECTION("an fp32 model is reported first") {
    auto r = run(kkt_launch("3.1.0", "fp32"));
    REQUIRE_EARLIER_WINS(r, "input.dtype", "launch.autotune_keys");
  }
}

namespace {
// FLA's token_shift on x [1, total, D] packed from documents of `doc` tokens
// (fla-org/flash-linear-attention#903's layout)
std::string token_shift(const char* fla, int64_t total, int64_t doc, int64_t sms) {
  std::string cu = "0";
  for (int64_t at = doc; at - doc < total; at += doc) cu += ", " + std::to_string(std::min(at, total));
  return std::string(R"({"format": "attn-doctor/batch@1", "environment": {"fla": ")") + fla + R"("},
    "model": {"num_heads": 1, "head_dim": 8},
    "varlen": {"cu_seqlens_q": [)" + cu + R"(], "max_seqlen_q": )" + std::to_string(doc) + R"(},
    "fla_op": {"name": "token_shift", "multiprocessors": )" + std::to_string(sms) + "}}";
}
}  // namespace

TEST_CASE("launch.fla_grid: token_shift's grid on axis y, by release", "[check]") {
  SECTION("0.3.1 - 0.5.0: the long kernel's time chunks pass 65535 at FLA #903's boundary (BT = 4)") {
    auto r = run(token_shift("0.5.0", 262141, 752, 188));
    REQUIRE_ONLY(r, "launch.fla_grid");
    const auto& ev = r.violations[0].evidence;
    CHECK(ev["block_t"] == 4);
    CHECK(ev["time_chunks"] == 65536);
    CHECK(ev["kernel"] == "token_shift_fwd_kernel_long");
    CHECK(ev["upstream_message"] == "Triton Error [CUDA]: invalid argument");
    REQUIRE(r.violations[0].symptom);
    CHECK(r.violations[0].symptom->outcome == ad::Outcome::raises);
    REQUIRE_CLEAN(run(token_shift("0.5.0", 262140, 752, 188)));
  }
  SECTION("the H100's 132 multiprocessors take 8-token chunks: 524281 fails, 524280 holds (measured)") {
    auto r = run(token_shift("0.4.0", 524281, 752, 132));
    REQUIRE_ONLY(r, "launch.fla_grid");
    CHECK(r.violations[0].evidence["block_t"] == 8);
    CHECK(r.violations[0].evidence["time_chunks"] == 65536);
    REQUIRE_CLEAN(run(token_shift("0.5.0", 524280, 752, 132)));
  }
  SECTION("0.5.1 on choose the kernel from the longest document and put the chunks on axis x") {
    REQUIRE_CLEAN(run(token_shift("0.5.1", 524281, 752, 132)));
    REQUIRE_CLEAN(run(token_shift("0.6.0", 524281, 752, 132)));
  }
  SECTION("0.2.2 - 0.3.0: one kernel, the longest document's tokens on axis y") {
    auto r = run(token_shift("0.3.0", 65536, 65536, 132));
    REQUIRE_ONLY(r, "launch.fla_grid");
    CHECK(r.violations[0].evidence["kernel"] == "token_shift_fwd_kernel");
    CHECK(r.violations[0].evidence["grid_y"] == 65536);
    REQUIRE_CLEAN(run(token_shift("0.3.0", 65535, 65535, 132)));
    // the same packed row of short documents holds there
    REQUIRE_CLEAN(run(token_shift("0.3.0", 524281, 752, 132)));
  }
  SECTION("without a release, or before token_shift existed, nothing is predicted") {
    auto none = run(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 1, "head_dim": 8},
                        "varlen": {"cu_seqlens_q": [0, 70000], "max_seqlen_q": 70000},
                        "fla_op": {"name": "token_shift"}})");
    CHECK_FALSE(none.has("launch.fla_grid"));
    CHECK_FALSE(run(token_shift("0.2.1", 65536, 65536, 132)).has("launch.fla_grid"));
  }
  SECTION("without cu_seqlens: B rows of T, time chunks of ceil(T / BT)") {
    auto r = run(R"({"format": "attn-doctor/batch@1", "environment": {"fla": "0.5.0"},
                     "model": {"num_heads": 1, "head_dim": 8},
                     "batch": {"batch_size": 1, "query_length": 4194305},
                     "fla_op": {"name": "token_shift", "multiprocessors": 132}})");
    REQUIRE(r.has("launch.fla_grid"));
    CHECK(r.get("launch.fla_grid").evidence["block_t"] == 64);
    CHECK(r.get("launch.fla_grid").evidence["time_chunks"] == 65537);
  }
  SECTION("an fla_op needs x's shape beside it") {
    CHECK_THROWS_AS(ad::parse_batch_text(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 1, "head_dim": 8},
                                             "rotary": {"dim": 8}, "fla_op": {"name": "token_shift"}})",
                                         "x.json"),
                    ad::InputError);
  }
}

TEST_CASE("rotary.table: FLA's TR >= T assert by release", "[check]") {
  auto table = [](const char* fla, const char* rest) {
    return std::string(R"({"format": "attn-doctor/batch@1", "environment": {"fla": ")") + fla +
           R"("}, "model": {"num_heads": 8, "head_dim": 128}, )" + rest + "}";
  };
  const char* padded = R"("batch": {"batch_size": 1, "query_length": 706},
    "rotary": {"implementation": "fla", "dim": 128, "table_length": 256, "varlen": false})";
  SECTION("every release asserts it without cu_seqlens; the values are in the message from 0.3.0") {
    CHECK(run(table("0.2.2", padded)).get("rotary.table").evidence["upstream_message"] == "TR must be >= T");
    CHECK(run(table("0.1", padded)).get("rotary.table").evidence["upstream_message"] == "TR must be >= T");
    CHECK(run(table("0.3.0", padded)).get("rotary.table").evidence["upstream_message"] == "TR must be >= T, got 256 and 706");
  }
  SECTION("varlen: 0.1.x assert against max_seqlen, 0.2.0 - 0.5.2 against the packed length") {
    const char* packed = R"("varlen": {"cu_seqlens_q": [0, 256, 456, 606, 706], "max_seqlen_q": 256},
      "rotary": {"implementation": "fla", "dim": 128, "table_length": 256, "varlen": true})";
    CHECK_FALSE(run(table("0.1.2", packed)).has("rotary.table"));  // T = max_seqlen = 256 fits
    auto two = run(table("0.2.0", packed));
    REQUIRE(two.has("rotary.table"));
    CHECK(two.get("rotary.table").evidence["needed"] == 706);
    const char* longer = R"("varlen": {"cu_seqlens_q": [0, 300, 456], "max_seqlen_q": 300},
      "rotary": {"implementation": "fla", "dim": 128, "table_length": 256, "varlen": true})";
    auto one = run(table("0.1.2", longer));
    REQUIRE(one.has("rotary.table"));
    CHECK(one.get("rotary.table").evidence["needed"] == 300);
    CHECK_THAT(one.get("rotary.table").message, Catch::Contains("max_seqlen"));
  }
}
