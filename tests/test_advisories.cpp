// The kernel-release advisory table (lib/check/advisories): every advisory matches its own repro
// case and not its fixed or healthy twin, through the whole pipeline; the table's rows are
// well-formed; the report carries the match.
#include <catch2/catch.hpp>

#include <cctype>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>

#include "check/advisories.hpp"
#include "doctor/doctor.hpp"
#include "render/render.hpp"

using namespace ad;

namespace {

struct Pair {
  std::string_view advisory, repro, twin;
};

// One repro case per advisory, and its twin that must not match.
constexpr Pair kPairs[] = {
    {"FA-2023-001", "fa2-2.0.4-causal-query-longer-than-keys-nan-dq", "fa2-2.1.0-causal-query-longer-than-keys-fixed"},
    {"FA-2024-001", "fa3-varlen-backward-empty-query-segment-hang", "fa3-varlen-empty-query-segment-forward-only"},
    {"FA-2025-001", "fa3-3.0.0b1-int32-sizes-1m-tokens", "fa3-3.0.0b1-int32-sizes-512k-tokens-healthy"},
    {"FA-2026-001", "fa4-4.0.0b13-hdim256-empty-query-backward-illegal-address",
     "fa4-4.0.0b13-hdim128-empty-query-backward-healthy"},
    {"FA-2026-002", "fa4-4.0.0b26-sm120-varlen-overprovisioned-tiles",
     "fa4-4.0.0b26-sm90-varlen-overprovisioned-tiles-healthy"},
    {"FA-2026-003", "fa4-4.0.0b19-varlen-positional-arguments", "fa4-4.0.0b19-varlen-keyword-arguments"},
    {"FA-2026-004", "fa4-4.0.0b11-sm120-pack-gqa-causal-gqa", "fa4-4.0.0b11-sm120-pack-gqa-off-healthy"},
    {"TORCH-2026-001", "torch-2.14.0-cudnn-varlen-unaligned-q", "torch-2.14.0-cudnn-varlen-aligned-healthy"},
    {"TRANSFORMERS-2025-001", "hf-4.57.1-compile-fullgraph-b1-position-ids",
     "hf-4.57.1-compile-fullgraph-b2-position-ids-healthy"},
    {"TRANSFORMERS-2025-002", "gemma3-4.54.1-sliding-window-off-by-one", "gemma3-4.56.2-sliding-window-fixed"},
    {"DIFFUSERS-2026-001", "diffusers-0.39.0-ring-attention-training-stale-kv", "diffusers-0.40.0-ring-attention-training-fixed"},
    {"DIFFUSERS-2026-001", "diffusers-0.39.0-ring-attention-training-stale-kv", "diffusers-0.39.0-ulysses-training-healthy"},
    {"DIFFUSERS-2026-002", "diffusers-0.39.0-flash-varlen-hub-attribute-error", "diffusers-0.42.0-flash-varlen-hub-fixed"},
    {"XFORMERS-2024-001", "xformers-0.0.28.post3-block-diagonal-causal-mask-to-device",
     "xformers-0.0.29.post1-block-diagonal-causal-mask-to-device-fixed"},
    {"XFORMERS-2024-001", "xformers-0.0.28.post3-block-diagonal-causal-mask-to-device",
     "xformers-0.0.28.post3-block-diagonal-causal-mask-built-on-device-healthy"},
};

Diagnosis run(std::string_view name) {
  const std::string file = std::string(ATTN_DOCTOR_SOURCE_DIR) + "/repro_cases/" + std::string(name) + ".json";
  Batch b = load_batch_file(file);
  CheckOptions o;
  o.backend = BackendChoice::none;
  return diagnose(b, o, file);
}

bool matched(const Diagnosis& d, std::string_view id) {
  for (const AdvisoryMatch& m : d.report.advisories)
    if (m.advisory->id == id) return true;
  return false;
}

}  // namespace

