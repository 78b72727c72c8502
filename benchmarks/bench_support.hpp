// Shared by the launch, graph and NVTX benchmarks: the empty kernel they launch, status checks, the
// median, and a count of heap allocations (a replaced global operator new). Include it from exactly
// one source file per benchmark program (each benchmark is a single file).
#pragma once

#include <cuda.h>

#include <cudrv/cudrv.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

namespace bench {

/// Heap allocations made by this program so far.
inline std::atomic<long long> heap_allocations{0};

/// An empty kernel taking a pointer, an int and a float, as PTX any device since sm_70 can load.
inline constexpr const char* args_kernel_ptx = R"(
.version 7.0
.target sm_70
.address_size 64
.visible .entry args_kernel(.param .u64 p, .param .u32 n, .param .f32 x) { ret; }
)";

/// The raw side checks every status, as cudrv does.
inline void check(CUresult status, const char* api) {
  if (status != CUDA_SUCCESS) [[unlikely]] {
    throw cudrv::error(status, api);
  }
}

/// The median (the upper one for an even count).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Handles the command line (`--quick`) and checks for a driver and a device. Returns -1 when the
/// benchmark can run, else the exit status to return: 1 usage error, 2 no CUDA driver, 3 no device.
inline int start(const char* name, int argc, char** argv, bool& quick) {
  quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else {
      std::fprintf(stderr, "usage: %s [--quick]\n", name);
      return 1;
    }
  }
  if (!cudrv::driver::available()) {
    std::fprintf(stderr, "%s: no usable CUDA driver: %s\n", name, cudrv::driver::unavailable_reason().c_str());
    return 2;
  }
  try {
    if (cudrv::device_count() == 0) {
      std::fprintf(stderr, "%s: the CUDA driver sees no device\n", name);
      return 3;
    }
  } catch (const cudrv::error& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 4;
  }
  return -1;
}

/// Device 0 (made current), a stream, the empty kernel loaded, and its three arguments.
struct args_kernel_fixture {
  cudrv::device dev{0};
  cudrv::stream stream{dev};
  cudrv::library lib{cudrv::object_code(cudrv::code_kind::ptx, args_kernel_ptx, "bench.ptx")};
  cudrv::typed_kernel<void(int*, int, float)> typed = lib.get_kernel<void(int*, int, float)>("args_kernel");
  cudrv::device_buffer<int> buf{dev, 1};
  int* ptr = buf.get();
  int n = 1;
  float x = 2.0f;
  args_kernel_fixture() { dev.set_current(); }
};

}  // namespace bench

void* operator new(std::size_t size) {
  bench::heap_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size != 0 ? size : 1)) {
    return p;
  }
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
