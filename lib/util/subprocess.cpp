// posix_spawn + poll on two pipes; SIGKILL (to the child, or its process group) on timeout;
// a stop request (StopSignals: a self-pipe written by the signal handler) forwarded.
#include "util/subprocess.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <stdexcept>

extern char** environ;

namespace ad {

namespace {

// The one StopSignals' state, reachable from the handler: lock-free atomics and a pipe
// whose write end never blocks (async-signal-safe).
std::atomic<int> g_stop_signal{0};
std::atomic<int> g_stop_write_fd{-1};
int g_stop_read_fd = -1;
std::vector<std::pair<int, struct sigaction>> g_previous;

extern "C" void on_stop_signal(int sig) {
  const int saved_errno = errno;
  int none = 0;
  g_stop_signal.compare_exchange_strong(none, sig);
  const int fd = g_stop_write_fd.load();
  if (fd >= 0) {
    const char byte = 1;
    [[maybe_unused]] ssize_t ignored = write(fd, &byte, 1);
  }
  errno = saved_errno;
}

}  // namespace

StopSignals::StopSignals(std::initializer_list<int> signals) {
  if (g_stop_read_fd >= 0) throw std::logic_error("StopSignals: one instance at a time");
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  g_stop_read_fd = fds[0];
  g_stop_write_fd = fds[1];
  g_stop_signal = 0;
  for (int sig : signals) {
    struct sigaction action {}, previous {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    if (sigaction(sig, &action, &previous) == 0) g_previous.emplace_back(sig, previous);
  }
}

StopSignals::~StopSignals() {
  for (auto& [sig, previous] : g_previous) sigaction(sig, &previous, nullptr);
  g_previous.clear();
  const int write_fd = g_stop_write_fd.exchange(-1);
  close(write_fd);
  close(g_stop_read_fd);
  g_stop_read_fd = -1;
}

int StopSignals::signal() const { return g_stop_signal.load(); }
int StopSignals::fd() const { return g_stop_read_fd; }

std::string signal_name(int signal) {
  switch (signal) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    case SIGQUIT: return "SIGQUIT";
    case SIGKILL: return "SIGKILL";
    default: return "signal " + std::to_string(signal);
  }
}

std::string self_executable() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options) {
  const double timeout_seconds = options.timeout_seconds;
  const size_t max_output_bytes = options.max_output_bytes;
  ProcessResult r;
  auto start = std::chrono::steady_clock::now();
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    r.spawn_error = std::strerror(errno);
    return r;
  }
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    r.spawn_error = std::strerror(errno);
    close(out_pipe[0]);
    close(out_pipe[1]);
    return r;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // the environment: the parent's, with options.env's names replaced
  std::vector<std::string> env_store;
  for (char** e = environ; *e; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& o : options.env) replaced = replaced || o.substr(0, o.find('=')) == name;
    if (!replaced) env_store.push_back(entry);
  }
  env_store.insert(env_store.end(), options.env.begin(), options.env.end());
  std::vector<char*> envp;
  for (auto& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  if (options.own_process_group) {
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
  }
  pid_t pid = 0;
  int rc = posix_spawn(&pid, args[0], &actions, &attr, args.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (rc != 0) {
    r.spawn_error = std::strerror(rc);
    close(out_pipe[0]);
    close(err_pipe[0]);
    return r;
  }
  // fds[2]: the stop request, until it is forwarded
  pollfd fds[3] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}, {options.stop ? options.stop->fd() : -1, POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  char buf[65536];
  const int target = options.own_process_group ? -pid : pid;
  std::chrono::steady_clock::time_point stop_deadline{};
  while (open_fds > 0) {
    const auto now = std::chrono::steady_clock::now();
    double elapsed = std::chrono::duration<double>(now - start).count();
    double left = timeout_seconds - elapsed;
    if (left <= 0) {
      r.timed_out = true;
      kill(target, SIGKILL);
      break;
    }
    if (r.stopped == 0 && options.stop && options.stop->signal() != 0) {
      r.stopped = options.stop->signal();
      kill(target, r.stopped);
      fds[2].fd = -1;
      stop_deadline = now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                std::chrono::duration<double>(options.stop_grace_seconds));
    }
    if (r.stopped != 0) {
      const double grace_left = std::chrono::duration<double>(stop_deadline - now).count();
      if (grace_left <= 0) {
        kill(target, SIGKILL);
        break;
      }
      left = std::min(left, grace_left);
    }
    int n = poll(fds, 3, static_cast<int>(std::min(left, 1.0) * 1000) + 1);
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;  // on EINTR the revents are stale
    for (int k = 0; k < 2; ++k) {
      if (fds[k].fd < 0 || !(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t got = read(fds[k].fd, buf, sizeof buf);
      if (got <= 0) {
        close(fds[k].fd);
        fds[k].fd = -1;
        --open_fds;
        continue;
      }
      size_t room = max_output_bytes > sinks[k]->size() ? max_output_bytes - sinks[k]->size() : 0;
      if (static_cast<size_t>(got) > room) r.truncated = true;
      sinks[k]->append(buf, std::min(room, static_cast<size_t>(got)));
    }
  }
  for (int k = 0; k < 2; ++k)
    if (fds[k].fd >= 0) close(fds[k].fd);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) {
    r.exited = true;
    r.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.signal = WTERMSIG(status);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace ad
