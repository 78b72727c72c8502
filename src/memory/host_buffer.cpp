// What every host-accessible allocation shares (<cudrv/detail/host_buffer.hpp>): its device and its
// device address.
#include "cudrv/detail/host_buffer.hpp"

#include <string>

#include "cudrv/device_buffer.hpp"
#include "cudrv/error.hpp"
#include "driver/driver_api.hpp"
#include "memory/memory_support.hpp"

namespace cudrv::detail {

int host_allocation::resolved_device() const {
  if (device != unresolved_device || context.handle == nullptr) {
    return device == unresolved_device ? -1 : device;
  }
  return context_ref(context.handle).device().ordinal();
}

CUdeviceptr host_allocation::device_address(const char* api) const {
  if (pointer == nullptr) {
    throw invalid_argument_error(api, "the buffer is empty (moved-from, released or of zero elements)");
  }
  context_guard guard{context_ref(context.handle)};
  CUdeviceptr address = 0;
  check(drv::cuMemHostGetDevicePointer(&address, pointer, 0u), "cuMemHostGetDevicePointer",
        [] { return std::string("the memory must be mapped (pinned_flags::mapped or unified addressing)"); });
  return address;
}

}  // namespace cudrv::detail
