/// @file event.hpp
/// @brief CUDA events: the non-owning @ref cudrv::event_ref, the owning @ref cudrv::event, and
/// @ref cudrv::elapsed_time.
///
/// Layer: streams (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

// <chrono> costs ~0.35 s per translation unit with libstdc++ in C++20 (calendars, time zones);
// std::chrono::duration alone lives in <bits/chrono.h> there.
#if defined(__GLIBCXX__) && __has_include(<bits/chrono.h>)
#include <bits/chrono.h>
#else
#include <chrono>
#endif
#include <utility>

#include "cudrv/context.hpp"
#include "cudrv/detail/exchange.hpp"
#include "cudrv/device.hpp"

namespace cudrv {

/// @brief Flags for creating an @ref cudrv::event. Timing is off unless asked for: untimed events are cheaper
/// to record and wait on.
enum class event_flags : unsigned int {
  none = 0,           ///< Untimed, spin-waiting, process-local.
  timing = 1,         ///< Record timestamps, for @ref elapsed_time.
  blocking_sync = 2,  ///< @ref event_ref::synchronize blocks the thread instead of spinning.
  interprocess = 4,   ///< Can be shared with another process (@ref event::ipc_handle); excludes timing.
};

/// @brief Combines event flags.
[[nodiscard]] constexpr event_flags operator|(event_flags a, event_flags b) noexcept {
  return static_cast<event_flags>(static_cast<unsigned int>(a) | static_cast<unsigned int>(b));
}
/// @brief Intersects event flags.
[[nodiscard]] constexpr event_flags operator&(event_flags a, event_flags b) noexcept {
  return static_cast<event_flags>(static_cast<unsigned int>(a) & static_cast<unsigned int>(b));
}

class stream_ref;
class event_ref;

/// @brief The operations every event handle offers, shared by the view @ref cudrv::event_ref and the
/// owner @ref cudrv::event. Not constructible or assignable on its own (see @ref cudrv::context_base).
class event_base {
 public:
  /// @brief The raw handle (also usable as a `cudaEvent_t`).
  [[nodiscard]] constexpr CUevent native_handle() const noexcept { return handle_; }
  /// @brief Records the event on @p s (cuEventRecord).
  void record(stream_ref s) const;
  /// @brief Blocks until the work before the last record has completed.
  void synchronize() const;
  /// @brief Whether the work before the last record has completed (cuEventQuery); never blocks.
  [[nodiscard]] bool is_done() const;

  /// @brief Two handles are equal when they name the same event (views and owners alike).
  [[nodiscard]] friend constexpr bool operator==(const event_base& a, const event_base& b) noexcept {
    return a.handle_ == b.handle_;
  }

 protected:
  /// @brief Holds @p handle.
  constexpr explicit event_base(CUevent handle) noexcept : handle_(handle) {}
  /// @brief Copies the handle (for the view).
  constexpr event_base(const event_base&) noexcept = default;
  /// @brief Copies the handle (for the view).
  constexpr event_base& operator=(const event_base&) noexcept = default;
  ~event_base() = default;
  /// @brief Throws @ref invalid_argument_error when the handle is null (a moved-from owner).
  void require_handle(const char* api) const;
  /// @brief The handle; null only in a moved-from owner.
  CUevent handle_;
};

/// @brief A non-owning view of a CUDA event. Trivially copyable.
class event_ref : public event_base {
 public:
  /// @brief Views @p handle.
  constexpr explicit event_ref(CUevent handle) noexcept : event_base(handle) {}
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  event_ref(std::nullptr_t) = delete;
  event_ref(int) = delete;
  /// @}
  /// @brief Views the same event as @p other.
  constexpr event_ref(const event_ref& other) noexcept = default;
  /// @brief Views the event @p other views.
  constexpr event_ref& operator=(const event_ref& other) noexcept = default;

