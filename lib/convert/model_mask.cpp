// The model's mask preparation: what a decoder model (Llama and the models sharing its mask
// code) hands to the attention function when the batch's mask is the one given to the model's
// forward (`attention_mask.level: "model"`). Read from the releases' code and observed in
// tests/golden/model-llama-<release>.json (a tiny random Llama forward on the real releases,
// batches 070-075):
//
//  <= 4.52   models/llama/modeling_llama.py LlamaModel._update_causal_mask, flash_attention_2
//            branch: the 2-D mask is handed on unchanged when it holds a 0 (`0.0 in
//            attention_mask` in 4.43.4, `(attention_mask == 0.0).any()` in 4.52.4), else None.
//            Segment ids therefore reach `_get_unpad_data` as they are (mask.binary).
//  >= 4.53   masking_utils.py: `_preprocess_mask_arguments` casts a 2-D mask to bool
//            (`attention_mask.to(device=..., dtype=torch.bool)`), `flash_attention_mask` keeps
//            its last kv_length columns and hands on None when every entry is True. Segment ids
//            all become True: the packed sequences of a row merge into one (mask.cast_to_bool).
//            From 5.13.0 it hands on None only when the mask is as wide as the keys: an all-True
//            mask narrower than them (a static cache's slots past the tokens) is kept, and
//            `_upad_input` cuts the keys to its width (5.13.1; model-llama-5.13.1.json,
//            scenario static_cache_all_ones). From 4.48 up to 5.12 it is dropped and the dense
//            call reads every slot (huggingface/transformers PR#46914; mask.static_cache_slots).
//            Up to 4.47 the model's FlashAttention2 class raises on a static cache instead
//            (registry.cpp; model-llama-4.47.1.json).
//
// When the batch gives no position ids, the model's own (`cache_position.unsqueeze(0)`, shape
// (1, Lq)) reach the attention function in the releases whose conversion takes them.
#include "convert/rules.hpp"

namespace ad::replay {

std::optional<ModelMaskCall> model_mask_call(const Batch& batch, const Call& c, MaskPrep prep,
                                             bool position_ids_passed, bool keep_narrow) {
  if (!batch.batch || !batch.batch->attention_mask || !batch.batch->attention_mask->model_level || !c.mask)
    return std::nullopt;
  const Mask& given = *batch.batch->attention_mask;
  ModelMaskCall out;
  out.call = c;
  ModelMaskPrep& p = out.prep;
  const MaskTensor& m = *c.mask;
  const int64_t B = m.dim(0), W = m.dim(1);
  bool has_zero = false;
  for (size_t i = 0; i < m.values.size(); ++i) {
    const int64_t v = m.values[i];
    if (v == 0) has_zero = true;
    if (v != 0 && v != 1 && !p.had_segment_ids) {
      p.had_segment_ids = true;
      p.first_segment_row = static_cast<int64_t>(i) / W;
      p.first_segment_column = static_cast<int64_t>(i) % W;
      p.first_segment_value = v;
    }
  }
  auto note = [&](std::string s) { out.steps.push_back("model: " + std::move(s)); };
  Mask handed = given;
  handed.model_level = false;
  switch (prep) {
    case MaskPrep::keep_if_zero:
      p.where = "LlamaModel._update_causal_mask";
      if (!has_zero) {
        p.dropped = true;
        p.why_dropped = "no 0 in the mask";
        note("_update_causal_mask hands on no mask: the mask holds no 0 (flash_attention_2)");
      } else {
        note("_update_causal_mask hands the 2-D mask on unchanged (it holds a 0)");
      }
      break;
    case MaskPrep::bool_cast: {
      p.where = "masking_utils._preprocess_mask_arguments";
      p.cast_to_bool = true;
      // keep the last kv_length columns: mask[:, -kv_length:]
      const int64_t keep = c.kv_length > 0 && c.kv_length < W ? c.kv_length : W;
      IntTensor t;
      t.shape = {B, keep};
      t.dtype = DType::boolean;
      t.values.reserve(static_cast<size_t>(B * keep));
      bool all = true;
      for (int64_t r = 0; r < B; ++r)
        for (int64_t col = W - keep; col < W; ++col) {
          const bool on = m.values[static_cast<size_t>(r * W + col)] != 0;
          all = all && on;
          t.values.push_back(on ? 1 : 0);
        }
      note(std::string("create_causal_mask casts the 2-D mask to bool") +
           (p.had_segment_ids ? " (its segment ids all become True)" : "") +
           (keep < W ? " and keeps its last " + std::to_string(keep) + " columns" : ""));
      if (all && keep_narrow && keep < c.kv_length) {
        note("flash_attention_mask keeps the all-True mask: its " + std::to_string(keep) + " columns are fewer than the " +
             std::to_string(c.kv_length) + " keys (from 5.13.0)");
      } else if (all) {
        p.dropped = true;
        p.why_dropped = "every entry attended after the cast";
        note("flash_attention_mask hands on no mask: every entry is True");
        break;
      }
      handed.tensor = std::move(t);
      break;
    }
  }
  p.mask_width = W;
  p.keys = c.kv_length;
  p.dropped_narrower = p.dropped && c.kv_length > W;
  if (p.dropped) {
    out.call.mask.reset();
  } else {
    out.call.mask = mask_tensor(handed);
    p.handed_on = std::move(handed);
  }
  if (position_ids_passed && !out.call.position_ids) {
    // the tokens already cached: the cache's past_length where the batch gives one (a static
    // cache holds more slots than tokens), else the keys beyond the queries
    const auto& cache = batch.batch->cache;
    const int64_t past = cache && cache->past_length ? *cache->past_length
                         : c.kv_length > c.query_length ? c.kv_length - c.query_length
                                                        : 0;
    std::vector<int64_t> ids;
    ids.reserve(static_cast<size_t>(c.query_length));
    for (int64_t i = 0; i < c.query_length; ++i) ids.push_back(past + i);
    out.call.position_ids = int_tensor(std::move(ids), DType::int64, {1, c.query_length});
    note("the model's position ids cache_position[None] (1, " + std::to_string(c.query_length) +
         ") reach the attention");
  }
  return out;
}

}  // namespace ad::replay
