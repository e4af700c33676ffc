// The report's JSON and text forms, views of a Diagnosis (report-format.md).
#include "render/render.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "util/numbers.hpp"
#include "util/terminal.hpp"

namespace ad {

nlohmann::json location_json(const Location& l) {
  nlohmann::json j = nlohmann::json::object();
  auto range = [](const IndexRange& r) { return nlohmann::json::array({r.begin, r.end}); };
  if (l.row) j["row"] = *l.row;
  if (l.tokens) j["tokens"] = range(*l.tokens);
  if (l.segment) j["segment"] = *l.segment;
  if (l.packed_rows) j["packed_rows"] = range(*l.packed_rows);
  if (l.index) j["index"] = range(*l.index);
  if (l.side) j["side"] = to_string(*l.side);
  return j;
}

nlohmann::json summarise_array(const std::vector<int64_t>& values, bool full) {
  if (full || values.size() <= kSummariseAbove) return values;
  const size_t half = kSummariseAbove / 2;
  nlohmann::json head = std::vector<int64_t>(values.begin(), values.begin() + static_cast<long>(half));
  nlohmann::json tail = std::vector<int64_t>(values.end() - static_cast<long>(half), values.end());
  return {{"summarised", true}, {"count", values.size()}, {"head", head}, {"tail", tail}};
}




nlohmann::json symptom_json(const Symptom& s) {
  nlohmann::json j = {{"outcome", to_string(s.outcome)}, {"pass", to_string(s.pass)}, {"message", s.message}};
  if (!s.rows.empty()) {
    j["rows"] = nlohmann::json::array();
    for (const RowRange& r : s.rows) j["rows"].push_back({r.first, r.last});
  }
  j["basis"] = s.basis;
  return j;
}

nlohmann::json prediction_json(const Prediction& p) {
  nlohmann::json j = symptom_json(p.symptom);
  if (!p.invariant.empty()) j["invariant"] = p.invariant;
  return j;
}


// One advisory match (report-format.md#advisories).
nlohmann::json advisory_json(const AdvisoryMatch& m) {
  const Advisory& a = *m.advisory;
  const std::string affected = affected_range(a);
  nlohmann::json j = {{"id", a.id},
                      {"library", a.library},
                      {"release", m.release},
                      {"affected", affected},
                      {"fixed_in", a.fixed_in.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.fixed_in)},
                      {"fix", a.fix},
                      {"symptom", symptom_json(m.symptom)},
                      {"reference", a.reference},
                      {"why", m.why}};
  if (m.possible) j["possible"] = true;  // present only for a possible match
  return j;
}

std::string prediction_line(const Prediction& p) {
  return to_string(p.symptom.outcome) + " (" + to_string(p.symptom.pass) + "): " + p.symptom.message + "  [" +
         p.symptom.basis + "]";
}

namespace {

nlohmann::json violation_json(const Violation& v) {
  nlohmann::json j = {{"id", v.id},
                      {"stage", v.stage},
                      {"severity", to_string(v.severity)},
                      {"message", v.message},
                      {"evidence", v.evidence},
                      {"explanation", v.explanation},
                      {"fix", v.fix},
                      {"references", v.references}};
  if (v.symptom) j["symptom"] = symptom_json(*v.symptom);
  if (!v.location.empty()) j["location"] = location_json(v.location);
  return j;
}

struct Palette {
  bool on;
  std::string red() const { return on ? "\033[31m" : ""; }
  std::string yellow() const { return on ? "\033[33m" : ""; }
  std::string green() const { return on ? "\033[32m" : ""; }
  std::string bold() const { return on ? "\033[1m" : ""; }
  std::string dim() const { return on ? "\033[2m" : ""; }
  std::string reset() const { return on ? "\033[0m" : ""; }
};

// One evidence value as text: a string as it is, a number or flag as written, a list of
// scalars as "[a, b, c]" (long ones shortened to their first values and the count), an object
// as "key value, key value", a list of objects as one "(key value, ...)" group per element.
std::string evidence_value(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object()) {
    // what the group is about first ("tensors q/out, rows 387, ..."), then the rest in key order
    std::string out;
    const char* subject = nullptr;
    for (const char* key : {"tensors", "tensor", "argument", "buffer", "name"})
      if (!subject && v.contains(key) && v[key].is_string()) subject = key;
    if (subject) out = std::string(subject) + " " + v[subject].get<std::string>();
    for (auto it = v.begin(); it != v.end(); ++it)
      if (!subject || it.key() != subject) out += (out.empty() ? "" : ", ") + it.key() + " " + evidence_value(*it);
    return out.empty() ? "(none)" : out;
  }
  if (v.is_array()) {
    const bool groups = std::any_of(v.begin(), v.end(), [](const nlohmann::json& e) { return e.is_object() || e.is_array(); });
    if (groups) {
      std::string out;
      for (const auto& e : v) out += (out.empty() ? "(" : " (") + evidence_value(e) + ")";
      return out.empty() ? "(none)" : out;
    }
    const size_t shown = v.size() > 12 ? 6 : v.size();
    std::string out = "[";
    for (size_t k = 0; k < shown; ++k) out += (k ? ", " : "") + evidence_value(v[k]);
    if (shown < v.size()) out += ", ... (" + std::to_string(v.size()) + " values)";
    return out + "]";
  }
  return v.dump();
}

