// Sticky faults, out of memory and fork() (issue 19), against the stand-in driver of fake_cuda.cpp:
// the fake enters the state of a faulted context on demand (every later call returns the fault's
// code until cuDevicePrimaryCtxReset), fails allocations with CUDA_ERROR_OUT_OF_MEMORY on demand, and
// reuses a reset primary context's address, as the real driver may. Device 1 is the usable device
// (device 0 is taken by another process in the fake).
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>
#include <cudrv/cudrv.hpp>
#include <cudrv/rtc.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "fake_driver/fake_hooks.hpp"
#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;

namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

struct fault_fake : cudrv::test::fake_probe {
  void (*sticky_fn)(CUresult) = cudrv::test::fake_hook<void(CUresult)>("fake_cuda_make_sticky");
  void (*fail_fn)(CUresult,
                  long long) = cudrv::test::fake_hook<void(CUresult, long long)>("fake_cuda_fail_allocations");
  void* (*primary_fn)(int) = cudrv::test::fake_hook<void*(int)>("fake_cuda_primary_context");
  int (*refs_fn)(int) = cudrv::test::fake_hook<int(int)>("fake_cuda_primary_refs");
  void (*granularity_fn)(std::size_t, std::size_t) =
      cudrv::test::fake_hook<void(std::size_t, std::size_t)>("fake_cuda_vmm_set_granularity");

  void fault(CUresult code) const { sticky_fn(code); }
  void fail_next_allocation(CUresult code = CUDA_ERROR_OUT_OF_MEMORY) const { fail_fn(code, 1); }
  void* primary(int d) const { return primary_fn(d); }
  int refs(int d) const { return refs_fn(d); }
};

// Counts what the destruction handler receives: everything, sticky faults, objects that outlived their context.
struct destruction_reports {
  static inline int all = 0;
  static inline int sticky = 0;
  static inline int outlived = 0;
  static inline std::string messages;
  cudrv::destruction_error_handler previous;
  destruction_reports() {
    all = sticky = outlived = 0;
    messages.clear();
    previous = cudrv::set_destruction_error_handler([](const cudrv::error& e) noexcept {
      ++all;
      try {
        messages += std::string(e.what()) + "\n";
      } catch (...) {
      }
      sticky += e.is_sticky() ? 1 : 0;
      outlived += e.code() == CUDA_ERROR_CONTEXT_IS_DESTROYED && e.source() == cudrv::error_source::cudrv ? 1 : 0;
    });
  }
  destruction_reports(const destruction_reports&) = delete;
  destruction_reports& operator=(const destruction_reports&) = delete;
  ~destruction_reports() { cudrv::set_destruction_error_handler(previous); }
};

// PTX for sm_90, compiled by NVRTC once.
const cudrv::object_code& scale_ptx() {
  static const cudrv::object_code code =
      cudrv::program("faults.cu", "extern \"C\" __global__ void scale(float* x, float a, int n) {\n"
                                  "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a; }\n")
          .compile(cudrv::code_kind::ptx, {.arch = "sm_90"})
          .code;
  return code;
}

// A round trip through a new device buffer: what a usable context must do.
bool round_trip_works(const cudrv::device& dev, std::uint64_t seed) {
  const std::vector<std::uint8_t> data = cudrv::test::random_bytes(4096, seed);
  cudrv::device_buffer<std::uint8_t> b(dev, data.size());
  cudrv::copy(b, data);
  std::vector<std::uint8_t> back(data.size(), 0xCD);
  cudrv::copy(back, b);
  return back == data;
}

}  // namespace

