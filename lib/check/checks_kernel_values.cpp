// Static: argument values flash-attn takes without a check of its own (ids 45-46). Both are
// passed through to the kernel unchecked by mha_varlen_fwd, so a value that means nothing
// silently changes what the kernel computes.
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "check/call_site.hpp"
#include "check/static_checks.hpp"
#include "contract/fa2_forward.hpp"

namespace ad::checks {

// 45 seqused_k.range: FA2's BlockInfo takes a sequence's key count from seqused_k when it is
// given (block_info.h: actual_seqlen_k = seqused_k ? seqused_k[bidb] : cu_seqlens_k[bidb + 1] -
// cu_seqlens_k[bidb]). A negative count gives n_block_max = ceil_div(seqused_k[b], kBlockN) <= 0:
// the forward writes zeros and an infinite LSE for every query of that sequence
// (flash_fwd_kernel.h, the early exit when n_block_max <= n_block_min; a varlen call is never
// Is_even_MN). A count past the segment is left to the dynamic stages, which see exactly which
// keys it reaches (attention.access past k and v, result.reference inside them).
void seqused_k_range(Ctx& ctx) {
  const VarlenArgs* a = ctx.args && ctx.args->path != VarlenPath::dense ? ctx.args : nullptr;
  if (!a || !a->seqused_k) return;
  const std::vector<int64_t>& used = *a->seqused_k;
  const auto negative = std::find_if(used.begin(), used.end(), [](int64_t v) { return v < 0; });
  if (negative == used.end()) return;
  const int64_t b = negative - used.begin();
  const int64_t count = std::count_if(used.begin(), used.end(), [](int64_t v) { return v < 0; });
  Violation& v = ctx.report(
      Severity::error,
      "seqused_k[" + std::to_string(b) + "] = " + std::to_string(*negative) + " is negative (" + std::to_string(count) +
          " of " + std::to_string(used.size()) + " entries): seqused_k counts the keys each sequence uses, and the "
          "kernel attends to no key for such a sequence",
      {{"tensor", "seqused_k"}, {"index", b}, {"value", *negative}, {"negative_entries", count}});
  ctx.symptom(v, "");
}

// 46 input.softcap: flash-attn's C++ op takes softcap as a float (mha_varlen_fwd's `const float
// softcap`) and set_params_fprop then uses softmax_scale / softcap as the pre-tanh factor and
// softcap as the scale: score = tanh(s * softmax_scale / softcap) * softcap. Below the smallest
// normal float32 the value either rounds to 0 (softcap > 0.0 is false: the kernel runs without
// a cap) or makes softmax_scale / softcap overflow to inf (every score becomes +-1 times a
// subnormal, ~0: uniform attention; NaN where s == 0). Reasoned from the source (basis model).
void input_softcap(Ctx& ctx) {
  const Model& m = ctx.batch.model;
  if (!m.softcap || !(*m.softcap > 0) || *m.softcap >= static_cast<double>(FLT_MIN)) return;
  if (!ctx.rules().softcap) return;  // a release without softcap: input.feature explains the call
  const double softcap = *m.softcap;
  const float as_float = static_cast<float>(softcap);
  const float scale = m.head_dim > 0 ? static_cast<float>(1.0 / std::sqrt(static_cast<double>(m.head_dim))) : 1.f;
  const bool flushed = as_float == 0.f;
  const float factor = flushed ? 0.f : scale / as_float;
  std::string what =
      flushed ? "it rounds to 0 as the float32 flash-attn takes, so the kernel runs without softcap"
              : std::isinf(factor) ? "softmax_scale / softcap overflows float32 to inf, so every score becomes tanh(+-inf) "
                                     "x softcap, about 0: uniform attention (NaN where a score is exactly 0)"
                                   : "a subnormal float32: softmax_scale / softcap is " + nlohmann::json(factor).dump() +
                                         " and every score is scaled by the subnormal softcap, about 0: uniform attention";
  Violation& v = ctx.report(Severity::error,
                            "softcap " + nlohmann::json(softcap).dump() + " is below the smallest normal float32 (" +
                                nlohmann::json(FLT_MIN).dump() + "): " + what,
                            {{"softcap", softcap}, {"softcap_float32", as_float}, {"smallest_normal", FLT_MIN},
                             {"rounds_to_zero", flushed}});
  ctx.symptom(v, flushed ? "flushed" : "");
}

// 50 seqused_q.range (FA3, FA4: the APIs that take seqused_q): FA3's SeqlenInfoQK takes a
// sequence's query count from seqused_q when given (hopper/seqlen.h: seqlen_q = seqused_q[bidb]),
// computes and writes only those rows and aligns the causal / window diagonal on that count; the
// rows after them keep what torch::empty left (hopper/flash_api.cpp mha_fwd allocates out and
// softmax_lse with torch::empty). FA4's kernels read it the same way (flash_attn/cute
// seqlen_info). mha_fwd checks its dtype, device and shape (batch_size), not its values.
void seqused_q_range(Ctx& ctx) {
  const VarlenArgs* a = ctx.args && ctx.args->path != VarlenPath::dense ? ctx.args : nullptr;
  if (!a || !a->seqused_q || a->cu_seqlens_q.rank() != 1) return;
  const std::vector<int64_t>& used = *a->seqused_q;
  const std::vector<int64_t>& cu = a->cu_seqlens_q.values;
  const int64_t n = cu.empty() ? 0 : static_cast<int64_t>(cu.size()) - 1;
  if (static_cast<int64_t>(used.size()) != n) {
    Violation& v = ctx.report(Severity::error,
                              "seqused_q has " + std::to_string(used.size()) + " entries for " + std::to_string(n) +
                                  " sequences (cu_seqlens_q has " + std::to_string(cu.size()) + " entries)",
                              {{"tensor", "seqused_q"}, {"entries", used.size()}, {"batch_size", n}},
                              ctx.rules().host_checks().message(HostCheck::seqused_q_shape));
    ctx.symptom(v, "shape");
    return;
  }
  int64_t negative = 0, past = 0, first_negative = -1, first_past = -1;
  for (int64_t b = 0; b < n; ++b) {
    const int64_t u = used[static_cast<size_t>(b)], len = cu[static_cast<size_t>(b + 1)] - cu[static_cast<size_t>(b)];
    if (u < 0 && negative++ == 0) first_negative = b;
    if (u > len && len >= 0 && past++ == 0) first_past = b;
  }
  if (past > 0) {
    const size_t b = static_cast<size_t>(first_past);
    const int64_t len = cu[b + 1] - cu[b];
    Violation& v = ctx.report(
        Severity::error,
        "seqused_q[" + std::to_string(first_past) + "] = " + std::to_string(used[b]) + " exceeds its segment's " +
            std::to_string(len) + " query rows (" + std::to_string(past) + " of " + std::to_string(n) +
            " sequences): the kernel computes rows " + std::to_string(cu[b] + len) + " - " +
            std::to_string(cu[b] + used[b] - 1) + " as this sequence's, reading the next segment's queries (or rows "
            "past q) and overwriting their outputs",
        {{"tensor", "seqused_q"}, {"index", first_past}, {"value", used[b]}, {"segment_rows", len}, {"entries_past", past}});
    ctx.symptom(v, "past_segment");
  }
  if (negative > 0) {
    const size_t b = static_cast<size_t>(first_negative);
    Violation& v = ctx.report(
        Severity::error,
        "seqused_q[" + std::to_string(first_negative) + "] = " + std::to_string(used[b]) + " is negative (" +
            std::to_string(negative) + " of " + std::to_string(n) + " entries): no query row of the sequence is "
            "computed, and its output rows keep whatever torch.empty left in them",
        {{"tensor", "seqused_q"}, {"index", first_negative}, {"value", used[b]}, {"negative_entries", negative}});
    ctx.symptom(v, "");
  }
}

}  // namespace ad::checks

