// util/xml: valid UTF-8 and XML 1.0 character data from arbitrary bytes (`repro --junit`,
// GitHub annotations, the Python extension's messages).
#include <catch2/catch.hpp>

#include <string>

#include "util/xml.hpp"

using namespace ad;

namespace {
const std::string kFFFD = "\xEF\xBF\xBD";
}

TEST_CASE("valid_utf8: well-formed text is kept, each ill-formed subpart becomes one U+FFFD", "[util]") {
  const std::string good = "ascii \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xEF\xBF\xBE";  // e-acute, euro, emoji, U+FFFE
  CHECK(valid_utf8(good) == good);
  CHECK(valid_utf8("a\xFF" "b") == "a" + kFFFD + "b");                       // never a lead byte
  CHECK(valid_utf8("\xC0\x80") == kFFFD + kFFFD);                           // overlong NUL
  CHECK(valid_utf8("\xED\xA0\x80") == kFFFD + kFFFD + kFFFD);               // an encoded surrogate
  CHECK(valid_utf8("\xF4\x90\x80\x80") == kFFFD + kFFFD + kFFFD + kFFFD);   // past U+10FFFF
  CHECK(valid_utf8("\xE2\x82") == kFFFD);                                   // cut short at the end
  CHECK(valid_utf8("\xE2\x82x") == kFFFD + "x");                            // cut short by a letter
  // UTF-16LE "{" with its byte-order mark: what a UTF-16 batch file starts with
  CHECK(valid_utf8(std::string("\xFF\xFE{\0", 4)) == kFFFD + kFFFD + "{" + std::string(1, '\0'));
}

TEST_CASE("xml_escape: markup escaped, what XML 1.0 forbids replaced, whitespace kept", "[util]") {
  CHECK(xml_escape("a<b>&\"c'") == "a&lt;b&gt;&amp;&quot;c&apos;");
  CHECK(xml_escape(std::string("nul\0bell\x07" "esc\x1B", 13)) == "nul" + kFFFD + "bell" + kFFFD + "esc" + kFFFD);
  CHECK(xml_escape("x\xEF\xBF\xBEy\xEF\xBF\xBFz") == "x" + kFFFD + "y" + kFFFD + "z");  // U+FFFE, U+FFFF
  CHECK(xml_escape("\xED\xB0\x80") == kFFFD + kFFFD + kFFFD);                           // a lone low surrogate
  CHECK(xml_escape("bad\xFFname") == "bad" + kFFFD + "name");
  CHECK(xml_escape("t\tl\nr\r") == "t\tl\nr&#13;");
  CHECK(xml_escape("t\tl\nr\r", true) == "t&#9;l&#10;r&#13;");
  CHECK(xml_escape("\xE2\x82\xAC \xF0\x9F\x98\x80") == "\xE2\x82\xAC \xF0\x9F\x98\x80");
}
