// Memory-pressure notifications (issue 34 part 8) against the stand-in driver (fake_cuda.cpp): a subscription
// registers and unregisters, a notification the fake delivers on a thread of its own reaches the callable
// decoded, a pool trims itself on pressure, and (un)registering from a callback is refused before the driver.
#include <catch2/catch.hpp>

#include <cudrv/cudrv.hpp>

#include <atomic>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fake_driver/fake_hooks.hpp"
#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;

namespace {

// Delivers a notification of `type` with `bytes` over budget to device `device`'s callbacks, on a thread
// of the fake; returns how many driver callbacks ran.
int deliver(int device, unsigned type, unsigned long long bytes) {
  return cudrv::test::fake_hook<int(int, unsigned, unsigned long long)>(
      "fake_cuda_deliver_async_notification")(device, type, bytes);
}

std::atomic<int> destruction_errors{0};
std::atomic<int> last_destruction_code{0};
void count_destruction_error(const cudrv::error& e) noexcept {
  ++destruction_errors;
  last_destruction_code = e.code();
}

}  // namespace

TEST_CASE("a subscription registers, receives decoded notifications and unregisters", "[fake-driver][notification]") {
  cudrv::device dev{1};
  REQUIRE(cudrv::async_notifications_supported());
  const long long registered = cudrv::test::fake_counter("notification_registrations");
  const long long unregistered = cudrv::test::fake_counter("notification_unregistrations");
  std::vector<cudrv::async_notification> seen;
  std::thread::id caller = std::this_thread::get_id();
  std::thread::id ran_on{};
  {
    cudrv::async_notification_subscription s(dev, [&](const cudrv::async_notification& n) {
      seen.push_back(n);
      ran_on = std::this_thread::get_id();
    });
    CHECK(static_cast<bool>(s));
    CHECK(s.device_ordinal() == 1);
    CHECK(cudrv::test::fake_counter("notification_registrations") == registered + 1);
    CHECK(deliver(1, CU_ASYNC_NOTIFICATION_TYPE_OVER_BUDGET, 123456789ULL) == 1);
    CHECK(deliver(0, CU_ASYNC_NOTIFICATION_TYPE_OVER_BUDGET, 1) == 0);  // another device's: not ours
    CHECK(deliver(1, 7, 42) == 1);                                      // a kind cudrv does not know
    REQUIRE(seen.size() == 2);
    CHECK(seen[0].type == cudrv::async_notification_type::over_budget);
    CHECK(seen[0].bytes_over_budget == 123456789ULL);
    CHECK(seen[0].device_ordinal == 1);
    CHECK(seen[0].raw_type == 1);
    CHECK(seen[1].type == cudrv::async_notification_type::unknown);
    CHECK(seen[1].raw_type == 7);
    CHECK(seen[1].bytes_over_budget == 0);  // not read for a kind without it
    CHECK(ran_on != caller);                // the driver's thread, not the caller's

    // A move hands the registration over; the moved-from object is empty and its reset does nothing.
    cudrv::async_notification_subscription moved = std::move(s);
    CHECK_FALSE(static_cast<bool>(s));  // NOLINT(bugprone-use-after-move)
    CHECK(s.device_ordinal() == -1);
    s.reset();
    CHECK(cudrv::test::fake_counter("notification_unregistrations") == unregistered);
    CHECK(deliver(1, CU_ASYNC_NOTIFICATION_TYPE_OVER_BUDGET, 5) == 1);
    CHECK(seen.size() == 3);
  }
  // The destructor unregistered: the driver calls nothing any more.
  CHECK(cudrv::test::fake_counter("notification_unregistrations") == unregistered + 1);
  CHECK(deliver(1, CU_ASYNC_NOTIFICATION_TYPE_OVER_BUDGET, 5) == 0);
  CHECK(seen.size() == 3);
  CHECK(contains(cudrv::test::fake_log(), "async_unregister device 1"));
}

