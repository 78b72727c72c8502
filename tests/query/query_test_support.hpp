// Shared by the cudrv-query tests: running the tool (or any program) as a child process, and
// validating JSON against docs/cudrv-query.schema.json with the Python jsonschema package.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

extern char** environ;

namespace query_test {

#ifndef CUDRV_TEST_QUERY_PATH
#error "CUDRV_TEST_QUERY_PATH must name the cudrv-query binary"
#endif

/// What a child process did.
struct process_result {
  int exit_code = -1;  ///< its exit status (128 + signal when killed)
  std::string out;     ///< stdout
  std::string err;     ///< stderr
};

/// A temporary file, removed at destruction.
class temp_file {
 public:
  temp_file() {
    char name[] = "/tmp/cudrv_query_test_XXXXXX";
    int fd = mkstemp(name);
    if (fd < 0) {
      throw std::runtime_error("mkstemp failed");
    }
    close(fd);
    path_ = name;
  }
  temp_file(const temp_file&) = delete;
  temp_file& operator=(const temp_file&) = delete;
  ~temp_file() { std::remove(path_.c_str()); }
  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] std::string read() const {
    std::ifstream in(path_, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  std::string path_;
};

/// This process's environment, changed by @p set ("NAME=value") and @p unset ("NAME").
inline std::vector<std::string> environment(const std::vector<std::string>& set,
                                            const std::vector<std::string>& unset) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    std::string name = entry.substr(0, entry.find('='));
    bool drop = false;
    for (const std::string& u : unset) drop = drop || name == u;
    for (const std::string& s : set) drop = drop || name == s.substr(0, s.find('='));
    if (!drop) env.push_back(entry);
  }
  for (const std::string& s : set) env.push_back(s);
  return env;
}

/// The argument and environment arrays posix_spawn takes (each ends in a null pointer), pointing into
/// strings this object owns: keep it alive until the spawn returns. Neither copied nor moved, so that
/// the pointers stay valid.
struct spawn_arrays {
  std::vector<std::string> args;
  std::vector<std::string> env;
  std::vector<char*> argp;
  std::vector<char*> envp;

  spawn_arrays(std::vector<std::string> a, std::vector<std::string> e) : args(std::move(a)), env(std::move(e)) {
    for (std::string& x : args) argp.push_back(x.data());
    argp.push_back(nullptr);
    for (std::string& x : env) envp.push_back(x.data());
    envp.push_back(nullptr);
  }
  spawn_arrays(const spawn_arrays&) = delete;
  spawn_arrays& operator=(const spawn_arrays&) = delete;
};

/// cudrv-query's path followed by @p args: the argument vector of a cudrv-query run.
inline std::vector<std::string> query_argv(const std::vector<std::string>& args) {
  std::vector<std::string> argv{CUDRV_TEST_QUERY_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

/// Runs @p argv (argv[0] searched on PATH) with the environment of this process, changed by
/// @p set ("NAME=value") and @p unset ("NAME"); stdout and stderr are captured.
inline process_result run_process(const std::vector<std::string>& argv, const std::vector<std::string>& set = {},
                                  const std::vector<std::string>& unset = {}) {
  spawn_arrays spawn(argv, environment(set, unset));

  temp_file out;
  temp_file err;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out.path().c_str(), O_WRONLY | O_TRUNC, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err.path().c_str(), O_WRONLY | O_TRUNC, 0);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, spawn.argp[0], &actions, nullptr, spawn.argp.data(), spawn.envp.data());
  posix_spawn_file_actions_destroy(&actions);
  process_result r;
  if (rc != 0) {
    r.err = "posix_spawnp(" + argv[0] + ") failed: error " + std::to_string(rc);
    return r;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = out.read();
  r.err = err.read();
  return r;
}

/// Runs cudrv-query with @p args, its stdout on descriptor @p stdout_fd of this process (a file open on
/// /dev/full, the write end of a pipe), with SIGPIPE ignored in the child when @p ignore_sigpipe (an
/// ignored signal stays ignored across exec); stderr is captured, out stays empty.
inline process_result run_query_to(int stdout_fd, const std::vector<std::string>& args,
                                   const std::vector<std::string>& set = {}, bool ignore_sigpipe = false) {
  spawn_arrays spawn(query_argv(args), environment(set, {}));

  temp_file err;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, stdout_fd, STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err.path().c_str(), O_WRONLY | O_TRUNC, 0);
  struct sigaction ignore {};
  struct sigaction previous {};
  ignore.sa_handler = SIG_IGN;
  if (ignore_sigpipe) sigaction(SIGPIPE, &ignore, &previous);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, spawn.argp[0], &actions, nullptr, spawn.argp.data(), spawn.envp.data());
  if (ignore_sigpipe) sigaction(SIGPIPE, &previous, nullptr);
  posix_spawn_file_actions_destroy(&actions);
  process_result r;
  if (rc != 0) {
    r.err = "posix_spawn(" + spawn.args[0] + ") failed: error " + std::to_string(rc);
    return r;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.err = err.read();
  return r;
}

/// Runs cudrv-query with @p args.
inline process_result run_query(const std::vector<std::string>& args, const std::vector<std::string>& set = {},
                                const std::vector<std::string>& unset = {}) {
  return run_process(query_argv(args), set, unset);
}

/// The environment setting that hides the driver from cudrv-query.
inline const std::string no_driver = "CUDRV_LIBCUDA=/nonexistent/libcuda.so.1";

/// The Python interpreter that has jsonschema: $CUDRV_TEST_PYTHON, else the one CMake found, else python3.
inline std::string python() {
  if (const char* p = std::getenv("CUDRV_TEST_PYTHON"); p != nullptr && *p != '\0') {
    return p;
  }
  std::string configured = CUDRV_TEST_PYTHON;
  if (!configured.empty() && access(configured.c_str(), X_OK) == 0) {
    return configured;
  }
  return "python3";
}

/// Validates @p text against docs/cudrv-query.schema.json; returns the validator's report and sets
/// @p valid. A missing jsonschema package is reported as invalid (with the reason), never skipped.
inline std::string validate(const std::string& text, bool& valid) {
  temp_file doc;
  {
    std::ofstream f(doc.path(), std::ios::binary);
    f << text;
  }
  process_result r = run_process({python(), CUDRV_TEST_VALIDATOR, CUDRV_TEST_SCHEMA, doc.path()});
  valid = r.exit_code == 0;
  return "validator exit " + std::to_string(r.exit_code) + ": " + r.out + r.err;
}

/// Parses JSON, failing the test with the text when it is not JSON.
inline nlohmann::json parse(const std::string& text) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::runtime_error(std::string("not JSON (") + e.what() + "):\n" + text);
  }
}

/// The number of lines in @p s (a last line without a newline counts).
inline int line_count(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n + (!s.empty() && s.back() != '\n' ? 1 : 0);
}

}  // namespace query_test

/// Requires that @p text validates against the schema, printing the validator's report otherwise.
#define REQUIRE_SCHEMA_VALID(text)                                                    \
  do {                                                                                \
    bool query_test_valid_ = false;                                                   \
    std::string query_test_report_ = ::query_test::validate(text, query_test_valid_); \
    INFO(query_test_report_);                                                         \
    REQUIRE(query_test_valid_);                                                       \
  } while (0)
