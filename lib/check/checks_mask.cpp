// Static: the mask on the unpad path (ids 6-9). transformers' `_get_unpad_data` (every release
// 4.34 - 5.x; flash_attn.bert_padding.unpad_input is the same algorithm) computes
//   lengths = mask.sum(-1); indices = nonzero(mask.flatten()); cu = pad(cumsum(lengths), (1, 0))
// and `_upad_input` gathers k/v rows of the (B * Lk)-row view with `indices`, then slices
// mask[:, -Lq:] for a partial query. These checks apply only when the route unpads with the
// mask (the replay's path, or a mask in the batch when nothing was replayed).
#include <algorithm>

#include "util/checked_math.hpp"
#include "check/static_checks.hpp"

namespace ad::checks {

namespace {

// Key rows per sequence on the unpad path: the replay's (B * Lk) gather view, else kv_length.
int64_t key_length(const Ctx& ctx) {
  const int64_t B = ctx.batch.batch->batch_size;
  if (ctx.replayed && ctx.replayed->path == VarlenPath::mask && ctx.replayed->gather_rows_k > 0 && B > 0)
    return ctx.replayed->gather_rows_k / B;
  return ctx.batch.batch->kv_length;
}

}  // namespace

// 6 mask.rank: a 4-D mask (a static-cache mask from generate, transformers#32309) still goes
// through _get_unpad_data: lengths get shape (B, 1, Q), cu_seqlens (B, 1, Q + 1), and indices
// enumerate mask entries (for an additive mask: the masked ones). The key gather faults first
// when an index passes B * Lk ("index out of bounds", flash-attention#1156); otherwise the kernel
// rejects the shape (cu_seqlens_q_shape in the family's host-check table, flash-attention#742).
namespace {
// The shape check a multi-axis cu_seqlens (the same tensor for q and k) fails first: q's in FA2
// and FA3, k's in FA4.
const HostCheckEntry& cu_shape_check(const Ctx& ctx) {
  const HostCheckEntry* e =
      ctx.rules().host_checks().first_of({HostCheck::cu_seqlens_q_shape, HostCheck::cu_seqlens_k_shape});
  return e ? *e : *fa2_host_checks().find(HostCheck::cu_seqlens_q_shape);
}
}  // namespace

void mask_rank(Ctx& ctx) {
  const Mask* m = unpad_mask(ctx);
  if (!m) return;
  if (m->tensor.rank() == 2) {
    // The batch's mask is 2-D, but the release may build a 4-D one from it before unpadding
    // (Gemma-2 on 4.44.0: generate's static-shape mask reached _upad_input). The replay records
    // the mask it unpadded; lengths keep every axis but the last, so cu_seqlens shows it too.
    const VarlenArgs* r = ctx.replayed;
    if (!r || r->path != VarlenPath::mask) return;
    const bool reshaped = r->unpad_mask_shape.empty() ? r->cu_seqlens_k.rank() > 1 : r->unpad_mask_shape.size() != 2;
    if (!reshaped) return;
    const IntTensor& cu = r->cu_seqlens_k;
    std::vector<int64_t> mask_shape = r->unpad_mask_shape;
    if (mask_shape.empty() && !cu.shape.empty()) {  // from cu_seqlens: (..., Q + 1) -> (..., Q, ?)
      mask_shape.assign(cu.shape.begin(), cu.shape.end());
      mask_shape.back() -= 1;
    }
    int64_t largest = -1, count = 0;
    if (r->indices_k) {
      count = r->indices_k->numel();
      for (int64_t v : r->indices_k->values) largest = std::max(largest, v);
    }
    // a mask past the element cap is not built (lib/convert/quirks_gemma2.cpp): its cu_seqlens
    // shape follows from its own, and the failure names the entry the gather stops at
    const bool built = r->indices_k.has_value();
    std::vector<int64_t> cu_shape = cu.shape;
    if (!built && cu_shape.empty() && !mask_shape.empty()) {
      cu_shape.assign(mask_shape.begin(), mask_shape.end() - 1);
      if (!cu_shape.empty()) cu_shape.back() += 1;
    }
    const bool gather_faults = built ? r->gather_rows_k > 0 && largest >= r->gather_rows_k
                                     : r->failure && r->failure->message.find("out of bounds") != std::string::npos;
    const HostCheckEntry& shape = cu_shape_check(ctx);
    std::string upstream = replay_failure_message(ctx);
    if (upstream.empty()) upstream = gather_faults ? "index out of bounds" : std::string(shape.message);
    std::optional<int64_t> entries = 1;
    for (int64_t d : mask_shape) entries = entries ? checked::mul(*entries, d) : std::nullopt;
    const std::string enumerated =
        built ? "whose " + std::to_string(count) + " indices enumerate mask entries up to " + std::to_string(largest) +
                    (gather_faults ? ", past the " + std::to_string(r->gather_rows_k) + " key rows the gather reads" : "")
              : "whose indices enumerate its " + checked::to_text(entries) +
                    " entries (too many for attn-doctor to build; the release builds them)" +
                    (gather_faults ? ", past the " + std::to_string(r->gather_rows_k) + " key rows the gather reads" : "");
    nlohmann::json evidence = {{"batch_mask_shape", m->tensor.shape}, {"cu_seqlens_shape", cu_shape},
                               {"unpad_mask_shape", mask_shape}, {"key_rows", r->gather_rows_k}, {"rule_set", r->rule_set}};
    if (built) {
      evidence["indices"] = count;
      evidence["largest_index"] = largest;
    } else {
      evidence["mask_entries"] = checked::to_text(entries);
    }
    Violation& v = ctx.report(Severity::error,
               "the batch's 2-D mask is not what reached the unpad path: the replayed release (" + r->rule_set +
                   ") unpadded a mask of shape " + shape_text(mask_shape) + " (its cu_seqlens_k has shape " +
                   shape_text(cu_shape) + "), " + enumerated,
               evidence, upstream);
    if (!gather_faults) ctx.symptom(v, "cu_shape", upstream.find("must have shape") != std::string::npos ? std::string(shape.type) + ": " + upstream : "");
    return;
  }
  const IntTensor& t = m->tensor;
  if (t.rank() == 1) {
    // (S,): lengths = mask.sum(-1) is 0-d, cumsum keeps it 0-d, and F.pad(cumsum, (1, 0)) asks
    // for one more dimension than it has: the release raises before any cu_seqlens or gather
    // exists (the replay records where), so nothing reaches flash-attn.
    const std::string pad_error =
        "Padding length should be less than or equal to two times the input dimension but got padding length 2 and "
        "input of dimension 0";
    std::string upstream = replay_failure_message(ctx);
    if (upstream.empty()) upstream = pad_error;
    Violation& v = ctx.report(Severity::error,
                              "the mask reaching the unpad path has shape " + shape_text(t.shape) +
                                  " (rank 1), not (B, S): its lengths mask.sum(-1) are 0-d, so F.pad(cumsum(lengths), "
                                  "(1, 0)) raises before cu_seqlens is built",
                              {{"mask_shape", t.shape}, {"lengths_shape", std::vector<int64_t>{}}, {"cu_seqlens", "not built"}},
                              upstream);
    ctx.symptom(v, "pad_0d", "RuntimeError: " + upstream);
    return;
  }
  int64_t nonzero = 0, last = -1;
  for (int64_t i = 0; i < t.numel(); ++i)
    if (t.values[static_cast<size_t>(i)] != 0) {
      ++nonzero;
      last = i;
    }
  const int64_t B = ctx.batch.batch->batch_size, Lk = key_length(ctx);
  const auto gather_rows = checked::mul(B, Lk);
  std::vector<int64_t> cu_shape(t.shape.begin(), t.shape.end() - 1);
  if (!cu_shape.empty()) cu_shape.back() += 1;
  const bool gather_faults = gather_rows && last >= *gather_rows;
  const HostCheckEntry& shape = cu_shape_check(ctx);
  std::string upstream = replay_failure_message(ctx);
  if (upstream.empty()) upstream = gather_faults ? "index out of bounds" : std::string(shape.message);
  std::string what = m->style == MaskStyle::additive ? "additive (nonzero() selects the masked entries)"
                     : m->style == MaskStyle::boolean ? "boolean" : "as written";
  std::string message = "the mask reaching the unpad path has shape " + shape_text(t.shape) + " (rank " +
                        std::to_string(t.rank()) + ", " + what + "), not (B, S): ";
  if (cu_shape.size() > 1)
    message += "cu_seqlens gets shape " + shape_text(cu_shape) + " and ";
  message += "the " + std::to_string(nonzero) + " unpad indices enumerate mask entries up to " + std::to_string(last);
  message += gather_faults ? ", past the " + std::to_string(*gather_rows) + " key rows the gather reads"
                           : " instead of tokens";
  Violation& v = ctx.report(Severity::error, message,
                            {{"mask_shape", t.shape}, {"cu_seqlens_shape", cu_shape}, {"indices", nonzero},
                             {"largest_index", last}, {"key_rows", checked::to_text(gather_rows)}},
                            upstream);
  if (!gather_faults) ctx.symptom(v, "cu_shape", upstream.find("must have shape") != std::string::npos ? std::string(shape.type) + ": " + upstream : "");
  // the gather's assert is asynchronous: with nothing synchronising before flash-attn's host
  // checks, the rank-3 cu_seqlens raises first (Dao-AILab/flash-attention#1857)
  else if (cu_shape.size() > 1 && gather_assert_deferred(ctx)) {
    v.evidence["upstream_message"] = std::string(shape.message);
    v.evidence["then"] = upstream;  // the gather's assert, reported at the next synchronisation
    ctx.symptom(v, "cu_shape_first", std::string(shape.type) + ": " + std::string(shape.message));
  }
}

// 7 mask.binary: segment-id masks ([1, 1, 2, 2, 0]) reach _get_unpad_data unchanged: sum()
// counts 1 + 1 + 2 + 2 = 6 tokens, nonzero() finds 4, so cu_seqlens[-1] disagrees with the
// number of gathered rows.
void mask_binary(Ctx& ctx) {
  const Mask* m = unpad_mask(ctx);
  if (!m || m->style != MaskStyle::values) return;  // 4-D boolean/additive masks are 0/1 by construction
  // the trainer's own _get_unpad_data (axolotl's multipack, LlamaFactory's neat_packing) counts
  // the segment ids instead of summing them (docs/spec/conversions.md#patched-unpadding)
  if (ctx.batch.collator && !ctx.batch.collator->unpad_patch.empty()) return;
  const IntTensor& t = m->tensor;
  const int64_t width = t.dim(-1);
  int64_t first = -1, sum = 0, nonzero = 0;
  bool sum_overflow = false;
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t v = t.values[static_cast<size_t>(i)];
    if (v != 0) ++nonzero;
    if (auto s = checked::add(sum, v)) sum = *s;
    else sum_overflow = true;
    if (first < 0 && v != 0 && v != 1) first = i;
  }
  if (first < 0) return;
  const int64_t value = t.values[static_cast<size_t>(first)];
  Violation& v = ctx.report(Severity::error,
             "the mask holds " + std::to_string(value) + " at row " + std::to_string(first / width) + ", column " +
                 std::to_string(first % width) + " (segment ids, not 0/1): sum() counts " +
                 (sum_overflow ? std::string("more than 2^63") : std::to_string(sum)) + " tokens but nonzero() gathers " +
                 std::to_string(nonzero),
             {{"row", first / width}, {"column", first % width}, {"value", value},
              {"sum", sum_overflow ? nlohmann::json("overflow") : nlohmann::json(sum)}, {"nonzero", nonzero}});
  v.location = Location::row_tokens(first / width, first % width, first % width + 1);
}

