// Device, pinned, managed and pitched allocations, host registration, pointer attributes.
#include <unistd.h>

#include <cstdio>
#include <limits>
#include <optional>
#include <string>

#include "cudrv/device_buffer.hpp"
#include "cudrv/error.hpp"
#include "cudrv/managed_buffer.hpp"
#include "cudrv/pinned_buffer.hpp"
#include "cudrv/pitched_buffer.hpp"
#include "cudrv/pointer_attributes.hpp"
#include "cudrv/pool_buffer.hpp"
#include "cudrv/span.hpp"
#include "driver/driver_api.hpp"
#include "memory/memory_support.hpp"
#include "streams/stream_support.hpp"

namespace cudrv::detail {

namespace {

std::size_t checked_bytes(const char* api, std::size_t count, std::size_t element_size) {
  if (element_size != 0 && count > std::numeric_limits<std::size_t>::max() / element_size) {
    throw invalid_argument_error(api, std::to_string(count) + " elements of " + std::to_string(element_size) +
                                          " bytes overflow the size type");
  }
  return count * element_size;
}

void require_context(CUcontext ctx, const char* api) {
  if (ctx == nullptr) {
    throw invalid_argument_error(api, "the context is empty (a moved-from or released cudrv::context)");
  }
}

// The device of the current context (made current by the caller), or unresolved_device when the
// driver cannot say: the device is then found from the context when asked.
int current_device_or_unresolved() noexcept {
  CUdevice dev = -1;
  try {
    if (drv::cuCtxGetDevice(&dev) == CUDA_SUCCESS) {
      return static_cast<int>(dev);
    }
  } catch (...) {
  }
  return unresolved_device;
}

}  // namespace

std::string format_bytes(std::size_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  char buffer[64];
  if (unit == 0) {
    std::snprintf(buffer, sizeof(buffer), "%zu bytes", bytes);
  } else {
    std::snprintf(buffer, sizeof(buffer), "%.2f %s (%zu bytes)", value, units[unit], bytes);
  }
  return buffer;
}

std::string format_address(std::uintptr_t address) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "0x%llx", static_cast<unsigned long long>(address));
  return buffer;
}

namespace {
// Free and total memory where an allocation failed, into f; a sentence saying what was read (or why not).
std::string read_free_memory(const allocation_site& site, out_of_memory_error::figures& f) {
  std::size_t free = 0;
  std::size_t total = 0;
  if (site.host) {
    const long page = sysconf(_SC_PAGESIZE);
    const long available = sysconf(_SC_AVPHYS_PAGES);
    const long physical = sysconf(_SC_PHYS_PAGES);
    if (page <= 0 || available < 0 || physical <= 0) {
      return "the host's free memory could not be read";
    }
    f.free = static_cast<std::size_t>(available) * static_cast<std::size_t>(page);
    f.total = static_cast<std::size_t>(physical) * static_cast<std::size_t>(page);
    return format_bytes(f.free) + " of host memory free of " + format_bytes(f.total) +
           " (pinned memory is also limited by the locked-memory limit, ulimit -l)";
  }
  CUdevice dev = -1;
  CUresult status = CUDA_ERROR_INVALID_CONTEXT;
  if (site.context != nullptr) {
    quiet_context_scope scope(site.context, failed_switch::quiet);  // the context the allocation named
    if (scope.active() && drv::cuCtxGetDevice(&dev) == CUDA_SUCCESS) {
      status = drv::cuMemGetInfo(&free, &total);
    }
  } else if (site.device >= 0) {
    // Only a context that is current already: cudrv makes none current that the user did not name.
    CUcontext current = nullptr;
    if (drv::cuCtxGetCurrent(&current) == CUDA_SUCCESS && current != nullptr &&
        drv::cuCtxGetDevice(&dev) == CUDA_SUCCESS && dev == site.device) {
      status = drv::cuMemGetInfo(&free, &total);
    } else {
      return "device " + std::to_string(site.device) + "'s free memory was not read: no context of it is current, "
             "and cudrv makes none current that was not named";
    }
  }
  const std::string on = dev >= 0 ? "device " + std::to_string(static_cast<int>(dev)) : std::string("the device");
  if (status != CUDA_SUCCESS) {
    return on + "'s free memory could not be read (cuMemGetInfo: " + error_name(status) + ")";
  }
  f.free = free;
  f.total = total;
  return on + " (" + format_bytes(free) + " free of " + format_bytes(total) + ")";
}
}  // namespace

