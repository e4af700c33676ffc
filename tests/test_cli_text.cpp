// The text the commands print for people, run through the binary as a user would: `compare`
// fits the width it is given (COLUMNS, else 100 off a terminal) and `--wide` prints whole
// lines; `list` aligns its columns and wraps the last one; the compare headline counts errors
// and warnings apart; `explain` wraps its paragraphs.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "binary_run.hpp"

namespace {

using binary_run::Run;
using binary_run::run;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

size_t longest(const std::string& text) {
  size_t n = 0;
  for (const auto& line : lines_of(text)) n = std::max(n, line.size());
  return n;
}

const std::string kPacked = std::string(ATTN_DOCTOR_SOURCE_DIR) + "/repro_cases/hf-4.53.3-packing-b2-dense.json";

}  // namespace

TEST_CASE("cli text: compare fits 100 columns off a terminal, COLUMNS when set, whole lines with --wide", "[cli]") {
  const Run fitted = run("", "compare " + kPacked);
  CHECK(fitted.exit_code == 1);
  INFO(fitted.out);
  CHECK(longest(fitted.out) <= 100);
  const Run narrow = run("COLUMNS=80", "compare " + kPacked);
  INFO(narrow.out);
  CHECK(longest(narrow.out) <= 80);
  // cut to fit, the kernel arguments on their own line
  CHECK(narrow.out.find("...") != std::string::npos);
  CHECK(narrow.out.find("cu_seqlens_q/k [0, 6, 10, 16, 25, 32]") != std::string::npos);
  // however deep the checkout: a long path keeps its tail, the file's name
  std::string deep = std::string(ATTN_DOCTOR_SOURCE_DIR);
  for (int k = 0; k < 40; ++k) deep += "/.";
  deep += "/repro_cases/hf-4.53.3-packing-b2-dense.json";
  const Run deep_run = run("COLUMNS=80", "compare " + deep);
  INFO(deep_run.out);
  CHECK(longest(deep_run.out) <= 80);
  CHECK(deep_run.out.rfind("compare ...", 0) == 0);
  CHECK(deep_run.out.find("/hf-4.53.3-packing-b2-dense.json: 20 releases\n") != std::string::npos);
  const Run wide = run("COLUMNS=80", "compare " + kPacked + " --wide");
  INFO(wide.out);
  CHECK(longest(wide.out) > 100);
  // the whole first violation of a dense release, on its release's line
  bool whole = false;
  for (const auto& line : lines_of(wide.out))
    whole = whole || (line.find("route.packed_to_dense: row 0 holds 3 intended sequences") != std::string::npos &&
                      line.find("...") == std::string::npos && line.find("hf-4.43") != std::string::npos);
  CHECK(whole);
}

TEST_CASE("cli text: compare's headline counts releases with errors, warnings apart", "[cli]") {
  // 4.43.4 and 4.53.0 send the packed rows to the dense kernel (errors); 4.44.0 passes a 0-d
  // tensor max_seqlen (a warning); 4.54.1 holds every invariant
  const Run r = run("", "compare " + kPacked + " --releases 4.43.4,4.44.0,4.53.0,4.54.1");
  INFO(r.out);
  CHECK(r.exit_code == 1);
  CHECK(r.out.find(": 4 releases\n2 break an invariant (error), 1 only warns, 1 holds every invariant\n") != std::string::npos);
}

TEST_CASE("cli text: list aligns its columns and wraps the last to the width", "[cli]") {
  for (const char* what : {"invariants", "rules"}) {
    INFO(what);
    const Run r = run("COLUMNS=90", std::string("list ") + what);
    CHECK(r.exit_code == 0);
    INFO(r.out);
    CHECK(longest(r.out) <= 90);
    // the last column starts at the same place on every line: continuation lines are indented
    // to it, and no two columns run together
    const auto lines = lines_of(r.out);
    REQUIRE(lines.size() > 10);
    size_t column = std::string::npos;
    for (const auto& line : lines) {
      if (line.empty() || (line[0] == ' ' && line.find_first_not_of(' ') >= 20)) continue;  // a continuation line
      // the start of the last column: after the last run of two or more spaces before it
      const size_t gap = line.rfind("  ", 60);
      REQUIRE(gap != std::string::npos);
      const size_t start = line.find_first_not_of(' ', gap);
      if (column == std::string::npos) column = start;
      CHECK(start == column);
    }
    for (const auto& line : lines)
      if (!line.empty() && line.find_first_not_of(' ') >= 20) CHECK(line.find_first_not_of(' ') == column);
  }
  // one id per line, never glued to the stage column
  const Run r = run("", "list invariants");
  CHECK(r.out.find("attention_backwardevery") == std::string::npos);
  CHECK(r.out.find("attention_backward  ") != std::string::npos);
}

TEST_CASE("cli text: explain wraps its paragraphs to the width", "[cli]") {
  const Run r = run("COLUMNS=60", "explain cu_seqlens.total");
  INFO(r.out);
  CHECK(r.exit_code == 0);
  CHECK(longest(r.out) <= 60);
  CHECK(r.out.find("holds when: cu_q[-1] == rows of q") != std::string::npos);
  CHECK(r.out.find("\n  Dao-AILab/flash-attention#1661\n") != std::string::npos);
}
