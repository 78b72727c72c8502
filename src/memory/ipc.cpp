// Memory shared between processes: shareable pools, pool pointer export/import, legacy IPC.
#include "cudrv/ipc.hpp"

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <type_traits>

#include "cudrv/device_attributes.hpp"
#include "cudrv/error.hpp"
#include "driver/driver_api.hpp"
#include "memory/memory_support.hpp"

namespace cudrv {

// What the header promises about these types, checked here rather than in every translation unit
// that includes it (docs/design.md, "Header cost").
static_assert(std::is_trivially_copyable_v<pointer_export>);
static_assert(std::is_trivially_copyable_v<ipc_memory_handle>);

using detail::check;
namespace drv = detail::drv;

namespace detail {

struct imported_pool_state {
  CUmemoryPool pool = nullptr;
  CUcontext context = nullptr;  // the primary context of the device named at import (retained for the process)
  int device = 0;
  bool released = false;            // release(): the caller destroys the pool
  std::atomic<long> references{1};  // the imported_pool_share objects that refer to it

  imported_pool_state() = default;
  imported_pool_state(const imported_pool_state&) = delete;
  imported_pool_state& operator=(const imported_pool_state&) = delete;
  ~imported_pool_state() {
    if (pool != nullptr && !released) {
      CUmemoryPool p = pool;
      destroy_noexcept("cuMemPoolDestroy", [p] { return drv::cuMemPoolDestroy(p); });
    }
  }
};

imported_pool_share::imported_pool_share(const imported_pool_share& other) noexcept : state_(other.state_) {
  if (state_ != nullptr) {
    state_->references.fetch_add(1, std::memory_order_relaxed);
  }
}

void imported_pool_share::reset() noexcept {
  imported_pool_state* state = std::exchange(state_, nullptr);
  if (state != nullptr && state->references.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    delete state;
  }
}

}  // namespace detail

namespace {

constexpr auto posix_fd = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
constexpr auto fabric_type = static_cast<CUmemAllocationHandleType>(0x8);  // CU_MEM_HANDLE_TYPE_FABRIC (CUDA 12.3)

std::string device_text(const device& dev) { return "device " + std::to_string(dev.ordinal()); }

std::string type_name(shareable_handle_type type) {
  return type == shareable_handle_type::fabric ? "fabric handles" : "POSIX file descriptors";
}

bool fabric_supported(const device& dev) {
  return dev.attribute(static_cast<CUdevice_attribute>(128)) != 0;  // CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED
}

void require_fabric(const device& dev, const char* api) {
  if (!fabric_supported(dev)) {
    throw not_supported_error(CUDA_ERROR_NOT_SUPPORTED, api,
                              device_text(dev) + " does not support fabric handles "
                                                 "(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED is 0)");
  }
}

// Why a fabric request the device supports is refused (CUDA_ERROR_NOT_PERMITTED).
std::string no_imex_channel(const device& dev) {
  return device_text(dev) + " supports fabric handles, but fabric sharing needs an IMEX channel this process "
                            "can open (/dev/nvidia-caps-imex-channels/channel*), and there is none";
}

void require_pool(memory_pool_ref pool, const char* api) {
  if (pool.native_handle() == nullptr) {
    throw invalid_argument_error(api, "the memory pool is empty (a moved-from or released pool)");
  }
}

void require_elements(const char* api, std::size_t bytes, std::size_t element_size) {
  if (element_size != 0 && bytes % element_size != 0) {
    throw invalid_argument_error(api, "the shared allocation holds " + std::to_string(bytes) +
                                          " bytes, not a whole number of " + std::to_string(element_size) +
                                          "-byte elements");
  }
}

// The driver refuses cuMemPoolExportPointer (CUDA_ERROR_INVALID_VALUE) for the allocations of a
// shareable pool until the pool itself has been exported once (seen on driver 580.159.04, CUDA 13.0:
// every size, synchronised or not, context current or not; the same allocations export after one
// cuMemPoolExportToShareableHandle). Exporting the pool once, and closing the descriptor at once,
// arms it. Returns the driver's status of that export.
CUresult arm_pointer_export(CUmemoryPool pool, CUmemAllocationHandleType type) noexcept {
  if (type == fabric_type) {
    unsigned char data[64] = {};  // CUmemFabricHandle: 64 bytes, nothing to release
    return drv::cuMemPoolExportToShareableHandle(static_cast<void*>(data), pool, fabric_type, 0ull);
  }
  int fd = -1;
  const CUresult status = drv::cuMemPoolExportToShareableHandle(static_cast<void*>(&fd), pool, posix_fd, 0ull);
  if (status == CUDA_SUCCESS && fd >= 0) {
    ::close(fd);
  }
  return status;
}

// What another process claims of a shared allocation is checked against what the driver mapped: the
// import's extent (cuMemGetAddressRange, exact for pool imports and legacy IPC mappings on driver
// 580.159.04: the exporter's allocation size, starting at the imported address). A claim larger than the
// mapping would let cudrv's own copy checks, and every span over the buffer, reach past it into memory
// the exporter never shared.
struct mapped_extent {
  CUresult status = CUDA_ERROR_NOT_FOUND;  // of cuMemGetAddressRange (NOT_FOUND: the entry point is missing)
  std::size_t available = 0;               // bytes from the address to the end of its mapping
};

// Asks the driver for the extent at address; allocates nothing, so that the caller can unmap before
// anything else can fail.
mapped_extent extent_of(CUdeviceptr address) noexcept {
  mapped_extent out;
  CUdeviceptr base = 0;
  std::size_t extent = 0;
  try {
    out.status = drv::cuMemGetAddressRange(&base, &extent, address);
  } catch (...) {  // the entry point did not resolve
    return out;
  }
  if (out.status == CUDA_SUCCESS && address >= base && address - base <= extent) {
    out.available = extent - static_cast<std::size_t>(address - base);
  }
  return out;
}

// The refusal of a claim that does not fit what was mapped (which the caller has unmapped already).
[[noreturn]] void refuse_claim(const char* api, const char* what, CUdeviceptr address, std::size_t claimed,
                               const mapped_extent& mapped) {
  if (mapped.status != CUDA_SUCCESS) {
    throw invalid_argument_error(api, std::string("the driver gave no extent for the ") + what + " at " +
                                          detail::format_address(address) + " (cuMemGetAddressRange: " +
                                          error_name(mapped.status) + "), so the exporting process's claim of " +
                                          std::to_string(claimed) + " bytes cannot be checked; it was unmapped");
  }
  throw invalid_argument_error(api, std::string("the exporting process claims ") + std::to_string(claimed) +
                                        " bytes, but the driver mapped " + std::to_string(mapped.available) +
                                        " bytes for the " + what + " at " + detail::format_address(address) +
                                        " (cuMemGetAddressRange); the claim is refused and the memory unmapped");
}

}  // namespace

bool supports_shareable_pools(const device& dev, shareable_handle_type type) {
  if (dev.attribute(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED) == 0) {
    return false;
  }
  const auto mask = static_cast<unsigned int>(dev.attribute(CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES));
  if ((mask & static_cast<unsigned int>(type)) == 0) {
    return false;
  }
  return type != shareable_handle_type::fabric || (fabric_supported(dev) && detail::imex_channel_available());
}

memory_pool make_shareable_memory_pool(const device& dev, shareable_handle_type type,
                                       memory_pool_properties properties) {
  const char* api = "cudrv::make_shareable_memory_pool";
  if (type != shareable_handle_type::posix_file_descriptor && type != shareable_handle_type::fabric) {
    throw invalid_argument_error(api, "unknown shareable_handle_type " + std::to_string(static_cast<unsigned>(type)));
  }
  if (type == shareable_handle_type::fabric && dev.attribute(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED) != 0 &&
      (static_cast<unsigned int>(dev.attribute(CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES)) & 0x8u) != 0 &&
      fabric_supported(dev) && !detail::imex_channel_available()) {
    // Refused before the driver: without an IMEX channel, driver 580.159.04 creates the pool, refuses to
    // export it and crashes the process when the pool is destroyed.
    throw not_supported_error(CUDA_ERROR_NOT_PERMITTED, api, no_imex_channel(dev));
  }
  if (!supports_shareable_pools(dev, type)) {
    const auto mask = static_cast<unsigned int>(dev.attribute(CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES));
    throw not_supported_error(CUDA_ERROR_NOT_SUPPORTED, api,
                              device_text(dev) + " cannot share memory pools through " + type_name(type) +
                                  " (CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES is " + std::to_string(mask) +
                                  (type == shareable_handle_type::fabric
                                       ? ", and fabric handles need CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED)"
                                       : ")"));
  }
  properties.handle_type = static_cast<CUmemAllocationHandleType>(type);
  memory_pool pool = [&] {
    try {
      return memory_pool(dev, properties);
    } catch (const not_supported_error&) {
      throw;
    } catch (const error& e) {
      // A driver may refuse a fabric pool for want of an IMEX channel even where one seemed to open.
      if (type != shareable_handle_type::fabric || e.result() != CUDA_ERROR_NOT_PERMITTED) {
        throw;
      }
      throw not_supported_error(e.result(), "cuMemPoolCreate",
                                device_text(dev) + " supports fabric handles and an IMEX channel opens, but the "
                                                   "driver refused the fabric pool (CUDA_ERROR_NOT_PERMITTED)");
    }
  }();
  // Armed for export_pointer at once (see arm_pointer_export): a user who exports an allocation before
  // the pool would otherwise get the driver's CUDA_ERROR_INVALID_VALUE.
  const CUresult armed = arm_pointer_export(pool.native_handle(), properties.handle_type);
  if (armed == CUDA_ERROR_NOT_PERMITTED && type == shareable_handle_type::fabric) {
    // The driver made the pool but will not export it. Destroying such a pool crashed the process on
    // driver 580.159.04 (without IMEX), so it is left to the process's end rather than destroyed.
    (void)pool.release();
    throw not_supported_error(armed, "cuMemPoolExportToShareableHandle",
                              device_text(dev) + " supports fabric handles and an IMEX channel opens, but the "
                                                 "driver refused to export the fabric pool (CUDA_ERROR_NOT_PERMITTED); "
                                                 "the pool is left allocated, not destroyed (a driver fault)");
  }
  check(armed, "cuMemPoolExportToShareableHandle", [&] {
    return "a first export of the new pool, which the driver needs before its allocations can be exported (" +
           type_name(type) + ", " + device_text(dev) + ")";
  });
  return pool;
}

file_descriptor export_pool_descriptor(memory_pool_ref pool) {
  require_pool(pool, "cudrv::export_pool_descriptor");
  int fd = -1;
  check(drv::cuMemPoolExportToShareableHandle(static_cast<void*>(&fd), pool.native_handle(), posix_fd, 0ull),
        "cuMemPoolExportToShareableHandle", [] {
          return std::string(
              "POSIX file descriptor; the pool must be created with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR "
              "(cudrv::make_shareable_memory_pool)");
        });
  return file_descriptor::from_native_handle(fd);
}

fabric_handle export_pool_fabric_handle(memory_pool_ref pool) {
  const char* api = "cudrv::export_pool_fabric_handle";
  require_pool(pool, api);
  fabric_handle out{};
  const CUresult status =
      drv::cuMemPoolExportToShareableHandle(static_cast<void*>(out.data), pool.native_handle(), fabric_type, 0ull);
  if (status != CUDA_SUCCESS) {
    bool any = false;
    for (const device& d : devices()) {
      any = any || fabric_supported(d);
    }
    if (!any) {
      throw not_supported_error(
          status, "cuMemPoolExportToShareableHandle",
          "no visible device supports fabric handles (CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED)");
    }
    if (status == CUDA_ERROR_NOT_PERMITTED) {
      throw not_supported_error(status, "cuMemPoolExportToShareableHandle",
                                "the driver refused to export a fabric handle (CUDA_ERROR_NOT_PERMITTED): fabric "
                                "sharing needs an IMEX channel this process can open "
                                "(/dev/nvidia-caps-imex-channels/channel*)");
    }
    check(status, "cuMemPoolExportToShareableHandle", [] {
      return std::string("fabric handle; the pool must be created with shareable_handle_type::fabric "
                         "(cudrv::make_shareable_memory_pool)");
    });
  }
  return out;
}

// --- imported pools --------------------------------------------------------------------------------

namespace {
detail::imported_pool_share import_pool(const device& dev, void* handle, CUmemAllocationHandleType type,
                                        const char* what) {
  detail::imported_pool_share state(new detail::imported_pool_state);
  state->context = dev.primary_context().native_handle();
  state->device = dev.ordinal();
  context_guard guard{context_ref(state->context)};
  check(drv::cuMemPoolImportFromShareableHandle(&state->pool, handle, type, 0ull), "cuMemPoolImportFromShareableHandle",
        [&] { return std::string(what) + ", for " + device_text(dev); });
  return state;
}
}  // namespace

imported_memory_pool::imported_memory_pool(const cudrv::device& dev, const file_descriptor& fd)
    : memory_pool_base(nullptr) {
  if (!fd) {
    throw invalid_argument_error("cudrv::imported_memory_pool", "the file descriptor is empty");
  }
  // The driver's handle argument for a POSIX descriptor is the descriptor's value itself.
  void* handle = reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd.native_handle()));
  state_ = import_pool(dev, handle, posix_fd, ("file descriptor " + std::to_string(fd.native_handle())).c_str());
  handle_ = state_->pool;
}

