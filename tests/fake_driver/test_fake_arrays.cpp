// Arrays, mipmapped arrays, copies to and from them, texture and surface objects, against the stand-in
// driver of fake_cuda.cpp: the descriptors cudrv builds for each element type, shape and sampler
// option, the checks made before the driver is called (limits, regions, sizes, sampler combinations),
// and destruction when the context went first. The fake keeps array contents on the host, so copies
// round-trip for real. Device 1 is used (device 0 of the fake is taken by another process).
#include <catch2/catch.hpp>

#include <cudrv/cudrv.hpp>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fake_driver/fake_hooks.hpp"
#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;

namespace {

// What the fake recorded, through the library cudrv loaded.
struct fake_arrays {
  fake_arrays() { (void)cudrv::test::fake_hook<long long(const char*)>("fake_cuda_counter"); }  // the fake is loaded
  template <class F>
  F* fn(const char* name) const {
    return cudrv::test::fake_hook<F>(name);
  }
  long long counter(const char* name) const { return fn<long long(const char*)>("fake_cuda_counter")(name); }
  long long live() const { return fn<long long()>("fake_cuda_live_texture_objects")(); }
  CUDA_ARRAY3D_DESCRIPTOR last_array() const {
    CUDA_ARRAY3D_DESCRIPTOR d{};
    fn<void(CUDA_ARRAY3D_DESCRIPTOR*)>("fake_cuda_last_array")(&d);
    return d;
  }
  struct texture_record {
    CUDA_RESOURCE_DESC resource{};
    CUDA_TEXTURE_DESC texture{};
    CUDA_RESOURCE_VIEW_DESC view{};
    bool had_view = false;
  };
  texture_record last_texture() const {
    texture_record r;
    r.had_view = fn<int(CUDA_RESOURCE_DESC*, CUDA_TEXTURE_DESC*, CUDA_RESOURCE_VIEW_DESC*)>(
                     "fake_cuda_last_texture")(&r.resource, &r.texture, &r.view) != 0;
    return r;
  }
  CUDA_MEMCPY3D last_copy() const {
    CUDA_MEMCPY3D c{};
    fn<void(CUDA_MEMCPY3D*)>("fake_cuda_last_copy3d")(&c);
    return c;
  }
};

// Counts outlived-context reports and other destruction errors for the scope.
struct destruction_reports {
  static inline std::atomic<int> outlived{0};
  static inline std::atomic<int> other{0};
  cudrv::destruction_error_handler previous;
  destruction_reports() {
    outlived = 0;
    other = 0;
    previous = cudrv::set_destruction_error_handler([](const cudrv::error& e) noexcept {
      if (e.code() == CUDA_ERROR_CONTEXT_IS_DESTROYED && e.source() == cudrv::error_source::cudrv) {
        ++outlived;
      } else {
        ++other;
      }
    });
  }
  ~destruction_reports() { cudrv::set_destruction_error_handler(previous); }
};

template <class T>
void check_format(CUarray_format format, unsigned channels) {
  INFO("element of " << sizeof(T) << " bytes, format " << format << " x " << channels);
  fake_arrays f;
  cudrv::device dev(1);
  cudrv::array<T> a(dev, cudrv::array_shape::two_d(7, 5));
  const CUDA_ARRAY3D_DESCRIPTOR d = f.last_array();
  CHECK(d.Format == format);
  CHECK(d.NumChannels == channels);
  CHECK(d.Width == 7);
  CHECK(d.Height == 5);
  CHECK(d.Depth == 0);
  CHECK(d.Flags == 0);
  CHECK(a.format().element_size() == sizeof(T));
  CHECK(a.query_description() == a.description());
}

template <class E>
std::string message_of(const std::optional<E>& e) {
  return e ? std::string(e->what()) : std::string("(nothing thrown)");
}

std::vector<float> random_floats(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> dist(-100.0f, 100.0f);
  std::vector<float> v(n);
  for (float& x : v) {
    x = dist(gen);
  }
  return v;
}

}  // namespace

