// Memory locations: the typed CUmemLocation, and the host NUMA node nearest a device.
#include "cudrv/memory_location.hpp"

#include <string>

#include "cudrv/error.hpp"

namespace cudrv {

namespace {
// CU_MEM_LOCATION_TYPE_NONE (0) and CU_MEM_ALLOCATION_TYPE_MANAGED (2) are named from CUDA 13 on.
constexpr auto location_type_none = static_cast<CUmemLocationType>(0);
#if CUDA_VERSION >= 13000
static_assert(CU_MEM_LOCATION_TYPE_NONE == location_type_none);
static_assert(static_cast<int>(memory_allocation_type::managed) == CU_MEM_ALLOCATION_TYPE_MANAGED);
#endif
}  // namespace

memory_location memory_location::host_numa(int node) {
  if (node < 0) {
    throw invalid_argument_error("cudrv::memory_location::host_numa",
                                 "the NUMA node " + std::to_string(node) + " is negative");
  }
  return {memory_location_kind::host_numa, node};
}

memory_location memory_location::nearest_host_numa(const device& dev) {
  const int node = dev.attribute(device_attributes::host_numa_id);
  if (node < 0) {
    throw not_supported_error(CUDA_ERROR_NOT_SUPPORTED, "cudrv::memory_location::nearest_host_numa",
                              "device " + std::to_string(dev.ordinal()) +
                                  " reports no host NUMA node (CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID is " +
                                  std::to_string(node) + "): the system does not support NUMA");
  }
  return {memory_location_kind::host_numa, node};
}

memory_location memory_location::from_native(const CUmemLocation& location) {
  const char* api = "cudrv::memory_location::from_native";
  switch (static_cast<int>(location.type)) {
    case 0: return none();
    case CU_MEM_LOCATION_TYPE_DEVICE:
      if (location.id < 0) {
        throw invalid_argument_error(api, "the device ordinal " + std::to_string(location.id) + " is negative");
      }
      return {memory_location_kind::device, location.id};
    case CU_MEM_LOCATION_TYPE_HOST: return host();
    case CU_MEM_LOCATION_TYPE_HOST_NUMA: return host_numa(location.id);
    default:
      throw invalid_argument_error(api, "the location type " + std::to_string(static_cast<int>(location.type)) +
                                            " is not a device, the host, a host NUMA node or none");
  }
}

CUmemLocation memory_location::native() const noexcept {
  CUmemLocation out{};
  switch (kind_) {
    case memory_location_kind::none: out.type = location_type_none; break;
    case memory_location_kind::device:
      out.type = CU_MEM_LOCATION_TYPE_DEVICE;
      out.id = id_;
      break;
    case memory_location_kind::host: out.type = CU_MEM_LOCATION_TYPE_HOST; break;
    case memory_location_kind::host_numa:
      out.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
      out.id = id_;
      break;
  }
  return out;
}

}  // namespace cudrv
