// Text for a terminal: whether stdout wants colour, the width to fit, and word wrapping.
#pragma once

#include <cstddef>
#include <string>

namespace ad {

// Whether stdout should get colour: NO_COLOR unset, and FORCE_COLOR set (not "0") or a terminal.
bool stdout_wants_color();

// The width text output is fitted to: COLUMNS when it is set to a number, else the terminal's
// width when stdout is one, else `fallback`; never below 40.
int output_width(int fallback = 100);

// `text` broken at spaces into lines of at most `width` characters (a longer word stands
// alone); each line but the first is prefixed with `indent` (not counted in `width`); no
// trailing newline.
std::string wrap_text(const std::string& text, size_t width, const std::string& indent = "");

}  // namespace ad