TEST_CASE("faults: the sticky codes are classified as the CUDA documentation describes them", "[fake-driver][faults]") {
  // The codes after which, per cuda.h, the context "cannot be used anymore" or the process "must be terminated".
  for (int code : {226, 700, 702, 710, 714, 715, 716, 717, 718, 719, 721, 810, 911}) {
    INFO("code " << code << " " << cudrv::error_name(static_cast<CUresult>(code)));
    CHECK(cudrv::is_sticky(static_cast<CUresult>(code)));
  }
  for (CUresult code : {CUDA_SUCCESS, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_NOT_READY,
                        CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_UNKNOWN,
                        CUDA_ERROR_CONTEXT_IS_DESTROYED, CUDA_ERROR_ECC_UNCORRECTABLE}) {
    INFO("code " << cudrv::error_name(code));
    CHECK_FALSE(cudrv::is_sticky(code));
  }
  // Only the driver's codes are faults: cudrv's own refusals never are.
  const cudrv::error driver_fault(CUDA_ERROR_ILLEGAL_ADDRESS, "cuStreamSynchronize", "stream 0x1");
  CHECK(driver_fault.is_sticky());
  CHECK(contains(driver_fault.what(), "sticky fault"));
  CHECK(contains(driver_fault.what(), "cudrv::device::reset_primary_context()"));
  const cudrv::error cudrv_refusal(cudrv::error_source::cudrv, CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
                                   "text", "cudrv::x", {});
  CHECK_FALSE(cudrv_refusal.is_sticky());
  CHECK_FALSE(contains(cudrv_refusal.what(), "sticky fault"));
  CHECK_FALSE(cudrv::error(CUDA_ERROR_INVALID_VALUE, "cuMemAlloc").is_sticky());
}

TEST_CASE("faults: after a sticky fault calls throw context_fault_error, every owner is destroyed without a throw, "
          "and a primary-context reset makes the device usable again",
          "[fake-driver][faults][driver_error]") {
  fault_fake f;
  f.granularity_fn(2 * MiB, 2 * MiB);
  const cudrv::device dev(1);
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");
  (void)dev.primary_context();
  const int refs_before = f.refs(1);
  {
    destruction_reports reports;
    // One owner of every kind, made before the fault.
    cudrv::stream s(dev);
    cudrv::event ev(dev);
    cudrv::device_buffer<float> sync_buffer(dev, 1024);
    cudrv::device_buffer<float> ordered(s, 1024);
    cudrv::memory_pool pool(dev);
    cudrv::device_buffer<float> pooled(pool, s, 1024);
    cudrv::pinned_buffer<float> pinned(dev, 1024);
    cudrv::managed_buffer<float> managed(dev, 1024);
    cudrv::graph g;
    cudrv::library lib(scale_ptx(), dev);
    cudrv::kernel k = lib.get_kernel("scale");
    cudrv::physical_allocation physical(dev, 2 * MiB);
    cudrv::growable_buffer<float> growable(dev, 8 * MiB / sizeof(float), {.chunk_bytes = 2 * MiB});
    growable.resize(1024);
    (void)dev.default_stream();

    f.fault(CUDA_ERROR_ILLEGAL_ADDRESS);  // a kernel wrote out of bounds

    auto e = catch_as<cudrv::context_fault_error>([&] { s.synchronize(); });
    REQUIRE(e.has_value());
    INFO("what(): " << e->what());
    CHECK(e->is_sticky());
    CHECK(e->result() == CUDA_ERROR_ILLEGAL_ADDRESS);
    CHECK(e->api() == "cuStreamSynchronize");
    CHECK(contains(e->what(), "sticky fault"));
    CHECK(contains(e->what(), "reset_primary_context"));
    // Every later call in the context fails the same way, typed: an allocation, a copy, a launch.
    CHECK(catch_as<cudrv::context_fault_error>([&] { cudrv::device_buffer<float> more(dev, 16); }));
    std::vector<float> host(1024, 1.0f);
    CHECK(catch_as<cudrv::context_fault_error>([&] { cudrv::copy(sync_buffer, host); }));
    // A launch is not diagnosed as its own fault (a launch_error naming a limit), it reports the fault.
    auto launch = catch_as<cudrv::context_fault_error>(
        [&] { cudrv::launch(s, {.grid = 4, .block = 256}, k, sync_buffer.get(), 2.0f, 1024); });
    REQUIRE(launch.has_value());
    INFO("launch: " << launch->what());
    CHECK(launch->is_sticky());
    CHECK(launch->api() == "cuLaunchKernel");
    CHECK(contains(launch->what(), "'scale'"));

    // Dropping everything made in the context: no throw (a throw from a destructor terminates), no
    // hang; each failure is a sticky one, reported to the handler.
    growable.reset();
    physical.reset();
    k.reset();
    lib.reset();
    g.reset();
    managed.reset();
    pinned.reset();
    pooled.reset();
    pool.reset();
    ordered.reset();
    sync_buffer.reset();
    ev.reset();
    s.reset();
    CHECK(reports.all > 0);
    CHECK(reports.sticky == reports.all);  // nothing else went wrong

    // Recovery: reset the primary context, and it works again.
    const long long resets = f.counter("primary_resets");
    dev.reset_primary_context();
    CHECK(f.counter("primary_resets") == resets + 1);
  }
  CHECK(f.refs(1) == refs_before);  // cudrv still holds exactly its one reference
  CHECK(f.primary(1) == dev.primary_context().native_handle());
  CHECK(dev.primary_context_active());
  {
    cudrv::test::destruction_error_counter errors;
    CHECK(round_trip_works(dev, seed));
    cudrv::stream s(dev);
    cudrv::device_buffer<float> x(s, 256);
    cudrv::library lib(scale_ptx(), dev);
    cudrv::launch(s, {.grid = 1, .block = 256}, lib.get_kernel("scale"), x.get(), 2.0f, 256);
    s.synchronize();
    dev.default_stream().synchronize();  // made again: the old one went with the reset
    x.reset();
    CHECK(errors.count() == 0);
    INFO(errors.messages());
  }
}

