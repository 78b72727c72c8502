// Without a driver: every entry point throws driver_unavailable_error, nothing crashes.
//
// These test cases are tagged [driverless]; ctest runs them with
// CUDRV_LIBCUDA=/nonexistent/libcuda.so.1, so they see no driver on any machine.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;

namespace {

// Handles that are never passed to a driver: every call below fails before reaching one.
CUcontext fake_context() { return reinterpret_cast<CUcontext>(std::uintptr_t{0x1000}); }
CUevent fake_event() { return reinterpret_cast<CUevent>(std::uintptr_t{0x2000}); }
CUstream fake_stream() { return reinterpret_cast<CUstream>(std::uintptr_t{0x3000}); }

// Runs f twice (the second attempt must fail the same way: nothing is half-initialised) and checks
// that it throws driver_unavailable_error saying that the driver was not found.
template <class F>
void require_driver_unavailable(const char* what, F&& f) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    INFO(what << " (attempt " << attempt + 1 << ")");
    auto e = catch_as<cudrv::driver_unavailable_error>(f);
    REQUIRE(e.has_value());
    INFO("what(): " << e->what());
    CHECK(contains(e->what(), "driver was not found"));
    CHECK(e->source() == cudrv::error_source::driver);
    CHECK(e->result() != CUDA_SUCCESS);
    CHECK(e->name() == cudrv::error_name(e->result()));
    CHECK_FALSE(e->api().empty());
    // Catchable through the base classes too.
    const cudrv::error& base = *e;
    CHECK(contains(base.what(), "driver was not found"));
  }
}

}  // namespace

TEST_CASE("driverless: the probe functions report no driver", "[driverless]") {
  CUDRV_REQUIRE_DRIVERLESS();
  CHECK_FALSE(cudrv::driver::available());
  CHECK(cudrv::driver::version() == 0);
  CHECK(cudrv::driver::library_path().empty());

  const std::string reason = cudrv::driver::unavailable_reason();
  INFO("unavailable_reason(): " << reason);
  CHECK(contains(reason, "not found"));
  CHECK(contains(reason, "tried"));
  CHECK(contains(reason, "CUDRV_LIBCUDA"));  // says how to point cudrv at a driver
  if (const char* env = std::getenv("CUDRV_LIBCUDA"); env != nullptr && *env != '\0') {
    CHECK(contains(reason, env));  // names the library that was tried
  } else {
    CHECK(contains(reason, "libcuda.so.1"));
  }

  // Asking again gives the same answer (the result is cached, not retried half-way).
  CHECK_FALSE(cudrv::driver::available());
  CHECK(cudrv::driver::unavailable_reason() == reason);
}

TEST_CASE("driverless: device queries throw driver_unavailable_error", "[driverless]") {
  CUDRV_REQUIRE_DRIVERLESS();
  require_driver_unavailable("device_count()", [] { (void)cudrv::device_count(); });
  require_driver_unavailable("devices()", [] { (void)cudrv::devices(); });
  require_driver_unavailable("device(0)", [] { (void)cudrv::device(0); });
  const cudrv::device dev = cudrv::device::from_native_handle(0);  // no driver call
  CHECK(dev.ordinal() == 0);
  require_driver_unavailable("device::name()", [&] { (void)dev.name(); });
  require_driver_unavailable("device::uuid()", [&] { (void)dev.uuid(); });
  require_driver_unavailable("device::attribute()", [&] { (void)dev.attribute(cudrv::device_attributes::warp_size); });
  require_driver_unavailable("device::total_memory()", [&] { (void)dev.total_memory(); });
  require_driver_unavailable("device::free_memory()", [&] { (void)dev.free_memory(); });
  require_driver_unavailable("device::primary_context()", [&] { (void)dev.primary_context(); });
  require_driver_unavailable("device::primary_context_active()", [&] { (void)dev.primary_context_active(); });
  require_driver_unavailable("device::set_current()", [&] { dev.set_current(); });
}

