/// @file memory_location.hpp
/// @brief Where memory lives (@ref cudrv::memory_location : a device, the host, a host NUMA node), how
/// a pool allocates it (@ref cudrv::memory_allocation_type), and what a buffer or resource knows about
/// its memory without asking the driver (@ref cudrv::memory_properties).
///
/// Layer: memory (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include "cudrv/device.hpp"

namespace cudrv {

/// @brief The kinds of @ref cudrv::memory_location.
enum class memory_location_kind {
  none,       ///< No preferred location (`CU_MEM_LOCATION_TYPE_NONE`): managed pools only.
  device,     ///< A device's memory (`CU_MEM_LOCATION_TYPE_DEVICE`).
  host,       ///< Host memory on any NUMA node (`CU_MEM_LOCATION_TYPE_HOST`).
  host_numa,  ///< Host memory on one NUMA node (`CU_MEM_LOCATION_TYPE_HOST_NUMA`).
};

/// @brief Where memory lives: a device, the host, or one host NUMA node (the driver's `CUmemLocation`,
/// typed). A @ref device converts to its location, so every function taking a location takes a device.
///
/// Used for pools (@ref memory_pool), prefetches and advice of managed memory
/// (@ref managed_buffer::prefetch), and to describe memory.
/// @code
/// cudrv::memory_location gpu = dev;                                   // device memory
/// cudrv::memory_location host = cudrv::memory_location::host();       // pinned host memory, any node
/// cudrv::memory_location near = cudrv::memory_location::nearest_host_numa(dev);  // next to dev
/// cudrv::memory_pool staging(near);                                   // host pool on that node
/// @endcode
class memory_location {
 public:
  /// @brief A device's memory.
  memory_location(const device& dev) noexcept  // NOLINT: implicit on purpose
      : kind_(memory_location_kind::device), id_(dev.ordinal()) {}
  /// @brief Host memory, on whatever NUMA node the system chooses.
  [[nodiscard]] static constexpr memory_location host() noexcept { return {memory_location_kind::host, -1}; }
  /// @brief Host memory on NUMA node @p node.
  /// @throws invalid_argument_error when @p node is negative
  [[nodiscard]] static memory_location host_numa(int node);
  /// @brief Host memory on the NUMA node nearest @p dev (`CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID`), for
  /// staging buffers that sit next to their GPU on a multi-socket host.
  /// @throws not_supported_error when the system reports no NUMA node for the device (the attribute is -1)
  [[nodiscard]] static memory_location nearest_host_numa(const device& dev);
  /// @brief No preferred location: for managed pools whose memory migrates freely.
  [[nodiscard]] static constexpr memory_location none() noexcept { return {memory_location_kind::none, -1}; }
  /// @brief The location a driver `CUmemLocation` names.
  /// @throws invalid_argument_error for location types cudrv does not model (`HOST_NUMA_CURRENT`)
  /// or a negative device ordinal or node
  [[nodiscard]] static memory_location from_native(const CUmemLocation& location);

  /// @brief The kind of location.
  [[nodiscard]] constexpr memory_location_kind kind() const noexcept { return kind_; }
  /// @brief Whether this is host memory (@ref memory_location_kind::host or
  /// @ref memory_location_kind::host_numa).
  [[nodiscard]] constexpr bool is_host() const noexcept {
    return kind_ == memory_location_kind::host || kind_ == memory_location_kind::host_numa;
  }
  /// @brief Whether this is a device's memory.
  [[nodiscard]] constexpr bool is_device() const noexcept { return kind_ == memory_location_kind::device; }
  /// @brief The device ordinal, or -1 when this is not a device.
  [[nodiscard]] constexpr int device_ordinal() const noexcept { return is_device() ? id_ : -1; }
  /// @brief The host NUMA node, or -1 when this is not a @ref memory_location_kind::host_numa location.
  [[nodiscard]] constexpr int numa_node() const noexcept { return kind_ == memory_location_kind::host_numa ? id_ : -1; }
  /// @brief The driver's form (the id is 0 where the driver ignores it).
  [[nodiscard]] CUmemLocation native() const noexcept;

  /// @brief Locations compare by kind and device or node.
  [[nodiscard]] friend constexpr bool operator==(const memory_location& a, const memory_location& b) noexcept {
    return a.kind_ == b.kind_ && a.id_ == b.id_;
  }

 private:
  constexpr memory_location(memory_location_kind kind, int id) noexcept : kind_(kind), id_(id) {}
  memory_location_kind kind_;
  int id_;
};

/// @brief How a pool allocates its memory (the driver's `CUmemAllocationType`).
enum class memory_allocation_type : int {
  /// @brief Memory that stays where it was allocated (`CU_MEM_ALLOCATION_TYPE_PINNED`): device memory
  /// for a device pool, page-locked host memory for a host or host NUMA pool.
  pinned = CU_MEM_ALLOCATION_TYPE_PINNED,
  /// @brief Managed (unified) memory that migrates between host and devices
  /// (`CU_MEM_ALLOCATION_TYPE_MANAGED`, 2; pools of it need a CUDA 13 driver).
  managed = 2,
};

/// @brief What a buffer or a @ref memory_resource knows about its memory from the way it was allocated,
/// without a pointer-attribute query.
struct memory_properties {
  /// @brief The device the memory belongs to or was made for; -1 for memory that belongs to no device
  /// (pinned or NUMA host memory, managed memory with no preferred location).
  int device_ordinal = -1;
  /// @brief Kernels may read and write the memory.
  bool device_accessible = false;
  /// @brief The host may read and write the memory through the returned pointer.
  bool host_accessible = false;
  /// @brief Properties compare member by member.
  [[nodiscard]] friend constexpr bool operator==(const memory_properties&, const memory_properties&) = default;
};

/// @brief The properties of memory of @p type at @p where, as a pool hands it out: device memory is
/// device-accessible; host memory host- and device-accessible (cudrv grants devices access to the host
/// pools it creates); managed memory both, belonging to its preferred device if it has one.
[[nodiscard]] constexpr memory_properties properties_of(memory_location where, memory_allocation_type type) noexcept {
  if (type == memory_allocation_type::managed) {
    return {where.device_ordinal(), true, true};
  }
  return {where.device_ordinal(), true, where.is_host()};
}

}  // namespace cudrv
