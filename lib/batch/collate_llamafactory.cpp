// LlamaFactory's neat_packing: the packed-row construction of
// llamafactory/data/processor/supervised.py (PackedSupervisedDatasetProcessor) and the collator
// SFTDataCollatorWith4DAttentionMask (llamafactory/data/collator.py) as train/sft/workflow.py
// builds it. Pinned by tests/golden/collate-llamafactory-<release>.json (0.9.3, 0.9.4, 0.9.5:
// each release's own processor, template and collator, tools/parity/collate_llamafactory.py).
//
// The processor (the same in 0.9.3 - 0.9.5): with `knapsack`, the examples are the dataset's
// encoded examples; one longer than cutoff_len is dropped, the rest are packed by greedy_knapsack
// (lengths sorted, each row takes the longest that still fits cutoff_len, and of equal lengths the
// last example first); without it each example is one packed row. A row holds its documents'
// tokens one after the other, an attention mask holding the document's number (1, 2, ...),
// position ids restarting at 0 for each document, and padding up to cutoff_len + 1 with mask 0
// and position 0 (a longer row raises ValueError). `cutoff_len` is the processor's: the
// configured one minus 1 (DataArguments.__post_init__ with packing).
//
// The collator pads input_ids, the mask and labels to a multiple of pad_to_multiple_of (the
// workflow passes 8 when training); position_ids are not among the tokenizer's model inputs and
// keep the row width (hiyouga/LlamaFactory#10736). Then, by attention implementation:
//
//   eager, sdpa  (every release) prepare_4d_attention_mask: a (B, 1, L, L) float mask, 0.0
//                where the key is in the query's document and not after it, the dtype's minimum
//                elsewhere (emitted as 1 = masked, the batch format's convention)
//   0.9.4  neat-0.9.4  flash_attention_2: the segment-id mask and the position ids are handed
//                on; the model's _get_unpad_data is replaced (model/model_utils/packing.py,
//                configure_packing, also in 0.9.3) by get_unpad_data, which counts each segment
//                id of every row (tests/golden/unpad-llamafactory-<release>.json)
//   0.9.5  neat-0.9.5  flash_attention_2: one row only ("bsz should be 1 for neat packing");
//                _unpad_packed_features drops the padding of input_ids, labels and the mask (of
//                the position ids only when they are as wide as the mask) and attention_mask is
//                set to None: the position ids alone carry the boundaries; configure_packing is gone
//
// The fake image of a multimodal template (fake_mm_tokens: its count, the template's plugin and
// the processor's) is pinned by the goldens' fake-image cases (the qwen2_vl template and a real
// Qwen2VLProcessor: 6 tokens), every release and implementation; 0.9.5's flash path drops the
// fake tokens again with the padding (their mask is 0).
#include <algorithm>
#include <climits>
#include <map>

#include "batch/collate.hpp"
#include "util/checked_math.hpp"