TEST_CASE("arrays: the channel format and count come from the element type", "[fake-driver][arrays]") {
  check_format<float>(CU_AD_FORMAT_FLOAT, 1);
  check_format<float2>(CU_AD_FORMAT_FLOAT, 2);
  check_format<float4>(CU_AD_FORMAT_FLOAT, 4);
  check_format<std::int8_t>(CU_AD_FORMAT_SIGNED_INT8, 1);
  check_format<char4>(CU_AD_FORMAT_SIGNED_INT8, 4);
  check_format<std::uint8_t>(CU_AD_FORMAT_UNSIGNED_INT8, 1);
  check_format<uchar2>(CU_AD_FORMAT_UNSIGNED_INT8, 2);
  check_format<uchar4>(CU_AD_FORMAT_UNSIGNED_INT8, 4);
  check_format<std::int16_t>(CU_AD_FORMAT_SIGNED_INT16, 1);
  check_format<short2>(CU_AD_FORMAT_SIGNED_INT16, 2);
  check_format<ushort4>(CU_AD_FORMAT_UNSIGNED_INT16, 4);
  check_format<std::int32_t>(CU_AD_FORMAT_SIGNED_INT32, 1);
  check_format<int2>(CU_AD_FORMAT_SIGNED_INT32, 2);
  check_format<std::uint32_t>(CU_AD_FORMAT_UNSIGNED_INT32, 1);
  check_format<uint4>(CU_AD_FORMAT_UNSIGNED_INT32, 4);

  // The untyped form takes its format at run time; a typed view of it checks the format.
  fake_arrays f;
  cudrv::device dev(1);
  cudrv::array<> raw(dev, cudrv::array_format{CU_AD_FORMAT_HALF, 4}, cudrv::array_shape::one_d(64));
  CHECK(f.last_array().Format == CU_AD_FORMAT_HALF);
  CHECK(f.last_array().NumChannels == 4);
  cudrv::array_ref<> view = raw;
  CHECK(view.format().element_size() == 8);
  auto wrong = catch_as<cudrv::invalid_argument_error>([&] { (void)view.as<float2>(); });
  REQUIRE(wrong);
  CHECK(contains(wrong->what(), "4 channel(s) of CUarray_format"));
  auto adopted = cudrv::array_ref<>::from_native_handle(raw.native_handle());
  CHECK(adopted.description() == raw.description());
  CHECK(catch_as<cudrv::invalid_argument_error>(
      [&] { (void)cudrv::array_ref<float>::from_native_handle(raw.native_handle()); }));
}

TEST_CASE("arrays: each kind and flag gives the driver's descriptor, and back", "[fake-driver][arrays]") {
  fake_arrays f;
  cudrv::device dev(1);
  struct expected {
    cudrv::array_shape shape;
    cudrv::array_flags flags;
    std::size_t width, height, depth;
    unsigned int driver_flags;
    std::size_t rows, slices;
  };
  const expected cases[] = {
      {cudrv::array_shape::one_d(100), cudrv::array_flags::none, 100, 0, 0, 0, 1, 1},
      {cudrv::array_shape::two_d(100, 30), cudrv::array_flags::texture_gather, 100, 30, 0, CUDA_ARRAY3D_TEXTURE_GATHER,
       30, 1},
      {cudrv::array_shape::three_d(10, 20, 30), cudrv::array_flags::surface_load_store, 10, 20, 30,
       CUDA_ARRAY3D_SURFACE_LDST, 20, 30},
      {cudrv::array_shape::layered_one_d(64, 5), cudrv::array_flags::none, 64, 0, 5, CUDA_ARRAY3D_LAYERED, 1, 5},
      {cudrv::array_shape::layered_two_d(64, 32, 7), cudrv::array_flags::surface_load_store, 64, 32, 7,
       CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_SURFACE_LDST, 32, 7},
      {cudrv::array_shape::cubemap(16), cudrv::array_flags::none, 16, 16, 6, CUDA_ARRAY3D_CUBEMAP, 16, 6},
      {cudrv::array_shape::cubemap_layered(16, 3), cudrv::array_flags::none, 16, 16, 18,
       CUDA_ARRAY3D_CUBEMAP | CUDA_ARRAY3D_LAYERED, 16, 18},
  };
  for (const expected& e : cases) {
    INFO("kind " << static_cast<int>(e.shape.kind));
    cudrv::array<float> a(dev, e.shape, e.flags);
    const CUDA_ARRAY3D_DESCRIPTOR d = f.last_array();
    CHECK(d.Width == e.width);
    CHECK(d.Height == e.height);
    CHECK(d.Depth == e.depth);
    CHECK(d.Flags == e.driver_flags);
    CHECK(a.rows() == e.rows);
    CHECK(a.slices() == e.slices);
    CHECK(cudrv::array_description::from_native(d) == a.description());
    CHECK(a.query_description() == a.description());
  }
}

