// A watchdog for the multi-GPU tests: turns a hang (a rank stuck in an NCCL collective, in NCCL's
// initialization or in MPI, waiting for a peer that will never come) into a reported failure.
//
// One thread per process checks a deadline every 100 ms. A watchdog_scope sets the deadline and a
// label for what is running; leaving the scope puts the enclosing one back. When a deadline passes,
// the thread prints "<prefix><failure text>TIMEOUT: <label> did not finish within <n> s ..." to
// stdout and stderr and ends the process with std::_Exit(124) (the exit status of timeout(1)), so
// ctest shows a failure with a reason instead of its own TIMEOUT, and mpirun takes the job down.
//
// CUDRV_TEST_TIMEOUT_SCALE (a positive number, default 1) multiplies every limit, for slow runs
// such as compute-sanitizer's.
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

namespace cudrv::test::multigpu {

class watchdog {
 public:
  using clock = std::chrono::steady_clock;

  /// What a scope replaced, to be put back when it ends.
  struct armed {
    std::string label;
    clock::time_point deadline = clock::time_point::max();
    std::chrono::duration<double> limit{0};
  };

  /// The process's watchdog; its thread starts on first use and runs until the process ends (the
  /// object is never destroyed, so the thread never sees it go away).
  static watchdog& instance() {
    static watchdog* w = new watchdog;
    return *w;
  }

  /// Put in front of every line it prints (e.g. "[rank 1/2] ").
  void set_prefix(std::string prefix) {
    std::lock_guard<std::mutex> lock(mutex_);
    prefix_ = std::move(prefix);
  }
  /// Put in front of "TIMEOUT" (e.g. "FAULT TEST FAILED: ", for a ctest FAIL_REGULAR_EXPRESSION).
  void set_failure_text(std::string text) {
    std::lock_guard<std::mutex> lock(mutex_);
    failure_text_ = std::move(text);
  }

  /// Sets the deadline to now + limit (scaled by CUDRV_TEST_TIMEOUT_SCALE) for @p label; returns
  /// what was armed before.
  armed arm(std::string label, std::chrono::duration<double> limit) {
    const std::chrono::duration<double> scaled = limit * scale();
    std::lock_guard<std::mutex> lock(mutex_);
    armed previous = current_;
    current_.label = std::move(label);
    current_.limit = scaled;
    current_.deadline = clock::now() + std::chrono::duration_cast<clock::duration>(scaled);
    return previous;
  }
  /// Puts back what arm() returned.
  void restore(armed previous) {
    std::lock_guard<std::mutex> lock(mutex_);
    current_ = std::move(previous);
  }

  /// CUDRV_TEST_TIMEOUT_SCALE, or 1.
  static double scale() {
    static const double s = [] {
      const char* env = std::getenv("CUDRV_TEST_TIMEOUT_SCALE");
      const double v = env != nullptr ? std::strtod(env, nullptr) : 1.0;
      return v > 0 ? v : 1.0;
    }();
    return s;
  }

 private:
  watchdog() {
    std::thread([this] { run(); }).detach();
  }

  void run() {
    while (true) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      std::string line;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (clock::now() < current_.deadline) {
          continue;
        }
        line = prefix_ + failure_text_ + "TIMEOUT: " + current_.label + " did not finish within " +
               std::to_string(static_cast<long>(current_.limit.count())) +
               " s (a rank is probably waiting in NCCL or MPI for a peer that will not come); ending the "
               "process with exit code 124 instead of hanging\n";
      }
      std::fputs(line.c_str(), stdout);
      std::fflush(stdout);
      std::fputs(line.c_str(), stderr);
      std::fflush(stderr);
      std::_Exit(124);
    }
  }

  std::mutex mutex_;
  armed current_;
  std::string prefix_;
  std::string failure_text_;
};

/// Arms the watchdog for the lifetime of the scope.
/// @code
/// cudrv::test::multigpu::watchdog_scope guard("ncclCommInitRank on a shared device", std::chrono::seconds(90));
/// @endcode
class watchdog_scope {
 public:
  watchdog_scope(std::string label, std::chrono::duration<double> limit)
      : previous_(watchdog::instance().arm(std::move(label), limit)) {}
  watchdog_scope(const watchdog_scope&) = delete;
  watchdog_scope& operator=(const watchdog_scope&) = delete;
  ~watchdog_scope() { watchdog::instance().restore(std::move(previous_)); }

 private:
  watchdog::armed previous_;
};

}  // namespace cudrv::test::multigpu
