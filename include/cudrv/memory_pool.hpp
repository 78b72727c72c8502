/// @file memory_pool.hpp
/// @brief Stream-ordered memory pools: the non-owning @ref cudrv::memory_pool_ref, the owning
/// @ref cudrv::memory_pool, and each device's default and current pools.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "cudrv/device.hpp"

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
  CUmemAllocationHandleType handle_type = CU_MEM_HANDLE_TYPE_NONE;
};

/// @brief The operations every memory-pool handle offers, shared by the view
/// @ref cudrv::memory_pool_ref and the owner @ref cudrv::memory_pool. Not constructible or
/// assignable on its own (see @ref cudrv::context_base).
class memory_pool_base {
 public:
  /// @brief The raw handle (also usable as a `cudaMemPool_t`).
  [[nodiscard]] constexpr CUmemoryPool native_handle() const noexcept { return handle_; }

  /// @brief Releases reserved memory until at most @p min_bytes_to_keep stay reserved (cuMemPoolTrimTo).
  void trim_to(std::size_t min_bytes_to_keep) const;
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
  /// @brief Holds @p handle.
  constexpr explicit memory_pool_base(CUmemoryPool handle) noexcept : handle_(handle) {}
  /// @brief Copies the handle (for the view).
  constexpr memory_pool_base(const memory_pool_base&) noexcept = default;
  /// @brief Copies the handle (for the view).
  constexpr memory_pool_base& operator=(const memory_pool_base&) noexcept = default;
  ~memory_pool_base() = default;
  /// @brief Throws @ref invalid_argument_error when the handle is null (a moved-from owner).
  void require_handle(const char* api) const;
  /// @brief The handle; null only in a moved-from owner.
  CUmemoryPool handle_;
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
  /// @brief Views @p handle.
  constexpr explicit memory_pool_ref(CUmemoryPool handle) noexcept : memory_pool_base(handle) {}
  memory_pool_ref(std::nullptr_t) = delete;
  memory_pool_ref(int) = delete;
  /// @brief Views the same pool as @p other.
  constexpr memory_pool_ref(const memory_pool_ref& other) noexcept = default;
  /// @brief Views the pool @p other views.
  constexpr memory_pool_ref& operator=(const memory_pool_ref& other) noexcept = default;
};

/// @brief An owning memory pool created with cuMemPoolCreate and destroyed with cuMemPoolDestroy.
/// Converts to @ref memory_pool_ref (it is not one, so it cannot be overwritten through a
/// `memory_pool_ref&`).
///
/// Destroying a pool with allocations still alive is safe: the driver frees the pool once the last
/// allocation is freed.
/// @code
/// cudrv::memory_pool pool(dev, {.max_size = 256 << 20});   // keeps freed memory until trimmed
/// cudrv::device_buffer<int> a(pool, stream, 1000);
/// @endcode
class memory_pool : public memory_pool_base {
 public:
  /// @brief Creates a pool of device memory on @p dev.
  /// @throws not_supported_error when the device has no memory-pool support or the handle type is unsupported
  explicit memory_pool(const device& dev, memory_pool_properties properties = {});
  memory_pool(const memory_pool&) = delete;
  memory_pool& operator=(const memory_pool&) = delete;
  /// @brief Takes over @p other's pool; @p other becomes empty.
  memory_pool(memory_pool&& other) noexcept : memory_pool_base(std::exchange(other.handle_, nullptr)) {}
  /// @brief Destroys the held pool, then takes over @p other's.
  memory_pool& operator=(memory_pool&& other) noexcept;
  /// @brief Destroys the pool; errors go to the destruction handler.
  ~memory_pool();

  /// @brief Takes ownership of a pool created with cuMemPoolCreate.
  [[nodiscard]] static memory_pool from_native_handle(CUmemoryPool handle) noexcept { return memory_pool(handle); }
  /// @brief Gives up ownership; the caller must destroy the returned pool.
  [[nodiscard]] CUmemoryPool release() noexcept { return std::exchange(handle_, nullptr); }
  /// @brief Destroys the pool now; the object becomes empty.
  void reset() noexcept;
  /// @brief Whether this object holds a pool (false after a move or @ref release).
  [[nodiscard]] explicit operator bool() const noexcept { return handle_ != nullptr; }
  /// @brief A view of the pool.
  operator memory_pool_ref() const noexcept { return memory_pool_ref(handle_); }  // NOLINT: implicit on purpose

 private:
  explicit memory_pool(CUmemoryPool handle) noexcept : memory_pool_base(handle) {}
};

/// @brief The device's default memory pool (cuDeviceGetDefaultMemPool).
[[nodiscard]] memory_pool_ref default_memory_pool(const device& dev);
/// @brief The pool stream-ordered allocations on @p dev come from when none is named (cuDeviceGetMemPool).
[[nodiscard]] memory_pool_ref current_memory_pool(const device& dev);
/// @brief Makes @p pool the device's current pool (cuDeviceSetMemPool).
void set_current_memory_pool(const device& dev, memory_pool_ref pool);

}  // namespace cudrv