  /// @brief Views an existing event without owning it (same as the constructor).
  [[nodiscard]] static constexpr event_ref from_native_handle(CUevent handle) noexcept { return event_ref(handle); }
};

/// @brief An owning CUDA event, destroyed with cuEventDestroy. Move-only; converts to @ref event_ref
/// (it is not one, so it cannot be overwritten through an `event_ref&`).
///
/// @code
/// cudrv::event start(dev, cudrv::event_flags::timing), stop(dev, cudrv::event_flags::timing);
/// start.record(s);
/// enqueue_work(s);
/// stop.record(s);
/// stop.synchronize();
/// auto ms = cudrv::elapsed_time(start, stop).count();   // float milliseconds
/// @endcode
class event : public event_base {
 public:
  /// @brief Creates an event in @p dev's primary context.
  /// @throws invalid_argument_error for `timing | interprocess`, which the driver does not allow
  explicit event(const cudrv::device& dev, event_flags flags = event_flags::none);
  /// @brief Creates an event in @p ctx.
  explicit event(context_ref ctx, event_flags flags = event_flags::none);
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the temporary owner would be destroyed at the end of the statement, before this object.
  event(cudrv::context&&, event_flags = event_flags::none) = delete;
  /// @brief Refused: the temporary owner would be destroyed at the end of the statement, before this object.
  event(cudrv::primary_context&&, event_flags = event_flags::none) = delete;
  event(const event&) = delete;
  event& operator=(const event&) = delete;
  /// @}
  /// @brief Takes over @p other's event; @p other becomes empty.
  event(event&& other) noexcept
      : event_base(cudrv::detail::exchange(other.handle_, nullptr)),
        context_(cudrv::detail::exchange(other.context_, {})) {}
  /// @brief Destroys the held event, then takes over @p other's.
  event& operator=(event&& other) noexcept;
  /// @brief Destroys the event; errors go to the destruction handler. When the event's context was
  /// destroyed first (which destroyed the event), nothing is destroyed and the handler is told.
  ~event();

  /// @brief Takes ownership of @p handle, an event of context @p ctx.
  [[nodiscard]] static event from_native_handle(CUevent handle, context_ref ctx) noexcept {
    return event(handle, detail::context_token::of(ctx.native_handle()));
  }
  /// @brief Takes ownership of @p handle, an event whose context is not known to the caller; calls
  /// that need the context (@ref ipc_handle) then use the one current at the time of the call.
  [[nodiscard]] static event from_native_handle(CUevent handle) noexcept { return event(handle, {}); }
  /// @brief Opens an event another process exported with @ref ipc_handle (cuIpcOpenEventHandle), in
  /// @p dev's primary context.
  [[nodiscard]] static event from_ipc_handle(const cudrv::device& dev, const CUipcEventHandle& handle);
  /// @brief The handle to pass to another process; the event needs @ref event_flags::interprocess.
  [[nodiscard]] CUipcEventHandle ipc_handle() const;
  /// @brief Gives up ownership; the caller must destroy the returned event.
  [[nodiscard]] CUevent release() noexcept {
    context_ = {};
    return cudrv::detail::exchange(handle_, nullptr);
  }
  /// @brief Destroys the event now; the object becomes empty.
  void reset() noexcept;
  /// @brief Whether this object holds an event (false after a move or @ref release).
  [[nodiscard]] explicit operator bool() const noexcept { return handle_ != nullptr; }
  /// @brief A view of the event.
  operator event_ref() const& noexcept { return event_ref(handle_); }  // NOLINT: implicit on purpose
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: a view of a temporary event would outlive it.
  operator event_ref() const&& = delete;
  /// @}
  /// @brief The context the event was created in.
  /// @throws invalid_argument_error when it is not known (adopted without a context) or the event is empty
  [[nodiscard]] context_ref context() const;

 private:
  event(CUevent handle, detail::context_token ctx) noexcept : event_base(handle), context_(ctx) {}
  detail::context_token context_;
};

namespace detail {
/// @brief The shared state of an @ref cudrv::event_pool and the events it handed out (internal).
struct event_pool_state;
}  // namespace detail

class event_pool;

/// @brief An event of an @ref cudrv::event_pool, handed out by @ref event_pool::acquire and given back
/// to the pool when destroyed (no driver call either way for a device's primary context). Move-only;
/// converts to @ref event_ref.
///
/// It keeps its pool's state alive: destroying the @ref cudrv::event_pool first is safe, the event is
/// then destroyed when it comes back (and the state with the last one). A recycled event carries its previous record
/// until it is recorded again: record it before waiting on it or asking @ref is_done.
class pooled_event : public event_base {
 public:
  /// @brief An empty pooled event (holds nothing; @ref event_pool::acquire makes full ones).
  constexpr pooled_event() noexcept : event_base(nullptr) {}
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  pooled_event(const pooled_event&) = delete;
  pooled_event& operator=(const pooled_event&) = delete;
  /// @}
  /// @brief Takes over @p other's event; @p other becomes empty.
  pooled_event(pooled_event&& other) noexcept
      : event_base(cudrv::detail::exchange(other.handle_, nullptr)),
        pool_(cudrv::detail::exchange(other.pool_, nullptr)) {}
  /// @brief Gives the held event back, then takes over @p other's.
  pooled_event& operator=(pooled_event&& other) noexcept;
  /// @brief Gives the event back to its pool (or destroys it when the pool is gone). Never throws.
  ~pooled_event() { reset(); }
  /// @brief Gives the event back to its pool now; the object becomes empty.
  void reset() noexcept;
  /// @brief Whether this object holds an event (false after a move or @ref reset).
  [[nodiscard]] explicit operator bool() const noexcept { return handle_ != nullptr; }
  /// @brief A view of the event, valid while this object holds it.
  operator event_ref() const& noexcept { return event_ref(handle_); }  // NOLINT: implicit on purpose
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: a view of a temporary pooled event would outlive its time out of the pool.
  operator event_ref() const&& = delete;
  /// @}

