// GPU tier: TMA tensor maps on a device that has them (compute capability 9.0 and newer).
//
// make_tiled_tensor_map and make_im2col_tensor_map must encode the same 128 bytes as the raw driver
// call with the same arguments, for real device buffers, several ranks, types, swizzles and
// interleaves, with or without a current context; the typed overloads must pass the dense strides
// the driver expects; replace_address must change a map as cuTensorMapReplaceAddress does. Test cases
// tagged [driver_error] make the driver refuse on purpose: descriptors cudrv accepts and the driver
// refuses must give a cudrv::error with the driver's code, and a last case reports, rule by rule,
// whether the installed driver refuses what cudrv::validate refuses (run it with -s to read the
// report; compute-sanitizer reports those API errors, exclude them with "~[driver_error]").
#include <catch2/catch.hpp>

#include <cudaTypedefs.h>
#include <cudrv/tensor_map.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;
using dtype = cudrv::tensor_map_data_type;
using cudrv::tensor_map_interleave;
using cudrv::tensor_map_l2_promotion;
using cudrv::tensor_map_oob_fill;
using cudrv::tensor_map_swizzle;

/// Ends the test case as skipped when device 0 has no TMA (before compute capability 9.0).
#define REQUIRE_TMA_DEVICE(dev)                                                                                  \
  do {                                                                                                           \
    if ((dev).attribute(CU_DEVICE_ATTRIBUTE_TENSOR_MAP_ACCESS_SUPPORTED) == 0) {                                 \
      const auto cc_ = (dev).compute_capability();                                                               \
      std::cout << "SKIPPED: no CUDA device with TMA tensor maps (device 0 has compute capability " << cc_.major \
                << "." << cc_.minor << ")" << std::endl;                                                         \
      return;                                                                                                    \
    }                                                                                                            \
  } while (0)

namespace {

void* as_pointer(CUdeviceptr address) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(address)); }

// What the raw driver call returned for a description.
struct raw_map {
  CUresult status = CUDA_SUCCESS;
  CUtensorMap map{};
};

// values copied into eight entries: a rank above 5 cannot make the driver read past the arrays.
template <class T, class Array>
std::array<T, 8> padded(const Array& values) {
  std::array<T, 8> out{};
  std::copy(values.begin(), values.end(), out.begin());
  return out;
}

// Calls encode, a raw encode entry point, with d's fields: those both forms take, and between the
// strides and the element strides, middle (the fields of d's form).
template <class Encode, class Desc, class... Middle>
raw_map encode_raw_with(Encode encode, const Desc& d, Middle... middle) {
  const auto dims = padded<cuuint64_t>(d.global_dims);
  const auto strides = padded<cuuint64_t>(d.global_strides);
  const auto element_strides = padded<cuuint32_t>(d.element_strides);
  raw_map out;
  out.status =
      encode(&out.map, static_cast<CUtensorMapDataType>(d.data_type), d.rank, as_pointer(d.global_address), dims.data(),
             strides.data(), middle..., element_strides.data(), static_cast<CUtensorMapInterleave>(d.interleave),
             static_cast<CUtensorMapSwizzle>(d.swizzle), static_cast<CUtensorMapL2promotion>(d.l2_promotion),
             static_cast<CUtensorMapFloatOOBfill>(d.oob_fill));
  return out;
}

// The raw entry points, through cudrv's loader but not through cudrv's checks.
raw_map encode_raw(const cudrv::tiled_tensor_map_desc& d) {
  static const auto encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(
      cudrv::driver::get_entry_point("cuTensorMapEncodeTiled", 12000));
  const auto box = padded<cuuint32_t>(d.box_dims);
  return encode_raw_with(encode, d, box.data());
}

raw_map encode_raw(const cudrv::im2col_tensor_map_desc& d) {
  static const auto encode = reinterpret_cast<PFN_cuTensorMapEncodeIm2col_v12000>(
      cudrv::driver::get_entry_point("cuTensorMapEncodeIm2col", 12000));
  const auto lower = padded<int>(d.pixel_box_lower_corner);
  const auto upper = padded<int>(d.pixel_box_upper_corner);
  return encode_raw_with(encode, d, lower.data(), upper.data(), d.channels_per_pixel, d.pixels_per_column);
}

