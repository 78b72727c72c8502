/// @file async_notification.hpp
/// @brief Memory-pressure notifications of a device (`cuDeviceRegisterAsyncNotification`, CUDA 12.4): the
/// decoded @ref cudrv::async_notification and the scoped @ref cudrv::async_notification_subscription that
/// keeps a callable registered while it lives.
///
/// Layer: driver (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <type_traits>
#include <utility>

#include "cudrv/detail/exchange.hpp"
#include "cudrv/device.hpp"

namespace cudrv {

/// @brief The kinds of @ref cudrv::async_notification (`CUasyncNotificationType`).
enum class async_notification_type : unsigned {
  /// The process has allocated more device memory than its budget (`CU_ASYNC_NOTIFICATION_TYPE_OVER_BUDGET`).
  over_budget = 1,
  /// A kind this version of cudrv does not know (a newer driver's): see @ref async_notification::raw_type.
  unknown = 0,
};

/// @brief One notification of a device, decoded from the driver's `CUasyncNotificationInfo`.
struct async_notification {
  async_notification_type type = async_notification_type::unknown;  ///< What happened.
  /// In an @ref async_notification_type::over_budget notification, the bytes the process has allocated
  /// above its device memory budget; 0 for every other kind.
  unsigned long long bytes_over_budget = 0;
  int device_ordinal = -1;  ///< The device the subscription was made for.
  unsigned raw_type = 0;    ///< The driver's `CUasyncNotificationType`, as received.

  /// @brief The notification a driver `CUasyncNotificationInfo` describes, for the device @p ordinal.
  [[nodiscard]] static async_notification from_native(const CUasyncNotificationInfo& info, int ordinal) noexcept;
};

namespace detail {
/// @brief A type-erased callable taking `const async_notification&` (internal): the subscription owns
/// @c object and destroys it with @c destroy once no notification can reach it.
struct notification_callable {
  void* object = nullptr;
  void (*invoke)(void* object, const async_notification& n) = nullptr;
  void (*destroy)(void* object) noexcept = nullptr;
};
/// @brief Registers @p callable for @p ordinal's notifications and returns the registration's id; takes
/// ownership of the callable (destroyed there when registration fails) (internal).
unsigned long long subscribe_async_notifications(int ordinal, notification_callable callable);
/// @brief Unregisters @p id and waits until no callback of it runs on another thread; never throws (internal).
void unsubscribe_async_notifications(unsigned long long id) noexcept;
}  // namespace detail

/// @brief A callable registered for the asynchronous notifications of one device
/// (`cuDeviceRegisterAsyncNotification`, CUDA 12.4) while the object lives; the destructor unregisters it
/// (`cuDeviceUnregisterAsyncNotification`) and never throws. Move-only.
///
/// The driver calls the callable on a thread of its own, with a decoded @ref async_notification; it
/// should return quickly (cuda.h: about 10 ms) and hand longer work to a thread of the application.
/// An exception it throws is caught and dropped (the driver's thread cannot receive it). cuda.h forbids
/// registering or unregistering from a callback: cudrv refuses it before the driver
/// (@ref not_supported_error with `CUDA_ERROR_NOT_PERMITTED`), and a subscription destroyed inside a
/// callback reports that to the destruction handler and stays registered with the driver, calling nothing.
/// Once the destructor (or @ref reset) returns, the callable is not running on another thread and is
/// never called again; it is destroyed then, or after the callback that is running on the calling thread.
/// @code
/// std::atomic<unsigned long long> over{0};
/// cudrv::async_notification_subscription watch(dev, [&](const cudrv::async_notification& n) {
///   if (n.type == cudrv::async_notification_type::over_budget) {
///     over.store(n.bytes_over_budget);        // the application's thread frees caches when it sees this
///   }
/// });
/// @endcode
/// A pool can trim itself on pressure: @ref memory_pool_base::trim_on_pressure.
class async_notification_subscription {
 public:
  /// @brief An empty subscription (nothing registered).
  async_notification_subscription() noexcept = default;
  /// @brief Registers @p callback (any callable taking `const async_notification&`, copied or moved
  /// into the subscription) for the notifications of @p dev.
  /// @throws not_supported_error when the driver lacks the entry point (before CUDA 12.4) or refuses
  ///   (`CUDA_ERROR_NOT_SUPPORTED`), and with `CUDA_ERROR_NOT_PERMITTED` when called from a callback
  template <class F>
  requires(!std::is_same_v<std::remove_cvref_t<F>, async_notification_subscription> &&
           std::is_invocable_v<std::remove_cvref_t<F>&, const async_notification&>)
      async_notification_subscription(const device& dev, F&& callback)
      : id_(detail::subscribe_async_notifications(dev.ordinal(), erase(std::forward<F>(callback)))),
        device_(dev.ordinal()) {}
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  async_notification_subscription(const async_notification_subscription&) = delete;
  async_notification_subscription& operator=(const async_notification_subscription&) = delete;
  /// @}
  /// @brief Takes over @p other's registration; @p other becomes empty.
  async_notification_subscription(async_notification_subscription&& other) noexcept
      : id_(detail::exchange(other.id_, 0ULL)), device_(detail::exchange(other.device_, -1)) {}
  /// @brief Unregisters the held callable, then takes over @p other's registration.
  async_notification_subscription& operator=(async_notification_subscription&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = detail::exchange(other.id_, 0ULL);
      device_ = detail::exchange(other.device_, -1);
    }
    return *this;
  }
  /// @brief Unregisters the callable; errors go to the destruction handler.
  ~async_notification_subscription() { reset(); }

  /// @brief Unregisters the callable now; the object becomes empty.
  void reset() noexcept {
    if (id_ != 0) {
      detail::unsubscribe_async_notifications(detail::exchange(id_, 0ULL));
      device_ = -1;
    }
  }
  /// @brief Whether a callable is registered (false when empty, moved-from or reset).
  [[nodiscard]] explicit operator bool() const noexcept { return id_ != 0; }
  /// @brief The device whose notifications reach the callable, -1 when empty.
  [[nodiscard]] int device_ordinal() const noexcept { return device_; }

 private:
  template <class F>
  static detail::notification_callable erase(F&& f) {
    using C = std::remove_cvref_t<F>;
    return {new C(std::forward<F>(f)), [](void* object, const async_notification& n) { (*static_cast<C*>(object))(n); },
            [](void* object) noexcept { delete static_cast<C*>(object); }};
  }
  unsigned long long id_ = 0;
  int device_ = -1;
};

/// @brief Whether the installed driver has `cuDeviceRegisterAsyncNotification` (CUDA 12.4). Resolved once
/// per process.
/// @throws driver_unavailable_error when there is no driver at all
[[nodiscard]] bool async_notifications_supported();

}  // namespace cudrv
