// Static: the route a packed batch takes (ids 13-14). A row that holds several sequences is only
// safe on a path that passes their boundaries to the kernel (cu_seqlens); the dense kernel
// attends across them without any error.
#include <algorithm>

#include "check/static_checks.hpp"

namespace ad::checks {

// 13 route.packed_to_dense: a padding-free batch whose boundaries were lost before the kernel
// (EasyR1 PR#494: 3-D ids lost their text axis; trl PR#3942: loss 0.0) trains on attention
// across sequences, silently.
void route_packed_to_dense(Ctx& ctx) {
  const auto path = kernel_path(ctx);
  if (!path || *path != VarlenPath::dense) return;
  // sorted by (row, start); a derived intent already is, and is not copied
  auto order = [](const IntendedSequence& a, const IntendedSequence& b) { return a.row != b.row ? a.row < b.row : a.start < b.start; };
  std::vector<IntendedSequence> sorted;
  const std::vector<IntendedSequence>* in = &ctx.batch.intent.sequences;
  if (!std::is_sorted(in->begin(), in->end(), order)) {
    sorted = *in;
    std::sort(sorted.begin(), sorted.end(), order);
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
  if (first == seqs.size()) return;
  nlohmann::json listed = nlohmann::json::array();
  std::string spans;
  for (size_t k = first; k < first_end && k < first + 4; ++k) {
    listed.push_back({{"start", seqs[k].start}, {"length", seqs[k].length}});
    spans += (k > first ? ", " : "") + std::to_string(seqs[k].start) + "-" +
             std::to_string(seqs[k].start + seqs[k].length - 1);
  }
  if (first_end - first > 4) spans += ", ...";
  std::string why = ctx.replayed ? " (replayed rule set " + ctx.replayed->rule_set + ")" : "";
  ctx.report(Severity::error,
             "row " + std::to_string(seqs[first].row) + " holds " + std::to_string(first_end - first) +
                 " intended sequences (tokens " + spans + ") but the call reaches the dense kernel" + why +
                 " with no cu_seqlens: every token attends across the sequence boundaries",
             {{"row", seqs[first].row}, {"sequences", listed}, {"sequences_in_row", first_end - first},
              {"packed_rows", packed_rows}, {"path", "dense"}, {"intent", to_string(ctx.batch.intent.source)}})
      .location = Location::whole_row(seqs[first].row);
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
