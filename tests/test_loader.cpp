// Batch loader: every encoding of batch-format.md, the defaults it fills, the intent it
// derives, and every error path (each with the JSON path and the expected/found wording).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "batch/batch.hpp"
#include "batch/npy.hpp"

using namespace ad;
namespace fs = std::filesystem;

namespace {

// A temporary folder holding a batch file and its .npy sidecars.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("attn-doctor-test-" + std::to_string(::getpid()) + "-" +
                                        std::to_string(reinterpret_cast<uintptr_t>(this)));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path write(const std::string& name, const std::string& bytes) const {
    fs::path p = path / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
};

const std::string kModel = R"("model": {"num_heads": 8, "head_dim": 64})";

Batch parse(const std::string& body, const fs::path& origin = "batch.json") {
  return parse_batch_text("{\"format\": \"attn-doctor/batch@1\", " + body + "}", origin);
}

// Requires an InputError whose JSON path is `path` and whose message contains `text`.
void require_error(const std::string& body, const std::string& path, const std::string& text,
                   const fs::path& origin = "batch.json") {
  try {
    parse(body, origin);
    FAIL("expected an InputError at " << path);
  } catch (const InputError& e) {
    INFO("message: " << e.what());
    CHECK(e.json_path() == path);
    CHECK(std::string(e.what()).find(text) != std::string::npos);
    CHECK(e.file() == origin.string());
  }
}

IntTensor tensor(std::vector<int64_t> shape, std::vector<int64_t> values, DType dtype = DType::int64) {
  IntTensor t;
  t.shape = std::move(shape);
  t.values = std::move(values);
  t.dtype = dtype;
  return t;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// encodings

TEST_CASE("mask: dense 0/1 values give a 2-D mask and B, Lq, Lk", "[loader]") {
  Batch b = parse(kModel + R"(, "batch": {"attention_mask": {"values": [[1,1,1,0],[1,1,1,1]]}})");
  REQUIRE(b.batch);
  const auto& m = b.batch->attention_mask->tensor;
  CHECK(m.shape == std::vector<int64_t>{2, 4});
  CHECK(m.values == std::vector<int64_t>{1, 1, 1, 0, 1, 1, 1, 1});
  CHECK(b.batch->batch_size == 2);
  CHECK(b.batch->kv_length == 4);
  CHECK(b.batch->query_length == 4);
  CHECK(b.batch->stage == CallStage::prefill);
  CHECK(b.model.num_kv_heads == 8);
  CHECK(b.model.dtype == DType::bf16);
  CHECK(b.name == "batch");
}

TEST_CASE("mask: dense booleans keep the bool dtype", "[loader]") {
  Batch b = parse(kModel + R"(, "batch": {"attention_mask": {"values": [[true, false]]}})");
  CHECK(b.batch->attention_mask->tensor.dtype == DType::boolean);
  CHECK(b.batch->attention_mask->tensor.values == std::vector<int64_t>{1, 0});
}

TEST_CASE("mask: segment ids are kept as written and give one sequence per run", "[loader]") {
  Batch b = parse(kModel + R"(, "batch": {"attention_mask": {"values": [[1,1,2,2,0]]}})");
  CHECK(b.batch->attention_mask->tensor.values == std::vector<int64_t>{1, 1, 2, 2, 0});
  REQUIRE(b.intent.sequences.size() == 2);
  CHECK(b.intent.source == IntentSource::mask);
  CHECK(b.intent.sequences[0].start == 0);
  CHECK(b.intent.sequences[0].length == 2);
  CHECK(b.intent.sequences[1].start == 2);
  CHECK(b.intent.sequences[1].length == 2);
}

TEST_CASE("mask: lengths with right and left padding", "[loader]") {
  Batch right = parse(kModel + R"(, "batch": {"attention_mask": {"lengths": [3, 1], "width": 4}})");
  CHECK(right.batch->attention_mask->tensor.values == std::vector<int64_t>{1, 1, 1, 0, 1, 0, 0, 0});
  CHECK(right.batch->attention_mask->padding_side == "right");
  Batch left = parse(kModel + R"(, "batch": {"attention_mask": {"lengths": [3, 1], "width": 4, "padding_side": "left"}})");
  CHECK(left.batch->attention_mask->tensor.values == std::vector<int64_t>{0, 1, 1, 1, 0, 0, 0, 1});
  REQUIRE(left.intent.sequences.size() == 2);
  CHECK(left.intent.sequences[0].row == 0);
  CHECK(left.intent.sequences[0].start == 1);
  CHECK(left.intent.sequences[1].row == 1);
  CHECK(left.intent.sequences[1].start == 3);
}

TEST_CASE("mask: .npy file relative to the batch file", "[loader]") {
  TempDir dir;
  dir.write("masks/m.npy", make_npy(tensor({2, 3}, {1, 1, 0, 1, 1, 1}, DType::int8)));
  auto file = dir.write("b.json", "{\"format\": \"attn-doctor/batch@1\", " + kModel +
                                      R"(, "batch": {"attention_mask": {"file": "masks/m.npy"}}})");
  Batch b = load_batch_file(file);
  const auto& m = *b.batch->attention_mask;
  CHECK(m.encoding == MaskEncoding::file);
  CHECK(m.tensor.dtype == DType::int8);
  CHECK(m.tensor.shape == std::vector<int64_t>{2, 3});
  CHECK(m.tensor.values == std::vector<int64_t>{1, 1, 0, 1, 1, 1});
  CHECK(b.batch->kv_length == 3);
}

TEST_CASE("mask: 4-D additive from a 2-D mask is causal and bottom-right aligned", "[loader]") {
  // Row 0 has left padding of 1; Q = 2 queries over K = 3 keys.
  Batch b = parse(kModel + R"(, "batch": {"attention_mask": {"shape": [1,1,2,3],
      "from": {"values": [[0,1,1]]}, "style": "additive"}, "kv_length": 3, "query_length": 2})");
  const auto& m = *b.batch->attention_mask;
  CHECK(m.encoding == MaskEncoding::four_d);
  CHECK(m.style == MaskStyle::additive);
  CHECK(m.tensor.shape == std::vector<int64_t>{1, 1, 2, 3});
  // query 0 sits at position 1: keys {1} attended; query 1 at position 2: keys {1, 2}
  // additive storage: 1 = masked (the large negative value)
  CHECK(m.tensor.values == std::vector<int64_t>{1, 0, 1, 1, 0, 0});
  REQUIRE(m.from);
  CHECK(m.from->values == std::vector<int64_t>{0, 1, 1});
  // intent comes from the 2-D source
  REQUIRE(b.intent.sequences.size() == 1);
  CHECK(b.intent.sequences[0].start == 1);
}

TEST_CASE("mask: 4-D boolean, non-causal, and a static cache longer than the mask", "[loader]") {
  Batch nc = parse(kModel + R"(, "batch": {"attention_mask": {"shape": [1,1,2,2],
      "from": {"values": [[1,1]]}, "style": "boolean", "causal": false}})");
  CHECK(nc.batch->attention_mask->tensor.values == std::vector<int64_t>{1, 1, 1, 1});
  Batch st = parse(kModel + R"(, "batch": {"attention_mask": {"shape": [1,1,1,4],
      "from": {"lengths": [2], "width": 2}, "style": "boolean"}})");
  // one query at position 1 over a 4-slot cache: slots 0,1 attended, 2,3 (beyond the mask) masked
  CHECK(st.batch->attention_mask->tensor.values == std::vector<int64_t>{1, 1, 0, 0});
  CHECK(st.batch->kv_length == 4);
}

