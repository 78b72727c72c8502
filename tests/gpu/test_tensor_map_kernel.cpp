// GPU tier: a tensor map built by cudrv used by a kernel. The kernel (NVRTC) takes the map as a
// `const __grid_constant__ CUtensorMap`, loads one box with the Tensor Memory Accelerator
// (cp.async.bulk.tensor, completion on an mbarrier) and writes it out; the host compares with the
// tensor, boxes that overhang the edges included (the out-of-range part must read as zeros).
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "support/memory_support.hpp"
#include "support/test_support.hpp"

namespace {

constexpr const char* tma_source = R"(
struct alignas(64) CUtensorMap { unsigned long long opaque[16]; };

extern "C" __global__ void load_box(const __grid_constant__ CUtensorMap map, int x0, int y0, float* out) {
  __shared__ alignas(128) float box[BOX_H * BOX_W];
  __shared__ alignas(8) unsigned long long barrier;
  const unsigned box_addr = static_cast<unsigned>(__cvta_generic_to_shared(box));
  const unsigned bar_addr = static_cast<unsigned>(__cvta_generic_to_shared(&barrier));
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar_addr));
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar_addr),
                 "r"(static_cast<unsigned>(sizeof(box))) : "memory");
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
        ::"r"(box_addr), "l"(reinterpret_cast<unsigned long long>(&map)), "r"(x0), "r"(y0), "r"(bar_addr)
        : "memory");
    unsigned done = 0;
    while (!done) {
      asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
                   : "=r"(done) : "r"(bar_addr) : "memory");
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < BOX_H * BOX_W; i += blockDim.x) {
    out[i] = box[i];
  }
}
)";

}  // namespace

TEST_CASE("a kernel loads boxes through a cudrv tensor map (TMA)", "[gpu][tensor_map][launch]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  if (dev.compute_capability().major < 9) {
    WARN("SKIPPED: the Tensor Memory Accelerator needs compute capability 9.0");
    return;
  }
  constexpr unsigned box_w = 16, box_h = 8;
  const std::uint64_t width = 100, height = 50, pitch = 128;  // elements; rows padded to 512 bytes
  auto seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  auto raw = cudrv::test::random_vector<std::uint16_t>(pitch * height, seed);
  std::vector<float> host(raw.begin(), raw.end());
  cudrv::device_buffer<float> tensor(dev, host.size());
  cudrv::copy(tensor, host);

  cudrv::tiled_tensor_map_desc desc;
  desc.data_type = cudrv::tensor_map_data_type::float32;
  desc.rank = 2;
  desc.global_address = tensor.view().data();
  desc.global_dims = {width, height};
  desc.global_strides = {pitch * sizeof(float)};
  desc.box_dims = {box_w, box_h};
  cudrv::tensor_map map = cudrv::make_tiled_tensor_map(desc);

  cudrv::compile_options options;
  options.defines = {"BOX_W=16", "BOX_H=8"};
  cudrv::library lib(cudrv::program("tma.cu", tma_source).compile(cudrv::code_kind::cubin, options).code);
  auto load_box = lib.get_kernel<void(cudrv::tensor_map, int, int, float*)>("load_box");

  cudrv::stream s(dev);
  cudrv::device_buffer<float> out(dev, box_w * box_h);
  // Inside, on the right edge, at the bottom-right corner (overhanging both edges). The box's start
  // in the innermost dimension is kept 16-byte aligned (a multiple of 4 floats), as TMA tile loads need.
  for (auto [x0, y0] : {std::pair{0, 0}, std::pair{36, 11}, std::pair{88, 3}, std::pair{92, 45}}) {
    INFO("box at (" << x0 << ", " << y0 << ")");
    cudrv::fill(out, -1.0f);
    cudrv::launch(s, {.grid = 1, .block = 128}, load_box, map, x0, y0, out.get());
    s.synchronize();
    std::vector<float> got(box_w * box_h);
    cudrv::copy(got, out);
    for (unsigned r = 0; r < box_h; ++r) {
      for (unsigned c = 0; c < box_w; ++c) {
        const std::uint64_t x = x0 + c, y = y0 + r;
        const float expected = (x < width && y < height) ? host[y * pitch + x] : 0.0f;
        REQUIRE(got[r * box_w + c] == expected);
      }
    }
  }
}
