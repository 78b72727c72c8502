/// @file context.hpp
/// @brief CUDA contexts: the non-owning @ref cudrv::context_ref, the owning @ref cudrv::context and
/// @ref cudrv::primary_context, and the scoped @ref cudrv::context_guard.
///
/// Layer: driver (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <cstddef>
#include <utility>

#include "cudrv/detail/exchange.hpp"

namespace cudrv {

class device;

/// @brief Flags for @ref cudrv::context creation and for primary contexts (the `CU_CTX_*` values).
enum class context_flags : unsigned int {
  sched_auto = CU_CTX_SCHED_AUTO,                    ///< Let the driver choose how the host thread waits.
  sched_spin = CU_CTX_SCHED_SPIN,                    ///< Spin while waiting for the GPU.
  sched_yield = CU_CTX_SCHED_YIELD,                  ///< Yield the thread while waiting.
  sched_blocking_sync = CU_CTX_SCHED_BLOCKING_SYNC,  ///< Block on a synchronisation primitive.
  map_host = CU_CTX_MAP_HOST,                        ///< Allow mapped pinned host memory (always on since CUDA 11).
  lmem_resize_to_max = CU_CTX_LMEM_RESIZE_TO_MAX,    ///< Keep local memory at its largest size after a resize.
};

/// @brief Combines two context flags.
[[nodiscard]] constexpr context_flags operator|(context_flags a, context_flags b) noexcept {
  return static_cast<context_flags>(static_cast<unsigned int>(a) | static_cast<unsigned int>(b));
}

namespace detail {
/// @brief Names one context for its whole life (internal): the handle and the driver's unique id
/// (`cuCtxGetId`), so that a handle value the driver gives to a later context is not taken for it.
/// Objects that must be destroyed in their context keep one and skip their destruction, with a
/// report to the destruction handler, when the context went first (the driver freed them with it).
struct context_token {
  CUcontext handle = nullptr;  ///< The context.
  unsigned long long id = 0;   ///< Its unique id; 0 when the driver cannot tell (taken to live as long as the process).
  /// @brief The token of @p ctx: for a primary context that cudrv retains for the process, its device
  /// and reset generation (only device::reset_primary_context can end it; no driver call), else the
  /// driver's unique id, or 0 when the driver cannot tell.
  static context_token of(CUcontext ctx) noexcept;
  /// @brief Whether the context still exists (always true for id 0). Never throws.
  [[nodiscard]] bool alive() const noexcept { return id == 0 || alive_by_id(); }
  /// @brief The driver's answer for a nonzero id: whether the handle still names that context.
  [[nodiscard]] bool alive_by_id() const noexcept;
};
}  // namespace detail

class context_ref;

/// @brief The operations every context handle offers, shared by the view @ref cudrv::context_ref and
/// the owners @ref cudrv::context and @ref cudrv::primary_context.
///
/// Not constructible or assignable on its own: an owner is not a view, so a function taking a
/// `context_ref&` cannot be handed an owner whose handle it would overwrite.
class context_base {
 public:
  /// @brief The raw handle (null for a moved-from owner).
  [[nodiscard]] constexpr CUcontext native_handle() const noexcept { return handle_; }
  /// @brief The device the context belongs to.
  [[nodiscard]] cudrv::device device() const;
  /// @brief The `CU_CTX_*` flags the context was created with.
  [[nodiscard]] unsigned int flags() const;
  /// @brief Blocks until all work in the context has completed.
  void synchronize() const;
  /// @brief The greatest (numerically lowest) and least stream priority, as {greatest, least}.
  [[nodiscard]] std::pair<int, int> stream_priority_range() const;
  /// @brief Lets kernels in this context access memory of @p peer (cuCtxEnablePeerAccess).
  /// Enabling access that is already enabled is not an error.
  void enable_peer_access(context_ref peer) const;
  /// @brief Revokes access to the memory of @p peer (cuCtxDisablePeerAccess).
  void disable_peer_access(context_ref peer) const;
  /// @brief Reads a context limit (cuCtxGetLimit), e.g. `CU_LIMIT_STACK_SIZE`.
  [[nodiscard]] std::size_t limit(CUlimit which) const;
  /// @brief Sets a context limit (cuCtxSetLimit).
  void set_limit(CUlimit which, std::size_t value) const;