TEST_CASE("faults: an object that outlives a primary-context reset frees nothing, even when the context and the "
          "address are handed out again",
          "[fake-driver][faults][misuse]") {
  fault_fake f;
  const cudrv::device dev(1);
  const CUcontext before = dev.primary_context().native_handle();
  destruction_reports reports;
  cudrv::device_buffer<std::uint8_t> kept(dev, 4096);
  cudrv::stream kept_stream(dev);
  cudrv::event kept_event(dev);
  const CUdeviceptr old_address = reinterpret_cast<CUdeviceptr>(kept.get());

  dev.reset_primary_context();
  // The driver may give the reset context the same handle: cudrv must still know the old objects are gone.
  CHECK(dev.primary_context().native_handle() == before);
  CHECK_FALSE(f.is_live(old_address));  // the reset freed it

  cudrv::device_buffer<std::uint8_t> fresh(dev, 4096);
  CHECK(reinterpret_cast<CUdeviceptr>(fresh.get()) == old_address);  // the same address, handed out again
  kept.reset();
  kept_stream.reset();
  kept_event.reset();
  CHECK(f.is_live(reinterpret_cast<CUdeviceptr>(fresh.get())));  // the old owner did not free the new allocation
  INFO(reports.messages);
  CHECK(reports.outlived == 3);
  CHECK(reports.all == 3);
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  CHECK(round_trip_works(dev, seed));
}

TEST_CASE("faults: a reset keeps the primary context current where the caller had it current",
          "[fake-driver][faults]") {
  fault_fake f;
  const cudrv::device dev(1);
  dev.set_current();
  dev.reset_primary_context();
  CHECK(cudrv::context_ref::current().native_handle() == dev.primary_context().native_handle());
  CHECK(f.primary(1) == dev.primary_context().native_handle());
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  CHECK(round_trip_works(dev, seed));
  // Leave no context current, as the case found the thread.
  auto set_current = reinterpret_cast<CUresult (*)(CUcontext)>(cudrv::driver::get_entry_point("cuCtxSetCurrent", 4000));
  CHECK(set_current(nullptr) == CUDA_SUCCESS);
}

