// profiler_range (issue 34 part 9), against the stand-in driver of fake_cuda.cpp, whose cuProfilerStart and
// cuProfilerStop count ("profiler_starts", "profiler_stops") and note the context current for the call.
// Device 1 is the usable device (device 0 is taken by another process in the fake).
#include <catch2/catch.hpp>

#include <cudrv/cudrv.hpp>

#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

#include "fake_driver/fake_hooks.hpp"
#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;

static_assert(!std::is_copy_constructible_v<cudrv::profiler_range>);
static_assert(!std::is_copy_assignable_v<cudrv::profiler_range>);
static_assert(std::is_nothrow_move_constructible_v<cudrv::profiler_range>);
static_assert(std::is_nothrow_move_assignable_v<cudrv::profiler_range>);
static_assert(std::is_nothrow_destructible_v<cudrv::profiler_range>);
static_assert(!std::is_convertible_v<cudrv::context_ref, cudrv::profiler_range>);  // explicit

namespace {

std::string as_text(CUcontext ctx) {
  std::ostringstream o;
  o << static_cast<const void*>(ctx);
  return o.str();
}

struct profiler_counts {
  cudrv::test::fake_probe f;
  long long starts0 = f.counter("profiler_starts");
  long long stops0 = f.counter("profiler_stops");
  long long starts() const { return f.counter("profiler_starts") - starts0; }
  long long stops() const { return f.counter("profiler_stops") - stops0; }
};

}  // namespace

TEST_CASE("profiler_range: starts in its context, stops at scope end, leaves the current context alone",
          "[fake-driver][profiler]") {
  profiler_counts n;
  const cudrv::device dev(1);
  const cudrv::context_ref ctx = dev.primary_context();
  const CUcontext before = cudrv::test::raw_current_context();
  {
    cudrv::profiler_range range(ctx);
    CHECK(static_cast<bool>(range));
    CHECK(range.context_handle() == ctx.native_handle());
    CHECK(n.starts() == 1);
    CHECK(n.stops() == 0);
    CHECK(cudrv::profiler_range::open_ranges(ctx) == 1);
    CHECK(cudrv::test::raw_current_context() == before);
  }
  CHECK(n.stops() == 1);
  CHECK(cudrv::profiler_range::open_ranges(ctx) == 0);
  CHECK(cudrv::test::raw_current_context() == before);
  // Both calls ran with the range's context current.
  const std::string log = n.f.log();
  CHECK(contains(log, "cuProfilerStart " + as_text(ctx.native_handle())));
  CHECK(contains(log, "cuProfilerStop " + as_text(ctx.native_handle())));
}

TEST_CASE("profiler_range: nested ranges count and the profiler stops when the last one ends, in any order",
          "[fake-driver][profiler]") {
  profiler_counts n;
  const cudrv::device dev(1);
  const cudrv::context_ref ctx = dev.primary_context();
  auto outer = std::make_unique<cudrv::profiler_range>(ctx);
  {
    cudrv::profiler_range inner(ctx);
    CHECK(cudrv::profiler_range::open_ranges(ctx) == 2);
    CHECK(n.starts() == 1);  // the inner range only counts
  }
  CHECK(n.stops() == 0);  // the outer range is still open
  CHECK(cudrv::profiler_range::open_ranges(ctx) == 1);
  // The outer one ends first this time, on another thread.
  cudrv::profiler_range inner(ctx);
  std::thread([&] { outer.reset(); }).join();
  CHECK(n.stops() == 0);
  inner.end();
  CHECK_FALSE(static_cast<bool>(inner));
  CHECK(n.stops() == 1);
  CHECK(n.starts() == 1);
  inner.end();  // an ended range: nothing
  CHECK(n.stops() == 1);
}

TEST_CASE("profiler_range: moves hand the range over and it ends once", "[fake-driver][profiler]") {
  profiler_counts n;
  const cudrv::device dev(1);
  const cudrv::context_ref ctx = dev.primary_context();
  {
    cudrv::profiler_range a(ctx);
    cudrv::profiler_range b(std::move(a));
    CHECK_FALSE(static_cast<bool>(a));  // NOLINT(bugprone-use-after-move): the contract says empty
    CHECK(static_cast<bool>(b));
    cudrv::profiler_range c(ctx);  // a second range (counted)
    c = std::move(b);              // c's own range ends first, then c holds b's
    CHECK(cudrv::profiler_range::open_ranges(ctx) == 1);
    CHECK(n.stops() == 0);
  }
  CHECK(n.starts() == 1);
  CHECK(n.stops() == 1);
}

