// JSON cursor with paths, and JSON parsing under explicit limits.
#include "batch/json_node.hpp"

#include <algorithm>
#include <unordered_set>

namespace ad {

std::string describe_json(const json& j) {
  switch (j.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return j.get<bool>() ? "true" : "false";
    case json::value_t::number_integer: return "the integer " + std::to_string(j.get<int64_t>());
    case json::value_t::number_unsigned: return "the integer " + std::to_string(j.get<uint64_t>());
    case json::value_t::number_float: {
      double d = j.get<double>();
      if (!std::isfinite(d)) return "a number out of range";
      return "the number " + j.dump();
    }
    case json::value_t::string: {
      const auto& s = j.get_ref<const std::string&>();
      if (s.size() > 40) return "a string of " + std::to_string(s.size()) + " bytes";
      return "the string " + json(s).dump();
    }
    case json::value_t::array: return "an array of " + std::to_string(j.size()) + " elements";
    case json::value_t::object: return "an object";
    default: return "an unsupported value";
  }
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

namespace {

// Nesting depth of the text, counted outside strings, before handing it to the parser (whose
// recursion and destruction should never see hostile depth).
void check_depth(std::string_view text, const std::string& label, const LoadLimits& limits) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > limits.max_nesting)
        throw InputError(label, "", "JSON nested at most " + std::to_string(limits.max_nesting) + " levels deep",
                         "deeper nesting at byte " + std::to_string(i));
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
}

std::string line_col(std::string_view text, size_t byte) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(col);
}

// Rejects non-finite numbers and over-long strings anywhere in the document (iteratively).
void check_values(const json& root, const std::string& label, const LoadLimits& limits) {
  struct Item {
    const json* j;
    std::string path;
  };
  std::vector<Item> stack{{&root, ""}};
  while (!stack.empty()) {
    Item it = std::move(stack.back());
    stack.pop_back();
    const json& j = *it.j;
    if (j.is_number_float() && !std::isfinite(j.get<double>()))
      throw InputError(label, it.path, "a finite number", "a number out of range");
    if (j.is_string() && static_cast<int64_t>(j.get_ref<const std::string&>().size()) > limits.max_string_bytes)
      throw InputError(label, it.path, "a string of at most " + std::to_string(limits.max_string_bytes) + " bytes",
                       describe_json(j));
    if (j.is_object()) {
      for (auto e = j.begin(); e != j.end(); ++e) stack.push_back({&e.value(), it.path + "/" + e.key()});
    } else if (j.is_array() && !j.empty() && (j.front().is_array() || j.front().is_object() || j.front().is_string() ||
                                              j.front().is_number_float())) {
      for (size_t k = 0; k < j.size(); ++k) stack.push_back({&j[k], it.path + "/" + std::to_string(k)});
    } else if (j.is_array()) {
      // flat arrays of integers/bools: scan without building paths
      for (size_t k = 0; k < j.size(); ++k) {
        const json& e = j[k];
        if (e.is_number_float() && !std::isfinite(e.get<double>()))
          throw InputError(label, it.path + "/" + std::to_string(k), "a finite number", "a number out of range");
        if (e.is_array() || e.is_object() || e.is_string()) stack.push_back({&e, it.path + "/" + std::to_string(k)});
      }
    }
  }
}

}  // namespace

json parse_json_text(std::string_view text, const std::string& label, const LoadLimits& limits) {
  if (static_cast<int64_t>(text.size()) > limits.max_json_bytes)
    throw InputError(label, "", "a batch file of at most " + std::to_string(limits.max_json_bytes) + " bytes",
                     std::to_string(text.size()) + " bytes");
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos)
    throw InputError(label, "", "a JSON object", "an empty file");
  // A NUL byte is never JSON (outside a string it is no token, inside one a control character
  // must be escaped), but nlohmann's lexer takes it for the end of the input: a document
  // followed by a NUL and anything at all would parse as that document alone.
  if (auto nul = text.find('\0'); nul != std::string_view::npos)
    throw InputError(label, "", "valid JSON (UTF-8), one object and nothing after it",
                     "a NUL byte (" + line_col(text, nul) + ")");
  check_depth(text, label, limits);
  json j;
  // Duplicate keys: JSON parsers disagree on which one wins, so a batch file must not have
  // them. The callback sees every key; one hash set of seen keys per open object (a linear
  // search per key made an object of 200,000 keys take minutes).
  std::vector<std::unordered_set<std::string>> seen_keys;
  std::string duplicate;
  auto on_event = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start: seen_keys.emplace_back(); break;
      case json::parse_event_t::object_end: seen_keys.pop_back(); break;
      case json::parse_event_t::key: {
        const auto& key = parsed.get_ref<const std::string&>();
        if (!seen_keys.back().insert(key).second && duplicate.empty()) duplicate = key;
        break;
      }
      default: break;
    }
    return true;
  };
  try {
    j = json::parse(text.begin(), text.end(), on_event);
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    // nlohmann: "[json.exception.parse_error.101] parse error at line 1, column 5: syntax error ..."
    auto colon = what.find(": ", what.find("parse error"));
    std::string detail = colon == std::string::npos ? what : what.substr(colon + 2);
    throw InputError(label, "", "valid JSON (UTF-8)", detail + " (" + line_col(text, e.byte > 0 ? e.byte - 1 : 0) + ")");
  } catch (const json::exception& e) {
    // e.g. out_of_range.406 "number overflow parsing '1e400'"
    std::string what = e.what();
    auto close = what.find("] ");
    throw InputError(label, "", "valid JSON with finite numbers",
                     close == std::string::npos ? what : what.substr(close + 2));
  }
  if (!duplicate.empty())
    throw InputError(label, "", "each key once per object", "the key \"" + duplicate + "\" twice in one object");
  check_values(j, label, limits);
  return j;
}