CUresult replace_raw(CUtensorMap& map, CUdeviceptr address) {
  static const auto replace = reinterpret_cast<PFN_cuTensorMapReplaceAddress_v12000>(
      cudrv::driver::get_entry_point("cuTensorMapReplaceAddress", 12000));
  return replace(&map, as_pointer(address));
}

cudrv::tensor_map make(const cudrv::tiled_tensor_map_desc& d) { return cudrv::make_tiled_tensor_map(d); }
cudrv::tensor_map make(const cudrv::im2col_tensor_map_desc& d) { return cudrv::make_im2col_tensor_map(d); }
const char* encode_api(const cudrv::tiled_tensor_map_desc&) { return "cuTensorMapEncodeTiled"; }
const char* encode_api(const cudrv::im2col_tensor_map_desc&) { return "cuTensorMapEncodeIm2col"; }
const char* kind(const cudrv::tiled_tensor_map_desc&) { return "tiled tensor map"; }
const char* kind(const cudrv::im2col_tensor_map_desc&) { return "im2col tensor map"; }

bool same_bytes(const cudrv::tensor_map& map, const CUtensorMap& raw) {
  return std::memcmp(&map.native(), &raw, sizeof(CUtensorMap)) == 0;
}

std::string code_name(CUresult status) { return cudrv::error_name(status); }

// cudrv agrees with the raw call: the same bytes when the driver encodes the description, the
// driver's code in a cudrv::error (not a validation error) when it refuses it. Returns the raw status.
template <class Desc>
CUresult check_same_as_driver(const Desc& desc) {
  const raw_map raw = encode_raw(desc);
  INFO("the driver returned " << code_name(raw.status));
  if (raw.status == CUDA_SUCCESS) {
    const cudrv::tensor_map map = make(desc);
    CHECK(same_bytes(map, raw.map));
  } else {
    auto e = catch_as<cudrv::error>([&] { (void)make(desc); });
    REQUIRE(e.has_value());
    INFO("what(): " << e->what());
    CHECK(e->source() == cudrv::error_source::driver);
    CHECK(e->result() == raw.status);
    CHECK(e->api() == encode_api(desc));
    CHECK(contains(e->context(), kind(desc)));
    CHECK(contains(e->context(), "rank " + std::to_string(desc.rank)));
  }
  return raw.status;
}

/// Makes no context current for its lifetime, then restores the one that was.
class no_current_context {
 public:
  no_current_context() : previous_(cudrv::test::raw_current_context()) {
    cudrv::test::raw_set_current_context(nullptr);
  }
  no_current_context(const no_current_context&) = delete;
  no_current_context& operator=(const no_current_context&) = delete;
  ~no_current_context() {
    try {
      cudrv::test::raw_set_current_context(previous_);
    } catch (...) {
    }
  }

 private:
  CUcontext previous_;
};

// A named description of either form.
template <class Desc>
struct named_case {
  const char* name;
  Desc desc;
};
using tiled_case = named_case<cudrv::tiled_tensor_map_desc>;
using im2col_case = named_case<cudrv::im2col_tensor_map_desc>;

// A row-major 512 x 1024 float matrix at a, 32 x 16 boxes with the 128-byte swizzle.
cudrv::tiled_tensor_map_desc float_matrix(CUdeviceptr a) {
  return {.data_type = dtype::float32,
          .rank = 2,
          .global_address = a,
          .global_dims = {1024, 512},
          .global_strides = {1024 * 4},
          .box_dims = {32, 16},
          .swizzle = tensor_map_swizzle::bytes_128};
}

// NC/16HWC16 uint16 at a: 16 channels fill the 32 bytes of the 32-byte interleave and swizzle.
cudrv::tiled_tensor_map_desc interleaved_32(CUdeviceptr a) {
  return {.data_type = dtype::uint16,
          .rank = 3,
          .global_address = a,
          .global_dims = {16, 32, 32},
          .global_strides = {32, 32 * 32},
          .box_dims = {16, 8, 8},
          .interleave = tensor_map_interleave::bytes_32,
          .swizzle = tensor_map_swizzle::bytes_32};
}

