// Arrays, textures and surfaces without a GPU: element formats derived at compile time, the driver
// descriptors of each shape, the sampler translation and its refusals, the refusal of temporaries,
// the layout of the kernel-argument views, and the checks of shapes, copies and samplers that come
// before any driver call. Run without a driver ([driverless]): a check that came after a driver call
// would surface as driver_unavailable_error instead.
#include <catch2/catch.hpp>

#include <cudrv/array.hpp>
#include <cudrv/texture.hpp>

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;

namespace {

// Made-up handles: the checks under test never pass them to a driver.
const CUarray fake_array = reinterpret_cast<CUarray>(0x1000);
const cudrv::context_ref fake_context(reinterpret_cast<CUcontext>(0x2000));

template <class T>
cudrv::array_ref<T> view_of(const cudrv::array_shape& shape, cudrv::array_flags flags = cudrv::array_flags::none) {
  return cudrv::array_ref<T>(fake_array, {cudrv::array_format_of<T>, shape, flags});
}

// Compile-time properties.
static_assert(cudrv::array_format_of<float4> == cudrv::array_format{CU_AD_FORMAT_FLOAT, 4});
static_assert(cudrv::array_format_of<std::uint8_t> == cudrv::array_format{CU_AD_FORMAT_UNSIGNED_INT8, 1});
static_assert(cudrv::array_format_of<short2> == cudrv::array_format{CU_AD_FORMAT_SIGNED_INT16, 2});
static_assert(cudrv::array_format_of<uint4>.element_size() == 16);
static_assert(cudrv::array_element<int2>);
static_assert(!cudrv::array_element<double>);  // no 64-bit channels
static_assert(!cudrv::array_element<float3>);  // 3 channels are not an array format
static_assert(!cudrv::array_element<std::int64_t>);
static_assert(std::is_trivially_copyable_v<cudrv::array_ref<float>>);
static_assert(std::is_trivially_copyable_v<cudrv::mipmapped_array_ref<float>>);
static_assert(std::is_trivially_copyable_v<cudrv::texture_resource>);
static_assert(std::is_trivially_copyable_v<cudrv::texture_object_ref> && sizeof(cudrv::texture_object_ref) == 8);
static_assert(std::is_trivially_copyable_v<cudrv::surface_object_ref> && sizeof(cudrv::surface_object_ref) == 8);
// Owners are not views, are move-only, and convert to views (textures only as lvalues).
static_assert(!std::is_base_of_v<cudrv::array_ref<float>, cudrv::array<float>>);
static_assert(!std::is_copy_constructible_v<cudrv::array<float>> &&
              std::is_nothrow_move_constructible_v<cudrv::array<float>>);
static_assert(std::is_convertible_v<const cudrv::array<float>&, cudrv::array_ref<float>>);
static_assert(std::is_convertible_v<const cudrv::array<float>&, cudrv::array_ref<>>);
static_assert(std::is_convertible_v<cudrv::array_ref<float>, cudrv::array_ref<>>);
static_assert(!std::is_convertible_v<cudrv::array_ref<>, cudrv::array_ref<float>>);
static_assert(!std::is_convertible_v<cudrv::array<float>&&, cudrv::array_ref<float>>);  // a view of a temporary
static_assert(!std::is_convertible_v<cudrv::array<float>&&, cudrv::array_ref<>>);
static_assert(!std::is_convertible_v<cudrv::mipmapped_array<float>&&, cudrv::mipmapped_array_ref<float>>);
static_assert(std::is_convertible_v<const cudrv::texture_object&, cudrv::texture_object_ref>);
static_assert(!std::is_convertible_v<cudrv::texture_object&&, cudrv::texture_object_ref>);
static_assert(!std::is_convertible_v<cudrv::surface_object&&, cudrv::surface_object_ref>);
// What a texture reads must outlive it: temporary owners are refused.
static_assert(std::is_constructible_v<cudrv::texture_resource, cudrv::array<float>&>);
static_assert(!std::is_constructible_v<cudrv::texture_resource, cudrv::array<float>&&>);
static_assert(!std::is_constructible_v<cudrv::texture_resource, cudrv::mipmapped_array<float>&&>);
static_assert(!std::is_constructible_v<cudrv::texture_resource, cudrv::device_buffer<float>&&>);
static_assert(!std::is_constructible_v<cudrv::texture_resource, cudrv::pitched_buffer<float>&&>);
static_assert(!std::is_constructible_v<cudrv::texture_object, cudrv::array<float>&&>);
static_assert(!std::is_constructible_v<cudrv::surface_object, cudrv::array<float>&&>);
static_assert(!std::is_constructible_v<cudrv::texture_resource, cudrv::device_buffer<double>&>);  // not an element
// Arrays are made in a named context, never a temporary one.
static_assert(!std::is_constructible_v<cudrv::array<float>, cudrv::context&&, cudrv::array_shape>);
static_assert(!std::is_constructible_v<cudrv::array<float>, cudrv::primary_context&&, cudrv::array_shape>);

}  // namespace

