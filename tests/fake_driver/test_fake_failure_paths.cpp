// Failure paths the failure sweep (tests/failure_sweep) found handled wrongly, each made to fail on
// purpose through the stand-in driver's failure injection (fake_cuda_inject_failure): the call is found
// by name in a dry run of the same code, then made to fail. Device 1 of the fake is used (device 0 is
// taken by another process).
#include <catch2/catch.hpp>

#include <cudrv/cudrv.hpp>

#include <memory>
#include <optional>
#include <string>

#include "fake_driver/fake_hooks.hpp"
#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;

TEST_CASE("failure injection: a buffer whose context cannot be made current to free it tells the handler, and is "
          "freed",
          "[fake-driver][failure-injection]") {
  cudrv::test::fake_probe f;
  cudrv::test::fake_injection inject;
  cudrv::test::destruction_error_counter errors;
  const cudrv::device d1(1);
  cudrv::context ctx(d1);  // not current: freeing memory made in it switches to it
  REQUIRE(cudrv::test::raw_current_context() == nullptr);

  std::optional<cudrv::device_buffer<int>> dry(std::in_place, ctx, 16);
  const long long k = inject.find([&] { dry.reset(); }, "cuCtxSetCurrent");
  REQUIRE(k > 0);
  REQUIRE(errors.count() == 0);

  cudrv::device_buffer<int> b(ctx, 16);
  const CUdeviceptr address = b.data();
  inject.fail_call(k, CUDA_ERROR_UNKNOWN);
  b.reset();  // never throws
  inject.disarm();
  CHECK(inject.failed_api() == "cuCtxSetCurrent");
  CHECK(errors.count() == 1);  // before: nothing was said, and the free ran in whatever context was current
  CHECK(contains(errors.messages(), "cuCtxSetCurrent"));
  CHECK_FALSE(f.is_live(address));  // freed all the same
  CHECK(cudrv::test::raw_current_context() == nullptr);
}

TEST_CASE("failure injection: a host callable is refused, and destroyed, when the stream's capture state cannot be "
          "read",
          "[fake-driver][failure-injection]") {
  cudrv::test::fake_injection inject;
  const cudrv::device d1(1);
  cudrv::stream s(d1);
  const long long k = inject.find([&] { s.enqueue([] {}); }, "cuStreamGetCaptureInfo");
  REQUIRE(k > 0);
  s.synchronize();

  auto kept = std::make_shared<int>(0);
  bool ran = false;
  inject.fail_call(k, CUDA_ERROR_UNKNOWN);
  // Before, the failure was taken to mean "not capturing": on a capturing stream the callable would have
  // been queued as a one-shot task into a graph that runs it at every launch.
  auto e = catch_as<cudrv::error>([&] { s.enqueue([kept, &ran] { ran = true; }); });
  inject.disarm();
  REQUIRE(e);
  CHECK(e->api() == "cuStreamGetCaptureInfo");
  CHECK(e->result() == CUDA_ERROR_UNKNOWN);
  s.synchronize();
  CHECK_FALSE(ran);
  CHECK(kept.use_count() == 1);  // the callable was destroyed, not leaked
}

TEST_CASE("failure injection: a context that cannot give the caller's context back is destroyed, and its "
          "constructor throws",
          "[fake-driver][failure-injection]") {
  cudrv::test::fake_probe f;
  cudrv::test::fake_injection inject;
  cudrv::test::destruction_error_counter errors;
  const cudrv::device d1(1);
  REQUIRE(cudrv::test::raw_current_context() == nullptr);
  const long long k = inject.find([&] { cudrv::context c(d1); }, "cuCtxPopCurrent");
  REQUIRE(k > 0);
  const long long destroyed = f.counter("contexts_destroyed");

  inject.fail_call(k, CUDA_ERROR_UNKNOWN);
  // Before, the failure went to the destruction handler and the new context stayed current.
  auto e = catch_as<cudrv::error>([&] { cudrv::context c(d1); });
  inject.disarm();
  REQUIRE(e);
  CHECK(e->api() == "cuCtxPopCurrent");
  CHECK(contains(e->what(), "device 1"));
  CHECK(cudrv::test::raw_current_context() == nullptr);
  CHECK(f.counter("contexts_destroyed") == destroyed + 1);
  CHECK(errors.count() == 0);
}

