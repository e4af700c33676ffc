// The collator replay against the real releases: every tests/golden/collate-*.json (recorded by
// tools/parity/collate.py, collate_patched.py and collate_llamafactory.py from the releases' own
// collators) is replayed case by case through a
// batch file's `collator` block and must match exactly: the keys in the collator's order, each
// one's dtype, shape and values, or the exception the release raised. TRL's goldens also pin
// the SFTTrainer's list of attention implementations it forwards position ids for; axolotl's
// also pin the _get_unpad_data its patch installs, on every mask the collator emitted (as
// emitted, and cast to bool as transformers >= 4.53 does first), and tests/golden/
// unpad-llamafactory-*.json pin LlamaFactory's.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <map>
#include <fstream>

#include <nlohmann/json.hpp>

#include "batch/batch.hpp"
#include "batch/collate.hpp"
#include "convert/replay.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const fs::path kGolden = fs::path(ATTN_DOCTOR_SOURCE_DIR) / "tests" / "golden";

std::vector<fs::path> goldens(const std::string& prefix) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(kGolden))
    if (e.path().filename().string().rfind(prefix, 0) == 0 && e.path().extension() == ".json") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

json read_json(const fs::path& p) {
  std::ifstream in(p);
  REQUIRE(in.good());
  return json::parse(in);
}

// The batch file a golden case stands for.
std::string batch_text(const json& golden, const json& c) {
  json examples = json::array();
  for (const json& e : c["examples"]) {
    if (e.is_array()) {
      examples.push_back(e);
    } else {
      json x = {{"input_ids", e["input_ids"]}};
      if (e.contains("seq_lengths")) x["seq_lengths"] = e["seq_lengths"];
      examples.push_back(x);
    }
  }
  json b = {{"format", "attn-doctor/batch@1"},
            {"model", {{"num_heads", 2}, {"head_dim", 8}}},
            {"collator",
             {{"name", golden["collator"]}, {"release", golden["release"]}, {"options", c["options"]}, {"examples", examples}}}};
  return b.dump();
}

// One tensor of a golden ({"dtype", "shape", "values"}) against the replay's.
void check_tensor(const json& want, const std::string& dtype, const std::vector<int64_t>& shape,
                  const std::vector<int64_t>& values) {
  CHECK(dtype == want["dtype"].get<std::string>());
  CHECK(shape == want["shape"].get<std::vector<int64_t>>());
  CHECK(values == want["values"].get<std::vector<int64_t>>());
}

// A patched _get_unpad_data's golden ({"as_given": ..., "bool": ...}) against the replay's, on
// a 2-D int64 mask and on the same mask cast to bool.
void check_patched_unpad(const json& want, const std::string& patch, const std::vector<int64_t>& values,
                         const std::vector<int64_t>& shape) {
  for (const char* form : {"as_given", "bool"}) {
    INFO(form);
    const json& w = want[form];
    REQUIRE_FALSE(w.contains("raised"));
    ad::replay::MaskTensor m;
    m.shape = shape;
    m.values = values;
    m.boolean = std::string(form) == "bool";
    if (m.boolean)
      for (int64_t& v : m.values) v = v != 0;
    const ad::replay::UnpadData u = ad::replay::patched_unpad_data(m, patch);
    check_tensor(w["indices"], "int64", u.indices.shape, u.indices.values);
    check_tensor(w["cu_seqlens"], "int32", u.cu_seqlens.shape, u.cu_seqlens.values);
    CHECK(u.max_seqlen == w["max_seqlen"]["value"].get<int64_t>());
    // LlamaFactory's counts keep a bool mask's dtype: max_seqlen is a bool
    CHECK(w["max_seqlen"]["type"] == (m.boolean && patch == "llamafactory.get_unpad_data" ? "bool" : "int"));
  }
}

// The get_unpad_data an axolotl release installs: 0.18.0 rewrote it (runs of equal ids).
std::string axolotl_patch(const json& golden) {
  return *ad::parse_version(golden["release"].get<std::string>()) < *ad::parse_version("0.18.0")
             ? "axolotl.get_unpad_data"
             : "axolotl.get_unpad_data@0.18";
}

}  // namespace

