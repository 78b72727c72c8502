/// @file virtual_memory.hpp
/// @brief Virtual memory management: reserved address ranges (@ref cudrv::address_range), physical
/// allocations (@ref cudrv::physical_allocation), mappings of one into the other with access rights per
/// device (@ref cudrv::memory_mapping), granularity queries, and @ref cudrv::virtual_memory_resource,
/// which hands out memory built from all three through the @ref cudrv::memory_resource interface.
///
/// Layer: memory (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <utility>
#include <vector>

#include "cudrv/detail/exchange.hpp"
#include "cudrv/device.hpp"
#include "cudrv/file_descriptor.hpp"
#include "cudrv/memory_resource.hpp"

namespace cudrv {

/// @brief What a location may do with mapped memory (the `CU_MEM_ACCESS_FLAGS_PROT_*` values).
enum class access_rights : int {
  none = CU_MEM_ACCESS_FLAGS_PROT_NONE,             ///< No access (revokes a grant).
  read_only = CU_MEM_ACCESS_FLAGS_PROT_READ,        ///< Reads only.
  read_write = CU_MEM_ACCESS_FLAGS_PROT_READWRITE,  ///< Reads and writes.
};

/// @brief The kinds of shareable handle a physical allocation may be exported to (a bit set of the
/// `CU_MEM_HANDLE_TYPE_*` values); combine them with `|`.
enum class shareable_handle_types : unsigned int {
  none = CU_MEM_HANDLE_TYPE_NONE,                       ///< A process-local allocation.
  posix_fd = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,  ///< A POSIX file descriptor (Linux).
  fabric = CU_MEM_HANDLE_TYPE_FABRIC,                   ///< A fabric handle (multi-node NVLink, IMEX channels).
};

/// @brief Combines handle types.
[[nodiscard]] constexpr shareable_handle_types operator|(shareable_handle_types a, shareable_handle_types b) noexcept {
  return static_cast<shareable_handle_types>(static_cast<unsigned int>(a) | static_cast<unsigned int>(b));
}
/// @brief The handle types both sets contain.
[[nodiscard]] constexpr shareable_handle_types operator&(shareable_handle_types a, shareable_handle_types b) noexcept {
  return static_cast<shareable_handle_types>(static_cast<unsigned int>(a) & static_cast<unsigned int>(b));
}

/// @brief Which allocation granularity to ask for (`CU_MEM_ALLOC_GRANULARITY_*`).
enum class granularity {
  minimum,      ///< What sizes, offsets and mapped addresses must be multiples of.
  recommended,  ///< What they should be multiples of for the best performance.
};

/// @brief Where a physical allocation lives, or who is granted access to a mapping (a `CUmemLocation`).
///
/// @code
/// auto on_gpu = cudrv::physical_location::on(cudrv::device(0));
/// auto numa = cudrv::physical_location::host_numa(1);   // host memory on NUMA node 1
/// @endcode
struct physical_location {
  /// @brief The kind of location (`CU_MEM_LOCATION_TYPE_DEVICE`, `_HOST`, `_HOST_NUMA`). The default,
  /// `CU_MEM_LOCATION_TYPE_INVALID`, names no location: nothing falls back to device 0.
  CUmemLocationType type = CU_MEM_LOCATION_TYPE_INVALID;
  /// @brief The device ordinal, or the NUMA node; ignored for `CU_MEM_LOCATION_TYPE_HOST`.
  int id = 0;

