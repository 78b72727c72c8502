// TMA tensor maps without a GPU: every rule cudrv::validate checks, each with a descriptor that breaks
// exactly that rule (the exception type, its api and the numbers in its message), descriptors that
// follow every rule (several ranks, types, swizzles and interleaves), the layout of cudrv::tensor_map,
// and the typed overloads up to the driver call. Run without a driver ([driverless]): a check that
// came after a driver call would surface as driver_unavailable_error instead.
#include <catch2/catch.hpp>

#include <cudrv/tensor_map.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;
using dtype = cudrv::tensor_map_data_type;
using cudrv::tensor_map_interleave;
using cudrv::tensor_map_l2_promotion;
using cudrv::tensor_map_oob_fill;
using cudrv::tensor_map_swizzle;

namespace {

// A made-up device address, aligned to 256 bytes. Validation never dereferences it.
constexpr CUdeviceptr base = 0x7f0000000000ull;

// A row-major 512 x 1024 float matrix, 32 x 16 boxes with the 128-byte swizzle.
cudrv::tiled_tensor_map_desc valid_tiled() {
  return {.data_type = dtype::float32,
          .rank = 2,
          .global_address = base,
          .global_dims = {1024, 512},
          .global_strides = {1024 * 4},
          .box_dims = {32, 16},
          .swizzle = tensor_map_swizzle::bytes_128};
}

// A dense 8 x 32 x 64 float tensor, 32 x 8 x 2 boxes.
cudrv::tiled_tensor_map_desc valid_tiled_rank3() {
  return {.data_type = dtype::float32,
          .rank = 3,
          .global_address = base,
          .global_dims = {64, 32, 8},
          .global_strides = {64 * 4, 64 * 4 * 32},
          .box_dims = {32, 8, 2}};
}

// NC/16HWC16 with 2-byte elements: 16 channels fill the 32 bytes of the 32-byte interleave.
cudrv::tiled_tensor_map_desc valid_interleaved_32() {
  return {.data_type = dtype::uint16,
          .rank = 3,
          .global_address = base,
          .global_dims = {16, 32, 32},
          .global_strides = {32, 32 * 32},
          .box_dims = {16, 8, 8},
          .interleave = tensor_map_interleave::bytes_32,
          .swizzle = tensor_map_swizzle::bytes_32};
}

// NHWC fp16 activations, N = 8, H = W = 56, C = 64; a 3 x 3 filter with padding 1.
cudrv::im2col_tensor_map_desc valid_im2col() {
  return {.data_type = dtype::float16,
          .rank = 4,
          .global_address = base,
          .global_dims = {64, 56, 56, 8},
          .global_strides = {64 * 2, 64 * 2 * 56, 64 * 2 * 56 * 56},
          .pixel_box_lower_corner = {-1, -1},
          .pixel_box_upper_corner = {-1, -1},
          .channels_per_pixel = 64,
          .pixels_per_column = 128,
          .swizzle = tensor_map_swizzle::bytes_128};
}

#if CUDA_VERSION >= 12080
// 256 x 64 packed 4-bit values, 16-byte aligned in shared memory: rows of 128 bytes.
cudrv::tiled_tensor_map_desc valid_u4_align16() {
  return {.data_type = dtype::u4x16_align16b,
          .rank = 2,
          .global_address = base,
          .global_dims = {256, 64},
          .global_strides = {128},
          .box_dims = {128, 8},
          .swizzle = tensor_map_swizzle::bytes_128};
}

// 256 x 64 packed 6-bit values: rows of 192 bytes (a multiple of 32).
cudrv::tiled_tensor_map_desc valid_u6_align16() {
  return {.data_type = dtype::u6x16_align16b,
          .rank = 2,
          .global_address = base,
          .global_dims = {256, 64},
          .global_strides = {192},
          .box_dims = {128, 8}};
}

// 64 x 16 packed 4-bit values without gaps: rows of 32 bytes; 32 values are 16 bytes.
cudrv::tiled_tensor_map_desc valid_u4_align8() {
  return {.data_type = dtype::u4x16_align8b,
          .rank = 2,
          .global_address = base,
          .global_dims = {64, 16},
          .global_strides = {32},
          .box_dims = {32, 4}};
}
#endif

cudrv::tensor_map make(const cudrv::tiled_tensor_map_desc& d) { return cudrv::make_tiled_tensor_map(d); }
cudrv::tensor_map make(const cudrv::im2col_tensor_map_desc& d) { return cudrv::make_im2col_tensor_map(d); }
const char* make_api(const cudrv::tiled_tensor_map_desc&) { return "cudrv::make_tiled_tensor_map"; }
const char* make_api(const cudrv::im2col_tensor_map_desc&) { return "cudrv::make_im2col_tensor_map"; }

// validate(desc) refuses desc with an invalid_argument_error whose message holds every fragment, and
// make_*_tensor_map(desc) refuses it the same way before any driver call.
template <class Desc>
void require_rule(const Desc& desc, const std::vector<const char*>& fragments) {
  auto e = catch_as<cudrv::invalid_argument_error>([&] { cudrv::validate(desc); });
  REQUIRE(e.has_value());
  INFO("what(): " << e->what());
  CHECK(e->result() == CUDA_ERROR_INVALID_VALUE);
  CHECK(e->source() == cudrv::error_source::cudrv);
  CHECK(e->api() == "cudrv::validate");
  for (const char* fragment : fragments) {
    INFO("expected in the message: " << fragment);
    CHECK(contains(e->description(), fragment));
  }
  auto m = catch_as<cudrv::invalid_argument_error>([&] { (void)make(desc); });
  REQUIRE(m.has_value());
  CHECK(m->api() == make_api(desc));
  CHECK(m->description() == e->description());
}

using tiled_desc = cudrv::tiled_tensor_map_desc;
using im2col_desc = cudrv::im2col_tensor_map_desc;

// One broken rule: a section of its own, where change breaks a valid description and require_rule
// looks for fragments.
template <class Desc>
struct rule_case {
  const char* section;
  void (*change)(Desc&);
  std::vector<const char*> fragments;
};

// Each case in its section, changing a copy of valid.
template <class Desc>
void require_rules(const Desc& valid, const std::vector<rule_case<Desc>>& cases) {
  for (const rule_case<Desc>& c : cases) {
    DYNAMIC_SECTION(c.section) {
      Desc d = valid;
      c.change(d);
      require_rule(d, c.fragments);
    }
  }
}

template <class Desc>
void require_valid(const Desc& desc) {
  auto e = catch_as<cudrv::invalid_argument_error>([&] { cudrv::validate(desc); });
  INFO("what(): " << (e ? e->what() : "(nothing thrown)"));
  CHECK_FALSE(e.has_value());
}

}  // namespace

