// Hybrid models: the sequence boundaries each layer of the batch's `layers` receives
// (docs/spec/conversions.md, "Hybrid models").
//
// Attention layers receive what reached the flash-attn kernel (the replayed conversion or the
// explicit `varlen` block). GatedDeltaNet layers take theirs by their own rules:
//
// - FLA's layer (fla/layers/gated_deltanet.py, flash-linear-attention 0.2.2 - 0.6.0) reads
//   `cu_seqlens` from its kwargs. Up to 0.4.2 a 2-D attention mask, when present, replaces them
//   with get_unpad_data(attention_mask[:, -q_len:]): one sequence per row, the row's mask sum
//   long (fla-org/flash-linear-attention#838). From 0.5.0 the caller's cu_seqlens win and the
//   mask unpads only without them (0.6.0: fla/layers/utils.py unpad_hidden_states); 0.5.0 - 0.5.2
//   then repad with an unassigned `indices` when a mask is given too. Without
//   either, each row is one sequence; cu_seqlens with more than one row raises in
//   fla/ops/gated_delta_rule/chunk.py.
// - transformers' own layers (Qwen3-Next, Qwen3.5: modeling_qwen3_next.py, modeling_qwen3_5.py)
//   up to 5.8.0 pass seq_idx=None to causal_conv1d_fn and no cu_seqlens to the delta rule: each
//   row is one sequence. From 5.9.0 the conv takes the `seq_idx` model kwarg and the delta rule
//   the `cu_seq_lens_q` one (5.9.0, 5.24.0); position ids never reach these layers
//   (huggingface/transformers#46093). Without the fla package the delta rule is
//   torch_chunk_gated_delta_rule, which takes cu_seqlens into **kwargs and ignores it; without
//   causal-conv1d the conv is nn.Conv1d over the whole row (5.9 - 5.14: the layer then never
//   passes seq_idx; 5.15 - 5.19: the hub-kernel fallback takes it into **kwargs and ignores it).
//   From 5.20.0 that fallback refuses packed rows instead: integrations/hub_kernels.py
//   use_kernel_func_from_hub_with_fallback raises ValueError when cu_seqlens or seq_idx reach
//   the torch function. Recorded: tests/golden/hybrid-qwen3next-<release>.json.
// - AReaL's own Qwen3.5 layer (areal/experimental/models/archon/qwen3_5/model/model.py,
//   AReaL v1.0.2 - v2.0.0) takes the caller's `cu_seqlens` (`[0, T]` when none) for both: the
//   delta rule is FLA's chunk_gated_delta_rule(cu_seqlens=...), and the convolution
//   causal_conv1d_fn with a seq_idx built from cu_seqlens, or without causal-conv1d an
//   nn.Conv1d run on each slice [cu[i], cu[i+1]) of the row (when cu has more than two
//   entries). A slice of no columns (an empty segment: a repeated cu value, areal-project/AReaL#1103)
//   reaches torch's convolution with a zero-length input, which raises before any kernel
//   (aten/src/ATen/native/Convolution.cpp, _select_conv_backend; measured on CPU with torch
//   2.4.0, 2.6.0 and 2.11.0: tests/golden/conv1d-empty-segment.json). transformers' layers never
//   slice per segment (their fallback convolves the whole row), and FLA's convolution gives an
//   empty segment no chunk, so neither meets a zero-length convolution.
#include <algorithm>

#include "convert/convert.hpp"

