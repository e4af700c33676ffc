// The HTML rendering (lib/html): the page is self-contained (no script, no external
// reference) and well-formed, every intended sequence is drawn, segments are classified the
// way the picture shows them, the first violation is outlined where its typed location places it,
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
#include "doctor/doctor.hpp"
#include "html/html.hpp"
#include "html/picture.hpp"
#include "render/render.hpp"
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

// A violation placed at `where`, as the check that finds it would place it.
Violation placed(Violation v, const Location& where) {
  v.location = where;
  return v;
}

// The check page of a diagnosis holding this conversion and report.
std::string check_page(const Batch& b, const Conversion& c, const Report& r) {
  Diagnosis d;
  d.conversion = c;
  d.report = r;
  return render_check_html(b, d);
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

TEST_CASE("html: the outline follows the violation's typed location", "[html]") {
  using K = html::Location::Kind;
  auto at = [](const Location& where) {
    Violation v = make_violation("cu_seqlens.segments", Severity::error, "m");
    v.location = where;
    return html::locate(v);
  };

  auto l = at(Location::row_tokens(1, 3, 4));
  CHECK(l.kind == K::tokens);
  CHECK((l.row == 1 && l.begin == 3 && l.end == 4));
  CHECK(l.text == "row 1, token 3");

  l = at(Location::columns(8, 10));
  CHECK(l.kind == K::columns);
  CHECK((l.begin == 8 && l.end == 10));

  Location seg = Location::segment_of(Side::k, 2);
  seg.packed_rows = IndexRange{5, 9};
  l = at(seg);
  CHECK(l.kind == K::segment);
  CHECK((l.side == 'k' && l.segment == 2));
  CHECK(l.text.find("packed rows 5-8") != std::string::npos);

  l = at(Location::packed(Side::q, 400, 387));
  CHECK(l.kind == K::packed_rows);
  CHECK((l.side == 'q' && l.begin == 387 && l.end == 400 && !l.gather));

  l = at(Location::indices(Side::k, 7, 8));
  CHECK(l.kind == K::packed_rows);
  CHECK((l.side == 'k' && l.begin == 7 && l.end == 8 && l.gather));

  l = at(Location::whole_row(1));
  CHECK((l.kind == K::row && l.row == 1));

  CHECK(at(Location{}).kind == K::none);  // a violation that names no place in the batch
}

TEST_CASE("html: the checks place their violations", "[html]") {
  // each check sets the location from the values it found, never from its message or evidence
  json j = kTwoRows;
  Batch b = batch_from(j);
  VarlenArgs a = mask_path_args(b);
  Conversion c;
  c.replayed = a;
  const std::vector<Violation> found = run_static_checks(b, c);
  const Violation* binary = nullptr;
  for (const Violation& v : found)
    if (v.id == "mask.binary") binary = &v;
  REQUIRE(binary);  // the 2s of the first row are segment ids
  CHECK(binary->location == Location::row_tokens(0, 3, 4));
  CHECK(location_json(binary->location) == json{{"row", 0}, {"tokens", {3, 4}}});
}

TEST_CASE("html: the first violation is outlined where its location places it", "[html]") {
  Batch b = batch_from(kTwoRows);
  VarlenArgs a = mask_path_args(b);

  SECTION("a segment") {
    html::Location where = html::locate(placed(make_violation("cu_seqlens.segments", Severity::error, "merged"),
                                               Location::segment_of(Side::k, 0)));
    html::Picture p = html::build_picture(b, {{&a, "replay", true, 0}}, {{0, where, "cu_seqlens.segments"}}, {});
    REQUIRE(p.marks.size() == 1);
    CHECK(p.marks[0].lane == 0);
    CHECK((p.marks[0].row == 0 && p.marks[0].begin == 0 && p.marks[0].end == 7));

    Conversion c;
    c.replayed = a;
    std::string page = check_page(
        b, c,
        report_with(b, {placed(make_violation("cu_seqlens.segments", Severity::error, "k segment 0 spans 2 sequences"),
                               Location::segment_of(Side::k, 0))}));
    require_self_contained(page);
    CHECK(page.find("class=\"mark\"") != std::string::npos);
    CHECK(page.find("Outlined in red at <b>k segment 0</b>") != std::string::npos);
  }

  SECTION("an out-of-range gather index, on a phantom row") {
    VarlenArgs bad = a;
    bad.indices_k->values.back() = 20;  // past the 16 rows of the (B * Lk) view: row 2
    bad.indices_q = bad.indices_k;
    html::Location where = html::locate(
        placed(make_violation("indices.range", Severity::error, "out of range"), Location::indices(Side::k, 11, 12)));
    html::Picture p = html::build_picture(b, {{&bad, "replay", true, 0}}, {{0, where, "indices.range"}}, {});
    REQUIRE(p.marks.size() == 1);
    CHECK((p.marks[0].row == 2 && p.marks[0].begin == 4));
    CHECK(std::find(p.drawn_rows.begin(), p.drawn_rows.end(), 2) != p.drawn_rows.end());
  }

  SECTION("tokens of a row, and a violation with no place") {
    Conversion c;
    c.replayed = a;
    std::string page = check_page(
        b, c,
        report_with(b, {placed(make_violation("mask.binary", Severity::error, "segment ids"), Location::row_tokens(0, 3, 4))}));
    require_self_contained(page);
    CHECK(page.find("class=\"mark\"") != std::string::npos);
    CHECK(page.find("row 0, token 3") != std::string::npos);

    page = check_page(b, c, report_with(b, {make_violation("input.dtype", Severity::error, "fp32", {{"dtype", "fp32"}})}));
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
    std::string page = check_page(e, c, r);
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
  Report r = report_with(b, {placed(make_violation("cu_seqlens.segments", Severity::error, "a <b> message & more"),
                                    Location::segment_of(Side::k, 0))});
  r.name = j["name"];
  std::string page = check_page(b, c, r);
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
    Report r = report_with(b, {placed(make_violation("indices.range", Severity::error, "out of range"),
                                      Location::indices(Side::k, 1000, 1001))});
    auto t0 = Clock::now();
    std::string page = check_page(b, c, r);
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
    Report r = report_with(b, {placed(make_violation("cu_seqlens.segments", Severity::error, "split"),
                                      Location::segment_of(Side::k, 2000))});
    auto t0 = Clock::now();
    std::string page = check_page(b, c, r);
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
    std::string page = check_page(b, c, report_with(b, run_static_checks(b, c)));
    CHECK(page.size() < 200'000);
    require_self_contained(page);
  }
}

TEST_CASE("html: compare draws one band per release, differences marked", "[html]") {
  Batch b = batch_from(kTwoRows);
  VarlenArgs mask = mask_path_args(b);
  VarlenArgs dense;
  dense.path = VarlenPath::dense;
  dense.call.api = ad::Api::flash_attn_2_dense;
  VarlenArgs same = mask;
  Violation merged = placed(make_violation("cu_seqlens.segments", Severity::error, "merged"), Location::segment_of(Side::k, 0));
  auto band = [&](const char* rule_set, const VarlenArgs& args, const Violation* first) {
    Diagnosis d;
    d.rule_set = find_rule_set(rule_set);
    REQUIRE(d.rule_set);
    d.conversion.replayed = args;
    d.report = report_with(b, first ? std::vector<Violation>{*first} : std::vector<Violation>{});
    return d;
  };
  const Diagnosis d43 = band("hf-4.43", dense, nullptr), d440 = band("hf-4.44.0", mask, &merged),
                  d441 = band("hf-4.44.1", same, &merged);
  std::vector<CompareBand> bands = {
      {"4.43.0", &d43, "", false},
      {"4.44.0", &d440, "", true},
      {"4.44.1", &d441, "", false},
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
  std::string page = check_page(b, Conversion{}, r);
  require_self_contained(page);
  CHECK(page.find("<svg") == std::string::npos);
  CHECK(page.find("describes no tokens") != std::string::npos);
  CHECK(page.find("rotary dim 1024 &gt; head_dim 64") != std::string::npos);
}

TEST_CASE("html: a violation beside prediction ok says why", "[html]") {
  Batch b = batch_from(kTwoRows);
  Conversion c;
  c.replayed = mask_path_args(b);
  Violation tolerated = make_violation("max_seqlen.covers", Severity::error, "max_seqlen_q is 9, above the longest");
  tolerated.symptom = Symptom{Outcome::ok, Pass::forward, Moment::attention, "no error; the extra tiles exit early", {}, "model"};
  Violation backward = make_violation("backward.coverage", Severity::error, "dq row 3 never written");
  backward.symptom = Symptom{Outcome::wrong_gradient, Pass::backward, Moment::backward, "no error; dq rows 3-5 are zero", {}, "model"};
  Violation unmodelled = make_violation("mask.binary", Severity::warning, "mask values 2");
  Report r = report_with(b, {tolerated, backward, unmodelled});
  Prediction ok;
  ok.symptom.outcome = Outcome::ok;
  ok.symptom.message = "no error; every intended output row is right";
  ok.symptom.basis = "model";
  r.prediction = ok;
  const std::string page = check_page(b, c, r);
  require_self_contained(page);
  CHECK(page.find("class=\"status violation\">violation: 2 errors, 1 warning</span>") != std::string::npos);
  const size_t why = page.find("<div class=\"why\">");
  REQUIRE(why != std::string::npos);
  const std::string note = page.substr(why, page.find("</div>", why) - why);
  INFO(note);
  CHECK(note.find("beside <b>prediction: ok</b>") != std::string::npos);
  CHECK(note.find("<code>max_seqlen.covers</code> (error): the real stack runs through it: no error; the extra tiles exit early [model]") !=
        std::string::npos);
  CHECK(note.find("<code>backward.coverage</code> (error): it shows only in the backward pass (wrong_gradient), and this batch "
                  "is a forward call") != std::string::npos);
  CHECK(note.find("<code>mask.binary</code> (warning): no symptom is modelled for it") != std::string::npos);

  // a harmful prediction needs no note; warnings alone get their own badge
  Prediction loud;
  loud.symptom.outcome = Outcome::raises;
  loud.symptom.message = "RuntimeError";
  loud.symptom.basis = "model";
  r.prediction = loud;
  CHECK(check_page(b, c, r).find("<div class=\"why\">") == std::string::npos);
  Report warned = report_with(b, {unmodelled});
  CHECK(check_page(b, c, warned).find("class=\"status warning\">warnings only: 1 warning</span>") != std::string::npos);
}

TEST_CASE("html: compare's headline counts errors, warnings apart", "[html]") {
  Batch b = batch_from(kTwoRows);
  VarlenArgs mask = mask_path_args(b);
  auto band = [&](const char* rule_set, std::vector<Violation> vs) {
    Diagnosis d;
    d.rule_set = find_rule_set(rule_set);
    REQUIRE(d.rule_set);
    d.conversion.replayed = mask;
    d.report = report_with(b, std::move(vs));
    return d;
  };
  const Diagnosis error = band("hf-4.44.0", {make_violation("cu_seqlens.segments", Severity::error, "merged")}),
                  warning = band("hf-4.44.1", {make_violation("max_seqlen.type", Severity::warning, "a 0-d tensor")}),
                  warning2 = band("hf-4.47", {make_violation("max_seqlen.type", Severity::warning, "a 0-d tensor")}),
                  clean = band("hf-4.54", {});
  const std::string page = render_compare_html(
      b, {{"4.44.0", &error, "", false}, {"4.44.1", &warning, "", true}, {"4.47.0", &warning2, "", false}, {"4.54.0", &clean, "", true}},
      "test.json");
  require_self_contained(page);
  CHECK(page.find("class=\"status violation\">1 of 4 releases break an invariant (error)</span>") != std::string::npos);
  CHECK(page.find("class=\"status warning\">2 more only warn</span>") != std::string::npos);
  const std::string quiet =
      render_compare_html(b, {{"4.44.1", &warning, "", false}, {"4.54.0", &clean, "", true}}, "test.json");
  CHECK(quiet.find("class=\"status warning\">0 of 2 releases break an invariant (error)</span>") != std::string::npos);
}