namespace ad::checks {

namespace {

// The keys row i of a segment sees, relative to its diagonal (bottom-right aligned): [i - left,
// i + right], a side nullopt when unlimited.
struct Band {
  std::optional<int64_t> left, right;
  bool operator==(const Band&) const = default;
  bool empty() const { return left && right && *left + *right < 0; }
  bool full() const { return !left && !right; }
};

std::string band_words(const Band& b) {
  if (b.full()) return "every key of the segment (no mask)";
  if (b.empty()) return "no key";
  if (!b.left && b.right && *b.right == 0) return "the keys up to its own (causal)";
  auto side = [](const std::optional<int64_t>& v, const char* dir) {
    return v ? std::to_string(*v) + " " + dir : std::string("every key ") + dir;
  };
  return "keys i - " + (b.left ? std::to_string(*b.left) : std::string("inf")) + " .. i + " +
         (b.right ? std::to_string(*b.right) : std::string("inf")) + " (" + side(b.left, "before") + ", " +
         side(b.right, "after") + ")";
}

}  // namespace

// 62 window.fa4_resolution (FA4): the window FA4 resolves from (causal, window_size) against
// the one FA2 and torch's varlen_attn read from the same arguments (a negative side unlimited,
// causal = right side 0). FA4's resolution is normalize_fa4's (contract/fa2_forward.hpp): before
// 4.0.0b30 a pair summing below 0 is no window, from 4.0.0b30 only both sides negative is, and
// any other pair is taken as passed. Only a window the call passes (varlen.window_size) is
// judged: without it both read the model's causal flag and sliding window alike.
void window_fa4_resolution(Ctx& ctx) {
  const VarlenArgs* a = ctx.args;
  if (!a || !ctx.batch.varlen || !ctx.batch.varlen->window_size) return;
  if (a->call.api != Api::flash_attn_4_varlen && a->call.api != Api::flash_attn_4_dense) return;
  // the flash_attn/cute copy in flash-attn 2.8.3 resolves windows its own way (any pair passed is
  // a local window), not modelled
  if (ctx.batch.environment.flash_attn_cute) return;
  const auto [wl, wr] = *ctx.batch.varlen->window_size;
  const bool causal = a->call.causal;
  const std::optional<Version> release = kernel_release(ctx.batch);
  const bool literal = release && *release >= version_literal("4.0.0b30");
  Band fa2;
  if (wl >= 0) fa2.left = wl;
  if (causal) fa2.right = 0;
  else if (wr >= 0) fa2.right = wr;
  const fa2::Normalized n = fa2::normalize({.max_seqlen_q = 1 << 20, .max_seqlen_k = 1 << 20, .num_heads = 1,
                                            .num_heads_k = 1, .causal = causal, .window_left = wl,
                                            .window_right = wr, .family = 4, .fa4_literal_windows = literal});
  constexpr int64_t kOpen = int64_t(1) << 30;
  Band fa4;
  if (n.causal) {
    fa4.right = 0;
  } else if (n.local) {
    if (n.window_left < kOpen) fa4.left = n.window_left;
    if (n.window_right < kOpen) fa4.right = n.window_right;
  }
  if (fa4 == fa2) return;
  const std::string rel = release ? release->text : std::string("(release not given)");
  const std::string passed = "window_size=(" + std::to_string(wl) + ", " + std::to_string(wr) + ") with causal=" +
                             (causal ? "True" : "False");
  Violation& v = ctx.report(
      Severity::error,
      passed + ": flash-attn-4 " + rel + " lets each query row see " + band_words(fa4) +
          ", where flash-attn 2 and torch's varlen_attn read the same arguments as " + band_words(fa2),
      {{"window_size", {wl, wr}}, {"causal", causal}, {"release", rel},
       {"fa4_rule", literal ? "both sides negative is no window (4.0.0b30 onward)"
                            : "sides summing below 0 is no window (4.0.0b4 - 4.0.0b29)"},
       {"fa4_left", fa4.left ? nlohmann::json(*fa4.left) : nlohmann::json(nullptr)},
       {"fa4_right", fa4.right ? nlohmann::json(*fa4.right) : nlohmann::json(nullptr)},
       {"fa2_left", fa2.left ? nlohmann::json(*fa2.left) : nlohmann::json(nullptr)},
       {"fa2_right", fa2.right ? nlohmann::json(*fa2.right) : nlohmann::json(nullptr)}});
  ctx.symptom(v, fa4.full() ? "full" : fa4.empty() ? "empty" : "");
}

}  // namespace ad::checks

