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

/// @brief The time between two recorded timed events (cuEventElapsedTime), with the driver's
/// resolution of about half a microsecond.
/// @throws error with `CUDA_ERROR_INVALID_HANDLE` when an event was created without
/// @ref event_flags::timing, `CUDA_ERROR_NOT_READY` when one has not completed
[[nodiscard]] std::chrono::duration<float, std::milli> elapsed_time(event_ref start, event_ref end);

}  // namespace cudrv