  /// @brief The memory of device @p dev.
  [[nodiscard]] static physical_location on(const device& dev) noexcept {
    return {CU_MEM_LOCATION_TYPE_DEVICE, dev.ordinal()};
  }
  /// @brief Host memory, on no particular NUMA node (the driver must support VMM host allocations:
  /// `device_attributes::host_virtual_memory_management_supported`).
  [[nodiscard]] static physical_location host() noexcept { return {CU_MEM_LOCATION_TYPE_HOST, 0}; }
  /// @brief Host memory on NUMA node @p node (0 on systems without NUMA;
  /// `device_attributes::host_numa_virtual_memory_management_supported`).
  [[nodiscard]] static physical_location host_numa(int node) noexcept { return {CU_MEM_LOCATION_TYPE_HOST_NUMA, node}; }
  /// @brief The driver's structure.
  [[nodiscard]] CUmemLocation native() const noexcept {
    CUmemLocation loc{};
    loc.type = type;
    loc.id = id;
    return loc;
  }
  /// @brief Locations compare by type and id.
  [[nodiscard]] friend constexpr bool operator==(const physical_location&, const physical_location&) noexcept = default;
};

/// @brief The properties of a new @ref physical_allocation (a typed `CUmemAllocationProp`; the
/// allocation type is always `CU_MEM_ALLOCATION_TYPE_PINNED`).
struct physical_allocation_properties {
  /// @brief Where the memory lives; it must be named (the default names no location).
  physical_location location{};
  /// @brief The shareable handles the allocation may be exported to (@ref physical_allocation_base::export_posix_fd).
  shareable_handle_types handle_types = shareable_handle_types::none;
  /// @brief Requests compressible memory (`CU_MEM_ALLOCATION_COMP_GENERIC`). Refused with
  /// @ref not_supported_error unless the device reports `generic_compression_supported`; the driver
  /// may still hand out uncompressed memory, which @ref physical_allocation_base::properties tells.
  bool compression = false;
  /// @brief Requests memory usable for GPUDirect RDMA. Refused with @ref not_supported_error unless the
  /// device reports `gpu_direct_rdma_with_cuda_vmm_supported`.
  bool gpu_direct_rdma = false;

  /// @brief Plain device memory of @p dev.
  [[nodiscard]] static physical_allocation_properties on(const device& dev) noexcept {
    return {physical_location::on(dev), shareable_handle_types::none, false, false};
  }
};

/// @brief The allocation granularity for allocations with @p properties (cuMemGetAllocationGranularity):
/// sizes of physical allocations, and the sizes, offsets and addresses of mappings, are multiples of the
/// minimum one; the recommended one is what large allocations should use.
[[nodiscard]] std::size_t allocation_granularity(const physical_allocation_properties& properties,
                                                 granularity kind = granularity::recommended);
/// @brief The granularity of plain device memory of @p dev.
[[nodiscard]] std::size_t allocation_granularity(const device& dev, granularity kind = granularity::recommended);

/// @brief Who may access a mapped span, and how: one entry of a `cuMemSetAccess` call.
struct access_descriptor {
  /// @brief The location granted access (usually a device).
  physical_location location{};
  /// @brief What it may do.
  access_rights rights = access_rights::read_write;
  /// @brief Read-write (or @p rights) access for device @p dev.
  [[nodiscard]] static access_descriptor for_device(const device& dev,
                                                    access_rights rights = access_rights::read_write) noexcept {
    return {physical_location::on(dev), rights};
  }
};

/// @brief Grants access to the mapped span [@p address, @p address + @p bytes) for every location in
/// @p access, in one cuMemSetAccess call. The span must be mapped entirely (it may cover several
/// mappings) and its ends must be multiples of the minimum granularity.
/// @throws invalid_argument_error for an empty span or an empty list
void set_access(CUdeviceptr address, std::size_t bytes, std::span<const access_descriptor> access);
/// @brief What @p location may do with the mapped memory at @p address (cuMemGetAccess).
[[nodiscard]] access_rights get_access(CUdeviceptr address, const physical_location& location);

// --- physical allocations ------------------------------------------------------------------------

/// @brief The operations of a physical allocation handle, shared by the view
/// @ref cudrv::physical_allocation_ref and the owner @ref cudrv::physical_allocation.
/// Not constructible or assignable on its own.
class physical_allocation_base {
 public:
  /// @brief The raw handle (0 for an empty owner).
  [[nodiscard]] constexpr CUmemGenericAllocationHandle native_handle() const noexcept { return handle_; }
  /// @brief The size in bytes.
  [[nodiscard]] constexpr std::size_t size() const noexcept { return size_; }
  /// @brief The allocation's properties, as the driver reports them (cuMemGetAllocationPropertiesFromHandle):
  /// for instance whether compression was granted.
  [[nodiscard]] physical_allocation_properties properties() const;
  /// @brief The minimum granularity that mappings of this allocation must respect.
  [[nodiscard]] std::size_t minimum_granularity() const;
  /// @brief Exports the allocation to a POSIX file descriptor (cuMemExportToShareableHandle). The
  /// allocation must have been created with @ref shareable_handle_types::posix_fd.
  /// @throws invalid_argument_error when it was not (checked first)
  [[nodiscard]] file_descriptor export_posix_fd() const;
  /// @brief Exports the allocation to a fabric handle; it must have been created with
  /// @ref shareable_handle_types::fabric.
  [[nodiscard]] CUmemFabricHandle export_fabric_handle() const;

