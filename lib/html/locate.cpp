// Where a violation happens, from its evidence alone (the keys the checks write: `row`,
// `token`, `column`, `segment`, `side`, `tensor`, `position`, `mask_width`, ...). Ids whose
// evidence names no place in the batch (dtypes, head widths, rotary widths, launch keys) get
// Kind::none; the picture's caption says so instead of outlining anything.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string_view>

#include "html/picture.hpp"

namespace ad::html {
namespace {

using nlohmann::json;

bool has_int(const json& e, const char* key) { return e.is_object() && e.contains(key) && e[key].is_number_integer(); }
int64_t get(const json& e, const char* key) { return e[key].get<int64_t>(); }
std::string str(const json& e, const char* key) {
  return e.is_object() && e.contains(key) && e[key].is_string() ? e[key].get<std::string>() : std::string();
}

// 'q' / 'k' from a tensor or argument name ("cu_seqlens_k", "indices_q", "max_seqlen_k", "v").
char side_of(std::string_view name) {
  if (name.empty()) return 0;
  if (name == "q" || name == "out") return 'q';
  if (name == "k" || name == "v") return 'k';
  if (name.ends_with("_q") || name.ends_with("_q]")) return 'q';
  if (name.ends_with("_k") || name.ends_with("_k]")) return 'k';
  return 0;
}

std::string range_text(int64_t begin, int64_t end) {
  return end - begin <= 1 ? std::to_string(begin) : std::to_string(begin) + "-" + std::to_string(end - 1);
}

Location tokens(int64_t row, int64_t begin, int64_t end) {
  Location l;
  l.kind = Location::Kind::tokens;
  l.row = row;
  l.begin = begin;
  l.end = std::max(end, begin + 1);
  l.text = "row " + std::to_string(row) + (l.end - l.begin == 1 ? ", token " : ", tokens ") + range_text(l.begin, l.end);
  return l;
}

Location whole_row(int64_t row) {
  Location l;
  l.kind = Location::Kind::row;
  l.row = row;
  l.text = "row " + std::to_string(row);
  return l;
}

Location segment(char side, int64_t j) {
  Location l;
  l.kind = Location::Kind::segment;
  l.side = side ? side : 'q';
  l.segment = j;
  l.text = std::string(1, l.side) + " segment " + std::to_string(j);
  return l;
}

Location packed(char side, int64_t begin, int64_t end, bool gather) {
  Location l;
  l.kind = Location::Kind::packed_rows;
  l.side = side ? side : 'q';
  l.begin = std::min(begin, end);
  l.end = std::max(begin, end);
  if (l.end == l.begin) l.end = l.begin + 1;
  l.gather = gather;
  l.text = std::string(gather ? "unpad index at packed " : "packed ") + (l.end - l.begin == 1 ? "row " : "rows ") +
           range_text(l.begin, l.end) + " (" + std::string(1, l.side) + " side)";
  return l;
}

// "row 1, tokens 3-5" / "row 1, token 3" as the segment check writes intended sequences.
std::optional<Location> parse_sequence_text(const std::string& s) {
  long long row = 0, a = 0, b = 0;
  if (std::sscanf(s.c_str(), "row %lld, tokens %lld-%lld", &row, &a, &b) == 3) return tokens(row, a, b + 1);
  if (std::sscanf(s.c_str(), "row %lld, token %lld", &row, &a) == 2) return tokens(row, a, a + 1);
  return std::nullopt;
}

// Evidence keys any check may use, for ids this file does not know (dynamic stages).
Location generic(const json& e) {
  const std::string tensor = !str(e, "tensor").empty() ? str(e, "tensor") : str(e, "buffer");
  const char side = side_of(!str(e, "side").empty() ? str(e, "side") : !tensor.empty() ? tensor : str(e, "argument"));
  if (has_int(e, "segment")) return segment(side, get(e, "segment"));
  if (tensor.starts_with("indices") && has_int(e, "position"))
    return packed(side, get(e, "position"), get(e, "position") + 1, true);
  if (has_int(e, "row")) {
    const int64_t row = get(e, "row");
    if (!tensor.empty() && side) return packed(side, row, row + 1, false);  // a row of a packed tensor
    if (!tensor.empty()) return {};                                       // a row of some other tensor
    for (const char* key : {"token", "column"})
      if (has_int(e, key)) return tokens(row, get(e, key), get(e, key) + 1);
    if (has_int(e, "start")) {
      const int64_t start = get(e, "start");
      return tokens(row, start, start + (has_int(e, "length") ? std::max<int64_t>(get(e, "length"), 1) : 1));
    }
    return whole_row(row);
  }
  return {};
}

}  // namespace

Location locate(const Violation& v) {
  const json& e = v.evidence;
  const std::string& id = v.id;
  const std::string tensor = str(e, "tensor");
  if (id == "mask.binary" && has_int(e, "row") && has_int(e, "column"))
    return tokens(get(e, "row"), get(e, "column"), get(e, "column") + 1);
  if (id == "mask.kv_length" && has_int(e, "mask_width") && has_int(e, "kv_length")) {
    // the columns one side has and the other lacks
    Location l;
    l.kind = Location::Kind::columns;
    l.begin = std::min(get(e, "mask_width"), get(e, "kv_length"));
    l.end = std::max(get(e, "mask_width"), get(e, "kv_length"));
    l.text = "columns " + range_text(l.begin, l.end) + " of every row (mask width " + std::to_string(get(e, "mask_width")) +
             ", keys " + std::to_string(get(e, "kv_length")) + ")";
    return l;
  }
  if (id == "mask.padding_side" && has_int(e, "row")) {
    // the query slice mask[:, -Lq:] of the first row that is not left-padded
    const json& slice = e.contains("slice_columns") ? e["slice_columns"] : json();
    if (slice.is_array() && slice.size() == 2 && slice[0].is_number_integer() && slice[1].is_number_integer()) {
      Location l = tokens(get(e, "row"), slice[0].get<int64_t>(), slice[1].get<int64_t>());
      l.text += " (the query slice; padding from column " +
                (has_int(e, "padding_from_column") ? std::to_string(get(e, "padding_from_column")) : std::string("?")) + ")";
      return l;
    }
    if (has_int(e, "padding_from_column")) return tokens(get(e, "row"), get(e, "padding_from_column"), get(e, "padding_from_column") + 1);
  }
  if (id == "cu_seqlens.segments") {
    const char side = side_of(str(e, "side"));
    if (has_int(e, "segment")) {
      Location l = segment(side, get(e, "segment"));
      const json& pr = e.contains("packed_rows") ? e["packed_rows"] : json();
      if (pr.is_array() && pr.size() == 2)
        l.text += " (packed rows " + range_text(pr[0].get<int64_t>(), pr[1].get<int64_t>()) + ")";
      return l;
    }
    if (auto seq = parse_sequence_text(str(e, "sequence"))) {
      seq->text = "the intended sequence at " + seq->text + ", in no " + std::string(1, side ? side : 'k') + " segment";
      return *seq;
    }
    return {};
  }
  if (id == "cu_seqlens.start" && has_int(e, "first")) {
    const int64_t first = get(e, "first");
    Location l = packed(side_of(tensor), std::min<int64_t>(first, 0), std::max<int64_t>(first, 0), false);
    l.text = tensor + "[0] = " + std::to_string(first) + ": " + l.text;
    return l;
  }
  if (id == "cu_seqlens.total" && has_int(e, "last") && has_int(e, "rows")) {
    Location l = packed(side_of(tensor), get(e, "rows"), get(e, "last"), false);
    l.text = tensor + "[-1] = " + std::to_string(get(e, "last")) + " vs " + std::to_string(get(e, "rows")) + " rows: " + l.text;
    return l;
  }
  if (id == "cu_seqlens.monotonic" && has_int(e, "segment")) return segment(side_of(tensor), get(e, "segment"));
  if (id == "max_seqlen.covers" && has_int(e, "segment")) return segment(side_of(str(e, "argument")), get(e, "segment"));
  if (id == "max_seqlen.single_query" && has_int(e, "segment")) return segment('q', get(e, "segment"));
  if (id == "indices.range" && has_int(e, "position"))
    return packed(side_of(tensor), get(e, "position"), get(e, "position") + 1, true);
  if (id == "indices.count" && has_int(e, "indices") && has_int(e, "cu_seqlens_last"))
    return packed(side_of(tensor), get(e, "indices"), get(e, "cu_seqlens_last"), true);
  if (id == "position_ids.origin" && has_int(e, "row") && has_int(e, "start")) {
    const int64_t start = get(e, "start");
    return tokens(get(e, "row"), start, start + (has_int(e, "length") ? std::max<int64_t>(get(e, "length"), 1) : 1));
  }
  if ((id == "route.packed_to_dense" || id == "rotary.positions") && has_int(e, "row")) {
    if (id == "rotary.positions" && has_int(e, "start")) return tokens(get(e, "row"), get(e, "start"), get(e, "start") + 1);
    return whole_row(get(e, "row"));
  }
  // dynamic stages (lib/exec): gather/scatter positions, packed output rows, sequences
  if ((id == "unpad.gather" || id == "pad.scatter") && has_int(e, "position")) {
    const char side = id == "pad.scatter" ? 'q' : side_of(!str(e, "indices").empty() ? str(e, "indices") : tensor);
    return packed(side, get(e, "position"), get(e, "position") + 1, true);
  }
  if (id == "attention.coverage")
    for (const char* key : {"first_never_written", "first_written_twice", "first_outside_segment"})
      if (has_int(e, key)) return packed('q', get(e, key), get(e, key) + 1, false);
  if (id == "result.reference" && e.contains("sequence") && e["sequence"].is_object()) {
    const json& s = e["sequence"];
    if (has_int(s, "row") && has_int(s, "start") && has_int(s, "length")) {
      Location l = tokens(get(s, "row"), get(s, "start"), get(s, "start") + std::max<int64_t>(get(s, "length"), 1));
      l.text = "the intended sequence at " + l.text + " (its worst output row)";
      return l;
    }
  }
  // ids whose evidence is about tensors, dtypes, widths or kernels, not places in the batch
  for (std::string_view prefix : {"input.", "mask.rank", "route.partial_kwargs", "cu_seqlens.dtype", "cu_seqlens.device",
                                  "cu_seqlens.shape", "cu_seqlens.grid", "max_seqlen.type", "rotary.dim", "rotary.even",
                                  "rotary.layout", "rotary.table", "launch.", "result.finite"})
    if (std::string_view(id).starts_with(prefix)) return {};
  return generic(e);
}

}  // namespace ad::html
