// GPU tier: devices, their identity and attributes.
#include <catch2/catch.hpp>

#include <cstddef>
#include <regex>
#include <set>
#include <string>
#include <type_traits>

#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;
namespace attrs = cudrv::device_attributes;

TEST_CASE("device_count and device names", "[gpu][device]") {
  CUDRV_REQUIRE_GPU();
  cudrv::test::destruction_error_counter errors;
  const int count = cudrv::device_count();
  REQUIRE(count > 0);
  for (int i = 0; i < count; ++i) {
    const cudrv::device dev(i);
    CHECK(dev.ordinal() == i);
    const std::string name = dev.name();
    INFO("device " << i << ": " << name);
    CHECK_FALSE(name.empty());
    CHECK(name.find('\0') == std::string::npos);
    CHECK(name.size() < 256);
  }
  CHECK(errors.count() == 0);
}

TEST_CASE("device uuid and PCI bus id have the documented formats", "[gpu][device]") {
  CUDRV_REQUIRE_GPU();
  const int count = cudrv::device_count();
  const std::regex uuid_format("^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$");
  const std::regex pci_format("^([0-9a-f]{4,8}):([0-9a-f]{2}):([0-9a-f]{2})\\.([0-9a-f])$");
  std::set<std::string> uuids;
  std::set<std::string> bus_ids;
  for (int i = 0; i < count; ++i) {
    const cudrv::device dev(i);
    const cudrv::device_uuid uuid = dev.uuid();
    const std::string text = uuid.to_string();
    INFO("device " << i << " uuid " << text);
    CHECK(std::regex_match(text, uuid_format));
    CHECK_FALSE(uuid == cudrv::device_uuid{});  // not all zeros
    CHECK(dev.uuid() == uuid);                  // stable
    uuids.insert(text);

    const std::string bus_id = dev.pci_bus_id();
    INFO("pci bus id " << bus_id);
    std::smatch parts;
    REQUIRE(std::regex_match(bus_id, parts, pci_format));
    // The fields agree with the PCI attributes.
    CHECK(std::stoi(parts[1].str(), nullptr, 16) == dev.attribute(attrs::pci_domain_id));
    CHECK(std::stoi(parts[2].str(), nullptr, 16) == dev.attribute(attrs::pci_bus_id));
    CHECK(std::stoi(parts[3].str(), nullptr, 16) == dev.attribute(attrs::pci_device_id));
    bus_ids.insert(bus_id);
  }
  // Distinct devices have distinct identities.
  CHECK(uuids.size() == static_cast<std::size_t>(count));
  CHECK(bus_ids.size() == static_cast<std::size_t>(count));
}

TEST_CASE("compute capability and arch agree with the attributes", "[gpu][device]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  const cudrv::compute_capability cc = dev.compute_capability();
  CHECK(cc.major == dev.attribute(attrs::compute_capability_major));
  CHECK(cc.minor == dev.attribute(attrs::compute_capability_minor));
  CHECK(cc.major == dev.attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR));
  CHECK(cc.major >= 5);
  CHECK(cc.minor >= 0);
  CHECK(cc.minor < 10);
  CHECK(cc.as_int() == 10 * cc.major + cc.minor);
  CHECK(dev.arch() == "sm_" + std::to_string(cc.as_int()));
}

TEST_CASE("device memory: total is larger than free and free is positive", "[gpu][device]") {
  CUDRV_REQUIRE_GPU();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  const std::size_t total = dev.total_memory();
  const std::size_t free = dev.free_memory();
  INFO("total " << total << " free " << free);
  CHECK(total > (std::size_t(1) << 30));  // every supported GPU has more than 1 GiB
  CHECK(free > 0);
  CHECK(free < total);
  CHECK(dev.total_memory() == total);  // a fixed property
  CHECK(errors.count() == 0);
}

