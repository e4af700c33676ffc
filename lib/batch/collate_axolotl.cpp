// axolotl's multipack: the collator V2BatchSamplerDataCollatorForSeq2Seq
// (axolotl/utils/collators/batching.py) that the trainer uses with sample_packing, on the bins
// the multipack sampler fills, and the _get_unpad_data axolotl's patch_for_multipack
// (axolotl/monkeypatch/multipack.py) installs in transformers. Read from the 0.8.0 to 0.19.0
// releases and pinned by tests/golden/collate-axolotl-<release>.json (tools/parity/
// collate_patched.py runs each release's own module files).
//
// Each example of the `collator` block is one packed row (a bin): its documents are
// `seq_lengths`. The row's documents are concatenated; the attention mask becomes the segment ids
// 1, 2, ... (the tokenizer's all-ones mask times the document's number); position ids are each
// document's own 0 .. n-1 (axolotl's add_position_ids). The rows are then padded to the longest,
// rounded up to pad_to_multiple_of: input_ids with the pad id, labels with -100, the mask with 0.
//
//   0.8.0   multipack-0.8   position ids padded with 0 (position_pad_token_id); the patch
//                           replaces transformers.modeling_flash_attention_utils._get_unpad_data
//                           with axolotl's get_unpad_data (monkeypatch/utils.py): per row, the
//                           count of each segment id 1 .. max(mask), the zero counts dropped
//   0.10.0  multipack-0.10  position ids padded with 0, 1, 2, ... (range(remainder_len)): the
//                           padding is numbered like one more document
//   0.12.0  multipack-0.12  squash_position_ids: one 0 .. n-1 over the whole row
//   0.18.0  multipack-0.18  patch_for_multipack no longer replaces transformers' _get_unpad_data
//                           for in-tree models: the model's own unpadding sees the mask. Its
//                           get_unpad_data is rewritten: per row, the length of each run of equal
//                           ids, the runs of 0 dropped ("axolotl.get_unpad_data@0.18")
//
// A remote-code model (model.remote_code; axolotl's has_remote_code: the config's auto_map names
// an AutoModelForCausalLM, trust_remote_code not set false) is patched by every release read:
// patch_remote replaces the modeling file's own _get_unpad_data with the release's get_unpad_data
// (0.8.0 - 0.17.0 instead of transformers'; from 0.18.0 the only patch left), which that file
// calls on the raw segment-id mask (0.18.0's comment in monkeypatch/multipack.py).
//
// Without `attention_mask` (the examples carry none: axolotl drops the column for mamba and
// gemma3) the collator emits no mask; without `position_ids` none are emitted either.
#include <algorithm>

#include "batch/collate.hpp"

