// TRL's DataCollatorForLanguageModeling (trl/trainer/sft_trainer.py) and the two SFTTrainer
// decisions that shape it: whether the batch is padding-free (`padding_free`, or `packing`
// with a padding-free packing strategy) and, before 0.24, whether the collator returns
// position ids (only for the attention implementations on the trainer's list).
//
// Read from the wheels of every minor release from 0.19.0 to 0.29.0 and every 1.x release to
// 1.16.0; the collator's behaviour changes at the releases below, one function each, building
// on the one before. tests/golden/collate-trl-<release>.json, recorded by running the real
// class (tools/parity/collate.py), pins them.
//
//   0.19.0  trl-0.19  padding_free: one row (1, T) of input_ids, labels, an all-ones
//                     attention_mask and, when return_position_ids, position ids restarting per
//                     example (an example's own `position_ids` are used when it has them);
//                     otherwise rows padded to the longest (pad_to_multiple_of rounds it up)
//   0.20.0  trl-0.20  a packed example's `seq_lengths` give the position ids; with them (and
//                     return_position_ids, padding_free) no attention_mask is emitted
//   0.23.0  trl-0.23  the padding-free row is padded too (pad_to_multiple_of: position ids 0,
//                     labels -100, the attention mask 0 on the pad)
//   0.24.0  trl-0.24  no return_position_ids: padding_free always emits position ids and never
//                     an attention mask; labels are -100 wherever the position id is 0
//   1.11.0  trl-1.11  return_position_ids is back (default False): position ids beside the
//                     attention mask of padded rows
//   1.16.0  trl-1.16  padding_free also emits cu_seq_lens_q/k (int32), max_length_q/k and
//                     seq_idx (int32), all derived from the positions where position_ids == 0
//
// The trainer's list of attention implementations (trl_position_ids_implementations): before
// 0.24 the collator's return_position_ids is `attn_implementation in list`; from 0.24 the list
// only decides a warning; 1.16.0 has no list. huggingface/trl PR#3942 added flash_attention_3
// (0.22.0).
#include <algorithm>
#include <numeric>

#include "batch/collate.hpp"