TEST_CASE("profiler_range: ranges of two contexts are independent", "[fake-driver][profiler]") {
  profiler_counts n;
  const cudrv::device dev(1);
  const cudrv::context_ref primary = dev.primary_context();
  cudrv::context created(dev);
  cudrv::profiler_range a(primary);
  {
    cudrv::profiler_range b(created);
    CHECK(n.starts() == 2);
    CHECK(cudrv::profiler_range::open_ranges(created) == 1);
  }
  CHECK(n.stops() == 1);
  CHECK(contains(n.f.log(), "cuProfilerStop " + as_text(created.native_handle())));
  CHECK(cudrv::profiler_range::open_ranges(primary) == 1);
}

TEST_CASE("profiler_range: refusals", "[fake-driver][profiler]") {
  profiler_counts n;
  const cudrv::device dev(1);
  const cudrv::context_ref ctx = dev.primary_context();
  SECTION("an empty context, before the driver") {
    cudrv::context owner(dev);
    cudrv::context moved = std::move(owner);
    auto e = catch_as<cudrv::invalid_argument_error>([&] { cudrv::profiler_range r(owner); });
    REQUIRE(e.has_value());
    CHECK(e->api() == "cudrv::profiler_range");
    CHECK(contains(e->what(), "the context is empty"));
    CHECK(n.starts() == 0);
  }
  SECTION("cuProfilerStart refused: a typed error, and no range is open") {
    cudrv::test::fake_injection inject;
    const long long k = inject.find([&] { cudrv::profiler_range r(ctx); }, "cuProfilerStart");
    REQUIRE(k > 0);
    const long long starts = n.starts();
    inject.fail_call(k, CUDA_ERROR_INVALID_CONTEXT);
    auto e = catch_as<cudrv::error>([&] { cudrv::profiler_range r(ctx); });
    REQUIRE(e.has_value());
    CHECK(e->api() == "cuProfilerStart");
    CHECK(e->result() == CUDA_ERROR_INVALID_CONTEXT);
    CHECK(cudrv::profiler_range::open_ranges(ctx) == 0);
    inject.disarm();
    cudrv::profiler_range again(ctx);  // the next range starts the profiler
    CHECK(n.starts() == starts + 1);
  }
  SECTION("cuProfilerStop refused in the destructor: reported to the destruction handler, no throw") {
    static int reported = 0;
    static std::string what;
    reported = 0;
    const auto previous = cudrv::set_destruction_error_handler([](const cudrv::error& e) noexcept {
      ++reported;
      try {
        what = e.what();
      } catch (...) {
      }
    });
    cudrv::test::fake_injection inject;
    const long long k = inject.find([&] { cudrv::profiler_range r(ctx); }, "cuProfilerStop");
    REQUIRE(k > 0);
    {
      inject.fail_call(k, CUDA_ERROR_UNKNOWN);
      cudrv::profiler_range r(ctx);
    }
    cudrv::set_destruction_error_handler(previous);
    CHECK(reported == 1);
    CHECK(contains(what, "cuProfilerStop"));
    CHECK(cudrv::profiler_range::open_ranges(ctx) == 0);
  }
  SECTION("cuProfilerStop refused in end(): thrown, and the range is ended") {
    cudrv::test::fake_injection inject;
    const long long k = inject.find([&] { cudrv::profiler_range r(ctx); }, "cuProfilerStop");
    REQUIRE(k > 0);
    inject.fail_call(k, CUDA_ERROR_UNKNOWN);
    cudrv::profiler_range r(ctx);
    auto e = catch_as<cudrv::error>([&] { r.end(); });
    REQUIRE(e.has_value());
    CHECK(e->api() == "cuProfilerStop");
    CHECK_FALSE(static_cast<bool>(r));
    CHECK(cudrv::profiler_range::open_ranges(ctx) == 0);
  }
}
