#include "cudrv/memory_pool.hpp"

#include <string>

#include "cudrv/error.hpp"
#include "driver/driver_api.hpp"

namespace cudrv {

using detail::check;
namespace drv = detail::drv;

namespace {
bool is_int_attribute(CUmemPool_attribute attr) {
  return attr == CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES || attr == CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC ||
         attr == CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES;
}

CUmemLocation device_location(const device& dev) {
  CUmemLocation loc{};
  loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
  loc.id = dev.ordinal();
  return loc;
}
}  // namespace

void memory_pool_base::require_handle(const char* api) const {
  if (handle_ == nullptr) [[unlikely]] {
    throw invalid_argument_error(api, "the memory pool is empty (a moved-from or released cudrv::memory_pool)");
  }
}

std::uint64_t memory_pool_base::attribute(CUmemPool_attribute attr) const {
  require_handle("cudrv::memory_pool::attribute");
  if (is_int_attribute(attr)) {
    int value = 0;
    check(drv::cuMemPoolGetAttribute(handle_, attr, &value), "cuMemPoolGetAttribute");
    return static_cast<std::uint64_t>(value);
  }
  cuuint64_t value = 0;
  check(drv::cuMemPoolGetAttribute(handle_, attr, &value), "cuMemPoolGetAttribute");
  return value;
}

void memory_pool_base::set_attribute(CUmemPool_attribute attr, std::uint64_t value) const {
  require_handle("cudrv::memory_pool::set_attribute");
  if (is_int_attribute(attr)) {
    int v = static_cast<int>(value);
    check(drv::cuMemPoolSetAttribute(handle_, attr, &v), "cuMemPoolSetAttribute");
    return;
  }
  cuuint64_t v = value;
  check(drv::cuMemPoolSetAttribute(handle_, attr, &v), "cuMemPoolSetAttribute");
}

void memory_pool_base::trim_to(std::size_t min_bytes_to_keep) const {
  require_handle("cudrv::memory_pool::trim_to");
  check(drv::cuMemPoolTrimTo(handle_, min_bytes_to_keep), "cuMemPoolTrimTo");
}

std::size_t memory_pool_base::release_threshold() const {
  return static_cast<std::size_t>(attribute(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD));
}
void memory_pool_base::set_release_threshold(std::size_t bytes) const {
  set_attribute(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, bytes);
}
std::size_t memory_pool_base::reserved_current() const {
  return static_cast<std::size_t>(attribute(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT));
}
std::size_t memory_pool_base::reserved_high() const {
  return static_cast<std::size_t>(attribute(CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH));
}
std::size_t memory_pool_base::used_current() const {
  return static_cast<std::size_t>(attribute(CU_MEMPOOL_ATTR_USED_MEM_CURRENT));
}
std::size_t memory_pool_base::used_high() const {
  return static_cast<std::size_t>(attribute(CU_MEMPOOL_ATTR_USED_MEM_HIGH));
}
void memory_pool_base::reset_high_watermarks() const {
  set_attribute(CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, 0);
  set_attribute(CU_MEMPOOL_ATTR_USED_MEM_HIGH, 0);
}

void memory_pool_base::set_access(const device& dev, CUmemAccess_flags flags) const {
  require_handle("cudrv::memory_pool::set_access");
  CUmemAccessDesc desc{};
  desc.location = device_location(dev);
  desc.flags = flags;
  check(drv::cuMemPoolSetAccess(handle_, &desc, std::size_t{1}), "cuMemPoolSetAccess",
        [&] { return "device " + std::to_string(dev.ordinal()); });
}

CUmemAccess_flags memory_pool_base::access(const device& dev) const {
  require_handle("cudrv::memory_pool::access");
  CUmemAccess_flags flags{};
  CUmemLocation loc = device_location(dev);
  check(drv::cuMemPoolGetAccess(&flags, handle_, &loc), "cuMemPoolGetAccess",
        [&] { return "device " + std::to_string(dev.ordinal()); });
  return flags;
}

memory_pool::memory_pool(const device& dev, memory_pool_properties properties) : memory_pool_base(nullptr) {
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.handleTypes = properties.handle_type;
  props.location = device_location(dev);
#if CUDA_VERSION >= 12020
  props.maxSize = properties.max_size;
#else
  if (properties.max_size != 0) {
    throw not_supported_error(CUDA_ERROR_NOT_SUPPORTED, "cudrv::memory_pool", "max_size needs CUDA 12.2 headers");
  }
#endif
  check(drv::cuMemPoolCreate(&handle_, &props), "cuMemPoolCreate", [&] {
    return "device " + std::to_string(dev.ordinal()) + ", handle type " + std::to_string(static_cast<int>(properties.handle_type)) +
           ", max size " + std::to_string(properties.max_size);
  });
  if (properties.release_threshold != 0) {
    try {
      set_release_threshold(properties.release_threshold);
    } catch (...) {
      CUmemoryPool h = std::exchange(handle_, nullptr);
      detail::destroy_noexcept("cuMemPoolDestroy", [h] { return drv::cuMemPoolDestroy(h); });
      throw;
    }
  }
}

memory_pool& memory_pool::operator=(memory_pool&& other) noexcept {
  if (this != &other) {
    reset();
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

void memory_pool::reset() noexcept {
  if (handle_ != nullptr) {
    CUmemoryPool h = std::exchange(handle_, nullptr);
    detail::destroy_noexcept("cuMemPoolDestroy", [h] { return drv::cuMemPoolDestroy(h); });
  }
}

memory_pool::~memory_pool() { reset(); }

memory_pool_ref default_memory_pool(const device& dev) {
  CUmemoryPool pool = nullptr;
  check(drv::cuDeviceGetDefaultMemPool(&pool, dev.native_handle()), "cuDeviceGetDefaultMemPool",
        [&] { return "device " + std::to_string(dev.ordinal()); });
  return memory_pool_ref(pool);
}

memory_pool_ref current_memory_pool(const device& dev) {
  CUmemoryPool pool = nullptr;
  check(drv::cuDeviceGetMemPool(&pool, dev.native_handle()), "cuDeviceGetMemPool",
        [&] { return "device " + std::to_string(dev.ordinal()); });
  return memory_pool_ref(pool);
}

void set_current_memory_pool(const device& dev, memory_pool_ref pool) {
  if (pool.native_handle() == nullptr) {
    throw invalid_argument_error("cudrv::set_current_memory_pool", "the memory pool is empty (a moved-from cudrv::memory_pool)");
  }
  check(drv::cuDeviceSetMemPool(dev.native_handle(), pool.native_handle()), "cuDeviceSetMemPool",
        [&] { return "device " + std::to_string(dev.ordinal()); });
}

}  // namespace cudrv