// --- cudrv::tensor_map ----------------------------------------------------------------------------

static_assert(sizeof(cudrv::tensor_map) == 128);
static_assert(alignof(cudrv::tensor_map) == alignof(CUtensorMap) && alignof(cudrv::tensor_map) >= 64);
static_assert(std::is_trivially_copyable_v<cudrv::tensor_map>);
static_assert(std::is_standard_layout_v<cudrv::tensor_map>);
static_assert(std::is_nothrow_default_constructible_v<cudrv::tensor_map>);
static_assert(std::is_convertible_v<const cudrv::tensor_map&, const CUtensorMap&>);
static_assert(std::is_convertible_v<cudrv::tensor_map, CUtensorMap>);  // a typed kernel's CUtensorMap parameter
static_assert(std::is_same_v<decltype(std::declval<const cudrv::tensor_map&>().native()), const CUtensorMap&>);

static_assert(cudrv::tensor_map_data_type_of<std::uint8_t> == dtype::uint8);
static_assert(cudrv::tensor_map_data_type_of<std::int8_t> == dtype::uint8);
static_assert(cudrv::tensor_map_data_type_of<std::uint16_t> == dtype::uint16);
static_assert(cudrv::tensor_map_data_type_of<std::int16_t> == dtype::uint16);
static_assert(cudrv::tensor_map_data_type_of<std::uint32_t> == dtype::uint32);
static_assert(cudrv::tensor_map_data_type_of<std::int32_t> == dtype::int32);
static_assert(cudrv::tensor_map_data_type_of<std::uint64_t> == dtype::uint64);
static_assert(cudrv::tensor_map_data_type_of<std::int64_t> == dtype::int64);
static_assert(cudrv::tensor_map_data_type_of<float> == dtype::float32);
static_assert(cudrv::tensor_map_data_type_of<const double> == dtype::float64);

