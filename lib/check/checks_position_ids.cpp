// Static: position ids on the packed path (ids 10-12). transformers' packed path
// (`_prepare_from_posids` / `prepare_fa2_from_position_ids`, 4.44 - 5.x) flattens the ids and
// opens a segment wherever the position equals the boundary value (0; the minimum, or the
// model's origin, in later releases). These checks apply only when the route infers boundaries
// from position ids (the replay's path; without a replay: position ids and no mask).
#include <algorithm>

#include "util/checked_math.hpp"
#include "check/static_checks.hpp"

namespace ad::checks {

namespace {

bool row_start_order(const IntendedSequence& a, const IntendedSequence& b) {
  return a.row != b.row ? a.row < b.row : a.start < b.start;
}

// What the position-id checks read: the ids that reach packing detection as rows, the
// model's position origin, and the intended sequences inside those rows, sorted by (row,
// start). A derived intent already is, and usually lies inside the rows: then `sequences`
// points at the batch's own (a batch of 2^25 one-token sequences is not copied per check).
struct PackedIds {
  PositionRows rows;
  int64_t origin = 0;
  std::vector<IntendedSequence> owned;
  const std::vector<IntendedSequence>* shared = nullptr;  // the batch's own, when usable as they are
  const std::vector<IntendedSequence>& sequences() const { return shared ? *shared : owned; }
};
std::optional<PackedIds> packed_ids(Ctx& ctx) {
  const PositionIds* p = packing_position_ids(ctx);
  if (!p) return std::nullopt;
  PackedIds ids{position_rows(*p), ctx.batch.model.position_origin, {}};
  const auto& all = ctx.batch.intent.sequences;
  auto inside = [&](const IntendedSequence& s) { return s.row < ids.rows.rows && s.start + s.length <= ids.rows.width; };
  if (std::all_of(all.begin(), all.end(), inside) && std::is_sorted(all.begin(), all.end(), row_start_order)) {
    ids.shared = &all;
    return ids;
  }
  for (const auto& s : all)
    if (inside(s)) ids.owned.push_back(s);
  if (!std::is_sorted(ids.owned.begin(), ids.owned.end(), row_start_order))
    std::sort(ids.owned.begin(), ids.owned.end(), row_start_order);
  return ids;
}

// Membership in a sorted list for queries that never decrease (sequences in (row, start)
// order, as flat offsets): one forward walk instead of a binary search per query.
struct SortedCursor {
  const std::vector<int64_t>& sorted;
  size_t at = 0;
  bool contains(int64_t x) {
    while (at < sorted.size() && sorted[at] < x) ++at;
    return at < sorted.size() && sorted[at] == x;
  }
};

}  // namespace

// 59 position_ids.width: the model's rotary embedding makes one cos/sin row per position id and
// multiplies q and k by them, so ids of another width than the batch's tokens raise before any
// attention (LlamaFactory#10736: its collator pads input_ids to a multiple of 8, not the ids).
void position_ids_width(Ctx& ctx) {
  if (!ctx.batch.batch || !ctx.batch.batch->position_ids) return;
  const PositionIds& p = *ctx.batch.batch->position_ids;
  if (!p.model_level || p.tensor.rank() < 2) return;
  const int64_t S = p.tensor.dim(-1), L = ctx.batch.batch->query_length;
  if (S == L) return;
  Violation& v = ctx.report(Severity::error,
                            "the position ids given to the model have shape " + shape_text(p.tensor.shape) + " for " +
                                std::to_string(L) + " tokens per row: the rotary cos/sin cover " + std::to_string(S) +
                                " positions, q has " + std::to_string(L),
                            {{"position_ids_shape", p.tensor.shape}, {"query_length", L}, {"width", S}});
  ctx.symptom(v, "", "RuntimeError: The size of tensor a (" + std::to_string(L) + ") must match the size of tensor b (" +
                         std::to_string(S) + ") (the model's apply_rotary_pos_emb)");
}

// 10 position_ids.rank: 3-D mRoPE ids (3, B, S) reaching packing detection are flattened to
// 3 * B * S values; each axis restarts at 0, so cu_seqlens = [0, S, 2S, 3S] for B = 1 and the
// kernel reads 3x the rows q has (transformers#38007, #39168, #44643; flash-attention#2381).
void position_ids_rank(Ctx& ctx) {
  const PositionIds* p = packing_position_ids(ctx);
  if (!p) return;
  const IntTensor& t = p->tensor;
  const int64_t B = ctx.batch.batch->batch_size, S = t.dim(-1);
  if (t.rank() == 1 && B == 1 && ctx.replayed && ctx.replayed->failure &&
      ctx.replayed->failure->where.find("_is_packed_sequence") != std::string::npos) {
    // 4.55 onward: _is_packed_sequence reads position_ids.shape[1] before anything else, which
    // (S,) ids do not have (Pixtral's vision ids up to 4.57: huggingface/transformers#43441)
    const ReplayFailure& f = *ctx.replayed->failure;
    Violation& v = ctx.report(Severity::error,
                              "position ids of shape " + shape_text(t.shape) + " (rank 1, no batch axis) reach packing "
                                  "detection: the replayed release (" + ctx.replayed->rule_set + ") reads "
                                  "position_ids.shape[1] in _is_packed_sequence and raises " + f.type + ": " + f.message,
                              {{"shape", t.shape}, {"batch_size", B}, {"rule_set", ctx.replayed->rule_set}}, f.message);
    ctx.symptom(v, "index_error", f.type + ": " + f.message);
    return;
  }
  if (t.rank() == 2 || (t.rank() == 1 && B == 1)) return;
  // what flattening produces: boundaries where the value is the minimum (0 for these ids)
  int64_t minimum = t.values.empty() ? 0 : *std::min_element(t.values.begin(), t.values.end());
  int64_t boundaries = std::count(t.values.begin(), t.values.end(), minimum);
  const int64_t flat = t.numel();
  const auto rows = checked::mul(B, S);
  int64_t cu_last = flat;
  if (ctx.replayed && ctx.replayed->path == VarlenPath::position_ids && !ctx.replayed->cu_seqlens_q.values.empty())
    cu_last = ctx.replayed->cu_seqlens_q.values.back();
  std::string message = "position ids of shape " + shape_text(t.shape) +
                        (t.rank() == 3 ? " (mRoPE: 3 axes)" : " for batch size " + std::to_string(B)) +
                        " reach packing detection: flattened to " + std::to_string(flat) + " values that restart " +
                        std::to_string(boundaries) + " times, so cu_seqlens ends at " + std::to_string(cu_last) +
                        " while q has " + checked::to_text(rows) + " rows";
  const bool overrun = rows && cu_last > *rows;
  ctx.report(Severity::error, message,
             {{"shape", t.shape}, {"batch_size", B}, {"flattened", flat}, {"segments", boundaries},
              {"cu_seqlens_last", cu_last}, {"q_rows", checked::to_text(rows)}},
             overrun ? "an illegal memory access was encountered" : replay_failure_message(ctx));
}

// 11 position_ids.origin: boundaries are only found where the position is the detection value.
// A chunk whose ids start at 1024 has no 0 (transformers#39814, 4.54.1: no boundary ->
// cu_seqlens of one entry; prime-rl PR#2392); a collator that numbers from 0 for a model whose
// positions start at padding_idx + 1 feeds wrong positions (transformers#47496, fix PR#47525).
void position_ids_origin(Ctx& ctx) {
  const std::optional<PackedIds> ids = packed_ids(ctx);
  if (!ids) return;
  const PositionRows& pr = ids->rows;
  const int64_t origin = ids->origin;
  const auto& seqs = ids->sequences();
  // the replay's boundaries, as flat token offsets in the (B * S) view
  // (a single entry is a replay that found no boundary at all: transformers#39814)
  std::vector<int64_t> boundaries;
  const bool replayed = ctx.replayed && ctx.replayed->path == VarlenPath::position_ids &&
                        ctx.replayed->cu_seqlens_q.rank() == 1 && ctx.replayed->cu_seqlens_q.numel() >= 1;
  if (replayed) boundaries = ctx.replayed->cu_seqlens_q.values;
  if (!std::is_sorted(boundaries.begin(), boundaries.end())) std::sort(boundaries.begin(), boundaries.end());
  SortedCursor offenders_cursor{boundaries}, starts_cursor{boundaries};
  auto detected = [&](SortedCursor& cursor, const IntendedSequence& s) { return cursor.contains(s.row * pr.width + s.start); };
  int64_t offenders = 0;
  const IntendedSequence* first = nullptr;
  int64_t first_value = 0;
  bool any_error = false;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const auto& s = seqs[i];
    int64_t v = pr.at(s.row, s.start);
    if (v == origin) continue;
    ++offenders;
    // below the origin: positions the model reserves (padding) -> wrong embeddings whatever
    // the boundaries; above it: harmless only if the release still found the boundary
    bool error = v < origin || !replayed || !detected(offenders_cursor, s);
    any_error = any_error || error;
    if (!first) {
      first = &s;
      first_value = v;
    }
  }
  if (first) {
    ctx.report(any_error ? Severity::error : Severity::warning,
               "intended sequence at row " + std::to_string(first->row) + ", tokens " + std::to_string(first->start) + "-" +
                   std::to_string(first->start + first->length - 1) + " starts at position " + std::to_string(first_value) +
                   ", not at position_origin " + std::to_string(origin) + " (" + std::to_string(offenders) + " of " +
                   std::to_string(seqs.size()) + " sequences)" +
                   (first_value < origin ? ": the model reads positions below its origin as padding"
                    : !replayed          ? ": boundary detection at the origin value finds no start there"
                    : any_error          ? ": the replayed release found no boundary there"
                                         : "; the replayed release still found every boundary"),
               {{"row", first->row}, {"start", first->start}, {"length", first->length}, {"position", first_value},
                {"position_origin", origin}, {"sequences_off_origin", offenders}},
               replay_failure_message(ctx))
        .location = Location::row_tokens(first->row, first->start, first->start + first->length);
    return;
  }
  // every sequence starts at the origin: did the release detect a boundary at each of them?
  if (!replayed) return;
  int64_t missed = 0;
  const IntendedSequence* first_missed = nullptr;
  for (const auto& s : seqs)
    if (!detected(starts_cursor, s)) {
      ++missed;
      if (!first_missed) first_missed = &s;
    }
  if (!first_missed) return;
  ctx.report(Severity::error,
             "intended sequence at row " + std::to_string(first_missed->row) + ", token " + std::to_string(first_missed->start) +
                 " starts at position_origin " + std::to_string(origin) + " but the replayed release (" +
                 ctx.replayed->rule_set + ") detects boundaries at another value: " + std::to_string(missed) +
                 " sequence starts missed, neighbours merged",
             {{"row", first_missed->row}, {"start", first_missed->start}, {"position_origin", origin},
              {"missed_boundaries", missed}, {"rule_set", ctx.replayed->rule_set}},
             replay_failure_message(ctx))
      .location = Location::row_tokens(first_missed->row, first_missed->start, first_missed->start + 1);
}