TEST_CASE("array descriptions convert to the driver's descriptor and back for every kind", "[arrays]") {
  const cudrv::array_shape shapes[] = {
      cudrv::array_shape::one_d(9),
      cudrv::array_shape::two_d(9, 4),
      cudrv::array_shape::three_d(9, 4, 3),
      cudrv::array_shape::layered_one_d(9, 5),
      cudrv::array_shape::layered_two_d(9, 4, 5),
      cudrv::array_shape::cubemap(8),
      cudrv::array_shape::cubemap_layered(8, 2),
  };
  const std::size_t depths[] = {0, 0, 3, 5, 5, 6, 12};
  const std::size_t heights[] = {0, 4, 4, 0, 4, 8, 8};
  const std::size_t elements[] = {9, 36, 108, 45, 180, 384, 768};
  for (std::size_t i = 0; i < std::size(shapes); ++i) {
    INFO("kind " << static_cast<int>(shapes[i].kind));
    const cudrv::array_description d{cudrv::array_format_of<float2>, shapes[i], cudrv::array_flags::surface_load_store};
    const CUDA_ARRAY3D_DESCRIPTOR n = d.native();
    CHECK(n.Width == 9 - (i >= 5 ? 1 : 0));
    CHECK(n.Height == heights[i]);
    CHECK(n.Depth == depths[i]);
    CHECK(n.Format == CU_AD_FORMAT_FLOAT);
    CHECK(n.NumChannels == 2);
    CHECK((n.Flags & CUDA_ARRAY3D_SURFACE_LDST) != 0);
    CHECK(((n.Flags & CUDA_ARRAY3D_LAYERED) != 0) == (i == 3 || i == 4 || i == 6));
    CHECK(((n.Flags & CUDA_ARRAY3D_CUBEMAP) != 0) == (i >= 5));
    CHECK(shapes[i].element_count() == elements[i]);
    CHECK(cudrv::array_description::from_native(n) == d);
  }
}

