/// @file stream.hpp
/// @brief CUDA streams: the non-owning @ref cudrv::stream_ref and the owning @ref cudrv::stream.
///
/// Layer: streams (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "cudrv/context.hpp"
#include "cudrv/detail/exchange.hpp"
#include "cudrv/device.hpp"
#include "cudrv/event.hpp"

namespace cudrv {

namespace detail {
/// @brief Type-erased host work queued by @ref stream_base::enqueue (internal).
struct host_task {
  virtual ~host_task() = default;
  virtual void run() = 0;
  struct failure_sink* sink = nullptr;  ///< Where a failure of run() goes (counted reference), or null.
  bool trivial = false;                 ///< Whether destroying the callable does nothing (safe anywhere).
};
/// @brief Holds the user's callable until it has run (internal).
template <class F>
struct host_task_impl final : host_task {
  explicit host_task_impl(F&& f) : fn(std::move(f)) { trivial = std::is_trivially_destructible_v<F>; }
  explicit host_task_impl(const F& f) : fn(f) { trivial = std::is_trivially_destructible_v<F>; }
  void run() override { fn(); }
  F fn;
};
/// @brief What cudrv keeps for a stream it owns (internal): the handle, its context, who still needs
/// it, and where failures of host callables wait for a synchronisation.
struct stream_state;
/// @brief Queues @p task on @p stream; takes ownership of @p task, also on failure (internal).
void enqueue_host_task(CUstream stream, stream_state* state, host_task* task);
}  // namespace detail

/// @brief Options for creating a @ref stream.
struct stream_options {
  /// @brief Create a non-blocking stream (`CU_STREAM_NON_BLOCKING`), which does not synchronise with
  /// the legacy default stream. On by default.
  bool non_blocking = true;
  /// @brief The priority; numerically lower is higher, see @ref device::stream_priority_range.
  /// Values outside the range are clamped by the driver.
  int priority = 0;
};

class stream_ref;

/// @brief The operations every stream handle offers, shared by the view @ref cudrv::stream_ref and
/// the owner @ref cudrv::stream. Not constructible or assignable on its own: an owner is not a view,
/// so a function taking a `stream_ref&` cannot be handed a `stream` whose handle it would overwrite.
class stream_base {
 public:
  /// @brief The raw handle (also usable as a `cudaStream_t`).
  [[nodiscard]] constexpr CUstream native_handle() const noexcept { return handle_; }

  /// @brief Blocks until all work queued on the stream has completed. Host callables queued with
  /// @ref enqueue that have run are destroyed by then too.
  /// @throws host_callback_error when a callable queued with @ref enqueue threw; each such failure is
  /// thrown once, the oldest first, so two failures surface at two calls
  void synchronize() const;
  /// @brief Whether all work queued on the stream has completed (cuStreamQuery); never blocks.
  [[nodiscard]] bool is_done() const;
  /// @brief Makes later work on this stream wait until @p ev has completed (cuStreamWaitEvent).
  void wait(event_ref ev) const;
  /// @brief Makes later work on this stream wait for all work queued on @p other so far.
  void wait(stream_ref other) const;
  /// @brief Records @p ev on this stream (cuEventRecord).
  void record(event_ref ev) const;
  /// @brief Creates an event in the stream's context and records it here: a marker of the work queued
  /// so far, to wait on or time (`event_flags::timing`).
  /// @code
  /// cudrv::event done = s.record();
  /// other.wait(done);
  /// @endcode
  [[nodiscard]] event record(event_flags flags) const;
  /// @brief As @ref record(event_flags) const, with an untimed event.
  [[nodiscard]] event record() const { return record(event_flags::none); }

