// GPU tier, one process over every visible GPU (cudrv_multigpu_tests): communicators made by
// ncclCommInitAll (cudrv::nccl::communicator::init_all), one rank per device, every collective launched
// from one thread inside one cudrv::nccl::group per call and checked on the host (collectives.hpp):
// float, double, int32, int64, uint8, half and bfloat16; in place and out of place; every reduction,
// every root; send/recv as a ring and pairwise. Runs with any number of devices, one included (then
// every communicator has one rank). The [needs-2-gpus] case skips with a message on one GPU.
//
// NVLink SHARP multicast stays off: NCCL_NVLS_ENABLE=0 is set in this process before the first NCCL
// call, unless the variable is already set.
#include <catch2/catch.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudrv/nccl.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "collectives.hpp"
#include "support/test_support.hpp"
#include "watchdog.hpp"

namespace nccl = cudrv::nccl;
namespace mg = cudrv::test::multigpu;

namespace {

// Whether the NCCL cases can run; prints the skip line (matched by ctest's skip expression) if not.
bool nccl_setup() {
  ::setenv("NCCL_NVLS_ENABLE", "0", 0);  // before the first NCCL call; keeps a value already set
  if (!cudrv::test::gpu_available()) {
    std::cout << "SKIPPED: no CUDA device (" << cudrv::test::gpu_unavailable_reason() << ")" << std::endl;
    return false;
  }
  if (!nccl::available()) {
    std::cout << "SKIPPED: no CUDA device usable with NCCL (" << nccl::unavailable_reason() << ")" << std::endl;
    return false;
  }
  return true;
}

#define CUDRV_REQUIRE_NCCL() \
  do {                       \
    if (!nccl_setup()) {     \
      return;                \
    }                        \
  } while (0)

std::vector<cudrv::device> every_device() {
  std::vector<cudrv::device> out;
  for (cudrv::device d : cudrv::devices()) {
    out.push_back(d);
  }
  return out;
}

// The communicators of init_all over `devs`, a stream on each device, and the slots over both.
struct local_job {
  std::vector<cudrv::device> devs;
  std::vector<nccl::communicator> comms;
  std::vector<cudrv::stream> streams;
  std::vector<mg::rank_slot> slots;

  explicit local_job(std::vector<cudrv::device> devices)
      : devs(std::move(devices)), comms(nccl::communicator::init_all(devs)) {
    REQUIRE(comms.size() == devs.size());
    for (const cudrv::device& d : devs) {
      streams.emplace_back(d);
    }
    for (std::size_t i = 0; i < devs.size(); ++i) {
      slots.push_back(mg::rank_slot{comms[i], devs[i], streams[i]});
    }
  }
};

}  // namespace

TEMPLATE_TEST_CASE(
    "multigpu: every collective over all GPUs of one process (ncclCommInitAll), in place and out of place",
    "[gpu][nccl][multigpu]", float, double, std::int32_t, std::int64_t, std::uint8_t, __half, __nv_bfloat16) {
  CUDRV_REQUIRE_NCCL();
  mg::watchdog_scope guard(std::string("every collective over all local GPUs for ") + mg::type_name<TestType>(),
                           std::chrono::seconds(280));
  const std::uint64_t seed = cudrv::test::test_seed();
  cudrv::test::destruction_error_counter errors;
  {
    local_job job(every_device());
    const int n = static_cast<int>(job.devs.size());
    std::cout << "multigpu: " << mg::type_name<TestType>() << " over " << n << " device(s), seed " << seed
              << " (CUDRV_TEST_SEED=" << seed << " replays)" << std::endl;
    for (int i = 0; i < n; ++i) {
      const auto ui = static_cast<std::size_t>(i);
      CHECK(job.comms[ui].rank() == i);
      CHECK(job.comms[ui].size() == n);
      CHECK(job.comms[ui].device() == job.devs[ui]);
    }
    mg::check_every_collective<TestType>(job.slots, seed);
    for (const nccl::communicator& c : job.comms) {
      CHECK(c.async_error() == nccl::result::success);
    }
  }  // every communicator finalized and destroyed
  CHECK(errors.count() == 0);
}

TEST_CASE("multigpu: ncclCommInitAll over the devices in reverse order", "[gpu][nccl][multigpu][needs-2-gpus]") {
  CUDRV_REQUIRE_NCCL();
  mg::watchdog_scope guard("init_all over the devices in reverse order", std::chrono::seconds(280));
  std::vector<cudrv::device> devs = every_device();
  if (devs.size() < 2) {
    std::cout << "SKIPPED: needs 2 GPUs (" << devs.size() << " device)" << std::endl;
    return;
  }
  const std::uint64_t seed = cudrv::test::test_seed();
  cudrv::test::destruction_error_counter errors;
  {
    std::vector<cudrv::device> reversed(devs.rbegin(), devs.rend());
    local_job job(reversed);
    for (std::size_t i = 0; i < reversed.size(); ++i) {
      CHECK(job.comms[i].rank() == static_cast<int>(i));
      CHECK(job.comms[i].device() == reversed[i]);  // rank i on the i-th device named, not on device i
    }
    const mg::call_context c{seed, 4099};
    INFO("seed " << seed);
    mg::check_all_reduce<float>(job.slots, c);
    mg::check_broadcast<std::int32_t>(job.slots, c);
    mg::check_send_recv_ring<__nv_bfloat16>(job.slots, c);
  }
  CHECK(errors.count() == 0);
}