// 47 mask.cast_to_bool: a model-level mask with segment ids (attention_mask.level "model") that
// the release's mask preparation casts to bool (masking_utils, transformers >= 4.53) or drops
// (LlamaModel._update_causal_mask <= 4.52, no 0 in the mask): the rows' packed sequences merge.
// lib/convert/model_mask.cpp replays the preparation; a mask handed on unchanged is mask.binary's.
void mask_cast_to_bool(Ctx& ctx) {
  if (!ctx.replayed || !ctx.replayed->model_mask || !ctx.batch.batch || !ctx.batch.batch->attention_mask) return;
  const ModelMaskPrep& p = *ctx.replayed->model_mask;
  if (!p.had_segment_ids || !(p.cast_to_bool || p.dropped)) return;
  // rows where two packed sequences meet (adjacent non-zero values that differ): those merge
  const IntTensor& t = ctx.batch.batch->attention_mask->tensor;
  const int64_t B = t.dim(0), W = t.dim(1);
  int64_t rows = 0, first_row = -1, first_segments = 0;
  for (int64_t r = 0; r < B; ++r) {
    const int64_t* row = t.values.data() + r * W;
    int64_t segments = 0, prev = 0;
    for (int64_t c = 0; c < W; ++c) {
      if (row[c] != 0 && row[c] != prev) ++segments;
      prev = row[c];
    }
    if (segments < 2) continue;
    ++rows;
    if (first_row < 0) first_row = r, first_segments = segments;
  }
  if (rows == 0) return;  // one sequence per row: bool or not, the boundaries are the same
  const std::string release = ctx.replayed->requested.empty() ? ctx.replayed->rule_set
                                                              : "transformers " + ctx.replayed->requested;
  std::string how = p.cast_to_bool ? "casts it to bool, so every segment id becomes True" +
                                         std::string(p.dropped ? " and, every entry being True, hands on no mask"
                                                               : "")
                                   : "hands on no mask (it holds no 0)";
  // LlamaFactory's replacement of _get_unpad_data on the bool mask (conversions.md#patched-unpadding)
  const bool lf_bool = p.cast_to_bool && !p.dropped && ctx.batch.collator &&
                       ctx.batch.collator->unpad_patch == "llamafactory.get_unpad_data";
  Violation& v = ctx.report(
      Severity::error,
      "the mask given to the model holds segment ids (" + std::to_string(p.first_segment_value) + " at row " +
          std::to_string(p.first_segment_row) + ", column " + std::to_string(p.first_segment_column) + "); " + release +
          "'s mask preparation (" + p.where + ") " + how + ": the " + std::to_string(first_segments) +
          " packed sequences of row " + std::to_string(first_row) +
          (lf_bool ? " are lost: LlamaFactory's get_unpad_data counts a bool mask into its dtype, one token per row"
                   : " attend to each other as one") +
          (rows > 1 && !lf_bool ? " (" + std::to_string(rows) + " rows merge sequences)" : ""),
      {{"prepared_by", p.where}, {"cast_to_bool", p.cast_to_bool}, {"dropped", p.dropped},
       {"row", first_row}, {"segments", first_segments}, {"rows_merged", rows}});
  v.location = Location::row_tokens(first_row, 0, W);
}