  /// @brief Two handles are equal when they name the same context (views and owners alike).
  [[nodiscard]] friend constexpr bool operator==(const context_base& a, const context_base& b) noexcept {
    return a.handle_ == b.handle_;
  }

 protected:
  /// @brief Holds @p handle.
  constexpr explicit context_base(CUcontext handle) noexcept : handle_(handle) {}
  /// @brief Copies the handle (for the views).
  constexpr context_base(const context_base&) noexcept = default;
  /// @brief Copies the handle (for the views).
  constexpr context_base& operator=(const context_base&) noexcept = default;
  ~context_base() = default;
  /// @brief Throws @ref invalid_argument_error when the handle is null (a moved-from owner).
  void require_handle(const char* api) const;
  /// @brief The handle; null only in a moved-from owner.
  CUcontext handle_;
};

/// @brief A non-owning view of a CUDA context. Trivially copyable; it does not keep the context
/// alive.
///
/// @code
/// cudrv::context_ref ctx = cudrv::device(0).primary_context();
/// ctx.synchronize();                      // runs in ctx, leaves the caller's current context alone
/// std::printf("%d\n", ctx.device().ordinal());
/// @endcode
class context_ref : public context_base {
 public:
  /// @brief Views an existing context.
  /// @param handle a valid CUcontext
  constexpr explicit context_ref(CUcontext handle) noexcept : context_base(handle) {}
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  context_ref(std::nullptr_t) = delete;
  context_ref(int) = delete;
  /// @}
  /// @brief Views the same context as @p other.
  constexpr context_ref(const context_ref& other) noexcept = default;
  /// @brief Views the context @p other views.
  constexpr context_ref& operator=(const context_ref& other) noexcept = default;

  /// @brief The context that is current on the calling thread.
  /// @throws invalid_argument_error when no context is current
  [[nodiscard]] static context_ref current();
};

/// @brief An owning context created with cuCtxCreate and destroyed with cuCtxDestroy.
///
/// Creating it does not change the calling thread's current context (`cuCtxCreate` makes the new
/// context current; the constructor pops it again, and should that fail, destroys it and throws); use
/// @ref context_guard or the objects created in it to run work there. Objects created in the context (streams, events,
/// memory) should be destroyed before it: one that outlives it finds it gone, skips its own
/// destruction (the driver freed it with the context) and tells the destruction handler.
/// Converts to @ref context_ref; it is not one, so it cannot be overwritten through a `context_ref&`.
/// @code
/// cudrv::context ctx(cudrv::device(0), cudrv::context_flags::sched_blocking_sync);
/// cudrv::stream s(ctx);          // a stream of that context
/// @endcode
class context : public context_base {
 public:
  /// @brief Creates a context on @p dev with @p flags.
  explicit context(const cudrv::device& dev, context_flags flags = context_flags::sched_auto);
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  context(const context&) = delete;
  context& operator=(const context&) = delete;
  /// @}
  /// @brief Takes over @p other's context; @p other becomes empty.
  context(context&& other) noexcept : context_base(cudrv::detail::exchange(other.handle_, nullptr)) {}
  /// @brief Destroys the held context, then takes over @p other's.
  context& operator=(context&& other) noexcept;
  /// @brief Destroys the context (errors go to the destruction handler).
  ~context();

