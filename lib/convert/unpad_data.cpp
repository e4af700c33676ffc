// The shared building blocks of every replayed conversion: the mask bookkeeping
// (`_get_unpad_data`, flash-attn's `unpad_input`), the row gather's failure, the key/query sides
// of a mask-path call and the kernel flags. Linear in mask entries; nothing proportional to
// B*S*H*D is allocated.
#include <algorithm>
#include <limits>
#include <stdexcept>

#include "convert/replay.hpp"

namespace ad::replay {

int32_t MaskTensor::as_int32(size_t i) const {
  if (style == MaskStyle::additive) return values[i] != 0 ? std::numeric_limits<int32_t>::min() : 0;
  return static_cast<int32_t>(static_cast<uint32_t>(values[i]));
}

MaskTensor MaskTensor::last_columns_dim1(int64_t n) const {
  if (rank() < 2) throw std::logic_error("mask[:, -n:] needs a mask of rank >= 2");
  const int64_t d1 = shape[1];
  const int64_t keep = std::min(n, d1);  // python slicing clamps
  int64_t inner = 1;
  for (int i = 2; i < rank(); ++i) inner *= shape[static_cast<size_t>(i)];
  MaskTensor out;
  out.style = style;
  out.shape = shape;
  out.shape[1] = keep;
  out.values.reserve(static_cast<size_t>(shape[0] * keep * inner));
  for (int64_t b = 0; b < shape[0]; ++b) {
    auto row = values.begin() + (b * d1 + (d1 - keep)) * inner;
    out.values.insert(out.values.end(), row, row + keep * inner);
  }
  return out;
}

bool MaskTensor::all_nonzero() const {
  return std::all_of(values.begin(), values.end(), [](int64_t v) { return v != 0; });
}

MaskTensor mask_tensor(const Mask& m) {
  MaskTensor t;
  t.shape = m.tensor.shape;
  t.values = m.tensor.values;
  t.style = m.style;
  t.boolean = m.tensor.dtype == DType::boolean;
  return t;
}

IntTensor int_tensor(std::vector<int64_t> values, DType dtype, std::vector<int64_t> shape) {
  IntTensor t;
  t.shape = shape.empty() ? std::vector<int64_t>{static_cast<int64_t>(values.size())} : std::move(shape);
  t.values = std::move(values);
  t.dtype = dtype;
  return t;
}

Call call_from_batch(const Batch& batch, const std::optional<Version>& flash_attn) {
  Call c;
  const BatchInputs& in = *batch.batch;
  c.batch = in.batch_size;
  c.query_length = in.query_length;
  c.kv_length = in.kv_length;
  c.heads = batch.model.num_heads;
  c.kv_heads = batch.model.num_kv_heads;
  c.head_dim = batch.model.head_dim;
  if (in.attention_mask) c.mask = mask_tensor(*in.attention_mask);
  if (in.position_ids) c.position_ids = in.position_ids->tensor;
  c.kwargs = in.flash_kwargs;
  c.sliding_window = batch.model.sliding_window;
  c.softcap = batch.model.softcap;
  c.causal = batch.model.causal;
  c.dropout = batch.model.dropout;
  c.flash_attn = flash_attn ? *flash_attn : version_literal("2.6.3");
  if (const auto* o = batch.override_for("cu_seqlens_q"); o && o->dtype) c.kwargs_dtype_q = *o->dtype;
  if (const auto* o = batch.override_for("cu_seqlens_k"); o && o->dtype) c.kwargs_dtype_k = *o->dtype;
  if (batch.collator) c.unpad_patch = batch.collator->unpad_patch;
  return c;
}

UnpadData patched_unpad_data(const MaskTensor& mask, const std::string& patch) {
  if (mask.rank() != 2) throw std::logic_error("patched_unpad_data: a 2-D mask");
  const int64_t rows = mask.dim(0), width = mask.dim(1);
  const bool counts_as_bool = patch == "llamafactory.get_unpad_data" && mask.boolean;
  UnpadData u;
  std::vector<int64_t> index_values;
  if (patch == "axolotl.get_unpad_data@0.18") {
    // axolotl >= 0.18: a run starts at each row's start and where the id changes; the runs of
    // 0 (padding) are dropped
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < width; ++c) {
        const size_t i = static_cast<size_t>(r * width + c);
        if (mask.nonzero(i)) index_values.push_back(static_cast<int64_t>(i));
        const bool start = c == 0 || mask.values[i] != mask.values[i - 1];
        if (start && mask.values[i] != 0) u.lengths.push_back(0);
        if (mask.values[i] != 0) ++u.lengths.back();
      }
  }
  for (int64_t r = 0; r < rows && patch != "axolotl.get_unpad_data@0.18"; ++r) {
    // the count of each id 1 .. max in the row, ids ascending (an id with no token counts 0 and
    // is dropped), so only the ids present matter
    std::vector<int64_t> row_ids;
    for (int64_t c = 0; c < width; ++c) {
      const size_t i = static_cast<size_t>(r * width + c);
      if (mask.nonzero(i)) index_values.push_back(static_cast<int64_t>(i));
      if (mask.values[i] >= 1) row_ids.push_back(mask.values[i]);
    }
    std::sort(row_ids.begin(), row_ids.end());
    for (size_t a = 0; a < row_ids.size();) {
      size_t b = a;
      while (b < row_ids.size() && row_ids[b] == row_ids[a]) ++b;
      u.lengths.push_back(counts_as_bool ? 1 : static_cast<int64_t>(b - a));
      a = b;
    }
  }
  u.indices = int_tensor(std::move(index_values), DType::int64);
  u.max_seqlen = u.lengths.empty() ? 0 : *std::max_element(u.lengths.begin(), u.lengths.end());
  std::vector<int64_t> cu{0};
  uint32_t sum = 0;
  for (int64_t l : u.lengths) {
    sum += static_cast<uint32_t>(l);
    cu.push_back(static_cast<int32_t>(sum));
  }
  u.cu_seqlens = int_tensor(std::move(cu), DType::int32);
  return u;
}

