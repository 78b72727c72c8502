// cudrv::event_pool and cudrv::pooled_event against the stand-in driver (issue 37, item 1): events
// recycled without driver calls, the pool's flags and context, misuse refused, the pool's state kept
// alive by the events still out, thread safety, and no event left behind (the fake counts them).
#include <catch2/catch.hpp>

#include <cudrv/cudrv.hpp>

#include <barrier>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "fake_driver/fake_hooks.hpp"

namespace {

// The events the fake holds now (its "events N" line of fake_cuda_live_objects).
long long live_events() {
  auto* live = cudrv::test::fake_hook<std::size_t(char*, std::size_t)>("fake_cuda_live_objects");
  std::string text(live(nullptr, 0) + 1, '\0');
  text.resize(live(text.data(), text.size()));
  const std::string key = "events ";
  const std::size_t at = text.find(key);
  REQUIRE(at != std::string::npos);
  return std::atoll(text.c_str() + at + key.size());
}

// How many driver entry points f calls (the fake's traced dry run).
template <class F>
long long driver_calls(F&& f) {
  cudrv::test::fake_injection inject;
  inject.arm(0, CUDA_SUCCESS, 1);
  f();
  return inject.disarm();
}

// Counts what the destruction handler receives, for the scope.
struct outlived_recorder {
  static inline std::atomic<int> outlived{0};
  cudrv::destruction_error_handler previous;
  outlived_recorder() {
    outlived = 0;
    previous = cudrv::set_destruction_error_handler([](const cudrv::error& e) noexcept {
      if (e.code() == CUDA_ERROR_CONTEXT_IS_DESTROYED && e.source() == cudrv::error_source::cudrv) {
        ++outlived;
      }
    });
  }
  ~outlived_recorder() { cudrv::set_destruction_error_handler(previous); }
};

// The refused forms.
static_assert(!std::is_constructible_v<cudrv::event_pool, cudrv::context&&>);
static_assert(!std::is_constructible_v<cudrv::event_pool, cudrv::primary_context&&>);
static_assert(!std::is_copy_constructible_v<cudrv::event_pool> && !std::is_copy_constructible_v<cudrv::pooled_event>);
static_assert(!std::is_convertible_v<cudrv::pooled_event, cudrv::event_ref>);
static_assert(std::is_convertible_v<const cudrv::pooled_event&, cudrv::event_ref>);
static_assert(std::is_nothrow_move_constructible_v<cudrv::pooled_event> &&
              std::is_nothrow_move_assignable_v<cudrv::event_pool>);

}  // namespace

TEST_CASE("event pool: events are recycled without a driver call", "[fake-driver][event-pool]") {
  const long long before = live_events();
  cudrv::device d1(1);
  cudrv::stream s(d1);
  {
    cudrv::event_pool pool(d1);
    CHECK(pool.size() == 0);
    CUevent first = nullptr;
    {
      cudrv::pooled_event e = pool.acquire();  // none idle: created
      REQUIRE(e);
      first = e.native_handle();
      e.record(s);
      CHECK(pool.idle() == 0);
      CHECK(pool.size() == 1);
    }
    CHECK(pool.idle() == 1);
    CHECK(live_events() == before + 1);
    // Recycled: the same event, and no entry point called (the primary context's check is cudrv's own).
    CUevent again = nullptr;
    CHECK(driver_calls([&] {
            cudrv::pooled_event e = pool.acquire();
            again = e.native_handle();
          }) == 0);
    CHECK(again == first);
    pool.reserve(3);
    CHECK(pool.idle() == 3);
    CHECK(live_events() == before + 3);
    cudrv::pooled_event a = pool.acquire();
    cudrv::pooled_event b = pool.acquire();
    CHECK(a != b);
    cudrv::pooled_event moved = std::move(a);
    CHECK_FALSE(a);  // NOLINT(bugprone-use-after-move): a moved-from pooled event is empty
    a.reset();       // nothing to give back
    moved.reset();
    CHECK(pool.idle() == 2);
    b = pool.acquire();  // gives b's event back, holds another
    CHECK(pool.idle() == 2);
    CHECK(pool.size() == 3);
  }
  CHECK(live_events() == before);
}

TEST_CASE("event pool: the flags are the pool's, and those a pool cannot keep are refused",
          "[fake-driver][event-pool]") {
  cudrv::device d1(1);
  cudrv::event_pool timed(d1, cudrv::event_flags::timing);
  CHECK(timed.flags() == cudrv::event_flags::timing);
  CHECK(timed.context() == d1.primary_context());
  cudrv::stream s(d1);
  cudrv::pooled_event start = timed.acquire();
  cudrv::pooled_event stop = timed.acquire();
  start.record(s);
  stop.record(s);
  stop.synchronize();
  CHECK(cudrv::elapsed_time(start, stop).count() >= 0.0f);
  CHECK_THROWS_AS(cudrv::event_pool(d1, cudrv::event_flags::interprocess), cudrv::invalid_argument_error);
  CHECK_THROWS_AS(cudrv::event_pool(d1, cudrv::event_flags::interprocess | cudrv::event_flags::timing),
                  cudrv::invalid_argument_error);
  CHECK_THROWS_AS(cudrv::event_pool(d1, static_cast<cudrv::event_flags>(64)), cudrv::invalid_argument_error);
  cudrv::event_pool blocking(d1, cudrv::event_flags::blocking_sync);
  CHECK(blocking.acquire().is_done());
}

