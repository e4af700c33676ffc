// The conversion replay against the real releases: every golden under tests/golden/ (recorded by
// tools/parity from the releases' own code) is replayed case by case and must match exactly:
// path, cu_seqlens (dtype, shape, values), max_seqlen (value and tensor-ness), totals, gather
// indices, kernel flags, and the failure the release raised (type, message, where).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "batch/batch.hpp"
#include "convert/convert.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const fs::path kGolden = fs::path(ATTN_DOCTOR_SOURCE_DIR) / "tests" / "golden";

json read_json(const fs::path& p) {
  std::ifstream in(p);
  REQUIRE(in.good());
  return json::parse(in);
}

std::vector<fs::path> goldens(const std::string& prefix) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(kGolden))
    if (e.path().filename().string().rfind(prefix, 0) == 0 && e.path().extension() == ".json") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

std::string dtype_name(ad::DType t) { return ad::to_string(t); }

// Collects every difference of one case, so a failing release shows all its cases at once.
struct Diff {
  std::vector<std::string> lines;
  std::string where;
  void check(bool ok, const std::string& what) {
    if (!ok) lines.push_back(where + ": " + what);
  }
};

std::string show(const json& j) { return j.dump(); }
std::string show(const std::vector<int64_t>& v) { return json(v).dump(); }

void compare_tensor(Diff& d, const std::string& name, const json& g, const std::optional<ad::IntTensor>& t) {
  if (g.is_null()) {
    d.check(!t.has_value(), name + ": golden null, replay has " + (t ? show(t->values) : ""));
    return;
  }
  if (!t) {
    d.check(false, name + ": replay has none, golden " + show(g["values"]));
    return;
  }
  d.check(g["dtype"] == dtype_name(t->dtype), name + " dtype " + show(g["dtype"]) + " vs " + dtype_name(t->dtype));
  if (g.contains("shape"))
    d.check(g["shape"].get<std::vector<int64_t>>() == t->shape,
            name + " shape " + show(g["shape"]) + " vs " + show(t->shape));
  d.check(g["values"].get<std::vector<int64_t>>() == t->values,
          name + " values " + show(g["values"]) + " vs " + show(t->values));
}

void compare_max(Diff& d, const std::string& name, const json& g, const ad::MaxSeqlen& m) {
  if (g["value"].is_null()) {
    d.check(m.is_none, name + ": golden None, replay " + std::to_string(m.value));
    return;
  }
  d.check(!m.is_none, name + ": replay None");
  d.check(g["value"].get<int64_t>() == m.value, name + " value " + show(g["value"]) + " vs " + std::to_string(m.value));
  d.check(g["is_tensor"].get<bool>() == m.is_tensor, name + " is_tensor " + show(g["is_tensor"]));
  if (m.is_tensor && g.contains("dtype"))
    d.check(g["dtype"] == dtype_name(m.dtype), name + " dtype " + show(g["dtype"]) + " vs " + dtype_name(m.dtype));
}

void compare_error(Diff& d, const json& g, const ad::VarlenArgs& a, bool compare_where) {
  if (!a.failure) {
    d.check(false, "golden raises " + g["type"].get<std::string>() + ": " + g["message"].get<std::string>() +
                       ", replay does not");
    return;
  }
  d.check(g["type"] == a.failure->type, "error type " + show(g["type"]) + " vs " + a.failure->type);
  d.check(g["message"] == a.failure->message, "error message " + show(g["message"]) + " vs " + a.failure->message);
  if (compare_where) d.check(g["where"] == a.failure->where, "error where " + show(g["where"]) + " vs " + a.failure->where);
}