  /// @brief Queues a host callable (cuLaunchHostFunc). cudrv owns @p fn until it has run and is
  /// destroyed, never on the driver's callback thread, so capturing owning objects keeps them alive
  /// until the callable has run: `s.enqueue([b = std::move(buffer)] {})`.
  ///
  /// An exception @p fn throws is kept and rethrown as @ref host_callback_error by the next
  /// @ref synchronize of the stream, through its owner or any view taken from the owner (or of the
  /// same default stream). For a stream cudrv does not own (a view of a raw handle) it goes to the
  /// destruction handler, as it does when the owning stream is destroyed first. The callable itself
  /// runs on a driver thread and must not call CUDA.
  ///
  /// On a capturing stream the callable becomes a host node of the capture graph instead, which owns
  /// it. When the driver cannot say whether the stream captures (`cuStreamGetCaptureInfo` fails), the
  /// call throws that error, and the callable is destroyed without having run.
  /// @code
  /// std::atomic<bool> ran{false};
  /// s.enqueue([&ran] { ran = true; });
  /// s.synchronize();
  /// @endcode
  template <class F>
  void enqueue(F&& fn) const {
    static_assert(std::is_invocable_v<std::decay_t<F>&>, "enqueue needs a callable taking no arguments");
    require_handle("cudrv::stream_base::enqueue");
    detail::enqueue_host_task(handle_, state_, new detail::host_task_impl<std::decay_t<F>>(std::forward<F>(fn)));
  }

  /// @brief The context the stream belongs to (cuStreamGetCtx).
  [[nodiscard]] context_ref context() const;
  /// @brief The device the stream belongs to.
  [[nodiscard]] cudrv::device device() const;
  /// @brief The stream's priority.
  [[nodiscard]] int priority() const;
  /// @brief Whether the stream was created with `CU_STREAM_NON_BLOCKING`.
  [[nodiscard]] bool is_non_blocking() const;
  /// @brief The driver's unique id of the stream (cuStreamGetId).
  [[nodiscard]] unsigned long long id() const;

  /// @brief cudrv's bookkeeping of an owned stream, null for other streams (internal).
  [[nodiscard]] detail::stream_state* state() const noexcept { return state_; }

  /// @brief Two handles are equal when they name the same stream (views and owners alike).
  [[nodiscard]] friend constexpr bool operator==(const stream_base& a, const stream_base& b) noexcept {
    return a.handle_ == b.handle_;
  }

 protected:
  /// @brief Holds @p handle and @p state unchanged.
  constexpr stream_base(CUstream handle, detail::stream_state* state) noexcept : handle_(handle), state_(state) {}
  /// @brief Copies the handle (for the view).
  constexpr stream_base(const stream_base&) noexcept = default;
  /// @brief Copies the handle (for the view).
  constexpr stream_base& operator=(const stream_base&) noexcept = default;
  ~stream_base() = default;
  /// @brief Throws @ref invalid_argument_error when the handle is null (a moved-from owner).
  void require_handle(const char* api) const;
  /// @brief The handle; null only in a moved-from owner.
  CUstream handle_;
  /// @brief The owner's bookkeeping, shared by its views; null for streams cudrv does not own.
  detail::stream_state* state_;
};

/// @brief A non-owning view of a CUDA stream. Trivially copyable; it does not keep the stream alive.
///
/// A `stream_ref` is never null: a null `CUstream` (the `cudaStream_t` value 0) is taken to mean the
/// legacy default stream, as the runtime does. Operations on a moved-from @ref stream throw
/// @ref invalid_argument_error.
/// @code
/// void enqueue_work(cudrv::stream_ref s, cudrv::event_ref done) {
///   s.enqueue([] { std::puts("reached"); });   // host callable, owned by cudrv until it has run
///   s.record(done);
/// }
/// cudaStream_t raw = framework_stream();
/// enqueue_work(cudrv::stream_ref(raw), ev);      // adopt without owning
/// @endcode
class stream_ref : public stream_base {
 public:
  /// @brief Views @p handle; a null handle means the legacy default stream.
  explicit stream_ref(CUstream handle) noexcept : stream_base(handle != nullptr ? handle : CU_STREAM_LEGACY, nullptr) {}
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  stream_ref(std::nullptr_t) = delete;
  stream_ref(int) = delete;
  /// @}
  /// @brief Views the same stream as @p other.
  constexpr stream_ref(const stream_ref& other) noexcept = default;
  /// @brief Views the stream @p other views.
  constexpr stream_ref& operator=(const stream_ref& other) noexcept = default;

