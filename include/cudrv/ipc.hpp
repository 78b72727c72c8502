/// @file ipc.hpp
/// @brief Memory shared between processes: shareable memory pools exported as a file descriptor or a
/// fabric handle and imported in another process (@ref cudrv::imported_memory_pool), allocations of
/// such a pool exported one by one (@ref cudrv::pointer_export, @ref cudrv::imported_buffer), and the
/// legacy IPC of plain cuMemAlloc memory (@ref cudrv::ipc_memory_handle, @ref cudrv::ipc_mapped_buffer).
/// The descriptors travel over <cudrv/unix_socket.hpp>; IPC events (<cudrv/event.hpp>) order the work
/// of the two processes. See @ref ipc.
///
/// Layer: memory (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "cudrv/detail/exchange.hpp"
#include "cudrv/device.hpp"
#include "cudrv/device_buffer.hpp"
#include "cudrv/file_descriptor.hpp"
#include "cudrv/memory_pool.hpp"
#include "cudrv/span.hpp"
#include "cudrv/stream.hpp"

namespace cudrv {

/// @brief How a shareable pool is handed to another process.
enum class shareable_handle_type : unsigned int {
  /// @brief A POSIX file descriptor (`CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR`), passed over a Unix
  /// socket (@ref unix_socket::send): processes on one host.
  posix_file_descriptor = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
  /// @brief A 64-byte fabric handle (`CU_MEM_HANDLE_TYPE_FABRIC`), a value sent over any channel: processes
  /// on the nodes of one NVLink fabric (needs the device's `handle_type_fabric_supported` and IMEX).
  fabric = 0x8,
};

/// @brief The 64 bytes that name a pool exported as a fabric handle (a `CUmemFabricHandle`); trivially
/// copyable, sent over any channel.
struct fabric_handle {
  unsigned char data[64];  ///< The driver's bytes.
};

/// @brief Whether @p dev can create pools shareable through @p type (its
/// `mempool_supported_handle_types`, and for fabric handles `handle_type_fabric_supported` and an IMEX
/// channel this process can open, `/dev/nvidia-caps-imex-channels/channel*`).
[[nodiscard]] bool supports_shareable_pools(const device& dev, shareable_handle_type type);

/// @brief Creates a pool of device memory on @p dev that other processes can import, after checking
/// that the device supports @p type. The pool is exported once before it is returned: the driver
/// refuses to export its allocations (@ref export_pointer) until then.
/// @throws not_supported_error naming the device attribute when it does not, and for fabric handles
/// also when this process has no IMEX channel (`CUDA_ERROR_NOT_PERMITTED`, the usual case on a machine
/// outside a multi-node NVLink domain, even where the device reports support; checked before the
/// driver is called, which crashes destroying such a pool)
/// @code
/// cudrv::memory_pool pool = cudrv::make_shareable_memory_pool(dev,
/// cudrv::shareable_handle_type::posix_file_descriptor); cudrv::file_descriptor fd =
/// cudrv::export_pool_descriptor(pool);   // send it with cudrv::unix_socket
/// @endcode
[[nodiscard]] memory_pool make_shareable_memory_pool(const device& dev, shareable_handle_type type,
                                                     memory_pool_properties properties = {});

/// @brief Exports @p pool as a new file descriptor (cuMemPoolExportToShareableHandle). The pool must
/// have been created with `CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR` (@ref make_shareable_memory_pool).
/// Whoever receives the descriptor can import the pool and every allocation exported from it.
[[nodiscard]] file_descriptor export_pool_descriptor(memory_pool_ref pool);
/// @brief Exports @p pool as a fabric handle (cuMemPoolExportToShareableHandle).
/// @throws not_supported_error when no visible device supports fabric handles, or the headers predate them,
/// or the driver refuses for want of an IMEX channel (`CUDA_ERROR_NOT_PERMITTED`)
[[nodiscard]] fabric_handle export_pool_fabric_handle(memory_pool_ref pool);

namespace detail {
/// @brief The state an imported pool shares with the buffers imported from it (internal).
struct imported_pool_state;

/// @brief A counted reference to an @ref imported_pool_state (internal): copies share the state, and the
/// last one destroys it (and with it the pool, unless released). Counted by hand, with the counting defined
/// in src/memory/ipc.cpp, so that this header needs no `<memory>` (docs/design.md, "Header cost").
class imported_pool_share {
 public:
  imported_pool_share() noexcept = default;
  /// @brief Takes @p adopted, a new state (from `new`) with a count of one.
  explicit imported_pool_share(imported_pool_state* adopted) noexcept : state_(adopted) {}
  imported_pool_share(const imported_pool_share& other) noexcept;
  imported_pool_share(imported_pool_share&& other) noexcept : state_(cudrv::detail::exchange(other.state_, nullptr)) {}
  imported_pool_share& operator=(imported_pool_share other) noexcept {
    imported_pool_state* const previous = state_;  // a swap, without instantiating std::swap
    state_ = other.state_;
    other.state_ = previous;
    return *this;
  }
  ~imported_pool_share() { reset(); }
  /// @brief Drops this reference; the state goes with the last one.
  void reset() noexcept;
  /// @brief The shared state (null when empty).
  imported_pool_state* operator->() const noexcept { return state_; }
  /// @brief Whether this refers to a state.
  explicit operator bool() const noexcept { return state_ != nullptr; }