// One recorded call (a golden case of transformers-*.json or a generate call).
void compare_call(Diff& d, const json& c, const ad::VarlenArgs& a, bool compare_where) {
  if (!c["error"].is_null()) {
    compare_error(d, c["error"], a, compare_where);
    if (c.contains("partial") && !c["partial"].is_null()) {
      const json& p = c["partial"];
      d.check(p["path"] == ad::to_string(a.path), "partial path " + show(p["path"]) + " vs " + ad::to_string(a.path));
      if (p.contains("indices_k")) {
        compare_tensor(d, "partial indices_k", p["indices_k"], a.indices_k);
        compare_tensor(d, "partial cu_seqlens_k", p["cu_seqlens_k"], a.cu_seqlens_k);
        compare_max(d, "partial max_seqlen_k", p["max_seqlen_k"], a.max_seqlen_k);
      }
      if (p.contains("indices_q")) {
        compare_tensor(d, "partial indices_q", p["indices_q"], a.indices_q);
        compare_tensor(d, "partial cu_seqlens_q", p["cu_seqlens_q"], a.cu_seqlens_q);
        compare_max(d, "partial max_seqlen_q", p["max_seqlen_q"], a.max_seqlen_q);
      }
    }
    return;
  }
  d.check(!a.failure, "replay raises " + (a.failure ? a.failure->type + ": " + a.failure->message : "") +
                          ", the release does not");
  const json& r = c["result"];
  d.check(r["path"] == ad::to_string(a.path), "path " + show(r["path"]) + " vs " + ad::to_string(a.path));
  d.check(r["function"] == a.call.function_name(), "function " + show(r["function"]) + " vs " + a.call.function_name());
  if (r["function"] == "flash_attn_varlen_func") {
    compare_tensor(d, "cu_seqlens_q", r["cu_seqlens_q"], a.cu_seqlens_q);
    compare_tensor(d, "cu_seqlens_k", r["cu_seqlens_k"], a.cu_seqlens_k);
    compare_max(d, "max_seqlen_q", r["max_seqlen_q"], a.max_seqlen_q);
    compare_max(d, "max_seqlen_k", r["max_seqlen_k"], a.max_seqlen_k);
    d.check(r["total_q"] == a.total_q, "total_q " + show(r["total_q"]) + " vs " + std::to_string(a.total_q));
    d.check(r["total_k"] == a.total_k, "total_k " + show(r["total_k"]) + " vs " + std::to_string(a.total_k));
    compare_tensor(d, "indices_q", r["indices_q"], a.indices_q);
    compare_tensor(d, "indices_k", r["indices_k"], a.indices_k);
  }
  d.check(r["causal"] == a.call.causal, "causal " + show(r["causal"]));
  std::vector<int64_t> w{a.call.window_left, a.call.window_right};
  d.check(r["window_size"].get<std::vector<int64_t>>() == w, "window_size " + show(r["window_size"]) + " vs " + show(w));
  double softcap = a.call.softcap.value_or(0.0);
  d.check(r["softcap"].get<double>() == softcap, "softcap " + show(r["softcap"]) + " vs " + std::to_string(softcap));
  d.check(r["dropout"].get<double>() == a.call.dropout, "dropout " + show(r["dropout"]));
}

ad::Batch batch_named(const std::string& name) { return ad::load_batch_file(kGolden / "batches" / name); }

const ad::RuleSetInfo& rules_for(const std::string& release) {
  auto v = ad::parse_version(release);
  REQUIRE(v.has_value());
  ad::ResolvedRules r = ad::resolve_transformers(*v);
  REQUIRE(r.rules != nullptr);
  INFO("transformers " << release << " -> " << r.rules->name << " " << r.note);
  REQUIRE(r.exact);  // every golden release lies in its rule set's documented range
  return *r.rules;
}

std::string report(const std::vector<std::string>& lines, size_t limit = 400) {
  std::ostringstream out;
  for (size_t i = 0; i < lines.size() && i < limit; ++i) out << lines[i] << "\n";
  if (lines.size() > limit) out << "... " << lines.size() - limit << " more\n";
  return out.str();
}

