// Static: what the segments mean (ids 23-27): the single-query GQA path, the segments against
// the intended sequences, the launch grid, and the unpad gather indices.
#include <algorithm>

#include "contract/fa2_forward.hpp"
#include "util/checked_math.hpp"
#include "check/static_checks.hpp"

namespace ad::checks {

namespace {

const VarlenArgs* varlen_call(const Ctx& ctx) {
  return ctx.args && ctx.args->path != VarlenPath::dense ? ctx.args : nullptr;
}

// cu values a token map can follow: 1-D, starting >= 0, non-decreasing (otherwise earlier
// invariants already explain the call).
bool well_formed(const IntTensor& cu) {
  if (!is_vector(cu) || cu.values.front() < 0) return false;
  for (size_t i = 1; i < cu.values.size(); ++i)
    if (cu.values[i] < cu.values[i - 1]) return false;
  return true;
}

// The conversion whose unpad indices the gather uses: the replay (explicit blocks have none).
const VarlenArgs* unpad_call(const Ctx& ctx) {
  for (const VarlenArgs* a : {ctx.replayed, ctx.args})
    if (a && (a->indices_q || a->indices_k)) return a;
  return nullptr;
}

std::string span_text(const Span& s, int64_t width) {
  const int64_t row = s.start / width, col = s.start % width;
  return "row " + std::to_string(row) + ", tokens " + std::to_string(col) + "-" + std::to_string(col + s.length - 1);
}

// Packed row -> flat (row * width + column) token of the padded batch.
struct TokenMap {
  const IntTensor* indices = nullptr;  // nullptr: packed row i is flat token i (the B*S view)
  // indices of a mask the release cut to its last `unpad_width` columns (Gemma-2 on 4.44.1),
  // re-expressed in the batch's `width` columns; 0: the same space
  int64_t unpad_width = 0, width = 0;
  int64_t limit() const { return indices ? indices->numel() : INT64_MAX; }
  int64_t at(int64_t i) const {
    int64_t t = indices->values[static_cast<size_t>(i)];
    if (unpad_width <= 0 || t < 0) return t;
    return (t / unpad_width) * width + (width - unpad_width) + t % unpad_width;
  }
};

// The maximal runs of consecutive flat tokens that packed rows [from, to) map to.
// (into `runs`, reused from segment to segment: a batch of millions of one-token segments
// allocates nothing per segment)
void runs_of(const TokenMap& map, int64_t from, int64_t to, std::vector<Span>& runs) {
  runs.clear();
  to = std::min(to, map.limit());
  if (from >= to) return;
  if (!map.indices) {
    runs.push_back({from, to - from});
    return;
  }
  Span cur{map.at(from), 1};
  for (int64_t i = from + 1; i < to; ++i) {
    int64_t t = map.at(i);
    if (t == cur.end()) {
      ++cur.length;
    } else {
      runs.push_back(cur);
      cur = {t, 1};
    }
  }
  runs.push_back(cur);
}

struct SegmentFindings {
  int64_t merged = 0, split = 0, padded = 0, padding_only = 0, dropped = 0;
  int64_t padding_end = 0;  // the furthest flat token a segment of padding alone (or trailing padding) reaches
  std::string first_error, first_warning;
  nlohmann::json first_evidence;
  Location first_location;
  bool has_error() const { return merged + split + padded + dropped > 0; }
};

// Compares the non-empty segments of `cu` (through `map`) with the intended spans.
// `window_keys`: with a sliding window, the keys the call's queries can see at all (W + Lq - 1,
// the oldest query's window); a k segment that is the last `window_keys` tokens of its sequence
// (or all of it) is what a sliding-window cache holds, not a split. 0: no window.
SegmentFindings compare_segments(const IntTensor& cu, const TokenMap& map, const std::vector<Span>& spans,
                                 int64_t width, bool causal, const char* side, int64_t window_keys) {
  SegmentFindings f;
  std::vector<char> matched(spans.size(), 0), touched(spans.size(), 0);
  const Side on = side[0] == 'q' ? Side::q : Side::k;
  // a sequence of the padded batch, where it is
  auto sequence_at = [&](const Span& s) {
    return Location::row_tokens(s.start / width, s.start % width, s.start % width + s.length);
  };
  auto note = [&](bool error, const std::string& text, nlohmann::json ev, const Location& at) {
    std::string& slot = error ? f.first_error : f.first_warning;
    if (!slot.empty()) return;
    slot = text;
    if (error || f.first_error.empty()) {
      f.first_evidence = std::move(ev);
      f.first_location = at;
    }
  };
  std::vector<Span> runs;
  std::vector<size_t> owners;  // the intended sequences a segment touches, sorted, once each
  size_t cursor = 0;           // the last answer of the span search: segments mostly run forward
  auto first_ending_after = [&](int64_t token) {
    if (cursor > 0 && spans[cursor - 1].end() > token) return cursor = first_span_ending_after(spans, token);
    for (int step = 0; cursor < spans.size() && spans[cursor].end() <= token; ++step, ++cursor)
      if (step == 8) return cursor = first_span_ending_after(spans, token);
    return cursor;
  };
  for (size_t j = 0; j + 1 < cu.values.size(); ++j) {
    const int64_t from = cu.values[j], to = cu.values[j + 1];
    if (from == to) continue;  // empty segments compute nothing
    runs_of(map, from, to, runs);
    if (runs.empty()) continue;  // rows past the unpad indices: indices.count reports them
    owners.clear();
    int64_t inside = 0, total = 0;
    bool leading_padding = false;
    for (const Span& run : runs) {
      total += run.length;
      for (size_t k = first_ending_after(run.start); k < spans.size() && spans[k].start < run.end(); ++k) {
        if (owners.empty() || owners.back() != k) owners.push_back(k);
        inside += std::min(run.end(), spans[k].end()) - std::max(run.start, spans[k].start);
        if (run.start < spans[k].start && owners.size() == 1) leading_padding = true;
      }
    }
    if (!std::is_sorted(owners.begin(), owners.end())) std::sort(owners.begin(), owners.end());
    owners.erase(std::unique(owners.begin(), owners.end()), owners.end());
    if (owners.size() == 1 && runs.size() == 1 && inside == total && runs[0].start == spans[*owners.begin()].start &&
        runs[0].length == spans[*owners.begin()].length) {
      matched[*owners.begin()] = 1;
      continue;
    }
    // (the text and evidence only for a segment that is not exactly one sequence: the
    // guard runs this on every call)
    const std::string seg = std::string(side) + " segment " + std::to_string(j) + " (packed rows " + std::to_string(from) +
                            "-" + std::to_string(to - 1) + ")";
    nlohmann::json ev = {{"side", side}, {"segment", j}, {"packed_rows", {from, to}}};
    Location at = Location::segment_of(on, static_cast<int64_t>(j));
    at.packed_rows = IndexRange{from, to};
    for (size_t k : owners) touched[k] = 1;
    if (owners.empty() || inside < total) f.padding_end = std::max(f.padding_end, runs.back().end());
    if (owners.empty()) {
      ++f.padding_only;
      note(false, seg + " covers only padding (" + span_text(runs.front(), width) + ")", ev, at);
    } else if (owners.size() >= 2) {
      ++f.merged;
      const Span& a = spans[*owners.begin()];
      const Span& b = spans[owners[1]];
      ev["sequences"] = {span_text(a, width), span_text(b, width)};
      ev["sequences_merged"] = owners.size();
      note(true, seg + " spans " + std::to_string(owners.size()) + " intended sequences (" + span_text(a, width) + " and " +
                     span_text(b, width) + "): they attend to each other",
           ev, at);
    } else if (inside < total) {
      const Span& s = spans[*owners.begin()];
      ev["sequence"] = span_text(s, width);
      ev["padding_tokens"] = total - inside;
      const bool harmless = causal && !leading_padding;  // causal queries never see later padding
      if (harmless) {
        ++f.padding_only;
        note(false, seg + " covers the intended sequence " + span_text(s, width) + " plus " +
                        std::to_string(total - inside) + " trailing padding tokens",
             ev, at);
      } else {
        ++f.padded;
        note(true, seg + " covers the intended sequence " + span_text(s, width) + " plus " +
                       std::to_string(total - inside) + " padding tokens its queries attend to",
             ev, at);
      }
      if (inside == s.length) matched[*owners.begin()] = 1;
    } else if (const Span& tail_of = spans[*owners.begin()];
               window_keys > 0 && runs.size() == 1 && runs[0].end() == tail_of.end() &&
               inside >= std::min(tail_of.length, window_keys)) {
      matched[*owners.begin()] = 1;  // the sliding window's keys: the sequence's last tokens
    } else {
      ++f.split;
      const Span& s = spans[*owners.begin()];
      ev["sequence"] = span_text(s, width);
      ev["covered"] = inside;
      note(true, seg + " covers only " + std::to_string(inside) + " of the " + std::to_string(s.length) +
                     " tokens of the intended sequence " + span_text(s, width) + ": the sequence is split",
           ev, at);
    }
  }
  for (size_t k = 0; k < spans.size(); ++k)
    if (!matched[k] && !touched[k]) {
      ++f.dropped;
      note(true, "the intended sequence " + span_text(spans[k], width) + " is in no " + side + " segment",
           {{"side", side}, {"sequence", span_text(spans[k], width)}}, sequence_at(spans[k]));
    }
  return f;
}

}  // namespace

// 23 max_seqlen.single_query: FA2 (2.5.0 -) swaps heads into rows when max_seqlen_q == 1 and
// H > Hk (no window, no dropout, no alibi, head dim a multiple of 8): q is reshaped to
// (N, Hk, H / Hk, D), which assumes every segment holds exactly one query. An empty segment ->
// "shape '[3, 3, 3, 64]' is invalid for input of size ..." (flash-attention#1537, #1619); a
// 2/0 mix with the right total -> queries silently attributed to the wrong sequence.
void max_seqlen_single_query(Ctx& ctx) {
  const VarlenArgs* a = varlen_call(ctx);
  const FlashAttnRules& r = ctx.rules();
  const Model& m = ctx.batch.model;
  if (!a || !r.varlen_single_query_swap || !is_vector(a->cu_seqlens_q)) return;
  // mha_varlen_fwd's decision (the contract's): on the windows as passed, before a window
  // wider than the keys is dropped; a head dim the release pads in Python reaches C++ aligned
  const fa2::Normalized n = fa2::normalize(
      {.max_seqlen_q = a->max_seqlen_q.value,
       .max_seqlen_k = a->max_seqlen_k.value,
       .num_heads = m.num_heads,
       .num_heads_k = m.num_kv_heads,
       .head_dim = r.alignment == HeadDimAlignment::padded_in_python ? (m.head_dim + 7) / 8 * 8 : m.head_dim,
       .causal = a->call.causal,
       .window_left = a->call.window_left,
       .window_right = a->call.window_right,
       .dropout = a->call.dropout > 0});
  if (!n.swapped) return;  // the swap is not taken
  const IntTensor& cu = a->cu_seqlens_q;
  const int64_t N = cu.numel() - 1;
  int64_t off = 0, first = -1, first_len = 0;
  for (size_t i = 0; i + 1 < cu.values.size(); ++i) {
    auto len = segment_length(cu, i);
    if (len && *len == 1) continue;
    if (off++ == 0) {
      first = static_cast<int64_t>(i);
      first_len = len ? *len : -1;
    }
  }
  if (off == 0) return;
  const int64_t G = m.num_heads / m.num_kv_heads;
  const auto size = checked::product({a->total_q, m.num_heads, m.head_dim});
  const bool reshape_fails = a->total_q != N;
  const std::string target = "[" + std::to_string(N) + ", " + std::to_string(m.num_kv_heads) + ", " + std::to_string(G) +
                             ", " + std::to_string(m.head_dim) + "]";
  Violation& v = ctx.report(Severity::error,
             "max_seqlen_q is 1 with " + std::to_string(m.num_heads) + " query heads over " + std::to_string(m.num_kv_heads) +
                 " kv heads, so flash-attn reshapes q to " + target + " assuming one query per segment, but segment " +
                 std::to_string(first) + " has " + std::to_string(first_len) + " (" + std::to_string(off) + " of " +
                 std::to_string(N) + " segments)" +
                 (reshape_fails ? ": the reshape fails" : ": queries are attributed to the wrong sequences"),
             {{"segment", first}, {"length", first_len}, {"segments_not_one", off}, {"total_q", a->total_q},
              {"reshape", target}, {"flash_attn", ctx.fa.label()}},
             reshape_fails ? "shape '" + target + "' is invalid for input of size " + checked::to_text(size) : "");
  v.location = Location::segment_of(Side::q, first);
  if (reshape_fails)
    ctx.symptom(v, "", "RuntimeError: shape '" + target + "' is invalid for input of size " + checked::to_text(size));
  else
    ctx.symptom(v, "silent");
}

// 24 cu_seqlens.segments: the segments that reach the kernel are exactly the intended sequences.
// Compared in the padded batch's token space: mask-path segments through the unpad indices,
// packed-path segments through the (B * S) view. Merged, split or padded-into sequences are
// silent cross-contamination (transformers#47496, #39814, #33268); segments of padding alone are
// a warning (their rows are discarded), and a note when that padding lies inside the batch's rows
// and the call's segments stay below kSegmentsPastFlaGrid (severity by effect: nothing merged or
// split, no limit reached; invariants.md#severity). With a sliding window, a k segment holding the last
// W + Lq - 1 tokens of its sequence is the window, not a split (a sliding cache holds no more).
void cu_seqlens_segments(Ctx& ctx) {
  const VarlenArgs* a = varlen_call(ctx);
  if (!a || ctx.batch.intent.source == IntentSource::none || ctx.batch.intent.sequences.empty()) return;
  if (const Mask* m = unpad_mask(ctx); m && m->tensor.rank() != 2) return;  // mask.rank explains it
  const auto spans = intent_spans(ctx.batch);
  const int64_t width = intent_row_width(ctx.batch);
  // the token map of each side
  auto map_for = [&](bool q) {
    TokenMap map;
    const auto& own = q ? a->indices_q : a->indices_k;
    const auto& shape = a->unpad_mask_shape;
    if (own) {
      map.indices = &*own;
      if (shape.size() == 2 && shape.back() < width) {
        map.unpad_width = shape.back();
        map.width = width;
      }
    } else if (ctx.conversion.explicit_args && ctx.replayed && ctx.replayed->path == VarlenPath::mask) {
      const auto& rep = q ? ctx.replayed->indices_q : ctx.replayed->indices_k;
      if (rep && rep->numel() == (q ? a->total_q : a->total_k)) map.indices = &*rep;
    }
    return map;
  };
  struct Side {
    const char* name;
    bool q;
  };
  // The intent lives in the key/value token space of the padded batch (the mask's width), so
  // the k segments are compared; q segments too where queries share that space (Lq == Lk).
  // Without a `batch` block the intent is written in the packed q rows (and an intent derived
  // from cu_seqlens_q describes them): the q side only.
  std::vector<Side> sides;
  if (!ctx.batch.batch || ctx.batch.intent.source == IntentSource::cu_seqlens_q) {
    sides.push_back({"q", true});
  } else {
    sides.push_back({"k", false});
    const bool same_space = ctx.batch.batch->query_length == ctx.batch.batch->kv_length;
    if (same_space &&
        (a->cu_seqlens_q.values != a->cu_seqlens_k.values || a->indices_q.has_value() != a->indices_k.has_value()))
      sides.push_back({"q", true});
  }
  for (const Side& side : sides) {
    const IntTensor& cu = side.q ? a->cu_seqlens_q : a->cu_seqlens_k;
    if (!well_formed(cu)) continue;
    int64_t window_keys = 0;
    if (!side.q && ctx.batch.model.sliding_window && *ctx.batch.model.sliding_window > 0 && ctx.batch.batch)
      window_keys = checked::add(*ctx.batch.model.sliding_window, ctx.batch.batch->query_length - 1).value_or(INT64_MAX);
    const auto f =
        compare_segments(cu, map_for(side.q), spans, width, ctx.batch.model.causal, side.name, window_keys);
    if (f.first_error.empty() && f.first_warning.empty()) continue;
    nlohmann::json ev = f.first_evidence;
    ev["merged"] = f.merged;
    ev["split"] = f.split;
    ev["padded"] = f.padded;
    ev["dropped"] = f.dropped;
    ev["padding_only"] = f.padding_only;
    ev["intent"] = to_string(ctx.batch.intent.source);
    // padding alone inside the batch's rows, few segments: what reaches the kernel is what was meant
    const int64_t segments = static_cast<int64_t>(cu.values.size()) - 1;
    const auto batch_tokens = checked::mul(ctx.batch.batch ? ctx.batch.batch->batch_size : 1, width);
    const bool benign = !f.has_error() && batch_tokens && f.padding_end <= *batch_tokens && segments < kSegmentsPastFlaGrid;
    std::string message = f.has_error() ? f.first_error : f.first_warning;
    if (benign) {
      ev["segments"] = segments;
      message += ": " + std::to_string(f.padding_only) + (f.padding_only == 1 ? " segment holds" : " segments hold") +
                 " padding whose rows are discarded; no intended sequence is merged or split (" +
                 std::to_string(segments) + " segments, fewer than the " + std::to_string(kSegmentsPastFlaGrid) +
                 " at which FLA's GatedDeltaNet kernels overflow the launch grid)";
    }
    ctx.report(f.has_error() ? Severity::error : benign ? Severity::note : Severity::warning, message, ev)
        .location = f.first_location;
  }
}

// 25 cu_seqlens.grid: FA2's forward grid is (ceil(max_seqlen_q / BLOCK_M), N, H): N and H are
// gridDim.y and gridDim.z, at most 65535 each; the varlen rotary kernels put N on a y/z axis too.
// Thousands of length-1 segments from padded position ids pass the limit (LlamaFactory#10452:
// "Triton Error [CUDA]: invalid argument").
void cu_seqlens_grid(Ctx& ctx) {
  const VarlenArgs* a = varlen_call(ctx);
  if (!a || !is_vector(a->cu_seqlens_q)) return;
  constexpr int64_t kMaxGridYZ = 65535;
  const int64_t N = a->cu_seqlens_q.numel() - 1, H = ctx.batch.model.num_heads;
  const bool rotary_varlen = ctx.batch.rotary && ctx.batch.rotary->varlen.value_or(true);
  std::string kernel, upstream;
  int64_t value = 0;
  if (ctx.rules().grid_batch_on_y && N > kMaxGridYZ) {
    kernel = "flash-attn's forward grid (m_blocks, N, H) has N = " + std::to_string(N) + " on gridDim.y";
    value = N;
    upstream = "CUDA error: invalid configuration argument";
  } else if (ctx.rules().grid_batch_on_y && H > kMaxGridYZ) {
    kernel = "flash-attn's forward grid (m_blocks, N, H) has H = " + std::to_string(H) + " on gridDim.z";
    value = H;
    upstream = "CUDA error: invalid configuration argument";
  } else if (rotary_varlen && N > kMaxGridYZ) {
    kernel = "the varlen rotary kernel's grid has N = " + std::to_string(N) + " on a y/z axis";
    value = N;
    upstream = "Triton Error [CUDA]: invalid argument";
  } else {
    return;
  }
  ctx.report(Severity::error, kernel + ", above the 65535 a launch allows",
             {{"segments", N}, {"num_heads", H}, {"value", value}, {"limit", kMaxGridYZ}, {"flash_attn", ctx.fa.label()}},
             upstream);
}

// 26 indices.range: `index_first_axis` gathers rows of the (B * L)-row view with the unpad
// indices; one outside it trips the device assert "index out of bounds" in the gather kernel
// (flash-attention#1156, transformers#32309, FLA #206, #204).
void indices_range(Ctx& ctx) {
  const VarlenArgs* a = unpad_call(ctx);
  if (!a) return;
  // q gathered with the key indices (Lq == Lk) is the same fault: reported once, for k
  const bool q_is_k = a->indices_q && a->indices_k && a->indices_q->values == a->indices_k->values &&
                      a->gather_rows_q == a->gather_rows_k;
  for (bool q : {false, true}) {  // the key gather runs first in _upad_input
    const auto& idx = q ? a->indices_q : a->indices_k;
    const int64_t rows = q ? a->gather_rows_q : a->gather_rows_k;
    if (!idx || rows <= 0 || (q && q_is_k)) continue;
    int64_t bad = 0, first = -1, value = 0;
    for (int64_t i = 0; i < idx->numel(); ++i) {
      int64_t v = idx->values[static_cast<size_t>(i)];
      if (v >= 0 && v < rows) continue;
      if (bad++ == 0) {
        first = i;
        value = v;
      }
    }
    if (bad == 0) continue;
    std::string upstream = a->failure ? (a->failure->cuda_symptom.empty() ? a->failure->message : a->failure->cuda_symptom)
                                      : "index out of bounds";
    const char* name = q ? "indices_q" : "indices_k";
    Violation& v = ctx.report(Severity::error,
               std::string(name) + "[" + std::to_string(first) + "] is " + std::to_string(value) + ", outside the " +
                   std::to_string(rows) + " rows of the " + (q ? "query" : "key/value") + " view it gathers from (" +
                   std::to_string(bad) + " of " + std::to_string(idx->numel()) + " indices)",
               {{"tensor", name}, {"position", first}, {"index", value}, {"rows", rows}, {"out_of_range", bad}},
               upstream);
    v.location = Location::indices(q ? Side::q : Side::k, first, first + 1);
    // The gather's assert is asynchronous: it is reported at the next synchronisation. Where
    // nothing synchronises between the gather and flash-attn's host checks
    // (gather_assert_deferred), a host check that fails raises first
    // (Dao-AILab/flash-attention#1857: a 4-D mask's out-of-range gather, then "cu_seqlens_q must
    // have shape (batch_size + 1)").
    if (gather_assert_deferred(ctx)) ctx.symptom(v, "async");
  }
}

// 27 indices.count: the packed tensor has one row per unpad index; cu_seqlens[-1] must say
// the same (a segment-id mask sums to more tokens than it has non-zero entries).
void indices_count(Ctx& ctx) {
  const VarlenArgs* a = unpad_call(ctx);
  if (!a) return;
  const bool q_is_k = a->indices_q && a->indices_k && a->indices_q->values == a->indices_k->values &&
                      a->cu_seqlens_q.values == a->cu_seqlens_k.values;
  for (bool q : {false, true}) {
    const auto& idx = q ? a->indices_q : a->indices_k;
    const IntTensor& cu = q ? a->cu_seqlens_q : a->cu_seqlens_k;
    if (!idx || cu.rank() != 1 || cu.values.empty() || (q && q_is_k)) continue;
    const int64_t count = idx->numel(), last = cu.values.back();
    if (count == last) continue;
    const char* name = q ? "indices_q" : "indices_k";
    ctx.report(Severity::error,
               std::string(name) + " gathers " + std::to_string(count) + " rows but " + (q ? "cu_seqlens_q" : "cu_seqlens_k") +
                   "[-1] is " + std::to_string(last) +
                   (last > count ? ": the kernel reads " + std::to_string(last - count) + " rows past the packed tensor"
                                 : ": the last " + std::to_string(count - last) + " packed rows are never attended"),
               {{"tensor", name}, {"indices", count}, {"cu_seqlens_last", last}})
        .location = Location::indices(q ? Side::q : Side::k, count, last);
  }
}

}  // namespace ad::checks
