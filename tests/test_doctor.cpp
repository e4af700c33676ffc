// diagnose(): the options that shape one diagnosis as a whole (lib/doctor/doctor.hpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "batch/batch.hpp"
#include "check/check.hpp"
#include "doctor/doctor.hpp"

using namespace ad;

namespace {

// fp32 q (input.dtype, no index values needed) and a cu_seqlens past q's rows
// (cu_seqlens.total, which needs them).
Batch fp32_overrun() {
  return parse_batch_text(R"({"format": "attn-doctor/batch@1", "name": "fp32-overrun",
    "model": {"num_heads": 8, "head_dim": 64, "dtype": "fp32"},
    "varlen": {"cu_seqlens_q": [0, 100, 250, 400], "max_seqlen_q": 150, "total_q": 387}})",
                          "fp32-overrun.json");
}

bool reports(const Report& r, const std::string& id) {
  return std::any_of(r.violations.begin(), r.violations.end(), [&](const Violation& v) { return v.id == id; });
}

}  // namespace

TEST_CASE("doctor: index_values_unread keeps the input invariants and runs no dynamic stage", "[doctor]") {
  const Batch batch = fp32_overrun();
  CheckOptions options;
  options.backend = BackendChoice::none;
  const Report all = diagnose(batch, options, "fp32-overrun.json").report;
  REQUIRE(reports(all, "input.dtype"));
  REQUIRE(reports(all, "cu_seqlens.total"));

  options.backend = BackendChoice::cpu;  // the stand-in index values are never executed
  options.index_values_unread = true;
  const Report unread = diagnose(batch, options, "fp32-overrun.json").report;
  CHECK(reports(unread, "input.dtype"));
  CHECK_FALSE(reports(unread, "cu_seqlens.total"));
  for (const Violation& v : unread.violations) {
    INFO(v.id);
    CHECK(find_invariant(v.id)->group == InvariantGroup::input);
    CHECK(v.id != "input.int32_range");
  }
  CHECK(unread.backend == "none");
  for (const StageRecord& st : unread.stages) CHECK((st.name == Stage::conversion || st.name == Stage::static_checks));
  CHECK(std::any_of(unread.notes.begin(), unread.notes.end(), [](const std::string& n) {
    return n.find("only the input invariants were checked") != std::string::npos;
  }));
  CHECK(exit_code_for(unread, false) == 1);
}

TEST_CASE("doctor: a note is said in the notes, never a violation, whatever --strict says", "[doctor]") {
  // transformers' DataCollatorWithFlattening packing examples of 4, 1, 1 and 3 tokens: the two
  // one-token examples are each their own segment, as meant (position_ids.consecutive: a note)
  const Batch batch = parse_batch_text(R"({"format": "attn-doctor/batch@1", "environment": {"transformers": "4.57.0"},
    "model": {"num_heads": 8, "head_dim": 64},
    "batch": {"position_ids": {"values": [[0, 1, 2, 3, 0, 0, 0, 1, 2]]}}})",
                                       "one-token.json");
  for (bool strict : {false, true}) {
    CheckOptions options;
    options.backend = BackendChoice::cpu;
    options.strict = strict;
    const Report r = diagnose(batch, options, "one-token.json").report;
    INFO("strict " << strict);
    CHECK(r.violations.empty());
    CHECK(r.status() == "ok");
    CHECK(exit_code_for(r, strict) == 0);
    REQUIRE(r.intent);
    CHECK(r.intent->trusted);
    CHECK(std::any_of(r.notes.begin(), r.notes.end(), [](const std::string& n) {
      return n.rfind("position_ids.consecutive: 2 tokens at position 0", 0) == 0;
    }));
    for (const StageRecord& st : r.stages)
      if (st.name == Stage::static_checks) CHECK(st.status == StageStatus::ok);
  }
}