// The enumerators are the driver's values.
static_assert(static_cast<int>(dtype::bfloat16) == CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
static_assert(static_cast<int>(dtype::tfloat32_ftz) == CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ);
static_assert(static_cast<int>(tensor_map_swizzle::bytes_128) == CU_TENSOR_MAP_SWIZZLE_128B);
static_assert(static_cast<int>(tensor_map_interleave::bytes_32) == CU_TENSOR_MAP_INTERLEAVE_32B);
static_assert(static_cast<int>(tensor_map_l2_promotion::bytes_256) == CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
static_assert(static_cast<int>(tensor_map_oob_fill::nan_request_zero_fma) ==
              CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA);
#if CUDA_VERSION >= 12080
static_assert(static_cast<int>(dtype::u6x16_align16b) == CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B);
static_assert(static_cast<int>(tensor_map_swizzle::bytes_128_atom_64b) == CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B);
#endif

TEST_CASE("tensor_map holds the 128 bytes of a CUtensorMap", "[driverless][tensor_map]") {
  const cudrv::tensor_map empty;
  const unsigned char zeros[sizeof(CUtensorMap)] = {};
  CHECK(std::memcmp(&empty.native(), zeros, sizeof zeros) == 0);

  CUtensorMap raw{};
  for (std::size_t i = 0; i < CU_TENSOR_MAP_NUM_QWORDS; ++i) {
    raw.opaque[i] = 0x0101010101010101ull * (i + 1);
  }
  const cudrv::tensor_map map = cudrv::tensor_map::from_native(raw);
  CHECK(std::memcmp(&map.native(), &raw, sizeof raw) == 0);
  const CUtensorMap& converted = map;  // what a typed kernel parameter receives
  CHECK(&converted == &map.native());
  CHECK(reinterpret_cast<const void*>(&map) == reinterpret_cast<const void*>(&map.native()));

  cudrv::tensor_map copy = map;
  CHECK(copy == map);
  CHECK_FALSE(copy == empty);
  raw.opaque[15] ^= 1;
  CHECK_FALSE(cudrv::tensor_map::from_native(raw) == map);
  copy = empty;
  CHECK(copy == empty);
}

TEST_CASE("tensor_map::replace_address refuses a misaligned address before any driver call",
          "[driverless][tensor_map]") {
  cudrv::tensor_map map;
  auto e = catch_as<cudrv::invalid_argument_error>([&] { map.replace_address(base + 8); });
  REQUIRE(e.has_value());
  INFO("what(): " << e->what());
  CHECK(e->api() == "cudrv::tensor_map::replace_address");
  CHECK(contains(e->description(), "0x7f0000000008"));
  CHECK(contains(e->description(), "16-byte aligned"));
  auto p = catch_as<cudrv::invalid_argument_error>(
      [&] { map.replace_address(reinterpret_cast<const void*>(static_cast<std::uintptr_t>(base + 4))); });
  REQUIRE(p.has_value());
  CHECK(contains(p->description(), "0x7f0000000004"));
  CHECK(map == cudrv::tensor_map{});  // unchanged
}

// --- valid descriptors ----------------------------------------------------------------------------

TEST_CASE("tensor map: tiled descriptors that follow every rule pass validate()", "[driverless][tensor_map]") {
  SECTION("a float matrix with the 128-byte swizzle") { require_valid(valid_tiled()); }
  SECTION("every rank from 1 to 5") {
    cudrv::tiled_tensor_map_desc d{.data_type = dtype::uint8, .global_address = base};
    for (std::uint32_t rank = 1; rank <= 5; ++rank) {
      d.rank = rank;
      d.global_dims[rank - 1] = rank == 1 ? 4096 : 3;
      d.box_dims[rank - 1] = rank == 1 ? 64 : 2;
      if (rank > 1) {
        d.global_strides[rank - 2] = rank == 2 ? 4096 : d.global_strides[rank - 3] * 3;
      }
      INFO("rank " << rank);
      require_valid(d);
    }
  }
  SECTION("several data types") {
    for (dtype t :
         {dtype::uint8, dtype::uint16, dtype::uint32, dtype::int32, dtype::uint64, dtype::int64, dtype::float16,
          dtype::float32, dtype::float64, dtype::bfloat16, dtype::float32_ftz, dtype::tfloat32, dtype::tfloat32_ftz}) {
      cudrv::tiled_tensor_map_desc d = valid_tiled_rank3();
      d.data_type = t;
      d.global_strides = {64 * 8, 64 * 8 * 32};  // room for 8-byte elements
      d.box_dims[0] = 16;                        // 16 to 128 bytes
      INFO("data type " << static_cast<int>(t));
      require_valid(d);
    }
  }
  SECTION("every swizzle with a box row that fits its span") {
    using swizzle_and_row = std::pair<tensor_map_swizzle, std::uint32_t>;
    const swizzle_and_row cases[] = {
      {tensor_map_swizzle::none, 256},
      {tensor_map_swizzle::bytes_32, 8},
      {tensor_map_swizzle::bytes_64, 16},
      {tensor_map_swizzle::bytes_128, 32},
#if CUDA_VERSION >= 12080
      {tensor_map_swizzle::bytes_128_atom_32b, 32},
      {tensor_map_swizzle::bytes_128_atom_32b_flip_8b, 32},
      {tensor_map_swizzle::bytes_128_atom_64b, 32},
#endif
    };
    for (auto [s, row_floats] : cases) {
      cudrv::tiled_tensor_map_desc d = valid_tiled();
      d.swizzle = s;
      d.box_dims[0] = row_floats;
      INFO("swizzle " << static_cast<int>(s) << ", " << row_floats << " floats per box row");
      require_valid(d);
    }
  }
  SECTION("interleaved layouts, whose box rows need not be 16-byte multiples") {
    require_valid(valid_interleaved_32());
    cudrv::tiled_tensor_map_desc d = valid_interleaved_32();
    d.interleave = tensor_map_interleave::bytes_16;
    d.global_dims[0] = 8;  // 8 channels of 2 bytes
    d.global_strides = {16, 16 * 32};
    d.box_dims = {3, 8, 8};  // 6 bytes
    d.swizzle = tensor_map_swizzle::bytes_64;
    require_valid(d);
  }
  SECTION("element strides, L2 promotions and the NaN fill") {
    cudrv::tiled_tensor_map_desc d = valid_tiled_rank3();
    d.element_strides = {1, 8, 2, 1, 1};
    d.l2_promotion = tensor_map_l2_promotion::bytes_256;
    d.oob_fill = tensor_map_oob_fill::nan_request_zero_fma;
    require_valid(d);
    d.data_type = dtype::bfloat16;
    d.box_dims[0] = 64;
    d.l2_promotion = tensor_map_l2_promotion::bytes_64;
    require_valid(d);
  }
  SECTION("the largest values the rules allow") {
    cudrv::tiled_tensor_map_desc d{.data_type = dtype::uint8,
                                   .rank = 3,
                                   .global_address = base,
                                   .global_dims = {1ull << 32, 2, 1ull << 32},
                                   .global_strides = {1ull << 32, (1ull << 40) - 16},
                                   .box_dims = {256, 256, 256},
                                   .element_strides = {8, 8, 8, 1, 1}};
    require_valid(d);
  }
  SECTION("a stride below one row where the dimension has size 1, and permuted outer dimensions") {
    cudrv::tiled_tensor_map_desc d = valid_tiled_rank3();
    d.global_dims = {64, 1, 8};
    d.global_strides = {16, 64 * 4};  // dimension 1 never steps
    require_valid(d);
    d = valid_tiled_rank3();
    d.global_dims = {64, 8, 32};
    d.global_strides = {64 * 4 * 32, 64 * 4};  // dimension 2 is laid out inside dimension 1
    require_valid(d);
  }
#if CUDA_VERSION >= 12080
  SECTION("the packed sub-byte types") {
    require_valid(valid_u4_align16());
    require_valid(valid_u6_align16());
    require_valid(valid_u4_align8());
    cudrv::tiled_tensor_map_desc d = valid_u6_align16();
    d.swizzle = tensor_map_swizzle::bytes_128_atom_64b;
    require_valid(d);
  }
#endif
}

TEST_CASE("tensor map: im2col descriptors that follow every rule pass validate()", "[driverless][tensor_map]") {
  SECTION("NHWC fp16 with a 3 x 3 filter") { require_valid(valid_im2col()); }
  SECTION("NWC, the widest corner range") {
    cudrv::im2col_tensor_map_desc d{.data_type = dtype::float32,
                                    .rank = 3,
                                    .global_address = base,
                                    .global_dims = {32, 70000, 2},
                                    .global_strides = {32 * 4, 32 * 4 * 70000},
                                    .pixel_box_lower_corner = {-32768},
                                    .pixel_box_upper_corner = {32767},
                                    .channels_per_pixel = 256,
                                    .pixels_per_column = 1024};
    require_valid(d);
  }
  SECTION("NDHWC, the narrowest corner range") {
    cudrv::im2col_tensor_map_desc d{.data_type = dtype::bfloat16,
                                    .rank = 5,
                                    .global_address = base,
                                    .global_dims = {32, 8, 8, 8, 2},
                                    .global_strides = {64, 64 * 8, 64 * 64, 64 * 512},
                                    .pixel_box_lower_corner = {-16, -16, 0},
                                    .pixel_box_upper_corner = {15, 15, -7},  // depth: 8 - 7 - 0 = 1 pixel
                                    .channels_per_pixel = 32,
                                    .pixels_per_column = 1,
                                    .element_strides = {1, 2, 2, 2, 1},
                                    .swizzle = tensor_map_swizzle::bytes_64,
                                    .oob_fill = tensor_map_oob_fill::nan_request_zero_fma};
    require_valid(d);
  }
#if CUDA_VERSION >= 12080
  SECTION("a packed type with 128 channels per pixel") {
    cudrv::im2col_tensor_map_desc d{.data_type = dtype::u4x16_align16b,
                                    .rank = 3,
                                    .global_address = base,
                                    .global_dims = {128, 16, 2},
                                    .global_strides = {64, 1024},
                                    .channels_per_pixel = 128,
                                    .pixels_per_column = 16,
                                    .swizzle = tensor_map_swizzle::bytes_128};
    require_valid(d);
  }
#endif
}

// --- tiled rules, one broken at a time -------------------------------------------------------------

TEST_CASE("tensor map: tiled: enumerator values", "[driverless][tensor_map]") {
  const std::vector<rule_case<tiled_desc>> cases = {
      {"data_type",
       [](tiled_desc& d) { d.data_type = static_cast<dtype>(99); },
       {"data_type = 99", "not a tensor_map_data_type", "valid values: 0 to"}},
      {"interleave",
       [](tiled_desc& d) { d.interleave = static_cast<tensor_map_interleave>(7); },
       {"interleave = 7", "valid values: 0 to 2"}},
      {"swizzle",
       [](tiled_desc& d) { d.swizzle = static_cast<tensor_map_swizzle>(-1); },
       {"swizzle = -1", "not a tensor_map_swizzle"}},
      {"l2_promotion",
       [](tiled_desc& d) { d.l2_promotion = static_cast<tensor_map_l2_promotion>(4); },
       {"l2_promotion = 4", "valid values: 0 to 3"}},
      {"oob_fill",
       [](tiled_desc& d) { d.oob_fill = static_cast<tensor_map_oob_fill>(2); },
       {"oob_fill = 2", "valid values: 0 to 1"}},
  };
  require_rules(valid_tiled(), cases);
}

TEST_CASE("tensor map: tiled: rank", "[driverless][tensor_map]") {
  const std::vector<rule_case<tiled_desc>> cases = {
      {"rank 0", [](tiled_desc& d) { d.rank = 0; }, {"rank = 0", "1..5"}},
      {"rank 6", [](tiled_desc& d) { d.rank = 6; }, {"rank = 6", "1..5"}},
      {"an interleaved layout needs rank 3 or more",
       [](tiled_desc& d) { d.interleave = tensor_map_interleave::bytes_16; },
       {"rank = 2", "at least 3", "interleave = bytes_16"}},
  };
  require_rules(valid_tiled(), cases);
}

TEST_CASE("tensor map: tiled: global address alignment", "[driverless][tensor_map]") {
  SECTION("16 bytes") {
    cudrv::tiled_tensor_map_desc d = valid_tiled();
    d.global_address = base + 8;
    require_rule(d, {"global_address = 0x7f0000000008", "16-byte aligned", "8 bytes past"});
  }
  SECTION("32 bytes with the 32-byte interleave") {
    cudrv::tiled_tensor_map_desc d = valid_interleaved_32();
    d.global_address = base + 16;
    require_rule(d, {"global_address = 0x7f0000000010", "32-byte aligned", "interleave = bytes_32"});
  }
#if CUDA_VERSION >= 12080
  SECTION("32 bytes for a 16-byte-aligned packed type") {
    cudrv::tiled_tensor_map_desc d = valid_u4_align16();
    d.global_address = base + 16;
    require_rule(d, {"global_address = 0x7f0000000010", "32-byte aligned", "data_type = u4x16_align16b"});
  }
#endif
}

TEST_CASE("tensor map: tiled: global dimensions", "[driverless][tensor_map]") {
  const std::vector<rule_case<tiled_desc>> cases = {
    {"zero", [](tiled_desc& d) { d.global_dims[1] = 0; }, {"global_dims[1] = 0", "1..4294967296"}},
    {"above 2^32",
     [](tiled_desc& d) { d.global_dims[0] = (1ull << 32) + 1; },
     {"global_dims[0] = 4294967297", "1..4294967296", "2^32"}},
#if CUDA_VERSION >= 12080
    {"a multiple of 128 for a 16-byte-aligned packed type",
     [](tiled_desc& d) {
       d = valid_u6_align16();
       d.global_dims[0] = 200;
     },
     {"global_dims[0] = 200", "multiple of 128", "u6x16_align16b"}},
    {"even for u4x16_align8b",
     [](tiled_desc& d) {
       d = valid_u4_align8();
       d.global_dims[0] = 63;
     },
     {"global_dims[0] = 63", "multiple of 2", "u4x16_align8b"}},
#endif
  };
  require_rules(valid_tiled(), cases);
}

TEST_CASE("tensor map: tiled: global strides", "[driverless][tensor_map]") {
  SECTION("a multiple of 16") {
    cudrv::tiled_tensor_map_desc d = valid_tiled_rank3();
    d.global_strides[1] = 1000;
    require_rule(d, {"global_strides[1] = 1000 bytes must be a multiple of 16"});
  }
  SECTION("below 2^40") {
    cudrv::tiled_tensor_map_desc d = valid_tiled();
    d.global_strides[0] = 1ull << 40;
    require_rule(d, {"global_strides[0] = 1099511627776 bytes", "less than 2^40"});
  }
  SECTION("a multiple of 32 with the 32-byte interleave") {
    cudrv::tiled_tensor_map_desc d = valid_interleaved_32();
    d.global_strides[0] = 48;
    require_rule(d, {"global_strides[0] = 48 bytes", "multiple of 32", "interleave = bytes_32"});
  }
#if CUDA_VERSION >= 12080
  SECTION("a multiple of 32 for a 16-byte-aligned packed type") {
    cudrv::tiled_tensor_map_desc d = valid_u6_align16();
    d.global_strides[0] = 208;
    require_rule(d, {"global_strides[0] = 208 bytes", "multiple of 32", "u6x16_align16b"});
  }
#endif
  SECTION("at least one innermost row (strides are in bytes)") {
    cudrv::tiled_tensor_map_desc d = valid_tiled();
    d.global_strides[0] = 1024;  // the row length in elements, not bytes
    require_rule(d, {"global_strides[0] = 1024 bytes", "at least one innermost row",
                     "global_dims[0] = 1024 elements of 4 bytes (4096 bytes)", "bytes, not elements"});
  }
  SECTION("at least one innermost row, for an outer dimension too") {
    cudrv::tiled_tensor_map_desc d = valid_tiled_rank3();
    d.global_strides[1] = 128;
    require_rule(d, {"global_strides[1] = 128 bytes", "at least one innermost row", "(256 bytes)"});
  }
}

TEST_CASE("tensor map: tiled: box dimensions", "[driverless][tensor_map]") {
  SECTION("zero") {
    cudrv::tiled_tensor_map_desc d = valid_tiled();
    d.box_dims[1] = 0;
    require_rule(d, {"box_dims[1] = 0", "1..256"});
  }
  SECTION("above 256") {
    cudrv::tiled_tensor_map_desc d = valid_tiled_rank3();
    d.box_dims[2] = 257;
    require_rule(d, {"box_dims[2] = 257", "1..256"});
  }
  SECTION("an inner dimension of a multiple of 16 bytes without interleave") {
    cudrv::tiled_tensor_map_desc d = valid_tiled();
    d.data_type = dtype::uint16;
    d.swizzle = tensor_map_swizzle::none;
    d.box_dims[0] = 6;
    require_rule(d, {"box_dims[0] = 6 elements of 2 bytes (12 bytes)", "multiple of 16 bytes", "interleave = none"});
  }
#if CUDA_VERSION >= 12080
  SECTION("128 values for a 16-byte-aligned packed type") {
    cudrv::tiled_tensor_map_desc d = valid_u4_align16();
    d.box_dims[0] = 64;
    require_rule(d, {"box_dims[0] = 64", "must be 128", "u4x16_align16b"});
  }
  SECTION("16 bytes of 4-bit values") {
    cudrv::tiled_tensor_map_desc d = valid_u4_align8();
    d.box_dims[0] = 20;
    require_rule(d, {"box_dims[0] = 20 elements of 4 bits (80 bits)", "multiple of 16 bytes"});
  }
#endif
}

TEST_CASE("tensor map: tiled: element strides", "[driverless][tensor_map]") {
  const std::vector<rule_case<tiled_desc>> cases = {
      {"zero", [](tiled_desc& d) { d.element_strides[0] = 0; }, {"element_strides[0] = 0", "1..8"}},
      {"above 8", [](tiled_desc& d) { d.element_strides[2] = 9; }, {"element_strides[2] = 9", "1..8"}},
  };
  require_rules(valid_tiled_rank3(), cases);
}

TEST_CASE("tensor map: tiled: interleave and swizzle", "[driverless][tensor_map]") {
  SECTION("the 32-byte interleave needs the 32-byte swizzle") {
    cudrv::tiled_tensor_map_desc d = valid_interleaved_32();
    d.swizzle = tensor_map_swizzle::bytes_128;
    require_rule(d, {"swizzle = bytes_128 must be bytes_32", "interleave = bytes_32"});
  }
  SECTION("the box row within the 64-byte span") {
    cudrv::tiled_tensor_map_desc d = valid_tiled();
    d.swizzle = tensor_map_swizzle::bytes_64;
    require_rule(d, {"box_dims[0] = 32 elements of 4 bytes (128 bytes)", "64-byte span", "swizzle = bytes_64"});
  }
  SECTION("the box row within the 32-byte span") {
    cudrv::tiled_tensor_map_desc d = valid_tiled();
    d.data_type = dtype::uint8;
    d.box_dims[0] = 48;
    d.swizzle = tensor_map_swizzle::bytes_32;
    require_rule(d, {"box_dims[0] = 48 elements of 1 byte (48 bytes)", "32-byte span", "at most 32 bytes"});
  }
  SECTION("the box row within the 128-byte span") {
    cudrv::tiled_tensor_map_desc d = valid_tiled();
    d.box_dims[0] = 64;
    require_rule(d, {"box_dims[0] = 64 elements of 4 bytes (256 bytes)", "128-byte span"});
  }
#if CUDA_VERSION >= 12080
  SECTION("u6x16_align16b needs no interleave") {
    cudrv::tiled_tensor_map_desc d = valid_u6_align16();
    d.rank = 3;
    d.global_dims = {128, 4, 4};
    d.global_strides = {96, 384};
    d.box_dims = {128, 4, 4};
    require_valid(d);
    d.interleave = tensor_map_interleave::bytes_16;
    require_rule(d, {"interleave = bytes_16 must be none", "u6x16_align16b"});
  }
  SECTION("the swizzles u6x16_align16b supports") {
    cudrv::tiled_tensor_map_desc d = valid_u6_align16();
    d.swizzle = tensor_map_swizzle::bytes_128_atom_32b_flip_8b;
    require_rule(d, {"swizzle = bytes_128_atom_32b_flip_8b is not supported", "u6x16_align16b"});
  }
  SECTION("the swizzles u4x16_align16b supports") {
    cudrv::tiled_tensor_map_desc d = valid_u4_align16();
    d.swizzle = tensor_map_swizzle::bytes_128_atom_64b;
    require_rule(d, {"swizzle = bytes_128_atom_64b is not supported", "u4x16_align16b"});
  }
#endif
}

TEST_CASE("tensor map: tiled: the NaN fill needs a floating-point type", "[driverless][tensor_map]") {
  cudrv::tiled_tensor_map_desc d = valid_tiled();
  d.data_type = dtype::int32;
  d.oob_fill = tensor_map_oob_fill::nan_request_zero_fma;
  SECTION("int32") { require_rule(d, {"oob_fill = nan_request_zero_fma", "floating-point", "not int32"}); }
#if CUDA_VERSION >= 12080
  SECTION("a packed type") {
    d = valid_u4_align8();
    d.oob_fill = tensor_map_oob_fill::nan_request_zero_fma;
    require_rule(d, {"oob_fill = nan_request_zero_fma", "not u4x16_align8b"});
  }
#endif
}

// --- im2col rules, one broken at a time ------------------------------------------------------------

TEST_CASE("tensor map: im2col: rank", "[driverless][tensor_map]") {
  const std::vector<rule_case<im2col_desc>> cases = {
      {"rank 2", [](im2col_desc& d) { d.rank = 2; }, {"rank = 2", "3..5", "im2col"}},
      {"rank 6", [](im2col_desc& d) { d.rank = 6; }, {"rank = 6", "3..5"}},
  };
  require_rules(valid_im2col(), cases);
}

TEST_CASE("tensor map: im2col: the rules shared with tiled maps", "[driverless][tensor_map]") {
  const std::vector<rule_case<im2col_desc>> cases = {
      {"enumerators", [](im2col_desc& d) { d.swizzle = static_cast<tensor_map_swizzle>(77); }, {"swizzle = 77"}},
      {"address",
       [](im2col_desc& d) { d.global_address = base + 4; },
       {"global_address = 0x7f0000000004", "16-byte aligned"}},
      {"global dimensions", [](im2col_desc& d) { d.global_dims[3] = 0; }, {"global_dims[3] = 0", "1..4294967296"}},
      {"global strides",
       [](im2col_desc& d) { d.global_strides[2] = 1000; },
       {"global_strides[2] = 1000 bytes must be a multiple of 16"}},
      {"element strides", [](im2col_desc& d) { d.element_strides[3] = 9; }, {"element_strides[3] = 9", "1..8"}},
      {"the 32-byte interleave needs the 32-byte swizzle",
       [](im2col_desc& d) {
         d.data_type = dtype::uint8;
         d.global_dims[0] = 32;
         d.global_strides = {32, 32 * 56, 32 * 56 * 56};
         d.channels_per_pixel = 32;
         d.interleave = tensor_map_interleave::bytes_32;
         d.swizzle = tensor_map_swizzle::bytes_64;
       },
       {"swizzle = bytes_64 must be bytes_32"}},
      {"the NaN fill",
       [](im2col_desc& d) {
         d.data_type = dtype::uint16;
         d.oob_fill = tensor_map_oob_fill::nan_request_zero_fma;
       },
       {"oob_fill = nan_request_zero_fma", "not uint16"}},
  };
  require_rules(valid_im2col(), cases);
}

TEST_CASE("tensor map: im2col: pixel box corners", "[driverless][tensor_map]") {
  SECTION("rank 3: [-32768, 32767]") {
    cudrv::im2col_tensor_map_desc d{.data_type = dtype::float32,
                                    .rank = 3,
                                    .global_address = base,
                                    .global_dims = {32, 70000, 2},
                                    .global_strides = {32 * 4, 32 * 4 * 70000},
                                    .pixel_box_lower_corner = {-32769},
                                    .channels_per_pixel = 32,
                                    .pixels_per_column = 64};
    require_rule(d, {"pixel_box_lower_corner[0] = -32769", "-32768..32767", "rank 3"});
  }
  SECTION("rank 4: [-128, 127]") {
    cudrv::im2col_tensor_map_desc d = valid_im2col();
    d.pixel_box_upper_corner[1] = 128;
    require_rule(d, {"pixel_box_upper_corner[1] = 128", "-128..127", "rank 4"});
  }
  SECTION("rank 5: [-16, 15]") {
    cudrv::im2col_tensor_map_desc d{.data_type = dtype::float16,
                                    .rank = 5,
                                    .global_address = base,
                                    .global_dims = {64, 8, 8, 8, 2},
                                    .global_strides = {128, 128 * 8, 128 * 64, 128 * 512},
                                    .pixel_box_lower_corner = {0, 0, -17},
                                    .channels_per_pixel = 64,
                                    .pixels_per_column = 32};
    require_rule(d, {"pixel_box_lower_corner[2] = -17", "-16..15", "rank 5"});
  }
  SECTION("a box with no area") {
    cudrv::im2col_tensor_map_desc d = valid_im2col();
    d.global_dims[1] = 8;
    d.global_strides = {128, 128 * 8, 128 * 8 * 56};
    d.pixel_box_lower_corner = {5, -1};
    d.pixel_box_upper_corner = {-4, -1};
    require_rule(d, {"non-zero area", "along W", "global_dims[1] = 8", "pixel_box_upper_corner[0] = -4",
                     "pixel_box_lower_corner[0] = 5", "= -1 pixels"});
  }
}

TEST_CASE("tensor map: im2col: channels and pixels", "[driverless][tensor_map]") {
  const std::vector<rule_case<im2col_desc>> cases = {
    {"zero channels per pixel", [](im2col_desc& d) { d.channels_per_pixel = 0; }, {"channels_per_pixel = 0", "1..256"}},
    {"more than 256 channels per pixel",
     [](im2col_desc& d) {
       d.swizzle = tensor_map_swizzle::none;
       d.channels_per_pixel = 257;
     },
     {"channels_per_pixel = 257", "1..256"}},
    {"zero pixels per column", [](im2col_desc& d) { d.pixels_per_column = 0; }, {"pixels_per_column = 0", "1..1024"}},
    {"more than 1024 pixels per column",
     [](im2col_desc& d) { d.pixels_per_column = 1025; },
     {"pixels_per_column = 1025", "1..1024"}},
    {"the pixel row within the swizzle span",
     [](im2col_desc& d) { d.channels_per_pixel = 128; },
     {"channels_per_pixel = 128 elements of 2 bytes (256 bytes)", "128-byte span"}},
#if CUDA_VERSION >= 12080
    {"128 channels per pixel for a 16-byte-aligned packed type",
     [](im2col_desc& d) {
       d = cudrv::im2col_tensor_map_desc{.data_type = dtype::u6x16_align16b,
                                         .rank = 3,
                                         .global_address = base,
                                         .global_dims = {128, 16, 2},
                                         .global_strides = {96, 96 * 16},
                                         .channels_per_pixel = 64,
                                         .pixels_per_column = 16};
     },
     {"channels_per_pixel = 64", "must be 128", "u6x16_align16b"}},
#endif
  };
  require_rules(valid_im2col(), cases);
}

// --- the typed overloads and the driver path ----------------------------------------------------

TEST_CASE("tensor map: the typed overloads compute dense strides and check the span", "[driverless][tensor_map]") {
  std::uint64_t dims[] = {64, 32, 8};
  std::uint64_t strides[4] = {};
  CHECK(cudrv::detail::dense_tensor_strides("test", 3, dims, 4, 64 * 32 * 8, strides) == 64 * 32 * 8);
  CHECK(strides[0] == 64 * 4);
  CHECK(strides[1] == 64 * 32 * 4);

  const cudrv::device_span<float> small(base, 1000);
  auto e = catch_as<cudrv::invalid_argument_error>([&] {
    (void)cudrv::make_tiled_tensor_map(small, {1024, 512}, {32, 16});
  });
  REQUIRE(e.has_value());
  INFO("what(): " << e->what());
  CHECK(e->api() == "cudrv::make_tiled_tensor_map");
  CHECK(contains(e->description(), "global_dims {1024, 512} describe 524288 elements"));
  CHECK(contains(e->description(), "1000 elements"));

  const cudrv::device_span<const float> big(base, 1 << 20);
  auto r = catch_as<cudrv::invalid_argument_error>([&] {
    (void)cudrv::make_tiled_tensor_map(big, {1024, 512}, {32, 300});
  });
  REQUIRE(r.has_value());
  CHECK(contains(r->description(), "box_dims[1] = 300"));

  auto i = catch_as<cudrv::invalid_argument_error>([&] {
    (void)cudrv::make_im2col_tensor_map(big, {32, 16, 16, 4}, {-1, -1}, {-1, -1}, 32, 2000);
  });
  REQUIRE(i.has_value());
  CHECK(i->api() == "cudrv::make_im2col_tensor_map");
  CHECK(contains(i->description(), "pixels_per_column = 2000"));
}

TEST_CASE("tensor map: valid descriptors reach the driver, which is missing", "[driverless][tensor_map]") {
  CUDRV_REQUIRE_DRIVERLESS();
  CHECK_THROWS_AS(cudrv::make_tiled_tensor_map(valid_tiled()), cudrv::driver_unavailable_error);
  CHECK_THROWS_AS(cudrv::make_im2col_tensor_map(valid_im2col()), cudrv::driver_unavailable_error);
  const cudrv::device_span<std::uint16_t> span(base, 1 << 20);
  CHECK_THROWS_AS(cudrv::make_tiled_tensor_map(span, {1024, 512}, {64, 16}), cudrv::driver_unavailable_error);
  cudrv::tensor_map map;
  CHECK_THROWS_AS(map.replace_address(base + 256), cudrv::driver_unavailable_error);
}