TEST_CASE("arrays: shapes the kind or the device's limits refuse are refused before the driver, naming the limit",
          "[fake-driver][arrays]") {
  fake_arrays f;
  cudrv::device dev(1);
  const long long created = f.counter("arrays_created");
  auto refused = [&](auto make) {
    auto e = catch_as<cudrv::invalid_argument_error>(make);
    return message_of(e);
  };
  // The fake's 2-D texture height limit is 4096 and its 2-D surface height 2048.
  std::string m = refused([&] { cudrv::array<float> a(dev, cudrv::array_shape::two_d(100, 5000)); });
  CHECK(contains(m, "CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT"));
  CHECK(contains(m, "height of 5000 exceeds the device's limit of 4096"));
  CHECK(contains(m, "device 1"));
  m = refused([&] {
    cudrv::array<float> a(dev, cudrv::array_shape::two_d(100, 3000), cudrv::array_flags::surface_load_store);
  });
  CHECK(contains(m, "CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_HEIGHT"));
  m = refused([&] { cudrv::array<float> a(dev, cudrv::array_shape::layered_two_d(8, 8, 3000)); });
  CHECK(contains(m, "number of layers of 3000"));
  CHECK(contains(m, "MAXIMUM_TEXTURE2D_LAYERED_LAYERS"));
  m = refused([&] { cudrv::array<float> a(dev, cudrv::array_shape::three_d(20000, 8, 8)); });
  CHECK(contains(m, "MAXIMUM_TEXTURE3D_WIDTH"));
  CHECK(contains(m, "alternate"));
  m = refused([&] { cudrv::array<float> a(dev, cudrv::array_shape{cudrv::array_kind::cubemap, 16, 8, 0, 0}); });
  CHECK(contains(m, "square"));
  m = refused(
      [&] { cudrv::array<float> a(dev, cudrv::array_shape::three_d(8, 8, 8), cudrv::array_flags::texture_gather); });
  CHECK(contains(m, "texture_gather is for 2-D arrays"));
  m = refused([&] { cudrv::array<float> a(dev, cudrv::array_shape::two_d(0, 8)); });
  CHECK(contains(m, "width of at least 1"));
  m = refused([&] { cudrv::array<float> a(dev, cudrv::array_shape::layered_one_d(8, 0)); });
  CHECK(contains(m, "number of layers of at least 1"));
  m = refused([&] { cudrv::array<> a(dev, cudrv::array_format{CU_AD_FORMAT_FLOAT, 3}, cudrv::array_shape::one_d(8)); });
  CHECK(contains(m, "1, 2 or 4 channels"));
  CHECK(f.counter("arrays_created") == created);

  // A 3-D shape beyond the main limits but within the alternate ones (8192 x 8192 x 32768) is made.
  cudrv::array<std::uint8_t> deep(dev, cudrv::array_shape::three_d(64, 64, 20000));
  CHECK(f.counter("arrays_created") == created + 1);
}