// 60 mask.static_cache_slots: a model-level mask narrower than the keys (a static cache holds
// more slots than tokens) that the model's mask preparation drops because every entry is
// attended (transformers 4.48.0 - 5.12.x; model_mask.cpp). The dense causal call then runs over
// every slot, aligned with the last key: each query attends as many keys past its own position
// as the cache has empty slots. 5.13.0 keeps the mask and _upad_input cuts the keys to it
// (huggingface/transformers PR#46914).
void mask_static_cache_slots(Ctx& ctx) {
  if (!ctx.replayed || !ctx.replayed->model_mask || !ctx.batch.batch) return;
  const ModelMaskPrep& p = *ctx.replayed->model_mask;
  if (p.refused_static_cache && ctx.replayed->failure) {
    // up to 4.47 the model's flash-attention class refuses the cache first (registry.cpp)
    const ReplayFailure& f = *ctx.replayed->failure;
    Violation& v = ctx.report(Severity::error,
                              "transformers " + ctx.replayed->requested + "'s " + f.where + " refuses a static cache with " +
                                  "flash_attention_2 before any attention runs: " + f.type + ": " + f.message,
                              {{"prepared_by", p.where}, {"raises", f.type + ": " + f.message}},
                              f.type + ": " + f.message);
    ctx.symptom(v, "raises", f.type + ": " + f.message);
    return;
  }
  if (!p.dropped_narrower) return;
  const BatchInputs& b = *ctx.batch.batch;
  const int64_t Lq = b.query_length, Lk = p.keys;
  const int64_t past = b.cache && b.cache->past_length ? *b.cache->past_length : p.mask_width - Lq;
  const int64_t extra = Lk - Lq - past;  // keys each query sees past its own position
  if (extra <= 0) return;
  const int64_t empty = Lk - p.mask_width;
  const std::string release = ctx.replayed->requested.empty() ? ctx.replayed->rule_set
                                                              : "transformers " + ctx.replayed->requested;
  Violation& v = ctx.report(
      Severity::error,
      "the mask given to the model covers " + std::to_string(p.mask_width) + " of the " + std::to_string(Lk) +
          " key slots (a static cache: " + std::to_string(empty) + " slots hold no token yet), every entry attended; " +
          release + "'s mask preparation (" + p.where + ") hands on no mask, so flash_attn_func runs causal over all " +
          std::to_string(Lk) + " slots aligned with the last: each query attends " + std::to_string(extra) +
          " key(s) past its own position (query 0 the tokens after it, the last query the empty slots)",
      {{"prepared_by", p.where}, {"mask_columns", p.mask_width}, {"keys", Lk}, {"empty_slots", empty},
       {"past_length", past}, {"query_length", Lq}, {"keys_past_position", extra}});
  v.location = Location::row_tokens(0, 0, p.mask_width);
}