// Evidence as "key: value" entries on one line, separated by "; ".
std::string evidence_line(const nlohmann::json& evidence) {
  if (!evidence.is_object()) return evidence_value(evidence);
  std::string out;
  for (auto it = evidence.begin(); it != evidence.end(); ++it)
    out += (out.empty() ? "" : "; ") + it.key() + ": " + evidence_value(*it);
  return out;
}

std::string wrap(const std::string& text, const std::string& indent, size_t width = 96) {
  std::istringstream words(text);
  std::string word, line, out;
  while (words >> word) {
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out += indent + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty()) out += indent + line + "\n";
  return out;
}

std::string short_array(const nlohmann::json& a) {
  // the first 6 values of `head`, the last 3 of `tail`, and the count: "[0,1,2,3,4,5, ... 7,8,9] (N values)"
  auto elided = [](const nlohmann::json& head_values, const nlohmann::json& tail_values, size_t count) {
    nlohmann::json head = nlohmann::json::array(), tail = nlohmann::json::array();
    for (size_t k = 0; k < 6 && k < head_values.size(); ++k) head.push_back(head_values[k]);
    for (size_t k = tail_values.size() >= 3 ? tail_values.size() - 3 : 0; k < tail_values.size(); ++k)
      tail.push_back(tail_values[k]);
    std::string h = head.dump(), t = tail.dump();
    h.pop_back();
    t.erase(0, 1);
    return h + ", ... " + t + " (" + std::to_string(count) + " values)";
  };
  if (a.is_object() && a.value("summarised", false)) return elided(a["head"], a["tail"], a["count"].get<size_t>());
  if (a.is_array() && a.empty()) return "(not computed)";
  if (a.is_array() && a.size() > 16) return elided(a, a, a.size());
  return a.dump();
}

std::string format_ms(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, ms < 10 ? "%.2f ms" : "%.0f ms", ms);
  return buf;
}

}  // namespace

