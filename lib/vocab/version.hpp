// PEP 440-style release versions ("4.44.0", "4.46.0.dev0", "2.7.0.post2", "5.0.0rc1"),
// ordered as pip orders them, so "the nearest known release at or below" is well defined.
#pragma once

#include <compare>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ad {

struct Version {
  std::string text;             // as written
  std::vector<long> release;    // 4.44.0 -> {4, 44, 0}
  // pre-release: kind 'a', 'b' or 'c' (rc); 0 = none
  char pre_kind = 0;
  long pre_number = 0;
  std::optional<long> post;
  std::optional<long> dev;
  std::string local;            // after '+'

  // PEP 440 ordering: dev < pre < final < post; trailing zeros in release are ignored.
  std::strong_ordering operator<=>(const Version& other) const;
  bool operator==(const Version& other) const { return (*this <=> other) == 0; }

  // "4.44" for {4, 44, ...}
  std::string major_minor() const;
};

// nullopt when `text` is not a version.
std::optional<Version> parse_version(std::string_view text);
// For constants in tables: throws std::logic_error on a malformed literal.
Version version_literal(std::string_view text);

}  // namespace ad