// Every scenario of the model-level goldens `prefix`<release>.json that a batch describes
// (`model_batches`): the scenario ran (outcome ok, unless `errors_allowed`), its batch is
// loaded, and `compare(diff, golden, scenario, batch, rules)` adds the differences (`rules`: the
// transformers release's rule set, null for another library's golden). Returns how many
// scenarios were compared.
template <class Compare>
size_t replay_model_scenarios(const std::string& prefix, const std::string& model, std::vector<std::string>& mismatches,
                              Compare compare, bool errors_allowed = false) {
  auto files = goldens(prefix);
  REQUIRE(!files.empty());
  size_t compared = 0;
  for (const auto& file : files) {
    json g = read_json(file);
    const std::string release = g["release"];
    const ad::RuleSetInfo* rules = g["library"] == "transformers" ? &rules_for(release) : nullptr;
    for (const json& s : g["scenarios"]) {
      const std::string scenario = s["scenario"];
      if (!g["model_batches"].contains(scenario)) continue;  // no batch file describes it
      if (!errors_allowed) REQUIRE(s["outcome"]["status"] == "ok");
      ad::Batch batch = batch_named(g["model_batches"][scenario]);
      Diff d;
      d.where = release + (rules ? " (" + rules->name + ") " : " ") + model + " " + scenario;
      compare(d, g, s, batch, rules);
      mismatches.insert(mismatches.end(), d.lines.begin(), d.lines.end());
      ++compared;
    }
  }
  return compared;
}

}  // namespace

TEST_CASE("the replay matches every transformers release golden", "[convert]") {
  auto files = goldens("transformers-");
  REQUIRE(files.size() >= 10);
  std::vector<std::string> mismatches;
  size_t compared = 0;
  for (const auto& file : files) {
    json g = read_json(file);
    const std::string release = g["release"];
    const ad::RuleSetInfo& rules = rules_for(release);
    size_t release_cases = 0;
    for (const json& c : g["cases"]) {
      if (c.contains("skipped")) continue;
      ad::Batch batch = batch_named(c["batch"]);
      std::string fa = batch.environment.flash_attn ? batch.environment.flash_attn->text : "2.6.3";
      REQUIRE(fa == c["flash_attn"].get<std::string>());
      ad::VarlenArgs a = ad::replay_with(batch, rules);
      Diff d;
      d.where = release + " (" + rules.name + ") " + c["batch"].get<std::string>();
      compare_call(d, c, a, true);
      mismatches.insert(mismatches.end(), d.lines.begin(), d.lines.end());
      ++release_cases;
    }
    CHECK(release_cases >= 40);
    compared += release_cases;
  }
  INFO(compared << " cases compared\n" << report(mismatches));
  CHECK(compared >= 400);
  REQUIRE(mismatches.empty());
}

TEST_CASE("the replay reproduces Gemma-2 generate on every release", "[convert]") {
  auto files = goldens("gemma2-generate-");
  REQUIRE(files.size() >= 2);
  std::vector<std::string> mismatches;
  bool crash_4440 = false, fixed_4441 = false;
  for (const auto& file : files) {
    json g = read_json(file);
    const std::string release = g["release"];
    const ad::RuleSetInfo& rules = rules_for(release);
    const json& calls = g["calls"];
    for (auto [key, index_key] : {std::pair{"prefill", "prefill_call"}, std::pair{"decode", "decode_call"}}) {
      size_t index = g[index_key].get<size_t>();
      const json& outcome = g["outcome"];
      // generate failed before this call; when it failed right there (nothing recorded yet), the
      // model-level failure is the truth for it
      bool failed_here = index == calls.size() && outcome["status"] == "error";
      if (index >= calls.size() && !failed_here) continue;
      ad::Batch batch = batch_named(g["model_batches"][key]);
      ad::VarlenArgs a = ad::replay_with(batch, rules);
      Diff d;
      d.where = release + " (" + rules.name + ") gemma2 " + key;
      if (failed_here) compare_error(d, outcome["error"], a, false);
      else compare_call(d, calls[index], a, false);
      mismatches.insert(mismatches.end(), d.lines.begin(), d.lines.end());
      if (release == "4.44.0" && std::string(key) == "prefill")
        crash_4440 = a.failure && a.failure->message == "index 2 is out of bounds for dimension 0 with size 2";
      if (release == "4.44.1" && std::string(key) == "prefill") fixed_4441 = !a.failure;
    }
  }
  INFO(report(mismatches));
  REQUIRE(mismatches.empty());
  CHECK(crash_4440);
  CHECK(fixed_4441);
}

