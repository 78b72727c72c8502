// Pitched allocations (<cudrv/pitched_buffer.hpp>): cuMemAllocPitch.
#include "cudrv/pitched_buffer.hpp"

#include <limits>
#include <string>

#include "cudrv/error.hpp"
#include "driver/driver_api.hpp"
#include "memory/memory_support.hpp"

namespace cudrv::detail {

device_allocation allocate_pitched(CUcontext ctx, std::size_t width, std::size_t height, std::size_t depth,
                                   std::size_t element_size, std::size_t* pitch) {
  const char* api = "cudrv::pitched_buffer";
  require_context(ctx, api);
  if (width == 0 || height == 0 || depth == 0) {
    throw invalid_argument_error(api, "a pitched allocation needs a non-zero width, height and depth");
  }
  const std::size_t width_bytes = checked_bytes(api, width, element_size);
  const std::size_t rows = checked_bytes(api, height, depth);
  unsigned int element = element_size >= 16 ? 16u : element_size >= 8 ? 8u : 4u;
  device_allocation out;
  out.context = context_token::of(ctx);
  context_guard guard{context_ref(ctx)};
  check_allocation(drv::cuMemAllocPitch(&out.address, pitch, width_bytes, rows, element), "cuMemAllocPitch", [&] {
    const std::size_t asked = width_bytes <= std::numeric_limits<std::size_t>::max() / rows
                                  ? width_bytes * rows
                                  : out_of_memory_error::unknown_bytes;
    return std::pair{allocation_site{.bytes = asked, .context = ctx},
                     std::to_string(rows) + " rows of " + format_bytes(width_bytes) + " requested"};
  });
  out.bytes = *pitch * rows;
  out.device = current_device_or_unresolved();
  return out;
}

}  // namespace cudrv::detail
