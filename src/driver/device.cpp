#include "cudrv/device.hpp"

#include <atomic>
#include <cctype>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

#include "cudrv/error.hpp"
#include "driver/driver_api.hpp"

namespace cudrv {

using detail::check;
namespace drv = detail::drv;

namespace {

std::string device_context(CUdevice dev) { return "device " + std::to_string(static_cast<int>(dev)); }

// One primary-context reference per device, taken by cudrv on first implicit use and held until the
// process ends (never released: objects created from a device rely on it).
struct primary_context_cache {
  int count = 0;
  std::unique_ptr<std::atomic<CUcontext>[]> slots;
  // How many times device::reset_primary_context reset each device's primary context: the tokens of
  // objects made in it carry the generation, so that after a reset (which may give the context the same
  // handle) their destruction frees nothing that the driver may have handed out again.
  std::unique_ptr<std::atomic<unsigned>[]> generations;
  std::mutex mutex;
};

// The cache once it exists (null before the first call that needs a primary context).
std::atomic<primary_context_cache*> cache_if_made{nullptr};

primary_context_cache& cache() {
  static primary_context_cache* c = [] {
    const int count = device_count();  // may throw: nothing allocated yet
    auto p = std::make_unique<primary_context_cache>();
    p->count = count;
    p->slots = std::make_unique<std::atomic<CUcontext>[]>(static_cast<std::size_t>(p->count));
    p->generations = std::make_unique<std::atomic<unsigned>[]>(static_cast<std::size_t>(p->count));
    cache_if_made.store(p.get(), std::memory_order_release);
    return p.release();  // intentionally never destroyed: outlives static objects
  }();
  return *c;
}

// The first time cudrv uses a device, its default memory pool keeps freed memory for reuse (release
// threshold SIZE_MAX) unless somebody already chose a threshold: with the driver's 0, every
// synchronisation returns the pool's memory to the system and allocation loops slow down. cuda.core
// does the same for the pools it uses. Best effort: a device without pools is left alone.
void keep_freed_pool_memory(CUdevice dev) noexcept {
  try {
    int pools = 0;
    CUmemoryPool pool = nullptr;
    cuuint64_t threshold = 0;
    if (drv::cuDeviceGetAttribute(&pools, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, dev) != CUDA_SUCCESS ||
        pools == 0 || drv::cuDeviceGetDefaultMemPool(&pool, dev) != CUDA_SUCCESS ||
        drv::cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold) != CUDA_SUCCESS ||
        threshold != 0) {
      return;
    }
    threshold = ~cuuint64_t{0};
    drv::cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold);
  } catch (...) {
  }
}

}  // namespace

namespace detail {
int retained_primary_context_device(CUcontext ctx) noexcept {
  const primary_context_cache* c = cache_if_made.load(std::memory_order_acquire);
  if (c == nullptr || ctx == nullptr) {
    return -1;
  }
  for (int i = 0; i < c->count; ++i) {
    if (c->slots[static_cast<std::size_t>(i)].load(std::memory_order_acquire) == ctx) {
      return i;
    }
  }
  return -1;
}

bool is_retained_primary_context(CUcontext ctx) noexcept { return retained_primary_context_device(ctx) >= 0; }

unsigned primary_context_generation(int device) noexcept {
  const primary_context_cache* c = cache_if_made.load(std::memory_order_acquire);
  if (c == nullptr || device < 0 || device >= c->count) {
    return 0;
  }
  return c->generations[static_cast<std::size_t>(device)].load(std::memory_order_acquire);
}

namespace {
// A token of another context: the driver's word. Apart (not inlined), so that the primary check
// saves no registers and sets up no frame (issue 37).
[[gnu::noinline]] bool context_alive_by_driver_id(CUcontext handle, unsigned long long id) noexcept {
  try {
    unsigned long long now = 0;
    return drv::cuCtxGetId(handle, &now) == CUDA_SUCCESS && now == id;
  } catch (...) {
    return true;  // cannot tell: act as before, the destroy call reports a failure itself
  }
}
}  // namespace

// Here, next to the cache, so that a primary token's check is one load and a compare after inlining
// (the destructors of events, streams and buffers make it).
bool context_token::alive_by_id() const noexcept {
  if ((id & primary_token_bit) != 0) {
    const int device = static_cast<int>((id >> 32) & 0x7fffffffu);
    const primary_context_cache* c = cache_if_made.load(std::memory_order_acquire);
    const unsigned generation = c != nullptr && device < c->count
                                    ? c->generations[static_cast<std::size_t>(device)].load(std::memory_order_acquire)
                                    : 0;  // as primary_context_generation, read here without a call
    return id == primary_token(device, generation);
  }
  return context_alive_by_driver_id(handle, id);
}

context_token primary_context_token(const device& dev) {
  const int ordinal = dev.ordinal();
  const auto index = static_cast<std::size_t>(ordinal);
  // The common case, the context retained already: three loads, no call.
  if (const primary_context_cache* c = cache_if_made.load(std::memory_order_acquire);
      c != nullptr && ordinal >= 0 && ordinal < c->count) [[likely]] {
    if (const CUcontext ctx = c->slots[index].load(std::memory_order_acquire); ctx != nullptr) [[likely]] {
      return {ctx, primary_token(ordinal, c->generations[index].load(std::memory_order_acquire))};
    }
  }
  const CUcontext ctx = dev.primary_context().native_handle();  // retains it on first use; throws for a bad ordinal
  return {ctx, primary_token(ordinal, primary_context_generation(ordinal))};
}
}  // namespace detail

