/// @file memory_pool.hpp
/// @brief Stream-ordered memory pools: the non-owning @ref cudrv::memory_pool_ref, the owning
/// @ref cudrv::memory_pool (device, pinned host, host NUMA and managed pools), each device's default and
/// current pools, and the memory the device keeps for graphs.
///
/// Layer: memory (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "cudrv/async_notification.hpp"
#include "cudrv/detail/exchange.hpp"
#include "cudrv/device.hpp"
#include "cudrv/memory_location.hpp"

namespace cudrv {

/// @brief Properties of a new @ref memory_pool.
struct memory_pool_properties {
  /// @brief Memory the pool keeps reserved after a synchronisation instead of returning it to the
  /// system (`CU_MEMPOOL_ATTR_RELEASE_THRESHOLD`), in bytes. The default, `SIZE_MAX`, keeps all freed
  /// memory for reuse until @ref memory_pool_base::trim_to returns it, as the caching allocators of
  /// PyTorch and CuPy do: with the driver's threshold of 0, every synchronisation gives the memory back
  /// and the next allocation loop pays for getting it again.
  std::size_t release_threshold = SIZE_MAX;
  /// @brief The most memory the pool may reserve, in bytes; 0 means no limit (needs CUDA 12.2).
  std::size_t max_size = 0;
  /// @brief The handle type for sharing the pool with other processes, e.g.
  /// `CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR`; `CU_MEM_HANDLE_TYPE_NONE` for a process-local pool.
  /// Device, host NUMA and managed pools take it (the driver decides what it supports: managed pools are
  /// not shareable with CUDA 13.0); a pool on @ref memory_location::host() cannot be shared (the driver's
  /// rule), so share host memory through a @ref memory_location::host_numa pool.
  CUmemAllocationHandleType handle_type = CU_MEM_HANDLE_TYPE_NONE;
};

/// @brief The operations every memory-pool handle offers, shared by the view
/// @ref cudrv::memory_pool_ref and the owner @ref cudrv::memory_pool. Not constructible or
/// assignable on its own (see @ref cudrv::context_base).
class memory_pool_base {
 public:
  /// @brief The raw handle (also usable as a `cudaMemPool_t`).
  [[nodiscard]] constexpr CUmemoryPool native_handle() const noexcept { return handle_; }

  /// @brief Whether the handle knows where the pool's memory lives and how it is allocated: true for
  /// pools cudrv created and the pools of a device (@ref default_memory_pool, @ref current_memory_pool),
  /// false for a view of a bare handle (the driver cannot be asked; describe it with
  /// the three-argument constructor of @ref memory_pool_ref).
  [[nodiscard]] constexpr bool is_described() const noexcept { return type_ != CU_MEM_ALLOCATION_TYPE_INVALID; }
  /// @brief Where the pool's memory lives.
  /// @throws invalid_argument_error when the handle is not described (@ref is_described)
  [[nodiscard]] memory_location location() const;
  /// @brief How the pool allocates its memory.
  /// @throws invalid_argument_error when the handle is not described (@ref is_described)
  [[nodiscard]] memory_allocation_type allocation_type() const;
  /// @brief What memory from the pool is (its device, device and host accessibility), from
  /// @ref location and @ref allocation_type.
  /// @throws invalid_argument_error when the handle is not described (@ref is_described)
  [[nodiscard]] memory_properties properties() const;

