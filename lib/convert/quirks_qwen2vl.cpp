// Qwen2-VL (model.architecture "qwen2_vl", and "qwen2_5_vl", whose text model is the same code
// from its first release, 4.49.0): which position ids the model hands to
// `_flash_attention_forward` for text-only input, per era. Applies when the batch's position
// ids are the model's input (`"level": "model"`: (B, S) text ids or (3, B, S) mRoPE ids) or
// when it gives none; ids at the contract's default level are what reached the attention
// function (what `attn_doctor.capture` records) and are replayed as given. Observed in
// tests/golden/qwen2vl-forward-<release>.json (a tiny random Qwen2-VL, forward on the real
// releases; batches 060-062):
//
//  4.45 - 4.53   none: the attention layer does not pass position ids, so packed rows without a
//                mask run dense over the packed tokens (silent cross-contamination).
//  4.54 - 4.56   the text axis: position_ids[0] of the (3, B, S) ids (2-D input is expanded to
//                3-D first), so packing is detected on plain (B, S) ids.
//  4.57 -        only when the input carries a text axis in front of the three mRoPE axes
//                ((4, B, S) ids); (B, S) and (3, B, S) input again passes none.
//
// The function-level goldens show what 3-D ids do when they do reach the conversion
// (batches 035-037: cu = [0, S, 2S, 3S]); no Qwen2-VL release recorded here passes them.
#include "convert/rules.hpp"

namespace ad::replay {

bool is_qwen2vl_family(std::string_view architecture) {
  return architecture == "qwen2_vl" || architecture == "qwen2_5_vl";
}

std::optional<LayerCall> qwen2vl_call(const Batch& batch, const Call& c, Qwen2VLEra era) {
  if (!is_qwen2vl_family(batch.model.architecture)) return std::nullopt;
  if (batch.batch && batch.batch->position_ids && !batch.batch->position_ids->model_level) return std::nullopt;
  LayerCall l;
  l.call = c;
  const std::string arch = batch.model.architecture;
  auto note = [&](std::string s) { l.steps.push_back(arch + ": " + std::move(s)); };
  // Qwen2.5-VL first ships in 4.49.0; its text model hands position ids on as Qwen2-VL's does
  // in every release since (modeling_qwen2_5_vl.py and modeling_qwen2_vl.py, 4.49 - 5.x)
  if (arch == "qwen2_5_vl" && batch.environment.transformers &&
      *batch.environment.transformers < version_literal("4.49.0"))
    era = Qwen2VLEra::absent;
  switch (era) {
    case Qwen2VLEra::absent:
      note(std::string(arch == "qwen2_vl" ? "Qwen2-VL" : "Qwen2.5-VL") +
           " is not part of this release; the batch is replayed as given");
      return l;
    case Qwen2VLEra::none:
      if (c.position_ids) note("the attention layer passes no position ids to the conversion");
      l.call.position_ids.reset();
      return l;
    case Qwen2VLEra::four_axis:
      if (c.position_ids)
        note("position ids reach the conversion only as the text axis of (4, B, S) ids; (B, S) and (3, B, S) "
             "input passes none");
      l.call.position_ids.reset();
      return l;
    case Qwen2VLEra::text_axis: {
      if (!c.position_ids) {
        // the model's rope index; for text its every axis is cumsum(mask) - 1 (padding 1), or arange
        std::vector<int64_t> ids;
        const int64_t B = c.batch, S = c.mask && c.mask->rank() == 2 ? c.mask->dim(1) : c.query_length;
        for (int64_t b = 0; b < B; ++b) {
          int64_t acc = 0;
          for (int64_t s = 0; s < S; ++s) {
            bool on = !c.mask || c.mask->values[static_cast<size_t>(b * S + s)] != 0;
            acc += on;
            ids.push_back(on ? acc - 1 : 1);
          }
        }
        l.call.position_ids = int_tensor(ids, DType::int64, {B, S});
        note("position ids from the model's rope index (text axis)");
        return l;
      }
      const IntTensor& pos = *c.position_ids;
      if (pos.rank() == 3) {
        const int64_t per_axis = pos.dim(1) * pos.dim(2);
        l.call.position_ids = int_tensor(std::vector<int64_t>(pos.values.begin(), pos.values.begin() + per_axis),
                                         pos.dtype, {pos.dim(1), pos.dim(2)});
        note("the text axis position_ids[0] reaches the conversion");
      }
      return l;
    }
  }
  return l;
}

}  // namespace ad::replay