  /// @brief Two handles are equal when they name the same allocation.
  [[nodiscard]] friend constexpr bool operator==(const physical_allocation_base& a,
                                                 const physical_allocation_base& b) noexcept {
    return a.handle_ == b.handle_;
  }

 protected:
  /// @brief Holds @p handle of @p size bytes; @p granularity is the minimum one when known, else 0.
  constexpr physical_allocation_base(CUmemGenericAllocationHandle handle, std::size_t size,
                                     std::size_t granularity) noexcept
      : handle_(handle), size_(size), granularity_(granularity) {}
  /// @brief Copies the handle (for the view).
  constexpr physical_allocation_base(const physical_allocation_base&) noexcept = default;
  /// @brief Copies the handle (for the view).
  constexpr physical_allocation_base& operator=(const physical_allocation_base&) noexcept = default;
  ~physical_allocation_base() = default;
  /// @brief Throws @ref invalid_argument_error when the handle is 0 (an empty owner).
  void require_handle(const char* api) const;

  CUmemGenericAllocationHandle handle_;  ///< The handle; 0 in an empty owner.
  std::size_t size_;                     ///< Bytes.
  std::size_t granularity_;              ///< The minimum granularity, 0 until known.
};

/// @brief A non-owning view of a physical allocation. Trivially copyable.
class physical_allocation_ref : public physical_allocation_base {
 public:
  /// @brief Views @p handle, an allocation of @p size bytes.
  constexpr physical_allocation_ref(CUmemGenericAllocationHandle handle, std::size_t size) noexcept
      : physical_allocation_base(handle, size, 0) {}
  /// @brief Views @p handle, an allocation of @p size bytes.
  [[nodiscard]] static constexpr physical_allocation_ref from_native_handle(CUmemGenericAllocationHandle handle,
                                                                            std::size_t size) noexcept {
    return {handle, size};
  }
  /// @brief Views the same allocation as @p other.
  constexpr physical_allocation_ref(const physical_allocation_ref& other) noexcept = default;
  /// @brief Views the allocation @p other views.
  constexpr physical_allocation_ref& operator=(const physical_allocation_ref& other) noexcept = default;

 private:
  friend class physical_allocation;
  constexpr physical_allocation_ref(CUmemGenericAllocationHandle handle, std::size_t size, std::size_t gran) noexcept
      : physical_allocation_base(handle, size, gran) {}
};

/// @brief Owning physical memory made with cuMemCreate and released with cuMemRelease.
///
/// Physical memory has no address until it is mapped into an @ref address_range with a
/// @ref memory_mapping. Releasing the handle while the memory is mapped is allowed: the memory goes
/// when the last mapping of it is unmapped (so a temporary allocation may be mapped and dropped).
/// @code
/// cudrv::device dev(0);
/// const std::size_t g = cudrv::allocation_granularity(dev);
/// cudrv::physical_allocation mem(dev, 4 * g);                   // device memory, 4 granules
/// cudrv::physical_allocation shared(4 * g, {.location = cudrv::physical_location::on(dev),
///                                           .handle_types = cudrv::shareable_handle_types::posix_fd});
/// cudrv::file_descriptor fd = shared.export_posix_fd();             // send it to another process
/// @endcode
class physical_allocation : public physical_allocation_base {
 public:
  /// @brief Creates @p bytes of memory with @p properties.
  /// @throws invalid_argument_error when @p bytes is 0 or not a multiple of the minimum granularity
  /// (the message names it), or no location is named, before the driver is asked to allocate
  /// @throws not_supported_error when compression or GPUDirect RDMA is requested from a device that does
  /// not support it with VMM, or a handle type the device cannot export
  /// @throws out_of_memory_error when the memory is not available
  physical_allocation(std::size_t bytes, const physical_allocation_properties& properties);
  /// @brief Creates @p bytes of plain device memory on @p dev.
  physical_allocation(const device& dev, std::size_t bytes)
      : physical_allocation(bytes, physical_allocation_properties::on(dev)) {}
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  physical_allocation(const physical_allocation&) = delete;
  physical_allocation& operator=(const physical_allocation&) = delete;
  /// @}
  /// @brief Takes over @p other's allocation; @p other becomes empty.
  physical_allocation(physical_allocation&& other) noexcept
      : physical_allocation_base(cudrv::detail::exchange(other.handle_, 0), cudrv::detail::exchange(other.size_, 0),
                                 cudrv::detail::exchange(other.granularity_, 0)) {}
  /// @brief Releases the held allocation, then takes over @p other's.
  physical_allocation& operator=(physical_allocation&& other) noexcept;
  /// @brief Releases the handle (errors go to the destruction handler).
  ~physical_allocation() { reset(); }

