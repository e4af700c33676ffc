// Static: the route a packed batch takes (ids 13-14). A row that holds several sequences is only
// safe on a path that passes their boundaries to the kernel (cu_seqlens); the dense kernel
// attends across them without any error.
#include <algorithm>

#include "check/cu_seqlens_ignored_text.hpp"
#include "check/static_checks.hpp"

namespace ad::checks {

namespace {

// The first row, by index, that holds several intended sequences: what route.packed_to_dense
// and the axolotl ring rule name; `spans` and `listed` show the first four of its sequences.
struct PackedRow {
  int64_t row = 0;
  size_t sequences_in_row = 0;
  int64_t packed_rows = 0;  // rows holding several intended sequences, this one included
  std::string spans;        // "0-4, 5-9, ..."
  nlohmann::json listed = nlohmann::json::array();  // [{start, length}], at most four
};

std::optional<PackedRow> first_packed_row(const Intent& intent) {
  // sorted by (row, start); a derived intent already is, and is not copied
  auto order = [](const IntendedSequence& a, const IntendedSequence& b) { return a.row != b.row ? a.row < b.row : a.start < b.start; };
  std::vector<IntendedSequence> sorted;
  const std::vector<IntendedSequence>* in = &intent.sequences;
  if (!std::is_sorted(in->begin(), in->end(), order)) {
    sorted = *in;
    std::stable_sort(sorted.begin(), sorted.end(), order);
    in = &sorted;
  }
  const auto& seqs = *in;
  int64_t packed_rows = 0;
  size_t first = seqs.size(), first_end = 0;
  for (size_t i = 0; i < seqs.size();) {
    size_t j = i;
    while (j < seqs.size() && seqs[j].row == seqs[i].row) ++j;
    if (j - i >= 2) {
      ++packed_rows;
      if (first == seqs.size()) {
        first = i;
        first_end = j;
      }
    }
    i = j;
  }
  if (first == seqs.size()) return std::nullopt;
  PackedRow p;
  p.row = seqs[first].row;
  p.sequences_in_row = first_end - first;
  p.packed_rows = packed_rows;
  for (size_t k = first; k < first_end && k < first + 4; ++k) {
    p.listed.push_back({{"start", seqs[k].start}, {"length", seqs[k].length}});
    p.spans += (k > first ? ", " : "") + std::to_string(seqs[k].start) + "-" +
               std::to_string(seqs[k].start + seqs[k].length - 1);
  }
  if (p.sequences_in_row > 4) p.spans += ", ...";
  return p;
}

}  // namespace

// 13 route.packed_to_dense: a padding-free batch whose boundaries were lost before the kernel
// (EasyR1 PR#494: 3-D ids lost their text axis; trl PR#3942: loss 0.0) trains on attention
// across sequences, silently.
void route_packed_to_dense(Ctx& ctx) {
  const auto path = kernel_path(ctx);
  if (!path || *path != VarlenPath::dense) return;
  const auto p = first_packed_row(ctx.batch.intent);
  if (!p) return;
  std::string why = ctx.replayed ? " (replayed rule set " + ctx.replayed->rule_set + ")" : "";
  ctx.report(Severity::error,
             "row " + std::to_string(p->row) + " holds " + std::to_string(p->sequences_in_row) +
                 " intended sequences (tokens " + p->spans + ") but the call reaches the dense kernel" + why +
                 " with no cu_seqlens: every token attends across the sequence boundaries",
             {{"row", p->row}, {"sequences", p->listed}, {"sequences_in_row", p->sequences_in_row},
              {"packed_rows", p->packed_rows}, {"path", "dense"}, {"intent", to_string(ctx.batch.intent.source)}})
      .location = Location::whole_row(p->row);
}

// 14 route.partial_kwargs: transformers accepts `cu_seq_lens_q/k`, `max_length_q/k` from a
// collator, but only uses them when all four are given (5.x: is_fa_with_varlen_kwargs) and
// no attention mask is (the mask branch comes first in every release); otherwise it falls
// back silently (transformers PR#47170).
void route_partial_kwargs(Ctx& ctx) {
  if (!ctx.batch.batch || !ctx.batch.batch->flash_kwargs) return;
  const FlashKwargs& k = *ctx.batch.batch->flash_kwargs;
  std::vector<std::string> given, missing;
  (k.cu_seq_lens_q ? given : missing).push_back("cu_seq_lens_q");
  (k.cu_seq_lens_k ? given : missing).push_back("cu_seq_lens_k");
  (k.max_length_q ? given : missing).push_back("max_length_q");
  (k.max_length_k ? given : missing).push_back("max_length_k");
  const auto path = conversion_path(ctx);
  const std::string path_name = path ? to_string(*path) : "unknown";
  const std::string rule = ctx.replayed ? " (replayed rule set " + ctx.replayed->rule_set + ")" : "";
  auto names = [](const std::vector<std::string>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
    return s;
  };
  nlohmann::json ev = {{"given", given}, {"missing", missing}, {"path", path_name}};
  if (!missing.empty()) {
    const bool used = path == VarlenPath::kwargs;
    ctx.report(used ? Severity::warning : Severity::error,
               "varlen kwargs " + names(given) + " are given without " + names(missing) +
                   (used ? ": this release still used them" + rule + ", releases that require all four fall back"
                         : ": transformers only uses them together; the call took the " + path_name + " path" + rule +
                               " instead"),
               ev);
    return;
  }
  if (ctx.batch.batch->attention_mask && path == VarlenPath::mask) {
    ctx.report(Severity::error,
               "all four varlen kwargs are given together with an attention mask: the mask path wins" + rule +
                   " and the kwargs are ignored",
               ev);
    return;
  }
  if (path && *path != VarlenPath::kwargs && *path != VarlenPath::position_ids)
    ctx.report(Severity::error,
               "all four varlen kwargs are given but the call took the " + path_name + " path" + rule +
                   ": the kwargs never reach the kernel",
               ev);
}

}  // namespace ad::checks

