// The library's global state first used by many threads at once (docs/reliability.md, "Thread
// safety"), against the stand-in driver: loading the driver, resolving entry points, the device list,
// the primary-context cache, the default streams, NVTX naming, NVRTC loading and the compile cache.
// ctest runs each case in a process of its own, so what a case touches first is really first used by
// its threads, all released together. Built with -fsanitize=thread (scripts/build-tsan.sh) the same
// cases check that no access races.
#include <catch2/catch.hpp>

#include <cudrv/cudrv.hpp>
#include <cudrv/nvtx.hpp>
#include <cudrv/rtc.hpp>

#include <dirent.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstdint>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fake_driver/fake_hooks.hpp"
#include "support/scratch.hpp"

namespace {

constexpr int thread_count = 16;

// Runs body(i) on thread_count threads released together; returns the exceptions' messages.
std::vector<std::string> run_together(const std::function<void(int)>& body) {
  std::barrier start(thread_count);
  std::mutex mutex;
  std::vector<std::string> failures;
  std::vector<std::thread> threads;
  for (int i = 0; i < thread_count; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      try {
        body(i);
      } catch (const std::exception& e) {
        std::lock_guard lock(mutex);
        failures.emplace_back(e.what());
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  return failures;
}

std::size_t entries_in(const std::string& dir) {
  std::size_t n = 0;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      n += std::string_view(e->d_name).ends_with(".entry") ? 1 : 0;
    }
    ::closedir(d);
  }
  return n;
}

}  // namespace

TEST_CASE("threads: the driver, entry points, devices and primary contexts first used at once",
          "[fake-driver][threads]") {
  // Nothing in this process has touched cudrv yet: every thread races to load the driver.
  struct seen {
    bool available = false;
    int version = 0;
    int count = 0;
    std::string name;
    int cc = 0;
    CUcontext primary = nullptr;
    CUstream default_stream = nullptr;
    std::string device0_error;
    std::vector<unsigned> copied;
    std::vector<unsigned> expected;
  };
  std::vector<seen> out(thread_count);
  const auto failures = run_together([&](int i) {
    seen& s = out[static_cast<std::size_t>(i)];
    s.available = cudrv::driver::available();
    s.version = cudrv::driver::version();
    s.count = cudrv::device_count();
    cudrv::device dev(1);
    s.name = dev.name();
    s.cc = dev.compute_capability().as_int();
    s.primary = dev.primary_context().native_handle();
    s.default_stream = dev.default_stream().native_handle();
    try {
      (void)cudrv::device(0).primary_context();  // device 0 is held by another process
    } catch (const cudrv::error& e) {
      s.device0_error = e.name();
    }
    cudrv::stream st(dev);
    cudrv::nvtx::name(st, "thread " + std::to_string(i));
    cudrv::event ev(dev);
    std::mt19937 rng(static_cast<unsigned>(i));
    s.expected.resize(1000 + static_cast<std::size_t>(i));
    for (auto& e : s.expected) {
      e = rng();
    }
    s.copied.assign(s.expected.size(), 0xdeadbeefu);
    {
      cudrv::device_buffer<unsigned> b(st, s.expected.size());
      cudrv::copy(b, s.expected, st);
      cudrv::copy(s.copied, b, st);
      ev.record(st);
    }
    ev.synchronize();
    st.synchronize();
  });
  INFO((failures.empty() ? std::string() : failures.front()));
  REQUIRE(failures.empty());
  const seen& first = out.front();
  CHECK(first.available);
  CHECK(first.count == 2);
  CHECK(first.cc == 90);
  CHECK(first.primary != nullptr);
  CHECK(first.device0_error == "CUDA_ERROR_DEVICE_UNAVAILABLE");
  for (const seen& s : out) {
    CHECK(s.available == first.available);
    CHECK(s.version == first.version);
    CHECK(s.count == first.count);
    CHECK(s.name == first.name);
    CHECK(s.cc == first.cc);
    CHECK(s.primary == first.primary);  // one primary context, retained once below
    CHECK(s.default_stream == first.default_stream);
    CHECK(s.device0_error == first.device0_error);
    CHECK(s.copied == s.expected);
  }
  cudrv::test::fake_probe fake;
  CHECK(fake.counter("primary_retain:1") == 1);  // the cache retained device 1's primary context once
  // The only refused calls: each thread's retain of device 0 (a failure is not cached, so each
  // thread asks and gets the same error).
  CHECK(fake.counter("failed_calls") == thread_count);
}

