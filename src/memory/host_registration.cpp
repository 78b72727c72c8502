// Registered host memory (<cudrv/host_registration.hpp>): cuMemHostRegister and cuMemHostUnregister.
#include "cudrv/host_registration.hpp"

#include "cudrv/device_buffer.hpp"
#include "cudrv/error.hpp"
#include "driver/driver_api.hpp"
#include "memory/memory_support.hpp"

namespace cudrv::detail {

host_allocation host_allocation::register_memory(CUcontext ctx, void* pointer, std::size_t bytes, unsigned int flags) {
  const char* api = "cudrv::host_registration";
  require_context(ctx, api);
  constexpr unsigned int known = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                                 CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY;
  if ((flags & ~known) != 0) {
    throw invalid_argument_error(api, "unknown host_register_flags bits " + format_address(flags & ~known));
  }
  if (pointer == nullptr || bytes == 0) {
    throw invalid_argument_error(api, "nothing to register: the range is null or empty");
  }
  const context_token token = context_token::of(ctx);
  context_guard guard{context_ref(ctx)};
  check(drv::cuMemHostRegister(pointer, bytes, flags), "cuMemHostRegister",
        [&] { return format_bytes(bytes) + " at " + format_address(reinterpret_cast<std::uintptr_t>(pointer)); });
  return {pointer, bytes, token};
}

void host_allocation::unregister() noexcept {
  if (pointer != nullptr) {
    void* p = std::exchange(pointer, nullptr);
    bytes = 0;
    const context_token ctx = std::exchange(context, {});
    if (!ctx.alive()) {
      report_outlived_context("cudrv::host_registration", "host registration");
      return;
    }
    quiet_context_scope scope(ctx.handle);
    destroy_noexcept("cuMemHostUnregister", [p] { return drv::cuMemHostUnregister(p); });
  }
}

}  // namespace cudrv::detail
