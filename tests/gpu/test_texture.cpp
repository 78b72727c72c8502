// GPU tier: CUDA arrays, textures and surfaces. Kernels compiled at run time with NVRTC sample
// textures (bilinear filtering against a host model of the hardware's filter, point reads of 3-D,
// layered and mipmapped arrays, linear and pitched memory) and write surfaces; copies to and from
// arrays round-trip random data into poisoned destinations.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "support/memory_support.hpp"
#include "support/test_support.hpp"

namespace {

constexpr const char* texture_source = R"(
extern "C" __global__ void sample2d(cudaTextureObject_t tex, const float* u, const float* v, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex2D<float>(tex, u[i], v[i]);
}
extern "C" __global__ void fill_surface(cudaSurfaceObject_t surf, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) {
    float old = surf2Dread<float>(surf, x * (int)sizeof(float), y);
    surf2Dwrite(old * 2.0f + (float)(x * 1000 + y), surf, x * (int)sizeof(float), y);
  }
}
extern "C" __global__ void fetch_layered(cudaTextureObject_t tex, int w, int h, int layers, float* out) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y, l = blockIdx.z;
  if (x < w && y < h && l < layers) out[(l * h + y) * w + x] = tex2DLayered<float>(tex, x + 0.5f, y + 0.5f, l);
}
extern "C" __global__ void fetch3d(cudaTextureObject_t tex, int w, int h, int d, float* out) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y, z = blockIdx.z;
  if (x < w && y < h && z < d) out[(z * h + y) * w + x] = tex3D<float>(tex, x + 0.5f, y + 0.5f, z + 0.5f);
}
extern "C" __global__ void fetch_lod(cudaTextureObject_t tex, int w, int h, float level, float* out) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) out[y * w + x] = tex2DLod<float>(tex, (x + 0.5f) / w, (y + 0.5f) / h, level);
}
extern "C" __global__ void fetch_linear(cudaTextureObject_t tex, int n, float4* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tex1Dfetch<float4>(tex, i);
}
extern "C" __global__ void fetch_pitch(cudaTextureObject_t tex, int w, int h, float* out) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) out[y * w + x] = tex2D<float>(tex, x + 0.5f, y + 0.5f);
}
extern "C" __global__ void fetch_uchar4(cudaTextureObject_t tex, int w, int h, float4* out) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) out[y * w + x] = tex2D<float4>(tex, x + 0.5f, y + 0.5f);
}
)";

const cudrv::library& texture_library() {
  static const cudrv::library lib(
      cudrv::program("texture_test.cu", texture_source).compile(cudrv::code_kind::cubin).code);
  return lib;
}

std::vector<float> random_floats(std::size_t n, std::uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) {
    x = dist(gen);
  }
  return v;
}

cudrv::launch_config grid_2d(std::size_t w, std::size_t h, std::size_t z = 1) {
  return {.grid = {static_cast<unsigned>((w + 15) / 16), static_cast<unsigned>((h + 15) / 16),
                   static_cast<unsigned>(z)},
          .block = {16, 16}};
}

// The hardware's bilinear filter at normalised (u, v) with clamp addressing, in double precision,
// and the largest difference between the four texels it mixes: the hardware keeps the two weights in
// 9-bit fixed point (8 fractional bits), each within 1/256 of the exact one, so the result may differ
// from the exact value by up to that difference / 128 (the derivative of the result in each weight is
// at most the difference).
struct bilinear_reference {
  double value;
  double spread;
};
bilinear_reference bilinear(const std::vector<float>& img, int w, int h, float u, float v) {
  const double x = static_cast<double>(u) * w - 0.5;
  const double y = static_cast<double>(v) * h - 0.5;
  const double fx = std::floor(x), fy = std::floor(y);
  const double a = x - fx, b = y - fy;
  auto texel = [&](long i, long j) {
    i = std::clamp<long>(i, 0, w - 1);
    j = std::clamp<long>(j, 0, h - 1);
    return static_cast<double>(img[static_cast<std::size_t>(j * w + i)]);
  };
  const long i = static_cast<long>(fx), j = static_cast<long>(fy);
  const double t00 = texel(i, j), t10 = texel(i + 1, j), t01 = texel(i, j + 1), t11 = texel(i + 1, j + 1);
  const double value = (1 - a) * (1 - b) * t00 + a * (1 - b) * t10 + (1 - a) * b * t01 + a * b * t11;
  const double spread = std::max({t00, t10, t01, t11}) - std::min({t00, t10, t01, t11});
  return {value, spread};
}

}  // namespace

