// The stand-in driver's test hooks (the fake_cuda_* functions of fake_cuda.cpp), looked up in the
// library cudrv loaded through CUDRV_LIBCUDA. Every fake-driver test file reads the fake through these.
#pragma once

#include <cuda.h>
#include <dlfcn.h>
#include <catch2/catch.hpp>
#include <cudrv/driver.hpp>

#include <cstddef>
#include <cstdlib>
#include <string>

namespace cudrv::test {

/// The fake's exported function @p name of type @p Fn (e.g. `long long(const char*)`); the test fails
/// when the fake lacks it.
template <class Fn>
Fn* fake_hook(const char* name) {
  const char* path = std::getenv("CUDRV_LIBCUDA");
  REQUIRE(path != nullptr);
  REQUIRE(cudrv::driver::available());  // loads the fake in cudrv first
  void* lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(lib != nullptr);
  auto* fn = reinterpret_cast<Fn*>(dlsym(lib, name));
  dlclose(lib);  // the reference RTLD_NOLOAD took; cudrv keeps the library loaded
  REQUIRE(fn != nullptr);
  return fn;
}

/// A counter of the fake by name ("frees", "launches", ...); 0 when it never counted.
inline long long fake_counter(const std::string& name) {
  return fake_hook<long long(const char*)>("fake_cuda_counter")(name.c_str());
}

/// The fake's event log, one line per recorded call.
inline std::string fake_log() {
  auto* log = fake_hook<std::size_t(char*, std::size_t)>("fake_cuda_log");
  std::string out(log(nullptr, 0) + 1, '\0');
  out.resize(log(out.data(), out.size()));
  return out;
}

/// Whether the fake holds a live allocation at @p address.
inline bool fake_is_live(CUdeviceptr address) { return fake_hook<int(CUdeviceptr)>("fake_cuda_is_live")(address) != 0; }

/// The common probe: counters, log and live addresses of the fake. Files that need more hooks derive
/// from it and look them up with @ref fake_hook.
struct fake_probe {
  fake_probe() { (void)fake_hook<long long(const char*)>("fake_cuda_counter"); }  // the fake is loaded
  long long counter(const std::string& name) const { return fake_counter(name); }
  std::string log() const { return fake_log(); }
  bool is_live(CUdeviceptr address) const { return fake_is_live(address); }
  bool is_live(const void* address) const { return fake_is_live(reinterpret_cast<CUdeviceptr>(address)); }
};

/// The fake's failure injection (fake_cuda_inject_failure): makes one entry-point call fail, found by its
/// name in a dry run of the same code. Disarms when it goes.
///
/// @code
/// cudrv::test::fake_injection inject;
/// const long long k = inject.find([&] { make_and_destroy(); }, "cuCtxSetCurrent");  // dry run, traced
/// inject.fail_call(k, CUDA_ERROR_UNKNOWN);
/// make_and_destroy();                                                                // call k fails
/// CHECK(inject.failed_api() == "cuCtxSetCurrent");
/// @endcode
struct fake_injection {
  void (*arm)(long long, CUresult, int) = fake_hook<void(long long, CUresult, int)>("fake_cuda_inject_failure");
  long long (*disarm)() = fake_hook<long long()>("fake_cuda_disarm");
  const char* (*trace_name)(long long) = fake_hook<const char*(long long)>("fake_cuda_trace_name");
  const char* (*injected)() = fake_hook<const char*()>("fake_cuda_injected_api");

  fake_injection() = default;
  fake_injection(const fake_injection&) = delete;
  fake_injection& operator=(const fake_injection&) = delete;
  ~fake_injection() { disarm(); }

  /// Runs @p f with every call counted and traced, and returns the position of the @p nth call (from 1)
  /// of entry point @p api among them (0 when there is none).
  template <class F>
  long long find(F&& f, const std::string& api, int nth = 1) {
    arm(0, CUDA_SUCCESS, 1);
    f();
    const long long calls = disarm();
    for (long long k = 1; k <= calls; ++k) {
      if (api == trace_name(k) && --nth == 0) {
        return k;
      }
    }
    return 0;
  }
  /// Call @p k (from 1) from now on returns @p code.
  void fail_call(long long k, CUresult code) { arm(k, code, 0); }
  /// The entry point that returned the injected code, "" while none has.
  std::string failed_api() const {
    const char* name = injected();
    return name != nullptr ? name : "";
  }
};

}  // namespace cudrv::test