TEST_CASE("the replay matches flash-attn's bert_padding.unpad_input", "[convert]") {
  auto files = goldens("flash_attn-");
  REQUIRE(!files.empty());
  std::vector<std::string> mismatches;
  for (const auto& file : files) {
    json g = read_json(file);
    const std::string release = g["release"];
    const ad::RuleSetInfo* rules =
        ad::find_rule_set(*ad::parse_version(release) < ad::version_literal("2.7.0") ? "flash_attn-2.0" : "flash_attn-2.7");
    REQUIRE(rules);
    for (const json& c : g["cases"]) {
      ad::VarlenArgs a = ad::replay_with(batch_named(c["batch"]), *rules);
      Diff d;
      d.where = "flash_attn " + release + " " + c["batch"].get<std::string>();
      if (!c["error"].is_null()) {
        compare_error(d, c["error"], a, true);
      } else {
        const json& r = c["result"];
        d.check(!a.failure, "replay raises");
        d.check((r["returns"] == 5) == a.seqused_k.has_value(), "number of return values " + show(r["returns"]));
        d.check(r["total_k"] == a.total_k, "total " + show(r["total_k"]));
        compare_tensor(d, "indices", r["indices"], a.indices_k);
        compare_tensor(d, "cu_seqlens", r["cu_seqlens"], a.cu_seqlens_k);
        compare_max(d, "max_seqlen", r["max_seqlen"], a.max_seqlen_k);
        if (r.contains("used_seqlens") && a.seqused_k)
          d.check(r["used_seqlens"]["values"].get<std::vector<int64_t>>() == *a.seqused_k, "used_seqlens");
      }
      mismatches.insert(mismatches.end(), d.lines.begin(), d.lines.end());
    }
  }
  INFO(report(mismatches));
  REQUIRE(mismatches.empty());
}

TEST_CASE("the replay matches FLA's attention-layer unpadding", "[convert]") {
  auto files = goldens("fla-");
  REQUIRE(!files.empty());
  const ad::RuleSetInfo* rules = ad::find_rule_set("fla-attn");
  REQUIRE(rules);
  std::vector<std::string> mismatches;
  for (const auto& file : files) {
    json g = read_json(file);
    for (const json& c : g["cases"]) {
      ad::VarlenArgs a = ad::replay_with(batch_named(c["batch"]), *rules);
      Diff d;
      d.where = "fla " + g["release"].get<std::string>() + " " + c["batch"].get<std::string>();
      if (!c["error"].is_null()) {
        compare_error(d, c["error"], a, true);
      } else {
        const json& r = c["result"];
        d.check(!a.failure, "replay raises " + (a.failure ? a.failure->message : ""));
        d.check(r["total_q"] == a.total_q, "total_q " + show(r["total_q"]));
        d.check(r["total_k"] == a.total_k, "total_k " + show(r["total_k"]));
        compare_tensor(d, "indices_q", r["indices_q"], a.indices_q);
        compare_tensor(d, "cu_seqlens_q", r["cu_seqlens_q"], a.cu_seqlens_q);
        compare_tensor(d, "cu_seqlens_k", r["cu_seqlens_k"], a.cu_seqlens_k);
        compare_max(d, "max_seqlen_q", r["max_seqlen_q"], a.max_seqlen_q);
        compare_max(d, "max_seqlen_k", r["max_seqlen_k"], a.max_seqlen_k);
      }
      mismatches.insert(mismatches.end(), d.lines.begin(), d.lines.end());
    }
  }
  INFO(report(mismatches));
  REQUIRE(mismatches.empty());
}

TEST_CASE("the replay reproduces which position ids Qwen2-VL hands to the conversion", "[convert]") {
  // packed_4d (rank-4 ids) has no batch file: the batch format holds position ids of rank <= 3
  std::vector<std::string> mismatches;
  const size_t compared = replay_model_scenarios(
      "qwen2vl-forward-", "qwen2_vl", mismatches,
      [](Diff& d, const json&, const json& s, const ad::Batch& batch, const ad::RuleSetInfo* rules) {
        REQUIRE(!s["calls"].empty());
        compare_call(d, s["calls"][0], ad::replay_with(batch, *rules), false);
      });
  INFO(compared << " scenarios compared\n" << report(mismatches));
  CHECK(compared > 0);
  REQUIRE(mismatches.empty());
}

