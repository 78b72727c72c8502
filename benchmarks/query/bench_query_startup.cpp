// bench_query_startup: wall time of cudrv-query's default view against a bare program that only runs
// cuInit and lists the devices (bare_enumerate), and against nvidia-smi, as whole processes.
//
// Each round starts every command once, in an order that rotates from round to round, with stdout
// and stderr sent to /dev/null; the time is from posix_spawn to the end of waitpid. Reported: the
// median and minimum per command over the rounds, and for cudrv-query the paired ratio (the median
// over the rounds of cudrv-query / bare in the same round). One untimed round first.
//
//   bench_query_startup [--quick] [--rounds N]
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

#ifndef CUDRV_QUERY_PATH
#error "CUDRV_QUERY_PATH must name the cudrv-query binary"
#endif
#ifndef CUDRV_BARE_ENUMERATE_PATH
#error "CUDRV_BARE_ENUMERATE_PATH must name the bare_enumerate binary"
#endif

namespace {

struct command {
  std::string label;
  std::vector<std::string> argv;
  std::vector<std::string> extra_env;
  std::vector<double> ms;
  int last_status = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

bool on_path(const char* name) {
  const char* path = std::getenv("PATH");
  std::string p = path != nullptr ? path : "";
  std::size_t start = 0;
  while (start <= p.size()) {
    std::size_t end = p.find(':', start);
    std::string dir = p.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!dir.empty() && access((dir + "/" + name).c_str(), X_OK) == 0) {
      return true;
    }
    if (end == std::string::npos) {
      break;
    }
    start = end + 1;
  }
  return false;
}

// Runs the command once; returns wall milliseconds (negative when it could not be started).
double run_once(command& c) {
  std::vector<char*> argv;
  for (std::string& a : c.argv) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_storage;
  for (char** e = environ; *e != nullptr; ++e) env_storage.emplace_back(*e);
  for (const std::string& e : c.extra_env) env_storage.push_back(e);
  std::vector<char*> envp;
  for (std::string& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  auto t0 = std::chrono::steady_clock::now();
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    return -1;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  auto t1 = std::chrono::steady_clock::now();
  c.last_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 21;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      rounds = 7;
    } else if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--rounds N]\n", argv[0]);
      return 1;
    }
  }
  std::vector<command> commands;
  commands.push_back({"bare cuInit + enumerate", {CUDRV_BARE_ENUMERATE_PATH}, {}, {}});
  commands.push_back({"cudrv-query", {CUDRV_QUERY_PATH}, {}, {}});
  commands.push_back({"cudrv-query --json", {CUDRV_QUERY_PATH, "--json"}, {}, {}});
  commands.push_back(
      {"cudrv-query, no NVML", {CUDRV_QUERY_PATH}, {"CUDRV_LIBNVML=/nonexistent/libnvidia-ml.so.1"}, {}});
  commands.push_back({"cudrv-query --details", {CUDRV_QUERY_PATH, "--details"}, {}, {}});
  if (on_path("nvidia-smi")) {
    commands.push_back({"nvidia-smi -q", {"nvidia-smi", "-q"}, {}, {}});
    commands.push_back({"nvidia-smi -L", {"nvidia-smi", "-L"}, {}, {}});
  }
  // Untimed round; stop when the baseline or cudrv-query cannot run here (no driver, no device).
  for (command& c : commands) {
    if (run_once(c) < 0 || (c.last_status != 0 && &c - commands.data() < 2)) {
      std::fprintf(stderr, "bench_query_startup: '%s' failed (status %d); a GPU and its driver are needed\n",
                   c.label.c_str(), c.last_status);
      return c.last_status == 0 ? 4 : c.last_status;
    }
  }
  std::vector<double> ratio;
  for (int r = 0; r < rounds; ++r) {
    for (std::size_t k = 0; k < commands.size(); ++k) {
      command& c = commands[(k + static_cast<std::size_t>(r)) % commands.size()];
      c.ms.push_back(run_once(c));
    }
    ratio.push_back(commands[1].ms.back() / commands[0].ms.back());
  }
  std::printf("bench_query_startup: %d rounds, wall time per process (ms)\n", rounds);
  std::printf("  %-28s %9s %9s\n", "command", "median", "min");
  for (const command& c : commands) {
    std::printf("  %-28s %9.1f %9.1f\n", c.label.c_str(), median(c.ms), *std::min_element(c.ms.begin(), c.ms.end()));
  }
  std::printf("  cudrv-query / bare (paired median): %.3f  (target <= 1.1)\n", median(ratio));
  return 0;
}