namespace ad::checks {

namespace {

// A violation of 61 carries its own framework's explanation, fix and references.
void carry_text(Violation& v, const FrameworkText& t) {
  v.explanation = std::string(t.explanation);
  v.fix = std::string(t.fix);
  v.references.assign(t.references.begin(), t.references.end());
}

// axolotl under context parallelism (context_parallel_size > 1; sequence_parallel_degree in
// 0.9.x): `ring_attn_func` picks ring-flash-attn's entry. The batch adapters
// (monkeypatch/ring_attn/adapters/batch.py, 0.9.x under monkeypatch/attention/) replace
// transformers' _flash_attention_forward and call ring_flash_attn_func (zigzag_ring_flash_attn_func,
// stripe_flash_attn_func in 0.9.x) with q, k, v and causal only: position_ids and cu_seq_lens_*
// are "Not used in this implementation", so each row runs as one sequence across the ranks.
// varlen_llama3 derives cu_seqlens from the position ids (get_cu_seqlens_from_pos_ids) for
// llama3_flash_attn_varlen_func. Releases 0.9.0 - 0.19.0 (read in the wheels); 0.20.0 replaced
// the ring-flash-attn backend (ringmaster) and ignores ring_attn_func.
void axolotl_ring(Ctx& ctx) {
  const Dispatch& d = *ctx.batch.dispatch;
  if (d.ring_degree < 2) return;  // validate_ring_attn_func: no ring attention at size 1
  const std::optional<Version>& release = ctx.batch.environment.axolotl;
  static const Version ringmaster = version_literal("0.20.0");
  if (release && *release >= ringmaster) {
    ctx.report(Severity::note,
               "axolotl " + release->text + " ignores ring_attn_func \"" + d.backend +
                   "\" (deprecated from 0.20.0: ringmaster's context parallelism replaced the ring-flash-attn "
                   "backend); the attention ringmaster runs is not modelled",
               {{"library", "axolotl"}, {"backend", d.backend}, {"axolotl", release->text}});
    return;
  }
  if (d.backend.rfind("batch_", 0) != 0) return;  // varlen_llama3 passes the boundaries
  const std::string function = d.backend == "batch_zigzag"   ? "zigzag_ring_flash_attn_func"
                               : d.backend == "batch_stripe" ? "stripe_flash_attn_func"
                                                             : "ring_flash_attn_func";
  const auto p = first_packed_row(ctx.batch.intent);
  if (!p) return;
  const bool causal = ctx.batch.model.causal;
  const std::string which = release ? "axolotl " + release->text : "axolotl (0.9.0 - 0.19.0)";
  Violation& v =
      ctx.report(Severity::error,
                 "row " + std::to_string(p->row) + " holds " + std::to_string(p->sequences_in_row) +
                     " intended sequences (tokens " + p->spans + ") but " + which + "'s " + d.backend +
                     " adapter calls ring-flash-attn's " + function + "(q, k, v, causal=...) across " +
                     std::to_string(d.ring_degree) +
                     " context-parallel ranks with no cu_seqlens (position_ids and cu_seq_lens_* unused): the row "
                     "is attended as one " + (causal ? "causal " : "") + "sequence, " +
                     (causal ? "each sequence after the first attending to the ones before it"
                             : "every sequence attending to the others"),
                 {{"library", "axolotl"}, {"backend", d.backend}, {"function", function}, {"ring_degree", d.ring_degree},
                  {"axolotl", release ? nlohmann::json(release->text) : nlohmann::json(nullptr)},
                  {"row", p->row}, {"sequences", p->listed}, {"sequences_in_row", p->sequences_in_row},
                  {"packed_rows", p->packed_rows}, {"intent", to_string(ctx.batch.intent.source)}});
  v.location = Location::whole_row(p->row);
  ctx.symptom(v, "axolotl_batch");
  carry_text(v, axolotl_cu_seqlens_text());
}

}  // namespace

// 61 route.cu_seqlens_ignored: a framework hands cu_seqlens to an attention function whose
// non-flash modes do not pass them to any kernel (HunyuanVideo's hyvideo/modules/attenion.py,
// Tencent-Hunyuan/HunyuanVideo PR#310): `vanilla` attends over each whole row of the (B, S)
// layout, `torch` splits every row at cu_seqlens_q[1] only. The blocks a mode attends within
// are compared with the segments cu_seqlens gives. axolotl's batch ring adapters drop the
// boundaries the position ids give (axolotl_ring above, axolotl-ai-cloud/axolotl#3608).
void route_cu_seqlens_ignored(Ctx& ctx) {
  if (ctx.batch.dispatch && ctx.batch.dispatch->library == "axolotl") {
    axolotl_ring(ctx);
    return;
  }
  if (!ctx.batch.dispatch || ctx.batch.dispatch->library != "hunyuanvideo" || !ctx.batch.varlen) return;
  const std::string& mode = ctx.batch.dispatch->backend;
  if (mode != "vanilla" && mode != "torch") return;
  const ExplicitVarlen& v = *ctx.batch.varlen;
  const std::vector<int64_t>& cu = v.cu_seqlens_q.values;
  const int64_t row = v.max_seqlen_q.value;  // the loader holds total_q to whole rows of it
  if (v.cu_seqlens_q.rank() != 1 || cu.size() < 2 || row <= 0) return;
  const int64_t rows = v.total_q / row;
  // the boundaries each mode attends within, as flat offsets
  std::vector<int64_t> blocks;
  for (int64_t r = 0; r <= rows; ++r) {
    blocks.push_back(r * row);
    if (mode == "torch" && r < rows && cu[1] > 0 && cu[1] < row) blocks.push_back(r * row + cu[1]);
  }
  std::vector<int64_t> bounds(cu.begin(), cu.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());  // empty segments hold no token
  if (bounds == blocks) return;
  // the first segment boundary the mode does not keep, and the block that spans it
  for (size_t i = 1; i + 1 < bounds.size(); ++i) {
    if (std::binary_search(blocks.begin(), blocks.end(), bounds[i])) continue;
    const auto hi = std::upper_bound(blocks.begin(), blocks.end(), bounds[i]);
    const int64_t first = *(hi - 1), last = hi == blocks.end() ? v.total_q : *hi;
    const int64_t r = bounds[i] / row;
    const std::string what =
        mode == "vanilla" ? "mode \"vanilla\" attends over each whole row of " + std::to_string(row) + " tokens"
                          : "mode \"torch\" splits every row at cu_seqlens_q[1] = " + std::to_string(cu[1]) + " only";
    ctx.report(Severity::error,
               "cu_seqlens_q has a boundary at token " + std::to_string(bounds[i]) + " (row " + std::to_string(r) +
                   ", offset " + std::to_string(bounds[i] - r * row) + ") but HunyuanVideo's " + what +
                   ": tokens " + std::to_string(first) + "-" + std::to_string(last - 1) +
                   " attend to each other across it",
               {{"mode", mode}, {"boundary", bounds[i]}, {"row", r}, {"row_length", row}, {"block_start", first},
                {"block_end", last}})
        .location = Location::whole_row(r);
    carry_text(ctx.out.back(), hunyuanvideo_cu_seqlens_text());
    return;
  }
  // every boundary is kept, but the mode splits where cu_seqlens does not: a segment loses keys
  for (size_t i = 1; i + 1 < blocks.size(); ++i) {
    if (std::binary_search(bounds.begin(), bounds.end(), blocks[i])) continue;
    const int64_t r = blocks[i] / row;
    ctx.report(Severity::error,
               "HunyuanVideo's mode \"torch\" splits row " + std::to_string(r) + " at offset " +
                   std::to_string(blocks[i] - r * row) + " (cu_seqlens_q[1]), inside one of its cu_seqlens segments: "
                   "that segment's tokens do not attend to the keys past the split",
               {{"mode", mode}, {"split", blocks[i]}, {"row", r}, {"row_length", row}})
        .location = Location::whole_row(r);
    carry_text(ctx.out.back(), hunyuanvideo_cu_seqlens_text());
    return;
  }
}

}  // namespace ad::checks
