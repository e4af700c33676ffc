// Static: hybrid models (id 49). Every layer the batch reaches must see the same sequence
// boundaries: the attention layers' (what reached the flash-attn kernel), or the intent when the
// batch lists no attention layer. The views come from replay_layers (lib/convert/layers.cpp).
#include <vector>

#include "check/static_checks.hpp"

namespace ad::checks {

namespace {

struct Segment {
  int64_t row = 0, start = 0, length = 0;
};

// The run of tokens around `t` carrying `labels[t]` within t's row.
Segment segment_at(const std::vector<int32_t>& labels, int64_t width, int64_t t) {
  const int64_t row = t / width, lo = row * width, hi = lo + width;
  int64_t a = t, b = t + 1;
  while (a > lo && labels[static_cast<size_t>(a - 1)] == labels[static_cast<size_t>(t)]) --a;
  while (b < hi && labels[static_cast<size_t>(b)] == labels[static_cast<size_t>(t)]) ++b;
  return Segment{row, a - lo, b - a};
}

nlohmann::json to_json(const Segment& s) { return {{"row", s.row}, {"start", s.start}, {"length", s.length}}; }
std::string describe(const Segment& s) {
  return "row " + std::to_string(s.row) + " tokens " + std::to_string(s.start) + "-" + std::to_string(s.start + s.length - 1);
}

std::vector<int32_t> intent_labels(const Batch& batch, int64_t rows, int64_t width) {
  std::vector<int32_t> labels(static_cast<size_t>(rows * width), -1);
  int32_t k = 0;
  for (const auto& s : batch.intent.sequences) {
    if (s.row >= rows) continue;
    for (int64_t c = s.start; c < s.start + s.length && c < width; ++c) labels[static_cast<size_t>(s.row * width + c)] = k;
    ++k;
  }
  return labels;
}

}  // namespace

// 49 layers.same_boundaries
void layers_same_boundaries(Ctx& ctx) {
  const auto& views = ctx.conversion.layers;
  if (views.empty() || !ctx.batch.batch) return;
  const int64_t width = ctx.batch.batch->query_length, rows = ctx.batch.batch->batch_size;
  const LayerPart* attention = nullptr;
  for (const auto& v : views)
    if (v.kind == "attention" && !v.parts.empty()) {
      attention = &v.parts.front();
      break;
    }
  std::vector<int32_t> intent;
  const std::vector<int32_t>* ref = nullptr;
  std::string ref_name;
  if (attention) {
    if (attention->labels.empty()) return;  // the attention route failed or was not read: other invariants say why
    ref = &attention->labels;
    ref_name = "the attention layers";
  } else {
    if (ctx.batch.intent.sequences.empty() || rows > ctx.batch.max_array_elements / std::max<int64_t>(1, width)) return;
    intent = intent_labels(ctx.batch, rows, width);
    ref = &intent;
    ref_name = "the intent (" + to_string(ctx.batch.intent.source) + ")";
  }
  for (const auto& v : views) {
    if (v.kind == "attention") continue;
    for (const LayerPart& p : v.parts) {
      const std::string who = "layer " + std::to_string(v.index) + " (" + v.kind + ", " + v.implementation + ") " + p.part;
      nlohmann::json ev = {{"layer", v.index}, {"kind", v.kind}, {"implementation", v.implementation}, {"part", p.part},
                           {"source", p.source}, {"rule", p.rule}, {"reference", attention ? "attention" : "intent"}};
      if (p.failure) {
        ev["raises"] = p.failure->type + ": " + p.failure->message;
        Violation& viol = ctx.report(Severity::error,
                                     who + " raises in " + p.failure->where + ": " + p.failure->type + ": " + p.failure->message +
                                         " (boundaries from " + p.source + "; " + p.rule + ")",
                                     ev, p.failure->type + ": " + p.failure->message);
        // AReaL's per-segment convolution on an empty segment: measured and reported (symptoms.cpp)
        const bool empty_conv = v.implementation == "areal" && p.part == "conv1d";
        ctx.symptom(viol, empty_conv ? "conv_empty_segment" : "raises", p.failure->type + ": " + p.failure->message);
        return;
      }
      if (p.labels.size() != ref->size()) continue;
      // the partitions of the reference's tokens must agree: a bijection of labels
      // labels are below the token count: the maps are vectors (first token of each label, -1: not seen)
      const size_t n = ref->size();
      std::vector<int64_t> ref_first(n, -1), part_first(n, -1);
      for (int64_t t = 0; t < static_cast<int64_t>(n); ++t) {
        const int32_t r = (*ref)[static_cast<size_t>(t)], l = p.labels[static_cast<size_t>(t)];
        if (r < 0) continue;
        std::string what;
        int64_t other = -1;  // a token of the other segment involved
        if (l < 0 || static_cast<size_t>(l) >= n || static_cast<size_t>(r) >= n) {
          what = "leaves out";
        } else {
          int64_t& rf = ref_first[static_cast<size_t>(r)];
          int64_t& pf = part_first[static_cast<size_t>(l)];
          if (rf < 0) rf = t;
          if (pf < 0) pf = t;
          // the same sequence in both: the first tokens of the two labels coincide
          if (p.labels[static_cast<size_t>(rf)] != l) {
            what = "splits";
            other = rf;
          } else if ((*ref)[static_cast<size_t>(pf)] != r) {
            what = "merges";
            other = pf;
          }
        }
        if (what.empty()) continue;
        const Segment rs = segment_at(*ref, width, t);
        const Segment ls = l < 0 ? Segment{t / width, t % width, 0} : segment_at(p.labels, width, t);
        const std::string from = p.source == "none" ? "receives no boundaries, so each row is one sequence,"
                                                    : "takes its boundaries from " + p.source;
        std::string msg = who + " " + from + " (" + p.rule + ") and " + what + " ";
        if (what == "merges") {
          const Segment prev = segment_at(*ref, width, other);
          msg += "the sequences at " + describe(prev) + " and " + describe(rs) + " of " + ref_name +
                 " into one (its segment " + describe(ls) + ")";
          ev["other_sequence"] = to_json(prev);
        } else if (what == "splits") {
          msg += "the sequence at " + describe(rs) + " of " + ref_name + " at token " + std::to_string(t % width) +
                 " (its segment " + describe(ls) + ")";
        } else {
          msg += "token " + std::to_string(t % width) + " of row " + std::to_string(t / width) + ", which " + ref_name +
                 " place in the sequence at " + describe(rs);
        }
        if (!p.note.empty()) msg += "; " + p.note;
        ev["difference"] = what;
        ev["token"] = {{"row", t / width}, {"column", t % width}};
        ev["sequence"] = to_json(rs);
        ev["layer_segment"] = to_json(ls);
        Violation& viol = ctx.report(Severity::error, msg, ev);
        viol.location = Location::whole_row(t / width);
        return;
      }
    }
  }
}

}  // namespace ad::checks