 private:
  imported_pool_state* state_ = nullptr;
};

/// @brief The untyped state of an imported allocation (internal).
struct imported_allocation {
  CUdeviceptr address = 0;
  std::size_t bytes = 0;
  imported_pool_share pool;  // keeps the pool until the allocation is freed

  static imported_allocation import(const imported_pool_share& pool, const void* export_data, std::size_t bytes,
                                    std::size_t element_size);
  // cuMemFree in the pool's context, then drops the pool reference; errors go to the destruction handler.
  void free() noexcept;
  // cuMemFreeAsync on s (which must complete before the exporting process frees the allocation).
  void free_on(CUstream s, const char* api);
  // Gives the address up: nothing is freed; the pool reference is dropped.
  CUdeviceptr release() noexcept {
    pool.reset();
    bytes = 0;
    return cudrv::detail::exchange(address, 0);
  }
};

/// @brief The untyped state of a legacy IPC mapping (internal).
struct ipc_mapping {
  CUdeviceptr address = 0;
  std::size_t bytes = 0;
  CUcontext context = nullptr;  // the primary context it was opened in (retained for the process)

  static ipc_mapping open(const device& dev, const void* handle, std::size_t bytes, std::size_t element_size);
  // cuIpcCloseMemHandle in its context; errors go to the destruction handler.
  void close() noexcept;
};

/// @brief cuIpcGetMemHandle of the allocation at @p address in @p ctx (internal).
void ipc_get_mem_handle(void* handle_out, CUdeviceptr address, std::size_t bytes, CUcontext ctx, bool stream_ordered);
/// @brief cuMemPoolExportPointer of a pool allocation (internal).
void pool_export_pointer(void* data_out, CUdeviceptr address, std::size_t bytes, bool stream_ordered);
}  // namespace detail

/// @brief What another process needs to import one allocation of a shared pool: the driver's export data
/// (cuMemPoolExportPointer) and the size in bytes. Trivially copyable: send it over any channel, e.g.
/// @ref unix_socket::send_value, a pipe or shared memory.
struct pointer_export {
  CUmemPoolPtrExportData data;  ///< The driver's opaque 64 bytes.
  /// @brief The allocation's size in bytes, as the exporter claims it: the importer checks it against the
  /// extent the driver maps (@ref imported_memory_pool::import_pointer).
  std::uint64_t bytes;
};

/// @brief Exports one allocation of a shareable pool (cuMemPoolExportPointer): @p buffer must be a
/// stream-ordered buffer allocated from a pool created shareable. The importer must not touch it before
/// the allocation (and the work that fills it) completed: record an IPC event after it and send its
/// handle along. The driver refuses the allocations of a pool that was never exported itself; for a
/// shareable pool not made by @ref make_shareable_memory_pool (which exports it at creation), this
/// call exports the pool once (a descriptor opened and closed at once) and asks again.
/// @throws invalid_argument_error for an empty or synchronously allocated (cuMemAlloc) buffer
/// @throws error (`cuMemPoolExportPointer`) when the driver refuses: the pool is not shareable
template <class T>
[[nodiscard]] pointer_export export_pointer(const device_buffer<T>& buffer) {
  pointer_export out{};
  detail::pool_export_pointer(&out.data, buffer.data(), buffer.size_bytes(), buffer.is_stream_ordered());
  out.bytes = buffer.size_bytes();
  return out;
}

class imported_memory_pool;

/// @brief Memory of an allocation imported from another process (cuMemPoolImportPointer), for
/// `size()` elements of @p T; converts to @ref device_span (from a named object only). Move-only.
///
/// It keeps its @ref imported_memory_pool alive: the pool is destroyed after the last buffer imported
/// from it is freed, whatever order the objects go in. Its destructor frees the import (cuMemFree) in the
/// context the pool was imported for. The exporting process must not free the allocation before every
/// importer has freed its import: tell it when you are done (over the socket), then let it free.
template <class T>
class imported_buffer {
  static_assert(std::is_trivially_copyable_v<T>, "imported_buffer holds trivially copyable elements");