// NHWC fp16 at a, N = 4, H = W = 28, C = 64; a 3 x 3 filter with padding 1.
cudrv::im2col_tensor_map_desc nhwc_fp16(CUdeviceptr a) {
  return {.data_type = dtype::float16,
          .rank = 4,
          .global_address = a,
          .global_dims = {64, 28, 28, 4},
          .global_strides = {128, 128 * 28, 128 * 28 * 28},
          .pixel_box_lower_corner = {-1, -1},
          .pixel_box_upper_corner = {-1, -1},
          .channels_per_pixel = 64,
          .pixels_per_column = 128,
          .swizzle = tensor_map_swizzle::bytes_128};
}

// A description breaking one of cudrv::validate's rules; documented: whether the driver reference
// states the rule (see the last test case).
template <class Desc>
struct rule_probe {
  const char* rule;
  bool documented;
  Desc desc;
};

// d after change(d).
template <class Desc, class Change>
Desc with(Desc d, Change&& change) {
  change(d);
  return d;
}

// Valid tiled descriptions over the 16 MiB at a (256-byte aligned).
std::vector<tiled_case> valid_tiled_cases(CUdeviceptr a) {
  return {
      {"a float matrix, 128-byte swizzle", float_matrix(a)},
      {"a uint16 cube, 64-byte swizzle, element strides, 128-byte L2 promotion",
       {.data_type = dtype::uint16,
        .rank = 3,
        .global_address = a,
        .global_dims = {256, 64, 16},
        .global_strides = {512, 512 * 64},
        .box_dims = {32, 16, 4},
        .element_strides = {1, 2, 1, 1, 1},
        .swizzle = tensor_map_swizzle::bytes_64,
        .l2_promotion = tensor_map_l2_promotion::bytes_128}},
      {"a byte vector, 256-element box",
       {.data_type = dtype::uint8, .rank = 1, .global_address = a, .global_dims = {1 << 20}, .box_dims = {256}}},
      {"float64 of rank 5 at an offset, NaN fill, 256-byte L2 promotion",
       {.data_type = dtype::float64,
        .rank = 5,
        .global_address = a + 256,
        .global_dims = {16, 8, 8, 4, 2},
        .global_strides = {128, 1024, 8192, 32768},
        .box_dims = {16, 4, 4, 2, 1},
        .l2_promotion = tensor_map_l2_promotion::bytes_256,
        .oob_fill = tensor_map_oob_fill::nan_request_zero_fma}},
      {"bfloat16 with permuted outer dimensions",
       {.data_type = dtype::bfloat16,
        .rank = 3,
        .global_address = a,
        .global_dims = {64, 8, 32},
        .global_strides = {64 * 2 * 32, 64 * 2},
        .box_dims = {64, 4, 8},
        .swizzle = tensor_map_swizzle::bytes_128}},
      {"tfloat32, a box row of 32 bytes under the 32-byte swizzle",
       {.data_type = dtype::tfloat32,
        .rank = 2,
        .global_address = a,
        .global_dims = {100, 300},
        .global_strides = {512},
        .box_dims = {8, 64},
        .swizzle = tensor_map_swizzle::bytes_32}},
      {"NC/8HWC8 fp16, 16-byte interleave",
       {.data_type = dtype::float16,
        .rank = 4,
        .global_address = a,
        .global_dims = {8, 16, 16, 4},
        .global_strides = {16, 16 * 16, 16 * 16 * 16},
        .box_dims = {8, 8, 8, 1},
        .interleave = tensor_map_interleave::bytes_16}},
      {"NC/16HWC16 uint16, 32-byte interleave and swizzle", interleaved_32(a)},
  };
}

std::vector<im2col_case> valid_im2col_cases(CUdeviceptr a) {
  return {
      {"NWC float, 3-tap filter",
       {.data_type = dtype::float32,
        .rank = 3,
        .global_address = a,
        .global_dims = {32, 256, 4},
        .global_strides = {128, 128 * 256},
        .pixel_box_lower_corner = {-1},
        .pixel_box_upper_corner = {-1},
        .channels_per_pixel = 32,
        .pixels_per_column = 64,
        .swizzle = tensor_map_swizzle::bytes_128}},
      {"NHWC fp16, 3 x 3 filter", nhwc_fp16(a)},
      {"NDHWC bfloat16, 3 x 3 x 3 filter, traversal strides 2, NaN fill",
       {.data_type = dtype::bfloat16,
        .rank = 5,
        .global_address = a,
        .global_dims = {32, 8, 8, 8, 2},
        .global_strides = {64, 64 * 8, 64 * 64, 64 * 512},
        .pixel_box_lower_corner = {-1, -1, -1},
        .pixel_box_upper_corner = {-1, -1, -1},
        .channels_per_pixel = 32,
        .pixels_per_column = 32,
        .element_strides = {1, 2, 2, 2, 1},
        .swizzle = tensor_map_swizzle::bytes_64,
        .oob_fill = tensor_map_oob_fill::nan_request_zero_fma}},
  };
}

