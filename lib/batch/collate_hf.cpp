// transformers' DataCollatorWithFlattening (transformers/data/data_collator.py), by release.
//
// Read from every minor release's wheel from 4.44.0 (where the class first appears) to 5.24.0;
// the behaviour changes at the releases below, one function each, each building on the one
// before (the way lib/convert/'s hf_4_xx.cpp rule sets do). The goldens
// tests/golden/collate-transformers-<release>.json, recorded by running the real class
// (tools/parity/collate.py), pin every row.
//
//   4.44.0  flattening-4.44  concatenates the examples into one row (1, T): input_ids, labels
//                            with -100 at each example's first token, position_ids restarting
//                            at 0 (return_position_ids, default True); through
//                            default_data_collator, so every value is an int64 tensor
//   4.45.0  flattening-4.45  separator_id (default -100) replaces -100 in labels
//   4.52.1  flattening-4.52  return_flash_attn_kwargs: cu_seq_lens_q/k (int32) and
//                            max_length_q/k (Python ints); return_seq_idx: seq_idx (int32, 1, T);
//                            the dtypes are set by the class itself (4.52.0 was never published)
//   5.15.0  flattening-5.15  position_ids_start: the first position of every example
//   5.24.0  flattening-5.24  empty examples are dropped; a batch of only empty examples raises
//                            ValueError
//
// An option a release does not accept reaches DefaultDataCollator's dataclass constructor,
// which raises TypeError; the replay reports that instead of a batch.
#include <algorithm>

#include "batch/collate.hpp"

