#include "cudrv/memory_pool.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>

#include <string>
#include <vector>

#include "cudrv/context.hpp"
#include "cudrv/error.hpp"
#include "driver/driver_api.hpp"

namespace cudrv {

namespace detail {
// A channel counts when it opens for reading and writing: a container may show the device file and
// still refuse to open it (its device cgroup), which a permission check alone would not see.
bool imex_channel_available() noexcept {
  DIR* dir = ::opendir("/dev/nvidia-caps-imex-channels");
  if (dir == nullptr) {
    return false;
  }
  bool found = false;
  while (const dirent* entry = ::readdir(dir)) {
    if (std::strncmp(entry->d_name, "channel", 7) != 0) {
      continue;
    }
    const int fd = ::openat(::dirfd(dir), entry->d_name, O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
      ::close(fd);
      found = true;
      break;
    }
  }
  ::closedir(dir);
  return found;
}
}  // namespace detail

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

// "device 1", "the host", "host NUMA node 0", "no preferred location"
std::string describe(memory_location where) {
  switch (where.kind()) {
    case memory_location_kind::device: return "device " + std::to_string(where.device_ordinal());
    case memory_location_kind::host: return "the host";
    case memory_location_kind::host_numa: return "host NUMA node " + std::to_string(where.numa_node());
    case memory_location_kind::none: break;
  }
  return "no preferred location";
}

// CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED (CUDA 12.6+ headers), by value.
constexpr auto host_memory_pools_supported = static_cast<CUdevice_attribute>(144);

// Grants every device that supports host pools of this kind read-write access to a new host pool (the
// driver makes a host pool accessible from the host only). A driver that does not know the attribute
// (CUDA_ERROR_INVALID_VALUE, or CUDA_ERROR_NOT_SUPPORTED: older than the host pools) has no such device;
// any other failure throws, rather than leave a device silently without access.
void grant_devices_access(CUmemoryPool pool, memory_location where) {
  int count = 0;
  check(drv::cuDeviceGetCount(&count), "cuDeviceGetCount");
  const CUdevice_attribute supported = where.kind() == memory_location_kind::host_numa
                                           ? CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED
                                           : host_memory_pools_supported;
  std::vector<CUmemAccessDesc> access;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    int yes = 0;
    const CUresult asked = drv::cuDeviceGetAttribute(&yes, supported, static_cast<CUdevice>(ordinal));
    if (asked != CUDA_ERROR_INVALID_VALUE && asked != CUDA_ERROR_NOT_SUPPORTED) {
      check(asked, "cuDeviceGetAttribute", [&] {
        return "device " + std::to_string(ordinal) + ", attribute " + std::to_string(static_cast<int>(supported)) +
               " (whether it can access a pool on " + describe(where) + ")";
      });
    }
    if (asked == CUDA_SUCCESS && yes != 0) {
      CUmemAccessDesc desc{};
      desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      desc.location.id = ordinal;
      desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      access.push_back(desc);
    }
  }
  if (!access.empty()) {
    check(drv::cuMemPoolSetAccess(pool, access.data(), access.size()), "cuMemPoolSetAccess", [&] {
      return "granting " + std::to_string(access.size()) + " devices access to a pool on " + describe(where);
    });
  }
}
}  // namespace

void memory_pool_base::require_description(const char* api) const {
  if (type_ == CU_MEM_ALLOCATION_TYPE_INVALID) [[unlikely]] {
    throw invalid_argument_error(api, handle_ == nullptr
                                          ? "the memory pool is empty (a moved-from or released cudrv::memory_pool)"
                                          : "the pool's location and allocation type are unknown (a view of a bare "
                                            "handle); describe it with memory_pool_ref(handle, location, type)");
  }
}

memory_location memory_pool_base::location() const {
  require_description("cudrv::memory_pool::location");
  return memory_location::from_native(location_);
}

memory_allocation_type memory_pool_base::allocation_type() const {
  require_description("cudrv::memory_pool::allocation_type");
  return static_cast<memory_allocation_type>(type_);
}

