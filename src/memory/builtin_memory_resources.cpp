// The concrete memory resources: device (cuMemAlloc), pinned (cuMemHostAlloc), managed
// (cuMemAllocManaged) and pool (cuMemAllocFromPoolAsync) memory behind cudrv::memory_resource.
#include "cudrv/builtin_memory_resources.hpp"

#include <string>
#include <typeinfo>
#include <utility>

#include "cudrv/device_buffer.hpp"
#include "cudrv/error.hpp"
#include "driver/driver_api.hpp"
#include "memory/memory_support.hpp"
#include "streams/stream_support.hpp"

namespace cudrv {

using detail::check;
namespace drv = detail::drv;

namespace {

void check_alignment_limit(std::size_t alignment, std::size_t limit, const char* api) {
  if (alignment > limit) [[unlikely]] {
    throw invalid_argument_error(api, "the alignment " + std::to_string(alignment) + " exceeds the " +
                                          std::to_string(limit) + " bytes this resource guarantees");
  }
}

CUcontext require_context(context_ref ctx, const char* api) {
  return detail::require_context_handle(ctx.native_handle(), api);
}

}  // namespace

bool detail::context_memory_resource::do_is_equal(const memory_resource& other) const noexcept {
  const auto* o = dynamic_cast<const context_memory_resource*>(&other);
  return o != nullptr && typeid(*o) == typeid(*this) && o->context_.handle == context_.handle;
}

// --- device_memory_resource ------------------------------------------------------------------------

device_memory_resource::device_memory_resource(const device& dev)
    : context_memory_resource(dev.primary_context().native_handle()), device_(dev.ordinal()) {}

device_memory_resource::device_memory_resource(context_ref ctx)
    : context_memory_resource(require_context(ctx, "cudrv::device_memory_resource")), device_(ctx.device().ordinal()) {}

void* device_memory_resource::do_allocate(std::size_t bytes, std::size_t alignment) {
  check_alignment_limit(alignment, max_alignment, "cudrv::device_memory_resource::allocate");
  return reinterpret_cast<void*>(detail::device_allocation::allocate(context_.handle, bytes, 1).release());
}

void device_memory_resource::do_deallocate(void* ptr, std::size_t bytes, std::size_t /*alignment*/) noexcept {
  detail::device_allocation a;
  a.address = reinterpret_cast<CUdeviceptr>(ptr);
  a.bytes = bytes;
  a.context = context_;
  a.free();  // cuMemFree in the context; nothing (reported) when the context is gone
}

memory_resource_properties device_memory_resource::do_properties() const noexcept { return {device_, true, false}; }

// --- pinned_memory_resource ------------------------------------------------------------------------

pinned_memory_resource::pinned_memory_resource(const device& dev, pinned_flags flags)
    : context_memory_resource(dev.primary_context().native_handle()), flags_(flags) {}

pinned_memory_resource::pinned_memory_resource(context_ref ctx, pinned_flags flags)
    : context_memory_resource(require_context(ctx, "cudrv::pinned_memory_resource")), flags_(flags) {}

void* pinned_memory_resource::do_allocate(std::size_t bytes, std::size_t alignment) {
  check_alignment_limit(alignment, max_alignment, "cudrv::pinned_memory_resource::allocate");
  detail::host_allocation a =
      detail::host_allocation::allocate_pinned(context_.handle, bytes, 1, static_cast<unsigned int>(flags_));
  return std::exchange(a, {}).pointer;
}

void pinned_memory_resource::do_deallocate(void* ptr, std::size_t bytes, std::size_t /*alignment*/) noexcept {
  detail::host_allocation a{ptr, bytes, context_};
  a.free_pinned();
}

memory_resource_properties pinned_memory_resource::do_properties() const noexcept { return {-1, true, true}; }

// --- managed_memory_resource -----------------------------------------------------------------------

managed_memory_resource::managed_memory_resource(const device& dev, managed_attach attach)
    : context_memory_resource(dev.primary_context().native_handle()), device_(dev.ordinal()), attach_(attach) {}

managed_memory_resource::managed_memory_resource(context_ref ctx, managed_attach attach)
    : context_memory_resource(require_context(ctx, "cudrv::managed_memory_resource")),
      device_(ctx.device().ordinal()),
      attach_(attach) {}

void* managed_memory_resource::do_allocate(std::size_t bytes, std::size_t alignment) {
  check_alignment_limit(alignment, max_alignment, "cudrv::managed_memory_resource::allocate");
  detail::host_allocation a =
      detail::host_allocation::allocate_managed(context_.handle, bytes, 1, static_cast<unsigned int>(attach_));
  return std::exchange(a, {}).pointer;
}

void managed_memory_resource::do_deallocate(void* ptr, std::size_t bytes, std::size_t /*alignment*/) noexcept {
  detail::host_allocation a{ptr, bytes, context_};
  a.free_managed();
}

memory_resource_properties managed_memory_resource::do_properties() const noexcept { return {device_, true, true}; }

// --- pool_memory_resource --------------------------------------------------------------------------

namespace {

memory_pool_ref require_described_pool(memory_pool_ref pool, const char* api) {
  if (pool.native_handle() == nullptr) {
    throw invalid_argument_error(api, "the memory pool is empty (a moved-from or released cudrv::memory_pool)");
  }
  if (!pool.is_described()) {
    throw invalid_argument_error(api, "the pool's location is unknown (a memory_pool_ref of a bare handle); describe "
                                      "it with memory_pool_ref(handle, location, type)");
  }
  return pool;
}

stream_ref default_sync_stream(memory_pool_ref pool) {
  const char* api = "cudrv::pool_memory_resource";
  const int ordinal = require_described_pool(pool, api).location().device_ordinal();
  if (ordinal < 0) {
    throw invalid_argument_error(api, "the pool names no device (host memory, or managed memory with no preferred "
                                      "device) whose default stream could serve synchronous allocations; name a "
                                      "stream: pool_memory_resource(pool, stream)");
  }
  return device::from_native_handle(static_cast<CUdevice>(ordinal)).default_stream();
}

std::string where(std::size_t bytes, CUstream s) {
  return detail::format_bytes(bytes) + " requested on stream " +
         detail::format_address(reinterpret_cast<std::uintptr_t>(s));
}

}  // namespace

pool_memory_resource::pool_memory_resource(memory_pool_ref pool)
    : pool_memory_resource(pool, default_sync_stream(pool)) {}

pool_memory_resource::pool_memory_resource(memory_pool_ref pool, stream_ref sync_stream)
    : pool_(require_described_pool(pool, "cudrv::pool_memory_resource")),
      sync_stream_(sync_stream),
      properties_(pool.properties()) {
  detail::require_stream(sync_stream.native_handle(), "cudrv::pool_memory_resource");
}

void* pool_memory_resource::do_allocate(std::size_t bytes, std::size_t alignment) {
  void* p = do_allocate_async(bytes, alignment, sync_stream_);
  const CUstream s = sync_stream_.native_handle();
  const CUresult status = drv::cuStreamSynchronize(s);
  if (status != CUDA_SUCCESS) [[unlikely]] {
    detail::destroy_noexcept("cuMemFreeAsync",
                             [&] { return drv::cuMemFreeAsync(reinterpret_cast<CUdeviceptr>(p), s); });
    check(status, "cuStreamSynchronize", [&] { return where(bytes, s); });
  }
  return p;
}

void pool_memory_resource::do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment) noexcept {
  do_deallocate_async(ptr, bytes, alignment, sync_stream_);
}

