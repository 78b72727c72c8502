/// @file pointer_attributes.hpp
/// @brief @ref cudrv::pointer_attributes : what the driver knows about an address (cuPointerGetAttributes).
///
/// Layer: memory (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <string>

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
  CUmemorytype memory_type{};        ///< Device, host (pinned) or 0 when unknown to the driver.
  int device_ordinal = -1;           ///< The device the memory belongs to, or -1.
  CUcontext context = nullptr;       ///< The context it was allocated in (null for managed or pool memory).
  CUdeviceptr device_address = 0;    ///< The address device code uses.
  void* host_pointer = nullptr;      ///< The address host code uses, when host-accessible.
  bool is_managed = false;           ///< Managed (unified) memory.
  bool is_mapped = false;            ///< Mapped into the device address space.
  unsigned long long buffer_id = 0;  ///< A process-unique id of the allocation.
  CUdeviceptr range_start = 0;       ///< Start of the allocation that contains the address.
  std::size_t range_size = 0;        ///< Size of that allocation in bytes.
  CUmemoryPool pool = nullptr;       ///< The pool it came from, for stream-ordered allocations.

  /// @brief Whether the driver knows the address at all.
  [[nodiscard]] bool is_known() const noexcept { return memory_type != 0; }
};

/// @brief The attributes of a device address.
[[nodiscard]] pointer_attributes get_pointer_attributes(CUdeviceptr address);
/// @brief The attributes of a host pointer (pinned, registered, managed, or pageable).
[[nodiscard]] pointer_attributes get_pointer_attributes(const void* pointer);

namespace detail {
/// @brief What a description from foreign code says its memory is (internal).
enum class claimed_memory {
  device,       ///< device memory of one device
  pinned_host,  ///< page-locked (allocated or registered) host memory
  managed,      ///< managed memory
};
/// @brief Checks with the driver that the @p bytes bytes at @p address are memory of the @p kind claimed
/// (of device @p device for device memory; managed memory passes for device memory too), in allocations
/// or mappings the driver knows, one after the other (internal; cudrv::from_dlpack's memory check). The
/// extents are the driver's own (cuMemGetAddressRange: each mapping of a reserved range on its own, so a
/// view that reaches an unmapped part of a reservation is refused); at most 65,536 pieces are followed.
/// Does nothing where no driver can be loaded.
/// @param claim how the caller names the claim in messages ("kDLCUDA 0")
/// @throws invalid_argument_error naming what the driver knows of the memory
void check_claimed_memory(const char* api, std::uintptr_t address, std::size_t bytes, claimed_memory kind, int device,
                          const std::string& claim);
}  // namespace detail

}  // namespace cudrv