TEST_CASE("the sampler description the driver receives, and the combinations refused", "[arrays][textures]") {
  const auto f = cudrv::array_format_of<float>;
  CUDA_TEXTURE_DESC t = cudrv::native_texture_description({}, f);
  CHECK(t.addressMode[0] == CU_TR_ADDRESS_MODE_CLAMP);
  CHECK(t.filterMode == CU_TR_FILTER_MODE_POINT);
  CHECK(t.flags == 0);  // floats are never read "as integers"
  t = cudrv::native_texture_description({.address = {cudrv::address_mode::border, cudrv::address_mode::wrap},
                                         .filter = cudrv::filter_mode::linear,
                                         .normalized_coordinates = true,
                                         .border_color = {1, 2, 3, 4}},
                                        f);
  CHECK(t.addressMode[0] == CU_TR_ADDRESS_MODE_BORDER);
  CHECK(t.addressMode[1] == CU_TR_ADDRESS_MODE_WRAP);
  CHECK(t.addressMode[2] == CU_TR_ADDRESS_MODE_CLAMP);  // left out of the braced list: clamp, not 0 (wrap)
  CHECK(t.flags == CU_TRSF_NORMALIZED_COORDINATES);
  CHECK(t.borderColor[3] == 4.0f);
  CHECK(cudrv::native_texture_description({}, cudrv::array_format_of<ushort2>).flags == CU_TRSF_READ_AS_INTEGER);
  CHECK(cudrv::native_texture_description({.read = cudrv::read_mode::normalized_float, .srgb = true},
                                          cudrv::array_format_of<uchar4>)
            .flags == CU_TRSF_SRGB);

  auto refused = [](auto make) {
    auto e = catch_as<cudrv::invalid_argument_error>(make);
    return e ? std::string(e->what()) : std::string("(nothing thrown)");
  };
  CHECK(contains(refused([] {
                   (void)cudrv::native_texture_description({.filter = cudrv::filter_mode::linear},
                                                           cudrv::array_format_of<uchar4>);
                 }),
                 "linear filtering needs floating-point results"));
  CHECK(contains(refused([] {
                   (void)cudrv::native_texture_description({.mipmap_filter = cudrv::filter_mode::linear},
                                                           cudrv::array_format_of<int>);
                 }),
                 "linear filtering"));
  CHECK(contains(refused([] {
                   (void)cudrv::native_texture_description({.read = cudrv::read_mode::normalized_float},
                                                           cudrv::array_format_of<std::uint32_t>);
                 }),
                 "32-bit integers"));
  CHECK(contains(refused([] {
                   (void)cudrv::native_texture_description({.address = {cudrv::address_mode::clamp,
                                                                        cudrv::address_mode::clamp,
                                                                        cudrv::address_mode::mirror}},
                                                           cudrv::array_format_of<float>);
                 }),
                 "address_mode::mirror (dimension 2)"));
  CHECK(contains(refused([] {
                   (void)cudrv::native_texture_description({.filter = cudrv::filter_mode::linear},
                                                           cudrv::array_format_of<float>, CU_RESOURCE_TYPE_LINEAR);
                 }),
                 "filter_mode::point"));
  CHECK(contains(refused([] {
                   (void)cudrv::native_texture_description({.max_anisotropy = 32}, cudrv::array_format_of<float>);
                 }),
                 "at most 16"));
}

TEST_CASE("resources describe what they view", "[arrays][textures]") {
  const cudrv::texture_resource a =
      view_of<float4>(cudrv::array_shape::two_d(8, 8), cudrv::array_flags::surface_load_store);
  CHECK(a.type() == CU_RESOURCE_TYPE_ARRAY);
  CHECK(a.native().res.array.hArray == fake_array);
  CHECK(a.format() == cudrv::array_format_of<float4>);
  CHECK(a.flags() == cudrv::array_flags::surface_load_store);
  const cudrv::texture_resource lin = cudrv::device_span<const short2>(CUdeviceptr{0x10000}, 100);
  CHECK(lin.type() == CU_RESOURCE_TYPE_LINEAR);
  CHECK(lin.native().res.linear.sizeInBytes == 400);
  CHECK(lin.native().res.linear.numChannels == 2);
  CHECK(lin.native().res.linear.format == CU_AD_FORMAT_SIGNED_INT16);
  const cudrv::texture_resource p = cudrv::pitched_span<float>{0x20000, 512, 100, 50, 1};
  CHECK(p.type() == CU_RESOURCE_TYPE_PITCH2D);
  CHECK(p.native().res.pitch2D.pitchInBytes == 512);
  CHECK(p.native().res.pitch2D.width == 100);
  CHECK(p.native().res.pitch2D.height == 50);
  const auto raw = cudrv::texture_resource::pitch2d(0x20000, {CU_AD_FORMAT_HALF, 2}, 10, 20, 64);
  CHECK(raw.format().element_size() == 4);
}

