// The picture of a batch as a plain model, before any SVG is written: the token grid, the
// intended sequences per row, the segments of each cu_seqlens lane mapped back to tokens, the
// rows that are drawn, and where the first violation is. Internal to lib/html (the tests read
// it too); html.cpp turns it into SVG.
//
// Coordinates. Padded batches (a `batch` block) are drawn as B rows x W token columns, W the
// widest of the mask, the key view (Lk) and the query view; packed row p of a segment lane maps
//  - on the mask path, through the unpad gather indices: flat index i = indices[p] of the
//    (B * L)-row view, row i / L, column i % L;
//  - on the packed paths (position ids, kwargs, explicit arguments), through the (B * L) view
//    itself: row p / L, column p % L;
// the query view sits on the last Lq columns (transformers slices mask[:, -Lq:]). Rows at or
// past B (or below 0) are "phantom" rows: what an overrunning segment or an out-of-range index
// reads lies there. Without a `batch` block the axis is the packed q axis (one row).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "batch/batch.hpp"
#include "convert/convert.hpp"
#include "html/html.hpp"
#include "render/render.hpp"

namespace ad::html {

// Where a violation happens, as the picture outlines it (from Violation::location).
struct Location {
  enum class Kind {
    none,        // no place in the batch (dtype, head_dim, rotary width, ...)
    tokens,      // [begin, end) of `row`
    row,         // the whole of `row`
    columns,     // [begin, end) of every row (a mask narrower or wider than the keys)
    segment,     // segment `segment` of cu_seqlens_<side>
    packed_rows, // packed rows [begin, end) on `side` (through the unpad indices when `gather`)
  };
  Kind kind = Kind::none;
  int64_t row = 0;
  int64_t begin = 0, end = 0;  // tokens of `row`, columns, or packed rows
  char side = 0;               // 'q' or 'k' (segment, packed_rows); 0 = the query side
  bool gather = false;         // packed_rows: positions in the unpad indices (indices.*)
  int64_t segment = -1;
  std::string text;            // "row 1, tokens 3-5", "k segment 2 (packed rows 5-9)"
};

// The violation's typed location (Violation::location) in the picture's terms.
Location locate(const Violation& v);

inline constexpr int64_t kPadding = -1;  // intent key of a padded token

// How a segment's tokens relate to the intended sequences.
enum class Fit {
  exact,         // exactly one intended sequence (its tokens in this view)
  padded,        // one sequence plus padding tokens
  padding_only,  // padding only
  merged,        // tokens of two or more sequences
  split,         // part of one sequence
  outside,       // reaches past the batch or the packed tensor
  empty,         // no rows (cu[j] == cu[j + 1])
  negative,      // cu decreases here
};
std::string to_string(Fit f);

struct SegmentInfo {
  int64_t from = 0, to = 0;          // packed rows [from, to)
  int64_t owner = kPadding;          // the intended sequence holding most of its tokens
  int64_t owners = 0;                // intended sequences it touches
  int64_t in_sequences = 0, padding = 0, outside = 0;  // its tokens by kind
  int64_t pieces = 0;                // runs of consecutive tokens inside the batch
  int64_t first_row = INT64_MIN;     // row of its first token (phantom rows included)
  Fit fit = Fit::empty;
};

// A segment's run of consecutive tokens on one row.
struct Piece {
  int64_t row = 0, begin = 0, end = 0;  // token columns [begin, end)
  int64_t segment = 0;
  bool continues_left = false;          // the segment goes on from the row above
  bool continues_right = false;         // ... and into the row below
};

// One kind of segment lane: the q or k side (or both, when identical) of one VarlenArgs.
struct Lane {
  int group = 0;                 // check: 0; compare: the band
  std::string label;             // gutter text: "cu q=k", "cu k", "dense"
  std::string title;             // "cu_seqlens_q = cu_seqlens_k (replay hf-4.44.0, mask path)"
  std::string tensor;            // "cu_seqlens_q", "cu_seqlens_k", "cu_seqlens_q = cu_seqlens_k"
  const VarlenArgs* args = nullptr;
  bool q = false, k = false;     // which sides it shows
  bool dense = false;            // the dense kernel: one "segment" per row
  bool primary = false;          // the arguments that reached the kernel (violations point here)
  // token map
  IntTensor cu;                  // the boundaries drawn (dense: [0, L, 2L, ...])
  const IntTensor* indices = nullptr;  // mask path: unpad gather indices
  int64_t view_width = 0;        // columns per row of the gathered view (packed axis: unbounded)
  int64_t col_offset = 0;        // axis column of the view's column 0
  int64_t limit = -1;            // packed axis: rows of the tensor (columns past it overrun)
  std::string problem;           // non-empty: nothing drawn, this said instead
  std::vector<SegmentInfo> segments;
  std::map<int64_t, std::vector<Piece>> pieces;  // by drawn row
  int64_t past_packed = 0;       // packed rows with no gather index (cu[-1] past the indices)
  int64_t past_packed_row = -1;  // the row where that overrun is drawn
  bool truncated = false;        // hostile sizes: classification stopped at the work budget
  std::set<int64_t> phantom_rows;  // rows outside [0, B) its segments reach (a few)
};

// A mark on the picture: the first violation, drawn on one lane of one row.
struct Mark {
  int group = 0;
  int lane = -1;                 // index into Picture::lanes; -1 = the intent lane of the row
  int64_t row = 0, begin = 0, end = 0;
  bool past_packed = false;      // on the overrun stub at the right of the lane
};

struct Highlight {
  int group = 0;
  Location where;
  std::string id;
};

struct Picture {
  bool packed = false;           // no batch block: one row, the packed axis
  int64_t rows = 0;              // B
  int64_t width = 0;             // token columns of the axis
  int64_t intent_width = 0;      // columns the intent is written in (mask width)
  int64_t bucket = 1;            // tokens per cell
  int64_t columns = 0;           // cells across
  std::vector<IntendedSequence> sequences;  // index = colour key
  std::string intent_source;
  std::vector<Lane> lanes;
  std::vector<int64_t> drawn_rows;  // ascending; may include phantom rows
  std::vector<Mark> marks;
  std::vector<std::string> unlocated;  // per highlight that found no place: why
  int groups = 1;

  bool phantom(int64_t row) const { return row < 0 || row >= rows; }
  // Intended sequences of `row` as indices into `sequences`, ordered by start.
  std::vector<size_t> sequences_in(int64_t row) const;
};

// The arguments to draw for one group: the replay and/or the explicit block (check), or one
// band's replay (compare). `primary` receives the violations that name a side.
struct LaneSource {
  const VarlenArgs* args = nullptr;
  std::string origin;   // "replay hf-4.44.0", "given (varlen block)"
  bool primary = false;
  int group = 0;
};

Picture build_picture(const Batch& batch, const std::vector<LaneSource>& sources, const std::vector<Highlight>& highlights,
                      const HtmlOptions& options);

// Token cells for a bucket size: the smallest "nice" count (1, 2, 5 x 10^k, or a power of two)
// that puts a row of `width` tokens into at most `max_columns` cells.
int64_t bucket_for(int64_t width, int max_columns);

}  // namespace ad::html