TEST_CASE("event pool: events are made in the pool's context, whatever is current", "[fake-driver][event-pool]") {
  outlived_recorder handler;
  cudrv::device d1(1);
  std::optional<cudrv::context> mine(std::in_place, d1);
  cudrv::context other(d1);
  const long long before = live_events();
  {
    cudrv::context_guard current(other);
    cudrv::event_pool pool(*mine);
    CHECK(pool.context() == *mine);
    cudrv::pooled_event e = pool.acquire();
    auto* now = cudrv::test::fake_hook<CUcontext()>("fake_cuda_current_context");
    CHECK(now() == other.native_handle());  // switched for the creation, and back
    CHECK(live_events() == before + 1);
    mine.reset();  // the fake destroys a context's events with it: the event was mine's, not other's
    CHECK(live_events() == before);
  }  // nothing destroyed twice: the handler is told instead
  CHECK(handler.outlived == 1);
}

TEST_CASE("event pool: misuse is refused with typed errors", "[fake-driver][event-pool]") {
  cudrv::device d1(1);
  cudrv::event_pool pool(d1);
  cudrv::event_pool taken = std::move(pool);
  CHECK_FALSE(pool);  // NOLINT(bugprone-use-after-move): a moved-from pool is empty
  CHECK(taken);
  CHECK_THROWS_AS((void)pool.acquire(), cudrv::invalid_argument_error);
  CHECK_THROWS_AS(pool.reserve(1), cudrv::invalid_argument_error);
  CHECK_THROWS_AS((void)pool.size(), cudrv::invalid_argument_error);
  cudrv::pooled_event empty;
  CHECK_FALSE(empty);
  cudrv::stream s(d1);
  CHECK_THROWS_AS(empty.record(s), cudrv::invalid_argument_error);
  CHECK_THROWS_AS(empty.synchronize(), cudrv::invalid_argument_error);

  // A driver failure on creation is the driver's error, and leaves the pool as it was.
  cudrv::test::fake_injection inject;
  const long long k = inject.find([&] { cudrv::event_pool(d1).reserve(1); }, "cuEventCreate");
  REQUIRE(k > 0);
  cudrv::event_pool failing(d1);
  inject.fail_call(k, CUDA_ERROR_OUT_OF_MEMORY);
  try {
    failing.reserve(1);
    FAIL("no error");
  } catch (const cudrv::error& e) {
    CHECK(e.code() == CUDA_ERROR_OUT_OF_MEMORY);
  }
  inject.disarm();
  CHECK(failing.size() == 0);
  CHECK(failing.acquire());
}

TEST_CASE("event pool: a pooled event keeps the pool's state, and a dead context's events are not destroyed twice",
          "[fake-driver][event-pool]") {
  cudrv::device d1(1);
  const long long before = live_events();
  cudrv::stream s(d1);
  {
    std::optional<cudrv::event_pool> pool(std::in_place, d1);
    pool->reserve(2);
    cudrv::pooled_event out = pool->acquire();
    pool.reset();  // the idle event goes now, the one out when it is given back
    CHECK(live_events() == before + 1);
    out.record(s);  // still a valid event
    out.synchronize();
  }
  CHECK(live_events() == before);

  outlived_recorder handler;
  std::optional<cudrv::context> ctx(std::in_place, d1);
  std::optional<cudrv::event_pool> pool(std::in_place, *ctx);
  pool->reserve(1);
  std::optional<cudrv::pooled_event> out(std::in_place, pool->acquire());
  ctx.reset();  // takes the events with it
  CHECK_THROWS_AS((void)pool->acquire(), cudrv::invalid_argument_error);
  out.reset();   // back into the pool: nothing destroyed
  pool.reset();  // its events went with the context: nothing destroyed, the handler is told
  CHECK(handler.outlived == 1);
  CHECK(live_events() == before);
}

TEST_CASE("event pool: threads acquire and give back at once", "[fake-driver][event-pool][threads]") {
  cudrv::device d1(1);
  const long long before = live_events();
  constexpr int threads = 8;
  constexpr int rounds = 200;
  {
    cudrv::event_pool pool(d1);
    std::barrier start(threads);
    std::atomic<int> failures{0};
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&] {
        try {
          cudrv::stream s(d1);
          start.arrive_and_wait();
          for (int i = 0; i < rounds; ++i) {
            cudrv::pooled_event a = pool.acquire();
            cudrv::pooled_event b = pool.acquire();
            if (a == b) {
              ++failures;  // one event handed out twice
            }
            a.record(s);
            b.record(s);
          }
        } catch (...) {
          ++failures;
        }
      });
    }
    for (std::thread& w : workers) {
      w.join();
    }
    CHECK(failures == 0);
    CHECK(pool.size() <= 2 * threads);
    CHECK(pool.idle() == pool.size());
    CHECK(live_events() == before + static_cast<long long>(pool.size()));
  }
  CHECK(live_events() == before);
}