int device_count() {
  int count = 0;
  CUresult status = drv::cuDeviceGetCount(&count);
  if (status == CUDA_ERROR_NO_DEVICE || status == CUDA_ERROR_NOT_INITIALIZED) {
    return 0;  // cuInit reported that there is no device
  }
  check(status, "cuDeviceGetCount");
  return count;
}

device_range devices() { return device_range(device_count()); }

device::device(int ordinal) : handle_(0) {
  int count = device_count();
  if (ordinal < 0 || ordinal >= count) {
    std::string valid = count == 0 ? "no device is visible" : "valid ordinals are 0 to " + std::to_string(count - 1);
    throw error(CUDA_ERROR_INVALID_DEVICE, "cuDeviceGet",
                "ordinal " + std::to_string(ordinal) + ": " + valid + " (CUDA_VISIBLE_DEVICES applies)");
  }
  check(drv::cuDeviceGet(&handle_, ordinal), "cuDeviceGet");
}

std::string device::name() const {
  char buffer[256] = {};
  check(drv::cuDeviceGetName(buffer, static_cast<int>(sizeof(buffer)), handle_), "cuDeviceGetName",
        [&] { return device_context(handle_); });
  return buffer;
}

device_uuid device::uuid() const {
  CUuuid raw{};
  check(drv::cuDeviceGetUuid(&raw, handle_), "cuDeviceGetUuid", [&] { return device_context(handle_); });
  device_uuid out{};
  for (std::size_t i = 0; i < out.bytes.size(); ++i) {
    out.bytes[i] = static_cast<unsigned char>(raw.bytes[i]);
  }
  return out;
}

std::string device_uuid::to_string() const {
  std::string out = "GPU-";
  char hex[3];
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) {
      out += '-';
    }
    std::snprintf(hex, sizeof(hex), "%02x", static_cast<unsigned int>(bytes[i]));
    out += hex;
  }
  return out;
}