TEST_CASE("arrays: ownership, moves, release, and a context destroyed first", "[fake-driver][arrays][driver_error]") {
  fake_arrays f;
  destruction_reports reports;
  cudrv::device dev(1);
  const long long destroyed = f.counter("arrays_destroyed");
  {
    cudrv::array<float> a(dev, cudrv::array_shape::one_d(10));
    cudrv::array<float> b = std::move(a);
    CHECK_FALSE(a);
    CHECK(b);
    auto e = catch_as<cudrv::invalid_argument_error>([&] { (void)a.context(); });
    CHECK(contains(message_of(e), "empty"));
    CHECK(b.context().native_handle() == dev.primary_context().native_handle());
    CUarray raw = b.release();
    CHECK_FALSE(b);
    auto again = cudrv::array<float>::from_native_handle(raw, dev.primary_context());
    CHECK(again.width() == 10);
    CHECK(f.counter("arrays_destroyed") == destroyed);
  }
  CHECK(f.counter("arrays_destroyed") == destroyed + 1);

  // The context goes first: the driver destroyed the array with it; cudrv destroys nothing and says so.
  const long long after_context = f.counter("array_destroy_after_context");
  {
    std::optional<cudrv::array<float>> a;
    std::optional<cudrv::mipmapped_array<float>> m;
    {
      cudrv::context ctx(dev);
      a.emplace(ctx, cudrv::array_shape::two_d(8, 8));
      m.emplace(ctx, cudrv::array_shape::two_d(8, 8), 2);
    }
    CHECK(reports.outlived == 0);
  }
  CHECK(reports.outlived == 2);
  CHECK(reports.other == 0);
  CHECK(f.counter("array_destroy_after_context") == after_context);
  CHECK(f.counter("arrays_destroyed") == destroyed + 1);
}

TEST_CASE("array copies: host to array to host round trips, regions, layers and pitched layouts",
          "[fake-driver][arrays]") {
  fake_arrays f;
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  cudrv::device dev(1);
  cudrv::stream s(dev);

  SECTION("a whole 2-D array") {
    const auto in = random_floats(33 * 17, seed);
    cudrv::array<float> a(dev, cudrv::array_shape::two_d(33, 17));
    cudrv::copy(a, in, s);
    const CUDA_MEMCPY3D c = f.last_copy();
    CHECK(c.dstMemoryType == CU_MEMORYTYPE_ARRAY);
    CHECK(c.srcMemoryType == CU_MEMORYTYPE_HOST);
    CHECK(c.WidthInBytes == 33 * sizeof(float));
    CHECK(c.Height == 17);
    CHECK(c.Depth == 1);
    CHECK(c.srcPitch == 33 * sizeof(float));
    std::vector<float> out(in.size(), -1.0f);
    cudrv::copy(out, a, s);
    s.synchronize();
    CHECK(out == in);
  }
  SECTION("one layer of a layered array, and a box of a 3-D array through device memory") {
    const std::size_t w = 12, h = 5, layers = 4;
    const auto all = random_floats(w * h * layers, seed);
    cudrv::array<float> a(dev, cudrv::array_shape::layered_two_d(w, h, layers));
    cudrv::copy(a, all, s);
    const auto layer2 = random_floats(w * h, seed + 1);
    cudrv::copy(a, cudrv::array_region::slice(2), layer2, s);
    CHECK(f.last_copy().dstZ == 2);
    std::vector<float> out(all.size(), -1.0f);
    cudrv::copy(out, a, s);
    s.synchronize();
    for (std::size_t i = 0; i < out.size(); ++i) {
      const std::size_t layer = i / (w * h);
      const float expected = layer == 2 ? layer2[i % (w * h)] : all[i];
      REQUIRE(out[i] == expected);
    }

    // Region (2..9) x (1..3) x (1..2) of a 3-D array, read into device memory, then to the host.
    cudrv::array<float> cube(dev, cudrv::array_shape::three_d(w, h, 3));
    const auto vol = random_floats(w * h * 3, seed + 2);
    cudrv::copy(cube, vol, s);
    const cudrv::array_region box{2, 1, 1, 7, 3, 2};
    cudrv::device_buffer<float> d(dev, 7 * 3 * 2);
    cudrv::copy(d, cube, box, s);
    std::vector<float> got(7 * 3 * 2, -1.0f);
    cudrv::copy(got, d, s);
    s.synchronize();
    for (std::size_t z = 0; z < 2; ++z) {
      for (std::size_t y = 0; y < 3; ++y) {
        for (std::size_t x = 0; x < 7; ++x) {
          REQUIRE(got[(z * 3 + y) * 7 + x] == vol[((z + 1) * h + y + 1) * w + x + 2]);
        }
      }
    }
  }
  SECTION("array to array with offsets, and a pitched host layout") {
    cudrv::array<int> a(dev, cudrv::array_shape::two_d(8, 8));
    cudrv::array<int> b(dev, cudrv::array_shape::two_d(8, 8));
    std::vector<int> in(64), zeros(64, 0);
    for (int i = 0; i < 64; ++i) {
      in[static_cast<std::size_t>(i)] = i;
    }
    cudrv::copy(a, in, s);
    cudrv::copy(b, zeros, s);
    cudrv::copy(b, cudrv::array_region{4, 5, 0}, a, cudrv::array_region{1, 2, 0, 3, 2, 1}, s);
    std::vector<int> out(64, -1);
    cudrv::copy(out, b, s);
    s.synchronize();
    for (std::size_t y = 0; y < 8; ++y) {
      for (std::size_t x = 0; x < 8; ++x) {
        const bool inside = x >= 4 && x < 7 && y >= 5 && y < 7;
        REQUIRE(out[y * 8 + x] == (inside ? in[(y - 5 + 2) * 8 + (x - 4 + 1)] : 0));
      }
    }
    // Host rows of 8 ints padded to 11: the array's 8 x 8 go into the first 8 of each row.
    std::vector<int> padded(11 * 8, -7);
    cudrv::copy(cudrv::pitched_span<int>{reinterpret_cast<std::uintptr_t>(padded.data()), 11 * sizeof(int), 8, 8, 1}, a,
                cudrv::array_region{}, s);
    s.synchronize();
    for (std::size_t y = 0; y < 8; ++y) {
      for (std::size_t x = 0; x < 11; ++x) {
        REQUIRE(padded[y * 11 + x] == (x < 8 ? in[y * 8 + x] : -7));
      }
    }
  }
}

