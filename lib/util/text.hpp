// Small text helpers every message shares.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace ad {

// User-controlled text (a batch file's key or string, a file name, a command-line argument) as
// a message quotes it: control characters (C0 including NUL, DEL, C1 U+0080-U+009F), the bidi
// overrides (U+202A-U+202E, U+2066-U+2069) and bytes that are not UTF-8 are written as escapes
// (\n, \t, \u001b, \u202e, \xff), so a hostile key cannot retitle or clear the terminal, reorder
// what it shows, or cut the message short at a NUL. Everything else, quotes and backslashes
// included, is kept: escaping twice changes nothing, so a message may pass through it again.
inline std::string escape_text(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  auto hex = [&](const char* format, unsigned v) {
    char buf[8];
    std::snprintf(buf, sizeof buf, format, v);
    out += buf;
  };
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (c == '\n') out += "\\n";
      else if (c == '\t') out += "\\t";
      else if (c == '\r') out += "\\r";
      else if (c < 0x20 || c == 0x7f) hex("\\u%04x", c);
      else out += static_cast<char>(c);
      ++i;
      continue;
    }
    // one UTF-8 sequence: its length from the lead byte, continuation bytes 10xxxxxx, no
    // overlong forms, surrogates or values past U+10FFFF
    const size_t n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? (c <= 0xef ? 3 : 0) : c >= 0xc2 ? 2 : 0;
    unsigned cp = n == 2 ? c & 0x1fu : n == 3 ? c & 0x0fu : c & 0x07u;
    bool ok = n != 0 && i + n <= s.size();
    for (size_t k = 1; ok && k < n; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      ok = (b & 0xc0) == 0x80;
      cp = (cp << 6) | (b & 0x3fu);
    }
    if (ok) ok = !(n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) && !(n == 4 && (cp < 0x10000 || cp > 0x10ffff));
    if (!ok) {
      hex("\\x%02x", c);
      ++i;
      continue;
    }
    if ((cp >= 0x80 && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069)) hex("\\u%04x", cp);
    else out.append(s.substr(i, n));
    i += n;
  }
  return out;
}

// A tensor shape as a message quotes it: as Python prints a shape tuple, "(2, 1, 5, 5)" and
// "(3,)", or as PyTorch writes a size list in its errors, "[3, 3, 3, 64]".
enum class ShapeStyle { python_tuple, torch_list };
inline std::string shape_text(const std::vector<int64_t>& shape, ShapeStyle style = ShapeStyle::python_tuple) {
  const bool tuple = style == ShapeStyle::python_tuple;
  std::string s = tuple ? "(" : "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  if (tuple && shape.size() == 1) s += ",";
  return s + (tuple ? ")" : "]");
}

}  // namespace ad
