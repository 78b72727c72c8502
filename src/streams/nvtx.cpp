// NVTX: naming of CUDA objects, and the switch and the pushes of the automatic ranges.
#include "cudrv/nvtx.hpp"

#include <string>

#include "cudrv/error.hpp"
#include "streams/nvtx_support.hpp"

#if !defined(CUDRV_DISABLE_NVTX)
#include <nvtx3/nvToolsExtCuda.h>

#include <cstdlib>
#include <cstring>
#endif

namespace cudrv::detail {
#if !defined(CUDRV_DISABLE_NVTX)

constinit std::atomic<int> nvtx_auto_state{nvtx_auto_unresolved};

bool nvtx_auto_resolve() noexcept {
  int state = nvtx_auto_state.load(std::memory_order_relaxed);
  if (state == nvtx_auto_unresolved) {
    // Read once: whoever resolves first (here or enable_automatic_ranges) fixes the state.
    const char* env = std::getenv("CUDRV_NVTX_AUTO");
    const int wanted = env != nullptr && env[0] != '\0' && std::strcmp(env, "0") != 0 ? nvtx_auto_on : nvtx_auto_off;
    if (nvtx_auto_state.compare_exchange_strong(state, wanted, std::memory_order_relaxed)) {
      state = wanted;
    }
  }
  return state == nvtx_auto_on;
}

void nvtx_initialize() noexcept {
  // Once, under a C++ static: every later caller synchronises with its guard, so NVTX's table of
  // function pointers, filled by this first call, is never read while it is written.
  static const bool initialized = (nvtxInitialize(nullptr), true);
  static_cast<void>(initialized);
}

namespace {
const nvtx3::domain& cudrv_domain() noexcept {
  nvtx_ready();
  return nvtx3::domain::get<nvtx::domain>();
}
}  // namespace

void nvtx_auto_push(const char* prefix, std::string_view detail) noexcept {
  // Most messages fit on the stack; a long kernel name takes the heap, and without memory the range
  // keeps the prefix alone.
  char small[256];
  std::string large;
  const char* text = prefix;
  const std::size_t prefix_size = std::strlen(prefix);
  if (!detail.empty()) {
    const std::size_t size = prefix_size + 1 + detail.size();
    if (size < sizeof(small)) {
      std::memcpy(small, prefix, prefix_size);
      small[prefix_size] = ' ';
      std::memcpy(small + prefix_size + 1, detail.data(), detail.size());
      small[size] = '\0';
      text = small;
    } else {
      try {
        large.reserve(size);
        large.append(prefix, prefix_size).append(1, ' ').append(detail);
        text = large.c_str();
      } catch (...) {
        text = prefix;
      }
    }
  }
  const nvtx3::event_attributes attr{nvtx3::message{text}};
  nvtxDomainRangePushEx(cudrv_domain(), attr.get());
}

void nvtx_auto_pop() noexcept { nvtxDomainRangePop(cudrv_domain()); }

#endif  // !CUDRV_DISABLE_NVTX
}  // namespace cudrv::detail

namespace cudrv::nvtx {
namespace {

template <class Handle>
void require_handle(Handle handle, const char* what) {
  if (handle == nullptr) {
    throw invalid_argument_error("cudrv::nvtx::name", std::string("the ") + what +
                                                          " is empty (a moved-from or released cudrv::" + what + ")");
  }
}

}  // namespace

#if !defined(CUDRV_DISABLE_NVTX)

void name(const device& dev, std::string_view label) {
  const std::string text(label);
  detail::nvtx_ready();
  nvtxNameCuDeviceA(dev.native_handle(), text.c_str());
}

void name(context_ref ctx, std::string_view label) {
  require_handle(ctx.native_handle(), "context");
  const std::string text(label);
  detail::nvtx_ready();
  nvtxNameCuContextA(ctx.native_handle(), text.c_str());
}

void name(stream_ref s, std::string_view label) {
  require_handle(s.native_handle(), "stream");
  const std::string text(label);
  detail::nvtx_ready();
  nvtxNameCuStreamA(s.native_handle(), text.c_str());
}

void name(event_ref ev, std::string_view label) {
  require_handle(ev.native_handle(), "event");
  const std::string text(label);
  detail::nvtx_ready();
  nvtxNameCuEventA(ev.native_handle(), text.c_str());
}

void enable_automatic_ranges(bool on) noexcept {
  detail::nvtx_auto_state.store(on ? detail::nvtx_auto_on : detail::nvtx_auto_off, std::memory_order_relaxed);
}

bool automatic_ranges_enabled() noexcept { return detail::automatic_ranges_active(); }

#else  // CUDRV_DISABLE_NVTX: no NVTX call is compiled; the handle checks stay, so that a bug shows in
       // every build.

void name(const device&, std::string_view) {}
void name(context_ref ctx, std::string_view) { require_handle(ctx.native_handle(), "context"); }
void name(stream_ref s, std::string_view) { require_handle(s.native_handle(), "stream"); }
void name(event_ref ev, std::string_view) { require_handle(ev.native_handle(), "event"); }
void enable_automatic_ranges(bool) noexcept {}
bool automatic_ranges_enabled() noexcept { return false; }

#endif  // CUDRV_DISABLE_NVTX

}  // namespace cudrv::nvtx
