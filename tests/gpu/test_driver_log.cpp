// GPU tier: the driver's log in errors (issue 34 part 2). Driver 580.159.04 (CUDA 13.0) logs, for a launch
// with a 4096-thread block, "One or more of block dimensions of (4096,1,1) exceeds correspsonding maximum
// value of (1024,1024,64)" and "Returning 1 (CUDA_ERROR_INVALID_VALUE) from cuLaunchKernel", and a line for
// cuMemAlloc's out of memory. cudrv refuses an oversized block itself before the driver, so the launch here
// goes through the raw entry point, and the error is built from its status as a program wrapping a raw call
// would build it.
#include <catch2/catch.hpp>

#include <cudaTypedefs.h>
#include <cudrv/cudrv.hpp>

#include <cstddef>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;

namespace {

constexpr std::size_t PiB = std::size_t{1} << 50;

cudrv::library& log_test_library() {
  static cudrv::library lib = cudrv::library::from_file(CUDRV_TEST_KERNELS_CUBIN);
  return lib;
}

// Ends the case with a visible skip where the driver has no log callback (a driver before CUDA 12.9).
#define CUDRV_REQUIRE_DRIVER_LOG()                                                                       \
  do {                                                                                                   \
    CUDRV_REQUIRE_GPU();                                                                                 \
    if (!cudrv::driver_log_active()) {                                                                   \
      std::cout << "SKIPPED: needs a driver with cuLogsRegisterCallback (CUDA 12.9 or later; this one: " \
                << cudrv::driver::version() << ")" << std::endl;                                         \
      return;                                                                                            \
    }                                                                                                    \
  } while (0)

void drain() { (void)cudrv::error(CUDA_ERROR_UNKNOWN, "drain"); }

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& line : lines) {
    out += line + "\n";
  }
  return out;
}

// The raw cuLaunchKernel of empty_kernel with a (4096, 1, 1) block, in the device's primary context, and
// the cudrv::error built from its status right after the call. No Catch2 assertion: threads call it.
cudrv::error raw_oversized_launch(const cudrv::device& dev, CUresult& status) {
  cudrv::context_guard guard(dev.primary_context());
  const cudrv::kernel k = log_test_library().get_kernel("empty_kernel");
  const CUfunction f = k.function(dev.primary_context());
  auto launch = reinterpret_cast<PFN_cuLaunchKernel_v4000>(cudrv::driver::get_entry_point("cuLaunchKernel", 4000));
  status = launch(f, 1, 1, 1, 4096, 1, 1, 0, nullptr, nullptr, nullptr);
  return cudrv::error(status, "cuLaunchKernel");
}

cudrv::error raw_oversized_launch(const cudrv::device& dev) {
  CUresult status = CUDA_SUCCESS;
  cudrv::error e = raw_oversized_launch(dev, status);
  REQUIRE(status == CUDA_ERROR_INVALID_VALUE);
  return e;
}

// The error of a 1 PiB device_buffer (cuMemAlloc), or nothing. No Catch2 assertion: threads call it.
std::optional<cudrv::out_of_memory_error> try_absurd_allocation(const cudrv::device& dev) {
  return catch_as<cudrv::out_of_memory_error>([&] { cudrv::device_buffer<std::byte> b(dev, PiB); });
}

cudrv::out_of_memory_error absurd_allocation(const cudrv::device& dev) {
  auto e = try_absurd_allocation(dev);
  REQUIRE(e.has_value());
  return *e;
}

}  // namespace

TEST_CASE("driver log: a raw launch with a 4096-thread block carries the driver's line naming the block",
          "[gpu][driver-log][driver_error]") {
  CUDRV_REQUIRE_DRIVER_LOG();
  const cudrv::device dev(0);
  drain();
  const cudrv::error e = raw_oversized_launch(dev);
  const std::string log = joined(e.driver_log());
  INFO("driver log:\n" << log << "what(): " << e.what());
  REQUIRE_FALSE(e.driver_log().empty());
  CHECK(contains(log, "4096"));
  CHECK(contains(log, "block dimension"));
  CHECK(contains(std::string(e.what()), "\ndriver log: "));
  CHECK(contains(std::string(e.what()), "4096"));
}

