// GPU tier: kernels that use the toolkit's CCCL headers (CUB BlockReduce, cuda::barrier), compiled at
// run time through the compile cache for this device, launched, checked against a host reference on
// random input with poisoned outputs.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "support/cccl_kernels.hpp"
#include "support/memory_support.hpp"
#include "support/test_support.hpp"

namespace {

struct cache_dir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("cudrv-gpu-rtccl-" + std::to_string(cudrv::test::test_seed()));
  ~cache_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

TEST_CASE("NVRTC + CUB: a BlockReduce kernel compiled at run time sums each block", "[gpu][rtc][cccl]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  cache_dir dir;
  cudrv::compile_cache cache(dir.path.string());
  const cudrv::program prog("block_sum.cu", cudrv::test::cub_block_sum_source);
  const cudrv::compile_options options{.arch = dev.arch(), .toolkit_headers = true};
  const std::vector<std::string> expressions{"block_sum<int, 256>", "block_sum<double, 128>"};
  const cudrv::compile_result compiled = cache.compile(prog, cudrv::code_kind::cubin, options, expressions);
  // The second compilation is a hit and gives the same code.
  CHECK(cache.compile(prog, cudrv::code_kind::cubin, options, expressions).code.bytes() == compiled.code.bytes());
  CHECK(cache.stats().hits == 1);
  cudrv::library lib(compiled.code);
  const auto seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  cudrv::stream s(dev);

  SECTION("int, 256 threads, a partial last block") {
    auto kernel = lib.get_kernel<void(const int*, int*, unsigned)>(compiled.lowered_name("block_sum<int, 256>"));
    const unsigned n = 1000003;
    const unsigned blocks = (n + 255) / 256;
    auto raw = cudrv::test::random_vector<std::uint32_t>(n, seed);
    std::vector<int> in(n);
    for (unsigned i = 0; i < n; ++i) {
      in[i] = static_cast<int>(raw[i] % 20001) - 10000;
    }
    cudrv::device_buffer<int> din(dev, n), dout(dev, blocks);
    cudrv::copy(din, in);
    cudrv::copy(dout, std::vector<int>(blocks, 0x7eadbeef));  // poison
    cudrv::launch(s, {.grid = blocks, .block = 256}, kernel, din.get(), dout.get(), n);
    s.synchronize();
    std::vector<int> out(blocks);
    cudrv::copy(out, dout);
    for (unsigned b = 0; b < blocks; ++b) {
      const unsigned end = std::min(n, (b + 1) * 256);
      const long long expected = std::accumulate(in.begin() + b * 256, in.begin() + end, 0ll);
      REQUIRE(out[b] == expected);
    }
  }
  SECTION("double, 128 threads") {
    auto kernel =
        lib.get_kernel<void(const double*, double*, unsigned)>(compiled.lowered_name("block_sum<double, 128>"));
    const unsigned n = 128 * 517;
    const unsigned blocks = n / 128;
    auto raw = cudrv::test::random_vector<std::uint16_t>(n, seed);
    std::vector<double> in(raw.begin(), raw.end());  // integers: every order of summation is exact
    cudrv::device_buffer<double> din(dev, n), dout(dev, blocks);
    cudrv::copy(din, in);
    cudrv::copy(dout, std::vector<double>(blocks, -1.5));
    cudrv::launch(s, {.grid = blocks, .block = 128}, kernel, din.get(), dout.get(), n);
    s.synchronize();
    std::vector<double> out(blocks);
    cudrv::copy(out, dout);
    for (unsigned b = 0; b < blocks; ++b) {
      REQUIRE(out[b] == std::accumulate(in.begin() + b * 128, in.begin() + (b + 1) * 128, 0.0));
    }
  }
}

TEST_CASE("NVRTC + cuda::barrier: threads exchange values through shared memory", "[gpu][rtc][cccl]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  const auto compiled = cudrv::program("rotate.cu", cudrv::test::cuda_barrier_source)
                            .compile(cudrv::code_kind::cubin, {.arch = dev.arch(), .toolkit_headers = true});
  cudrv::library lib(compiled.code);
  auto kernel = lib.get_kernel<void(const int*, int*)>("rotate");
  const unsigned blocks = 64;
  const unsigned n = blocks * 128;
  const auto seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  auto raw = cudrv::test::random_vector<std::uint32_t>(n, seed);
  std::vector<int> in(raw.begin(), raw.end());
  cudrv::stream s(dev);
  cudrv::device_buffer<int> din(dev, n), dout(dev, n);
  cudrv::copy(din, in);
  cudrv::copy(dout, std::vector<int>(n, -12345));
  cudrv::launch(s, {.grid = blocks, .block = 128}, kernel, din.get(), dout.get());
  s.synchronize();
  std::vector<int> out(n);
  cudrv::copy(out, dout);
  for (unsigned b = 0; b < blocks; ++b) {
    for (unsigned t = 0; t < 128; ++t) {
      REQUIRE(out[b * 128 + t] == in[b * 128 + (t + 1) % 128]);
    }
  }
}
