#include "cudrv/event.hpp"

#include "cudrv/stream.hpp"

#include <cstdio>
#include <optional>
#include <string>

#include "cudrv/error.hpp"
#include "driver/driver_api.hpp"

namespace cudrv {

using detail::check;
namespace drv = detail::drv;

namespace {
std::string describe(CUevent e) {
  char buffer[48];
  std::snprintf(buffer, sizeof(buffer), "event %p", static_cast<void*>(e));
  return buffer;
}

unsigned int driver_flags(event_flags flags) {
  auto bits = static_cast<unsigned int>(flags);
  if ((bits & ~7u) != 0) {
    char hex[16];
    std::snprintf(hex, sizeof(hex), "0x%x", bits & ~7u);
    throw invalid_argument_error("cudrv::event", std::string("unknown event flags: bits ") + hex +
                                                     " (known: timing, blocking_sync, interprocess)");
  }
  bool timing = (flags & event_flags::timing) == event_flags::timing;
  bool ipc = (flags & event_flags::interprocess) == event_flags::interprocess;
  if (timing && ipc) {
    throw invalid_argument_error("cudrv::event",
                                 "event_flags::interprocess excludes event_flags::timing: the driver cannot share "
                                 "timed events between processes");
  }
  unsigned int out = timing ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING;
  if ((flags & event_flags::blocking_sync) == event_flags::blocking_sync) {
    out |= CU_EVENT_BLOCKING_SYNC;
  }
  if (ipc) {
    out |= CU_EVENT_INTERPROCESS;
  }
  return out;
}
}  // namespace

void event_base::require_handle(const char* api) const {
  if (handle_ == nullptr) [[unlikely]] {
    throw invalid_argument_error(api, "the event is empty (a moved-from or released cudrv::event)");
  }
}

void event_base::record(stream_ref s) const {
  require_handle("cudrv::event::record");
  if (s.native_handle() == nullptr) [[unlikely]] {
    throw invalid_argument_error("cudrv::event::record", "the stream is empty (a moved-from cudrv::stream)");
  }
  check(drv::cuEventRecord(handle_, s.native_handle()), "cuEventRecord", [this] { return describe(handle_); });
}

void event_base::synchronize() const {
  require_handle("cudrv::event::synchronize");
  check(drv::cuEventSynchronize(handle_), "cuEventSynchronize", [this] { return describe(handle_); });
}

bool event_base::is_done() const {
  require_handle("cudrv::event::is_done");
  CUresult status = drv::cuEventQuery(handle_);
  if (status == CUDA_ERROR_NOT_READY) {
    return false;
  }
  check(status, "cuEventQuery", [this] { return describe(handle_); });
  return true;
}

namespace {
CUevent create_event(CUcontext ctx, event_flags flags) {
  const unsigned int bits =
      flags == event_flags::none ? static_cast<unsigned int>(CU_EVENT_DISABLE_TIMING) : driver_flags(flags);
  CUevent ev = nullptr;
  detail::run_in_context(ctx, "cudrv::event", [&] { check(drv::cuEventCreate(&ev, bits), "cuEventCreate"); });
  return ev;
}
}  // namespace

// A device's primary context is one cudrv retains for the process: its token names the device and its reset generation.
event::event(const cudrv::device& dev, event_flags flags)
    : event_base(nullptr), context_(detail::context_token::of(dev.primary_context().native_handle())) {
  handle_ = create_event(context_.handle, flags);
}

event::event(context_ref ctx, event_flags flags)
    : event_base(nullptr), context_(detail::context_token::of(ctx.native_handle())) {
  handle_ = create_event(context_.handle, flags);
}

context_ref event::context() const {
  require_handle("cudrv::event::context");
  if (context_.handle == nullptr) {
    throw invalid_argument_error("cudrv::event::context",
                                 "the event was adopted without its context (from_native_handle(handle))");
  }
  return context_ref(context_.handle);
}

event event::from_ipc_handle(const cudrv::device& dev, const CUipcEventHandle& handle) {
  context_guard guard(dev.primary_context());
  CUevent ev = nullptr;
  check(drv::cuIpcOpenEventHandle(&ev, handle), "cuIpcOpenEventHandle",
        [&] { return "device " + std::to_string(dev.ordinal()); });
  return event(ev, detail::context_token::of(dev.primary_context().native_handle()));
}

CUipcEventHandle event::ipc_handle() const {
  require_handle("cudrv::event::ipc_handle");
  std::optional<context_guard> guard;
  if (context_.handle != nullptr) {
    guard.emplace(context_ref(context_.handle));
  }
  CUipcEventHandle handle{};
  check(drv::cuIpcGetEventHandle(&handle, handle_), "cuIpcGetEventHandle",
        [this] { return describe(handle_) + " (it needs event_flags::interprocess)"; });
  return handle;
}

void event::reset() noexcept {
  if (handle_ != nullptr) {
    CUevent h = std::exchange(handle_, nullptr);
    const detail::context_token ctx = std::exchange(context_, {});
    if (!ctx.alive()) {
      detail::report_outlived_context("cudrv::event", "event");
      return;
    }
    detail::destroy_noexcept("cuEventDestroy", [h] { return drv::cuEventDestroy(h); });
  }
}

event& event::operator=(event&& other) noexcept {
  if (this != &other) {
    reset();
    handle_ = std::exchange(other.handle_, nullptr);
    context_ = std::exchange(other.context_, {});
  }
  return *this;
}

event::~event() { reset(); }

std::chrono::duration<float, std::milli> elapsed_time(event_ref start, event_ref end) {
  if (start.native_handle() == nullptr || end.native_handle() == nullptr) {
    throw invalid_argument_error("cudrv::elapsed_time", "an event is empty (a moved-from cudrv::event)");
  }
  float ms = 0.0f;
  check(drv::cuEventElapsedTime(&ms, start.native_handle(), end.native_handle()), "cuEventElapsedTime",
        [] { return std::string("both events need event_flags::timing and must have completed"); });
  return std::chrono::duration<float, std::milli>(ms);
}

}  // namespace cudrv