  /// @brief Imports an allocation another process exported to the POSIX file descriptor @p fd
  /// (cuMemImportFromShareableHandle); @p bytes is its size, which the exporter must tell. The
  /// descriptor stays open (close it when done).
  /// @throws invalid_argument_error for a negative descriptor or zero bytes
  [[nodiscard]] static physical_allocation import_posix_fd(int fd, std::size_t bytes);
  /// @brief Imports an allocation exported to a fabric handle; @p bytes is its size.
  [[nodiscard]] static physical_allocation import_fabric_handle(const CUmemFabricHandle& handle, std::size_t bytes);
  /// @brief Takes ownership of @p handle (from cuMemCreate or an import), of @p bytes bytes.
  [[nodiscard]] static physical_allocation from_native_handle(CUmemGenericAllocationHandle handle,
                                                              std::size_t bytes) noexcept {
    return physical_allocation(handle, bytes, 0);
  }
  /// @brief Gives up ownership; the caller must cuMemRelease the returned handle.
  [[nodiscard]] CUmemGenericAllocationHandle release() noexcept {
    size_ = 0;
    granularity_ = 0;
    return cudrv::detail::exchange(handle_, 0);
  }
  /// @brief Releases the handle now; the object becomes empty.
  void reset() noexcept;
  /// @brief Whether this object holds an allocation.
  [[nodiscard]] explicit operator bool() const noexcept { return handle_ != 0; }
  /// @brief A view of the allocation.
  operator physical_allocation_ref() const& noexcept {  // NOLINT: implicit on purpose
    return physical_allocation_ref(handle_, size_, granularity_);
  }
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: a view of a temporary allocation would outlive it.
  operator physical_allocation_ref() const&& = delete;
  /// @}

 private:
  physical_allocation(CUmemGenericAllocationHandle handle, std::size_t bytes, std::size_t gran) noexcept
      : physical_allocation_base(handle, bytes, gran) {}
};

// --- address ranges ------------------------------------------------------------------------------

namespace detail {
/// @brief The counted state of an owned reservation (internal): the owner and every mapping into it
/// hold a reference; the range is freed at the last one.
struct address_reservation;
/// @brief The live allocations of a @ref cudrv::virtual_memory_resource (internal).
struct virtual_memory_allocations;
}  // namespace detail

/// @brief The operations of a reserved address range, shared by the view @ref cudrv::address_range_ref
/// and the owner @ref cudrv::address_range. Not constructible or assignable on its own.
class address_range_base {
 public:
  /// @brief The first address of the range.
  [[nodiscard]] constexpr CUdeviceptr address() const noexcept { return address_; }
  /// @brief The first address (the range's raw handle).
  [[nodiscard]] constexpr CUdeviceptr native_handle() const noexcept { return address_; }
  /// @brief The size in bytes.
  [[nodiscard]] constexpr std::size_t size() const noexcept { return size_; }
  /// @brief The number of live @ref memory_mapping objects in the range (0 for a view of a range
  /// cudrv does not own, which it cannot tell).
  [[nodiscard]] std::size_t mapping_count() const noexcept;
  /// @brief Grants access to the mapped bytes [@p offset, @p offset + @p bytes) of the range, in one
  /// cuMemSetAccess call (see @ref cudrv::set_access).
  /// @throws invalid_argument_error when the bytes lie outside the range
  void set_access(std::size_t offset, std::size_t bytes, std::span<const access_descriptor> access) const;
  /// @brief What @p location may do with the mapped byte at @p offset.
  [[nodiscard]] access_rights access(std::size_t offset, const physical_location& location) const;

