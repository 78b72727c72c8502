// Shared helpers for the cudrv test suites.
#pragma once

#include <cudaTypedefs.h>
#include <cudrv/cudrv.hpp>
#include <cudrv/rtc.hpp>  // most tests compile their kernels at run time (NVRTC)

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace cudrv::test {

/// Whether the GPU tier can run: a driver is loaded and sees at least one device.
inline bool gpu_available() {
  static const bool available = [] {
    if (!cudrv::driver::available()) {
      return false;
    }
    try {
      return cudrv::device_count() > 0;
    } catch (...) {
      return false;
    }
  }();
  return available;
}

/// Why the GPU tier cannot run, for the skip message.
inline std::string gpu_unavailable_reason() {
  if (!cudrv::driver::available()) {
    return cudrv::driver::unavailable_reason();
  }
  return "the driver sees no device";
}

/// Random bytes from a seed that is printed on failure through Catch's INFO by the caller.
inline std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<std::uint8_t> out(n);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t v = gen();
    for (int b = 0; b < 8; ++b) {
      out[i + b] = static_cast<std::uint8_t>(v >> (8 * b));
    }
  }
  for (; i < n; ++i) {
    out[i] = static_cast<std::uint8_t>(gen());
  }
  return out;
}

/// A seed that differs from run to run (printed by the tests so a failure can be replayed);
/// CUDRV_TEST_SEED fixes it.
inline std::uint64_t test_seed() {
  if (const char* env = std::getenv("CUDRV_TEST_SEED")) {
    return std::strtoull(env, nullptr, 10);
  }
  return std::random_device{}();
}

/// Counts the errors cudrv reports to the destruction handler while it is alive, then restores the
/// handler that was installed before. Use one per test case to check that teardown reported nothing:
/// @code
/// cudrv::test::destruction_error_counter errors;
/// { cudrv::stream s(dev); }
/// CHECK(errors.count() == 0);
/// @endcode
/// The handler may run on a driver thread (host callables of destroyed streams), so the count is atomic.
class destruction_error_counter {
 public:
  destruction_error_counter() {
    state().count.store(0);
    {
      std::lock_guard<std::mutex> lock(state().mutex);
      state().messages.clear();
    }
    previous_ = cudrv::set_destruction_error_handler(&handler);
  }
  destruction_error_counter(const destruction_error_counter&) = delete;
  destruction_error_counter& operator=(const destruction_error_counter&) = delete;
  ~destruction_error_counter() { cudrv::set_destruction_error_handler(previous_); }

  /// The number of errors reported since construction.
  [[nodiscard]] int count() const { return state().count.load(); }
  /// The what() of every error reported, one per line.
  [[nodiscard]] std::string messages() const {
    std::lock_guard<std::mutex> lock(state().mutex);
    return state().messages;
  }

 private:
  struct shared_state {
    std::atomic<int> count{0};
    std::mutex mutex;
    std::string messages;
  };
  static shared_state& state() {
    static shared_state s;
    return s;
  }
  static void handler(const cudrv::error& e) noexcept {
    try {
      std::lock_guard<std::mutex> lock(state().mutex);
      state().messages += e.what();
      state().messages += '\n';
    } catch (...) {
    }
    state().count.fetch_add(1);
  }
  cudrv::destruction_error_handler previous_ = nullptr;
};

/// Runs @p f and returns the exception of type E it threw, or nothing when it returned normally.
/// Exceptions of other types propagate, so Catch reports them with their message.
template <class E, class F>
std::optional<E> catch_as(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e;
  }
  return std::nullopt;
}