  /// @brief Releases reserved memory until at most @p min_bytes_to_keep stay reserved (cuMemPoolTrimTo).
  void trim_to(std::size_t min_bytes_to_keep) const;
  /// @brief Trims the pool to @p keep_bytes (cuMemPoolTrimTo) whenever @p dev reports that the process is
  /// over its device memory budget, for as long as the returned subscription lives (an
  /// @ref async_notification_subscription; declare it after the pool, so that it goes first). Trimming
  /// returns only memory that no allocation uses; a failed trim goes to the destruction handler.
  /// @code
  /// cudrv::memory_pool pool(dev);
  /// cudrv::async_notification_subscription trim = pool.trim_on_pressure(dev);  // keeps nothing cached
  /// @endcode
  /// @throws invalid_argument_error for an empty (moved-from) pool
  /// @throws not_supported_error as @ref async_notification_subscription
  [[nodiscard]] async_notification_subscription trim_on_pressure(const device& dev, std::size_t keep_bytes = 0) const&;
  /// @brief The release threshold in bytes.
  [[nodiscard]] std::size_t release_threshold() const;
  /// @brief Sets the release threshold in bytes.
  void set_release_threshold(std::size_t bytes) const;
  /// @brief Bytes currently reserved from the system by the pool.
  [[nodiscard]] std::size_t reserved_current() const;
  /// @brief High-water mark of @ref reserved_current since creation or the last reset.
  [[nodiscard]] std::size_t reserved_high() const;
  /// @brief Bytes currently allocated to users from the pool.
  [[nodiscard]] std::size_t used_current() const;
  /// @brief High-water mark of @ref used_current since creation or the last reset.
  [[nodiscard]] std::size_t used_high() const;
  /// @brief Resets both high-water marks to the current values.
  void reset_high_watermarks() const;
  /// @brief Reads any attribute whose value is a 64-bit integer or an int, widened (cuMemPoolGetAttribute).
  [[nodiscard]] std::uint64_t attribute(CUmemPool_attribute attr) const;
  /// @brief Sets any attribute whose value is a 64-bit integer or an int (cuMemPoolSetAttribute).
  void set_attribute(CUmemPool_attribute attr, std::uint64_t value) const;

  /// @brief Lets another device @p dev read and write allocations of this pool (cuMemPoolSetAccess),
  /// or revokes that with `CU_MEM_ACCESS_FLAGS_PROT_NONE`. The pool's own device always has
  /// read-write access and the driver refuses to change it.
  void set_access(const device& dev, CUmemAccess_flags flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE) const;
  /// @brief The access @p dev has to allocations of this pool (cuMemPoolGetAccess).
  [[nodiscard]] CUmemAccess_flags access(const device& dev) const;

  /// @brief Two handles are equal when they name the same pool (views and owners alike).
  [[nodiscard]] friend constexpr bool operator==(const memory_pool_base& a, const memory_pool_base& b) noexcept {
    return a.handle_ == b.handle_;
  }

 protected:
  /// @brief Holds @p handle, with no description.
  constexpr explicit memory_pool_base(CUmemoryPool handle) noexcept : handle_(handle) {}
  /// @brief Holds @p handle of a pool of @p type memory at @p location.
  constexpr memory_pool_base(CUmemoryPool handle, CUmemLocation location, CUmemAllocationType type) noexcept
      : handle_(handle), location_(location), type_(type) {}
  /// @brief Copies the handle (for the view).
  constexpr memory_pool_base(const memory_pool_base&) noexcept = default;
  /// @brief Copies the handle (for the view).
  constexpr memory_pool_base& operator=(const memory_pool_base&) noexcept = default;
  ~memory_pool_base() = default;
  /// @brief Throws @ref invalid_argument_error when the handle is null (a moved-from owner).
  void require_handle(const char* api) const;
  /// @brief Throws @ref invalid_argument_error naming @p api when the handle is not described.
  void require_description(const char* api) const;
  /// @brief The handle; null only in a moved-from owner.
  CUmemoryPool handle_;
  /// @brief Where the pool's memory lives (meaningful when described).
  CUmemLocation location_{};
  /// @brief The pool's allocation type; `CU_MEM_ALLOCATION_TYPE_INVALID` when not described.
  CUmemAllocationType type_ = CU_MEM_ALLOCATION_TYPE_INVALID;
};

/// @brief A non-owning view of a memory pool. Trivially copyable.
///
/// @code
/// cudrv::memory_pool_ref pool = cudrv::default_memory_pool(dev);
/// pool.set_release_threshold(std::size_t(1) << 30);    // keep up to 1 GiB cached across syncs
/// cudrv::device_buffer<float> tmp(pool, stream, 1 << 20);
/// std::printf("%zu bytes in use\n", pool.used_current());
/// @endcode
class memory_pool_ref : public memory_pool_base {
 public:
  /// @brief Views @p handle, without knowing where its memory lives (@ref is_described is false).
  constexpr explicit memory_pool_ref(CUmemoryPool handle) noexcept : memory_pool_base(handle) {}
  /// @brief Views @p handle, a pool of @p type memory at @p where (the caller vouches for both).
  memory_pool_ref(CUmemoryPool handle, memory_location where, memory_allocation_type type) noexcept
      : memory_pool_base(handle, where.native(), static_cast<CUmemAllocationType>(type)) {}
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  memory_pool_ref(std::nullptr_t) = delete;
  memory_pool_ref(int) = delete;
  /// @}
  /// @brief Views the same pool as @p other.
  constexpr memory_pool_ref(const memory_pool_ref& other) noexcept = default;
  /// @brief Views the pool @p other views.
  constexpr memory_pool_ref& operator=(const memory_pool_ref& other) noexcept = default;

