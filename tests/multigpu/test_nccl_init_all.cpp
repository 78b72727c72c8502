// GPU tier, one process over every visible GPU (cudrv_multigpu_tests): communicators made by
// ncclCommInitAll (cudrv::nccl::communicator::init_all), one rank per device, every collective launched
// from one thread inside one cudrv::nccl::group per call and checked on the host (collectives.hpp):
// float, double, int32, int64, uint8, half and bfloat16; in place and out of place; every reduction,
// every root; send/recv as a ring and pairwise. Runs with any number of devices, one included (then
// every communicator has one rank). The [needs-2-gpus] cases skip with a message on one GPU.
//
// NCCL 2.28's additions (collectives_nccl228.hpp): all_to_all, gather, scatter (in place and out of
// place, every root) and all_to_all_v (uneven, zero counts, gaps) for float, int32 and the 16-bit types
// as bits; premul_sum with host and device scalars; nccl::buffer with symmetric windows (registered and
// deregistered from one thread per rank: collective calls); and, with 2 GPUs or more, group::simulate_end,
// shrink (the last rank left out; each survivor shrinks on its own thread) and revoke then shrink.
//
// NVLink SHARP multicast stays off: NCCL_NVLS_ENABLE=0 is set in this process before the first NCCL
// call, unless the variable is already set.
#include <catch2/catch.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudrv/nccl.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "collectives.hpp"
#include "collectives_nccl228.hpp"
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

// --- NCCL 2.28: all_to_all, gather, scatter, all_to_all_v, premul_sum, buffers and windows, simulate_end,
// shrink and revoke (issue 35) ---------------------------------------------------------------------------

namespace {

// The slots of communicators made from job's (new ranks, each on the device and stream of the old rank
// old_ranks[i]).
std::vector<mg::rank_slot> slots_of(local_job& job, std::vector<nccl::communicator>& comms,
                                    const std::vector<int>& old_ranks) {
  std::vector<mg::rank_slot> out;
  for (std::size_t i = 0; i < comms.size(); ++i) {
    const auto old = static_cast<std::size_t>(old_ranks[i]);
    out.push_back(mg::rank_slot{comms[i], job.devs[old], job.streams[old]});
  }
  return out;
}

// Shrinks job's communicators without rank `excluded`: every survivor calls shrink on a thread of its
// own (a collective over the survivors), the excluded one does not. Checks the renumbering and runs
// collectives on the new communicators.
void shrink_and_check(local_job& job, int excluded, nccl::shrink_mode mode, std::uint64_t seed) {
  const int n = static_cast<int>(job.comms.size());
  const std::vector<int> exclude{excluded};
  std::vector<int> survivors;
  for (int r = 0; r < n; ++r) {
    if (r != excluded) {
      survivors.push_back(r);
    }
  }
  std::vector<nccl::communicator> shrunk(survivors.size());
  mg::on_threads(survivors.size(), [&](std::size_t k) {
    shrunk[k] = job.comms[static_cast<std::size_t>(survivors[k])].shrink(exclude, mode);
  });
  for (std::size_t k = 0; k < shrunk.size(); ++k) {
    INFO("old rank " << survivors[k]);
    REQUIRE(shrunk[k]);
    CHECK(shrunk[k].rank() == static_cast<int>(k));  // renumbered densely, in the old order
    CHECK(shrunk[k].size() == n - 1);
    CHECK(shrunk[k].device() == job.devs[static_cast<std::size_t>(survivors[k])]);
  }
  const std::vector<mg::rank_slot> slots = slots_of(job, shrunk, survivors);
  const mg::call_context c{seed, 4099};
  mg::check_all_reduce<float>(slots, c);
  mg::check_all_to_all<std::int32_t>(slots, c);
  for (const nccl::communicator& comm : shrunk) {
    CHECK(comm.async_error() == nccl::result::success);
  }
}  // the new communicators are destroyed here; the old ones (the excluded rank's too) by the job, later

}  // namespace

// One case, one set of communicators for every element type (each ncclCommInitAll over N GPUs costs
// seconds, many more under compute-sanitizer).
TEST_CASE("multigpu: all_to_all gather scatter all_to_all_v and premul_sum over all GPUs of one process",
          "[gpu][nccl][multigpu]") {
  CUDRV_REQUIRE_NCCL();
  mg::watchdog_scope guard("the NCCL 2.28 collectives and premul_sum over all local GPUs", std::chrono::seconds(280));
  const std::uint64_t seed = cudrv::test::test_seed();
  cudrv::test::destruction_error_counter errors;
  {
    local_job job(every_device());
    std::cout << "multigpu: NCCL 2.28 collectives over " << job.devs.size() << " device(s), seed " << seed
              << " (CUDRV_TEST_SEED=" << seed << " replays)" << std::endl;
    mg::check_new_copy_collectives<float>(job.slots, seed);
    mg::check_new_copy_collectives<std::int32_t>(job.slots, seed);
    mg::check_new_copy_collectives<nccl::half_t>(job.slots, seed);
    mg::check_new_copy_collectives<nccl::bfloat16_t>(job.slots, seed);
    mg::check_premul_sum<float>(job.slots, seed);
    mg::check_premul_sum<double>(job.slots, seed);
    for (const nccl::communicator& c : job.comms) {
      CHECK(c.async_error() == nccl::result::success);
    }
  }  // the operators are gone before their communicators
  CHECK(errors.count() == 0);
}

