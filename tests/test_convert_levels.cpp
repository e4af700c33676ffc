// Position ids at the attention-function level (the contract's default, what attn_doctor.capture
// records) are replayed as given; at the model level ("level": "model") the architecture's
// quirk decides what the model hands on (Qwen2-VL: tests/golden/qwen2vl-forward-*.json).
#include <catch2/catch.hpp>

#include "batch/batch.hpp"
#include "convert/convert.hpp"

using namespace ad;

namespace {
VarlenArgs replay(const char* level) {
  std::string text = std::string(R"({"format": "attn-doctor/batch@1",
    "environment": {"transformers": "4.57.6", "flash_attn": "2.6.3"},
    "model": {"num_heads": 4, "num_kv_heads": 2, "head_dim": 16, "architecture": "qwen2_vl"},
    "batch": {"position_ids": {"values": [[0, 1, 2, 0, 1, 2, 3]])") +
                     (level ? std::string(", \"level\": \"") + level + "\"" : "") + "}}}";
  Batch b = parse_batch_text(text, "levels.json");
  return *convert(b).replayed;
}
}  // namespace

TEST_CASE("Qwen2-VL: ids handed to the attention function are replayed as given", "[convert]") {
  VarlenArgs a = replay(nullptr);
  CHECK(a.path == VarlenPath::position_ids);
  CHECK(a.cu_seqlens_q.values == std::vector<int64_t>{0, 3, 7});
  CHECK(replay("attention").cu_seqlens_q.values == std::vector<int64_t>{0, 3, 7});
}

TEST_CASE("Qwen2-VL: (B, S) ids given to the 4.57 model reach no conversion: dense", "[convert]") {
  VarlenArgs a = replay("model");
  CHECK(a.path == VarlenPath::dense);
}

TEST_CASE("Qwen2.5-VL: the same text model as Qwen2-VL from its first release (4.49.0)", "[convert]") {
  auto with = [](const char* transformers) {
    std::string text = std::string(R"({"format": "attn-doctor/batch@1",
      "environment": {"transformers": ")") + transformers + R"(", "flash_attn": "2.6.3"},
      "model": {"num_heads": 4, "num_kv_heads": 2, "head_dim": 16, "architecture": "qwen2_5_vl"},
      "batch": {"position_ids": {"values": [[0, 1, 2, 0, 1, 2, 3]], "level": "model"}}})";
    Batch b = parse_batch_text(text, "levels.json");
    return *convert(b).replayed;
  };
  // 4.57: (B, S) model-level ids reach no conversion, as Qwen2-VL's, and the step says whose quirk
  const VarlenArgs dense = with("4.57.6");
  CHECK(dense.path == VarlenPath::dense);
  bool named = false;
  for (const auto& s : dense.steps) named |= s.rfind("qwen2_5_vl: ", 0) == 0;
  CHECK(named);
  // 4.54 - 4.56: the text axis reaches the conversion: packed
  const VarlenArgs a = with("4.54.1");
  CHECK(a.path == VarlenPath::position_ids);
  CHECK(a.cu_seqlens_q.values == std::vector<int64_t>{0, 3, 7});
  // before 4.49 there is no Qwen2.5-VL: the batch is replayed as given
  CHECK(with("4.48.3").cu_seqlens_q.values == std::vector<int64_t>{0, 3, 7});
}

TEST_CASE("error: an unknown position-ids level", "[loader][errors]") {
  CHECK_THROWS_WITH(parse_batch_text(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 4, "head_dim": 16},
      "batch": {"position_ids": {"values": [[0, 1]], "level": "layer"}}})", "l.json"),
                    Catch::Contains("/batch/position_ids/level") && Catch::Contains("\"attention\", \"model\""));
}
