// The typed device-attribute tags against the cuda.h cudrv is built with: every attribute the driver
// has (all but the deprecated names) has a tag, and the tags' result types are the meaningful ones.
#include <catch2/catch.hpp>

#include <cudrv/device.hpp>

#include <cctype>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>

namespace attrs = cudrv::device_attributes;

static_assert(std::is_same_v<decltype(attrs::l2_cache_size)::type, std::size_t>);
static_assert(attrs::l2_cache_size.value == CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
static_assert(attrs::compute_mode.value == CU_DEVICE_ATTRIBUTE_COMPUTE_MODE);
// The tags share their class per value type (the attribute is a member): a handful of types, not one per tag.
static_assert(std::is_same_v<decltype(attrs::warp_size), decltype(attrs::multiprocessor_count)>);
static_assert(std::is_same_v<decltype(attrs::max_shared_memory_per_block_optin)::type, std::size_t>);
static_assert(std::is_same_v<decltype(attrs::integrated)::type, bool>);
static_assert(std::is_same_v<decltype(attrs::gpu_direct_rdma_supported)::type, bool>);
static_assert(std::is_same_v<decltype(attrs::compute_mode)::type, CUcomputemode>);
static_assert(std::is_same_v<decltype(attrs::numa_config)::type, CUdeviceNumaConfig>);
static_assert(std::is_same_v<decltype(attrs::mempool_supported_handle_types)::type, unsigned int>);
static_assert(std::is_same_v<decltype(attrs::multiprocessor_count)::type, int>);
static_assert(std::is_same_v<decltype(attrs::host_numa_id)::type, int>);
static_assert(std::is_same_v<decltype(attrs::maximum_surface2d_layered_layers)::type, int>);
static_assert(attrs::clock_rate_khz.value == CU_DEVICE_ATTRIBUTE_CLOCK_RATE);

TEST_CASE("device attributes: a tag for every attribute of cuda.h, none for deprecated names", "[device-attributes]") {
  std::ifstream in(CUDRV_TEST_CUDA_H);
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  const std::string header = text.str();
  const auto begin = header.find("typedef enum CUdevice_attribute_enum {");
  const auto end = header.find("} CUdevice_attribute;", begin);
  REQUIRE(begin != std::string::npos);
  REQUIRE(end != std::string::npos);
  std::istringstream body(header.substr(begin, end - begin));
  std::map<std::string, int> expected;  // tag name -> value
  for (std::string line; std::getline(body, line);) {
    const auto at = line.find("CU_DEVICE_ATTRIBUTE_");
    const auto eq = line.find('=');
    if (at == std::string::npos || eq == std::string::npos) {
      continue;
    }
    std::string suffix = line.substr(at + 20, line.find_first_of(" =", at) - at - 20);
    const int value = std::stoi(line.substr(eq + 1));
    const auto comment = line.find("/**<");
    std::string note = comment != std::string::npos ? line.substr(comment + 4) : "";
    note.erase(0, note.find_first_not_of(' '));
    if (note.rfind("Deprecated", 0) == 0) {
      continue;
    }
    std::string name;
    for (char c : suffix) {
      name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    if (name == "clock_rate" || name == "memory_clock_rate") {
      name += "_khz";
    }
    expected[name] = value;
  }
  REQUIRE(expected.size() > 130);
  std::set<std::string> seen;
  for (const auto& entry : attrs::all) {
    INFO(entry.name);
    REQUIRE(expected.count(entry.name) == 1);
    CHECK(expected[entry.name] == static_cast<int>(entry.id));
    CHECK(seen.insert(entry.name).second);
  }
  for (const auto& [name, value] : expected) {
    INFO("cuda.h has CU_DEVICE_ATTRIBUTE_ for " << name << " (" << value
                                                << "); regenerate include/cudrv/device_attributes.hpp with "
                                                   "scripts/gen/device_attributes.py");
    CHECK(seen.count(name) == 1);
  }
}
