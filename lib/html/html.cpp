// The page: the picture (picture.hpp) as inline SVG, its caption and legend, and the text
// report below, all in one HTML file with inline CSS. No script, no external reference: a
// Content-Security-Policy forbids loading anything, so a stray reference shows up as a console
// error in the browser test instead of a silent fetch.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

#include "html/html.hpp"
#include "html/picture.hpp"

namespace ad {
namespace {

using html::Fit;
using html::Lane;
using html::Mark;
using html::Picture;
using html::Piece;

// A compare band's rule set, the arguments it replayed, and the first invariant they break.
std::string band_rule_set(const CompareBand& b) {
  return b.diagnosis && b.diagnosis->rule_set ? b.diagnosis->rule_set->name : std::string();
}
const VarlenArgs* band_args(const CompareBand& b) {
  return b.diagnosis && b.diagnosis->conversion.replayed ? &*b.diagnosis->conversion.replayed : nullptr;
}
const Violation* band_first(const CompareBand& b) { return b.diagnosis ? b.diagnosis->report.first_violation() : nullptr; }

// ---- text --------------------------------------------------------------------------------

std::string esc(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 16);
  for (char c : s) switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  return out;
}

// 1234567 -> "1,234,567"
std::string grouped(int64_t v) {
  const std::string digits = std::to_string(v);
  const size_t lead = digits[0] == '-' ? 1 : 0, n = digits.size() - lead;
  std::string out(digits, 0, lead);
  for (size_t i = 0; i < n; ++i) {
    if (i > 0 && (n - i) % 3 == 0) out += ',';
    out += digits[lead + i];
  }
  return out;
}

std::string range(int64_t b, int64_t e) { return e - b <= 1 ? grouped(b) : grouped(b) + "–" + grouped(e - 1); }

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  std::string s = buf;
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
  return s;
}

// ---- colours -----------------------------------------------------------------------------

// Ten hues that stay apart for the common colour-vision deficiencies; red and grey are kept
// for violations and padding.
const char* const kPalette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2",
                                "#edc948", "#9c755f", "#ff9da7", "#8cd17d", "#86bcb6"};
constexpr int kPaletteSize = 10;
const char* const kPadding = "#c8c8c8";
const char* const kViolation = "#d62728";
const char* const kWarn = "#b8860b";
const char* const kDiff = "#ff7f0e";

std::string sequence_colour(int64_t seq) { return kPalette[static_cast<size_t>(seq % kPaletteSize)]; }

// `hex` mixed with white: the segment lanes use lighter shades of their sequence's hue.
std::string lighter(const std::string& hex, double white) {
  unsigned r = 0, g = 0, b = 0;
  std::sscanf(hex.c_str(), "#%02x%02x%02x", &r, &g, &b);
  auto mix = [&](unsigned c) { return static_cast<unsigned>(std::lround(c + (255.0 - c) * white)); };
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", mix(r), mix(g), mix(b));
  return buf;
}

// ---- geometry ------------------------------------------------------------------------------

constexpr double kGutter = 122;   // row and lane labels
constexpr double kPlotMax = 1000;
constexpr double kRight = 72;     // overrun stubs past the plot
constexpr double kAxisH = 40;
constexpr double kIntentH = 22, kLaneH = 16, kLaneGap = 3, kRowGap = 11, kElideH = 18, kBandH = 24;

struct Style {
  std::string fill;
  std::string stroke;        // empty: none
  double stroke_width = 1;
  bool dashed = false;
  bool hatch = false;        // the "bad" overlay
};

// One drawn interval: tokens [begin, end) of a row on one lane, with its key.
struct Run {
  int64_t begin, end, key;
};

class Svg {
 public:
  Svg(const Picture& p, bool compare) : pic_(p), compare_(compare) {
    cw_ = std::min(40.0, kPlotMax / static_cast<double>(std::max<int64_t>(p.columns, 1)));
    plot_w_ = cw_ * static_cast<double>(p.columns);
  }

  std::string render(const std::vector<CompareBand>* bands) {
    y_ = kAxisH;
    if (!compare_) {
      for (size_t i = 0; i < pic_.drawn_rows.size(); ++i) {
        elide_before(i);
        row_block(pic_.drawn_rows[i], 0, true);
      }
    } else {
      band_header_text("intended sequences", "", false);
      for (size_t i = 0; i < pic_.drawn_rows.size(); ++i) {
        elide_before(i);
        intent_lane_row(pic_.drawn_rows[i]);
        y_ += kRowGap - 4;
      }
      for (int g = 0; g < pic_.groups; ++g) {
        const CompareBand* band = bands && g < static_cast<int>(bands->size()) ? &(*bands)[static_cast<size_t>(g)] : nullptr;
        y_ += 6;
        band_header(g, band);
        for (size_t i = 0; i < pic_.drawn_rows.size(); ++i) {
          elide_before(i);
          row_block(pic_.drawn_rows[i], g, false);
        }
      }
    }
    draw_marks();
    const double height = y_ + 8;
    const double width = kGutter + plot_w_ + kRight;
    std::ostringstream out;
    out << "<svg class=\"map\" width=\"" << fmt(width) << "\" height=\"" << fmt(height) << "\" viewBox=\"0 0 " << fmt(width)
        << " " << fmt(height) << "\" role=\"img\" aria-label=\"map of the batch: rows by tokens\">\n";
    out << defs();
    out << grid(height);
    out << body_.str();
    out << marks_.str();
    out << "</svg>\n";
    return out.str();
  }

  double cell_width() const { return cw_; }

 private:
  const Picture& pic_;
  bool compare_;
  double cw_ = 10, plot_w_ = 0, y_ = 0;
  std::ostringstream body_, marks_;
  // where each (group, lane, row) was drawn: y of the lane
  std::map<std::tuple<int, int, int64_t>, std::pair<double, double>> placed_;
  // previous band's lanes for the difference marks: (side, row) -> cell signatures
  std::map<std::pair<char, int64_t>, std::vector<uint64_t>> prev_sig_, cur_sig_;

  double x_of(int64_t token) const {
    return kGutter + static_cast<double>(token) * cw_ / static_cast<double>(pic_.bucket);
  }
  // cell-rounded x range of tokens [b, e)
  std::pair<double, double> cell_span(int64_t b, int64_t e) const {
    const int64_t bk = pic_.bucket;
    const double x0 = kGutter + static_cast<double>(std::clamp<int64_t>(b, 0, pic_.width) / bk) * cw_;
    const double x1 = kGutter + static_cast<double>((std::clamp<int64_t>(e, 0, pic_.width) + bk - 1) / bk) * cw_;
    return {x0, std::max(x1, x0 + std::min(cw_, 3.0))};
  }