TEST_CASE("mask: a written-out 4-D mask with a style", "[loader]") {
  Batch b = parse(kModel + R"(, "batch": {"attention_mask": {"values": [[[[0,1],[0,0]]]], "style": "additive", "rank": 4}})");
  CHECK(b.batch->attention_mask->style == MaskStyle::additive);
  CHECK(b.batch->attention_mask->asserted_rank == 4);
}

TEST_CASE("position ids: dense 1-D, 2-D and 3-D", "[loader]") {
  Batch one = parse(kModel + R"(, "batch": {"position_ids": {"values": [0,1,2,0,1]}})");
  CHECK(one.batch->position_ids->tensor.shape == std::vector<int64_t>{5});
  CHECK(one.batch->batch_size == 1);
  CHECK(one.batch->query_length == 5);
  REQUIRE(one.intent.sequences.size() == 2);
  CHECK(one.intent.source == IntentSource::position_ids);
  CHECK(one.intent.sequences[1].start == 3);
  Batch two = parse(kModel + R"(, "batch": {"position_ids": {"values": [[0,1,2],[0,1,2]]}})");
  CHECK(two.batch->batch_size == 2);
  Batch three = parse(kModel + R"(, "batch": {"position_ids": {"values": [[[0,1]],[[0,1]],[[0,1]]]}})");
  CHECK(three.batch->position_ids->tensor.shape == std::vector<int64_t>{3, 1, 2});
}

TEST_CASE("position ids: from mask follows generate(): cumsum - 1, padding set to 1", "[loader]") {
  Batch b = parse(kModel + R"(, "batch": {"attention_mask": {"lengths": [2], "width": 4, "padding_side": "left"},
                                           "position_ids": {"from": "mask"}})");
  CHECK(b.batch->position_ids->tensor.values == std::vector<int64_t>{1, 1, 0, 1});
  CHECK(b.batch->position_ids->encoding == PositionEncoding::from_mask);
}

TEST_CASE("position ids: packed restarts at the model's origin", "[loader]") {
  Batch b = parse(R"("model": {"num_heads": 8, "head_dim": 64, "position_origin": 2},
                     "batch": {"position_ids": {"from": "packed", "lengths": [3, 2]}})");
  CHECK(b.batch->position_ids->tensor.shape == std::vector<int64_t>{1, 5});
  CHECK(b.batch->position_ids->tensor.values == std::vector<int64_t>{2, 3, 4, 2, 3});
  REQUIRE(b.intent.sequences.size() == 2);
  CHECK(b.intent.sequences[1].start == 3);
  CHECK(b.intent.sequences[1].length == 2);
}

TEST_CASE("position ids: arange sized by the mask, and mrope replication", "[loader]") {
  Batch b = parse(kModel + R"(, "batch": {"attention_mask": {"lengths": [3, 3], "width": 3},
                                           "position_ids": {"from": "arange", "mrope": true}})");
  const auto& p = b.batch->position_ids->tensor;
  CHECK(p.shape == std::vector<int64_t>{3, 2, 3});
  CHECK(p.values == std::vector<int64_t>{0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2});
  CHECK(b.batch->position_ids->mrope);
}

TEST_CASE("position ids: .npy file", "[loader]") {
  TempDir dir;
  dir.write("pos.npy", make_npy(tensor({1, 4}, {0, 1, 0, 1}, DType::int32)));
  auto file = dir.write("b.json", "{\"format\": \"attn-doctor/batch@1\", " + kModel +
                                      R"(, "batch": {"position_ids": {"file": "pos.npy"}}})");
  Batch b = load_batch_file(file);
  CHECK(b.batch->position_ids->tensor.values == std::vector<int64_t>{0, 1, 0, 1});
  CHECK(b.intent.sequences.size() == 2);
}

TEST_CASE("intent: an all-ones mask with restarting position ids keeps the packed sequences", "[loader]") {
  Batch b = parse(kModel + R"(, "batch": {"attention_mask": {"values": [[1,1,1,1,1]]},
                                           "position_ids": {"values": [[0,1,2,0,1]]}})");
  REQUIRE(b.intent.sequences.size() == 2);
  CHECK(b.intent.source == IntentSource::mask);
  CHECK(b.intent.sequences[0].length == 3);
  CHECK(b.intent.sequences[1].length == 2);
}

TEST_CASE("intent: decode positions cover the cached keys of their sequence", "[loader]") {
  // one new token at position 7 over 8 keys: the sequence is all 8 key slots
  Batch d = parse(kModel + R"(, "batch": {"position_ids": {"values": [[7]]}, "kv_length": 8})");
  CHECK(d.batch->query_length == 1);
  REQUIRE(d.intent.sequences.size() == 1);
  CHECK(d.intent.sequences[0].start == 0);
  CHECK(d.intent.sequences[0].length == 8);
  // two rows, positions 3 and 5 over 6 keys (row 0 left-padded by 2)
  Batch two = parse(kModel + R"(, "batch": {"position_ids": {"values": [[3], [5]]}, "kv_length": 6})");
  REQUIRE(two.intent.sequences.size() == 2);
  CHECK(two.intent.sequences[0].start == 2);
  CHECK(two.intent.sequences[0].length == 4);
  CHECK(two.intent.sequences[1].start == 0);
  CHECK(two.intent.sequences[1].length == 6);
  // an explicit intent may use the whole key row
  CHECK_NOTHROW(parse(kModel + R"(, "batch": {"position_ids": {"values": [[7]]}, "kv_length": 8},
                                   "intent": {"sequences": [{"row": 0, "start": 0, "length": 8}]})"));
}

TEST_CASE("rotary: negative per-sequence offsets (FLA's left padding) load", "[loader]") {
  Batch b = parse(kModel + R"(, "rotary": {"implementation": "fla", "dim": 64, "seqlen_offset": [-3, 0]},
                                 "varlen": {"cu_seqlens_q": [0, 4, 8]})");
  CHECK(b.rotary->seqlen_offset == std::vector<int64_t>{-3, 0});
}

TEST_CASE("decode: query_length 1 is the decode stage", "[loader]") {
  Batch b = parse(kModel + R"(, "batch": {"attention_mask": {"lengths": [5, 3], "width": 5}, "query_length": 1,
                                           "cache": {"kind": "static", "max_cache_len": 16, "past_length": 4}})");
  CHECK(b.batch->stage == CallStage::decode);
  CHECK(b.batch->query_length == 1);
  CHECK(b.batch->kv_length == 5);
  CHECK(b.batch->cache->kind == "static");
  CHECK(b.batch->cache->max_cache_len == 16);
  Batch d = parse(kModel + R"(, "batch": {"attention_mask": {"lengths": [5], "width": 5}, "stage": "decode"})");
  CHECK(d.batch->query_length == 1);
}

TEST_CASE("flash_kwargs extension", "[loader]") {
  Batch b = parse(kModel + R"(, "batch": {"position_ids": {"values": [[0,1,2,0,1]]},
      "flash_kwargs": {"cu_seq_lens_q": [0,3,5], "max_length_q": 3}})");
  REQUIRE(b.batch->flash_kwargs);
  CHECK(*b.batch->flash_kwargs->cu_seq_lens_q == std::vector<int64_t>{0, 3, 5});
  CHECK(!b.batch->flash_kwargs->cu_seq_lens_k);
  CHECK(b.batch->flash_kwargs->max_length_q == 3);
}