TEST_CASE("collate goldens: the replay emits what every real release's collator emitted", "[collate][golden]") {
  const auto files = goldens("collate-");
  REQUIRE(files.size() >= 8);
  std::map<std::string, size_t> releases;
  size_t cases = 0;
  for (const fs::path& file : files) {
    const json g = read_json(file);
    releases[g["library"].get<std::string>()] += 1;
    for (const json& c : g["cases"]) {
      ++cases;
      const std::string where = file.filename().string() + " " + c["name"].get<std::string>();
      INFO(where);
      const std::string text = batch_text(g, c);
      if (c.contains("raised")) {
        try {
          ad::parse_batch_text(text, "golden.json");
          FAIL("the replay returned a batch; the release raised " << c["raised"].dump());
        } catch (const ad::InputError& e) {
          CHECK(e.json_path() == "/collator");
          CHECK(e.found().rfind(c["raised"]["type"].get<std::string>() + ": ", 0) == 0);
        }
        continue;
      }
      const json& ids = c["emitted"][0];
      if (ids["key"] == "input_ids" && ids["shape"].size() == 2 && ids["shape"][1] == 0) {
        // an empty batch reaches no attention call: the loader refuses it
        CHECK_THROWS_WITH(ad::parse_batch_text(text, "golden.json"), Catch::Contains("/collator/examples") &&
                                                                         Catch::Contains("an empty batch"));
        continue;
      }
      ad::Batch b;
      try {
        b = ad::parse_batch_text(text, "golden.json");
      } catch (const ad::InputError& e) {
        FAIL("the replay raised " << e.what());
      }
      REQUIRE(b.collator);
      CHECK(b.collator->replayed_as == g["release"].get<std::string>());
      const json& want = c["emitted"];
      std::vector<std::string> got_keys, want_keys;
      for (const auto& v : b.collator->emitted) got_keys.push_back(v.key);
      for (const auto& w : want) want_keys.push_back(w["key"]);
      REQUIRE(got_keys == want_keys);
      for (size_t i = 0; i < want.size(); ++i) {
        const ad::CollatorValue& v = b.collator->emitted[i];
        INFO(v.key);
        if (g["library"] == "llamafactory" && v.key == "labels") {
          // which tokens are the prompt (label -100) is the template's: the replay gives the shape
          CHECK(v.dtype == want[i]["dtype"].get<std::string>());
          CHECK(v.shape == want[i]["shape"].get<std::vector<int64_t>>());
          CHECK_FALSE(v.values_known);
          continue;
        }
        if (g["library"] == "llamafactory" && v.key == "input_ids" && c.contains("fake_input_ids") &&
            !v.values_known) {
          // the fake image's token ids are the processor's (the batch gives their count): every
          // other position is the replay's, the fake ones follow row 0's cutoff_len + 1 tokens
          CHECK(v.dtype == want[i]["dtype"].get<std::string>());
          REQUIRE(v.shape == want[i]["shape"].get<std::vector<int64_t>>());
          const auto w = want[i]["values"].get<std::vector<int64_t>>();
          const int64_t width = c["options"]["cutoff_len"].get<int64_t>() + 1;
          const int64_t fake = c["options"]["fake_mm_tokens"].get<int64_t>();
          REQUIRE(fake == static_cast<int64_t>(c["fake_input_ids"].size()));
          for (int64_t t = 0; t < static_cast<int64_t>(w.size()); ++t) {
            if (t >= width && t < width + fake) {
              CHECK(w[t] == c["fake_input_ids"][t - width].get<int64_t>());
              continue;
            }
            INFO("position " << t);
            CHECK(v.values[t] == w[t]);
          }
          continue;
        }
        check_tensor(want[i], v.dtype, v.shape, v.values);
        CHECK(v.values_known);
      }
      if (g["library"] == "axolotl") {
        // the patch is installed by the releases whose patch_for_multipack says so, and computes
        // what the release's get_unpad_data computed on the emitted mask
        const bool patches = !g["patches_transformers_unpad"].is_null();
        CHECK(b.collator->unpad_patch == (patches && c.contains("unpad") ? "axolotl.get_unpad_data" : ""));
        if (c.contains("unpad")) {
          const ad::CollatorValue* m = nullptr;
          for (const auto& v : b.collator->emitted)
            if (v.key == "attention_mask") m = &v;
          REQUIRE(m);
          check_patched_unpad(c["unpad"], axolotl_patch(g), m->values, m->shape);
        }
      }
    }
    if (g["library"] == "trl") {
      INFO(file.filename().string());
      std::vector<std::string> want;
      if (!g["position_ids_implementations"].is_null()) want = g["position_ids_implementations"].get<std::vector<std::string>>();
      std::vector<std::string> got = ad::trl_position_ids_implementations(*ad::parse_version(g["release"].get<std::string>()));
      std::sort(got.begin(), got.end());
      CHECK(got == want);
    }
  }
  // the oracle's promise: at least six transformers releases and TRL
  CHECK(releases["transformers"] >= 6);
  CHECK(releases["trl"] >= 2);
  CHECK(releases["axolotl"] >= 4);
  CHECK(releases["llamafactory"] >= 3);
  CHECK(cases >= 100);
}