TEST_CASE("a pool subscribed with trim_on_pressure trims on an over-budget notification",
          "[fake-driver][notification]") {
  cudrv::device dev{1};
  cudrv::memory_pool pool(dev);
  const long long trims = cudrv::test::fake_counter("pool_trims");
  {
    cudrv::async_notification_subscription trim = pool.trim_on_pressure(dev, 4096);
    CHECK(deliver(1, 7, 0) == 1);  // not over budget: nothing trimmed
    CHECK(cudrv::test::fake_counter("pool_trims") == trims);
    const std::size_t before = cudrv::test::fake_log().size();
    CHECK(deliver(1, CU_ASYNC_NOTIFICATION_TYPE_OVER_BUDGET, 1 << 20) == 1);
    CHECK(cudrv::test::fake_counter("pool_trims") == trims + 1);
    std::ostringstream handle;
    handle << static_cast<const void*>(pool.native_handle());
    CHECK(contains(cudrv::test::fake_log().substr(before), "pool_trim " + handle.str() + " to 4096"));
  }
  CHECK(deliver(1, CU_ASYNC_NOTIFICATION_TYPE_OVER_BUDGET, 1 << 20) == 0);
  CHECK(cudrv::test::fake_counter("pool_trims") == trims + 1);
  // A view of the device's default pool subscribes the same way.
  cudrv::async_notification_subscription by_view = cudrv::default_memory_pool(dev).trim_on_pressure(dev);
  CHECK(deliver(1, CU_ASYNC_NOTIFICATION_TYPE_OVER_BUDGET, 1) == 1);
  CHECK(cudrv::test::fake_counter("pool_trims") == trims + 2);
  // An empty pool is refused.
  cudrv::memory_pool gone = std::move(pool);
  auto e = catch_as<cudrv::invalid_argument_error>([&] { (void)pool.trim_on_pressure(dev); });  // NOLINT
  REQUIRE(e);
  CHECK(contains(e->what(), "trim_on_pressure"));
}

TEST_CASE("registering or unregistering from a callback is refused before the driver", "[fake-driver][notification]") {
  cudrv::device dev{1};
  const long long registered = cudrv::test::fake_counter("notification_registrations");
  std::optional<cudrv::not_supported_error> refused;
  cudrv::async_notification_subscription outer(dev, [&](const cudrv::async_notification&) {
    try {
      cudrv::async_notification_subscription inner(dev, [](const cudrv::async_notification&) {});
    } catch (const cudrv::not_supported_error& e) {
      refused = e;
    }
  });
  CHECK(deliver(1, CU_ASYNC_NOTIFICATION_TYPE_OVER_BUDGET, 1) == 1);
  REQUIRE(refused);
  CHECK(refused->result() == CUDA_ERROR_NOT_PERMITTED);
  CHECK(contains(refused->what(), "async notification callback"));
  CHECK(cudrv::test::fake_counter("notification_registrations") == registered + 1);  // only outer's

  // A subscription reset inside its own callback: the driver would refuse, so cudrv reports it to the
  // destruction handler, and the registration, left with the driver, calls nothing any more.
  const auto previous = cudrv::set_destruction_error_handler(&count_destruction_error);
  destruction_errors = 0;
  int calls = 0;
  cudrv::async_notification_subscription self;
  self = cudrv::async_notification_subscription(dev, [&](const cudrv::async_notification&) {
    ++calls;
    self.reset();
  });
  const long long unregistered = cudrv::test::fake_counter("notification_unregistrations");
  CHECK(deliver(1, CU_ASYNC_NOTIFICATION_TYPE_OVER_BUDGET, 1) == 2);  // outer's and self's
  CHECK(calls == 1);
  CHECK_FALSE(static_cast<bool>(self));
  CHECK(destruction_errors == 1);
  CHECK(last_destruction_code == CUDA_ERROR_NOT_PERMITTED);
  CHECK(cudrv::test::fake_counter("notification_unregistrations") == unregistered);
  CHECK(deliver(1, CU_ASYNC_NOTIFICATION_TYPE_OVER_BUDGET, 1) == 2);  // still registered with the driver
  CHECK(calls == 1);                                                  // but calling nothing
  cudrv::set_destruction_error_handler(previous);
}

TEST_CASE("an exception thrown by a callback is dropped and other callbacks still run", "[fake-driver][notification]") {
  cudrv::device dev{1};
  // Registrations other cases left with the fake (a subscription reset in its own callback): a kind
  // cudrv does not know reaches them, and none of them calls anything.
  const int others = deliver(1, 7, 0);
  int reached = 0;
  cudrv::async_notification_subscription thrower(dev, [](const cudrv::async_notification&) {
    throw std::runtime_error("from a callback");
  });
  cudrv::async_notification_subscription counter(dev, [&](const cudrv::async_notification&) { ++reached; });
  CHECK(deliver(1, CU_ASYNC_NOTIFICATION_TYPE_OVER_BUDGET, 1) == others + 2);
  CHECK(reached == 1);
}