 private:
  friend class memory_pool;
  explicit constexpr memory_pool_ref(const memory_pool_base& other) noexcept : memory_pool_base(other) {}
};

/// @brief An owning memory pool created with cuMemPoolCreate and destroyed with cuMemPoolDestroy.
/// Converts to @ref memory_pool_ref (it is not one, so it cannot be overwritten through a
/// `memory_pool_ref&`).
///
/// Destroying a pool with allocations still alive is safe: the driver frees the pool once the last
/// allocation is freed.
///
/// Pools of every kind: device memory (`memory_pool(dev)`), page-locked host memory
/// (`memory_pool(memory_location::host())`, needs a CUDA 12.6 driver), host memory on one NUMA node
/// (`memory_pool(memory_location::host_numa(n))`, e.g. the node nearest a GPU), and managed memory
/// (@ref managed, CUDA 13). Device memory is allocated with @ref device_buffer; host and managed memory
/// with @ref host_accessible_pool_buffer, which the host can read and write.
/// @code
/// cudrv::memory_pool pool(dev, {.max_size = 256 << 20});   // keeps freed memory until trimmed
/// cudrv::device_buffer<int> a(pool, stream, 1000);
/// cudrv::memory_pool staging(cudrv::memory_location::nearest_host_numa(dev));
/// cudrv::host_accessible_pool_buffer<int> h(staging, stream, 1000);         // host memory next to dev
/// @endcode
class memory_pool : public memory_pool_base {
 public:
  /// @brief Creates a pool of device memory on @p dev.
  /// @throws not_supported_error when the device has no memory-pool support or the handle type is
  /// unsupported, and (`CUDA_ERROR_NOT_PERMITTED`, before the driver is called) for the fabric handle
  /// type when this process cannot open an IMEX channel
  explicit memory_pool(const device& dev, memory_pool_properties properties = {});
  /// @brief Creates a pool of memory that stays at @p where (@ref memory_allocation_type::pinned):
  /// device memory for a device, page-locked host memory for @ref memory_location::host() or
  /// @ref memory_location::host_numa. A host pool's memory is made accessible (read-write) to every
  /// device that supports host pools of that kind, as it is created; @ref set_access changes that.
  /// @throws invalid_argument_error for @ref memory_location::none() (managed pools only) or a handle
  /// type on a @ref memory_location::host() pool (which the driver cannot share)
  /// @throws not_supported_error when the driver or the devices do not support such pools, and
  /// (`CUDA_ERROR_NOT_PERMITTED`) for the fabric handle type without an IMEX channel
  explicit memory_pool(memory_location where, memory_pool_properties properties = {});
  /// @brief Creates a pool of managed memory (@ref memory_allocation_type::managed) preferring
  /// @p preferred (a device, the host, a NUMA node, or @ref memory_location::none()). Needs a CUDA 13
  /// driver that supports managed pools.
  /// @throws error from cuMemPoolCreate when the driver or the device does not support managed pools
  /// (a @ref not_supported_error where the driver says `CUDA_ERROR_NOT_SUPPORTED`)
  [[nodiscard]] static memory_pool managed(memory_location preferred = memory_location::none(),
                                           memory_pool_properties properties = {});
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  memory_pool(const memory_pool&) = delete;
  memory_pool& operator=(const memory_pool&) = delete;
  /// @}
  /// @brief Takes over @p other's pool; @p other becomes empty.
  memory_pool(memory_pool&& other) noexcept
      : memory_pool_base(cudrv::detail::exchange(other.handle_, nullptr), other.location_,
                         cudrv::detail::exchange(other.type_, CU_MEM_ALLOCATION_TYPE_INVALID)) {}
  /// @brief Destroys the held pool, then takes over @p other's.
  memory_pool& operator=(memory_pool&& other) noexcept;
  /// @brief Destroys the pool; errors go to the destruction handler.
  ~memory_pool();

