// `_upad_input`: the attention-mask route of every transformers release (per-model copies up
// to 4.42, transformers/modeling_flash_attention_utils.py from 4.43), and flash-attn's
// `bert_padding.unpad_input` which it calls for a partial query.
#include "convert/replay.hpp"

namespace ad::replay {
namespace {

bool flash_attn_returns_five(const Version& v) { return v >= version_literal("2.7.0"); }

}  // namespace

VarlenArgs upad_input(const Call& c, const UpadOptions& o) {
  const MaskTensor& mask = *c.mask;
  VarlenArgs a;
  const bool patched = !c.unpad_patch.empty() && mask.rank() == 2;
  UnpadData k = patched ? patched_unpad_data(mask, c.unpad_patch) : unpad_data(mask);
  a.unpad_mask_shape = mask.shape;
  if (k.pad_raises) {
    // _get_unpad_data raises before returning: nothing of the key side exists
    a.path = VarlenPath::mask;
    a.failure = pad_of_0d_failure(o.unpack_where + " > _get_unpad_data");
    a.steps.push_back("_get_unpad_data on a rank-1 mask: its lengths are 0-d, so F.pad(cumsum(lengths), (1, 0)) raises");
    return a;
  }
  int64_t kv_len = c.kv_length;
  if (o.truncate_keys_to_mask && kv_len > mask.dim(-1)) {
    kv_len = mask.dim(-1);
    a.steps.push_back("keys longer than the mask: cut to its last dimension (" + std::to_string(kv_len) + ")");
  }
  set_key_side(a, k, rows(c.batch, kv_len),
               // the trainer's replacement returns max().item(), a host value, whatever the release
               o.max_as_tensor && !patched ? MaxSeqlen{k.max_seqlen, true, DType::int32}
                                           : MaxSeqlen{k.max_seqlen, false, DType::int64});
  if (patched)
    a.steps.push_back("_get_unpad_data is the trainer's " + c.unpad_patch + ": indices_k = nonzero(mask.flatten()) (" +
                      std::to_string(k.indices.numel()) + "), cu_seqlens_k = pad(cumsum(the " +
                      (c.unpad_patch == "axolotl.get_unpad_data@0.18" ? "length of each run of equal ids"
                                                                      : "count of each segment id") +
                      " per row" + (mask.boolean && c.unpad_patch.rfind("llamafactory", 0) == 0
                                       ? ", held in the bool mask's dtype: 1 each" : "") + "))");
  else
    a.steps.push_back("indices_k = nonzero(mask.flatten()) (" + std::to_string(k.indices.numel()) +
                      "), cu_seqlens_k = pad(cumsum(mask.sum(-1)))");
  if (auto f = gather_failure(k.indices, a.gather_rows_k, o.key_gather, o.key_gather_where)) {
    a.failure = f;
    a.steps.push_back("the key gather reads past the (B*Lk) = " + std::to_string(a.gather_rows_k) + " rows");
    return a;
  }
  if (c.query_length == kv_len) {
    set_queries_like_keys(a);
    a.steps.push_back("Lq == Lk: queries gathered with the key indices");
    return a;
  }
  if (c.query_length == 1) {
    set_one_query_per_row(a, c.batch);
    a.steps.push_back("Lq == 1: one query per row, cu_seqlens_q = arange(B + 1); the mask is ignored for queries");
    return a;
  }
  // partial query: mask[:, -Lq:] (left padding assumed), then flash-attn's unpad_input on q
  MaskTensor qmask = mask.last_columns_dim1(c.query_length);
  UnpadData q = unpad_data(qmask);
  a.indices_q = q.indices;
  a.cu_seqlens_q = q.cu_seqlens;
  a.max_seqlen_q = {q.max_seqlen, false, DType::int64};
  a.gather_rows_q = rows(c.batch, c.query_length);
  a.total_q = q.indices.numel();
  a.steps.push_back("1 < Lq < Lk: queries unpadded with mask[:, -" + std::to_string(c.query_length) +
                    ":] (assumes left padding) by flash_attn.bert_padding.unpad_input");
  if (auto f = gather_failure(q.indices, a.gather_rows_q, GatherKind::torch_gather,
                              "_flash_attention_forward > _upad_input > unpad_input > index_first_axis")) {
    a.failure = f;
    return a;
  }
  if (o.unpack_four && flash_attn_returns_five(c.flash_attn)) {
    a.failure = raised(o.unpack_where, "ValueError", "too many values to unpack (expected 4)",
                       "the same ValueError (raised on the host before any kernel)");
    a.steps.push_back("flash-attn " + c.flash_attn.text + " unpad_input returns 5 values; this release unpacks 4");
  }
  return a;
}

}  // namespace ad::replay
