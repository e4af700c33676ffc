// Logging facade: stderr through spdlog, confined to one translation unit (spdlog's
// header-only mode costs seconds of compile time per file that includes it).
// Results go to stdout; logs never do.
#pragma once

#include <string>

namespace ad::log {

// verbosity: 0 warnings, 1 debug (-v), 2 trace (-vv); quiet: errors only.
void configure(int verbosity, bool quiet);
void trace(const std::string& message);
void debug(const std::string& message);
void info(const std::string& message);
void warn(const std::string& message);
void error(const std::string& message);

}  // namespace ad::log
