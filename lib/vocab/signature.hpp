// Call signatures by API and release, and how Python binds a caller's arguments to one. One
// function binds (bind_arguments); the tables are data, one per API and release range
// (signature.cpp), each read from the release's own source. The static checks (input.feature:
// an argument the release does not take), the advisory table (an argument bound by position to
// another parameter than the caller meant) and the execution plan (the TypeError raised before
// anything runs) all read the binding here.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "vocab/api.hpp"
#include "vocab/version.hpp"

namespace ad {

struct Parameter {
  std::string_view name;
  std::string_view default_value;  // as the source writes it; "" = required
  bool keyword_only = false;       // after `*` in the signature
};

// One API's signature over a range of its releases: from `first` up to the next table of the
// same API (tables of one API are kept in release order).
struct Signature {
  Api api;
  std::string_view first;   // first release this signature is read for ("" = the earliest known)
  std::string_view source;  // release and file it was read from
  std::span<const Parameter> parameters;  // in declaration order
};

// Every table, grouped by API, each API's in release order.
std::span<const Signature> signatures();
// The signature of `api` at `release`: the table with the largest `first` at or below it (no
// release: the newest table). nullptr when the API has no table or the release predates them.
const Signature* signature_for(Api api, const std::optional<Version>& release);

// What the caller passed, by the names the caller meant: the positional arguments in order,
// then the keyword arguments.
struct CallArguments {
  std::vector<std::string> positional;
  std::vector<std::string> keywords;
};

struct BoundPair {
  std::string parameter;  // the signature's parameter
  std::string argument;   // the caller's argument bound to it (the name the caller meant)
  Bound how = Bound::keyword;
  bool operator==(const BoundPair&) const = default;
};

struct Binding {
  std::vector<BoundPair> bound;        // in the order Python binds them
  std::vector<BoundPair> moved;        // positional arguments bound to another parameter than meant
  std::optional<std::string> type_error;  // Python's message, "f() got an unexpected keyword argument 'x'"
};

// Python's binding of `args` to `sig` (CPython 3.10+ messages, `function` as the callable's
// name): too many positional arguments, then each keyword (unknown or already bound), then the
// required parameters left without a value.
Binding bind_arguments(const Signature& sig, std::string_view function, const CallArguments& args);

}  // namespace ad
