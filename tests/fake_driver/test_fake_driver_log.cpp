// The driver's log in errors (issue 34 part 2), against the stand-in driver of fake_cuda.cpp, which logs
// "Returning <code> (CUDA_ERROR_FAKE) from <entry point>" through the registered callbacks for each failed
// call, on the calling thread, as driver 580.159.04 does; fake_cuda_emit_log logs any line (a warning of a
// successful call). Device 1 is the usable device (device 0 is taken by another process in the fake).
#include <catch2/catch.hpp>

#include <cudrv/cudrv.hpp>

#include <chrono>
#include <cstddef>
#include <string>
#include <thread>
#include <vector>

#include "fake_driver/fake_hooks.hpp"
#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;

namespace {

struct log_fake : cudrv::test::fake_probe {
  void (*emit_fn)(const char*) = cudrv::test::fake_hook<void(const char*)>("fake_cuda_emit_log");
  int (*callbacks_fn)() = cudrv::test::fake_hook<int()>("fake_cuda_log_callbacks");
  void (*fail_fn)(CUresult,
                  long long) = cudrv::test::fake_hook<void(CUresult, long long)>("fake_cuda_fail_allocations");

  void emit(const std::string& line) const { emit_fn(line.c_str()); }
  int callbacks() const { return callbacks_fn(); }
  // An allocation that the fake refuses with CUDA_ERROR_OUT_OF_MEMORY (and logs a line for).
  cudrv::out_of_memory_error failed_allocation(const cudrv::device& dev) const {
    fail_fn(CUDA_ERROR_OUT_OF_MEMORY, 1);
    auto e = catch_as<cudrv::out_of_memory_error>([&] { cudrv::device_buffer<float> b(dev, 1024); });
    REQUIRE(e.has_value());
    return *e;
  }
};

// Takes what this thread's ring holds, so that a case starts with nothing pending (an error of the driver's
// source takes the lines when it is built).
void drain() { (void)cudrv::error(CUDA_ERROR_UNKNOWN, "drain"); }

std::size_t count_in(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) {
    ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("driver log: a failed call's error carries the driver's line, and what() shows it",
          "[fake-driver][driver-log]") {
  log_fake f;
  const cudrv::device dev(1);
  REQUIRE(cudrv::driver_log_active());
  CHECK(f.callbacks() == 1);  // one callback for the process, registered when the driver was loaded
  drain();
  const cudrv::out_of_memory_error e = f.failed_allocation(dev);
  REQUIRE(e.driver_log().size() == 1);
  CHECK(e.driver_log()[0] == "Returning 2 (CUDA_ERROR_FAKE) from cuMemAlloc");  // the trailing newline cut
  const std::string what = e.what();
  INFO("what(): " << what);
  CHECK(contains(what, "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY"));
  CHECK(contains(what, "\ndriver log: Returning 2 (CUDA_ERROR_FAKE) from cuMemAlloc"));
  CHECK(what.find("driver log:") > what.find("cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY"));  // after the existing text
  // Many errors later, still one registration.
  for (int i = 0; i < 3; ++i) {
    (void)f.failed_allocation(dev);
  }
  CHECK(f.callbacks() == 1);
  CHECK(f.counter("log_callbacks_registered") == 1);
}

TEST_CASE("driver log: a successful call leaves nothing, and a second error does not carry the first one's lines",
          "[fake-driver][driver-log]") {
  log_fake f;
  const cudrv::device dev(1);
  drain();
  const cudrv::out_of_memory_error first = f.failed_allocation(dev);
  CHECK(first.driver_log().size() == 1);
  cudrv::device_buffer<float> fine(dev, 256);  // a successful call in between
  const cudrv::out_of_memory_error second = f.failed_allocation(dev);
  REQUIRE(second.driver_log().size() == 1);  // its own line only
  CHECK(count_in(second.what(), "driver log:") == 1);
  // An error the driver did not report (cudrv refused the request) carries nothing and takes nothing.
  f.emit("a warning of an earlier successful call");
  auto refused = catch_as<cudrv::invalid_argument_error>([&] { cudrv::device_buffer<float> b(dev, SIZE_MAX); });
  REQUIRE(refused.has_value());
  CHECK(refused->driver_log().empty());
  CHECK_FALSE(contains(refused->what(), "driver log:"));
  const cudrv::out_of_memory_error third = f.failed_allocation(dev);
  REQUIRE(third.driver_log().size() == 2);  // the pending warning (less than a second old), then its own line
  CHECK(third.driver_log()[0] == "a warning of an earlier successful call");
  CHECK(contains(third.driver_log()[1], "from cuMemAlloc"));
}

TEST_CASE("driver log: the refusal that ends cudrv's walk over a kernel's parameters is no error's",
          "[fake-driver][driver-log]") {
  log_fake f;
  const cudrv::device dev(1);
  cudrv::stream s(dev);
  const cudrv::object_code ptx(cudrv::code_kind::ptx,
                               ".version 8.0\n.target sm_90\n.address_size 64\n"
                               ".visible .entry log_kernel()\n{\n  ret;\n}\n",
                               "log_kernel.ptx");
  cudrv::library lib(ptx, dev);
  const cudrv::kernel owner = lib.get_kernel("log_kernel");
  const auto adopted = cudrv::kernel_ref::from_native_handle(owner.native_handle());  // no layout: walked
  drain();
  const long long walks = f.counter("param_info_calls");
  const long long failed = f.counter("failed_calls");
  cudrv::launch(s, {.grid = 1, .block = 32}, adopted);  // the walk asks past the last parameter: refused, logged
  CHECK(f.counter("param_info_calls") > walks);
  CHECK(f.counter("failed_calls") > failed);
  const cudrv::out_of_memory_error e = f.failed_allocation(dev);
  INFO("what(): " << e.what());
  REQUIRE(e.driver_log().size() == 1);
  CHECK(contains(e.driver_log()[0], "from cuMemAlloc"));
  CHECK_FALSE(contains(e.what(), "cuKernelGetParamInfo"));
}

TEST_CASE("driver log: a line logged more than a second before the error does not attach",
          "[fake-driver][driver-log]") {
  log_fake f;
  const cudrv::device dev(1);
  drain();
  f.emit("an old warning");
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  const cudrv::out_of_memory_error e = f.failed_allocation(dev);
  REQUIRE(e.driver_log().size() == 1);
  CHECK(contains(e.driver_log()[0], "from cuMemAlloc"));
  CHECK_FALSE(contains(e.what(), "an old warning"));
}

TEST_CASE("driver log: threads see only their own lines", "[fake-driver][driver-log]") {
  log_fake f;
  const cudrv::device dev(1);
  drain();
  std::vector<std::string> other_log;
  std::thread other([&] {  // no Catch2 assertion on this thread
    f.emit("line of the other thread");
    f.fail_fn(CUDA_ERROR_OUT_OF_MEMORY, 1);
    try {
      cudrv::device_buffer<float> b(dev, 1024);
    } catch (const cudrv::out_of_memory_error& e) {
      other_log = e.driver_log();
    }
  });
  other.join();
  REQUIRE(other_log.size() == 2);
  CHECK(other_log[0] == "line of the other thread");
  CHECK(contains(other_log[1], "from cuMemAlloc"));
  f.emit("line of this thread");
  const cudrv::out_of_memory_error mine = f.failed_allocation(dev);
  REQUIRE(mine.driver_log().size() == 2);
  CHECK(mine.driver_log()[0] == "line of this thread");
  CHECK_FALSE(contains(mine.what(), "other thread"));
  // Many threads at once: each error carries exactly its thread's lines.
  constexpr int threads = 8;
  std::vector<std::vector<std::string>> logs(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        f.emit("thread " + std::to_string(t) + " line " + std::to_string(i));
        (void)cudrv::error(CUDA_ERROR_UNKNOWN, "take");  // takes the line just logged
      }
      f.emit("thread " + std::to_string(t) + " last");
      logs[static_cast<std::size_t>(t)] = cudrv::error(CUDA_ERROR_UNKNOWN, "take").driver_log();
    });
  }
  for (auto& t : pool) {
    t.join();
  }
  for (int t = 0; t < threads; ++t) {
    INFO("thread " << t);
    CHECK(logs[static_cast<std::size_t>(t)] == std::vector<std::string>{"thread " + std::to_string(t) + " last"});
  }
}

