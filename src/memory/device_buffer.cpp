// Device allocations (detail::device_allocation of <cudrv/device_buffer.hpp>): synchronous, adopted,
// stream-ordered and pool allocations, their frees, streams and properties.
#include "cudrv/device_buffer.hpp"

#include <optional>

#include "cudrv/error.hpp"
#include "cudrv/memory_pool.hpp"
#include "driver/driver_api.hpp"
#include "memory/memory_support.hpp"
#include "streams/stream_support.hpp"

namespace cudrv::detail {

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
[[gnu::noinline]] context_token special_stream_context(CUstream stream, const char* api) {
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

// The common case, a stream that carries its context, inline (issue 37); the default streams apart.
inline context_token default_stream_context(CUstream stream, const char* api) {
  if (stream != CU_STREAM_LEGACY && stream != CU_STREAM_PER_THREAD) [[likely]] {
    return {};
  }
  return special_stream_context(stream, api);
}

// The error of a failed stream-ordered allocation. Apart from the allocation (not inlined), so that
// the allocation's path sets up no description of the request (issue 37).
[[noreturn, gnu::noinline, gnu::cold]] void throw_async_allocation_failure(CUresult status, CUstream stream,
                                                                           CUmemoryPool pool, std::size_t bytes) {
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
  throw_allocation_failure(status, pool != nullptr ? "cuMemAllocFromPoolAsync" : "cuMemAllocAsync",
                           allocation_site{.bytes = bytes, .context = ctx, .pool = from},
                           format_bytes(bytes) + " requested on stream " +
                               format_address(reinterpret_cast<std::uintptr_t>(stream)));
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
    const CUresult status = pool != nullptr ? drv::cuMemAllocFromPoolAsync(&out.address, bytes, pool, stream)
                                            : drv::cuMemAllocAsync(&out.address, bytes, stream);
    if (status != CUDA_SUCCESS) [[unlikely]] {
      throw_async_allocation_failure(status, stream, pool, bytes);
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

}  // namespace cudrv::detail