TEST_CASE("driverless: creating streams and events and contexts throws driver_unavailable_error", "[driverless]") {
  CUDRV_REQUIRE_DRIVERLESS();
  const cudrv::device dev = cudrv::device::from_native_handle(0);
  const cudrv::context_ref ctx(fake_context());

  require_driver_unavailable("stream(device(0))", [] { cudrv::stream s(cudrv::device(0)); });
  require_driver_unavailable("stream(device)", [&] { cudrv::stream s(dev); });
  require_driver_unavailable("stream(context_ref)", [&] { cudrv::stream s(ctx); });
  require_driver_unavailable("event(device)", [&] { cudrv::event e(dev); });
  require_driver_unavailable("event(device, timing)", [&] { cudrv::event e(dev, cudrv::event_flags::timing); });
  require_driver_unavailable("event(context_ref)", [&] { cudrv::event e(ctx); });
  require_driver_unavailable("context(device)", [&] { cudrv::context c(dev); });
  require_driver_unavailable("primary_context(device)", [&] { cudrv::primary_context pc(dev); });
  require_driver_unavailable("context_ref::current()", [] { (void)cudrv::context_ref::current(); });
  require_driver_unavailable("context_guard", [&] { cudrv::context_guard guard(ctx); });
}

TEST_CASE("driverless: operations on views throw driver_unavailable_error", "[driverless]") {
  CUDRV_REQUIRE_DRIVERLESS();
  const cudrv::stream_ref s(fake_stream());
  const cudrv::event_ref ev(fake_event());
  require_driver_unavailable("stream_ref::synchronize()", [&] { s.synchronize(); });
  require_driver_unavailable("legacy_default().synchronize()",
                             [] { cudrv::stream_ref::legacy_default().synchronize(); });
  require_driver_unavailable("stream_ref::is_done()", [&] { (void)s.is_done(); });
  require_driver_unavailable("stream_ref::enqueue()", [&] { s.enqueue([] {}); });
  require_driver_unavailable("stream_ref::wait(event)", [&] { s.wait(ev); });
  require_driver_unavailable("event_ref::record()", [&] { ev.record(s); });
  require_driver_unavailable("event_ref::synchronize()", [&] { ev.synchronize(); });
  require_driver_unavailable("elapsed_time()", [&] { (void)cudrv::elapsed_time(ev, ev); });
  require_driver_unavailable("context_ref::synchronize()", [] { cudrv::context_ref(fake_context()).synchronize(); });
}

TEST_CASE("driverless: enqueue does not leak or run the callable when the driver is missing", "[driverless]") {
  CUDRV_REQUIRE_DRIVERLESS();
  auto token = std::make_shared<int>(1);
  bool ran = false;
  auto e = catch_as<cudrv::driver_unavailable_error>(
      [&] { cudrv::stream_ref(fake_stream()).enqueue([token, &ran] { ran = true; }); });
  CHECK(e.has_value());
  CHECK_FALSE(ran);
  CHECK(token.use_count() == 1);  // the queued copy of the callable was destroyed
}

TEST_CASE("driverless: get_entry_point throws driver_unavailable_error", "[driverless]") {
  CUDRV_REQUIRE_DRIVERLESS();
  require_driver_unavailable("get_entry_point(cuCtxGetCurrent)",
                             [] { (void)cudrv::driver::get_entry_point("cuCtxGetCurrent", 4000); });
  require_driver_unavailable("get_entry_point(unknown symbol)",
                             [] { (void)cudrv::driver::get_entry_point("cuNoSuchFunction", 12000); });
}

TEST_CASE("driverless: error names and descriptions still work", "[driverless]") {
  CUDRV_REQUIRE_DRIVERLESS();
  (void)cudrv::driver::available();  // the failed load must not disturb the built-in table
  CHECK(cudrv::error_name(CUDA_ERROR_INVALID_VALUE) == "CUDA_ERROR_INVALID_VALUE");
  CHECK_FALSE(cudrv::error_description(CUDA_ERROR_INVALID_VALUE).empty());
  cudrv::error e(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc");
  CHECK(e.description() == cudrv::error_description(CUDA_ERROR_OUT_OF_MEMORY));
}
