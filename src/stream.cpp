#include "cudax/stream.hpp"

#include <atomic>
#include <cstdio>
#include <exception>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cudax/error.hpp"
#include "cudax/event.hpp"
#include "driver_api.hpp"

namespace cudax {

using detail::check;
namespace drv = detail::drv;

namespace {

std::string describe(CUstream s) {
  char buffer[48];
  std::snprintf(buffer, sizeof(buffer), "stream %p", static_cast<void*>(s));
  return buffer;
}

// Exceptions thrown by host callables, kept until the owning stream is synchronised or destroyed.
struct callback_failures {
  std::mutex mutex;
  std::vector<std::pair<CUstream, std::exception_ptr>> pending;
  std::atomic<std::size_t> count{0};
  // Host tasks queued and not yet run, per stream; and the streams destroyed while some of theirs
  // were still queued (cuStreamDestroy does not wait): those tasks report failures to the
  // destruction handler themselves, since no synchronize can take them any more.
  std::unordered_map<CUstream, std::size_t> queued;
  std::unordered_set<CUstream> orphaned;
  // Sum of the counts in `queued`, readable without the lock: lets stream destruction skip the
  // bookkeeping when no host task is queued anywhere (the common case).
  std::atomic<std::size_t> queued_total{0};
};

callback_failures& failures() {
  static auto* f = new callback_failures;  // never destroyed: callbacks may run during exit
  return *f;
}

std::exception_ptr take_failure(CUstream s) {
  callback_failures& f = failures();
  if (f.count.load(std::memory_order_acquire) == 0) [[likely]] {
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(f.mutex);
  for (auto it = f.pending.begin(); it != f.pending.end(); ++it) {
    if (it->first == s) {
      std::exception_ptr e = it->second;
      f.pending.erase(it);
      f.count.fetch_sub(1, std::memory_order_release);
      return e;
    }
  }
  return nullptr;
}

// Bookkeeping for a task that will not run (its launch failed). Never throws.
void forget_queued(CUstream s) noexcept {
  callback_failures& f = failures();
  std::lock_guard<std::mutex> lock(f.mutex);
  if (auto it = f.queued.find(s); it != f.queued.end()) {
    f.queued_total.fetch_sub(1, std::memory_order_release);
    if (--it->second == 0) {
      f.queued.erase(it);
      f.orphaned.erase(s);
    }
  }
}

void CUDA_CB run_host_task(void* data) {
  auto* task = static_cast<detail::host_task*>(data);
  const CUstream s = task->stream;
  std::exception_ptr failure;
  try {
    task->run();
  } catch (...) {
    failure = std::current_exception();
  }
  delete task;
  bool orphan = false;
  try {
    callback_failures& f = failures();
    std::lock_guard<std::mutex> lock(f.mutex);
    orphan = f.orphaned.count(s) != 0;
    // Keep the failure before the task stops counting as queued: stream::destroy reads both
    // counters without the lock, and must see one or the other.
    if (failure && !orphan) {
      f.pending.emplace_back(s, failure);
      f.count.fetch_add(1, std::memory_order_release);
    }
    if (auto it = f.queued.find(s); it != f.queued.end()) {
      f.queued_total.fetch_sub(1, std::memory_order_release);
      if (--it->second == 0) {
        f.queued.erase(it);
        f.orphaned.erase(s);
      }
    }
  } catch (...) {
    orphan = true;  // could not keep it: report it now rather than lose it
  }
  if (failure && orphan) {
    try {
      get_destruction_error_handler()(host_callback_error(failure, describe(s) + " (destroyed before this callable finished)"));
    } catch (...) {
    }
  }
}

// A callable enqueued on a capturing stream becomes a host node that runs at every launch of the
// graph: it must not be deleted after running. A user object moved into the capture graph owns it,
// and its failures go to the destruction handler (no stream synchronisation will see them).
void CUDA_CB run_captured_host_task(void* data) {
  auto* task = static_cast<detail::host_task*>(data);
  try {
    task->run();
  } catch (...) {
    try {
      get_destruction_error_handler()(
          host_callback_error(std::current_exception(), "a host callable captured into a graph from " + describe(task->stream)));
    } catch (...) {
    }
  }
}

void CUDA_CB delete_host_task(void* data) { delete static_cast<detail::host_task*>(data); }

// Returns true when the task was captured (stream capturing), false when the stream is not capturing.
bool enqueue_captured(CUstream stream, detail::host_task* task) {
#if CUDAX_HAS_KERNEL_INTROSPECTION
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  CUgraph graph = nullptr;
  try {
    if (drv::cuStreamGetCaptureInfo(stream, &status, nullptr, &graph, nullptr, nullptr, nullptr) != CUDA_SUCCESS ||
        status != CU_STREAM_CAPTURE_STATUS_ACTIVE || graph == nullptr) {
      return false;
    }
  } catch (const error&) {
    return false;  // a driver without capture queries cannot be capturing through cudax either
  }
  CUuserObject object = nullptr;
  CUresult created = CUDA_ERROR_UNKNOWN;
  try {
    created = drv::cuUserObjectCreate(&object, task, &delete_host_task, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC);
  } catch (...) {
    delete task;
    throw;
  }
  if (created != CUDA_SUCCESS) {
    delete task;
    detail::throw_driver_error(created, "cuUserObjectCreate", describe(stream));
  }
  CUresult moved = drv::cuGraphRetainUserObject(graph, object, 1, CU_GRAPH_USER_OBJECT_MOVE);
  if (moved != CUDA_SUCCESS) {
    drv::cuUserObjectRelease(object, 1);  // deletes the task
    detail::throw_driver_error(moved, "cuGraphRetainUserObject", describe(stream));
  }
  // From here the capture graph owns the task, whatever happens below.
  detail::check(drv::cuLaunchHostFunc(stream, &run_captured_host_task, static_cast<void*>(task)), "cuLaunchHostFunc",
        [&] { return describe(stream) + " (capturing)"; });
  return true;
#else
  (void)stream;
  (void)task;
  return false;
#endif
}

}  // namespace

namespace detail {
void enqueue_host_task(CUstream stream, host_task* task) {
  task->stream = stream;
  // On a capturing stream the task becomes a host node of the capture graph (which then owns it,
  // also when this throws).
  if (enqueue_captured(stream, task)) {
    return;
  }
  try {
    callback_failures& f = failures();
    std::lock_guard<std::mutex> lock(f.mutex);
    ++f.queued[stream];
    f.queued_total.fetch_add(1, std::memory_order_release);
  } catch (...) {
    delete task;
    throw;
  }
  CUresult status = CUDA_SUCCESS;
  try {
    status = drv::cuLaunchHostFunc(stream, &run_host_task, static_cast<void*>(task));
  } catch (...) {
    forget_queued(stream);
    delete task;
    throw;
  }
  if (status != CUDA_SUCCESS) {
    forget_queued(stream);
    delete task;
    throw_driver_error(status, "cuLaunchHostFunc", describe(stream));
  }
}
}  // namespace detail

void stream_ref::require_handle(const char* api) const {
  if (handle_ == nullptr) [[unlikely]] {
    throw invalid_argument_error(api, "the stream is empty (a moved-from or released cudax::stream)");
  }
}

void stream_ref::synchronize() const {
  require_handle("cudax::stream_ref::synchronize");
  check(drv::cuStreamSynchronize(handle_), "cuStreamSynchronize", [this] { return describe(handle_); });
  if (std::exception_ptr e = take_failure(handle_)) [[unlikely]] {
    throw host_callback_error(e, describe(handle_));
  }
}

bool stream_ref::is_done() const {
  require_handle("cudax::stream_ref::is_done");
  CUresult status = drv::cuStreamQuery(handle_);
  if (status == CUDA_ERROR_NOT_READY) {
    return false;
  }
  check(status, "cuStreamQuery", [this] { return describe(handle_); });
  return true;
}

void stream_ref::wait(event_ref ev) const {
  require_handle("cudax::stream_ref::wait");
  if (ev.native_handle() == nullptr) [[unlikely]] {
    throw invalid_argument_error("cudax::stream_ref::wait", "the event is empty (a moved-from cudax::event)");
  }
  check(drv::cuStreamWaitEvent(handle_, ev.native_handle(), 0u), "cuStreamWaitEvent",
        [this] { return describe(handle_); });
}

void stream_ref::wait(stream_ref other) const {
  require_handle("cudax::stream_ref::wait");
  other.require_handle("cudax::stream_ref::wait");
  event marker(other.context());
  marker.record(other);
  wait(marker);
}

void stream_ref::record(event_ref ev) const { ev.record(*this); }

context_ref stream_ref::context() const {
  require_handle("cudax::stream_ref::context");
  CUcontext ctx = nullptr;
  check(drv::cuStreamGetCtx(handle_, &ctx), "cuStreamGetCtx", [this] { return describe(handle_); });
  if (ctx == nullptr) {
    throw invalid_argument_error("cudax::stream_ref::context",
                                 "the default stream has no context while none is current");
  }
  return context_ref(ctx);
}

cudax::device stream_ref::device() const { return context().device(); }

int stream_ref::priority() const {
  require_handle("cudax::stream_ref::priority");
  int value = 0;
  check(drv::cuStreamGetPriority(handle_, &value), "cuStreamGetPriority", [this] { return describe(handle_); });
  return value;
}

bool stream_ref::is_non_blocking() const {
  require_handle("cudax::stream_ref::is_non_blocking");
  unsigned int flags = 0;
  check(drv::cuStreamGetFlags(handle_, &flags), "cuStreamGetFlags", [this] { return describe(handle_); });
  return (flags & CU_STREAM_NON_BLOCKING) != 0;
}

unsigned long long stream_ref::id() const {
  require_handle("cudax::stream_ref::id");
  unsigned long long value = 0;
  check(drv::cuStreamGetId(handle_, &value), "cuStreamGetId", [this] { return describe(handle_); });
  return value;
}

// --- stream ----------------------------------------------------------------------------------

stream::stream(const cudax::device& dev, stream_options options) : stream(dev.primary_context(), options) {}

stream::stream(context_ref ctx, stream_options options) : stream_ref(nullptr, raw_tag{}) {
  const unsigned int flags = options.non_blocking ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT;
  detail::run_in_context(ctx.native_handle(), "cudax::stream", [&] {
    check(drv::cuStreamCreateWithPriority(&handle_, flags, options.priority), "cuStreamCreateWithPriority",
          [&] { return "priority " + std::to_string(options.priority); });
  });
}

stream stream::from_native_handle(CUstream handle) {
  if (handle == nullptr || handle == CU_STREAM_LEGACY || handle == CU_STREAM_PER_THREAD) {
    throw invalid_argument_error("cudax::stream::from_native_handle",
                                 "a default stream cannot be owned; use stream_ref to view it");
  }
  return stream(handle);
}

void stream::destroy() noexcept {
  if (handle_ == nullptr) {
    return;
  }
  CUstream h = std::exchange(handle_, nullptr);
  try {
    callback_failures& f = failures();
    if (f.queued_total.load(std::memory_order_acquire) != 0) {
      // Callables still queued run after cuStreamDestroy; they report their own failures.
      std::lock_guard<std::mutex> lock(f.mutex);
      if (f.queued.count(h) != 0) {
        f.orphaned.insert(h);
      }
    }
    while (std::exception_ptr e = take_failure(h)) {
      get_destruction_error_handler()(host_callback_error(e, describe(h)));
    }
  } catch (...) {
  }
  detail::destroy_noexcept("cuStreamDestroy", [h] { return drv::cuStreamDestroy(h); });
}

stream& stream::operator=(stream&& other) noexcept {
  if (this != &other) {
    destroy();
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

stream::~stream() { destroy(); }

}  // namespace cudax