TEST_CASE("varlen: explicit arguments and their defaults", "[loader]") {
  Batch b = parse(R"("model": {"num_heads": 16, "num_kv_heads": 4, "head_dim": 128},
                     "varlen": {"cu_seqlens_q": [0, 100, 137, 400], "max_seqlen_q": 263, "total_q": 387})");
  const auto& v = *b.varlen;
  CHECK(v.cu_seqlens_q.values == std::vector<int64_t>{0, 100, 137, 400});
  CHECK(v.cu_seqlens_q.dtype == DType::int32);
  CHECK(v.cu_seqlens_k.values == v.cu_seqlens_q.values);
  CHECK(!v.cu_seqlens_k_given);
  CHECK(v.max_seqlen_q.value == 263);
  CHECK(!v.max_seqlen_q.is_tensor);
  CHECK(v.max_seqlen_k.value == 263);
  CHECK(v.total_q == 387);
  CHECK(v.total_k == 387);
  // intent from cu_seqlens_q
  REQUIRE(b.intent.sequences.size() == 3);
  CHECK(b.intent.source == IntentSource::cu_seqlens_q);
  CHECK(b.intent.sequences[2].start == 137);
}

TEST_CASE("varlen: 0-d tensor max_seqlen, defaults from cu_seqlens, seqused_k", "[loader]") {
  Batch b = parse(kModel + R"(, "varlen": {"cu_seqlens_q": [0, 3, 8], "cu_seqlens_k": [0, 4, 10],
                                            "max_seqlen_k": {"tensor": 6}, "seqused_k": [4, 6]})");
  const auto& v = *b.varlen;
  CHECK(v.max_seqlen_q.value == 5);  // largest q segment
  CHECK(v.max_seqlen_k.is_tensor);
  CHECK(v.max_seqlen_k.value == 6);
  CHECK(v.total_q == 8);
  CHECK(v.total_k == 10);
  CHECK(*v.seqused_k == std::vector<int64_t>{4, 6});
}

TEST_CASE("varlen: cu_seqlens from a .npy file keeps its dtype", "[loader]") {
  TempDir dir;
  dir.write("cu.npy", make_npy(tensor({3}, {0, 5, 9}, DType::int64)));
  auto file = dir.write("b.json", "{\"format\": \"attn-doctor/batch@1\", " + kModel +
                                      R"(, "varlen": {"cu_seqlens_file": "cu.npy"}})");
  Batch b = load_batch_file(file);
  CHECK(b.varlen->cu_seqlens_q.values == std::vector<int64_t>{0, 5, 9});
  CHECK(b.varlen->cu_seqlens_q.dtype == DType::int64);
  CHECK(b.varlen->cu_seqlens_k.dtype == DType::int64);
}

TEST_CASE("varlen: cu_seqlens_k from a .npy file keeps its dtype, and is not given beside cu_seqlens_k", "[loader]") {
  TempDir dir;
  dir.write("cuq.npy", make_npy(tensor({3}, {0, 5, 9}, DType::int32)));
  dir.write("cuk.npy", make_npy(tensor({3}, {0, 6, 11}, DType::int64)));
  auto file = dir.write("b.json", "{\"format\": \"attn-doctor/batch@1\", " + kModel +
                                      R"(, "varlen": {"cu_seqlens_file": "cuq.npy", "cu_seqlens_k_file": "cuk.npy"}})");
  Batch b = load_batch_file(file);
  CHECK(b.varlen->cu_seqlens_k.values == std::vector<int64_t>{0, 6, 11});
  CHECK(b.varlen->cu_seqlens_k.dtype == DType::int64);
  CHECK(b.varlen->cu_seqlens_q.dtype == DType::int32);
  CHECK(b.varlen->cu_seqlens_k_given);
  CHECK(b.varlen->total_k == 11);
  auto both = dir.write("c.json", "{\"format\": \"attn-doctor/batch@1\", " + kModel +
                                      R"(, "varlen": {"cu_seqlens_q": [0, 5], "cu_seqlens_k": [0, 5], "cu_seqlens_k_file": "cuk.npy"}})");
  CHECK_THROWS_WITH(load_batch_file(both), Catch::Contains("at most one of \"cu_seqlens_k\" and \"cu_seqlens_k_file\""));
}

TEST_CASE("read_npy_header: a float tensor's shape without its data, and the data must fill the file", "[loader]") {
  TempDir dir;
  // (2, 3, 4) float16: 48 data bytes after the header make_npy's layout writes
  std::string bytes = make_npy(tensor({2, 3, 4}, std::vector<int64_t>(24, 0), DType::int16));
  bytes.replace(bytes.find("<i2"), 3, "<f2");
  auto ok = dir.write("q.npy", bytes);
  NpyHeader h = read_npy_header(ok, "", LoadLimits{});
  CHECK(h.descr == "<f2");
  CHECK(h.shape == std::vector<int64_t>{2, 3, 4});
  auto cut = dir.write("cut.npy", bytes.substr(0, bytes.size() - 2));
  CHECK_THROWS_WITH(read_npy_header(cut, "", LoadLimits{}), Catch::Contains("truncated file"));
  // a header alone announcing 2^40 x 2^40 x 8 values: refused without reading (or allocating) data
  std::string header = "{'descr': '<f2', 'fortran_order': False, 'shape': (1099511627776, 1099511627776, 8), }";
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string huge = std::string("\x93NUMPY\x01\x00", 8);
  huge += static_cast<char>(header.size() & 0xff);
  huge += static_cast<char>(header.size() >> 8);
  huge += header;
  auto big = dir.write("big.npy", huge);
  CHECK_THROWS_WITH(read_npy_header(big, "", LoadLimits{}), Catch::Contains("truncated file"));
}

TEST_CASE("tensors overrides, rotary, launch, intent, expect", "[loader]") {
  Batch b = parse(R"("model": {"num_heads": 16, "head_dim": 64, "hidden_size": 1024, "dtype": "fp16",
                               "sliding_window": 4096, "softcap": 50.0, "architecture": "Gemma2"},
     "environment": {"transformers": "4.46.0.dev0", "flash_attn": "2.7.0.post2", "triton": "3.1.0", "device": "cuda:1"},
     "varlen": {"cu_seqlens_q": [0, 512, 1024], "max_seqlen_q": 512},
     "tensors": {"cu_seqlens_q": {"dtype": "int64", "device": "cpu"}, "q": {"rows": 1024, "contiguous": false}},
     "rotary": {"implementation": "fla", "dim": 1024, "interleaved": true, "table_length": 2048,
                "seqlen_offset": [0, 3], "varlen": true, "layout": "THD"},
     "launch": {"kernel": "k", "signature": ["q", "k", "BT", "K"], "passed": ["q", "k"], "config_params": ["BT"],
                "autotune_keys": ["K"]},
     "intent": {"sequences": [{"row": 0, "start": 0, "length": 512}, {"start": 512, "length": 512}]},
     "expect": {"first_violation": "rotary.dim", "violations": ["rotary.access"], "exit_code": 1})");
  CHECK(b.model.dtype == DType::fp16);
  CHECK(b.model.architecture == "gemma2");
  CHECK(b.environment.device == "cuda:1");
  CHECK(b.environment.transformers->text == "4.46.0.dev0");
  CHECK(b.varlen->cu_seqlens_q.dtype == DType::int64);  // override applies
  CHECK(b.override_for("q")->rows == 1024);
  CHECK(b.override_for("q")->contiguous == false);
  CHECK(b.rotary->implementation == "fla");
  CHECK(b.rotary->seqlen_offset_per_sequence);
  CHECK(b.launch->config_params == std::vector<std::string>{"BT"});
  CHECK(b.intent.source == IntentSource::given);
  CHECK(b.intent.sequences.size() == 2);
  CHECK(b.expect->first_violation == "rotary.dim");
  CHECK(b.expect->exit_code == 1);
  Batch none = parse(kModel + R"(, "varlen": {"cu_seqlens_q": [0, 2]}, "expect": {"first_violation": null})");
  CHECK(none.expect->first_violation_given);
  CHECK(!none.expect->first_violation);
}