namespace ad {

namespace {

const Version kFlaCallerWins = *parse_version("0.5.0");
const Version kFlaNewest = *parse_version("0.6.0");
const Version kHfLinearKwargs = *parse_version("5.9.0");
const Version kHfFallbackRefuses = *parse_version("5.20.0");
const Version kHfNewest = *parse_version("5.24.0");

struct Grid {
  int64_t rows = 0, width = 0;        // B, Lq
  const IntTensor* mask = nullptr;    // the 2-D mask (nullptr: none, or not 2-D)
  int64_t mask_offset = 0;            // its column of query 0 (mask width - Lq)
  int64_t tokens() const { return rows * width; }
};

// Segments [cu[k], cu[k+1]) of packed rows, placed at `flat(p)`; false when cu is not a readable
// 1-D non-decreasing vector starting at or above 0 (the cu_seqlens invariants report it).
template <class Flat>
bool label_from_cu(const std::vector<int64_t>& cu, int64_t packed_rows, Flat flat, std::vector<int32_t>& labels) {
  if (cu.size() < 2 || cu.front() < 0) return false;
  for (size_t i = 1; i < cu.size(); ++i)
    if (cu[i] < cu[i - 1]) return false;
  for (size_t k = 0; k + 1 < cu.size(); ++k) {
    const int64_t end = std::min(cu[k + 1], packed_rows);
    for (int64_t p = std::min(cu[k], packed_rows); p < end; ++p) {
      const int64_t f = flat(p);
      if (f >= 0 && f < static_cast<int64_t>(labels.size())) labels[static_cast<size_t>(f)] = static_cast<int32_t>(k);
    }
  }
  return true;
}

std::vector<int32_t> label_rows(const Grid& g) {
  std::vector<int32_t> labels(static_cast<size_t>(g.tokens()));
  for (int64_t t = 0; t < g.tokens(); ++t) labels[static_cast<size_t>(t)] = static_cast<int32_t>(t / g.width);
  return labels;
}

// 5.20.0 - 5.24.0 integrations/hub_kernels.py: the torch fallback of a hub kernel given
// cu_seqlens or seq_idx (message as the release formats it, measured on CPU)
ReplayFailure fallback_refuses(const std::string& function, const std::string& distribution) {
  return ReplayFailure{"transformers/integrations/hub_kernels.py use_kernel_func_from_hub_with_fallback", "ValueError",
                       "`" + function + "` can't keep packed sequences apart without `" + distribution + "`. Install `" +
                           distribution + "` to train on packed sequences.",
                       ""};
}

ReplayFailure batch_of_one_failure(int64_t rows) {
  return ReplayFailure{"fla/ops/gated_delta_rule/chunk.py chunk_gated_delta_rule", "ValueError",
                       "The batch size is expected to be 1 rather than " + std::to_string(rows) +
                           " when using `cu_seqlens`.Please flatten variable-length inputs before processing.",
                       ""};
}

// Boundaries from a cu_seqlens over the flat (B x Lq) tokens, which only a batch of one row
// may carry.
void from_flat_cu(LayerPart& part, const Grid& g, const std::vector<int64_t>& cu) {
  if (g.rows != 1) {
    part.failure = batch_of_one_failure(g.rows);
    return;
  }
  part.labels.assign(static_cast<size_t>(g.tokens()), -1);
  if (!label_from_cu(cu, g.tokens(), [](int64_t p) { return p; }, part.labels)) {
    part.labels.clear();
    part.note = "cu_seqlens not a non-decreasing vector from 0 or above: not read";
  }
}

LayerPart attention_part(const Batch& batch, const Conversion& conversion, const Grid& g) {
  LayerPart part{"attention", "varlen conversion", "", {}, std::nullopt, ""};
  const VarlenArgs* a = conversion.effective();
  if (!a) {
    part.note = "nothing reached the kernel";
    return part;
  }
  part.rule = a->rule_set;
  part.source = a->path == VarlenPath::explicit_varlen ? "varlen" : "varlen conversion (" + to_string(a->path) + ")";
  if (a->failure) {
    part.failure = a->failure;
    return part;
  }
  if (a->path == VarlenPath::dense) {
    part.labels = label_rows(g);
    return part;
  }
  part.labels.assign(static_cast<size_t>(g.tokens()), -1);
  bool ok = a->cu_seqlens_q.rank() == 1;
  if (ok && a->indices_q) {
    const auto& idx = a->indices_q->values;
    ok = label_from_cu(a->cu_seqlens_q.values, static_cast<int64_t>(idx.size()),
                       [&](int64_t p) { return idx[static_cast<size_t>(p)]; }, part.labels);
  } else if (ok) {
    ok = label_from_cu(a->cu_seqlens_q.values, g.tokens(), [](int64_t p) { return p; }, part.labels);
  }
  if (!ok) {
    part.labels.clear();
    part.note = "cu_seqlens_q not a non-decreasing 1-D vector from 0 or above: not read";
  }
  (void)batch;
  return part;
}

LayerPart fla_part(const Batch& batch, const Layer& layer, const Grid& g) {
  const Version release = batch.environment.fla ? *batch.environment.fla : kFlaNewest;
  const bool caller_wins = !(release < kFlaCallerWins);
  LayerPart part{"gated_deltanet", "none", "", {}, std::nullopt, ""};
  part.rule = std::string("fla ") + (caller_wins ? ">= 0.5.0" : "< 0.5.0") +
              " fla/layers/gated_deltanet.py (" + (caller_wins ? "0.5.0 - 0.6.0: caller's cu_seqlens first" : "0.2.2 - 0.4.2: the mask replaces cu_seqlens") + ")";
  if (!batch.environment.fla) part.note = "no fla release named: 0.6.0's rule assumed";
  const Mask* m = layer.attention_mask && batch.batch ? (batch.batch->attention_mask ? &*batch.batch->attention_mask : nullptr) : nullptr;
  if (m && m->tensor.rank() != 2) {
    part.source = "attention_mask";
    part.failure = ReplayFailure{"fla/layers/gated_deltanet.py GatedDeltaNet.forward", "AssertionError",
                                 "Expected attention_mask as a 0-1 matrix with shape [batch_size, seq_len] for padding purposes "
                                 "(0 indicating padding). Arbitrary attention masks of shape [batch_size, seq_len, seq_len] are not allowed.",
                                 ""};
    return part;
  }
  const bool mask_wins = m && (!caller_wins || !layer.cu_seqlens);
  if (mask_wins && !g.mask) {
    part.source = "attention_mask";
    part.note = "the mask is narrower than the query: not read";
    return part;
  }
  if (mask_wins) {
    // get_unpad_data(attention_mask[:, -q_len:]): lengths = the rows' sums, tokens = the nonzero entries
    part.source = layer.cu_seqlens ? "attention_mask (replaces the caller's cu_seqlens)" : "attention_mask";
    std::vector<int64_t> cu{0}, indices;
    for (int64_t r = 0; r < g.rows; ++r) {
      int64_t sum = 0;
      for (int64_t c = 0; c < g.width; ++c) {
        const int64_t v = g.mask->values[static_cast<size_t>(r * g.mask->dim(1) + g.mask_offset + c)];
        sum += v;
        if (v != 0) indices.push_back(r * g.width + c);
      }
      cu.push_back(cu.back() + sum);
    }
    part.labels.assign(static_cast<size_t>(g.tokens()), -1);
    if (!label_from_cu(cu, static_cast<int64_t>(indices.size()), [&](int64_t p) { return indices[static_cast<size_t>(p)]; }, part.labels)) {
      part.labels.clear();
      part.note = "the mask's row sums are not non-negative: not read";
    }
    return part;
  }
  if (layer.cu_seqlens) {
    part.source = "cu_seqlens";
    from_flat_cu(part, g, *layer.cu_seqlens);
    // 0.5.0 - 0.5.2 skip the unpadding for the caller's cu_seqlens but still repad whenever a
    // mask is given, with `indices` never assigned (fixed in 0.6.0: repad_hidden_states;
    // fla-org/flash-linear-attention PR#842, PR#1088)
    if (m && !part.failure && release < kFlaNewest)
      part.failure = ReplayFailure{"fla/layers/gated_deltanet.py GatedDeltaNet.forward > pad_input", "UnboundLocalError",
                                   "cannot access local variable 'indices' where it is not associated with a value", ""};
    return part;
  }
  part.labels = label_rows(g);
  return part;
}

std::vector<LayerPart> transformers_parts(const Batch& batch, const Layer& layer, const Grid& g,
                                          const std::optional<Version>& override) {
  std::optional<Version> named = override ? override : batch.environment.transformers;
  const Version release = named ? *named : kHfNewest;
  const std::string assumed = named ? "" : "no transformers release named: 5.24.0's layer assumed";
  LayerPart rule{"delta_rule", "none", "", {}, std::nullopt, assumed};
  LayerPart conv{"conv1d", "none", "", {}, std::nullopt, assumed};
  auto add_note = [](LayerPart& p, const std::string& n) { p.note = p.note.empty() ? n : p.note + "; " + n; };
  if (release < kHfLinearKwargs) {
    rule.rule = "transformers < 5.9.0 modeling_qwen3_next.py (5.0.0 - 5.8.0): chunk_gated_delta_rule without cu_seqlens";
    conv.rule = "transformers < 5.9.0 modeling_qwen3_next.py (5.0.0 - 5.8.0): causal_conv1d_fn(seq_idx=None)";
    rule.labels = label_rows(g);
    conv.labels = label_rows(g);
    return {rule, conv};
  }
  rule.rule = "transformers >= 5.9.0 modeling_qwen3_5.py, modeling_qwen3_next.py (5.9.0 - 5.24.0): cu_seqlens = kwargs cu_seq_lens_q";
  conv.rule = "transformers >= 5.9.0 modeling_qwen3_5.py, modeling_qwen3_next.py (5.9.0 - 5.24.0): causal_conv1d_fn(seq_idx = kwargs seq_idx)";
  const FlashKwargs* k = batch.batch && batch.batch->flash_kwargs ? &*batch.batch->flash_kwargs : nullptr;
  if (!batch.environment.fla && k && k->cu_seq_lens_q && !(release < kHfFallbackRefuses)) {
    rule.source = "flash_kwargs.cu_seq_lens_q";
    rule.failure = fallback_refuses("chunk_gated_delta_rule", "flash-linear-attention");
  } else if (!batch.environment.fla) {
    add_note(rule, "no fla release named: torch_chunk_gated_delta_rule, which ignores cu_seqlens");
    rule.labels = label_rows(g);
  } else if (k && k->cu_seq_lens_q) {
    rule.source = "flash_kwargs.cu_seq_lens_q";
    from_flat_cu(rule, g, *k->cu_seq_lens_q);
  } else {
    rule.labels = label_rows(g);
  }
  const IntTensor* s = batch.batch && batch.batch->seq_idx ? &*batch.batch->seq_idx : nullptr;
  if (!layer.causal_conv1d && s && !(release < kHfFallbackRefuses)) {
    conv.source = "seq_idx";
    conv.failure = fallback_refuses("causal_conv1d_fn", "causal_conv1d");
  } else if (!layer.causal_conv1d) {
    add_note(conv, "causal_conv1d false: nn.Conv1d over the whole row, seq_idx unused");
    conv.labels = label_rows(g);
  } else if (s) {
    // causal_conv1d_fn restarts its window where seq_idx changes within a row
    conv.source = "seq_idx";
    conv.labels.assign(static_cast<size_t>(g.tokens()), -1);
    int64_t next = -1;
    for (int64_t r = 0; r < g.rows; ++r) {
      const int64_t sr = std::min(r, s->dim(0) - 1);
      for (int64_t c = 0; c < g.width; ++c) {
        const int64_t v = s->values[static_cast<size_t>(sr * g.width + c)];
        if (c == 0 || v != s->values[static_cast<size_t>(sr * g.width + c - 1)]) ++next;
        conv.labels[static_cast<size_t>(r * g.width + c)] = static_cast<int32_t>(next);
      }
    }
  } else {
    conv.labels = label_rows(g);
  }
  if (conv.failure && rule.failure) {  // the layer runs its convolution first: the delta rule is never reached
    rule.failure.reset();
    add_note(rule, "not reached: the convolution raises first");
  }
  (void)layer;
  return {rule, conv};
}

// AReaL v1.0.2 - v2.0.0 areal/experimental/models/archon/qwen3_5/model/model.py
// GatedDeltaNet.forward: cu_seqlens indexes the row's columns (T), for every row.
std::vector<LayerPart> areal_parts(const Layer& layer, const Grid& g) {
  const std::string file = "AReaL v1.0.2 - v2.0.0 areal/experimental/models/archon/qwen3_5/model/model.py";
  const std::vector<int64_t> cu = layer.cu_seqlens ? *layer.cu_seqlens : std::vector<int64_t>{0, g.width};
  const std::string source = layer.cu_seqlens ? "cu_seqlens" : "none";
  LayerPart rule{"delta_rule", source, file + ": fla chunk_gated_delta_rule(cu_seqlens)", {}, std::nullopt, ""};
  LayerPart conv{"conv1d", source, "", {}, std::nullopt, ""};
  if (!layer.cu_seqlens) rule.note = conv.note = "no cu_seqlens: the layer synthesises [0, T], one sequence per row";
  from_flat_cu(rule, g, cu);
  // the columns [cu[k], cu[k+1]) of each row are one sequence (labels numbered in the order
  // met, so they stay below the token count)
  auto per_column = [&](LayerPart& p) {
    p.labels.assign(static_cast<size_t>(g.tokens()), -1);
    const auto within = [&](int64_t c) { return std::min(std::max<int64_t>(c, 0), g.width); };
    int32_t next = 0;
    for (int64_t r = 0; r < g.rows; ++r)
      for (size_t k = 0; k + 1 < cu.size(); ++k) {
        const int64_t from = within(cu[k]), to = within(cu[k + 1]);
        if (from >= to) continue;
        for (int64_t c = from; c < to; ++c) p.labels[static_cast<size_t>(r * g.width + c)] = next;
        ++next;
      }
  };
  bool readable = cu.size() >= 2 && cu.front() >= 0;
  for (size_t i = 1; readable && i < cu.size(); ++i) readable = cu[i] >= cu[i - 1];
  if (layer.causal_conv1d) {
    conv.rule = file + ": causal_conv1d_fn(seq_idx from cu_seqlens)";
    if (!readable) {
      conv.note = "cu_seqlens not a non-decreasing vector from 0 or above: not read";
      return {rule, conv};
    }
    per_column(conv);
    return {rule, conv};
  }
  conv.rule = file + ": nn.Conv1d on each cu_seqlens segment (causal-conv1d not installed)";
  if (cu.size() <= 2) {
    conv.labels = label_rows(g);
    return {rule, conv};
  }
  // mixed_qkv[:, :, s:e] for each segment: a slice of no columns is a zero-length convolution input
  for (size_t k = 0; k + 1 < cu.size(); ++k) {
    if (cu[k] < 0 || cu[k + 1] < 0) break;  // negative offsets: the cu_seqlens invariants say why
    const int64_t columns = std::max<int64_t>(0, std::min(cu[k + 1], g.width) - std::min(cu[k], g.width));
    if (columns > 0) continue;
    conv.failure = ReplayFailure{
        file + " GatedDeltaNet.forward > nn.Conv1d on segment " + std::to_string(k) + " [" + std::to_string(cu[k]) +
            ", " + std::to_string(cu[k + 1]) + ") (torch aten/src/ATen/native/Convolution.cpp _select_conv_backend)",
        "RuntimeError",
        "Only zero batch or zero channel inputs are supported, but got input shape: [" + std::to_string(g.rows) +
            ", conv_dim, 1, 0]",
        ""};
    rule.failure.reset();
    rule.note = rule.note.empty() ? "not reached: the convolution raises first" : rule.note + "; not reached: the convolution raises first";
    return {rule, conv};
  }
  if (readable) per_column(conv);
  else conv.note = "cu_seqlens not a non-decreasing vector from 0 or above: not read";
  if (readable && cu.back() != g.width)
    conv.note = "cu_seqlens[-1] is " + std::to_string(cu.back()) + ", not the row's " + std::to_string(g.width) +
                " columns: the concatenated segments do not fill the row (what the layer then does is not modelled)";
  return {rule, conv};
}

}  // namespace

std::vector<LayerView> replay_layers(const Batch& batch, const Conversion& conversion,
                                     const std::optional<Version>& transformers_override) {
  std::vector<LayerView> out;
  if (batch.layers.empty() || !batch.batch) return out;
  Grid g;
  g.rows = batch.batch->batch_size;
  g.width = batch.batch->query_length;
  const bool too_many = g.rows > batch.max_array_elements / std::max<int64_t>(1, g.width);
  if (const auto& m = batch.batch->attention_mask; m && m->tensor.rank() == 2 && m->tensor.dim(0) == g.rows &&
                                                  m->tensor.dim(1) >= g.width) {
    g.mask = &m->tensor;
    g.mask_offset = m->tensor.dim(1) - g.width;
  }
  // every part holds one label per token: all of them together stay within the batch's own
  // element cap for all its arrays (2 x max_array_elements, docs/limits.md)
  int64_t budget = 2 * batch.max_array_elements;
  for (size_t i = 0; i < batch.layers.size(); ++i) {
    const Layer& l = batch.layers[i];
    LayerView v{i, l.kind, l.implementation, l.count, {}};
    const int64_t parts = l.kind == "gated_deltanet" && l.implementation != "fla" ? 2 : 1;
    if (too_many || budget < parts * g.tokens()) {
      v.parts.push_back(LayerPart{l.kind, "", "", {}, std::nullopt,
                                  too_many ? "B x Lq past the element cap: not replayed"
                                           : "the layers' labels would pass 2^26 elements: not replayed"});
    } else if (l.kind == "attention") {
      v.parts.push_back(attention_part(batch, conversion, g));
    } else if (l.implementation == "fla") {
      v.parts.push_back(fla_part(batch, l, g));
    } else if (l.implementation == "areal") {
      v.parts = areal_parts(l, g);
    } else {
      v.parts = transformers_parts(batch, l, g, transformers_override);
    }
    if (!too_many && budget >= parts * g.tokens()) budget -= parts * g.tokens();
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace ad
