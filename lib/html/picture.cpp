// build_picture(): the batch's token grid, its intended sequences, and each cu_seqlens lane's
// segments mapped back to tokens (see picture.hpp for the coordinates), classified against the
// intended sequences; then the rows worth drawing and the marks of the first violation.
//
// Work is linear in the packed rows and the intended sequences, and bounded by a budget on
// hostile sizes; nothing here allocates per token of the padded batch.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <unordered_map>

#include "html/picture.hpp"
#include "util/text.hpp"

namespace ad::html {
namespace {

constexpr int64_t kWorkBudget = int64_t{1} << 26;  // token-map steps per lane
constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max() / 4;

int64_t floordiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

bool is_vector(const IntTensor& t) { return t.rank() == 1 && t.numel() >= 2; }

// Columns the intent is written in (the mask's width; else position ids'; else Lk).
int64_t intent_width_of(const Batch& batch) {
  if (!batch.batch) return batch.varlen ? std::max<int64_t>(batch.varlen->total_q, 1) : 1;
  const BatchInputs& b = *batch.batch;
  if (b.attention_mask) {
    const Mask& m = *b.attention_mask;
    const IntTensor& t = m.from ? *m.from : m.tensor;
    if (t.rank() >= 1) return t.dim(-1);
  }
  if (b.position_ids && b.position_ids->tensor.rank() >= 1) return b.position_ids->tensor.dim(-1);
  return b.kv_length;
}

struct Builder {
  const Batch& batch;
  const HtmlOptions& options;
  Picture pic;
  // intended sequences ordered by (row, start): indices into pic.sequences
  std::vector<size_t> order;

  Builder(const Batch& b, const HtmlOptions& o) : batch(b), options(o) {}

  // ---- intent -------------------------------------------------------------------------
  void load_intent() {
    pic.sequences = batch.intent.sequences;
    pic.intent_source = to_string(batch.intent.source);
    order.resize(pic.sequences.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      const auto &x = pic.sequences[a], &y = pic.sequences[b];
      return x.row != y.row ? x.row < y.row : x.start < y.start;
    });
  }

  // [first, last) of `order` on `row`
  std::pair<size_t, size_t> row_range(int64_t row) const {
    auto lo = std::lower_bound(order.begin(), order.end(), row,
                               [&](size_t i, int64_t r) { return pic.sequences[i].row < r; });
    auto hi = std::upper_bound(lo, order.end(), row, [&](int64_t r, size_t i) { return r < pic.sequences[i].row; });
    return {static_cast<size_t>(lo - order.begin()), static_cast<size_t>(hi - order.begin())};
  }