// The report's `varlen` block (report-format.md), with this project's extensions: dtypes and
// shapes of the index tensors, the rule set, and the kernel flags.
nlohmann::json varlen_json(const VarlenArgs& a, bool full) {
  auto tensor_values = [&](const IntTensor& t) { return summarise_array(t.values, full); };
  nlohmann::json j;
  j["path"] = to_string(a.path);
  j["cu_seqlens_q"] = tensor_values(a.cu_seqlens_q);
  j["cu_seqlens_k"] = tensor_values(a.cu_seqlens_k);
  // None passed (transformers' cu_seq_lens kwargs without max_length_q/k) is null, not 0
  auto max_json = [](const MaxSeqlen& m) { return m.is_none ? nlohmann::json(nullptr) : nlohmann::json(m.value); };
  j["max_seqlen_q"] = max_json(a.max_seqlen_q);
  j["max_seqlen_k"] = max_json(a.max_seqlen_k);
  j["max_seqlen_is_tensor"] = a.max_seqlen_q.is_tensor || a.max_seqlen_k.is_tensor;  // either
  j["max_seqlen_q_is_tensor"] = a.max_seqlen_q.is_tensor;
  j["max_seqlen_k_is_tensor"] = a.max_seqlen_k.is_tensor;
  j["total_q"] = a.total_q;
  j["total_k"] = a.total_k;
  if (a.indices_q) j["indices_q"] = tensor_values(*a.indices_q);
  if (a.indices_k) j["indices_k"] = tensor_values(*a.indices_k);
  if (a.seqused_k) j["seqused_k"] = summarise_array(*a.seqused_k, full);
  if (a.seqused_q) j["seqused_q"] = summarise_array(*a.seqused_q, full);
  if (a.page_table) {
    const PageTable& p = *a.page_table;
    nlohmann::json t = {{"page_size", p.page_size}, {"num_pages", p.num_pages}, {"shape", {p.rows, p.pages_per_seq}},
                        {"dtype", to_string(p.dtype)}};
    if (p.values) t["table"] = summarise_array(*p.values, full);
    j["page_table"] = t;
  }
  if (a.qv) j["qv"] = {{"head_dim", a.qv->head_dim}};
  if (a.attention_chunk) j["attention_chunk"] = *a.attention_chunk;
  j["dtypes"] = {{"cu_seqlens_q", to_string(a.cu_seqlens_q.dtype)}, {"cu_seqlens_k", to_string(a.cu_seqlens_k.dtype)}};
  j["shapes"] = {{"cu_seqlens_q", a.cu_seqlens_q.shape}, {"cu_seqlens_k", a.cu_seqlens_k.shape}};
  j["function"] = a.call.function_name();
  j["api"] = to_string(a.call.api);
  j["causal"] = a.call.causal;
  j["window_size"] = {a.call.window_left, a.call.window_right};
  if (a.call.softcap) j["softcap"] = *a.call.softcap;
  j["rule_set"] = a.rule_set;
  if (!a.steps.empty()) j["steps"] = a.steps;
  if (a.failure)
    j["error"] = {{"where", a.failure->where},
                  {"type", a.failure->type},
                  {"message", a.failure->message},
                  {"cuda_symptom", a.failure->cuda_symptom}};
  return j;
}

nlohmann::json rules_json(const RulesApplied& rules) {
  nlohmann::json j = nlohmann::json::object();
  if (rules.transformers) j["transformers"] = *rules.transformers;
  if (rules.rule_set) j["rule_set"] = *rules.rule_set;
  if (rules.transformers_nearest) j["transformers_nearest"] = *rules.transformers_nearest;
  if (rules.flash_attn) j["flash_attn"] = rules.flash_attn->text;
  if (rules.triton) j["triton"] = rules.triton->text;
  return j;
}