  std::string defs() const {
    return "<defs>\n"
           "<pattern id=\"past\" width=\"7\" height=\"7\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
           "<rect width=\"7\" height=\"7\" fill=\"#fbe3e3\"/><rect width=\"2.5\" height=\"7\" fill=\"#e3868a\"/></pattern>\n"
           "<pattern id=\"bad\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
           "<rect width=\"1.6\" height=\"6\" fill=\"#d62728\" fill-opacity=\"0.6\"/></pattern>\n"
           "<pattern id=\"many\" width=\"4\" height=\"4\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(-45)\">"
           "<rect width=\"4\" height=\"4\" fill=\"#ffffff\"/><rect width=\"2\" height=\"4\" fill=\"#8a8a8a\"/></pattern>\n"
           "<pattern id=\"manywarn\" width=\"4\" height=\"4\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(-45)\">"
           "<rect width=\"4\" height=\"4\" fill=\"#fff6dc\"/><rect width=\"2\" height=\"4\" fill=\"#b8860b\"/></pattern>\n"
           "<pattern id=\"manybad\" width=\"4\" height=\"4\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(-45)\">"
           "<rect width=\"4\" height=\"4\" fill=\"#fbe3e3\"/><rect width=\"2\" height=\"4\" fill=\"#d62728\"/></pattern>\n"
           "</defs>\n";
  }

  // Token axis on top and light vertical grid lines through the picture.
  std::string grid(double height) const {
    std::ostringstream g;
    const int64_t bk = pic_.bucket;
    const double px_per_token = cw_ / static_cast<double>(bk);
    g << "<g class=\"axis\">\n";
    g << "<text x=\"" << fmt(kGutter - 8) << "\" y=\"" << fmt(kAxisH - 16)
      << "\" text-anchor=\"end\" class=\"axis-title\">" << (pic_.packed ? "packed row" : "token") << "</text>\n";
    if (bk == 1 && cw_ >= 13) {  // every token numbered, at the cell centres
      const int every = cw_ >= 20 ? 1 : 2;
      for (int64_t t = 0; t < pic_.width; t += every)
        g << "<text x=\"" << fmt(x_of(t) + cw_ / 2) << "\" y=\"" << fmt(kAxisH - 16) << "\" text-anchor=\"middle\">" << t
          << "</text>\n";
      for (int64_t t = 0; t <= pic_.width; t += 5)
        g << "<line x1=\"" << fmt(x_of(t)) << "\" x2=\"" << fmt(x_of(t)) << "\" y1=\"" << fmt(kAxisH - 6) << "\" y2=\""
          << fmt(height - 6) << "\" class=\"grid\"/>\n";
    } else {
      // ticks every `step` tokens, a "nice" number at least 80 px apart
      const double want = 80 / px_per_token;
      int64_t step = 1;
      for (int64_t p = 1; p < (int64_t{1} << 60); p *= 10) {
        bool done = false;
        for (int64_t m : {1, 2, 5})
          if (static_cast<double>(p * m) >= want) {
            step = p * m;
            done = true;
            break;
          }
        if (done) break;
      }
      for (int64_t t = 0; t <= pic_.width; t += step) {
        g << "<line x1=\"" << fmt(x_of(t)) << "\" x2=\"" << fmt(x_of(t)) << "\" y1=\"" << fmt(kAxisH - 8) << "\" y2=\""
          << fmt(height - 6) << "\" class=\"grid\"/>\n";
        g << "<text x=\"" << fmt(x_of(t) + 2) << "\" y=\"" << fmt(kAxisH - 16) << "\">" << grouped(t) << "</text>\n";
        if (t > pic_.width - step) break;
      }
    }
    // packed axis: where q and k/v end, when a boundary reaches past them
    std::map<int64_t, std::string> ends;
    for (const Lane& l : pic_.lanes)
      if (pic_.packed && l.limit >= 0 && l.limit < pic_.width) {
        std::string& who = ends[l.limit];
        const std::string name = l.q && l.k ? "q, k/v" : l.q ? "q" : "k/v";
        if (who.find(name) == std::string::npos) who += (who.empty() ? "" : ", ") + name;
      }
    for (const auto& [at, who] : ends)
      g << "<text x=\"" << fmt(x_of(at)) << "\" y=\"" << fmt(kAxisH - 4) << "\" text-anchor=\"middle\" class=\"end-label\">end of "
        << esc(who) << " (" << grouped(at) << ")</text>\n";
    // the axis end (row width)
    g << "<line x1=\"" << fmt(x_of(pic_.width)) << "\" x2=\"" << fmt(x_of(pic_.width)) << "\" y1=\"" << fmt(kAxisH - 8)
      << "\" y2=\"" << fmt(height - 6) << "\" class=\"grid end\"/>\n";
    g << "</g>\n";
    return g.str();
  }

  void elide_before(size_t i) {
    if (i == 0) return;
    const int64_t prev = pic_.drawn_rows[i - 1], cur = pic_.drawn_rows[i];
    if (cur == prev + 1 && pic_.phantom(prev) == pic_.phantom(cur)) return;
    std::string text;
    if (!pic_.phantom(prev) && pic_.phantom(cur)) {
      text = "past the batch: rows ≥ " + grouped(pic_.rows) + " do not exist (what lies here is read past the tensor)";
      if (cur > pic_.rows) text = "⋯ " + text;
    } else if (pic_.phantom(prev) && !pic_.phantom(cur)) {
      text = "the batch: rows 0–" + grouped(pic_.rows - 1);
    } else {
      text = "⋯ rows " + range(prev + 1, cur) + " not drawn (" + grouped(cur - prev - 1) + " rows) ⋯";
    }
    body_ << "<text x=\"" << fmt(kGutter) << "\" y=\"" << fmt(y_ + 11) << "\" class=\"elide\">" << esc(text) << "</text>\n";
    y_ += kElideH;
  }

  // ---- intent ------------------------------------------------------------------------------

  std::vector<Run> intent_runs(int64_t row) const {
    std::vector<Run> runs;
    int64_t at = 0;
    for (size_t i : pic_.sequences_in(row)) {
      const auto& s = pic_.sequences[i];
      if (s.start > at) runs.push_back({at, s.start, html::kPadding});
      runs.push_back({s.start, s.start + s.length, static_cast<int64_t>(i)});
      at = std::max(at, s.start + s.length);
    }
    if (!pic_.packed && at < pic_.intent_width) runs.push_back({at, pic_.intent_width, html::kPadding});
    return runs;
  }

  std::string intent_title(int64_t row, const Run& r) const {
    const bool one = r.end - r.begin == 1;
    const std::string where =
        (pic_.packed ? (one ? "packed row " : "packed rows ") : "row " + grouped(row) + (one ? ", token " : ", tokens ")) +
        range(r.begin, r.end);
    if (r.key == html::kPadding) return where + ": padding (" + grouped(r.end - r.begin) + ")";
    const auto& s = pic_.sequences[static_cast<size_t>(r.key)];
    return where + ": intended sequence " + grouped(r.key) + " (row " + grouped(s.row) + ", tokens " + range(s.start, s.start + s.length) +
           ", " + grouped(s.length) + " tokens)";
  }

  Style intent_style(int64_t key) const {
    Style s;
    s.fill = key == html::kPadding ? kPadding : sequence_colour(key);
    return s;
  }

  void intent_lane(int64_t row, double y, double h) {
    lane_background(y, h, row, -1);
    if (pic_.phantom(row)) {
      body_ << "<rect x=\"" << fmt(kGutter) << "\" y=\"" << fmt(y) << "\" width=\"" << fmt(plot_w_) << "\" height=\"" << fmt(h)
            << "\" fill=\"url(#past)\"><title>" << esc("row " + grouped(row) + " does not exist: the batch has rows 0–" + grouped(pic_.rows - 1))
            << "</title></rect>\n";
      body_ << "<text x=\"" << fmt(kGutter + 6) << "\" y=\"" << fmt(y + h / 2 + 4) << "\" class=\"inlane\">no such row (past the tensor)</text>\n";
      return;
    }
    auto runs = intent_runs(row);
    draw_runs(runs, y, h, /*merge=*/pic_.bucket > 1, [&](int64_t k) { return intent_style(k); },
              [&](const Run& r) { return intent_title(row, r); }, [](int64_t) { return std::string(); },
              [](int64_t) { return 0; });
  }