  // ---- lanes ----------------------------------------------------------------------------
  void add_lanes(const std::vector<LaneSource>& sources) {
    const bool padded = !pic.packed;
    const int64_t B = pic.rows;
    const int64_t Lk = padded ? std::max<int64_t>(batch.batch->kv_length, 1) : kUnbounded;
    const int64_t Lq = padded ? std::max<int64_t>(batch.batch->query_length, 1) : kUnbounded;
    for (const LaneSource& src : sources) {
      const VarlenArgs& a = *src.args;
      std::string origin = src.origin.empty() ? a.rule_set : src.origin;
      if (a.path == VarlenPath::dense) {
        if (!padded) continue;
        Lane lane;
        lane.group = src.group;
        lane.args = &a;
        lane.q = lane.k = true;
        lane.dense = true;
        lane.primary = src.primary;
        lane.label = "dense";
        lane.tensor = "dense rows";
        lane.title = "dense kernel (" + a.call.function_name() + "): each row attends as a whole (" + origin + ")";
        lane.cu.shape = {B + 1};
        for (int64_t r = 0; r <= B; ++r) lane.cu.values.push_back(r * Lk);
        lane.view_width = Lk;
        pic.lanes.push_back(std::move(lane));
        continue;
      }
      // The token map of each side. Explicit arguments carry no gather indices: on the mask
      // path they are read through the replay's (when it gathered exactly their row count).
      auto indices_for = [&](bool q) -> const IntTensor* {
        const auto& own = q ? a.indices_q : a.indices_k;
        if (own) return &*own;
        if (a.path != VarlenPath::explicit_varlen) return nullptr;
        for (const LaneSource& other : sources) {
          if (other.group != src.group || other.args == src.args || other.args->path != VarlenPath::mask) continue;
          const auto& rep = q ? other.args->indices_q : other.args->indices_k;
          if (rep && rep->numel() == (q ? a.total_q : a.total_k)) return &*rep;
        }
        return nullptr;
      };
      auto view_of = [&](bool q, const IntTensor* idx, const VarlenArgs* owner) -> std::pair<int64_t, int64_t> {
        if (!padded) return {kUnbounded, 0};
        int64_t kw = Lk, qw = Lq;
        if (owner && owner->gather_rows_k > 0 && B > 0) kw = std::max<int64_t>(owner->gather_rows_k / B, 1);
        if (idx && owner && owner->gather_rows_q > 0 && B > 0) qw = std::max<int64_t>(owner->gather_rows_q / B, 1);
        if (!q) return {kw, 0};
        return {qw, std::max<int64_t>(kw - qw, 0)};
      };
      auto owner_of = [&](const IntTensor* idx) -> const VarlenArgs* {
        if (!idx) return &a;
        for (const LaneSource& other : sources)
          if ((other.args->indices_q && &*other.args->indices_q == idx) ||
              (other.args->indices_k && &*other.args->indices_k == idx))
            return other.args;
        return &a;
      };
      const IntTensor* iq = indices_for(true);
      const IntTensor* ik = indices_for(false);
      auto vq = view_of(true, iq, owner_of(iq));
      auto vk = view_of(false, ik, owner_of(ik));
      const bool same = a.cu_seqlens_q.shape == a.cu_seqlens_k.shape && a.cu_seqlens_q.values == a.cu_seqlens_k.values &&
                        (iq == ik || (iq && ik && iq->values == ik->values)) && vq == vk &&
                        (padded || a.total_q == a.total_k);
      auto make = [&](bool q, bool both) {
        Lane lane;
        lane.group = src.group;
        lane.args = &a;
        lane.q = q || both;
        lane.k = !q || both;
        lane.primary = src.primary;
        lane.cu = q ? a.cu_seqlens_q : a.cu_seqlens_k;
        lane.indices = q ? iq : ik;
        std::tie(lane.view_width, lane.col_offset) = q ? vq : vk;
        if (!padded) lane.limit = q ? a.total_q : a.total_k;
        lane.label = both ? "cu q=k" : q ? "cu q" : "cu k";
        lane.tensor = both ? "cu_seqlens_q = cu_seqlens_k" : q ? "cu_seqlens_q" : "cu_seqlens_k";
        lane.title = lane.tensor + " (" + origin + ", " + to_string(a.path) + " path" +
                     (lane.indices ? ", through the unpad indices" : padded ? ", through the (B x L) view" : "") + ")";
        if (lane.cu.numel() == 0 && a.failure)
          lane.problem = lane.tensor + ": not computed (the release raised before building it)";
        else if (!is_vector(lane.cu))
          lane.problem = lane.tensor + " has shape " + shape_text(lane.cu.shape, ShapeStyle::torch_list) + ": not a vector of N + 1 >= 2 boundaries";
        pic.lanes.push_back(std::move(lane));
      };
      if (same) {
        make(false, true);
      } else {
        make(false, false);
        make(true, false);
      }
    }
  }

  void size_axis() {
    if (!pic.packed) {
      int64_t w = std::max<int64_t>(pic.intent_width, 1);
      for (const Lane& l : pic.lanes) w = std::max(w, l.col_offset + l.view_width);
      pic.width = w;
    } else {
      // the packed axis: the tensors and the intent, plus what the boundaries reach past
      // them (capped, so one absurd boundary cannot squash the picture to a dot)
      int64_t base = std::max<int64_t>(pic.intent_width, 1);
      for (const auto& s : pic.sequences) base = std::max(base, s.start + s.length);
      for (const Lane& l : pic.lanes) base = std::max(base, l.limit);
      int64_t reach = base;
      for (const Lane& l : pic.lanes)
        if (l.problem.empty())
          for (int64_t v : l.cu.values) reach = std::max(reach, v);
      const int64_t cap = std::max(base * 2, base + 16);
      pic.width = std::min(reach, cap);
    }
    pic.bucket = bucket_for(pic.width, std::max(options.max_columns, 8));
    pic.columns = (pic.width + pic.bucket - 1) / pic.bucket;
  }