TEST_CASE("typed attributes have fixed types and sane values", "[gpu][device][driver_error]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);

  auto warp = dev.attribute(attrs::warp_size);
  auto threads = dev.attribute(attrs::max_threads_per_block);
  auto sms = dev.attribute(attrs::multiprocessor_count);
  auto l2 = dev.attribute(attrs::l2_cache_size);
  auto shared = dev.attribute(attrs::max_shared_memory_per_block);
  auto shared_optin = dev.attribute(attrs::max_shared_memory_per_block_optin);
  auto managed = dev.attribute(attrs::managed_memory);
  auto unified = dev.attribute(attrs::unified_addressing);
  auto mode = dev.attribute(attrs::compute_mode);
  auto handle_types = dev.attribute(attrs::mempool_supported_handle_types);
  static_assert(std::is_same_v<decltype(warp), int>);
  static_assert(std::is_same_v<decltype(threads), int>);
  static_assert(std::is_same_v<decltype(sms), int>);
  static_assert(std::is_same_v<decltype(l2), std::size_t>);
  static_assert(std::is_same_v<decltype(shared), std::size_t>);
  static_assert(std::is_same_v<decltype(shared_optin), std::size_t>);
  static_assert(std::is_same_v<decltype(managed), bool>);
  static_assert(std::is_same_v<decltype(unified), bool>);
  static_assert(std::is_same_v<decltype(mode), CUcomputemode>);
  static_assert(std::is_same_v<decltype(handle_types), unsigned int>);

  CHECK(warp == 32);
  CHECK(threads == 1024);  // every architecture CUDA 13 supports
  CHECK(dev.attribute(attrs::max_block_dim_x) == 1024);
  CHECK(dev.attribute(attrs::max_block_dim_z) == 64);
  CHECK(dev.attribute(attrs::max_grid_dim_x) == 2147483647);
  CHECK(sms > 0);
  CHECK(l2 > 0);
  CHECK(shared == 48 * 1024);
  CHECK(shared_optin >= shared);
  CHECK(unified);  // 64-bit Linux
  CHECK(dev.attribute(attrs::max_threads_per_multiprocessor) >= threads);
  CHECK(dev.attribute(attrs::max_registers_per_block) > 0);
  CHECK(dev.attribute(attrs::clock_rate_khz) > 0);
  CHECK((mode == CU_COMPUTEMODE_DEFAULT || mode == CU_COMPUTEMODE_EXCLUSIVE_PROCESS));

  const cudrv::compute_capability cc = dev.compute_capability();
  if (cc == cudrv::compute_capability{9, 0}) {  // H100 / H200
    INFO("sm_90 specifics");
    CHECK(dev.attribute(attrs::max_threads_per_multiprocessor) == 2048);
    CHECK(dev.attribute(attrs::max_registers_per_block) == 65536);
    CHECK(shared_optin == 227 * 1024);
    CHECK(dev.attribute(attrs::max_shared_memory_per_multiprocessor) == 228 * 1024);
    CHECK(dev.attribute(attrs::cluster_launch));
    CHECK(dev.attribute(attrs::memory_pools_supported));
    CHECK(managed);
  }

  // The typed overload returns exactly what the raw one does.
  CHECK(dev.attribute(CU_DEVICE_ATTRIBUTE_WARP_SIZE) == warp);
  CHECK(dev.attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT) == sms);
  CHECK(static_cast<std::size_t>(dev.attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)) == l2);
  CHECK(static_cast<std::size_t>(dev.attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)) == shared_optin);
  CHECK((dev.attribute(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY) != 0) == managed);
  CHECK(static_cast<CUcomputemode>(dev.attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_MODE)) == mode);
  CHECK(static_cast<unsigned int>(dev.attribute(CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES)) == handle_types);

  // An attribute the driver does not know is a cudrv::error naming the call.
  auto e = catch_as<cudrv::error>([&] { (void)dev.attribute(static_cast<CUdevice_attribute>(100000)); });
  REQUIRE(e.has_value());
  INFO(e->what());
  CHECK((e->result() == CUDA_ERROR_INVALID_VALUE || e->result() == CUDA_ERROR_NOT_SUPPORTED));
  CHECK(e->api() == "cuDeviceGetAttribute");
  CHECK(contains(e->what(), "100000"));  // the context names the attribute
}