namespace ad {

namespace {

struct FlatteningRules {
  std::string rule;
  std::vector<std::string> accepts;
  bool separator = false;        // separator_id replaces -100 in labels
  bool explicit_dtypes = false;  // the class builds the tensors itself (int32 for kwargs/seq_idx)
  bool kwargs = false;           // return_flash_attn_kwargs, return_seq_idx
  bool start = false;            // position_ids_start
  bool drop_empty = false;       // examples without tokens are dropped
};

FlatteningRules flattening_4_44() {
  FlatteningRules r;
  r.rule = "flattening-4.44";
  r.accepts = {"return_position_ids"};
  return r;
}

FlatteningRules flattening_4_45() {
  FlatteningRules r = flattening_4_44();
  r.rule = "flattening-4.45";
  r.accepts.push_back("separator_id");
  r.separator = true;
  return r;
}

FlatteningRules flattening_4_52() {
  FlatteningRules r = flattening_4_45();
  r.rule = "flattening-4.52";
  r.accepts.push_back("return_flash_attn_kwargs");
  r.accepts.push_back("return_seq_idx");
  r.explicit_dtypes = true;
  r.kwargs = true;
  return r;
}

FlatteningRules flattening_5_15() {
  FlatteningRules r = flattening_4_52();
  r.rule = "flattening-5.15";
  r.accepts.push_back("position_ids_start");
  r.start = true;
  return r;
}

FlatteningRules flattening_5_24() {
  FlatteningRules r = flattening_5_15();
  r.rule = "flattening-5.24";
  r.drop_empty = true;
  return r;
}

FlatteningRules flattening_rules(const Version& v) {
  if (v >= *parse_version("5.24.0")) return flattening_5_24();
  if (v >= *parse_version("5.15.0")) return flattening_5_15();
  if (v >= *parse_version("4.52.0")) return flattening_4_52();
  if (v >= *parse_version("4.45.0")) return flattening_4_45();
  return flattening_4_44();
}

CollatorValue row(const std::string& key, const std::string& dtype, std::vector<int64_t> values, bool known = true) {
  CollatorValue v;
  v.key = key;
  v.dtype = dtype;
  v.shape = {1, static_cast<int64_t>(values.size())};
  v.values = std::move(values);
  v.values_known = known;
  return v;
}

}  // namespace

void replay_flattening(const CollatorSpec& spec, const Version& release, CollatorResult& out) {
  const FlatteningRules r = flattening_rules(release);
  out.record.rule = r.rule;
  const CollatorOptions& o = spec.options;
  for (const std::string& key : o.given) {
    if (std::find(r.accepts.begin(), r.accepts.end(), key) == r.accepts.end()) {
      out.raised = CollatorRaise{"TypeError", "DefaultDataCollator.__init__() got an unexpected keyword argument '" + key + "'"};
      return;
    }
  }
  const bool want_pos = o.return_position_ids.value_or(true);
  const bool want_kwargs = r.kwargs && o.return_flash_attn_kwargs.value_or(false);
  const bool want_seq_idx = r.kwargs && o.return_seq_idx.value_or(false);
  const int64_t separator = r.separator ? o.separator_id.value_or(-100) : -100;
  const int64_t start = r.start ? o.position_ids_start.value_or(0) : 0;

  std::vector<const CollatorExample*> examples;
  for (const CollatorExample& e : spec.examples)
    if (!(r.drop_empty && e.length == 0)) examples.push_back(&e);
  if (r.drop_empty && examples.empty()) {
    out.raised = CollatorRaise{"ValueError", "DataCollatorWithFlattening received a batch where every example is empty."};
    return;
  }

  std::vector<int64_t> ids, labels, pos, seq_idx, cu{0};
  bool known = true;
  int64_t max_length = 0;
  for (size_t i = 0; i < examples.size(); ++i) {
    const CollatorExample& e = *examples[i];
    const int64_t n = e.length;
    if (e.input_ids) {
      ids.insert(ids.end(), e.input_ids->begin(), e.input_ids->end());
      // labels: the separator, then the example's ids from its second token on (an empty
      // example still adds the separator: labels run one longer than input_ids per empty one)
      labels.push_back(separator);
      if (n > 1) labels.insert(labels.end(), e.input_ids->begin() + 1, e.input_ids->end());
    } else {
      known = false;
      ids.insert(ids.end(), static_cast<size_t>(n), 0);
      labels.push_back(separator);
      if (n > 1) labels.insert(labels.end(), static_cast<size_t>(n - 1), 0);
    }
    for (int64_t t = 0; t < n; ++t) {
      if (want_pos) pos.push_back(start + t);
      if (want_seq_idx) seq_idx.push_back(static_cast<int64_t>(i));
    }
    cu.push_back(cu.back() + n);
    max_length = std::max(max_length, n);
  }

  auto& em = out.record.emitted;
  // default_data_collator turns an empty list into a float tensor (torch.tensor([[]]))
  const std::string ids_dtype = (!r.explicit_dtypes && ids.empty()) ? "float32" : "int64";
  em.push_back(row("input_ids", ids_dtype, ids, known));
  em.push_back(row("labels", "int64", labels, known));
  if (want_pos) em.push_back(row("position_ids", (!r.explicit_dtypes && pos.empty()) ? "float32" : "int64", pos));
  if (want_seq_idx) em.push_back(row("seq_idx", "int32", seq_idx));
  if (want_kwargs) {
    for (const char* key : {"cu_seq_lens_q", "cu_seq_lens_k"}) {
      CollatorValue v;
      v.key = key;
      v.dtype = "int32";
      v.shape = {static_cast<int64_t>(cu.size())};
      v.values = cu;
      em.push_back(v);
    }
    for (const char* key : {"max_length_q", "max_length_k"}) em.push_back(CollatorValue{key, "int", {}, {max_length}, true});
  }
  if (labels.size() != ids.size())
    out.record.notes.push_back("an empty example still adds its separator to labels: labels hold " +
                               std::to_string(labels.size()) + " entries for " + std::to_string(ids.size()) +
                               " tokens (transformers " + out.record.replayed_as + ", data/data_collator.py)");
  if (want_seq_idx)
    out.record.notes.push_back("seq_idx is for linear-attention layers; the flash-attention conversion does not read it");
}

}  // namespace ad
