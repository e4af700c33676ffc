// Gemma-2 (model.architecture "gemma2") with flash_attention_2 in generate: what the first
// sliding-window layer hands to `_flash_attention_forward`, per era of the model and generate
// code. The batch describes the model's inputs: the 2-D mask generate holds (width
// past_length + Lq), Lq, the cache (`cache.past_length`, `cache.max_cache_len`) and the window W.
// Every era below is observed in tests/golden/gemma2-generate-<release>.json (a tiny random
// Gemma-2 generating on the real releases; call 0 = prefill, call 2 = first decode step of layer 0).
//
//  4.42      Gemma2FlashAttention2 calls is_flash_attn_greater_or_equal, broken in 4.42.x: the
//            parameter `version` shadows the packaging module -> AttributeError.
//  4.43      the mask reaches the conversion unchanged; keys: all of them in prefill, the W
//            cached ones when decoding; no window passed -> decode gathers past the keys.
//  4.44.0    prepare_inputs_for_generation builds a 4-D (B, 1, Lq, max_cache_len) mask for the
//            hybrid cache and the layer cuts keys to attention_mask.shape[1] == 1: the unpad gather
//            reads past B rows (transformers#32309, flash-attention#1156).
//  4.44.1-   (PR #32522) a 2-D mask again, cut to its last W columns; keys = the W cached ones;
//  4.46      queries all Lq: a prefill longer than W takes the partial-query path (silently
//            wrong: queries of one row are split across rows), no crash.
//  4.47      the attention integration reads module._flash_attn_uses_top_left_mask, which
//            Gemma2Attention lacks -> AttributeError before the conversion.
//  4.48.0-   the sliding cache is written with _static_update: IndexError once a position reaches W.
//  4.48.1
//  4.48.2-   prefill keeps the whole mask and all keys, window (W, W) passed; decode: last W
//            columns and the W cached keys.
//  4.52      a 4-D (B, 1, Lq, max_cache_len - 1) mask reaches the conversion again (observed with
//            torch 2.6; 4.52 cannot build the model on torch 2.4).
//  4.53-     prefill as 4.47; decode: the sliding mask is dropped when its last W columns are all
//            ones (None reaches the conversion), keys = W; position ids are passed.
//  4.54      as 4.53, and generate adds cu_seq_lens_q/k, max_length_q/k built from the last
//            position ids with cumsum before the + 1 (cu_k = [0, p0 + 1, p0 + p1 + 1, ...]): the
//            decode step of the sliding layer takes the kwargs route with cu_k past the W keys.
#include <algorithm>

#include "convert/rules.hpp"
#include "vocab/host_checks.hpp"
#include "util/checked_math.hpp"