TEST_CASE("faults: resetting a device whose primary context cudrv never used leaves it inactive",
          "[fake-driver][faults]") {
  fault_fake f;
  const cudrv::device dev(1);
  if (f.refs(1) != 0) {
    // Only in a process of its own (ctest runs each case alone): here an earlier case used device 1.
    SUCCEED("device 1's primary context is in use in this process already: nothing to check");
    return;
  }
  const long long retains = f.counter("primary_retain:1");
  const long long resets = f.counter("primary_resets");
  dev.reset_primary_context();
  CHECK(f.counter("primary_retain:1") == retains);  // no context made that nobody named
  CHECK(f.counter("primary_resets") == resets + 1);
  CHECK(f.primary(1) == nullptr);
  // Refused: an invalid ordinal never reaches the driver.
  CHECK(catch_as<cudrv::error>([] { cudrv::device::from_native_handle(7).reset_primary_context(); }));
}

// --- out of memory -----------------------------------------------------------------------------------

TEST_CASE("out of memory: every allocation path throws out_of_memory_error with the bytes asked and free",
          "[fake-driver][oom][driver_error]") {
  fault_fake f;
  f.granularity_fn(2 * MiB, 2 * MiB);
  const cudrv::device dev(1);
  cudrv::test::destruction_error_counter errors;
  const std::size_t free_now = dev.free_memory();
  const std::string free_text = std::to_string(free_now);
  cudrv::stream s(dev);
  const std::size_t n = 3000;

  auto expect = [&](const char* api, std::size_t bytes, auto&& allocate) {
    INFO(api);
    f.fail_next_allocation();
    auto e = catch_as<cudrv::out_of_memory_error>(allocate);
    REQUIRE(e.has_value());
    INFO("what(): " << e->what());
    CHECK(e->api() == api);
    CHECK(e->result() == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(e->requested_bytes() == bytes);
    CHECK(contains(e->what(), std::to_string(bytes)));
    return *e;
  };

  SECTION("device memory in a context: cuMemAlloc") {
    auto e = expect("cuMemAlloc", n * sizeof(double), [&] { cudrv::device_buffer<double> b(dev, n); });
    CHECK(e.free_bytes() == free_now);
    CHECK(e.total_bytes() == dev.total_memory());
    CHECK(contains(e.what(), free_text));
    CHECK(contains(e.what(), "device 1"));
    CHECK(e.pool_reserved_bytes() == cudrv::out_of_memory_error::unknown_bytes);
  }
  SECTION("stream-ordered from the device's current pool: cuMemAllocAsync, with the pool's figures") {
    auto e = expect("cuMemAllocAsync", n * sizeof(float), [&] { cudrv::device_buffer<float> b(s, n); });
    CHECK(e.free_bytes() == free_now);
    const cudrv::memory_pool_ref current = cudrv::current_memory_pool(dev);
    CHECK(e.pool_reserved_bytes() == current.reserved_current());
    CHECK(e.pool_used_bytes() == current.used_current());
    CHECK(contains(e.what(), "the pool holds"));
  }
  SECTION("from a named pool: cuMemAllocFromPoolAsync, with that pool's reserve and use") {
    cudrv::memory_pool pool(dev);
    cudrv::device_buffer<std::uint8_t> in_use(pool, s, 5 * MiB);
    auto e = expect("cuMemAllocFromPoolAsync", n, [&] { cudrv::device_buffer<std::uint8_t> b(pool, s, n); });
    CHECK(e.pool_used_bytes() == 5 * MiB);
    CHECK(e.pool_used_bytes() == pool.used_current());
    CHECK(e.pool_reserved_bytes() == pool.reserved_current());
    CHECK(e.pool_reserved_bytes() >= e.pool_used_bytes());
    CHECK(contains(e.what(), std::to_string(pool.reserved_current())));
    CHECK(contains(e.what(), "trim_to"));
    in_use.reset();
    s.synchronize();
  }
  SECTION("a pool memory resource: cuMemAllocFromPoolAsync") {
    cudrv::memory_pool pool(dev);
    cudrv::pool_memory_resource mr(pool, s);
    auto e = expect("cuMemAllocFromPoolAsync", 4096, [&] { (void)mr.allocate_async(4096, 256, s); });
    CHECK(e.free_bytes() == free_now);
    CHECK(e.pool_used_bytes() == 0);
  }
  SECTION("pinned host memory: cuMemHostAlloc, with the host's available memory") {
    auto e = expect("cuMemHostAlloc", n * sizeof(int), [&] { cudrv::pinned_buffer<int> b(dev, n); });
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page = sysconf(_SC_PAGESIZE);
    CHECK(e.total_bytes() == static_cast<std::size_t>(pages) * static_cast<std::size_t>(page));
    CHECK(e.free_bytes() <= e.total_bytes());
    CHECK(contains(e.what(), "of host memory free"));
  }
  SECTION("managed memory: cuMemAllocManaged") {
    auto e = expect("cuMemAllocManaged", n * sizeof(int), [&] { cudrv::managed_buffer<int> b(dev, n); });
    CHECK(e.free_bytes() == free_now);
  }
  SECTION("a physical allocation (VMM): cuMemCreate; free memory read only in a current context of the device") {
    // No context current (an earlier case of this process may have left one).
    auto set_current =
        reinterpret_cast<CUresult (*)(CUcontext)>(cudrv::driver::get_entry_point("cuCtxSetCurrent", 4000));
    REQUIRE(set_current(nullptr) == CUDA_SUCCESS);
    const long long made_current = f.counter("made_current:1");
    auto e = expect("cuMemCreate", 4 * MiB, [&] { cudrv::physical_allocation a(dev, 4 * MiB); });
    CHECK(e.free_bytes() == cudrv::out_of_memory_error::unknown_bytes);
    CHECK(contains(e.what(), "free memory was not read"));
    CHECK(f.counter("made_current:1") == made_current);  // nothing made current that nobody named
    cudrv::context_guard current(dev.primary_context());
    auto named = expect("cuMemCreate", 4 * MiB, [&] { cudrv::physical_allocation a(dev, 4 * MiB); });
    CHECK(named.free_bytes() == free_now);
  }
  SECTION("a growable buffer's next chunk: cuMemCreate") {
    cudrv::context_guard current(dev.primary_context());
    cudrv::growable_buffer<std::uint8_t> g(dev, 16 * MiB, {.chunk_bytes = 2 * MiB});
    g.resize(MiB);
    auto e = expect("cuMemCreate", 2 * MiB, [&] { g.resize(3 * MiB); });
    CHECK(e.free_bytes() == free_now);
    CHECK(g.size() == MiB);  // the failed growth changed nothing
    g.resize(3 * MiB);       // and the next one works
    CHECK(g.size() == 3 * MiB);
  }
  SECTION("other failures of an allocation keep their own type") {
    f.fail_next_allocation(CUDA_ERROR_INVALID_VALUE);
    auto e = catch_as<cudrv::error>([&] { cudrv::device_buffer<double> b(dev, n); });
    REQUIRE(e.has_value());
    CHECK(dynamic_cast<const cudrv::out_of_memory_error*>(&*e) == nullptr);
    CHECK(e->result() == CUDA_ERROR_INVALID_VALUE);
  }
  CHECK(errors.count() == 0);
}

TEST_CASE("out of memory: trim_to reaches cuMemPoolTrimTo and gives the unused reserve back", "[fake-driver][oom]") {
  fault_fake f;
  const cudrv::device dev(1);
  cudrv::stream s(dev);
  cudrv::memory_pool pool(dev);
  cudrv::device_buffer<std::uint8_t> a(pool, s, 40 * MiB);
  { cudrv::device_buffer<std::uint8_t> b(pool, s, 30 * MiB); }
  s.synchronize();
  CHECK(pool.used_current() == 40 * MiB);
  CHECK(pool.reserved_current() > pool.used_current());
  pool.trim_to(0);
  CHECK(contains(f.log(), "pool_trim"));
  CHECK(pool.reserved_current() == pool.used_current());  // what is in use cannot be given back
}

// --- fork() --------------------------------------------------------------------------------------------

namespace {
// Runs child() in a forked child and returns its exit status (or -1 when it did not exit normally).
template <class Child>
int in_forked_child(Child&& child) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    int code = 99;
    try {
      code = child();
    } catch (...) {
      code = 98;
    }
    std::fflush(nullptr);
    _exit(code);
  }
  REQUIRE(pid > 0);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
}  // namespace