TEST_CASE("worked examples of batch-format.md load", "[loader]") {
  CHECK_NOTHROW(parse(R"("name": "partial-query-right-padding",
    "environment": {"transformers": "4.40.0", "flash_attn": "2.5.8"}, "model": {"num_heads": 8, "head_dim": 64},
    "batch": {"attention_mask": {"lengths": [6, 3], "width": 6, "padding_side": "right"}, "query_length": 2, "kv_length": 6})"));
  CHECK_NOTHROW(parse(R"("name": "rotary-model-width", "model": {"num_heads": 16, "head_dim": 64, "hidden_size": 1024},
    "rotary": {"implementation": "fla", "dim": 1024}, "varlen": {"cu_seqlens_q": [0, 512, 1024], "max_seqlen_q": 512})"));
}

// ---------------------------------------------------------------------------------------
// errors: document level

TEST_CASE("error: missing file", "[loader][errors]") {
  try {
    load_batch_file("/nonexistent/attn-doctor/batch.json");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("/nonexistent/attn-doctor/batch.json") != std::string::npos);
    CHECK(e.expected() == "a readable batch file");
  }
}

TEST_CASE("error: a directory instead of a file", "[loader][errors]") {
  TempDir dir;
  CHECK_THROWS_WITH(load_batch_file(dir.path), Catch::Contains("found a directory"));
}

TEST_CASE("error: empty file", "[loader][errors]") {
  CHECK_THROWS_WITH(parse_batch_text("  \n", "e.json"), Catch::Contains("expected a JSON object, found an empty file"));
}

TEST_CASE("error: syntax error names line and column", "[loader][errors]") {
  CHECK_THROWS_WITH(parse_batch_text("{\n  \"format\": \"attn-doctor/batch@1\",\n  \"model\": {,}\n}", "s.json"),
                    Catch::Contains("line 3"));
}

TEST_CASE("error: truncated JSON", "[loader][errors]") {
  CHECK_THROWS_WITH(parse_batch_text("{\"format\": \"attn-doctor/batch@1\", \"model\": {\"num_heads\"", "t.json"),
                    Catch::Contains("expected valid JSON"));
}

TEST_CASE("error: invalid UTF-8", "[loader][errors]") {
  CHECK_THROWS_WITH(parse_batch_text("{\"format\": \"attn-doctor/batch@1\", \"name\": \"\xff\xfe\"}", "u.json"),
                    Catch::Contains("expected valid JSON (UTF-8)"));
}

TEST_CASE("error: nesting too deep", "[loader][errors]") {
  std::string deep(100, '[');
  deep += std::string(100, ']');
  CHECK_THROWS_WITH(parse_batch_text(deep, "d.json"), Catch::Contains("nested at most 64 levels"));
}

TEST_CASE("error: a number out of range (1e400)", "[loader][errors]") {
  CHECK_THROWS_WITH(parse(R"("model": {"num_heads": 8, "head_dim": 64, "softcap": 1e400}, "varlen": {"cu_seqlens_q": [0, 1]})"),
                    Catch::Contains("finite numbers") && Catch::Contains("1e400"));
}

TEST_CASE("error: NaN is not JSON", "[loader][errors]") {
  CHECK_THROWS_WITH(parse_batch_text("{\"format\": \"attn-doctor/batch@1\", \"x\": NaN}", "n.json"),
                    Catch::Contains("expected valid JSON"));
}

TEST_CASE("error: batch file too large", "[loader][errors]") {
  LoadLimits limits;
  limits.max_json_bytes = 16;
  CHECK_THROWS_WITH(parse_batch_text(std::string(100, ' ') + "{}", "big.json", limits),
                    Catch::Contains("at most 16 bytes"));
}

TEST_CASE("error: string too long", "[loader][errors]") {
  LoadLimits limits;
  limits.max_string_bytes = 24;
  CHECK_THROWS_WITH(parse_batch_text(R"({"format": "attn-doctor/batch@1", "description": "a description longer than that"})",
                                     "s.json", limits),
                    Catch::Contains("/description"));
}

TEST_CASE("error: a key twice in one object", "[loader][errors]") {
  CHECK_THROWS_WITH(parse_batch_text(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "num_heads": 16}})", "k.json"),
                    Catch::Contains("the key \"num_heads\" twice in one object"));
  // the same key in two different objects is fine
  CHECK_NOTHROW(parse_batch_text(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 8, "head_dim": 64},
      "varlen": {"cu_seqlens_q": [0, 2]}, "tensors": {"q": {"rows": 2}, "k": {"rows": 2}}})", "k.json"));
}

TEST_CASE("error: the root is not an object", "[loader][errors]") {
  CHECK_THROWS_WITH(parse_batch_text("[1, 2]", "r.json"), Catch::Contains("expected a JSON object (a batch file), found an array"));
}

TEST_CASE("error: wrong or missing format", "[loader][errors]") {
  CHECK_THROWS_WITH(parse_batch_text(R"({"format": "attn-doctor/batch@2", "model": {}})", "f.json"),
                    Catch::Contains("/format: expected \"attn-doctor/batch@1\""));
  CHECK_THROWS_WITH(parse_batch_text(R"({"model": {}})", "f.json"), Catch::Contains("/format: expected the required key"));
}

TEST_CASE("error: unknown top-level key suggests the closest", "[loader][errors]") {
  require_error(kModel + R"(, "batchh": {})", "/batchh", "did you mean \"batch\"?");
}

TEST_CASE("error: none of batch, varlen, rotary, launch", "[loader][errors]") {
  require_error(kModel, "", "at least one of \"batch\", \"varlen\", \"rotary\", \"launch\"");
}

// errors: model and environment

TEST_CASE("error: model is required", "[loader][errors]") {
  require_error(R"("varlen": {"cu_seqlens_q": [0, 1]})", "/model", "the required key \"model\"");
}

TEST_CASE("error: num_heads of the wrong type", "[loader][errors]") {
  require_error(R"("model": {"num_heads": "8", "head_dim": 64}, "varlen": {"cu_seqlens_q": [0, 1]})", "/model/num_heads",
                "found the string \"8\"");
}

TEST_CASE("error: head_dim out of range", "[loader][errors]") {
  require_error(R"("model": {"num_heads": 8, "head_dim": 0}, "varlen": {"cu_seqlens_q": [0, 1]})", "/model/head_dim",
                "expected an integer in [1,");
}

TEST_CASE("error: a fractional integer", "[loader][errors]") {
  require_error(R"("model": {"num_heads": 8.5, "head_dim": 64}, "varlen": {"cu_seqlens_q": [0, 1]})", "/model/num_heads",
                "(not an integer)");
}

TEST_CASE("error: an integer beyond int64", "[loader][errors]") {
  require_error(R"("model": {"num_heads": 8, "head_dim": 64}, "varlen": {"cu_seqlens_q": [0, 18446744073709551615]})",
                "/varlen/cu_seqlens_q/1", "expected an integer");
}

TEST_CASE("error: unknown model dtype", "[loader][errors]") {
  require_error(R"("model": {"num_heads": 8, "head_dim": 64, "dtype": "int8"}, "varlen": {"cu_seqlens_q": [0, 1]})",
                "/model/dtype", "\"fp16\", \"bf16\"");
}