  // ---- the token map ------------------------------------------------------------------------
  // Calls `emit(row, begin, end, cont_left, cont_right)` for the runs of consecutive tokens that
  // packed rows [from, to) map to. Phantom rows (outside [0, B)) are emitted for the nearest
  // two only; their other tokens are added to `unlisted`. Rows past the gather indices are
  // added to `past_packed`. Returns false when the work budget ran out.
  using Emit = std::function<void(int64_t, int64_t, int64_t, bool, bool)>;
  bool walk(const Lane& lane, int64_t from, int64_t to, const Emit& emit, int64_t& unlisted, int64_t& past_packed,
            int64_t& budget) const {
    const int64_t B = pic.rows;
    if (pic.packed) {  // one row: the packed axis
      const int64_t b = std::max<int64_t>(from, 0), e = std::min(to, pic.width);
      unlisted += (b - from) + (to - std::max(e, b));
      if (b < e) emit(0, b, e, from < 0, to > pic.width);
      return true;
    }
    const int64_t vw = lane.view_width, off = lane.col_offset;
    if (!lane.indices) {  // (B * L) view
      const int64_t r0 = floordiv(from, vw), r1 = floordiv(to - 1, vw);
      auto piece = [&](int64_t r) {
        const int64_t b = std::max(from, r * vw), e = std::min(to, (r + 1) * vw);
        emit(r, b - r * vw + off, e - r * vw + off, from < r * vw, to > (r + 1) * vw);
      };
      // phantom rows below 0: the nearest one
      if (r0 < 0) {
        const int64_t last_neg = std::min<int64_t>(r1, -1);
        piece(last_neg);
        const int64_t neg_tokens = std::min<int64_t>(to, 0) - from;
        unlisted += neg_tokens - (std::min(to, (last_neg + 1) * vw) - std::max(from, last_neg * vw));
      }
      const int64_t a = std::max<int64_t>(r0, 0), z = std::min<int64_t>(r1, B - 1);
      for (int64_t r = a; r <= z; ++r) {
        if (--budget < 0) return false;
        piece(r);
      }
      if (r1 >= B) {
        const int64_t p0 = std::max(r0, B);
        int64_t listed = 0;
        for (int64_t r = p0; r <= r1 && r < p0 + 2; ++r) {
          piece(r);
          listed += std::min(to, (r + 1) * vw) - std::max(from, r * vw);
        }
        unlisted += (to - std::max(from, B * vw)) - listed;
      }
      return true;
    }
    // through the unpad indices
    const auto& idx = lane.indices->values;
    const int64_t n = static_cast<int64_t>(idx.size());
    const int64_t b = std::clamp<int64_t>(from, 0, n), e = std::clamp<int64_t>(to, 0, n);
    past_packed += (to - from) - std::max<int64_t>(e - b, 0);
    int64_t run_row = 0, run_b = 0, run_e = -1, run_flat = 0;
    for (int64_t p = b; p < e; ++p) {
      if (--budget < 0) return false;
      const int64_t f = idx[static_cast<size_t>(p)];
      const int64_t r = floordiv(f, vw), c = f - r * vw + off;
      if (run_e >= 0 && r == run_row && f == run_flat + 1 && c == run_e) {
        ++run_e;
        run_flat = f;
        continue;
      }
      if (run_e >= 0) emit(run_row, run_b, run_e, false, false);
      run_row = r;
      run_b = c;
      run_e = c + 1;
      run_flat = f;
    }
    if (run_e >= 0) emit(run_row, run_b, run_e, false, false);
    return true;
  }

  // Tokens of intended sequence `s` this lane can cover (the query view is the last Lq columns).
  int64_t expected_tokens(const Lane& lane, const IntendedSequence& s) const {
    if (pic.packed) return s.length;
    const int64_t lo = std::max(s.start, lane.col_offset);
    const int64_t hi = std::min(s.start + s.length, lane.col_offset + lane.view_width);
    return std::max<int64_t>(hi - lo, 0);
  }