  void intent_lane_row(int64_t row) {
    label(row_label(row), y_ + kIntentH / 2 + 4, true);
    intent_lane(row, y_, kIntentH);
    placed_[{0, -1, row}] = {y_, kIntentH};
    y_ += kIntentH + kLaneGap;
  }

  std::string row_label(int64_t row) const {
    if (pic_.packed) return "intent";
    return pic_.phantom(row) ? "row " + grouped(row) + " ✗" : "row " + grouped(row);
  }

  void lane_background(double y, double h, int64_t row, int lane) {
    body_ << "<rect x=\"" << fmt(kGutter) << "\" y=\"" << fmt(y) << "\" width=\"" << fmt(plot_w_) << "\" height=\"" << fmt(h)
          << "\" class=\"lane-bg\"/>\n";
    // packed axis: the part of a lane past its tensor's rows
    if (lane >= 0) {
      const Lane& l = pic_.lanes[static_cast<size_t>(lane)];
      if (pic_.packed && l.limit >= 0 && l.limit < pic_.width) {
        const double x = x_of(l.limit);
        body_ << "<rect x=\"" << fmt(x) << "\" y=\"" << fmt(y) << "\" width=\"" << fmt(kGutter + plot_w_ - x) << "\" height=\""
              << fmt(h) << "\" fill=\"url(#past)\"><title>"
              << esc("past the " + grouped(l.limit) + " rows of " + std::string(l.q && !l.k ? "q" : l.k && !l.q ? "k/v" : "q and k/v"))
              << "</title></rect>\n";
      }
    }
    (void)row;
  }

  // packed axis: where the lane's tensor ends, over what is drawn in the lane
  void limit_line(const Lane& l, double y, double h) {
    if (!pic_.packed || l.limit < 0 || l.limit >= pic_.width) return;
    const double x = x_of(l.limit);
    body_ << "<line x1=\"" << fmt(x) << "\" x2=\"" << fmt(x) << "\" y1=\"" << fmt(y - 3) << "\" y2=\"" << fmt(y + h + 3)
          << "\" class=\"limit\"><title>" << esc(l.tensor + ": the tensor has " + grouped(l.limit) + " rows") << "</title></line>\n";
  }

  // ---- segments ------------------------------------------------------------------------------

  Style segment_style(const Lane& lane, int64_t seg) const {
    Style s;
    const html::SegmentInfo& info = lane.segments.at(static_cast<size_t>(seg));
    s.fill = info.owner >= 0 ? lighter(sequence_colour(info.owner), 0.38) : "#e4e4e4";
    s.stroke = "#333333";
    switch (info.fit) {
      case Fit::exact: break;
      case Fit::padded:
      case Fit::padding_only:
        s.stroke = kWarn;
        s.stroke_width = 1.6;
        s.dashed = true;
        break;
      case Fit::outside:
        s.fill = "#f4b6b6";
        [[fallthrough]];
      case Fit::merged:
      case Fit::split:
        s.stroke = kViolation;
        s.stroke_width = 1.8;
        s.dashed = true;
        s.hatch = true;
        break;
      default: break;
    }
    return s;
  }

  std::string segment_title(const Lane& lane, int64_t row, const Run& r) const {
    const html::SegmentInfo& info = lane.segments.at(static_cast<size_t>(r.key));
    std::string name = lane.dense ? "dense row " + grouped(r.key) : lane.tensor + " segment " + grouped(r.key);
    std::string t = name + ": packed rows " + range(info.from, info.to) + " (" + grouped(info.to - info.from) + ") → " +
                    (pic_.packed ? "packed rows " : "row " + grouped(row) + ", tokens ") + range(r.begin, r.end) + "; " +
                    html::to_string(info.fit);
    if (info.owners > 0) t += "; " + grouped(info.owners) + " intended sequence" + (info.owners > 1 ? "s" : "");
    if (info.padding > 0) t += ", " + grouped(info.padding) + " padding tokens";
    if (info.outside > 0) t += ", " + grouped(info.outside) + " rows outside";
    return t;
  }

  void segment_lane(int li, int64_t row, double y, double h) {
    const Lane& lane = pic_.lanes[static_cast<size_t>(li)];
    lane_background(y, h, row, li);
    if (!lane.problem.empty()) {
      body_ << "<text x=\"" << fmt(kGutter + 6) << "\" y=\"" << fmt(y + h / 2 + 4) << "\" class=\"inlane problem\">"
            << esc(lane.problem) << "</text>\n";
      return;
    }
    std::vector<Run> runs;
    auto it = lane.pieces.find(row);
    if (it != lane.pieces.end())
      for (const Piece& p : it->second) runs.push_back({p.begin, p.end, p.segment});
    if (runs.empty() && !pic_.phantom(row) && lane.past_packed_row != row)
      body_ << "<text x=\"" << fmt(kGutter + 6) << "\" y=\"" << fmt(y + h / 2 + 4) << "\" class=\"inlane quiet\">"
            << (lane.q && !lane.k ? "no query of this row is in any segment" : "no token of this row is in any segment")
            << "</text>\n";
    draw_runs(runs, y, h, true, [&](int64_t k) { return segment_style(lane, k); },
              [&](const Run& r) { return segment_title(lane, row, r); },
              [&](int64_t k) {
                std::string text = lane.dense ? "dense" : "s";
                if (!lane.dense) text += std::to_string(k);
                return text;
              },
              [&](int64_t k) { return severity_of(lane, k); });
    // a segment that goes on from the row above / into the row below
    if (it != lane.pieces.end())
      for (const Piece& p : it->second) {
        if (p.continues_left) {
          const double x = x_of(p.begin);
          body_ << "<path d=\"M" << fmt(x + 1) << " " << fmt(y + h / 2) << " l5 -4 v8 z\" class=\"cont\"><title>continues from "
                << (pic_.packed ? "before packed row 0" : "the row above") << "</title></path>\n";
        }
        if (p.continues_right) {
          const double x = x_of(std::min(p.end, pic_.width));
          body_ << "<path d=\"M" << fmt(x - 1) << " " << fmt(y + h / 2) << " l-5 -4 v8 z\" class=\"cont\"><title>continues "
                << (pic_.packed ? "past the axis" : "into the row below") << "</title></path>\n";
        }
      }
    limit_line(lane, y, h);
    // packed rows past the gather indices: a stub right of the plot
    if (lane.past_packed > 0 && lane.past_packed_row == row) {
      const double x = kGutter + plot_w_ + 6;
      body_ << "<rect x=\"" << fmt(x) << "\" y=\"" << fmt(y) << "\" width=\"" << fmt(kRight - 12) << "\" height=\"" << fmt(h)
            << "\" fill=\"url(#past)\" stroke=\"" << kViolation << "\"><title>"
            << esc(grouped(lane.past_packed) + " packed rows of " + lane.tensor + " lie past the " +
                   grouped(lane.indices ? lane.indices->numel() : 0) + " gathered rows: no token, the kernel reads past the packed tensor")
            << "</title></rect>\n";
      body_ << "<text x=\"" << fmt(x + 4) << "\" y=\"" << fmt(y + h / 2 + 4) << "\" class=\"stub\">+" << esc(grouped(lane.past_packed))
            << "</text>\n";
    }
  }

