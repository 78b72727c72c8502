/// @file pointer_attributes.hpp
/// @brief @ref cudrv::pointer_attributes : what the driver knows about an address (cuPointerGetAttributes).
#pragma once

#include <cuda.h>

#include <cstddef>

namespace cudrv {

/// @brief What the driver knows about an address, read with one cuPointerGetAttributes call.
///
/// For memory the driver does not know (ordinary pageable host memory) @ref memory_type is 0 and
/// @ref device_ordinal is -1; that is not an error.
/// @code
/// auto attr = cudrv::get_pointer_attributes(buf.data());
/// if (attr.memory_type == CU_MEMORYTYPE_DEVICE) std::printf("on device %d\n", attr.device_ordinal);
/// @endcode
struct pointer_attributes {
  CUmemorytype memory_type{};           ///< Device, host (pinned) or 0 when unknown to the driver.
  int device_ordinal = -1;              ///< The device the memory belongs to, or -1.
  CUcontext context = nullptr;          ///< The context it was allocated in (null for managed or pool memory).
  CUdeviceptr device_address = 0;       ///< The address device code uses.
  void* host_pointer = nullptr;         ///< The address host code uses, when host-accessible.
  bool is_managed = false;              ///< Managed (unified) memory.
  bool is_mapped = false;               ///< Mapped into the device address space.
  unsigned long long buffer_id = 0;     ///< A process-unique id of the allocation.
  CUdeviceptr range_start = 0;          ///< Start of the allocation that contains the address.
  std::size_t range_size = 0;           ///< Size of that allocation in bytes.
  CUmemoryPool pool = nullptr;          ///< The pool it came from, for stream-ordered allocations.

  /// @brief Whether the driver knows the address at all.
  [[nodiscard]] bool is_known() const noexcept { return memory_type != 0; }
};

/// @brief The attributes of a device address.
[[nodiscard]] pointer_attributes get_pointer_attributes(CUdeviceptr address);
/// @brief The attributes of a host pointer (pinned, registered, managed, or pageable).
[[nodiscard]] pointer_attributes get_pointer_attributes(const void* pointer);

}  // namespace cudrv
