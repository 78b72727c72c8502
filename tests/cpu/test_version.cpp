// <cudrv/version.hpp> and cudrv::version(): generated from the CMake project version.
#include <catch2/catch.hpp>

#include <cudrv/cudrv.hpp>

#include <string>

TEST_CASE("version: the macros are the CMake project version", "[version]") {
  STATIC_REQUIRE(CUDRV_VERSION_MAJOR == CUDRV_TEST_VERSION_MAJOR);
  STATIC_REQUIRE(CUDRV_VERSION_MINOR == CUDRV_TEST_VERSION_MINOR);
  STATIC_REQUIRE(CUDRV_VERSION_PATCH == CUDRV_TEST_VERSION_PATCH);
  STATIC_REQUIRE(CUDRV_VERSION ==
                 CUDRV_TEST_VERSION_MAJOR * 1000000 + CUDRV_TEST_VERSION_MINOR * 1000 + CUDRV_TEST_VERSION_PATCH);
  CHECK(std::string(CUDRV_VERSION_STRING) == CUDRV_TEST_VERSION);
  STATIC_REQUIRE(cudrv::header_version.number() == CUDRV_VERSION);
}

TEST_CASE("version: the library reports the version it was compiled as", "[version]") {
  const cudrv::version_info v = cudrv::version();
  CHECK(v == cudrv::header_version);
  CHECK(v.number() == CUDRV_VERSION);
  CHECK(std::string(cudrv::version_string()) == CUDRV_TEST_VERSION);
  CHECK(std::to_string(v.major) + "." + std::to_string(v.minor) + "." + std::to_string(v.patch) ==
        cudrv::version_string());
}

TEST_CASE("version: versions order by major, then minor, then patch", "[version]") {
  using cudrv::version_info;
  STATIC_REQUIRE(version_info{1, 0, 0} > version_info{0, 999, 999});
  STATIC_REQUIRE(version_info{0, 2, 0} > version_info{0, 1, 7});
  STATIC_REQUIRE(version_info{0, 1, 2} < version_info{0, 1, 3});
  STATIC_REQUIRE(version_info{2, 3, 4} == version_info{2, 3, 4});
  STATIC_REQUIRE(version_info{1, 2, 3}.number() == 1002003);
  // number() orders as the versions do, for the whole range a component can take.
  STATIC_REQUIRE(version_info{0, 999, 999}.number() < version_info{1, 0, 0}.number());
}
