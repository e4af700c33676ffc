// Text that must stay well-formed whatever bytes it is given: valid UTF-8 (for JSON, Python
// strings, GitHub workflow commands) and XML 1.0 character data (for `repro --junit`).
// File names, batch names and error messages quoting a file's bytes can hold anything: an
// invalid UTF-8 sequence, a control character, U+FFFE / U+FFFF, an encoded surrogate.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ad {

inline constexpr char kReplacementCharacter[] = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

// The code point starting at s[i]: sets `cp` and returns its length in bytes, or sets cp to
// -1 and returns the length of the maximal ill-formed subpart there (at least 1), the unit
// that Unicode's "U+FFFD substitution of maximal subparts" replaces with one U+FFFD. Only
// well-formed UTF-8 (Unicode 15, table 3-7) decodes: no overlong forms, no encoded
// surrogates (ED A0..BF), nothing above U+10FFFF.
inline size_t next_code_point(std::string_view s, size_t i, long& cp) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  }
  size_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  long value = 0;
  if (b0 >= 0xC2 && b0 <= 0xDF) need = 1, value = b0 & 0x1F;
  else if (b0 == 0xE0) need = 2, lo = 0xA0, value = 0;
  else if (b0 >= 0xE1 && b0 <= 0xEC) need = 2, value = b0 & 0x0F;
  else if (b0 == 0xED) need = 2, hi = 0x9F, value = 0xD;
  else if (b0 >= 0xEE && b0 <= 0xEF) need = 2, value = b0 & 0x0F;
  else if (b0 == 0xF0) need = 3, lo = 0x90, value = 0;
  else if (b0 >= 0xF1 && b0 <= 0xF3) need = 3, value = b0 & 0x07;
  else if (b0 == 0xF4) need = 3, hi = 0x8F, value = 4;
  else {
    cp = -1;
    return 1;
  }
  for (size_t k = 1; k <= need; ++k) {
    const unsigned char first_lo = k == 1 ? lo : 0x80, first_hi = k == 1 ? hi : 0xBF;
    if (i + k >= s.size() || byte(i + k) < first_lo || byte(i + k) > first_hi) {
      cp = -1;
      return k;
    }
    value = (value << 6) | (byte(i + k) & 0x3F);
  }
  cp = value;
  return need + 1;
}

// `s` with each ill-formed UTF-8 subpart replaced by U+FFFD; valid text is returned as is.
inline std::string valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    long cp = 0;
    const size_t n = next_code_point(s, i, cp);
    if (cp < 0) out += kReplacementCharacter;
    else out.append(s.substr(i, n));
    i += n;
  }
  return out;
}

// `s` as XML 1.0 character data (an element's text, or with `attribute` an attribute value in
// double or single quotes): & < > " ' escaped; what XML 1.0 forbids (ill-formed UTF-8,
// control characters other than tab, LF and CR, U+FFFE, U+FFFF; surrogates cannot survive
// the decoding) written as U+FFFD; in an attribute tab, LF and CR as character references,
// which a parser keeps (a literal one it would normalise to a space), in text CR too (a
// parser turns a literal CR into LF).
inline std::string xml_escape(std::string_view s, bool attribute = false) {
  std::string out;
  out.reserve(s.size() + s.size() / 8);
  for (size_t i = 0; i < s.size();) {
    long cp = 0;
    const size_t n = next_code_point(s, i, cp);
    switch (cp) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      case '\t': out += attribute ? "&#9;" : "\t"; break;
      case '\n': out += attribute ? "&#10;" : "\n"; break;
      case '\r': out += "&#13;"; break;
      default:
        if (cp < 0x20 || cp == 0xFFFE || cp == 0xFFFF) out += kReplacementCharacter;
        else out.append(s.substr(i, n));
    }
    i += n;
  }
  return out;
}

}  // namespace ad
