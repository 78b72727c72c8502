// GPU tier: events, timing, flags, IPC handles, ownership.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>
#include <type_traits>

#include "support/test_support.hpp"

using namespace std::chrono_literals;
using cudrv::test::catch_as;
using cudrv::test::contains;
using cudrv::test::gate;

TEST_CASE("events are untimed by default", "[gpu][event][driver_error]") {
  CUDRV_REQUIRE_GPU();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  {
    cudrv::stream s(dev);
    cudrv::event a(dev);
    cudrv::event b(dev);
    REQUIRE(bool(a));
    a.record(s);
    s.record(b);  // both spellings
    b.synchronize();
    CHECK(a.is_done());
    CHECK(b.is_done());
    auto e = catch_as<cudrv::error>([&] { (void)cudrv::elapsed_time(a, b); });
    REQUIRE(e.has_value());
    INFO(e->what());
    CHECK(e->result() == CUDA_ERROR_INVALID_HANDLE);
    CHECK(e->api() == "cuEventElapsedTime");
    CHECK(contains(e->what(), "timing"));  // says what is needed
  }
  CHECK(errors.count() == 0);
}

TEST_CASE("timed events measure a host callable that sleeps 20 ms", "[gpu][event]") {
  CUDRV_REQUIRE_GPU();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  {
    cudrv::stream s(dev);
    cudrv::event start(dev, cudrv::event_flags::timing);
    cudrv::event stop(dev, cudrv::event_flags::timing);

    const auto host_start = std::chrono::steady_clock::now();
    start.record(s);
    s.enqueue([] { std::this_thread::sleep_for(20ms); });
    stop.record(s);
    stop.synchronize();
    const auto host_elapsed = std::chrono::steady_clock::now() - host_start;
    CHECK(stop.is_done());
    CHECK(start.is_done());

    const auto gpu_elapsed = cudrv::elapsed_time(start, stop);
    static_assert(std::is_same_v<std::remove_const_t<decltype(gpu_elapsed)>, std::chrono::duration<float, std::milli>>);
    const auto host_ms = std::chrono::duration<float, std::milli>(host_elapsed);
    INFO("GPU " << gpu_elapsed.count() << " ms, host " << host_ms.count() << " ms");
    // The events straddle the 20 ms sleep, and both were recorded within the host's measurement.
    CHECK(gpu_elapsed >= 19.5ms);
    CHECK(gpu_elapsed <= host_ms + 2ms);
  }
  CHECK(errors.count() == 0);
}

TEST_CASE("is_done and synchronize follow the recorded work", "[gpu][event]") {
  CUDRV_REQUIRE_GPU();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  gate g;
  {
    cudrv::stream s(dev);
    cudrv::event ev(dev, cudrv::event_flags::blocking_sync);
    CHECK(ev.is_done());  // never recorded: nothing to wait for

    s.enqueue(g.blocker());
    ev.record(s);
    CHECK_FALSE(ev.is_done());
    g.open();
    ev.synchronize();
    CHECK(ev.is_done());

    // Recording again resets it to the new point in the stream.
    gate again;
    s.enqueue(again.blocker());
    ev.record(s);
    CHECK_FALSE(ev.is_done());
    again.open();
    s.synchronize();
    CHECK(ev.is_done());
  }
  CHECK(errors.count() == 0);
}

TEST_CASE("event flags are checked", "[gpu][event]") {
  CUDRV_REQUIRE_GPU();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  auto both = catch_as<cudrv::invalid_argument_error>(
      [&] { cudrv::event e(dev, cudrv::event_flags::timing | cudrv::event_flags::interprocess); });
  REQUIRE(both.has_value());
  CHECK(both->api() == "cudrv::event");
  CHECK(contains(both->what(), "interprocess"));
  CHECK_THROWS_AS(cudrv::event(dev, static_cast<cudrv::event_flags>(64)), cudrv::invalid_argument_error);

  // Every valid combination creates an event.
  using cudrv::event_flags;
  for (event_flags flags : {event_flags::none, event_flags::timing, event_flags::blocking_sync,
                            event_flags::timing | event_flags::blocking_sync, event_flags::interprocess,
                            event_flags::interprocess | event_flags::blocking_sync}) {
    INFO("flags " << static_cast<unsigned int>(flags));
    cudrv::event e(dev, flags);
    CHECK(bool(e));
  }
  CHECK(errors.count() == 0);
}