// Ends the test case as skipped without a TMA device; otherwise runs body(dev) with device 0's
// primary context current, then checks that no destructor reported an error.
template <class Body>
void on_tma_device(Body&& body) {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  REQUIRE_TMA_DEVICE(dev);
  cudrv::test::destruction_error_counter errors;
  {
    cudrv::context_guard current(dev.primary_context());
    body(dev);
  }
  CHECK(errors.count() == 0);
}

// Every case encodes to the driver's bytes; without a current context, cudrv runs the call in the
// buffer's context and leaves none current.
template <class Desc>
void check_encodes_like_driver(const std::vector<named_case<Desc>>& cases) {
  for (const named_case<Desc>& c : cases) {
    INFO(c.name);
    REQUIRE_NOTHROW(cudrv::validate(c.desc));
    CHECK(check_same_as_driver(c.desc) == CUDA_SUCCESS);
  }
  const named_case<Desc>& first = cases.front();
  const raw_map raw = encode_raw(first.desc);
  REQUIRE(raw.status == CUDA_SUCCESS);
  {
    no_current_context none;
    CHECK(same_bytes(make(first.desc), raw.map));
    CHECK(cudrv::test::raw_current_context() == nullptr);
  }
}

}  // namespace

TEST_CASE("tensor map: make_tiled_tensor_map encodes the bytes the driver encodes", "[gpu][tensor_map]") {
  on_tma_device([](const cudrv::device& dev) {
    cudrv::device_buffer<std::uint8_t> buf(dev, 16u << 20);
    check_encodes_like_driver(valid_tiled_cases(buf.data()));
  });
}

TEST_CASE("tensor map: make_im2col_tensor_map encodes the bytes the driver encodes", "[gpu][tensor_map]") {
  on_tma_device([](const cudrv::device& dev) {
    cudrv::device_buffer<std::uint8_t> buf(dev, 16u << 20);
    check_encodes_like_driver(valid_im2col_cases(buf.data()));
  });
}

TEST_CASE("tensor map: the typed overloads encode dense tensors with the strides the driver expects",
          "[gpu][tensor_map]") {
  on_tma_device([](const cudrv::device& dev) {
    cudrv::device_buffer<float> m(dev, 512 * 1024);
    const cudrv::tensor_map a =
        cudrv::make_tiled_tensor_map(m.view(), {1024, 512}, {32, 16}, {.swizzle = tensor_map_swizzle::bytes_128});
    const raw_map ra = encode_raw(float_matrix(m.data()));
    REQUIRE(ra.status == CUDA_SUCCESS);
    CHECK(same_bytes(a, ra.map));

    cudrv::device_buffer<std::uint16_t> t(dev, 256 * 64 * 16);
    const cudrv::device_span<const std::uint16_t> view = t.view();
    const cudrv::tensor_map b = cudrv::make_tiled_tensor_map(view, {256, 64, 16}, {64, 8, 2},
                                                             {.l2_promotion = tensor_map_l2_promotion::bytes_64,
                                                              .oob_fill = tensor_map_oob_fill::zero});
    const raw_map rb = encode_raw(cudrv::tiled_tensor_map_desc{.data_type = dtype::uint16,
                                                               .rank = 3,
                                                               .global_address = t.data(),
                                                               .global_dims = {256, 64, 16},
                                                               .global_strides = {512, 512 * 64},
                                                               .box_dims = {64, 8, 2},
                                                               .l2_promotion = tensor_map_l2_promotion::bytes_64});
    REQUIRE(rb.status == CUDA_SUCCESS);
    CHECK(same_bytes(b, rb.map));

    cudrv::device_buffer<float> x(dev, 32 * 16 * 16 * 4);
    const cudrv::tensor_map c = cudrv::make_im2col_tensor_map(x.view(), {32, 16, 16, 4}, {-1, -1}, {-1, -1}, 32, 64,
                                                              {.swizzle = tensor_map_swizzle::bytes_128});
    const raw_map rc = encode_raw(cudrv::im2col_tensor_map_desc{.data_type = dtype::float32,
                                                                .rank = 4,
                                                                .global_address = x.data(),
                                                                .global_dims = {32, 16, 16, 4},
                                                                .global_strides = {128, 128 * 16, 128 * 256},
                                                                .pixel_box_lower_corner = {-1, -1},
                                                                .pixel_box_upper_corner = {-1, -1},
                                                                .channels_per_pixel = 32,
                                                                .pixels_per_column = 64,
                                                                .swizzle = tensor_map_swizzle::bytes_128});
    REQUIRE(rc.status == CUDA_SUCCESS);
    CHECK(same_bytes(c, rc.map));
  });
}

