// Managed ranges (<cudrv/managed_range.hpp>): typed advice (cuMemAdvise), range attributes
// (cuMemRangeGetAttributes), and the check of a managed range that the batches share.
#include "cudrv/managed_range.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cudrv/context.hpp"
#include "cudrv/device.hpp"
#include "cudrv/error.hpp"
#include "driver/driver_api.hpp"
#include "memory/memory_support.hpp"

namespace cudrv::detail {

namespace {

const char* advice_name(memory_advice advice) {
  switch (advice) {
    case memory_advice::set_read_mostly: return "memory_advice::set_read_mostly";
    case memory_advice::unset_read_mostly: return "memory_advice::unset_read_mostly";
    case memory_advice::set_preferred_location: return "memory_advice::set_preferred_location";
    case memory_advice::unset_preferred_location: return "memory_advice::unset_preferred_location";
    case memory_advice::set_accessed_by: return "memory_advice::set_accessed_by";
    case memory_advice::unset_accessed_by: return "memory_advice::unset_accessed_by";
  }
  return nullptr;
}

std::string describe_range(std::uintptr_t address, std::size_t bytes) {
  return format_bytes(bytes) + " at " + format_address(address);
}

// Runs fn with the managed allocation's context current when no context is (the driver's managed-memory
// calls look at the current context); otherwise in the current one.
template <class Fn>
void in_memory_context(CUcontext ctx, Fn&& fn) {
  CUcontext current = nullptr;
  check(drv::cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  if (current != nullptr || ctx == nullptr) {
    fn();
    return;
  }
  context_guard guard{context_ref(ctx)};
  fn();
}

}  // namespace

CUcontext check_managed_range(std::uintptr_t address, std::size_t bytes, const char* api, const std::string& what) {
  const std::string who = what.empty() ? std::string("the range") : what;
  if (address == 0) {
    throw invalid_argument_error(api, who + " is null (an empty, moved-from or released buffer)");
  }
  if (bytes == 0) {
    throw invalid_argument_error(api, who + " at " + format_address(address) + " is empty");
  }
  if (bytes > UINTPTR_MAX - address) {
    throw invalid_argument_error(api, who + " (" + describe_range(address, bytes) + ") wraps around the address space");
  }
  CUcontext ctx = nullptr;
  unsigned int memory_type = 0;
  int managed = 0;
  CUdeviceptr start = 0;
  std::size_t size = 0;
  CUpointer_attribute which[] = {CU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                 CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                 CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  void* data[] = {&ctx, &memory_type, &managed, &start, &size};
  check(drv::cuPointerGetAttributes(static_cast<unsigned>(std::size(which)), which, data, address),
        "cuPointerGetAttributes", [&] { return format_address(address); });
  if (managed == 0) {
    if (memory_type != 0) {
      throw invalid_argument_error(api, who + " (" + describe_range(address, bytes) + ") is " +
                                            (memory_type == CU_MEMORYTYPE_HOST ? "pinned host" : "device") +
                                            " memory, not managed memory: allocate it with cudrv::managed_buffer "
                                            "(cuMemAllocManaged)");
    }
    return nullptr;  // memory the driver does not know: system-allocated memory, the driver decides
  }
  const auto first = static_cast<std::uintptr_t>(start);
  if (size != 0 && (address < first || address - first > size || bytes > size - (address - first))) {
    throw invalid_argument_error(api, who + " (" + describe_range(address, bytes) +
                                          ") runs past the end of its managed allocation (" +
                                          describe_range(first, size) + ")");
  }
  return ctx;
}

memory_location decode_range_location(int type, int id) noexcept {
  switch (type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
      return id >= 0 ? memory_location::from_native(CUmemLocation{CU_MEM_LOCATION_TYPE_DEVICE, id})
                     : memory_location::none();
    case CU_MEM_LOCATION_TYPE_HOST: return memory_location::host();
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
      return id >= 0 ? memory_location::from_native(CUmemLocation{CU_MEM_LOCATION_TYPE_HOST_NUMA, id})
                     : memory_location::none();
    default: return memory_location::none();  // INVALID: pages disagree or nothing was set
  }
}

void advise_range(std::uintptr_t address, std::size_t bytes, memory_advice advice, const memory_location* where,
                  const char* api) {
  const char* name = advice_name(advice);
  if (name == nullptr) {
    throw invalid_argument_error(api, "memory_advice " + std::to_string(static_cast<int>(advice)) +
                                          " is none of the six CU_MEM_ADVISE_* values");
  }
  const bool takes_location = advice_takes_location(advice);
  if (takes_location && (where == nullptr || where->kind() == memory_location_kind::none)) {
    throw invalid_argument_error(api, std::string(name) + " needs a location: a device, the host or a host NUMA node");
  }
  const CUcontext ctx = check_managed_range(address, bytes, api, "");
  // The advice without a location ignores it; the host is what the driver's examples pass.
  const CUmemLocation location = takes_location ? where->native() : memory_location::host().native();
  in_memory_context(ctx, [&] {
    check(drv::cuMemAdvise(static_cast<CUdeviceptr>(address), bytes, static_cast<CUmem_advise>(advice), location),
          "cuMemAdvise", [&] { return std::string(name) + " on " + describe_range(address, bytes); });
  });
}

managed_range_attributes query_managed_range(std::uintptr_t address, std::size_t bytes) {
  const char* api = "cudrv::get_managed_range_attributes";
  const CUcontext ctx = check_managed_range(address, bytes, api, "");
  const int devices = device_count();
  std::vector<int> accessed(static_cast<std::size_t>(devices > 0 ? devices + 1 : 1), CU_DEVICE_INVALID);
  int read_mostly = 0;
  CUmemLocationType preferred_type = CU_MEM_LOCATION_TYPE_INVALID;
  int preferred_id = 0;
  CUmemLocationType last_type = CU_MEM_LOCATION_TYPE_INVALID;
  int last_id = 0;
  void* data[] = {&read_mostly, &preferred_type, &preferred_id, &last_type, &last_id, accessed.data()};
  std::size_t sizes[] = {sizeof(int), sizeof(CUmemLocationType),    sizeof(int), sizeof(CUmemLocationType),
                         sizeof(int), accessed.size() * sizeof(int)};
  CUmem_range_attribute which[] = {
      CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY,
      CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE,
      CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID,
      CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE,
      CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID,
      CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY,
  };
  in_memory_context(ctx, [&] {
    check(drv::cuMemRangeGetAttributes(data, sizes, which, std::size(which), static_cast<CUdeviceptr>(address), bytes),
          "cuMemRangeGetAttributes", [&] { return describe_range(address, bytes); });
  });
  managed_range_attributes out;
  out.read_mostly = read_mostly != 0;
  out.preferred_location = decode_range_location(static_cast<int>(preferred_type), preferred_id);
  out.last_prefetch_location = decode_range_location(static_cast<int>(last_type), last_id);
  for (const int id : accessed) {
    if (id >= 0) {
      out.accessed_by.push_back(decode_range_location(CU_MEM_LOCATION_TYPE_DEVICE, id));
    } else if (id == CU_DEVICE_CPU) {
      out.accessed_by.push_back(memory_location::host());
    }
  }
  return out;
}

}  // namespace cudrv::detail
