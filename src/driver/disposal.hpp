// Internal: cudrv's disposal thread. Work that must not run on the driver's callback threads (freeing
// CUDA memory, unloading a library, destroying a callable that owns either) is handed to one cudrv
// thread, started on first need. Part of the driver layer so that every layer above may use it.
#pragma once

namespace cudrv::detail {

/// Destroys an object on the disposal thread.
using disposal_fn = void (*)(void* object) noexcept;

// Queues destroy(object) for the disposal thread. Returns false, and destroys nothing, when the thread
// or the queue entry cannot be created (the caller then leaks the object, which is safer than
// destroying it on a callback thread). Never throws.
bool dispose_on_disposal_thread(disposal_fn destroy, void* object) noexcept;

// Waits until everything queued so far is destroyed (returns at once when nothing is pending, or when
// called on the disposal thread itself). Never throws.
void await_disposals() noexcept;

}  // namespace cudrv::detail
