// posix_spawn + poll on two pipes; SIGKILL (to the child, or its process group) on timeout.
#include "util/subprocess.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

extern char** environ;

namespace ad {

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
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double left = timeout_seconds - elapsed;
    if (left <= 0) {
      r.timed_out = true;
      kill(options.own_process_group ? -pid : pid, SIGKILL);
      break;
    }
    int n = poll(fds, 2, static_cast<int>(std::min(left, 1.0) * 1000) + 1);
    if (n < 0 && errno != EINTR) break;
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
  for (auto& f : fds)
    if (f.fd >= 0) close(f.fd);
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