TEST_CASE("collate goldens: which models axolotl's patch_for_multipack patches, and its get_unpad_data",
          "[collate][golden]") {
  const auto files = goldens("collate-axolotl-");
  REQUIRE(files.size() >= 8);
  for (const fs::path& file : files) {
    const json g = read_json(file);
    INFO(file.filename().string());
    const json& measured = g["patch_for_multipack"];
    REQUIRE(measured.is_object());
    // transformers' own is never replaced for a remote-code model
    CHECK_FALSE(measured["remote_code"]["transformers"].get<bool>());
    for (const bool remote : {false, true}) {
      INFO("remote_code " << remote);
      const std::string text = R"({"format": "attn-doctor/batch@1",
        "model": {"num_heads": 2, "head_dim": 8, "remote_code": )" + std::string(remote ? "true" : "false") + R"(},
        "collator": {"name": "axolotl.multipack", "release": ")" + g["release"].get<std::string>() + R"(",
                     "examples": [{"seq_lengths": [3, 2]}, {"seq_lengths": [4]}]}})";
      const ad::Batch b = ad::parse_batch_text(text, "remote.json");
      REQUIRE(b.collator);
      const bool patched = remote ? measured["remote_code"]["modeling_file"].get<bool>()
                                  : measured["in_tree"]["transformers"].get<bool>();
      CHECK(b.collator->unpad_patch == (patched ? (remote ? axolotl_patch(g) : "axolotl.get_unpad_data") : ""));
    }
    // the release's get_unpad_data on masks its collator does not build
    REQUIRE(g["unpad_masks"].size() >= 6);
    for (const json& c : g["unpad_masks"]) {
      INFO(c["name"].get<std::string>());
      std::vector<int64_t> values;
      for (const json& row : c["mask"])
        for (const json& v : row) values.push_back(v.get<int64_t>());
      check_patched_unpad(c, axolotl_patch(g), values,
                          {static_cast<int64_t>(c["mask"].size()), static_cast<int64_t>(c["mask"][0].size())});
    }
  }
}

TEST_CASE("collate: a release the replay has not read is replayed as the nearest read one, with a note",
          "[collate]") {
  auto load = [](const std::string& collator) {
    return ad::parse_batch_text(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 2, "head_dim": 8},
      "collator": )" + collator + "}",
                                "x.json");
  };
  ad::Batch newer = load(R"({"name": "transformers.DataCollatorWithFlattening", "release": "5.30.0", "examples": [3, 2]})");
  REQUIRE(newer.collator);
  CHECK(newer.collator->replayed_as == "5.24.0");
  CHECK(newer.collator->rule == "flattening-5.24");
  REQUIRE(newer.collator->notes.size() >= 1);
  CHECK(newer.collator->notes[0].find("newer than the newest release read (5.24.0)") != std::string::npos);

  ad::Batch older = load(R"({"name": "trl.DataCollatorForLanguageModeling", "release": "0.12.0",
                             "options": {"padding_free": true}, "examples": [3, 2]})");
  CHECK(older.collator->replayed_as == "0.19.0");
  CHECK(older.collator->notes[0].find("predates the first release read (0.19.0)") != std::string::npos);

  ad::Batch other = load(R"({"name": "trl.DataCollatorForCompletionOnlyLM", "release": "0.21.0",
                             "options": {"padding_free": true}, "examples": [3, 2]})");
  CHECK(other.collator->name == "trl.DataCollatorForLanguageModeling");
  CHECK(other.collator->notes[0].find("not a collator the replay knows") != std::string::npos);

  // the release from the environment
  ad::Batch env = ad::parse_batch_text(R"({"format": "attn-doctor/batch@1", "environment": {"trl": "0.21.0"},
      "model": {"num_heads": 2, "head_dim": 8},
      "collator": {"name": "trl.DataCollatorForLanguageModeling", "options": {"padding_free": true}, "examples": [3, 2]}})",
                                       "x.json");
  CHECK(env.collator->release_from == "environment.trl");
  CHECK(env.collator->rule == "trl-0.20");
}

