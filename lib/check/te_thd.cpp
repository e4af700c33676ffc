// Transformer Engine THD: host checks by release, offset arithmetic, the context-parallel group
// check (check/te_thd.hpp). Sources: TE 1.13.0 transformer_engine/pytorch/attention.py; TE
// 2.4.0, 2.5.0, 2.8.0, 2.12.0 transformer_engine/pytorch/attention/dot_product_attention/
// dot_product_attention.py and context_parallel.py (docs/spec/transformer-engine-thd.md).
#include "check/te_thd.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "check/check.hpp"

namespace ad {

namespace {

// The release whose messages apply: 2.12 when none is given (the newest read).
Version te_release_or_default(const std::optional<Version>& release) {
  return release ? *release : version_literal("2.12.0");
}

bool at_least(const Version& v, const char* text) { return v >= version_literal(text); }

}  // namespace

std::string te_release_text(const std::optional<Version>& release) {
  return release ? release->text : std::string("not given (2.12 assumed)");
}

std::optional<TeHostFailure> te_thd_host_check(const Batch& batch) {
  if (!batch.varlen || batch.varlen->api != Api::te_dot_product_attention) return std::nullopt;
  const ExplicitVarlen& v = *batch.varlen;
  const Version release = te_release_or_default(batch.environment.transformer_engine);
  // DotProductAttention.forward, qkv_format == "thd" (same text in 1.13, 2.4, 2.12): the mask
  // type, then the shapes, then the dtypes
  if (!v.attn_mask_type.empty() && v.attn_mask_type.find("padding") == std::string::npos)
    return TeHostFailure{"attn_mask_type", "attn_mask_type=\"" + v.attn_mask_type + "\" with qkv_format=\"thd\"",
                         "Attention mask type must be padding or padding_causal for qkv_format=thd!"};
  if (v.cu_seqlens_q.rank() != 1 || v.cu_seqlens_k.rank() != 1 || v.cu_seqlens_q.shape != v.cu_seqlens_k.shape)
    return TeHostFailure{"cu_seqlens_shape",
                         "cu_seqlens_q has " + std::to_string(v.cu_seqlens_q.rank()) + " dimension(s) and " +
                             std::to_string(v.cu_seqlens_q.numel()) + " entries, cu_seqlens_kv " +
                             std::to_string(v.cu_seqlens_k.rank()) + " and " + std::to_string(v.cu_seqlens_k.numel()),
                         "cu_seqlens_q and cu_seqlens_q must both have shape [batch_size + 1]!"};
  if (v.cu_seqlens_q.dtype != DType::int32 || v.cu_seqlens_k.dtype != DType::int32)
    return TeHostFailure{"cu_seqlens_dtype",
                         "cu_seqlens_q is " + to_string(v.cu_seqlens_q.dtype) + ", cu_seqlens_kv " +
                             to_string(v.cu_seqlens_k.dtype),
                         "cu_seqlens_q and cu_seqlens_q must both be in dtype torch.int32!"};
  // attn_forward_func_with_cp: padded offsets are required under context parallelism (the
  // message changed twice)
  if (batch.context_parallel && batch.context_parallel->size > 1 && (!v.cu_seqlens_q_padded || !v.cu_seqlens_kv_padded)) {
    std::string message = at_least(release, "2.8.0")   ? "cu_seqlens_padded can not be None for context parallelism and qkv_format = 'thd'!"
                          : at_least(release, "2.0.0") ? "cu_seqlens_padded cannot be None with context parallelism + THD format!"
                                                       : "cu_seqlens_q_padded and cu_seqlens_kv_padded cannot be None with context parallelism!";
    return TeHostFailure{"cp_padded_required",
                         std::string("context parallelism (CP ") + std::to_string(batch.context_parallel->size) +
                             ") without " + (!v.cu_seqlens_q_padded ? "cu_seqlens_q_padded" : "cu_seqlens_kv_padded"),
                         message};
  }
  return std::nullopt;
}

std::optional<TeBadSegment> te_first_bad_segment(const std::vector<int64_t>& actual, const std::vector<int64_t>& padded) {
  const size_t n = std::min(actual.size(), padded.size());
  if (n && padded[0] != 0) return TeBadSegment{0, "the padded offsets start at " + std::to_string(padded[0]) + ", not 0"};
  for (size_t i = 0; i + 1 < n; ++i) {
    const int64_t a = actual[i + 1] - actual[i], p = padded[i + 1] - padded[i];
    if (p < 0) return TeBadSegment{i, "the padded offsets decrease (" + std::to_string(padded[i]) + " to " + std::to_string(padded[i + 1]) + ")"};
    if (padded[i] < actual[i])
      return TeBadSegment{i, "its padded start " + std::to_string(padded[i]) + " is before its actual start " +
                                 std::to_string(actual[i]) + " (padding only adds rows)"};
    if (a > p)
      return TeBadSegment{i, "its " + std::to_string(a) + " actual tokens do not fit its " + std::to_string(p) +
                                 " padded rows (the sequence runs into the next one)"};
  }
  return std::nullopt;
}

std::optional<TeUnaligned> te_first_unaligned_segment(const std::vector<int64_t>& offsets, int64_t multiple) {
  std::optional<TeUnaligned> out;
  for (size_t i = 0; i + 1 < offsets.size(); ++i) {
    const int64_t len = offsets[i + 1] - offsets[i];
    if (len % multiple == 0) continue;
    if (!out) out = TeUnaligned{i, 0};
    ++out->count;
  }
  return out;
}

std::string te_static_only_reason(const Batch& batch) {
  if (!batch.varlen || batch.varlen->api != Api::te_dot_product_attention) return "";
  return "Transformer Engine THD call: checked statically (te.* invariants); the checked kernels run flash-attn's "
         "varlen contract, not TE's padded offsets or its context-parallel ring, so they were not run";
}

// ---- the group check ---------------------------------------------------------------------

namespace {

std::string vector_text(const std::vector<int64_t>& v, size_t shown = 8) {
  std::string out = "[";
  for (size_t i = 0; i < v.size() && i < shown; ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  if (v.size() > shown) out += ", ... (" + std::to_string(v.size()) + " values)";
  return out + "]";
}

// The first index where two offset lists differ (their common length when one is a prefix).
size_t first_difference(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return i;
}

}  // namespace

CpGroupReport check_cp_group(const std::vector<CpGroupMember>& members) {
  CpGroupReport report;
  if (members.empty()) return report;
  const CpGroupMember& first = members.front();
  const ContextParallel& cp0 = *first.batch->context_parallel;
  report.call = cp0.call;
  report.size = cp0.size;
  // hostile groups: exit 2 with file, JSON path, expected, found
  std::map<int64_t, const CpGroupMember*> by_rank;
  for (const CpGroupMember& m : members) {
    const ContextParallel& cp = *m.batch->context_parallel;
    if (cp.size != cp0.size)
      throw InputError(m.file, "/context_parallel/size",
                       "size " + std::to_string(cp0.size) + " (as " + first.file + ", the same call \"" + cp0.call + "\")",
                       "size " + std::to_string(cp.size));
    auto [it, fresh] = by_rank.emplace(cp.rank, &m);
    if (!fresh)
      throw InputError(m.file, "/context_parallel/rank",
                       "a rank no other capture of call \"" + cp0.call + "\" holds",
                       "rank " + std::to_string(cp.rank) + ", also held by " + it->second->file);
  }
  if (static_cast<int64_t>(by_rank.size()) != cp0.size) {
    std::string missing;
    for (int64_t r = 0; r < cp0.size && missing.size() < 200; ++r)
      if (!by_rank.count(r)) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    throw InputError(first.file, "/context_parallel",
                     "the captures of all " + std::to_string(cp0.size) + " ranks of call \"" + cp0.call + "\"",
                     std::to_string(by_rank.size()) + " captures: rank(s) " + missing + " missing");
  }
  for (const auto& [rank, m] : by_rank) report.files.push_back(m->file);

  auto add = [&](const CpGroupMember& m, std::optional<int64_t> segment, std::string message, nlohmann::json evidence) {
    CpGroupFinding f;
    f.rank = m.batch->context_parallel->rank;
    f.file = m.file;
    f.segment = segment;
    evidence["rank"] = f.rank;
    evidence["input"] = m.file;
    if (segment) evidence["segment"] = *segment;
    f.violation = make_violation("te.cp_group", Severity::error, std::move(message), std::move(evidence));
    report.findings.push_back(std::move(f));
  };

  // 1. every rank passed the same global arguments (rank 0's are the reference)
  const CpGroupMember& ref = *by_rank.begin()->second;
  const ExplicitVarlen& rv = *ref.batch->varlen;
  auto padded_of = [](const ExplicitVarlen& v) -> const std::vector<int64_t>& {
    return v.cu_seqlens_q_padded ? *v.cu_seqlens_q_padded : v.cu_seqlens_q.values;
  };
  for (const auto& [rank, m] : by_rank) {
    if (m == &ref) continue;
    const ExplicitVarlen& v = *m->batch->varlen;
    const ContextParallel& cp = *m->batch->context_parallel;
    const std::string who = "rank " + std::to_string(rank) + " (" + m->file + ")";
    if (v.cu_seqlens_q.numel() != rv.cu_seqlens_q.numel()) {
      add(*m, std::nullopt,
          who + " passed " + std::to_string(std::max<int64_t>(0, v.cu_seqlens_q.numel() - 1)) + " sequences, rank " +
              std::to_string(by_rank.begin()->first) + " " + std::to_string(std::max<int64_t>(0, rv.cu_seqlens_q.numel() - 1)) +
              ": the ranks of one call pass the same global cu_seqlens",
          {{"sequences", v.cu_seqlens_q.numel() - 1}, {"expected", rv.cu_seqlens_q.numel() - 1}});
      continue;
    }
    for (const auto& [name, a, b] :
         {std::tuple<const char*, const std::vector<int64_t>*, const std::vector<int64_t>*>{
              "cu_seqlens_q", &v.cu_seqlens_q.values, &rv.cu_seqlens_q.values},
          {"cu_seqlens_q_padded", &padded_of(v), &padded_of(rv)}}) {
      if (*a == *b) continue;
      const size_t i = first_difference(*a, *b);
      const int64_t seg = i == 0 ? 0 : static_cast<int64_t>(i) - 1;
      add(*m, seg,
          who + " passed " + name + " " + vector_text(*a) + ", rank " + std::to_string(by_rank.begin()->first) + " " +
              vector_text(*b) + ": they differ at entry " + std::to_string(i) + " (sequence " + std::to_string(seg) +
              "); TE takes the global offsets on every rank",
          {{"tensor", name}, {"entry", i}, {"found", i < a->size() ? (*a)[i] : -1}, {"expected", i < b->size() ? (*b)[i] : -1}});
      break;
    }
    if (v.max_seqlen_q.value != rv.max_seqlen_q.value)
      add(*m, std::nullopt,
          who + " passed max_seqlen_q " + std::to_string(v.max_seqlen_q.value) + ", rank " +
              std::to_string(by_rank.begin()->first) + " " + std::to_string(rv.max_seqlen_q.value) +
              ": the ranks of one call pass the same global max_seqlen",
          {{"max_seqlen_q", v.max_seqlen_q.value}, {"expected", rv.max_seqlen_q.value}});
    if (cp.comm_type != ref.batch->context_parallel->comm_type)
      add(*m, std::nullopt, who + " uses cp_comm_type \"" + cp.comm_type + "\", rank 0 \"" + ref.batch->context_parallel->comm_type + "\"",
          {{"comm_type", cp.comm_type}, {"expected", ref.batch->context_parallel->comm_type}});
  }

  // 2. each rank's shard against the global batch: rows = padded total / CP, the sequence at
  // fault the first one whose padded length does not split into 2 x CP chunks
  const std::vector<int64_t>& global = padded_of(rv);
  const int64_t cp_size = cp0.size;
  const auto unaligned = te_first_unaligned_segment(global, 2 * cp_size);
  for (const auto& [rank, m] : by_rank) {
    const ExplicitVarlen& v = *m->batch->varlen;
    const int64_t total = global.empty() ? 0 : global.back();
    const int64_t expected = total / cp_size;
    const std::string who = "rank " + std::to_string(rank) + " (" + m->file + ")";
    if (v.total_q != expected || total % cp_size != 0) {
      add(*m, unaligned ? std::optional<int64_t>(static_cast<int64_t>(unaligned->segment)) : std::nullopt,
          who + " holds " + std::to_string(v.total_q) + " rows; the global padded batch of " + std::to_string(total) +
              " tokens gives each of the " + std::to_string(cp_size) + " ranks " + std::to_string(expected) +
              (unaligned ? " (sequence " + std::to_string(unaligned->segment) + " is not a multiple of 2 x CP = " +
                               std::to_string(2 * cp_size) + ")"
                         : std::string()),
          {{"rows", v.total_q}, {"expected_rows", expected}, {"global_tokens", total}});
    } else if (unaligned) {
      add(*m, static_cast<int64_t>(unaligned->segment),
          who + ": sequence " + std::to_string(unaligned->segment) + " is " +
              std::to_string(global[unaligned->segment + 1] - global[unaligned->segment]) +
              " tokens long, not a multiple of 2 x CP = " + std::to_string(2 * cp_size) + ", so its " +
              std::to_string(2 * cp_size) + " chunks do not tile it (" + std::to_string(unaligned->count) +
              " sequences are not)",
          {{"length", global[unaligned->segment + 1] - global[unaligned->segment]}, {"multiple", 2 * cp_size}});
      break;  // one finding names the sequence for the whole group
    }
  }

  // 3. which chunks each rank holds, where the captures recorded it: every chunk of every
  // sequence held once, rank r holding r and 2 x CP - 1 - r
  bool all_chunks = true;
  for (const auto& [rank, m] : by_rank) all_chunks = all_chunks && m->batch->context_parallel->chunks.has_value();
  if (all_chunks) {
    const size_t sequences = ref.batch->context_parallel->chunks->size();
    for (size_t s = 0; s < sequences; ++s) {
      std::map<int64_t, int64_t> holder;  // chunk -> rank
      bool reported = false;
      for (const auto& [rank, m] : by_rank) {
        const auto& chunks = *m->batch->context_parallel->chunks;
        if (s >= chunks.size()) continue;
        const auto [a, b] = chunks[s];
        const int64_t ea = rank, eb = 2 * cp_size - 1 - rank;
        if ((a != ea || b != eb) && !reported) {
          add(*m, static_cast<int64_t>(s),
              "rank " + std::to_string(rank) + " (" + m->file + ") holds chunks " + std::to_string(a) + " and " +
                  std::to_string(b) + " of sequence " + std::to_string(s) + "; TE's ring expects chunks " +
                  std::to_string(ea) + " and " + std::to_string(eb),
              {{"found", {a, b}}, {"expected", {ea, eb}}});
          reported = true;
        }
        for (int64_t c : {a, b}) {
          auto [it, fresh] = holder.emplace(c, rank);
          if (!fresh && !reported) {
            add(*m, static_cast<int64_t>(s),
                "chunk " + std::to_string(c) + " of sequence " + std::to_string(s) + " is held by rank " +
                    std::to_string(it->second) + " and rank " + std::to_string(rank) + " (" + m->file + ")",
                {{"chunk", c}, {"ranks", {it->second, rank}}});
            reported = true;
          }
        }
      }
      if (reported) break;  // the first sequence at fault; the others repeat it
    }
  }
  return report;
}

}  // namespace ad
