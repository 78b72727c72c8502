// Internal: the automatic NVTX ranges that cudrv puts around its launches, copies, fills and graph
// launches when cudrv::nvtx::enable_automatic_ranges(true) (or CUDRV_NVTX_AUTO=1) asks for them.
// See docs/nvtx.md.
//
// Usage, as the first statement of the function to annotate:
//
//   CUDRV_NVTX_AUTOMATIC_RANGE("cudrv::copy", [bytes] { return std::to_string(bytes) + " bytes"; });
//   CUDRV_NVTX_AUTOMATIC_RANGE("cudrv::graph_launch");
//
// The range is pushed in the cudrv domain with the message "<prefix> <detail>" and popped when the
// enclosing scope is left, by a return or by an exception. The detail callable (returning a
// std::string, a std::string_view or a const char*) is built and run only when automatic ranges are
// on; an exception it throws is swallowed and the range carries the prefix alone. Capture by value
// what it needs (by reference, the captured parameters would have to live in memory).
//
// When automatic ranges are off, the cost is one relaxed atomic load and a predictable branch on
// entry, and the test of a flag kept in a register on exit (small functions lose even that). With
// CUDRV_DISABLE_NVTX the macro expands to nothing that runs, and the detail callable is not even
// compiled.
//
// This header does not include nvtx3: the pushes and pops are out of line, in src/streams/nvtx.cpp.
#pragma once

#if !defined(CUDRV_DISABLE_NVTX)

#include <atomic>
#include <string_view>
#include <type_traits>

#if defined(__GNUC__)
#define CUDRV_NVTX_HIDDEN __attribute__((visibility("hidden")))
#define CUDRV_NVTX_COLD __attribute__((noinline, cold))
#else
#define CUDRV_NVTX_HIDDEN
#define CUDRV_NVTX_COLD
#endif

namespace cudrv::detail {

// The switch of the automatic ranges. Unresolved until the first query, which reads CUDRV_NVTX_AUTO
// unless enable_automatic_ranges has already set it; then off or on for good (until the next
// enable_automatic_ranges).
inline constexpr int nvtx_auto_unresolved = 0;
inline constexpr int nvtx_auto_off = 1;
inline constexpr int nvtx_auto_on = 2;
CUDRV_NVTX_HIDDEN extern std::atomic<int> nvtx_auto_state;

// Resolves an unresolved state from CUDRV_NVTX_AUTO (read at most once per process) and returns
// whether the ranges are on.
bool nvtx_auto_resolve() noexcept;
// Pushes "<prefix> <detail>" (or "<prefix>" when detail is empty) in the cudrv domain.
void nvtx_auto_push(const char* prefix, std::string_view detail) noexcept;
// Pops the range nvtx_auto_push pushed on this thread.
void nvtx_auto_pop() noexcept;

// Whether the automatic ranges are on: one relaxed load and a branch when they are off.
inline bool automatic_ranges_active() noexcept {
  const int state = nvtx_auto_state.load(std::memory_order_relaxed);
  if (state == nvtx_auto_off) [[likely]] {
    return false;
  }
  return state == nvtx_auto_on || nvtx_auto_resolve();
}

// The RAII range behind CUDRV_NVTX_AUTOMATIC_RANGE: it pops on destruction when it was constructed
// with true, i.e. when begin() pushed, so switching the ranges off or on while it is alive still pops
// exactly what was pushed. The macro evaluates begin(), and builds the detail callable, only when the
// ranges are on; the object's address never escapes, so the flag lives in a register.
class automatic_range {
 public:
  explicit automatic_range(bool pushed) noexcept : pushed_(pushed) {}
  automatic_range(const automatic_range&) = delete;
  automatic_range& operator=(const automatic_range&) = delete;
  ~automatic_range() {
    if (pushed_) [[unlikely]] {
      nvtx_auto_pop();
    }
  }

  // Pushes "<prefix>"; returns true.
  CUDRV_NVTX_COLD static bool begin(const char* prefix) noexcept {
    nvtx_auto_push(prefix, {});
    return true;
  }
  // Pushes "<prefix> <detail()>"; returns true. An exception from detail leaves the prefix alone.
  template <class Detail>
  CUDRV_NVTX_COLD static bool begin(const char* prefix, Detail&& detail) noexcept {
    static_assert(std::is_invocable_v<Detail&>, "CUDRV_NVTX_AUTOMATIC_RANGE: the detail must be a callable");
    try {
      const auto text = detail();
      if constexpr (std::is_pointer_v<std::decay_t<decltype(text)>>) {
        nvtx_auto_push(prefix, text != nullptr ? std::string_view(text) : std::string_view());
      } else {
        nvtx_auto_push(prefix, std::string_view(text));
      }
    } catch (...) {
      nvtx_auto_push(prefix, {});
    }
    return true;
  }

 private:
  bool pushed_;
};

}  // namespace cudrv::detail

#define CUDRV_NVTX_CONCAT_INNER(a, b) a##b
#define CUDRV_NVTX_CONCAT(a, b) CUDRV_NVTX_CONCAT_INNER(a, b)
/// An automatic range around the rest of the enclosing scope: CUDRV_NVTX_AUTOMATIC_RANGE(prefix) or
/// CUDRV_NVTX_AUTOMATIC_RANGE(prefix, detail_callable).
#define CUDRV_NVTX_AUTOMATIC_RANGE(...)                                                            \
  const ::cudrv::detail::automatic_range CUDRV_NVTX_CONCAT(cudrv_nvtx_automatic_range_, __LINE__)( \
      ::cudrv::detail::automatic_ranges_active() ? ::cudrv::detail::automatic_range::begin(__VA_ARGS__) : false)

#else  // CUDRV_DISABLE_NVTX

namespace cudrv::detail {
inline constexpr bool automatic_ranges_active() noexcept { return false; }
}  // namespace cudrv::detail

#define CUDRV_NVTX_AUTOMATIC_RANGE(...) static_cast<void>(0)

#endif  // CUDRV_DISABLE_NVTX
