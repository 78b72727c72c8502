// Allocations from the pools the host can access (<cudrv/host_accessible_pool_buffer.hpp>).
#include "cudrv/host_accessible_pool_buffer.hpp"

#include <string>

#include "cudrv/error.hpp"
#include "driver/driver_api.hpp"
#include "memory/memory_support.hpp"
#include "streams/stream_support.hpp"

namespace cudrv::detail {

namespace {
// Throws unless the pool's memory is described and host-accessible (host_accessible_pool_buffer's pools).
memory_properties require_host_accessible_pool(const memory_pool_base& pool, const char* api) {
  if (pool.native_handle() == nullptr) {
    throw invalid_argument_error(api, "the memory pool is empty (a moved-from or released cudrv::memory_pool)");
  }
  if (!pool.is_described()) {
    throw invalid_argument_error(api, "the pool's location is unknown (a memory_pool_ref of a bare handle), so "
                                      "whether the host can access its memory is not known; describe it with "
                                      "memory_pool_ref(handle, location, type)");
  }
  const memory_properties memory = pool.properties();
  if (!memory.host_accessible) {
    throw invalid_argument_error(api, "the pool holds memory of device " + std::to_string(memory.device_ordinal) +
                                          ", which the host cannot access; allocate it with "
                                          "device_buffer(pool, stream, count)");
  }
  return memory;
}
}  // namespace

device_allocation allocate_host_accessible(CUstream stream, stream_state* owner, const memory_pool_base& pool,
                                           std::size_t count, std::size_t element_size) {
  require_host_accessible_pool(pool, "cudrv::host_accessible_pool_buffer");
  return device_allocation::allocate_from_pool(stream, owner, pool, count, element_size);
}

device_allocation adopt_host_accessible(CUdeviceptr address, std::size_t bytes, CUstream stream, stream_state* owner,
                                        const memory_pool_base& pool) {
  const memory_properties memory =
      require_host_accessible_pool(pool, "cudrv::host_accessible_pool_buffer::from_native_handle");
  device_allocation out = device_allocation::adopt_async(address, bytes, stream, owner);
  out.device = memory.device_ordinal;
  out.host_accessible = true;
  return out;
}

}  // namespace cudrv::detail
