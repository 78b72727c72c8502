// cudrv-query's NVML data comes from the library (<cudrv/system.hpp>): the tool run as a process against
// the stand-in driver and the stand-in NVML (tests/fake_nvml), whose GPUs carry the fake driver's UUIDs in
// another order. Label cpu: no GPU needed.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "query_test_support.hpp"

using query_test::run_query;

#if defined(CUDRV_TEST_FAKE_NVML) && defined(CUDRV_TEST_FAKE_CUDA)

TEST_CASE("NVML data comes from cudrv::system, matched to the CUDA devices by UUID", "[query]") {
  const std::vector<std::string> fakes{std::string("CUDRV_LIBCUDA=") + CUDRV_TEST_FAKE_CUDA,
                                       std::string("CUDRV_LIBNVML=") + CUDRV_TEST_FAKE_NVML};
  const query_test::process_result r = run_query({"--details", "--json"}, fakes);
  REQUIRE(r.exit_code == 0);
  REQUIRE_SCHEMA_VALID(r.out);
  const nlohmann::json j = query_test::parse(r.out);
  CHECK(j["nvml"]["available"] == true);
  CHECK(j["nvml"]["version"] == "13.999.88.77");
  REQUIRE(j["devices"].size() == 2);
  // CUDA device 1 is NVML's index 0 (the fake H100, every reading supported).
  const nlohmann::json& full = j["devices"][1]["nvml"];
  CHECK(full["index"] == 0);
  CHECK(full["uuid"] == j["devices"][1]["uuid"]);
  CHECK(full["via_mig"] == false);
  CHECK(full["memory"]["total_bytes"] == 80ULL << 30);
  CHECK(full["clocks_mhz"]["sm"] == 1755);
  CHECK(full["max_clocks_mhz"]["graphics"] == 1980);
  CHECK(full["temperature_c"] == 41);
  CHECK(std::abs(full["power"]["draw_w"].get<double>() - 123.456) < 0.06);  // rounded for the output
  CHECK(full["power"]["limit_w"].get<double>() == 690.0);                   // the enforced limit, as before
  CHECK(full["pcie"]["generation"] == 4);
  CHECK(full["pcie"]["max_width"] == 16);
  CHECK(full["ecc"]["enabled"] == true);
  CHECK(full["performance_state"] == 2);
  CHECK(full["persistence_mode"] == true);
  // CUDA device 0 is NVML's index 1: what it does not support is left out, not reported as an error.
  const nlohmann::json& bare = j["devices"][0]["nvml"];
  CHECK(bare["index"] == 1);
  CHECK(bare["memory"]["total_bytes"] == 24ULL << 30);
  CHECK_FALSE(bare.contains("temperature_c"));
  CHECK_FALSE(bare.contains("power"));
  CHECK_FALSE(bare.contains("performance_state"));
  CHECK(bare["mig"]["enabled"] == true);
}

#endif