TEST_CASE("a 2-D float texture with linear filtering, clamp addressing and normalised coordinates matches the "
          "hardware's bilinear filter",
          "[gpu][texture]") {
  CUDRV_REQUIRE_GPU();
  const auto seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  cudrv::device dev(0);
  cudrv::stream s(dev);
  const int w = 97, h = 61;
  const auto image = random_floats(static_cast<std::size_t>(w * h), seed, -10.0f, 10.0f);
  cudrv::array<float> img(dev, cudrv::array_shape::two_d(w, h));
  cudrv::copy(img, image, s);
  cudrv::texture_object tex(img, {.address = {cudrv::address_mode::clamp, cudrv::address_mode::clamp},
                                  .filter = cudrv::filter_mode::linear,
                                  .normalized_coordinates = true});

  // Random coordinates, a fifth of them outside [0, 1] to exercise clamping.
  const std::size_t n = 20000;
  const auto u = random_floats(n, seed + 1, -0.1f, 1.1f);
  const auto v = random_floats(n, seed + 2, -0.1f, 1.1f);
  cudrv::device_buffer<float> du(dev, n), dv(dev, n), dout(dev, n);
  cudrv::copy(du, u, s);
  cudrv::copy(dv, v, s);
  cudrv::fill(dout, cudrv::test::poison_value<float>(), s);
  auto k = texture_library().get_kernel<void(cudrv::texture_object_ref, const float*, const float*, float*, int)>(
      "sample2d");
  cudrv::launch(s, {.grid = static_cast<unsigned>((n + 255) / 256), .block = 256}, k, tex, du.get(), dv.get(),
                dout.get(), static_cast<int>(n));
  std::vector<float> out(n);
  cudrv::copy(out, dout, s);
  s.synchronize();

  std::size_t bad = 0;
  double worst = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto ref = bilinear(image, w, h, u[i], v[i]);
    const double tolerance = ref.spread / 128.0 * 1.01 + 1e-5 * 10.0;
    const double error = std::abs(out[i] - ref.value);
    worst = std::max(worst, error);
    if (!(error <= tolerance)) {
      if (bad++ < 5) {
        UNSCOPED_INFO("at (" << u[i] << ", " << v[i] << "): got " << out[i] << ", expected " << ref.value << " +- "
                             << tolerance);
      }
    }
  }
  INFO("largest error " << worst);
  CHECK(bad == 0);

  // The same through an untyped launch, which takes the view as it is.
  cudrv::kernel untyped = texture_library().get_kernel("sample2d");
  cudrv::fill(dout, cudrv::test::poison_value<float>(), s);
  cudrv::launch(s, {.grid = static_cast<unsigned>((n + 255) / 256), .block = 256}, untyped, tex.view(), du.get(),
                dv.get(), dout.get(), static_cast<int>(n));
  std::vector<float> again(n);
  cudrv::copy(again, dout, s);
  s.synchronize();
  CHECK(cudrv::test::mismatch(again, out).empty());
}