TEST_CASE("driver log: the ring keeps the newest 8 lines, each cut at 511 bytes", "[fake-driver][driver-log]") {
  log_fake f;
  const cudrv::device dev(1);
  drain();
  for (int i = 0; i < 20; ++i) {
    f.emit("line " + std::to_string(i));
  }
  const cudrv::out_of_memory_error e = f.failed_allocation(dev);
  REQUIRE(e.driver_log().size() == 8);
  for (std::size_t k = 0; k < 7; ++k) {
    CHECK(e.driver_log()[k] == "line " + std::to_string(13 + k));  // lines 13..19, oldest first
  }
  CHECK(contains(e.driver_log()[7], "from cuMemAlloc"));
  // A long line is cut.
  f.emit(std::string(2000, 'x'));
  const cudrv::error cut(CUDA_ERROR_UNKNOWN, "take");
  REQUIRE(cut.driver_log().size() == 1);
  CHECK(cut.driver_log()[0] == std::string(511, 'x'));
}

TEST_CASE("driver log: switched off, errors carry nothing, and switched on again, they do",
          "[fake-driver][driver-log]") {
  log_fake f;
  const cudrv::device dev(1);
  drain();
  REQUIRE(cudrv::driver_log_enabled());
  CHECK(cudrv::set_driver_log_enabled(false));  // returns the previous setting
  CHECK_FALSE(cudrv::driver_log_enabled());
  CHECK_FALSE(cudrv::driver_log_active());
  const cudrv::out_of_memory_error off = f.failed_allocation(dev);
  CHECK(off.driver_log().empty());
  CHECK_FALSE(contains(off.what(), "driver log:"));
  CHECK(off.result() == CUDA_ERROR_OUT_OF_MEMORY);  // the error itself is unchanged
  CHECK_FALSE(cudrv::set_driver_log_enabled(true));
  CHECK(cudrv::driver_log_active());
  CHECK(f.callbacks() == 1);  // still the one registration
  const cudrv::out_of_memory_error on = f.failed_allocation(dev);
  CHECK(on.driver_log().size() == 1);
}

