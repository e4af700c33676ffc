// The collators the replay knows, the release each `collator` block is replayed as, and what
// the emitted values hand on to the batch (docs/spec/conversions.md#collators).
#include <algorithm>
#include <sstream>

#include <nlohmann/json.hpp>

#include "batch/collate.hpp"

namespace ad {

bool CollatorOptions::has(std::string_view key) const {
  return std::find(given.begin(), given.end(), key) != given.end();
}

const CollatorValue* CollatorResult::find(std::string_view key) const {
  for (const CollatorValue& v : record.emitted)
    if (v.key == key) return &v;
  return nullptr;
}

const std::vector<CollatorInfo>& collator_table() {
  static const std::vector<CollatorInfo> table = {
      {"transformers.DataCollatorWithFlattening", "transformers", "5.24.0",
       {{"4.44.0", "flattening-4.44"},
        {"4.45.0", "flattening-4.45"},
        {"4.52.1", "flattening-4.52"},
        {"5.15.0", "flattening-5.15"},
        {"5.24.0", "flattening-5.24"}}},
      {"trl.DataCollatorForLanguageModeling", "trl", "1.16.0",
       {{"0.19.0", "trl-0.19"},
        {"0.20.0", "trl-0.20"},
        {"0.23.0", "trl-0.23"},
        {"0.24.0", "trl-0.24"},
        {"1.11.0", "trl-1.11"},
        {"1.16.0", "trl-1.16"}}},
      {"llamafactory.neat_packing", "llamafactory", "0.9.5", {{"0.9.3", "neat-0.9.4"}, {"0.9.5", "neat-0.9.5"}}},
      {"axolotl.multipack", "axolotl", "0.19.0",
       {{"0.8.0", "multipack-0.8"}, {"0.10.0", "multipack-0.10"}, {"0.12.0", "multipack-0.12"}, {"0.18.0", "multipack-0.18"}}},
  };
  return table;
}

namespace {

const CollatorInfo* by_name(const std::string& name, std::string& note) {
  for (const CollatorInfo& c : collator_table())
    if (name == c.name) return &c;
  // a name of a known library that is not a collator the replay knows: that library's
  // collator, the nearest known one
  const auto dot = name.find('.');
  const std::string library = dot == std::string::npos ? name : name.substr(0, dot);
  for (const CollatorInfo& c : collator_table())
    if (library == c.library) {
      note = "\"" + name + "\" is not a collator the replay knows; replayed as " + c.name + ", the nearest known one";
      return &c;
    }
  return nullptr;
}

}  // namespace

CollatorResult replay_collator(const CollatorSpec& spec) {
  CollatorResult out;
  out.record.requested = spec.name;
  std::string name_note;
  const CollatorInfo* info = by_name(spec.name, name_note);
  if (!info) {
    std::string known;
    for (const CollatorInfo& c : collator_table()) known += (known.empty() ? "" : ", ") + std::string(c.name);
    out.raised = CollatorRaise{"", "a collator the replay knows (" + known + ")"};
    return out;
  }
  out.record.name = info->name;
  if (!name_note.empty()) out.record.notes.push_back(name_note);
  const Version first = *parse_version(info->behaviours.front().first);
  const Version newest = *parse_version(info->newest);
  Version used = newest;
  if (spec.release) {
    out.record.release = spec.release->text;
    out.record.release_from = spec.release_from;
    used = *spec.release;
    if (used < first) {
      out.record.notes.push_back(std::string(info->library) + " " + spec.release->text + " predates the first release read (" +
                                 info->behaviours.front().first + "); replayed as " + info->behaviours.front().first);
      used = first;
    } else if (used > newest) {
      out.record.notes.push_back(std::string(info->library) + " " + spec.release->text +
                                 " is newer than the newest release read (" + info->newest + "); replayed as " +
                                 info->newest);
      used = newest;
    }
  } else {
    out.record.notes.push_back("no " + std::string(info->library) + " release named (collator.release or environment." +
                               info->library + "); replayed as " + info->newest + ", the newest read");
  }
  out.record.replayed_as = used.text;
  const std::string lib = info->library;
  if (lib == "transformers") replay_flattening(spec, used, out);
  else if (lib == "trl") replay_trl(spec, used, out);
  else if (lib == "axolotl") replay_multipack(spec, used, out);
  else {
    const std::string impl = spec.options.attn_implementation.value_or("flash_attention_2");
    if (impl != "flash_attention_2" && impl != "sdpa" && impl != "eager") {
      out.raised = CollatorRaise{"", "attn_implementation \"flash_attention_2\", \"sdpa\" or \"eager\" (the "
                                     "implementations LlamaFactory's collator names)"};
      return out;
    }
    replay_neat_packing(spec, used, out);
  }
  return out;
}

namespace {

nlohmann::json rows_json(const CollatorValue& v) {
  nlohmann::json rows = nlohmann::json::array();
  const int64_t b = v.shape.size() == 2 ? v.shape[0] : 1;
  const int64_t w = v.shape.empty() ? 0 : v.shape.back();
  for (int64_t r = 0; r < b; ++r)
    rows.push_back(std::vector<int64_t>(v.values.begin() + r * w, v.values.begin() + (r + 1) * w));
  return rows;
}

bool all_ones(const CollatorValue& v) {
  return std::all_of(v.values.begin(), v.values.end(), [](int64_t x) { return x == 1; });
}

}  // namespace

std::string collator_batch_json(CollatorResult& result) {
  CollatorRecord& rec = result.record;
  rec.handed_on.clear();
  nlohmann::json b = nlohmann::json::object();
  if (const CollatorValue* ids = result.find("input_ids"); ids && ids->shape.size() == 2) {
    b["batch_size"] = ids->shape[0];
    b["query_length"] = ids->shape[1];
  }
  // a segment-id mask the trainer hands to the model (axolotl's multipack, LlamaFactory's
  // neat_packing): the release's mask preparation decides what reaches the attention, and the
  // trainer's patched _get_unpad_data (record.unpad_patch) unpads it
  const bool segment_ids = rec.name.rfind("axolotl.", 0) == 0 || rec.name.rfind("llamafactory.", 0) == 0;
  if (const CollatorValue* m = result.find("attention_mask"); m && m->shape.size() == 2 && segment_ids) {
    b["attention_mask"] = {{"values", rows_json(*m)}, {"level", "model"}};
    rec.handed_on.push_back("attention_mask");
  } else if (m && m->shape.size() == 2) {
    // transformers' mask preparation for flash attention drops a 2-D mask without a zero
    // (masking_utils.flash_attention_mask from 4.53; the models' _update_causal_mask before)
    if (!all_ones(*m)) {
      b["attention_mask"] = {{"values", rows_json(*m)}};
      rec.handed_on.push_back("attention_mask");
    } else {
      rec.notes.push_back("the all-ones attention_mask is dropped by transformers' mask preparation for flash "
                          "attention; it does not reach the attention call");
    }
  }
  if (const CollatorValue* p = result.find("position_ids"); p && p->shape.size() == 2 && p->dtype == "int64") {
    b["position_ids"] = {{"values", rows_json(*p)}, {"level", "model"}};
    rec.handed_on.push_back("position_ids");
  }
  nlohmann::json kw = nlohmann::json::object();
  for (const char* key : {"cu_seq_lens_q", "cu_seq_lens_k"})
    if (const CollatorValue* v = result.find(key)) kw[key] = v->values;
  for (const char* key : {"max_length_q", "max_length_k"})
    if (const CollatorValue* v = result.find(key)) kw[key] = v->values.front();
  if (!kw.empty()) {
    b["flash_kwargs"] = kw;
    rec.handed_on.push_back("flash_kwargs");
  }
  return b.dump();
}

Intent collator_intent(const CollatorSpec& spec, const CollatorResult& result) {
  Intent in;
  in.source = IntentSource::collator;
  // flattened (one row): every example one after the other; padded rows: one example per row
  const CollatorValue* ids = result.find("input_ids");
  const bool one_row = ids && ids->shape.size() == 2 && ids->shape[0] == 1 && spec.examples.size() > 1;
  if (!result.packed_rows.empty()) {
    // the collator packed the rows itself (LlamaFactory): its rows, documents in order
    for (size_t r = 0; r < result.packed_rows.size(); ++r) {
      int64_t at = 0;
      for (int64_t len : result.packed_rows[r]) {
        if (len > 0) in.sequences.push_back(IntendedSequence{static_cast<int64_t>(r), at, len});
        at += len;
      }
    }
    return in;
  }
  int64_t start = 0;
  int64_t row = 0;
  for (const CollatorExample& e : spec.examples) {
    if (!one_row) start = 0;
    std::vector<int64_t> lengths = e.seq_lengths.empty() ? std::vector<int64_t>{e.length} : e.seq_lengths;
    for (int64_t len : lengths) {
      if (len > 0) in.sequences.push_back(IntendedSequence{one_row ? 0 : row, start, len});
      start += len;
    }
    if (!one_row) ++row;
  }
  return in;
}

}  // namespace ad