  /// @brief Two handles are equal when they name the same range.
  [[nodiscard]] friend constexpr bool operator==(const address_range_base& a, const address_range_base& b) noexcept {
    return a.address_ == b.address_ && a.size_ == b.size_;
  }

 protected:
  /// @brief Holds the range and the owner's state (null for an adopted view).
  constexpr address_range_base(CUdeviceptr address, std::size_t size, detail::address_reservation* state) noexcept
      : address_(address), size_(size), state_(state) {}
  /// @brief Copies the handle (for the view).
  constexpr address_range_base(const address_range_base&) noexcept = default;
  /// @brief Copies the handle (for the view).
  constexpr address_range_base& operator=(const address_range_base&) noexcept = default;
  ~address_range_base() = default;
  /// @brief Throws @ref invalid_argument_error when the range is empty (a moved-from owner).
  void require_range(const char* api) const;

  CUdeviceptr address_;                 ///< The first address; 0 in an empty owner.
  std::size_t size_;                    ///< Bytes.
  detail::address_reservation* state_;  ///< The owner's counted state; null for adopted ranges.

 private:
  friend class memory_mapping;
};

/// @brief A non-owning view of a reserved address range. Trivially copyable. A view taken from an
/// @ref address_range carries its bookkeeping, so mappings made through the view keep the range alive.
class address_range_ref : public address_range_base {
 public:
  /// @brief Views the reservation [@p address, @p address + @p size) made elsewhere.
  constexpr address_range_ref(CUdeviceptr address, std::size_t size) noexcept
      : address_range_base(address, size, nullptr) {}
  /// @brief Views the reservation [@p address, @p address + @p size) made elsewhere.
  [[nodiscard]] static constexpr address_range_ref from_native_handle(CUdeviceptr address, std::size_t size) noexcept {
    return {address, size};
  }
  /// @brief Views the same range as @p other.
  constexpr address_range_ref(const address_range_ref& other) noexcept = default;
  /// @brief Views the range @p other views.
  constexpr address_range_ref& operator=(const address_range_ref& other) noexcept = default;

 private:
  friend class address_range;
  constexpr address_range_ref(CUdeviceptr address, std::size_t size, detail::address_reservation* state) noexcept
      : address_range_base(address, size, state) {}
};

/// @brief Options of a new @ref address_range.
struct address_range_options {
  /// @brief The alignment of the first address: 0 (the driver's default) or a power of two.
  std::size_t alignment = 0;
  /// @brief The address wanted, or 0 for any. It is a hint: the driver may place the range elsewhere,
  /// and @ref address_range_base::address reports where it did.
  CUdeviceptr fixed_address = 0;
};

/// @brief An owning reservation of virtual addresses (cuMemAddressReserve / cuMemAddressFree), into
/// which @ref memory_mapping objects map physical memory.
///
/// Lifetimes are enforced: every mapping holds a counted reference on the reservation, so the range is
/// freed only after its last mapping is unmapped, whichever of the objects goes first, and a range is
/// never freed while mapped. Reserving costs no memory; it is common to reserve far more than will be
/// mapped (see @ref growable_buffer).
/// @code
/// cudrv::device dev(0);
/// const std::size_t g = cudrv::allocation_granularity(dev);
/// cudrv::address_range range(16 * g);                           // addresses only
/// cudrv::memory_mapping first(range, 0, cudrv::physical_allocation(dev, 4 * g));
/// first.set_access(dev);                                        // read-write for dev
/// float* p = reinterpret_cast<float*>(first.address());          // usable by kernels on dev
/// @endcode
class address_range : public address_range_base {
 public:
  /// @brief An empty owner: holds no range.
  address_range() noexcept : address_range_base(0, 0, nullptr) {}
  /// @brief Reserves @p bytes of addresses.
  /// @throws invalid_argument_error when @p bytes is 0 or not a multiple of the host page size, when
  /// the alignment is not 0 or a power of two, or when the fixed address is not a multiple of the
  /// host page size (before the driver is called)
  explicit address_range(std::size_t bytes, address_range_options options = {});
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  address_range(const address_range&) = delete;
  address_range& operator=(const address_range&) = delete;
  /// @}
  /// @brief Takes over @p other's range; @p other becomes empty.
  address_range(address_range&& other) noexcept
      : address_range_base(cudrv::detail::exchange(other.address_, 0), cudrv::detail::exchange(other.size_, 0),
                           cudrv::detail::exchange(other.state_, nullptr)) {}
  /// @brief Drops the held range (see @ref reset), then takes over @p other's.
  address_range& operator=(address_range&& other) noexcept;
  /// @brief Drops the range (see @ref reset).
  ~address_range() { reset(); }