 public:
  using value_type = T;           ///< The element type.
  using size_type = std::size_t;  ///< Sizes in elements.

  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  imported_buffer(const imported_buffer&) = delete;
  imported_buffer& operator=(const imported_buffer&) = delete;
  /// @}
  /// @brief Takes over @p other's import; @p other becomes empty.
  imported_buffer(imported_buffer&& other) noexcept : alloc_(cudrv::detail::exchange(other.alloc_, {})) {}
  /// @brief Frees the held import, then takes over @p other's.
  imported_buffer& operator=(imported_buffer&& other) noexcept {
    if (this != &other) {
      alloc_.free();
      alloc_ = cudrv::detail::exchange(other.alloc_, {});
    }
    return *this;
  }
  /// @brief Frees the import (errors go to the destruction handler), then drops the pool reference.
  ~imported_buffer() { alloc_.free(); }

  /// @brief Adopts @p count elements at @p address, an allocation this process imported from @p pool
  /// itself (cuMemPoolImportPointer on `pool.native_handle()`): it is freed with cuMemFree in the
  /// pool's context, and keeps @p pool alive as an import made by @ref imported_memory_pool::import_pointer
  /// does. Nothing is checked against the driver: the address must be such an import.
  /// @throws invalid_argument_error when @p pool is empty
  [[nodiscard]] static imported_buffer from_native_handle(CUdeviceptr address, std::size_t count,
                                                          const imported_memory_pool& pool);
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the buffer keeps its pool, which a temporary owner cannot give.
  static imported_buffer from_native_handle(CUdeviceptr, std::size_t, imported_memory_pool&&) = delete;
  /// @}
  /// @brief Gives up ownership: the caller frees the returned address (cuMemFree, in the context of the
  /// pool's device) before the exporting process frees the allocation. The buffer drops its pool
  /// reference; a pool destroyed while the address is still imported is released by the driver once
  /// the address is freed.
  [[nodiscard]] CUdeviceptr release() noexcept { return alloc_.release(); }
  /// @brief Frees the import now; the buffer becomes empty.
  void reset() noexcept { alloc_.free(); }
  /// @brief Frees the import ordered on @p s (cuMemFreeAsync); the free must have completed before the
  /// exporting process frees the allocation (synchronize @p s before telling it).
  void reset(stream_ref s) { alloc_.free_on(s.native_handle(), "cudrv::imported_buffer::reset"); }