  // ---- the runs of one lane --------------------------------------------------------------------

  // How wrong a segment is, for cells too crowded to show each one: 0 fine, 1 padding, 2 wrong.
  static int severity_of(const Lane& lane, int64_t seg) {
    switch (lane.segments.at(static_cast<size_t>(seg)).fit) {
      case Fit::exact:
      case Fit::empty: return 0;
      case Fit::padded:
      case Fit::padding_only: return 1;
      default: return 2;
    }
  }

  template <class StyleFn, class TitleFn, class LabelFn, class SeverityFn>
  void draw_runs(const std::vector<Run>& runs, double y, double h, bool merge, StyleFn style, TitleFn title, LabelFn label_of,
                 SeverityFn severity) {
    const int64_t bk = pic_.bucket;
    auto rect = [&](double x, double w, const Style& s, const std::string& t, const std::string& text) {
      if (w <= 0) return;
      const double inset = merge && w > 3 ? 0.6 : 0;
      body_ << "<rect x=\"" << fmt(x + inset) << "\" y=\"" << fmt(y) << "\" width=\"" << fmt(w - 2 * inset) << "\" height=\""
            << fmt(h) << "\" fill=\"" << s.fill << "\"";
      if (!s.stroke.empty())
        body_ << " stroke=\"" << s.stroke << "\" stroke-width=\"" << fmt(s.stroke_width) << "\""
              << (s.dashed ? " stroke-dasharray=\"4 2\"" : "");
      if (!merge) body_ << " class=\"tok\"";
      body_ << "><title>" << esc(t) << "</title></rect>\n";
      if (s.hatch)
        body_ << "<rect x=\"" << fmt(x + inset) << "\" y=\"" << fmt(y) << "\" width=\"" << fmt(w - 2 * inset) << "\" height=\""
              << fmt(h) << "\" fill=\"url(#bad)\" pointer-events=\"none\"/>\n";
      if (!text.empty() && w >= 7.0 * static_cast<double>(text.size()) + 4)
        body_ << "<text x=\"" << fmt(x + w / 2) << "\" y=\"" << fmt(y + h / 2 + 4) << "\" text-anchor=\"middle\" class=\"seglabel\">"
              << esc(text) << "</text>\n";
    };
    if (bk == 1) {
      for (const Run& r : runs) {
        const int64_t b = std::max<int64_t>(r.begin, 0), e = std::min(r.end, pic_.width);
        if (b >= e) continue;
        if (merge) {
          rect(x_of(b), x_of(e) - x_of(b), style(r.key), title(r), label_of(r.key));
        } else {
          for (int64_t t = b; t < e; ++t) rect(x_of(t), cw_, style(r.key), title(Run{t, t + 1, r.key}), "");
        }
      }
      return;
    }
    // bucketed: what each cell holds, in order of first appearance
    struct Cell {
      std::vector<std::pair<int64_t, int64_t>> parts;  // key, tokens (at most 3)
      int64_t other_tokens = 0, other_keys = 0;
      int other_severity = 0;                          // the worst of the others
      int64_t total() const {
        int64_t t = other_tokens;
        for (const auto& p : parts) t += p.second;
        return t;
      }
    };
    std::vector<Cell> cells(static_cast<size_t>(pic_.columns));
    for (const Run& r : runs) {
      const int64_t b = std::max<int64_t>(r.begin, 0), e = std::min(r.end, pic_.width);
      for (int64_t c = b / bk; c < pic_.columns && c * bk < e; ++c) {
        const int64_t n = std::min(e, (c + 1) * bk) - std::max(b, c * bk);
        Cell& cell = cells[static_cast<size_t>(c)];
        auto it = std::find_if(cell.parts.begin(), cell.parts.end(), [&](const auto& p) { return p.first == r.key; });
        if (it != cell.parts.end()) it->second += n;
        else if (cell.parts.size() < 3) cell.parts.push_back({r.key, n});
        else {
          cell.other_tokens += n;
          ++cell.other_keys;
          cell.other_severity = std::max(cell.other_severity, severity(r.key));
        }
      }
    }
    auto capacity = [&](int64_t c) { return std::min(bk, pic_.width - c * bk); };
    auto pure = [&](int64_t c) -> std::optional<int64_t> {
      const Cell& cell = cells[static_cast<size_t>(c)];
      if (cell.parts.size() == 1 && cell.other_tokens == 0 && cell.parts[0].second == capacity(c)) return cell.parts[0].first;
      return std::nullopt;
    };
    for (int64_t c = 0; c < pic_.columns;) {
      const Cell& cell = cells[static_cast<size_t>(c)];
      if (cell.parts.empty()) {
        ++c;
        continue;
      }
      if (auto key = pure(c); key && merge) {
        int64_t d = c + 1;
        while (d < pic_.columns && pure(d) == key) ++d;
        const int64_t b = c * bk, e = std::min(d * bk, pic_.width);
        rect(kGutter + static_cast<double>(c) * cw_, static_cast<double>(d - c) * cw_, style(*key), title(Run{b, e, *key}),
             label_of(*key));
        c = d;
        continue;
      }
      // a mixed cell: parts side by side, in proportion; the rest striped
      const double scale = cw_ / static_cast<double>(std::max(cell.total(), capacity(c)));
      double x = kGutter + static_cast<double>(c) * cw_;
      std::string t = (pic_.packed ? "packed rows " : "tokens ") + range(c * bk, std::min((c + 1) * bk, pic_.width)) + ":";
      for (const auto& [key, n] : cell.parts) {
        std::string name = key < 0 ? "padding" : label_of(key);
        if (name.empty()) name.append("sequence ").append(grouped(key));
        t.append(" ").append(name).append(" ×").append(grouped(n)).append(",");
      }
      if (cell.other_keys) t.append(" ").append(grouped(cell.other_keys)).append(" more ×").append(grouped(cell.other_tokens)).append(",");
      t.pop_back();
      for (const auto& [key, n] : cell.parts) {
        Style s = style(key);
        s.stroke.clear();
        s.hatch = severity(key) == 2;
        const double w = static_cast<double>(n) * scale;
        rect(x, w, s, t, "");
        x += w;
      }
      static const char* const kMany[] = {"url(#many)", "url(#manywarn)", "url(#manybad)"};
      if (cell.other_tokens > 0)
        rect(x, static_cast<double>(cell.other_tokens) * scale, Style{kMany[cell.other_severity]}, t, "");
      ++c;
    }
  }

  // ---- rows and bands --------------------------------------------------------------------------

  void label(const std::string& text, double y, bool strong) {
    body_ << "<text x=\"" << fmt(kGutter - 8) << "\" y=\"" << fmt(y) << "\" text-anchor=\"end\" class=\""
          << (strong ? "rowlabel" : "lanelabel") << "\">" << esc(text) << "</text>\n";
  }