TEST_CASE("the replay reproduces a model-level mask's preparation (tiny Llama forward)", "[convert]") {
  std::vector<std::string> mismatches;
  // the static cache's all-True mask: kept from 5.13.0, dropped before, refused up to 4.47
  bool narrow_kept = false, narrow_dropped = false, static_refused = false;
  const size_t compared = replay_model_scenarios(
      "model-llama-", "llama", mismatches,
      [&](Diff& d, const json& g, const json& s, const ad::Batch& batch, const ad::RuleSetInfo* rules) {
        REQUIRE(batch.batch->attention_mask->model_level);
        const std::string release = g["release"];
        ad::VarlenArgs a = ad::replay_with(batch, *rules, ad::parse_version(release));
        if (s["outcome"]["status"] != "ok") {  // the model raised before any attention call
          REQUIRE(s["calls"].empty());
          compare_error(d, s["outcome"]["error"], a, false);
          static_refused = static_refused || (release == "4.47.1" && a.failure);
          return;
        }
        REQUIRE(!s["calls"].empty());
        const json& c = s["calls"][0];
        // the mask the model handed to _flash_attention_forward
        d.check(a.model_mask.has_value(), "no model-level mask preparation replayed");
        if (a.model_mask) {
          const auto& handed = a.model_mask->handed_on;
          if (c["attention_mask"].is_null()) {
            d.check(!handed, "golden: no mask reached the attention; replay hands on " +
                                 (handed ? show(handed->tensor.values) : ""));
          } else if (!handed) {
            d.check(false, "golden: a mask reached the attention; replay hands on none");
          } else {
            d.check(c["attention_mask"]["values"].get<std::vector<std::vector<int64_t>>>().size() ==
                        static_cast<size_t>(handed->tensor.dim(0)),
                    "mask rows");
            std::vector<int64_t> flat;
            for (const auto& row : c["attention_mask"]["values"])
              for (const auto& v : row) flat.push_back(v.get<int64_t>());
            d.check(flat == handed->tensor.values, "mask handed on " + show(flat) + " vs " + show(handed->tensor.values));
            d.check((c["attention_mask"]["dtype"] == "bool") == a.model_mask->cast_to_bool,
                    "mask dtype " + show(c["attention_mask"]["dtype"]));
          }
          if (s["scenario"] == "static_cache_all_ones") {
            narrow_kept = narrow_kept || (release == "5.13.1" && handed);
            narrow_dropped = narrow_dropped || (release == "5.5.0" && !handed);
            narrow_dropped = narrow_dropped && a.model_mask->dropped_narrower == !handed;
          }
        }
        compare_call(d, c, a, false);
      },
      true);
  INFO(compared << " scenarios compared\n" << report(mismatches));
  REQUIRE(mismatches.empty());
  CHECK(narrow_kept);
  CHECK(narrow_dropped);
  CHECK(static_refused);
}

namespace {

// One label per token of a (rows x width) packed batch: which sequence it belongs to.
std::vector<int32_t> labels_of_rows(int64_t rows, int64_t width) {
  std::vector<int32_t> out(static_cast<size_t>(rows * width));
  for (size_t t = 0; t < out.size(); ++t) out[t] = static_cast<int32_t>(static_cast<int64_t>(t) / width);
  return out;
}

// Segments [cu[k], cu[k+1]) of the flat tokens, read through the gather `indices` where given.
std::vector<int32_t> labels_of_cu(const json& cu, const json& indices, size_t tokens) {
  std::vector<int32_t> out(tokens, -1);
  const auto bounds = cu["values"].get<std::vector<int64_t>>();
  std::vector<int64_t> idx;
  if (!indices.is_null()) idx = indices["values"].get<std::vector<int64_t>>();
  for (size_t k = 0; k + 1 < bounds.size(); ++k)
    for (int64_t p = bounds[k]; p < bounds[k + 1]; ++p) {
      const int64_t t = idx.empty() ? p : idx[static_cast<size_t>(p)];
      if (t >= 0 && static_cast<size_t>(t) < tokens) out[static_cast<size_t>(t)] = static_cast<int32_t>(k);
    }
  return out;
}

// causal_conv1d_fn's seq_idx: a new sequence wherever the value changes within a row.
std::vector<int32_t> labels_of_seq_idx(const json& seq_idx) {
  std::vector<int32_t> out;
  int32_t next = -1;
  for (const json& row : seq_idx["values"])
    for (size_t c = 0; c < row.size(); ++c) {
      if (c == 0 || row[c] != row[c - 1]) ++next;
      out.push_back(next);
    }
  return out;
}

}  // namespace

