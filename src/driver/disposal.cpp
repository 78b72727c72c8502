// cudrv's disposal thread: see disposal.hpp.
#include "driver/disposal.hpp"
#include "driver/driver_api.hpp"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

namespace cudrv::detail {
namespace {

thread_local bool on_disposal_thread = false;

struct disposal_queue {
  std::mutex mutex;
  std::condition_variable work;
  std::condition_variable progress;
  std::deque<std::pair<disposal_fn, void*>> items;
  std::uint64_t pushed = 0;                   // under mutex
  std::uint64_t done = 0;                     // under mutex
  std::atomic<std::uint64_t> outstanding{0};  // pushed - done, readable without the lock
  bool started = false;

  void run() noexcept {
    on_disposal_thread = true;
    std::unique_lock lock(mutex);
    for (;;) {
      work.wait(lock, [this] { return !items.empty(); });
      const auto [destroy, object] = items.front();
      items.pop_front();
      lock.unlock();
      destroy(object);  // may free CUDA memory or unload a library: allowed on this thread
      lock.lock();
      ++done;
      outstanding.fetch_sub(1, std::memory_order_release);
      progress.notify_all();
    }
  }
};

disposal_queue& disposals() {
  static auto* q = new disposal_queue;  // never destroyed: its thread runs until the process ends
  return *q;
}

}  // namespace

bool dispose_on_disposal_thread(disposal_fn destroy, void* object) noexcept {
  if (in_forked_child()) [[unlikely]] {
    return true;  // the parent's object, and no disposal thread in the child: left alone
  }
  try {
    disposal_queue& q = disposals();
    std::lock_guard lock(q.mutex);
    if (!q.started) {
      std::thread([&q] { q.run(); }).detach();
      q.started = true;
    }
    q.items.emplace_back(destroy, object);
    ++q.pushed;
    q.outstanding.fetch_add(1, std::memory_order_release);
    q.work.notify_one();
    return true;
  } catch (...) {
    return false;
  }
}

void await_disposals() noexcept {
  try {
    disposal_queue& q = disposals();
    if (q.outstanding.load(std::memory_order_acquire) == 0 || on_disposal_thread || in_forked_child()) [[likely]] {
      return;
    }
    std::unique_lock lock(q.mutex);
    const std::uint64_t target = q.pushed;
    q.progress.wait(lock, [&] { return q.done >= target; });
  } catch (...) {
  }
}

}  // namespace cudrv::detail
