// `attn-doctor compare`: one row per rule set, the release where the output changes marked; run
// as a user would, through the binary.
#include <catch2/catch.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "binary_run.hpp"

namespace {

using binary_run::Run;
Run run(const std::string& args) { return binary_run::run("", args); }

std::string batch(const char* name) {
  return std::string(ATTN_DOCTOR_SOURCE_DIR) + "/tests/golden/batches/" + name;
}

}  // namespace

TEST_CASE("compare shows where a packed batch's conversion changes between releases", "[convert]") {
  // 4.55.0 still sends any position ids down the packed path (the 4.54 route,
  // tests/golden/transformers-4.55.0.json / 025); 4.55.1 brings _is_packed_sequence (B == 1 only)
  Run r = run("compare " + batch("025-packed-b2.json") +
              " --releases 4.43.0,4.44.0,4.44.1,4.53.0,4.54.0,4.55.0,4.55.1,5.23.0 --format json");
  CHECK(r.exit_code == 1);  // the dense rows merge the packed sequences
  auto j = nlohmann::json::parse(r.out);
  const auto& rows = j.at("rules");
  REQUIRE(rows.size() == 8);
  std::vector<std::string> paths, changed;
  for (const auto& row : rows) {
    paths.push_back(row.at("path"));
    if (row.at("changed").get<bool>()) changed.push_back(row.at("transformers"));
  }
  CHECK(paths == std::vector<std::string>{"dense", "position_ids", "position_ids", "dense", "position_ids",
                                          "position_ids", "dense", "dense"});
  CHECK(changed == std::vector<std::string>{"4.44.0", "4.53.0", "4.54.0", "4.55.1"});
  CHECK(rows[1].at("rule_set") == "hf-4.44.0");
  CHECK(rows[5].at("rule_set") == "hf-4.54");
  CHECK(rows[1].at("varlen").at("max_seqlen_is_tensor") == true);
  CHECK(rows[4].at("varlen").at("max_seqlen_is_tensor") == false);
  // every dense row reports the packed row reaching the dense kernel first
  for (size_t i : {0u, 3u, 6u, 7u}) CHECK(rows[i].at("first_violation").at("id") == "route.packed_to_dense");
}

TEST_CASE("compare shows the Gemma-2 crash of 4.44.0 and its 4.44.1 fix", "[convert]") {
  Run r = run("compare " + batch("056-gemma2-generate-prefill.json") + " --releases 4.43.4,4.44.0,4.44.1,4.48.0 --wide");
  CHECK(r.exit_code == 1);  // some row fails the way its release fails
  CHECK(r.out.find("raises RuntimeError: index 2 is out of bounds for dimension 0 with size 2") != std::string::npos);
  CHECK(r.out.find("hf-4.44.1") != std::string::npos);
  CHECK(r.out.find("* 4.44.1") != std::string::npos);
}

TEST_CASE("compare maps releases the tool does not know to the nearest known one and says so", "[convert]") {
  Run r = run("compare " + batch("024-packed-b1.json") + " --releases 4.51.9 --format json");
  auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("rules").at(0).at("rule_set") == "hf-4.49");
  CHECK(j.at("rules").at(0).at("note").get<std::string>().find("nearest known release 4.51.3") != std::string::npos);
  Run bad = run("compare " + batch("024-packed-b1.json") + " --releases not-a-release");
  CHECK(bad.exit_code == 2);
}
