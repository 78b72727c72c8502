// The helpers of memory/memory_support.hpp that allocations share: sizes, the context check, the
// device of the current context, byte and address formatting, the out-of-memory figures, the
// context and synchronisation scopes.
#include "memory/memory_support.hpp"

#include <unistd.h>

#include <cstdio>
#include <limits>
#include <string>

#include "cudrv/device_buffer.hpp"
#include "cudrv/error.hpp"
#include "cudrv/pointer_attributes.hpp"
#include "driver/driver_api.hpp"

namespace cudrv::detail {

void throw_size_overflow(const char* api, std::size_t count, std::size_t element_size) {
  throw invalid_argument_error(api, std::to_string(count) + " elements of " + std::to_string(element_size) +
                                        " bytes overflow the size type");
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
      return "device " + std::to_string(site.device) +
             "'s free memory was not read: no context of it is current, "
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
        text += "; the pool holds " + format_bytes(f.pool_reserved) + " from the system, " + format_bytes(f.pool_used) +
                " of it in use (memory_pool::trim_to gives the rest back)";
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

void quiet_context_scope::enter(CUcontext ctx, failed_switch on_failure) noexcept {
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

void quiet_context_scope::leave() noexcept {
  CUcontext p = previous_;
  destroy_noexcept("cuCtxSetCurrent", [p] { return drv::cuCtxSetCurrent(p); });
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

}  // namespace cudrv::detail
