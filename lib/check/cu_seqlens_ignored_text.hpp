// 61 route.cu_seqlens_ignored speaks for two frameworks whose attention drops the boundaries it
// is given: HunyuanVideo's attention modes and axolotl's batch ring adapters. The catalogue entry
// joins their texts (docs, `explain`); a violation carries its own framework's (checks_route.cpp).
#pragma once

#include <string_view>
#include <vector>

namespace ad::checks {

struct FrameworkText {
  std::string_view explanation;
  std::string_view fix;
  std::vector<std::string_view> references;
};

inline const FrameworkText& hunyuanvideo_cu_seqlens_text() {
  static const FrameworkText t{
      "A framework's attention function that takes cu_seqlens for its flash-attn mode may have other modes that "
      "do not pass them on. HunyuanVideo's attention() (hyvideo/modules/attenion.py) gets one valid and one "
      "padding segment per row from get_cu_seqlens; its \"vanilla\" mode runs plain attention over each whole "
      "row, and its \"torch\" mode splits every row at cu_seqlens_q[1], right only for batch size 1. Valid "
      "tokens then attend to padding, with no error (the quality loss of Tencent-Hunyuan/HunyuanVideo#296).",
      "Use the flash mode, or build the block-diagonal mask (or the per-row split) from every cu_seqlens entry, "
      "as Tencent-Hunyuan/HunyuanVideo PR#310 does.",
      {"Tencent-Hunyuan/HunyuanVideo PR#310", "Tencent-Hunyuan/HunyuanVideo#296"}};
  return t;
}

inline const FrameworkText& axolotl_cu_seqlens_text() {
  static const FrameworkText t{
      "axolotl 0.9.0 - 0.19.0 run context parallelism through ring-flash-attn, picked by ring_attn_func, which "
      "defaults to batch_ring whenever sample_packing is off (validate_ring_attn_func). The batch adapter "
      "(monkeypatch/ring_attn/adapters/batch.py) replaces transformers' _flash_attention_forward and calls "
      "ring_flash_attn_func(q, k, v, causal=...) with no cu_seqlens: position_ids and cu_seq_lens_* are documented "
      "as not used. A pre-packed row of several documents (position ids restarting at each) is then attended as "
      "one causal sequence across the ranks, with no error: the step-0 loss was 1.84x the one at context parallel "
      "size 1 in axolotl-ai-cloud/axolotl#3608, while varlen_llama3, which derives cu_seqlens from the position "
      "ids for llama3_flash_attn_varlen_func, matched it and a one-document row was bitwise identical.",
      "Set ring_attn_func: varlen_llama3 for rows that pack several documents (sample_packing: true selects it by "
      "default); batch_ring is right only for rows of one document. axolotl-ai-cloud/axolotl PR#4002 (open) "
      "proposes to raise on such rows under batch_ring.",
      {"axolotl-ai-cloud/axolotl#3608", "axolotl-ai-cloud/axolotl PR#4002",
       "axolotl-ai-cloud/axolotl v0.18.0 src/axolotl/monkeypatch/ring_attn/adapters/batch.py"}};
  return t;
}

}  // namespace ad::checks
