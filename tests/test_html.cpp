// The HTML rendering (lib/html): the page is self-contained (no script, no external
// reference) and well-formed, every intended sequence is drawn, segments are classified the
// way the picture shows them, the first violation is outlined where its evidence places it,
// and the page stays small on a million-token batch.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include "batch/batch.hpp"
#include "check/check.hpp"
#include "convert/convert.hpp"
#include "html/html.hpp"
#include "html/picture.hpp"
#include "report/report.hpp"
#include "util/subprocess.hpp"

using namespace ad;
using nlohmann::json;

namespace {

Batch batch_from(const json& j) { return parse_batch_text(j.dump(), "test.json"); }

IntTensor vec(std::vector<int64_t> v, DType t = DType::int32) {
  IntTensor x;
  x.shape = {static_cast<int64_t>(v.size())};
  x.values = std::move(v);
  x.dtype = t;
  return x;
}

// What transformers' _upad_input produces for a 2-D 0/1 mask with Lq == Lk (mask path).
VarlenArgs mask_path_args(const Batch& b) {
  const IntTensor& m = b.batch->attention_mask->tensor;
  const int64_t B = m.dim(0), S = m.dim(1);
  std::vector<int64_t> cu{0}, idx;
  int64_t longest = 0;
  for (int64_t r = 0; r < B; ++r) {
    int64_t n = 0;
    for (int64_t c = 0; c < S; ++c)
      if (m.values[static_cast<size_t>(r * S + c)]) {
        idx.push_back(r * S + c);
        ++n;
      }
    cu.push_back(cu.back() + n);
    longest = std::max(longest, n);
  }
  VarlenArgs a;
  a.path = VarlenPath::mask;
  a.rule_set = "hf-test";
  a.cu_seqlens_q = a.cu_seqlens_k = vec(cu);
  a.max_seqlen_q = a.max_seqlen_k = {longest, false, DType::int64};
  a.total_q = a.total_k = cu.back();
  a.indices_q = a.indices_k = vec(idx, DType::int64);
  a.gather_rows_q = a.gather_rows_k = B * S;
  return a;
}

Report report_with(const Batch& b, std::vector<Violation> vs) {
  Report r;
  r.version = "0.1.0";
  r.input = "test.json";
  r.name = b.name;
  for (auto& v : vs) r.add(std::move(v));
  return r;
}

// A small tag checker: every non-void element closed in order; attributes quoted.
std::string structure_error(const std::string& html) {
  static const std::set<std::string> kVoid = {"meta", "br", "img", "input", "link", "hr", "col", "area", "base", "wbr"};
  std::vector<std::string> open;
  size_t i = 0;
  while ((i = html.find('<', i)) != std::string::npos) {
    if (html.compare(i, 4, "<!--") == 0) {
      i = html.find("-->", i);
      if (i == std::string::npos) return "unterminated comment";
      continue;
    }
    const size_t end = html.find('>', i);
    if (end == std::string::npos) return "unterminated tag at " + std::to_string(i);
    std::string tag = html.substr(i + 1, end - i - 1);
    i = end + 1;
    if (tag.empty() || tag[0] == '!') continue;
    if (std::count(tag.begin(), tag.end(), '"') % 2 != 0) return "unbalanced quotes in <" + tag + ">";
    if (tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (open.empty() || open.back() != name)
        return "</" + name + "> closes <" + (open.empty() ? std::string("nothing") : open.back()) + ">";
      open.pop_back();
      continue;
    }
    const bool self_closing = tag.back() == '/';
    const std::string name = tag.substr(0, tag.find_first_of(" \n/"));
    if (self_closing || kVoid.count(name)) continue;
    if (name == "style") {  // raw text up to </style>
      i = html.find("</style>", i);
      if (i == std::string::npos) return "unterminated <style>";
      i += 8;
      continue;
    }
    open.push_back(name);
  }
  return open.empty() ? "" : "<" + open.back() + "> never closed";
}

void require_self_contained(const std::string& page) {
  CHECK(page.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(page.find("<script") == std::string::npos);
  // no http:// or https:// anywhere: the only "http" is the CSP's <meta http-equiv>
  size_t http = 0, equiv = 0;
  for (size_t at = page.find("http"); at != std::string::npos; at = page.find("http", at + 1)) ++http;
  for (size_t at = page.find("http-equiv"); at != std::string::npos; at = page.find("http-equiv", at + 1)) ++equiv;
  CHECK(http == equiv);
  CHECK(equiv == 1);
  CHECK(page.find("src=") == std::string::npos);
  CHECK(page.find("@import") == std::string::npos);
  if (page.find("<svg") != std::string::npos)
    CHECK(page.find("url(#") != std::string::npos);  // patterns are referenced in-document only
  std::smatch m;
  std::string rest = page;
  while (std::regex_search(rest, m, std::regex(R"(url\(([^)]*)\))"))) {
    INFO(m[1].str());
    CHECK(m[1].str().rfind("#", 0) == 0);
    rest = m.suffix();
  }
  CHECK(structure_error(page) == "");
  CHECK(std::count(page.begin(), page.end(), '\0') == 0);
}

const json kTwoRows = {
    {"format", "attn-doctor/batch@1"},
    {"name", "two-rows"},
    {"model", {{"num_heads", 8}, {"head_dim", 64}}},
    {"batch", {{"attention_mask", {{"values", {{1, 1, 1, 2, 2, 2, 2, 0}, {1, 1, 1, 1, 1, 0, 0, 0}}}}}}},
};

}  // namespace

TEST_CASE("html: location from each check's evidence", "[html]") {
  using K = html::Location::Kind;
  auto at = [](const char* id, json ev) { return html::locate(make_violation(id, Severity::error, "m", std::move(ev))); };

  auto l = at("mask.binary", {{"row", 1}, {"column", 3}, {"value", 2}});
  CHECK(l.kind == K::tokens);
  CHECK((l.row == 1 && l.begin == 3 && l.end == 4));

  l = at("mask.kv_length", {{"mask_width", 10}, {"kv_length", 8}});
  CHECK(l.kind == K::columns);
  CHECK((l.begin == 8 && l.end == 10));

  l = at("mask.padding_side", {{"row", 0}, {"padding_from_column", 3}, {"slice_columns", {4, 6}}});
  CHECK(l.kind == K::tokens);
  CHECK((l.row == 0 && l.begin == 4 && l.end == 6));

  l = at("cu_seqlens.segments", {{"side", "k"}, {"segment", 2}, {"packed_rows", {5, 9}}});
  CHECK(l.kind == K::segment);
  CHECK((l.side == 'k' && l.segment == 2));
  CHECK(l.text.find("packed rows 5-8") != std::string::npos);

  l = at("cu_seqlens.segments", {{"side", "k"}, {"sequence", "row 1, tokens 3-5"}});
  CHECK(l.kind == K::tokens);
  CHECK((l.row == 1 && l.begin == 3 && l.end == 6));

  l = at("cu_seqlens.total", {{"tensor", "cu_seqlens_q"}, {"last", 400}, {"rows", 387}});
  CHECK(l.kind == K::packed_rows);
  CHECK((l.side == 'q' && l.begin == 387 && l.end == 400 && !l.gather));

  l = at("indices.range", {{"tensor", "indices_k"}, {"position", 7}, {"index", 20}, {"rows", 16}});
  CHECK(l.kind == K::packed_rows);
  CHECK((l.side == 'k' && l.begin == 7 && l.end == 8 && l.gather));

  l = at("max_seqlen.covers", {{"argument", "max_seqlen_k"}, {"segment", 1}, {"value", 3}, {"length", 5}});
  CHECK((l.kind == K::segment && l.side == 'k' && l.segment == 1));

  l = at("position_ids.consecutive", {{"row", 2}, {"token", 5}, {"from", 3}, {"to", 0}});
  CHECK((l.kind == K::tokens && l.row == 2 && l.begin == 5));

  l = at("position_ids.origin", {{"row", 0}, {"start", 4}, {"length", 3}, {"position", 2}});
  CHECK((l.kind == K::tokens && l.begin == 4 && l.end == 7));

  l = at("route.packed_to_dense", {{"row", 1}, {"sequences_in_row", 2}});
  CHECK((l.kind == K::row && l.row == 1));

  // dynamic stages (lib/exec)
  l = at("unpad.gather", {{"tensor", "k"}, {"indices", "indices_k"}, {"position", 4}, {"index", 99}, {"bound", 16}});
  CHECK((l.kind == K::packed_rows && l.side == 'k' && l.gather && l.begin == 4));
  l = at("attention.access", {{"kind", "read"}, {"buffer", "k"}, {"index", 40}, {"bound", 32}, {"row", 40}, {"segment", 3}});
  CHECK((l.kind == K::segment && l.side == 'k' && l.segment == 3));
  l = at("attention.coverage", {{"never_written", 2}, {"first_never_written", 12}, {"rows", 16}});
  CHECK((l.kind == K::packed_rows && l.side == 'q' && l.begin == 12 && !l.gather));
  l = at("result.reference", {{"row", 7}, {"sequence", {{"index", 1}, {"row", 0}, {"start", 3}, {"length", 4}}}});
  CHECK((l.kind == K::tokens && l.row == 0 && l.begin == 3 && l.end == 7));
  CHECK(at("result.finite", {{"row", 3}, {"head", 0}, {"dim", 1}}).kind == K::none);  // an output row, not a batch row

  // no place in the batch
  CHECK(at("input.dtype", {{"dtype", "fp32"}}).kind == K::none);
  CHECK(at("mask.rank", {{"mask_shape", {2, 1, 4, 4}}}).kind == K::none);
  CHECK(at("rotary.dim", {{"rotary_dim", 1024}, {"head_dim", 64}}).kind == K::none);
  // a tensor row that is not a batch row: input.int32_range's evidence names the tensor
  CHECK(at("cu_seqlens.dtype", {{"tensor", "cu_seqlens_q"}, {"dtype", "int64"}}).kind == K::none);
}

TEST_CASE("html: bucket sizes are nice numbers that fit the columns", "[html]") {
  CHECK(html::bucket_for(12, 160) == 1);
  CHECK(html::bucket_for(160, 160) == 1);
  CHECK(html::bucket_for(161, 160) == 2);
  CHECK(html::bucket_for(400, 160) == 4);
  CHECK(html::bucket_for(1 << 20, 160) == 8192);
  CHECK(html::bucket_for(1000000, 160) == 8192);
  for (int64_t w : {int64_t{999}, int64_t{5000}, int64_t{123457}, int64_t{1} << 40}) {
    const int64_t b = html::bucket_for(w, 160);
    CHECK((w + b - 1) / b <= 160);
  }
}

TEST_CASE("html: segments classified against the intended sequences", "[html]") {
  Batch b = batch_from(kTwoRows);
  REQUIRE(b.intent.sequences.size() == 3);  // row 0: 0-2 and 3-6 (segment ids), row 1: 0-4

  SECTION("the mask path through the unpad indices: a row's two sequences merged") {
    VarlenArgs a = mask_path_args(b);  // segment-id mask read as 0/1: one segment per row
    html::Picture p = html::build_picture(b, {{&a, "replay", true, 0}}, {}, {});
    REQUIRE(p.lanes.size() == 1);  // q == k: one lane
    const html::Lane& lane = p.lanes[0];
    CHECK((lane.q && lane.k && lane.indices));
    REQUIRE(lane.segments.size() == 2);
    CHECK(lane.segments[0].fit == html::Fit::merged);
    CHECK(lane.segments[0].owners == 2);
    CHECK(lane.segments[1].fit == html::Fit::exact);
    REQUIRE(lane.pieces.count(1));
    CHECK(lane.pieces.at(1).size() == 1);
    CHECK((lane.pieces.at(1)[0].begin == 0 && lane.pieces.at(1)[0].end == 5));
  }

  SECTION("the (B * S) view: a segment past the batch lands on a phantom row") {
    VarlenArgs a;
    a.path = VarlenPath::position_ids;
    a.cu_seqlens_q = a.cu_seqlens_k = vec({0, 3, 4, 7, 13, 24});
    a.total_q = a.total_k = 24;
    html::Picture p = html::build_picture(b, {{&a, "replay", true, 0}}, {}, {});
    const html::Lane& lane = p.lanes.at(0);
    REQUIRE(lane.segments.size() == 5);
    CHECK(lane.segments[0].fit == html::Fit::exact);    // row 0 tokens 0-2
    CHECK(lane.segments[1].fit == html::Fit::split);    // row 0 token 3 of 3-6
    CHECK(lane.segments[2].fit == html::Fit::split);    // row 0 tokens 4-6 of 3-6
    CHECK(lane.segments[3].fit == html::Fit::padded);   // row 0 token 7 (padding) + row 1 tokens 0-4
    CHECK(lane.segments[4].fit == html::Fit::outside);  // row 1's tail, then row 2 (past the batch)
    CHECK(lane.segments[4].outside == 8);
    CHECK(std::find(p.drawn_rows.begin(), p.drawn_rows.end(), 2) != p.drawn_rows.end());
    REQUIRE(lane.pieces.count(1));
    CHECK(lane.pieces.at(1).front().continues_left);
    REQUIRE(lane.pieces.count(2));
    CHECK(lane.pieces.at(2).front().segment == 4);

    a.cu_seqlens_q = a.cu_seqlens_k = vec({0, 7, 16});  // one segment per row: row 0's two merged
    p = html::build_picture(b, {{&a, "replay", true, 0}}, {}, {});
    CHECK(p.lanes.at(0).segments[0].fit == html::Fit::merged);
    CHECK(p.lanes.at(0).segments[0].owners == 2);
  }

  SECTION("decode: the query lane sits on the last column") {
    json j = kTwoRows;
    j["batch"] = {{"attention_mask", {{"lengths", {5, 3}}, {"width", 6}, {"padding_side", "left"}}},
                  {"query_length", 1},
                  {"kv_length", 6}};
    Batch d = batch_from(j);
    VarlenArgs a = mask_path_args(d);
    a.cu_seqlens_q = vec({0, 1, 2});
    a.indices_q = vec({0, 1}, DType::int64);
    a.gather_rows_q = 2;
    a.total_q = 2;
    a.max_seqlen_q = {1, false, DType::int64};
    html::Picture p = html::build_picture(d, {{&a, "replay", true, 0}}, {}, {});
    REQUIRE(p.lanes.size() == 2);
    const html::Lane& q = p.lanes[0].q ? p.lanes[0] : p.lanes[1];
    CHECK(q.col_offset == 5);
    CHECK(q.segments[0].fit == html::Fit::exact);
    CHECK(q.pieces.at(1)[0].begin == 5);
  }
}

TEST_CASE("html: the first violation is outlined where its evidence places it", "[html]") {
  Batch b = batch_from(kTwoRows);
  VarlenArgs a = mask_path_args(b);

  SECTION("a segment") {
    html::Location where = html::locate(make_violation("cu_seqlens.segments", Severity::error, "merged",
                                                       {{"side", "k"}, {"segment", 0}, {"packed_rows", {0, 7}}}));
    html::Picture p = html::build_picture(b, {{&a, "replay", true, 0}}, {{0, where, "cu_seqlens.segments"}}, {});
    REQUIRE(p.marks.size() == 1);
    CHECK(p.marks[0].lane == 0);
    CHECK((p.marks[0].row == 0 && p.marks[0].begin == 0 && p.marks[0].end == 7));

    Conversion c;
    c.replayed = a;
    std::string page = render_check_html(b, c, report_with(b, {make_violation("cu_seqlens.segments", Severity::error,
                                                                              "k segment 0 spans 2 sequences",
                                                                              {{"side", "k"}, {"segment", 0}})}));
    require_self_contained(page);
    CHECK(page.find("class=\"mark\"") != std::string::npos);
    CHECK(page.find("Outlined in red at <b>k segment 0</b>") != std::string::npos);
  }

  SECTION("an out-of-range gather index, on a phantom row") {
    VarlenArgs bad = a;
    bad.indices_k->values.back() = 20;  // past the 16 rows of the (B * Lk) view: row 2
    bad.indices_q = bad.indices_k;
    html::Location where = html::locate(make_violation("indices.range", Severity::error, "out of range",
                                                       {{"tensor", "indices_k"}, {"position", 11}, {"index", 20}}));
    html::Picture p = html::build_picture(b, {{&bad, "replay", true, 0}}, {{0, where, "indices.range"}}, {});
    REQUIRE(p.marks.size() == 1);
    CHECK((p.marks[0].row == 2 && p.marks[0].begin == 4));
    CHECK(std::find(p.drawn_rows.begin(), p.drawn_rows.end(), 2) != p.drawn_rows.end());
  }

  SECTION("tokens of a row, and a violation with no place") {
    Conversion c;
    c.replayed = a;
    std::string page = render_check_html(
        b, c, report_with(b, {make_violation("mask.binary", Severity::error, "segment ids", {{"row", 0}, {"column", 3}})}));
    require_self_contained(page);
    CHECK(page.find("class=\"mark\"") != std::string::npos);
    CHECK(page.find("row 0, token 3") != std::string::npos);

    page = render_check_html(b, c, report_with(b, {make_violation("input.dtype", Severity::error, "fp32", {{"dtype", "fp32"}})}));
    require_self_contained(page);
    CHECK(page.find("class=\"mark\"") == std::string::npos);
    CHECK(page.find("names no place in the batch") != std::string::npos);
  }

  SECTION("a violation from the real static checks (cu_seqlens.total, explicit arguments)") {
    Batch e = batch_from({{"format", "attn-doctor/batch@1"},
                          {"name", "overrun"},
                          {"model", {{"num_heads", 16}, {"num_kv_heads", 4}, {"head_dim", 128}}},
                          {"varlen", {{"cu_seqlens_q", {0, 100, 137, 400}}, {"max_seqlen_q", 263}, {"total_q", 387}}}});
    Conversion c = convert(e);
    Report r = report_with(e, run_static_checks(e, c));
    REQUIRE(r.first_violation());
    REQUIRE(r.first_violation()->id == "cu_seqlens.total");
    std::string page = render_check_html(e, c, r);
    require_self_contained(page);
    CHECK(page.find("class=\"mark\"") != std::string::npos);
    CHECK(page.find("the packed axis") != std::string::npos);
    CHECK(page.find("class=\"limit\"") != std::string::npos);  // where q ends
  }
}

TEST_CASE("html: every intended sequence is drawn, text is escaped", "[html]") {
  json j = kTwoRows;
  j["name"] = "<script>alert('x')</script> & co";
  Batch b = batch_from(j);
  Conversion c;
  c.replayed = mask_path_args(b);
  Report r = report_with(b, {make_violation("cu_seqlens.segments", Severity::error, "a <b> message & more",
                                            {{"side", "k"}, {"segment", 0}})});
  r.name = j["name"];
  std::string page = render_check_html(b, c, r);
  require_self_contained(page);
  CHECK(page.find("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; co") != std::string::npos);
  CHECK(page.find("a &lt;b&gt; message &amp; more") != std::string::npos);
  for (size_t i = 0; i < b.intent.sequences.size(); ++i) {
    INFO("sequence " << i);
    CHECK(page.find("intended sequence " + std::to_string(i) + " (") != std::string::npos);
  }
  CHECK(page.find("<pre class=\"report\">") != std::string::npos);  // the text report below
  CHECK(page.find("first violation: cu_seqlens.segments") != std::string::npos);
}

TEST_CASE("html: bounded size on a million-token batch", "[html]") {
  using Clock = std::chrono::steady_clock;

  SECTION("1024 rows x 1024 tokens, right-padded, mask path") {
    json lengths = json::array();
    for (int r = 0; r < 1024; ++r) lengths.push_back(512 + (r * 37) % 512);
    Batch b = batch_from({{"format", "attn-doctor/batch@1"},
                          {"name", "million-rows"},
                          {"model", {{"num_heads", 8}, {"head_dim", 64}}},
                          {"batch", {{"attention_mask", {{"lengths", lengths}, {"width", 1024}, {"padding_side", "right"}}}}}});
    Conversion c;
    c.replayed = mask_path_args(b);
    c.replayed->indices_k->values[1000] = int64_t{1} << 21;  // one gather index past the view
    c.replayed->indices_q = c.replayed->indices_k;
    Report r = report_with(b, {make_violation("indices.range", Severity::error, "out of range",
                                              {{"tensor", "indices_k"}, {"position", 1000}, {"index", int64_t{1} << 21}})});
    auto t0 = Clock::now();
    std::string page = render_check_html(b, c, r);
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    INFO("bytes " << page.size() << ", seconds " << seconds);
    CHECK(page.size() < 600'000);
    CHECK(seconds < 20);
    require_self_contained(page);
    CHECK(page.find("one cell = 8 tokens") != std::string::npos);
    CHECK(page.find("rows drawn") != std::string::npos);
    CHECK(page.find("not drawn") != std::string::npos);
    CHECK(page.find("class=\"mark\"") != std::string::npos);
  }

  SECTION("one packed row of 1,048,576 tokens in 4,096 sequences, segments shifted by one") {
    std::vector<int64_t> cu{0};
    while (cu.back() < (1 << 20)) cu.push_back(cu.back() + 128 + (cu.size() * 61) % 256);
    cu.back() = 1 << 20;
    json packed = json::array();
    for (size_t i = 1; i < cu.size(); ++i) packed.push_back(cu[i] - cu[i - 1]);
    Batch b = batch_from({{"format", "attn-doctor/batch@1"},
                          {"name", "million-packed"},
                          {"model", {{"num_heads", 8}, {"head_dim", 64}}},
                          {"batch", {{"position_ids", {{"from", "packed"}, {"lengths", packed}}}}}});
    REQUIRE(b.intent.sequences.size() == packed.size());
    VarlenArgs a;
    a.path = VarlenPath::position_ids;
    std::vector<int64_t> shifted = cu;
    for (size_t i = 1; i + 1 < shifted.size(); ++i) shifted[i] += 1;  // every boundary one token late
    a.cu_seqlens_q = a.cu_seqlens_k = vec(shifted);
    a.total_q = a.total_k = 1 << 20;
    Conversion c;
    c.replayed = a;
    Report r = report_with(b, {make_violation("cu_seqlens.segments", Severity::error, "split",
                                              {{"side", "k"}, {"segment", 2000}})});
    auto t0 = Clock::now();
    std::string page = render_check_html(b, c, r);
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    INFO("bytes " << page.size() << ", seconds " << seconds);
    CHECK(page.size() < 600'000);
    CHECK(seconds < 20);
    require_self_contained(page);
    CHECK(page.find("class=\"mark\"") != std::string::npos);
    CHECK(page.find("one cell = 8,192 tokens") != std::string::npos);
    // every intended sequence is accounted for in the cells' counts and the legend
    std::string more = std::to_string(b.intent.sequences.size() - 16);
    if (more.size() > 3) more.insert(more.size() - 3, ",");
    CHECK(page.find("and " + more + " more") != std::string::npos);
  }

  SECTION("a packed axis with an absurd boundary stays a picture") {
    Batch b = batch_from({{"format", "attn-doctor/batch@1"},
                          {"name", "absurd"},
                          {"model", {{"num_heads", 8}, {"head_dim", 64}}},
                          {"varlen", {{"cu_seqlens_q", {0, 100, int64_t{1} << 40}}, {"max_seqlen_q", 100}, {"total_q", 200}}}});
    Conversion c = convert(b);
    std::string page = render_check_html(b, c, report_with(b, run_static_checks(b, c)));
    CHECK(page.size() < 200'000);
    require_self_contained(page);
  }
}

TEST_CASE("html: compare draws one band per release, differences marked", "[html]") {
  Batch b = batch_from(kTwoRows);
  VarlenArgs mask = mask_path_args(b);
  VarlenArgs dense;
  dense.path = VarlenPath::dense;
  dense.call.function = "flash_attn_func";
  VarlenArgs same = mask;
  Violation merged = make_violation("cu_seqlens.segments", Severity::error, "merged", {{"side", "k"}, {"segment", 0}});
  std::vector<CompareBand> bands = {
      {"4.43.0", "hf-4.43", &dense, nullptr, "", false},
      {"4.44.0", "hf-4.44.0", &mask, &merged, "", true},
      {"4.44.1", "hf-4.44.1", &same, &merged, "", false},
  };
  std::string page = render_compare_html(b, bands, "test.json");
  require_self_contained(page);
  for (const char* release : {"4.43.0", "4.44.0", "4.44.1", "hf-4.43", "hf-4.44.0", "hf-4.44.1"}) {
    INFO(release);
    CHECK(page.find(release) != std::string::npos);
  }
  CHECK(page.find(">changed</text>") != std::string::npos);
  // the band that differs from the one above has its cells underlined; the identical one not
  const size_t band2 = page.find(">4.44.0</text>"), band3 = page.find(">4.44.1</text>");
  REQUIRE(band2 != std::string::npos);
  REQUIRE(band3 != std::string::npos);
  const std::string diff = "fill=\"#ff7f0e\"";
  const size_t first_diff = page.find(diff, band2);
  CHECK(first_diff < band3);
  CHECK(page.find(diff, band3) == std::string::npos);
  CHECK(page.find("class=\"mark\"") != std::string::npos);
}

TEST_CASE("html: check --html writes the page, refuses an unwritable path, leaves nothing on failure", "[html]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("attn-doctor-html-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string bin = ATTN_DOCTOR_BINARY;
  const std::string batch = std::string(ATTN_DOCTOR_SOURCE_DIR) + "/tests/html/cases/cu-seqlens-overrun.json";
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), bin);
    return run_process(args, 60);
  };

  const fs::path page = dir / "page.html";
  ProcessResult r = run({"check", batch, "--backend", "none", "--html", page.string()});
  CHECK(r.exit_code == 1);                                                 // the verdict is unchanged
  CHECK(r.out.find("first violation: cu_seqlens.total") != std::string::npos);  // and so is stdout
  REQUIRE(fs::exists(page));
  std::ifstream in(page);
  std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  require_self_contained(html);
  CHECK(html.find("class=\"mark\"") != std::string::npos);

  r = run({"check", batch, "--backend", "none", "--html", (dir / "no-such-dir" / "page.html").string()});
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("cannot write") != std::string::npos);

  const fs::path stale = dir / "stale.html";
  r = run({"check", (dir / "missing.json").string(), "--backend", "none", "--html", stale.string()});
  CHECK(r.exit_code == 2);
  CHECK(!fs::exists(stale));
  fs::remove_all(dir);
}

TEST_CASE("html: a batch without tokens gets the report and no picture", "[html]") {
  Batch b = batch_from({{"format", "attn-doctor/batch@1"},
                        {"name", "rotary-only"},
                        {"model", {{"num_heads", 16}, {"head_dim", 64}, {"hidden_size", 1024}}},
                        {"rotary", {{"implementation", "fla"}, {"dim", 1024}}}});
  Report r = report_with(b, {make_violation("rotary.dim", Severity::error, "rotary dim 1024 > head_dim 64",
                                            {{"rotary_dim", 1024}, {"head_dim", 64}})});
  std::string page = render_check_html(b, Conversion{}, r);
  require_self_contained(page);
  CHECK(page.find("<svg") == std::string::npos);
  CHECK(page.find("describes no tokens") != std::string::npos);
  CHECK(page.find("rotary dim 1024 &gt; head_dim 64") != std::string::npos);
}