TEST_CASE("array copies: sizes and regions are checked before the driver is called", "[fake-driver][arrays]") {
  fake_arrays f;
  cudrv::device dev(1);
  cudrv::stream s(dev);
  cudrv::array<float> a(dev, cudrv::array_shape::layered_two_d(8, 4, 3));
  cudrv::array<float> small(dev, cudrv::array_shape::two_d(4, 4));
  const long long copies = f.counter("memcpy3d");
  std::vector<float> short_host(8 * 4 * 3 - 1, 1.0f);
  std::string m = message_of(catch_as<cudrv::invalid_argument_error>([&] { cudrv::copy(a, short_host, s); }));
  CHECK(contains(m, "smaller than the array region of 8 x 4 x 3 elements"));
  m = message_of(catch_as<cudrv::invalid_argument_error>([&] { cudrv::copy(short_host, a, s); }));
  CHECK(contains(m, "destination view"));
  m = message_of(
      catch_as<cudrv::invalid_argument_error>([&] { cudrv::copy(a, cudrv::array_region::slice(3), short_host, s); }));
  CHECK(contains(m, "offset (0, 0, 3) lies outside"));
  m = message_of(catch_as<cudrv::invalid_argument_error>([&] {
    cudrv::copy(a, cudrv::array_region{6, 0, 0, 3, 0, 0}, short_host, s);
  }));
  CHECK(contains(m, "leaves the layered 2-D array"));
  m = message_of(catch_as<cudrv::invalid_argument_error>([&] { cudrv::copy(small, a, s); }));
  CHECK(contains(m, "destination region"));
  cudrv::array<float> moved = std::move(small);
  m = message_of(catch_as<cudrv::invalid_argument_error>([&] { cudrv::copy(small, short_host, s); }));
  CHECK(contains(m, "empty"));
  cudrv::array<> other(dev, cudrv::array_format{CU_AD_FORMAT_UNSIGNED_INT16, 1}, cudrv::array_shape::two_d(4, 4));
  m = message_of(catch_as<cudrv::invalid_argument_error>([&] { cudrv::copy(other, moved, s); }));
  CHECK(contains(m, "not 1 channel(s)"));
  CHECK(f.counter("memcpy3d") == copies);
}