TEST_CASE("a kernel reads and writes an array through a surface, and the result is copied back",
          "[gpu][texture][surface]") {
  CUDRV_REQUIRE_GPU();
  const auto seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  cudrv::device dev(0);
  cudrv::stream s(dev);
  const int w = 70, h = 45;
  const auto init = random_floats(static_cast<std::size_t>(w * h), seed, -100.0f, 100.0f);
  cudrv::array<float> a(dev, cudrv::array_shape::two_d(w, h), cudrv::array_flags::surface_load_store);
  cudrv::copy(a, init, s);
  cudrv::surface_object surf(a);
  auto k = texture_library().get_kernel<void(cudrv::surface_object_ref, int, int)>("fill_surface");
  cudrv::launch(s, grid_2d(w, h), k, surf, w, h);
  std::vector<float> out(init.size(), cudrv::test::poison_value<float>());
  cudrv::copy(out, a, s);
  s.synchronize();
  std::vector<float> expected(init.size());
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const auto i = static_cast<std::size_t>(y * w + x);
      expected[i] = init[i] * 2.0f + static_cast<float>(x * 1000 + y);
    }
  }
  CHECK(cudrv::test::mismatch(out, expected).empty());
}

TEST_CASE("array copies round-trip random data: host, device memory, arrays, regions, every direction",
          "[gpu][texture][copy]") {
  CUDRV_REQUIRE_GPU();
  const auto seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  cudrv::device dev(0);
  cudrv::stream s(dev);

  SECTION("uchar4 2-D: host -> array -> device -> array -> pinned host") {
    const std::size_t w = 123, h = 77;
    const auto bytes = cudrv::test::random_bytes(w * h * 4, seed);
    std::vector<uchar4> in(w * h);
    std::memcpy(in.data(), bytes.data(), bytes.size());
    cudrv::array<uchar4> a(dev, cudrv::array_shape::two_d(w, h));
    cudrv::array<uchar4> b(dev, cudrv::array_shape::two_d(w, h));
    cudrv::device_buffer<uchar4> d(dev, w * h);
    cudrv::fill(cudrv::device_span<std::uint32_t>(d.data(), w * h), 0xA5A5A5A5u, s);
    cudrv::copy(a, in, s);
    cudrv::copy(d, a, s);
    cudrv::copy(b, d, s);
    cudrv::pinned_buffer<uchar4> out(dev, w * h);
    std::memset(static_cast<void*>(out.data()), 0xA5, w * h * sizeof(uchar4));
    cudrv::copy(out, b, s);
    s.synchronize();
    CHECK(std::memcmp(out.data(), in.data(), in.size() * sizeof(uchar4)) == 0);
  }
  SECTION("float 3-D: a box copied array to array, the rest untouched") {
    const std::size_t w = 40, h = 30, d = 20;
    const auto src_data = cudrv::test::random_vector<float>(w * h * d, seed);
    cudrv::array<float> src(dev, cudrv::array_shape::three_d(w, h, d));
    cudrv::array<float> dst(dev, cudrv::array_shape::three_d(w, h, d));
    cudrv::copy(src, src_data, s);
    std::vector<float> poison(w * h * d, cudrv::test::poison_value<float>());
    cudrv::copy(dst, poison, s);
    const cudrv::array_region from{3, 4, 5, 17, 11, 7};
    const cudrv::array_region to{20, 2, 10};
    cudrv::copy(dst, to, src, from, s);
    std::vector<float> out(w * h * d, 0.0f);
    cudrv::copy(out, dst, s);
    s.synchronize();
    std::size_t wrong = 0;
    for (std::size_t z = 0; z < d; ++z) {
      for (std::size_t y = 0; y < h; ++y) {
        for (std::size_t x = 0; x < w; ++x) {
          const bool inside = x >= 20 && x < 37 && y >= 2 && y < 13 && z >= 10 && z < 17;
          const float expected = inside ? src_data[((z - 10 + 5) * h + (y - 2 + 4)) * w + (x - 20 + 3)]
                                        : cudrv::test::poison_value<float>();
          wrong += std::memcmp(&out[(z * h + y) * w + x], &expected, sizeof(float)) != 0 ? 1 : 0;
        }
      }
    }
    CHECK(wrong == 0);
  }
  SECTION("pitched device memory <-> array") {
    const std::size_t w = 50, h = 33;
    const auto data = cudrv::test::random_vector<std::uint16_t>(w * h, seed);
    cudrv::pitched_buffer<std::uint16_t> p(dev, w, h);
    cudrv::copy(p.view(), cudrv::pitched_span<const std::uint16_t>::dense(data.data(), w, h), s);
    cudrv::array<std::uint16_t> a(dev, cudrv::array_shape::two_d(w, h));
    cudrv::copy(a, cudrv::array_region{}, p.view(), s);
    std::vector<std::uint16_t> out(w * h, 0xA5A5);
    cudrv::copy(out, a, s);
    s.synchronize();
    CHECK(cudrv::test::mismatch(out, data).empty());
  }
}

