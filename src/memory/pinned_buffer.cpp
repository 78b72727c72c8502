// Pinned host allocations (<cudrv/pinned_buffer.hpp>): cuMemHostAlloc and cuMemFreeHost.
#include "cudrv/pinned_buffer.hpp"

#include "cudrv/device_buffer.hpp"
#include "cudrv/error.hpp"
#include "driver/driver_api.hpp"
#include "memory/memory_support.hpp"

namespace cudrv::detail {

host_allocation host_allocation::allocate_pinned(CUcontext ctx, std::size_t count, std::size_t element_size,
                                                 unsigned int flags) {
  const char* api = "cudrv::pinned_buffer";
  require_context(ctx, api);
  constexpr unsigned int known = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED;
  if ((flags & ~known) != 0) {
    throw invalid_argument_error(api, "unknown pinned_flags bits " + format_address(flags & ~known));
  }
  std::size_t bytes = checked_bytes(api, count, element_size);
  const context_token token = context_token::of(ctx);
  if (bytes == 0) {
    return {nullptr, 0, token};
  }
  context_guard guard{context_ref(ctx)};
  void* pointer = nullptr;
  check_allocation(drv::cuMemHostAlloc(&pointer, bytes, flags), "cuMemHostAlloc", [&] {
    return std::pair{allocation_site{.bytes = bytes, .host = true},
                     format_bytes(bytes) + " of pinned host memory requested"};
  });
  return {pointer, bytes, token};
}

void host_allocation::free_pinned() noexcept {
  if (pointer != nullptr) {
    void* p = std::exchange(pointer, nullptr);
    bytes = 0;
    const context_token ctx = std::exchange(context, {});
    if (!ctx.alive()) {
      report_outlived_context("cudrv::pinned_buffer", "pinned buffer");
      return;
    }
    quiet_context_scope scope(ctx.handle);
    destroy_noexcept("cuMemFreeHost", [p] { return drv::cuMemFreeHost(p); });
  }
}

}  // namespace cudrv::detail