UnpadData unpad_data(const MaskTensor& mask) {
  if (mask.rank() < 1) throw std::logic_error("unpad_data: a mask of rank >= 1");
  const int64_t last = mask.dim(-1);
  const int64_t outer = last == 0 ? 0 : static_cast<int64_t>(mask.values.size()) / last;  // prod(shape[:-1])
  UnpadData u;
  // lengths: sum over the last axis after the int32 cast, wrapping like int32 does
  u.lengths.resize(static_cast<size_t>(outer));
  std::vector<int64_t> index_values;
  for (int64_t r = 0; r < outer; ++r) {
    uint32_t sum = 0;
    for (int64_t c = 0; c < last; ++c) {
      size_t i = static_cast<size_t>(r * last + c);
      sum += static_cast<uint32_t>(mask.as_int32(i));
      if (mask.nonzero(i)) index_values.push_back(static_cast<int64_t>(i));
    }
    u.lengths[static_cast<size_t>(r)] = static_cast<int32_t>(sum);
  }
  u.indices = int_tensor(std::move(index_values), DType::int64);
  // max over every length (a 0-d reduction), as a host int
  u.max_seqlen = u.lengths.empty() ? 0 : *std::max_element(u.lengths.begin(), u.lengths.end());
  if (mask.rank() == 1) {
    // lengths are 0-d: torch.cumsum(lengths, dim=0) stays 0-d and F.pad(.., (1, 0)) pads one
    // dimension more than it has, which raises before the helper returns anything
    u.pad_raises = true;
    return u;
  }
  // cumsum along dimension 0 of lengths (shape mask.shape[:-1]), int32, then a 0 in front of the
  // last dimension
  std::vector<int64_t> lshape(mask.shape.begin(), mask.shape.end() - 1);
  const int64_t d0 = lshape.empty() ? 1 : lshape[0];
  const int64_t stride0 = d0 == 0 ? 0 : outer / d0;  // elements per index of dimension 0
  std::vector<uint32_t> cum(static_cast<size_t>(outer));
  for (int64_t i = 0; i < outer; ++i) {
    uint32_t v = static_cast<uint32_t>(static_cast<int32_t>(u.lengths[static_cast<size_t>(i)]));
    cum[static_cast<size_t>(i)] = i >= stride0 ? cum[static_cast<size_t>(i - stride0)] + v : v;
  }
  const int64_t lastdim = lshape.empty() ? 1 : lshape.back();
  const int64_t groups = lastdim == 0 ? 0 : outer / lastdim;
  std::vector<int64_t> cu;
  cu.reserve(static_cast<size_t>(groups * (lastdim + 1)));
  for (int64_t g = 0; g < groups; ++g) {
    cu.push_back(0);
    for (int64_t j = 0; j < lastdim; ++j) cu.push_back(static_cast<int32_t>(cum[static_cast<size_t>(g * lastdim + j)]));
  }
  std::vector<int64_t> cshape = lshape.empty() ? std::vector<int64_t>{2} : lshape;
  if (!lshape.empty()) cshape.back() += 1;
  u.cu_seqlens = int_tensor(std::move(cu), DType::int32, cshape);
  return u;
}