  /// @brief Takes ownership of a reservation made with cuMemAddressReserve.
  [[nodiscard]] static address_range from_native_handle(CUdeviceptr address, std::size_t bytes);
  /// @brief Gives up ownership: the returned range will not be freed by cudrv (live mappings are still
  /// unmapped when they go); the caller must cuMemAddressFree it.
  [[nodiscard]] CUdeviceptr release() noexcept;
  /// @brief Drops this owner's reference now: the range is freed at once when nothing is mapped in it,
  /// else when its last mapping is unmapped. The object becomes empty.
  void reset() noexcept;
  /// @brief Whether this object holds a range.
  [[nodiscard]] explicit operator bool() const noexcept { return address_ != 0; }
  /// @brief A view of the range, carrying its bookkeeping.
  operator address_range_ref() const& noexcept {  // NOLINT: implicit on purpose
    return address_range_ref(address_, size_, state_);
  }
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: a view of a temporary range would outlive it (map into a named range).
  operator address_range_ref() const&& = delete;
  /// @}

 private:
  // A private tag, hidden: Doxygen 1.9 would link the class page to a section it leaves out.
  /// @cond
  struct adopt_tag {};
  /// @endcond
  address_range(detail::address_reservation* state, adopt_tag) noexcept;
};

// --- mappings ------------------------------------------------------------------------------------

/// @brief The operations of a mapping, shared by the view @ref cudrv::memory_mapping_ref and the owner
/// @ref cudrv::memory_mapping. Not constructible or assignable on its own.
class memory_mapping_base {
 public:
  /// @brief The first mapped address.
  [[nodiscard]] constexpr CUdeviceptr address() const noexcept { return address_; }
  /// @brief The first mapped address (the mapping's raw handle, with @ref size).
  [[nodiscard]] constexpr CUdeviceptr native_handle() const noexcept { return address_; }
  /// @brief The mapped bytes.
  [[nodiscard]] constexpr std::size_t size() const noexcept { return size_; }
  /// @brief Grants @p rights on the whole mapping to device @p dev (cuMemSetAccess). A new mapping
  /// is accessible to nobody until this is called.
  void set_access(const device& dev, access_rights rights = access_rights::read_write) const;
  /// @brief Grants access to every location in @p access, in one cuMemSetAccess call.
  void set_access(std::span<const access_descriptor> access) const;
  /// @brief As the other overload, from a braced list.
  void set_access(std::initializer_list<access_descriptor> access) const;
  /// @brief What device @p dev may do with the mapping (cuMemGetAccess).
  [[nodiscard]] access_rights access(const device& dev) const;
  /// @brief What @p location may do with the mapping (cuMemGetAccess).
  [[nodiscard]] access_rights access(const physical_location& location) const;

  /// @brief Two handles are equal when they name the same mapped span.
  [[nodiscard]] friend constexpr bool operator==(const memory_mapping_base& a, const memory_mapping_base& b) noexcept {
    return a.address_ == b.address_ && a.size_ == b.size_;
  }

 protected:
  /// @brief Holds the span.
  constexpr memory_mapping_base(CUdeviceptr address, std::size_t size) noexcept : address_(address), size_(size) {}
  /// @brief Copies the handle (for the view).
  constexpr memory_mapping_base(const memory_mapping_base&) noexcept = default;
  /// @brief Copies the handle (for the view).
  constexpr memory_mapping_base& operator=(const memory_mapping_base&) noexcept = default;
  ~memory_mapping_base() = default;
  /// @brief Throws @ref invalid_argument_error for an empty owner.
  void require_mapping(const char* api) const;