TEST_CASE("advisories: every advisory has a repro case it matches and a twin it does not", "[advisories]") {
  std::set<std::string_view> covered;
  for (const Pair& p : kPairs) {
    INFO(p.advisory);
    REQUIRE(find_advisory(p.advisory));
    covered.insert(p.advisory);
    const Diagnosis hit = run(p.repro);
    CHECK(matched(hit, p.advisory));
    // the match is a finding of its own: its symptom is the call's prediction here
    REQUIRE(hit.report.prediction);
    const bool possible = !hit.report.advisories.empty() && hit.report.advisories.front().possible;
    CHECK(possible == find_advisory(p.advisory)->possible_only);
    if (possible) {
      CHECK(hit.report.advisories.front().why.find("possible only:") == std::string::npos);  // a field, not a marker
      CHECK(hit.report.prediction->invariant != p.advisory);  // listed, not predicted
    } else {
      CHECK(hit.report.prediction->invariant == p.advisory);
      CHECK(hit.report.prediction->symptom.outcome == find_advisory(p.advisory)->outcome);
    }
    const Diagnosis miss = run(p.twin);
    CHECK_FALSE(matched(miss, p.advisory));
  }
  for (const Advisory& a : advisories()) {
    INFO(a.id);
    CHECK(covered.count(a.id) == 1);
  }
}

TEST_CASE("advisories: rows are well-formed and ids unique", "[advisories]") {
  std::set<std::string_view> ids;
  for (const Advisory& a : advisories()) {
    INFO(a.id);
    CHECK(ids.insert(a.id).second);
    // the id names the library: FA- for flash-attn's rows, the library's name in capitals else
    if (a.family != 0) {
      CHECK(a.id.substr(0, 3) == "FA-");
      CHECK((a.library == "flash_attn" || a.library == "flash_attn_4"));
    } else {
      CHECK((a.library == "torch" || a.library == "transformers" || a.library == "diffusers" ||
             a.library == "xformers"));
      std::string prefix(a.library);
      for (char& ch : prefix) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      CHECK(a.id.substr(0, prefix.size() + 1) == prefix + "-");
    }
    CHECK_FALSE(a.reference.empty());
    CHECK_FALSE(a.symptom.empty());
    CHECK_FALSE(a.fix.empty());
    CHECK(a.matches != nullptr);
    CHECK((a.fixed_in.empty() || a.through.empty()));  // a fixed row needs no last-reported bound
    CHECK(a.min_cc <= a.max_cc);
  }
  const std::string md = advisories_markdown();
  for (const Advisory& a : advisories()) CHECK(md.find("`" + std::string(a.id) + "`") != std::string::npos);
}

TEST_CASE("advisories: the JSON report names the match, its release and why, and a release past the last reported one "
          "does not match", "[advisories]") {
  const Diagnosis d = run("fa4-4.0.0b13-hdim256-empty-query-backward-illegal-address");
  const nlohmann::json j = to_json(d, RenderOptions{});
  REQUIRE(j.contains("advisories"));
  REQUIRE(j["advisories"].size() == 1);
  CHECK(j["advisories"][0]["id"] == "FA-2026-001");
  CHECK(j["advisories"][0]["release"] == "4.0.0b13");
  CHECK(j["advisories"][0]["fixed_in"].is_null());
  CHECK(j["advisories"][0]["why"].get<std::string>().find("segment 0 has 0 query rows") != std::string::npos);
  CHECK(j["rules"]["flash_attn"] == "4.0.0b13");  // environment.flash_attn_4 selects the FA4 rules
  // a healthy report has no advisories key at all (reports of other calls are unchanged)
  CHECK_FALSE(to_json(run("fa4-4.0.0b13-hdim128-empty-query-backward-healthy"), RenderOptions{}).contains("advisories"));

  const std::string file =
      std::string(ATTN_DOCTOR_SOURCE_DIR) + "/repro_cases/fa4-4.0.0b13-hdim256-empty-query-backward-illegal-address.json";
  Batch b = load_batch_file(file);
  b.environment.flash_attn_4 = version_literal("4.0.0b14");
  CheckOptions o;
  o.backend = BackendChoice::none;
  CHECK(diagnose(b, o, file).report.advisories.empty());
}

