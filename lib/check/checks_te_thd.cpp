// Static: Transformer Engine's DotProductAttention with qkv_format "thd" (ids 50-55), per
// docs/spec/transformer-engine-thd.md. Each check reads the batch's varlen block (the call as
// TE received it: global offsets under context parallelism) and, for 52-55, its
// context_parallel block (56, te.cp_group, is te_thd.cpp's group check). Linear in the number of sequences.
#include <algorithm>
#include <string>
#include <vector>

#include "check/static_checks.hpp"
#include "check/te_thd.hpp"

namespace ad::checks {

namespace {

const ExplicitVarlen* te_call(const Ctx& ctx) {
  const auto& v = ctx.batch.varlen;
  if (!v || v->api != Api::te_dot_product_attention) return nullptr;
  return &*v;
}

std::string list_text(const std::vector<int64_t>& values, size_t shown = 8) {
  std::string out = "[";
  for (size_t i = 0; i < values.size() && i < shown; ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  if (values.size() > shown) out += ", ... (" + std::to_string(values.size()) + " values)";
  return out + "]";
}

}  // namespace

// 50 te.thd_arguments: TE's host checks on a THD call, in the order the release runs them
// (TE 2.12 dot_product_attention.py DotProductAttention.forward; 1.13 attention.py), then the
// context-parallel entry's (context_parallel.py attn_forward_func_with_cp).
void te_thd_arguments(Ctx& ctx) {
  const ExplicitVarlen* v = te_call(ctx);
  if (!v) return;
  const auto& release = ctx.batch.environment.transformer_engine;
  if (const auto failed = te_thd_host_check(ctx.batch)) {
    Violation& viol = ctx.report(Severity::error,
                                 failed->what + ": Transformer Engine raises AssertionError(\"" + failed->message + "\")",
                                 {{"check", failed->check}, {"release", te_release_text(release)}}, failed->message);
    ctx.symptom(viol, "", "AssertionError: " + failed->message);
  }
}

// 51 te.padded_offsets: the padded offsets begin each sequence at or after its actual start,
// leave each sequence room for its actual tokens, and stay within the rows.
void te_padded_offsets(Ctx& ctx) {
  const ExplicitVarlen* v = te_call(ctx);
  if (!v || v->cu_seqlens_q.rank() != 1) return;
  const int64_t factor = ctx.batch.context_parallel ? ctx.batch.context_parallel->size : 1;
  // k/v's offsets are checked only where they differ from q's (self-attention passes one set)
  const bool same = v->cu_seqlens_kv_padded == v->cu_seqlens_q_padded && v->cu_seqlens_k.values == v->cu_seqlens_q.values;
  for (bool q : {true, false}) {
    if (!q && same) break;
    const std::vector<int64_t>& actual = q ? v->cu_seqlens_q.values : v->cu_seqlens_k.values;
    const auto& padded_opt = q ? v->cu_seqlens_q_padded : v->cu_seqlens_kv_padded;
    const char* name = q ? "cu_seqlens_q_padded" : "cu_seqlens_kv_padded";
    const char* actual_name = q ? "cu_seqlens_q" : "cu_seqlens_kv";
    if (!padded_opt) continue;
    const std::vector<int64_t>& padded = *padded_opt;
    if (padded.size() != actual.size()) {
      ctx.report(Severity::error,
                 std::string(name) + " has " + std::to_string(padded.size()) + " entries, " + actual_name + " " +
                     std::to_string(actual.size()) + ": one offset per sequence plus one in both",
                 {{"tensor", name}, {"entries", padded.size()}, {"expected", actual.size()}});
      continue;
    }
    if (const auto bad = te_first_bad_segment(actual, padded)) {
      const size_t i = bad->segment;
      Violation& viol = ctx.report(
          Severity::error,
          "sequence " + std::to_string(i) + ": " + bad->why + " (" + actual_name + " " +
              list_text(actual) + ", " + name + " " + list_text(padded) + ")",
          {{"tensor", name}, {"segment", i}, {"actual_start", actual[i]}, {"actual_length", actual[i + 1] - actual[i]},
           {"padded_start", padded[i]}, {"padded_length", padded[i + 1] - padded[i]}});
      ctx.symptom(viol, "");
      continue;
    }
    const int64_t rows = (q ? v->total_q : v->total_k) * factor;
    if (!padded.empty() && padded.back() > rows) {
      Violation& viol = ctx.report(
          Severity::error,
          std::string(name) + "[-1] is " + std::to_string(padded.back()) + ", past the " + std::to_string(rows) +
              " rows" + (factor > 1 ? " of the whole batch (" + std::to_string(rows / factor) + " on this rank x CP " +
                                          std::to_string(factor) + ")"
                                    : std::string(" of ") + (q ? "q" : "k/v")),
          {{"tensor", name}, {"last", padded.back()}, {"rows", rows}});
      ctx.symptom(viol, "overrun");
    }
  }
}

// 53 te.pad_between_seqs: the padding-free path (pad_between_seqs False, given or inferred)
// taken for a batch that has padding it must skip. TE infers False when cu_seqlens_padded[:-1]
// equals cu_seqlens[:-1], which ignores the padding after the last sequence; under context
// parallelism that path then takes each step's offsets as cu_seqlens // CP
// (context_parallel.py cp_p2p_fwd_prepare_qkv), right only when every actual length is a
// multiple of 2 x CP (NVIDIA/TransformerEngine#3331).
void te_pad_between_seqs(Ctx& ctx) {
  const ExplicitVarlen* v = te_call(ctx);
  if (!v || v->cu_seqlens_q.rank() != 1) return;
  const std::vector<int64_t>& actual = v->cu_seqlens_q.values;
  const auto& padded = v->cu_seqlens_q_padded;
  if (!padded || padded->size() != actual.size() || actual.empty()) return;
  bool between = false;  // TE's inference: the offsets differ before the last entry
  size_t first_between = 0;
  for (size_t i = 0; i + 1 < actual.size(); ++i)
    if ((*padded)[i] != actual[i]) {
      between = true;
      first_between = i;
      break;
    }
  const bool given = v->pad_between_seqs.has_value();
  const bool effective = given ? *v->pad_between_seqs : between;
  if (effective) return;
  if (given && between) {
    Violation& viol = ctx.report(
        Severity::error,
        "pad_between_seqs=False, but sequence " + std::to_string(first_between) + " starts at " +
            std::to_string((*padded)[first_between]) + " in cu_seqlens_q_padded and at " + std::to_string(actual[first_between]) +
            " in cu_seqlens_q: the padding between sequences is not skipped",
        {{"segment", first_between}, {"padded_start", (*padded)[first_between]}, {"actual_start", actual[first_between]},
         {"pad_between_seqs", "given"}});
    ctx.symptom(viol, "");
    return;
  }
  const auto& cp = ctx.batch.context_parallel;
  if (!cp || cp->size < 2) return;
  if (const auto bad = te_first_unaligned_segment(actual, 2 * cp->size)) {
    const size_t i = bad->segment;
    Violation& viol = ctx.report(
        Severity::error,
        std::string("pad_between_seqs is False (") + (given ? "given" : "inferred: cu_seqlens_q_padded[:-1] equals cu_seqlens_q[:-1]") +
            "), so each ring step takes cu_seqlens_q // CP; sequence " + std::to_string(i) + " has " +
            std::to_string(actual[i + 1] - actual[i]) + " actual tokens, not a multiple of 2 x CP = " +
            std::to_string(2 * cp->size) + " (" + std::to_string(bad->count) + " such sequences)",
        {{"segment", i}, {"actual_length", actual[i + 1] - actual[i]}, {"multiple", 2 * cp->size},
         {"pad_between_seqs", given ? "given" : "inferred"}});
    ctx.symptom(viol, "tail");
  }
}

// 52 te.cp_padding_multiple: under context parallelism every sequence's padded length is a
// multiple of 2 x CP (TE splits each into 2 x CP equal chunks).
void te_cp_padding_multiple(Ctx& ctx) {
  const ExplicitVarlen* v = te_call(ctx);
  const auto& cp = ctx.batch.context_parallel;
  if (!v || !cp || cp->size < 2 || v->cu_seqlens_q.rank() != 1) return;
  const std::vector<int64_t>& offsets = v->cu_seqlens_q_padded ? *v->cu_seqlens_q_padded : v->cu_seqlens_q.values;
  if (const auto bad = te_first_unaligned_segment(offsets, 2 * cp->size)) {
    const int64_t len = offsets[bad->segment + 1] - offsets[bad->segment];
    const int64_t actual_len = v->cu_seqlens_q.values.size() == offsets.size()
                                   ? v->cu_seqlens_q.values[bad->segment + 1] - v->cu_seqlens_q.values[bad->segment]
                                   : len;
    Violation& viol = ctx.report(
        Severity::error,
        "sequence " + std::to_string(bad->segment) + " is " + std::to_string(len) + " tokens long in " +
            (v->cu_seqlens_q_padded ? "cu_seqlens_q_padded" : "cu_seqlens_q") + ", not a multiple of 2 x CP = " +
            std::to_string(2 * cp->size) + " (" + std::to_string(bad->count) + " of " +
            std::to_string(offsets.size() - 1) + " sequences are not): pad it to " +
            std::to_string((actual_len + 2 * cp->size - 1) / (2 * cp->size) * (2 * cp->size)),
        {{"segment", bad->segment}, {"length", len}, {"multiple", 2 * cp->size}, {"unaligned", bad->count}});
    ctx.symptom(viol, "");
  }
}

// 54 te.cp_shard: this rank's rows are the padded total / CP, and max_seqlen (global, as TE
// takes it) covers the largest padded sequence.
void te_cp_shard(Ctx& ctx) {
  const ExplicitVarlen* v = te_call(ctx);
  const auto& cp = ctx.batch.context_parallel;
  if (!v || !cp || cp->size < 2 || v->cu_seqlens_q.rank() != 1) return;
  const std::vector<int64_t>& offsets = v->cu_seqlens_q_padded ? *v->cu_seqlens_q_padded : v->cu_seqlens_q.values;
  if (offsets.empty()) return;
  const int64_t total = offsets.back();
  const int64_t expected = total / cp->size;
  if (v->total_q != expected || total % cp->size != 0) {
    Violation& viol = ctx.report(
        Severity::error,
        "rank " + std::to_string(cp->rank) + " holds " + std::to_string(v->total_q) + " rows, but " +
            (v->cu_seqlens_q_padded ? "cu_seqlens_q_padded" : "cu_seqlens_q") + "[-1] = " + std::to_string(total) +
            " / CP " + std::to_string(cp->size) + " = " + std::to_string(expected) +
            (v->total_q == total ? ": the offsets passed are this rank's own (already divided by CP); TE divides them "
                                   "again"
                                 : ""),
        {{"rank", cp->rank}, {"rows", v->total_q}, {"expected_rows", expected}, {"offsets_total", total}});
    ctx.symptom(viol, "");
    return;
  }
  int64_t largest = 0;
  for (size_t i = 0; i + 1 < offsets.size(); ++i) largest = std::max(largest, offsets[i + 1] - offsets[i]);
  if (v->max_seqlen_q_given && v->max_seqlen_q.value < largest) {
    Violation& viol = ctx.report(
        Severity::error,
        "max_seqlen_q is " + std::to_string(v->max_seqlen_q.value) + ", below the largest padded sequence (" +
            std::to_string(largest) + " tokens): under context parallelism TE takes the global max_seqlen and "
            "divides it by CP",
        {{"max_seqlen_q", v->max_seqlen_q.value}, {"largest", largest}});
    ctx.symptom(viol, "max_seqlen");
  }
}

// 55 te.cp_chunks: rank r's rows hold chunks r and 2 x CP - 1 - r of every sequence (where
// the capture recorded which chunks they hold).
void te_cp_chunks(Ctx& ctx) {
  const ExplicitVarlen* v = te_call(ctx);
  const auto& cp = ctx.batch.context_parallel;
  if (!v || !cp || cp->size < 2 || !cp->chunks) return;
  const int64_t a = cp->rank, b = 2 * cp->size - 1 - cp->rank;
  int64_t wrong = 0;
  size_t first = 0;
  for (size_t i = 0; i < cp->chunks->size(); ++i)
    if ((*cp->chunks)[i] != std::make_pair(a, b) && wrong++ == 0) first = i;
  if (wrong == 0) return;
  const auto& got = (*cp->chunks)[first];
  Violation& viol = ctx.report(
      Severity::error,
      "rank " + std::to_string(cp->rank) + " holds chunks " + std::to_string(got.first) + " and " +
          std::to_string(got.second) + " of sequence " + std::to_string(first) + ", TE expects " + std::to_string(a) +
          " and " + std::to_string(b) + " (" + std::to_string(wrong) + " of " + std::to_string(cp->chunks->size()) +
          " sequences)",
      {{"rank", cp->rank}, {"segment", first}, {"found", {got.first, got.second}}, {"expected", {a, b}}, {"sequences", wrong}});
  ctx.symptom(viol, "");
}

}  // namespace ad::checks

namespace ad::checks {

// 58 te.sequences: with the intended sequences given, each sequence TE attends is one of them.
// TE's sequence i is the cu_seqlens[i+1] - cu_seqlens[i] rows from cu_seqlens_padded[i]
// (cu_seqlens[i] without padded offsets); the padding between the padded offsets is left out.
// A caller that passes the padded offsets as the actual lengths too (NVIDIA-NeMo/RL PR#4070:
// cu_seqlens_q = cu_seqlens_q_padded, pad_between_seqs False) makes each sequence take the
// padding after it: causal queries of the real tokens never see that padding (a warning: the
// padding rows' outputs are discarded), non-causal ones attend to it. One context (no CP) whose
// intent is written in the packed rows (no `batch` block); TE's other invariants cover CP.
void te_sequences(Ctx& ctx) {
  const ExplicitVarlen* v = te_call(ctx);
  const Batch& b = ctx.batch;
  if (!v || b.intent.source != IntentSource::given || b.intent.sequences.empty() || b.batch || b.context_parallel)
    return;
  std::vector<Span> spans = intent_spans(b);
  std::sort(spans.begin(), spans.end(), [](const Span& x, const Span& y) { return x.start < y.start; });
  const bool causal = v->attn_mask_type.empty() ? b.model.causal : v->attn_mask_type.find("causal") != std::string::npos;
  const bool same = v->cu_seqlens_kv_padded == v->cu_seqlens_q_padded && v->cu_seqlens_k.values == v->cu_seqlens_q.values;
  for (bool q : {true, false}) {
    if (!q && same) break;
    const IntTensor& cu_t = q ? v->cu_seqlens_q : v->cu_seqlens_k;
    const auto& padded = q ? v->cu_seqlens_q_padded : v->cu_seqlens_kv_padded;
    const char* side = q ? "q" : "kv";
    if (cu_t.rank() != 1 || cu_t.values.size() < 2) continue;
    const std::vector<int64_t>& cu = cu_t.values;
    if (padded && padded->size() != cu.size()) continue;  // te.padded_offsets
    bool ordered = cu.front() >= 0;
    for (size_t i = 1; ordered && i < cu.size(); ++i) ordered = cu[i] >= cu[i - 1] && (!padded || (*padded)[i] >= (*padded)[i - 1]);
    if (!ordered) continue;  // cu_seqlens.monotonic, te.padded_offsets
    bool differ = false;  // padding between sequences, as TE infers it
    for (size_t i = 0; padded && i + 1 < cu.size(); ++i) differ = differ || (*padded)[i] != cu[i];
    if (differ && !v->pad_between_seqs.value_or(true)) continue;  // te.pad_between_seqs: the False path
    std::string first_error, first_warning;
    nlohmann::json error_ev, warning_ev;
    auto note = [&](bool error, std::string text, nlohmann::json ev) {
      std::string& slot = error ? first_error : first_warning;
      if (!slot.empty()) return;
      slot = std::move(text);
      (error ? error_ev : warning_ev) = std::move(ev);
    };
    auto span_text = [](const Span& s) {
      return "rows " + std::to_string(s.start) + "-" + std::to_string(s.end() - 1);
    };
    std::vector<char> touched(spans.size(), 0);
    size_t k0 = 0;  // the first span that can still overlap (segments run forward)
    for (size_t i = 0; i + 1 < cu.size(); ++i) {
      const Span seg{padded ? (*padded)[i] : cu[i], cu[i + 1] - cu[i]};
      if (seg.length == 0) continue;  // an empty sequence computes nothing
      while (k0 < spans.size() && spans[k0].end() <= seg.start) ++k0;
      std::vector<size_t> owners;
      int64_t inside = 0;
      for (size_t k = k0; k < spans.size() && spans[k].start < seg.end(); ++k) {
        owners.push_back(k);
        touched[k] = 1;
        inside += std::min(seg.end(), spans[k].end()) - std::max(seg.start, spans[k].start);
      }
      const std::string what = std::string(side) + " sequence " + std::to_string(i) + " (" + span_text(seg) + ")";
      nlohmann::json ev = {{"side", side}, {"sequence", i}, {"start", seg.start}, {"length", seg.length}};
      if (owners.empty()) {
        note(false, what + " holds padding alone", ev);
        continue;
      }
      const Span& s = spans[owners.front()];
      ev["intended"] = span_text(s);
      if (owners.size() >= 2) {
        ev["intended_other"] = span_text(spans[owners[1]]);
        note(true, what + " spans " + std::to_string(owners.size()) + " intended sequences (" + span_text(s) + " and " +
                       span_text(spans[owners[1]]) + "): they attend to each other",
             ev);
      } else if (inside < s.length) {
        note(true, what + " covers only " + std::to_string(inside) + " of the " + std::to_string(s.length) +
                       " tokens of the intended sequence " + span_text(s) + ": the sequence is split",
             ev);
      } else if (inside < seg.length) {
        const int64_t extra = seg.length - inside;
        ev["padding_tokens"] = extra;
        const bool leading = seg.start < s.start;
        if (causal && !leading)
          note(false, what + " is the intended sequence " + span_text(s) + " plus the " + std::to_string(extra) +
                          " padding tokens after it: causal queries of the real tokens never see them, the padding "
                          "rows' outputs are garbage",
               ev);
        else
          note(true, what + " is the intended sequence " + span_text(s) + " plus " + std::to_string(extra) +
                         " padding tokens its queries attend to",
               ev);
      }
    }
    for (size_t k = 0; k < spans.size() && first_error.empty(); ++k)
      if (!touched[k]) note(true, "the intended sequence " + span_text(spans[k]) + " is in no " + side + " sequence", {{"side", side}, {"intended", span_text(spans[k])}});
    if (first_error.empty() && first_warning.empty()) continue;
    const bool error = !first_error.empty();
    const std::string how = std::string(" (") + (q ? "cu_seqlens_q " : "cu_seqlens_kv ") + list_text(cu) +
                            (padded ? std::string(", ") + (q ? "cu_seqlens_q_padded " : "cu_seqlens_kv_padded ") + list_text(*padded) : "") + ")";
    Violation& viol = ctx.report(error ? Severity::error : Severity::warning, (error ? first_error : first_warning) + how,
                                 error ? error_ev : warning_ev);
    ctx.symptom(viol, error ? "" : "warning");
    return;
  }
}

}  // namespace ad::checks
