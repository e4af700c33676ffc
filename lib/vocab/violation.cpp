// Severity and side names, and the Location constructors (vocab/violation.hpp).
#include "vocab/violation.hpp"

#include <algorithm>

namespace ad {

std::string to_string(Severity s) {
  return s == Severity::error ? "error" : s == Severity::warning ? "warning" : "note";
}


const char* to_string(Side s) { return s == Side::q ? "q" : "k"; }

Location Location::row_tokens(int64_t row, int64_t begin, int64_t end) {
  Location l;
  l.row = row;
  l.tokens = IndexRange{begin, std::max(end, begin + 1)};
  return l;
}

Location Location::whole_row(int64_t row) {
  Location l;
  l.row = row;
  return l;
}

Location Location::columns(int64_t begin, int64_t end) {
  Location l;
  l.tokens = IndexRange{begin, end};
  return l;
}

Location Location::segment_of(Side side, int64_t segment) {
  Location l;
  l.side = side;
  l.segment = segment;
  return l;
}

namespace {
IndexRange ordered(int64_t a, int64_t b) {
  IndexRange r{std::min(a, b), std::max(a, b)};
  if (r.end == r.begin) r.end = r.begin + 1;
  return r;
}
}  // namespace

Location Location::packed(Side side, int64_t a, int64_t b) {
  Location l;
  l.side = side;
  l.packed_rows = ordered(a, b);
  return l;
}

Location Location::indices(Side side, int64_t a, int64_t b) {
  Location l;
  l.side = side;
  l.index = ordered(a, b);
  return l;
}

}  // namespace ad