imported_memory_pool::imported_memory_pool(const cudrv::device& dev, const fabric_handle& handle)
    : memory_pool_base(nullptr) {
  require_fabric(dev, "cudrv::imported_memory_pool");
  fabric_handle copy = handle;
  state_ = import_pool(dev, static_cast<void*>(copy.data), fabric_type, "fabric handle");
  handle_ = state_->pool;
}

imported_memory_pool imported_memory_pool::from_native_handle(CUmemoryPool handle, const cudrv::device& dev) {
  imported_memory_pool out;
  if (handle == nullptr) {
    return out;
  }
  detail::imported_pool_share state;
  try {
    state = detail::imported_pool_share(new detail::imported_pool_state);
  } catch (...) {
    // Adopting means the pool is ours to destroy even when adopting fails.
    detail::destroy_noexcept("cuMemPoolDestroy", [handle] { return detail::drv::cuMemPoolDestroy(handle); });
    throw;
  }
  state->pool = handle;  // adopted from here on: destroyed with the state, even if what follows throws
  state->device = dev.ordinal();
  state->context = dev.primary_context().native_handle();
  out.state_ = std::move(state);
  out.handle_ = handle;
  return out;
}

const detail::imported_pool_share& imported_memory_pool::state_for(const char* api) const {
  if (handle_ == nullptr || !state_) {
    throw invalid_argument_error(api, "the imported memory pool is empty (moved-from, reset or released)");
  }
  return state_;
}