namespace {

// The stage's facts under their report keys (report-format.md#stages), each once.
void put_facts(nlohmann::json& st, const StageFacts& f) {
  auto put = [&](const char* key, const auto& value) {
    if (value) st[key] = *value;
  };
  put("checked", f.checked);
  if (f.raises) st["raises"] = {{"where", f.raises->where}, {"type", f.raises->type}, {"message", f.raises->message}};
  const EngineFacts& e = f.engine;
  put("kernel", e.kernel);
  put("ms_kernel", e.ms_kernel);
  put("why_cpu", e.why_cpu);
  put("tiles", e.tiles);
  put("empty_tiles", e.empty_tiles);
  put("row_heads_without_keys", e.row_heads_without_keys);
  put("macs", e.macs);
  put("backward_macs", e.backward_macs);
  put("sampled", e.sampled);
  put("rows_q", f.rows_q);
  put("rows_k", f.rows_k);
  put("rows_v", f.rows_v);
  put("out_of_bounds", f.out_of_bounds);
  put("contract", f.contract);
  put("dim", f.dim);
  put("varlen", f.varlen);
  put("table_rows", f.table_rows);
  put("rotated", f.rotated);
  put("past_table", f.past_table);
  put("rows_not_visited", f.rows_not_visited);
  put("function", f.function);
  put("grid", f.grid);
  put("grid_dot_do_o", f.grid_dot_do_o);
  put("grid_dq_dk_dv", f.grid_dq_dk_dv);
  put("block_m", f.block_m);
  put("block_n", f.block_n);
  put("head_dim_rounded", f.head_dim_rounded);
  put("causal", f.causal);
  put("local", f.local);
  put("deterministic", f.deterministic);
  put("window_size", f.window_size);
  put("softcap", f.softcap);
  put("seqlenq_ngroups_swapped", f.seqlenq_ngroups_swapped);
  put("dq_accum_offset", f.dq_accum_offset);
  put("flash_attn", f.flash_attn);
  put("rows_written", f.rows_written);
  put("rows_computed", f.rows_computed);
  put("ctas_past_rows", f.ctas_past_rows);
  if (f.reference_skipped) st["reference"] = false;
  put("rows_total", f.rows_total);
  put("rows_checked", f.rows_checked);
  put("rows_failed", f.rows_failed);
  put("tolerance", f.tolerance);
  if (f.worst_error) st["worst_error"] = number_json(*f.worst_error);
  put("macs", f.reference_macs);
  put("sampled", f.reference_sampled);
  put("offsets_only", f.offsets_only);
  put("ms_kernels", f.ms_kernels);
  put("refused_accesses", f.refused_accesses);
  put("dq_rows_never_written", f.dq_rows_never_written);
  put("dkv_rows_never_written", f.dkv_rows_never_written);
  if (f.gradients) {
    static const char* const kTensor[3] = {"dq", "dk", "dv"};
    nlohmann::json per = nlohmann::json::object();
    for (int i = 0; i < 3; ++i) {
      const GradientCheckFact& g = (*f.gradients)[static_cast<size_t>(i)];
      per[kTensor[i]] = {{"rows_checked", g.rows_checked}, {"rows_failed", g.rows_failed}, {"worst_error", number_json(g.worst_error)}};
    }
    st["reference"] = per;
  }
  if (f.raw) st["raw"] = {{"symptom", f.raw->symptom}, {"exit_code", f.raw->exit_code}, {"signal", f.raw->signal}};
  put("reference_trusted", f.reference_trusted);
}

}  // namespace

nlohmann::json stage_json(const StageRecord& s) {
  nlohmann::json st = {{"name", to_string(s.name)}, {"status", to_string(s.status)}, {"ms", s.ms}};
  if (!s.detail.empty()) st["detail"] = s.detail;
  put_facts(st, s.facts);
  if (s.engine != StageEngine::unspecified) st["engine"] = to_string(s.engine);
  return st;
}

namespace {

// report-format.md#collator: what the collator emitted and what it handed on
nlohmann::json collator_json(const CollatorRecord& c, bool full) {
  nlohmann::json j;
  j["name"] = c.name;
  if (c.requested != c.name) j["requested"] = c.requested;
  j["release"] = c.release.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.release);
  if (!c.release_from.empty()) j["release_from"] = c.release_from;
  j["replayed_as"] = c.replayed_as;
  j["rule"] = c.rule;
  j["emitted"] = nlohmann::json::array();
  for (const CollatorValue& v : c.emitted) {
    nlohmann::json e = {{"key", v.key}, {"dtype", v.dtype}, {"shape", v.shape}};
    if (v.values_known) e["values"] = summarise_array(v.values, full);
    j["emitted"].push_back(e);
  }
  j["handed_on"] = c.handed_on;
  if (!c.unpad_patch.empty()) j["unpad_patch"] = c.unpad_patch;
  j["notes"] = c.notes;
  return j;
}

std::string collator_line(const CollatorRecord& c) {
  std::string keys, on;
  for (const CollatorValue& v : c.emitted) keys += (keys.empty() ? "" : ", ") + v.key;
  for (const std::string& k : c.handed_on) on += (on.empty() ? "" : ", ") + k;
  return "collator: " + c.name + " " + c.replayed_as + " (" + c.rule + ") emitted " + keys + "; handed on " +
         (on.empty() ? "nothing" : on);
}