// 8 mask.kv_length: the gather reads row `r * W + c` of the (B * Lk)-row key view for mask
// entry (r, c) of a width-W mask. W > Lk: indices pass B * Lk -> "index out of bounds" (the
// Gemma-2 sliding-window crash, flash-attention#1156 / transformers#32309; FLA decoding, FLA
// #206, #204, #223, #431); otherwise every row after the first reads another sequence's keys.
void mask_kv_length(Ctx& ctx) {
  const Mask* m = unpad_mask(ctx);
  if (!m) return;
  const IntTensor& t = m->tensor;
  // the width of the mask the release unpadded (a quirk may have cut it: Gemma-2 on 4.44.1 keeps
  // the last W columns and as many keys), else the batch's
  const VarlenArgs* r = ctx.replayed && ctx.replayed->path == VarlenPath::mask ? ctx.replayed : nullptr;
  const bool from_replay = r && !r->unpad_mask_shape.empty();
  const int64_t W = from_replay ? r->unpad_mask_shape.back() : t.dim(-1);
  const int64_t Lk = key_length(ctx), B = ctx.batch.batch->batch_size;
  if (W == Lk) return;
  const auto rows = checked::mul(B, Lk);
  int64_t past = 0, largest = -1, indices = 0;
  auto count = [&](int64_t i) {
    ++indices;
    largest = std::max(largest, i);
    if (rows && i >= *rows) ++past;
  };
  if (r && r->indices_k) {
    for (int64_t i : r->indices_k->values) count(i);
  } else {
    for (int64_t i = 0; i < t.numel(); ++i)
      if (t.values[static_cast<size_t>(i)] != 0) count(i);
  }
  nlohmann::json ev = {{"mask_width", W}, {"kv_length", Lk}, {"batch_size", B}, {"key_rows", checked::to_text(rows)},
                       {"indices", indices}, {"largest_index", largest}, {"indices_past_end", past}};
  std::string message = "attention mask has " + std::to_string(W) + " columns but keys have " + std::to_string(Lk) +
                        " rows per sequence";
  std::string upstream = replay_failure_message(ctx);
  if (past > 0) {
    message += ": " + std::to_string(past) + " of the " + std::to_string(indices) + " unpad indices point past the " +
               std::to_string(B) + " x " + std::to_string(Lk) + " = " + checked::to_text(rows) +
               " key rows (largest " + std::to_string(largest) + ")";
    if (upstream.empty()) upstream = "index out of bounds";
  } else {
    message += ": indices are computed with stride " + std::to_string(W) + " but the key view has stride " +
               std::to_string(Lk) + ", so rows after the first gather other positions' keys (no error, wrong keys)";
  }
  // the columns one side has and the other lacks
  ctx.report(Severity::error, message, ev, upstream).location = Location::columns(std::min(W, Lk), std::max(W, Lk));
}