// Run by ctest with FAKE_CUDA_DRIVER_VERSION=12040: a driver before CUDA 12.9 has no cuLogsRegisterCallback.
TEST_CASE("fake driver 12.4: without the log callback, errors are as before", "[.][fake-driver-12.4]") {
  log_fake f;
  const cudrv::device dev(1);
  CHECK_FALSE(cudrv::driver_log_active());
  CHECK(cudrv::driver_log_enabled());  // on, but there is nothing to switch
  CHECK(f.callbacks() == 0);
  const cudrv::out_of_memory_error e = f.failed_allocation(dev);
  CHECK(e.driver_log().empty());
  CHECK_FALSE(contains(e.what(), "driver log:"));
  CHECK(contains(e.what(), "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY"));
}

// Run by ctest with CUDRV_DRIVER_LOG=0: nothing is registered when the driver loads; switching the log on
// registers the callback then.
TEST_CASE("driver log: CUDRV_DRIVER_LOG=0 keeps it off until it is switched on", "[.][driver-log-off]") {
  log_fake f;
  const cudrv::device dev(1);
  CHECK_FALSE(cudrv::driver_log_enabled());
  CHECK_FALSE(cudrv::driver_log_active());
  CHECK(f.callbacks() == 0);
  const cudrv::out_of_memory_error off = f.failed_allocation(dev);
  CHECK(off.driver_log().empty());
  CHECK_FALSE(cudrv::set_driver_log_enabled(true));
  CHECK(cudrv::driver_log_active());
  CHECK(f.callbacks() == 1);
  const cudrv::out_of_memory_error on = f.failed_allocation(dev);
  REQUIRE(on.driver_log().size() == 1);
  CHECK(contains(on.driver_log()[0], "from cuMemAlloc"));
}
