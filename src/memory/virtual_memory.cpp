// Virtual memory management: address ranges, physical allocations, mappings, access, granularity,
// shareable handles, and the virtual memory resource.
#include "cudrv/virtual_memory.hpp"

#include <unistd.h>

#include <atomic>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "cudrv/error.hpp"
#include "driver/driver_api.hpp"
#include "memory/memory_support.hpp"

namespace cudrv {

using detail::check;
using detail::format_address;
using detail::format_bytes;
namespace drv = detail::drv;

namespace detail {

struct address_reservation {
  std::atomic<std::size_t> refs{1};      // the owner (while it holds the range) and every mapping
  std::atomic<std::size_t> mappings{0};  // live memory_mapping objects
  std::atomic<bool> owned{true};         // freed at the last reference (false after address_range::release)
  CUdeviceptr address = 0;
  std::size_t size = 0;
};

struct virtual_memory_allocations {
  struct entry {
    address_range range;
    physical_allocation memory;
    memory_mapping mapping;  // destroyed first: unmap, then release, then free
  };
  std::vector<access_descriptor> access;  // the owner's and its peers' access, set on each allocation
  std::mutex mutex;
  std::map<CUdeviceptr, entry> live;
};

namespace {

void drop_reference(address_reservation* state) noexcept {
  if (state->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) {
    return;
  }
  if (state->owned.load(std::memory_order_acquire)) {
    const CUdeviceptr address = state->address;
    const std::size_t size = state->size;
    destroy_noexcept("cuMemAddressFree", [&] { return drv::cuMemAddressFree(address, size); });
  }
  delete state;
}

}  // namespace
}  // namespace detail

namespace {

CUmemAllocationProp to_native(const physical_allocation_properties& p) noexcept {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = p.location.native();
  prop.requestedHandleTypes = static_cast<CUmemAllocationHandleType>(p.handle_types);
  prop.allocFlags.compressionType = p.compression ? CU_MEM_ALLOCATION_COMP_GENERIC : CU_MEM_ALLOCATION_COMP_NONE;
  prop.allocFlags.gpuDirectRDMACapable = p.gpu_direct_rdma ? 1 : 0;
  return prop;
}

std::string describe(const physical_location& loc) {
  switch (loc.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE: return "device " + std::to_string(loc.id);
    case CU_MEM_LOCATION_TYPE_HOST: return "host";
    case CU_MEM_LOCATION_TYPE_HOST_NUMA: return "host NUMA node " + std::to_string(loc.id);
    default: return "location type " + std::to_string(static_cast<int>(loc.type)) + " id " + std::to_string(loc.id);
  }
}

std::size_t host_page_size() noexcept {
  const long page = ::sysconf(_SC_PAGESIZE);
  return page > 0 ? static_cast<std::size_t>(page) : 4096;
}

// Throws invalid_argument_error unless value is a multiple of unit, naming what and the unit.
void require_multiple(const char* api, const char* what, std::size_t value, std::size_t unit, const char* unit_name) {
  if (unit != 0 && value % unit != 0) [[unlikely]] {
    throw invalid_argument_error(api, std::string(what) + " " + format_bytes(value) + " is not a multiple of the " +
                                          unit_name + " " + format_bytes(unit));
  }
}

// Refuses a request the device says it cannot honour, before the driver is asked.
void require_device_support(const physical_allocation_properties& p) {
  if (p.location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    return;
  }
  const device dev = device::from_native_handle(p.location.id);
  auto refuse = [&](const char* what, const char* attribute) {
    throw not_supported_error(CUDA_ERROR_NOT_SUPPORTED, "cudrv::physical_allocation",
                              "device " + std::to_string(dev.ordinal()) + " does not support " + what +
                                  " with virtual memory management (" + attribute + " is 0)");
  };
  if (p.compression && !dev.attribute(device_attributes::generic_compression_supported)) {
    refuse("compressible memory", "generic_compression_supported");
  }
  if (p.gpu_direct_rdma && !dev.attribute(device_attributes::gpu_direct_rdma_with_cuda_vmm_supported)) {
    refuse("GPUDirect RDMA", "gpu_direct_rdma_with_cuda_vmm_supported");
  }
  if ((p.handle_types & shareable_handle_types::posix_fd) != shareable_handle_types::none &&
      !dev.attribute(device_attributes::handle_type_posix_file_descriptor_supported)) {
    refuse("POSIX file descriptor handles", "handle_type_posix_file_descriptor_supported");
  }
  if ((p.handle_types & shareable_handle_types::fabric) != shareable_handle_types::none &&
      !dev.attribute(device_attributes::handle_type_fabric_supported)) {
    refuse("fabric handles", "handle_type_fabric_supported");
  }
}

// The minimum granularity of plain device memory, per device, asked once: a growable buffer creates
// one physical allocation per chunk, and each checks its size first. Other properties are asked each time.
std::size_t minimum_granularity_of(const physical_allocation_properties& p) {
  constexpr int cached_devices = 64;
  static std::atomic<std::size_t> plain_device[cached_devices] = {};
  const bool plain = p.location.type == CU_MEM_LOCATION_TYPE_DEVICE && p.location.id >= 0 &&
                     p.location.id < cached_devices && p.handle_types == shareable_handle_types::none &&
                     !p.compression && !p.gpu_direct_rdma;
  if (!plain) {
    return allocation_granularity(p, granularity::minimum);
  }
  std::atomic<std::size_t>& slot = plain_device[p.location.id];
  std::size_t g = slot.load(std::memory_order_relaxed);
  if (g == 0) {
    g = allocation_granularity(p, granularity::minimum);
    slot.store(g, std::memory_order_relaxed);
  }
  return g;
}

bool checked_end(std::size_t offset, std::size_t bytes, std::size_t size) noexcept {
  return offset <= size && bytes <= size - offset;
}

}  // namespace

// --- granularity and access ---------------------------------------------------------------------

std::size_t allocation_granularity(const physical_allocation_properties& properties, granularity kind) {
  if (properties.location.type == CU_MEM_LOCATION_TYPE_INVALID) {
    throw invalid_argument_error("cudrv::allocation_granularity",
                                 "the allocation properties name no location (physical_location::on(dev), host() or "
                                 "host_numa(node))");
  }
  const CUmemAllocationProp prop = to_native(properties);
  std::size_t out = 0;
  check(drv::cuMemGetAllocationGranularity(&out, &prop,
                                           kind == granularity::minimum ? CU_MEM_ALLOC_GRANULARITY_MINIMUM
                                                                        : CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
        "cuMemGetAllocationGranularity", [&] { return describe(properties.location); });
  return out;
}

std::size_t allocation_granularity(const device& dev, granularity kind) {
  return allocation_granularity(physical_allocation_properties::on(dev), kind);
}

void set_access(CUdeviceptr address, std::size_t bytes, std::span<const access_descriptor> access) {
  constexpr const char* api = "cudrv::set_access";
  if (address == 0 || bytes == 0) {
    throw invalid_argument_error(api, "the span to grant access to is empty");
  }
  if (access.empty()) {
    throw invalid_argument_error(api, "no location to grant access to");
  }
  CUmemAccessDesc stack[8];
  std::vector<CUmemAccessDesc> heap;
  CUmemAccessDesc* descs = stack;
  if (access.size() > std::size(stack)) {
    heap.resize(access.size());
    descs = heap.data();
  }
  for (std::size_t i = 0; i < access.size(); ++i) {
    descs[i] = CUmemAccessDesc{};
    descs[i].location = access[i].location.native();
    descs[i].flags = static_cast<CUmemAccess_flags>(access[i].rights);
  }
  check(drv::cuMemSetAccess(address, bytes, descs, access.size()), "cuMemSetAccess", [&] {
    std::string out = format_bytes(bytes) + " at " + format_address(address) + " for";
    for (const access_descriptor& a : access) {
      // Appended piece by piece, not " " + a temporary: g++ 12 warns (-Wrestrict, a false positive) about
      // the memcpy of a C string put in front of a temporary string.
      out += ' ';
      out += describe(a.location);
      out += a.rights == access_rights::read_write  ? " (read-write)"
             : a.rights == access_rights::read_only ? " (read-only)"
                                                    : " (none)";
    }
    return out;
  });
}

access_rights get_access(CUdeviceptr address, const physical_location& location) {
  unsigned long long flags = 0;
  const CUmemLocation loc = location.native();
  check(drv::cuMemGetAccess(&flags, &loc, address), "cuMemGetAccess",
        [&] { return format_address(address) + " for " + describe(location); });
  return static_cast<access_rights>(flags);
}

// --- physical allocations -----------------------------------------------------------------------

void physical_allocation_base::require_handle(const char* api) const {
  if (handle_ == 0) [[unlikely]] {
    throw invalid_argument_error(
        api, "the physical allocation is empty (a moved-from or released cudrv::physical_allocation)");
  }
}

physical_allocation_properties physical_allocation_base::properties() const {
  require_handle("cudrv::physical_allocation::properties");
  CUmemAllocationProp prop{};
  check(drv::cuMemGetAllocationPropertiesFromHandle(&prop, handle_), "cuMemGetAllocationPropertiesFromHandle");
  physical_allocation_properties out;
  out.location = {prop.location.type, prop.location.id};
  out.handle_types = static_cast<shareable_handle_types>(prop.requestedHandleTypes);
  out.compression = prop.allocFlags.compressionType == CU_MEM_ALLOCATION_COMP_GENERIC;
  out.gpu_direct_rdma = prop.allocFlags.gpuDirectRDMACapable != 0;
  return out;
}

std::size_t physical_allocation_base::minimum_granularity() const {
  if (granularity_ != 0) {
    return granularity_;
  }
  return allocation_granularity(properties(), granularity::minimum);
}

file_descriptor physical_allocation_base::export_posix_fd() const {
  constexpr const char* api = "cudrv::physical_allocation::export_posix_fd";
  require_handle(api);
  if ((properties().handle_types & shareable_handle_types::posix_fd) == shareable_handle_types::none) {
    throw invalid_argument_error(api, "the allocation was not created with shareable_handle_types::posix_fd");
  }
  int fd = -1;
  check(drv::cuMemExportToShareableHandle(&fd, handle_, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
        "cuMemExportToShareableHandle", [&] { return "POSIX file descriptor, " + format_bytes(size_); });
  return file_descriptor::from_native_handle(fd);
}

CUmemFabricHandle physical_allocation_base::export_fabric_handle() const {
  constexpr const char* api = "cudrv::physical_allocation::export_fabric_handle";
  require_handle(api);
  if ((properties().handle_types & shareable_handle_types::fabric) == shareable_handle_types::none) {
    throw invalid_argument_error(api, "the allocation was not created with shareable_handle_types::fabric");
  }
  CUmemFabricHandle out{};
  check(drv::cuMemExportToShareableHandle(&out, handle_, CU_MEM_HANDLE_TYPE_FABRIC, 0), "cuMemExportToShareableHandle",
        [&] { return "fabric handle, " + format_bytes(size_); });
  return out;
}

physical_allocation::physical_allocation(std::size_t bytes, const physical_allocation_properties& properties)
    : physical_allocation_base(0, 0, 0) {
  constexpr const char* api = "cudrv::physical_allocation";
  if (bytes == 0) {
    throw invalid_argument_error(api, "a physical allocation of 0 bytes");
  }
  if (properties.location.type == CU_MEM_LOCATION_TYPE_INVALID) {
    throw invalid_argument_error(api, "no location named (physical_location::on(dev), host() or host_numa(node)); "
                                      "nothing falls back to device 0");
  }
  require_device_support(properties);
  const std::size_t gran = minimum_granularity_of(properties);
  require_multiple(api, "the size", bytes, gran, "minimum allocation granularity");
  const CUmemAllocationProp prop = to_native(properties);
  CUmemGenericAllocationHandle handle = 0;
  const CUresult status = drv::cuMemCreate(&handle, bytes, &prop, 0);
  if (status == CUDA_ERROR_NOT_PERMITTED &&
      (properties.handle_types & shareable_handle_types::fabric) != shareable_handle_types::none) {
    // The device supports fabric handles (checked above), the process has no IMEX channel.
    throw not_supported_error(status, "cuMemCreate",
                              format_bytes(bytes) + " on " + describe(properties.location) +
                                  ": fabric handles need an IMEX channel this process can open "
                                  "(/dev/nvidia-caps-imex-channels/channel*)");
  }
  detail::check_allocation(status, "cuMemCreate", [&] {
    const physical_location& at = properties.location;
    detail::allocation_site site{.bytes = bytes};
    if (at.type == CU_MEM_LOCATION_TYPE_DEVICE) {
      site.device = at.id;  // free memory is read only in a context of it that is current
    } else {
      site.host = true;
    }
    return std::pair{site, format_bytes(bytes) + " on " + describe(at)};
  });
  handle_ = handle;
  size_ = bytes;
  granularity_ = gran;
}

physical_allocation& physical_allocation::operator=(physical_allocation&& other) noexcept {
  if (this != &other) {
    reset();
    handle_ = std::exchange(other.handle_, 0);
    size_ = std::exchange(other.size_, 0);
    granularity_ = std::exchange(other.granularity_, 0);
  }
  return *this;
}

void physical_allocation::reset() noexcept {
  if (handle_ != 0) {
    const CUmemGenericAllocationHandle h = std::exchange(handle_, 0);
    size_ = 0;
    granularity_ = 0;
    detail::destroy_noexcept("cuMemRelease", [h] { return drv::cuMemRelease(h); });
  }
}

physical_allocation physical_allocation::import_posix_fd(int fd, std::size_t bytes) {
  constexpr const char* api = "cudrv::physical_allocation::import_posix_fd";
  if (fd < 0) {
    throw invalid_argument_error(api, "the file descriptor " + std::to_string(fd) + " is not valid");
  }
  if (bytes == 0) {
    throw invalid_argument_error(api, "the size of the imported allocation is 0");
  }
  CUmemGenericAllocationHandle handle = 0;
  check(drv::cuMemImportFromShareableHandle(&handle, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)),
                                            CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
        "cuMemImportFromShareableHandle", [&] { return "file descriptor " + std::to_string(fd); });
  return physical_allocation(handle, bytes, 0);
}

physical_allocation physical_allocation::import_fabric_handle(const CUmemFabricHandle& fabric, std::size_t bytes) {
  if (bytes == 0) {
    throw invalid_argument_error("cudrv::physical_allocation::import_fabric_handle",
                                 "the size of the imported allocation is 0");
  }
  CUmemFabricHandle copy = fabric;
  CUmemGenericAllocationHandle handle = 0;
  check(drv::cuMemImportFromShareableHandle(&handle, &copy, CU_MEM_HANDLE_TYPE_FABRIC),
        "cuMemImportFromShareableHandle", [] { return std::string("fabric handle"); });
  return physical_allocation(handle, bytes, 0);
}

// --- address ranges -----------------------------------------------------------------------------

std::size_t address_range_base::mapping_count() const noexcept {
  return state_ != nullptr ? state_->mappings.load(std::memory_order_acquire) : 0;
}

void address_range_base::require_range(const char* api) const {
  if (address_ == 0) [[unlikely]] {
    throw invalid_argument_error(api, "the address range is empty (a moved-from or released cudrv::address_range)");
  }
}

void address_range_base::set_access(std::size_t offset, std::size_t bytes,
                                    std::span<const access_descriptor> access) const {
  constexpr const char* api = "cudrv::address_range::set_access";
  require_range(api);
  if (!checked_end(offset, bytes, size_)) {
    throw invalid_argument_error(api, "bytes [" + std::to_string(offset) + ", " + std::to_string(offset + bytes) +
                                          ") are outside the range of " + format_bytes(size_));
  }
  cudrv::set_access(address_ + offset, bytes, access);
}

access_rights address_range_base::access(std::size_t offset, const physical_location& location) const {
  constexpr const char* api = "cudrv::address_range::access";
  require_range(api);
  if (offset >= size_) {
    throw invalid_argument_error(api, "the offset " + std::to_string(offset) + " is outside the range of " +
                                          format_bytes(size_));
  }
  return get_access(address_ + offset, location);
}

address_range::address_range(std::size_t bytes, address_range_options options) : address_range_base(0, 0, nullptr) {
  constexpr const char* api = "cudrv::address_range";
  if (bytes == 0) {
    throw invalid_argument_error(api, "an address range of 0 bytes");
  }
  const std::size_t page = host_page_size();
  require_multiple(api, "the size", bytes, page, "host page size");
  if (options.alignment != 0 && (options.alignment & (options.alignment - 1)) != 0) {
    throw invalid_argument_error(api,
                                 "the alignment " + std::to_string(options.alignment) + " is not 0 or a power of two");
  }
  require_multiple(api, "the fixed address", static_cast<std::size_t>(options.fixed_address), page, "host page size");
  auto state = std::make_unique<detail::address_reservation>();
  CUdeviceptr address = 0;
  detail::check_allocation(drv::cuMemAddressReserve(&address, bytes, options.alignment, options.fixed_address, 0),
                           "cuMemAddressReserve", [&] {
                             // Address space, not memory: no free figure applies.
                             return std::pair{detail::allocation_site{.bytes = bytes},
                                              format_bytes(bytes) + " of address space, alignment " +
                                                  std::to_string(options.alignment) + ", hint " +
                                                  format_address(options.fixed_address)};
                           });
  state->address = address;
  state->size = bytes;
  address_ = address;
  size_ = bytes;
  state_ = state.release();
}

address_range::address_range(detail::address_reservation* state, adopt_tag) noexcept
    : address_range_base(state->address, state->size, state) {}

address_range address_range::from_native_handle(CUdeviceptr address, std::size_t bytes) {
  auto* state = new detail::address_reservation;
  state->address = address;
  state->size = bytes;
  return address_range(state, adopt_tag{});
}

address_range& address_range::operator=(address_range&& other) noexcept {
  if (this != &other) {
    reset();
    address_ = std::exchange(other.address_, 0);
    size_ = std::exchange(other.size_, 0);
    state_ = std::exchange(other.state_, nullptr);
  }
  return *this;
}

CUdeviceptr address_range::release() noexcept {
  const CUdeviceptr address = std::exchange(address_, 0);
  size_ = 0;
  if (detail::address_reservation* state = std::exchange(state_, nullptr)) {
    state->owned.store(false, std::memory_order_release);
    detail::drop_reference(state);
  }
  return address;
}

void address_range::reset() noexcept {
  address_ = 0;
  size_ = 0;
  if (detail::address_reservation* state = std::exchange(state_, nullptr)) {
    detail::drop_reference(state);
  }
}

// --- mappings -----------------------------------------------------------------------------------

void memory_mapping_base::require_mapping(const char* api) const {
  if (address_ == 0) [[unlikely]] {
    throw invalid_argument_error(api, "the mapping is empty (a moved-from or released cudrv::memory_mapping)");
  }
}

void memory_mapping_base::set_access(const device& dev, access_rights rights) const {
  const access_descriptor one = access_descriptor::for_device(dev, rights);
  set_access(std::span<const access_descriptor>(&one, 1));
}

void memory_mapping_base::set_access(std::span<const access_descriptor> access) const {
  require_mapping("cudrv::memory_mapping::set_access");
  cudrv::set_access(address_, size_, access);
}

// Out of line, as the other overloads from braced lists: docs/design.md, "Header cost".
void memory_mapping_base::set_access(std::initializer_list<access_descriptor> access) const {
  set_access(std::span<const access_descriptor>(access.begin(), access.size()));
}

access_rights memory_mapping_base::access(const device& dev) const { return access(physical_location::on(dev)); }

access_rights memory_mapping_base::access(const physical_location& location) const {
  require_mapping("cudrv::memory_mapping::access");
  return get_access(address_, location);
}

memory_mapping::memory_mapping(address_range_ref range, std::size_t offset, physical_allocation_ref allocation)
    : memory_mapping(range, offset, allocation, 0, allocation.size()) {}

memory_mapping::memory_mapping(address_range_ref range, std::size_t offset, physical_allocation_ref allocation,
                               std::size_t allocation_offset, std::size_t bytes)
    : memory_mapping_base(0, 0) {
  constexpr const char* api = "cudrv::memory_mapping";
  range.require_range(api);
  if (allocation.native_handle() == 0) {
    throw invalid_argument_error(
        api, "the physical allocation is empty (a moved-from or released cudrv::physical_allocation)");
  }
  if (bytes == 0) {
    throw invalid_argument_error(api, "a mapping of 0 bytes");
  }
  if (!checked_end(offset, bytes, range.size())) {
    throw invalid_argument_error(api, format_bytes(bytes) + " at offset " + std::to_string(offset) +
                                          " do not fit in the address range of " + format_bytes(range.size()));
  }
  if (!checked_end(allocation_offset, bytes, allocation.size())) {
    throw invalid_argument_error(api, format_bytes(bytes) + " from offset " + std::to_string(allocation_offset) +
                                          " do not fit in the physical allocation of " +
                                          format_bytes(allocation.size()));
  }
  const std::size_t gran = allocation.minimum_granularity();
  const CUdeviceptr address = range.address() + offset;
  require_multiple(api, "the offset into the range", offset, gran, "minimum allocation granularity");
  require_multiple(api, "the mapped address", static_cast<std::size_t>(address), gran,
                   "minimum allocation granularity");
  require_multiple(api, "the size", bytes, gran, "minimum allocation granularity");
  require_multiple(api, "the offset into the allocation", allocation_offset, gran, "minimum allocation granularity");
  check(drv::cuMemMap(address, bytes, allocation_offset, allocation.native_handle(), 0), "cuMemMap", [&] {
    return format_bytes(bytes) + " at " + format_address(address) + " (offset " + std::to_string(offset) +
           " of the range), from offset " + std::to_string(allocation_offset) + " of the allocation";
  });
  address_ = address;
  size_ = bytes;
  if (range.state_ != nullptr) {
    range.state_->refs.fetch_add(1, std::memory_order_relaxed);
    range.state_->mappings.fetch_add(1, std::memory_order_relaxed);
    range_ = range.state_;
  }
}

memory_mapping& memory_mapping::operator=(memory_mapping&& other) noexcept {
  if (this != &other) {
    reset();
    address_ = std::exchange(other.address_, 0);
    size_ = std::exchange(other.size_, 0);
    range_ = std::exchange(other.range_, nullptr);
  }
  return *this;
}

CUdeviceptr memory_mapping::release() noexcept {
  const CUdeviceptr address = std::exchange(address_, 0);
  size_ = 0;
  if (detail::address_reservation* state = std::exchange(range_, nullptr)) {
    state->mappings.fetch_sub(1, std::memory_order_acq_rel);
    detail::drop_reference(state);
  }
  return address;
}

void memory_mapping::reset() noexcept {
  if (address_ != 0) {
    const CUdeviceptr address = std::exchange(address_, 0);
    const std::size_t bytes = std::exchange(size_, 0);
    detail::destroy_noexcept("cuMemUnmap", [&] { return drv::cuMemUnmap(address, bytes); });
  }
  if (detail::address_reservation* state = std::exchange(range_, nullptr)) {
    state->mappings.fetch_sub(1, std::memory_order_acq_rel);
    detail::drop_reference(state);  // frees the range when its owner went first
  }
}

// --- the memory resource ------------------------------------------------------------------------

// NOLINTNEXTLINE(performance-unnecessary-value-param): the public signature (virtual_memory.hpp) takes it by value
virtual_memory_resource::virtual_memory_resource(const cudrv::device& dev, virtual_memory_resource_options options)
    : device_(dev),
      properties_{physical_location::on(dev), options.handle_types, false, options.gpu_direct_rdma},
      live_(nullptr) {
  granularity_ = allocation_granularity(properties_, options.rounding);
  std::vector<access_descriptor> access;
  access.push_back(access_descriptor::for_device(dev));
  for (const cudrv::device& peer : options.peers) {
    if (peer != dev) {
      access.push_back(access_descriptor::for_device(peer, options.peer_access));
    }
  }
  live_ = new detail::virtual_memory_allocations;
  live_->access = std::move(access);
}

virtual_memory_resource::~virtual_memory_resource() {
  delete live_;  // what is left: each unmapped, released and freed
}

std::size_t virtual_memory_resource::allocation_count() const {
  std::lock_guard<std::mutex> lock(live_->mutex);
  return live_->live.size();
}

void* virtual_memory_resource::do_allocate(std::size_t bytes, std::size_t alignment) {
  constexpr const char* api = "cudrv::virtual_memory_resource::allocate";
  if (bytes > std::numeric_limits<std::size_t>::max() - granularity_) {
    throw invalid_argument_error(api, format_bytes(bytes) + " cannot be rounded up to the granularity");
  }
  const std::size_t size = (bytes + granularity_ - 1) / granularity_ * granularity_;
  const bool power_of_two = (granularity_ & (granularity_ - 1)) == 0;
  const std::size_t align = alignment > granularity_ ? alignment : (power_of_two ? granularity_ : 0);
  address_range range(size, {.alignment = align});
  physical_allocation memory(size, properties_);
  memory_mapping mapping(range, 0, memory);
  set_access(mapping.address(), size, live_->access);
  const CUdeviceptr address = mapping.address();
  {
    std::lock_guard<std::mutex> lock(live_->mutex);
    live_->live.emplace(address, detail::virtual_memory_allocations::entry{std::move(range), std::move(memory),
                                                                           std::move(mapping)});
  }
  return reinterpret_cast<void*>(address);
}

void virtual_memory_resource::do_deallocate(void* ptr, std::size_t bytes, std::size_t /*alignment*/) noexcept {
  std::map<CUdeviceptr, detail::virtual_memory_allocations::entry>::node_type node;
  {
    std::lock_guard<std::mutex> lock(live_->mutex);
    node = live_->live.extract(reinterpret_cast<CUdeviceptr>(ptr));
  }
  if (node.empty()) {
    try {
      get_destruction_error_handler()(invalid_argument_error("cudrv::virtual_memory_resource::deallocate",
                                                             format_address(reinterpret_cast<std::uintptr_t>(ptr)) +
                                                                 " was not allocated by this resource (" +
                                                                 std::to_string(bytes) + " bytes); nothing freed"));
    } catch (...) {
    }
    return;
  }
  // node goes out of scope here: unmap, release, free
}

memory_resource_properties virtual_memory_resource::do_properties() const noexcept {
  return {device_.ordinal(), true, false};
}

}  // namespace cudrv