TEST_CASE("threads: NVRTC and one compile cache first used at once compile one key", "[fake-driver][threads]") {
  cudrv::test::temp_dir dir("cudrv-threads-cache");
  cudrv::compile_cache cache(dir.path.string());
  const std::string source = "extern \"C\" __global__ void scale(float* x, float a, int n) {\n"
                             "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                             "  if (i < n) x[i] *= a;\n"
                             "}\n";
  std::vector<std::string> images(thread_count);
  std::vector<std::string> ptx(thread_count);
  std::atomic<int> arch_refusals{0};
  const auto failures = run_together([&](int i) {
    // Half the threads take their own handle to the cache, the others share one.
    cudrv::compile_cache mine = cache;
    cudrv::compile_cache& c = i % 2 == 0 ? cache : mine;
    cudrv::program prog("scale.cu", source);
    images[static_cast<std::size_t>(i)] = c.compile(prog, cudrv::code_kind::cubin, {.arch = "90"}).code.bytes();
    // Every thread also compiles an uncached program: NVRTC itself from many threads.
    cudrv::program other("other" + std::to_string(i) + ".cu", source);
    ptx[static_cast<std::size_t>(i)] = other.compile(cudrv::code_kind::ptx, {.arch = "80"}).code.bytes();
    // No context is current and the two devices differ: an empty arch is refused, the same way in
    // every thread (the resolution asks the driver).
    try {
      (void)c.compile(prog, cudrv::code_kind::cubin);
    } catch (const cudrv::invalid_argument_error&) {
      arch_refusals.fetch_add(1);
    }
  });
  INFO((failures.empty() ? std::string() : failures.front()));
  REQUIRE(failures.empty());
  CHECK(arch_refusals.load() == thread_count);
  REQUIRE_FALSE(images.front().empty());
  for (int i = 0; i < thread_count; ++i) {
    CHECK(images[static_cast<std::size_t>(i)] == images.front());
    CHECK(ptx[static_cast<std::size_t>(i)].find(".entry scale") != std::string::npos);
  }
  const auto s = cache.stats();
  CHECK(s.hits + s.misses == thread_count);
  CHECK(s.misses >= 1);
  CHECK(s.corrupt_entries == 0);
  CHECK(s.store_failures == 0);
  CHECK(entries_in(dir.path.string()) == 1);  // racing stores leave one whole entry, no temporary file
  // A later compile in this process reads that entry.
  cudrv::program again("scale.cu", source);
  CHECK(cache.compile(again, cudrv::code_kind::cubin, {.arch = "90"}).code.bytes() == images.front());
  CHECK(cache.stats().hits == s.hits + 1);
}

TEST_CASE("threads: a library and its kernels shared by threads", "[fake-driver][threads]") {
  // One library loaded once; every thread takes kernels from it (the signature cache), launches them
  // and drops them, while the library object stays with the main thread.
  cudrv::device dev(1);
  cudrv::program prog("two.cu",
                      "extern \"C\" __global__ void first(int* p, int n) { if (n > 0) p[0] = n; }\n"
                      "extern \"C\" __global__ void second(float* p, float a, long long n) { if (n > 0) p[0] = a; }\n");
  cudrv::library lib(prog.compile(cudrv::code_kind::ptx, {.arch = "90"}), dev);
  cudrv::test::fake_probe fake;
  const long long launches_before = fake.counter("launches");
  std::atomic<int> wrong_arity{0};
  const auto failures = run_together([&](int i) {
    cudrv::stream s(dev);
    cudrv::device_buffer<int> ints(s, 4);
    cudrv::device_buffer<float> floats(s, 4);
    for (int round = 0; round < 20; ++round) {
      auto typed = lib.get_kernel<void(int*, int)>("first");
      cudrv::launch(s, {.grid = 1, .block = 32}, typed, ints.get(), i + round);
      cudrv::kernel untyped = lib.get_kernel("second");
      CHECK(untyped.parameter_count() == 3);
      cudrv::launch(s, {.grid = 1, .block = 32}, untyped, floats.get(), 1.0f, static_cast<long long>(round));
      try {
        cudrv::launch(s, {.grid = 1, .block = 32}, untyped, floats.get());  // one argument of three
      } catch (const cudrv::launch_error&) {
        wrong_arity.fetch_add(1);
      }
    }
    s.synchronize();
  });
  INFO((failures.empty() ? std::string() : failures.front()));
  REQUIRE(failures.empty());
  CHECK(wrong_arity.load() == thread_count * 20);
  CHECK(fake.counter("launches") - launches_before == thread_count * 20 * 2);
}