TEST_CASE("tensor map: replace_address changes a map as cuTensorMapReplaceAddress does", "[gpu][tensor_map]") {
  on_tma_device([](const cudrv::device& dev) {
    cudrv::device_buffer<float> a(dev, 512 * 1024);
    cudrv::device_buffer<float> b(dev, 512 * 1024);
    const cudrv::tensor_map original = cudrv::make_tiled_tensor_map(a.view(), {1024, 512}, {32, 16});

    cudrv::tensor_map moved = original;
    moved.replace_address(b.data());
    CUtensorMap raw = original.native();
    REQUIRE(replace_raw(raw, b.data()) == CUDA_SUCCESS);
    CHECK(same_bytes(moved, raw));
    CHECK_FALSE(moved == original);

    cudrv::tensor_map typed = original;
    typed.replace_address(b.get());  // the const void* overload
    CHECK(typed == moved);

    // Back to a, with no context current.
    CUtensorMap back = moved.native();
    REQUIRE(replace_raw(back, a.data()) == CUDA_SUCCESS);
    {
      no_current_context none;
      moved.replace_address(a.data());
      CHECK(cudrv::test::raw_current_context() == nullptr);
    }
    CHECK(same_bytes(moved, back));

    // A misaligned address is refused before the driver, and the map is left as it was.
    const cudrv::tensor_map before = moved;
    auto e = catch_as<cudrv::invalid_argument_error>([&] { moved.replace_address(b.data() + 8); });
    REQUIRE(e.has_value());
    CHECK(e->api() == "cudrv::tensor_map::replace_address");
    CHECK(contains(e->description(), "16-byte aligned"));
    CHECK(moved == before);
  });
}

TEST_CASE("tensor map: descriptions cudrv accepts and the driver refuses throw the driver's error",
          "[gpu][tensor_map][driver_error]") {
  on_tma_device([](const cudrv::device& dev) {
    cudrv::device_buffer<std::uint8_t> buf(dev, 16u << 20);
    const CUdeviceptr a = buf.data();

    // Candidates the documentation allows but a driver may still refuse, on this device or at all.
    std::vector<tiled_case> tiled = {
      {"a 16-byte interleave with 64-byte box rows",
       {.data_type = dtype::float16,
        .rank = 4,
        .global_address = a,
        .global_dims = {32, 16, 16, 4},
        .global_strides = {64, 64 * 16, 64 * 256},
        .box_dims = {32, 8, 8, 1},
        .interleave = tensor_map_interleave::bytes_16}},
      {"a box larger than the tensor",
       {.data_type = dtype::float32,
        .rank = 2,
        .global_address = a,
        .global_dims = {8, 4},
        .global_strides = {32},
        .box_dims = {256, 256}}},
#if CUDA_VERSION >= 12080
      {"the 128-byte swizzle with 32-byte atoms (Blackwell)",
       with(float_matrix(a), [](auto& d) { d.swizzle = tensor_map_swizzle::bytes_128_atom_32b; })},
      {"packed 4-bit values spread to 16 bytes (Blackwell)",
       {.data_type = dtype::u4x16_align16b,
        .rank = 2,
        .global_address = a,
        .global_dims = {256, 64},
        .global_strides = {128},
        .box_dims = {128, 8},
        .swizzle = tensor_map_swizzle::bytes_128}},
#endif
    };
    std::vector<im2col_case> im2col = {
        {"im2col pixels of 4 bytes",
         {.data_type = dtype::float16,
          .rank = 4,
          .global_address = a,
          .global_dims = {2, 28, 28, 4},
          .global_strides = {16, 16 * 28, 16 * 28 * 28},
          .channels_per_pixel = 2,
          .pixels_per_column = 128}},
    };

    int refused = 0;
    auto try_candidate = [&](const auto& c) {
      INFO(c.name);
      REQUIRE_NOTHROW(cudrv::validate(c.desc));
      const CUresult status = check_same_as_driver(c.desc);
      std::cout << "tensor map candidate \"" << c.name << "\": " << code_name(status) << std::endl;
      refused += status != CUDA_SUCCESS;
    };
    for (const tiled_case& c : tiled) {
      try_candidate(c);
    }
    for (const im2col_case& c : im2col) {
      try_candidate(c);
    }

    // replace_address on a 32-byte-interleaved map: the 32-byte alignment is the driver's to check.
    cudrv::tensor_map map = cudrv::make_tiled_tensor_map(interleaved_32(a));
    const cudrv::tensor_map before = map;
    CUtensorMap raw = map.native();
    const CUresult status = replace_raw(raw, a + 16);
    std::cout << "tensor map candidate \"replace_address 16 bytes past 32 on a 32-byte-interleaved map\": "
              << code_name(status) << std::endl;
    if (status == CUDA_SUCCESS) {
      map.replace_address(a + 16);
      CHECK(same_bytes(map, raw));
    } else {
      ++refused;
      auto e = catch_as<cudrv::error>([&] { map.replace_address(a + 16); });
      REQUIRE(e.has_value());
      CHECK(e->source() == cudrv::error_source::driver);
      CHECK(e->result() == status);
      CHECK(e->api() == "cuTensorMapReplaceAddress");
      CHECK(map == before);  // unchanged
    }
    if (refused == 0) {
      WARN("the driver accepted every candidate: the mapping of its refusals was not exercised");
    }
  });
}