TEST_CASE("advisories: a possible match is a field of the match: JSON `possible`, text \"may have\"", "[advisories]") {
  const Diagnosis d = run("fa3-3.0.0b1-int32-sizes-1m-tokens");
  REQUIRE(d.report.advisories.size() == 1);
  CHECK(d.report.advisories[0].possible);
  const nlohmann::json j = to_json(d, RenderOptions{});
  CHECK(j["advisories"][0]["possible"] == true);
  CHECK(j["advisories"][0]["why"].get<std::string>().find("possible only") == std::string::npos);
  const std::string text = render_text(d, RenderOptions{});
  CHECK(text.find("3.0.0b1 may have this bug for this call") != std::string::npos);
  CHECK(text.find("possible only:") != std::string::npos);
  // a definite match has no `possible` key
  CHECK_FALSE(to_json(run("fa4-4.0.0b13-hdim256-empty-query-backward-illegal-address"), RenderOptions{})["advisories"][0]
                  .contains("possible"));
}

TEST_CASE("advisories: an architecture-specific row matches a batch without gpu_arch and says so", "[advisories]") {
  const std::string file =
      std::string(ATTN_DOCTOR_SOURCE_DIR) + "/repro_cases/fa4-4.0.0b13-hdim256-empty-query-backward-illegal-address.json";
  Batch b = load_batch_file(file);
  b.environment.gpu_arch.reset();
  CheckOptions o;
  o.backend = BackendChoice::none;
  const Report r = diagnose(b, o, file).report;
  // both FA4 rows of this call's shape match without an architecture (sm_100's and sm_120's)
  REQUIRE(r.advisories.size() == 2);
  CHECK(r.advisories[0].advisory->id == "FA-2026-001");
  CHECK(r.advisories[0].why.find("does not record environment.gpu_arch") != std::string::npos);
  b.environment.gpu_arch = parse_gpu_arch("sm_90a");
  CHECK(diagnose(b, o, file).report.advisories.empty());
}

TEST_CASE("advisories: docs/prediction.md embeds the table as list advisories prints it", "[advisories]") {
  std::ifstream in(std::string(ATTN_DOCTOR_SOURCE_DIR) + "/docs/prediction.md");
  REQUIRE(in.good());
  std::stringstream s;
  s << in.rdbuf();
  const std::string doc = s.str();
  const std::string begin = "<!-- BEGIN GENERATED: attn-doctor list advisories --format markdown -->\n";
  const auto b = doc.find(begin);
  REQUIRE(b != std::string::npos);
  const auto e = doc.find("<!-- END GENERATED -->", b);
  REQUIRE(e != std::string::npos);
  CHECK(doc.substr(b + begin.size(), e - b - begin.size()) == advisories_markdown());
}

TEST_CASE("advisories: environment.flash_attn_4 selects the FA4 release for an FA4 call or when it is the only one",
          "[advisories][loader]") {
  const char* both = R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "2.6.3", "flash_attn_4": "4.0.0b13"},
    "model": {"num_heads": 4, "head_dim": 64}, "varlen": {"cu_seqlens_q": [0, 4]}})";
  CHECK(kernel_release(parse_batch_text(both, "a.json"))->text == "2.6.3");
  const char* fa4_api = R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn": "2.6.3", "flash_attn_4": "4.0.0b13"},
    "model": {"num_heads": 4, "head_dim": 64}, "varlen": {"api": "flash_attn_4.varlen", "cu_seqlens_q": [0, 4]}})";
  CHECK(kernel_release(parse_batch_text(fa4_api, "b.json"))->text == "4.0.0b13");
  const char* only = R"({"format": "attn-doctor/batch@1", "environment": {"flash_attn_4": "4.0.0b13"},
    "model": {"num_heads": 4, "head_dim": 64}, "varlen": {"cu_seqlens_q": [0, 4]}})";
  CHECK(kernel_release(parse_batch_text(only, "c.json"))->text == "4.0.0b13");
  const char* none = R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 4, "head_dim": 64},
    "varlen": {"cu_seqlens_q": [0, 4]}})";
  CHECK_FALSE(kernel_release(parse_batch_text(none, "d.json")));
}

