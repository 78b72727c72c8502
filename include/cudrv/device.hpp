/// @file device.hpp
/// @brief CUDA devices: the value type @ref cudrv::device, typed attributes, and the range of all
/// devices.
///
/// Layer: driver (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "cudrv/context.hpp"
#include "cudrv/device_attributes.hpp"

namespace cudrv {

class stream_ref;

/// @brief The compute capability of a device (9.0 for the H100).
struct compute_capability {
  int major;  ///< Major number.
  int minor;  ///< Minor number.
  /// @brief As one number, `10 * major + minor` (90 for 9.0).
  [[nodiscard]] constexpr int as_int() const noexcept { return 10 * major + minor; }
  /// @brief Capabilities compare by major, then minor.
  [[nodiscard]] friend constexpr auto operator<=>(compute_capability, compute_capability) = default;
};

/// @brief A device's 16-byte UUID.
struct device_uuid {
  std::array<unsigned char, 16> bytes;  ///< The raw bytes.
  /// @brief The form nvidia-smi prints: `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
  [[nodiscard]] std::string to_string() const;
  /// @brief UUIDs compare byte by byte.
  [[nodiscard]] friend bool operator==(const device_uuid&, const device_uuid&) = default;
};

/// @brief A CUDA device: a cheap value type holding the device's ordinal.
///
/// Ordinals count the devices the process sees, so they follow `CUDA_VISIBLE_DEVICES` and
/// `CUDA_DEVICE_ORDER`. Queries go through cuDeviceGetAttribute one attribute at a time (tens of
/// nanoseconds each); none creates a context except those that need one by nature
/// (@ref free_memory, @ref stream_priority_range, @ref synchronize), which use the primary context.
/// @code
/// for (cudrv::device dev : cudrv::devices()) {
///   std::printf("%d %s %s, %d SMs, %zu MiB\n", dev.ordinal(), dev.name().c_str(), dev.arch().c_str(),
///               dev.attribute(cudrv::device_attributes::multiprocessor_count),
///               dev.total_memory() >> 20);
/// }
/// @endcode
class device {
 public:
  /// @brief The device with this ordinal.
  /// @throws error with `CUDA_ERROR_INVALID_DEVICE` when the ordinal is out of range; the message
  /// gives the number of visible devices
  explicit device(int ordinal);

  /// @brief Wraps a CUdevice obtained from the driver (cuDeviceGet, cuCtxGetDevice).
  [[nodiscard]] static device from_native_handle(CUdevice handle) noexcept { return device(handle, 0); }

  /// @brief The ordinal of the device among those visible to the process.
  [[nodiscard]] int ordinal() const noexcept { return static_cast<int>(handle_); }
  /// @brief The driver handle.
  [[nodiscard]] CUdevice native_handle() const noexcept { return handle_; }

  /// @brief The product name, e.g. `NVIDIA H100 80GB HBM3`.
  [[nodiscard]] std::string name() const;
  /// @brief The device UUID.
  [[nodiscard]] device_uuid uuid() const;
  /// @brief The PCI bus id in the form `0000:c1:00.0` (domain:bus:device.function, lower case).
  [[nodiscard]] std::string pci_bus_id() const;
  /// @brief The compute capability.
  [[nodiscard]] cudrv::compute_capability compute_capability() const;
  /// @brief The architecture name used by compilers, e.g. `sm_90`.
  [[nodiscard]] std::string arch() const;
  /// @brief Total device memory in bytes (cuDeviceTotalMem; needs no context).
  [[nodiscard]] std::size_t total_memory() const;
  /// @brief Free device memory in bytes (cuMemGetInfo in the primary context).
  [[nodiscard]] std::size_t free_memory() const;

  /// @brief Any device attribute, as the driver's `int`.
  [[nodiscard]] int attribute(CUdevice_attribute attr) const;
  /// @brief A typed attribute, e.g. `dev.attribute(device_attributes::l2_cache_size)` (a size_t).
  template <class T>
  [[nodiscard]] T attribute(device_attribute<T> tag) const {
    if constexpr (std::is_same_v<T, bool>) {
      return attribute(tag.value) != 0;
    } else {
      return static_cast<T>(attribute(tag.value));
    }
  }

  /// @brief Whether this device can access memory of @p peer directly (cuDeviceCanAccessPeer);
  /// false for the device itself.
  [[nodiscard]] bool can_access_peer(const device& peer) const;
  /// @brief A P2P attribute of the link from this device to @p peer (cuDeviceGetP2PAttribute),
  /// e.g. `CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK`.
  [[nodiscard]] int p2p_attribute(CUdevice_P2PAttribute attr, const device& peer) const;
  /// @brief Lets this device's primary context access @p peer's memory. Already enabled is not an error.
  /// @throws not_supported_error when the devices cannot access each other
  void enable_peer_access(const device& peer) const;
  /// @brief Revokes access enabled by @ref enable_peer_access.
  void disable_peer_access(const device& peer) const;

  /// @brief The stream priority range {greatest, least}; numerically lower is higher priority.
  [[nodiscard]] std::pair<int, int> stream_priority_range() const;
  /// @brief Blocks until all work in the device's primary context has completed.
  void synchronize() const;
  /// @brief The device's default stream: a blocking stream (it synchronises with the legacy default
  /// stream, like cuda.core's `Device.default_stream`) in the primary context, made by cudrv on first
  /// use and kept until the process ends. Unlike `stream_ref::legacy_default()`, it does not depend on
  /// which context is current.
  /// @code
  /// cudrv::device dev(1);
  /// cudrv::copy(buf, host, dev.default_stream());   // ordered on device 1, whatever is current
  /// @endcode
  [[nodiscard]] stream_ref default_stream() const;
  /// @brief The device of the context current on the calling thread.
  /// @throws invalid_argument_error when no context is current
  [[nodiscard]] static device current();
  /// @brief Makes the device's primary context current on the calling thread (the one call in cudrv
  /// that changes the current context on purpose, like cudaSetDevice).
  void set_current() const;