  /// @brief Views an existing stream without owning it (same as the constructor).
  [[nodiscard]] static stream_ref from_native_handle(CUstream handle) noexcept { return stream_ref(handle); }
  /// @brief The legacy default stream (`CU_STREAM_LEGACY`), which synchronises with blocking streams.
  [[nodiscard]] static stream_ref legacy_default() noexcept { return stream_ref(CU_STREAM_LEGACY); }
  /// @brief The calling thread's per-thread default stream (`CU_STREAM_PER_THREAD`).
  [[nodiscard]] static stream_ref per_thread_default() noexcept { return stream_ref(CU_STREAM_PER_THREAD); }

 private:
  friend class stream;
  constexpr stream_ref(CUstream handle, detail::stream_state* state) noexcept : stream_base(handle, state) {}
};

/// @brief An owning CUDA stream. Move-only; converts to @ref stream_ref (it is not one, so it cannot
/// be overwritten through a `stream_ref&`).
///
/// The `CUstream` is destroyed (cuStreamDestroy) when the owner is destroyed and no stream-ordered
/// buffer is still to be freed on it: a buffer allocated on the stream keeps it alive, whatever order
/// the two are destroyed in.
/// @code
/// cudrv::device dev(0);
/// cudrv::stream s(dev);                                 // non-blocking, default priority
/// cudrv::stream hi(dev, {.priority = dev.stream_priority_range().first});
/// cudrv::stream adopted = cudrv::stream::from_native_handle(raw);   // takes ownership
/// CUstream handed_off = adopted.release();                            // gives it back
/// @endcode
class stream : public stream_base {
 public:
  /// @brief Creates a stream in @p dev's primary context.
  explicit stream(const cudrv::device& dev, stream_options options = {});
  /// @brief Creates a stream in @p ctx.
  explicit stream(context_ref ctx, stream_options options = {});
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the temporary owner would be destroyed at the end of the statement, before this object.
  stream(cudrv::context&&, stream_options = {}) = delete;
  /// @brief Refused: the temporary owner would be destroyed at the end of the statement, before this object.
  stream(cudrv::primary_context&&, stream_options = {}) = delete;
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  /// @}
  /// @brief Takes over @p other's stream; @p other becomes empty.
  stream(stream&& other) noexcept
      : stream_base(cudrv::detail::exchange(other.handle_, nullptr), cudrv::detail::exchange(other.state_, nullptr)) {}
  /// @brief Destroys the held stream, then takes over @p other's.
  stream& operator=(stream&& other) noexcept;
  /// @brief Destroys the stream once its queued work completes (cuStreamDestroy), or once the last
  /// stream-ordered buffer on it is freed; errors go to the destruction handler. Failures of host
  /// callables not yet thrown by a synchronize go to the destruction handler.
  ~stream();

  /// @brief Takes ownership of @p handle (a stream created with cuStreamCreate or cudaStreamCreate).
  /// The handle is adopted even when this throws for want of memory: it is destroyed then.
  /// @throws invalid_argument_error for a null handle or a default stream, which cannot be owned (the
  ///   handle stays the caller's)
  [[nodiscard]] static stream from_native_handle(CUstream handle);
  /// @brief Gives up ownership; the caller must destroy the returned stream (after the stream-ordered
  /// buffers that will be freed on it).
  [[nodiscard]] CUstream release() noexcept;
  /// @brief Destroys the stream now (as the destructor does); the object becomes empty.
  void reset() noexcept;
  /// @brief Whether this object holds a stream (false after a move or @ref release).
  [[nodiscard]] explicit operator bool() const noexcept { return handle_ != nullptr; }
  /// @brief A view of the stream, sharing its bookkeeping (host-callable failures).
  operator stream_ref() const& noexcept { return stream_ref(handle_, state_); }  // NOLINT: implicit on purpose
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: a view of a temporary stream would outlive it.
  operator stream_ref() const&& = delete;
  /// @}

 private:
  stream(CUstream handle, detail::stream_state* state) noexcept : stream_base(handle, state) {}
};

}  // namespace cudrv
