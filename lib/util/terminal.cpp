// Colour, width and wrapping for terminal text (util/terminal.hpp).
#include "util/terminal.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string_view>

namespace ad {

bool stdout_wants_color() {
  const char* no_color = std::getenv("NO_COLOR");
  if (no_color && *no_color) return false;
  // FORCE_COLOR (set and not "0"): colour off a terminal too, as CI logs that render ANSI ask
  const char* force = std::getenv("FORCE_COLOR");
  if (force && *force && std::string_view(force) != "0") return true;
  return isatty(fileno(stdout)) != 0;
}

int output_width(int fallback) {
  int width = fallback;
  const char* columns = std::getenv("COLUMNS");
  char* end = nullptr;
  const long parsed = columns && *columns ? std::strtol(columns, &end, 10) : 0;
  if (parsed > 0 && end && *end == '\0') {
    width = parsed > 1000 ? 1000 : static_cast<int>(parsed);
  } else if (isatty(fileno(stdout))) {
    winsize ws{};
    if (ioctl(fileno(stdout), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) width = ws.ws_col;
  }
  return std::max(width, 40);
}

std::string wrap_text(const std::string& text, size_t width, const std::string& indent) {
  std::istringstream words(text);
  std::string word, line, out;
  bool first = true;
  while (words >> word) {
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out += (first ? "" : "\n" + indent) + line;
      first = false;
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty()) out += (first ? "" : "\n" + indent) + line;
  return out;
}

}  // namespace ad