TEST_CASE("multigpu: nccl::buffer registered as a symmetric window on every GPU of one process",
          "[gpu][nccl][multigpu]") {
  CUDRV_REQUIRE_NCCL();
  mg::watchdog_scope guard("symmetric windows over all local GPUs", std::chrono::seconds(280));
  const std::uint64_t seed = cudrv::test::test_seed();
  cudrv::test::destruction_error_counter errors;
  {
    local_job job(every_device());
    // Registration and deregistration are collective: one thread per rank.
    mg::check_window_all_reduce<std::int32_t>(job.slots, seed, (std::size_t{1} << 20) + 3,
                                              mg::every_rank_on_its_thread{});
    mg::check_window_all_reduce<float>(job.slots, seed, 4099, mg::every_rank_on_its_thread{});
  }
  CHECK(errors.count() == 0);
}

TEST_CASE("multigpu: group simulate_end estimates without launching", "[gpu][nccl][multigpu][needs-2-gpus]") {
  CUDRV_REQUIRE_NCCL();
  mg::watchdog_scope guard("simulate_end over all local GPUs", std::chrono::seconds(280));
  std::vector<cudrv::device> devs = every_device();
  if (devs.size() < 2) {  // a one-rank collective runs at once, in a group or not: nothing to simulate
    std::cout << "SKIPPED: needs 2 GPUs (" << devs.size() << " device)" << std::endl;
    return;
  }
  cudrv::test::destruction_error_counter errors;
  {
    local_job job(devs);
    mg::check_simulate_end(job.slots, cudrv::test::test_seed());
  }
  CHECK(errors.count() == 0);
}

TEST_CASE("multigpu: shrink leaves the last rank out with every rank alive", "[gpu][nccl][multigpu][needs-2-gpus]") {
  CUDRV_REQUIRE_NCCL();
  mg::watchdog_scope guard("shrink over all local GPUs", std::chrono::seconds(280));
  std::vector<cudrv::device> devs = every_device();
  if (devs.size() < 2) {
    std::cout << "SKIPPED: needs 2 GPUs (" << devs.size() << " device)" << std::endl;
    return;
  }
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  cudrv::test::destruction_error_counter errors;
  {
    local_job job(devs);
    const int n = static_cast<int>(devs.size());
    // A rank that names itself is refused before NCCL (it must not call shrink at all).
    const std::vector<int> last{n - 1};
    CHECK_THROWS_AS((void)job.comms.back().shrink(last), cudrv::invalid_argument_error);
    shrink_and_check(job, n - 1, nccl::shrink_mode::normal, seed);
    // The parents are untouched by a normal shrink: every rank, the excluded one included, still works.
    mg::check_all_reduce<float>(job.slots, mg::call_context{seed, 1031});
  }  // the old communicators, finalized once the survivors are done with theirs
  CHECK(errors.count() == 0);
}

TEST_CASE("multigpu: revoke then shrink a live communicator", "[gpu][nccl][multigpu][needs-2-gpus]") {
  CUDRV_REQUIRE_NCCL();
  mg::watchdog_scope guard("revoke and shrink over all local GPUs", std::chrono::seconds(280));
  std::vector<cudrv::device> devs = every_device();
  if (devs.size() < 2) {
    std::cout << "SKIPPED: needs 2 GPUs (" << devs.size() << " device)" << std::endl;
    return;
  }
  if (!nccl::supports(nccl::feature::revoke)) {
    std::cout << "SKIPPED: needs ncclCommRevoke (NCCL 2.28.9); the loaded NCCL (" << nccl::library_path()
              << ") lacks it" << std::endl;
    return;
  }
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  cudrv::test::destruction_error_counter errors;
  {
    local_job job(devs);
    mg::check_all_reduce<float>(job.slots, mg::call_context{seed, 1031});  // in use before the revoke
    for (nccl::communicator& c : job.comms) {
      c.revoke();  // local: stops in-flight work and waits until the communicator is quiescent
    }
    // Rank 0 left out: the others are renumbered one down.
    shrink_and_check(job, 0, nccl::shrink_mode::normal, seed);
  }  // the revoked parents are destroyed without finalizing
  CHECK(errors.count() == 0);
}