  CUdeviceptr address_;  ///< The first mapped address; 0 in an empty owner.
  std::size_t size_;     ///< Bytes.
};

/// @brief A non-owning view of a mapped span. Trivially copyable.
class memory_mapping_ref : public memory_mapping_base {
 public:
  /// @brief Views the mapping [@p address, @p address + @p size) made elsewhere.
  constexpr memory_mapping_ref(CUdeviceptr address, std::size_t size) noexcept : memory_mapping_base(address, size) {}
  /// @brief Views the mapping [@p address, @p address + @p size) made elsewhere.
  [[nodiscard]] static constexpr memory_mapping_ref from_native_handle(CUdeviceptr address, std::size_t size) noexcept {
    return {address, size};
  }
  /// @brief Views the same mapping as @p other.
  constexpr memory_mapping_ref(const memory_mapping_ref& other) noexcept = default;
  /// @brief Views the mapping @p other views.
  constexpr memory_mapping_ref& operator=(const memory_mapping_ref& other) noexcept = default;
};

/// @brief An owning mapping of (part of) a physical allocation into (part of) a reserved range
/// (cuMemMap), unmapped at destruction (cuMemUnmap).
///
/// The mapping keeps its @ref address_range reserved until it is unmapped. It does not need the
/// @ref physical_allocation object: the driver keeps mapped memory until it is unmapped. New mappings
/// are accessible to no device: call @ref memory_mapping_base::set_access. Mapping over bytes that are
/// already mapped is refused by the driver.
/// @code
/// cudrv::address_range range(8 * g);
/// cudrv::physical_allocation mem(dev, 4 * g);
/// cudrv::memory_mapping low(range, 0, mem);              // bytes [0, 4g) of the range
/// cudrv::memory_mapping high(range, 4 * g, mem);         // the same memory again at [4g, 8g)
/// range.set_access(0, 8 * g, std::array{cudrv::access_descriptor::for_device(dev)});
/// @endcode
class memory_mapping : public memory_mapping_base {
 public:
  /// @brief Maps all of @p allocation at byte @p offset of @p range.
  /// @throws invalid_argument_error when the mapping does not fit in the range, or the offset,
  /// address or size is not a multiple of the allocation's minimum granularity (the message names it)
  memory_mapping(address_range_ref range, std::size_t offset, physical_allocation_ref allocation);
  /// @brief Maps @p bytes of @p allocation, from byte @p allocation_offset, at byte @p offset of
  /// @p range. (The CUDA 13 driver still requires @p allocation_offset to be 0.)
  memory_mapping(address_range_ref range, std::size_t offset, physical_allocation_ref allocation,
                 std::size_t allocation_offset, std::size_t bytes);
  /// @brief Maps all of the owned @p allocation, which may be a temporary: the driver keeps mapped
  /// memory until it is unmapped (an owner converts to its view only while named, hence this form).
  memory_mapping(address_range_ref range, std::size_t offset, const physical_allocation& allocation)
      : memory_mapping(range, offset, static_cast<physical_allocation_ref>(allocation)) {}
  /// @brief Maps @p bytes of the owned @p allocation, which may be a temporary, from byte
  /// @p allocation_offset, at byte @p offset of @p range.
  memory_mapping(address_range_ref range, std::size_t offset, const physical_allocation& allocation,
                 std::size_t allocation_offset, std::size_t bytes)
      : memory_mapping(range, offset, static_cast<physical_allocation_ref>(allocation), allocation_offset, bytes) {}
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  memory_mapping(const memory_mapping&) = delete;
  memory_mapping& operator=(const memory_mapping&) = delete;
  /// @}
  /// @brief Takes over @p other's mapping; @p other becomes empty.
  memory_mapping(memory_mapping&& other) noexcept
      : memory_mapping_base(cudrv::detail::exchange(other.address_, 0), cudrv::detail::exchange(other.size_, 0)),
        range_(cudrv::detail::exchange(other.range_, nullptr)) {}
  /// @brief Unmaps the held mapping, then takes over @p other's.
  memory_mapping& operator=(memory_mapping&& other) noexcept;
  /// @brief Unmaps (errors go to the destruction handler), then drops the reference on the range.
  ~memory_mapping() { reset(); }

