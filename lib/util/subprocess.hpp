// Running a child process with a time limit and bounded captured output. Used to isolate
// repro cases (a case that crashes or hangs a backend cannot take the others with it) and to
// run unchecked kernels whose crash or hang must not take the parent with it (`check --raw`).
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <vector>

namespace ad {

// A request to stop, from a signal: while one StopSignals lives, the signals it names (SIGINT
// and SIGTERM: a Ctrl-C, a CI job's cancel) no longer end the process; the first one is
// recorded and makes fd() readable, and each run_process given it forwards that signal to its
// child and waits for it. One instance at a time; the previous handlers come back when it is
// destroyed.
class StopSignals {
 public:
  explicit StopSignals(std::initializer_list<int> signals);
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  int signal() const;  // the first signal received, 0 while none came
  int fd() const;      // readable once a signal came (never read from: every poller sees it)
};

// "SIGINT", "SIGTERM", ... ("signal N" for one without a name here).
std::string signal_name(int signal);

struct ProcessResult {
  int exit_code = -1;     // valid when exited
  bool exited = false;    // normal exit
  int signal = 0;         // killing signal, when it did not exit
  bool timed_out = false; // killed after the time limit
  std::string out, err;   // captured, each truncated to the output limit
  bool truncated = false;
  int stopped = 0;        // the signal forwarded to the child on a stop request (0: none)
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
  // When it asks to stop, the child (or its group) gets the same signal; past
  // stop_grace_seconds, SIGKILL.
  const StopSignals* stop = nullptr;
  double stop_grace_seconds = 5.0;
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
