// The driver loader against a real driver: what it reports, and how a missing entry point is named.
#include <cudaTypedefs.h>
#include <catch2/catch.hpp>

#include <string>

#include "support/test_support.hpp"

using cudrv::test::contains;

TEST_CASE("the loaded driver reports its version and path", "[gpu][driver]") {
  CUDRV_REQUIRE_GPU();
  CHECK(cudrv::driver::available());
  CHECK(cudrv::driver::unavailable_reason().empty());
  CHECK(cudrv::driver::version() >= 12000);
  CHECK(contains(cudrv::driver::library_path(), "libcuda.so"));
  // The version cudrv reports is the driver's own answer.
  int raw = 0;
  auto get_version =
      reinterpret_cast<PFN_cuDriverGetVersion_v2020>(cudrv::driver::get_entry_point("cuDriverGetVersion", 2020));
  REQUIRE(get_version(&raw) == CUDA_SUCCESS);
  CHECK(cudrv::driver::version() == raw);
}

TEST_CASE("an entry point the driver lacks is named with the version it needs", "[gpu][driver][driver_error]") {
  CUDRV_REQUIRE_GPU();
  const int driver = cudrv::driver::version();
  const std::string installed =
      "the installed driver supports CUDA " + std::to_string(driver / 1000) + "." + std::to_string(driver % 1000 / 10);

  SECTION("a newer driver is needed") {
    // Asked at an API version beyond the installed driver: what a binary built with a newer toolkit
    // meets on an older driver.
    auto e = cudrv::test::catch_as<cudrv::not_supported_error>(
        [] { (void)cudrv::driver::get_entry_point("cuFunctionOfAFutureDriver", 99000); });
    REQUIRE(e.has_value());
    INFO(e->what());
    CHECK(e->result() ==
          static_cast<CUresult>(36));  // CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER (unnamed before CUDA 12.2)
    CHECK(e->name() == "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER");
    CHECK(contains(e->what(), "cuFunctionOfAFutureDriver requires a CUDA driver for CUDA 99.0 or newer"));
    CHECK(contains(e->what(), installed));
  }
  SECTION("a symbol asked for at an API version older than the symbol") {
    // cuStreamGetDevice appeared in CUDA 12.8.
    auto e = cudrv::test::catch_as<cudrv::not_supported_error>(
        [] { (void)cudrv::driver::get_entry_point("cuStreamGetDevice", 12000); });
    REQUIRE(e.has_value());
    INFO(e->what());
    CHECK(contains(e->what(), "cuStreamGetDevice does not exist at API version 12.0"));
  }
  SECTION("an unknown symbol") {
    auto e = cudrv::test::catch_as<cudrv::not_supported_error>(
        [] { (void)cudrv::driver::get_entry_point("cuNoSuchFunctionInAnyDriver", 12000); });
    REQUIRE(e.has_value());
    INFO(e->what());
    CHECK(contains(e->what(),
                   "cuNoSuchFunctionInAnyDriver (API version 12.0) was not found in the installed CUDA driver"));
  }
  SECTION("a known symbol resolves to the same function cudrv calls") {
    auto fn = reinterpret_cast<PFN_cuCtxGetCurrent_v4000>(cudrv::driver::get_entry_point("cuCtxGetCurrent", 4000));
    const cudrv::device dev(0);
    cudrv::context_guard guard(dev.primary_context());
    CUcontext ctx = nullptr;
    REQUIRE(fn(&ctx) == CUDA_SUCCESS);
    CHECK(ctx == dev.primary_context().native_handle());
  }
}