 private:
  friend class event_pool;
  pooled_event(CUevent handle, detail::event_pool_state* pool) noexcept : event_base(handle), pool_(pool) {}
  detail::event_pool_state* pool_ = nullptr;
};

/// @brief Reusable events of one context and one set of flags, like the event caches of deep-learning
/// frameworks: @ref acquire hands out an idle event without a driver call for a device's primary
/// context (a pool of another context asks for the context's id first, to refuse a destroyed one;
/// an event is created, with the context check of @ref cudrv::event, only when none is idle), and a
/// @ref cudrv::pooled_event goes back to the pool when destroyed. Idle events are destroyed with the
/// pool; an event still out when the pool went first is destroyed when it comes back.
///
/// Thread safety: @ref acquire, @ref reserve, @ref idle and @ref size may be called from several
/// threads at once, and pooled events may be given back on any thread (one mutex per pool). Moving or
/// destroying the pool object itself must not race with calls on it, as for any object.
///
/// @code
/// cudrv::event_pool pool(dev);                 // untimed events of dev's primary context
/// pool.reserve(4);                             // creates them now, off the hot path
/// {
///   cudrv::pooled_event done = pool.acquire(); // no driver call: an idle event
///   done.record(s);
///   done.synchronize();
/// }                                            // back in the pool, not destroyed
/// @endcode
class event_pool {
 public:
  /// @brief A pool of events of @p dev's primary context, created with @p flags.
  /// @throws invalid_argument_error for unknown flags, `timing | interprocess`, or
  /// @ref event_flags::interprocess (another process cannot know that an event is recycled)
  explicit event_pool(const cudrv::device& dev, event_flags flags = event_flags::none);
  /// @brief A pool of events of @p ctx, created with @p flags.
  /// @throws invalid_argument_error as the other constructor, and for an empty context
  explicit event_pool(context_ref ctx, event_flags flags = event_flags::none);
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the temporary owner would be destroyed at the end of the statement, before this object.
  event_pool(cudrv::context&&, event_flags = event_flags::none) = delete;
  /// @brief Refused: the temporary owner would be destroyed at the end of the statement, before this object.
  event_pool(cudrv::primary_context&&, event_flags = event_flags::none) = delete;
  event_pool(const event_pool&) = delete;
  event_pool& operator=(const event_pool&) = delete;
  /// @}
  /// @brief Takes over @p other's events (pooled events out of @p other now return here); @p other becomes empty.
  event_pool(event_pool&& other) noexcept : state_(cudrv::detail::exchange(other.state_, nullptr)) {}
  /// @brief Gives up the held pool, then takes over @p other's.
  event_pool& operator=(event_pool&& other) noexcept;
  /// @brief Destroys the idle events; those still out are destroyed when given back. Never throws.
  ~event_pool() { reset(); }

  /// @brief An idle event, or a new one when none is idle. The event's last record, if recycled, is
  /// its previous user's.
  /// @throws invalid_argument_error for an empty pool, or when the pool's context was destroyed;
  /// the driver's error when a new event cannot be created
  [[nodiscard]] pooled_event acquire();
  /// @brief Creates events until at least @p count are idle (e.g. before a timed loop).
  void reserve(std::size_t count);
  /// @brief The events waiting in the pool.
  [[nodiscard]] std::size_t idle() const;
  /// @brief The events the pool holds, idle or out.
  [[nodiscard]] std::size_t size() const;
  /// @brief The flags the pool's events were created with.
  [[nodiscard]] event_flags flags() const;
  /// @brief The context the pool's events belong to.
  [[nodiscard]] context_ref context() const;
  /// @brief Gives up the pool now (as the destructor); the object becomes empty.
  void reset() noexcept;
  /// @brief Whether this object holds a pool (false after a move or @ref reset).
  [[nodiscard]] explicit operator bool() const noexcept { return state_ != nullptr; }

 private:
  detail::event_pool_state& require_state(const char* api) const;
  detail::event_pool_state* state_ = nullptr;
};

/// @brief The time between two recorded timed events (cuEventElapsedTime), with the driver's
/// resolution of about half a microsecond.
/// @throws error with `CUDA_ERROR_INVALID_HANDLE` when an event was created without
/// @ref event_flags::timing, `CUDA_ERROR_NOT_READY` when one has not completed
[[nodiscard]] std::chrono::duration<float, std::milli> elapsed_time(event_ref start, event_ref end);

}  // namespace cudrv
