// The rule-set table: every replayed behaviour, the releases it covers, where it comes from,
// and the function that replays it. `resolve_transformers` maps a release through the table of
// every published release (releases_table.inc), any other release to the nearest known one;
// `replay_with` runs one rule set on a batch; `convert` does both for the release the batch (or
// the command line) names.
#include <algorithm>
#include <stdexcept>

#include "convert/rules.hpp"

namespace ad {
namespace {

using replay::Gemma2Era;
using replay::Qwen2VLEra;
using replay::RuleFn;

struct Entry {
  RuleSetInfo info;
  RuleFn fn;
  Gemma2Era gemma2 = Gemma2Era::absent;
  Qwen2VLEra qwen2vl = Qwen2VLEra::absent;
};

const char* const kGoldens = "tests/golden/transformers-<release>.json";

const std::vector<Entry>& table() {
  static const std::vector<Entry> entries = [] {
    auto hf = [](std::string name, std::string first, std::string last, std::string source, std::string summary,
                 RuleFn fn, Gemma2Era era, Qwen2VLEra qwen = Qwen2VLEra::absent) {
      return Entry{RuleSetInfo{std::move(name), "transformers", std::move(first), std::move(last),
                               std::move(source), std::move(summary)},
                   fn, era, qwen};
    };
    std::string g = std::string("; goldens ") + kGoldens;
    return std::vector<Entry>{
        hf("hf-4.34", "4.34.0", "4.41.2", "models/llama/modeling_llama.py LlamaFlashAttention2 (4.36.2, 4.40.2)" + g,
           "per-model copy: mask -> _upad_input, else flash_attn_func; no position ids, window or softcap",
           replay::hf_4_34, Gemma2Era::absent),
        hf("hf-4.42", "4.42.0", "4.42.4", "models/*/modeling_*.py per-model copies (4.42.4); Gemma-2 added" + g,
           "as hf-4.34; Gemma-2's FA2 layer fails in is_flash_attn_greater_or_equal", replay::hf_4_34,
           Gemma2Era::v4_42),
        hf("hf-4.43", "4.43.0", "4.43.4", "modeling_flash_attention_utils.py (4.43.4)" + g,
           "conversion moves into modeling_flash_attention_utils.py; window (W, W), softcap", replay::hf_4_43,
           Gemma2Era::v4_43),
        hf("hf-4.44.0", "4.44.0", "4.44.0", "modeling_flash_attention_utils.py (4.44.0), PR #31629" + g,
           "packed path when some row's last position id != S - 1 (Lq != 1); max_seqlen a 0-d tensor",
           replay::hf_4_44_0, Gemma2Era::v4_44_0),
        hf("hf-4.44.1", "4.44.1", "4.46.3", "modeling_flash_attention_utils.py (4.44.1, 4.44.2, 4.45.2, 4.46.3)" + g,
           "packed path when position ids decrease somewhere (Lq != 1); Gemma-2 fix #32522", replay::hf_4_44_1,
           Gemma2Era::v4_44_1, Qwen2VLEra::none),
        hf("hf-4.47", "4.47.0", "4.47.1", "modeling_flash_attention_utils.py (4.47.1), PR #33932" + g,
           "cu_seq_lens_q/k, max_length_q/k kwargs, honoured only together with position ids; Gemma-2 FA2 broken",
           replay::hf_4_47, Gemma2Era::v4_47, Qwen2VLEra::none),
        hf("hf-4.48.0", "4.48.0", "4.48.1",
           "modeling_flash_attention_utils.py (4.48.1); cache_utils.py, modeling_gemma2.py (4.48.1: no sliding_window "
           "in cache_kwargs, fixed in 4.48.2); gemma2-generate-4.48.1.json" + g,
           "as hf-4.47; Gemma-2 generate fails writing the sliding cache (IndexError) once a position reaches W",
           replay::hf_4_47, Gemma2Era::v4_48_0, Qwen2VLEra::none),
        hf("hf-4.48", "4.48.2", "4.48.3", "modeling_flash_attention_utils.py (4.48.3)" + g,
           "as hf-4.47 (Gemma-2 FA2 works again: prefill keeps the whole mask)", replay::hf_4_47,
           Gemma2Era::v4_48, Qwen2VLEra::none),
        hf("hf-4.49", "4.49.0", "4.51.3", "modeling_flash_attention_utils.py (4.49.0, 4.50.3, 4.51.3)" + g,
           "unpad_input unpacked with *_: flash-attn >= 2.7 no longer breaks a partial query", replay::hf_4_49,
           Gemma2Era::v4_48, Qwen2VLEra::none),
        hf("hf-4.52", "4.52.0", "4.52.4", "modeling_flash_attention_utils.py (4.52.4); gemma2-generate-4.52.4.json" + g,
           "as hf-4.49; Gemma-2 generate hands a 4-D mask to the conversion again", replay::hf_4_49,
           Gemma2Era::v4_52, Qwen2VLEra::none),
        hf("hf-4.53.0", "4.53.0", "4.53.0", "modeling_flash_attention_utils.py (4.53.0)" + g,
           "packed path only for B == 1; keys cut to the mask width; IndexError gathers", replay::hf_4_53_0,
           Gemma2Era::v4_53, Qwen2VLEra::none),
        hf("hf-4.53.1", "4.53.1", "4.53.3", "modeling_flash_attention_utils.py (4.53.1, 4.53.3), #39121" + g,
           "the four varlen kwargs alone select the varlen route", replay::hf_4_53_1, Gemma2Era::v4_53, Qwen2VLEra::none),
        hf("hf-4.54", "4.54.0", "4.55.0",
           "modeling_flash_attention_utils.py, generation/utils.py (4.54.0, 4.54.1, 4.55.0: 4.55.0 keeps the 4.54 "
           "route and only adds s_aux)" + g,
           "any position ids select varlen; max = cu.diff().max().item(); generate builds kwargs",
           replay::hf_4_54, Gemma2Era::v4_54, Qwen2VLEra::text_axis),
        hf("hf-4.55", "4.55.1", "4.55.4",
           "modeling_flash_attention_utils.py (4.55.1 - 4.55.4; goldens 4.55.2, 4.55.4)" + g,
           "_is_packed_sequence (B == 1, not one arange); Lq != Lk from last positions", replay::hf_4_55,
           Gemma2Era::v4_53, Qwen2VLEra::text_axis),
        hf("hf-4.56", "4.56.0", "4.56.2", "modeling_flash_attention_utils.py (4.56.2), #40163" + g,
           "window (W - 1, W - 1)", replay::hf_4_56, Gemma2Era::v4_53, Qwen2VLEra::text_axis),
        hf("hf-4.57", "4.57.0", "5.3.0", "modeling_flash_attention_utils.py (4.57.6, 5.0.0, 5.1.0, 5.2.0, 5.3.0)" + g,
           "as hf-4.56 (Qwen2-VL passes text position ids only from (4, B, S) input)", replay::hf_4_56,
           Gemma2Era::v4_53, Qwen2VLEra::four_axis),
        hf("hf-5.4", "5.4.0", "5.13.1",
           "modeling_flash_attention_utils.py (5.4.0, 5.5.0, 5.6.0, 5.6.2, 5.9.0, 5.11.0, 5.12.1, 5.13.1)" + g,
           "max_seqlen a 0-d int32 tensor (mask and packed paths); None max_length not passed (TypeError)",
           replay::hf_5_4, Gemma2Era::v4_53, Qwen2VLEra::four_axis),
        hf("hf-5.14", "5.14.0", "5.14.1", "modeling_flash_attention_utils.py (5.14.1)" + g,
           "the mask path's max_seqlen a host int again", replay::hf_5_14, Gemma2Era::v4_53, Qwen2VLEra::four_axis),
        hf("hf-5.16", "5.15.0", "5.18.0",
           "modeling_flash_attention_utils.py _prepare_from_posids (5.15.0: the change ships there, not in 5.16.0 "
           "as first recorded; goldens 5.15.1, 5.16.0)" + g,
           "sequences start at position_ids.min() (not 0); named for the first release recorded, from 5.15.0",
           replay::hf_5_16, Gemma2Era::v4_53, Qwen2VLEra::four_axis),
        hf("hf-5.20", "5.19.0", "",
           "modeling_flash_attention_utils.py _flash_attention_forward (5.19.0: the change ships there, not in 5.20.0 "
           "as first recorded; goldens 5.19.0, 5.20.0, 5.21.1, 5.22.2, 5.23.0, 5.24.0)" + g,
           "packing checked after mask and kwargs, never for B != 1 or one-token ids; named for the first release "
           "recorded, from 5.19.0", replay::hf_5_20,
           Gemma2Era::v4_53, Qwen2VLEra::four_axis),
        Entry{RuleSetInfo{"flash_attn-2.0", "flash_attn", "2.0.0", "2.6.3",
                          "flash_attn/bert_padding.py (sdist 2.6.3); tests/golden/flash_attn-2.6.3.json",
                          "bert_padding.unpad_input returns 4 values"},
              replay::fa_unpad_input},
        Entry{RuleSetInfo{"flash_attn-2.7", "flash_attn", "2.7.0", "",
                          "flash_attn/bert_padding.py (sdists 2.7.0.post2, 2.8.3); tests/golden/flash_attn-2.7.0.post2.json",
                          "bert_padding.unpad_input returns 5 values (used lengths added)"},
              replay::fa_unpad_input},
        Entry{RuleSetInfo{"fla-attn", "fla", "0.2.0", "",
                          "fla/layers/utils.py unpad_input (0.2.2, 0.3.2, 0.6.0); tests/golden/fla-<release>.json",
                          "attention layer unpadding: full mask for K/V, no width check; q_len in {Lk, 1}"},
              replay::fla_attn},
    };
  }();
  return entries;
}

// How transformers passes the arguments (modeling_flash_attention_utils.py
// _flash_attention_forward from 4.43, the per-model _flash_attention_forward copies before):
// q, k and v by position, the varlen arguments and `causal` by keyword; the optional flags
// (window_size, softcap, dropout, deterministic) vary with the release and are left out.
std::vector<BoundArgument> transformers_binding(Api api) {
  std::vector<BoundArgument> b = {{"q", Bound::positional}, {"k", Bound::positional}, {"v", Bound::positional}};
  if (is_varlen(api))
    for (const char* name : {"cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k"}) b.push_back({name, Bound::keyword});
  b.push_back({"causal", Bound::keyword});
  return b;
}

const Entry& entry_for(const RuleSetInfo& info) {
  for (const auto& e : table())
    if (&e.info == &info || e.info.name == info.name) return e;
  throw std::logic_error("unknown rule set " + info.name);
}

}  // namespace

const std::vector<RuleSetInfo>& rule_sets() {
  static const std::vector<RuleSetInfo> infos = [] {
    std::vector<RuleSetInfo> out;
    for (const auto& e : table()) out.push_back(e.info);
    return out;
  }();
  return infos;
}

const RuleSetInfo* find_rule_set(std::string_view name) {
  for (const auto& r : rule_sets())
    if (r.name == name) return &r;
  return nullptr;
}

const std::vector<KnownRelease>& known_transformers_releases() {
  static const std::vector<KnownRelease> table = {
#include "convert/releases_table.inc"
  };
  return table;
}

namespace {

const std::vector<Version>& known_versions() {
  static const std::vector<Version> parsed = [] {
    std::vector<Version> out;
    for (const auto& k : known_transformers_releases()) out.push_back(version_literal(k.release));
    return out;
  }();
  return parsed;
}

std::string known_span() {
  const auto& t = known_transformers_releases();
  return "it knows " + std::to_string(t.size()) + " of the releases published on PyPI, " + t.front().release + " - " +
         t.back().release;
}

}  // namespace

const KnownRelease* find_known_release(const Version& release) {
  const auto& versions = known_versions();
  for (size_t i = 0; i < versions.size(); ++i)
    if (versions[i] == release) return &known_transformers_releases()[i];
  return nullptr;
}

ResolvedRules resolve_transformers(const std::optional<Version>& release) {
  ResolvedRules out;
  const RuleSetInfo* newest = nullptr;
  const RuleSetInfo* oldest = nullptr;
  for (const auto& r : rule_sets()) {
    if (r.library != "transformers") continue;
    if (!oldest) oldest = &r;
    newest = &r;
  }
  if (!release) {
    out.rules = newest;
    out.note = "no transformers release named: replayed with the newest rule set " + newest->name + " (" +
               newest->first + " and later)";
    return out;
  }
  out.requested = release->text;
  if (const KnownRelease* k = find_known_release(*release)) {
    out.rules = find_rule_set(k->rule_set);
    if (!out.rules) throw std::logic_error(std::string("releases_table.inc names unknown rule set ") + k->rule_set);
    out.exact = true;
    out.known = k;
    return out;
  }
  // Not a release the table knows: the nearest known release at or below it.
  const auto& versions = known_versions();
  const auto& known = known_transformers_releases();
  size_t below = versions.size();
  for (size_t i = 0; i < versions.size(); ++i)
    if (versions[i] < *release) below = i;
  if (below == versions.size()) {
    // Older than the table: the rule set whose range holds it, else the oldest.
    const RuleSetInfo* best = nullptr;
    for (const auto& r : rule_sets())
      if (r.library == "transformers" && !(*release < version_literal(r.first))) best = &r;
    out.rules = best ? best : oldest;
    out.note = "transformers " + release->text + " is older than every release attn-doctor knows (" + known_span() +
               "): replayed with " + out.rules->name + ", not proven against this release";
    return out;
  }
  out.known = &known[below];
  out.rules = find_rule_set(out.known->rule_set);
  if (!out.rules)
    throw std::logic_error(std::string("releases_table.inc names unknown rule set ") + out.known->rule_set);
  const bool newer = below + 1 == versions.size();
  out.note = "transformers " + release->text + (newer ? " is newer than every release attn-doctor knows ("
                                                      : " is not a release attn-doctor knows (") +
             known_span() + "): replayed as the nearest known release " + out.known->release + " (rule set " +
             out.rules->name + ")" + (newer ? "; a newer release may convert differently" : "");
  return out;
}

VarlenArgs replay_with(const Batch& batch, const RuleSetInfo& rules, const std::optional<Version>& release) {
  const Entry& e = entry_for(rules);
  VarlenArgs a;
  if (!batch.batch) {
    a.rule_set = rules.name;
    a.library = rules.library;
    a.note = "the batch has no `batch` block: nothing to replay";
    return a;
  }
  std::optional<Version> fa = batch.environment.flash_attn;
  if (rules.library == "flash_attn") fa = version_literal(rules.first);
  replay::Call call = replay::call_from_batch(batch, fa);
  std::vector<std::string> pre_steps;
  std::optional<ReplayFailure> model_failure;
  std::vector<int64_t> unbuilt_mask_shape;
  int64_t unbuilt_gather_rows = 0;
  std::optional<ModelMaskPrep> model_mask;
  if (rules.library == "transformers") {
    // a model-level mask: the model's mask preparation of the rule set's releases first
    // (model_mask.cpp; from 4.53.0 masking_utils, and from 4.44.0 the model's position ids
    // reach the conversion)
    const Version first = version_literal(rules.first);
    const bool quirk_model = batch.model.architecture == "gemma2" || replay::is_qwen2vl_family(batch.model.architecture);
    // 5.13.0 changed masking_utils inside hf-5.4's range: the release decides where it is known
    const Version mask_release = release && !(*release < first) ? *release : first;
    const auto& model_mask_given = batch.batch->attention_mask;
    if (model_mask_given && model_mask_given->model_level && batch.batch->cache &&
        batch.batch->cache->kind == "static" && mask_release < version_literal("4.48.0")) {
      // up to 4.47 the model's FlashAttention2 class refuses a static cache before any
      // attention runs (models/llama/modeling_llama.py LlamaFlashAttention2.forward; the class is
      // gone in 4.48.0's attention interface): tests/golden/model-llama-4.43.4.json, 4.47.1.json
      model_failure = replay::raised("LlamaFlashAttention2.forward", "ValueError",
                                     "`static` cache implementation is not compatible with "
                                     "`attn_implementation==flash_attention_2` make sure to use `sdpa` in the mean "
                                     "time, and open an issue at https://github.com/huggingface/transformers");
      pre_steps.push_back("model: the model's FlashAttention2 forward raises on a static cache (up to 4.47)");
      model_mask = ModelMaskPrep{.where = "LlamaFlashAttention2.forward", .refused_static_cache = true};
      call.mask.reset();  // no attention call: nothing is converted
    } else if (model_mask_given && model_mask_given->model_level && batch.model.remote_code) {
      // the checkpoint's own modeling file: it hands the mask it received to its own
      // _get_unpad_data (the remote-code files axolotl patches, axolotl 0.18.0
      // monkeypatch/multipack.py); transformers' mask preparation is not on its path
      pre_steps.push_back("model: a remote-code modeling file (model.remote_code) hands the mask on as it received it; "
                          "transformers' mask preparation is not on its path");
    } else if (auto m = replay::model_mask_call(
            batch, call, first < version_literal("4.53.0") ? replay::MaskPrep::keep_if_zero : replay::MaskPrep::bool_cast,
            !quirk_model && !(first < version_literal("4.44.0")), !(mask_release < version_literal("5.13.0")))) {
      call = m->call;
      pre_steps = m->steps;
      model_mask = std::move(m->prep);
    }
    std::optional<replay::LayerCall> layer;
    if (!model_failure) layer = replay::gemma2_layer_call(batch, call, e.gemma2);
    if (!layer && !model_failure) layer = replay::qwen2vl_call(batch, call, e.qwen2vl);
    if (layer) {
      call = layer->call;
      pre_steps.insert(pre_steps.end(), layer->steps.begin(), layer->steps.end());
      model_failure = layer->failure;
      unbuilt_mask_shape = layer->unpad_mask_shape;
      unbuilt_gather_rows = layer->gather_rows_k;
    }
  }
  if (model_failure) {
    a.path = call.mask ? VarlenPath::mask : VarlenPath::dense;
    a.failure = model_failure;
    if (!unbuilt_mask_shape.empty()) {  // the unpad of a mask too large to build
      a.path = VarlenPath::mask;
      a.unpad_mask_shape = unbuilt_mask_shape;
      a.gather_rows_k = unbuilt_gather_rows;
    }
  } else if (rules.library != "transformers" && !call.mask) {
    a = replay::dense_call(call);
    a.steps.push_back(rules.library + " unpads only with an attention mask; the batch has none");
  } else {
    a = e.fn(call);
  }
  a.steps.insert(a.steps.begin(), pre_steps.begin(), pre_steps.end());
  a.library = rules.library;
  a.rule_set = rules.name;
  a.model_mask = std::move(model_mask);
  set_flash_attn_release(a.call, fa);
  if (rules.library == "transformers" && !a.failure) a.call.binding = transformers_binding(a.call.api);
  return a;
}

Conversion convert(const Batch& batch, const ConvertOptions& options) {
  Conversion c;
  if (batch.varlen) {
    c.explicit_args = explicit_varlen_args(batch);
    if (options.flash_attn) set_explicit_release(c.explicit_args->call, *batch.varlen, options.flash_attn);
  }
  if (!batch.batch) return c;
  std::optional<Version> release = options.transformers ? options.transformers : batch.environment.transformers;
  ResolvedRules resolved = resolve_transformers(release);
  // a copy only to override the flash-attn release (the batch may hold 2^26 elements)
  std::optional<Batch> overridden;
  if (options.flash_attn) {
    overridden = batch;
    overridden->environment.flash_attn = options.flash_attn;
  }
  const Batch& effective = overridden ? *overridden : batch;
  VarlenArgs a = replay_with(effective, *resolved.rules, release);
  a.requested = resolved.requested;
  if (!resolved.exact && resolved.known) a.nearest_release = resolved.known->release;
  a.note = resolved.note;
  if (!effective.environment.flash_attn) {
    std::string fa_note = "no flash_attn release named: flash-attn 2.6.3's unpad_input (four return values) assumed";
    a.note = a.note.empty() ? fa_note : a.note + "; " + fa_note;
  }
  c.replayed = std::move(a);
  c.layers = replay_layers(batch, c, options.transformers);
  return c;
}

}  // namespace ad