  void classify(Lane& lane) {
    if (!lane.problem.empty()) return;
    const auto& cu = lane.cu.values;
    int64_t budget = kWorkBudget;
    for (size_t j = 0; j + 1 < cu.size(); ++j) {
      SegmentInfo s;
      s.from = cu[j];
      s.to = cu[j + 1];
      if (s.to < s.from) {
        s.fit = Fit::negative;
        lane.segments.push_back(s);
        continue;
      }
      if (s.to == s.from) {
        s.fit = Fit::empty;
        lane.segments.push_back(s);
        continue;
      }
      std::unordered_map<size_t, int64_t> owned;
      int64_t unlisted = 0, past = 0;
      auto emit = [&](int64_t row, int64_t b, int64_t e, bool, bool) {
        if (s.first_row == INT64_MIN) s.first_row = row;
        if (pic.phantom(row)) {
          s.outside += e - b;
          if (lane.phantom_rows.size() < 4) lane.phantom_rows.insert(row);
          return;
        }
        ++s.pieces;
        int64_t covered = 0;
        // packed axis: tokens past the tensor overrun it
        if (pic.packed && lane.limit >= 0 && e > lane.limit) {
          s.outside += e - std::max(b, lane.limit);
          e = std::max(b, lane.limit);
        }
        auto [lo, hi] = row_range(row);
        auto it = std::upper_bound(order.begin() + static_cast<long>(lo), order.begin() + static_cast<long>(hi), b,
                                   [&](int64_t t, size_t i) { return t < pic.sequences[i].start + pic.sequences[i].length; });
        for (; it != order.begin() + static_cast<long>(hi); ++it) {
          const auto& q = pic.sequences[*it];
          if (q.start >= e) break;
          const int64_t o = std::min(e, q.start + q.length) - std::max(b, q.start);
          if (o > 0) {
            owned[*it] += o;
            covered += o;
          }
        }
        s.padding += (e - b) - covered;
      };
      if (!walk(lane, s.from, s.to, emit, unlisted, past, budget)) {
        lane.truncated = true;
        break;
      }
      s.outside += unlisted + past;
      lane.past_packed += past;
      s.owners = static_cast<int64_t>(owned.size());
      int64_t best = 0;
      for (const auto& [seq, n] : owned) {
        s.in_sequences += n;
        if (n > best || (n == best && static_cast<int64_t>(seq) < s.owner)) {
          best = n;
          s.owner = static_cast<int64_t>(seq);
        }
      }
      if (s.outside > 0) s.fit = Fit::outside;
      else if (s.owners >= 2) s.fit = Fit::merged;
      else if (s.owners == 0) s.fit = Fit::padding_only;
      else if (s.in_sequences < expected_tokens(lane, pic.sequences[static_cast<size_t>(s.owner)])) s.fit = Fit::split;
      else if (s.padding > 0) s.fit = Fit::padded;
      else if (s.pieces > 1) s.fit = Fit::split;
      else s.fit = Fit::exact;
      lane.segments.push_back(s);
    }
  }

  // Token of packed row p on the lane (nullopt: past the gather indices or the budget).
  std::optional<std::pair<int64_t, int64_t>> token_of(const Lane& lane, int64_t p) const {
    if (pic.packed) return std::make_pair(int64_t{0}, std::clamp<int64_t>(p, 0, std::max<int64_t>(pic.width - 1, 0)));
    int64_t f = p;
    if (lane.indices) {
      if (p < 0 || p >= lane.indices->numel()) return std::nullopt;
      f = lane.indices->values[static_cast<size_t>(p)];
    }
    const int64_t r = floordiv(f, lane.view_width);
    return std::make_pair(r, f - r * lane.view_width + lane.col_offset);
  }

  // ---- marks ----------------------------------------------------------------------------------
  int find_lane(int group, char side, bool want_indices) const {
    int any = -1;
    for (size_t i = 0; i < pic.lanes.size(); ++i) {
      const Lane& l = pic.lanes[i];
      if (l.group != group) continue;
      const bool side_ok = side == 'k' ? l.k : l.q;
      if (!side_ok) continue;
      if (want_indices && !l.indices) continue;
      if (l.primary) return static_cast<int>(i);
      if (any < 0) any = static_cast<int>(i);
    }
    return any;
  }

  void add_mark(Mark m) {
    // merge with the previous mark when it continues it on the same lane and row
    if (!pic.marks.empty()) {
      Mark& last = pic.marks.back();
      if (last.group == m.group && last.lane == m.lane && last.row == m.row && last.past_packed == m.past_packed &&
          m.begin <= last.end && m.end >= last.begin) {
        last.begin = std::min(last.begin, m.begin);
        last.end = std::max(last.end, m.end);
        return;
      }
    }
    if (pic.marks.size() < 64) pic.marks.push_back(m);
  }