std::optional<ReplayFailure> gather_failure(const IntTensor& indices, int64_t rows_available, GatherKind kind,
                                            const std::string& where) {
  for (int64_t idx : indices.values) {
    if (idx >= 0 && idx < rows_available) continue;
    return raised(where, kind == GatherKind::torch_gather ? "RuntimeError" : "IndexError",
                  "index " + std::to_string(idx) + " is out of bounds for dimension 0 with size " +
                      std::to_string(rows_available),
                  "device-side assert in the gather (ScatterGatherKernel.cu / IndexKernel.cu: "
                  "\"index out of bounds\"), then \"CUDA error: device-side assert triggered\"");
  }
  return std::nullopt;
}

ReplayFailure pad_of_0d_failure(const std::string& where) {
  // torch's _pad_enum (aten/src/ATen/native/PadNd.cpp) checks pad.size() <= 2 * input.dim(),
  // in this wording since the check names the sizes (older torch: "Padding length too large");
  // the message measured with transformers 4.38.2 - 5.24.0 on the CPU
  return raised(where, "RuntimeError",
                "Padding length should be less than or equal to two times the input dimension but got padding "
                "length 2 and input of dimension 0");
}

ReplayFailure raised(std::string where, std::string type, std::string message, std::string cuda_symptom) {
  ReplayFailure f;
  f.where = std::move(where);
  f.type = std::move(type);
  f.message = std::move(message);
  f.cuda_symptom = std::move(cuda_symptom);
  return f;
}

VarlenArgs dense_call(const Call& c) {
  (void)c;
  VarlenArgs a;
  a.path = VarlenPath::dense;
  a.call.api = Api::flash_attn_2_dense;
  a.steps.push_back("no mask and no varlen route: flash_attn_func on the padded (B, L, H, D) tensors");
  return a;
}

void set_key_side(VarlenArgs& a, const UnpadData& k, int64_t gather_rows, MaxSeqlen max) {
  a.path = VarlenPath::mask;
  a.indices_k = k.indices;
  a.cu_seqlens_k = k.cu_seqlens;
  a.max_seqlen_k = max;
  a.gather_rows_k = gather_rows;
  a.total_k = k.indices.numel();
}

void set_one_query_per_row(VarlenArgs& a, int64_t batch) {
  std::vector<int64_t> ar;
  for (int64_t i = 0; i <= batch; ++i) ar.push_back(i);
  a.cu_seqlens_q = int_tensor(ar, DType::int32);
  ar.pop_back();
  a.indices_q = int_tensor(ar, DType::int32);
  a.max_seqlen_q = {1, false, DType::int64};
  a.gather_rows_q = batch;
  a.total_q = batch;
}

void set_queries_like_keys(VarlenArgs& a) {
  a.indices_q = a.indices_k;
  a.cu_seqlens_q = a.cu_seqlens_k;
  a.max_seqlen_q = a.max_seqlen_k;
  a.gather_rows_q = a.gather_rows_k;
  a.total_q = a.total_k;
}

void apply_kernel_flags(VarlenArgs& a, const Call& c, WindowRule window, bool passes_softcap) {
  a.call.causal = c.causal;
  a.call.dropout = c.dropout;
  a.call.window_left = a.call.window_right = -1;
  // transformers passes a window only when the key length exceeds it
  if (window != WindowRule::none && c.sliding_window && c.kv_length > *c.sliding_window) {
    int64_t w = *c.sliding_window - (window == WindowRule::w1_w1 ? 1 : 0);
    a.call.window_left = a.call.window_right = w;
  }
  if (passes_softcap) a.call.softcap = c.softcap;
}

}  // namespace ad::replay