TEST_CASE("collate: the batch the collator hands on and the intended sequences", "[collate]") {
  ad::Batch b = ad::parse_batch_text(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 2, "head_dim": 8},
      "collator": {"name": "transformers.DataCollatorWithFlattening", "release": "4.52.4",
                   "options": {"return_flash_attn_kwargs": true}, "examples": [3, 1, 4]}})",
                                     "x.json");
  REQUIRE(b.batch);
  REQUIRE(b.batch->position_ids);
  CHECK(b.batch->position_ids->tensor.values == std::vector<int64_t>{0, 1, 2, 0, 0, 1, 2, 3});
  CHECK(b.batch->position_ids->model_level);
  REQUIRE(b.batch->flash_kwargs);
  CHECK(*b.batch->flash_kwargs->cu_seq_lens_q == std::vector<int64_t>{0, 3, 4, 8});
  CHECK(*b.batch->flash_kwargs->max_length_q == 4);
  CHECK(b.collator->handed_on == std::vector<std::string>{"position_ids", "flash_kwargs"});
  CHECK(b.intent.source == ad::IntentSource::collator);
  REQUIRE(b.intent.sequences.size() == 3);
  CHECK(b.intent.sequences[1].start == 3);
  CHECK(b.intent.sequences[1].length == 1);
  // token ids unknown (examples by length): emitted with their shapes only
  CHECK_FALSE(b.collator->emitted[0].values_known);

  // a TRL padding-free batch on an implementation off the list carries no position ids, and its
  // all-ones mask does not reach the attention
  ad::Batch t = ad::parse_batch_text(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 2, "head_dim": 8},
      "collator": {"name": "trl.DataCollatorForLanguageModeling", "release": "0.21.0",
                   "options": {"padding_free": true, "attn_implementation": "sdpa"}, "examples": [3, 2]}})",
                                     "x.json");
  REQUIRE(t.batch);
  CHECK_FALSE(t.batch->position_ids);
  CHECK_FALSE(t.batch->attention_mask);
  CHECK(t.batch->query_length == 5);
  CHECK(t.collator->handed_on.empty());
}

TEST_CASE("collate: invalid collator blocks are input errors", "[collate]") {
  auto error = [](const std::string& rest) {
    try {
      ad::parse_batch_text(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 2, "head_dim": 8}, )" + rest + "}",
                           "x.json");
    } catch (const ad::InputError& e) {
      return e.json_path() + " | " + e.expected() + " | " + e.found();
    }
    return std::string("no error");
  };
  CHECK(error(R"("batch": {"query_length": 4}, "collator": {"name": "trl.DataCollatorForLanguageModeling", "examples": [4]})")
            .rfind("/collator | a \"collator\" block or a \"batch\" block", 0) == 0);
  CHECK(error(R"("collator": {"name": "megatron.packed", "examples": [4]})")
            .rfind("/collator/name | a collator the replay knows", 0) == 0);
  CHECK(error(R"("collator": {"name": "transformers.DataCollatorWithFlattening", "examples": []})").rfind("/collator/examples", 0) == 0);
  CHECK(error(R"("collator": {"name": "transformers.DataCollatorWithFlattening", "examples": [{"seq_lengths": [2], "length": 3}]})")
            .rfind("/collator/examples/0/length", 0) == 0);
  CHECK(error(R"("collator": {"name": "transformers.DataCollatorWithFlattening", "options": {"padding": true}, "examples": [2]})")
            .rfind("/collator/options", 0) == 0);
  // what the real release raises
  CHECK(error(R"("collator": {"name": "transformers.DataCollatorWithFlattening", "release": "4.44.2",
                              "options": {"separator_id": 7}, "examples": [2]})")
            .find("TypeError: DefaultDataCollator.__init__() got an unexpected keyword argument 'separator_id'") !=
        std::string::npos);
  // more tokens than the element cap: refused before anything is built
  CHECK(error(R"("collator": {"name": "transformers.DataCollatorWithFlattening", "examples": [1099511627776, 1099511627776]})")
            .find("/collator/examples") == 0);
}