  void resolve(const Highlight& h) {
    const Location& w = h.where;
    const std::string what = h.id.empty() ? "the violation" : h.id;
    switch (w.kind) {
      case Location::Kind::none:
        pic.unlocated.push_back(what + " names no place in the batch");
        return;
      case Location::Kind::tokens:
        add_mark({h.group, -1, w.row, w.begin, w.end, false});
        return;
      case Location::Kind::row:
        add_mark({h.group, -1, w.row, 0, pic.width, false});
        return;
      case Location::Kind::columns:
        for (int64_t r = 0; r < pic.rows && r < 4096; ++r) add_mark({h.group, -1, r, w.begin, std::min(w.end, pic.width), false});
        return;
      case Location::Kind::segment: {
        const int li = find_lane(h.group, w.side, false);
        if (li < 0) {
          pic.unlocated.push_back(what + ": no " + std::string(1, w.side) + " segments are drawn");
          return;
        }
        const Lane& lane = pic.lanes[static_cast<size_t>(li)];
        if (!lane.problem.empty() || w.segment < 0 || w.segment + 1 >= static_cast<int64_t>(lane.cu.values.size())) {
          pic.unlocated.push_back(what + ": " + std::string(1, w.side) + " segment " + std::to_string(w.segment) +
                                  " is not on the picture");
          return;
        }
        const int64_t from = lane.cu.values[static_cast<size_t>(w.segment)];
        const int64_t to = lane.cu.values[static_cast<size_t>(w.segment) + 1];
        size_t before = pic.marks.size();
        if (to > from) {
          int64_t unlisted = 0, past = 0, budget = kWorkBudget;
          walk(lane, from, to,
               [&](int64_t row, int64_t b, int64_t e, bool, bool) { add_mark({h.group, li, row, b, e, false}); },
               unlisted, past, budget);
          if (past > 0) add_mark({h.group, li, 0, 0, 0, true});
        }
        if (pic.marks.size() == before) {  // empty or negative: mark where it starts
          if (auto t = token_of(lane, from)) add_mark({h.group, li, t->first, t->second, t->second + 1, false});
          else add_mark({h.group, li, 0, 0, 0, true});
        }
        return;
      }
      case Location::Kind::packed_rows: {
        const int li = find_lane(h.group, w.side, w.gather);
        if (li < 0) {
          pic.unlocated.push_back(what + ": no " + std::string(1, w.side) + " lane with " +
                                  (w.gather ? "unpad indices" : "segments") + " is drawn");
          return;
        }
        const Lane& lane = pic.lanes[static_cast<size_t>(li)];
        const int64_t end = std::min(w.end, w.begin + 4096);
        for (int64_t p = w.begin; p < end; ++p) {
          if (auto t = token_of(lane, p)) add_mark({h.group, li, t->first, t->second, t->second + 1, false});
          else add_mark({h.group, li, 0, 0, 0, true});
        }
        return;
      }
    }
  }

  // ---- rows -----------------------------------------------------------------------------------
  void choose_rows(size_t first_marks) {
    std::set<int64_t> rows;
    const int64_t B = pic.rows;
    std::vector<int64_t> forced;
    for (size_t i = 0; i < first_marks && i < pic.marks.size(); ++i)
      if (!pic.marks[i].past_packed && forced.size() < 3 &&
          std::find(forced.begin(), forced.end(), pic.marks[i].row) == forced.end())
        forced.push_back(pic.marks[i].row);
    const int64_t max_rows = std::max(options.max_rows, 6);
    if (B <= max_rows) {
      for (int64_t r = 0; r < B; ++r) rows.insert(r);
    } else {
      const int64_t head = max_rows - 2 - static_cast<int64_t>(forced.size());
      for (int64_t r = 0; r < head; ++r) rows.insert(r);
      rows.insert(B - 2);
      rows.insert(B - 1);
    }
    int phantoms = 0;
    for (int64_t r : forced) {
      rows.insert(r);
      if (pic.phantom(r)) ++phantoms;
    }
    for (const Lane& l : pic.lanes)
      for (int64_t r : l.phantom_rows)
        if (phantoms < 3 && !rows.count(r)) {
          rows.insert(r);
          ++phantoms;
        }
    pic.drawn_rows.assign(rows.begin(), rows.end());
    // marks on rows not drawn are dropped
    std::vector<Mark> kept;
    for (const Mark& m : pic.marks)
      if (m.past_packed || rows.count(m.row)) kept.push_back(m);
    pic.marks = std::move(kept);
  }

