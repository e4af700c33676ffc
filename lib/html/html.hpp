// The HTML rendering of a check (`check --html FILE`) or a comparison (`compare --html FILE`):
// one self-contained page (inline SVG and CSS; no script, no external asset, no web font)
// with a picture of the batch above the text report.
//
// The picture is rows x tokens, each token coloured by the intended sequence it belongs to
// (padding grey); under each row, on the same token axis, the segments that cu_seqlens_q/k
// define, mapped back to the row's tokens (through the unpad gather indices on the mask path,
// through the (B * S) view on the packed paths), so merged, split, shifted and overrunning
// segments show at a glance; the first violation outlined at its typed location (set by the
// check that found it).
// Wide rows are bucketed (one cell = many tokens, counts in the tooltips) and long batches
// elided to a few rows, so the page stays small whatever the batch.
//
// Like render_text and to_json this is one more rendering of what the pipeline produced (the
// Diagnosis: its conversion and report, and the Batch); it converts nothing and computes
// nothing the checks rely on.
#pragma once

#include <string>
#include <vector>

#include "batch/batch.hpp"
#include "doctor/doctor.hpp"

namespace ad {

struct HtmlOptions {
  int max_columns = 160;  // token cells across a row; wider rows are bucketed
  int max_rows = 24;      // batch rows drawn; the others are elided (the violation's row is kept)
  bool full = false;      // the text report prints arrays in full
};

// `check --html`: the batch and its diagnosis (the conversion, replayed and/or explicit, and the
// report).
std::string render_check_html(const Batch& batch, const Diagnosis& diagnosis, const HtmlOptions& options = {});

// One release of `compare`: its diagnosis (the rule set, the arguments it produced, the first
// invariant they break).
struct CompareBand {
  std::string release;                   // as asked ("4.44.0") or the rule set's first release
  const Diagnosis* diagnosis = nullptr;  // must outlive the call
  std::string note;                      // nearest-lower mapping and the like
  bool changed = false;                  // what reaches the kernel differs from the band above
};

// `compare --html`: one band per release, aligned on the same token axis, differences marked.
std::string render_compare_html(const Batch& batch, const std::vector<CompareBand>& bands, const std::string& input_label,
                                const HtmlOptions& options = {});

}  // namespace ad