TEST_CASE("failure injection: a host pool whose devices cannot be asked about access is refused, not made without "
          "their access",
          "[fake-driver][failure-injection][pool]") {
  cudrv::test::fake_probe f;
  cudrv::test::fake_injection inject;
  cudrv::test::destruction_error_counter errors;
  // The pool asks each device whether it can use host pools (device 0, then device 1, which can).
  const long long k =
      inject.find([] { cudrv::memory_pool p(cudrv::memory_location::host()); }, "cuDeviceGetAttribute", 2);
  REQUIRE(k > 0);
  const long long created = f.counter("pools_created");
  const long long destroyed = f.counter("pools_destroyed");

  SECTION("a failure is thrown, and the pool destroyed") {
    inject.fail_call(k, CUDA_ERROR_UNKNOWN);
    auto e = catch_as<cudrv::error>([] { cudrv::memory_pool p(cudrv::memory_location::host()); });
    inject.disarm();
    REQUIRE(e);
    CHECK(e->api() == "cuDeviceGetAttribute");
    CHECK(contains(e->what(), "device 1"));
    CHECK(f.counter("pools_created") == created + 1);
    CHECK(f.counter("pools_destroyed") == destroyed + 1);
  }
  SECTION("a driver that does not know the attribute has no device that could use the pool") {
    inject.fail_call(k, CUDA_ERROR_INVALID_VALUE);
    const std::size_t log_start = f.log().size();
    cudrv::memory_pool p(cudrv::memory_location::host());
    inject.disarm();
    CHECK_FALSE(contains(f.log().substr(log_start), "pool_access"));
  }
  CHECK(errors.count() == 0);
}

TEST_CASE("failure injection: a reset of the primary context that cannot reactivate it leaves the device usable",
          "[fake-driver][failure-injection][sticky]") {
  cudrv::test::fake_probe f;
  cudrv::test::fake_injection inject;
  cudrv::test::destruction_error_counter errors;
  auto* refs = cudrv::test::fake_hook<int(int)>("fake_cuda_primary_refs");
  const cudrv::device d1(1);
  (void)d1.primary_context();
  REQUIRE(refs(1) == 1);

  SECTION("the retain that follows the reset fails") {
    const long long k = inject.find([&] { d1.reset_primary_context(); }, "cuDevicePrimaryCtxRetain");
    REQUIRE(k > 0);
    inject.fail_call(k, CUDA_ERROR_UNKNOWN);
    auto e = catch_as<cudrv::error>([&] { d1.reset_primary_context(); });
    inject.disarm();
    REQUIRE(e);
    CHECK(e->api() == "cuDevicePrimaryCtxRetain");
    // Before, cudrv kept the stale handle of the inactive context, and every later use of the device
    // failed with CUDA_ERROR_INVALID_CONTEXT.
    cudrv::stream s(d1);
    cudrv::device_buffer<int> b(s, 16);
    s.synchronize();
    CHECK(refs(1) == 1);  // cudrv holds one reference again
  }
  SECTION("whether the context is current cannot be told") {
    const long long k = inject.find([&] { d1.reset_primary_context(); }, "cuCtxGetCurrent");
    REQUIRE(k > 0);
    const long long resets = f.counter("primary_resets");
    cudrv::context_guard current(d1.primary_context());
    inject.fail_call(k, CUDA_ERROR_UNKNOWN);
    // Before, the failure was taken for "not current", and the reset left no context current.
    auto e = catch_as<cudrv::error>([&] { d1.reset_primary_context(); });
    inject.disarm();
    REQUIRE(e);
    CHECK(e->api() == "cuCtxGetCurrent");
    CHECK(f.counter("primary_resets") == resets);  // nothing was reset
    CHECK(cudrv::test::raw_current_context() == d1.primary_context().native_handle());
  }
  CHECK(errors.count() == 0);
}