void* pool_memory_resource::do_allocate_async(std::size_t bytes, std::size_t alignment, stream_ref s) {
  check_alignment_limit(alignment, max_alignment, "cudrv::pool_memory_resource::allocate");
  const CUstream h = s.native_handle();
  detail::require_stream(h, "cudrv::pool_memory_resource::allocate_async");
  CUdeviceptr p = 0;
  detail::check_allocation(
      drv::cuMemAllocFromPoolAsync(&p, bytes, pool_.native_handle(), h), "cuMemAllocFromPoolAsync", [&] {
        CUcontext ctx = nullptr;  // the stream names it (the legacy stream: the current one)
        if (drv::cuStreamGetCtx(h, &ctx) != CUDA_SUCCESS) {
          ctx = nullptr;
        }
        return std::pair{detail::allocation_site{.bytes = bytes, .context = ctx, .pool = pool_.native_handle()},
                         where(bytes, h)};
      });
  return reinterpret_cast<void*>(p);
}

void pool_memory_resource::do_deallocate_async(void* ptr, std::size_t /*bytes*/, std::size_t /*alignment*/,
                                               stream_ref s) noexcept {
  const CUstream h = s.native_handle();
  const auto p = reinterpret_cast<CUdeviceptr>(ptr);
  detail::destroy_noexcept("cuMemFreeAsync", [&] { return drv::cuMemFreeAsync(p, h); });
}

memory_resource_properties pool_memory_resource::do_properties() const noexcept { return properties_; }

bool pool_memory_resource::do_is_equal(const memory_resource& other) const noexcept {
  const auto* o = dynamic_cast<const pool_memory_resource*>(&other);
  return o != nullptr && o->pool_ == pool_;
}

}  // namespace cudrv