// 12 position_ids.consecutive: inside a sequence positions step by exactly 1, and padding does
// not restart at the origin: a padding-free collator that pads position ids with 0 opens one
// length-1 segment per padded token (LlamaFactory#10452, axolotl PR#2739, FLA #1077).
// Severity by effect: a jump inside an intended sequence splits it or misplaces its rotary
// positions (error). A token at the origin that is its own length-1 segment (a one-token
// example, or padding numbered 0) merges or splits no intended sequence, and the padding's rows
// are discarded: a note, until the call's segments reach kSegmentsPastFlaGrid.
void position_ids_consecutive(Ctx& ctx) {
  const std::optional<PackedIds> ids = packed_ids(ctx);
  if (!ids) return;
  const PositionRows& pr = ids->rows;
  const int64_t origin = ids->origin;
  const auto& seqs = ids->sequences();
  // (1) a jump inside an intended sequence. Pixtral's vision ids are grid ids by design
  // (position_ids_in_meshgrid: row x max_width + column, from 0 in each image): they rise by more
  // than 1 at each patch row, and boundaries come from their zeros (huggingface/transformers#43441)
  const bool grid_ids = ctx.batch.model.architecture == "pixtral";
  for (const auto& s : seqs)
    for (int64_t c = s.start + 1; c < s.start + s.length; ++c) {
      int64_t prev = pr.at(s.row, c - 1), cur = pr.at(s.row, c);
      if (auto next = checked::add(prev, 1); next && cur == *next) continue;
      if (grid_ids && cur > prev) continue;
      ctx.report(Severity::error,
                 "inside the intended sequence at row " + std::to_string(s.row) + ", tokens " + std::to_string(s.start) + "-" +
                     std::to_string(s.start + s.length - 1) + ", the position goes from " + std::to_string(prev) + " to " +
                     std::to_string(cur) + " at token " + std::to_string(c) +
                     (cur == origin ? ": boundary detection opens a new segment there" : ""),
                 {{"row", s.row}, {"token", c}, {"from", prev}, {"to", cur}, {"position_origin", origin}})
          .location = Location::row_tokens(s.row, c, c + 1);
      return;
    }
  // (2) tokens at the origin that are their own length-1 segment: padding (tokens outside every
  // intended sequence) numbered at the origin, or, with the intent derived from the ids
  // themselves, a token at the origin followed by another (padding, or a one-token example)
  int64_t at_origin = 0, first_row = -1, first_col = -1;
  const bool derived = ctx.batch.intent.source == IntentSource::position_ids;
  if (ctx.batch.intent.source == IntentSource::none) {
    return;
  } else if (!derived) {
    size_t k = 0;
    for (int64_t r = 0; r < pr.rows; ++r)
      for (int64_t c = 0; c < pr.width; ++c) {
        while (k < seqs.size() && (seqs[k].row < r || (seqs[k].row == r && seqs[k].start + seqs[k].length <= c))) ++k;
        bool inside = k < seqs.size() && seqs[k].row == r && seqs[k].start <= c;
        if (inside || pr.at(r, c) != origin) continue;
        if (at_origin++ == 0) {
          first_row = r;
          first_col = c;
        }
      }
  } else {
    // a run of origin values: each but a last one that a sequence continues is a length-1 segment
    for (int64_t r = 0; r < pr.rows; ++r)
      for (int64_t c = 0; c < pr.width; ++c) {
        if (pr.at(r, c) != origin) continue;
        const bool next_origin = c + 1 < pr.width && pr.at(r, c + 1) == origin;
        const bool prev_origin = c > 0 && pr.at(r, c - 1) == origin;
        const bool alone = next_origin || (prev_origin && (c + 1 == pr.width || pr.at(r, c + 1) != origin + 1));
        if (!alone) continue;
        if (at_origin++ == 0) {
          first_row = r;
          first_col = c;
        }
      }
  }
  if (at_origin == 0) return;
  // what reaches the kernel: the replay's segments, else the intended ones plus one per token
  const bool replayed = ctx.replayed && ctx.replayed->path == VarlenPath::position_ids &&
                        is_vector(ctx.replayed->cu_seqlens_q);
  const int64_t segments = replayed ? ctx.replayed->cu_seqlens_q.numel() - 1
                                    : static_cast<int64_t>(seqs.size()) + (derived ? 0 : at_origin);
  const bool harmful = segments >= kSegmentsPastFlaGrid;
  const std::string where = "from row " + std::to_string(first_row) + ", token " + std::to_string(first_col);
  std::string message =
      derived ? std::to_string(at_origin) + (at_origin == 1 ? " token" : " tokens") + " at position " +
                    std::to_string(origin) + " (the origin), " + where + ", " + (at_origin == 1 ? "is its" : "are each their") +
                    " own length-1 segment (one-token sequences, or padding numbered " + std::to_string(origin) + ")"
              : std::to_string(at_origin) + " padding tokens have position " + std::to_string(origin) + " (the origin), " +
                    where + ": each opens its own length-1 segment";
  if (harmful) {
    // (the error's text and evidence as they always were: reports of these batches are relied on)
    ctx.report(Severity::error, message,
               {{derived ? "length_one_segments_at_origin" : "padding_tokens_at_origin", at_origin},
                {"row", first_row}, {"token", first_col}, {"position_origin", origin}})
        .location = Location::row_tokens(first_row, first_col, first_col + 1);
    return;
  }
  message += (derived ? ", which the kernel computes on its own: no sequence is merged or split ("
                      : ", whose rows are discarded: no intended sequence is merged or split (") +
             std::to_string(segments) + " segments, fewer than the " + std::to_string(kSegmentsPastFlaGrid) +
             " at which FLA's GatedDeltaNet kernels overflow the launch grid)";
  ctx.report(Severity::note, message,
             {{derived ? "length_one_segments_at_origin" : "padding_tokens_at_origin", at_origin},
              {"row", first_row}, {"token", first_col}, {"position_origin", origin}, {"segments", segments}})
      .location = Location::row_tokens(first_row, first_col, first_col + 1);
}

}  // namespace ad::checks
