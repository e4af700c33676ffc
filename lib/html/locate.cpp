// Where the picture outlines a violation: its typed location (report.hpp `Location`, set by the
// check that found it) in the picture's terms, with the caption's words for it. A violation
// whose check names no place in the batch (dtypes, head widths, rotary widths, launch keys)
// gets Kind::none; the caption says so instead of outlining anything.
#include <algorithm>
#include <string>

#include "html/picture.hpp"

namespace ad::html {
namespace {

std::string range_text(int64_t begin, int64_t end) {
  return end - begin <= 1 ? std::to_string(begin) : std::to_string(begin) + "-" + std::to_string(end - 1);
}

char side_char(const std::optional<Side>& s) { return s && *s == Side::k ? 'k' : 'q'; }

}  // namespace

Location locate(const Violation& v) {
  const ad::Location& at = v.location;
  Location l;
  l.side = side_char(at.side);
  if (at.index || at.packed_rows) {
    // positions in the unpad indices (drawn through them), or packed rows of a tensor
    const IndexRange r = at.index ? *at.index : *at.packed_rows;
    l.kind = at.segment && !at.index ? Location::Kind::segment : Location::Kind::packed_rows;
    l.begin = r.begin;
    l.end = std::max(r.end, r.begin + 1);
    l.gather = at.index.has_value();
    l.text = std::string(l.gather ? "unpad index at packed " : "packed ") + (l.end - l.begin == 1 ? "row " : "rows ") +
             range_text(l.begin, l.end) + " (" + std::string(1, l.side) + " side)";
  }
  if (at.segment && !at.index) {
    l.kind = Location::Kind::segment;
    l.segment = *at.segment;
    l.text = std::string(1, l.side) + " segment " + std::to_string(l.segment) +
             (at.packed_rows ? " (packed rows " + range_text(at.packed_rows->begin, at.packed_rows->end) + ")" : "");
    return l;
  }
  if (l.kind != Location::Kind::none) return l;
  if (at.row && at.tokens) {
    l.kind = Location::Kind::tokens;
    l.row = *at.row;
    l.begin = at.tokens->begin;
    l.end = std::max(at.tokens->end, l.begin + 1);
    l.text = "row " + std::to_string(l.row) + (l.end - l.begin == 1 ? ", token " : ", tokens ") + range_text(l.begin, l.end);
  } else if (at.row) {
    l.kind = Location::Kind::row;
    l.row = *at.row;
    l.text = "row " + std::to_string(l.row);
  } else if (at.tokens) {
    l.kind = Location::Kind::columns;
    l.begin = at.tokens->begin;
    l.end = at.tokens->end;
    l.text = "columns " + range_text(l.begin, l.end) + " of every row";
  }
  return l;
}

}  // namespace ad::html
