// Facts several static checks share: which route the conversion took, which mask / position
// ids reach it, and the intended sequences as flat token spans.
#include <algorithm>

#include "util/checked_math.hpp"
#include "check/static_checks.hpp"

namespace ad::checks {

Violation& Ctx::report(Severity severity, std::string message, nlohmann::json evidence, std::string_view upstream) {
  if (!evidence.is_object()) evidence = nlohmann::json{{"value", evidence}};
  if (!upstream.empty()) evidence["upstream_message"] = std::string(upstream);
  out.push_back(make_violation(current->id, severity, std::move(message), std::move(evidence)));
  return out.back();
}

void Ctx::symptom(Violation& v, std::string_view variant, std::string message, std::vector<RowRange> rows) {
  // a case the table has no row for under these releases: the id's default case
  v.symptom = symptom_for(v.id, variant, symptoms, message, rows);
  if (!v.symptom && !variant.empty()) v.symptom = symptom_for(v.id, "", symptoms, std::move(message), std::move(rows));
}

std::string replay_failure_message(const Ctx& ctx) {
  if (!ctx.replayed || !ctx.replayed->failure) return {};
  const ReplayFailure& f = *ctx.replayed->failure;
  return f.cuda_symptom.empty() ? f.message : f.cuda_symptom;
}

bool gather_assert_deferred(const Ctx& ctx) {
  const VarlenArgs* r = ctx.replayed;
  if (!r || r->path != VarlenPath::mask || !ctx.batch.batch) return false;
  if (r->max_seqlen_q.is_tensor || r->max_seqlen_k.is_tensor) return false;
  const int64_t B = ctx.batch.batch->batch_size;
  const int64_t Lq = ctx.batch.batch->query_length;
  const int64_t Lk = r->gather_rows_k > 0 && B > 0 ? r->gather_rows_k / B : ctx.batch.batch->kv_length;
  return Lq == Lk || Lq == 1;
}

std::optional<VarlenPath> conversion_path(const Ctx& ctx) {
  if (ctx.replayed) return ctx.replayed->path;
  if (!ctx.batch.batch) return std::nullopt;
  const BatchInputs& b = *ctx.batch.batch;
  if (b.attention_mask) return VarlenPath::mask;
  if (b.flash_kwargs && b.flash_kwargs->cu_seq_lens_q && b.flash_kwargs->cu_seq_lens_k && b.flash_kwargs->max_length_q &&
      b.flash_kwargs->max_length_k)
    return VarlenPath::kwargs;
  if (b.position_ids) return VarlenPath::position_ids;
  return VarlenPath::dense;
}

std::optional<VarlenPath> kernel_path(const Ctx& ctx) {
  if (ctx.conversion.explicit_args) return ctx.conversion.explicit_args->path;
  return conversion_path(ctx);
}

const Mask* unpad_mask(const Ctx& ctx) {
  if (!ctx.batch.batch || !ctx.batch.batch->attention_mask) return nullptr;
  if (conversion_path(ctx) != VarlenPath::mask) return nullptr;
  // a model-level mask: what the model's mask preparation handed to the attention
  if (ctx.replayed && ctx.replayed->model_mask)
    return ctx.replayed->model_mask->handed_on ? &*ctx.replayed->model_mask->handed_on : nullptr;
  return &*ctx.batch.batch->attention_mask;
}

const PositionIds* packing_position_ids(const Ctx& ctx) {
  if (!ctx.batch.batch || !ctx.batch.batch->position_ids) return nullptr;
  return conversion_path(ctx) == VarlenPath::position_ids ? &*ctx.batch.batch->position_ids : nullptr;
}

PositionRows position_rows(const PositionIds& p) {
  const IntTensor& t = p.tensor;
  PositionRows r;
  r.data = t.values.data();
  r.width = t.dim(-1);
  r.rows = t.rank() == 1 ? 1 : t.dim(-2);  // rank 3: the first of the three (B, S) planes
  return r;
}

int64_t intent_row_width(const Batch& batch) {
  if (batch.batch) {
    const BatchInputs& b = *batch.batch;
    if (b.attention_mask) {
      const Mask& m = *b.attention_mask;
      return (m.from ? *m.from : m.tensor).dim(-1);
    }
    if (b.position_ids) return b.position_ids->tensor.dim(-1);
    return b.kv_length;
  }
  if (batch.varlen) return std::max<int64_t>(batch.varlen->total_q, 1);
  return 1;
}

std::vector<Span> intent_spans(const Batch& batch) {
  const int64_t width = intent_row_width(batch);
  std::vector<Span> spans;
  spans.reserve(batch.intent.sequences.size());
  for (const auto& s : batch.intent.sequences) {
    // rows and widths are bounded by the loader (<= 2^40 each, product checked), so this fits
    auto base = checked::mul(s.row, width);
    auto start = base ? checked::add(*base, s.start) : std::nullopt;
    if (!start) continue;
    spans.push_back({*start, s.length});
  }
  auto by_start = [](const Span& a, const Span& b) { return a.start < b.start; };
  if (!std::is_sorted(spans.begin(), spans.end(), by_start)) std::sort(spans.begin(), spans.end(), by_start);
  return spans;
}

size_t first_span_ending_after(const std::vector<Span>& spans, int64_t token) {
  auto it = std::upper_bound(spans.begin(), spans.end(), token,
                             [](int64_t t, const Span& s) { return t < s.end(); });
  return static_cast<size_t>(it - spans.begin());
}

std::optional<int64_t> segment_length(const IntTensor& cu, size_t i) {
  return checked::sub(cu.values[i + 1], cu.values[i]);
}

bool is_vector(const IntTensor& t) { return t.rank() == 1 && t.numel() >= 2; }

RowsIntent packed_rows_intent(const Batch& batch, int64_t first, int64_t end) {
  if (batch.batch || end <= first) return RowsIntent::intended;
  if (batch.intent.source == IntentSource::cu_seqlens_q || batch.intent.source == IntentSource::none)
    return RowsIntent::unknown;
  const std::vector<Span> spans = intent_spans(batch);
  const size_t i = first_span_ending_after(spans, first);
  return i < spans.size() && spans[i].start < end ? RowsIntent::intended : RowsIntent::padding;
}

std::string to_string(RowsIntent r) {
  switch (r) {
    case RowsIntent::intended: return "intended";
    case RowsIntent::padding: return "padding";
    case RowsIntent::unknown: return "unknown";
  }
  return "?";
}

std::vector<RowRange> packed_rows_as_user_sees(const VarlenArgs& args, int64_t first, int64_t last) {
  std::vector<RowRange> out;
  if (last < first) return out;
  auto add = [&](int64_t row) {
    if (!out.empty() && out.back().last + 1 == row) out.back().last = row;
    else out.push_back({row, row});
  };
  if (args.path == VarlenPath::mask && args.indices_q && args.indices_q->rank() == 1) {
    const auto& idx = args.indices_q->values;
    for (int64_t r = std::max<int64_t>(first, 0); r <= last && r < static_cast<int64_t>(idx.size()); ++r)
      add(idx[static_cast<size_t>(r)]);
    return out;
  }
  out.push_back({first, last});
  return out;
}

}  // namespace ad::checks