void throw_allocation_failure(CUresult status, const char* api, const allocation_site& site, std::string where) {
  if (status != CUDA_ERROR_OUT_OF_MEMORY) {
    throw_driver_error(status, api, std::move(where));
  }
  out_of_memory_error::figures f;
  f.requested = site.bytes;
  std::string text = std::move(where);
  try {
    if (site.host || site.context != nullptr || site.device >= 0) {
      text += (text.empty() ? "" : "; ") + read_free_memory(site, f);
    }
    if (site.pool != nullptr) {
      cuuint64_t reserved = 0;
      cuuint64_t used = 0;
      if (drv::cuMemPoolGetAttribute(site.pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved) == CUDA_SUCCESS &&
          drv::cuMemPoolGetAttribute(site.pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used) == CUDA_SUCCESS) {
        f.pool_reserved = static_cast<std::size_t>(reserved);
        f.pool_used = static_cast<std::size_t>(used);
        text += "; the pool holds " + format_bytes(f.pool_reserved) + " from the system, " +
                format_bytes(f.pool_used) + " of it in use (memory_pool::trim_to gives the rest back)";
      } else {
        text += "; the pool's usage could not be read";
      }
    }
  } catch (...) {
    // the figures are best effort (a driver that lacks an entry point, no memory for the text): the
    // failure is reported regardless
  }
  throw out_of_memory_error(status, api, std::move(text), f);
}

quiet_context_scope::quiet_context_scope(CUcontext ctx, failed_switch on_failure) noexcept {
  if (ctx == nullptr) {
    return;
  }
  const char* api = "cuCtxGetCurrent";
  CUresult status = CUDA_ERROR_UNKNOWN;
  try {
    status = drv::cuCtxGetCurrent(&previous_);
    if (status == CUDA_SUCCESS && previous_ != ctx) {
      api = "cuCtxSetCurrent";
      status = drv::cuCtxSetCurrent(ctx);
      switched_ = status == CUDA_SUCCESS;
    }
  } catch (const error& e) {  // the entry point could not be resolved
    active_ = false;
    if (on_failure == failed_switch::report) {
      get_destruction_error_handler()(e);
    }
    return;
  } catch (...) {
  }
  active_ = status == CUDA_SUCCESS;
  if (!active_ && on_failure == failed_switch::report) {
    report_destruction_error(status, api);
  }
}

quiet_context_scope::~quiet_context_scope() {
  if (switched_) {
    CUcontext p = previous_;
    destroy_noexcept("cuCtxSetCurrent", [p] { return drv::cuCtxSetCurrent(p); });
  }
}

stream_context_scope::stream_context_scope(CUstream stream) {
  if (stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD) {
    return;
  }
  CUcontext target = nullptr;
  check(drv::cuStreamGetCtx(stream, &target), "cuStreamGetCtx");
  if (target != nullptr) {
    guard_.emplace(context_ref(target));  // a no-op when target is already current
  }
}

