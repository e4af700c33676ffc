// escape_text: every message that quotes user text (a key, a string, a file name, an argument)
// writes control characters, bidi overrides and non-UTF-8 bytes as escapes, so the terminal
// never receives them and a NUL does not end the message early.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "batch/batch.hpp"
#include "util/subprocess.hpp"
#include "util/text.hpp"

namespace {

bool has_control(const std::string& s, bool allow_newline) {
  return std::any_of(s.begin(), s.end(), [&](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return (c < 0x20 && !(allow_newline && c == '\n')) || c == 0x7f;
  });
}

}  // namespace

TEST_CASE("escape_text escapes controls, C1, bidi overrides and bad bytes, and nothing else", "[util]") {
  using ad::escape_text;
  CHECK(escape_text("attention_mask") == "attention_mask");
  CHECK(escape_text("a \"quoted\" \\ path/é/中") == "a \"quoted\" \\ path/é/中");
  CHECK(escape_text(std::string("a\x1b]0;pwned\x07z", 12)) == "a\\u001b]0;pwned\\u0007z");
  CHECK(escape_text(std::string("bad\0key", 7)) == "bad\\u0000key");
  CHECK(escape_text("l1\nl2\tx\r") == "l1\\nl2\\tx\\r");
  CHECK(escape_text("\x7f") == "\\u007f");
  CHECK(escape_text("\xc2\x9b" "2J") == "\\u009b2J");        // C1 CSI as UTF-8
  CHECK(escape_text("\xe2\x80\xae" "txt") == "\\u202etxt");  // right-to-left override
  CHECK(escape_text("\xff\xc3") == "\\xff\\xc3");            // not UTF-8, truncated sequence
  CHECK(escape_text("\xed\xa0\x80") == "\\xed\\xa0\\x80");   // a surrogate is not UTF-8
  CHECK(escape_text("\xc0\xaf") == "\\xc0\\xaf");            // overlong
  const std::string once = escape_text(std::string("\x1b\0\xff", 3));
  CHECK(escape_text(once) == once);  // idempotent: a message may be escaped again
}

TEST_CASE("a loader message quoting a hostile key keeps expected and found, escaped", "[util]") {
  auto message = [](const std::string& json) {
    try {
      ad::parse_batch_text(json, "hostile.json");
    } catch (const ad::InputError& e) {
      return std::string(e.what());
    }
    FAIL("no InputError");
    return std::string();
  };
  // the key arrives through JSON escapes, as a hostile file would write it
  const std::string nul = message(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 4, "head_dim": 8},
                                       "batch": {"bad\u0000key": 1}})");
  CHECK_THAT(nul, Catch::Contains("/batch/bad\\u0000key"));
  CHECK_THAT(nul, Catch::Contains("expected one of the keys"));
  CHECK_THAT(nul, Catch::Contains("found unknown key \"bad\\u0000key\""));
  CHECK(nul.find('\0') == std::string::npos);
  const std::string esc = message(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 4, "head_dim": 8},
                                       "batch": {"\u001b]0;pwned\u0007\u001b[2J": 1}})");
  CHECK_THAT(esc, Catch::Contains("unknown key \"\\u001b]0;pwned\\u0007\\u001b[2J\""));
  CHECK_FALSE(has_control(esc, false));
  // a hostile string value quoted in "found"
  const std::string value = message(R"({"format": "attn-doctor/batch@1", "model": {"num_heads": 4, "head_dim": 8,
                                         "dtype": "\u001b[31mred\u0000"}})");
  CHECK_FALSE(has_control(value, false));
  CHECK_THAT(value, Catch::Contains("\\u001b[31mred\\u0000"));
}

TEST_CASE("the binary's stderr carries no control character from a hostile key or argument", "[util]") {
  const std::string file = std::string(ATTN_DOCTOR_SOURCE_DIR) + "/tests/data/cli/hostile-key-escapes.json";
  auto key = ad::run_process({ATTN_DOCTOR_BINARY, "check", file, "--backend", "none"}, 60.0);
  REQUIRE(key.exited);
  CHECK(key.exit_code == 2);
  CHECK_FALSE(has_control(key.err, true));
  CHECK_THAT(key.err, Catch::Contains("\\u001b]0;pwned\\u0007"));
  CHECK_THAT(key.err, Catch::Contains("expected one of the keys"));
  auto arg = ad::run_process({ATTN_DOCTOR_BINARY, "check", file, "--backend", "\x1b]0;pwned\x07"}, 60.0);
  REQUIRE(arg.exited);
  CHECK(arg.exit_code == 2);
  CHECK_FALSE(has_control(arg.err, true));
  CHECK_THAT(arg.err, Catch::Contains("\\u001b]0;pwned\\u0007"));
  auto id = ad::run_process({ATTN_DOCTOR_BINARY, "explain", "\x1b[2Jmask.rank"}, 60.0);
  REQUIRE(id.exited);
  CHECK(id.exit_code == 2);
  CHECK_FALSE(has_control(id.err, true));
  CHECK_THAT(id.err, Catch::Contains("\\u001b[2Jmask.rank"));
}
