// profiler_range (issue 34 part 9): cuProfilerStart/cuProfilerStop as a counted scoped range.
#include "cudrv/profiler.hpp"

#include <mutex>
#include <utility>
#include <vector>

#include "cudrv/error.hpp"
#include "driver/driver_api.hpp"

namespace cudrv {
namespace {

// The open ranges per context, for the whole process. Never destroyed: a static range may end at exit.
struct open_counts {
  std::mutex mutex;
  std::vector<std::pair<CUcontext, int>> by_context;

  int& of(CUcontext ctx) {
    for (auto& [c, n] : by_context) {
      if (c == ctx) {
        return n;
      }
    }
    return by_context.emplace_back(ctx, 0).second;
  }
};

open_counts& counts() {
  static auto* c = new open_counts;
  return *c;
}

}  // namespace

profiler_range::profiler_range(context_ref ctx) : ctx_(ctx.native_handle()) {
  if (ctx_ == nullptr) [[unlikely]] {
    throw invalid_argument_error("cudrv::profiler_range",
                                 "the context is empty (a moved-from or released cudrv::context)");
  }
  open_counts& c = counts();
  std::lock_guard<std::mutex> lock(c.mutex);
  int& open = c.of(ctx_);
  if (open == 0) {
    context_guard guard{ctx};
    detail::check(detail::drv::cuProfilerStart(), "cuProfilerStart");
  }
  ++open;
}

profiler_range& profiler_range::operator=(profiler_range&& other) noexcept {
  if (this != &other) {
    close();
    ctx_ = std::exchange(other.ctx_, nullptr);
  }
  return *this;
}

profiler_range::~profiler_range() { close(); }

void profiler_range::close() noexcept {
  if (ctx_ == nullptr) {
    return;
  }
  const CUcontext ctx = std::exchange(ctx_, nullptr);
  try {
    open_counts& c = counts();
    std::lock_guard<std::mutex> lock(c.mutex);  // held across the stop: a range opening now starts after it
    if (--c.of(ctx) > 0) {
      return;
    }
    detail::destroy_noexcept("cuProfilerStop", [ctx] {
      context_guard guard{context_ref(ctx)};
      return detail::drv::cuProfilerStop();
    });
  } catch (...) {
    // std::mutex::lock failed (a system error): the count stays as it was, the profiler runs on
  }
}

void profiler_range::end() {
  if (ctx_ == nullptr) {
    return;
  }
  const CUcontext ctx = std::exchange(ctx_, nullptr);
  open_counts& c = counts();
  std::lock_guard<std::mutex> lock(c.mutex);
  if (--c.of(ctx) > 0) {
    return;
  }
  context_guard guard{context_ref(ctx)};
  detail::check(detail::drv::cuProfilerStop(), "cuProfilerStop");
}

int profiler_range::open_ranges(context_ref ctx) noexcept {
  try {
    open_counts& c = counts();
    std::lock_guard<std::mutex> lock(c.mutex);
    for (const auto& [handle, n] : c.by_context) {
      if (handle == ctx.native_handle()) {
        return n;
      }
    }
  } catch (...) {
  }
  return 0;
}

}  // namespace cudrv