cudrv::device imported_memory_pool::device() const {
  return cudrv::device::from_native_handle(state_for("cudrv::imported_memory_pool::device")->device);
}

CUmemoryPool imported_memory_pool::release() noexcept {
  if (state_) {
    state_->released = true;
  }
  state_.reset();
  return std::exchange(handle_, nullptr);
}

// --- imported allocations --------------------------------------------------------------------------

namespace detail {

imported_allocation imported_allocation::import(const imported_pool_share& pool, const void* export_data,
                                                std::size_t bytes, std::size_t element_size) {
  const char* api = "cudrv::imported_memory_pool::import_pointer";
  require_elements(api, bytes, element_size);
  if (bytes == 0) {
    throw invalid_argument_error(api, "the exported allocation is empty (0 bytes)");
  }
  CUmemPoolPtrExportData data;
  std::memcpy(&data, export_data, sizeof(data));
  imported_allocation out;
  context_guard guard{context_ref(pool->context)};
  check(drv::cuMemPoolImportPointer(&out.address, pool->pool, &data), "cuMemPoolImportPointer", [&] {
    return format_bytes(bytes) + " on device " + std::to_string(pool->device) +
           " (the export data must come from an allocation of the pool this process imported)";
  });
  if (const mapped_extent mapped = extent_of(out.address); mapped.status != CUDA_SUCCESS || bytes > mapped.available) {
    const CUdeviceptr p = out.address;
    destroy_noexcept("cuMemFree", [p] { return drv::cuMemFree(p); });
    refuse_claim(api, "imported allocation", p, bytes, mapped);
  }
  out.bytes = bytes;
  out.pool = pool;
  return out;
}

void imported_allocation::free() noexcept {
  if (address != 0) {
    const CUdeviceptr p = std::exchange(address, 0);
    quiet_context_scope scope(pool->context);
    destroy_noexcept("cuMemFree", [p] { return drv::cuMemFree(p); });
  }
  bytes = 0;
  pool.reset();  // after the free: the pool is destroyed, if this was the last user, once nothing refers to it
}

void imported_allocation::free_on(CUstream s, const char* api) {
  if (s == nullptr) {
    throw invalid_argument_error(api, "the stream is empty (a moved-from cudrv::stream)");
  }
  if (address == 0) {
    pool.reset();
    bytes = 0;
    return;
  }
  stream_context_scope scope(s);
  check(drv::cuMemFreeAsync(address, s), "cuMemFreeAsync", [&] { return format_address(address); });
  address = 0;
  bytes = 0;
  pool.reset();
}

// --- legacy IPC ------------------------------------------------------------------------------------

void ipc_get_mem_handle(void* handle_out, CUdeviceptr address, std::size_t bytes, CUcontext ctx, bool stream_ordered) {
  const char* api = "cudrv::ipc_handle";
  if (address == 0 || bytes == 0) {
    throw invalid_argument_error(api, "the buffer is empty (moved-from, released or of zero elements)");
  }
  if (stream_ordered) {
    throw invalid_argument_error(api, "legacy IPC shares memory from cuMemAlloc (device_buffer(dev, n)); a "
                                      "stream-ordered buffer comes from a pool: allocate it from a shareable pool "
                                      "(make_shareable_memory_pool) and use export_pointer");
  }
  context_guard guard{context_ref(ctx)};
  CUipcMemHandle handle{};
  check(drv::cuIpcGetMemHandle(&handle, address), "cuIpcGetMemHandle",
        [&] { return format_bytes(bytes) + " at " + format_address(address); });
  std::memcpy(handle_out, &handle, sizeof(handle));
}

ipc_mapping ipc_mapping::open(const device& dev, const void* handle, std::size_t bytes, std::size_t element_size) {
  const char* api = "cudrv::ipc_mapped_buffer";
  require_elements(api, bytes, element_size);
  if (bytes == 0) {
    throw invalid_argument_error(api, "the IPC handle names an empty allocation (0 bytes)");
  }
  CUipcMemHandle h;
  std::memcpy(&h, handle, sizeof(h));
  ipc_mapping out;
  out.context = dev.primary_context().native_handle();
  context_guard guard{context_ref(out.context)};
  check(drv::cuIpcOpenMemHandle(&out.address, h, static_cast<unsigned int>(CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)),
        "cuIpcOpenMemHandle", [&] {
          return format_bytes(bytes) + " on " + device_text(dev) +
                 " (the driver refuses a handle opened twice in one process, or in the process that exported it)";
        });
  if (const mapped_extent mapped = extent_of(out.address); mapped.status != CUDA_SUCCESS || bytes > mapped.available) {
    const CUdeviceptr p = out.address;
    destroy_noexcept("cuIpcCloseMemHandle", [p] { return drv::cuIpcCloseMemHandle(p); });
    refuse_claim(api, "IPC mapping", p, bytes, mapped);
  }
  out.bytes = bytes;
  return out;
}

void ipc_mapping::close() noexcept {
  if (address != 0) {
    const CUdeviceptr p = std::exchange(address, 0);
    quiet_context_scope scope(context);
    destroy_noexcept("cuIpcCloseMemHandle", [p] { return drv::cuIpcCloseMemHandle(p); });
  }
  bytes = 0;
}

void pool_export_pointer(void* data_out, CUdeviceptr address, std::size_t bytes, bool stream_ordered) {
  const char* api = "cudrv::export_pointer";
  if (address == 0 || bytes == 0) {
    throw invalid_argument_error(api, "the buffer is empty (moved-from, released or of zero elements)");
  }
  if (!stream_ordered) {
    throw invalid_argument_error(api, "export_pointer shares an allocation of a shareable memory pool (a "
                                      "stream-ordered device_buffer(pool, stream, n)); memory from cuMemAlloc is "
                                      "shared with ipc_handle");
  }
  CUmemPoolPtrExportData data{};
  CUresult status = drv::cuMemPoolExportPointer(&data, address);
  if (status == CUDA_ERROR_INVALID_VALUE) {
    // A shareable pool made elsewhere (memory_pool with a handle type, an adopted handle) that was
    // never exported: arm it (see arm_pointer_export) and ask again. A pool that is not shareable
    // refuses both exports, and the first error stands.
    CUmemoryPool pool = nullptr;
    CUpointer_attribute attribute = CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE;
    void* value = &pool;
    if (drv::cuPointerGetAttributes(1, &attribute, &value, address) == CUDA_SUCCESS && pool != nullptr &&
        (arm_pointer_export(pool, posix_fd) == CUDA_SUCCESS || arm_pointer_export(pool, fabric_type) == CUDA_SUCCESS)) {
      status = drv::cuMemPoolExportPointer(&data, address);
    }
  }
  check(status, "cuMemPoolExportPointer", [&] {
    return format_bytes(bytes) + " at " + format_address(address) +
           " (the buffer must come from a pool created shareable: make_shareable_memory_pool)";
  });
  std::memcpy(data_out, &data, sizeof(data));
}

}  // namespace detail

}  // namespace cudrv