namespace ad {

void replay_neat_packing(const CollatorSpec& spec, const Version& release, CollatorResult& out) {
  const bool v095 = release >= *parse_version("0.9.5");
  out.record.rule = v095 ? "neat-0.9.5" : "neat-0.9.4";
  const CollatorOptions& o = spec.options;
  static const std::vector<std::string> accepts = {"cutoff_len", "attn_implementation", "pad_token_id",
                                                   "pad_to_multiple_of", "knapsack", "fake_mm_tokens"};
  for (const std::string& key : o.given)
    if (std::find(accepts.begin(), accepts.end(), key) == accepts.end()) {
      out.raised = CollatorRaise{"TypeError", "neat_packing takes no option '" + key + "'"};
      return;
    }
  const std::string impl = o.attn_implementation.value_or("flash_attention_2");
  const bool flash = impl == "flash_attention_2";
  const int64_t cutoff = o.cutoff_len.value_or(0);
  const int64_t width = cutoff + 1;
  const int64_t pad_id = o.pad_token_id.value_or(0);

  // the packed rows: per row, the examples it holds (their documents)
  struct Doc {
    const CollatorExample* example;
    int64_t length;
  };
  std::vector<std::vector<Doc>> packed;
  if (o.knapsack.value_or(false)) {
    std::vector<int64_t> lengths;
    std::map<int64_t, std::vector<size_t>> by_length;
    int64_t dropped = 0;
    for (size_t i = 0; i < spec.examples.size(); ++i) {
      const int64_t len = spec.examples[i].length;
      if (len > cutoff) {
        ++dropped;
        continue;
      }
      lengths.push_back(len);
      by_length[len].push_back(i);
    }
    if (dropped)
      out.record.notes.push_back(std::to_string(dropped) + " example(s) longer than cutoff_len " + std::to_string(cutoff) +
                                 " dropped by the processor (\"Dropped lengthy example\")");
    std::sort(lengths.begin(), lengths.end());
    while (!lengths.empty()) {
      std::vector<Doc> row;
      int64_t remaining = cutoff;
      for (;;) {
        auto it = std::upper_bound(lengths.begin(), lengths.end(), remaining);
        if (it == lengths.begin()) break;
        --it;
        const int64_t len = *it;
        remaining -= len;
        lengths.erase(it);
        std::vector<size_t>& idx = by_length[len];
        row.push_back(Doc{&spec.examples[idx.back()], len});
        idx.pop_back();
      }
      packed.push_back(std::move(row));
    }
  } else {
    for (const CollatorExample& e : spec.examples) packed.push_back({Doc{&e, e.length}});
  }

  bool known = true;
  std::vector<int64_t> ids, mask, pos, labels;
  const int64_t rows = static_cast<int64_t>(packed.size());
  for (const std::vector<Doc>& row : packed) {
    int64_t used = 0;
    int64_t number = 0;
    for (const Doc& d : row) {
      const CollatorExample& e = *d.example;
      if (e.input_ids) ids.insert(ids.end(), e.input_ids->begin(), e.input_ids->end());
      else {
        known = false;
        ids.insert(ids.end(), static_cast<size_t>(e.length), 0);
      }
      labels.insert(labels.end(), ids.end() - e.length, ids.end());
      // a knapsack row numbers its examples; an already packed row its documents
      const std::vector<int64_t> lengths =
          e.seq_lengths.empty() || o.knapsack.value_or(false) ? std::vector<int64_t>{e.length} : e.seq_lengths;
      for (int64_t len : lengths) {
        ++number;
        for (int64_t t = 0; t < len; ++t) {
          mask.push_back(number);
          pos.push_back(t);
        }
      }
      used += e.length;
    }
    if (used > width) {
      out.raised = CollatorRaise{"ValueError", "The length of packed example should be identical to the cutoff length."};
      return;
    }
    for (int64_t t = used; t < width; ++t) {
      ids.push_back(pad_id);
      labels.push_back(-100);
      mask.push_back(0);
      pos.push_back(0);
    }
    std::vector<int64_t> lens;
    for (const Doc& d : row) {
      const CollatorExample& e = *d.example;
      if (e.seq_lengths.empty() || o.knapsack.value_or(false)) lens.push_back(e.length);
      else lens.insert(lens.end(), e.seq_lengths.begin(), e.seq_lengths.end());
    }
    out.packed_rows.push_back(std::move(lens));
  }
  // MultiModalDataCollatorForSeq2Seq: for a batch without images (audios) and a template whose
  // plugin has an image (audio) token, a fake one's tokens are appended to the first row, with
  // mask 0 and label -100; the position ids are not extended
  const int64_t fake = o.fake_mm_tokens.value_or(0);
  const bool known_before_fake = known;  // 0.9.5's flash path drops the fake tokens (mask 0) again
  if (fake > 0) {
    known = false;
    out.record.notes.push_back("the multimodal collator appends " + std::to_string(fake) + " fake image/audio tokens to "
                               "row 0 (mask 0, label -100); the position ids are not extended");
  }
  // DataCollatorForSeq2Seq: input_ids, attention_mask and labels to the longest row, rounded up
  // to a multiple of pad_to_multiple_of; position_ids keep the row width
  const int64_t multiple = o.pad_to_multiple_of.value_or(1);
  const int64_t longest = rows ? width + fake : width;
  const int64_t padded = (longest + multiple - 1) / multiple * multiple;
  auto widen = [&](const std::vector<int64_t>& v, int64_t fill, int64_t fake_fill) {
    std::vector<int64_t> w;
    w.reserve(static_cast<size_t>(rows * padded));
    for (int64_t r = 0; r < rows; ++r) {
      w.insert(w.end(), v.begin() + r * width, v.begin() + (r + 1) * width);
      const int64_t extra = r == 0 ? fake : 0;
      w.insert(w.end(), static_cast<size_t>(extra), fake_fill);
      w.insert(w.end(), static_cast<size_t>(padded - width - extra), fill);
    }
    return w;
  };
  ids = widen(ids, pad_id, pad_id);
  mask = widen(mask, 0, 0);
  labels = widen(labels, -100, -100);
  if (padded != width)
    out.record.notes.push_back("the collator pads input_ids, attention_mask and labels to " + std::to_string(padded) +
                               " (pad_to_multiple_of " + std::to_string(multiple) + "); position_ids are not among "
                               "the tokenizer's model inputs and keep the row width " + std::to_string(width) +
                               " (hiyouga/LlamaFactory#10736)");
  auto value = [&](const char* key, std::vector<int64_t> v, int64_t w, bool k) {
    return CollatorValue{key, "int64", {rows, w}, std::move(v), k};
  };
  auto& em = out.record.emitted;
  if (!flash) {
    // prepare_4d_attention_mask (every release): materialised up to 2^20 entries
    CollatorValue m4{"attention_mask", "float32", {rows, 1, padded, padded}, {}, true};
    const auto entries = checked::mul(checked::mul(rows, padded).value_or(INT64_MAX), padded);
    if (entries && *entries <= (int64_t{1} << 20)) {
      m4.values.reserve(static_cast<size_t>(*entries));
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t q = 0; q < padded; ++q)
          for (int64_t k = 0; k < padded; ++k) {
            const int64_t sq = mask[r * padded + q], sk = mask[r * padded + k];
            m4.values.push_back(sk != 0 && sk == sq && k <= q ? 0 : 1);
          }
    } else {
      m4.values_known = false;
    }
    em.push_back(value("input_ids", ids, padded, known));
    em.push_back(std::move(m4));
    em.push_back(value("position_ids", pos, width, true));
    em.push_back(value("labels", labels, padded, false));
    out.record.notes.push_back("llamafactory " + out.record.replayed_as + " with " + impl +
                               ": the model receives the collator's 4-D block-diagonal mask "
                               "(prepare_4d_attention_mask) and the position ids; that attention is not a "
                               "flash-attention call and is not replayed");
    return;
  }
  if (!v095) {
    em.push_back(value("input_ids", ids, padded, known));
    em.push_back(value("attention_mask", mask, padded, true));
    em.push_back(value("position_ids", pos, width, true));
    em.push_back(value("labels", labels, padded, false));
    out.record.unpad_patch = "llamafactory.get_unpad_data";
    out.record.notes.push_back("llamafactory " + out.record.replayed_as + "'s configure_packing replaces transformers' "
                               "_get_unpad_data with its get_unpad_data (model/model_utils/packing.py), which counts "
                               "each segment id of the mask it receives");
    return;
  }
  // 0.9.5: one row only; _unpad_packed_features drops the padding
  if (rows != 1) {
    out.raised = CollatorRaise{"AssertionError", "bsz should be 1 for neat packing"};
    return;
  }
  std::vector<int64_t> kids, kpos, klabels;
  const bool trim_pos = width == padded;
  for (size_t t = 0; t < mask.size(); ++t)
    if (mask[t] != 0) {
      kids.push_back(ids[t]);
      klabels.push_back(labels[t]);
      if (trim_pos) kpos.push_back(pos[t]);
    }
  const int64_t kept = static_cast<int64_t>(kids.size());
  em.push_back(value("input_ids", kids, kept, known_before_fake));
  em.push_back(CollatorValue{"attention_mask", "NoneType", {}, {}, true});
  if (trim_pos) em.push_back(value("position_ids", kpos, kept, true));
  else em.push_back(value("position_ids", pos, width, true));
  em.push_back(value("labels", klabels, kept, false));
  out.record.notes.push_back("llamafactory " + out.record.replayed_as +
                             " drops the padding and sets attention_mask to None (data/collator.py)");
}

}  // namespace ad
