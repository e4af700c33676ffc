// Static: rotary embedding (ids 28-32), per the contract of the implementation named in
// rotary.implementation: flash_attn (flash_attn/ops/triton/rotary.py apply_rotary: host asserts
// "rotary_dim must be <= headdim", "seqlen_ro must be >= seqlen"; x is (batch, seqlen, nheads,
// headdim), or (total_seqlen, nheads, headdim) with cu_seqlens), fla (fla/modules/rotary.py:
// no dim check, x is [B, T, H, D] with B = 1 in varlen, "TR must be >= T" on the packed length)
// and hf (cos/sin indexed by position ids, broadcast against the head).
#include <algorithm>

#include "util/checked_math.hpp"
#include "check/static_checks.hpp"

namespace ad::checks {

namespace {

bool has_cu_seqlens(const Ctx& ctx) {
  return ctx.args && ctx.args->path != VarlenPath::dense && is_vector(ctx.args->cu_seqlens_q);
}

// The FLA release is before `release` (an unknown release is the newest: false).
bool fla_before(const Ctx& ctx, const char* release) {
  return ctx.symptoms.fla && *ctx.symptoms.fla < version_literal(release);
}

// rotary.varlen, defaulting to true when cu_seqlens exist (batch-format.md).
bool rotary_varlen(const Ctx& ctx) { return ctx.batch.rotary->varlen.value_or(has_cu_seqlens(ctx)); }

// The first row that holds two or more intended sequences (-1: none), and how many it holds.
std::pair<int64_t, int64_t> packed_row(const Batch& batch) {
  // sorted by (row, start); a derived intent already is, and is not copied
  auto order = [](const IntendedSequence& a, const IntendedSequence& b) { return a.row != b.row ? a.row < b.row : a.start < b.start; };
  std::vector<IntendedSequence> sorted;
  const std::vector<IntendedSequence>* in = &batch.intent.sequences;
  if (!std::is_sorted(in->begin(), in->end(), order)) {
    sorted = *in;
    std::sort(sorted.begin(), sorted.end(), order);
    in = &sorted;
  }
  const auto& seqs = *in;
  for (size_t i = 0; i < seqs.size();) {
    size_t j = i;
    while (j < seqs.size() && seqs[j].row == seqs[i].row) ++j;
    if (j - i >= 2) return {seqs[i].row, static_cast<int64_t>(j - i)};
    i = j;
  }
  return {-1, 0};
}

}  // namespace

// 28 rotary.dim: the value passed is the per-head rotary width. FLA's kernel bounds columns by
// the dim it was given, so RotaryEmbedding(dim=hidden_size) rotates hidden_size elements from
// each head's start: into the next heads, and past the tensor at the last one (FLA #180).
// fla-core 0.6.0 (fla/modules/rotary/ops.py) asserts the rotary width R2 <= D before launching.
void rotary_dim(Ctx& ctx) {
  if (!ctx.batch.rotary) return;
  const Rotary& r = *ctx.batch.rotary;
  const Model& m = ctx.batch.model;
  const int64_t R = r.dim, D = m.head_dim;
  if (R <= D) return;
  const bool model_width = (m.hidden_size && R == *m.hidden_size) || R == m.num_heads * D;
  const int64_t past = R - D;
  const int64_t heads = checked::ceil_div(past, D);
  std::string upstream;
  std::string effect;
  if (r.implementation == "flash_attn") {
    upstream = "rotary_dim must be <= headdim";
    effect = "flash_attn's apply_rotary rejects it";
  } else if (r.implementation == "hf") {
    upstream = "The size of tensor a (" + std::to_string(D) + ") must match the size of tensor b (" + std::to_string(R) +
               ") at non-singleton dimension 3";
    effect = "the cos/sin broadcast against the head fails";
  } else if (!fla_before(ctx, "0.6.0")) {
    const int64_t R2 = (R + 1) / 2 * 2;  // the table has ceil(dim / 2) columns
    upstream = "Rotary dimension must not exceed head dimension, got rotary_dim=" + std::to_string(R2) +
               " and head_dim=" + std::to_string(D);
    effect = "FLA " + (ctx.symptoms.fla ? ctx.symptoms.fla->text : std::string("0.6.0 (no release given: the newest)")) +
             " asserts the rotary width against the head dim before the launch";
  } else {
    upstream = "an illegal memory access was encountered";
    effect = "each head's rotation reaches " + std::to_string(past) + " elements (" + std::to_string(heads) +
             " heads) into the following heads, and the last head " + std::to_string(past) +
             " elements past the end of the tensor";
  }
  Violation& v = ctx.report(Severity::error,
             "rotary dim " + std::to_string(R) + " is larger than head_dim " + std::to_string(D) +
                 (model_width ? " (it is the model width: RotaryEmbedding(dim=hidden_size) instead of head_dim)" : "") + ": " +
                 effect,
             {{"rotary_dim", R}, {"head_dim", D}, {"hidden_size", m.hidden_size ? nlohmann::json(*m.hidden_size) : nlohmann::json()},
              {"implementation", r.implementation}, {"elements_past_head", past}, {"heads_reached", heads}},
             upstream);
  if (r.implementation == "fla")
    ctx.symptom(v, "fla", fla_before(ctx, "0.6.0") ? "" : "AssertionError: " + upstream);
}

// 29 rotary.even: the table has ceil(dim / 2) frequency columns, so an odd dim rotates dim + 1
// elements. flash_attn_with_kvcache's fused rotary also requires a multiple of 16
// (flash_api.cpp: "Only rotary dimensions divisible by 16 are currently supported").
void rotary_even(Ctx& ctx) {
  if (!ctx.batch.rotary) return;
  const Rotary& r = *ctx.batch.rotary;
  if (r.dim % 2 != 0) {
    Violation& v = ctx.report(Severity::error,
               "rotary dim " + std::to_string(r.dim) + " is odd: the cos/sin table has " + std::to_string((r.dim + 1) / 2) +
                   " columns, so the kernel rotates " + std::to_string(r.dim + 1) + " elements, one past the rotary part" +
                   (r.dim + 1 > ctx.batch.model.head_dim ? " and past the head" : ""),
               {{"rotary_dim", r.dim}, {"implementation", r.implementation}});
    // fla-core 0.6.0's RotaryEmbedding asserts an even dim when it is built
    if (r.implementation == "fla")
      ctx.symptom(v, "fla", fla_before(ctx, "0.6.0") ? "" : "AssertionError: Rotary dimension must be even, got " + std::to_string(r.dim));
    return;
  }
  const bool kv_cache_path = r.implementation == "flash_attn" && ctx.batch.batch && ctx.batch.batch->cache;
  if (kv_cache_path && r.dim % 16 != 0)
    ctx.symptom(ctx.report(Severity::error,
               "rotary dim " + std::to_string(r.dim) +
                   " is not a multiple of 16, which flash_attn_with_kvcache's fused rotary (a cache is in use) requires",
               {{"rotary_dim", r.dim}, {"implementation", r.implementation}, {"cache", ctx.batch.batch->cache->kind}},
               "Only rotary dimensions divisible by 16 are currently supported"),
                "kv_cache", "RuntimeError: Only rotary dimensions divisible by 16 are currently supported");
}

// 30 rotary.layout: flash_attn's apply_rotary unpacks x as (batch, seqlen, nheads, headdim), or
// as (total_seqlen, nheads, headdim) when cu_seqlens is given; FLA's takes [B, T, H, D] and, in
// varlen, addresses rows from cu_seqlens with no batch stride (B must be 1). A (B, H, T, D)
// tensor is read with heads as positions.
void rotary_layout(Ctx& ctx) {
  if (!ctx.batch.rotary) return;
  const Rotary& r = *ctx.batch.rotary;
  if (r.implementation == "hf") return;  // apply_rotary_pos_emb broadcasts over any layout
  const bool varlen = rotary_varlen(ctx);
  const bool packed = has_cu_seqlens(ctx);
  const int64_t B = ctx.batch.batch && !packed ? ctx.batch.batch->batch_size : 1;
  nlohmann::json ev = {{"implementation", r.implementation}, {"layout", r.layout}, {"varlen", varlen}, {"batch", B}};
  std::string problem, upstream;
  if (r.implementation == "flash_attn") {
    if (varlen && r.layout != "THD") {
      problem = "with cu_seqlens flash_attn's apply_rotary expects (total_seqlen, nheads, headdim), got a 4-D " + r.layout +
                " tensor";
      upstream = "too many values to unpack (expected 3)";
    } else if (!varlen && r.layout == "THD") {
      problem = "without cu_seqlens flash_attn's apply_rotary expects (batch, seqlen, nheads, headdim), got THD";
      upstream = "not enough values to unpack (expected 4, got 3)";
    }
  } else {  // fla
    if (r.layout == "THD") {
      problem = "FLA's rotary expects [B, T, H, D], got a 3-D THD tensor";
      upstream = "not enough values to unpack (expected 4, got 3)";
    } else if (varlen && B != 1) {
      problem = "with cu_seqlens FLA's rotary addresses rows from cu_seqlens with no batch stride, so the batch "
                "dimension must be 1, got " + std::to_string(B);
      upstream = "an illegal memory access was encountered";
    }
  }
  if (problem.empty() && r.layout == "BHTD")
    problem = r.implementation + "'s rotary reads a (B, H, T, D) tensor with heads as positions (wrong strides)";
  if (problem.empty()) return;
  Violation& v = ctx.report(Severity::error, problem, ev, upstream);
  if (upstream.empty()) ctx.symptom(v, "strides");
  else if (upstream.find("illegal memory access") != std::string::npos) ctx.symptom(v, "fault");
}

// 31 rotary.table: the cos/sin table must cover every position rotated.
//  - FLA, fla/modules/rotary.py, every release from the first (0.1): `assert TR >= T` before
//    the launch, then `assert seqlen_offsets + T <= TR` for an int offset. T is x.shape[1]
//    without cu_seqlens; in varlen it is max_seqlen in 0.1 - 0.1.2 and the tensor's, i.e. the
//    packed length, from 0.2.0 (FLA #515: not the longest sequence). The message is
//    "TR must be >= T" up to 0.2.2 and "TR must be >= T, got {TR} and {T}" from 0.3.0 (measured
//    on an H100 for 0.5.0, 0.5.1 and 0.6.0 without cu_seqlens: T = 706, TR = 256). fla-core 0.6.0
//    (fla/modules/rotary/ops.py) keeps TR >= T only without cu_seqlens, keeps the int-offset
//    assert (T still the packed length in varlen: a bare AssertionError), and checks tensor
//    offsets per sequence on the device (torch._assert_async: a device-side assert); before
//    0.6.0 the kernel masks positions past the table (o_cs < TR) and leaves them unrotated.
//  - flash_attn asserts seqlen_ro >= max_seqlen and leaves positions past the table unrotated
//    when per-sequence offsets push them there.
//  - hf indexes cos/sin by position id.
void rotary_table(Ctx& ctx) {
  if (!ctx.batch.rotary || !ctx.batch.rotary->table_length) return;
  const Rotary& r = *ctx.batch.rotary;
  const int64_t TR = *r.table_length;
  const bool varlen = rotary_varlen(ctx) && has_cu_seqlens(ctx);
  const int64_t offset = !r.seqlen_offset_per_sequence && !r.seqlen_offset.empty() ? r.seqlen_offset.front() : 0;
  // T of the tensor the rotary gets: the padded rows' length, else (a packed call without a
  // `batch` block) the packed rows, else (a rotary call alone) the rows of q as `tensors` gives them
  const TensorOverride* q_rows = ctx.batch.override_for("q");
  const int64_t S = ctx.batch.batch ? ctx.batch.batch->query_length
                    : ctx.args      ? ctx.args->total_q
                    : q_rows && q_rows->rows ? *q_rows->rows : 0;
  nlohmann::json ev = {{"implementation", r.implementation}, {"table_length", TR}, {"varlen", varlen}, {"offset", offset}};
  int64_t needed = 0;
  std::string what, upstream, variant;
  if (r.implementation == "hf") {
    int64_t max_pos = S - 1 + offset;
    if (ctx.batch.batch && ctx.batch.batch->position_ids && !ctx.batch.batch->position_ids->tensor.values.empty()) {
      const auto& v = ctx.batch.batch->position_ids->tensor.values;
      max_pos = *std::max_element(v.begin(), v.end());
    }
    needed = max_pos + 1;
    what = "the largest position id is " + std::to_string(max_pos);
    variant = "hf";
  } else if (r.implementation == "fla") {
    // 0.1 - 0.1.2 take T = max_seqlen in varlen; later releases the packed tensor's length
    const bool t_is_max_seqlen = varlen && fla_before(ctx, "0.2.0");
    const FlaRotaryTableAssert tr = fla_rotary_table_assert(ctx.symptoms.fla, varlen, varlen ? ctx.args->total_q : S,
                                                            varlen ? ctx.args->max_seqlen_q.value : 0, TR);
    const int64_t T = tr.T;
    if (T <= 0) return;
    const bool old = fla_before(ctx, "0.6.0");
    const std::string release = ctx.symptoms.fla ? "FLA " + ctx.symptoms.fla->text : "FLA (no release given: 0.6.0)";
    const std::string t_is = !varlen ? "the tensor's length" : t_is_max_seqlen ? "max_seqlen" : "the packed length";
    if (tr.fails) {
      needed = T;
      what = release + " asserts TR >= T on " + t_is + " T = " + std::to_string(T);
      upstream = tr.message;
      variant = "fla_tr_ge_t";
    } else if (!r.seqlen_offset_per_sequence) {
      needed = checked::add(T, offset).value_or(INT64_MAX);
      what = release + " asserts seqlen_offsets + T <= TR with T = " + std::to_string(T) +
             (varlen ? " (" + t_is + ")" : "") + " and offset " + std::to_string(offset);
      upstream = "AssertionError";
      variant = "fla_offset";
    } else {
      // per-sequence (tensor) offsets: each sequence's last position must stay in the table
      std::vector<int64_t> lengths;
      if (varlen)
        for (size_t i = 0; i + 1 < ctx.args->cu_seqlens_q.values.size(); ++i)
          lengths.push_back(segment_length(ctx.args->cu_seqlens_q, i).value_or(-1));
      else
        lengths.assign(r.seqlen_offset.size(), S);
      for (size_t i = 0; i < lengths.size() && i < r.seqlen_offset.size(); ++i) {
        auto end = checked::add(lengths[i], r.seqlen_offset[i]);
        if (end && *end <= TR) continue;
        needed = end.value_or(INT64_MAX);
        what = "sequence " + std::to_string(i) + " (" + std::to_string(lengths[i]) + " tokens, offset " +
               std::to_string(r.seqlen_offset[i]) + ") reaches position " + checked::to_text(end) +
               (old ? ", which the kernel leaves unrotated" : ", which " + release + " asserts on the device");
        variant = "fla_tensor_offsets";
        break;
      }
    }
  } else if (varlen) {
    const VarlenArgs& a = *ctx.args;
    const int64_t T = a.max_seqlen_q.value;
    needed = checked::add(T, offset).value_or(INT64_MAX);
    what = "flash_attn checks max_seqlen = " + std::to_string(T);
    if (offset) what += " plus offset " + std::to_string(offset);
    upstream = T > TR ? "seqlen_ro must be >= seqlen" : "";
    variant = "flash_attn";
    // per-sequence offsets: each sequence's last position must stay in the table
    if (needed <= TR && r.seqlen_offset_per_sequence) {
      const IntTensor& cu = a.cu_seqlens_q;
      for (size_t i = 0; i + 1 < cu.values.size() && i < r.seqlen_offset.size(); ++i) {
        auto len = segment_length(cu, i);
        auto end = len ? checked::add(*len, r.seqlen_offset[i]) : std::nullopt;
        if (end && *end <= TR) continue;
        needed = end.value_or(INT64_MAX);
        what = "sequence " + std::to_string(i) + " (" + std::to_string(len.value_or(-1)) + " tokens, offset " +
               std::to_string(r.seqlen_offset[i]) + ") reaches position " + checked::to_text(end) +
               ", which the kernel leaves unrotated";
        upstream.clear();
        variant = "flash_attn_offsets";
        break;
      }
    }
  } else {
    if (S <= 0) return;
    needed = checked::add(S, offset).value_or(INT64_MAX);
    what = "each row has " + std::to_string(S) + " positions" + (offset ? " from offset " + std::to_string(offset) : "");
    if (S > TR) upstream = "seqlen_ro must be >= seqlen";
    variant = upstream.empty() ? "flash_attn_offsets" : "flash_attn";
  }
  if (needed <= TR) return;
  ev["needed"] = needed;
  Violation& v = ctx.report(Severity::error,
                            "the cos/sin table has " + std::to_string(TR) + " rows but " + what + ": " +
                                std::to_string(needed) + " rows are needed",
                            ev, upstream);
  std::string message;
  if (variant == "fla_tr_ge_t" || variant == "flash_attn") message = "AssertionError: " + upstream;
  ctx.symptom(v, variant, message);
}

// 32 rotary.positions: in a packed row each sequence's positions must restart. The rotary
// kernel only knows where sequences start from cu_seqlens (flash_attn, fla) or the position
// ids (hf); without them it rotates the whole row as one sequence.
void rotary_positions(Ctx& ctx) {
  if (!ctx.batch.rotary) return;
  const Rotary& r = *ctx.batch.rotary;
  const auto [row, count] = packed_row(ctx.batch);
  if (row < 0) return;
  nlohmann::json ev = {{"implementation", r.implementation}, {"row", row}, {"sequences_in_row", count}};
  if (r.implementation == "hf") {
    const BatchInputs* b = ctx.batch.batch ? &*ctx.batch.batch : nullptr;
    if (!b || !b->position_ids) {
      ctx.report(Severity::error,
                 "row " + std::to_string(row) + " holds " + std::to_string(count) +
                     " packed sequences but no position ids reach the rotary embedding: positions run across the row",
                 ev)
          .location = Location::whole_row(row);
      return;
    }
    const PositionRows pr = position_rows(*b->position_ids);
    const int64_t origin = ctx.batch.model.position_origin;
    for (const auto& s : ctx.batch.intent.sequences) {
      if (s.row >= pr.rows || s.start >= pr.width || pr.at(s.row, s.start) == origin) continue;
      ev["start"] = s.start;
      ev["position"] = pr.at(s.row, s.start);
      ctx.report(Severity::error,
                 "the packed sequence at row " + std::to_string(s.row) + ", token " + std::to_string(s.start) +
                     " is rotated from position " + std::to_string(pr.at(s.row, s.start)) + ", not " +
                     std::to_string(origin) + ": its position ids continue the previous sequence",
                 ev)
          .location = Location::row_tokens(s.row, s.start, s.start + 1);
      return;
    }
    return;
  }
  if (rotary_varlen(ctx)) return;
  ev["varlen"] = false;
  ctx.report(Severity::error,
             "row " + std::to_string(row) + " holds " + std::to_string(count) + " packed sequences but the " +
                 r.implementation + " rotary kernel gets no cu_seqlens" +
                 (r.varlen ? " (rotary.varlen is false)" : "") +
                 ": positions run on across the row, so every sequence but the first is rotated as if it continued the "
                 "previous one",
             ev)
      .location = Location::whole_row(row);
}

}  // namespace ad::checks