TEST_CASE("collate: LlamaFactory neat_packing by release (goldens: collate-llamafactory-*.json)", "[collate]") {
  auto load = [](const std::string& release, const std::string& examples) {
    return ad::parse_batch_text(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 2, "head_dim": 8},
      "collator": {"name": "llamafactory.neat_packing", "release": ")" + release +
                                    R"(", "options": {"cutoff_len": 7}, "examples": )" + examples + "}}",
                                "x.json");
  };
  // 0.9.4: the segment-id mask (padding to cutoff_len + 1 = 8 with 0) and position ids, both
  // handed to the model, whose _get_unpad_data is LlamaFactory's
  ad::Batch old = load("0.9.4", R"([{"seq_lengths": [2, 3]}])");
  REQUIRE(old.collator);
  CHECK(old.collator->rule == "neat-0.9.4");
  REQUIRE(old.collator->emitted.size() == 4);
  CHECK(old.collator->emitted[1].key == "attention_mask");
  CHECK(old.collator->emitted[1].values == std::vector<int64_t>{1, 1, 2, 2, 2, 0, 0, 0});
  CHECK(old.collator->emitted[2].values == std::vector<int64_t>{0, 1, 0, 1, 2, 0, 0, 0});
  CHECK(old.collator->handed_on == std::vector<std::string>{"attention_mask", "position_ids"});
  CHECK(old.collator->unpad_patch == "llamafactory.get_unpad_data");
  REQUIRE(old.batch->attention_mask);
  CHECK(old.batch->attention_mask->model_level);
  CHECK(old.intent.sequences.size() == 2);
  // 0.9.5: the padding is dropped and the mask set to None
  ad::Batch now = load("0.9.5", R"([{"seq_lengths": [2, 3]}])");
  CHECK(now.collator->rule == "neat-0.9.5");
  REQUIRE(now.collator->emitted.size() == 4);
  CHECK(now.collator->emitted[1].dtype == "NoneType");
  CHECK(now.collator->emitted[2].values == std::vector<int64_t>{0, 1, 0, 1, 2});
  CHECK(now.batch->query_length == 5);
  // a row longer than cutoff_len + 1 raises as the processor does; 0.9.5 takes one row only
  CHECK_THROWS_WITH(load("0.9.5", "[9]"), Catch::Contains("ValueError: The length of packed example"));
  CHECK_THROWS_WITH(load("0.9.5", "[3, 4]"), Catch::Contains("AssertionError: bsz should be 1"));
}

TEST_CASE("collate: LlamaFactory's knapsack, its multiple-of-8 padding and the 4-D mask of sdpa", "[collate]") {
  auto load = [](const std::string& release, const std::string& options, const std::string& examples) {
    return ad::parse_batch_text(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 2, "head_dim": 8},
      "collator": {"name": "llamafactory.neat_packing", "release": ")" + release + R"(", "options": )" + options +
                                    R"(, "examples": )" + examples + "}}",
                                "x.json");
  };
  // lengths 3, 2, 3 and one longer than the cutoff: dropped; the rest packed longest first, the
  // last of equal lengths first
  ad::Batch k = load("0.9.4", R"({"cutoff_len": 6, "knapsack": true})", "[[10, 11, 12], [20, 21], [30, 31, 32], 9]");
  REQUIRE(k.collator);
  CHECK(k.collator->emitted[0].values == std::vector<int64_t>{30, 31, 32, 10, 11, 12, 0, 20, 21, 0, 0, 0, 0, 0});
  CHECK(k.collator->emitted[1].values == std::vector<int64_t>{1, 1, 1, 2, 2, 2, 0, 1, 1, 0, 0, 0, 0, 0});
  REQUIRE(k.intent.sequences.size() == 3);
  CHECK(k.intent.sequences[2].row == 1);
  CHECK(k.intent.sequences[2].length == 2);
  // pad_to_multiple_of pads the ids and the mask, not the position ids; sdpa gets a 4-D mask
  ad::Batch s = load("0.9.5", R"({"cutoff_len": 5, "knapsack": true, "attn_implementation": "sdpa", "pad_to_multiple_of": 8})",
                     "[[10, 11], [20, 21, 22]]");
  REQUIRE(s.collator->emitted[1].shape == std::vector<int64_t>{1, 1, 8, 8});
  // query 3 (document 1's first token) sees key 3 only; the padding sees nothing
  const auto& m = s.collator->emitted[1].values;
  CHECK(std::vector<int64_t>(m.begin() + 3 * 8, m.begin() + 4 * 8) == std::vector<int64_t>{1, 1, 1, 0, 1, 1, 1, 1});
  CHECK(std::vector<int64_t>(m.begin() + 7 * 8, m.end()) == std::vector<int64_t>(8, 1));
  CHECK(s.collator->emitted[2].shape == std::vector<int64_t>{1, 6});
  CHECK(s.batch->query_length == 8);
  REQUIRE(s.batch->position_ids);
  CHECK(s.batch->position_ids->tensor.shape == std::vector<int64_t>{1, 6});
  CHECK_FALSE(s.batch->attention_mask);
  // an implementation LlamaFactory's collator does not name
  CHECK_THROWS_WITH(load("0.9.5", R"({"cutoff_len": 5, "attn_implementation": "flex_attention"})", "[3]"),
                    Catch::Contains("\"sdpa\" or \"eager\""));
}