  /// @brief Takes ownership of a context created by cuCtxCreate.
  [[nodiscard]] static context from_native_handle(CUcontext handle) noexcept { return context(handle); }
  /// @brief Gives up ownership: the caller must destroy the returned context.
  [[nodiscard]] CUcontext release() noexcept { return cudrv::detail::exchange(handle_, nullptr); }
  /// @brief Destroys the context now; the object becomes empty.
  void reset() noexcept;
  /// @brief Whether this object holds a context (false after a move).
  [[nodiscard]] explicit operator bool() const noexcept { return handle_ != nullptr; }
  /// @brief A view of the context.
  operator context_ref() const& noexcept { return context_ref(handle_); }  // NOLINT: implicit on purpose
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: a view of a temporary context would outlive it.
  operator context_ref() const&& = delete;
  /// @}

 private:
  explicit context(CUcontext handle) noexcept : context_base(handle) {}
};

/// @brief One reference on a device's primary context: cuDevicePrimaryCtxRetain on construction,
/// cuDevicePrimaryCtxRelease on destruction, so retains and releases stay balanced.
///
/// The driver keeps the primary context alive while any reference is held. cudrv itself takes one
/// reference per device, the first time a call names that device where a context is needed
/// (`device::primary_context()`, a stream created from a device), and holds it until the process
/// ends. Converts to @ref context_ref.
/// @code
/// {
///   cudrv::primary_context pc(cudrv::device(0));   // retained: cuDevicePrimaryCtxGetState says active
///   cudrv::stream s(pc);
/// }                                                 // released
/// @endcode
class primary_context : public context_base {
 public:
  /// @brief Retains the primary context of @p dev.
  explicit primary_context(const cudrv::device& dev);
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  primary_context(const primary_context&) = delete;
  primary_context& operator=(const primary_context&) = delete;
  /// @}
  /// @brief Takes over @p other's reference; @p other becomes empty.
  primary_context(primary_context&& other) noexcept
      : context_base(cudrv::detail::exchange(other.handle_, nullptr)), device_(other.device_) {}
  /// @brief Releases the held reference, then takes over @p other's.
  primary_context& operator=(primary_context&& other) noexcept;
  /// @brief Releases the reference (errors go to the destruction handler).
  ~primary_context();

  /// @brief Adopts one reference the caller already holds (from cuDevicePrimaryCtxRetain on @p dev).
  [[nodiscard]] static primary_context from_native_handle(CUdevice dev, CUcontext handle) noexcept {
    return primary_context(dev, handle);
  }
  /// @brief Gives up the reference: the caller must call cuDevicePrimaryCtxRelease on @ref native_device.
  [[nodiscard]] CUcontext release() noexcept { return cudrv::detail::exchange(handle_, nullptr); }
  /// @brief Releases the reference now; the object becomes empty.
  void reset() noexcept;
  /// @brief The device whose primary context this is.
  [[nodiscard]] CUdevice native_device() const noexcept { return device_; }
  /// @brief Whether this object holds a reference (false after a move).
  [[nodiscard]] explicit operator bool() const noexcept { return handle_ != nullptr; }
  /// @brief A view of the context.
  operator context_ref() const& noexcept { return context_ref(handle_); }  // NOLINT: implicit on purpose
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: a view of a temporary context would outlive it.
  operator context_ref() const&& = delete;
  /// @}

 private:
  primary_context(CUdevice dev, CUcontext handle) noexcept : context_base(handle), device_(dev) {}
  CUdevice device_;
};

/// @brief Makes a context current on the calling thread for the guard's scope and restores the
/// previous one (also when an exception leaves the scope). Neither copyable nor movable.
///
/// When the context is already current it does nothing.
/// @code
/// {
///   cudrv::context_guard guard(ctx);
///   raw_library_call();            // sees ctx as the current context
/// }                                // the previous context is current again
/// @endcode
class context_guard {
 public:
  /// @brief Makes @p ctx current.
  explicit context_guard(context_ref ctx);
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  context_guard(const context_guard&) = delete;
  context_guard& operator=(const context_guard&) = delete;
  /// @}
  /// @brief Restores the context that was current before (errors go to the destruction handler).
  ~context_guard();

 private:
  CUcontext previous_;
  CUcontext target_;
};

}  // namespace cudrv