memory_properties memory_pool_base::properties() const {
  require_description("cudrv::memory_pool::properties");
  return properties_of(memory_location::from_native(location_), static_cast<memory_allocation_type>(type_));
}

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

// issue 34 part 8: a pool trimmed when its device reports memory pressure.
async_notification_subscription memory_pool_base::trim_on_pressure(const device& dev, std::size_t keep_bytes) const& {
  require_handle("cudrv::memory_pool::trim_on_pressure");
  return {dev, [pool = handle_, keep_bytes](const async_notification& n) {
            if (n.type == async_notification_type::over_budget) {
              detail::destroy_noexcept("cuMemPoolTrimTo", [&] { return drv::cuMemPoolTrimTo(pool, keep_bytes); });
            }
          }};
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

memory_pool::memory_pool(const device& dev, memory_pool_properties properties)
    : memory_pool(memory_location(dev), memory_allocation_type::pinned, properties) {}

memory_pool::memory_pool(memory_location where, memory_pool_properties properties)
    : memory_pool(where, memory_allocation_type::pinned, properties) {}

memory_pool memory_pool::managed(memory_location preferred, memory_pool_properties properties) {
  return memory_pool(preferred, memory_allocation_type::managed, properties);
}

memory_pool::memory_pool(memory_location where, memory_allocation_type type, const memory_pool_properties& properties)
    : memory_pool_base(nullptr) {
  const char* api = "cudrv::memory_pool";
  const bool managed = type == memory_allocation_type::managed;
  if (!managed && where.kind() == memory_location_kind::none) {
    throw invalid_argument_error(api, "a pool of pinned memory lives on a device, the host or a host NUMA node; "
                                      "memory_location::none() is for managed pools (memory_pool::managed)");
  }
  if (!managed && where.kind() == memory_location_kind::host && properties.handle_type != CU_MEM_HANDLE_TYPE_NONE) {
    throw invalid_argument_error(api, "a pool on memory_location::host() cannot be shared with other processes "
                                      "(the driver's rule); give it no handle type, or use a pool on "
                                      "memory_location::host_numa(node)");
  }
  if ((static_cast<unsigned>(properties.handle_type) & 0x8u) != 0 && !detail::imex_channel_available()) {
    // CU_MEM_HANDLE_TYPE_FABRIC without an IMEX channel: the driver (580.159.04) creates the pool, refuses
    // to export it (CUDA_ERROR_NOT_PERMITTED), and crashes the process in cuMemPoolDestroy. Refused here,
    // before the driver sees it.
    throw not_supported_error(CUDA_ERROR_NOT_PERMITTED, api,
                              "a pool shareable through fabric handles needs an IMEX channel this process can "
                              "open (/dev/nvidia-caps-imex-channels/channel*), and there is none; without one "
                              "the driver could not export the pool");
  }
  CUmemPoolProps props{};
  props.allocType = static_cast<CUmemAllocationType>(type);
  props.handleTypes = properties.handle_type;
  props.location = where.native();
#if CUDA_VERSION >= 12020
  props.maxSize = properties.max_size;
#else
  if (properties.max_size != 0) {
    throw not_supported_error(CUDA_ERROR_NOT_SUPPORTED, "cudrv::memory_pool", "max_size needs CUDA 12.2 headers");
  }
#endif
  check(drv::cuMemPoolCreate(&handle_, &props), "cuMemPoolCreate", [&] {
    std::string text = std::string(managed ? "managed" : "pinned") + " memory on " + describe(where) +
                       ", handle type " + std::to_string(static_cast<int>(properties.handle_type)) + ", max size " +
                       std::to_string(properties.max_size);
    if (where.is_host()) {
      text += " (host pools need a CUDA 12.6 driver and device support)";
    } else if (managed) {
      text += " (managed pools need a CUDA 13 driver and device support)";
    }
    return text;
  });
  try {
    if (!managed && where.is_host()) {
      grant_devices_access(handle_, where);
    }
    if (properties.release_threshold != 0) {
      set_release_threshold(properties.release_threshold);
    }
  } catch (...) {
    CUmemoryPool h = std::exchange(handle_, nullptr);
    detail::destroy_noexcept("cuMemPoolDestroy", [h] { return drv::cuMemPoolDestroy(h); });
    throw;
  }
  location_ = props.location;
  type_ = props.allocType;
}

memory_pool& memory_pool::operator=(memory_pool&& other) noexcept {
  if (this != &other) {
    reset();
    handle_ = std::exchange(other.handle_, nullptr);
    location_ = other.location_;
    type_ = std::exchange(other.type_, CU_MEM_ALLOCATION_TYPE_INVALID);
  }
  return *this;
}

void memory_pool::reset() noexcept {
  if (handle_ != nullptr) {
    CUmemoryPool h = std::exchange(handle_, nullptr);
    type_ = CU_MEM_ALLOCATION_TYPE_INVALID;
    detail::destroy_noexcept("cuMemPoolDestroy", [h] { return drv::cuMemPoolDestroy(h); });
  }
}

memory_pool::~memory_pool() { reset(); }

memory_pool_ref default_memory_pool(const device& dev) {
  CUmemoryPool pool = nullptr;
  check(drv::cuDeviceGetDefaultMemPool(&pool, dev.native_handle()), "cuDeviceGetDefaultMemPool",
        [&] { return "device " + std::to_string(dev.ordinal()); });
  return memory_pool_ref(pool, dev, memory_allocation_type::pinned);
}

memory_pool_ref current_memory_pool(const device& dev) {
  CUmemoryPool pool = nullptr;
  check(drv::cuDeviceGetMemPool(&pool, dev.native_handle()), "cuDeviceGetMemPool",
        [&] { return "device " + std::to_string(dev.ordinal()); });
  // cuDeviceSetMemPool accepts only device pools of that device: the current pool is one.
  return memory_pool_ref(pool, dev, memory_allocation_type::pinned);
}

void set_current_memory_pool(const device& dev, memory_pool_ref pool) {
  if (pool.native_handle() == nullptr) {
    throw invalid_argument_error("cudrv::set_current_memory_pool",
                                 "the memory pool is empty (a moved-from cudrv::memory_pool)");
  }
  check(drv::cuDeviceSetMemPool(dev.native_handle(), pool.native_handle()), "cuDeviceSetMemPool",
        [&] { return "device " + std::to_string(dev.ordinal()); });
}

namespace {
// Runs a graph-memory call on dev: without a context, or, if the driver wants one, in dev's primary
// context (the device names it).
template <class Fn>
void graph_memory_call(const device& dev, const char* api, Fn&& fn) {
  CUresult status = fn();
  if (status == CUDA_ERROR_INVALID_CONTEXT) {
    context_guard guard(dev.primary_context());
    status = fn();
  }
  check(status, api, [&] { return "device " + std::to_string(dev.ordinal()); });
}
}  // namespace

std::size_t graph_memory_attribute(const device& dev, CUgraphMem_attribute attr) {
  cuuint64_t value = 0;
  graph_memory_call(dev, "cuDeviceGetGraphMemAttribute",
                    [&] { return drv::cuDeviceGetGraphMemAttribute(dev.native_handle(), attr, &value); });
  return static_cast<std::size_t>(value);
}

graph_memory_usage graph_memory(const device& dev) {
  graph_memory_usage out;
  out.used_current = graph_memory_attribute(dev, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT);
  out.used_high = graph_memory_attribute(dev, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH);
  out.reserved_current = graph_memory_attribute(dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT);
  out.reserved_high = graph_memory_attribute(dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH);
  return out;
}

void reset_graph_memory_high_watermarks(const device& dev) {
  for (CUgraphMem_attribute attr : {CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH}) {
    cuuint64_t zero = 0;
    graph_memory_call(dev, "cuDeviceSetGraphMemAttribute",
                      [&] { return drv::cuDeviceSetGraphMemAttribute(dev.native_handle(), attr, &zero); });
  }
}

void trim_graph_memory(const device& dev) {
  graph_memory_call(dev, "cuDeviceGraphMemTrim", [&] { return drv::cuDeviceGraphMemTrim(dev.native_handle()); });
}

}  // namespace cudrv
