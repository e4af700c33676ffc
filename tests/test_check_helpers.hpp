// Helpers for the invariant tests: a batch written as JSON (as in a repro case) goes through
// the loader, optionally gets a hand-built replay (what a transformers release computed), and
// through the static checks. Tests then assert on the ids a user would see.
#pragma once

#include <catch2/catch.hpp>

#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "batch/batch.hpp"
#include "check/check.hpp"
#include "convert/convert.hpp"

namespace check_test {

// How the conversion is built: the project's convert() as it is (end-to-end), no replay at all
// (the checks see only the batch and its explicit block), or a hand-built replay.
struct Replay {
  enum class Kind { from_convert, none, given } kind = Kind::none;
  ad::VarlenArgs args;
  static Replay convert() { return {Kind::from_convert, {}}; }
  static Replay none() { return {Kind::none, {}}; }
  static Replay given(ad::VarlenArgs a) { return {Kind::given, std::move(a)}; }
};

struct Result {
  ad::Batch batch;
  ad::Conversion conversion;
  std::vector<ad::Violation> violations;

  std::vector<std::string> ids() const {
    std::vector<std::string> out;
    for (const auto& v : violations) out.push_back(v.id);
    return out;
  }
  std::string first() const { return violations.empty() ? std::string("(none)") : violations.front().id; }
  bool has(const std::string& id) const {
    for (const auto& v : violations)
      if (v.id == id) return true;
    return false;
  }
  const ad::Violation& get(const std::string& id) const {
    for (const auto& v : violations)
      if (v.id == id) return v;
    FAIL("no violation " << id);
    return violations.front();
  }
  std::string describe() const {
    std::ostringstream s;
    for (const auto& v : violations)
      s << v.id << " [" << ad::to_string(v.severity) << "] " << v.message << "\n    " << v.evidence.dump() << "\n";
    return s.str().empty() ? "(no violations)" : s.str();
  }
};

inline Result run(std::string_view json, const Replay& replay = Replay::none(), ad::CheckContext context = {}) {
  Result r{ad::parse_batch_text(json, "test.json"), {}, {}};
  switch (replay.kind) {
    case Replay::Kind::from_convert: r.conversion = ad::convert(r.batch); break;
    case Replay::Kind::none:
      if (r.batch.varlen) r.conversion.explicit_args = ad::explicit_varlen_args(r.batch);
      break;
    case Replay::Kind::given:
      if (r.batch.varlen) r.conversion.explicit_args = ad::explicit_varlen_args(r.batch);
      r.conversion.replayed = replay.args;
      break;
  }
  r.violations = ad::run_static_checks(r.batch, r.conversion, context);
  return r;
}

inline ad::IntTensor int32_vector(std::vector<int64_t> v) {
  ad::IntTensor t;
  t.shape = {static_cast<int64_t>(v.size())};
  t.values = std::move(v);
  t.dtype = ad::DType::int32;
  return t;
}

inline ad::IntTensor int64_vector(std::vector<int64_t> v) {
  ad::IntTensor t = int32_vector(std::move(v));
  t.dtype = ad::DType::int64;
  return t;
}

// What `_upad_input` hands flash_attn_varlen_func on the mask path.
struct MaskReplay {
  std::vector<int64_t> cu_q, cu_k, indices_q, indices_k;
  int64_t gather_rows_q = 0, gather_rows_k = 0, max_q = 0, max_k = 0;
};

inline ad::VarlenArgs mask_replay(const MaskReplay& m) {
  ad::VarlenArgs a;
  a.path = ad::VarlenPath::mask;
  a.library = "transformers";
  a.rule_set = "test-replay";
  a.cu_seqlens_q = int32_vector(m.cu_q);
  a.cu_seqlens_k = int32_vector(m.cu_k);
  a.max_seqlen_q = {m.max_q, false, ad::DType::int64};
  a.max_seqlen_k = {m.max_k, false, ad::DType::int64};
  a.indices_q = int64_vector(m.indices_q);
  a.indices_k = int64_vector(m.indices_k);
  a.total_q = static_cast<int64_t>(m.indices_q.size());
  a.total_k = static_cast<int64_t>(m.indices_k.size());
  a.gather_rows_q = m.gather_rows_q;
  a.gather_rows_k = m.gather_rows_k;
  return a;
}

// What the packed (position ids) path hands the kernel: cu_q == cu_k over the (B * S) view.
inline ad::VarlenArgs packed_replay(std::vector<int64_t> cu, int64_t max, int64_t rows, bool max_is_tensor = false) {
  ad::VarlenArgs a;
  a.path = ad::VarlenPath::position_ids;
  a.library = "transformers";
  a.rule_set = "test-replay";
  a.cu_seqlens_q = int32_vector(cu);
  a.cu_seqlens_k = int32_vector(std::move(cu));
  a.max_seqlen_q = a.max_seqlen_k = {max, max_is_tensor, ad::DType::int64};
  a.total_q = a.total_k = rows;
  return a;
}

inline ad::VarlenArgs dense_replay() {
  ad::VarlenArgs a;
  a.path = ad::VarlenPath::dense;
  a.library = "transformers";
  a.rule_set = "test-replay";
  a.call.api = ad::Api::flash_attn_2_dense;
  return a;
}

}  // namespace check_test

// The batch breaks exactly `want`: every violation found is of that id (so it is also first).
#define REQUIRE_ONLY(result, want)                                     \
  do {                                                                 \
    INFO((result).describe());                                         \
    REQUIRE(!(result).violations.empty());                             \
    for (const auto& v_ : (result).violations) CHECK(v_.id == (want)); \
  } while (0)

// `want` holds: no violation of it (REQUIRE_CLEAN: none at all).
#define REQUIRE_HOLDS(result, want) \
  do {                              \
    INFO((result).describe());      \
    REQUIRE(!(result).has(want));   \
  } while (0)

#define REQUIRE_CLEAN(result)             \
  do {                                    \
    INFO((result).describe());            \
    REQUIRE((result).violations.empty()); \
  } while (0)

// An earlier invariant wins: `earlier` is first, `want` is reported after it.
#define REQUIRE_EARLIER_WINS(result, earlier, want) \
  do {                                              \
    INFO((result).describe());                      \
    REQUIRE((result).first() == (earlier));         \
    REQUIRE((result).has(want));                    \
  } while (0)
