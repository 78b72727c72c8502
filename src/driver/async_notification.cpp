// Memory-pressure notifications (<cudrv/async_notification.hpp>): cuDeviceRegisterAsyncNotification and
// its unregistration, behind a registry that makes a late callback harmless.
//
// The driver receives an id as its user data, never a pointer: the callback looks the id up in the
// registry and holds the entry (a shared_ptr) while it runs, so an unregistration that races with a
// callback on the driver's thread cannot free what the callback uses. The unregistration then waits for
// the callbacks of its id that run on other threads, so that a callable referring to a pool or a buffer
// is never called after its subscription is gone.
#include "cudrv/async_notification.hpp"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "cudrv/error.hpp"
#include "driver/driver_api.hpp"

namespace cudrv {

namespace {

struct subscription_entry {
  detail::notification_callable callable;
  int device = -1;
  CUasyncCallbackHandle handle = nullptr;
  int running = 0;  // callbacks of this entry running now (guarded by the registry's mutex)
  subscription_entry() = default;
  subscription_entry(const subscription_entry&) = delete;
  subscription_entry& operator=(const subscription_entry&) = delete;
  ~subscription_entry() {
    if (callable.destroy != nullptr) {
      callable.destroy(callable.object);
    }
  }
};

struct registry_t {
  std::mutex mutex;
  std::condition_variable idle;
  std::map<unsigned long long, std::shared_ptr<subscription_entry>> entries;
  unsigned long long next_id = 1;
};

registry_t& registry() {
  static auto* r = new registry_t;  // never destroyed: a driver thread may call back during exit
  return *r;
}

// Set while this thread runs a subscription's callable: cuda.h forbids (un)registering there.
thread_local int in_callback = 0;
// The entry whose callable this thread runs (its unregistration must not wait for itself).
thread_local const subscription_entry* running_here = nullptr;

void CUDAAPI trampoline(CUasyncNotificationInfo* info, void* user_data, CUasyncCallbackHandle) {
  const auto id = static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(user_data));
  registry_t& r = registry();
  std::shared_ptr<subscription_entry> entry;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.entries.find(id);
    if (it == r.entries.end() || info == nullptr) {
      return;  // unregistered meanwhile: nothing to call
    }
    entry = it->second;
    ++entry->running;
  }
  ++in_callback;
  const subscription_entry* outer = running_here;
  running_here = entry.get();
  try {
    entry->callable.invoke(entry->callable.object, async_notification::from_native(*info, entry->device));
  } catch (...) {
    // Dropped: the driver's thread cannot receive an exception (documented).
  }
  running_here = outer;
  --in_callback;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    --entry->running;
    entry.reset();  // under the lock: once unsubscribe has seen running drop, it holds the last reference,
  }                 // so the callable is never destroyed on the driver's thread after it returned
  r.idle.notify_all();
}

[[noreturn]] void refuse_in_callback(const char* api) {
  throw not_supported_error(CUDA_ERROR_NOT_PERMITTED, api,
                            "called from an async notification callback, where cuda.h forbids registering or "
                            "unregistering notifications: hand the work to a thread of the application");
}

std::atomic<int> notification_state{-1};

}  // namespace

async_notification async_notification::from_native(const CUasyncNotificationInfo& info, int ordinal) noexcept {
  async_notification n;
  // The type is read as the integer it is: a newer driver's kind is not a value of this toolkit's enum
  // (loading it as the enum would be undefined).
  unsigned raw = 0;
  static_assert(sizeof(raw) == sizeof(info.type));
  std::memcpy(&raw, &info.type, sizeof(raw));
  n.raw_type = raw;
  n.device_ordinal = ordinal;
  if (raw == static_cast<unsigned>(CU_ASYNC_NOTIFICATION_TYPE_OVER_BUDGET)) {
    n.type = async_notification_type::over_budget;
    n.bytes_over_budget = info.info.overBudget.bytesOverBudget;
  }
  return n;
}

bool async_notifications_supported() {
  int known = notification_state.load(std::memory_order_acquire);
  if (known < 0) {
    try {
      (void)detail::drv::cuDeviceRegisterAsyncNotification_entry.get();
      (void)detail::drv::cuDeviceUnregisterAsyncNotification_entry.get();
      known = 1;
    } catch (const not_supported_error&) {
      known = 0;
    }
    notification_state.store(known, std::memory_order_release);
  }
  return known == 1;
}

namespace detail {

unsigned long long subscribe_async_notifications(int ordinal, notification_callable callable) {
  const char* api = "cudrv::async_notification_subscription";
  std::shared_ptr<subscription_entry> entry;
  try {
    entry = std::make_shared<subscription_entry>();
  } catch (...) {
    callable.destroy(callable.object);
    throw;
  }
  entry->callable = callable;  // from here on the entry destroys it
  entry->device = ordinal;
  if (in_callback > 0) {
    refuse_in_callback(api);
  }
  registry_t& r = registry();
  unsigned long long id = 0;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    id = r.next_id++;
    r.entries.emplace(id, entry);  // before the driver: a notification may come at once
  }
  CUasyncCallbackHandle handle = nullptr;
  CUresult status = CUDA_ERROR_NOT_SUPPORTED;
  try {
    CUdevice dev = 0;
    status = drv::cuDeviceGet(&dev, ordinal);  // the driver's handle, not the ordinal (equal today, not promised)
    if (status == CUDA_SUCCESS) {
      status =
          drv::cuDeviceRegisterAsyncNotification(dev, &trampoline,
                                                 reinterpret_cast<void*>(static_cast<std::uintptr_t>(id)), &handle);
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(r.mutex);
    r.entries.erase(id);
    throw;  // not_supported_error: the driver predates CUDA 12.4
  }
  if (status != CUDA_SUCCESS) {
    {
      std::lock_guard<std::mutex> lock(r.mutex);
      r.entries.erase(id);
    }
    check(status, "cuDeviceRegisterAsyncNotification", [&] { return "device " + std::to_string(ordinal); });
  }
  std::lock_guard<std::mutex> lock(r.mutex);
  entry->handle = handle;
  return id;
}

void unsubscribe_async_notifications(unsigned long long id) noexcept {
  registry_t& r = registry();
  std::shared_ptr<subscription_entry> entry;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.entries.find(id);
    if (it == r.entries.end()) {
      return;
    }
    entry = it->second;
  }
  if (in_callback > 0) {
    // The driver would refuse (CUDA_ERROR_NOT_PERMITTED): the registration stays, calling nothing.
    report_destruction_error(CUDA_ERROR_NOT_PERMITTED, "cuDeviceUnregisterAsyncNotification");
  } else {
    destroy_noexcept("cuDeviceUnregisterAsyncNotification", [&] {
      CUdevice dev = 0;
      const CUresult got = drv::cuDeviceGet(&dev, entry->device);
      return got != CUDA_SUCCESS ? got : drv::cuDeviceUnregisterAsyncNotification(dev, entry->handle);
    });
  }
  std::unique_lock<std::mutex> lock(r.mutex);
  r.entries.erase(id);
  // Wait for the callbacks running on other threads; one running on this thread (a subscription reset in
  // its own callback) cannot finish before this returns, so the wait leaves it out.
  const int mine = running_here == entry.get() ? 1 : 0;
  r.idle.wait(lock, [&] { return entry->running <= mine; });
}

}  // namespace detail

}  // namespace cudrv