synchronous_scope::synchronous_scope(std::uintptr_t a, std::uintptr_t b) {
  CUcontext current = nullptr;
  check(drv::cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  // Device or managed memory decides the context: the one it was allocated in, or for memory of a
  // pool (which names no context) the current one if it is on that device, else that device's
  // primary context, the device being named by the memory. Host memory alone needs no context: the
  // copy runs in the current one, else pinned memory's, else on the host (host_only).
  CUcontext target = nullptr;
  CUcontext host_side = nullptr;
  for (std::uintptr_t address : {a, b}) {
    pointer_attributes attr = get_pointer_attributes(static_cast<CUdeviceptr>(address));
    if (attr.device_ordinal < 0) {
      continue;
    }
    CUcontext owner = attr.context;
    if (owner == nullptr) {
      CUdevice current_device = -1;
      if (current != nullptr && drv::cuCtxGetDevice(&current_device) == CUDA_SUCCESS &&
          current_device == attr.device_ordinal) {
        owner = current;
      } else {
        owner = device::from_native_handle(attr.device_ordinal).primary_context().native_handle();
      }
    }
    if (attr.memory_type == CU_MEMORYTYPE_DEVICE || attr.is_managed) {
      target = owner;
      break;
    }
    if (host_side == nullptr) {
      host_side = owner;
    }
  }
  if (target == nullptr) {
    target = current != nullptr ? current : host_side;
  }
  if (target == nullptr) {
    host_only_ = true;  // pageable host memory on both sides and no context anywhere: a plain copy
    return;
  }
  guard_.emplace(context_ref(target));
}

void synchronous_scope::complete() {
  if (!host_only_) {
    check(drv::cuStreamSynchronize(CU_STREAM_LEGACY), "cuStreamSynchronize");
  }
}

void throw_out_of_range(const char* api, std::size_t offset, std::size_t count, std::size_t size) {
  throw invalid_argument_error(api, "elements [" + std::to_string(offset) + ", " + std::to_string(offset + count) +
                                        ") are outside a view of " + std::to_string(size) + " elements");
}

// --- device_allocation -----------------------------------------------------------------------

device_allocation device_allocation::allocate(CUcontext ctx, std::size_t count, std::size_t element_size) {
  const char* api = "cudrv::device_buffer";
  require_context(ctx, api);
  std::size_t bytes = checked_bytes(api, count, element_size);
  device_allocation out;
  out.context = context_token::of(ctx);
  if (bytes == 0) {
    return out;
  }
  context_guard guard{context_ref(ctx)};
  check_allocation(drv::cuMemAlloc(&out.address, bytes), "cuMemAlloc", [&] {
    return std::pair{allocation_site{.bytes = bytes, .context = ctx}, format_bytes(bytes) + " requested"};
  });
  out.bytes = bytes;
  out.device = current_device_or_unresolved();
  return out;
}

device_allocation device_allocation::adopt(CUdeviceptr address, std::size_t bytes, CUcontext ctx) {
  device_allocation out;
  out.address = address;
  out.bytes = bytes;
  out.context = context_token::of(ctx);
  return out;
}

namespace {
// The context a stream-ordered buffer on `stream` is freed in: for the legacy default stream, the
// context current now (the legacy stream stands for it), remembered so that the free does not depend
// on what is current at destruction; none for other streams, which carry their context. The
// per-thread default stream is refused: it names a different stream on every thread, so a buffer
// destroyed on another thread would be freed out of order.
context_token default_stream_context(CUstream stream, const char* api) {
  if (stream == CU_STREAM_PER_THREAD) {
    throw invalid_argument_error(api, "a stream-ordered buffer cannot belong to the per-thread default stream, which "
                                      "is a different stream on every thread; use a cudrv::stream or the legacy "
                                      "default stream");
  }
  if (stream != CU_STREAM_LEGACY) {
    return {};
  }
  CUcontext current = nullptr;
  check(drv::cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  if (current == nullptr) {
    throw invalid_argument_error(api, "the legacy default stream stands for the current context, and none is current");
  }
  return context_token::of(current);
}
}  // namespace

device_allocation device_allocation::adopt_async(CUdeviceptr address, std::size_t bytes, CUstream stream,
                                                 stream_state* owner) {
  const char* api = "cudrv::device_buffer::from_native_handle";
  require_stream(stream, api);
  device_allocation out;
  out.context = default_stream_context(stream, api);
  out.address = address;
  out.bytes = bytes;
  out.stream = stream;
  out.owner = owner;
  retain_stream(owner);
  return out;
}

device_allocation device_allocation::allocate_async(CUstream stream, stream_state* owner, CUmemoryPool pool,
                                                    std::size_t count, std::size_t element_size) {
  const char* api = "cudrv::device_buffer";
  require_stream(stream, api);
  device_allocation out;
  out.context = default_stream_context(stream, api);
  out.stream = stream;
  std::size_t bytes = checked_bytes(api, count, element_size);
  if (bytes != 0) {
    auto where = [&] {
      // The stream names its context (the legacy default stream the current one).
      CUcontext ctx = nullptr;
      if (drv::cuStreamGetCtx(stream, &ctx) != CUDA_SUCCESS) {
        ctx = nullptr;
      }
      CUmemoryPool from = pool;
      if (from == nullptr && ctx != nullptr) {
        quiet_context_scope scope(ctx, failed_switch::quiet);
        CUdevice dev = -1;
        if (!scope.active() || drv::cuCtxGetDevice(&dev) != CUDA_SUCCESS ||
            drv::cuDeviceGetMemPool(&from, dev) != CUDA_SUCCESS) {
          from = nullptr;  // the device's current pool, which cuMemAllocAsync used
        }
      }
      return std::pair{allocation_site{.bytes = bytes, .context = ctx, .pool = from},
                       format_bytes(bytes) + " requested on stream " +
                           format_address(reinterpret_cast<std::uintptr_t>(stream))};
    };
    if (pool != nullptr) {
      check_allocation(drv::cuMemAllocFromPoolAsync(&out.address, bytes, pool, stream), "cuMemAllocFromPoolAsync",
                       where);
    } else {
      check_allocation(drv::cuMemAllocAsync(&out.address, bytes, stream), "cuMemAllocAsync", where);
    }
    out.bytes = bytes;
  }
  out.owner = owner;
  retain_stream(owner);  // the CUstream stays alive until the buffer is freed on it
  return out;
}

device_allocation device_allocation::allocate_from_pool(CUstream stream, stream_state* owner,
                                                        const memory_pool_base& pool, std::size_t count,
                                                        std::size_t element_size) {
  if (pool.native_handle() == nullptr) {
    throw invalid_argument_error("cudrv::device_buffer",
                                 "the memory pool is empty (a moved-from or released cudrv::memory_pool)");
  }
  // Read the description first: it may throw, and must not leave an allocation behind.
  const bool described = pool.is_described();
  const memory_properties memory = described ? pool.properties() : memory_properties{};
  device_allocation out = allocate_async(stream, owner, pool.native_handle(), count, element_size);
  if (described) {
    out.device = memory.device_ordinal;
    out.host_accessible = memory.host_accessible;
  }
  return out;
}

namespace {
// Throws unless the pool's memory is described and host-accessible (pool_buffer's pools).
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
  require_host_accessible_pool(pool, "cudrv::pool_buffer");
  return device_allocation::allocate_from_pool(stream, owner, pool, count, element_size);
}

device_allocation adopt_host_accessible(CUdeviceptr address, std::size_t bytes, CUstream stream, stream_state* owner,
                                        const memory_pool_base& pool) {
  const memory_properties memory = require_host_accessible_pool(pool, "cudrv::pool_buffer::from_native_handle");
  device_allocation out = device_allocation::adopt_async(address, bytes, stream, owner);
  out.device = memory.device_ordinal;
  out.host_accessible = true;
  return out;
}

void device_allocation::free() noexcept {
  const CUdeviceptr a = std::exchange(address, 0);
  bytes = 0;
  const CUstream s = std::exchange(stream, nullptr);
  stream_state* o = std::exchange(owner, nullptr);
  const context_token ctx = std::exchange(context, {});
  if (a != 0) {
    // The memory went with its context if that was destroyed first: freeing the address again could
    // free someone else's allocation.
    if (!ctx.alive() || !stream_context_alive(o)) {
      report_outlived_context("cudrv::device_buffer", "buffer");
    } else if (s != nullptr) {
      quiet_context_scope scope(ctx.handle);  // set only for the legacy default stream
      destroy_noexcept("cuMemFreeAsync", [a, s] { return drv::cuMemFreeAsync(a, s); });
    } else {
      quiet_context_scope scope(ctx.handle);
      destroy_noexcept("cuMemFree", [a] { return drv::cuMemFree(a); });
    }
  }
  release_stream(o);
}

void device_allocation::free_on(CUstream s, const char* api) {
  require_stream(s, api);
  if (address == 0) {
    free();  // drops the stream reference of an empty stream-ordered buffer
    return;
  }
  if (stream == nullptr) {
    // cuMemFree does not take a stream: wait for s first, so the free comes after its work.
    stream_context_scope scope(s);
    check(drv::cuStreamSynchronize(s), "cuStreamSynchronize");
    free();
    return;
  }
  const context_token ctx = s == CU_STREAM_LEGACY ? default_stream_context(s, api) : context_token{};
  const CUdeviceptr a = address;
  {
    std::optional<context_guard> guard;  // a throwing call: a failed switch throws too
    if (ctx.handle != nullptr) {
      guard.emplace(context_ref(ctx.handle));
    }
    check(drv::cuMemFreeAsync(a, s), "cuMemFreeAsync", [&] { return format_address(a); });
  }
  address = 0;
  bytes = 0;
  stream = nullptr;
  context = {};
  release_stream(std::exchange(owner, nullptr));
}

CUdeviceptr device_allocation::release() noexcept {
  const CUdeviceptr a = std::exchange(address, 0);
  bytes = 0;
  stream = nullptr;
  context = {};
  release_stream(std::exchange(owner, nullptr));
  return a;
}

CUcontext device_allocation::owning_context() const {
  if (stream == nullptr) {
    if (context.handle == nullptr) {
      throw invalid_argument_error("cudrv::device_buffer::context", "the buffer is empty (moved-from or released)");
    }
    return context.handle;
  }
  if (context.handle != nullptr) {
    return context.handle;
  }
  CUcontext ctx = nullptr;
  check(drv::cuStreamGetCtx(stream, &ctx), "cuStreamGetCtx");
  return ctx;
}

void device_allocation::set_stream(CUstream s, stream_state* new_owner, const char* api) {
  require_stream_ordered(api);
  require_stream(s, api);
  if (s == stream) {
    return;
  }
  const context_token ctx = default_stream_context(s, api);
  if (device == unresolved_device) {
    device = properties().device_ordinal;  // from the stream it was allocated on, before it changes
  }
  // Order the free, which will be queued on s, after the work queued on the previous stream so far.
  {
    std::optional<context_guard> guard;  // a throwing call: a failed switch throws too
    if (context.handle != nullptr) {
      guard.emplace(context_ref(context.handle));
    }
    stream_ref(s).wait(stream_ref(stream));
  }
  retain_stream(new_owner);
  release_stream(std::exchange(owner, new_owner));
  stream = s;
  context = ctx;
}

memory_properties device_allocation::properties() const {
  if (address == 0 && stream == nullptr && context.handle == nullptr) {
    return {};  // moved-from, released or freed
  }
  int ordinal = device;
  if (ordinal == unresolved_device) {
    ordinal = context_ref(owning_context()).device().ordinal();
  }
  return {ordinal, true, host_accessible};
}

void device_allocation::require_stream_ordered(const char* api) const {
  if (stream == nullptr) {
    throw invalid_argument_error(api, "the buffer has no stream: it was allocated synchronously, or it is empty "
                                      "(moved-from or released)");
  }
}

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
    const std::size_t asked = width_bytes <= std::numeric_limits<std::size_t>::max() / rows ? width_bytes * rows
                                                                                             : out_of_memory_error::unknown_bytes;
    return std::pair{allocation_site{.bytes = asked, .context = ctx},
                     std::to_string(rows) + " rows of " + format_bytes(width_bytes) + " requested"};
  });
  out.bytes = *pitch * rows;
  out.device = current_device_or_unresolved();
  return out;
}