TEST_CASE("the layer replay reproduces the boundaries each Qwen3-Next layer received", "[convert][layers]") {
  // Per scenario: what the release's GatedDeltaNet layer handed to its delta rule (cu_seqlens)
  // and its conv (seq_idx), and what reached flash-attn in its attention layer, against the
  // layer replay with the kernels that read them (fla named, causal-conv1d installed); and the
  // CPU run itself (neither package: the releases' torch fallbacks) against the replay without
  // them, where 5.20.0 on raises.
  std::vector<std::string> mismatches;
  bool old_release_no_cu = false, new_release_cu = false, fallback_raises = false;
  const size_t compared = replay_model_scenarios(
      "hybrid-qwen3next-", "qwen3_next", mismatches,
      [&](Diff& d, const json& g, const json& s, const ad::Batch& file_batch, const ad::RuleSetInfo* rules) {
        const std::string release = g["release"];
        const auto version = ad::parse_version(release);
        REQUIRE(file_batch.layers.size() == 2);
        const int64_t rows = file_batch.batch->batch_size, width = file_batch.batch->query_length;
        const size_t tokens = static_cast<size_t>(rows * width);
        auto layer_views = [&](bool kernels) {
          ad::Batch b = file_batch;
          if (kernels) b.environment.fla = ad::parse_version("0.6.0");
          b.layers[0].causal_conv1d = kernels;
          ad::Conversion conversion;
          conversion.replayed = ad::replay_with(b, *rules, version);
          return ad::replay_layers(b, conversion, version);
        };
        const auto with_kernels = layer_views(true);
        const auto on_cpu = layer_views(false);
        REQUIRE(with_kernels.size() == 2);
        REQUIRE(with_kernels[0].parts.size() == 2);  // delta_rule, conv1d
        const ad::LayerPart& rule = with_kernels[0].parts[0];
        const ad::LayerPart& conv = with_kernels[0].parts[1];
        const ad::LayerPart& attention = with_kernels[1].parts[0];
        for (const json& c : s["calls"]) {
          const std::string layer = c["layer"];
          if (layer == "delta_rule") {
            const json& cu = c["cu_seqlens"];
            auto want = cu.is_null() ? labels_of_rows(rows, width) : labels_of_cu(cu, nullptr, tokens);
            d.check(!rule.failure, "delta rule: the replay raises " + (rule.failure ? rule.failure->message : ""));
            d.check(rule.labels == want, "delta rule boundaries " + json(want).dump() + " vs " + json(rule.labels).dump() +
                                             " (" + rule.source + ")");
            if (*version < ad::version_literal("5.9.0")) old_release_no_cu = old_release_no_cu || cu.is_null();
            else new_release_cu = new_release_cu || !cu.is_null();
          } else if (layer == "conv1d") {
            const json& seq_idx = c["seq_idx"];
            auto want = seq_idx.is_null() ? labels_of_rows(rows, width) : labels_of_seq_idx(seq_idx);
            d.check(conv.labels == want, "conv boundaries " + json(want).dump() + " vs " + json(conv.labels).dump() + " (" +
                                             conv.source + ")");
          } else if (c["error"].is_null()) {
            const json& r = c["result"];
            auto want = r["cu_seqlens_q"].is_null() ? labels_of_rows(rows, width)
                                                    : labels_of_cu(r["cu_seqlens_q"], r["indices_q"], tokens);
            d.check(attention.labels == want, "attention boundaries " + json(want).dump() + " vs " +
                                                  json(attention.labels).dump());
          } else {
            d.check(false, "the attention raised: " + c["error"].dump());
          }
        }
        // the CPU run: the conv runs first, then the delta rule
        const ad::LayerPart& cpu_rule = on_cpu[0].parts[0];
        const ad::LayerPart& cpu_conv = on_cpu[0].parts[1];
        const auto& first = cpu_conv.failure ? cpu_conv.failure : cpu_rule.failure;
        if (s["outcome"]["status"] == "ok") {
          d.check(!first, "the release runs; the replay without fla and causal-conv1d raises " +
                              (first ? first->message : ""));
        } else {
          const json& e = s["outcome"]["error"];
          d.check(first.has_value(), "the release raises " + e["message"].get<std::string>() + "; the replay does not");
          if (first) {
            d.check(e["type"] == first->type && e["message"] == first->message,
                    "error " + e["message"].get<std::string>() + " vs " + first->message);
            fallback_raises = true;
          }
        }
      },
      true);
  INFO(compared << " scenarios compared\n" << report(mismatches));
  REQUIRE(mismatches.empty());
  CHECK(compared >= 12);
  CHECK(old_release_no_cu);
  CHECK(new_release_cu);
  CHECK(fallback_raises);
}