TEST_CASE("layered and 3-D arrays are read back through textures element by element", "[gpu][texture]") {
  CUDRV_REQUIRE_GPU();
  const auto seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  cudrv::device dev(0);
  cudrv::stream s(dev);
  const int w = 35, h = 19, depth = 6;
  const auto data = random_floats(static_cast<std::size_t>(w * h * depth), seed, -5.0f, 5.0f);
  cudrv::device_buffer<float> out(dev, data.size());
  std::vector<float> host(data.size());

  cudrv::array<float> layered(dev, cudrv::array_shape::layered_two_d(w, h, depth));
  cudrv::copy(layered, data, s);
  {
    cudrv::texture_object tex(layered);
    cudrv::fill(out, cudrv::test::poison_value<float>(), s);
    auto k = texture_library().get_kernel<void(cudrv::texture_object_ref, int, int, int, float*)>("fetch_layered");
    cudrv::launch(s, grid_2d(w, h, depth), k, tex, w, h, depth, out.get());
    cudrv::copy(host, out, s);
    s.synchronize();
    CHECK(cudrv::test::mismatch(host, data).empty());
  }

  cudrv::array<float> volume(dev, cudrv::array_shape::three_d(w, h, depth));
  cudrv::copy(volume, data, s);
  {
    cudrv::texture_object tex(volume);
    cudrv::fill(out, cudrv::test::poison_value<float>(), s);
    auto k = texture_library().get_kernel<void(cudrv::texture_object_ref, int, int, int, float*)>("fetch3d");
    cudrv::launch(s, grid_2d(w, h, depth), k, tex, w, h, depth, out.get());
    cudrv::copy(host, out, s);
    s.synchronize();
    CHECK(cudrv::test::mismatch(host, data).empty());
  }

  // One layer replaced through a region copy, read back whole.
  const auto layer = random_floats(static_cast<std::size_t>(w * h), seed + 1);
  cudrv::copy(layered, cudrv::array_region::slice(4), layer, s);
  std::vector<float> all(data.size(), cudrv::test::poison_value<float>());
  cudrv::copy(all, layered, s);
  s.synchronize();
  auto expected = data;
  std::copy(layer.begin(), layer.end(), expected.begin() + 4 * w * h);
  CHECK(cudrv::test::mismatch(all, expected).empty());
}

TEST_CASE("a mipmapped array: a level filled by a copy is what the texture reads at that level", "[gpu][texture]") {
  CUDRV_REQUIRE_GPU();
  const auto seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  cudrv::device dev(0);
  cudrv::stream s(dev);
  cudrv::mipmapped_array<float> mip(dev, cudrv::array_shape::two_d(64, 32), 4);
  cudrv::array_ref<float> level1 = mip.level(1);
  REQUIRE(level1.width() == 32);
  REQUIRE(level1.rows() == 16);
  const auto data = random_floats(32 * 16, seed);
  cudrv::copy(level1, data, s);
  std::vector<float> back(data.size(), cudrv::test::poison_value<float>());
  cudrv::copy(back, level1, s);
  cudrv::texture_object tex(mip, {.normalized_coordinates = true, .max_mipmap_level_clamp = 3.0f});
  cudrv::device_buffer<float> out(dev, data.size());
  cudrv::fill(out, cudrv::test::poison_value<float>(), s);
  auto k = texture_library().get_kernel<void(cudrv::texture_object_ref, int, int, float, float*)>("fetch_lod");
  cudrv::launch(s, grid_2d(32, 16), k, tex, 32, 16, 1.0f, out.get());
  std::vector<float> sampled(data.size());
  cudrv::copy(sampled, out, s);
  s.synchronize();
  CHECK(cudrv::test::mismatch(back, data).empty());
  CHECK(cudrv::test::mismatch(sampled, data).empty());
}