TEST_CASE("collate goldens: LlamaFactory's patched _get_unpad_data as each release computed it", "[collate][golden]") {
  const auto files = goldens("unpad-llamafactory-");
  REQUIRE(files.size() >= 2);
  for (const fs::path& file : files) {
    const json g = read_json(file);
    CHECK(g["installed_by"] == "configure_packing");
    for (const json& c : g["cases"]) {
      INFO(file.filename().string() + " " + c["name"].get<std::string>());
      const json& rows = c["mask"];
      std::vector<int64_t> values;
      for (const json& r : rows)
        for (const json& v : r) values.push_back(v.get<int64_t>());
      check_patched_unpad(c, "llamafactory.get_unpad_data", values,
                          {static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows[0].size())});
    }
  }
}

TEST_CASE("collate: axolotl multipack hands its segment-id mask to the model, with the patch by release", "[collate]") {
  auto load = [](const std::string& release, const std::string& options) {
    return ad::parse_batch_text(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 2, "head_dim": 8},
      "collator": {"name": "axolotl.multipack", "release": ")" + release + R"(", "options": )" + options +
                                    R"(, "examples": [{"seq_lengths": [2, 3]}, {"seq_lengths": [4]}]}})",
                                "x.json");
  };
  ad::Batch patched = load("0.17.0", R"({"pad_to_multiple_of": 4})");
  CHECK(patched.collator->rule == "multipack-0.12");
  CHECK(patched.collator->unpad_patch == "axolotl.get_unpad_data");
  CHECK(patched.collator->handed_on == std::vector<std::string>{"attention_mask", "position_ids"});
  REQUIRE(patched.batch->attention_mask);
  CHECK(patched.batch->attention_mask->model_level);
  CHECK(patched.batch->attention_mask->tensor.values == std::vector<int64_t>{1, 1, 2, 2, 2, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0});
  // the padding's position ids count up from 0.10.0
  CHECK(patched.batch->position_ids->tensor.values == std::vector<int64_t>{0, 1, 0, 1, 2, 0, 1, 2, 0, 1, 2, 3, 0, 1, 2, 3});
  REQUIRE(patched.intent.sequences.size() == 3);
  CHECK(patched.intent.sequences[2].row == 1);
  // 0.18.0 no longer patches in-tree models
  ad::Batch unpatched = load("0.19.0", "{}");
  CHECK(unpatched.collator->rule == "multipack-0.18");
  CHECK(unpatched.collator->unpad_patch.empty());
  // squash_position_ids from 0.12.0 only; an older release raises as its dataclass does
  CHECK_THROWS_WITH(load("0.11.0", R"({"squash_position_ids": true})"),
                    Catch::Contains("TypeError: V2BatchSamplerDataCollatorForSeq2Seq.__init__() got an unexpected "
                                    "keyword argument 'squash_position_ids'"));
  // without the dataset's attention_mask column nothing is patched and no mask is emitted
  ad::Batch no_mask = load("0.8.0", R"({"attention_mask": false})");
  CHECK(no_mask.collator->unpad_patch.empty());
  CHECK_FALSE(no_mask.batch->attention_mask);
}
