// A read-only cursor over parsed JSON that knows its JSON path, so every error names the
// file, the path (`/batch/attention_mask/values/3`), what was expected and what was found.
// Used by the batch loader; also by `repro` and tools that read batch-like JSON.
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "batch/batch.hpp"

namespace ad {

using json = nlohmann::json;

// One-phrase description of a JSON value for "found ..." messages.
std::string describe_json(const json& j);
// Levenshtein distance, for "did you mean" suggestions.
size_t edit_distance(std::string_view a, std::string_view b);
// Parses text as JSON with the batch loader's limits (size, nesting depth, UTF-8); errors
// name `label` and the line and column.
json parse_json_text(std::string_view text, const std::string& label, const LoadLimits& limits);

class Node {
 public:
  Node(const json& value, std::string path, const std::string& file, const LoadLimits& limits)
      : value_(&value), path_(std::move(path)), file_(&file), limits_(&limits) {}

  const json& raw() const { return *value_; }
  const std::string& path() const { return path_; }
  const std::string& file() const { return *file_; }
  const LoadLimits& limits() const { return *limits_; }

  [[noreturn]] void fail(const std::string& expected) const { throw InputError(*file_, path_, expected, describe_json(*value_)); }
  [[noreturn]] void fail(const std::string& expected, const std::string& found) const {
    throw InputError(*file_, path_, expected, found);
  }

  bool is_object() const { return value_->is_object(); }
  bool is_array() const { return value_->is_array(); }
  bool is_string() const { return value_->is_string(); }
  bool is_null() const { return value_->is_null(); }
  bool is_bool() const { return value_->is_boolean(); }
  bool is_integer() const { return value_->is_number_integer(); }

  // Requires an object whose keys all come from `allowed`; an unknown key is an error that
  // names it and suggests the closest allowed key.
  void expect_object(std::initializer_list<std::string_view> allowed) const;
  std::optional<Node> get(std::string_view key) const;
  Node at(std::string_view key) const;  // required key
  bool has(std::string_view key) const { return value_->is_object() && value_->contains(std::string(key)); }

  size_t size() const { return value_->size(); }
  Node operator[](size_t index) const;

  int64_t as_int(int64_t min = std::numeric_limits<int64_t>::min(),
                 int64_t max = std::numeric_limits<int64_t>::max()) const;
  double as_number(double min, double max) const;
  bool as_bool() const;
  std::string as_string() const;
  std::string as_enum(std::initializer_list<std::string_view> choices) const;
  // A 1-D array of integers in [min, max], at most max_len entries.
  std::vector<int64_t> as_int_array(int64_t min, int64_t max, int64_t max_len) const;
  std::vector<std::string> as_string_array() const;

 private:
  const json* value_;
  std::string path_;
  const std::string* file_;
  const LoadLimits* limits_;
};

}  // namespace ad