TEST_CASE("tensor map: the driver refuses the descriptions cudrv::validate refuses",
          "[gpu][tensor_map][driver_error]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  REQUIRE_TMA_DEVICE(dev);
  cudrv::context_guard current(dev.primary_context());
  cudrv::device_buffer<std::uint8_t> buf(dev, 16u << 20);
  const CUdeviceptr a = buf.data();

  // `documented`: a rule the driver reference has stated since CUDA 12.0 in so many words; the driver
  // must refuse it. The others (cudrv's reading of a layout formula or of a general statement) are
  // reported when the driver accepts them, not failed: cudrv may be stricter than the driver there.
  using probe = rule_probe<cudrv::tiled_tensor_map_desc>;
  const cudrv::tiled_tensor_map_desc matrix = float_matrix(a);
  const cudrv::tiled_tensor_map_desc cube{.data_type = dtype::float32,
                                          .rank = 3,
                                          .global_address = a,
                                          .global_dims = {64, 32, 8},
                                          .global_strides = {256, 256 * 32},
                                          .box_dims = {32, 8, 2}};
  const cudrv::tiled_tensor_map_desc interleaved = interleaved_32(a);
  const probe tiled[] = {
      {"rank 0", true, with(matrix, [](auto& d) { d.rank = 0; })},
      {"rank 6", true, with(cube, [](auto& d) { d.rank = 6; })},
      {"interleave with rank 2", false,
       with(matrix,
            [](auto& d) {
              d.interleave = tensor_map_interleave::bytes_16;
              d.swizzle = tensor_map_swizzle::none;
            })},
      {"address 8 bytes past 16", true, with(matrix, [&](auto& d) { d.global_address = a + 8; })},
      {"address 16 bytes past 32 with the 32-byte interleave", true,
       with(interleaved, [&](auto& d) { d.global_address = a + 16; })},
      {"global_dims[1] = 0", true, with(matrix, [](auto& d) { d.global_dims[1] = 0; })},
      {"global_dims[1] = 2^32 + 1", true, with(matrix, [](auto& d) { d.global_dims[1] = (1ull << 32) + 1; })},
      {"global_strides[1] = 1000", true, with(cube, [](auto& d) { d.global_strides[1] = 1000; })},
      {"global_strides[0] = 2^40", true, with(matrix, [](auto& d) { d.global_strides[0] = 1ull << 40; })},
      {"global_strides[0] = 48 with the 32-byte interleave", true,
       with(interleaved, [](auto& d) { d.global_strides[0] = 48; })},
      {"global_strides[0] shorter than a row", false, with(matrix, [](auto& d) { d.global_strides[0] = 1024; })},
      {"box_dims[1] = 0", true, with(matrix, [](auto& d) { d.box_dims[1] = 0; })},
      {"box_dims[2] = 257", true, with(cube, [](auto& d) { d.box_dims[2] = 257; })},
      {"box rows of 12 bytes", true,
       with(matrix,
            [](auto& d) {
              d.data_type = dtype::uint16;
              d.swizzle = tensor_map_swizzle::none;
              d.box_dims[0] = 6;
            })},
      {"element_strides[0] = 0", true, with(cube, [](auto& d) { d.element_strides[0] = 0; })},
      {"element_strides[2] = 9", true, with(cube, [](auto& d) { d.element_strides[2] = 9; })},
      {"the 32-byte interleave with the 128-byte swizzle", false,
       with(interleaved, [](auto& d) { d.swizzle = tensor_map_swizzle::bytes_128; })},
      {"a 128-byte box row under the 64-byte swizzle", true,
       with(matrix, [](auto& d) { d.swizzle = tensor_map_swizzle::bytes_64; })},
      {"a 256-byte box row under the 128-byte swizzle", true, with(matrix, [](auto& d) { d.box_dims[0] = 64; })},
      {"the NaN fill for int32", false,
       with(matrix,
            [](auto& d) {
              d.data_type = dtype::int32;
              d.oob_fill = tensor_map_oob_fill::nan_request_zero_fma;
            })},
  };

  using im2col_probe = rule_probe<cudrv::im2col_tensor_map_desc>;
  const cudrv::im2col_tensor_map_desc nhwc = nhwc_fp16(a);
  const im2col_probe im2col[] = {
      {"im2col rank 2", true, with(nhwc, [](auto& d) { d.rank = 2; })},
      {"im2col rank 6", true, with(nhwc, [](auto& d) { d.rank = 6; })},
      {"pixel_box_lower_corner[0] = -129 at rank 4", true,
       with(nhwc, [](auto& d) { d.pixel_box_lower_corner[0] = -129; })},
      {"pixel_box_upper_corner[1] = 128 at rank 4", true,
       with(nhwc, [](auto& d) { d.pixel_box_upper_corner[1] = 128; })},
      {"a pixel box with no area", false,
       with(nhwc,
            [](auto& d) {
              d.pixel_box_lower_corner[0] = 20;
              d.pixel_box_upper_corner[0] = -20;
            })},
      {"channels_per_pixel = 0", false, with(nhwc, [](auto& d) { d.channels_per_pixel = 0; })},
      {"channels_per_pixel = 257", true,
       with(nhwc,
            [](auto& d) {
              d.channels_per_pixel = 257;
              d.swizzle = tensor_map_swizzle::none;
            })},
      {"pixels_per_column = 0", false, with(nhwc, [](auto& d) { d.pixels_per_column = 0; })},
      {"pixels_per_column = 1025", true, with(nhwc, [](auto& d) { d.pixels_per_column = 1025; })},
      {"a 256-byte pixel row under the 128-byte swizzle", true,
       with(nhwc, [](auto& d) { d.channels_per_pixel = 128; })},
      {"the NaN fill for uint16", false,
       with(nhwc,
            [](auto& d) {
              d.data_type = dtype::uint16;
              d.oob_fill = tensor_map_oob_fill::nan_request_zero_fma;
            })},
  };

  std::cout << "tensor map rules: what the driver says to descriptions cudrv::validate refuses" << std::endl;
  auto report = [](const char* rule, bool documented, const auto& desc) {
    INFO(rule);
    REQUIRE_THROWS_AS(cudrv::validate(desc), cudrv::invalid_argument_error);
    const CUresult status = encode_raw(desc).status;
    std::cout << "  " << std::left << std::setw(56) << rule << code_name(status) << std::endl;
    if (documented) {
      CHECK(status != CUDA_SUCCESS);
    } else if (status == CUDA_SUCCESS) {
      WARN("the driver accepts a description cudrv refuses (" << rule << ")");
    }
  };
  for (const probe& p : tiled) {
    report(p.rule, p.documented, p.desc);
  }
  for (const im2col_probe& p : im2col) {
    report(p.rule, p.documented, p.desc);
  }
}
