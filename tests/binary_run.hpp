// Runs the built attn-doctor binary as a user would (ATTN_DOCTOR_BINARY) and keeps its
// standard output and exit code: the tests of what the commands print.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace binary_run {

struct Run {
  int exit_code = -1;
  std::string out;
};

// `env` (e.g. "COLUMNS=80", or empty) is set for the run; stderr is dropped.
inline Run run(const std::string& env, const std::string& args) {
  const std::string cmd =
      "env -u COLUMNS " + env + " NO_COLOR=1 " + std::string(ATTN_DOCTOR_BINARY) + " " + args + " 2>/dev/null";
  Run r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot run " + cmd);
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace binary_run