// --- host_allocation -------------------------------------------------------------------------

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
    return std::pair{allocation_site{.bytes = bytes, .host = true}, format_bytes(bytes) + " of pinned host memory requested"};
  });
  return {pointer, bytes, token};
}

host_allocation host_allocation::allocate_managed(CUcontext ctx, std::size_t count, std::size_t element_size,
                                                  unsigned int flags) {
  const char* api = "cudrv::managed_buffer";
  require_context(ctx, api);
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) {
    throw invalid_argument_error(api, "managed memory is allocated with managed_attach::global or managed_attach::host; "
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
    return std::pair{allocation_site{.bytes = bytes, .context = ctx}, format_bytes(bytes) + " of managed memory requested"};
  });
  return {reinterpret_cast<void*>(address), bytes, token, current_device_or_unresolved()};
}

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
  check(drv::cuMemHostRegister(pointer, bytes, flags), "cuMemHostRegister", [&] {
    return format_bytes(bytes) + " at " + format_address(reinterpret_cast<std::uintptr_t>(pointer));
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

// --- managed memory operations ---------------------------------------------------------------

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
    return format_bytes(bytes) + (where.is_device() ? " to device " + std::to_string(where.device_ordinal())
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

namespace cudrv {

pointer_attributes get_pointer_attributes(CUdeviceptr address) {
  pointer_attributes out{};
  unsigned int memory_type = 0;
  int ordinal = -2;
  int managed = 0;
  int mapped = 0;
  CUpointer_attribute which[] = {
      CU_POINTER_ATTRIBUTE_CONTEXT,        CU_POINTER_ATTRIBUTE_MEMORY_TYPE,    CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
      CU_POINTER_ATTRIBUTE_HOST_POINTER,   CU_POINTER_ATTRIBUTE_IS_MANAGED,     CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
      CU_POINTER_ATTRIBUTE_BUFFER_ID,      CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
      CU_POINTER_ATTRIBUTE_MAPPED,         CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
  };
  void* data[] = {&out.context,     &memory_type,     &out.device_address, &out.host_pointer,
                  &managed,         &ordinal,         &out.buffer_id,      &out.range_start,
                  &out.range_size,  &mapped,          &out.pool};
  detail::check(detail::drv::cuPointerGetAttributes(static_cast<unsigned int>(std::size(which)), which, data, address),
                "cuPointerGetAttributes", [&] { return detail::format_address(static_cast<std::uintptr_t>(address)); });
  out.memory_type = static_cast<CUmemorytype>(memory_type);
  out.is_managed = managed != 0;
  out.is_mapped = mapped != 0;
  out.device_ordinal = (memory_type == 0 || ordinal < 0) ? -1 : ordinal;
  return out;
}

pointer_attributes get_pointer_attributes(const void* pointer) {
  return get_pointer_attributes(reinterpret_cast<CUdeviceptr>(pointer));
}

}  // namespace cudrv