namespace ad::checks {

namespace {

// The key count the kernel takes for sequence b of a paged call (hopper/seqlen.h): seqused_k[b]
// (cache_seqlens) when given, else pages per sequence * page_size (mha_fwd's seqlen_k).
int64_t paged_seqlen_k(const ExplicitVarlen& e, int64_t b) {
  const PageTable& p = *e.page_table;
  if (e.seqused_k && b < static_cast<int64_t>(e.seqused_k->size())) return (*e.seqused_k)[static_cast<size_t>(b)];
  return p.pages_per_seq * p.page_size;
}

// A paged FA3 / FA4 call whose page table the host checks let through (int32, one row per
// sequence, seqused_k of the right length); nullptr otherwise.
const ExplicitVarlen* checked_paged_call(const Ctx& ctx) {
  const ExplicitVarlen* e = ctx.batch.varlen ? &*ctx.batch.varlen : nullptr;
  if (!e || !e->page_table || !ctx.args || ctx.args->path != VarlenPath::explicit_varlen) return nullptr;
  if (flash_attn_family(ctx.args->call.api) < 3) return nullptr;
  if (const std::optional<CallSite> site = call_site(ctx.batch, *ctx.args); site && site->binding.type_error) return nullptr;
  const PageTable& p = *e->page_table;
  const int64_t batch_size = ctx.args->cu_seqlens_q.numel() - 1;
  if (p.dtype != DType::int32 || p.rows != batch_size || batch_size <= 0) return nullptr;
  if (e->seqused_k && static_cast<int64_t>(e->seqused_k->size()) != batch_size) return nullptr;
  return e;
}

}  // namespace

// 63 page_table.index (FA3 paged KV): the kernel takes key j of sequence b from page
// page_table[b][j / page_size], row j % page_size, of k_cache / v_cache (hopper/paged_kv.h), and
// nothing checks the index against k_cache.shape[0]: an index past the pool (or negative) reads
// memory outside it. Every page that holds one of the sequence's keys is counted (a window or
// chunk that masks a whole page out may leave it unread).
void page_table_index(Ctx& ctx) {
  const ExplicitVarlen* e = checked_paged_call(ctx);
  if (!e || !e->page_table->values) return;
  const PageTable& p = *e->page_table;
  const std::vector<int64_t>& t = *p.values;
  int64_t bad = 0, first_b = -1, first_p = -1, first_v = 0;
  for (int64_t b = 0; b < p.rows; ++b) {
    const int64_t keys = paged_seqlen_k(*e, b);
    if (keys <= 0) continue;
    const int64_t pages = std::min<int64_t>((keys + p.page_size - 1) / p.page_size, p.pages_per_seq);
    for (int64_t i = 0; i < pages; ++i) {
      const int64_t v = t[static_cast<size_t>(b * p.pages_per_seq + i)];
      if (v >= 0 && v < p.num_pages) continue;
      if (bad++ == 0) first_b = b, first_p = i, first_v = v;
    }
  }
  if (bad == 0) return;
  Violation& v = ctx.report(
      Severity::error,
      "page_table[" + std::to_string(first_b) + "][" + std::to_string(first_p) + "] = " + std::to_string(first_v) +
          " is outside k_cache's " + std::to_string(p.num_pages) + " pages (" + std::to_string(bad) +
          " page entr" + (bad == 1 ? "y" : "ies") + " the call reads): the kernel reads k_cache / v_cache rows " +
          (first_v < 0 ? "before the pool" : "past the pool") + " without a check",
      {{"tensor", "page_table"}, {"sequence", first_b}, {"page", first_p}, {"value", first_v},
       {"num_pages", p.num_pages}, {"page_size", p.page_size}, {"entries_outside", bad}});
  ctx.symptom(v, "");
}

// 64 page_table.coverage (FA3 paged KV): seqused_k[b] (cache_seqlens) keys need ceil(seqused_k[b]
// / page_size) pages; the kernel indexes page_table[b] by j / page_size without comparing it with
// the row's length, so keys past pages_per_seq * page_size take their page from the row after
// (page_table is contiguous: the next sequence's pages, its keys attended silently) or, for the
// last sequence, from past the table.
void page_table_coverage(Ctx& ctx) {
  const ExplicitVarlen* e = checked_paged_call(ctx);
  if (!e || !e->seqused_k) return;
  const PageTable& p = *e->page_table;
  const int64_t capacity = p.pages_per_seq * p.page_size;
  int64_t over = 0, first = -1;
  for (int64_t b = 0; b < p.rows; ++b)
    if (paged_seqlen_k(*e, b) > capacity && over++ == 0) first = b;
  if (over == 0) return;
  const int64_t keys = paged_seqlen_k(*e, first);
  const bool last = first == p.rows - 1;
  Violation& v = ctx.report(
      Severity::error,
      "seqused_k[" + std::to_string(first) + "] = " + std::to_string(keys) + " keys need " +
          std::to_string((keys + p.page_size - 1) / p.page_size) + " pages, but a page_table row holds " +
          std::to_string(p.pages_per_seq) + " (" + std::to_string(capacity) + " keys; " + std::to_string(over) + " of " +
          std::to_string(p.rows) + " sequences): the kernel takes the pages after the row from " +
          (last ? "past the end of page_table" : "the next sequence's row, attending to its keys"),
      {{"tensor", "seqused_k"}, {"sequence", first}, {"value", keys}, {"pages_per_sequence", p.pages_per_seq},
       {"page_size", p.page_size}, {"capacity", capacity}, {"sequences_over", over}, {"last_row", last}});
  ctx.symptom(v, last ? "past_table" : "next_row");
}

}  // namespace ad::checks
