// LlamaFactory's neat_packing: the packed-row construction of
// llamafactory/data/processor/supervised.py (PackedSupervisedDatasetProcessor) and the collator
// SFTDataCollatorWith4DAttentionMask (llamafactory/data/collator.py), with flash_attention_2.
// Modelled from the code of the 0.9.4 and 0.9.5 wheels (no golden: running the collator needs
// a tokenizer template and its multimodal plugin; docs/spec/oracle.md says so).
//
// Both releases build each packed row the same way: the examples' tokens one after the other,
// an attention mask holding the example's number (1, 2, ...) on its tokens, position ids
// restarting at 0 for each example, and, when the row is shorter than cutoff_len + 1, padding
// up to that width with mask 0 and position 0 (a longer row raises ValueError).
//
//   0.9.4  neat-0.9.4  the collator hands the segment-id mask and the position ids on; the
//                      model's _get_unpad_data is replaced (model/model_utils/packing.py,
//                      configure_packing, also in 0.9.3) by get_unpad_data, which counts each
//                      segment id of every row (tests/golden/unpad-llamafactory-<release>.json):
//                      the mask is handed on at model level and that unpadding replayed
//   0.9.5  neat-0.9.5  the collator drops the padding (_unpad_packed_features) and sets
//                      attention_mask to None: the position ids alone carry the boundaries;
//                      configure_packing is gone
#include <algorithm>

#include "batch/collate.hpp"

namespace ad {

void replay_neat_packing(const CollatorSpec& spec, const Version& release, CollatorResult& out) {
  const bool v095 = release >= *parse_version("0.9.5");
  out.record.rule = v095 ? "neat-0.9.5" : "neat-0.9.4";
  const CollatorOptions& o = spec.options;
  static const std::vector<std::string> accepts = {"cutoff_len", "attn_implementation", "pad_token_id"};
  for (const std::string& key : o.given)
    if (std::find(accepts.begin(), accepts.end(), key) == accepts.end()) {
      out.raised = CollatorRaise{"TypeError", "neat_packing takes no option '" + key + "'"};
      return;
    }
  const int64_t width = o.cutoff_len.value_or(0) + 1;
  const int64_t pad_id = o.pad_token_id.value_or(0);
  bool known = true;
  std::vector<int64_t> ids, mask, pos, labels;
  int64_t rows = 0;
  for (const CollatorExample& e : spec.examples) {
    std::vector<int64_t> lengths = e.seq_lengths.empty() ? std::vector<int64_t>{e.length} : e.seq_lengths;
    if (e.length > width) {
      out.raised = CollatorRaise{"ValueError", "The length of packed example should be identical to the cutoff length."};
      return;
    }
    if (e.input_ids) ids.insert(ids.end(), e.input_ids->begin(), e.input_ids->end());
    else {
      known = false;
      ids.insert(ids.end(), static_cast<size_t>(e.length), 0);
    }
    labels.insert(labels.end(), ids.end() - e.length, ids.end());
    for (size_t s = 0; s < lengths.size(); ++s)
      for (int64_t t = 0; t < lengths[s]; ++t) {
        mask.push_back(static_cast<int64_t>(s) + 1);
        pos.push_back(t);
      }
    for (int64_t t = e.length; t < width; ++t) {
      ids.push_back(pad_id);
      labels.push_back(-100);
      mask.push_back(0);
      pos.push_back(0);
    }
    ++rows;
  }
  auto value = [&](const char* key, std::vector<int64_t> v, bool k) {
    return CollatorValue{key, "int64", {rows, rows ? static_cast<int64_t>(v.size()) / rows : 0}, std::move(v), k};
  };
  auto& em = out.record.emitted;
  if (!v095) {
    em.push_back(value("input_ids", ids, known));
    em.push_back(value("attention_mask", mask, true));
    em.push_back(value("position_ids", pos, true));
    em.push_back(value("labels", labels, known));
    out.record.unpad_patch = "llamafactory.get_unpad_data";
    out.record.notes.push_back("llamafactory " + out.record.replayed_as + "'s configure_packing replaces transformers' "
                               "_get_unpad_data with its get_unpad_data (model/model_utils/packing.py), which counts "
                               "each segment id of the mask it receives");
    return;
  }
  // 0.9.5: one row only ("bsz should be 1 for neat packing"); the padding is dropped
  if (rows != 1) {
    out.raised = CollatorRaise{"AssertionError", "bsz should be 1 for neat packing"};
    return;
  }
  std::vector<int64_t> kids, kpos, klabels;
  for (size_t t = 0; t < mask.size(); ++t)
    if (mask[t] != 0) {
      kids.push_back(ids[t]);
      kpos.push_back(pos[t]);
      klabels.push_back(labels[t]);
    }
  em.push_back(value("input_ids", kids, known));
  em.push_back(value("position_ids", kpos, true));
  em.push_back(value("labels", klabels, known));
  out.record.notes.push_back("llamafactory " + out.record.replayed_as +
                             " drops the padding and sets attention_mask to None (data/collator.py)");
}

}  // namespace ad