TEST_CASE("a top-level $schema string is read and ignored", "[loader]") {
  // docs/spec/batch.schema.json, named so an editor validates the file as it is written
  const std::string body = kModel + R"(, "varlen": {"cu_seqlens_q": [0, 3, 5]})";
  Batch plain = parse(body);
  Batch with = parse(R"("$schema": "../docs/spec/batch.schema.json", )" + body);
  CHECK(with.name == plain.name);
  CHECK(with.varlen->cu_seqlens_q.values == plain.varlen->cu_seqlens_q.values);
  CHECK(with.intent.sequences.size() == 2);
}

TEST_CASE("error: a $schema that is not a string", "[loader][errors]") {
  require_error(R"("$schema": 1, )" + kModel + R"(, "varlen": {"cu_seqlens_q": [0, 1]})", "/$schema", "expected a string");
}

TEST_CASE("error: $schema is a top-level key only", "[loader][errors]") {
  require_error(R"("model": {"num_heads": 8, "head_dim": 64, "$schema": "x"}, "varlen": {"cu_seqlens_q": [0, 1]})",
                "/model/$schema", "unknown key \"$schema\"");
}

TEST_CASE("error: unknown key in model", "[loader][errors]") {
  require_error(R"("model": {"num_heads": 8, "head_dim": 64, "num_kv_head": 2}, "varlen": {"cu_seqlens_q": [0, 1]})",
                "/model/num_kv_head", "did you mean \"num_kv_heads\"?");
}

TEST_CASE("error: a version that is not PEP 440", "[loader][errors]") {
  require_error(kModel + R"(, "environment": {"transformers": "latest"}, "varlen": {"cu_seqlens_q": [0, 1]})",
                "/environment/transformers", "a PEP 440 version");
}

TEST_CASE("error: a device that is not a device", "[loader][errors]") {
  require_error(kModel + R"(, "environment": {"device": "gpu0"}, "varlen": {"cu_seqlens_q": [0, 1]})",
                "/environment/device", "\"cuda:0\"");
}

// errors: masks

TEST_CASE("error: a mask with two encodings", "[loader][errors]") {
  require_error(kModel + R"(, "batch": {"attention_mask": {"values": [[1]], "lengths": [1], "width": 1}})",
                "/batch/attention_mask", "exactly one mask encoding");
}

TEST_CASE("error: a ragged mask", "[loader][errors]") {
  require_error(kModel + R"(, "batch": {"attention_mask": {"values": [[1,1,1],[1,1]]}})", "/batch/attention_mask/values/1",
                "(ragged array)");
}

TEST_CASE("error: booleans mixed with integers", "[loader][errors]") {
  require_error(kModel + R"(, "batch": {"attention_mask": {"values": [[true, 1]]}})", "/batch/attention_mask/values/0/1",
                "a boolean");
}

TEST_CASE("error: a mask nested past rank 4", "[loader][errors]") {
  require_error(kModel + R"(, "batch": {"attention_mask": {"values": [[[[[1]]]]]}})", "/batch/attention_mask/values",
                "rank at most 4");
}

TEST_CASE("error: a length beyond the width", "[loader][errors]") {
  require_error(kModel + R"(, "batch": {"attention_mask": {"lengths": [3, 7], "width": 6}})",
                "/batch/attention_mask/lengths/1", "a length at most the width 6");
}

TEST_CASE("error: a negative length", "[loader][errors]") {
  require_error(kModel + R"(, "batch": {"attention_mask": {"lengths": [-1], "width": 6}})",
                "/batch/attention_mask/lengths/0", "expected an integer in [0,");
}

TEST_CASE("error: padding_side not left or right", "[loader][errors]") {
  require_error(kModel + R"(, "batch": {"attention_mask": {"lengths": [1], "width": 2, "padding_side": "top"}})",
                "/batch/attention_mask/padding_side", "\"right\", \"left\"");
}

TEST_CASE("error: a key of another encoding", "[loader][errors]") {
  require_error(kModel + R"(, "batch": {"attention_mask": {"values": [[1]], "width": 3}})", "/batch/attention_mask/width",
                "no \"width\" with the dense encoding");
}

TEST_CASE("error: a 4-D shape that is not 4-D", "[loader][errors]") {
  require_error(kModel + R"(, "batch": {"attention_mask": {"shape": [1, 2, 2], "from": {"values": [[1, 1]]}}})",
                "/batch/attention_mask/shape", "a 4-D shape");
}

TEST_CASE("error: a 4-D shape whose B differs from its 2-D source", "[loader][errors]") {
  require_error(kModel + R"(, "batch": {"attention_mask": {"shape": [2, 1, 2, 2], "from": {"values": [[1, 1]]}}})",
                "/batch/attention_mask/shape", "B equal to the rows of \"from\" (1)");
}

TEST_CASE("error: a 4-D K narrower than its 2-D source", "[loader][errors]") {
  require_error(kModel + R"(, "batch": {"attention_mask": {"shape": [1, 1, 1, 1], "from": {"values": [[1, 1]]}}})",
                "/batch/attention_mask/shape", "K at least the width");
}

TEST_CASE("error: a 4-D mask built from a 4-D mask", "[loader][errors]") {
  require_error(kModel + R"(, "batch": {"attention_mask": {"shape": [1,1,1,1],
      "from": {"shape": [1,1,1,1], "from": {"values": [[1]]}}}})",
                "/batch/attention_mask/from", "a 2-D mask encoding");
}

TEST_CASE("error: 4-D mask too large to materialise", "[loader][errors]") {
  require_error(kModel + R"(, "batch": {"attention_mask": {"shape": [1, 1, 100000, 100000],
      "from": {"lengths": [1], "width": 1}}})",
                "/batch/attention_mask/shape", "an array of at most 33554432 elements");
}

TEST_CASE("error: asserted rank differs from the mask's", "[loader][errors]") {
  require_error(kModel + R"(, "batch": {"attention_mask": {"values": [[1, 1]], "rank": 4}})", "/batch/attention_mask/rank",
                "the mask's actual rank 2");
}

TEST_CASE("error: style on a 2-D mask", "[loader][errors]") {
  require_error(kModel + R"(, "batch": {"attention_mask": {"values": [[1, 1]], "style": "additive"}})",
                "/batch/attention_mask/style", "only on a 4-D mask");
}

TEST_CASE("error: a mask file outside the batch file's folder", "[loader][errors]") {
  TempDir dir;
  dir.write("secret.npy", make_npy(tensor({1, 1}, {1})));
  auto file = dir.write("sub/b.json", "{\"format\": \"attn-doctor/batch@1\", " + kModel +
                                          R"(, "batch": {"attention_mask": {"file": "../secret.npy"}}})");
  CHECK_THROWS_WITH(load_batch_file(file), Catch::Contains("resolves outside it") && Catch::Contains("/batch/attention_mask/file"));
  auto abs = dir.write("sub/c.json", "{\"format\": \"attn-doctor/batch@1\", " + kModel +
                                         R"(, "batch": {"attention_mask": {"file": "/etc/passwd"}}})");
  CHECK_THROWS_WITH(load_batch_file(abs), Catch::Contains("resolves outside it"));
}

TEST_CASE("error: a mask file that does not exist", "[loader][errors]") {
  TempDir dir;
  auto file = dir.write("b.json", "{\"format\": \"attn-doctor/batch@1\", " + kModel +
                                      R"(, "batch": {"attention_mask": {"file": "missing.npy"}}})");
  CHECK_THROWS_WITH(load_batch_file(file), Catch::Contains("an existing regular file"));
}

