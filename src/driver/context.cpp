#include "cudrv/context.hpp"

#include <string>

#include "cudrv/device.hpp"
#include "cudrv/error.hpp"
#include "driver/disposal.hpp"
#include "driver/driver_api.hpp"

namespace cudrv {

using detail::check;
namespace drv = detail::drv;

void context_base::require_handle(const char* api) const {
  if (handle_ == nullptr) [[unlikely]] {
    throw invalid_argument_error(api, "the context is empty (a moved-from or released cudrv::context)");
  }
}

context_ref context_ref::current() {
  CUcontext ctx = nullptr;
  check(drv::cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
  if (ctx == nullptr) {
    throw invalid_argument_error("cudrv::context_ref::current",
                                 "no context is current on this thread; call device::set_current first");
  }
  return context_ref(ctx);
}

cudrv::device context_base::device() const {
  require_handle("cudrv::context::device");
  context_guard guard{context_ref(handle_)};
  CUdevice dev = 0;
  check(drv::cuCtxGetDevice(&dev), "cuCtxGetDevice");
  return cudrv::device::from_native_handle(dev);
}

unsigned int context_base::flags() const {
  require_handle("cudrv::context::flags");
  context_guard guard{context_ref(handle_)};
  unsigned int flags = 0;
  check(drv::cuCtxGetFlags(&flags), "cuCtxGetFlags");
  return flags;
}

void context_base::synchronize() const {
  require_handle("cudrv::context::synchronize");
  context_guard guard{context_ref(handle_)};
  check(drv::cuCtxSynchronize(), "cuCtxSynchronize");
  detail::await_disposals();
}

std::pair<int, int> context_base::stream_priority_range() const {
  require_handle("cudrv::context::stream_priority_range");
  context_guard guard{context_ref(handle_)};
  int least = 0;
  int greatest = 0;
  check(drv::cuCtxGetStreamPriorityRange(&least, &greatest), "cuCtxGetStreamPriorityRange");
  return {greatest, least};
}

void context_base::enable_peer_access(context_ref peer) const {
  require_handle("cudrv::context::enable_peer_access");
  peer.require_handle("cudrv::context::enable_peer_access");
  context_guard guard{context_ref(handle_)};
  CUresult status = drv::cuCtxEnablePeerAccess(peer.native_handle(), 0u);
  if (status != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) {
    check(status, "cuCtxEnablePeerAccess");
  }
}

void context_base::disable_peer_access(context_ref peer) const {
  require_handle("cudrv::context::disable_peer_access");
  peer.require_handle("cudrv::context::disable_peer_access");
  context_guard guard{context_ref(handle_)};
  check(drv::cuCtxDisablePeerAccess(peer.native_handle()), "cuCtxDisablePeerAccess");
}

std::size_t context_base::limit(CUlimit which) const {
  require_handle("cudrv::context::limit");
  context_guard guard{context_ref(handle_)};
  std::size_t value = 0;
  check(drv::cuCtxGetLimit(&value, which), "cuCtxGetLimit");
  return value;
}

void context_base::set_limit(CUlimit which, std::size_t value) const {
  require_handle("cudrv::context::set_limit");
  context_guard guard{context_ref(handle_)};
  check(drv::cuCtxSetLimit(which, value), "cuCtxSetLimit");
}

// --- context ---------------------------------------------------------------------------------

context::context(const cudrv::device& dev, context_flags flags) : context_base(nullptr) {
  constexpr unsigned int known = CU_CTX_SCHED_MASK | CU_CTX_MAP_HOST | CU_CTX_LMEM_RESIZE_TO_MAX;
  if ((static_cast<unsigned int>(flags) & ~known) != 0) {
    throw invalid_argument_error("cudrv::context",
                                 "unknown context flags 0x" + std::to_string(static_cast<unsigned int>(flags)));
  }
  check(drv::cuCtxCreate(&handle_, static_cast<unsigned int>(flags), dev.native_handle()), "cuCtxCreate",
        [&] { return "device " + std::to_string(dev.ordinal()); });
  // cuCtxCreate pushes the new context; pop it so the caller's context is current again. If that fails,
  // the new context is destroyed (which pops it too) and the constructor throws: a context the caller did
  // not make current must not stay current.
  CUcontext popped = nullptr;
  CUresult status = CUDA_ERROR_UNKNOWN;
  try {
    status = drv::cuCtxPopCurrent(&popped);
  } catch (...) {
    reset();
    throw;
  }
  if (status != CUDA_SUCCESS) {
    reset();
    detail::throw_driver_error(status, "cuCtxPopCurrent",
                               "device " + std::to_string(dev.ordinal()) +
                                   ", making the caller's context current again after cuCtxCreate");
  }
}

context& context::operator=(context&& other) noexcept {
  if (this != &other) {
    reset();
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

void context::reset() noexcept {
  if (handle_ != nullptr) {
    CUcontext h = std::exchange(handle_, nullptr);
    detail::destroy_noexcept("cuCtxDestroy", [h] { return drv::cuCtxDestroy(h); });
  }
}

context::~context() { reset(); }

// --- primary_context -------------------------------------------------------------------------

primary_context::primary_context(const cudrv::device& dev) : context_base(nullptr), device_(dev.native_handle()) {
  check(drv::cuDevicePrimaryCtxRetain(&handle_, device_), "cuDevicePrimaryCtxRetain",
        [&] { return "device " + std::to_string(dev.ordinal()); });
}

primary_context& primary_context::operator=(primary_context&& other) noexcept {
  if (this != &other) {
    reset();
    handle_ = std::exchange(other.handle_, nullptr);
    device_ = other.device_;
  }
  return *this;
}

void primary_context::reset() noexcept {
  if (handle_ != nullptr) {
    handle_ = nullptr;
    CUdevice d = device_;
    detail::destroy_noexcept("cuDevicePrimaryCtxRelease", [d] { return drv::cuDevicePrimaryCtxRelease(d); });
  }
}

primary_context::~primary_context() { reset(); }

namespace detail {

context_token context_token::of(CUcontext ctx) noexcept {
  if (ctx == nullptr) {
    return {ctx, 0};
  }
  if (const int device = retained_primary_context_device(ctx); device >= 0) {
    return {ctx, primary_token(device, primary_context_generation(device))};
  }
  unsigned long long id = 0;
  try {
    if (drv::cuCtxGetId(ctx, &id) != CUDA_SUCCESS) {
      id = 0;  // the driver cannot tell: the context is taken to live as long as the process
    }
  } catch (const error&) {
    id = 0;  // a driver older than 12.0 has no context ids, or no driver is loaded: cannot tell
  }
  return {ctx, id};
}

void switch_context_and_run(CUcontext ctx, void (*fn)(void*), void* data) {
  context_guard guard{context_ref(ctx)};
  fn(data);
}
}  // namespace detail

// --- context_guard ---------------------------------------------------------------------------

context_guard::context_guard(context_ref ctx) : previous_(nullptr), target_(ctx.native_handle()) {
  if (target_ == nullptr) [[unlikely]] {
    throw invalid_argument_error("cudrv::context_guard",
                                 "the context is empty (a moved-from or released cudrv::context)");
  }
  check(drv::cuCtxGetCurrent(&previous_), "cuCtxGetCurrent");
  if (previous_ != target_) {
    check(drv::cuCtxSetCurrent(target_), "cuCtxSetCurrent");
  }
}

context_guard::~context_guard() {
  if (previous_ != target_) {
    CUcontext p = previous_;
    detail::destroy_noexcept("cuCtxSetCurrent", [p] { return drv::cuCtxSetCurrent(p); });
  }
}

}  // namespace cudrv
