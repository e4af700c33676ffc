// The collator as a replayed conversion: a batch file's `collator` block (a named collator, its
// release, its options and the examples) becomes the `batch` block that collator would emit
// (docs/spec/batch-format.md#collator, docs/spec/conversions.md#collators).
//
// One function per behaviour change of each collator, like the transformers rule sets of
// lib/convert/: collate_hf.cpp (transformers' DataCollatorWithFlattening), collate_trl.cpp
// (TRL's DataCollatorForLanguageModeling and the SFTTrainer's list of attention
// implementations it forwards position ids for), collate_llamafactory.cpp (LlamaFactory's
// neat_packing), collate_axolotl.cpp (axolotl's multipack). The collator sits below the conversion: it produces the batch the conversion
// replays, so it lives on the batch floor and the loader runs it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "batch/batch.hpp"

namespace ad {

// One example handed to the collator.
struct CollatorExample {
  int64_t length = 0;                              // tokens
  std::optional<std::vector<int64_t>> input_ids;   // the token ids, when given
  std::vector<int64_t> seq_lengths;                // an already packed row (TRL bfd, LlamaFactory)
};

// The options a collator was constructed with. Each is absent unless the batch file gives it;
// `given` keeps the names in the file's order, so a release that does not accept one raises as
// the release does.
struct CollatorOptions {
  std::optional<bool> return_position_ids;
  std::optional<bool> return_flash_attn_kwargs;
  std::optional<bool> return_seq_idx;
  std::optional<int64_t> separator_id;
  std::optional<int64_t> position_ids_start;
  std::optional<bool> padding_free;
  std::optional<bool> packing;
  std::optional<std::string> packing_strategy;
  std::optional<int64_t> pad_to_multiple_of;
  std::optional<int64_t> pad_token_id;
  std::optional<std::string> attn_implementation;
  std::optional<int64_t> cutoff_len;
  std::optional<bool> squash_position_ids;  // axolotl >= 0.12
  std::optional<bool> attention_mask;       // axolotl: the examples carry the tokenizer's mask (default true)
  std::optional<bool> position_ids;         // axolotl: the examples carry add_position_ids' ids (default true)
  std::optional<bool> knapsack;             // LlamaFactory: the examples are packed by the processor's greedy_knapsack
  std::optional<int64_t> fake_mm_tokens;    // LlamaFactory: the fake image/audio tokens appended to row 0
  std::vector<std::string> given;
  bool has(std::string_view key) const;
};

struct CollatorSpec {
  std::string name;                 // as written
  std::optional<Version> release;   // collator.release, else the environment's
  std::string release_from;         // "collator.release", "environment.transformers", "environment.trl", ""
  CollatorOptions options;
  std::vector<CollatorExample> examples;
  bool remote_code = false;         // model.remote_code: axolotl patches the model's own _get_unpad_data
};

// What the real release raises instead of returning a batch.
struct CollatorRaise {
  std::string type;     // "TypeError", "ValueError"
  std::string message;
};

struct CollatorResult {
  CollatorRecord record;                 // record.emitted: what the collator returned
  std::optional<CollatorRaise> raised;   // the release raises on these inputs
  // the documents' lengths of each row, where the collator packed the examples itself
  // (LlamaFactory): the intended sequences follow them
  std::vector<std::vector<int64_t>> packed_rows;
  const CollatorValue* find(std::string_view key) const;
};

// The collators and releases the replay knows, for `list` and the docs: name, first and newest
// release read, the behaviour rows (first release, rule id).
struct CollatorBehaviour {
  const char* first;  // first release with this behaviour
  const char* rule;   // e.g. "flattening-4.52"
};
struct CollatorInfo {
  const char* name;     // canonical name, e.g. "transformers.DataCollatorWithFlattening"
  const char* library;  // "transformers", "trl", "llamafactory", "axolotl"
  const char* newest;   // newest release read
  std::vector<CollatorBehaviour> behaviours;
};
const std::vector<CollatorInfo>& collator_table();

// TRL's SFTTrainer: the attention implementations it forwards position ids for (before 0.24:
// the collator's return_position_ids), by release. Empty for releases with no such list.
std::vector<std::string> trl_position_ids_implementations(const Version& trl);

// Replays the collator. Never throws for a collator or release it does not know (the nearest
// known one is replayed, with a note); a release that raises on these inputs is `raised`.
CollatorResult replay_collator(const CollatorSpec& spec);

// The `batch` block the emitted values hand on (JSON text in batch-format.md's encoding), and
// the intended sequences the examples are.
std::string collator_batch_json(CollatorResult& result);  // also fills record.handed_on
Intent collator_intent(const CollatorSpec& spec, const CollatorResult& result);

// Per-collator replays (collate_hf.cpp, collate_trl.cpp, collate_llamafactory.cpp).
void replay_flattening(const CollatorSpec& spec, const Version& release, CollatorResult& out);
void replay_trl(const CollatorSpec& spec, const Version& release, CollatorResult& out);
void replay_neat_packing(const CollatorSpec& spec, const Version& release, CollatorResult& out);
void replay_multipack(const CollatorSpec& spec, const Version& release, CollatorResult& out);

}  // namespace ad