TEST_CASE("error: total elements across arrays past the limit", "[loader][errors]") {
  LoadLimits limits;
  limits.max_total_elements = 10;
  CHECK_THROWS_WITH(parse_batch_text(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 1, "head_dim": 8},
      "batch": {"attention_mask": {"lengths": [4, 4], "width": 4}, "position_ids": {"from": "arange"}}})",
                                     "l.json", limits),
                    Catch::Contains("at most 10 array elements in one batch"));
}

// errors: .npy

namespace {
std::string npy_header(const std::string& dict, int major = 1) {
  std::string header = dict;
  size_t total = (major == 1 ? 10 : 12) + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  if (major == 1) {
    out += static_cast<char>(header.size() & 0xff);
    out += static_cast<char>(header.size() >> 8);
  } else {
    out += static_cast<char>(header.size() & 0xff);
    out += static_cast<char>(header.size() >> 8);
    out += '\0';
    out += '\0';
  }
  return out + header;
}
IntTensor npy(const std::string& bytes) { return parse_npy(bytes, "m.npy", "/batch/attention_mask/file", LoadLimits{}); }
}  // namespace

TEST_CASE("npy: version 2.0 header, big-endian and bool data", "[loader][npy]") {
  std::string be = npy_header("{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }", 2);
  be += std::string("\0\0\0\x05\0\0\0\x07", 8);
  CHECK(npy(be).values == std::vector<int64_t>{5, 7});
  std::string b = npy_header("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }");
  b += std::string("\x01\x00\x01", 3);
  CHECK(npy(b).values == std::vector<int64_t>{1, 0, 1});
  CHECK(npy(b).dtype == DType::boolean);
  // round trip with the writer
  IntTensor t = tensor({2, 2}, {-1, 0, 3, 1 << 20}, DType::int32);
  CHECK(npy(make_npy(t)).values == t.values);
  CHECK(npy(make_npy(t)).shape == t.shape);
}

TEST_CASE("error npy: not a .npy file", "[loader][npy][errors]") {
  CHECK_THROWS_WITH(npy("PK\x03\x04 this is a zip"), Catch::Contains("expected a .npy file (magic"));
}

TEST_CASE("error npy: unsupported format version", "[loader][npy][errors]") {
  std::string s = npy_header("{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }");
  s[6] = 9;
  CHECK_THROWS_WITH(npy(s + std::string(8, '\0')), Catch::Contains("found version 9.0"));
}

TEST_CASE("error npy: header length past the file", "[loader][npy][errors]") {
  std::string s = "\x93NUMPY\x01";
  s += '\0';
  s += "\xff\x7f";
  s += "{'descr'";
  CHECK_THROWS_WITH(npy(s), Catch::Contains("a header of at most 64 KiB inside the file"));
}

TEST_CASE("error npy: float dtype", "[loader][npy][errors]") {
  CHECK_THROWS_WITH(npy(npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }") + std::string(4, '\0')),
                    Catch::Contains("an integer or bool dtype") && Catch::Contains("'<f4'"));
}

TEST_CASE("error npy: object dtype", "[loader][npy][errors]") {
  CHECK_THROWS_WITH(npy(npy_header("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }") + std::string(8, '\0')),
                    Catch::Contains("descr"));
}

TEST_CASE("error npy: Fortran order", "[loader][npy][errors]") {
  CHECK_THROWS_WITH(npy(npy_header("{'descr': '<i8', 'fortran_order': True, 'shape': (1,), }") + std::string(8, '\0')),
                    Catch::Contains("C-order"));
}

TEST_CASE("error npy: truncated data", "[loader][npy][errors]") {
  CHECK_THROWS_WITH(npy(npy_header("{'descr': '<i8', 'fortran_order': False, 'shape': (4,), }") + std::string(8, '\0')),
                    Catch::Contains("32 data bytes") && Catch::Contains("truncated"));
}

TEST_CASE("error npy: trailing bytes", "[loader][npy][errors]") {
  CHECK_THROWS_WITH(npy(npy_header("{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }") + std::string(9, '\0')),
                    Catch::Contains("trailing bytes"));
}

TEST_CASE("error npy: unknown header key", "[loader][npy][errors]") {
  CHECK_THROWS_WITH(
      npy(npy_header("{'descr': '<i8', 'fortran_order': False, 'shape': (1,), 'extra': 1, }") + std::string(8, '\0')),
      Catch::Contains("key 'extra'"));
}

TEST_CASE("error npy: missing header key", "[loader][npy][errors]") {
  CHECK_THROWS_WITH(npy(npy_header("{'descr': '<i8', 'shape': (1,), }") + std::string(8, '\0')),
                    Catch::Contains("the keys 'descr', 'fortran_order' and 'shape'"));
}

TEST_CASE("error npy: garbage in the header", "[loader][npy][errors]") {
  CHECK_THROWS_WITH(npy(npy_header("{'descr': '<i8', 'fortran_order': maybe, 'shape': (1,), }") + std::string(8, '\0')),
                    Catch::Contains("True or False"));
}

TEST_CASE("error npy: a shape with too many elements", "[loader][npy][errors]") {
  CHECK_THROWS_WITH(npy(npy_header("{'descr': '<i8', 'fortran_order': False, 'shape': (100000, 100000, 100000), }")),
                    Catch::Contains("at most 33554432 elements"));
}

TEST_CASE("error npy: a dimension beyond 2^63", "[loader][npy][errors]") {
  CHECK_THROWS_WITH(npy(npy_header("{'descr': '<i8', 'fortran_order': False, 'shape': (99999999999999999999,), }")),
                    Catch::Contains("a dimension below 2^63"));
}

// errors: position ids, batch, varlen, tensors, rotary, launch, intent, expect

TEST_CASE("error: position ids with no encoding", "[loader][errors]") {
  require_error(kModel + R"(, "batch": {"position_ids": {"mrope": true}})", "/batch/position_ids",
                "exactly one position-ids encoding");
}

TEST_CASE("error: positions from a mask that is not there", "[loader][errors]") {
  require_error(kModel + R"(, "batch": {"position_ids": {"from": "mask"}})", "/batch/position_ids/from",
                "an attention_mask in the same batch");
}

TEST_CASE("error: packed positions without lengths", "[loader][errors]") {
  require_error(kModel + R"(, "batch": {"position_ids": {"from": "packed"}})", "/batch/position_ids/lengths",
                "the required key \"lengths\"");
}

TEST_CASE("error: lengths on non-packed position ids", "[loader][errors]") {
  require_error(kModel + R"(, "batch": {"position_ids": {"from": "arange", "lengths": [2]}, "kv_length": 2})",
                "/batch/position_ids/lengths", "only with \"from\": \"packed\"");
}

TEST_CASE("error: unknown position-ids source", "[loader][errors]") {
  require_error(kModel + R"(, "batch": {"position_ids": {"from": "cumsum"}})", "/batch/position_ids/from",
                "one of \"mask\", \"packed\", \"arange\"");
}

TEST_CASE("error: mRoPE ids whose first axis is not 3", "[loader][errors]") {
  require_error(kModel + R"(, "batch": {"position_ids": {"values": [[[0,1]],[[0,1]]], "mrope": true}})",
                "/batch/position_ids", "(3, B, S)");
}

TEST_CASE("error: arange with nothing to size it", "[loader][errors]") {
  require_error(kModel + R"(, "batch": {"position_ids": {"from": "arange"}})", "/batch/position_ids/from",
                "to size the arange");
}

TEST_CASE("error: batch_size that contradicts the mask", "[loader][errors]") {
  require_error(kModel + R"(, "batch": {"attention_mask": {"lengths": [1, 1], "width": 1}, "batch_size": 3})",
                "/batch/batch_size", "the batch size 2");
}