// 9 mask.padding_side: for Lq not in {1, Lk}, _upad_input unpads the queries with
// mask[:, -Lq:], which is right only for left padding (transformers#35032): a right-padded row
// keeps the padding columns as its "queries"; and only when the mask has Lq columns to give.
void mask_padding_side(Ctx& ctx) {
  const Mask* m = unpad_mask(ctx);
  if (!m || m->tensor.rank() != 2) return;
  const BatchInputs& b = *ctx.batch.batch;
  const int64_t Lq = b.query_length, Lk = key_length(ctx);
  if (Lq == 1 || Lq == Lk) return;
  // The slice can only return the columns the unpadded mask has: a mask the release cut below
  // Lq columns (Gemma-2 on 4.44.1 - 4.46: the last W) yields indices in a (B x W) space that
  // index_first_axis reads from the (B x Lq)-row query view: one row's queries taken as another's.
  const VarlenArgs* r = ctx.replayed && ctx.replayed->path == VarlenPath::mask ? ctx.replayed : nullptr;
  const int64_t unpad_width = r && r->unpad_mask_shape.size() == 2 ? r->unpad_mask_shape.back() : m->tensor.dim(1);
  if (unpad_width < Lq) {
    ctx.report(Severity::error,
               "query_length " + std::to_string(Lq) + " takes the partial-query path (keys: " + std::to_string(Lk) +
                   ") but the mask it slices has only " + std::to_string(unpad_width) + " columns: mask[:, -" +
                   std::to_string(Lq) + ":] gives query indices for rows of " + std::to_string(unpad_width) +
                   " tokens, read from a view with " + std::to_string(Lq) + " rows per sequence",
               {{"query_length", Lq}, {"kv_length", Lk}, {"mask_columns", unpad_width},
                {"rule_set", r ? r->rule_set : std::string()}});
    return;
  }
  const IntTensor& t = m->tensor;
  const int64_t rows = t.dim(0), W = t.dim(1);
  int64_t bad_rows = 0, first_row = -1, first_gap = -1, tokens = 0, kept = 0;
  std::vector<RowRange> wrong;  // output rows b x Lq + i of every row that is not left-padded
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t* row = t.values.data() + r * W;
    int64_t c = 0;
    while (c < W && row[c] == 0) ++c;  // left padding
    int64_t gap = -1;
    for (; c < W; ++c)
      if (row[c] == 0) {
        gap = c;
        break;
      }
    if (gap < 0) continue;
    ++bad_rows;
    if (!wrong.empty() && wrong.back().last + 1 == r * Lq) wrong.back().last = r * Lq + Lq - 1;
    else wrong.push_back({r * Lq, r * Lq + Lq - 1});
    if (first_row >= 0) continue;
    first_row = r;
    first_gap = gap;
    for (int64_t k = 0; k < W; ++k) tokens += row[k] != 0;
    for (int64_t k = std::max<int64_t>(0, W - Lq); k < W; ++k) kept += row[k] != 0;
  }
  if (first_row < 0) return;
  const int64_t slice_from = std::max<int64_t>(0, W - Lq);
  Violation& v = ctx.report(Severity::error,
             "row " + std::to_string(first_row) + " is not left-padded (padding from column " + std::to_string(first_gap) +
                 ") but query_length " + std::to_string(Lq) + " is neither 1 nor kv_length " + std::to_string(Lk) +
                 ": mask[:, -" + std::to_string(Lq) + ":] takes columns " + std::to_string(slice_from) + "-" +
                 std::to_string(W - 1) + ", which hold " + std::to_string(kept) + " of the row's " + std::to_string(tokens) +
                 " tokens, as its queries",
             {{"row", first_row}, {"padding_from_column", first_gap}, {"rows_not_left_padded", bad_rows},
              {"query_length", Lq}, {"kv_length", Lk}, {"slice_columns", {slice_from, W}},
              {"tokens_in_row", tokens}, {"tokens_in_slice", kept}});
  v.location = Location::row_tokens(first_row, slice_from, W);  // the query slice mask[:, -Lq:] of the row
  // pad_input leaves zeros where the slice picked padding; the real tokens it picked are the
  // wrong queries (the row's newest tokens are not its last columns)
  ctx.symptom(v, "",
              "no error; the query rows of the " + std::to_string(bad_rows) + " row(s) that are not left-padded come "
              "back wrong: output rows " + rows_text(wrong, 4) + " (zeros where the slice picked padding)",
              wrong);
}

}  // namespace ad::checks