TEST_CASE("textures over linear and pitched device memory, and normalised 8-bit reads", "[gpu][texture]") {
  CUDRV_REQUIRE_GPU();
  const auto seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  cudrv::device dev(0);
  cudrv::stream s(dev);

  const std::size_t n = 1000;
  const auto data = random_floats(4 * n, seed);
  cudrv::device_buffer<float4> lin(dev, n);
  cudrv::copy(cudrv::device_span<float>(lin.data(), 4 * n), data, s);
  {
    cudrv::texture_object tex(lin);
    cudrv::device_buffer<float4> out(dev, n);
    cudrv::fill(cudrv::device_span<float>(out.data(), 4 * n), cudrv::test::poison_value<float>(), s);
    auto k = texture_library().get_kernel<void(cudrv::texture_object_ref, int, float4*)>("fetch_linear");
    cudrv::launch(s, {.grid = static_cast<unsigned>((n + 255) / 256), .block = 256}, k, tex, static_cast<int>(n),
                  out.get());
    std::vector<float> host(4 * n);
    cudrv::copy(host, cudrv::device_span<float>(out.data(), 4 * n), s);
    s.synchronize();
    CHECK(cudrv::test::mismatch(host, data).empty());
  }

  const std::size_t w = 45, h = 29;
  const auto img = random_floats(w * h, seed + 1);
  cudrv::pitched_buffer<float> p(dev, w, h);
  cudrv::copy(p.view(), cudrv::pitched_span<const float>::dense(img.data(), w, h), s);
  {
    cudrv::texture_object tex(p);
    cudrv::device_buffer<float> out(dev, w * h);
    cudrv::fill(out, cudrv::test::poison_value<float>(), s);
    auto k = texture_library().get_kernel<void(cudrv::texture_object_ref, int, int, float*)>("fetch_pitch");
    cudrv::launch(s, grid_2d(w, h), k, tex, static_cast<int>(w), static_cast<int>(h), out.get());
    std::vector<float> host(w * h);
    cudrv::copy(host, out, s);
    s.synchronize();
    CHECK(cudrv::test::mismatch(host, img).empty());
  }

  // uchar4 read as normalised floats: each channel c becomes c / 255.
  const auto bytes = cudrv::test::random_bytes(w * h * 4, seed + 2);
  std::vector<uchar4> pixels(w * h);
  std::memcpy(pixels.data(), bytes.data(), bytes.size());
  cudrv::array<uchar4> rgba(dev, cudrv::array_shape::two_d(w, h));
  cudrv::copy(rgba, pixels, s);
  {
    cudrv::texture_object tex(rgba, {.read = cudrv::read_mode::normalized_float});
    cudrv::device_buffer<float4> out(dev, w * h);
    auto k = texture_library().get_kernel<void(cudrv::texture_object_ref, int, int, float4*)>("fetch_uchar4");
    cudrv::launch(s, grid_2d(w, h), k, tex, static_cast<int>(w), static_cast<int>(h), out.get());
    std::vector<float> host(4 * w * h);
    cudrv::copy(host, cudrv::device_span<float>(out.data(), 4 * w * h), s);
    s.synchronize();
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < 4 * w * h; ++i) {
      wrong += std::abs(host[i] - bytes[i] / 255.0f) > 1e-6f ? 1 : 0;
    }
    CHECK(wrong == 0);
  }
}
