// PEP 440 version parsing and ordering (the subset release strings use in practice).
#include "vocab/version.hpp"

#include <cctype>
#include <stdexcept>

namespace ad {
namespace {

bool read_number(std::string_view s, size_t& i, long& out) {
  size_t start = i;
  long value = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
    if (value > 100000000) return false;  // absurd component
    value = value * 10 + (s[i] - '0');
    ++i;
  }
  if (i == start) return false;
  out = value;
  return true;
}

bool consume(std::string_view s, size_t& i, std::string_view word) {
  if (s.substr(i, word.size()) == word) {
    i += word.size();
    return true;
  }
  return false;
}

// Optional separator before a pre/post/dev tag: '.', '-' or '_'.
void skip_separator(std::string_view s, size_t& i) {
  if (i < s.size() && (s[i] == '.' || s[i] == '-' || s[i] == '_')) ++i;
}

int compare_release(const std::vector<long>& a, const std::vector<long>& b) {
  size_t n = std::max(a.size(), b.size());
  for (size_t k = 0; k < n; ++k) {
    long x = k < a.size() ? a[k] : 0;
    long y = k < b.size() ? b[k] : 0;
    if (x != y) return x < y ? -1 : 1;
  }
  return 0;
}

// Sort key for the phase: dev-only release < pre-release < final < post.
// (PEP 440: 1.0.dev0 < 1.0a1 < 1.0 < 1.0.post1; 1.0a1.dev0 < 1.0a1)
struct Phase {
  int kind;   // 0 dev-of-release, 1 pre, 2 final, 3 post
  long a, b, c;
};

Phase phase_of(const Version& v) {
  if (v.pre_kind == 0 && !v.post && v.dev) return {0, *v.dev, 0, 0};
  if (v.pre_kind != 0) {
    // pre-release, possibly with .devN (which sorts before the plain pre-release)
    long dev_key = v.dev ? *v.dev : (1L << 40);
    return {1, v.pre_kind, v.pre_number, dev_key};
  }
  if (v.post) {
    long dev_key = v.dev ? *v.dev : (1L << 40);
    return {3, *v.post, dev_key, 0};
  }
  return {2, 0, 0, 0};
}

}  // namespace

std::optional<Version> parse_version(std::string_view text) {
  Version v;
  v.text = std::string(text);
  std::string lower;
  for (char c : text) lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  std::string_view s = lower;
  size_t i = 0;
  if (consume(s, i, "v")) {
  }
  long n = 0;
  if (!read_number(s, i, n)) return std::nullopt;
  v.release.push_back(n);
  while (i + 1 < s.size() && s[i] == '.' && std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
    ++i;
    if (!read_number(s, i, n)) return std::nullopt;
    v.release.push_back(n);
    if (v.release.size() > 8) return std::nullopt;
  }
  // A suffix (PEP 440): an optional separator, one of `words`, an optional separator and an
  // optional number (implicitly 0). Returns the word's index and moves `i` past the suffix.
  auto suffix = [&](std::initializer_list<const char*> words, long& number) -> int {
    size_t j = i;
    skip_separator(s, j);
    int which = 0;
    for (const char* w : words) {
      if (consume(s, j, w)) break;
      ++which;
    }
    if (which == static_cast<int>(words.size())) return -1;
    skip_separator(s, j);
    number = 0;
    size_t k = j;
    if (read_number(s, k, number)) j = k;
    i = j;
    return which;
  };
  long num = 0;
  // pre-release: a, b, rc (c, preview, pre)
  if (const int w = suffix({"alpha", "a", "beta", "b", "rc", "c", "preview", "pre"}, num); w >= 0) {
    v.pre_kind = w < 2 ? 'a' : w < 4 ? 'b' : 'c';
    v.pre_number = num;
  }
  if (suffix({"post", "rev", "r"}, num) >= 0) v.post = num;  // post-release
  if (suffix({"dev"}, num) >= 0) v.dev = num;                // dev-release
  if (i < s.size() && s[i] == '+') {
    v.local = std::string(s.substr(i + 1));
    if (v.local.empty()) return std::nullopt;
    for (char c : v.local)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') return std::nullopt;
    i = s.size();
  }
  if (i != s.size()) return std::nullopt;
  return v;
}

Version version_literal(std::string_view text) {
  auto v = parse_version(text);
  if (!v) throw std::logic_error("bad version literal: " + std::string(text));
  return *v;
}

std::strong_ordering Version::operator<=>(const Version& other) const {
  int r = compare_release(release, other.release);
  if (r != 0) return r < 0 ? std::strong_ordering::less : std::strong_ordering::greater;
  Phase a = phase_of(*this), b = phase_of(other);
  if (auto c = a.kind <=> b.kind; c != 0) return c;
  if (auto c = a.a <=> b.a; c != 0) return c;
  if (auto c = a.b <=> b.b; c != 0) return c;
  if (auto c = a.c <=> b.c; c != 0) return c;
  return local <=> other.local;
}

std::string Version::major_minor() const {
  std::string out = std::to_string(release.empty() ? 0 : release[0]);
  out += '.';
  out += std::to_string(release.size() > 1 ? release[1] : 0);
  return out;
}

}  // namespace ad
