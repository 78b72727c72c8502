#include "cudrv/stream.hpp"

#include <atomic>
#include <cstdio>
#include <exception>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "cudrv/error.hpp"
#include "cudrv/event.hpp"
#include "driver/disposal.hpp"
#include "driver/driver_api.hpp"
#include "streams/stream_support.hpp"

namespace cudrv {

using detail::check;
namespace drv = detail::drv;

namespace detail {

namespace {

std::string describe(CUstream s) {
  char buffer[48];
  std::snprintf(buffer, sizeof(buffer), "stream %p", static_cast<void*>(s));
  return buffer;
}

void report_callback_failure(std::exception_ptr failure, const char* where) noexcept {
  try {
    get_destruction_error_handler()(host_callback_error(std::move(failure), where));
  } catch (...) {
    std::fprintf(stderr, "cudrv: a host callable threw (%s)\n", where);
  }
}

}  // namespace

// --- failure sinks --------------------------------------------------------------------------------
// Where failures of host callables wait for a synchronize. Counted references: the stream's state
// holds one, each queued callable one, so a callable that runs after its stream was destroyed still
// has somewhere to put its failure. Releasing a sink never calls the driver (it may happen on the
// driver's callback thread).
struct failure_sink {
  std::atomic<int> refs{1};
  std::atomic<std::size_t> count{0};  // failures waiting; read without the lock by synchronize
  std::mutex mutex;
  std::vector<std::exception_ptr> failures;  // oldest first (a vector: its default state allocates nothing)
  bool orphaned = false;                     // nobody can synchronize any more: failures go to the handler
};

namespace {

void retain(failure_sink* s) noexcept { s->refs.fetch_add(1, std::memory_order_relaxed); }

// Moves the failures still waiting out of the sink; the caller reports them.
std::vector<std::exception_ptr> take_all(failure_sink* s) noexcept {
  std::vector<std::exception_ptr> out;
  std::lock_guard lock(s->mutex);
  out.swap(s->failures);
  s->count.store(0, std::memory_order_release);
  return out;
}

void release(failure_sink* s) noexcept {
  if (s != nullptr && s->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    for (const std::exception_ptr& e : take_all(s)) {
      report_callback_failure(e, "a stream destroyed before this failure was synchronized");
    }
    delete s;
  }
}

// Failures from now on go to the handler; those waiting go there now.
void orphan(failure_sink* s, CUstream handle) noexcept {
  if (s == nullptr) {
    return;
  }
  std::vector<std::exception_ptr> left;
  {
    std::lock_guard lock(s->mutex);
    s->orphaned = true;
    left.swap(s->failures);
    s->count.store(0, std::memory_order_release);
  }
  for (const std::exception_ptr& e : left) {
    try {
      get_destruction_error_handler()(host_callback_error(e, describe(handle)));
    } catch (...) {
      report_callback_failure(e, "an orphaned stream");
    }
  }
}

void push(failure_sink* s, const std::exception_ptr& failure) noexcept {
  bool to_handler = s == nullptr;
  if (!to_handler) {
    try {
      std::lock_guard lock(s->mutex);
      if (s->orphaned) {
        to_handler = true;
      } else {
        s->failures.push_back(failure);
        s->count.fetch_add(1, std::memory_order_release);
      }
    } catch (...) {
      to_handler = true;  // could not keep it: report it now rather than lose it
    }
  }
  if (to_handler) {
    report_callback_failure(failure,
                            "the stream it was queued on is not owned by cudrv, or was destroyed before it ran");
  }
}

std::exception_ptr take_one(failure_sink* s) {
  if (s == nullptr || s->count.load(std::memory_order_acquire) == 0) [[likely]] {
    return nullptr;
  }
  std::lock_guard lock(s->mutex);
  if (s->failures.empty()) {
    return nullptr;
  }
  std::exception_ptr e = s->failures.front();
  s->failures.erase(s->failures.begin());
  s->count.fetch_sub(1, std::memory_order_release);
  return e;
}

// The default streams' sinks: one for the legacy default stream, one per thread for the per-thread
// default stream.
failure_sink* legacy_sink() noexcept {
  // Never destroyed (callables may run during exit), and made in static storage: this is called where
  // nothing may throw, so it must not allocate. Its own reference is never given back, so nothing
  // deletes it.
  alignas(failure_sink) static unsigned char storage[sizeof(failure_sink)];
  static failure_sink* const s = new (storage) failure_sink;
  return s;
}

struct thread_sink_holder {
  failure_sink* sink = nullptr;
  ~thread_sink_holder() {
    orphan(sink, CU_STREAM_PER_THREAD);
    release(sink);
  }
};

failure_sink* per_thread_sink() {
  thread_local thread_sink_holder holder;
  if (holder.sink == nullptr) {
    holder.sink = new failure_sink;
  }
  return holder.sink;
}

}  // namespace

void throw_empty_stream(const char* api) {
  throw invalid_argument_error(api, "the stream is empty (a moved-from or released cudrv::stream)");
}

// --- disposal of host tasks ---------------------------------------------------------------------------
// Callables are destroyed after they ran, but never on the driver's callback thread, where freeing
// CUDA memory (a buffer captured to keep it alive) is not permitted. Callables whose destruction does
// nothing are deleted at once; the others go to cudrv's disposal thread (driver/disposal.hpp).

void discard(host_task* task) noexcept {
  if (task != nullptr) {
    release(std::exchange(task->sink, nullptr));
    delete task;
  }
}

void dispose(host_task* task) noexcept {
  if (task == nullptr) {
    return;
  }
  if (task->trivial) {
    discard(task);
    return;
  }
  release(std::exchange(task->sink, nullptr));
  if (!dispose_on_disposal_thread([](void* t) noexcept { delete static_cast<host_task*>(t); }, task)) {
    // No thread or no memory: leaking the callable is safer than destroying it on a callback thread.
    std::fprintf(stderr, "cudrv: could not hand a finished host callable to the disposal thread; it is leaked\n");
  }
}

void CUDA_CB run_graph_host_task(void* data) {
  auto* task = static_cast<host_task*>(data);
  try {
    task->run();
  } catch (...) {
    report_callback_failure(std::current_exception(), "a host callable in a graph");
  }
}

void CUDA_CB dispose_host_task_callback(void* data) { dispose(static_cast<host_task*>(data)); }

// --- stream state -------------------------------------------------------------------------------------

namespace {

// Each thread keeps the memory of the last stream state it deleted for the next one it makes (issue 37):
// creating and destroying streams in a loop then costs no heap allocation. The slot is trivially
// destructible (constinit), so reading it stays defined while the thread's other thread-locals are
// destroyed; a separate guard, registered when the slot first keeps memory, frees it with the thread and
// closes the slot, after which a state deleted (a static stream destroyed at exit) goes back to the heap.
struct spare_state_slot {
  void* spare = nullptr;  // memory for one stream_state, or null
  bool closed = false;    // the thread is ending: nothing is kept any more
};
constinit thread_local spare_state_slot spare_state{};

struct spare_state_guard {
  spare_state_guard() = default;
  spare_state_guard(const spare_state_guard&) = delete;
  spare_state_guard& operator=(const spare_state_guard&) = delete;
  ~spare_state_guard() {
    ::operator delete(std::exchange(spare_state.spare, nullptr));  // memory of a `new stream_state`
    spare_state.closed = true;
  }
};
thread_local spare_state_guard spare_state_cleanup;

stream_state* new_state() {
  if (void* memory = std::exchange(spare_state.spare, nullptr); memory != nullptr) {
    return new (memory) stream_state;  // the constructor does not throw
  }
  return new stream_state;
}

void delete_state(stream_state* s) noexcept {
  spare_state_slot& slot = spare_state;
  if (slot.spare == nullptr && !slot.closed) {
    (void)&spare_state_cleanup;  // constructs the guard (once per thread), which frees the slot at thread exit
    s->~stream_state();
    slot.spare = s;
  } else {
    delete s;
  }
}

stream_state* make_state(CUstream handle, const context_token& ctx) {
  stream_state* s = new_state();
  s->handle = handle;
  s->context = ctx;
  return s;
}

stream_state* make_state(CUstream handle, CUcontext ctx) { return make_state(handle, context_token::of(ctx)); }

// Creates a stream in ctx (made current only when another context is) and its bookkeeping; the
// stream is destroyed again when the bookkeeping cannot be made.
stream_state* create_stream(const context_token& ctx, stream_options options) {
  const unsigned int flags = options.non_blocking ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT;
  CUstream handle = nullptr;
  run_in_context(ctx.handle, "cudrv::stream", [&] {
    check(drv::cuStreamCreateWithPriority(&handle, flags, options.priority), "cuStreamCreateWithPriority",
          [&] { return "priority " + std::to_string(options.priority); });
  });
  try {
    return make_state(handle, ctx);
  } catch (...) {
    destroy_noexcept("cuStreamDestroy", [handle] { return drv::cuStreamDestroy(handle); });
    throw;
  }
}

// The sink of a stream: its owner's (made on first use), a default stream's, or none.
failure_sink* sink_of(CUstream handle, stream_state* state, bool create) {
  if (state != nullptr) {
    failure_sink* s = state->sink.load(std::memory_order_acquire);
    if (s == nullptr && create) {
      auto* fresh = new failure_sink;
      if (state->sink.compare_exchange_strong(s, fresh, std::memory_order_acq_rel)) {
        s = fresh;
      } else {
        delete fresh;  // another thread made one first; s holds it
      }
    }
    return s;
  }
  if (handle == CU_STREAM_LEGACY) {
    return legacy_sink();
  }
  if (handle == CU_STREAM_PER_THREAD) {
    return per_thread_sink();
  }
  return nullptr;
}

}  // namespace

void destroy_stream_state(stream_state* s) noexcept {
  if (s->owned.load(std::memory_order_acquire)) {
    if (!s->context.alive()) {
      report_outlived_context("cudrv::stream", "stream");
    } else {
      CUstream h = s->handle;
      destroy_noexcept("cuStreamDestroy", [h] { return drv::cuStreamDestroy(h); });
    }
  }
  release(s->sink.load(std::memory_order_acquire));
  const disposal_fn keep_alive_release = s->keep_alive_release;
  void* keep_alive = s->keep_alive;
  delete_state(s);
  if (keep_alive_release != nullptr) {
    keep_alive_release(keep_alive);  // after cuStreamDestroy: a green context goes after its streams
  }
}

stream adopt_stream(CUstream handle, CUcontext ctx, disposal_fn keep_alive_release, void* keep_alive) {
  stream s = [&] {
    try {
      return stream::from_native_handle(handle);  // destroys the handle when it throws
    } catch (...) {
      if (keep_alive_release != nullptr) {
        keep_alive_release(keep_alive);
      }
      throw;
    }
  }();
  s.state()->context = context_token::of(ctx);
  s.state()->keep_alive_release = keep_alive_release;
  s.state()->keep_alive = keep_alive;
  return s;
}

void enqueue_host_task(CUstream stream, stream_state* state, host_task* task) {
  // On a capturing stream the task becomes a host node of the capture graph, which then owns it
  // (also when this throws): it runs at every launch of the graph, and its failures go to the handler.
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  CUgraph graph = nullptr;
  CUresult queried = CUDA_SUCCESS;
  try {
    queried = drv::cuStreamGetCaptureInfo(stream, &status, nullptr, &graph, nullptr, nullptr, nullptr);
  } catch (const not_supported_error&) {
    status = CU_STREAM_CAPTURE_STATUS_NONE;  // a driver without capture queries cannot be capturing through cudrv
  } catch (...) {
    discard(task);
    throw;
  }
  if (queried != CUDA_SUCCESS) {
    // Not knowing whether the stream captures, the task cannot be given its owner (a capture graph
    // runs it at every launch, a stream once): refuse rather than guess.
    discard(task);
    throw_driver_error(queried, "cuStreamGetCaptureInfo", describe(stream));
  }
  if (status == CU_STREAM_CAPTURE_STATUS_ACTIVE && graph != nullptr) {
    retain_in_graph(graph, task, &dispose_host_task_callback, describe(stream).c_str());
    check(drv::cuLaunchHostFunc(stream, &run_graph_host_task, static_cast<void*>(task)), "cuLaunchHostFunc",
          [&] { return describe(stream) + " (capturing)"; });
    return;
  }
  CUresult launched = CUDA_SUCCESS;
  try {
    failure_sink* sink = sink_of(stream, state, true);
    if (sink != nullptr) {
      retain(sink);
      task->sink = sink;
    }
    launched = drv::cuLaunchHostFunc(stream, &run_host_task, static_cast<void*>(task));
  } catch (...) {
    discard(task);
    throw;
  }
  if (launched != CUDA_SUCCESS) {
    discard(task);
    throw_driver_error(launched, "cuLaunchHostFunc", describe(stream));
  }
}

void CUDA_CB run_host_task(void* data) {
  auto* task = static_cast<host_task*>(data);
  try {
    task->run();
  } catch (...) {
    push(task->sink, std::current_exception());
  }
  dispose(task);
}

void retain_in_graph(CUgraph graph, void* data, void (*destroy)(void*), const char* where) {
  CUuserObject object = nullptr;
  CUresult created = CUDA_ERROR_UNKNOWN;
  try {
    created = drv::cuUserObjectCreate(&object, data, destroy, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC);
  } catch (...) {
    destroy(data);
    throw;
  }
  if (created != CUDA_SUCCESS) {
    destroy(data);
    throw_driver_error(created, "cuUserObjectCreate", where);
  }
  // The graph takes over the reference (move): the object lives as long as the graph or any
  // executable made from it.
  const CUresult moved = drv::cuGraphRetainUserObject(graph, object, 1, CU_GRAPH_USER_OBJECT_MOVE);
  if (moved != CUDA_SUCCESS) {
    drv::cuUserObjectRelease(object, 1);  // destroys data
    throw_driver_error(moved, "cuGraphRetainUserObject", where);
  }
}

}  // namespace detail

// --- stream_base ----------------------------------------------------------------------------------------

void stream_base::require_handle(const char* api) const {
  if (handle_ == nullptr) [[unlikely]] {
    throw invalid_argument_error(api, "the stream is empty (a moved-from or released cudrv::stream)");
  }
}

void stream_base::synchronize() const {
  require_handle("cudrv::stream::synchronize");
  check(drv::cuStreamSynchronize(handle_), "cuStreamSynchronize", [this] { return detail::describe(handle_); });
  detail::await_disposals();
  if (std::exception_ptr e = detail::take_one(detail::sink_of(handle_, state_, false))) [[unlikely]] {
    throw host_callback_error(e, detail::describe(handle_));
  }
}

bool stream_base::is_done() const {
  require_handle("cudrv::stream::is_done");
  CUresult status = drv::cuStreamQuery(handle_);
  if (status == CUDA_ERROR_NOT_READY) {
    return false;
  }
  check(status, "cuStreamQuery", [this] { return detail::describe(handle_); });
  return true;
}

void stream_base::wait(event_ref ev) const {
  require_handle("cudrv::stream::wait");
  if (ev.native_handle() == nullptr) [[unlikely]] {
    throw invalid_argument_error("cudrv::stream::wait", "the event is empty (a moved-from cudrv::event)");
  }
  check(drv::cuStreamWaitEvent(handle_, ev.native_handle(), 0u), "cuStreamWaitEvent",
        [this] { return detail::describe(handle_); });
}

void stream_base::wait(stream_ref other) const {
  require_handle("cudrv::stream::wait");
  other.require_handle("cudrv::stream::wait");
  event marker = other.record();
  wait(marker);
}

void stream_base::record(event_ref ev) const { ev.record(stream_ref(handle_)); }

event stream_base::record(event_flags flags) const {
  require_handle("cudrv::stream::record");
  event ev(context(), flags);
  ev.record(stream_ref(handle_));
  return ev;
}

context_ref stream_base::context() const {
  require_handle("cudrv::stream::context");
  CUcontext ctx = nullptr;
  check(drv::cuStreamGetCtx(handle_, &ctx), "cuStreamGetCtx", [this] { return detail::describe(handle_); });
  if (ctx == nullptr) {
    throw invalid_argument_error("cudrv::stream::context", "the default stream has no context while none is current");
  }
  return context_ref(ctx);
}

cudrv::device stream_base::device() const { return context().device(); }

int stream_base::priority() const {
  require_handle("cudrv::stream::priority");
  int value = 0;
  check(drv::cuStreamGetPriority(handle_, &value), "cuStreamGetPriority", [this] { return detail::describe(handle_); });
  return value;
}

bool stream_base::is_non_blocking() const {
  require_handle("cudrv::stream::is_non_blocking");
  unsigned int flags = 0;
  check(drv::cuStreamGetFlags(handle_, &flags), "cuStreamGetFlags", [this] { return detail::describe(handle_); });
  return (flags & CU_STREAM_NON_BLOCKING) != 0;
}

unsigned long long stream_base::id() const {
  require_handle("cudrv::stream::id");
  unsigned long long value = 0;
  check(drv::cuStreamGetId(handle_, &value), "cuStreamGetId", [this] { return detail::describe(handle_); });
  return value;
}

// --- stream -------------------------------------------------------------------------------------------

// From a device, the primary context's token is made from the device's slot (no lookup of the handle).
stream::stream(const cudrv::device& dev, stream_options options) : stream_base(nullptr, nullptr) {
  state_ = detail::create_stream(detail::primary_context_token(dev), options);
  handle_ = state_->handle;
}

stream::stream(context_ref ctx, stream_options options) : stream_base(nullptr, nullptr) {
  const CUcontext handle = detail::require_context_handle(ctx.native_handle(), "cudrv::stream");
  state_ = detail::create_stream(detail::context_token::of(handle), options);
  handle_ = state_->handle;
}

stream stream::from_native_handle(CUstream handle) {
  if (handle == nullptr || handle == CU_STREAM_LEGACY || handle == CU_STREAM_PER_THREAD) {
    throw invalid_argument_error("cudrv::stream::from_native_handle",
                                 "a default stream cannot be owned; use stream_ref to view it");
  }
  // Its context is not asked for: the handle is the caller's word, and a stream of a destroyed
  // context cannot be queried safely. An adopted stream is therefore not checked for outliving its
  // context. Adopted either way: a failure to adopt destroys the handle (as std::shared_ptr deletes a
  // pointer it could not take).
  detail::stream_state* state = nullptr;
  try {
    state = detail::make_state(handle, nullptr);
  } catch (...) {
    detail::destroy_noexcept("cuStreamDestroy", [handle] { return detail::drv::cuStreamDestroy(handle); });
    throw;
  }
  return stream(handle, state);
}

CUstream stream::release() noexcept {
  detail::stream_state* s = std::exchange(state_, nullptr);
  CUstream h = std::exchange(handle_, nullptr);
  if (s != nullptr) {
    s->owned.store(false, std::memory_order_release);
    detail::orphan(s->sink.load(std::memory_order_acquire), h);
    detail::release_stream(s);
  }
  return h;
}

void stream::reset() noexcept {
  detail::stream_state* s = std::exchange(state_, nullptr);
  CUstream h = std::exchange(handle_, nullptr);
  if (s != nullptr) {
    if (detail::failure_sink* sink = s->sink.load(std::memory_order_acquire); sink != nullptr) {
      detail::orphan(sink, h);  // a stream that ran host callables
    }
    detail::release_stream(s);
  }
}

stream& stream::operator=(stream&& other) noexcept {
  if (this != &other) {
    reset();
    handle_ = std::exchange(other.handle_, nullptr);
    state_ = std::exchange(other.state_, nullptr);
  }
  return *this;
}

stream::~stream() { reset(); }

// --- device::default_stream ---------------------------------------------------------------------------

stream_ref device::default_stream() const {
  struct slot {
    stream* owner = nullptr;
    unsigned generation = 0;  // of the primary context the stream was made in
  };
  struct slots {
    std::mutex mutex;
    std::vector<slot> streams;  // one vector: growing it either succeeds or changes nothing
  };
  static auto* all = new slots;  // never destroyed: the streams live until the process ends
  std::lock_guard lock(all->mutex);
  const auto index = static_cast<std::size_t>(ordinal());
  if (all->streams.size() <= index) {
    all->streams.resize(index + 1);
  }
  slot& s = all->streams[index];
  const unsigned generation = detail::primary_context_generation(ordinal());
  if (s.owner != nullptr && s.generation != generation) {
    // reset_primary_context destroyed the stream with the context: forget the handle, make a new one
    (void)s.owner->release();
    delete std::exchange(s.owner, nullptr);
  }
  if (s.owner == nullptr) {
    s.owner = new stream(*this, stream_options{.non_blocking = false});
    s.generation = generation;
  }
  return *s.owner;
}

}  // namespace cudrv