namespace ad {

void replay_multipack(const CollatorSpec& spec, const Version& release, CollatorResult& out) {
  const bool range_padding = release >= *parse_version("0.10.0");
  const bool squash_accepted = release >= *parse_version("0.12.0");
  const bool patched = release < *parse_version("0.18.0");
  out.record.rule = !range_padding ? "multipack-0.8"
                    : !squash_accepted ? "multipack-0.10"
                    : patched          ? "multipack-0.12"
                                       : "multipack-0.18";
  const CollatorOptions& o = spec.options;
  static const std::vector<std::string> accepts = {"pad_to_multiple_of", "pad_token_id", "squash_position_ids",
                                                   "attention_mask", "position_ids"};
  for (const std::string& key : o.given)
    if (std::find(accepts.begin(), accepts.end(), key) == accepts.end() ||
        (key == "squash_position_ids" && !squash_accepted)) {
      out.raised = CollatorRaise{"TypeError", "V2BatchSamplerDataCollatorForSeq2Seq.__init__() got an unexpected "
                                              "keyword argument '" + key + "'"};
      return;
    }
  const bool with_mask = o.attention_mask.value_or(true);
  const bool with_pos = o.position_ids.value_or(true);
  const bool squash = o.squash_position_ids.value_or(false);
  const int64_t pad_id = o.pad_token_id.value_or(0);
  int64_t width = 0;
  for (const CollatorExample& e : spec.examples) width = std::max(width, e.length);
  if (const int64_t m = o.pad_to_multiple_of.value_or(0); m > 0) width = (width + m - 1) / m * m;
  const int64_t rows = static_cast<int64_t>(spec.examples.size());
  bool known = true;
  std::vector<int64_t> ids, mask, labels, pos;
  for (const CollatorExample& e : spec.examples) {
    const std::vector<int64_t> docs = e.seq_lengths.empty() ? std::vector<int64_t>{e.length} : e.seq_lengths;
    if (e.input_ids) ids.insert(ids.end(), e.input_ids->begin(), e.input_ids->end());
    else {
      known = false;
      ids.insert(ids.end(), static_cast<size_t>(e.length), 0);
    }
    labels.insert(labels.end(), ids.end() - e.length, ids.end());
    int64_t t = 0;
    for (size_t d = 0; d < docs.size(); ++d)
      for (int64_t i = 0; i < docs[d]; ++i, ++t) {
        mask.push_back(static_cast<int64_t>(d) + 1);
        pos.push_back(squash ? t : i);
      }
    for (int64_t i = 0; i < width - e.length; ++i) {
      ids.push_back(pad_id);
      labels.push_back(-100);
      mask.push_back(0);
      pos.push_back(range_padding ? i : 0);
    }
  }
  auto value = [&](const char* key, std::vector<int64_t> v, bool k) {
    return CollatorValue{key, "int64", {rows, width}, std::move(v), k};
  };
  auto& em = out.record.emitted;
  em.push_back(value("input_ids", std::move(ids), known));
  if (with_mask) em.push_back(value("attention_mask", std::move(mask), true));
  em.push_back(value("labels", std::move(labels), known));
  if (with_pos) em.push_back(value("position_ids", std::move(pos), true));
  if (with_mask && with_pos && release >= *parse_version("0.11.0"))
    out.record.notes.push_back("axolotl " + out.record.replayed_as + "'s trainer removes the attention_mask column "
                               "beside position_ids when sample_packing_drop_attention_mask is set (core/trainers/"
                               "base.py; core/builders/causal.py sets it for flash, xformers or flex attention in "
                               "0.11 - 0.12, from the attention backend's packing support later), so such a run "
                               "reaches the model with position ids only; this replay keeps the collator's mask: "
                               "describe that run with the option attention_mask false");
  if (with_mask && spec.remote_code) {
    out.record.unpad_patch = patched ? "axolotl.get_unpad_data" : "axolotl.get_unpad_data@0.18";
    out.record.notes.push_back("axolotl " + out.record.replayed_as + "'s patch_for_multipack (a remote-code model) "
                               "replaces the modeling file's own _get_unpad_data with axolotl's get_unpad_data "
                               "(monkeypatch/multipack.py patch_remote, monkeypatch/utils.py), which " +
                               (patched ? std::string("counts each segment id of the mask it receives")
                                        : std::string("counts each run of equal ids per row of the mask it receives")));
  } else if (with_mask && patched) {
    out.record.unpad_patch = "axolotl.get_unpad_data";
    out.record.notes.push_back("axolotl " + out.record.replayed_as + "'s patch_for_multipack replaces transformers' "
                               "_get_unpad_data with axolotl's get_unpad_data (monkeypatch/utils.py), which counts "
                               "each segment id of the mask it receives");
  } else if (with_mask) {
    out.record.notes.push_back("axolotl " + out.record.replayed_as + " leaves transformers' _get_unpad_data in place "
                               "for in-tree models (monkeypatch/multipack.py): the model's own mask preparation "
                               "and unpadding see the segment-id mask");
  }
}

}  // namespace ad