  // check: the row's intent lane and every lane under it; compare: band g's lanes for the row
  void row_block(int64_t row, int group, bool with_intent) {
    if (with_intent) {
      label(row_label(row), y_ + kIntentH / 2 + 4, true);
      intent_lane(row, y_, kIntentH);
      placed_[{group, -1, row}] = {y_, kIntentH};
      y_ += kIntentH + kLaneGap;
    }
    bool first = true;
    for (size_t i = 0; i < pic_.lanes.size(); ++i) {
      const Lane& lane = pic_.lanes[i];
      if (lane.group != group) continue;
      // a lane with nothing to draw says why once, on the first row
      if (!lane.problem.empty() && !pic_.drawn_rows.empty() && row != pic_.drawn_rows.front()) continue;
      std::string text = lane.label;
      if (!with_intent) text = (pic_.packed ? std::string() : row_label(row) + " · ") + (lane.dense ? "dense" : lane.q && lane.k ? "q=k" : lane.q ? "q" : "k");
      else if (pic_.groups == 1 && lane_origin_count() > 1) text = (lane.args && lane.args->path == VarlenPath::explicit_varlen ? "given " : "replay ") + lane.label.substr(lane.label.find(' ') == std::string::npos ? 0 : lane.label.find(' ') + 1);
      label(text, y_ + kLaneH / 2 + 4, !with_intent && first);
      body_ << "<g><title>" << esc(lane.title) << "</title>\n";
      segment_lane(static_cast<int>(i), row, y_, kLaneH);
      body_ << "</g>\n";
      placed_[{group, static_cast<int>(i), row}] = {y_, kLaneH};
      if (!with_intent && first) placed_[{group, -1, row}] = {y_, kLaneH};
      if (compare_) diff_marks(static_cast<int>(i), row, y_ + kLaneH);
      y_ += kLaneH + kLaneGap;
      first = false;
    }
    y_ += kRowGap - kLaneGap;
  }

  int lane_origin_count() const {
    bool given = false, replay = false;
    for (const Lane& l : pic_.lanes) (l.args && l.args->path == VarlenPath::explicit_varlen ? given : replay) = true;
    return given + replay;
  }

  void band_header_text(const std::string& title, const std::string& detail, bool changed) {
    body_ << "<text x=\"8\" y=\"" << fmt(y_ + 14) << "\" class=\"band\">" << esc(title) << "</text>\n";
    if (!detail.empty())
      body_ << "<text x=\"" << fmt(kGutter) << "\" y=\"" << fmt(y_ + 14) << "\" class=\"banddetail\">" << esc(detail) << "</text>\n";
    if (changed)
      body_ << "<text x=\"" << fmt(kGutter + plot_w_ + 6) << "\" y=\"" << fmt(y_ + 14) << "\" class=\"changed\">changed</text>\n";
    y_ += kBandH;
  }

  void band_header(int g, const CompareBand* band) {
    if (!band) return band_header_text("band " + std::to_string(g), "", false);
    const VarlenArgs* args = band_args(*band);
    const Violation* first = band_first(*band);
    std::string detail = band_rule_set(*band) + " · " + (args ? to_string(args->path) + " path" : "") + " · ";
    if (args && args->failure) detail += "raises " + args->failure->type + " · ";
    detail += first ? "first violation: " + first->id : "every invariant holds";
    band_header_text(band->release, detail, band->changed);
    body_ << "<line x1=\"8\" x2=\"" << fmt(kGutter + plot_w_) << "\" y1=\"" << fmt(y_ - 4) << "\" y2=\"" << fmt(y_ - 4)
          << "\" class=\"bandrule\"/>\n";
    // signatures of the previous band's lanes become the reference for this band's
    prev_sig_ = std::move(cur_sig_);
    cur_sig_.clear();
  }