/// Whether @p text contains @p part.
inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// Polls @p done until it returns true or @p timeout passes; returns its last value.
template <class Pred>
bool wait_until(Pred&& done, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) {
      return done();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

/// Holds a stream's later work back until open() is called (or 10 s pass, so a failed test cannot
/// hang). blocker() is the host callable to enqueue; it shares the flag, so it may outlive the gate:
/// @code
/// cudrv::test::gate g;
/// s.enqueue(g.blocker());
/// CHECK_FALSE(s.is_done());
/// g.open();
/// @endcode
struct gate {
  std::shared_ptr<std::atomic<bool>> opened = std::make_shared<std::atomic<bool>>(false);
  auto blocker() const {
    return [opened = opened] { wait_until([&] { return opened->load(); }, std::chrono::seconds(10)); };
  }
  void open() const { opened->store(true); }
};

/// The calling thread's current context straight from the driver (null when none is current),
/// bypassing cudrv so tests can check what cudrv leaves current.
inline CUcontext raw_current_context() {
  auto fn = reinterpret_cast<PFN_cuCtxGetCurrent_v4000>(cudrv::driver::get_entry_point("cuCtxGetCurrent", 4000));
  CUcontext ctx = nullptr;
  if (CUresult status = fn(&ctx); status != CUDA_SUCCESS) {
    throw cudrv::error(status, "cuCtxGetCurrent (test)");
  }
  return ctx;
}

/// Makes @p ctx current (null: none) straight through the driver.
inline void raw_set_current_context(CUcontext ctx) {
  auto fn = reinterpret_cast<PFN_cuCtxSetCurrent_v4000>(cudrv::driver::get_entry_point("cuCtxSetCurrent", 4000));
  if (CUresult status = fn(ctx); status != CUDA_SUCCESS) {
    throw cudrv::error(status, "cuCtxSetCurrent (test)");
  }
}

/// The library path that the driver-less test tier points CUDRV_LIBCUDA at (ctest sets it).
inline constexpr const char* driverless_library = "/nonexistent/libcuda.so.1";

/// Whether this process runs without a driver: CUDRV_LIBCUDA names a library that does not exist
/// (as ctest arranges for the [driverless] tests), or the machine has no driver at all.
inline bool driverless() {
  const char* env = std::getenv("CUDRV_LIBCUDA");
  if (env != nullptr && std::strcmp(env, driverless_library) == 0) {
    return true;
  }
  return !cudrv::driver::available();
}

}  // namespace cudrv::test

/// Ends the current GPU test case with a visible skip message when no GPU is usable. ctest marks
/// such a test "Skipped" through SKIP_REGULAR_EXPRESSION "SKIPPED: no CUDA device".
#define CUDRV_REQUIRE_GPU()                                                                                    \
  do {                                                                                                         \
    if (!::cudrv::test::gpu_available()) {                                                                     \
      std::cout << "SKIPPED: no CUDA device (" << ::cudrv::test::gpu_unavailable_reason() << ")" << std::endl; \
      return;                                                                                                  \
    }                                                                                                          \
  } while (0)

/// Starts a GPU test case that needs @p n devices: skips it, saying so ("SKIPPED: needs ..."), where no
/// GPU is usable or fewer than @p n are visible. ctest counts the message as a skip.
#define CUDRV_REQUIRE_GPUS(n)                                                                                  \
  do {                                                                                                         \
    CUDRV_REQUIRE_GPU();                                                                                       \
    if (::cudrv::device_count() < (n)) {                                                                       \
      std::cout << "SKIPPED: needs " << (n) << " devices (this machine has " << ::cudrv::device_count() << ")" \
                << std::endl;                                                                                  \
      return;                                                                                                  \
    }                                                                                                          \
  } while (0)

/// Starts a [driverless] test case: they need a process in which no driver can be loaded. ctest runs
/// them with CUDRV_LIBCUDA=/nonexistent/libcuda.so.1; run by hand on a machine with a driver they
/// end early with a message instead of failing.
#define CUDRV_REQUIRE_DRIVERLESS()                                                                                  \
  do {                                                                                                              \
    if (!::cudrv::test::driverless()) {                                                                             \
      std::cout << "SKIPPED: a CUDA driver is loaded; run with CUDRV_LIBCUDA=" << ::cudrv::test::driverless_library \
                << " (ctest does)" << std::endl;                                                                    \
      return;                                                                                                       \
    }                                                                                                               \
  } while (0)