// report-format.md `layers`: the segments each layer of a hybrid model receives, as
// [row, start, length] runs (the first 64; `segments_total` counts them all).
struct LayerSegments {
  nlohmann::json listed = nlohmann::json::array();
  int64_t total = 0;
};
LayerSegments layer_segments(const std::vector<int32_t>& labels, int64_t width, size_t cap) {
  LayerSegments out;
  if (width <= 0) return out;
  for (int64_t t = 0; t < static_cast<int64_t>(labels.size());) {
    int64_t e = t + 1;
    const int64_t row_end = (t / width + 1) * width;
    while (e < row_end && labels[static_cast<size_t>(e)] == labels[static_cast<size_t>(t)]) ++e;
    if (labels[static_cast<size_t>(t)] >= 0) {
      if (out.listed.size() < cap) out.listed.push_back({t / width, t % width, e - t});
      ++out.total;
    }
    t = e;
  }
  return out;
}

nlohmann::json layers_json(const Diagnosis& d, int64_t width) {
  nlohmann::json out = nlohmann::json::array();
  for (const LayerView& v : d.conversion.layers) {
    nlohmann::json lj = {{"index", v.index}, {"kind", v.kind}, {"count", v.count}};
    if (!v.implementation.empty()) lj["implementation"] = v.implementation;
    lj["parts"] = nlohmann::json::array();
    for (const LayerPart& p : v.parts) {
      nlohmann::json pj = {{"part", p.part}, {"source", p.source}, {"rule", p.rule}};
      if (!p.labels.empty()) {
        LayerSegments seg = layer_segments(p.labels, width, 64);
        pj["segments"] = std::move(seg.listed);
        pj["segments_total"] = seg.total;
      } else {
        pj["segments"] = nullptr;
      }
      if (p.failure) pj["error"] = {{"where", p.failure->where}, {"type", p.failure->type}, {"message", p.failure->message}};
      if (!p.note.empty()) pj["note"] = p.note;
      lj["parts"].push_back(std::move(pj));
    }
    out.push_back(std::move(lj));
  }
  return out;
}

}  // namespace

namespace {

nlohmann::json te_thd_json(const TeThdFacts& f, bool full) {
  nlohmann::json j;
  j["release"] = f.release ? nlohmann::json(f.release->text) : nlohmann::json(nullptr);
  j["cu_seqlens_q_padded"] = f.cu_seqlens_q_padded ? summarise_array(*f.cu_seqlens_q_padded, full) : nlohmann::json(nullptr);
  j["cu_seqlens_kv_padded"] = f.cu_seqlens_kv_padded ? summarise_array(*f.cu_seqlens_kv_padded, full) : nlohmann::json(nullptr);
  j["pad_between_seqs"] = f.pad_between_seqs;
  j["pad_between_seqs_from"] = f.pad_between_seqs_given ? "given" : "inferred";
  j["attn_mask_type"] = f.attn_mask_type.empty() ? nlohmann::json(nullptr) : nlohmann::json(f.attn_mask_type);
  j["rows"] = f.rows;
  if (f.context_parallel) {
    const ContextParallel& cp = *f.context_parallel;
    nlohmann::json c = {{"size", cp.size}, {"rank", cp.rank}, {"comm_type", cp.comm_type}};
    c["call"] = cp.call.empty() ? nlohmann::json(nullptr) : nlohmann::json(cp.call);
    c["chunks"] = nlohmann::json(nullptr);
    if (cp.chunks) {
      c["chunks"] = nlohmann::json::array();
      for (const auto& [a, b] : *cp.chunks) c["chunks"].push_back({a, b});
    }
    j["context_parallel"] = c;
  } else {
    j["context_parallel"] = nullptr;
  }
  return j;
}

std::string te_thd_line(const TeThdFacts& f) {
  std::string out = "transformer_engine " + (f.release ? f.release->text : std::string("(release not given)")) +
                    ": qkv_format thd, " + std::to_string(f.rows) + " rows";
  if (f.cu_seqlens_q_padded) out += ", cu_seqlens_q_padded " + std::to_string(f.cu_seqlens_q_padded->size()) + " entries";
  out += std::string(", pad_between_seqs ") + (f.pad_between_seqs ? "true" : "false") +
         (f.pad_between_seqs_given ? "" : " (inferred)");
  if (!f.attn_mask_type.empty()) out += ", attn_mask_type " + f.attn_mask_type;
  if (f.context_parallel)
    out += "; context parallel: rank " + std::to_string(f.context_parallel->rank) + " of " +
           std::to_string(f.context_parallel->size) + " (" + f.context_parallel->comm_type + ")" +
           (f.context_parallel->call.empty() ? "" : ", call " + f.context_parallel->call);
  return out;
}

}  // namespace