namespace ad::replay {
namespace {

// generate's position ids: cumsum(mask) - 1, padded slots 1; the last Lq columns.
IntTensor generate_position_ids(const MaskTensor& mask, int64_t query_length) {
  const int64_t B = mask.dim(0), S = mask.dim(1);
  std::vector<int64_t> out;
  for (int64_t b = 0; b < B; ++b) {
    int64_t acc = 0;
    for (int64_t s = 0; s < S; ++s) {
      int64_t v = mask.values[static_cast<size_t>(b * S + s)] != 0;
      acc += v;
      if (s >= S - query_length) out.push_back(v ? acc - 1 : 1);
    }
  }
  return int_tensor(out, DType::int64, {B, std::min(S, query_length)});
}

// (B, 1, Lq, K) additive: query q sits at absolute position S - Lq + q of the 2-D mask (width S);
// key j attended when j < S, the mask has it and j <= that position.
MaskTensor four_d_from(const MaskTensor& mask, int64_t query_length, int64_t key_width) {
  const int64_t B = mask.dim(0), S = mask.dim(1);
  MaskTensor out;
  out.style = MaskStyle::additive;
  out.shape = {B, 1, query_length, key_width};
  out.values.reserve(static_cast<size_t>(B * query_length * key_width));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t q = 0; q < query_length; ++q)
      for (int64_t j = 0; j < key_width; ++j) {
        bool attended = j < S && mask.values[static_cast<size_t>(b * S + j)] != 0 && j <= S - query_length + q;
        out.values.push_back(attended ? 0 : 1);
      }
  return out;
}

// The 4-D masks of 4.44.0 and 4.52 have B x Lq x max_cache_len entries: three numbers of the
// batch, not its elements (a 2 x 24 mask with Lq = 2^20 and a cache of 124 gives 2.6e8). Past
// the element cap every array of the batch is held to (LoadLimits::max_array_elements, 2^25 by
// default) the replay does not build the mask: it says what the release does with it, from the
// entries the gather reads, which it finds without enumerating them.
bool four_d_within_cap(const Batch& batch, const MaskTensor& mask, int64_t query_length, int64_t key_width) {
  const auto entries = checked::product({mask.dim(0), query_length, key_width});
  return entries && *entries <= batch.max_array_elements;
}

// The first entry of four_d_from(mask, Q, K), flattened, that is masked (what
// nonzero(mask.flatten()) lists for an additive mask) at or past flat index `from`, found
// without enumerating the entries. Row (b, q) attends key j when j < lim(q) = min(K, S, S - Q +
// q + 1) and the 2-D mask has it, so its first masked key at or past j0 is the 2-D row's next
// zero before lim(q), else lim(q) when lim(q) < K. A row with none attends all K keys, and so
// does every later row of the same b (lim only grows with q): the walk jumps to the next b.
// Work: O(B x S) for the next-zero table and O(B) rows.
std::optional<int64_t> first_masked_from(const MaskTensor& mask, int64_t Q, int64_t K, int64_t from) {
  const int64_t B = mask.dim(0), S = mask.dim(1);
  if (K <= 0 || Q <= 0 || from < 0) return std::nullopt;
  std::vector<int64_t> next_zero(static_cast<size_t>(B * (S + 1)));
  for (int64_t b = 0; b < B; ++b) {
    int64_t* nz = next_zero.data() + b * (S + 1);
    nz[S] = S;
    for (int64_t j = S - 1; j >= 0; --j) nz[j] = mask.values[static_cast<size_t>(b * S + j)] == 0 ? j : nz[j + 1];
  }
  int64_t row = from / K, j0 = from % K;
  while (row < B * Q) {
    const int64_t b = row / Q, q = row % Q;
    const int64_t lim = std::clamp<int64_t>(std::min({K, S, S - Q + q + 1}), 0, K);
    std::optional<int64_t> j;
    if (j0 >= lim) j = j0;
    else if (const int64_t z = next_zero[static_cast<size_t>(b * (S + 1) + j0)]; z < lim) j = z;
    else if (lim < K) j = lim;
    if (j) {
      const auto flat = checked::mul(row, K);
      return flat ? checked::add(*flat, *j) : std::nullopt;
    }
    row = j0 == 0 ? (b + 1) * Q : row + 1;
    j0 = 0;
  }
  return std::nullopt;
}

// The release's 4-D mask, too large to build: what unpadding it does. `_get_unpad_data` lists
// its masked entries and the key gather of `gather_rows` rows fails at the first one past them
// (transformers#32309: "index out of bounds"); if none is, flash-attn rejects the cu_seqlens of
// shape (B, 1, Lq + 1) (flash-attention#742).
ReplayFailure unbuilt_four_d_failure(const MaskTensor& mask, int64_t Q, int64_t K, int64_t gather_rows) {
  if (auto first = first_masked_from(mask, Q, K, gather_rows))
    return raised("_flash_attention_forward > _upad_input > index_first_axis", "RuntimeError",
                  "index " + std::to_string(*first) + " is out of bounds for dimension 0 with size " +
                      std::to_string(gather_rows),
                  "device-side assert in the gather (ScatterGatherKernel.cu / IndexKernel.cu: "
                  "\"index out of bounds\"), then \"CUDA error: device-side assert triggered\"");
  const HostCheckEntry& shape = *fa2_host_checks().find(HostCheck::cu_seqlens_q_shape);
  return raised("flash_attn_varlen_func > mha_varlen_fwd", std::string(shape.type), std::string(shape.message),
                "the same RuntimeError (host side, before any kernel)");
}

std::string unbuilt_note(const Batch& batch, const MaskTensor& mask, int64_t Q, int64_t K) {
  const auto entries = checked::product({mask.dim(0), Q, K});
  return "the (B, 1, Lq, " + std::to_string(K) + ") mask has " + (entries ? std::to_string(*entries) : "more than 2^63") +
         " entries, past the " + std::to_string(batch.max_array_elements) +
         " attn-doctor builds: not built; what its unpad does follows from the entries the gather reads";
}

}  // namespace