TEST_CASE("fork: a child of a parent that initialised CUDA gets fork_error from its first call, and the parent's "
          "objects are destroyed in it without reaching the driver",
          "[fake-driver][fork]") {
  fault_fake f;
  const cudrv::device dev(1);
  cudrv::stream s(dev);
  cudrv::device_buffer<float> inherited(s, 256);
  cudrv::device_buffer<float> inherited_sync(dev, 256);
  cudrv::event ev(dev);
  const CUdeviceptr address = reinterpret_cast<CUdeviceptr>(inherited.get());
  // Looked up in the parent: the hooks' lookup asks cudrv::driver::available(), false in the child.
  long long (*counter)(const char*) = cudrv::test::fake_hook<long long(const char*)>("fake_cuda_counter");

  const int code = in_forked_child([&]() -> int {
    // The parent's objects go first: nothing reaches the driver, nothing is reported.
    int reported = 0;
    static int* seen = &reported;
    cudrv::set_destruction_error_handler([](const cudrv::error&) noexcept { ++*seen; });
    const long long frees = counter("frees");
    const long long calls = counter("failed_calls");
    inherited.reset();
    inherited_sync.reset();
    ev.reset();
    s.reset();
    if (counter("frees") != frees || counter("failed_calls") != calls) {
      return 10;  // a destructor reached the (parent's) driver
    }
    if (reported != 0) {
      return 11;
    }
    if (cudrv::driver::available() || !contains(cudrv::driver::unavailable_reason(), "forked")) {
      return 12;
    }
    // The first call that would reach the driver: a typed error naming fork.
    try {
      cudrv::device_buffer<float> b(dev, 16);
      return 13;
    } catch (const cudrv::fork_error& e) {
      if (!contains(e.what(), "forked") || e.source() != cudrv::error_source::cudrv) {
        std::fprintf(stderr, "child: %s\n", e.what());
        return 14;
      }
    }
    // Every kind of call, also one never resolved in the parent and a catch as driver_unavailable_error.
    try {
      (void)cudrv::driver::get_entry_point("cuMemGetInfo", 3020);
      (void)dev.free_memory();
      return 15;
    } catch (const cudrv::driver_unavailable_error& e) {
      if (dynamic_cast<const cudrv::fork_error*>(&e) == nullptr) {
        return 16;
      }
    }
    try {
      cudrv::stream other(dev);
      return 17;
    } catch (const cudrv::fork_error&) {
    }
    return counter("failed_calls") == calls ? 0 : 18;
  });
  CHECK(code == 0);
  // The parent is untouched: its objects are alive and work.
  CHECK(f.is_live(address));
  const std::vector<float> data(256, 3.5f);
  cudrv::copy(inherited, data, s);
  std::vector<float> back(256, 0.0f);
  cudrv::copy(back, inherited, s);
  s.synchronize();
  CHECK(back == data);
}