TEST_CASE("error: position ids whose rows contradict the batch", "[loader][errors]") {
  require_error(kModel + R"(, "batch": {"attention_mask": {"lengths": [1, 1], "width": 2},
      "position_ids": {"values": [[0,1],[0,1],[0,1]]}})",
                "/batch/position_ids", "with 2 rows");
}

TEST_CASE("error: decode stage with a longer query", "[loader][errors]") {
  require_error(kModel + R"(, "batch": {"attention_mask": {"lengths": [2], "width": 2}, "query_length": 2, "stage": "decode"})",
                "/batch/stage", "\"prefill\" for query_length 2");
}

TEST_CASE("error: a batch with nothing to size it", "[loader][errors]") {
  require_error(kModel + R"(, "batch": {"cache": {"kind": "dynamic"}})", "/batch", "to size the call");
}

TEST_CASE("error: unknown cache kind", "[loader][errors]") {
  require_error(kModel + R"(, "batch": {"kv_length": 4, "cache": {"kind": "paged"}})", "/batch/cache/kind",
                "\"dynamic\", \"static\", \"hybrid\", \"sliding\"");
}

TEST_CASE("error: unknown flash_kwargs key", "[loader][errors]") {
  require_error(kModel + R"(, "batch": {"kv_length": 4, "flash_kwargs": {"cu_seqlens_q": [0, 4]}})",
                "/batch/flash_kwargs/cu_seqlens_q", "did you mean \"cu_seq_lens_q\"?");
}

TEST_CASE("error: varlen with both cu_seqlens_q and a file", "[loader][errors]") {
  require_error(kModel + R"(, "varlen": {"cu_seqlens_q": [0, 1], "cu_seqlens_file": "cu.npy"})", "/varlen",
                "exactly one of \"cu_seqlens_q\" and \"cu_seqlens_file\"");
}

TEST_CASE("error: varlen with no cu_seqlens", "[loader][errors]") {
  require_error(kModel + R"(, "varlen": {"max_seqlen_q": 3})", "/varlen", "found neither");
}

TEST_CASE("error: cu_seqlens of booleans", "[loader][errors]") {
  require_error(kModel + R"(, "varlen": {"cu_seqlens_q": [false, true]})", "/varlen/cu_seqlens_q", "expected integers");
}

TEST_CASE("error: max_seqlen as a float", "[loader][errors]") {
  require_error(kModel + R"(, "varlen": {"cu_seqlens_q": [0, 2], "max_seqlen_q": 2.0})", "/varlen/max_seqlen_q",
                "{\"tensor\": N}");
}

TEST_CASE("error: max_seqlen tensor object with another key", "[loader][errors]") {
  require_error(kModel + R"(, "varlen": {"cu_seqlens_q": [0, 2], "max_seqlen_q": {"value": 2}})",
                "/varlen/max_seqlen_q/value", "one of the keys tensor");
}

TEST_CASE("error: negative total_q", "[loader][errors]") {
  require_error(kModel + R"(, "varlen": {"cu_seqlens_q": [0, 2], "total_q": -1})", "/varlen/total_q",
                "expected an integer in [0,");
}

TEST_CASE("error: override of an unknown tensor", "[loader][errors]") {
  require_error(kModel + R"(, "varlen": {"cu_seqlens_q": [0, 2]}, "tensors": {"lse": {"dtype": "fp32"}})", "/tensors/lse",
                "one of the keys q, k, v, out");
}

TEST_CASE("error: override with an unknown dtype", "[loader][errors]") {
  require_error(kModel + R"(, "varlen": {"cu_seqlens_q": [0, 2]}, "tensors": {"cu_seqlens_q": {"dtype": "int33"}})",
                "/tensors/cu_seqlens_q/dtype", "a dtype such as");
}

TEST_CASE("error: rotary without dim", "[loader][errors]") {
  require_error(kModel + R"(, "rotary": {"implementation": "fla"})", "/rotary/dim", "the required key \"dim\"");
}

TEST_CASE("error: rotary with an unknown layout", "[loader][errors]") {
  require_error(kModel + R"(, "rotary": {"dim": 64, "layout": "TBHD"})", "/rotary/layout", "\"BTHD\", \"BHTD\", \"THD\"");
}

TEST_CASE("error: rotary offset beyond any length", "[loader][errors]") {
  require_error(kModel + R"(, "rotary": {"dim": 64, "seqlen_offset": [0, -4000000000000000]})", "/rotary/seqlen_offset/1",
                "expected an integer in [");
}

TEST_CASE("error: launch without autotune keys", "[loader][errors]") {
  require_error(kModel + R"(, "launch": {"signature": ["a"], "passed": ["a"]})", "/launch/autotune_keys",
                "the required key");
}

TEST_CASE("error: launch naming a parameter not in the signature", "[loader][errors]") {
  require_error(kModel + R"(, "launch": {"signature": ["a", "b"], "passed": ["a", "c"], "autotune_keys": ["b"]})",
                "/launch/passed/1", "a parameter named in \"signature\"");
}

TEST_CASE("error: intent row past the batch", "[loader][errors]") {
  require_error(kModel + R"(, "batch": {"attention_mask": {"lengths": [2], "width": 2}},
      "intent": {"sequences": [{"row": 1, "start": 0, "length": 1}]})",
                "/intent/sequences/0/row", "a row below 1");
}

TEST_CASE("error: intent sequence past the row width", "[loader][errors]") {
  require_error(kModel + R"(, "batch": {"attention_mask": {"lengths": [2], "width": 4}},
      "intent": {"sequences": [{"row": 0, "start": 2, "length": 3}]})",
                "/intent/sequences/0", "within the row width 4");
}

TEST_CASE("error: intent sequence of length 0", "[loader][errors]") {
  require_error(kModel + R"(, "varlen": {"cu_seqlens_q": [0, 2]}, "intent": {"sequences": [{"start": 0, "length": 0}]})",
                "/intent/sequences/0/length", "expected an integer in [1,");
}

TEST_CASE("error: expect with an exit code that does not exist", "[loader][errors]") {
  require_error(kModel + R"(, "varlen": {"cu_seqlens_q": [0, 2]}, "expect": {"exit_code": 7})", "/expect/exit_code",
                "expected an integer in [0, 3]");
}

TEST_CASE("error: expect first_violation not a string", "[loader][errors]") {
  require_error(kModel + R"(, "varlen": {"cu_seqlens_q": [0, 2]}, "expect": {"first_violation": 26})",
                "/expect/first_violation", "expected a string");
}

// ---------------------------------------------------------------------------------------
// versions

TEST_CASE("versions order like pip's", "[loader][version]") {
  auto v = [](const char* s) { return *parse_version(s); };
  CHECK(v("4.44.0") < v("4.44.1"));
  CHECK(v("4.44") == v("4.44.0"));
  CHECK(v("4.46.0.dev0") < v("4.46.0rc1"));
  CHECK(v("4.46.0rc1") < v("4.46.0"));
  CHECK(v("2.7.0") < v("2.7.0.post2"));
  CHECK(v("5.0.0") > v("4.57.6"));
  CHECK(v("2.6.3+cu121") > v("2.6.3"));
  CHECK(v("4.53.0").major_minor() == "4.53");
  CHECK(!parse_version("latest"));
  CHECK(!parse_version("4.44.0-"));
  CHECK(!parse_version(""));
}

