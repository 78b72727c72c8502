// The driver's log in errors (issue 34 part 2): the callback registered with the driver, the per-thread
// ring of its lines, and the switch. See driver_log.hpp and docs/reliability.md, "The driver's log in errors".
#include "driver/driver_log.hpp"

#include <time.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "cudrv/driver.hpp"
#include "cudrv/error.hpp"
#include "driver/driver_api.hpp"

namespace cudrv::detail {
namespace {

// The bounds (documented in docs/reliability.md and error::driver_log).
constexpr std::size_t ring_lines = 8;
constexpr std::size_t line_capacity = 512;                   // bytes with the terminating NUL
constexpr std::int64_t max_age_ns = 1'000'000'000;           // a line older than this when the error is built
constexpr const char* switch_variable = "CUDRV_DRIVER_LOG";  // "0": off at load

struct ring_line {
  std::int64_t time_ns;
  std::uint32_t length;
  bool forgotten;  // forget_driver_log_since: no error takes it
  char text[line_capacity];
};

// One per thread, zero-initialised and trivially destructible: the callback may run on any thread, at any
// time (also during and after static destruction) without allocating, locking or touching a destroyed object.
struct thread_ring {
  std::uint64_t written;  // lines written on this thread so far
  std::uint64_t taken;    // lines [0, taken) were taken by an error (or are past the ring)
  ring_line lines[ring_lines];
};
thread_local thread_ring ring{};

// -1: not decided yet (CUDRV_DRIVER_LOG decides when the driver loads), 0 off, 1 on.
std::atomic<int> switch_state{-1};

std::int64_t now_ns() noexcept {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);  // vDSO: no system call, no allocation
  return static_cast<std::int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

bool switched_on_by_environment() noexcept {
  const char* value = std::getenv(switch_variable);
  return value == nullptr || std::strcmp(value, "0") != 0;
}

// The switch, decided from the environment the first time it is read.
bool switched_on() noexcept {
  int state = switch_state.load(std::memory_order_acquire);
  if (state < 0) {
    switch_state.compare_exchange_strong(state, switched_on_by_environment() ? 1 : 0, std::memory_order_acq_rel);
    state = switch_state.load(std::memory_order_acquire);
  }
  return state == 1;
}

#if CUDRV_HAS_DRIVER_LOG
// Set when the process is exiting (the unregistering object below is destroyed): the callback does nothing.
std::atomic<bool> shutting_down{false};

// Called by the driver on the thread of the call that logs, before that call returns (what the probe of
// driver 580.159.04 saw; the GPU test "two threads failing at once" checks it: were it another thread,
// errors would carry no lines, never wrong ones). Never throws, never allocates, never locks; the ring
// is the calling thread's own.
void CUDA_CB on_driver_log(void* /*data*/, CUlogLevel /*level*/, char* message, std::size_t length) noexcept {
  if (message == nullptr || shutting_down.load(std::memory_order_relaxed) ||
      switch_state.load(std::memory_order_relaxed) != 1) {
    return;
  }
  std::size_t n = 0;
  while (n < length && n < line_capacity - 1 && message[n] != '\0') {
    ++n;
  }
  while (n > 0 && (message[n - 1] == '\n' || message[n - 1] == '\r' || message[n - 1] == ' ')) {
    --n;  // the driver's lines may end with a newline: what() puts each on a line of its own
  }
  if (n == 0) {
    return;
  }
  thread_ring& r = ring;
  ring_line& line = r.lines[r.written % ring_lines];
  std::memcpy(line.text, message, n);
  line.text[n] = '\0';
  line.length = static_cast<std::uint32_t>(n);
  line.time_ns = now_ns();
  line.forgotten = false;
  ++r.written;
}

// The registration, made once (at load, or when the switch is turned on later) and undone at exit.
// Constant-initialised and trivially destructible: usable at any time, also at exit, and nothing to
// allocate (the first use is in the driver's loading, where an allocation failure could not be reported).
struct registration {
  std::mutex mutex;
  bool have_entry_points = false;
  CUlogsCallbackHandle handle = nullptr;
  bool registered = false;
};
constinit registration registration_state;
registration& reg() { return registration_state; }

// Unregisters the callback when the process exits (or when a shared libcudrv is unloaded, whose code the
// driver must not call afterwards). Constructed at the first registration, which comes after cuInit: it is
// destroyed before the driver's own exit handlers run.
struct unregister_at_exit {
  unregister_at_exit() = default;
  unregister_at_exit(const unregister_at_exit&) = delete;
  unregister_at_exit& operator=(const unregister_at_exit&) = delete;
  ~unregister_at_exit() {
    shutting_down.store(true, std::memory_order_relaxed);
    registration& r = reg();
    std::lock_guard<std::mutex> lock(r.mutex);
    if (r.registered && !in_forked_child()) {
      (void)drv::cuLogsUnregisterCallback(r.handle);  // a prefilled entry: no resolution, no throw
    }
    r.registered = false;
  }
};

// Registers the callback once, under reg().mutex. Never throws.
void register_locked(registration& r) noexcept {
  if (r.registered || !r.have_entry_points || in_forked_child()) {
    return;
  }
  CUlogsCallbackHandle handle = nullptr;
  if (drv::cuLogsRegisterCallback(&on_driver_log, nullptr, &handle) == CUDA_SUCCESS) {
    r.handle = handle;
    r.registered = true;
    static unregister_at_exit at_exit;
  }
}
#endif

}  // namespace

void start_driver_log(void* register_fn, void* unregister_fn) noexcept {
#if CUDRV_HAS_DRIVER_LOG
  if (register_fn == nullptr || unregister_fn == nullptr) {
    return;  // a driver before CUDA 12.9: nothing changes
  }
  drv::cuLogsRegisterCallback_entry.fn.store(reinterpret_cast<PFN_cuLogsRegisterCallback_v12090>(register_fn),
                                             std::memory_order_release);
  drv::cuLogsUnregisterCallback_entry.fn.store(reinterpret_cast<PFN_cuLogsUnregisterCallback_v12090>(unregister_fn),
                                               std::memory_order_release);
  registration& r = reg();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.have_entry_points = true;
  if (switched_on()) {
    register_locked(r);
  }
#else
  (void)register_fn;
  (void)unregister_fn;
#endif
}

std::vector<std::string> take_driver_log() noexcept {
  thread_ring& r = ring;
  if (r.written == r.taken) {
    return {};
  }
  const std::uint64_t first = r.written - r.taken > ring_lines ? r.written - ring_lines : r.taken;
  const std::uint64_t end = r.written;
  r.taken = end;
  std::vector<std::string> lines;
  if (switch_state.load(std::memory_order_relaxed) != 1) {
    return lines;
  }
  const std::int64_t now = now_ns();
  try {
    for (std::uint64_t i = first; i < end; ++i) {
      const ring_line& line = r.lines[i % ring_lines];
      if (!line.forgotten && now - line.time_ns <= max_age_ns) {
        lines.emplace_back(line.text, line.length);
      }
    }
  } catch (...) {
    // no memory for the lines: the error goes without them (or with those copied so far)
  }
  return lines;
}

std::uint64_t driver_log_mark() noexcept { return ring.written; }

void forget_driver_log_since(std::uint64_t mark) noexcept {
  thread_ring& r = ring;
  const std::uint64_t first = r.written - mark > ring_lines ? r.written - ring_lines : mark;
  for (std::uint64_t i = first; i < r.written; ++i) {
    r.lines[i % ring_lines].forgotten = true;
  }
}

}  // namespace cudrv::detail

namespace cudrv {

bool set_driver_log_enabled(bool enabled) noexcept {
  const bool previous = detail::switched_on();
  detail::switch_state.store(enabled ? 1 : 0, std::memory_order_release);
#if CUDRV_HAS_DRIVER_LOG
  if (enabled) {
    detail::registration& r = detail::reg();
    std::lock_guard<std::mutex> lock(r.mutex);
    detail::register_locked(r);  // where the environment kept it off at load
  }
#endif
  return previous;
}

bool driver_log_enabled() noexcept { return detail::switched_on(); }

bool driver_log_active() noexcept {
#if CUDRV_HAS_DRIVER_LOG
  if (!driver::available() || !detail::switched_on()) {
    return false;
  }
  detail::registration& r = detail::reg();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.registered;
#else
  return false;
#endif
}

}  // namespace cudrv