TEST_CASE("advisories: TORCH-2026-001 keys on torch's release range and the cuDNN backend it selects", "[advisories]") {
  const std::string file = std::string(ATTN_DOCTOR_SOURCE_DIR) + "/repro_cases/torch-2.14.0-cudnn-varlen-unaligned-q.json";
  auto matches = [&](const std::function<void(Batch&)>& edit) {
    Batch b = load_batch_file(file);
    edit(b);
    for (const AdvisoryMatch& m : match_advisories(b, convert(b)))
      if (m.advisory->id == "TORCH-2026-001") return m.why;
    return std::string();
  };
  const std::string hit = matches([](Batch&) {});
  CHECK(hit.find("torch 2.14.0 selects cuDNN") != std::string::npos);
  CHECK(hit.find("q not 16-byte aligned") != std::string::npos);
  CHECK_FALSE(matches([](Batch& b) { b.environment.torch = version_literal("2.14.1"); }).empty());
  CHECK_FALSE(matches([](Batch& b) { b.environment.torch = parse_version("2.14.0+cu130"); }).empty());
  // 2.13.0 never selects cuDNN, and 2.15.0 checks the alignment (the fixed release)
  CHECK(matches([](Batch& b) { b.environment.torch = version_literal("2.13.0"); }).empty());
  CHECK(matches([](Batch& b) { b.environment.torch = version_literal("2.15.0"); }).empty());
  // the selector keeps FA2: a causal call, a short one, an Ampere GPU
  CHECK(matches([](Batch& b) { b.varlen->window_size = std::make_pair<int64_t, int64_t>(-1, 0); }).empty());
  CHECK(matches([](Batch& b) { b.varlen->max_seqlen_q.value = 128; }).empty());
  CHECK(matches([](Batch& b) { b.environment.gpu_arch = parse_gpu_arch("sm_80"); }).empty());
  // no architecture: a match that says the architecture decides
  const std::string no_arch = matches([](Batch& b) { b.environment.gpu_arch.reset(); });
  CHECK(no_arch.find("environment.gpu_arch not given") != std::string::npos);
  // another API's call with the same facts is not torch's
  CHECK(matches([](Batch& b) { b.varlen->api = Api::flash_attn_2_varlen; }).empty());
}