std::string device::pci_bus_id() const {
  char buffer[64] = {};
  check(drv::cuDeviceGetPCIBusId(buffer, static_cast<int>(sizeof(buffer)), handle_), "cuDeviceGetPCIBusId",
        [&] { return device_context(handle_); });
  std::string out = buffer;
  for (char& c : out) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

cudrv::compute_capability device::compute_capability() const {
  return {attribute(device_attributes::compute_capability_major),
          attribute(device_attributes::compute_capability_minor)};
}

std::string device::arch() const { return "sm_" + std::to_string(compute_capability().as_int()); }

std::size_t device::total_memory() const {
  std::size_t bytes = 0;
  check(drv::cuDeviceTotalMem(&bytes, handle_), "cuDeviceTotalMem", [&] { return device_context(handle_); });
  return bytes;
}

std::size_t device::free_memory() const {
  context_guard guard(primary_context());
  std::size_t free = 0;
  std::size_t total = 0;
  check(drv::cuMemGetInfo(&free, &total), "cuMemGetInfo", [&] { return device_context(handle_); });
  return free;
}

int device::attribute(CUdevice_attribute attr) const {
  int value = 0;
  check(drv::cuDeviceGetAttribute(&value, attr, handle_), "cuDeviceGetAttribute",
        [&] { return device_context(handle_) + ", attribute " + std::to_string(static_cast<int>(attr)); });
  return value;
}

bool device::can_access_peer(const device& peer) const {
  if (peer.handle_ == handle_) {
    return false;
  }
  int can = 0;
  check(drv::cuDeviceCanAccessPeer(&can, handle_, peer.handle_), "cuDeviceCanAccessPeer",
        [&] { return device_context(handle_) + " -> " + device_context(peer.handle_); });
  return can != 0;
}

int device::p2p_attribute(CUdevice_P2PAttribute attr, const device& peer) const {
  int value = 0;
  check(drv::cuDeviceGetP2PAttribute(&value, attr, handle_, peer.handle_), "cuDeviceGetP2PAttribute",
        [&] { return device_context(handle_) + " -> " + device_context(peer.handle_); });
  return value;
}

void device::enable_peer_access(const device& peer) const {
  primary_context().enable_peer_access(peer.primary_context());
}

void device::disable_peer_access(const device& peer) const {
  primary_context().disable_peer_access(peer.primary_context());
}

std::pair<int, int> device::stream_priority_range() const { return primary_context().stream_priority_range(); }

void device::synchronize() const { primary_context().synchronize(); }

device device::current() { return context_ref::current().device(); }

void device::set_current() const {
  check(drv::cuCtxSetCurrent(primary_context().native_handle()), "cuCtxSetCurrent",
        [&] { return device_context(handle_); });
}

context_ref device::primary_context() const {
  primary_context_cache& c = cache();
  if (handle_ < 0 || handle_ >= c.count) [[unlikely]] {
    throw error(CUDA_ERROR_INVALID_DEVICE, "cudrv::device::primary_context",
                "device " + std::to_string(static_cast<int>(handle_)) + " of " + std::to_string(c.count) + " visible");
  }
  auto& slot = c.slots[static_cast<std::size_t>(handle_)];
  CUcontext ctx = slot.load(std::memory_order_acquire);
  if (ctx != nullptr) [[likely]] {
    return context_ref(ctx);
  }
  std::lock_guard<std::mutex> lock(c.mutex);
  ctx = slot.load(std::memory_order_relaxed);
  if (ctx == nullptr) {
    check(drv::cuDevicePrimaryCtxRetain(&ctx, handle_), "cuDevicePrimaryCtxRetain",
          [&] { return device_context(handle_); });
    slot.store(ctx, std::memory_order_release);
    keep_freed_pool_memory(handle_);
  }
  return context_ref(ctx);
}

bool device::primary_context_active() const {
  unsigned int flags = 0;
  int active = 0;
  check(drv::cuDevicePrimaryCtxGetState(handle_, &flags, &active), "cuDevicePrimaryCtxGetState",
        [&] { return device_context(handle_); });
  return active != 0;
}

unsigned int device::primary_context_flags() const {
  unsigned int flags = 0;
  int active = 0;
  check(drv::cuDevicePrimaryCtxGetState(handle_, &flags, &active), "cuDevicePrimaryCtxGetState",
        [&] { return device_context(handle_); });
  return flags;
}

void device::reset_primary_context() const {
  primary_context_cache& c = cache();
  if (handle_ < 0 || handle_ >= c.count) [[unlikely]] {
    throw error(CUDA_ERROR_INVALID_DEVICE, "cudrv::device::reset_primary_context",
                "device " + std::to_string(static_cast<int>(handle_)) + " of " + std::to_string(c.count) + " visible");
  }
  const auto index = static_cast<std::size_t>(handle_);
  std::lock_guard<std::mutex> lock(c.mutex);
  CUcontext before = c.slots[index].load(std::memory_order_acquire);
  bool was_current = false;
  if (before != nullptr) {  // asked before anything changes: a failure leaves the context as it was
    CUcontext current = nullptr;
    check(drv::cuCtxGetCurrent(&current), "cuCtxGetCurrent", [&] { return device_context(handle_); });
    was_current = current == before;
  }
  check(drv::cuDevicePrimaryCtxReset(handle_), "cuDevicePrimaryCtxReset", [&] { return device_context(handle_); });
  // From here on, tokens taken before the reset no longer name a live context.
  c.generations[index].fetch_add(1, std::memory_order_acq_rel);
  if (before == nullptr) {
    return;  // cudrv held no reference: the context stays inactive until something retains it
  }
  // A reset keeps the references (cudrv's among them) but leaves the context inactive; a retain makes it
  // usable again. The extra reference is given back at once, so cudrv still holds exactly one.
  CUcontext after = nullptr;
  const CUresult retained = drv::cuDevicePrimaryCtxRetain(&after, handle_);
  if (retained != CUDA_SUCCESS) {
    // cudrv's reference outlived the reset, but the handle it cached names an inactive context: forget
    // both, so that the next use of the device retains (and activates) the context afresh, holding one
    // reference again, instead of failing on the stale handle for the rest of the process.
    c.slots[index].store(nullptr, std::memory_order_release);
    detail::destroy_noexcept("cuDevicePrimaryCtxRelease", [d = handle_] { return drv::cuDevicePrimaryCtxRelease(d); });
    detail::throw_driver_error(retained, "cuDevicePrimaryCtxRetain",
                               device_context(handle_) + ", after cuDevicePrimaryCtxReset");
  }
  c.slots[index].store(after, std::memory_order_release);
  detail::destroy_noexcept("cuDevicePrimaryCtxRelease", [d = handle_] { return drv::cuDevicePrimaryCtxRelease(d); });
  if (was_current) {
    // The caller had it current: so it stays, also where the reset left no context current.
    check(drv::cuCtxSetCurrent(after), "cuCtxSetCurrent", [&] { return device_context(handle_); });
  }
  keep_freed_pool_memory(handle_);  // the reset gave the default pool its driver defaults again
}

void device::set_primary_context_flags(context_flags flags) const {
  check(drv::cuDevicePrimaryCtxSetFlags(handle_, static_cast<unsigned int>(flags)), "cuDevicePrimaryCtxSetFlags",
        [&] { return device_context(handle_); });
}

}  // namespace cudrv
