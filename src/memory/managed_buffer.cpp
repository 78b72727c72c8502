// Managed allocations (<cudrv/managed_buffer.hpp>): cuMemAllocManaged and its free, stream attachment,
// prefetch and advice.
#include "cudrv/managed_buffer.hpp"

#include <string>

#include "cudrv/device_buffer.hpp"
#include "cudrv/error.hpp"
#include "driver/driver_api.hpp"
#include "memory/memory_support.hpp"
#include "streams/stream_support.hpp"

namespace cudrv::detail {

host_allocation host_allocation::allocate_managed(CUcontext ctx, std::size_t count, std::size_t element_size,
                                                  unsigned int flags) {
  const char* api = "cudrv::managed_buffer";
  require_context(ctx, api);
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) {
    throw invalid_argument_error(api,
                                 "managed memory is allocated with managed_attach::global or managed_attach::host; "
                                 "attach it to a stream with managed_buffer::attach");
  }
  std::size_t bytes = checked_bytes(api, count, element_size);
  const context_token token = context_token::of(ctx);
  if (bytes == 0) {
    return {nullptr, 0, token, unresolved_device};
  }
  context_guard guard{context_ref(ctx)};
  CUdeviceptr address = 0;
  check_allocation(drv::cuMemAllocManaged(&address, bytes, flags), "cuMemAllocManaged", [&] {
    return std::pair{allocation_site{.bytes = bytes, .context = ctx},
                     format_bytes(bytes) + " of managed memory requested"};
  });
  return {reinterpret_cast<void*>(address), bytes, token, current_device_or_unresolved()};
}

void host_allocation::free_managed() noexcept {
  if (pointer != nullptr) {
    auto a = reinterpret_cast<CUdeviceptr>(std::exchange(pointer, nullptr));
    bytes = 0;
    const context_token ctx = std::exchange(context, {});
    if (!ctx.alive()) {
      report_outlived_context("cudrv::managed_buffer", "managed buffer");
      return;
    }
    quiet_context_scope scope(ctx.handle);
    destroy_noexcept("cuMemFree", [a] { return drv::cuMemFree(a); });
  }
}

namespace {
void require_managed(CUdeviceptr address, const char* api) {
  if (address == 0) {
    throw invalid_argument_error(api, "the buffer is empty (moved-from, released or of zero elements)");
  }
}
}  // namespace

void managed_attach_async(CUstream stream, CUdeviceptr address, std::size_t bytes, unsigned int flags) {
  require_managed(address, "cudrv::managed_buffer::attach");
  require_stream(stream, "cudrv::managed_buffer::attach");
  stream_context_scope scope(stream);
  check(drv::cuStreamAttachMemAsync(stream, address, bytes, flags), "cuStreamAttachMemAsync");
}

void managed_prefetch_async(CUdeviceptr address, std::size_t bytes, memory_location where, CUstream stream) {
  require_managed(address, "cudrv::managed_buffer::prefetch");
  require_stream(stream, "cudrv::managed_buffer::prefetch");
  stream_context_scope scope(stream);
#if CUDA_VERSION >= 12020
  const CUmemLocation location = where.native();
  check(drv::cuMemPrefetchAsync(address, bytes, location, 0u, stream), "cuMemPrefetchAsync", [&] {
    return format_bytes(bytes) + (where.is_device()        ? " to device " + std::to_string(where.device_ordinal())
                                  : where.numa_node() >= 0 ? " to host NUMA node " + std::to_string(where.numa_node())
                                                           : std::string(" to the host"));
  });
#else
  check(drv::cuMemPrefetchAsync(address, bytes, where.is_host() ? CU_DEVICE_CPU : where.device_ordinal(), stream),
        "cuMemPrefetchAsync");
#endif
}

void managed_advise(CUcontext ctx, CUdeviceptr address, std::size_t bytes, CUmem_advise advice, memory_location where) {
  require_managed(address, "cudrv::managed_buffer::advise");
  context_guard guard{context_ref(ctx)};
#if CUDA_VERSION >= 12020
  check(drv::cuMemAdvise(address, bytes, advice, where.native()), "cuMemAdvise");
#else
  check(drv::cuMemAdvise(address, bytes, advice, where.is_host() ? CU_DEVICE_CPU : where.device_ordinal()),
        "cuMemAdvise");
#endif
}

}  // namespace cudrv::detail