  /// @brief Takes ownership of the mapping [@p address, @p address + @p bytes) made with cuMemMap; it
  /// will be unmapped with cuMemUnmap (nothing keeps its range reserved).
  [[nodiscard]] static memory_mapping from_native_handle(CUdeviceptr address, std::size_t bytes) noexcept {
    return memory_mapping(address, bytes);
  }
  /// @brief Gives up ownership: the caller must cuMemUnmap the span. The reference on an owned range
  /// is dropped, so the range must then be kept reserved by its owner until the caller unmaps.
  [[nodiscard]] CUdeviceptr release() noexcept;
  /// @brief Unmaps now; the object becomes empty.
  void reset() noexcept;
  /// @brief Whether this object holds a mapping.
  [[nodiscard]] explicit operator bool() const noexcept { return address_ != 0; }
  /// @brief A view of the mapping.
  operator memory_mapping_ref() const& noexcept {
    return memory_mapping_ref(address_, size_);
  }  // NOLINT: implicit on purpose
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: a view of a temporary mapping would outlive it.
  operator memory_mapping_ref() const&& = delete;
  /// @}

 private:
  memory_mapping(CUdeviceptr address, std::size_t bytes) noexcept : memory_mapping_base(address, bytes) {}
  detail::address_reservation* range_ = nullptr;  // a counted reference on an owned range, or null
};

// --- the memory resource ---------------------------------------------------------------------------

/// @brief Options of a @ref virtual_memory_resource.
struct virtual_memory_resource_options {
  /// @brief Sizes are rounded up to this granularity of the device (the recommended one by default).
  granularity rounding = granularity::recommended;
  /// @brief Handle types each allocation may be exported to.
  shareable_handle_types handle_types = shareable_handle_types::none;
  /// @brief Requests GPUDirect RDMA-capable memory (see @ref physical_allocation_properties).
  bool gpu_direct_rdma = false;
  /// @brief Other devices given access to every allocation, besides the resource's own device.
  std::vector<device> peers{};
  /// @brief The rights the peers get.
  access_rights peer_access = access_rights::read_write;
};

/// @brief A @ref memory_resource whose every allocation is a reserved range, a physical allocation and
/// a mapping of one into the other, made accessible to its device (and to the peers named in the
/// options) with one cuMemSetAccess call; deallocation unmaps, releases and frees, in that order.
/// cuda.core's `VirtualMemoryResource`.
///
/// Sizes are rounded up to the granularity (2 MiB on current GPUs), so this resource suits large,
/// long-lived allocations that other devices or processes must reach, not many small ones. Allocation
/// is synchronous; @ref memory_resource::deallocate_async waits for the stream (unmapping is
/// synchronous). Thread-safe. Memory still allocated when the resource is destroyed is freed then
/// (a @ref resource_buffer left over frees nothing more: the destruction handler is told).
/// @code
/// cudrv::virtual_memory_resource mr(dev, {.peers = {cudrv::device(1)}});
/// {
///   cudrv::resource_buffer buf(mr, std::size_t(1) << 30);   // 1 GiB, readable and writable by devices 0 and 1
///   kernel_on_device_1(s1, buf.as<float>());
/// }                                                          // freed through mr: unmapped, released
/// @endcode
class virtual_memory_resource : public memory_resource {
 public:
  /// @brief A resource allocating device memory on @p dev.
  explicit virtual_memory_resource(const cudrv::device& dev, virtual_memory_resource_options options = {});
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  virtual_memory_resource(const virtual_memory_resource&) = delete;
  virtual_memory_resource& operator=(const virtual_memory_resource&) = delete;
  /// @}
  /// @brief Frees what is still allocated.
  ~virtual_memory_resource() override;

  /// @brief The device the memory lives on.
  [[nodiscard]] cudrv::device device() const noexcept { return device_; }
  /// @brief The granularity sizes are rounded up to.
  [[nodiscard]] std::size_t granularity_bytes() const noexcept { return granularity_; }
  /// @brief The number of live allocations.
  [[nodiscard]] std::size_t allocation_count() const;

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override;
  void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment) noexcept override;
  [[nodiscard]] memory_resource_properties do_properties() const noexcept override;

  cudrv::device device_;
  physical_allocation_properties properties_;
  std::size_t granularity_ = 0;
  // The access list and the live allocations by address (behind a mutex), in src/: a std::vector member
  // here would instantiate one more vector type in every translation unit of the umbrella.
  detail::virtual_memory_allocations* live_;
};

}  // namespace cudrv