  /// @brief The device address in this process.
  [[nodiscard]] CUdeviceptr data() const noexcept { return alloc_.address; }
  /// @brief The address as a typed pointer, for kernel arguments.
  [[nodiscard]] T* get() const noexcept { return reinterpret_cast<T*>(alloc_.address); }
  /// @brief The number of elements.
  [[nodiscard]] std::size_t size() const noexcept { return alloc_.bytes / sizeof(T); }
  /// @brief The number of bytes.
  [[nodiscard]] std::size_t size_bytes() const noexcept { return alloc_.bytes; }
  /// @brief Whether the buffer holds an import.
  [[nodiscard]] explicit operator bool() const noexcept { return alloc_.address != 0; }
  /// @brief A view of all elements.
  [[nodiscard]] device_span<T> view() noexcept { return {alloc_.address, size()}; }
  /// @brief A read-only view of all elements.
  [[nodiscard]] device_span<const T> view() const noexcept { return {alloc_.address, size()}; }
  /// @brief Converts to a view of all elements.
  operator device_span<T>() & noexcept { return view(); }  // NOLINT: implicit on purpose
  /// @brief Converts to a read-only view of all elements.
  operator device_span<const T>() const& noexcept { return view(); }  // NOLINT: implicit on purpose
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: a view of a temporary buffer would outlive its memory.
  operator device_span<T>() && = delete;
  /// @brief Refused: a view of a temporary buffer would outlive its memory.
  operator device_span<const T>() const&& = delete;
  /// @}

 private:
  friend class imported_memory_pool;
  explicit imported_buffer(detail::imported_allocation alloc) noexcept : alloc_(std::move(alloc)) {}
  detail::imported_allocation alloc_;
};

/// @brief A pool another process exported, imported into this one (cuMemPoolImportFromShareableHandle),
/// destroyed with cuMemPoolDestroy after the last buffer imported from it. Converts to
/// @ref memory_pool_ref (grant another device access with `set_access`). Move-only.
///
/// The device named at import chooses the context (its primary context) in which allocations are
/// imported and freed.
/// @code
/// // consumer process
/// cudrv::received_message m = sock.receive({.timeout = std::chrono::seconds(10)});
/// auto pool = cudrv::imported_memory_pool(dev, m.descriptors.at(0));
/// auto data = pool.import_pointer<float>(m.as<cudrv::pointer_export>());
/// cudrv::launch(s, cfg, reduce, data.get(), data.size());   // no copy: the producer's memory
/// @endcode
class imported_memory_pool : public memory_pool_base {
 public:
  /// @brief Imports the pool exported as the file descriptor @p fd (which stays owned by the caller;
  /// it may be closed after the import), for use on @p dev.
  imported_memory_pool(const cudrv::device& dev, const file_descriptor& fd);
  /// @brief Imports the pool exported as the fabric handle @p handle, for use on @p dev.
  /// @throws not_supported_error when @p dev does not support fabric handles
  imported_memory_pool(const cudrv::device& dev, const fabric_handle& handle);
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  imported_memory_pool(const imported_memory_pool&) = delete;
  imported_memory_pool& operator=(const imported_memory_pool&) = delete;
  /// @}
  /// @brief Takes over @p other's pool; @p other becomes empty.
  imported_memory_pool(imported_memory_pool&& other) noexcept
      : memory_pool_base(cudrv::detail::exchange(other.handle_, nullptr)), state_(std::move(other.state_)) {}
  /// @brief Drops the held pool, then takes over @p other's.
  imported_memory_pool& operator=(imported_memory_pool&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = cudrv::detail::exchange(other.handle_, nullptr);
      state_ = std::move(other.state_);
    }
    return *this;
  }
  /// @brief Drops this reference; the pool is destroyed once no imported buffer uses it.
  ~imported_memory_pool() = default;

  /// @brief Imports one allocation the other process exported (cuMemPoolImportPointer), typed as
  /// elements of @p T. The buffer keeps this pool alive.
  ///
  /// The size that comes with the export is the other process's word: once the allocation is mapped, it
  /// is checked against the extent the driver mapped (cuMemGetAddressRange). A smaller claim (a prefix)
  /// is taken as it is; a larger one would let copies and spans over the buffer reach memory that was
  /// never shared, and is refused, with the allocation unmapped again.
  /// @throws invalid_argument_error when the pool is empty, the size is not a multiple of sizeof(T), or
  ///   the claimed size exceeds what the driver mapped (the error names both figures)
  template <class T>
  [[nodiscard]] imported_buffer<T> import_pointer(const pointer_export& exported) const {
    return imported_buffer<T>(
        detail::imported_allocation::import(state_for("cudrv::imported_memory_pool::import_pointer"), &exported.data,
                                            exported.bytes, sizeof(T)));
  }
  /// @brief The device the pool was imported for.
  [[nodiscard]] cudrv::device device() const;

