// The invariant catalogue: one table, in the order that decides "first"
// (docs/spec/invariants.md). Statements and "when broken" follow the spec; explanations,
// fixes and references come from the public reports listed in docs/spec/references.md.
#include <algorithm>
#include <stdexcept>

#include "batch/json_node.hpp"
#include "check/check.hpp"
#include "check/cu_seqlens_ignored_text.hpp"
#include "check/static_checks.hpp"

namespace ad {

std::string to_string(InvariantGroup g) {
  switch (g) {
    case InvariantGroup::input: return "input";
    case InvariantGroup::conversion: return "conversion";
    case InvariantGroup::rotary: return "rotary";
    case InvariantGroup::dynamic: return "dynamic";
    case InvariantGroup::launch: return "launch";
  }
  return "?";
}

namespace {

using G = InvariantGroup;

// Texts: `statement` and `when_broken` follow the spec's table; `explanation`, `fix` and
// `references` come from the public reports in docs/spec/references.md and from the upstream
// source each check reproduces (cited in the check's own file). Dynamic invariants (33-39) are
// observed by the execution backends; their entries here only name them.
// The upstream messages of flash-attn's host checks are flash-attn 2's (vocab/host_checks.cpp);
// a violation names its own release's (checks_input.cpp, checks_cu_seqlens.cpp).
// 61's texts: HunyuanVideo's, then axolotl's (check/cu_seqlens_ignored_text.hpp).
const checks::FrameworkText& cu_seqlens_ignored_joined() {
  static const std::string explanation = std::string(checks::hunyuanvideo_cu_seqlens_text().explanation) + " " +
                                         std::string(checks::axolotl_cu_seqlens_text().explanation);
  static const std::string fix = "HunyuanVideo: " + std::string(checks::hunyuanvideo_cu_seqlens_text().fix) +
                                 " axolotl: " + std::string(checks::axolotl_cu_seqlens_text().fix);
  static const checks::FrameworkText t = [] {
    checks::FrameworkText j{explanation, fix, checks::hunyuanvideo_cu_seqlens_text().references};
    for (auto r : checks::axolotl_cu_seqlens_text().references) j.references.push_back(r);
    return j;
  }();
  return t;
}

const std::vector<Invariant>& table() {
  static const std::vector<Invariant> t = {
      // ---- static: inputs ---------------------------------------------------------------
      {.number = 1, .id = "input.dtype", .group = G::input, .stage = "input",
       .severity_rule = "error (the host check raises)",
       .statement = "q/k/v share one dtype the kernel supports (fp16/bf16; fp8 only on FA3, and FA4 from 4.0.0b10)",
       .when_broken = "raises \"only support fp16 and bf16\"",
       .explanation =
           "flash-attn checks q's dtype on the host before anything runs: FA1 and FA2 accept fp16 and bf16 only, FA3 "
           "adds fp8_e4m3, FA4 adds fp8 from 4.0.0b10. k and v must then have q's dtype (\"query and key must have "
           "the same dtype\"). An fp32 model, or a tensor left in fp32 after an upcast, fails here.",
       .fix = "Cast q, k and v to one supported dtype (the model's torch_dtype or the autocast dtype) before the call; "
              "use FA3 on Hopper for fp8.",
       .references = {"Dao-AILab/flash-attention v2.6.3 csrc/flash_attn/flash_api.cpp (mha_varlen_fwd dtype checks)",
                      "Dao-AILab/flash-attention v2.8.3 hopper/flash_api.cpp (FA3: fp8_e4m3)"},
       .upstream_message = fa2_host_checks().message(HostCheck::q_dtype),
       .check = checks::input_dtype},
      {.number = 2, .id = "input.head_dim", .group = G::input, .stage = "input",
       .severity_rule = "error past the release's limit, or unaligned where the release rejects it (FA1, FA3, FA4); "
                        "warning where FA2 pads an unaligned head dim silently",
       .statement = "head_dim within the release's limits (<= 256; a head dim that is not a multiple of 8 is padded "
                    "by FA2, in C++ before 2.7 and in Python from 2.7, and rejected by FA1/FA3/FA4)",
       .when_broken = "raises, or pads silently",
       .explanation =
           "FA2 and later support head dims up to 256 (FA1: 128). FA2 pads a head dim that is not a multiple of 8 "
           "with zeros: inside mha_varlen_fwd up to 2.6, in flash_attn_interface.py from 2.7.0 (the C++ op then "
           "requires a multiple of 8). The call works but copies q, k, v and out every time, and before 2.7 the "
           "single-query GQA path is off. FA1, FA3 and FA4 reject an unaligned head dim (16 for fp8 on FA3/FA4).",
       .fix = "Use a head dim the release supports (<= 256, a multiple of 8), or run such models with sdpa/eager "
              "attention; upgrade from FA1 for head dims above 128.",
       .references = {"Dao-AILab/flash-attention v2.6.3 csrc/flash_attn/flash_api.cpp (pads head_size_og % 8 in C++)",
                      "Dao-AILab/flash-attention v2.7.0 flash_attn/flash_attn_interface.py (pads in Python)"},
       .upstream_message = fa2_host_checks().message(HostCheck::head_dim_max),
       .check = checks::input_head_dim},
      {.number = 3, .id = "input.gqa", .group = G::input, .stage = "input",
       .severity_rule = "error (the host check raises)",
       .statement = "num_heads % num_kv_heads == 0",
       .when_broken = "raises",
       .explanation =
           "Grouped-query attention maps query head h to kv head h / (H / Hk), so H must be a multiple of Hk and the "
           "host check raises otherwise. FA1 has no multi-query or grouped-query attention: k and v must carry "
           "num_heads heads. A wrong num_key_value_heads in a config, or k/v repeated for another group size, shows up "
           "here.",
       .fix = "Pass num_kv_heads dividing num_heads (check the config's num_key_value_heads); on FA1 repeat k/v to "
              "num_heads heads or upgrade to FA2.",
       .references = {"Dao-AILab/flash-attention v2.0.0 csrc/flash_attn/flash_api.cpp (GQA check)",
                      "Dao-AILab/flash-attention v1.0.9 csrc/flash_attn/fmha_api.cpp (k/v take num_heads)"},
       .upstream_message = fa2_host_checks().message(HostCheck::heads_divide),
       .check = checks::input_gqa},
      {.number = 4, .id = "input.feature", .group = G::input, .stage = "input",
       .severity_rule = "error when the call raises or its output changes (softcap missing, softcap with dropout, a "
                        "missing window the batch's key ranges exceed); warning when a missing window does not matter "
                        "for this batch, or FA3/FA4 drop dropout",
       .statement = "every requested feature exists in the release (softcap >= 2.6.0, window >= 2.3.0) and "
                    "combinations are allowed (no softcap with dropout)",
       .when_broken = "raises, or transformers silently drops the feature",
       .explanation =
           "window_size exists from flash-attn 2.3.0: transformers checks flash_attn_func's signature and on older "
           "releases silently runs full attention instead of the sliding window. softcap exists from 2.6.0: "
           "transformers <= 4.54 passes it anyway (TypeError), 4.55 - 5.17 drop it silently (uncapped logits), 5.23 "
           "raises. Every FA2 release with softcap rejects it together with dropout. FA3 and FA4 have no dropout "
           "argument.",
       .fix = "Upgrade flash-attn to a release with the feature (>= 2.3.0 for sliding windows, >= 2.6.0 for softcap) "
              "or run the model with eager/sdpa attention; set attention dropout to 0 with softcap.",
       .references = {"huggingface/transformers modeling_flash_attention_utils.py (_flash_supports_window_size; "
                      "softcap kwarg 4.42 - 5.23)",
                      "Dao-AILab/flash-attention v2.3.0 (window_size), v2.6.0 (softcap) csrc/flash_attn/flash_api.cpp"},
       .upstream_message = "flash_attn_varlen_func() got an unexpected keyword argument 'softcap'",
       .check = checks::input_feature},
      {.number = 5, .id = "input.int32_range", .group = G::input, .stage = "input",
       .severity_rule = "error where the batch's pass breaks: the dense kernel or an LSE past 2^31 elements (forward), "
                        "the backward's 32-bit dq_accum offsets (\"pass\": \"training\"); warning where only a training "
                        "step would break, or the tensors pass 2^31 on 64-bit paths (FA2's varlen forward, FA3, FA4)",
       .statement = "every offset a kernel of the call computes in 32 bits stays below 2^31, counted over the tensors "
                    "that reach the kernel (the packed q/k/v/out on the varlen routes, the padded ones on the dense "
                    "route)",
       .when_broken = "dense kernel: illegal memory access; varlen backward: silently wrong dq for late segments "
                      "(illegal memory access before 2.8.0 for long or many segments); varlen forward: right",
       .explanation =
           "FA2's varlen forward reaches q, k, v and out through 64-bit strides (flash.h index_t), so a packed q past "
           "2^31 elements is computed right (measured on an H100 at 1.19 x 2^31). Its backward offsets the fp32 dq "
           "accumulator by cu_seqlens_q[b] x H x d_rounded in 32 bits (block_info.h q_offset with int strides): the "
           "segments that start past row 2^31 / (H x d_rounded) get a silently wrong dq, in every 2.x release up to "
           "2.8.3 (fixed on main by flash-attention PR#2260). Before 2.8.0 the tile term (m_block x kBlockM + 128 x b) x "
           "H x d_rounded was an int product too, an illegal memory access for long or many segments (PR#1500). The "
           "dense kernel on tensors past 2^31 elements faults (flash-attention#767). On the unpad route the padded "
           "(B, L) tensors only meet PyTorch's gather, which indexes in 64 bits. FA3 uses 64-bit offsets.",
       .fix = "Split the call so every segment starts below row 2^31 / (H x d_rounded) for training (fewer tokens per "
              "call, fewer heads per tensor-parallel rank), upgrade to flash-attn >= 2.8.0, or use FA3 on Hopper.",
       .references = {"Dao-AILab/flash-attention#767", "Dao-AILab/flash-attention PR#1500",
                      "Dao-AILab/flash-attention PR#2260",
                      "Dao-AILab/flash-attention v2.6.3 csrc/flash_attn/src/flash_bwd_kernel.h (row_offset_dq_accum)"},
       .upstream_message = "an illegal memory access was encountered",
       .check = checks::input_int32_range},

      // 46: numbered after the first revision's 44, placed with the inputs the kernel takes
      {.number = 46, .id = "input.softcap", .group = G::input, .stage = "input",
       .severity_rule = "error",
       .statement = "softcap is 0 (off) or at least the smallest normal float32 (1.1754944e-38)",
       .when_broken = "silently no softcap (rounds to 0), or uniform attention (softmax_scale / softcap overflows)",
       .explanation =
           "flash-attn's C++ op takes softcap as a float32, and set_params_fprop applies it as tanh(s x softmax_scale "
           "/ softcap) x softcap. A softcap below the smallest normal float32 either rounds to 0, and the kernel "
           "runs without a cap (softcap > 0 is false), or makes softmax_scale / softcap overflow to inf: every score "
           "becomes +-1 times a subnormal, so attention is uniform over the keys (NaN where a score is exactly 0). "
           "Neither is what the model computes in fp64 or fp32 on the host. The rule is reasoned from the source, "
           "not measured on a GPU.",
       .fix = "Pass the model's real softcap (Gemma-2: 50.0 for attention logits), or 0 / None to turn it off.",
       .references = {"Dao-AILab/flash-attention v2.6.3 csrc/flash_attn/flash_api.cpp (set_params_fprop: "
                      "params.softcap = softmax_scale / softcap)",
                      "Dao-AILab/flash-attention v2.6.3 csrc/flash_attn/src/softmax.h (apply_softcap)"},
       .upstream_message = "",
       .check = checks::input_softcap},

      // ---- static: conversion (mask / position ids -> varlen arguments) --------------------
      {.number = 6, .id = "mask.rank", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error",
       .statement = "the mask reaching the unpad path is 2-D (B, S)",
       .when_broken = "4-D mask: indices enumerate mask entries, cu_seqlens gets rank 3 -> \"index out of bounds\" "
                      "gather assert or \"cu_seqlens_q must have shape (batch_size + 1)\"; 1-D mask: \"Padding "
                      "length should be less than or equal to two times the input dimension\" before any kernel",
       .explanation =
           "_get_unpad_data sums the mask over its last axis and flattens it. On a 1-D (S,) mask the lengths are a "
           "0-d tensor: its cumsum stays 0-d and F.pad(cumsum, (1, 0)) raises a RuntimeError in every transformers "
           "release (and in flash-attn's unpad_input), before cu_seqlens exists. On a 4-D (B, 1, Q, K) mask (generate's "
           "static-cache mask; Gemma-2 on transformers 4.44.0) lengths get shape (B, 1, Q), cu_seqlens (B, 1, Q + 1), "
           "and nonzero() enumerates mask entries rather than tokens (for an additive mask: the masked ones). The key "
           "gather in _upad_input faults with a device-side \"index out of bounds\" assert as soon as an index passes "
           "B x Lk; when none does, flash-attn rejects the rank-3 cu_seqlens.",
       .fix = "Hand the flash-attention path the 2-D (B, S) padding mask, not the 4-D causal mask (upgrade to "
              "transformers >= 4.44.1 for Gemma-2, or pass generate a 2-D mask: the reported workaround) nor a 1-D "
              "one (mask[None] for a single sequence).",
       .references = {"Dao-AILab/flash-attention#1156", "huggingface/transformers#32309",
                      "huggingface/transformers#32522", "Dao-AILab/flash-attention#742"},
       .upstream_message = "index out of bounds",
       .check = checks::mask_rank,
       .apis = kAllApis},
      {.number = 7, .id = "mask.binary", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error",
       .statement = "mask values are 0/1",
       .when_broken = "segment-id masks: sum != number of nonzero -> cu_seqlens total != indices count",
       .explanation =
           "A mask holding segment ids ([1, 1, 2, 2, 0], from a packing collator) reaches _get_unpad_data unchanged: "
           "lengths = mask.sum() counts 1 + 1 + 2 + 2 = 6 tokens while nonzero() gathers 4, so cu_seqlens[-1] no "
           "longer matches the packed tensor, and both sequences of the row land in one segment.",
       .fix = "Pass a 0/1 mask (mask != 0) and give the boundaries as position ids or cu_seq_lens kwargs instead.",
       .references = {"huggingface/transformers modeling_flash_attention_utils.py (_get_unpad_data: sum vs nonzero)"},
       .upstream_message = "",
       .check = checks::mask_binary,
       .apis = kAllApis},
      {.number = 47, .id = "mask.cast_to_bool", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error",
       .statement = "segment ids in a mask given to the model survive the model's mask preparation",
       .when_broken = "no error; the model casts the mask to bool (transformers >= 4.53) or drops it (<= 4.52, no 0 "
                      "in it): the packed sequences of a row become one sequence",
       .explanation =
           "A packing collator that writes segment ids into the attention mask ([1, 1, 1, 2, 2, 3, 0], LlamaFactory's "
           "neat_packing, OpenRLHF and multipack) hands the model a mask the attention never sees as written. From "
           "transformers 4.53.0 the decoder models build their masks in masking_utils: _preprocess_mask_arguments "
           "casts a 2-D mask to bool, so every segment id becomes True, and flash_attention_mask hands on the bool "
           "mask (None when every entry is True). _upad_input then unpads each row as one sequence: the packed "
           "sequences attend to each other, nothing raises, and a hook at the attention function sees a valid 0/1 "
           "mask. Up to 4.52 LlamaModel._update_causal_mask hands the mask on unchanged when it holds a 0 (then "
           "mask.binary: sum() and nonzero() disagree) and drops it when it holds none (the dense kernel runs over "
           "the packed row). The projects that pack this way patch transformers' unpadding to read the segment ids "
           "(LlamaFactory's neat_packing, OpenRLHF); without the patch the segment ids are lost.",
       .fix = "Keep the mask 0/1 and give the boundaries as position ids that restart at 0 for every packed sequence "
              "(DataCollatorWithFlattening, or the cu_seq_lens_q/k and max_length_q/k kwargs); or install the "
              "packing project's unpad patch for the transformers release in use.",
       .references = {"transformers 4.53.0 masking_utils.py (_preprocess_mask_arguments: attention_mask.to(dtype="
                      "torch.bool); flash_attention_mask)",
                      "transformers 4.52.4 models/llama/modeling_llama.py (LlamaModel._update_causal_mask)",
                      "OpenRLHF/OpenRLHF#587", "hiyouga/LlamaFactory neat_packing (src/llamafactory/model/model_utils/"
                      "packing.py)"},
       .upstream_message = "",
       .check = checks::mask_cast_to_bool,
       .apis = kAllApis},
      {.number = 60, .id = "mask.static_cache_slots", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error",
       .statement = "a static cache's empty slots are not attended: a mask given to the model that is narrower than "
                    "the keys reaches the attention",
       .when_broken = "no error; the dense causal call runs over every slot of the cache: queries attend the tokens "
                      "after them and the empty slots",
       .explanation =
           "A static cache (generate with cache_implementation=\"static\", or a StaticCache passed to the model) "
           "holds max_cache_len key slots, more than the tokens written so far. The model's mask covers only the "
           "tokens. From transformers 4.48.0 (where the model's own flash-attention class, which refused a static "
           "cache, gave way to the attention interface) up to 5.12, the mask preparation hands on no mask when every "
           "entry is attended, so _flash_attention_forward takes the dense flash_attn_func over all slots with "
           "causal=True. FlashAttention aligns a causal mask with the last key when there are more keys than "
           "queries: each query then attends as many keys past its own position as there are empty slots, first "
           "tokens after it, then the empty slots themselves. 5.13.0 keeps the mask when it is narrower than the "
           "keys, and _upad_input cuts the keys to it.",
       .fix = "Upgrade to transformers 5.13.0 or later; or use a dynamic cache, or sdpa, with a static cache on "
              "older releases.",
       .references = {"huggingface/transformers PR#46914 (5.13.0 masking_utils.py flash_attention_mask: kept when "
                      "narrower than kv_length)",
                      "transformers 4.48.0 - 5.12.x: the dense call over every slot, tests/golden/"
                      "model-llama-*.json scenario static_cache_all_ones"},
       .upstream_message = "",
       .check = checks::mask_static_cache_slots,
       .apis = kAllApis},
      {.number = 8, .id = "mask.kv_length", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error",
       .statement = "mask width == key/value length",
       .when_broken = "indices past B*Lk -> gather assert (the Gemma-2 sliding-window and FLA decoding crashes), or "
                      "silently wrong keys",
       .explanation =
           "The unpad indices of a width-W mask address row r*W + c of the (B*Lk)-row key view. W > Lk (a full-length "
           "mask against a sliding-window cache or a cache that was never prefilled) sends indices past B*Lk and the "
           "gather asserts \"index out of bounds\" (Gemma-2 generation on transformers 4.44.0; FLA decoding). W < Lk "
           "raises nothing, but every row after the first gathers another position's keys.",
       .fix = "Give the unpad path a mask as wide as the keys actually present (slice it to the cache window), "
              "upgrade transformers to >= 4.44.1 for Gemma-2 (#32522), and run prefill before decoding in FLA layers.",
       .references = {"Dao-AILab/flash-attention#1156", "huggingface/transformers#32309",
                      "huggingface/transformers#32522", "fla-org/flash-linear-attention#206",
                      "fla-org/flash-linear-attention#204", "fla-org/flash-linear-attention#223",
                      "fla-org/flash-linear-attention#431"},
       .upstream_message = "index out of bounds",
       .check = checks::mask_kv_length,
       .apis = kAllApis},
      {.number = 9, .id = "mask.padding_side", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error (silently wrong query rows)",
       .statement = "when Lq is not 1 or Lk the mask is left-padded (the mask[:, -Lq:] slice assumes it)",
       .when_broken = "silently wrong query rows",
       .explanation =
           "When only part of each row is new (chunked prefill, speculative decoding: 1 < Lq < Lk) _upad_input "
           "unpads the queries with mask[:, -Lq:], assuming the newest tokens sit in the last columns, i.e. left "
           "padding. With right padding the slice reads padding columns: a row's real queries are dropped or mixed "
           "with padding, with no error. A mask with fewer than Lq columns (Gemma-2 on 4.44.1 - 4.46 cut it to the "
           "window's last W) gives query indices of the wrong row width: one row's queries are read as another's.",
       .fix = "Pad on the left (tokenizer.padding_side = \"left\") for generation and chunked prefill, and give the "
              "unpad path a mask with at least Lq columns (for Gemma-2: transformers >= 4.48).",
       .references = {"huggingface/transformers#35032",
                      "huggingface/transformers PR#32522 (4.44.1 - 4.46: the Gemma-2 sliding-layer mask cut to W columns)"},
       .upstream_message = "",
       .check = checks::mask_padding_side,
       .apis = kAllApis},
      {.number = 59, .id = "position_ids.width", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error",
       .statement = "the position ids given to the model have one entry per token: their last axis is the query "
                    "length",
       .when_broken = "the model's rotary embedding computes cos/sin for fewer (or more) positions than q has tokens "
                      "-> RuntimeError in apply_rotary_pos_emb, before any attention",
       .explanation =
           "The model turns its position ids into the rotary cos/sin, one row per position id, and multiplies q and "
           "k by them: a width other than the token count does not broadcast and the forward raises. LlamaFactory's "
           "packing collator (0.9.3 - 0.9.5) pads input_ids, the mask and labels to a multiple of 8 "
           "(pad_to_multiple_of, train/sft/workflow.py) but not position_ids, which are not among the tokenizer's "
           "model inputs: with a cutoff_len that is not a multiple of 8, or the fake image tokens its multimodal "
           "collator appends, the ids stay narrower than the batch (LlamaFactory#10736: Gemma-3/4 on SDPA, "
           "\"The size of tensor a (4656) must match the size of tensor b (4396)\").",
       .fix = "Pad position_ids to the padded width with the other inputs (LlamaFactory PR#10737 pads them with 0 on "
              "the non-FA2 path), or pack with a cutoff_len that is a multiple of pad_to_multiple_of.",
       .references = {"hiyouga/LlamaFactory#10736", "hiyouga/LlamaFactory PR#10737"},
       .upstream_message = "The size of tensor a",
       .check = checks::position_ids_width,
       .apis = kAllApis},
      {.number = 10, .id = "position_ids.rank", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error",
       .statement = "position ids reaching packing detection are (B, S) (or (S) with B == 1 up to 4.54: from 4.55 "
                    "_is_packed_sequence reads shape[1], an IndexError on (S) ids)",
       .when_broken = "3-D mRoPE ids read as packing -> cu_seqlens = [0, S, 2S, 3S] -> illegal memory access",
       .explanation =
           "Packing detection flattens position_ids and opens a segment wherever the value restarts. Qwen2-VL-style "
           "3-D mRoPE ids (3, B, S) restart once per axis: cu_seqlens = [0, S, 2S, 3S] for one sequence, three times "
           "the rows q has, and the kernel reads and writes past q, k, v and out.",
       .fix = "Hand packing detection (B, S) text position ids (one axis of the mRoPE ids), or use a transformers "
              "release that handles 3-D ids there.",
       .references = {"huggingface/transformers#38007", "huggingface/transformers#39168",
                      "huggingface/transformers#44643", "Dao-AILab/flash-attention#2381", "huggingface/transformers#43441"},
       .upstream_message = "an illegal memory access was encountered",
       .check = checks::position_ids_rank,
       .apis = kAllApis},
      {.number = 11, .id = "position_ids.origin", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error; warning for sequences that start above the origin when the replayed release still "
                        "found their boundaries",
       .statement = "every intended sequence starts at position_origin and boundaries are detected at that value",
       .when_broken = "boundaries missed or invented -> merged or split sequences",
       .explanation =
           "Boundaries are found where the position equals the detection value (0; the minimum, or the model's "
           "origin, in later releases). A chunk whose ids start at an offset has no 0: transformers 4.54.1 found no "
           "boundary and built a one-entry cu_seqlens (#39814); a trainer keeping absolute positions built "
           "cu_seqlens = [1024, 3072] (prime-rl PR#2392). A collator numbering from 0 for a model whose positions "
           "start at padding_idx + 1 feeds it positions it treats as padding (#47496).",
       .fix = "Number every packed sequence from the model's origin (padding_idx + 1 for RoBERTa-like models, else "
              "0), or pass the boundaries explicitly (cu_seq_lens kwargs) instead of relying on detection.",
       .references = {"huggingface/transformers#39814", "huggingface/transformers#47496",
                      "huggingface/transformers PR#47525", "PrimeIntellect-ai/prime-rl PR#2392"},
       .upstream_message = "",
       .check = checks::position_ids_origin,
       .apis = kAllApis},
      {.number = 12, .id = "position_ids.consecutive", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error for a jump inside an intended sequence, and for tokens at the origin that are each their own "
                        "segment once the call has 2048 segments (FLA's GatedDeltaNet grid, LlamaFactory#10452); a note "
                        "(not a violation) for fewer: a one-token example, or padding numbered 0 whose rows are discarded",
       .statement = "within an intended sequence positions increase by exactly 1; padding does not restart at the "
                    "origin",
       .when_broken = "each padded 0 opens a length-1 segment (thousands of segments, grid overflow)",
       .explanation =
           "Detection treats every position equal to the origin as a new sequence. Padding numbered 0 (padding-free "
           "collators that pad position_ids with zeros) opens one length-1 segment per padded token: thousands of "
           "segments that overflow the launch grid (\"Triton Error [CUDA]: invalid argument\"). A jump inside a "
           "sequence splits it in releases that also open a segment where positions stop increasing.",
       .fix = "Give padding positions that continue the last sequence, or drop padding from padding-free batches; "
              "keep positions consecutive inside every sequence.",
       .references = {"hiyouga/LlamaFactory#10452", "axolotl-ai-cloud/axolotl PR#2739",
                      "fla-org/flash-linear-attention#1077"},
       .upstream_message = "Triton Error [CUDA]: invalid argument",
       .check = checks::position_ids_consecutive,
       .apis = kAllApis},
      {.number = 13, .id = "route.packed_to_dense", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error (silent cross-contamination)",
       .statement = "a row holding several intended sequences reaches a path with varlen metadata",
       .when_broken = "silent cross-contamination between packed sequences",
       .explanation =
           "A padding-free row needs its boundaries in cu_seqlens. When the release does not take the varlen path "
           "(position ids that lost their packing information, kwargs dropped on the way, a batch shape the "
           "detection skips) the dense kernel runs causal attention over the whole row: later sequences attend to "
           "earlier ones, with no error. EasyR1 trained like this after 3-D ids lost their text axis; TRL's "
           "padding-free batches reported a loss of 0.0.",
       .fix = "Pass the boundaries in a form the release uses for this batch (position ids restarting per sequence, "
              "or all four cu_seq_lens/max_length kwargs); `attn-doctor compare` shows the route per release.",
       .references = {"hiyouga/EasyR1 PR#494", "huggingface/trl PR#3942"},
       .upstream_message = "",
       .check = checks::route_packed_to_dense,
       .apis = kAllApis},
      {.number = 14, .id = "route.partial_kwargs", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error; warning when the replayed release used partial kwargs anyway",
       .statement = "explicit varlen kwargs are given all together and are not overridden by a mask",
       .when_broken = "silent fallback to the dense kernel",
       .explanation =
           "transformers accepts cu_seq_lens_q/k and max_length_q/k from a collator, but uses them only when all four "
           "are given and no attention mask is (the mask branch comes first in every release). A collator that sends "
           "only cu_seq_lens, or keeps the mask, silently gets another path, typically the dense kernel over packed "
           "tokens.",
       .fix = "Send all four kwargs (cu_seq_lens_q, cu_seq_lens_k, max_length_q, max_length_k) and no attention mask "
              "for padding-free batches.",
       .references = {"huggingface/transformers PR#47170"},
       .upstream_message = "",
       .check = checks::route_partial_kwargs,
       .apis = kAllApis},
      // 47: hybrid models, numbered on after input.softcap, checked with the route
      {.number = 49, .id = "layers.same_boundaries", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error",
       .statement = "every layer of a hybrid model sees the same sequence boundaries: each GatedDeltaNet layer's "
                    "(its delta rule's and its short convolution's) equal the attention layers' (without an attention "
                    "layer: the intent's)",
       .when_broken = "silently merged or split sequences in the linear-attention layers (or the layer raises)",
       .explanation =
           "A hybrid model routes one batch to attention layers, which get their boundaries from the flash-attn "
           "conversion (mask, position ids or cu_seq_lens kwargs), and to linear-attention layers, which take theirs "
           "from somewhere else. transformers' Qwen3-Next / Qwen3.5 GatedDeltaNet layers never read position ids: up to "
           "5.8.0 they pass no boundaries at all, from 5.9.0 the delta rule takes the cu_seq_lens_q kwarg (only through "
           "the fla kernel; the torch fallback ignores it, and from 5.20.0 raises ValueError on it) and the "
           "convolution the seq_idx kwarg (only through causal-conv1d; the same for its fallback). FLA's own GatedDeltaNet layer up to 0.4.2 replaces the caller's cu_seqlens with one "
           "sequence per row of the attention mask; 0.5.0 - 0.5.2 keep them but then fail to repad when a mask is "
           "given too. Packed sequences that the attention layers keep apart are then mixed by the recurrent state "
           "and the convolution, or a sequence is cut in two, with no error.",
       .fix = "Give the linear-attention layers the same boundaries as the attention layers: pass cu_seq_lens_q and "
              "seq_idx from the collator (DataCollatorWithFlattening(return_flash_attn_kwargs=True, "
              "return_seq_idx=True)) on transformers >= 5.9.0 with fla and causal-conv1d installed; for FLA's layers "
              "pass cu_seqlens without an attention mask, or upgrade to fla >= 0.6.0.",
       .references = {"huggingface/transformers#46093", "huggingface/transformers#46851",
                      "huggingface/transformers PR#45034", "fla-org/flash-linear-attention#838", "fla-org/flash-linear-attention PR#842",
                      "huggingface/transformers v5.9.0 models/qwen3_5/modeling_qwen3_5.py (cu_seq_lens_q, seq_idx)",
                      "fla-org/flash-linear-attention v0.4.2, v0.6.0 fla/layers/gated_deltanet.py"},
       .upstream_message = "",
       .check = checks::layers_same_boundaries,
       .apis = kAllApis},
      {.number = 15, .id = "cu_seqlens.dtype", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error (the host check raises)",
       .statement = "int32",
       .when_broken = "raises \"cu_seqlens_q must have dtype int32\"",
       .explanation =
           "The kernel reads cu_seqlens as int32 and the host check enforces it. torch.cumsum returns int64 unless "
           "told otherwise, so hand-built cu_seqlens (Qwen2-VL's vision tower) are int64.",
       .fix = "Build cu_seqlens with dtype=torch.int32: torch.cumsum(lengths, 0, dtype=torch.int32), then pad a "
              "leading 0.",
       .references = {"QwenLM/Qwen2-VL vision tower (cu_seqlens built as int64)"},
       .upstream_message = fa2_host_checks().message(HostCheck::cu_seqlens_q_dtype),
       .check = checks::cu_seqlens_dtype},
      {.number = 16, .id = "cu_seqlens.device", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error",
       .statement = "on the same device as q",
       .when_broken = "raises (PyTorch device check) or, across GPUs, illegal memory access",
       .explanation =
           "cu_seqlens must live on q's GPU. A CPU tensor is rejected by the host check (CHECK_DEVICE); one on another "
           "GPU passes it and the kernel dereferences another device's pointer: an illegal memory access, or silently "
           "wrong boundaries with peer access enabled.",
       .fix = "Move cu_seqlens to q.device once per batch.",
       .references = {"vllm-project/vllm#44180"},
       .upstream_message = fa2_host_checks().message(HostCheck::cu_seqlens_q_device),
       .check = checks::cu_seqlens_device},
      {.number = 17, .id = "cu_seqlens.shape", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error (the host check raises)",
       .statement = "1-D, length N + 1 >= 2, and q and k have the same N",
       .when_broken = "raises \"cu_seqlens_q must have shape (batch_size + 1)\"",
       .explanation =
           "flash-attn takes batch_size = cu_seqlens_q.numel() - 1, requires it > 0, and checks both tensors against "
           "(batch_size + 1,). A rank-3 cu_seqlens from a 4-D mask (transformers 4.35, flash-attention#742) and a "
           "one-entry cu_seqlens from packing detection that found no boundary (transformers#39814) fail here.",
       .fix = "Pass 1-D cu_seqlens_q/k with N + 1 entries each: a 2-D mask on the unpad path, position ids that "
              "contain the boundary value on the packed path.",
       .references = {"Dao-AILab/flash-attention#742", "huggingface/transformers#39814"},
       .upstream_message = fa2_host_checks().message(HostCheck::cu_seqlens_q_shape),
       .check = checks::cu_seqlens_shape},
      {.number = 18, .id = "cu_seqlens.start", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error",
       .statement = "cu[0] == 0",
       .when_broken = "negative start -> huge offset -> illegal memory access; positive start -> leading rows never "
                      "written",
       .explanation =
           "The kernel takes row offsets from cu[b] as unsigned 32-bit values: a negative first entry becomes a huge "
           "offset (illegal memory access), a positive one leaves rows 0 .. cu[0] - 1 of the output unwritten. "
           "Context-parallel trainers that built cu_seqlens from absolute positions produced [1024, 3072].",
       .fix = "Start cu_seqlens at 0: build it from per-sequence lengths with a leading 0, or subtract cu[0].",
       .references = {"PrimeIntellect-ai/prime-rl PR#2392"},
       .upstream_message = "an illegal memory access was encountered",
       .check = checks::cu_seqlens_start},
      {.number = 19, .id = "cu_seqlens.monotonic", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error",
       .statement = "non-decreasing",
       .when_broken = "negative lengths: rows left unwritten (garbage), overlapping segments written twice",
       .explanation =
           "Segment b has length cu[b+1] - cu[b]. A decrease is a negative length: the kernel computes no tile for "
           "it, its rows keep whatever memory held, and the following segments overlap earlier rows, which are "
           "written twice. Equal entries (empty sequences) are legal for FA2 but have crashed FLA's chunked kernels "
           "(FLA #103).",
       .fix = "Build cu_seqlens as the cumulative sum of non-negative lengths.",
       .references = {"fla-org/flash-linear-attention#103"},
       .upstream_message = "",
       .check = checks::cu_seqlens_monotonic},
      {.number = 20, .id = "cu_seqlens.total", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error",
       .statement = "cu_q[-1] == rows of q and cu_k[-1] == rows of k/v",
       .when_broken = "overshoot: reads/writes past the tensors (illegal memory access or corruption of neighbours); "
                      "undershoot: tail rows uninitialised, NaN gradients",
       .explanation =
           "cu[-1] must equal the rows of the packed tensor. Past it the kernel reads q/k/v and writes out beyond the "
           "tensors (flash-attention#855, LongQLoRA's shifted groups, the mRoPE [0, S, 2S, 3S]). How far decides what "
           "the user sees: a few rows stay inside the segment PyTorch's caching allocator carved the tensor from, "
           "nothing is raised and the intended rows come out right (memory corruption possible, compute-sanitizer "
           "reports it); a phantom segment reaching far past it faults with an illegal memory access. Short of it the tail rows "
           "are never written and turn into NaN gradients (flash-attention#1661, PR#2324).",
       .fix = "Derive cu_seqlens from the same lengths that built the packed tensor: cu_seqlens_q[-1] == "
              "q.shape[0], cu_seqlens_k[-1] == k.shape[0].",
       .references = {"Dao-AILab/flash-attention#1661", "Dao-AILab/flash-attention PR#2324",
                      "Dao-AILab/flash-attention#855", "yangjianxin1/LongQLoRA#6", "PrimeIntellect-ai/prime-rl PR#2392",
                      "huggingface/transformers#38007"},
       .upstream_message = "an illegal memory access was encountered",
       .check = checks::cu_seqlens_total},
      // 45: numbered after the first revision's 44, placed where the kernel meets it (the values
      // that reached the kernel); "first" follows this table's order, not the number
      {.number = 45, .id = "seqused_k.range", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error",
       .statement = "every seqused_k[b] >= 0 (the number of keys sequence b uses)",
       .when_broken = "no key attended: the sequence's output rows are zeros, with no error",
       .explanation =
           "seqused_k is the number of keys each sequence uses: FA2's BlockInfo takes actual_seqlen_k = seqused_k[b] "
           "in place of cu_seqlens_k[b + 1] - cu_seqlens_k[b] and reads keys from cu_seqlens_k[b] on. Nothing checks "
           "its values: a negative count leaves the key-block loop empty, and the forward writes zeros (and an "
           "infinite LSE) for every query of the sequence. A count past the segment (the next sequence's keys, or "
           "rows past k and v) is observed by the dynamic stages (result.reference, attention.access), which see "
           "which keys it reaches.",
       .fix = "Pass seqused_k[b] = the number of valid keys of sequence b, between 0 and its segment's length in "
              "cu_seqlens_k (or leave seqused_k out to use the whole segment).",
       .references = {"Dao-AILab/flash-attention v2.6.3 csrc/flash_attn/src/block_info.h (actual_seqlen_k)",
                      "Dao-AILab/flash-attention v2.6.3 csrc/flash_attn/src/flash_fwd_kernel.h (n_block_max <= "
                      "n_block_min: zeros written)"},
       .upstream_message = "",
       .check = checks::seqused_k_range},
      {.number = 21, .id = "max_seqlen.type", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error for a value <= 0 and where the kernel needs an int (FA4); warning for a 0-d tensor on "
                        "FA1/FA2/FA3 (accepted at the cost of a host sync)",
       .statement = "max_seqlen is a host integer > 0",
       .when_broken = "0-d tensor: host sync, compile graph break, FA4 DSL error",
       .explanation =
           "max_seqlen sizes the grid on the host. transformers 4.44 - 4.53 passed position_ids.max() + 1 as a 0-d "
           "tensor on the packed path, 4.54 - 5.3 a host int, and 5.4 onwards a 0-d tensor again (cu_seqlens.diff().max(); "
           "5.4 - 5.13 max_seqlen_k on the mask path too, beside a host-int max_seqlen_q on the decode and "
           "partial-query routes): FA2 and FA3 convert it, which synchronises with the device and breaks "
           "torch.compile graphs; FA4's CuTe interface uses it in integer tile arithmetic and fails. A value <= 0 "
           "(or None, varlen kwargs without max_length) cannot size the grid.",
       .fix = "Pass a Python int computed once per batch: int((cu_seqlens[1:] - cu_seqlens[:-1]).max()).",
       .references = {"huggingface/transformers modeling_flash_attention_utils.py (4.44.0 - 4.53.x and 5.4 -: 0-d "
                      "tensor; 4.54: .item()), as replayed in lib/convert and tests/golden",
                      "Dao-AILab/flash-attention fa4-v4.0.0.beta0 flash_attn/cute/interface.py"},
       .upstream_message = "",
       .check = checks::max_seqlen_type},
      {.number = 22, .id = "max_seqlen.covers", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error where a kernel of the batch's pass leaves rows or keys out (the forward's row tiles, the "
                        "window clamp, split-KV decode; the backward's grids for a training batch); warning where the "
                        "tiles absorb it (latent: the message says when it bites)",
       .statement = "max_seqlen_q >= every q segment length and max_seqlen_k >= every k segment length",
       .when_broken = "q: rows past the forward's ceil(max_seqlen_q / kBlockM) row tiles never computed (stale values); "
                      "k: keys dropped by split-KV decode, the window clamp and the backward",
       .explanation =
           "FA2's forward grid has ceil(max_seqlen_q / kBlockM) row tiles of kBlockM rows (128 for most head dims) per "
           "sequence: a longer segment is still computed entirely while it fits them, and only rows past them are "
           "never computed, keeping whatever torch.empty held (stale finite values). The forward takes its key "
           "blocks from the actual lengths, so a short max_seqlen_k matters only where the host or another kernel "
           "uses it: mha_varlen_fwd drops a left window >= max_seqlen_k, the split-KV decode path sizes its splits "
           "from it, and the backward sizes its row grids from max_seqlen_q and its key-block grid from "
           "max_seqlen_k (flash_bwd_launch_template.h), leaving dq, dk and dv rows unwritten.",
       .fix = "Compute max_seqlen_q and max_seqlen_k from the cu_seqlens actually passed (the largest cu[i+1] - "
              "cu[i] of each).",
       .references = {"Dao-AILab/flash-attention#1773"},
       .upstream_message = "",
       .check = checks::max_seqlen_covers},
      {.number = 23, .id = "max_seqlen.single_query", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error (checked where the release takes the swapped path: FA2 >= 2.5.0, no window, no "
                        "dropout, aligned head dim)",
       .statement = "if max_seqlen_q == 1 and H > Hk, every segment has exactly one query",
       .when_broken = "reshape error, or tokens silently assigned to the wrong sequence",
       .explanation =
           "With max_seqlen_q == 1 and H > Hk, FA2 (2.5.0 -) reshapes q (total_q, H, D) to (N, Hk, H / Hk, D) so one "
           "kernel row serves a whole kv-head group. That assumes each of the N segments holds exactly one query: an "
           "empty segment (a finished sequence in a continuous-batching decode step) makes the reshape fail, and a "
           "mix of empty and two-query segments with the right total silently attributes queries to the wrong "
           "sequences.",
       .fix = "Drop empty sequences from the decode batch, or pass the real max_seqlen_q; declare max_seqlen_q = 1 "
              "only when every segment has exactly one query.",
       .references = {"Dao-AILab/flash-attention#1537", "Dao-AILab/flash-attention#1619"},
       .upstream_message = "shape '[3, 3, 3, 64]' is invalid",
       .check = checks::max_seqlen_single_query,
       .apis = {Api::flash_attn_2_varlen}},
      {.number = 24, .id = "cu_seqlens.segments", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error for merged, split, dropped or padding-attending sequences; warning for segments of "
                        "padding alone (their rows are discarded); a note (not a violation) where that padding lies inside "
                        "the batch's rows and the call has fewer than 2048 segments",
       .statement = "the segments are exactly the intended sequences (none merged, none split, none shifted)",
       .when_broken = "silent cross-contamination or truncated context",
       .explanation =
           "Every shape and value check can hold while the segments are still the wrong ones: a mask with holes or "
           "segment ids merges sequences, detection at the wrong position value merges or splits them, a packed row "
           "on the mask path is one segment. The kernel cannot tell: tokens attend across sequence boundaries or lose "
           "part of their context, with no error.",
       .fix = "Make the boundaries explicit (cu_seq_lens kwargs, or position ids restarting at the origin per "
              "sequence) and compare the replayed cu_seqlens in the report with the sequences you meant.",
       .references = {"huggingface/transformers#47496", "huggingface/transformers#39814",
                      "huggingface/transformers#33268"},
       .upstream_message = "",
       .check = checks::cu_seqlens_segments},
      {.number = 25, .id = "cu_seqlens.grid", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error (the launch fails)",
       .statement = "the launch grid the segment count implies fits the kernel's grid limits",
       .when_broken = "\"invalid argument\" launch failure",
       .explanation =
           "FA2 launches (ceil(max_seqlen_q / BLOCK_M), N, H) blocks: N and H are gridDim.y and gridDim.z, which CUDA "
           "caps at 65535, and the varlen rotary kernels put N on such an axis too. Padding that opens one segment "
           "per token (position ids padded with 0) passes the cap in a single batch.",
       .fix = "Keep the number of sequences per call at most 65535: fix the padding that creates length-1 segments, "
              "or split the batch.",
       .references = {"hiyouga/LlamaFactory#10452", "axolotl-ai-cloud/axolotl PR#2739",
                      "fla-org/flash-linear-attention#1077"},
       .upstream_message = "Triton Error [CUDA]: invalid argument",
       .check = checks::cu_seqlens_grid},
      {.number = 26, .id = "indices.range", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error (device-side assert)",
       .statement = "every unpad index lies in [0, rows) of the tensor it gathers from",
       .when_broken = "\"index out of bounds\" device assert in the gather",
       .explanation =
           "index_first_axis gathers rows of the (B * L)-row view of q, k and v with the unpad indices; an index "
           "outside it trips the gather kernel's device-side assert. Launches being asynchronous, the error often "
           "surfaces later at an unrelated call as \"device-side assert triggered\".",
       .fix = "Make the mask match the tensors it unpads (see mask.kv_length and mask.rank); rerun with "
              "CUDA_LAUNCH_BLOCKING=1 to see the failing gather.",
       .references = {"Dao-AILab/flash-attention#1156", "huggingface/transformers#32309",
                      "fla-org/flash-linear-attention#206", "fla-org/flash-linear-attention#204"},
       .upstream_message = "index out of bounds",
       .check = checks::indices_range,
       .apis = kAllApis},
      {.number = 27, .id = "indices.count", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error",
       .statement = "number of unpad indices == cu_seqlens[-1]",
       .when_broken = "packed tensor and cu_seqlens disagree -> overrun or unwritten rows",
       .explanation =
           "The packed tensor has one row per unpad index while cu_seqlens[-1] comes from the mask's sum; for a 0/1 "
           "mask they agree. When they do not (segment-id masks, lengths and indices taken from differently sliced "
           "masks) the kernel reads past the packed rows or never attends to the last ones.",
       .fix = "Compute lengths and indices from the same 0/1 mask.",
       .references = {"huggingface/transformers modeling_flash_attention_utils.py (_get_unpad_data)",
                      "Dao-AILab/flash-attention flash_attn/bert_padding.py (unpad_input)"},
       .upstream_message = "",
       .check = checks::indices_count,
       .apis = kAllApis},

      // ---- static: rotary -----------------------------------------------------------------
      {.number = 28, .id = "rotary.dim", .group = G::rotary, .stage = "rotary",
       .severity_rule = "error",
       .statement = "rotary dim <= head_dim (the value passed is the per-head width, not the model width)",
       .when_broken = "FLA before 0.6.0: reads/writes past each head -> illegal memory access at the tensor end, "
                      "silent cross-head corruption elsewhere; FLA 0.6.0, flash_attn: AssertionError on the host",
       .explanation =
           "The rotary dimension is per head. FLA's rotary kernel bounds its columns by the dim it was given, not by "
           "the head dim: RotaryEmbedding(dim=hidden_size) rotates hidden_size elements from the start of each head, "
           "overwriting the following heads and, at the last head of the last token, memory past the tensor (an "
           "illegal memory access under torch.compile, FLA #180). fla-core 0.6.0 asserts the rotary width against "
           "the head dim before the launch (\"Rotary dimension must not exceed head dimension\"). flash_attn's "
           "apply_rotary rejects it on the host; transformers' apply_rotary_pos_emb fails to broadcast.",
       .fix = "Construct the rotary embedding with the head dim (or its rotary fraction): "
              "RotaryEmbedding(dim=head_dim).",
       .references = {"fla-org/flash-linear-attention#180"},
       .upstream_message = "an illegal memory access was encountered",
       .check = checks::rotary_dim,
       .apis = kAllApis},
      {.number = 29, .id = "rotary.even", .group = G::rotary, .stage = "rotary",
       .severity_rule = "error",
       .statement = "rotary dim is even (multiple of 16 where the fused kv-cache path requires it)",
       .when_broken = "reads past the head",
       .explanation =
           "Rotary rotates pairs of elements: the table has ceil(dim / 2) frequencies, so an odd dim makes the kernel "
           "rotate dim + 1 elements, one past the rotary part (past the head when dim == head_dim). "
           "flash_attn_with_kvcache's fused rotary also requires a multiple of 16.",
       .fix = "Use an even rotary dim (a multiple of 16 with flash_attn_with_kvcache's fused rotary).",
       .references = {"Dao-AILab/flash-attention v2.8.3 csrc/flash_attn/flash_api.cpp (mha_fwd_kvcache rotary_dim % "
                      "16)"},
       .upstream_message = "",
       .check = checks::rotary_even,
       .apis = kAllApis},
      {.number = 30, .id = "rotary.layout", .group = G::rotary, .stage = "rotary",
       .severity_rule = "error",
       .statement = "the tensor layout is one the kernel supports; with cu_seqlens the batch dimension is 1",
       .when_broken = "wrong strides -> illegal memory access",
       .explanation =
           "flash_attn's apply_rotary takes (batch, seqlen, nheads, headdim), or (total_seqlen, nheads, headdim) with "
           "cu_seqlens; FLA's takes [B, T, H, D] and, in varlen, addresses rows from cu_seqlens with no batch stride, "
           "so B must be 1. A (B, H, T, D) tensor is read with heads as positions, and a padded batch with cu_seqlens "
           "is read with packed offsets: wrong rows and, past the end, an illegal memory access.",
       .fix = "Hand the rotary kernel the layout it expects: the packed (1, T, H, D) or (T, H, D) tensor with "
              "cu_seqlens, (B, T, H, D) without; transpose (B, H, T, D) tensors first.",
       .references = {"Dao-AILab/flash-attention v2.8.3 flash_attn/ops/triton/rotary.py (apply_rotary)",
                      "fla-org/flash-linear-attention fla/modules/rotary.py"},
       .upstream_message = "",
       .check = checks::rotary_layout,
       .apis = kAllApis},
      {.number = 31, .id = "rotary.table", .group = G::rotary, .stage = "rotary",
       .severity_rule = "error",
       .statement = "the cos/sin table covers every position used (max position + 1 rows, in varlen the packed length "
                    "for FLA)",
       .when_broken = "positions past the table silently left unrotated, or out-of-bounds table reads",
       .explanation =
           "The cos/sin table needs a row for every position rotated. FLA up to 0.5.2 asserts TR >= T on the tensor "
           "it is given, and in varlen that tensor is the packed one: the table must cover the packed length, not "
           "the longest sequence (FLA #515: unpadded to one row while max_seqlen kept the padded length). fla-core "
           "0.6.0 keeps that assert only without cu_seqlens, still asserts offset + T <= TR for an int offset (T the "
           "packed length), and checks per-sequence tensor offsets on the device (a device-side assert). flash_attn asserts "
           "seqlen_ro >= max_seqlen but leaves positions that per-sequence offsets push past the table unrotated.",
       .fix = "Let the table grow to the largest position used (FLA's RotaryEmbedding does when given the packed "
              "length), or pass max_seqlen and offsets that cover every sequence.",
       .references = {"fla-org/flash-linear-attention#515"},
       .upstream_message = "TR must be >= T",
       .check = checks::rotary_table,
       .apis = kAllApis},
      {.number = 32, .id = "rotary.positions", .group = G::rotary, .stage = "rotary",
       .severity_rule = "error (silently wrong rotation)",
       .statement = "in packed input each sequence's positions restart (cu_seqlens or per-sequence offsets reach the "
                    "rotary kernel)",
       .when_broken = "silently wrong rotation for every sequence but the first",
       .explanation =
           "In a packed row every sequence starts again at its first position. The rotary kernel learns where from "
           "cu_seqlens (flash_attn, FLA) or from position ids (transformers); rotating the packed row without them "
           "continues the positions across sequences, so every sequence but the first is rotated as if it continued "
           "the previous one, with no error.",
       .fix = "Pass cu_seqlens and max_seqlen to the rotary embedding for packed input, or position ids that restart "
              "per sequence.",
       .references = {"Dao-AILab/flash-attention v2.8.3 flash_attn/ops/triton/rotary.py (cu_seqlens, seqlen_offsets)",
                      "fla-org/flash-linear-attention fla/modules/rotary.py"},
       .upstream_message = "",
       .check = checks::rotary_positions,
       .apis = kAllApis},

      // ---- dynamic: observed by the execution backends (lib/exec) -------------------------
      {.number = 33, .id = "unpad.gather", .group = G::dynamic, .stage = "unpad",
       .statement = "every gather index in bounds",
       .when_broken = "first offending index, its bound, the thread that read it",
       .upstream_message = "index out of bounds",
       .apis = kAllApis},
      {.number = 34, .id = "rotary.access", .group = G::dynamic, .stage = "rotary",
       .statement = "every rotary read/write within its head and tensor",
       .when_broken = "first offending element",
       .upstream_message = "an illegal memory access was encountered",
       .apis = kAllApis},
      {.number = 35, .id = "attention.access", .group = G::dynamic, .stage = "attention",
       .statement = "every q/k/v/out/lse access within its tensor",
       .when_broken = "first offending row, segment, tile",
       .upstream_message = "an illegal memory access was encountered"},
      {.number = 36, .id = "attention.coverage", .group = G::dynamic, .stage = "attention",
       .statement = "every output row of every segment written exactly once; nothing outside them written",
       .when_broken = "rows left unwritten (poison survives) or written twice"},
      {.number = 37, .id = "pad.scatter", .group = G::dynamic, .stage = "pad",
       .statement = "every scatter index in bounds",
       .when_broken = "first offending index",
       .apis = kAllApis},
      {.number = 38, .id = "result.finite", .group = G::dynamic, .stage = "result",
       .statement = "outputs contain no NaN/Inf (except the defined +inf LSE of an empty row)",
       .when_broken = "first non-finite element"},
      {.number = 39, .id = "result.reference", .group = G::dynamic, .stage = "result",
       .statement = "output equals attention computed directly over the intended sequences, within tolerance",
       .when_broken = "worst row, its error, the sequence it belongs to"},

      // ---- launch -----------------------------------------------------------------------
      {.number = 40, .id = "launch.autotune_keys", .group = G::launch, .stage = "launch",
       .severity_rule = "error when Triton <= 3.1's positional lookup runs past the end (IndexError) or a key is no "
                        "parameter; warning for a wrong or missing cache-key entry, and for every finding when no "
                        "triton release is given",
       .statement = "every autotune key names a kernel parameter that has a value when the key is built; with Triton "
                    "<= 3.1 keys are looked up by position among the valued parameters",
       .when_broken = "IndexError: list index out of range in the autotuner, or a wrong cache key",
       .explanation =
           "Triton <= 3.1 looks an autotune key up by its position in the full signature, but in the list of the "
           "parameters that have a value when the key is built (passed, or filled by an outer @triton.heuristics). A "
           "parameter the autotune configs supply (BK) placed before a key shifts every later lookup by one: past the "
           "end it raises IndexError (chunk_scaled_dot_kkt_fwd_kernel in FLA's DeltaNet and RWKV7, FLA #354), "
           "otherwise the cache key holds another parameter's value. Triton 3.2 looks keys up by name (triton "
           "PR#4808) and silently leaves keys without a value out.",
       .fix = "Put every autotune key before all config-supplied parameters in the kernel signature (or drop it from "
              "key=[...]), or upgrade to Triton >= 3.2.",
       .references = {"fla-org/flash-linear-attention#354", "triton-lang/triton PR#4808"},
       .upstream_message = "IndexError: list index out of range",
       .check = checks::launch_autotune_keys,
       .apis = kAllApis},
      {.number = 48, .id = "launch.fla_grid", .group = G::launch, .stage = "launch",
       .severity_rule = "error (the launch fails)",
       .statement = "the grid the FLA op the batch names (fla_op) launches fits CUDA's limits: at most 65535 blocks on "
                    "axes y and z",
       .when_broken = "\"Triton Error [CUDA]: invalid argument\" at the launch",
       .explanation =
           "FLA's token_shift (fla/modules/token_shift.py) puts time on a grid axis CUDA caps at 65535. Up to 0.3.0 "
           "its one kernel launches (N, T) with T the longest document. From 0.3.1 (PR#528) it picks a long kernel "
           "when x's T, the flat packed length, passes 4096, even when every document is short, and launches (1, NT, "
           "N) with NT the time chunks of BT = min(64, next_pow2(ceil(max(16, B x T_max) / multiprocessors))) "
           "tokens summed over the documents: a packed row of short documents reaches NT = 65536 (FLA #903: "
           "752-token documents, 262141 tokens with BT = 4; measured on an H100, 132 multiprocessors, BT = 8: "
           "fla-core 0.5.0 fails at 524281 tokens and passes at 524280). 0.5.1 (PR#904) picks the kernel from the "
           "longest document and puts the time chunks on axis x.",
       .fix = "Upgrade FLA to >= 0.5.1, or keep the packed row short enough that its time chunks stay within 65535 "
              "(split the batch).",
       .references = {"fla-org/flash-linear-attention#903", "fla-org/flash-linear-attention PR#904",
                      "fla-org/flash-linear-attention PR#528"},
       .upstream_message = "Triton Error [CUDA]: invalid argument",
       .check = checks::launch_fla_grid,
       .apis = kAllApis},

      // ---- dynamic, training only: FA2's varlen backward (attention_backward) -------------
      {.number = 41, .id = "backward.access", .group = G::dynamic, .stage = "attention_backward",
       .statement = "every access of the backward's launches (dot_do_o, dq_dk_dv, convert_dQ) within its tensor",
       .when_broken = "first refused access in launch order, its launch, buffer, segment, head and row",
       .explanation =
           "FA2's backward predicates its q, dO, k, v and gradient rows by the segment lengths from cu_seqlens, "
           "like the forward, so a cu_seqlens that runs past the tensors reads and writes past them in the backward "
           "too; its fp32 dq accumulator and softmax_d are addressed from cu_seqlens_q[b] + 128 b without any bound. "
           "With softmax_d laid out per head (flash-attn >= 2.6), a segment past the rows carries its rows into the "
           "next head's part, where that head's CTAs write the same elements in the same launch: such a write is "
           "refused as well (evidence region: head).",
       .fix = "Make cu_seqlens_q/k end at the packed rows of q and k (cu_seqlens[-1] == rows) and keep every "
              "segment inside them.",
       .references = {"Dao-AILab/flash-attention#1311",
                      "Dao-AILab/flash-attention v2.8.3 csrc/flash_attn/src/flash_bwd_kernel.h"},
       .upstream_message = "an illegal memory access was encountered"},
      {.number = 42, .id = "backward.coverage", .group = G::dynamic, .stage = "attention_backward",
       .statement = "every row of dq, dk and dv that reaches the caller is written by the backward",
       .when_broken = "gradient rows never written: they return torch.empty's contents (NaN or stale values)",
       .explanation =
           "mha_varlen_bwd allocates dq, dk and dv with torch.empty_like and writes only the rows of the segments "
           "its grids cover: rows past cu_seqlens_q[-1] / cu_seqlens_k[-1], dq rows past ceil(max_seqlen_q / "
           "kBlockM) row tiles of a segment, and dk/dv rows past ceil(max_seqlen_k / kBlockN) key blocks keep "
           "whatever the memory held, NaN included, and the optimizer step spreads them into the weights.",
       .fix = "Pass cu_seqlens whose last entry equals the packed rows (or slice q, k, v to cu_seqlens[-1] before "
              "the call), and max_seqlen_q/k at least the longest segment.",
       .references = {"Dao-AILab/flash-attention#1661", "pytorch/pytorch#176793", "Dao-AILab/flash-attention#2324"}},
      {.number = 43, .id = "backward.dq_offset", .group = G::dynamic, .stage = "attention_backward",
       .statement = "every dq tile accumulates at its own dq_accum offset (no 32-bit wrap)",
       .when_broken = "dq rows of the segments past row 2^31 / (H x d_rounded) accumulated elsewhere: a silently "
                      "wrong dq",
       .explanation =
           "FA2's backward computes the dq_accum offset of segment b as uint32(cu_seqlens_q[b]) x H x d_rounded in "
           "32 bits (block_info.h q_offset called with int strides), in dot_do_o, dq_dk_dv and convert_dQ alike; "
           "before 2.8.0 the tile term (m_block x kBlockM + 128 b) x H x d_rounded is an int product too. The "
           "forward is right (64-bit strides); the backward returns a wrong dq for the late segments, with no error.",
       .fix = "Split the batch so that no segment starts past row 2^31 / (H x d_rounded) of one call, or use a "
              "flash-attn build with Dao-AILab/flash-attention#2260 (64-bit dq_accum offsets; after 2.8.3), or FA3.",
       .references = {"Dao-AILab/flash-attention#2260", "Dao-AILab/flash-attention#1500",
                      "Dao-AILab/flash-attention v2.8.3 csrc/flash_attn/src/block_info.h"}},
      {.number = 44, .id = "backward.reference", .group = G::dynamic, .stage = "attention_backward",
       .statement = "dq, dk and dv equal the gradients of attention over the intended sequences, within tolerance",
       .when_broken = "worst gradient row, its error, the sequence it belongs to",
       .explanation =
           "The gradients are compared with fp64 gradients of sum(dO * out) over the intended sequences (the "
           "seeded dO of the output the caller receives). A conversion that breaks the forward breaks its gradients "
           "as well; a forward that is right can still get wrong gradients from what only the backward does.",
       .fix = "Fix the invariant reported beside it; the gradient rows named are the ones the optimizer gets wrong."},
      {.number = 50, .id = "seqused_q.range", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error",
       .statement = "seqused_q has batch_size entries and 0 <= seqused_q[b] <= cu_seqlens_q[b + 1] - cu_seqlens_q[b] "
                    "(FA3 and FA4, the APIs that take seqused_q)",
       .when_broken = "a wrong count: rows of another sequence computed and overwritten, or a sequence whose rows are "
                      "never written; a wrong length: the host check raises",
       .explanation =
           "seqused_q is the number of query rows each sequence uses: FA3's SeqlenInfoQK takes seqlen_q = "
           "seqused_q[b] in place of cu_seqlens_q[b + 1] - cu_seqlens_q[b], computes and writes only those rows "
           "(aligning the causal or window diagonal on that count) and leaves the rows after them as torch.empty "
           "allocated them. mha_fwd checks its shape, not its values: a count past the segment computes the next "
           "segment's rows (or rows past q) as this sequence's and overwrites their outputs; a negative count "
           "computes nothing. The rows past seqused_q of a correct call are padding the caller must not read "
           "(the dynamic stages skip them unless the intended sequences include them).",
       .fix = "Pass seqused_q[b] = the number of valid query rows of sequence b, between 0 and its segment's "
              "length in cu_seqlens_q (one entry per sequence), or leave seqused_q out to use whole segments.",
       .references = {"Dao-AILab/flash-attention hopper/seqlen.h (SeqlenInfoQK: seqlen_q = seqused_q[bidb])",
                      "Dao-AILab/flash-attention hopper/flash_api.cpp mha_fwd (seqused_q checks; out = torch::empty)",
                      "Dao-AILab/flash-attention PR#1182 (seqused_q)",
                      "flash-attn-4 4.0.0b4 - 4.0.0b36 flash_attn/cute/interface.py (seqused_q shape assert)"},
       .upstream_message = "seqused_q must have shape (batch_size)",
       .check = checks::seqused_q_range,
       .apis = {Api::flash_attn_3_varlen, Api::flash_attn_4_varlen}},
      // ---- Transformer Engine DotProductAttention, qkv_format "thd" (checks_te_thd.cpp, te_thd.cpp;
      // docs/spec/transformer-engine-thd.md) ------------------------------------------------------
      {.number = 51, .id = "te.thd_arguments", .group = G::input, .stage = "input",
       .severity_rule = "error (TE's host check raises)",
       .statement = "a THD call passes a padding mask type, 1-D int32 cu_seqlens_q/kv of one shape, and under context "
                    "parallelism cu_seqlens_q/kv_padded",
       .when_broken = "raises AssertionError before any kernel runs",
       .explanation =
           "DotProductAttention.forward checks a qkv_format=\"thd\" call on the host, in this order: attn_mask_type "
           "must contain \"padding\", cu_seqlens_q and cu_seqlens_kv must both be 1-D of one shape, both int32. The "
           "context-parallel entry (attn_forward_func_with_cp) then requires the padded offsets: THD with CP always "
           "needs them, since TE splits each sequence by its padded length. The messages are the release's own (1.x, "
           "2.0 - 2.7 and 2.8 on word the last one differently).",
       .fix = "Pass attn_mask_type=\"padding_causal\" (or \"padding\"), int32 cu_seqlens of shape [batch_size + 1], and "
              "under context parallelism cu_seqlens_q_padded/cu_seqlens_kv_padded (equal to cu_seqlens when nothing is "
              "padded).",
       .references = {"NVIDIA/TransformerEngine v2.12 transformer_engine/pytorch/attention/dot_product_attention/"
                      "dot_product_attention.py (DotProductAttention.forward)",
                      "NVIDIA/TransformerEngine v2.12 .../context_parallel.py (attn_forward_func_with_cp)",
                      "NVIDIA/TransformerEngine v1.13 transformer_engine/pytorch/attention.py"},
       .upstream_message = "Attention mask type must be padding or padding_causal for qkv_format=thd!",
       .check = checks::te_thd_arguments,
       .apis = {Api::te_dot_product_attention}},
      {.number = 52, .id = "te.padded_offsets", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error",
       .statement = "cu_seqlens_q/kv_padded have one entry per sequence plus one, start at 0, never precede the actual "
                    "offsets, give each sequence at least its actual length, and end within the rows (x CP)",
       .when_broken = "a sequence read from the wrong rows, or rows past the tensor: wrong output, NaN",
       .explanation =
           "With THD, cu_seqlens_q holds the actual lengths and cu_seqlens_q_padded where each sequence starts in q "
           "(its padding after it). The fused (cuDNN) backend reads sequence b's actual tokens from its padded "
           "offset; the flash-attn backend with pad_between_seqs skips the padding by the same offsets. Padded offsets "
           "that leave a sequence less room than its actual length make it run into the next one. Users who could "
           "not tell the two arrays apart and set them to different values got NaN (TransformerEngine#1409).",
       .fix = "Build both from the same lengths: cu_seqlens from the actual lengths, cu_seqlens_padded from the lengths "
              "after padding (each >= the actual one), both starting at 0 and int32.",
       .references = {"NVIDIA/TransformerEngine#1409", "NVIDIA/TransformerEngine#2892",
                      "NVIDIA/TransformerEngine v2.12 .../dot_product_attention.py (cu_seqlens note)"},
       .upstream_message = "",
       .check = checks::te_padded_offsets,
       .apis = {Api::te_dot_product_attention}},
      {.number = 53, .id = "te.cp_padding_multiple", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error",
       .statement = "under context parallelism every sequence's padded length is a multiple of 2 x CP",
       .when_broken = "tokens at the end of a sequence dropped or read twice: silently wrong output (measured on two "
                      "GPUs)",
       .explanation =
           "THD context parallelism splits every sequence into 2 x CP chunks and gives rank r chunks r and "
           "2 x CP - 1 - r (load balancing for causal attention). Each rank's offsets are cu_seqlens_padded // CP and "
           "each half is taken by integer division, so a length that is not a multiple of 2 x CP loses its last "
           "tokens or reads a neighbour's: a 7-token sequence at CP 2 was treated as 6 (TransformerEngine#1930).",
       .fix = "Pad every sequence to a multiple of 2 x CP and pass the padded offsets as cu_seqlens_q_padded/"
              "cu_seqlens_kv_padded (Megatron's pad_seq_to_mult; TE's own CP tests do the same).",
       .references = {"NVIDIA/TransformerEngine#1930", "NVIDIA/TransformerEngine PR#2129",
                      "NVIDIA/TransformerEngine v2.12 .../context_parallel.py (get_seq_chunk_ids_for_reordering_after_attn, "
                      "AttnFuncWithCPAndKVP2P)"},
       .upstream_message = "",
       .check = checks::te_cp_padding_multiple,
       .apis = {Api::te_dot_product_attention}},
      {.number = 54, .id = "te.pad_between_seqs", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error",
       .statement = "the padding-free path (pad_between_seqs False, given or inferred) is taken only when there is no "
                    "padding to skip: no padding between sequences, and under context parallelism every actual length a "
                    "multiple of 2 x CP",
       .when_broken = "padding attended as tokens, or real keys dropped at chunk boundaries: silently wrong output",
       .explanation =
           "When pad_between_seqs is None TE infers it: True exactly when cu_seqlens_q_padded[:-1] differs from "
           "cu_seqlens_q[:-1]. That comparison ignores the padding after the last sequence, and a False passed by the "
           "caller is believed. On the False path under context parallelism each ring step takes its offsets as "
           "cu_seqlens_q // CP (cp_p2p_fwd_prepare_qkv), which is right only when every actual length is a multiple of "
           "2 x CP: a tail-padded sequence loses real keys and leaves real rows zero (TransformerEngine#3331, TE <= "
           "2.17.1; the 7-token sequence of TransformerEngine#1930 treated as 6 is the same path).",
       .fix = "Pass pad_between_seqs=True whenever any sequence is padded (tail padding included) under context "
              "parallelism; never pass False with padded offsets that differ.",
       .references = {"NVIDIA/TransformerEngine#3331", "NVIDIA/TransformerEngine#1930",
                      "NVIDIA/TransformerEngine v2.12 .../dot_product_attention.py (pad_between_seqs inference)",
                      "NVIDIA/TransformerEngine v2.12 .../context_parallel.py (cp_p2p_fwd_prepare_qkv)"},
       .upstream_message = "",
       .check = checks::te_pad_between_seqs,
       .apis = {Api::te_dot_product_attention}},
      {.number = 55, .id = "te.cp_shard", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error",
       .statement = "under context parallelism a rank's q holds cu_seqlens_q_padded[-1] / CP rows, and max_seqlen_q "
                    "(global) covers the largest padded sequence",
       .when_broken = "the ring's segments do not match the rank's rows: silently wrong output (measured on two GPUs)",
       .explanation =
           "With THD, TE takes the global offsets and the global max_seqlen on every rank and divides them by CP "
           "itself (AttnFuncWithCPAndKVP2P.forward). A caller that passes a rank's own offsets (already divided) has "
           "them divided twice: the kernel sees half the rank's rows, split at the wrong places. A rank whose rows "
           "are not the global total / CP was given a different shard than TE computes.",
       .fix = "Pass the global cu_seqlens, cu_seqlens_padded and max_seqlen to every rank; shard only q, k, v (TE's "
              "thd_get_partitioned_indices, Megatron's get_batch_on_this_cp_rank).",
       .references = {"NVIDIA/TransformerEngine v2.12 .../context_parallel.py (AttnFuncWithCPAndKVP2P.forward)",
                      "NVIDIA/TransformerEngine v2.12 .../dot_product_attention.py (max_seqlen not scaled for thd)"},
       .upstream_message = "",
       .check = checks::te_cp_shard,
       .apis = {Api::te_dot_product_attention}},
      {.number = 56, .id = "te.cp_chunks", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error",
       .statement = "rank r's rows hold chunks r and 2 x CP - 1 - r of every sequence (where the capture records it)",
       .when_broken = "chunks missing and duplicated across ranks: silently wrong output (measured on two GPUs)",
       .explanation =
           "The ring's causal sections assume the load-balanced layout: on rank r the first half of each sequence's "
           "rows is chunk r and the second half chunk 2 x CP - 1 - r. A data loader that splits each sequence into CP "
           "contiguous pieces instead hands rank r chunks 2r and 2r + 1: the step runs, and attends with the wrong "
           "causal structure while some chunks are held twice and others by nobody.",
       .fix = "Reorder the tokens with TE's thd_get_partitioned_indices (or Megatron's get_batch_on_this_cp_rank) "
              "before the forward.",
       .references = {"NVIDIA/TransformerEngine v2.12 .../context_parallel.py (get_seq_chunk_ids_for_reordering_after_attn)",
                      "NVIDIA/TransformerEngine PR#2129 (get_thd_batch_on_this_cp_rank)"},
       .upstream_message = "",
       .check = checks::te_cp_chunks,
       .apis = {Api::te_dot_product_attention}},
      {.number = 57, .id = "te.cp_group", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error (checked over the per-rank captures of one call: attn-doctor check with several files)",
       .statement = "the ranks of one context-parallel call pass the same global offsets and max_seqlen, each holds "
                    "the global padded total / CP rows, and together they hold every chunk of every sequence once",
       .when_broken = "silently wrong output on the ranks that disagree (measured on two GPUs)",
       .explanation =
           "Each rank's call can look right alone and the step still be wrong: ranks that computed their offsets "
           "from different batches, a rank given another shard size, two ranks holding the same chunk. The group "
           "check reads the captures of one call (context_parallel.call) side by side and names the rank, its file "
           "and the sequence at fault.",
       .fix = "Build the global offsets once and broadcast them; shard with TE's partitioned indices on every rank.",
       .references = {"NVIDIA/TransformerEngine v2.12 .../context_parallel.py (attn_forward_func_with_cp docstring)"},
       .upstream_message = "",
       .check = nullptr,
       .apis = {Api::te_dot_product_attention}},
      {.number = 58, .id = "te.sequences", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error for merged, split or dropped sequences and for padding real queries attend to; warning "
                        "for padding after a sequence that only causal queries of padding rows see (checked with an "
                        "explicit intent, one context, the intent in the packed rows)",
       .statement = "each sequence TE attends (cu_seqlens[i+1] - cu_seqlens[i] rows from cu_seqlens_padded[i]) is "
                    "exactly one intended sequence",
       .when_broken = "padding attended as tokens, or sequences merged or cut: silently wrong output",
       .explanation =
           "cu_seqlens_q holds the actual lengths and cu_seqlens_q_padded where each sequence starts; TE attends the "
           "actual rows and leaves the rest out. Nothing checks that the actual lengths are the caller's real "
           "sequences: a caller that passes its padded offsets as both arrays (with pad_between_seqs False) hands TE "
           "sequences that end in their padding. With a causal mask the real tokens never see the padding after them "
           "and only the padding rows' outputs are garbage; without one every query attends to it "
           "(NVIDIA-NeMo/RL PR#4070's review: the true offsets read, validated and never used).",
       .fix = "Pass the true cumulative lengths as cu_seqlens_q/kv and the padded ones as cu_seqlens_q/kv_padded, "
              "with pad_between_seqs = not torch.equal(cu_seqlens, cu_seqlens_padded).",
       .references = {"NVIDIA-NeMo/RL PR#4070", "NVIDIA-NeMo/RL PR#4105",
                      "NVIDIA/TransformerEngine v2.12 .../dot_product_attention.py (cu_seqlens_q, cu_seqlens_q_padded)"},
       .upstream_message = "",
       .check = checks::te_sequences,
       .apis = {Api::te_dot_product_attention}},
      {.number = 61, .id = "route.cu_seqlens_ignored", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error (silent cross-contamination)",
       .statement = "the attention mode that receives cu_seqlens (or position ids that restart per document) attends "
                    "within exactly the segments they give",
       .when_broken = "silently wrong output: tokens attend across the segment boundaries (padding included)",
       .explanation = cu_seqlens_ignored_joined().explanation,
       .fix = cu_seqlens_ignored_joined().fix,
       .references = cu_seqlens_ignored_joined().references,
       .upstream_message = "",
       .check = checks::route_cu_seqlens_ignored,
       .apis = kAllApis},
      // ---- FlashAttention-4's window (checks_kernel_values.cpp; docs/spec/flash-attn-features.md) -----
      {.number = 62, .id = "window.fa4_resolution", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error",
       .statement = "the window FA4 resolves from (causal, window_size) is the one flash-attn 2 and torch's varlen_attn "
                    "read from the same arguments (a negative side unlimited, causal = right side 0)",
       .when_broken = "silently wrong output: for (-1, 0) without causal=True, full attention (4.0.0b4 - 4.0.0b29) or "
                      "no key at all, zero rows (4.0.0b30 onward), both measured on an H100; from 4.0.0b30 also with "
                      "causal=True, which sets only the right side",
       .explanation =
           "FA4 spells an unlimited side None, not -1, and resolves the pair in _resolve_causal_local_window: up to "
           "4.0.0b29 a window whose two sides sum below 0 is no window, so (-1, 0) without causal=True, FA2's and "
           "torch's spelling of causal, attends to every key of the segment; from 4.0.0b30 only a pair with both "
           "sides negative is no window and any other is a local window of the ints passed, so (-1, 0) lets row i "
           "see keys i + 1 .. i, none, and every output row is zeros; causal=True then sets only the right side to 0 and "
           "keeps the -1, the same empty window. A negative side next to a non-negative one is subtracted as it is by "
           "the masks (flash_attn/cute/mask.py). Nothing raises either way.",
       .fix = "Pass causal=True for causal attention, and window_size=(None, None) or a pair of non-negative ints for "
              "a window; do not carry FA2's -1 over to FA4.",
       .references = {"flash-attn-4 4.0.0b4 - 4.0.0b29 flash_attn/cute/interface.py _resolve_causal_local_window "
                      "(window_size_left + window_size_right < 0)",
                      "flash-attn-4 4.0.0b30 - 4.0.0b36 flash_attn/cute/interface.py _resolve_causal_local_window "
                      "(window_size_left < 0 and window_size_right < 0)",
                      "measured: bench/results/fa4-h100-2026-11-27 (4.0.0b19, 4.0.0b26, 4.0.0b36 on an H100)"},
       .upstream_message = "",
       .check = checks::window_fa4_resolution,
       .apis = {Api::flash_attn_4_varlen, Api::flash_attn_4_dense}},
      // ---- FlashAttention-3's paged KV (checks_kernel_values.cpp; docs/spec/flash-attn-features.md) ------
      {.number = 63, .id = "page_table.index", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error",
       .statement = "every page a sequence's keys occupy is a page of k_cache: 0 <= page_table[b][p] < k_cache.shape[0]",
       .when_broken = "no error; the kernel reads k_cache / v_cache rows outside the pool (another allocation's values, "
                      "or an illegal memory access past the mapped memory)",
       .explanation =
           "With a page table, flash_attn_with_kvcache's kernel takes key j of sequence b from page page_table[b][j // "
           "page_size], row j % page_size, of k_cache and v_cache (hopper/paged_kv.h). mha_fwd checks the table's "
           "dtype and shape, never its values: an index at or past k_cache.shape[0], or a negative one, addresses "
           "rows outside the pool and the kernel reads them as keys and values. Every page holding one of the "
           "sequence's keys (seqused_k[b] of them, or the whole row without cache_seqlens) is counted; a window or "
           "attention_chunk that masks a whole page out may leave that page unread.",
       .fix = "Keep every used entry of page_table in [0, num_pages): allocate pages from k_cache's pool and reset a "
              "freed sequence's row instead of leaving stale or sentinel indices where its keys are counted.",
       .references = {"Dao-AILab/flash-attention v2.8.3 hopper/flash_api.cpp mha_fwd (page_table checks: device, dtype, "
                      "contiguity, shape)",
                      "Dao-AILab/flash-attention v2.8.3 hopper/paged_kv.h (page index from page_table, no bound)",
                      "Dao-AILab/flash-attention v2.8.3 hopper/flash_attn_interface.py flash_attn_with_kvcache"},
       .upstream_message = "",
       .check = checks::page_table_index,
       .apis = {Api::flash_attn_3_kvcache, Api::flash_attn_4_varlen}},
      {.number = 64, .id = "page_table.coverage", .group = G::conversion, .stage = "conversion",
       .severity_rule = "error",
       .statement = "seqused_k[b] (cache_seqlens) is at most the keys a page_table row holds: pages per sequence x "
                    "page_size",
       .when_broken = "no error; the sequence's last keys come from the next sequence's pages (attended silently) or, "
                      "for the last sequence, from past the end of page_table",
       .explanation =
           "The kernel takes sequence b's key count from seqused_k[b] and its page for key j from page_table[b][j // "
           "page_size] without comparing j // page_size with the row's length. page_table is contiguous, so an index "
           "past the row reads the next row: sequence b + 1's pages, whose keys and values sequence b then attends to; "
           "past the last row it reads whatever follows the table and uses it as a page index. mha_fwd checks "
           "seqused_k's shape and dtype only. FA2's flash_attn_with_kvcache had the same unchecked index in its split-KV "
           "kernel and checks max(cache_seqlens) against the table on the host since Dao-AILab/flash-attention PR#2711 "
           "(2026-07-16, after v2.8.3); hopper/flash_api.cpp has no such check (read at its 2026-08-15 state).",
       .fix = "Give page_table enough columns for the longest cache (ceil(max(cache_seqlens) / page_size)) and keep "
              "cache_seqlens[b] within the pages sequence b owns.",
       .references = {"Dao-AILab/flash-attention v2.8.3 hopper/flash_api.cpp mha_fwd (seqlen_k = max_num_pages_per_seq * "
                      "page_size; seqused_k shape check)",
                      "Dao-AILab/flash-attention v2.8.3 hopper/seqlen.h (seqlen_k = seqused_k[bidb])",
                      "Dao-AILab/flash-attention v2.8.3 hopper/paged_kv.h",
                      "Dao-AILab/flash-attention#2709, PR#2711 (the same index in FA2's mha_fwd_kvcache, checked from then)"},
       .upstream_message = "",
       .check = checks::page_table_coverage,
       .apis = {Api::flash_attn_3_kvcache, Api::flash_attn_4_varlen}},
  };
  return t;
}

}  // namespace

std::span<const Invariant> catalogue() { return table(); }

const Invariant* find_invariant(std::string_view id) {
  for (const auto& inv : table())
    if (inv.id == id) return &inv;
  return nullptr;
}

std::string closest_invariant_id(std::string_view id) {
  size_t best = static_cast<size_t>(-1);
  std::string out;
  for (const auto& inv : table()) {
    // distance to the whole id, or to its part after the dot (users type "kv_length")
    std::string_view tail = inv.id.substr(inv.id.find('.') + 1);
    size_t d = std::min(edit_distance(id, inv.id), edit_distance(id, tail));
    if (d < best) {
      best = d;
      out = std::string(inv.id);
    }
  }
  return out;
}

Violation make_violation(std::string_view id, Severity severity, std::string message, nlohmann::json evidence) {
  const Invariant* inv = find_invariant(id);
  if (!inv) throw std::logic_error("unknown invariant id: " + std::string(id));
  Violation v;
  v.id = std::string(inv->id);
  v.stage = std::string(inv->stage);
  v.severity = severity;
  v.message = std::move(message);
  v.evidence = std::move(evidence);
  v.explanation = std::string(inv->explanation.empty() ? inv->when_broken : inv->explanation);
  v.fix = std::string(inv->fix);
  for (auto r : inv->references) v.references.emplace_back(r);
  v.order = static_cast<int>(inv - table().data()) + 1;  // the table's order decides "first"
  return v;
}

}  // namespace ad