void Node::expect_object(std::initializer_list<std::string_view> allowed) const {
  if (!value_->is_object()) fail("an object");
  for (auto it = value_->begin(); it != value_->end(); ++it) {
    const std::string& key = it.key();
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    std::string best;
    size_t best_d = 1000;
    for (auto a : allowed) {
      size_t d = edit_distance(key, a);
      if (d < best_d) {
        best_d = d;
        best = std::string(a);
      }
    }
    std::string list;
    for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
    std::string hint = best_d <= std::max<size_t>(2, key.size() / 3) ? " (did you mean \"" + best + "\"?)" : "";
    throw InputError(*file_, path_ + "/" + key, "one of the keys " + list, "unknown key \"" + key + "\"" + hint);
  }
}

std::optional<Node> Node::get(std::string_view key) const {
  if (!value_->is_object()) fail("an object");
  auto it = value_->find(std::string(key));
  if (it == value_->end()) return std::nullopt;
  return Node(*it, path_ + "/" + std::string(key), *file_, *limits_);
}

Node Node::at(std::string_view key) const {
  auto n = get(key);
  if (!n) throw InputError(*file_, path_ + "/" + std::string(key), "the required key \"" + std::string(key) + "\"",
                           "it missing");
  return *n;
}

Node Node::operator[](size_t index) const {
  return Node((*value_)[index], path_ + "/" + std::to_string(index), *file_, *limits_);
}

int64_t Node::as_int(int64_t min, int64_t max) const {
  const json& j = *value_;
  // built only to fail: this runs once per array element of a batch file
  auto range = [&] { return "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]"; };
  if (j.is_number_unsigned()) {
    uint64_t u = j.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) || static_cast<int64_t>(u) > max)
      fail(range());
    int64_t v = static_cast<int64_t>(u);
    if (v < min) fail(range());
    return v;
  }
  if (j.is_number_integer()) {
    int64_t v = j.get<int64_t>();
    if (v < min || v > max) fail(range());
    return v;
  }
  if (j.is_number_float()) fail(range(), describe_json(j) + " (not an integer)");
  fail(range());
}

double Node::as_number(double min, double max) const {
  const json& j = *value_;
  if (!j.is_number()) fail("a number");
  double d = j.get<double>();
  if (!std::isfinite(d) || d < min || d > max)
    fail("a number in [" + json(min).dump() + ", " + json(max).dump() + "]");
  return d;
}

bool Node::as_bool() const {
  if (!value_->is_boolean()) fail("true or false");
  return value_->get<bool>();
}

std::string Node::as_string() const {
  if (!value_->is_string()) fail("a string");
  return value_->get<std::string>();
}

std::string Node::as_enum(std::initializer_list<std::string_view> choices) const {
  std::string list;
  for (auto c : choices) list += (list.empty() ? "" : ", ") + json(std::string(c)).dump();
  if (!value_->is_string()) fail("one of " + list);
  std::string s = value_->get<std::string>();
  if (std::find(choices.begin(), choices.end(), s) == choices.end()) fail("one of " + list);
  return s;
}

std::vector<int64_t> Node::as_int_array(int64_t min, int64_t max, int64_t max_len) const {
  if (!value_->is_array()) fail("an array of integers");
  if (static_cast<int64_t>(value_->size()) > max_len)
    fail("an array of at most " + std::to_string(max_len) + " integers");
  std::vector<int64_t> out;
  out.reserve(value_->size());
  for (size_t i = 0; i < value_->size(); ++i) {
    const json& e = (*value_)[i];
    // (the JSON parser gives non-negative integers the unsigned type)
    const bool fits = e.is_number_unsigned() ? e.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) : e.is_number_integer();
    if (fits) {
      const int64_t v = e.is_number_unsigned() ? static_cast<int64_t>(e.get<uint64_t>()) : e.get<int64_t>();
      if (v >= min && v <= max) {
        out.push_back(v);
        continue;
      }
    }
    out.push_back((*this)[i].as_int(min, max));  // the element's own path in any error
  }
  return out;
}

std::vector<std::string> Node::as_string_array() const {
  if (!value_->is_array()) fail("an array of strings");
  if (static_cast<int64_t>(value_->size()) > limits_->max_array_elements) fail("a shorter array");
  std::vector<std::string> out;
  for (size_t i = 0; i < value_->size(); ++i) out.push_back((*this)[i].as_string());
  return out;
}

}  // namespace ad