TEST_CASE("mipmapped arrays: levels halve, level views copy, the level count is checked", "[fake-driver][arrays]") {
  fake_arrays f;
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  cudrv::device dev(1);
  cudrv::stream s(dev);
  cudrv::mipmapped_array<float2> m(dev, cudrv::array_shape::two_d(40, 12), 6);
  CHECK(m.levels() == 6);
  CHECK(f.last_array().Width == 40);
  const std::size_t widths[] = {40, 20, 10, 5, 2, 1};
  const std::size_t heights[] = {12, 6, 3, 1, 1, 1};
  for (unsigned l = 0; l < 6; ++l) {
    cudrv::array_ref<float2> level = m.level(l);
    CHECK(level.width() == widths[l]);
    CHECK(level.rows() == heights[l]);
    CHECK(level.query_description() == level.description());
  }
  const auto in = random_floats(2 * 10 * 3, seed);
  std::vector<float2> level2(10 * 3), out(10 * 3, float2{-1, -1});
  std::memcpy(level2.data(), in.data(), in.size() * sizeof(float));
  cudrv::copy(m.level(2), level2, s);
  cudrv::copy(out, m.level(2), s);
  s.synchronize();
  CHECK(std::memcmp(out.data(), level2.data(), out.size() * sizeof(float2)) == 0);

  auto e = catch_as<cudrv::invalid_argument_error>([&] { (void)m.level(6); });
  CHECK(contains(message_of(e), "level 6 of a mipmapped array of 6 levels"));
  const long long made = f.counter("mipmapped_arrays_created");
  e = catch_as<cudrv::invalid_argument_error>(
      [&] { cudrv::mipmapped_array<float> bad(dev, cudrv::array_shape::two_d(40, 12), 7); });
  CHECK(contains(message_of(e), "1 to 6 levels, not 7"));
  e = catch_as<cudrv::invalid_argument_error>(
      [&] { cudrv::mipmapped_array<float> bad(dev, cudrv::array_shape::two_d(40, 12), 0); });
  CHECK(e);
  CHECK(f.counter("mipmapped_arrays_created") == made);

  // Extents of 2^63 and more: refused at once by the device's limits, as for a plain array (the level
  // count was computed first, with a shift loop that never ended from 2^63 on: UBSan, a shift by 64).
  const std::size_t n = 0;
  for (const std::size_t huge : {std::size_t{1} << 63, std::size_t(n - 1), (std::size_t{1} << 63) + 5}) {
    INFO("width " << huge);
    e = catch_as<cudrv::invalid_argument_error>(
        [&] { cudrv::mipmapped_array<float> bad(dev, cudrv::array_shape::one_d(huge), 1); });
    REQUIRE(e);
    CHECK(contains(message_of(e), "MIPMAPPED"));  // the limit named
    e = catch_as<cudrv::invalid_argument_error>(
        [&] { cudrv::mipmapped_array<float> bad(dev, cudrv::array_shape::two_d(8, huge), 64); });
    REQUIRE(e);
    auto plain =
        catch_as<cudrv::invalid_argument_error>([&] { cudrv::array<float> bad(dev, cudrv::array_shape::one_d(huge)); });
    CHECK(plain);
  }
  CHECK(f.counter("mipmapped_arrays_created") == made);
}