TEST_CASE("an invalid ordinal throws INVALID_DEVICE naming the ordinal", "[gpu][device]") {
  CUDRV_REQUIRE_GPU();
  const int count = cudrv::device_count();
  for (int bad : {-1, count, count + 100}) {
    INFO("ordinal " << bad);
    auto e = catch_as<cudrv::error>([&] { (void)cudrv::device(bad); });
    REQUIRE(e.has_value());
    INFO(e->what());
    CHECK(e->result() == CUDA_ERROR_INVALID_DEVICE);
    CHECK(e->name() == "CUDA_ERROR_INVALID_DEVICE");
    CHECK(contains(e->what(), "ordinal " + std::to_string(bad)));
    CHECK(contains(e->what(), std::to_string(count - 1)));  // the valid range
  }
  auto e = catch_as<cudrv::error>([&] { (void)cudrv::devices()[static_cast<std::size_t>(count)]; });
  REQUIRE(e.has_value());
  CHECK(e->result() == CUDA_ERROR_INVALID_DEVICE);
}

TEST_CASE("devices() iterates over every device in ordinal order", "[gpu][device]") {
  CUDRV_REQUIRE_GPU();
  const int count = cudrv::device_count();
  const cudrv::device_range range = cudrv::devices();
  CHECK(range.size() == static_cast<std::size_t>(count));
  CHECK_FALSE(range.empty());
  int expected = 0;
  for (cudrv::device dev : range) {
    CHECK(dev.ordinal() == expected);
    CHECK(dev == cudrv::device(expected));
    CHECK(dev.name() == cudrv::device(expected).name());
    ++expected;
  }
  CHECK(expected == count);
  CHECK(range[0] == cudrv::device(0));
}

TEST_CASE("stream priority range and peer access to itself", "[gpu][device]") {
  CUDRV_REQUIRE_GPU();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  const auto [greatest, least] = dev.stream_priority_range();
  INFO("greatest " << greatest << " least " << least);
  CHECK(greatest <= least);
  CHECK(least == 0);  // the default priority is the least one
  if (dev.attribute(attrs::stream_priorities_supported)) {
    CHECK(greatest < least);
  }
  CHECK_FALSE(dev.can_access_peer(dev));
  CHECK(errors.count() == 0);
}

TEST_CASE("set_current makes the primary context current", "[gpu][device][context]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  const CUcontext before = cudrv::test::raw_current_context();
  dev.set_current();
  CHECK(cudrv::test::raw_current_context() == dev.primary_context().native_handle());
  CHECK(cudrv::context_ref::current() == dev.primary_context());
  CHECK(cudrv::context_ref::current().device() == dev);
  dev.synchronize();
  cudrv::test::raw_set_current_context(before);
}

TEST_CASE("peer access between two devices", "[gpu][device]") {
  CUDRV_REQUIRE_GPU();
  const int count = cudrv::device_count();
  if (count < 2) {
    std::cout << "SKIPPED: no CUDA device pair for peer access (" << count << " device visible)" << std::endl;
    return;
  }
  cudrv::test::destruction_error_counter errors;
  const cudrv::device d0(0);
  const cudrv::device d1(1);
  const bool can = d0.can_access_peer(d1);
  INFO("device 0 can access device 1: " << can);
  CHECK(d0.p2p_attribute(CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, d1) == (can ? 1 : 0));
  if (can) {
    d0.enable_peer_access(d1);
    d0.enable_peer_access(d1);  // enabling twice is not an error
    d0.disable_peer_access(d1);
    // Disabling what is not enabled is the driver's error, reported as such.
    auto e = catch_as<cudrv::error>([&] { d0.disable_peer_access(d1); });
    REQUIRE(e.has_value());
    CHECK(e->result() == CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
  } else {
    CHECK_THROWS_AS(d0.enable_peer_access(d1), cudrv::not_supported_error);
  }
  CHECK(errors.count() == 0);
}