TEST_CASE("advisories: a library row reads environment.<library> and its own call facts, at the edges of its range",
          "[advisories]") {
  CheckOptions o;
  o.backend = BackendChoice::none;
  auto ids = [&](const Batch& b) {
    std::vector<std::string> out;
    for (const AdvisoryMatch& m : diagnose(b, o, b.file.string()).report.advisories) out.emplace_back(m.advisory->id);
    return out;
  };
  auto load = [](std::string_view name) {
    return load_batch_file(std::string(ATTN_DOCTOR_SOURCE_DIR) + "/repro_cases/" + std::string(name) + ".json");
  };
  using V = std::vector<std::string>;

  // xformers: BlockDiagonalMask.to from 0.0.27; 0.0.29 still inherits it; fixed in 0.0.29.post1
  Batch x = load("xformers-0.0.28.post3-block-diagonal-causal-mask-to-device");
  for (const char* v : {"0.0.27", "0.0.29"}) {
    x.environment.xformers = version_literal(v);
    CHECK(ids(x) == V{"XFORMERS-2024-001"});
  }
  for (const char* v : {"0.0.26.post1", "0.0.29.post1", "0.0.30"}) {
    x.environment.xformers = version_literal(v);
    CHECK(ids(x).empty());
  }
  x.environment.xformers = version_literal("0.0.28.post3");
  x.dispatch->seqlens = std::vector<int64_t>{1, 1, 1};  // one-row blocks: causal or not, the same
  CHECK(ids(x).empty());
  x.dispatch->seqlens.reset();
  x.dispatch->attn_bias = "BlockDiagonalMask";  // not causal to begin with
  CHECK(ids(x).empty());
  x.dispatch->attn_bias = "BlockDiagonalCausalLocalAttentionMask";  // inherits BlockDiagonalMask.to too
  CHECK(ids(x) == V{"XFORMERS-2024-001"});
  x.environment.xformers.reset();  // no release named: no match
  CHECK(ids(x).empty());

  // transformers: 4.55.0 onwards (4.54 detected packing at every batch size); only under fullgraph
  Batch t = load("hf-4.57.1-compile-fullgraph-b1-position-ids");
  t.environment.transformers = version_literal("4.54.1");
  CHECK(ids(t).empty());
  t.environment.transformers = version_literal("5.24.0");
  CHECK(ids(t) == V{"TRANSFORMERS-2025-001"});
  t.environment.compile = "default";  // a graph break is not an error without fullgraph
  CHECK(ids(t).empty());
  t.environment.compile = "fullgraph";
  t.batch->position_ids.reset();  // nothing for _is_packed_sequence to read
  CHECK(ids(t).empty());

  // transformers' sliding window: (W, W) from 4.43.0 (the shared _flash_attention_forward) to
  // 4.55.4; 4.56.0 passes (W - 1, W - 1); before 4.43 the row does not apply
  Batch g = load("gemma3-4.54.1-sliding-window-off-by-one");
  for (const char* v : {"4.43.0", "4.46.3", "4.55.4"}) {
    INFO(v);
    g.environment.transformers = version_literal(v);
    CHECK(ids(g) == V{"TRANSFORMERS-2025-002"});
  }
  for (const char* v : {"4.42.4", "4.56.0", "5.24.0"}) {
    INFO(v);
    g.environment.transformers = version_literal(v);
    CHECK(ids(g).empty());
  }
  {  // rows of W tokens at most: no query has W keys before it, (W, W) and (W - 1, W - 1) agree
    const std::string file =
        std::string(ATTN_DOCTOR_SOURCE_DIR) + "/repro_cases/gemma3-4.54.1-sliding-window-off-by-one.json";
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    std::string s = text.str();
    const auto swap = [&s](const std::string& from, const std::string& to) {
      const size_t at = s.find(from);
      REQUIRE(at != std::string::npos);
      s.replace(at, from.size(), to);
    };
    swap("\"lengths\": [600, 400]", "\"lengths\": [512, 400]");
    swap("\"width\": 600", "\"width\": 513");  // wider than W: the release still passes the window
    CHECK(ids(parse_batch_text(s, "gemma3-512")).empty());
    swap("\"lengths\": [512, 400]", "\"lengths\": [513, 400]");
    CHECK(ids(parse_batch_text(s, "gemma3-513")) == V{"TRANSFORMERS-2025-002"});
  }
  g = load("gemma3-4.54.1-sliding-window-off-by-one");
  g.model.sliding_window.reset();  // no window: nothing to be off by one
  CHECK(ids(g).empty());

  // diffusers: the ring backward only in a training step, from 0.36.0 to 0.39.0
  Batch r = load("diffusers-0.39.0-ring-attention-training-stale-kv");
  r.pass = CallPass::forward;
  CHECK(ids(r).empty());
  r.pass = CallPass::training;
  r.environment.diffusers = version_literal("0.35.2");  // no TemplatedRingAttention yet
  CHECK(ids(r).empty());
  r.environment.diffusers = version_literal("0.36.0");
  CHECK(ids(r) == V{"DIFFUSERS-2026-001"});
  r.dispatch->backend = "flash_varlen_hub";
  r.environment.diffusers = version_literal("0.39.0");
  CHECK(ids(r) == V{"DIFFUSERS-2026-001", "DIFFUSERS-2026-002"});
  r.environment.diffusers = version_literal("0.38.0");  // the registry resolved no wrapped varlen symbol
  CHECK(ids(r) == V{"DIFFUSERS-2026-001"});
}