TEST_CASE("array, copy and texture checks come before any driver call", "[driverless][arrays][textures]") {
  CUDRV_REQUIRE_DRIVERLESS();
  auto refused = [](auto make) {
    auto e = catch_as<cudrv::invalid_argument_error>(make);
    return e ? std::string(e->what()) : std::string("(nothing thrown)");
  };
  // Shapes.
  CHECK(contains(refused([] { cudrv::array<float> a(fake_context, cudrv::array_shape::three_d(4, 4, 0)); }),
                 "needs a depth of at least 1"));
  CHECK(contains(refused([] {
                   cudrv::array<float> a(fake_context, cudrv::array_shape::cubemap(4),
                                         cudrv::array_flags::texture_gather);
                 }),
                 "texture_gather is for 2-D arrays, not a cube map"));
  CHECK(contains(
      refused([] {
        cudrv::array<> a(fake_context, cudrv::array_format{CU_AD_FORMAT_BC1_UNORM, 4}, cudrv::array_shape::two_d(4, 4));
      }),
      "not one cudrv describes"));
  CHECK(contains(refused([] { cudrv::mipmapped_array<float> m(fake_context, cudrv::array_shape::one_d(1000), 11); }),
                 "1 to 10 levels, not 11"));
  // Extents of 2^63 and more (a width of size_t(n - 1) with n == 0): the count is bounded at once (a shift
  // loop that computed it never ended there).
  CHECK(contains(refused([] {
                   cudrv::mipmapped_array<float> m(fake_context, cudrv::array_shape::one_d(std::size_t{1} << 63), 65);
                 }),
                 "1 to 64 levels, not 65"));
  CHECK(contains(refused([] {
                   const std::size_t n = 0;
                   cudrv::mipmapped_array<float> m(fake_context, cudrv::array_shape::two_d(4, n - 1), 0);
                 }),
                 "1 to 64 levels, not 0"));
  // A valid shape reaches the driver, which is missing.
  CHECK(catch_as<cudrv::driver_unavailable_error>(
      [] { cudrv::array<float> a(fake_context, cudrv::array_shape::two_d(4, 4)); }));

  // Copies.
  const auto a = view_of<float>(cudrv::array_shape::layered_two_d(10, 10, 3));
  std::vector<float> host(299);
  const auto s = cudrv::stream_ref::legacy_default();
  CHECK(contains(refused([&] { cudrv::copy(a, host, s); }), "(1196 bytes)"));
  CHECK(contains(refused([&] { cudrv::copy(host, a, s); }), "destination view"));
  CHECK(contains(refused([&] { cudrv::copy(a, cudrv::array_region{0, 10, 0}, host, s); }), "lies outside"));
  CHECK(contains(refused([&] { cudrv::copy(a, cudrv::array_region{0, 0, 1, 0, 0, 3}, host, s); }), "leaves"));
  const auto other = view_of<float>(cudrv::array_shape::two_d(5, 5));
  CHECK(contains(refused([&] { cudrv::copy(other, a, s); }), "destination region"));
  CHECK(contains(refused([&] {
                   cudrv::copy(a, cudrv::array_region{}, cudrv::pitched_span<const float>{0x1000, 40, 10, 9, 3}, s);
                 }),
                 "does not fit the source pitched layout"));
  CHECK(contains(refused([&] {
                   cudrv::copy(a, cudrv::array_region{}, cudrv::pitched_span<const float>{0x1000, 36, 10, 10, 3}, s);
                 }),
                 "pitch of 36 bytes is smaller than its row of 40 bytes"));
  // A copy that fits reaches the driver.
  std::vector<float> enough(300);
  CHECK(catch_as<cudrv::driver_unavailable_error>([&] { cudrv::copy(a, enough, s); }));

  // Textures and surfaces.
  CHECK(contains(refused([&] {
                   cudrv::texture_object t(view_of<std::int16_t>(cudrv::array_shape::two_d(4, 4)),
                                           {.filter = cudrv::filter_mode::linear});
                 }),
                 "linear filtering"));
  CHECK(contains(refused([&] { cudrv::surface_object t(a); }), "without array_flags::surface_load_store"));
  CHECK(contains(refused([&] { cudrv::surface_object t(cudrv::device_span<float>(CUdeviceptr{0x1000}, 4)); }),
                 "made over an array"));
  CHECK(contains(refused([&] {
                   cudrv::texture_object t(cudrv::pitched_span<float>{0x1000, 64, 16, 4, 2});
                 }),
                 "pitched texture is 2-D"));
  CHECK(contains(refused([&] { cudrv::texture_object t(cudrv::array_ref<float>(CUarray{}, a.description())); }),
                 "empty"));
}
