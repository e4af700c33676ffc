// util/subprocess: the child runner of `repro` and `check --raw`.
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>
#include <string>

#include "util/subprocess.hpp"

using namespace ad;

namespace {

// Whether process `pid` still runs (absent, or a zombie nobody reaped yet, counts as ended).
bool running(long pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

// SIGKILL to the group is delivered asynchronously: on a loaded machine the grandchild can
// still be on its way out when run_process returns, so wait (bounded) for it to be gone.
bool gone_within(long pid, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (running(pid)) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace

TEST_CASE("subprocess: the environment reaches the child and the output comes back", "[util]") {
  ProcessOptions o;
  o.timeout_seconds = 10;
  o.env = {"AD_SUBPROCESS_TEST=set by the parent"};
  const ProcessResult r = run_process({"/bin/sh", "-c", "echo \"$AD_SUBPROCESS_TEST\"; echo err >&2; exit 3"}, o);
  REQUIRE(r.spawn_error.empty());
  CHECK(r.exited);
  CHECK(r.exit_code == 3);
  CHECK(r.out == "set by the parent\n");
  CHECK(r.err == "err\n");
  CHECK_FALSE(r.timed_out);
}

// `check --raw` runs an unchecked kernel in a child that may hang (a kernel looping over a
// phantom segment) and may have started processes of its own: the time limit ends them all.
TEST_CASE("subprocess: the time limit kills the child's whole process group", "[util]") {
  ProcessOptions o;
  o.timeout_seconds = 1.0;
  o.own_process_group = true;
  // the shell starts a grandchild, reports its pid, and waits for it
  const ProcessResult r = run_process({"/bin/sh", "-c", "sleep 60 & echo $!; wait"}, o);
  REQUIRE(r.spawn_error.empty());
  CHECK(r.timed_out);
  CHECK_FALSE(r.exited);
  CHECK(r.seconds < 10);
  const long grandchild = std::stol(r.out);
  CHECK(gone_within(grandchild, 5.0));
}

// Sends `sig` to this process once `ready` exists (the child writes it when it is set up).
static std::thread signal_when(const std::string& ready, int sig) {
  return std::thread([ready, sig] {
    for (int k = 0; k < 3000 && !std::ifstream(ready); ++k) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    kill(getpid(), sig);
  });
}

// A Ctrl-C or a CI cancel while a child runs: the signal no longer ends the parent, it is
// forwarded to the child, and run_process waits for the child to end.
TEST_CASE("subprocess: a stop signal is forwarded to the child and waited for", "[util]") {
  const std::string ready = "/tmp/attn-doctor-stop-" + std::to_string(getpid());
  std::remove(ready.c_str());
  StopSignals stop({SIGINT, SIGTERM});
  ProcessOptions o;
  o.timeout_seconds = 60;
  o.stop = &stop;
  std::thread sender = signal_when(ready, SIGTERM);
  const ProcessResult r = run_process({"/bin/sh", "-c", "echo started; : > " + ready + "; exec sleep 30"}, o);
  sender.join();
  std::remove(ready.c_str());
  CHECK(stop.signal() == SIGTERM);
  CHECK(r.stopped == SIGTERM);
  CHECK_FALSE(r.exited);
  CHECK(r.signal == SIGTERM);
  CHECK_FALSE(r.timed_out);
  CHECK(r.out == "started\n");
  CHECK(r.seconds < 20);
  CHECK(signal_name(SIGINT) == "SIGINT");
}

// A child that ignores the forwarded signal is killed after the grace period.
TEST_CASE("subprocess: a child that ignores the stop signal is killed after the grace period", "[util]") {
  const std::string ready = "/tmp/attn-doctor-stop-ignored-" + std::to_string(getpid());
  std::remove(ready.c_str());
  StopSignals stop({SIGINT, SIGTERM});
  ProcessOptions o;
  o.timeout_seconds = 60;
  o.stop = &stop;
  o.stop_grace_seconds = 0.5;
  std::thread sender = signal_when(ready, SIGINT);
  const ProcessResult r = run_process({"/bin/sh", "-c", "trap '' INT; : > " + ready + "; exec sleep 30"}, o);
  sender.join();
  std::remove(ready.c_str());
  CHECK(r.stopped == SIGINT);
  CHECK_FALSE(r.exited);
  CHECK(r.signal == SIGKILL);
  CHECK(r.seconds < 20);
}