nlohmann::json to_json(const Diagnosis& d, const RenderOptions& options) {
  const Report& r = d.report;
  const VarlenArgs* effective = d.conversion.effective();
  nlohmann::json j;
  j["tool"] = r.tool;
  j["version"] = r.version;
  j["input"] = r.input;
  j["name"] = r.name;
  j["status"] = r.status();
  j["rules"] = rules_json(d.rules);
  j["backend"] = r.backend;
  if (r.prediction) j["prediction"] = prediction_json(*r.prediction);
  if (!r.advisories.empty()) {
    j["advisories"] = nlohmann::json::array();
    for (const AdvisoryMatch& m : r.advisories) j["advisories"].push_back(advisory_json(m));
  }
  j["first_violation"] = r.violations.empty() ? nlohmann::json(nullptr) : violation_json(r.violations.front());
  j["violations"] = nlohmann::json::array();
  for (const auto& v : r.violations) j["violations"].push_back(violation_json(v));
  j["varlen"] = effective ? varlen_json(*effective, options.full) : nlohmann::json(nullptr);
  if (r.intent) j["intent"] = {{"source", r.intent->source}, {"trusted", r.intent->trusted}, {"why", r.intent->why}};
  if (r.collator) j["collator"] = collator_json(*r.collator, options.full);
  if (d.conversion.explicit_args && d.conversion.replayed) j["replayed"] = varlen_json(*d.conversion.replayed, options.full);
  if (!d.conversion.layers.empty()) j["layers"] = layers_json(d, d.layers_width);
  if (d.te_thd) j["transformer_engine"] = te_thd_json(*d.te_thd, options.full);
  j["stages"] = nlohmann::json::array();
  for (const auto& s : r.stages) j["stages"].push_back(stage_json(s));
  j["notes"] = r.notes;
  if (r.stage_error) j["error"] = r.error_message;
  return j;
}

