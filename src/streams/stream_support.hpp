// Internal: host tasks, stream bookkeeping and the disposal of finished callables, shared by the
// streams layer and the layers above it (memory, code, execution).
#pragma once

#include <cuda.h>

#include <atomic>

#include "cudrv/stream.hpp"
#include "driver/disposal.hpp"

namespace cudrv::detail {

// The bookkeeping of a stream cudrv owns, shared by the cudrv::stream and the stream-ordered buffers
// on it. Defined here so that taking and dropping a reference is inline: every stream-ordered
// allocation and free does both (issue 37).
struct stream_state {
  std::atomic<int> users{1};  // the owner and the stream-ordered buffers still to be freed on it
  CUstream handle = nullptr;
  context_token context;
  std::atomic<bool> owned{true};  // destroy the CUstream when the last user goes
  std::atomic<failure_sink*> sink{nullptr};
  // What the stream keeps alive (a green context), released after the stream is destroyed; or null.
  disposal_fn keep_alive_release = nullptr;
  void* keep_alive = nullptr;
};

// What release_stream does when the last user goes: destroys the CUstream (when owned, and only if its
// context is alive), releases the sink and what the stream keeps alive, deletes the state.
void destroy_stream_state(stream_state* s) noexcept;

// Takes a counted reference on an owned stream (a stream-ordered buffer that will be freed on it);
// null is ignored. The CUstream is destroyed when the owner and every such user have released it.
inline void retain_stream(stream_state* s) noexcept {
  if (s != nullptr) {
    s->users.fetch_add(1, std::memory_order_relaxed);
  }
}
inline void release_stream(stream_state* s) noexcept {
  if (s != nullptr && s->users.fetch_sub(1, std::memory_order_acq_rel) == 1) [[unlikely]] {
    destroy_stream_state(s);
  }
}
// Owns handle, a stream of context ctx, in a cudrv::stream whose bookkeeping calls
// keep_alive_release(keep_alive) (when not null) once the stream is destroyed and no longer needed:
// what the stream keeps alive, such as the green context it was made in. Adopts both even when it
// throws (the stream is destroyed and keep_alive released then).
stream adopt_stream(CUstream handle, CUcontext ctx, disposal_fn keep_alive_release, void* keep_alive);
// Whether the context of an owned stream still exists (true for null: not known to cudrv).
inline bool stream_context_alive(const stream_state* s) noexcept { return s == nullptr || s->context.alive(); }

// Throws invalid_argument_error for an empty stream (see require_stream).
[[noreturn]] void throw_empty_stream(const char* api);

// Throws invalid_argument_error for a null stream: only a moved-from or released cudrv::stream gives
// one (stream_ref maps a null handle to CU_STREAM_LEGACY), and the driver would silently take it for
// the legacy default stream.
inline void require_stream(CUstream stream, const char* api) {
  if (stream == nullptr) [[unlikely]] {
    throw_empty_stream(api);
  }
}

// Destroys a host task after it ran (or when it will never run): at once when its callable's
// destruction does nothing, else on cudrv's disposal thread, never on the caller's thread, which may
// be the driver's callback thread (where freeing CUDA memory is not permitted). Never throws.
void dispose(host_task* task) noexcept;
// Destroys a host task that never ran, on the calling thread (a user's thread). Never throws.
void discard(host_task* task) noexcept;

// Host functions for cuLaunchHostFunc and graph host nodes (data: a host_task).
void CUDA_CB run_host_task(void* data);
void CUDA_CB run_graph_host_task(void* data);
// User-object destructor that disposes of a host task.
void CUDA_CB dispose_host_task_callback(void* data);

// Makes graph own data through a user object whose destructor is destroy (called at once, and the
// exception rethrown, when this fails). where names the graph or stream for messages.
void retain_in_graph(CUgraph graph, void* data, void (*destroy)(void*), const char* where);

}  // namespace cudrv::detail