TEST_CASE("interprocess events export a handle", "[gpu][event][driver_error]") {
  CUDRV_REQUIRE_GPU();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  if (!dev.attribute(cudrv::device_attributes::ipc_event_supported)) {
    WARN("device 0 does not support IPC events; only the refusal is checked");
  }
  {
    // An event without event_flags::interprocess has no IPC handle: the driver's error, with a hint.
    cudrv::event local(dev);
    auto refused = catch_as<cudrv::error>([&] { (void)local.ipc_handle(); });
    REQUIRE(refused.has_value());
    INFO(refused->what());
    CHECK(refused->api() == "cuIpcGetEventHandle");
    CHECK(contains(refused->what(), "interprocess"));
  }
  if (!dev.attribute(cudrv::device_attributes::ipc_event_supported)) {
    return;
  }
  {
    cudrv::event ev(dev, cudrv::event_flags::interprocess);
    const CUipcEventHandle handle = ev.ipc_handle();
    CHECK(std::any_of(std::begin(handle.reserved), std::end(handle.reserved), [](char c) { return c != 0; }));

    cudrv::stream s(dev);
    ev.record(s);
    ev.synchronize();
    CHECK(ev.is_done());

    // Opening in the exporting process: the driver may refuse it; either way cudrv must behave.
    try {
      cudrv::event opened = cudrv::event::from_ipc_handle(dev, handle);
      REQUIRE(bool(opened));
      if (opened.native_handle() == ev.native_handle()) {
        (void)opened.release();  // never destroy the same event twice
        FAIL("cuIpcOpenEventHandle returned the exporting event's own handle");
      }
      opened.record(s);
      s.wait(opened);
      opened.synchronize();
      CHECK(opened.is_done());
    } catch (const cudrv::error& e) {
      INFO("opening in the same process was refused: " << e.what());
      CHECK(e.api() == "cuIpcOpenEventHandle");
      CHECK(e.result() != CUDA_SUCCESS);
      CHECK(contains(e.what(), cudrv::error_name(e.result())));
      CHECK(contains(e.what(), "device 0"));
    }
    s.synchronize();
  }
  CHECK(errors.count() == 0);
  INFO(errors.messages());
}

TEST_CASE("event ownership: move, move-assign, release and adopt", "[gpu][event]") {
  CUDRV_REQUIRE_GPU();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  {
    cudrv::stream s(dev);
    cudrv::event a(dev);
    const CUevent ha = a.native_handle();
    cudrv::event b(std::move(a));
    CHECK_FALSE(bool(a));
    CHECK(a.native_handle() == nullptr);
    CHECK(b.native_handle() == ha);

    auto e = catch_as<cudrv::invalid_argument_error>([&] { a.record(s); });
    REQUIRE(e.has_value());
    CHECK(e->api() == "cudrv::event::record");
    CHECK(contains(e->what(), "empty"));
    CHECK_THROWS_AS(a.synchronize(), cudrv::invalid_argument_error);
    CHECK_THROWS_AS(a.is_done(), cudrv::invalid_argument_error);
    CHECK_THROWS_AS(s.record(a), cudrv::invalid_argument_error);
    CHECK_THROWS_AS(s.wait(a), cudrv::invalid_argument_error);
    CHECK_THROWS_AS(a.ipc_handle(), cudrv::invalid_argument_error);
    CHECK_THROWS_AS(cudrv::elapsed_time(a, b), cudrv::invalid_argument_error);

    b.record(s);
    b.synchronize();
    CHECK(b.is_done());

    // Move-assigning a live event over a live one destroys the old one without an error.
    cudrv::event c(dev);
    const CUevent hc = c.native_handle();
    b = std::move(c);
    CHECK(b.native_handle() == hc);
    CHECK_FALSE(bool(c));
    cudrv::event& alias = b;
    b = std::move(alias);  // self-move keeps the event
    CHECK(b.native_handle() == hc);

    // release() / from_native_handle.
    const CUevent released = b.release();
    CHECK(released == hc);
    CHECK_FALSE(bool(b));
    cudrv::event adopted = cudrv::event::from_native_handle(released);
    CHECK(adopted.native_handle() == hc);
    adopted.record(s);
    adopted.synchronize();
    CHECK(adopted.is_done());

    // Events of an owning context work the same way.
    cudrv::context ctx(dev);
    cudrv::stream cs(ctx);
    cudrv::event ce(ctx, cudrv::event_flags::timing);
    cs.record(ce);
    ce.synchronize();
    CHECK(ce.is_done());
  }
  CHECK(errors.count() == 0);
}

// issue 37 item 1: the event pool's events are real events: they record, wait, time, and come back.
TEST_CASE("pooled events record, synchronize and time, and are reused", "[gpu][event][event-pool]") {
  CUDRV_REQUIRE_GPU();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  {
    cudrv::stream s(dev);
    cudrv::event_pool pool(dev, cudrv::event_flags::timing);
    CUevent first = nullptr;
    {
      cudrv::pooled_event start = pool.acquire();
      cudrv::pooled_event stop = pool.acquire();
      first = start.native_handle();
      start.record(s);
      s.enqueue([] { std::this_thread::sleep_for(20ms); });
      stop.record(s);
      stop.synchronize();
      CHECK(start.is_done());
      const auto gpu_elapsed = cudrv::elapsed_time(start, stop);
      INFO("GPU " << gpu_elapsed.count() << " ms");
      CHECK(gpu_elapsed >= 19.5ms);
    }
    CHECK(pool.idle() == 2);
    {
      // Reused, and following the new record: a blocked stream keeps it pending.
      gate g;
      cudrv::pooled_event again = pool.acquire();
      CHECK(again.native_handle() == first);  // the last given back comes first
      s.enqueue(g.blocker());
      again.record(s);
      CHECK_FALSE(again.is_done());
      g.open();
      again.synchronize();
      CHECK(again.is_done());
    }
    CHECK(pool.size() == 2);
    s.synchronize();
  }
  CHECK(errors.count() == 0);
}

TEST_CASE("a pooled event outlives its pool object and still works", "[gpu][event][event-pool]") {
  CUDRV_REQUIRE_GPU();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  {
    cudrv::stream s(dev);
    std::optional<cudrv::event_pool> pool(std::in_place, dev);
    cudrv::pooled_event e = pool->acquire();
    pool.reset();
    e.record(s);
    e.synchronize();
    CHECK(e.is_done());
    s.wait(e);
    s.synchronize();
  }
  CHECK(errors.count() == 0);
}
