// The rule sets: one function per replayed behaviour, each in its own file (hf_4_44_0.cpp ...),
// registered in registry.cpp. A rule set receives the call as it reached the release's entry
// point and returns what the release handed to flash-attn, or the failure it raised.
#pragma once

#include "convert/replay.hpp"

namespace ad::replay {

using RuleFn = VarlenArgs (*)(const Call&);

VarlenArgs hf_4_34(const Call& c);    // 4.34 - 4.42: per-model copies (LlamaFlashAttention2)
VarlenArgs hf_4_43(const Call& c);    // 4.43: modeling_flash_attention_utils.py
VarlenArgs hf_4_44_0(const Call& c);  // 4.44.0: packed path from position ids
VarlenArgs hf_4_44_1(const Call& c);  // 4.44.1 - 4.46: packing detected by a decreasing position
VarlenArgs hf_4_47(const Call& c);    // 4.47 - 4.48: cu_seq_lens / max_length kwargs (with position ids)
VarlenArgs hf_4_49(const Call& c);    // 4.49 - 4.52: unpad_input's fifth value tolerated
VarlenArgs hf_4_53_0(const Call& c);  // 4.53.0: packed path only for B == 1; keys cut to the mask
VarlenArgs hf_4_53_1(const Call& c);  // 4.53.1 - 4.53.x: the four kwargs alone select varlen
VarlenArgs hf_4_54(const Call& c);    // 4.54 - 4.55.0: any position ids select varlen; host-int max
VarlenArgs hf_4_55(const Call& c);    // 4.55.1 - 4.55.x: _is_packed_sequence
VarlenArgs hf_4_56(const Call& c);    // 4.56 - 5.3: window (W-1, W-1)
VarlenArgs hf_5_4(const Call& c);     // 5.4 - 5.13: max_seqlen a 0-d tensor again, None max dropped
VarlenArgs hf_5_14(const Call& c);    // 5.14: the mask path's max a host int again
VarlenArgs hf_5_16(const Call& c);    // 5.15 - 5.18: boundaries at position_ids.min()
VarlenArgs hf_5_20(const Call& c);    // 5.19 -: packing checked last, decode excluded

VarlenArgs fa_unpad_input(const Call& c);  // flash-attn bert_padding.unpad_input (4 or 5 values)
VarlenArgs fla_attn(const Call& c);        // FLA attention layer: fla/layers/utils.py unpad_input

// Shared pieces of the transformers rule sets.
// The explicit kwargs route: q/k/v reshaped to (B*L) rows, the kwargs passed as given.
VarlenArgs kwargs_path(const Call& c);
// position_ids[:, -1] == S - 1 for every row (4.44.0's "one sequence per row" test); throws the
// release's IndexError for rank-1 ids through `failure`.
bool every_row_ends_at_last_position(const IntTensor& pos, std::optional<ReplayFailure>& failure);
// every step along the last axis is >= 0 (torch.diff(position_ids, dim=-1) >= 0).all()
bool non_decreasing(const IntTensor& pos);
bool all_kwargs(const Call& c);
// The attention mask if there is one (`_upad_input` with the release's options), else flash_attn_func.
VarlenArgs mask_or_dense(const Call& c, const UpadOptions& o);
// 4.47 - 4.53.0: the position-ids route (needs position ids; max_length_q or decreasing ids, Lq != 1)
// and what it builds (given cu_seq_lens as they are, else the packed path).
bool posids_route_taken_4_47(const Call& c);
VarlenArgs posids_route_4_47(const Call& c);
// 4.47 - 4.52: everything but the unpack of unpad_input's result (4 values up to 4.48).
VarlenArgs forward_4_47(const Call& c, bool unpack_four);
// >= 4.53: keys cut to the mask, `_index_first_axis` (IndexError).
UpadOptions upad_options_4_53();
// The forward of 4.56 and later (hf_late.cpp), by its options.
struct Late {
  Boundary boundary = Boundary::zero;
  MaxRule max_rule = MaxRule::diff_item;
  bool lazy_guarded_packing = false;  // 5.19 -: packing checked last, never for B != 1 or one-token ids
  bool unpad_max_tensor = false;      // 5.4 - 5.13: _get_unpad_data's max a 0-d int32 tensor
  bool none_max_dropped = false;      // 5.4: max_length None not passed (TypeError in flash-attn)
};
VarlenArgs late_forward(const Call& c, const Late& v);
// `_is_packed_sequence` of 4.55 - 5.18 (with `guard_single_token`: of 5.19 -).
bool is_packed_sequence(const Call& c, bool guard_single_token, std::optional<ReplayFailure>& failure);

// Model-level behaviour of Gemma-2's sliding-window layers (model.architecture "gemma2"): the
// call the first sliding-window layer makes, per era of the model code.
enum class Gemma2Era { absent, v4_42, v4_43, v4_44_0, v4_44_1, v4_47, v4_48_0, v4_48, v4_52, v4_53, v4_54 };
struct LayerCall {
  Call call;
  std::optional<ReplayFailure> failure;  // the model fails before the conversion
  std::vector<std::string> steps;
  // a mask the release unpads but the replay did not build (past the element cap): its shape
  // and the key rows the gather reads, for the failure's report
  std::vector<int64_t> unpad_mask_shape;
  int64_t gather_rows_k = 0;
};
// nullopt: the batch is not a Gemma-2 model-level description (no cache, no window, no 2-D mask)
std::optional<LayerCall> gemma2_layer_call(const Batch& batch, const Call& c, Gemma2Era era);

// The model's preparation of a model-level 2-D mask (`attention_mask.level: "model"`) for
// flash_attention_2, per era of the decoder models' mask code (model_mask.cpp):
//  keep_if_zero  <= 4.52: `_update_causal_mask` hands the mask on unchanged when it holds a 0,
//                else None
//  bool_cast     >= 4.53: masking_utils casts it to bool, keeps the last kv_length columns and
//                hands on None when every entry is True (`keep_narrow`, from 5.13.0: only when
//                the mask is as wide as the keys; a narrower one, a static cache's, is kept)
enum class MaskPrep { keep_if_zero, bool_cast };
struct ModelMaskCall {
  Call call;
  ModelMaskPrep prep;
  std::vector<std::string> steps;
};
// nullopt: the batch has no model-level mask. `position_ids_passed`: the model hands its default
// position ids (cache_position[None]) to the attention when the batch gives none.
std::optional<ModelMaskCall> model_mask_call(const Batch& batch, const Call& c, MaskPrep prep,
                                             bool position_ids_passed, bool keep_narrow = false);

// Which position ids Qwen2-VL (model.architecture "qwen2_vl", and "qwen2_5_vl": the same text
// model) hands to the conversion.
enum class Qwen2VLEra { absent, none, text_axis, four_axis };
bool is_qwen2vl_family(std::string_view architecture);
std::optional<LayerCall> qwen2vl_call(const Batch& batch, const Call& c, Qwen2VLEra era);

}  // namespace ad::replay
