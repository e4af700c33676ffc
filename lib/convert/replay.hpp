// Building blocks the rule sets compose (internal to lib/convert; the public interface is
// convert.hpp). Every block reproduces one helper of the replayed libraries, with the dtype,
// shape and failure the real helper produces on the CPU (the goldens under tests/golden/ are
// the proof; docs/spec/conversions.md names the release each behaviour belongs to).
//
// Shapes follow the libraries: q (B, Lq, H, D), k/v (B, Lk, Hk, D), mask (B, W) or (B, 1, Q, K),
// position ids (B, S), (S) or (3, B, S).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "convert/convert.hpp"

namespace ad::replay {

// A mask tensor as torch sees it. `style` tells how an entry reads: its value (0/1, booleans,
// segment ids), or, for an additive float mask, 1 where the dtype minimum sits (masked).
struct MaskTensor {
  std::vector<int64_t> shape;
  std::vector<int64_t> values;
  MaskStyle style = MaskStyle::values;
  bool boolean = false;  // a torch.bool tensor (the model's mask preparation cast it)

  int rank() const { return static_cast<int>(shape.size()); }
  int64_t dim(int i) const { return shape.at(static_cast<size_t>(i < 0 ? rank() + i : i)); }
  bool nonzero(size_t i) const { return values[i] != 0; }
  // the entry converted to int32 by `sum(dtype=torch.int32)`: the additive mask's dtype minimum
  // (-3.39e38) converts to INT32_MIN on x86 and on CUDA alike
  int32_t as_int32(size_t i) const;
  // mask[:, -n:] (dimension 1, as torch slices it whatever the rank)
  MaskTensor last_columns_dim1(int64_t n) const;
  bool all_nonzero() const;
};

MaskTensor mask_tensor(const Mask& m);

// The call as it reaches the release's attention entry point (`_flash_attention_forward`).
struct Call {
  int64_t batch = 0, query_length = 0, kv_length = 0;
  int64_t heads = 0, kv_heads = 0, head_dim = 0;
  std::optional<MaskTensor> mask;
  std::optional<IntTensor> position_ids;
  std::optional<FlashKwargs> kwargs;
  std::optional<int64_t> sliding_window;
  std::optional<double> softcap;
  bool causal = true;
  double dropout = 0.0;
  Version flash_attn;  // the flash-attn release whose bert_padding.unpad_input is used
  // dtypes of the caller's cu_seq_lens_q/k tensors (batch `tensors` overrides): the kwargs
  // path hands them to flash-attn as they are; int32 when not said (what a collator builds)
  DType kwargs_dtype_q = DType::int32, kwargs_dtype_k = DType::int32;
  // the trainer's replacement of transformers' _get_unpad_data (CollatorRecord::unpad_patch)
  std::string unpad_patch;
};

Call call_from_batch(const Batch& batch, const std::optional<Version>& flash_attn);

IntTensor int_tensor(std::vector<int64_t> values, DType dtype, std::vector<int64_t> shape = {});

// ---- unpadding ---------------------------------------------------------------------------

// `_get_unpad_data` / flash-attn `unpad_input` bookkeeping: lengths = mask.sum(-1, int32) (with
// int32 wraparound), indices = nonzero(mask.flatten()) (int64), cu_seqlens = pad(cumsum(lengths,
// dim 0, int32), (1, 0)) — shape mask.shape[:-1] with the last dimension + 1, so a 4-D mask gives
// (B, 1, Q + 1) — and max_seqlen = lengths.max().item() (host int).
// A rank-1 mask (S,) sums to a 0-d tensor; cumsum keeps it 0-d and F.pad(x, (1, 0)) on it raises
// (`pad_raises`): the helper returns nothing, and no cu_seqlens exists.
struct UnpadData {
  IntTensor indices;
  IntTensor cu_seqlens;
  int64_t max_seqlen = 0;
  std::vector<int64_t> lengths;
  bool pad_raises = false;
};
UnpadData unpad_data(const MaskTensor& mask);
// The _get_unpad_data a packing trainer installs in transformers (`patch` as in
// CollatorRecord::unpad_patch): lengths = for each row, the count of each segment id
// 1 .. max(mask), the zero counts dropped, one after the other; cu_seqlens = pad(cumsum(lengths),
// (1, 0)) int32 (1-D); indices = nonzero(mask.flatten()). axolotl <= 0.17's get_unpad_data counts
// into int32; LlamaFactory's get_seqlens_in_batch into the mask's dtype, so on a bool mask every
// count becomes True: one token per row, and max_seqlen is True
// (tests/golden/collate-axolotl-*.json, tests/golden/unpad-llamafactory-*.json).
// "axolotl.get_unpad_data@0.18" (axolotl >= 0.18's rewrite): lengths = per row, the length of
// each run of equal ids, the runs of 0 dropped. A 2-D mask.
UnpadData patched_unpad_data(const MaskTensor& mask, const std::string& patch);
// The RuntimeError torch raises for F.pad(x, (1, 0)) on a 0-d x, raised inside `where`.
ReplayFailure pad_of_0d_failure(const std::string& where);

// How the gather of rows with unpad indices fails, by the helper that does it:
//  - torch.gather (flash-attn's and FLA's index_first_axis): RuntimeError
//  - tensor[indices] (transformers >= 4.53 `_index_first_axis`): IndexError
enum class GatherKind { torch_gather, indexing };
// The first index out of [0, rows), as torch reports it.
std::optional<ReplayFailure> gather_failure(const IntTensor& indices, int64_t rows, GatherKind kind,
                                            const std::string& where);

// The arguments as they reached flash-attn, assembled by the paths below.
VarlenArgs dense_call(const Call& c);

// The key side of a mask-path call: indices, cu_seqlens and max from the mask's bookkeeping,
// gathered from `gather_rows` rows.
void set_key_side(VarlenArgs& a, const UnpadData& k, int64_t gather_rows, MaxSeqlen max);
// Lq == 1: one query per row, cu_seqlens_q = arange(B + 1) int32, indices_q = cu_q[:-1] (int32),
// max_seqlen_q = 1; the mask is not looked at for queries.
void set_one_query_per_row(VarlenArgs& a, int64_t batch);
// Lq == Lk: queries gathered with the key indices.
void set_queries_like_keys(VarlenArgs& a);

// ---- kernel flags ------------------------------------------------------------------------

enum class WindowRule { none, w_w, w1_w1 };  // not passed; (W, W) until 4.55; (W-1, W-1) from 4.56
void apply_kernel_flags(VarlenArgs& a, const Call& c, WindowRule window, bool passes_softcap);

// ---- position ids ------------------------------------------------------------------------

enum class Boundary { zero, minimum };
enum class MaxRule { plus_one_tensor, diff_item, diff_tensor };
// The packed path: q/k/v viewed as (B * L) rows, position ids flattened, a sequence starting at
// every position equal to the boundary value, cu = [those indices..., numel] as int32.
// `where` names the helper that raises when no position equals the boundary (diff rules).
VarlenArgs packed_from_position_ids(const Call& c, Boundary boundary, MaxRule max_rule, const std::string& where);

// ---- the attention-mask path (`_upad_input`) ---------------------------------------------

struct UpadOptions {
  bool truncate_keys_to_mask = false;  // >= 4.53: keys cut to the mask's last dimension
  GatherKind key_gather = GatherKind::torch_gather;
  std::string key_gather_where = "_flash_attention_forward > _upad_input > index_first_axis";
  bool unpack_four = false;            // <= 4.48: `a, b, c, d = unpad_input(...)`
  bool max_as_tensor = false;          // 5.4 - 5.13: `_get_unpad_data` keeps max() a 0-d int32 tensor
  std::string unpack_where = "_flash_attention_forward > _upad_input";
};
// Keys and values gathered with the mask's indices; queries gathered with the same indices
// (Lq == Lk), taken one per row (Lq == 1, the mask ignored), or unpadded with mask[:, -Lq:]
// through flash-attn's unpad_input (anything else: assumes left padding).
VarlenArgs upad_input(const Call& c, const UpadOptions& o);

// rows of a tensor of shape (B, L, ...) viewed as (-1, H, D)
inline int64_t rows(int64_t batch, int64_t length) { return batch * length; }

// A Python exception raised by the release, as a failure record.
ReplayFailure raised(std::string where, std::string type, std::string message, std::string cuda_symptom = "");

}  // namespace ad::replay