TEST_CASE("the layer replay reproduces the cu_seqlens FLA's GatedDeltaNet hands its kernels", "[convert][layers]") {
  // Per scenario: the cu_seqlens the release's layer handed to its delta-rule kernel and its
  // short convolutions (over the unpadded tokens where its unpadding ran), against the replay of
  // the layer (environment.fla = the golden's release). The recording stops at the kernel, so
  // only a failure the replay places after it (the repad of 0.5.x) may stand beside it.
  std::vector<std::string> mismatches;
  bool mask_replaces = false, caller_wins = false;
  const size_t compared = replay_model_scenarios(
      "fla-gdn-", "fla GatedDeltaNet", mismatches,
      [&](Diff& d, const json& g, const json& s, const ad::Batch& file_batch, const ad::RuleSetInfo*) {
        REQUIRE(s["outcome"]["status"] == "stopped_at_kernel");
        ad::Batch b = file_batch;
        b.environment.fla = ad::parse_version(g["release"].get<std::string>());
        const auto views = ad::replay_layers(b, ad::Conversion{});
        REQUIRE(views.size() == 1);
        REQUIRE(views[0].parts.size() == 1);
        const ad::LayerPart& part = views[0].parts[0];
        const size_t tokens = static_cast<size_t>(b.batch->batch_size * b.batch->query_length);
        json indices = nullptr;
        for (const json& c : s["calls"]) {
          const std::string layer = c["layer"];
          if (layer == "unpad") {
            indices = c["indices"];
            continue;
          }
          auto want = labels_of_cu(c["cu_seqlens"], indices, tokens);
          d.check(part.labels == want, layer + " boundaries " + json(want).dump() + " vs " + json(part.labels).dump() +
                                           " (" + part.source + ")");
          if (layer == "delta_rule" && s["scenario"] == "cu_seqlens_and_all_ones_mask") {
            const bool one_sequence = c["cu_seqlens"]["values"].size() == 2;
            mask_replaces = mask_replaces || one_sequence;
            caller_wins = caller_wins || !one_sequence;
          }
        }
        d.check(!part.failure || part.failure->where.find("pad_input") != std::string::npos,
                "the layer reaches its kernel; the replay raises before it: " + (part.failure ? part.failure->message : ""));
      },
      true);
  INFO(compared << " scenarios compared\n" << report(mismatches));
  REQUIRE(mismatches.empty());
  CHECK(compared >= 9);
  CHECK(mask_replaces);  // 0.4.2 (fla-org/flash-linear-attention#838)
  CHECK(caller_wins);    // 0.5.0, 0.6.0
}