  void collect_pieces(Lane& lane) {
    if (!lane.problem.empty()) return;
    const std::set<int64_t> drawn(pic.drawn_rows.begin(), pic.drawn_rows.end());
    const auto& cu = lane.cu.values;
    int64_t budget = kWorkBudget;
    // only the segments classified (all of them unless the work budget ran out)
    for (size_t j = 0; j + 1 < cu.size() && j < lane.segments.size(); ++j) {
      if (cu[j + 1] <= cu[j]) continue;
      int64_t unlisted = 0, past = 0;
      const int64_t seg = static_cast<int64_t>(j);
      bool ok = walk(
          lane, cu[j], cu[j + 1],
          [&](int64_t row, int64_t b, int64_t e, bool cl, bool cr) {
            if (!drawn.count(row)) return;
            auto& v = lane.pieces[row];
            if (v.size() < 1u << 16) v.push_back({row, b, e, seg, cl, cr});
          },
          unlisted, past, budget);
      if (!ok) break;
    }
    for (auto& [row, v] : lane.pieces)
      std::stable_sort(v.begin(), v.end(), [](const Piece& a, const Piece& b) { return a.begin < b.begin; });
    if (lane.past_packed > 0) {
      lane.past_packed_row = pic.drawn_rows.empty() ? 0 : pic.drawn_rows.front();
      for (int64_t r : pic.drawn_rows)
        if (!pic.phantom(r)) lane.past_packed_row = r;
    }
  }
};

}  // namespace

std::string to_string(Fit f) {
  switch (f) {
    case Fit::exact: return "matches one intended sequence";
    case Fit::padded: return "one intended sequence plus padding";
    case Fit::padding_only: return "padding only";
    case Fit::merged: return "merges intended sequences";
    case Fit::split: return "part of an intended sequence (split)";
    case Fit::outside: return "reaches past the batch / packed tensor";
    case Fit::empty: return "empty";
    case Fit::negative: return "negative length";
  }
  return "?";
}

int64_t bucket_for(int64_t width, int max_columns) {
  if (max_columns < 1) max_columns = 1;
  if (width <= max_columns) return 1;
  const int64_t raw = (width + max_columns - 1) / max_columns;
  int64_t pow2 = 1;
  while (pow2 < raw && pow2 < (int64_t{1} << 61)) pow2 *= 2;
  int64_t decimal = raw;
  for (int64_t p = 1; p <= raw && p <= std::numeric_limits<int64_t>::max() / 50; p *= 10) {
    bool found = false;
    for (int64_t m : {1, 2, 5})
      if (p * m >= raw) {
        decimal = p * m;
        found = true;
        break;
      }
    if (found) break;
    if (p * 10 >= raw) {
      decimal = p * 10;
      break;
    }
  }
  return std::max(std::min(pow2 >= raw ? pow2 : raw, decimal), raw);
}

std::vector<size_t> Picture::sequences_in(int64_t row) const {
  std::vector<size_t> out;
  for (size_t i = 0; i < sequences.size(); ++i)
    if (sequences[i].row == row) out.push_back(i);
  std::sort(out.begin(), out.end(), [&](size_t a, size_t b) { return sequences[a].start < sequences[b].start; });
  return out;
}

Picture build_picture(const Batch& batch, const std::vector<LaneSource>& sources, const std::vector<Highlight>& highlights,
                      const HtmlOptions& options) {
  Builder b(batch, options);
  Picture& pic = b.pic;
  pic.packed = !batch.batch;
  pic.rows = pic.packed ? 1 : std::max<int64_t>(batch.batch->batch_size, 1);
  pic.intent_width = intent_width_of(batch);
  for (const LaneSource& s : sources) pic.groups = std::max(pic.groups, s.group + 1);
  b.load_intent();
  b.add_lanes(sources);
  b.size_axis();
  for (Lane& lane : pic.lanes) b.classify(lane);
  for (const Highlight& h : highlights) b.resolve(h);
  b.choose_rows(pic.marks.size());
  for (Lane& lane : pic.lanes) b.collect_pieces(lane);
  for (Mark& m : pic.marks)
    if (m.past_packed && m.lane >= 0) m.row = pic.lanes[static_cast<size_t>(m.lane)].past_packed_row;
  return std::move(pic);
}

}  // namespace ad::html
