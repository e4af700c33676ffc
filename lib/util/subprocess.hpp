// Running a child process with a time limit and bounded captured output. Used to isolate
// repro cases (a case that crashes or hangs a backend cannot take the others with it) and to
// run unchecked kernels whose crash or hang must not take the parent with it (`check --raw`).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ad {

struct ProcessResult {
  int exit_code = -1;     // valid when exited
  bool exited = false;    // normal exit
  int signal = 0;         // killing signal, when it did not exit
  bool timed_out = false; // killed after the time limit
  std::string out, err;   // captured, each truncated to the output limit
  bool truncated = false;
  double seconds = 0.0;
  std::string spawn_error;  // non-empty when the process could not be started
};

struct ProcessOptions {
  double timeout_seconds = 60.0;
  size_t max_output_bytes = size_t{64} << 20;
  // NAME=value entries set in the child's environment (replacing the parent's NAME).
  std::vector<std::string> env;
  // The child leads a new process group, and the time limit kills the whole group (what it
  // started too): for children that may hang in a device or spawn their own.
  bool own_process_group = false;
};

ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options);
inline ProcessResult run_process(const std::vector<std::string>& argv, double timeout_seconds) {
  ProcessOptions o;
  o.timeout_seconds = timeout_seconds;
  return run_process(argv, o);
}

// Absolute path of the running executable.
std::string self_executable();

}  // namespace ad