TEST_CASE("texture objects: the sampler, resource and view descriptions the driver receives",
          "[fake-driver][textures]") {
  fake_arrays f;
  cudrv::device dev(1);
  cudrv::array<float> img(dev, cudrv::array_shape::two_d(64, 32));
  const long long live = f.live();

  {
    cudrv::texture_object t(img, {.address = {cudrv::address_mode::wrap, cudrv::address_mode::mirror,
                                              cudrv::address_mode::border},
                                  .filter = cudrv::filter_mode::linear,
                                  .normalized_coordinates = true,
                                  .border_color = {0.25f, 0.5f, 0.75f, 1.0f},
                                  .mipmap_filter = cudrv::filter_mode::linear,
                                  .mipmap_level_bias = 0.5f,
                                  .min_mipmap_level_clamp = 1.0f,
                                  .max_mipmap_level_clamp = 3.0f,
                                  .max_anisotropy = 8,
                                  .seamless_cubemap = true,
                                  .disable_trilinear_optimization = true});
    CHECK(t);
    CHECK(t.native_handle() != 0);
    CHECK(f.live() == live + 1);
    const auto r = f.last_texture();
    CHECK(r.resource.resType == CU_RESOURCE_TYPE_ARRAY);
    CHECK(r.resource.res.array.hArray == img.native_handle());
    CHECK(r.texture.addressMode[0] == CU_TR_ADDRESS_MODE_WRAP);
    CHECK(r.texture.addressMode[1] == CU_TR_ADDRESS_MODE_MIRROR);
    CHECK(r.texture.addressMode[2] == CU_TR_ADDRESS_MODE_BORDER);
    CHECK(r.texture.filterMode == CU_TR_FILTER_MODE_LINEAR);
    CHECK(r.texture.flags ==
          (CU_TRSF_NORMALIZED_COORDINATES | CU_TRSF_SEAMLESS_CUBEMAP | CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION));
    CHECK(r.texture.borderColor[2] == 0.75f);
    CHECK(r.texture.mipmapFilterMode == CU_TR_FILTER_MODE_LINEAR);
    CHECK(r.texture.mipmapLevelBias == 0.5f);
    CHECK(r.texture.minMipmapLevelClamp == 1.0f);
    CHECK(r.texture.maxMipmapLevelClamp == 3.0f);
    CHECK(r.texture.maxAnisotropy == 8);
    CHECK_FALSE(r.had_view);
    // A kernel argument: the view is the handle.
    cudrv::texture_object_ref v = t;
    CHECK(v.native_handle() == t.native_handle());
    static_assert(sizeof(cudrv::texture_object_ref) == 8);
  }
  CHECK(f.live() == live);

  // 8-bit integers read as integers are flagged so; read as normalised floats, they may be filtered.
  cudrv::array<uchar4> rgba(dev, cudrv::array_shape::two_d(16, 16));
  {
    cudrv::texture_object as_int(rgba);
    CHECK(f.last_texture().texture.flags == CU_TRSF_READ_AS_INTEGER);
    CHECK(f.last_texture().texture.filterMode == CU_TR_FILTER_MODE_POINT);
    cudrv::texture_object as_float(rgba, {.filter = cudrv::filter_mode::linear,
                                          .read = cudrv::read_mode::normalized_float,
                                          .srgb = true});
    CHECK(f.last_texture().texture.flags == CU_TRSF_SRGB);
  }

  // A mipmapped array with a resource view of levels 1..2.
  cudrv::mipmapped_array<float> mip(dev, cudrv::array_shape::two_d(16, 16), 5);
  {
    cudrv::texture_object t(mip, {.normalized_coordinates = true},
                            {.format = CU_RES_VIEW_FORMAT_FLOAT_1X32,
                             .width = 16,
                             .height = 16,
                             .first_mipmap_level = 1,
                             .last_mipmap_level = 2});
    const auto r = f.last_texture();
    CHECK(r.resource.resType == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY);
    CHECK(r.resource.res.mipmap.hMipmappedArray == mip.native_handle());
    REQUIRE(r.had_view);
    CHECK(r.view.format == CU_RES_VIEW_FORMAT_FLOAT_1X32);
    CHECK(r.view.firstMipmapLevel == 1);
    CHECK(r.view.lastMipmapLevel == 2);
  }

  // Linear memory and pitched 2-D memory, made in the context owning it with no context current.
  cudrv::device_buffer<float4> lin(dev, 1024);
  {
    cudrv::texture_object t(lin);
    auto r = f.last_texture();
    CHECK(r.resource.resType == CU_RESOURCE_TYPE_LINEAR);
    CHECK(r.resource.res.linear.devPtr == lin.data());
    CHECK(r.resource.res.linear.format == CU_AD_FORMAT_FLOAT);
    CHECK(r.resource.res.linear.numChannels == 4);
    CHECK(r.resource.res.linear.sizeInBytes == 1024 * sizeof(float4));
    CHECK(t.context().native_handle() == dev.primary_context().native_handle());
    cudrv::texture_object p(cudrv::pitched_span<float4>{lin.data(), 64 * sizeof(float4), 48, 16, 1});
    r = f.last_texture();
    CHECK(r.resource.resType == CU_RESOURCE_TYPE_PITCH2D);
    CHECK(r.resource.res.pitch2D.width == 48);
    CHECK(r.resource.res.pitch2D.height == 16);
    CHECK(r.resource.res.pitch2D.pitchInBytes == 64 * sizeof(float4));
  }
  CHECK(f.live() == live + 2);  // rgba and mip; the textures are gone
}

