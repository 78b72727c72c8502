// bench_compile_cache: what run-time compilation costs cold, and what a compile-cache hit costs.
//
//   bench_compile_cache [--quick]
//
// A tiny kernel (vector add) is compiled to a cubin for device 0 and loaded:
//   cold      cudrv::program::compile (NVRTC) + cudrv::library (load), no cache;
//   hit       cudrv::compile_cache::compile on a warm entry + cudrv::library;
//   hit only  the cache lookup alone (read, verify, decode);
//   load only cudrv::library of the cubin (eager: module and kernels loaded in the context);
//   raw load  cuLibraryLoadData + cuLibraryUnload of the same cubin (lazy, nothing compiled).
// Each is repeated and the median and best reported. The cache lives in a fresh temporary directory.
//
// Exit status: 0 success, 1 usage error, 2 no CUDA driver, 3 no CUDA device, 4 CUDA error.
#include <cudaTypedefs.h>
#include <unistd.h>

#include <cudrv/cudrv.hpp>
#include <cudrv/rtc.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace {

constexpr const char* source = R"(
extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
)";

struct stats {
  double median_ms;
  double best_ms;
};

stats time_it(int reps, const std::function<void()>& fn) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t.front()};
}

}  // namespace

int main(int argc, char** argv) {
  int cold_reps = 11;
  int hit_reps = 201;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      cold_reps = 3;
      hit_reps = 21;
    } else {
      std::fprintf(stderr, "usage: bench_compile_cache [--quick]\n");
      return 1;
    }
  }
  if (!cudrv::driver::available()) {
    std::fprintf(stderr, "bench_compile_cache: no usable CUDA driver: %s\n",
                 cudrv::driver::unavailable_reason().c_str());
    return 2;
  }
  auto dir = std::filesystem::temp_directory_path() / ("cudrv-bench-cache-" + std::to_string(::getpid()));
  int status = 0;
  try {
    if (cudrv::device_count() == 0) {
      std::fprintf(stderr, "bench_compile_cache: the CUDA driver sees no device\n");
      return 3;
    }
    cudrv::device dev(0);
    dev.set_current();
    cudrv::program prog("vector_add.cu", source);
    cudrv::compile_options options;
    options.arch = dev.arch();
    cudrv::compile_cache cache(dir.string());
    (void)cache.compile(prog, cudrv::code_kind::cubin, options);  // warm the entry (and NVRTC)
    const cudrv::object_code cubin = prog.compile(cudrv::code_kind::cubin, options).code;
    auto raw_load =
        reinterpret_cast<PFN_cuLibraryLoadData_v12000>(cudrv::driver::get_entry_point("cuLibraryLoadData", 12000));
    auto raw_unload =
        reinterpret_cast<PFN_cuLibraryUnload_v12000>(cudrv::driver::get_entry_point("cuLibraryUnload", 12000));

    stats cold = time_it(cold_reps, [&] { cudrv::library lib(prog.compile(cudrv::code_kind::cubin, options).code); });
    stats hit =
        time_it(hit_reps, [&] { cudrv::library lib(cache.compile(prog, cudrv::code_kind::cubin, options).code); });
    stats lookup = time_it(hit_reps, [&] { (void)cache.compile(prog, cudrv::code_kind::cubin, options); });
    stats load = time_it(hit_reps, [&] { cudrv::library lib(cubin); });
    stats raw = time_it(hit_reps, [&] {
      CUlibrary lib = nullptr;
      if (raw_load(&lib, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0) != CUDA_SUCCESS ||
          raw_unload(lib) != CUDA_SUCCESS) {
        throw std::runtime_error("raw cuLibraryLoadData/cuLibraryUnload failed");
      }
    });
    auto s = cache.stats();
    std::printf("bench_compile_cache: device 0 (%s, %s), NVRTC %d.%d, cubin %zu bytes; cache hits %llu, misses %llu\n",
                dev.name().c_str(), options.arch.c_str(), cudrv::nvrtc_version() / 1000,
                cudrv::nvrtc_version() % 1000 / 10, cubin.size(), static_cast<unsigned long long>(s.hits),
                static_cast<unsigned long long>(s.misses));
    std::printf("\n| case | median | best | repetitions |\n|---|---:|---:|---:|\n");
    auto row = [](const char* name, stats st, int reps) {
      std::printf("| %s | %.3f ms | %.3f ms | %d |\n", name, st.median_ms, st.best_ms, reps);
    };
    row("cold: NVRTC compile + load", cold, cold_reps);
    row("cache hit + load", hit, hit_reps);
    row("cache hit only", lookup, hit_reps);
    row("load only (cudrv::library, eager)", load, hit_reps);
    row("raw cuLibraryLoadData + cuLibraryUnload (lazy)", raw, hit_reps);
    std::printf("\ncache hit + load <= 1 ms: %s\n", hit.median_ms <= 1.0 ? "yes" : "NO");
    status = hit.median_ms <= 1.0 ? 0 : 4;
  } catch (const cudrv::error& e) {
    std::fprintf(stderr, "bench_compile_cache: %s\n", e.what());
    status = 4;
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return status;
}