  /// @brief Adopts @p handle, a pool this process imported itself (cuMemPoolImportFromShareableHandle)
  /// for @p dev: cudrv destroys it (cuMemPoolDestroy) after this object and the last buffer imported
  /// from it. A null handle gives an empty owner.
  [[nodiscard]] static imported_memory_pool from_native_handle(CUmemoryPool handle, const cudrv::device& dev);
  /// @brief Gives up ownership (the caller destroys the pool with cuMemPoolDestroy). Buffers imported
  /// from it stay valid and no longer destroy it.
  [[nodiscard]] CUmemoryPool release() noexcept;
  /// @brief Drops this reference now; the pool goes once no imported buffer uses it.
  void reset() noexcept {
    handle_ = nullptr;
    state_.reset();
  }
  /// @brief Whether this object holds a pool.
  [[nodiscard]] explicit operator bool() const noexcept { return handle_ != nullptr; }
  /// @brief A view of the pool.
  operator memory_pool_ref() const& noexcept { return memory_pool_ref(handle_); }  // NOLINT: implicit on purpose
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: a view of a temporary imported pool would outlive it.
  operator memory_pool_ref() const&& = delete;
  /// @brief Refused: the subscription would trim a temporary imported pool after its destruction.
  async_notification_subscription trim_on_pressure(const cudrv::device&, std::size_t = 0) const&& = delete;
  /// @}
  using memory_pool_base::trim_on_pressure;

 private:
  imported_memory_pool() noexcept : memory_pool_base(nullptr) {}
  template <class T>
  friend class imported_buffer;
  const detail::imported_pool_share& state_for(const char* api) const;
  detail::imported_pool_share state_;
};

template <class T>
imported_buffer<T> imported_buffer<T>::from_native_handle(CUdeviceptr address, std::size_t count,
                                                          const imported_memory_pool& pool) {
  return imported_buffer(detail::imported_allocation{address, count * sizeof(T),
                                                     pool.state_for("cudrv::imported_buffer::from_native_handle")});
}

/// @brief The handle of a cuMemAlloc allocation for another process (legacy IPC, cuIpcGetMemHandle),
/// with its size. Trivially copyable: send it over any channel.
struct ipc_memory_handle {
  CUipcMemHandle handle;  ///< The driver's opaque 64 bytes.
  /// @brief The allocation's size in bytes, as the exporter claims it: checked against the extent the
  /// driver maps (@ref ipc_mapped_buffer).
  std::uint64_t bytes;
};

/// @brief The legacy IPC handle of @p buffer (cuIpcGetMemHandle), which must have been allocated
/// synchronously (cuMemAlloc: `device_buffer(dev, n)`); pool memory is shared with
/// @ref export_pointer instead.
/// @throws invalid_argument_error for an empty or a stream-ordered buffer
template <class T>
[[nodiscard]] ipc_memory_handle ipc_handle(const device_buffer<T>& buffer) {
  ipc_memory_handle out{};
  const bool stream_ordered = buffer.is_stream_ordered();
  detail::ipc_get_mem_handle(&out.handle, buffer.data(), buffer.size_bytes(),
                             buffer.data() != 0 && !stream_ordered ? buffer.context().native_handle() : nullptr,
                             stream_ordered);
  out.bytes = buffer.size_bytes();
  return out;
}

/// @brief Another process's cuMemAlloc memory mapped into this one (cuIpcOpenMemHandle), for `size()`
/// elements of @p T, unmapped with cuIpcCloseMemHandle on destruction. Move-only; converts to
/// @ref device_span (from a named object only).
///
/// It is opened with `CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS` (the one flag the driver accepts): a process
/// whose device is not the exporting one reaches the memory through peer access, enabled as needed.
/// The driver refuses to open a handle in the process that exported it.
/// @code
/// auto h = sock.receive().as<cudrv::ipc_memory_handle>();
/// cudrv::ipc_mapped_buffer<int> in(dev, h);              // dev may differ from the exporter's device
/// @endcode
template <class T>
class ipc_mapped_buffer {
  static_assert(std::is_trivially_copyable_v<T>, "ipc_mapped_buffer holds trivially copyable elements");