std::string render_text(const Diagnosis& d, const RenderOptions& options) {
  const Report& r = d.report;
  Palette c{options.color};
  std::ostringstream out;
  out << c.bold() << "attn-doctor " << r.version << c.reset() << "  " << r.input;
  if (!r.name.empty() && r.name != r.input) out << "  (" << r.name << ")";
  out << "\n";
  std::string rules;  // in the JSON's key order
  const nlohmann::json applied = rules_json(d.rules);
  for (auto it = applied.begin(); it != applied.end(); ++it) rules += (rules.empty() ? "" : ", ") + it.key() + " " + it->get<std::string>();
  out << c.dim() << "rules: " << (rules.empty() ? "none" : rules) << "   backend: " << r.backend << c.reset() << "\n";
  for (const auto& n : r.notes) out << c.dim() << wrap("note: " + n, "  ").substr(2) << c.reset();
  if (r.collator) out << wrap(collator_line(*r.collator), "  ").substr(2);
  if (d.te_thd) out << wrap(te_thd_line(*d.te_thd), "  ").substr(2);
  if (r.prediction) {
    // one line, continued with a hanging indent when long
    const std::string line = "prediction: " + prediction_line(*r.prediction);
    const std::string text = line.size() <= 100 ? line + "\n" : wrap(line, "  ").substr(2);
    const size_t label = std::string("prediction:").size();
    out << c.bold() << text.substr(0, label) << c.reset() << text.substr(label);
    if (!r.prediction->symptom.rows.empty()) out << wrap("rows: " + rows_text(r.prediction->symptom.rows), "  ");
  }
  if (r.intent && !r.intent->trusted && r.intent->source != "none")
    out << c.dim() << wrap("reference: untrusted: " + r.intent->why, "  ").substr(2) << c.reset();
  for (const AdvisoryMatch& m : r.advisories) {
    const Advisory& a = *m.advisory;
    out << c.bold() << "advisory " << a.id << c.reset() << ": " << a.library << " " << m.release << (m.possible ? " may have this bug for this call; "
                                                                 : " has this bug for this call; ")
        << (a.fixed_in.empty() ? std::string("no fixed release known") : "fixed in " + std::string(a.fixed_in)) << "\n";
    out << wrap(to_string(a.outcome) + " (" + to_string(a.pass) + "): " + std::string(a.symptom) + "  [" +
                    std::string(a.reference) + "]", "  ");
    out << c.dim() << wrap("why: " + m.why + (m.possible ? "; " + std::string(kPossibleOnly) : std::string()), "  ")
        << c.reset();
    out << c.green() << wrap("fix: " + std::string(a.fix), "  ") << c.reset();
  }
  out << "\n";

  auto marker = [&](const Violation& v) {
    return v.severity == Severity::error ? c.red() + "error" + c.reset() : c.yellow() + "warning" + c.reset();
  };
  if (const Violation* first = r.first_violation()) {
    out << c.bold() << "first violation: " << first->id << c.reset() << "  [" << first->stage << ", " << marker(*first)
        << "]\n";
    out << wrap(first->message, "  ");
    if (!first->evidence.empty()) out << c.dim() << wrap("evidence: " + evidence_line(first->evidence), "  ") << c.reset();
    if (!first->explanation.empty()) out << wrap("what the real stack does: " + first->explanation, "  ");
    if (!first->fix.empty()) out << c.green() << wrap("fix: " + first->fix, "  ") << c.reset();
    if (!first->references.empty()) {
      std::string refs;
      for (const auto& ref : first->references) refs += (refs.empty() ? "" : ", ") + ref;
      out << c.dim() << wrap("references: " + refs, "  ") << c.reset();
    }
    if (r.violations.size() > 1) {
      out << "\nalso violated:\n";
      for (size_t k = 1; k < r.violations.size(); ++k) {
        const auto& v = r.violations[k];
        out << "  " << c.bold() << v.id << c.reset() << "  [" << v.stage << ", " << marker(v) << "]\n";
        out << wrap(v.message, "    ");
        if (options.verbose) {
          if (!v.evidence.empty()) out << c.dim() << wrap("evidence: " + evidence_line(v.evidence), "    ") << c.reset();
          if (!v.fix.empty()) out << wrap("fix: " + v.fix, "    ");
        }
      }
    }
  } else if (!r.stage_error) {
    out << c.green() << "every invariant holds" << c.reset() << "\n";
  }

  if (const VarlenArgs* a = d.conversion.effective()) {
    out << "\nvarlen (path " << to_string(a->path) << "):\n";
    for (const auto& [key, cu] : {std::pair<const char*, const IntTensor*>{"cu_seqlens_q", &a->cu_seqlens_q},
                                  std::pair<const char*, const IntTensor*>{"cu_seqlens_k", &a->cu_seqlens_k}}) {
      out << "  " << key;
      // a cu_seqlens that is not 1-D (a 4-D mask gives (B, 1, Q + 1)): say its shape
      if (cu->shape.size() > 1) out << " of shape " << nlohmann::json(cu->shape).dump();
      out << " " << short_array(summarise_array(cu->values, options.full)) << "\n";
    }
    // None passed (transformers' cu_seq_lens kwargs without max_length_q/k) reads None
    auto max_text = [](const MaxSeqlen& m) { return m.is_none ? std::string("None") : std::to_string(m.value); };
    // each argument's type: the 5.4 - 5.13 decode path passes a host-int q beside a 0-d tensor k
    auto tensor_mark = [](const MaxSeqlen& m) { return m.is_tensor ? " (0-d tensor)" : ""; };
    out << "  max_seqlen_q " << max_text(a->max_seqlen_q) << tensor_mark(a->max_seqlen_q) << "  max_seqlen_k "
        << max_text(a->max_seqlen_k) << tensor_mark(a->max_seqlen_k);
    out << "  total_q " << a->total_q << "  total_k " << a->total_k << "\n";
    if (a->failure) {
      const ReplayFailure& e = *a->failure;
      std::string text = "the release fails here: " + e.type + ": " + e.message + " (in " + e.where + ")";
      if (!e.cuda_symptom.empty()) text += "; on a GPU: " + e.cuda_symptom;
      out << c.red() << wrap(text, "  ") << c.reset();
    }
  }
  if (!d.conversion.layers.empty()) {
    out << "\nlayers (the boundaries each receives):\n";
    for (const LayerView& v : d.conversion.layers)
      for (const LayerPart& p : v.parts) {
        std::string line = std::to_string(v.index) + " " + v.kind + (v.implementation.empty() ? "" : " (" + v.implementation + ")") +
                           (v.parts.size() > 1 || v.kind != p.part ? " " + p.part : "") + " x" + std::to_string(v.count) +
                           ": from " + p.source + ": ";
        if (p.failure) {
          line += "raises " + p.failure->type;
        } else if (p.labels.empty()) {
          line += p.note.empty() ? "not read" : p.note;
        } else {
          const LayerSegments seg = layer_segments(p.labels, d.layers_width, 4);
          std::string spans;
          for (const auto& s : seg.listed)
            spans += (spans.empty() ? "" : ", ") + s[0].dump() + ":" + s[1].dump() + "+" + s[2].dump();
          line += std::to_string(seg.total) + " segment" + (seg.total == 1 ? "" : "s") + " (" + spans +
                  (seg.total > 4 ? ", ..." : "") + ")";
        }
        out << wrap(line, "  ");
      }
  }
  if (!r.stages.empty()) {
    // "NAME STATUS TIME" per stage, two spaces apart, as many to a line as fit in 100 columns;
    // a time counts as 8 characters whatever it reads, so the lines break at the same stages
    // from run to run
    out << "\nstages:";
    size_t column = std::string("stages:").size();
    for (const auto& s : r.stages) {
      std::string colour = s.status == StageStatus::ok ? c.green()
                           : (s.status == StageStatus::violation || s.status == StageStatus::error) ? c.red()
                                                                                                  : c.dim();
      const std::string name = to_string(s.name), status = to_string(s.status), ms = format_ms(s.ms);
      const size_t width = name.size() + 1 + status.size() + 1 + 8;
      if (column + 2 + width > 100) {
        out << "\n       ";
        column = 7;
      }
      out << "  " << name << " " << colour << status << c.reset() << " " << c.dim() << ms << c.reset();
      column += 2 + width;
    }
    out << "\n";
    // details, stages with the same detail (e.g. "not reached: ...") on one line
    for (size_t k = 0; k < r.stages.size(); ++k) {
      const auto& st = r.stages[k];
      if (st.detail.empty()) continue;
      bool seen = false;
      for (size_t j = 0; j < k; ++j) seen = seen || r.stages[j].detail == st.detail;
      if (seen) continue;
      std::string names = to_string(st.name);
      for (size_t j = k + 1; j < r.stages.size(); ++j)
        if (r.stages[j].detail == st.detail) names += std::string(", ") + to_string(r.stages[j].name);
      out << c.dim() << wrap(names + ": " + st.detail, "  ") << c.reset();
    }
  }
  int errors = 0, warnings = 0;
  for (const auto& v : r.violations) (v.severity == Severity::error ? errors : warnings)++;
  out << "\n" << c.bold() << "verdict: ";
  if (r.stage_error && errors == 0) out << c.red() << "ERROR" << c.reset() << c.bold() << " (" << r.error_message << ")";
  else if (errors) out << c.red() << "VIOLATION" << c.reset() << c.bold();
  else if (warnings) out << c.yellow() << "OK WITH WARNINGS" << c.reset() << c.bold();
  else out << c.green() << "OK" << c.reset() << c.bold();
  out << " (" << errors << " error" << (errors == 1 ? "" : "s") << ", " << warnings << " warning"
      << (warnings == 1 ? "" : "s") << ")" << c.reset() << "\n";
  return out.str();
}

}  // namespace ad