// A forward without a cache (training, scoring): only 4.44.0 differs from the plain replay.
// Its Gemma2DecoderLayer cuts the 2-D flash-attention mask to the last W columns on every
// sliding layer unconditionally (`attention_mask[:, -self.sliding_window:]`; 4.44.1 adds `if
// past_key_value is not None`, PR #32522), and Gemma2FlashAttention2 then keeps the first
// `attention_mask.shape[1]` keys (modeling_gemma2.py 4.44.0, read from the release wheel). A
// prompt longer than W therefore reaches the partial-query path with a W-column mask: silently
// wrong segments, no crash.
std::optional<LayerCall> gemma2_forward_without_cache(const Call& c, Gemma2Era era) {
  if (era != Gemma2Era::v4_44_0 || c.mask->dim(1) <= *c.sliding_window) return std::nullopt;
  const int64_t W = *c.sliding_window;
  LayerCall l;
  l.call = c;
  l.call.mask = c.mask->last_columns_dim1(W);
  l.call.kv_length = std::min(W, c.kv_length);
  l.steps.push_back("gemma2 sliding-window layer (no cache): mask cut to its last W = " + std::to_string(W) +
                    " columns, keys cut to the first " + std::to_string(l.call.kv_length));
  return l;
}

std::optional<LayerCall> gemma2_layer_call(const Batch& batch, const Call& c, Gemma2Era era) {
  if (batch.model.architecture != "gemma2" || !batch.batch || !c.sliding_window || !c.mask || c.mask->rank() != 2)
    return std::nullopt;
  if (!batch.batch->cache) return gemma2_forward_without_cache(c, era);
  const Cache& cache = *batch.batch->cache;
  const int64_t W = *c.sliding_window;
  const int64_t past = cache.past_length.value_or(c.mask->dim(1) - c.query_length);
  const bool prefill = past == 0;
  const int64_t max_cache = cache.max_cache_len.value_or(c.mask->dim(1));
  LayerCall l;
  l.call = c;
  l.call.position_ids = generate_position_ids(*c.mask, c.query_length);
  l.call.kwargs.reset();
  auto note = [&](std::string s) { l.steps.push_back("gemma2 sliding-window layer: " + std::move(s)); };
  switch (era) {
    case Gemma2Era::absent:
      note("Gemma-2 is not part of this release; the batch is replayed as given");
      l.call.position_ids.reset();
      return l;
    case Gemma2Era::v4_42:
      l.failure = raised("Gemma2FlashAttention2._flash_attention_forward > is_flash_attn_greater_or_equal",
                         "AttributeError", "'str' object has no attribute 'parse'",
                         "the same AttributeError (host side, before any kernel)");
      note("is_flash_attn_greater_or_equal of 4.42.x shadows `packaging.version` with its argument");
      return l;
    case Gemma2Era::v4_43:
      l.call.kv_length = prefill ? c.kv_length : std::min(W, c.kv_length);
      l.call.sliding_window.reset();
      l.call.position_ids.reset();
      note("mask unchanged, " + std::to_string(l.call.kv_length) + " keys, no window passed");
      return l;
    case Gemma2Era::v4_44_0:
      l.call.kv_length = 1;  // key_states[:, :, :attention_mask.shape[1]] with a 4-D mask
      l.call.sliding_window.reset();
      l.call.position_ids.reset();
      note("generate built a 4-D (B, 1, Lq, " + std::to_string(max_cache) +
           ") mask; keys cut to attention_mask.shape[1] == 1");
      if (!four_d_within_cap(batch, *c.mask, c.query_length, max_cache)) {
        l.unpad_mask_shape = {c.batch, 1, c.query_length, max_cache};
        l.gather_rows_k = c.batch;
        l.failure = unbuilt_four_d_failure(*c.mask, c.query_length, max_cache, c.batch);
        note(unbuilt_note(batch, *c.mask, c.query_length, max_cache));
        return l;
      }
      l.call.mask = four_d_from(*c.mask, c.query_length, max_cache);
      return l;
    case Gemma2Era::v4_44_1:
      l.call.mask = c.mask->last_columns_dim1(W);
      l.call.kv_length = std::min(W, c.kv_length);
      l.call.position_ids.reset();
      note("mask cut to its last W = " + std::to_string(W) + " columns, keys = the W cached ones");
      return l;
    case Gemma2Era::v4_47:
      l.failure = raised("flash_attention_forward", "AttributeError",
                         "'Gemma2Attention' object has no attribute '_flash_attn_uses_top_left_mask'",
                         "the same AttributeError (host side, before any kernel)");
      note("transformers.integrations.flash_attention reads an attribute Gemma2Attention does not have");
      return l;
    case Gemma2Era::v4_48_0: {
      // 4.48.0 - 4.48.1: Gemma2Attention passes no sliding_window in cache_kwargs, so HybridCache
      // writes a sliding layer's keys with _static_update at their cache positions into a cache of
      // W rows (cache_utils.py / modeling_gemma2.py 4.48.1; fixed in 4.48.2): the first position
      // >= W fails (gemma2-generate-4.48.1.json: prefill of 8 over W = 4).
      const int64_t rows = std::min(W, max_cache);
      const int64_t first = prefill ? (c.query_length > rows ? rows : -1) : (past >= rows ? past : -1);
      if (first >= 0) {
        l.failure = raised("HybridCache.update > _static_update", "IndexError",
                           "index " + std::to_string(first) + " is out of bounds for dimension 0 with size " +
                               std::to_string(rows),
                           "CUDA error: device-side assert triggered (the cache write's index kernel)");
        note("the sliding layer's cache write goes through _static_update: position " + std::to_string(first) +
             " past its " + std::to_string(rows) + " rows");
        return l;
      }
      l.call.mask = c.mask->last_columns_dim1(W);
      l.call.kv_length = std::min(W, c.kv_length);
      l.call.position_ids.reset();
      note("mask cut to its last W = " + std::to_string(W) + " columns, keys = the W cached ones");
      return l;
    }
    case Gemma2Era::v4_48: {
      int64_t effective = std::max(c.query_length, W);
      l.call.mask = c.mask->last_columns_dim1(effective);
      int64_t keys = prefill ? c.kv_length : std::min(W, c.kv_length);
      l.call.kv_length = std::min(keys, l.call.mask->dim(1));
      l.call.position_ids.reset();
      note("mask cut to its last max(Lq, W) = " + std::to_string(effective) + " columns, " +
           std::to_string(l.call.kv_length) + " keys");
      return l;
    }
    case Gemma2Era::v4_52:
      // the mask the release builds is held to the documented cap of a 4-D mask once built
      // (docs/spec/batch-format.md): past it the batch is refused, not built (4.44.0's failure
      // is found without building; 4.52's unpad of it is not modelled that way)
      if (!four_d_within_cap(batch, *c.mask, c.query_length, max_cache - 1)) {
        const auto entries = checked::product({c.mask->dim(0), c.query_length, max_cache - 1});
        throw InputError(batch.file.string(), "/batch/query_length",
                         "a generate call whose 4-D mask, which transformers " + std::string("4.52") +
                             " builds for Gemma-2 as (B, 1, Lq, max_cache_len - 1), holds at most " +
                             std::to_string(batch.max_array_elements) + " entries",
                         std::to_string(c.mask->dim(0)) + " x " + std::to_string(c.query_length) + " x " +
                             std::to_string(max_cache - 1) + " = " +
                             (entries ? std::to_string(*entries) : std::string("more than 2^63")) + " entries");
      }
      l.call.mask = four_d_from(*c.mask, c.query_length, max_cache - 1);
      l.call.position_ids.reset();
      note("a 4-D (B, 1, Lq, " + std::to_string(max_cache - 1) + ") mask reaches the conversion");
      return l;
    case Gemma2Era::v4_53:
    case Gemma2Era::v4_54: {
      if (prefill) {
        if (c.mask->all_nonzero()) l.call.mask.reset();
      } else {
        MaskTensor window = c.mask->last_columns_dim1(W);
        l.call.kv_length = std::min(W, c.kv_length);
        if (window.all_nonzero()) l.call.mask.reset();
        else l.call.mask = window;
      }
      note(std::string(l.call.mask ? "a 2-D mask" : "no mask (the sliding window holds no padding)") + ", " +
           std::to_string(l.call.kv_length) + " keys, position ids from generate");
      if (era == Gemma2Era::v4_54) {
        // generate's kwargs (4.54): from the last position id of each row
        const IntTensor& pos = *l.call.position_ids;
        const int64_t B = pos.dim(0), L = pos.dim(1);
        FlashKwargs k;
        std::vector<int64_t> cu_q{0}, cu_k{0};
        int64_t running = 0, max_k = 0, max_q = 0;
        for (int64_t b = 0; b < B; ++b) {
          int64_t p = pos.values[static_cast<size_t>(b * L + L - 1)];
          running += p;
          cu_k.push_back(running + 1);
          max_k = std::max(max_k, p + 1);
          int64_t q_len = c.query_length == 1 ? 1 : p + 1;
          cu_q.push_back(cu_q.back() + q_len);
          max_q = std::max(max_q, q_len);
        }
        k.cu_seq_lens_q = cu_q;
        k.cu_seq_lens_k = cu_k;
        k.max_length_q = max_q;
        k.max_length_k = max_k;
        l.call.kwargs = k;
        note("generate passes cu_seq_lens_k = [0, cumsum(last positions) + 1]");
      }
      return l;
    }
  }
  return l;
}

}  // namespace ad::replay
