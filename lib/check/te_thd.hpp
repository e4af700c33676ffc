// Transformer Engine's DotProductAttention with qkv_format "thd" (docs/spec/transformer-engine-thd.md):
// its host checks by release, the arithmetic of its padded offsets, and the group check of the
// per-rank captures of one context-parallel call.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "batch/batch.hpp"
#include "vocab/violation.hpp"

namespace ad {

// The first of TE's host checks a THD call fails, in the order the release runs them.
struct TeHostFailure {
  std::string check;    // "attn_mask_type", "cu_seqlens_shape", "cu_seqlens_dtype", "cp_padded_required"
  std::string what;     // what the call passed, in words
  std::string message;  // the release's AssertionError text
};
std::optional<TeHostFailure> te_thd_host_check(const Batch& batch);
// "2.12.0", or "not given (2.12 assumed)"
std::string te_release_text(const std::optional<Version>& release);

// The first sequence whose padded offsets do not hold its actual tokens: padded start before
// the actual start, or a padded length shorter than the actual length, or a decrease.
struct TeBadSegment {
  size_t segment = 0;
  std::string why;
};
std::optional<TeBadSegment> te_first_bad_segment(const std::vector<int64_t>& actual, const std::vector<int64_t>& padded);

// The first sequence whose length (offsets[i+1] - offsets[i]) is not a multiple of `multiple`,
// and how many are not.
struct TeUnaligned {
  size_t segment = 0;
  int64_t count = 0;
};
std::optional<TeUnaligned> te_first_unaligned_segment(const std::vector<int64_t>& offsets, int64_t multiple);

// Why the checked kernels do not run this call ("" when they do): a TE THD call is checked
// statically; the kernels run flash-attn's contract, not TE's padded offsets or its ring.
std::string te_static_only_reason(const Batch& batch);

// ---- the group check ---------------------------------------------------------------------

struct CpGroupMember {
  std::string file;
  const Batch* batch = nullptr;
};

// One finding of the group check (catalogue id te.cp_group): the rank and file it names, and
// the sequence where one is at fault.
struct CpGroupFinding {
  Violation violation;
  int64_t rank = -1;
  std::string file;
  std::optional<int64_t> segment;
};

struct CpGroupReport {
  std::string call;
  int64_t size = 0;
  std::vector<std::string> files;  // by rank
  std::vector<CpGroupFinding> findings;
};

// The captures of one call (same context_parallel.call), in any order. Throws InputError for a
// group that is not one call's full set of ranks: a rank missing or held twice, sizes that
// differ (file, JSON path, expected, found).
CpGroupReport check_cp_group(const std::vector<CpGroupMember>& members);

}  // namespace ad
