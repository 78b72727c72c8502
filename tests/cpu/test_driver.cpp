// The driver probe, in the environment ctest gives the CPU tier (no forced CUDRV_LIBCUDA): on this
// machine there may or may not be a driver; whichever it is, the answers must agree.
#include <catch2/catch.hpp>

#include <string>

#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;

TEST_CASE("the driver probe functions agree with each other", "[driver]") {
  const bool available = cudrv::driver::available();
  const std::string reason = cudrv::driver::unavailable_reason();
  const std::string path = cudrv::driver::library_path();
  const int version = cudrv::driver::version();
  INFO("available=" << available << " version=" << version << " path=" << path << " reason=" << reason);
  if (available) {
    CHECK(reason.empty());
    CHECK_FALSE(path.empty());
    CHECK(contains(path, "libcuda"));
    CHECK(version >= 11030);  // cudrv needs cuGetProcAddress (CUDA 11.3)
    CHECK(version % 10 == 0);
    CHECK(cudrv::device_count() >= 0);
    CHECK(cudrv::driver::get_entry_point("cuCtxGetCurrent", 4000) != nullptr);
    // An entry point the driver does not have is a not_supported_error naming it.
    auto e = catch_as<cudrv::not_supported_error>(
        [] { (void)cudrv::driver::get_entry_point("cuNoSuchFunctionInAnyDriver", 12000); });
    REQUIRE(e.has_value());
    CHECK(contains(e->what(), "cuNoSuchFunctionInAnyDriver"));
  } else {
    CHECK_FALSE(reason.empty());
    if (path.empty()) {
      CHECK(version == 0);  // nothing was loaded
    }
    auto e = catch_as<cudrv::driver_unavailable_error>([] { (void)cudrv::device_count(); });
    REQUIRE(e.has_value());
    CHECK(contains(e->what(), reason));
  }
  // The answers are stable.
  CHECK(cudrv::driver::available() == available);
  CHECK(cudrv::driver::unavailable_reason() == reason);
}
