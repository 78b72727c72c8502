// A child process for the GPU tests that need a CUDA process of their own (checkpointing another process,
// a kernel that faults on purpose): this test binary re-executed (/proc/self/exe, so the child is a CUDA
// process of its own, not a fork of an initialised one) with a hidden Catch test case and extra environment
// variables. The child's stdout and stderr come back through a pipe, read line by line with a deadline; the
// parent sends it lines through another pipe, whose descriptor the child finds in CUDRV_TEST_COMMAND_FD.
// Every wait is bounded, and the child is killed and reaped when the object goes.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace cudrv::test {

class child_process {
 public:
  /// Starts this binary with the Catch arguments @p args and the variables @p env ("NAME=VALUE") added.
  child_process(const std::vector<std::string>& args, const std::vector<std::string>& env) {
    int out[2];
    int in[2];
    if (pipe(out) != 0 || pipe(in) != 0) {
      return;
    }
    fcntl(out[0], F_SETFD, FD_CLOEXEC);
    fcntl(in[1], F_SETFD, FD_CLOEXEC);
    const std::string fd_var = "CUDRV_TEST_COMMAND_FD=" + std::to_string(in[0]);
    std::vector<std::string> vars = env;
    vars.push_back(fd_var);
    // argv and the environment are built before the fork: between fork and exec the child makes only
    // async-signal-safe calls (no allocation: another thread may have held the allocator's lock).
    static char self[] = "/proc/self/exe";
    std::vector<char*> argv{self};
    for (const std::string& a : args) {
      argv.push_back(const_cast<char*>(a.c_str()));
    }
    argv.push_back(nullptr);
    const auto replaced = [&vars](const char* entry) {  // the parent's entry for a name the test sets
      return std::any_of(vars.begin(), vars.end(), [entry](const std::string& v) {
        const std::size_t name = v.find('=') + 1;  // "NAME=" (npos + 1 == 0: the whole string)
        return std::strncmp(entry, v.c_str(), name) == 0;
      });
    };
    std::vector<char*> envp;
    for (char** e = environ; *e != nullptr; ++e) {
      if (!replaced(*e)) {
        envp.push_back(*e);
      }
    }
    for (std::string& v : vars) {
      envp.push_back(v.data());
    }
    envp.push_back(nullptr);
    std::fflush(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], 1);
      dup2(out[1], 2);
      close(out[1]);
      execve(self, argv.data(), envp.data());
      _exit(127);
    }
    close(out[1]);
    close(in[0]);
    from_child_ = out[0];
    to_child_ = in[1];
  }
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;
  ~child_process() {
    if (pid_ > 0 && !exit_code_.has_value()) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (from_child_ >= 0) close(from_child_);
    if (to_child_ >= 0) close(to_child_);
  }

  [[nodiscard]] bool started() const { return pid_ > 0; }
  [[nodiscard]] int pid() const { return static_cast<int>(pid_); }
  /// Everything the child printed so far.
  [[nodiscard]] const std::string& output() const { return output_; }

  /// Reads the child's output until a line starting with @p prefix arrives (returned without its
  /// newline), the child closes its output, or @p timeout passes (nullopt for both).
  std::optional<std::string> wait_for_line(const std::string& prefix, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      for (std::size_t start = scanned_, end; (end = output_.find('\n', start)) != std::string::npos; start = end + 1) {
        scanned_ = end + 1;
        if (output_.compare(start, prefix.size(), prefix) == 0) {
          return output_.substr(start, end - start);
        }
      }
      if (!read_some(deadline)) {
        return std::nullopt;
      }
    }
  }

  /// Sends the child one line.
  bool send(const std::string& line) {
    const std::string text = line + "\n";
    return write(to_child_, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  }

  /// Waits up to @p timeout for the child to exit, collecting its output; kills it when the time is up.
  /// Returns its exit status, or -(signal) when a signal ended it (SIGKILL for the timeout).
  int wait(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (read_some(deadline)) {
    }
    int status = 0;
    for (;;) {
      const pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        break;
      }
      usleep(10000);
    }
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    return *exit_code_;
  }

 private:
  // Appends what the child wrote; false at the end of its output or at the deadline.
  bool read_some(std::chrono::steady_clock::time_point deadline) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || from_child_ < 0) {
      return false;
    }
    pollfd p{from_child_, POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(left.count()));
    if (ready <= 0) {
      return ready < 0;  // EINTR: try again; 0: the deadline passed
    }
    char buffer[4096];
    const ssize_t n = read(from_child_, buffer, sizeof(buffer));
    if (n <= 0) {
      close(from_child_);
      from_child_ = -1;
      return false;
    }
    output_.append(buffer, static_cast<std::size_t>(n));
    return true;
  }

  pid_t pid_ = -1;
  int from_child_ = -1;
  int to_child_ = -1;
  std::string output_;
  std::size_t scanned_ = 0;
  std::optional<int> exit_code_;
};

/// In a child: reads the parent's next line from CUDRV_TEST_COMMAND_FD, waiting at most @p timeout
/// (an empty string at the end of input, on a timeout or without the variable).
inline std::string read_command(std::chrono::milliseconds timeout) {
  const char* fd_text = std::getenv("CUDRV_TEST_COMMAND_FD");
  if (fd_text == nullptr) {
    return {};
  }
  const int fd = std::atoi(fd_text);
  std::string line;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return {};
    }
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0) {
      continue;
    }
    if (ready == 0) {
      return {};
    }
    char c = 0;
    if (read(fd, &c, 1) != 1) {
      return {};
    }
    if (c == '\n') {
      return line;
    }
    line += c;
  }
}

}  // namespace cudrv::test