namespace ad {

namespace {

struct TrlRules {
  std::string rule;
  std::vector<std::string> accepts;       // the collator's fields
  bool example_position_ids = false;      // 0.19: examples' own position ids
  bool seq_lengths = false;               // 0.20+: seq_lengths give the position ids
  bool pad_padding_free = false;          // 0.23+: the padding-free row is padded too
  bool has_return_position_ids = true;    // the collator field exists
  bool return_position_ids_default = true;
  bool always_position_ids_padding_free = false;  // 0.24+
  bool labels_at_position_zero = false;   // 0.24+: labels -100 where position_ids == 0
  bool flash_kwargs = false;              // 1.16+
};

TrlRules trl_0_19() {
  TrlRules r;
  r.rule = "trl-0.19";
  r.accepts = {"pad_token_id", "padding_free", "return_position_ids", "pad_to_multiple_of"};
  r.example_position_ids = true;
  return r;
}

TrlRules trl_0_20() {
  TrlRules r = trl_0_19();
  r.rule = "trl-0.20";
  r.example_position_ids = false;
  r.seq_lengths = true;
  return r;
}

TrlRules trl_0_23() {
  TrlRules r = trl_0_20();
  r.rule = "trl-0.23";
  r.pad_padding_free = true;
  return r;
}

TrlRules trl_0_24() {
  TrlRules r = trl_0_23();
  r.rule = "trl-0.24";
  r.accepts = {"pad_token_id", "padding_free", "pad_to_multiple_of"};
  r.has_return_position_ids = false;
  r.return_position_ids_default = false;
  r.always_position_ids_padding_free = true;
  r.labels_at_position_zero = true;
  return r;
}

TrlRules trl_1_11() {
  TrlRules r = trl_0_24();
  r.rule = "trl-1.11";
  r.accepts.push_back("return_position_ids");
  r.has_return_position_ids = true;
  r.return_position_ids_default = false;
  return r;
}

TrlRules trl_1_16() {
  TrlRules r = trl_1_11();
  r.rule = "trl-1.16";
  r.flash_kwargs = true;
  return r;
}

TrlRules trl_rules(const Version& v) {
  if (v >= *parse_version("1.16.0")) return trl_1_16();
  if (v >= *parse_version("1.11.0")) return trl_1_11();
  if (v >= *parse_version("0.24.0")) return trl_0_24();
  if (v >= *parse_version("0.23.0")) return trl_0_23();
  if (v >= *parse_version("0.20.0")) return trl_0_20();
  return trl_0_19();
}

// The SFTTrainer's packing strategies that switch padding-free on, and its default strategy.
std::vector<std::string> padding_free_strategies(const Version& v) {
  if (v >= *parse_version("1.0.0")) return {"bfd", "bfd_split"};
  if (v >= *parse_version("0.20.0")) return {"bfd"};
  return {"ffd"};
}
std::string default_strategy(const Version& v) { return v >= *parse_version("0.20.0") ? "bfd" : "ffd"; }

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// trl.trainer.utils.pad: right padding to the longest row, rounded up to pad_to_multiple_of.
CollatorValue pad_rows(const std::string& key, const std::vector<std::vector<int64_t>>& rows, int64_t value,
                       int64_t multiple, bool known) {
  int64_t width = 0;
  for (const auto& r : rows) width = std::max(width, static_cast<int64_t>(r.size()));
  if (multiple > 0 && width % multiple != 0) width += multiple - width % multiple;  // 0: none
  CollatorValue v;
  v.key = key;
  v.dtype = "int64";
  v.shape = {static_cast<int64_t>(rows.size()), width};
  v.values.assign(static_cast<size_t>(v.shape[0] * width), value);
  for (size_t i = 0; i < rows.size(); ++i)
    std::copy(rows[i].begin(), rows[i].end(), v.values.begin() + static_cast<std::ptrdiff_t>(i) * width);
  v.values_known = known;
  return v;
}

}  // namespace

std::vector<std::string> trl_position_ids_implementations(const Version& v) {
  if (v >= *parse_version("1.16.0")) return {};
  if (v >= *parse_version("0.26.0"))
    return {"flash_attention_2", "flash_attention_3", "kernels-community/flash-attn2", "kernels-community/flash-attn3",
            "kernels-community/vllm-flash-attn3"};
  if (v >= *parse_version("0.24.0"))
    return {"flash_attention_2", "flash_attention_3", "kernels-community/flash-attn", "kernels-community/flash-attn3",
            "kernels-community/vllm-flash-attn3"};
  if (v >= *parse_version("0.22.0")) return {"flash_attention_2", "flash_attention_3", "kernels-community/vllm-flash-attn3"};
  if (v >= *parse_version("0.21.0")) return {"flash_attention_2", "kernels-community/vllm-flash-attn3"};
  return {"flash_attention_2"};
}

void replay_trl(const CollatorSpec& spec, const Version& release, CollatorResult& out) {
  const TrlRules r = trl_rules(release);
  out.record.rule = r.rule;
  const CollatorOptions& o = spec.options;
  // trainer-level options: what SFTConfig and the model's config say
  static const std::vector<std::string> trainer = {"packing", "packing_strategy", "attn_implementation"};
  for (const std::string& key : o.given) {
    if (std::find(r.accepts.begin(), r.accepts.end(), key) == r.accepts.end() &&
        std::find(trainer.begin(), trainer.end(), key) == trainer.end()) {
      out.raised = CollatorRaise{"TypeError", "DataCollatorForLanguageModeling.__init__() got an unexpected keyword argument '" + key + "'"};
      return;
    }
  }
  const std::string tag = "trl " + out.record.replayed_as;
  // the trainer's decisions (SFTTrainer.__init__)
  const std::string strategy = o.packing_strategy.value_or(default_strategy(release));
  const auto pf_strategies = padding_free_strategies(release);
  const bool packing_pf = o.packing.value_or(false) &&
                          std::find(pf_strategies.begin(), pf_strategies.end(), strategy) != pf_strategies.end();
  const bool padding_free = o.padding_free.value_or(false) || packing_pf;
  if (packing_pf && !o.padding_free.value_or(false))
    out.record.notes.push_back("packing with strategy \"" + strategy + "\" makes the SFTTrainer of " + tag + " padding-free");
  const std::string impl = o.attn_implementation.value_or("flash_attention_2");
  const std::vector<std::string> list = trl_position_ids_implementations(release);
  const bool on_list = list.empty() || std::find(list.begin(), list.end(), impl) != list.end();
  bool rpi = r.return_position_ids_default;
  if (r.has_return_position_ids) {
    if (o.return_position_ids) {
      rpi = *o.return_position_ids;
    } else if (!r.always_position_ids_padding_free) {
      // before 0.24 the trainer builds the collator with return_position_ids=use_flash_attention
      rpi = on_list;
      if (!on_list && padding_free)
        out.record.notes.push_back("the SFTTrainer of " + tag + " forwards position ids only for " + join(list) + "; \"" +
                                   impl + "\" is not on the list, so the padding-free batch carries no position ids "
                                   "and its examples are one sequence to the attention");
    }
  }
  if (r.always_position_ids_padding_free && !list.empty() && !on_list && padding_free)
    out.record.notes.push_back("the SFTTrainer of " + tag + " warns that padding-free batches are reliable only with " +
                               join(list) + " (\"" + impl + "\" is not on its list); the collator still emits position ids");

  const bool want_pos = r.always_position_ids_padding_free ? (padding_free || rpi) : rpi;
  bool known = true;
  std::vector<std::vector<int64_t>> ids, labels, pos, mask;
  for (const CollatorExample& e : spec.examples) {
    std::vector<int64_t> row;
    if (e.input_ids) row = *e.input_ids;
    else {
      known = false;
      row.assign(static_cast<size_t>(e.length), 0);
    }
    ids.push_back(row);
    labels.push_back(row);
    mask.emplace_back(static_cast<size_t>(e.length), 1);
    std::vector<int64_t> p;
    const bool packed = !e.seq_lengths.empty() && (r.seq_lengths || r.example_position_ids);
    if (packed) {
      for (int64_t len : e.seq_lengths)
        for (int64_t t = 0; t < len; ++t) p.push_back(t);
    } else {
      for (int64_t t = 0; t < e.length; ++t) p.push_back(t);
    }
    pos.push_back(p);
  }
  const bool seq_lengths_given = !spec.examples.empty() && !spec.examples.front().seq_lengths.empty();
  // 0.20 - 0.23: packed rows with position ids carry no attention mask
  const bool no_mask_packed = r.seq_lengths && !r.always_position_ids_padding_free && rpi && seq_lengths_given && padding_free;
  const bool want_mask = r.always_position_ids_padding_free ? !padding_free : !no_mask_packed;

  auto cat = [](const std::vector<std::vector<int64_t>>& rows) {
    std::vector<int64_t> all;
    for (const auto& x : rows) all.insert(all.end(), x.begin(), x.end());
    return std::vector<std::vector<int64_t>>{all};
  };
  if (padding_free) {
    ids = cat(ids);
    labels = cat(labels);
    pos = cat(pos);
    mask = cat(mask);
  }
  // the padding-free row was not padded before 0.23
  const int64_t multiple = (padding_free && !r.pad_padding_free) ? 0 : o.pad_to_multiple_of.value_or(0);
  const int64_t pad_id = o.pad_token_id.value_or(0);
  auto& em = out.record.emitted;
  CollatorValue v_ids = pad_rows("input_ids", ids, pad_id, multiple, known);
  CollatorValue v_labels = pad_rows("labels", labels, -100, multiple, known);
  CollatorValue v_pos = pad_rows("position_ids", pos, 0, multiple, true);
  CollatorValue v_mask = pad_rows("attention_mask", mask, 0, multiple, true);
  if (r.labels_at_position_zero && padding_free)
    for (size_t i = 0; i < v_labels.values.size(); ++i)
      if (v_pos.values[i] == 0) v_labels.values[i] = -100;

  if (!r.always_position_ids_padding_free) {
    // 0.19 - 0.23: input_ids, attention_mask, position_ids, labels
    em.push_back(v_ids);
    if (want_mask) em.push_back(v_mask);
    if (want_pos) em.push_back(v_pos);
    em.push_back(v_labels);
    return;
  }
  em.push_back(v_ids);
  em.push_back(v_labels);
  if (padding_free) {
    em.push_back(v_pos);
    if (r.flash_kwargs) {
      // the segments start wherever position_ids == 0 (padding tokens each start one)
      const int64_t width = v_pos.shape[1];
      std::vector<int64_t> cu;
      for (int64_t t = 0; t < width; ++t)
        if (v_pos.values[static_cast<size_t>(t)] == 0) cu.push_back(t);
      cu.push_back(width);
      int64_t max_len = 0;
      std::vector<int64_t> seq_idx;
      for (size_t s = 0; s + 1 < cu.size(); ++s) {
        max_len = std::max(max_len, cu[s + 1] - cu[s]);
        for (int64_t t = cu[s]; t < cu[s + 1]; ++t) seq_idx.push_back(static_cast<int64_t>(s));
      }
      for (const char* key : {"cu_seq_lens_q", "cu_seq_lens_k"})
        em.push_back(CollatorValue{key, "int32", {static_cast<int64_t>(cu.size())}, cu, true});
      for (const char* key : {"max_length_q", "max_length_k"}) em.push_back(CollatorValue{key, "int", {}, {max_len}, true});
      em.push_back(CollatorValue{"seq_idx", "int32", {1, static_cast<int64_t>(seq_idx.size())}, seq_idx, true});
    }
  } else {
    if (want_pos) em.push_back(v_pos);
    em.push_back(v_mask);
  }
}

}  // namespace ad