TEST_CASE("texture objects: combinations the hardware cannot sample are refused before the driver",
          "[fake-driver][textures]") {
  fake_arrays f;
  cudrv::device dev(1);
  cudrv::array<std::int32_t> ints(dev, cudrv::array_shape::two_d(8, 8));
  cudrv::array<float> floats(dev, cudrv::array_shape::two_d(8, 8));
  cudrv::device_buffer<float> lin(dev, 256);
  const long long made = f.counter("textures_created");
  auto refused = [&](auto make) { return message_of(catch_as<cudrv::invalid_argument_error>(make)); };

  CHECK(contains(refused([&] { cudrv::texture_object t(ints, {.filter = cudrv::filter_mode::linear}); }),
                 "linear filtering needs floating-point results"));
  CHECK(contains(refused([&] { cudrv::texture_object t(ints, {.read = cudrv::read_mode::normalized_float}); }),
                 "32-bit integers"));
  CHECK(
      contains(refused([&] {
                 cudrv::texture_object t(floats, {.address = {cudrv::address_mode::wrap, cudrv::address_mode::clamp}});
               }),
               "address_mode::wrap (dimension 0) needs normalized_coordinates"));
  CHECK(contains(refused([&] { cudrv::texture_object t(floats, {.max_anisotropy = 17}); }), "at most 16"));
  CHECK(contains(refused([&] { cudrv::texture_object t(lin, {.filter = cudrv::filter_mode::linear}); }),
                 "filter_mode::point"));
  // Linear memory off the texture alignment (16 bytes in the fake), a pitch off its alignment (32).
  CHECK(contains(refused([&] { cudrv::texture_object t(lin.view().subspan(1)); }),
                 "CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT"));
  CHECK(contains(refused([&] {
                   cudrv::texture_object t(cudrv::pitched_span<float>{lin.data(), 40, 10, 4, 1});
                 }),
                 "CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT"));
  CHECK(contains(refused([&] {
                   cudrv::texture_object t(cudrv::pitched_span<float>{lin.data(), 64, 16, 2, 2});
                 }),
                 "pitched texture is 2-D"));
  cudrv::array<float> gone = std::move(floats);
  CHECK(contains(refused([&] { cudrv::texture_object t(floats); }), "empty"));
  CHECK(f.counter("textures_created") == made);
}

TEST_CASE("surface objects: arrays made for surfaces only, and destruction after the context",
          "[fake-driver][textures][driver_error]") {
  fake_arrays f;
  destruction_reports reports;
  cudrv::device dev(1);
  cudrv::array<float> plain(dev, cudrv::array_shape::two_d(8, 8));
  cudrv::array<float> rw(dev, cudrv::array_shape::two_d(8, 8), cudrv::array_flags::surface_load_store);
  cudrv::device_buffer<float> lin(dev, 64);
  auto refused = [&](auto make) { return message_of(catch_as<cudrv::invalid_argument_error>(make)); };
  CHECK(contains(refused([&] { cudrv::surface_object s(plain); }), "surface_load_store"));
  CHECK(contains(refused([&] { cudrv::surface_object s(lin); }), "made over an array"));
  const long long made = f.counter("surfaces_created");
  {
    cudrv::surface_object s(rw);
    CHECK(f.counter("surfaces_created") == made + 1);
    cudrv::surface_object moved = std::move(s);
    CHECK_FALSE(s);
    cudrv::surface_object_ref v = moved;
    CHECK(v.native_handle() == moved.native_handle());
  }
  CHECK(f.counter("surfaces_destroyed") >= 1);

  // Textures and surfaces in a context destroyed before them destroy nothing and report it.
  {
    std::optional<cudrv::texture_object> t;
    std::optional<cudrv::surface_object> s;
    std::optional<cudrv::array<float>> a;
    {
      cudrv::context ctx(dev);
      a.emplace(ctx, cudrv::array_shape::two_d(4, 4), cudrv::array_flags::surface_load_store);
      t.emplace(*a);
      s.emplace(*a);
      CHECK(t->context().native_handle() == ctx.native_handle());
    }
  }
  CHECK(reports.outlived == 3);
  CHECK(reports.other == 0);
}
