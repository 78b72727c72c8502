// vector_add_nvrtc: compiles a CUDA C++ kernel at run time with NVRTC (through the persistent compile
// cache), loads the cubin, launches it with a typed kernel and checks the result on the host.
//
//   example_vector_add_nvrtc [n]
//
// Run it twice: the second run finds the cubin in the cache ($CUDRV_CACHE_DIR, else
// $XDG_CACHE_HOME/cudrv/nvrtc, else ~/.cache/cudrv/nvrtc; CUDRV_DISABLE_CACHE=1 turns it off).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "example_main.hpp"

namespace {

constexpr const char* source = R"(
extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    c[i] = a[i] + b[i];
  }
}
)";

bool run(int n) {
  cudrv::device dev(0);
  cudrv::program prog("vector_add.cu", source);
  cudrv::compile_options options;
  options.arch = dev.arch();  // e.g. "sm_90": the cubin runs on this device as it is
  auto cache = cudrv::compile_cache::from_environment();
  auto t0 = std::chrono::steady_clock::now();
  cudrv::compile_result compiled = cache.compile(prog, cudrv::code_kind::cubin, options);
  cudrv::library lib(compiled.code);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("compile + load for %s: %.2f ms (%s)\n", options.arch.c_str(), ms,
              cache.stats().hits > 0 ? "cache hit" : (cache.enabled() ? "compiled and cached" : "cache disabled"));

  auto add = lib.get_kernel<void(const float*, const float*, float*, int)>("vector_add");
  std::vector<float> a(n), b(n), c(n);
  for (int i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i % 1000) * 0.5f;
    b[i] = static_cast<float>(i % 7) - 3.0f;
  }
  cudrv::stream stream(dev);
  cudrv::device_buffer<float> da(dev, n), db(dev, n), dc(dev, n);
  cudrv::copy(da, a, stream);
  cudrv::copy(db, b, stream);
  auto best = add.suggested_block_size(dev);
  cudrv::launch_config config{.grid = static_cast<unsigned>((n + best.block_size - 1) / best.block_size),
                              .block = static_cast<unsigned>(best.block_size)};
  cudrv::launch(stream, config, add, da.get(), db.get(), dc.get(), n);
  cudrv::copy(c, dc, stream);
  stream.synchronize();
  int wrong = 0;
  for (int i = 0; i < n; ++i) {
    wrong += c[i] != a[i] + b[i];
  }
  std::printf("vector_add of %d elements, %u blocks of %u threads: %s\n", n, config.grid.x, config.block.x,
              wrong == 0 ? "all correct" : "WRONG");
  return wrong == 0;
}

}  // namespace

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : (1 << 20);
  if (n <= 0) {
    std::fprintf(stderr, "usage: example_vector_add_nvrtc [n > 0]\n");
    return 1;
  }
  return example::run("vector_add_nvrtc", [&] { return run(n); });
}