  /// @brief Takes ownership of a pool created with cuMemPoolCreate (not described: see @ref is_described).
  [[nodiscard]] static memory_pool from_native_handle(CUmemoryPool handle) noexcept { return memory_pool(handle); }
  /// @brief Takes ownership of a pool of @p type memory at @p where created with cuMemPoolCreate.
  [[nodiscard]] static memory_pool from_native_handle(CUmemoryPool handle, memory_location where,
                                                      memory_allocation_type type) noexcept {
    return memory_pool(memory_pool_ref(handle, where, type));
  }
  /// @brief Gives up ownership; the caller must destroy the returned pool.
  [[nodiscard]] CUmemoryPool release() noexcept {
    type_ = CU_MEM_ALLOCATION_TYPE_INVALID;
    return cudrv::detail::exchange(handle_, nullptr);
  }
  /// @brief Destroys the pool now; the object becomes empty.
  void reset() noexcept;
  /// @brief Whether this object holds a pool (false after a move or @ref release).
  [[nodiscard]] explicit operator bool() const noexcept { return handle_ != nullptr; }
  /// @brief A view of the pool.
  operator memory_pool_ref() const& noexcept {  // NOLINT: implicit on purpose
    return memory_pool_ref(static_cast<const memory_pool_base&>(*this));
  }
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: a view of a temporary pool would outlive it.
  operator memory_pool_ref() const&& = delete;
  /// @brief Refused: the subscription would trim a temporary pool after its destruction.
  async_notification_subscription trim_on_pressure(const device&, std::size_t = 0) const&& = delete;
  /// @}
  using memory_pool_base::trim_on_pressure;

 private:
  explicit memory_pool(CUmemoryPool handle) noexcept : memory_pool_base(handle) {}
  explicit memory_pool(const memory_pool_ref& described) noexcept : memory_pool_base(described) {}
  memory_pool(memory_location where, memory_allocation_type type, const memory_pool_properties& properties);
};

/// @brief The device's default memory pool (cuDeviceGetDefaultMemPool).
[[nodiscard]] memory_pool_ref default_memory_pool(const device& dev);
/// @brief The pool stream-ordered allocations on @p dev come from when none is named (cuDeviceGetMemPool).
[[nodiscard]] memory_pool_ref current_memory_pool(const device& dev);
/// @brief Makes @p pool the device's current pool (cuDeviceSetMemPool).
void set_current_memory_pool(const device& dev, memory_pool_ref pool);

/// @brief The memory a device keeps for the allocation nodes of graphs
/// (`cuDeviceGetGraphMemAttribute`), in bytes.
struct graph_memory_usage {
  /// Bytes associated with graph allocations now (`CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT`); memory of a freed
  /// graph allocation counts until @ref trim_graph_memory returns it.
  std::size_t used_current = 0;
  std::size_t used_high = 0;         ///< High-water mark of @ref used_current since the last reset.
  std::size_t reserved_current = 0;  ///< Bytes the graph allocator holds from the system now.
  std::size_t reserved_high = 0;     ///< High-water mark of @ref reserved_current since the last reset.
};

/// @brief One graph-memory attribute of @p dev (`cuDeviceGetGraphMemAttribute`), in bytes.
/// @code
/// cudrv::graph_memory_usage u = cudrv::graph_memory(dev);
/// std::printf("graphs use %zu bytes, hold %zu\n", u.used_current, u.reserved_current);
/// cudrv::trim_graph_memory(dev);                     // give back what no graph uses
/// @endcode
[[nodiscard]] std::size_t graph_memory_attribute(const device& dev, CUgraphMem_attribute attr);
/// @brief All four graph-memory attributes of @p dev.
[[nodiscard]] graph_memory_usage graph_memory(const device& dev);
/// @brief Resets the two high-water marks of @p dev's graph memory to 0 (`cuDeviceSetGraphMemAttribute`;
/// the driver allows no other value).
void reset_graph_memory_high_watermarks(const device& dev);
/// @brief Gives the memory @p dev holds for graphs and no graph uses back to the system
/// (`cuDeviceGraphMemTrim`).
void trim_graph_memory(const device& dev);

}  // namespace cudrv
