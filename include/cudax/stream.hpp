/// @file stream.hpp
/// @brief CUDA streams: the non-owning @ref cudax::stream_ref and the owning @ref cudax::stream.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "cudax/context.hpp"
#include "cudax/device.hpp"

namespace cudax {

class event_ref;

namespace detail {
/// @brief Type-erased host work queued by @ref stream_ref::enqueue (internal).
struct host_task {
  virtual ~host_task() = default;
  virtual void run() = 0;
  CUstream stream = nullptr;
};
/// @brief Holds the user's callable until it has run (internal).
template <class F>
struct host_task_impl final : host_task {
  explicit host_task_impl(F&& f) : fn(std::move(f)) {}
  explicit host_task_impl(const F& f) : fn(f) {}
  void run() override { fn(); }
  F fn;
};
/// @brief Queues @p task on @p stream; takes ownership of @p task, also on failure (internal).
void enqueue_host_task(CUstream stream, host_task* task);
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

/// @brief A non-owning view of a CUDA stream. Trivially copyable; it does not keep the stream alive.
///
/// A `stream_ref` is never null: a null `CUstream` (the `cudaStream_t` value 0) is taken to mean the
/// legacy default stream, as the runtime does. Operations on a moved-from @ref stream throw
/// @ref invalid_argument_error.
/// @code
/// void enqueue_work(cudax::stream_ref s, cudax::event_ref done) {
///   s.enqueue([] { std::puts("reached"); });   // host callable, owned by cudax until it has run
///   s.record(done);
/// }
/// cudaStream_t raw = framework_stream();
/// enqueue_work(cudax::stream_ref(raw), ev);      // adopt without owning
/// @endcode
class stream_ref {
 public:
  /// @brief Views @p handle; a null handle means the legacy default stream.
  explicit stream_ref(CUstream handle) noexcept : handle_(handle != nullptr ? handle : CU_STREAM_LEGACY) {}
  stream_ref(std::nullptr_t) = delete;
  stream_ref(int) = delete;

  /// @brief Views an existing stream without owning it (same as the constructor).
  [[nodiscard]] static stream_ref from_native_handle(CUstream handle) noexcept { return stream_ref(handle); }
  /// @brief The legacy default stream (`CU_STREAM_LEGACY`), which synchronises with blocking streams.
  [[nodiscard]] static stream_ref legacy_default() noexcept { return stream_ref(CU_STREAM_LEGACY); }
  /// @brief The calling thread's per-thread default stream (`CU_STREAM_PER_THREAD`).
  [[nodiscard]] static stream_ref per_thread_default() noexcept { return stream_ref(CU_STREAM_PER_THREAD); }

  /// @brief The raw handle (also usable as a `cudaStream_t`).
  [[nodiscard]] constexpr CUstream native_handle() const noexcept { return handle_; }

  /// @brief Blocks until all work queued on the stream has completed.
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

  /// @brief Queues a host callable (cuLaunchHostFunc). cudax owns @p fn until it has run; an exception
  /// it throws is kept and rethrown as @ref host_callback_error by the next @ref synchronize of this
  /// stream (or reported to the destruction handler if the stream is destroyed first).
  ///
  /// The callable runs on a driver thread and must not call CUDA itself.
  /// @code
  /// std::atomic<bool> ran{false};
  /// s.enqueue([&ran] { ran = true; });
  /// s.synchronize();
  /// @endcode
  template <class F>
  void enqueue(F&& fn) const {
    static_assert(std::is_invocable_v<std::decay_t<F>&>, "enqueue needs a callable taking no arguments");
    require_handle("cudax::stream_ref::enqueue");
    detail::enqueue_host_task(handle_, new detail::host_task_impl<std::decay_t<F>>(std::forward<F>(fn)));
  }

  /// @brief The context the stream belongs to (cuStreamGetCtx).
  [[nodiscard]] context_ref context() const;
  /// @brief The device the stream belongs to.
  [[nodiscard]] cudax::device device() const;
  /// @brief The stream's priority.
  [[nodiscard]] int priority() const;
  /// @brief Whether the stream was created with `CU_STREAM_NON_BLOCKING`.
  [[nodiscard]] bool is_non_blocking() const;
  /// @brief The driver's unique id of the stream (cuStreamGetId).
  [[nodiscard]] unsigned long long id() const;

  /// @brief Two views are equal when they name the same stream.
  [[nodiscard]] friend constexpr bool operator==(stream_ref a, stream_ref b) noexcept { return a.handle_ == b.handle_; }

 protected:
  /// @brief For owners: views @p handle as given, null included (a moved-from owner).
  struct raw_tag {};
  /// @brief Stores @p handle unchanged.
  constexpr stream_ref(CUstream handle, raw_tag) noexcept : handle_(handle) {}
  /// @brief Throws @ref invalid_argument_error when the handle is null (a moved-from owner).
  void require_handle(const char* api) const;
  /// @brief The viewed handle; null only in a moved-from owner.
  CUstream handle_;
};

/// @brief An owning CUDA stream, destroyed with cuStreamDestroy. Move-only; converts to
/// @ref stream_ref.
///
/// @code
/// cudax::device dev(0);
/// cudax::stream s(dev);                                 // non-blocking, default priority
/// cudax::stream hi(dev, {.priority = dev.stream_priority_range().first});
/// cudax::stream adopted = cudax::stream::from_native_handle(raw);   // takes ownership
/// CUstream handed_off = adopted.release();                            // gives it back
/// @endcode
class stream : public stream_ref {
 public:
  /// @brief Creates a stream in @p dev's primary context.
  explicit stream(const cudax::device& dev, stream_options options = {});
  /// @brief Creates a stream in @p ctx.
  explicit stream(context_ref ctx, stream_options options = {});
  /// @brief Refused: the temporary owner would be destroyed at the end of the statement, before this object.
  stream(cudax::context&&, stream_options = {}) = delete;
  /// @brief Refused: the temporary owner would be destroyed at the end of the statement, before this object.
  stream(cudax::primary_context&&, stream_options = {}) = delete;
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  /// @brief Takes over @p other's stream; @p other becomes empty.
  stream(stream&& other) noexcept : stream_ref(std::exchange(other.handle_, nullptr), raw_tag{}) {}
  /// @brief Destroys the held stream, then takes over @p other's.
  stream& operator=(stream&& other) noexcept;
  /// @brief Destroys the stream once its queued work completes (cuStreamDestroy); errors go to the
  /// destruction handler.
  ~stream();

  /// @brief Takes ownership of @p handle (a stream created with cuStreamCreate or cudaStreamCreate).
  /// @throws invalid_argument_error for a null handle or a default stream, which cannot be owned
  [[nodiscard]] static stream from_native_handle(CUstream handle);
  /// @brief Gives up ownership; the caller must destroy the returned stream.
  [[nodiscard]] CUstream release() noexcept { return std::exchange(handle_, nullptr); }
  /// @brief Whether this object holds a stream (false after a move or @ref release).
  [[nodiscard]] explicit operator bool() const noexcept { return handle_ != nullptr; }

 private:
  explicit stream(CUstream handle) noexcept : stream_ref(handle, raw_tag{}) {}
  void destroy() noexcept;
};

}  // namespace cudax
