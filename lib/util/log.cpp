// The one place spdlog is included.
#include "util/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace ad::log {

namespace {
spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> instance = [] {
    auto l = spdlog::stderr_color_mt("attn-doctor");
    l->set_pattern("%^[%l]%$ %v");
    l->set_level(spdlog::level::warn);
    return l;
  }();
  return *instance;
}
}  // namespace

void configure(int verbosity, bool quiet) {
  logger().set_level(quiet ? spdlog::level::err
                           : verbosity >= 2 ? spdlog::level::trace
                                            : verbosity == 1 ? spdlog::level::debug : spdlog::level::warn);
}
void trace(const std::string& m) { logger().trace(m); }
void debug(const std::string& m) { logger().debug(m); }
void info(const std::string& m) { logger().info(m); }
void warn(const std::string& m) { logger().warn(m); }
void error(const std::string& m) { logger().error(m); }

}  // namespace ad::log
