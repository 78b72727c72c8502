/// @file host_registration.hpp
/// @brief @ref cudrv::host_registration : page-locks existing host memory for its lifetime
/// (cuMemHostRegister / cuMemHostUnregister).
///
/// Layer: memory (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <cstddef>
#include <span>
#include <utility>

#include "cudrv/context.hpp"
#include "cudrv/detail/exchange.hpp"
#include "cudrv/detail/host_buffer.hpp"
#include "cudrv/device.hpp"
#include "cudrv/memory_location.hpp"
#include "cudrv/span.hpp"

namespace cudrv {

/// @brief Flags for @ref cudrv::host_registration (the `CU_MEMHOSTREGISTER_*` values).
enum class host_register_flags : unsigned int {
  none = 0,                                  ///< Registered for the registering context only.
  portable = CU_MEMHOSTREGISTER_PORTABLE,    ///< Registered for every context (the default).
  mapped = CU_MEMHOSTREGISTER_DEVICEMAP,     ///< Mapped into the device address space.
  io_memory = CU_MEMHOSTREGISTER_IOMEMORY,   ///< The range is I/O memory of a third-party device.
  read_only = CU_MEMHOSTREGISTER_READ_ONLY,  ///< The device only reads the memory.
};

/// @brief Combines host-registration flags.
[[nodiscard]] constexpr host_register_flags operator|(host_register_flags a, host_register_flags b) noexcept {
  return static_cast<host_register_flags>(static_cast<unsigned int>(a) | static_cast<unsigned int>(b));
}

/// @brief Keeps an existing range of host memory page-locked (registered with the driver) for its
/// lifetime. Move-only. The memory itself stays owned by the caller and must outlive the registration.
///
/// @code
/// std::vector<float> data(n);
/// {
///   cudrv::host_registration pin(dev, std::span(data));
///   cudrv::copy(device_buf, data, stream);       // now a fast, asynchronous copy
///   stream.synchronize();
/// }                                               // unregistered
/// @endcode
class host_registration {
 public:
  /// @brief Registers @p bytes bytes at @p pointer in @p dev's primary context.
  host_registration(const device& dev, void* pointer, std::size_t bytes,
                    host_register_flags flags = host_register_flags::portable)
      : host_registration(dev.primary_context(), pointer, bytes, flags) {}
  /// @brief Registers @p bytes bytes at @p pointer in @p ctx.
  host_registration(context_ref ctx, void* pointer, std::size_t bytes,
                    host_register_flags flags = host_register_flags::portable)
      : reg_(detail::host_allocation::register_memory(ctx.native_handle(), pointer, bytes,
                                                      static_cast<unsigned int>(flags))) {}
  /// @brief Registers the memory viewed by @p range in @p dev's primary context.
  template <class T>
  host_registration(const device& dev, std::span<T> range, host_register_flags flags = host_register_flags::portable)
      : host_registration(dev, const_cast<void*>(static_cast<const void*>(range.data())), range.size_bytes(), flags) {}
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  host_registration(const host_registration&) = delete;
  host_registration& operator=(const host_registration&) = delete;
  /// @}
  /// @brief Takes over @p other's registration; @p other becomes empty.
  host_registration(host_registration&& other) noexcept : reg_(cudrv::detail::exchange(other.reg_, {})) {}
  /// @brief Ends the held registration, then takes over @p other's.
  host_registration& operator=(host_registration&& other) noexcept {
    if (this != &other) {
      reg_.unregister();
      reg_ = cudrv::detail::exchange(other.reg_, {});
    }
    return *this;
  }
  /// @brief Unregisters the memory (errors go to the destruction handler).
  ~host_registration() { reg_.unregister(); }

  /// @brief Adopts the registration of @p bytes bytes at @p pointer, made with cuMemHostRegister in
  /// @p ctx; it will be ended with cuMemHostUnregister there. The memory stays the caller's.
  [[nodiscard]] static host_registration from_native_handle(void* pointer, std::size_t bytes,
                                                            context_ref ctx) noexcept {
    return host_registration(detail::host_allocation{pointer, bytes, detail::context_token::of(ctx.native_handle())});
  }
  /// @brief Gives up the registration; the caller must call cuMemHostUnregister on the returned pointer.
  [[nodiscard]] void* release() noexcept { return cudrv::detail::exchange(reg_, {}).pointer; }
  /// @brief Unregisters the memory now; the object becomes empty.
  void reset() noexcept { reg_.unregister(); }
  /// @brief The registered address (host memory: a host pointer).
  [[nodiscard]] void* data() const noexcept { return reg_.pointer; }
  /// @brief The registered address (untyped: the registration knows no element type).
  [[nodiscard]] void* get() const noexcept { return reg_.pointer; }
  /// @brief The registered size in bytes.
  [[nodiscard]] std::size_t size_bytes() const noexcept { return reg_.bytes; }
  /// @brief Whether this object holds a registration (false after a move or @ref release).
  [[nodiscard]] explicit operator bool() const noexcept { return reg_.pointer != nullptr; }
  /// @brief What the memory is (no pointer-attribute query): host memory of no device, host- and
  /// device-accessible; `{-1, false, false}` when nothing is registered.
  [[nodiscard]] memory_properties properties() const noexcept {
    return reg_.pointer == nullptr ? memory_properties{} : memory_properties{-1, true, true};
  }
  /// @brief The device address of the registered range (needs @ref host_register_flags::mapped or
  /// unified addressing).
  [[nodiscard]] CUdeviceptr device_address() const {
    return reg_.device_address("cudrv::host_registration::device_address");
  }

 private:
  explicit host_registration(detail::host_allocation reg) noexcept : reg_(reg) {}
  detail::host_allocation reg_;
};

}  // namespace cudrv