  // compare: cells where this lane differs from the same side's lane in the band above
  void diff_marks(int li, int64_t row, double y_below) {
    const Lane& lane = pic_.lanes[static_cast<size_t>(li)];
    const char side = lane.dense ? 'd' : lane.q && lane.k ? 'b' : lane.q ? 'q' : 'k';
    std::vector<uint64_t> sig(static_cast<size_t>(pic_.columns), 1469598103934665603ull);
    auto mixin = [](uint64_t& h, uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    auto it = lane.pieces.find(row);
    if (it != lane.pieces.end())
      for (const Piece& p : it->second) {
        const int64_t b = std::max<int64_t>(p.begin, 0), e = std::min(p.end, pic_.width);
        const auto fit = static_cast<uint64_t>(lane.segments[static_cast<size_t>(p.segment)].fit);
        for (int64_t c = b / pic_.bucket; c < pic_.columns && c * pic_.bucket < e; ++c) {
          uint64_t& h = sig[static_cast<size_t>(c)];
          mixin(h, static_cast<uint64_t>(std::max(b, c * pic_.bucket)));
          mixin(h, static_cast<uint64_t>(std::min(e, (c + 1) * pic_.bucket)));
          mixin(h, fit);
        }
      }
    if (!lane.problem.empty()) sig.assign(sig.size(), 7);
    // the lane covering the same side above: both, or the one side
    const std::vector<uint64_t>* prev = nullptr;
    for (char s : {side, 'b', 'k'})
      if (auto p = prev_sig_.find({s, row}); p != prev_sig_.end()) {
        prev = &p->second;
        break;
      }
    // a lane showing both sides (or the dense kernel) stands for either side in the band below
    if (side == 'b' || side == 'd')
      for (char s : {'b', 'd', 'k', 'q'}) cur_sig_[{s, row}] = sig;
    else
      cur_sig_[{side, row}] = sig;
    if (!prev || prev->size() != sig.size()) return;
    for (int64_t c = 0; c < pic_.columns;) {
      if ((*prev)[static_cast<size_t>(c)] == sig[static_cast<size_t>(c)]) {
        ++c;
        continue;
      }
      int64_t d = c + 1;
      while (d < pic_.columns && (*prev)[static_cast<size_t>(d)] != sig[static_cast<size_t>(d)]) ++d;
      body_ << "<rect x=\"" << fmt(kGutter + static_cast<double>(c) * cw_) << "\" y=\"" << fmt(y_below + 0.5) << "\" width=\""
            << fmt(static_cast<double>(d - c) * cw_) << "\" height=\"2.5\" fill=\"" << kDiff << "\"><title>"
            << esc("differs from the band above: tokens " + range(c * pic_.bucket, std::min(d * pic_.bucket, pic_.width)))
            << "</title></rect>\n";
      c = d;
    }
  }

  // ---- the first violation ------------------------------------------------------------------

  void draw_marks() {
    bool badge = false;
    for (const Mark& m : pic_.marks) {
      auto at = placed_.find({m.group, m.lane, m.row});
      if (at == placed_.end() && m.lane < 0) at = placed_.find({m.group, -1, m.row});
      if (at == placed_.end()) continue;
      const auto [y, h] = at->second;
      double x0, x1;
      if (m.past_packed) {
        x0 = kGutter + plot_w_ + 6;
        x1 = x0 + kRight - 12;
      } else {
        std::tie(x0, x1) = cell_span(m.begin, m.end);
      }
      marks_ << "<rect x=\"" << fmt(x0 - 2) << "\" y=\"" << fmt(y - 2.5) << "\" width=\"" << fmt(x1 - x0 + 4) << "\" height=\""
             << fmt(h + 5) << "\" class=\"mark\"><title>first violation</title></rect>\n";
      if (!badge) {
        marks_ << "<g class=\"badge\"><circle cx=\"" << fmt(x1 + 2) << "\" cy=\"" << fmt(y - 2.5) << "\" r=\"7\"/><text x=\""
               << fmt(x1 + 2) << "\" y=\"" << fmt(y + 1.5) << "\" text-anchor=\"middle\">!</text></g>\n";
        badge = true;
      }
    }
  }
};

// ---- the page --------------------------------------------------------------------------------

const char* const kCss = R"(
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: #1d1d1f;
       background: #ffffff; margin: 20px 28px; }
h1 { font-size: 19px; margin: 0 0 4px; }
h1 .cmd { color: #666; font-weight: normal; }
h2 { font-size: 15px; margin: 22px 0 6px; }
.status { display: inline-block; padding: 1px 8px; border-radius: 10px; font-weight: 600; font-size: 13px; }
.status.ok { background: #e3f4e1; color: #1e6b1e; }
.status.violation { background: #fbe0e0; color: #a11; }
.status.error { background: #fff1cc; color: #7a5a00; }
.status.warning { background: #fff1cc; color: #7a5a00; }
.why { margin: 8px 0 0; padding: 4px 10px; border-left: 4px solid #b8860b; background: #fffaf0; max-width: 1180px; }
.why p, .why ul { margin: 3px 0; }
figure { margin: 10px 0 0; }
figcaption { margin: 0 0 8px; max-width: 1180px; }
figcaption p { margin: 3px 0; }
.first { border-left: 4px solid #d62728; padding: 4px 10px; background: #fff6f6; }
.first.none { border-left-color: #2e8b57; background: #f3fbf5; }
.first.nowhere { border-left-color: #b8860b; background: #fffaf0; }
code { font: 12.5px ui-monospace, "DejaVu Sans Mono", monospace; background: #f2f2f2; padding: 0 3px; border-radius: 3px; }
.scroll { overflow-x: auto; }
svg.map { display: block; background: #ffffff; }
svg text { font: 11px system-ui, "DejaVu Sans", sans-serif; fill: #333; }
svg .axis text { fill: #555; font-size: 10.5px; }
svg .axis-title { font-style: italic; }
svg .grid { stroke: #e6e6e6; stroke-width: 1; }
svg .grid.end { stroke: #999; stroke-dasharray: 3 3; }
svg .rowlabel { font-weight: 700; fill: #111; font-size: 12px; }
svg .lanelabel { fill: #555; }
svg .lane-bg { fill: #f6f6f6; }
svg .tok { stroke: #ffffff; stroke-width: 1; }
svg .seglabel { fill: #111; font-size: 10.5px; font-weight: 600; }
svg .inlane { fill: #8a1c1c; font-style: italic; }
svg .problem { fill: #8a1c1c; }
svg .quiet { fill: #777; }
svg .elide { fill: #666; font-style: italic; }
svg .axis .end-label { fill: #8a1c1c; font-weight: 700; }
svg .limit { stroke: #8a1c1c; stroke-width: 2.5; }
svg .cont { fill: #222; }
svg .stub { fill: #8a1c1c; font-weight: 700; }
svg .mark { fill: none; stroke: #d62728; stroke-width: 3; }
svg .badge circle { fill: #d62728; }
svg .badge text { fill: #ffffff; font-weight: 700; font-size: 11px; }
svg .band { font-weight: 700; font-size: 12.5px; fill: #111; }
svg .banddetail { fill: #333; font-size: 11.5px; }
svg .changed { fill: #c55a00; font-weight: 700; }
svg .bandrule { stroke: #cfcfcf; }
.legend { display: flex; flex-wrap: wrap; gap: 6px 18px; margin: 12px 0 0; font-size: 13px; max-width: 1180px; }
.legend span.item { display: inline-flex; align-items: center; gap: 6px; }
.sw { display: inline-block; width: 22px; height: 13px; border-radius: 2px; }
.sw.pad { background: #c8c8c8; }
.sw.seg { background: #cfe0ef; border: 1px solid #333; }
.sw.warn { background: #e4e4e4; border: 1.5px dashed #b8860b; }
.sw.bad { border: 1.5px dashed #d62728;
          background: repeating-linear-gradient(45deg, #f3d0d0 0 3px, #d62728 3px 4.5px); }
.sw.past { background: repeating-linear-gradient(45deg, #fbe3e3 0 4px, #e3868a 4px 6px); }
.sw.mark { background: #fff; border: 3px solid #d62728; }
.sw.diff { background: #ff7f0e; height: 4px; }
.sw.many { background: repeating-linear-gradient(-45deg, #fff 0 2px, #8a8a8a 2px 4px); }
.seqs { font-size: 12.5px; color: #444; margin: 6px 0 0; max-width: 1180px; }
.seqs .sw { width: 12px; height: 12px; vertical-align: -1px; margin-right: 3px; }
pre.report { font: 12.5px/1.4 ui-monospace, "DejaVu Sans Mono", monospace; background: #fafafa; border: 1px solid #e3e3e3;
             padding: 10px 12px; white-space: pre-wrap; max-width: 1180px; }
footer { color: #777; font-size: 12px; margin-top: 18px; }
)";

std::string page_head(const std::string& title) {
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  // nothing may be loaded from anywhere: inline styles only, images only as data
  h += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n";
  h += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  h += "<title>" + esc(title) + "</title>\n<style>" + std::string(kCss) + "</style>\n</head>\n<body>\n";
  return h;
}

std::string legend(const Picture& pic, bool compare) {
  std::ostringstream l;
  l << "<div class=\"legend\">\n";
  auto item = [&](const std::string& cls, const std::string& style, const std::string& text) {
    l << "<span class=\"item\"><span class=\"sw " << cls << "\"" << (style.empty() ? "" : " style=\"" + style + "\"") << "></span>"
      << text << "</span>\n";
  };
  item("", "background:linear-gradient(90deg," + std::string(kPalette[0]) + " 0 25%," + kPalette[1] + " 25% 50%," + kPalette[2] +
               " 50% 75%," + kPalette[3] + " 75%)",
       "token of an intended sequence (one colour each)");
  item("pad", "", "padding");
  item("seg", "", "segment of <code>cu_seqlens</code> = one intended sequence");
  item("warn", "", "segment with padding, or padding only");
  item("bad", "", "segment merges, splits or overruns sequences");
  item("past", "", "past the tensor / no such row");
  item("mark", "", "first violation");
  if (pic.bucket > 1) item("many", "", "cell shared by more than three sequences or segments (amber/red: some with padding/wrong)");
  if (compare) item("diff", "", "differs from the band above");
  l << "</div>\n";
  // the intended sequences, each with its colour
  l << "<p class=\"seqs\">Intended sequences (" << esc(pic.intent_source) << "): ";
  const size_t shown = std::min<size_t>(pic.sequences.size(), 16);
  for (size_t i = 0; i < shown; ++i) {
    const auto& s = pic.sequences[i];
    l << "<span class=\"sw\" style=\"background:" << sequence_colour(static_cast<int64_t>(i)) << "\"></span>" << i << " = "
      << (pic.packed ? "packed rows " : "row " + grouped(s.row) + ", tokens ") << range(s.start, s.start + s.length)
      << (i + 1 < shown ? "; " : "");
  }
  if (pic.sequences.size() > shown) l << "; and " << grouped(static_cast<int64_t>(pic.sequences.size() - shown)) << " more";
  if (pic.sequences.empty()) l << "none";
  l << ".</p>\n";
  return l.str();
}

std::string scale_text(const Picture& pic) {
  std::string s = pic.packed ? "the packed axis, " + grouped(pic.width) + (pic.width == 1 ? " row" : " rows")
                             : grouped(pic.rows) + (pic.rows == 1 ? " row" : " rows") + " × " + grouped(pic.width) + " tokens";
  if (pic.bucket > 1) s += "; one cell = " + grouped(pic.bucket) + " tokens (hover a cell for its counts)";
  const int64_t real = std::count_if(pic.drawn_rows.begin(), pic.drawn_rows.end(), [&](int64_t r) { return !pic.phantom(r); });
  if (!pic.packed && real < pic.rows) s += "; " + grouped(real) + " of " + grouped(pic.rows) + " rows drawn";
  return s;
}

// "the violation at k segment 2 (packed rows 5-9), outlined in red"
std::string first_violation_html(const Violation* first, const Picture& pic, const html::Location& where, const std::string& prefix) {
  if (!first) return "<p class=\"first none\">" + prefix + "every invariant holds: nothing to outline.</p>\n";
  std::string s = "<p class=\"first" + std::string(pic.marks.empty() ? " nowhere" : "") + "\">" + prefix + "first violation <code>" +
                  esc(first->id) + "</code> (" + esc(to_string(first->severity)) + ", " + esc(first->stage) + "): " +
                  esc(first->message) + "<br>";
  if (!pic.marks.empty()) {
    s += "Outlined in red at <b>" + esc(where.text) + "</b>.";
  } else if (where.kind == html::Location::Kind::none) {
    s += "It names no place in the batch (it concerns the call's tensors or settings), so nothing is outlined.";
  } else {
    std::string why = pic.unlocated.empty() ? "it is not on the drawn rows" : pic.unlocated.front();
    s += "It points at " + esc(where.text) + ", which the picture cannot show (" + esc(why) + ").";
  }
  return s + "</p>\n";
}

std::string lane_summary(const Picture& pic, int group) {
  std::ostringstream o;
  std::set<const VarlenArgs*> seen;
  for (const Lane& l : pic.lanes) {
    if (l.group != group || !l.args || seen.count(l.args)) continue;
    seen.insert(l.args);
    const VarlenArgs& a = *l.args;
    int64_t n = 0, exact = 0, bad = 0, warn = 0;
    for (const Lane& m : pic.lanes)
      if (m.args == l.args)
        for (const auto& s : m.segments) {
          if (s.fit == Fit::empty) continue;
          ++n;
          if (s.fit == Fit::exact) ++exact;
          else if (s.fit == Fit::padded || s.fit == Fit::padding_only) ++warn;
          else ++bad;
        }
    o << "<p>" << (a.path == VarlenPath::explicit_varlen ? "Given arguments (the batch file's <code>varlen</code> block)"
                                                          : "Replayed <code>" + esc(a.rule_set) + "</code>" +
                                                                (a.requested.empty() ? "" : " (transformers " + esc(a.requested) + ")"))
      << ": " << esc(to_string(a.path)) << " path, <code>" << esc(a.call.function_name()) << "</code>";
    if (a.path != VarlenPath::dense)
      o << "; " << grouped(n) << " non-empty segment" << (n == 1 ? "" : "s") << " drawn: " << grouped(exact) << " exact, " << grouped(bad)
        << " wrong, " << grouped(warn) << " with padding";
    o << ".";
    if (a.failure)
      o << " The release raises <code>" << esc(a.failure->type) << ": " << esc(a.failure->message) << "</code> in <code>"
        << esc(a.failure->where) << "</code>; the lanes show what it computed before.";
    for (const Lane& m : pic.lanes)
      if (m.args == l.args && m.truncated) o << " (" << esc(m.tensor) << ": too large to classify every segment; partial.)";
    o << "</p>\n";
  }
  return o.str();
}

std::vector<html::LaneSource> check_sources(const Conversion& c) {
  std::vector<html::LaneSource> sources;
  if (c.replayed && (c.replayed->path != VarlenPath::dense || !c.replayed->rule_set.empty()))
    sources.push_back({&*c.replayed, "replay " + c.replayed->rule_set, !c.explicit_args, 0});
  if (c.explicit_args) sources.push_back({&*c.explicit_args, "given (varlen block)", true, 0});
  return sources;
}

// The badge: "ok", "error", or the violations counted by severity ("violation: 2 errors,
// 1 warning"; "warnings: 1" when nothing is at error severity).
std::string count_text(size_t n, const char* word) { return std::to_string(n) + " " + word + (n == 1 ? "" : "s"); }
std::pair<size_t, size_t> severities(const Report& r) {
  size_t errors = 0;
  for (const Violation& v : r.violations) errors += v.severity == Severity::error;
  return {errors, r.violations.size() - errors};
}
std::string status_class(const Report& r) {
  if (r.status() != "violation") return r.status();
  return severities(r).first ? "violation" : "warning";
}
std::string status_text(const Report& r) {
  if (r.status() != "violation") return r.status();
  const auto [errors, warnings] = severities(r);
  if (!errors) return "warnings only: " + count_text(warnings, "warning");
  return "violation: " + count_text(errors, "error") + (warnings ? ", " + count_text(warnings, "warning") : "");
}

// A broken invariant beside a prediction of "ok": the prediction is what the real stack does
// with the call (lib/predict's combination of each violation's symptom), and a violation adds
// nothing to it when its symptom is "ok" (the stack tolerates it), when it shows only in a
// backward pass the call does not run, or when no symptom is modelled for it. Say which.
std::string prediction_note(const Report& r, CallPass pass) {
  if (!r.prediction || r.prediction->symptom.outcome != Outcome::ok || r.violations.empty()) return "";
  std::string items;
  for (const Violation& v : r.violations) {
    std::string why;
    const bool untrusted = r.intent && !r.intent->trusted;
    if ((v.id == "result.reference" || v.id == "backward.reference") && untrusted)
      why = "it compares against a reference derived from the arguments under test (untrusted), so it does not enter the "
            "prediction";
    else if (!v.symptom) why = "no symptom is modelled for it, so it does not enter the prediction";
    else if (v.symptom->pass == Pass::backward && pass != CallPass::training)
      why = "it shows only in the backward pass (" + esc(to_string(v.symptom->outcome)) +
            "), and this batch is a forward call (<code>pass</code> is not <code>training</code>)";
    else if (v.symptom->outcome == Outcome::ok)
      why = "the real stack runs through it: " + esc(v.symptom->message) + " [" + esc(v.symptom->basis) + "]";
    else continue;
    items += "<li><code>" + esc(v.id) + "</code> (" + esc(to_string(v.severity)) + "): " + why + "</li>\n";
  }
  return "<div class=\"why\"><p>Why <b>" + esc(status_text(r)) + "</b> beside <b>prediction: ok</b>: the badge counts the "
         "invariants the call breaks; the prediction is what the real stack does with it (one symptom per violation, "
         "combined as <code>docs/prediction.md</code> describes). Here no violation has a harmful symptom "
         "for this call:</p>\n<ul>\n" + items + "</ul></div>\n";
}

}  // namespace

std::string render_check_html(const Batch& batch, const Diagnosis& diagnosis, const HtmlOptions& options) {
  const Report& report = diagnosis.report;
  const Violation* first = report.first_violation();
  std::vector<html::Highlight> highlights;
  html::Location where;
  if (first) {
    where = html::locate(*first);
    highlights.push_back({0, where, first->id});
  }
  Picture pic = html::build_picture(batch, check_sources(diagnosis.conversion), highlights, options);
  const std::string name = report.name.empty() ? batch.name : report.name;
  std::ostringstream o;
  o << page_head("attn-doctor check: " + name);
  o << "<h1>" << esc(name) << " <span class=\"cmd\">· attn-doctor check " << esc(report.input) << "</span></h1>\n";
  o << "<span class=\"status " << esc(status_class(report)) << "\">" << esc(status_text(report)) << "</span>\n";
  o << prediction_note(report, batch.pass);
  if (!batch.batch && !batch.varlen) {
    // a rotary or launch description: no tokens, nothing to draw
    o << "<p class=\"first nowhere\">The batch file describes no tokens (no <code>batch</code> or <code>varlen</code> block), so "
         "there is no picture; the report below is the whole result.</p>\n";
    o << "<h2>Report</h2>\n<pre class=\"report\">" << esc(render_text(diagnosis, RenderOptions{false, options.full, true}))
      << "</pre>\n</body>\n</html>\n";
    return o.str();
  }
  o << "<figure>\n<figcaption>\n";
  o << "<p>" << esc(scale_text(pic)) << "; " << grouped(static_cast<int64_t>(pic.sequences.size())) << " intended sequence"
    << (pic.sequences.size() == 1 ? "" : "s") << " (" << esc(pic.intent_source) << ").</p>\n";
  o << lane_summary(pic, 0);
  if (pic.lanes.empty()) o << "<p>No <code>cu_seqlens</code> to draw: nothing reached a varlen kernel.</p>\n";
  o << first_violation_html(first, pic, where, "");
  o << "</figcaption>\n<div class=\"scroll\">\n";
  Svg svg(pic, false);
  o << svg.render(nullptr);
  o << "</div>\n</figure>\n";
  o << legend(pic, false);
  o << "<h2>Report</h2>\n<pre class=\"report\">" << esc(render_text(diagnosis, RenderOptions{false, options.full, true}))
    << "</pre>\n";
  o << "<footer>attn-doctor " << esc(report.version) << " · one self-contained file: no script, nothing loaded.</footer>\n";
  o << "</body>\n</html>\n";
  return o.str();
}

std::string render_compare_html(const Batch& batch, const std::vector<CompareBand>& bands, const std::string& input_label,
                                const HtmlOptions& options) {
  std::vector<html::LaneSource> sources;
  std::vector<html::Highlight> highlights;
  std::vector<html::Location> where(bands.size());
  for (size_t g = 0; g < bands.size(); ++g) {
    const VarlenArgs* args = band_args(bands[g]);
    if (!args) continue;
    sources.push_back({args, band_rule_set(bands[g]), true, static_cast<int>(g)});
    if (const Violation* first = bands[g].diagnosis->report.first_violation()) {
      where[g] = html::locate(*first);
      highlights.push_back({static_cast<int>(g), where[g], first->id});
    }
  }
  Picture pic = html::build_picture(batch, sources, highlights, options);
  pic.groups = std::max<int>(pic.groups, static_cast<int>(bands.size()));
  std::ostringstream o;
  o << page_head("attn-doctor compare: " + batch.name);
  o << "<h1>" << esc(batch.name) << " <span class=\"cmd\">· attn-doctor compare " << esc(input_label) << "</span></h1>\n";
  // a release counts as breaking an invariant for an error-severity violation or when it
  // raises; one whose findings are all warnings is counted apart
  size_t errors = 0, warnings = 0, changed = 0;
  for (const auto& b : bands) {
    const bool raises = band_args(b) && band_args(b)->failure;
    const bool error = raises || (b.diagnosis && b.diagnosis->report.has_error_severity(false));
    errors += error;
    warnings += !error && band_first(b);
    changed += b.changed;
  }
  o << "<span class=\"status " << (errors ? "violation" : warnings ? "warning" : "ok") << "\">" << grouped(static_cast<int64_t>(errors))
    << " of " << grouped(static_cast<int64_t>(bands.size())) << " releases break an invariant (error)</span>\n";
  if (warnings)
    o << "<span class=\"status warning\">" << grouped(static_cast<int64_t>(warnings)) << " more only warn</span>\n";
  o << "<figure>\n<figcaption>\n<p>" << esc(scale_text(pic)) << "; " << grouped(static_cast<int64_t>(pic.sequences.size()))
    << " intended sequences (" << esc(pic.intent_source) << "). One band per release, on the same token axis; "
    << grouped(static_cast<int64_t>(changed)) << " band" << (changed == 1 ? "" : "s")
    << " marked <b>changed</b> (what reaches the kernel differs from the band above; the cells that differ are underlined in orange). "
       "Each band's first violation is outlined in red.</p>\n";
  o << "</figcaption>\n<div class=\"scroll\">\n";
  Svg svg(pic, true);
  o << svg.render(&bands);
  o << "</div>\n</figure>\n";
  o << legend(pic, true);
  // the text below the picture: one entry per release
  std::ostringstream t;
  for (size_t g = 0; g < bands.size(); ++g) {
    const CompareBand& b = bands[g];
    t << (b.changed ? "* " : "  ") << b.release << "  " << band_rule_set(b);
    const Violation* first = band_first(b);
    if (const VarlenArgs* args = band_args(b)) {
      const VarlenArgs& a = *args;
      t << "  path " << to_string(a.path);
      if (a.path != VarlenPath::dense) {
        auto list = [](const IntTensor& x) {
          std::string s = "[";
          const size_t n = x.values.size();
          for (size_t i = 0; i < n; ++i) {
            if (n > 12 && i == 5) {
              s += "... (" + std::to_string(n) + " entries), ";
              i = n - 5;
            }
            s += std::to_string(x.values[i]) + (i + 1 < n ? ", " : "");
          }
          return s + "]";
        };
        t << "\n      cu_seqlens_q " << list(a.cu_seqlens_q) << "  cu_seqlens_k " << list(a.cu_seqlens_k)
          << "\n      max_seqlen_q " << a.max_seqlen_q.value << (a.max_seqlen_q.is_tensor ? " (0-d tensor)" : "") << "  max_seqlen_k "
          << a.max_seqlen_k.value << (a.max_seqlen_k.is_tensor ? " (0-d tensor)" : "") << "  total q/k " << a.total_q << "/" << a.total_k;
      }
      if (a.failure) t << "\n      raises " << a.failure->type << ": " << a.failure->message << " (" << a.failure->where << ")";
    }
    t << "\n      " << (first ? "first violation " + first->id + ": " + first->message : std::string("every invariant holds"));
    if (first && !where[g].text.empty()) t << "\n      at " << where[g].text;
    if (!b.note.empty()) t << "\n      note: " << b.note;
    t << "\n";
  }
  o << "<h2>Releases</h2>\n<pre class=\"report\">" << esc(t.str()) << "</pre>\n";
  o << "<footer>attn-doctor · one self-contained file: no script, nothing loaded.</footer>\n";
  o << "</body>\n</html>\n";
  return o.str();
}

}  // namespace ad