  /// @brief The device's primary context, retained once by cudrv for the rest of the process on
  /// first use. Objects created from a device live in this context.
  [[nodiscard]] context_ref primary_context() const;
  /// @brief One balanced reference on the primary context (see @ref cudrv::primary_context).
  [[nodiscard]] cudrv::primary_context retain_primary_context() const { return cudrv::primary_context(*this); }
  /// @brief Whether the primary context is active (retained by anybody), from cuDevicePrimaryCtxGetState.
  [[nodiscard]] bool primary_context_active() const;
  /// @brief The flags of the primary context, from cuDevicePrimaryCtxGetState.
  [[nodiscard]] unsigned int primary_context_flags() const;
  /// @brief Sets the flags the primary context is (or will be) created with (cuDevicePrimaryCtxSetFlags).
  void set_primary_context_flags(context_flags flags) const;
  /// @brief Resets the primary context (cuDevicePrimaryCtxReset): everything made in it is destroyed
  /// by the driver (memory, streams, events, pools' memory, executable graphs, loaded modules), and the
  /// context is usable again, empty. cudrv then activates it again and keeps its process-wide
  /// reference, so `primary_context()` returns the usable context (whose handle may have the same value
  /// as before).
  ///
  /// After a sticky fault (@ref context_fault_error) this is the in-process recovery only where the
  /// driver allows one: driver 580.159.04 keeps the process poisoned after an illegal address (the
  /// reset succeeds, the retain after it fails with the same code), and this call then throws
  /// context_fault_error again; the recovery is a new process (see @ref reliability). Whenever the
  /// retain after the reset fails, cudrv gives its reference back and forgets the context's handle, so
  /// that the next call needing the primary context retains (and activates) it afresh.
  ///
  /// Destroy the cudrv objects made in the primary context *before* the reset. One still alive after
  /// it frees nothing when destroyed (its memory or handle went with the reset, and may be handed out
  /// again) and tells the destruction handler (`CUDA_ERROR_CONTEXT_IS_DESTROYED`); views of it
  /// (and the @ref default_stream, which cudrv makes again on next use) must not be used. Libraries
  /// and their kernels stay valid: the driver loads the code again in the new context. Other
  /// libraries or threads of the process that use this primary context lose their objects too, which
  /// is why the driver leaves the reset to the application.
  ///
  /// @code
  /// try {
  ///   faulty.launch(s, cfg, out);
  ///   s.synchronize();
  /// } catch (const cudrv::context_fault_error&) {
  ///   s.reset(); out.reset();             // drop what was made in the context first
  ///   dev.reset_primary_context();
  /// }
  /// @endcode
  void reset_primary_context() const;

  /// @brief Devices compare by ordinal.
  [[nodiscard]] friend bool operator==(const device& a, const device& b) noexcept { return a.handle_ == b.handle_; }

 private:
  device(CUdevice handle, int /*unchecked*/) noexcept : handle_(handle) {}
  CUdevice handle_;
};

/// @brief The number of devices visible to the process; 0 when the driver reports none.
/// @throws driver_unavailable_error when the driver cannot be loaded
[[nodiscard]] int device_count();

/// @brief The range of all visible devices, in ordinal order: `for (cudrv::device d : cudrv::devices())`.
class device_range {
 public:
  /// @brief Iterates over ordinals and yields @ref device values.
  class iterator {
   public:
    using value_type = device;               ///< Yields devices.
    using difference_type = std::ptrdiff_t;  ///< Distance between ordinals.
    /// @brief An iterator at the start of an empty range.
    iterator() = default;
    /// @brief An iterator at @p ordinal.
    explicit iterator(int ordinal) noexcept : ordinal_(ordinal) {}
    /// @brief The device at the current ordinal.
    [[nodiscard]] device operator*() const { return device::from_native_handle(static_cast<CUdevice>(ordinal_)); }
    /// @brief Advances to the next ordinal.
    iterator& operator++() noexcept {
      ++ordinal_;
      return *this;
    }
    /// @brief Advances to the next ordinal, returning the previous position.
    iterator operator++(int) noexcept {
      iterator old = *this;
      ++ordinal_;
      return old;
    }
    /// @brief Iterators compare by ordinal.
    [[nodiscard]] friend bool operator==(iterator a, iterator b) noexcept { return a.ordinal_ == b.ordinal_; }

   private:
    int ordinal_ = 0;
  };
  /// @brief A range over @p count devices.
  explicit device_range(int count) noexcept : count_(count) {}
  /// @brief The first device.
  [[nodiscard]] iterator begin() const noexcept { return iterator(0); }
  /// @brief One past the last device.
  [[nodiscard]] iterator end() const noexcept { return iterator(count_); }
  /// @brief The number of devices.
  [[nodiscard]] std::size_t size() const noexcept { return static_cast<std::size_t>(count_); }
  /// @brief Whether there is no device.
  [[nodiscard]] bool empty() const noexcept { return count_ == 0; }
  /// @brief The device with ordinal @p i (checked like @ref device::device).
  [[nodiscard]] device operator[](std::size_t i) const { return device(static_cast<int>(i)); }

 private:
  int count_;
};

/// @brief All visible devices.
/// @throws driver_unavailable_error when the driver cannot be loaded
[[nodiscard]] device_range devices();

}  // namespace cudrv