 public:
  using value_type = T;           ///< The element type.
  using size_type = std::size_t;  ///< Sizes in elements.

  /// @brief Maps the memory named by @p handle (cuIpcOpenMemHandle), in @p dev's primary context. The
  /// handle's size, the other process's word, is checked against the extent the driver mapped
  /// (cuMemGetAddressRange); a larger claim is refused and the memory unmapped.
  /// @throws invalid_argument_error when the size is not a multiple of sizeof(T), or exceeds what the
  ///   driver mapped (the error names both figures)
  ipc_mapped_buffer(const cudrv::device& dev, const ipc_memory_handle& handle)
      : map_(detail::ipc_mapping::open(dev, &handle.handle, handle.bytes, sizeof(T))) {}
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  ipc_mapped_buffer(const ipc_mapped_buffer&) = delete;
  ipc_mapped_buffer& operator=(const ipc_mapped_buffer&) = delete;
  /// @}
  /// @brief Takes over @p other's mapping; @p other becomes empty.
  ipc_mapped_buffer(ipc_mapped_buffer&& other) noexcept : map_(cudrv::detail::exchange(other.map_, {})) {}
  /// @brief Unmaps the held memory, then takes over @p other's.
  ipc_mapped_buffer& operator=(ipc_mapped_buffer&& other) noexcept {
    if (this != &other) {
      map_.close();
      map_ = cudrv::detail::exchange(other.map_, {});
    }
    return *this;
  }
  /// @brief Unmaps the memory (errors go to the destruction handler).
  ~ipc_mapped_buffer() { map_.close(); }

  /// @brief Adopts @p count elements at @p address, memory another process's handle mapped into this
  /// one with cuIpcOpenMemHandle while @p ctx was current; it will be unmapped with cuIpcCloseMemHandle
  /// in @p ctx. Nothing is checked against the driver.
  [[nodiscard]] static ipc_mapped_buffer from_native_handle(CUdeviceptr address, std::size_t count,
                                                            context_ref ctx) noexcept {
    return ipc_mapped_buffer(detail::ipc_mapping{address, count * sizeof(T), ctx.native_handle()});
  }
  /// @brief Gives up ownership: the caller unmaps the returned address (cuIpcCloseMemHandle).
  [[nodiscard]] CUdeviceptr release() noexcept { return cudrv::detail::exchange(map_, {}).address; }
  /// @brief Unmaps now; the object becomes empty.
  void reset() noexcept { map_.close(); }
  /// @brief The device address in this process.
  [[nodiscard]] CUdeviceptr data() const noexcept { return map_.address; }
  /// @brief The address as a typed pointer, for kernel arguments.
  [[nodiscard]] T* get() const noexcept { return reinterpret_cast<T*>(map_.address); }
  /// @brief The number of elements.
  [[nodiscard]] std::size_t size() const noexcept { return map_.bytes / sizeof(T); }
  /// @brief The number of bytes.
  [[nodiscard]] std::size_t size_bytes() const noexcept { return map_.bytes; }
  /// @brief Whether the object holds a mapping.
  [[nodiscard]] explicit operator bool() const noexcept { return map_.address != 0; }
  /// @brief A view of all elements.
  [[nodiscard]] device_span<T> view() noexcept { return {map_.address, size()}; }
  /// @brief A read-only view of all elements.
  [[nodiscard]] device_span<const T> view() const noexcept { return {map_.address, size()}; }
  /// @brief Converts to a view of all elements.
  operator device_span<T>() & noexcept { return view(); }  // NOLINT: implicit on purpose
  /// @brief Converts to a read-only view of all elements.
  operator device_span<const T>() const& noexcept { return view(); }  // NOLINT: implicit on purpose
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: a view of a temporary buffer would outlive its memory.
  operator device_span<T>() && = delete;
  /// @brief Refused: a view of a temporary buffer would outlive its memory.
  operator device_span<const T>() const&& = delete;
  /// @}

 private:
  explicit ipc_mapped_buffer(detail::ipc_mapping map) noexcept : map_(map) {}
  detail::ipc_mapping map_;
};

}  // namespace cudrv
