// The kernel-release advisory table: known bugs of specific kernel releases, each keyed by
// library, affected releases, GPU architecture, head dim, pass and a condition on the call,
// with its public reference, its symptom and the release (or change) that fixed it. Every call
// is matched against every row the way pip-audit matches installed packages against
// advisories; a match is a finding of its own (report-format.md `advisories`) and its symptom
// takes part in the prediction (lib/predict's combination rule).
// docs/prediction.md embeds the table (`attn-doctor list advisories --format markdown`).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "batch/batch.hpp"
#include "convert/convert.hpp"
#include "vocab/symptom.hpp"

namespace ad {

// What an advisory's condition reads: the call as it reached the kernel.
struct AdvisoryCall {
  const Batch* batch = nullptr;
  const VarlenArgs* args = nullptr;             // the effective call (nullptr: no varlen call)
  std::optional<Version> release;               // the release of the advisory's library, when known
  std::optional<GpuArch> arch;                  // environment.gpu_arch
};

struct Advisory {
  std::string_view id;          // stable: "FA-2023-001"
  std::string_view library;     // "flash_attn" (FA2, and FA3's hopper/ build) | "flash_attn_4" |
                                // "transformers" | "diffusers" | "xformers"
  int family;                   // flash-attn family the row is about (2, 3, 4); 0: a library around
                                // the kernel, whose release is environment.<library>
  std::string_view introduced;  // first affected release ("" = every earlier one)
  std::string_view fixed_in;    // first fixed release ("" = no release known to carry the fix)
  std::string_view through;     // without `fixed_in`: the last release reported affected (the
                                // row matches up to it, not beyond: a later one is not known
                                // to have the bug or the fix)
  std::string_view fix;         // the change that fixed it, or "open" when read
  std::string_view archs;       // architectures in words ("sm_100", "" = any)
  int min_cc, max_cc;           // compute capabilities affected, inclusive (0, 0: any)
  std::string_view head_dims;   // in words ("256", "" = any)
  Pass pass;                    // the pass the bug is in
  std::string_view condition;   // the call condition, in words
  Outcome outcome;              // what the user sees
  Moment at;
  std::string_view symptom;     // as the reference states it
  std::string_view reference;   // owner/repo#N
  // The condition on the call beyond release, architecture and pass; nullopt: no match, else
  // why it matched (the segment, the amounts).
  std::optional<std::string> (*matches)(const AdvisoryCall&);
  // The release names builds with and without the fix (FA3's 3.0.0b1 before and after PR#1841):
  // a match is possible only (AdvisoryMatch::possible).
  bool possible_only = false;
};

std::span<const Advisory> advisories();
// The affected releases in words: ">= 2.0.0, < 2.1.0", "<= 4.0.0b13 (the last reported)".
std::string affected_range(const Advisory& a);
const Advisory* find_advisory(std::string_view id);

// One match against a call.
struct AdvisoryMatch {
  const Advisory* advisory = nullptr;
  std::string release;  // the release that matched
  std::string why;      // the condition's evidence, and any fact the batch does not record
  bool possible = false;  // the release may or may not carry the bug (Advisory::possible_only):
                          // listed, kept out of the prediction
  Symptom symptom;      // the advisory's symptom for the prediction (basis "report <ref>")
};

// Every advisory the call matches, in table order. A training step matches backward rows;
// a forward call only forward rows. An advisory restricted to architectures matches a batch
// without `environment.gpu_arch` too, saying so in `why`.
std::vector<AdvisoryMatch> match_advisories(const Batch& batch, const Conversion& conversion,
                                            const std::optional<Version>& flash_attn_override = std::nullopt);

// The table as docs/prediction.md embeds it.
std::string advisories_markdown();

// Why a possible match is only possible, in words (the text report and docs).
inline constexpr std::string_view kPossibleOnly = "possible only: this release's builds exist with and without the fix";

}  // namespace ad