TEST_CASE("driver log: cuMemAlloc of 1 PiB carries the driver's line", "[gpu][driver-log][driver_error]") {
  CUDRV_REQUIRE_DRIVER_LOG();
  const cudrv::device dev(0);
  drain();
  const cudrv::out_of_memory_error e = absurd_allocation(dev);
  INFO("driver log:\n" << joined(e.driver_log()) << "what(): " << e.what());
  CHECK(e.api() == "cuMemAlloc");
  REQUIRE_FALSE(e.driver_log().empty());
  CHECK(contains(std::string(e.what()), "\ndriver log: " + e.driver_log().front()));
}

TEST_CASE("driver log: a successful launch leaves nothing and a later failure carries only its own lines",
          "[gpu][driver-log][driver_error]") {
  CUDRV_REQUIRE_DRIVER_LOG();
  const cudrv::device dev(0);
  cudrv::stream s(dev);
  drain();
  // A refused launch first, then successful work: the refused launch's lines went with its error.
  const cudrv::error refused = raw_oversized_launch(dev);
  CHECK_FALSE(refused.driver_log().empty());
  const cudrv::kernel k = log_test_library().get_kernel("empty_kernel");
  cudrv::launch(s, {.grid = 4, .block = 128}, k);  // untyped (a parameter walk's refusal, if any, is forgotten)
  s.synchronize();
  cudrv::device_buffer<float> fine(dev, 1024);
  const cudrv::out_of_memory_error e = absurd_allocation(dev);
  const std::string log = joined(e.driver_log());
  INFO("driver log:\n" << log);
  REQUIRE_FALSE(e.driver_log().empty());
  CHECK_FALSE(contains(log, "cuLaunchKernel"));
  CHECK_FALSE(contains(log, "block dimension"));
  CHECK_FALSE(contains(log, "4096"));
  CHECK_FALSE(contains(log, "cuKernelGetParamInfo"));
  // A successful call alone builds nothing: an error made now (no driver call failed) carries nothing.
  cudrv::launch(s, {.grid = 4, .block = 128}, k);
  s.synchronize();
  CHECK(cudrv::error(CUDA_ERROR_UNKNOWN, "nothing failed").driver_log().empty());
}

TEST_CASE("driver log: two threads failing at once each get their own lines", "[gpu][driver-log][driver_error]") {
  CUDRV_REQUIRE_DRIVER_LOG();
  const cudrv::device dev(0);
  std::string launch_log;
  std::string alloc_log;
  int refused_launches = 0;
  int refused_allocations = 0;
  std::string thread_failures;  // what a thread threw: reported here, never left to std::terminate
  std::mutex failures_mutex;
  const auto guarded = [&](auto body) {
    return [&, body] {
      try {
        body();
      } catch (const std::exception& e) {
        const std::lock_guard lock(failures_mutex);
        thread_failures += std::string(e.what()) + "\n";
      }
    };
  };
  std::thread launcher(guarded([&] {
    for (int i = 0; i < 20; ++i) {
      CUresult status = CUDA_SUCCESS;
      launch_log += joined(raw_oversized_launch(dev, status).driver_log());
      refused_launches += status == CUDA_ERROR_INVALID_VALUE ? 1 : 0;
    }
  }));
  std::thread allocator(guarded([&] {
    for (int i = 0; i < 20; ++i) {
      if (auto e = try_absurd_allocation(dev)) {
        alloc_log += joined(e->driver_log());
        ++refused_allocations;
      }
    }
  }));
  launcher.join();
  allocator.join();
  INFO("launch thread:\n" << launch_log << "allocation thread:\n" << alloc_log);
  CHECK(thread_failures.empty());
  CHECK(refused_launches == 20);
  CHECK(refused_allocations == 20);
  CHECK(contains(launch_log, "4096"));
  CHECK_FALSE(alloc_log.empty());
  CHECK_FALSE(contains(alloc_log, "4096"));
  CHECK_FALSE(contains(alloc_log, "cuLaunchKernel"));
}
