#include "cudrv/event.hpp"

#include "cudrv/stream.hpp"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

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

unsigned int driver_flags(event_flags flags, const char* api = "cudrv::event") {
  auto bits = static_cast<unsigned int>(flags);
  if ((bits & ~7u) != 0) {
    char hex[16];
    std::snprintf(hex, sizeof(hex), "0x%x", bits & ~7u);
    throw invalid_argument_error(api, std::string("unknown event flags: bits ") + hex +
                                          " (known: timing, blocking_sync, interprocess)");
  }
  bool timing = (flags & event_flags::timing) == event_flags::timing;
  bool ipc = (flags & event_flags::interprocess) == event_flags::interprocess;
  if (timing && ipc) {
    throw invalid_argument_error(api, "event_flags::interprocess excludes event_flags::timing: the driver cannot share "
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
    : event_base(nullptr), context_(detail::primary_context_token(dev)) {
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

// --- event_pool ------------------------------------------------------------------------------

namespace detail {
// One mutex guards everything. Invariant: idle.capacity() >= idle.size() + out, so that giving an event
// back never allocates (and never throws). The state is deleted when the pool has let go (!open) and
// no event is out.
struct event_pool_state {
  std::mutex mutex;
  std::vector<CUevent> idle;
  context_token context;
  event_flags flags = event_flags::none;
  std::size_t out = 0;  // pooled events handed out and not given back
  bool open = true;     // an event_pool still holds this state
};
}  // namespace detail

namespace {
using detail::event_pool_state;

// Destroys events of ctx that no one uses (none when ctx is gone: they went with it, and the handles may
// name other events by now).
void destroy_events(const CUevent* events, std::size_t count, const detail::context_token& ctx) noexcept {
  if (count == 0) {
    return;
  }
  if (!ctx.alive()) {
    detail::report_outlived_context("cudrv::event_pool", "event");
    return;
  }
  for (std::size_t i = 0; i < count; ++i) {
    const CUevent e = events[i];
    detail::destroy_noexcept("cuEventDestroy", [e] { return drv::cuEventDestroy(e); });
  }
}

event_pool_state* make_pool_state(CUcontext ctx, event_flags flags) {
  if ((flags & event_flags::interprocess) == event_flags::interprocess) {
    throw invalid_argument_error("cudrv::event_pool",
                                 "event_flags::interprocess: another process cannot know that a pooled event is "
                                 "recycled; use cudrv::event");
  }
  (void)driver_flags(flags, "cudrv::event_pool");  // refuses unknown bits
  detail::require_context_handle(ctx, "cudrv::event_pool");
  auto* state = new event_pool_state;
  state->context = detail::context_token::of(ctx);
  state->flags = flags;
  return state;
}

// A new event for the pool, under its lock: room for it is made first, so that its return never allocates.
CUevent grow_locked(event_pool_state& state) {
  const std::size_t needed = state.idle.size() + state.out + 1;
  if (state.idle.capacity() < needed) {
    state.idle.reserve(std::max(needed, 2 * state.idle.capacity()));  // geometric: growing one by one stays linear
  }
  return create_event(state.context.handle, state.flags);
}

void require_live_context(const event_pool_state& state) {
  if (!state.context.alive()) [[unlikely]] {
    throw invalid_argument_error("cudrv::event_pool", "the pool's context was destroyed, and its events with it");
  }
}
}  // namespace

event_pool::event_pool(const cudrv::device& dev, event_flags flags)
    : state_(make_pool_state(dev.primary_context().native_handle(), flags)) {}

event_pool::event_pool(context_ref ctx, event_flags flags) : state_(make_pool_state(ctx.native_handle(), flags)) {}

event_pool& event_pool::operator=(event_pool&& other) noexcept {
  if (this != &other) {
    reset();
    state_ = std::exchange(other.state_, nullptr);
  }
  return *this;
}

detail::event_pool_state& event_pool::require_state(const char* api) const {
  if (state_ == nullptr) [[unlikely]] {
    throw invalid_argument_error(api, "the event pool is empty (a moved-from or reset cudrv::event_pool)");
  }
  return *state_;
}

pooled_event event_pool::acquire() {
  event_pool_state& state = require_state("cudrv::event_pool::acquire");
  std::lock_guard<std::mutex> lock(state.mutex);
  require_live_context(state);
  CUevent e = nullptr;
  if (!state.idle.empty()) [[likely]] {
    e = state.idle.back();
    state.idle.pop_back();
  } else {
    e = grow_locked(state);
  }
  ++state.out;
  return pooled_event(e, &state);
}

void event_pool::reserve(std::size_t count) {
  event_pool_state& state = require_state("cudrv::event_pool::reserve");
  std::lock_guard<std::mutex> lock(state.mutex);
  require_live_context(state);
  while (state.idle.size() < count) {
    CUevent e = grow_locked(state);
    state.idle.push_back(e);  // within the capacity grow_locked made
  }
}

std::size_t event_pool::idle() const {
  event_pool_state& state = require_state("cudrv::event_pool::idle");
  std::lock_guard<std::mutex> lock(state.mutex);
  return state.idle.size();
}

std::size_t event_pool::size() const {
  event_pool_state& state = require_state("cudrv::event_pool::size");
  std::lock_guard<std::mutex> lock(state.mutex);
  return state.idle.size() + state.out;
}

event_flags event_pool::flags() const { return require_state("cudrv::event_pool::flags").flags; }

context_ref event_pool::context() const {
  return context_ref(require_state("cudrv::event_pool::context").context.handle);
}

void event_pool::reset() noexcept {
  event_pool_state* state = std::exchange(state_, nullptr);
  if (state == nullptr) {
    return;
  }
  const detail::context_token ctx = state->context;  // read before the lock: the state may go after it
  std::vector<CUevent> idle;
  bool last = false;
  {
    std::lock_guard<std::mutex> lock(state->mutex);
    state->open = false;
    idle.swap(state->idle);
    last = state->out == 0;
  }
  destroy_events(idle.data(), idle.size(), ctx);
  if (last) {
    delete state;
  }
}

void pooled_event::reset() noexcept {
  if (handle_ == nullptr) {
    return;
  }
  CUevent e = std::exchange(handle_, nullptr);
  event_pool_state* state = std::exchange(pool_, nullptr);
  const detail::context_token ctx = state->context;  // read before the lock: the state may go after it
  bool keep = false;
  bool last = false;
  {
    std::lock_guard<std::mutex> lock(state->mutex);
    --state->out;
    keep = state->open;
    if (keep) {
      state->idle.push_back(e);  // never allocates: the capacity covers every event out
    }
    last = !state->open && state->out == 0;
  }
  if (!keep) {
    destroy_events(&e, 1, ctx);
  }
  if (last) {
    delete state;
  }
}

pooled_event& pooled_event::operator=(pooled_event&& other) noexcept {
  if (this != &other) {
    reset();
    handle_ = std::exchange(other.handle_, nullptr);
    pool_ = std::exchange(other.pool_, nullptr);
  }
  return *this;
}

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