TEST_CASE("dispatch and the execution context: values as written, defaults, and each key's errors", "[loader][dispatch]") {
  Batch b = parse(kModel + R"(, "environment": {"compile": "fullgraph", "diffusers": "0.39.0", "xformers": "0.0.28.post3"},
    "dispatch": {"library": "diffusers", "backend": "flash_varlen_hub", "ring_degree": 4, "ulysses_degree": 2})");
  CHECK(b.environment.compile == "fullgraph");
  CHECK(b.environment.diffusers->text == "0.39.0");
  CHECK(b.environment.xformers->text == "0.0.28.post3");
  REQUIRE(b.dispatch);
  CHECK(b.dispatch->library == "diffusers");
  CHECK(b.dispatch->backend == "flash_varlen_hub");
  CHECK(b.dispatch->ring_degree == 4);
  CHECK(b.dispatch->ulysses_degree == 2);
  CHECK_FALSE(b.varlen);
  CHECK(parse(kModel + R"(, "varlen": {"cu_seqlens_q": [0, 4]})").environment.compile == "none");

  Batch x = parse(kModel + R"(, "dispatch": {"library": "xformers", "attn_bias": "BlockDiagonalCausalMask",
    "attn_bias_moved": true, "seqlens": [2, 3]})");
  CHECK(x.dispatch->attn_bias == "BlockDiagonalCausalMask");
  CHECK(x.dispatch->attn_bias_moved);
  CHECK(*x.dispatch->seqlens == std::vector<int64_t>{2, 3});
  CHECK(x.dispatch->ring_degree == 1);

  Batch h = parse(kModel + R"(, "varlen": {"cu_seqlens_q": [0, 5, 8, 14, 16], "max_seqlen_q": 8},
    "dispatch": {"library": "hunyuanvideo", "backend": "torch"})");
  CHECK(h.dispatch->backend == "torch");
  // the flash mode takes any varlen call: no row layout is read
  CHECK(parse(kModel + R"(, "varlen": {"cu_seqlens_q": [0, 5, 7]}, "dispatch": {"library": "hunyuanvideo", "backend": "flash"})")
            .dispatch->backend == "flash");

  require_error(kModel + R"(, "environment": {"compile": "max-autotune"}, "dispatch": {"library": "diffusers"})",
                "/environment/compile", R"(expected one of "none", "default", "fullgraph")");
  require_error(kModel + R"(, "environment": {"xformers": "0.0.x"}, "dispatch": {"library": "diffusers"})",
                "/environment/xformers", "PEP 440 version");
  require_error(kModel + R"(, "dispatch": {"library": "flash_attn"})", "/dispatch/library",
                R"(expected one of "diffusers", "xformers", "hunyuanvideo")");
  require_error(kModel + R"(, "dispatch": {"backend": "flash"})", "/dispatch/library", "the required key \"library\"");
  require_error(kModel + R"(, "dispatch": {"library": "xformers", "attn_bias": "BlockDiagonalMask", "backend": "cutlass"})",
                "/dispatch/backend", "no \"backend\" for xformers");
  require_error(kModel + R"(, "dispatch": {"library": "xformers", "attn_bias": "BlockDiagonalCausalMask", "ring_degree": 2})",
                "/dispatch/ring_degree", R"(expected "library": "diffusers" beside ring_degree)");
  require_error(kModel + R"(, "dispatch": {"library": "xformers", "attn_bias": "LowerTriangularMask"})",
                "/dispatch/attn_bias", "expected one of");
  require_error(kModel + R"(, "dispatch": {"library": "diffusers", "ulysses_degree": 2000000})",
                "/dispatch/ulysses_degree", "[1, 1048576]");
  require_error(kModel + R"(, "varlen": {"cu_seqlens_q": [0, 5, 8]}, "dispatch": {"library": "hunyuanvideo"})", "/dispatch",
                "HunyuanVideo's attention mode");
  require_error(kModel + R"(, "varlen": {"cu_seqlens_q": [0, 5, 8, 14], "max_seqlen_q": 8},
    "dispatch": {"library": "hunyuanvideo", "backend": "vanilla"})",
                "/dispatch/backend", "found total_q 14, max_seqlen_q 8");
  require_error(kModel + R"(, "dispatch": {"library": "xformers", "attn_bias": "BlockDiagonalCausalMask", "seqlens": [2, -1]})",
                "/dispatch/seqlens/1", "");
}

TEST_CASE("dispatch: axolotl's ring_attn_func by release, and its errors", "[loader][dispatch]") {
  const std::string rows = R"("batch": {"position_ids": {"from": "packed", "lengths": [3, 5]}}, )";
  Batch b = parse(kModel + ", " + rows + R"("environment": {"axolotl": "0.18.0"},
    "dispatch": {"library": "axolotl", "backend": "batch_ring", "ring_degree": 2})");
  REQUIRE(b.environment.axolotl);
  CHECK(b.environment.axolotl->text == "0.18.0");
  CHECK(b.dispatch->library == "axolotl");
  CHECK(b.dispatch->backend == "batch_ring");
  CHECK(b.dispatch->ring_degree == 2);
  // no release named: every backend of 0.9.x is taken; 0.9.x's zigzag and stripe too
  CHECK(parse(kModel + ", " + rows + R"("dispatch": {"library": "axolotl", "backend": "batch_zigzag"})").dispatch->ring_degree == 1);
  CHECK(parse(kModel + ", " + rows + R"("environment": {"axolotl": "0.9.2"},
    "dispatch": {"library": "axolotl", "backend": "batch_stripe", "ring_degree": 4})").dispatch->backend == "batch_stripe");
  // 0.20.0 onwards ignores ring_attn_func: loaded, the check says so in a note
  CHECK(parse(kModel + ", " + rows + R"("environment": {"axolotl": "0.21.0"},
    "dispatch": {"library": "axolotl", "backend": "batch_ring", "ring_degree": 2})").environment.axolotl->text == "0.21.0");

  require_error(kModel + ", " + rows + R"("dispatch": {"library": "axolotl", "ring_degree": 2})", "/dispatch",
                "axolotl's ring_attn_func");
  require_error(kModel + ", " + rows + R"("dispatch": {"library": "axolotl", "backend": "varlen_ring"})", "/dispatch/backend",
                R"(expected one of "batch_ring", "batch_zigzag", "batch_stripe", "varlen_llama3")");
  require_error(kModel + ", " + rows + R"("environment": {"axolotl": "0.18.0"},
    "dispatch": {"library": "axolotl", "backend": "batch_zigzag", "ring_degree": 2})",
                "/dispatch/backend", "RingAttnFunc has no batch_zigzag");
  require_error(kModel + ", " + rows + R"("environment": {"axolotl": "0.8.1"},
    "dispatch": {"library": "axolotl", "backend": "batch_ring", "ring_degree": 2})",
                "/dispatch/backend", "found axolotl 0.8.1");
  require_error(kModel + ", " + rows + R"("environment": {"axolotl": "zero.18"},
    "dispatch": {"library": "axolotl", "backend": "batch_ring"})", "/environment/axolotl", "PEP 440 version");
  require_error(kModel + ", " + rows + R"("dispatch": {"library": "axolotl", "backend": "batch_ring", "ring_degree": 0})",
                "/dispatch/ring_degree", "[1, 1048576]");
  require_error(kModel + ", " + rows + R"("dispatch": {"library": "axolotl", "backend": "batch_ring", "ulysses_degree": 2})",
                "/dispatch/ulysses_degree", R"(expected "library": "diffusers" beside ulysses_degree, found library axolotl)");
  require_error(kModel + R"(, "varlen": {"cu_seqlens_q": [0, 5, 8]}, "dispatch": {"library": "hunyuanvideo", "backend": "vanilla", "ring_degree": 2})",
                "/dispatch/ring_degree", R"(expected "library": "diffusers" beside ring_degree (or "axolotl"), found library hunyuanvideo)");
}
