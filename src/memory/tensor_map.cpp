// TMA tensor maps: the driver-free validation of cuTensorMapEncodeTiled / cuTensorMapEncodeIm2col
// descriptions, the encode calls and cuTensorMapReplaceAddress.
//
// The rules are those the CUDA driver API reference lists for the two encode calls (the comments of
// cuda.h for CUDA 12.0 to 13.0). Each check throws invalid_argument_error with a message that names
// the field, the dimension index, the value given and what is allowed. Rules the reference states
// only for newer toolkits (the packed types and the 128-byte atom swizzles of CUDA 12.8) are compiled
// only where the headers name those enumerators.
#include "cudrv/tensor_map.hpp"

#include <cuda.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "cudrv/context.hpp"
#include "cudrv/device.hpp"
#include "cudrv/error.hpp"
#include "cudrv/pointer_attributes.hpp"
#include "driver/driver_api.hpp"
#include "memory/memory_support.hpp"

namespace cudrv {

// What the header promises about these types, checked here rather than in every translation unit
// that includes it (docs/design.md, "Header cost").
static_assert(std::is_trivially_copyable_v<tensor_map> && std::is_standard_layout_v<tensor_map>,
              "cudrv::tensor_map is passed to kernels by value");

namespace {

constexpr std::uint64_t max_global_dim = std::uint64_t{1} << 32;  // globalDim[i] <= 2^32
constexpr std::uint64_t stride_limit = std::uint64_t{1} << 40;    // globalStrides[i] < 2^40
constexpr std::uint32_t max_box_dim = 256;                        // boxDim[i] <= 256
constexpr std::uint32_t max_element_stride = 8;                   // elementStrides[i] <= 8
constexpr std::uint32_t max_channels_per_pixel = 256;
constexpr std::uint32_t max_pixels_per_column = 1024;

#if CUDA_VERSION >= 12080
constexpr int last_data_type = CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B;
constexpr int last_swizzle = CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B;
#else
constexpr int last_data_type = CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ;
constexpr int last_swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
#endif

[[noreturn]] void fail(const char* api, std::string message) { throw invalid_argument_error(api, std::move(message)); }

template <class Integer>
std::string num(Integer value) {
  return std::to_string(value);
}

std::string index(const char* field, std::size_t i) { return std::string(field) + "[" + std::to_string(i) + "]"; }

// --- names ------------------------------------------------------------------------------------

// The name of an enumerator from its table, or "(value N)" for a value the table lacks.
template <class Enum>
struct enum_name {
  Enum value;
  const char* name;
};

template <class Enum, std::size_t N>
std::string name_in(const enum_name<Enum> (&table)[N], Enum value) {
  for (const auto& entry : table) {
    if (entry.value == value) {
      return entry.name;
    }
  }
  return "(value " + std::to_string(static_cast<int>(value)) + ")";
}

constexpr enum_name<tensor_map_data_type> type_names[] = {
    {tensor_map_data_type::uint8, "uint8"},
    {tensor_map_data_type::uint16, "uint16"},
    {tensor_map_data_type::uint32, "uint32"},
    {tensor_map_data_type::int32, "int32"},
    {tensor_map_data_type::uint64, "uint64"},
    {tensor_map_data_type::int64, "int64"},
    {tensor_map_data_type::float16, "float16"},
    {tensor_map_data_type::float32, "float32"},
    {tensor_map_data_type::float64, "float64"},
    {tensor_map_data_type::bfloat16, "bfloat16"},
    {tensor_map_data_type::float32_ftz, "float32_ftz"},
    {tensor_map_data_type::tfloat32, "tfloat32"},
    {tensor_map_data_type::tfloat32_ftz, "tfloat32_ftz"},
#if CUDA_VERSION >= 12080
    {tensor_map_data_type::u4x16_align8b, "u4x16_align8b"},
    {tensor_map_data_type::u4x16_align16b, "u4x16_align16b"},
    {tensor_map_data_type::u6x16_align16b, "u6x16_align16b"},
#endif
};

constexpr enum_name<tensor_map_interleave> interleave_names[] = {
    {tensor_map_interleave::none, "none"},
    {tensor_map_interleave::bytes_16, "bytes_16"},
    {tensor_map_interleave::bytes_32, "bytes_32"},
};

constexpr enum_name<tensor_map_swizzle> swizzle_names[] = {
    {tensor_map_swizzle::none, "none"},
    {tensor_map_swizzle::bytes_32, "bytes_32"},
    {tensor_map_swizzle::bytes_64, "bytes_64"},
    {tensor_map_swizzle::bytes_128, "bytes_128"},
#if CUDA_VERSION >= 12080
    {tensor_map_swizzle::bytes_128_atom_32b, "bytes_128_atom_32b"},
    {tensor_map_swizzle::bytes_128_atom_32b_flip_8b, "bytes_128_atom_32b_flip_8b"},
    {tensor_map_swizzle::bytes_128_atom_64b, "bytes_128_atom_64b"},
#endif
};

constexpr enum_name<tensor_map_l2_promotion> l2_names[] = {
    {tensor_map_l2_promotion::none, "none"},
    {tensor_map_l2_promotion::bytes_64, "bytes_64"},
    {tensor_map_l2_promotion::bytes_128, "bytes_128"},
    {tensor_map_l2_promotion::bytes_256, "bytes_256"},
};

constexpr enum_name<tensor_map_oob_fill> fill_names[] = {
    {tensor_map_oob_fill::zero, "zero"},
    {tensor_map_oob_fill::nan_request_zero_fma, "nan_request_zero_fma"},
};

std::string type_name(tensor_map_data_type type) { return name_in(type_names, type); }
std::string interleave_name(tensor_map_interleave interleave) { return name_in(interleave_names, interleave); }
std::string swizzle_name(tensor_map_swizzle swizzle) { return name_in(swizzle_names, swizzle); }
std::string l2_name(tensor_map_l2_promotion l2) { return name_in(l2_names, l2); }
std::string fill_name(tensor_map_oob_fill fill) { return name_in(fill_names, fill); }

// --- properties of the data types -------------------------------------------------------------

bool is_packed(tensor_map_data_type type) { return detail::tensor_map_element_size(type) == 0; }

// The 16-byte-aligned packed types: 32-byte alignment, strides and dims[0] rules, 128-value box rows.
bool is_packed_align16(tensor_map_data_type type) {
#if CUDA_VERSION >= 12080
  return type == tensor_map_data_type::u4x16_align16b || type == tensor_map_data_type::u6x16_align16b;
#else
  (void)type;
  return false;
#endif
}

bool is_floating(tensor_map_data_type type) {
  switch (type) {
    case tensor_map_data_type::float16:
    case tensor_map_data_type::float32:
    case tensor_map_data_type::float64:
    case tensor_map_data_type::bfloat16:
    case tensor_map_data_type::float32_ftz:
    case tensor_map_data_type::tfloat32:
    case tensor_map_data_type::tfloat32_ftz: return true;
    default: return false;
  }
}

// Bits one element takes in global memory (the packed types are contiguous there).
std::uint64_t global_bits(tensor_map_data_type type) {
#if CUDA_VERSION >= 12080
  if (type == tensor_map_data_type::u4x16_align8b || type == tensor_map_data_type::u4x16_align16b) {
    return 4;
  }
  if (type == tensor_map_data_type::u6x16_align16b) {
    return 6;
  }
#endif
  return 8 * detail::tensor_map_element_size(type);
}

// Bits one element takes in shared memory: the 16-byte-aligned packed types are spread to 16 values
// per 16 bytes there.
std::uint64_t shared_bits(tensor_map_data_type type) { return is_packed_align16(type) ? 8 : global_bits(type); }

// "64 elements of 2 bytes (128 bytes)", or in bits for a sub-byte type.
std::string describe_elements(std::uint64_t count, std::uint64_t bits_each) {
  if (bits_each % 8 == 0) {
    return num(count) + " elements of " + num(bits_each / 8) + (bits_each == 8 ? " byte (" : " bytes (") +
           num(count * bits_each / 8) + " bytes)";
  }
  return num(count) + " elements of " + num(bits_each) + " bits (" + num(count * bits_each) + " bits)";
}

std::uint32_t swizzle_span(tensor_map_swizzle swizzle) {
  switch (swizzle) {
    case tensor_map_swizzle::none: return 0;
    case tensor_map_swizzle::bytes_32: return 32;
    case tensor_map_swizzle::bytes_64: return 64;
    default: return 128;  // bytes_128 and the 128-byte atom swizzles
  }
}

// --- the rules shared by both forms -----------------------------------------------------------

// The fields common to the tiled and im2col descriptions.
struct common_fields {
  tensor_map_data_type data_type;
  std::uint32_t rank;
  CUdeviceptr global_address;
  const std::array<std::uint64_t, 5>& global_dims;
  const std::array<std::uint64_t, 4>& global_strides;
  const std::array<std::uint32_t, 5>& element_strides;
  tensor_map_interleave interleave;
  tensor_map_swizzle swizzle;
  tensor_map_l2_promotion l2_promotion;
  tensor_map_oob_fill oob_fill;
};

// Refuses value, a field's enumerator, outside 0..last; built_with adds that the range is that of
// the CUDA headers cudrv was built with.
void check_enumerator(const char* api, const char* field, const char* enum_type, int value, int last, bool built_with) {
  if (value < 0 || value > last) {
    fail(api, std::string(field) + " = " + num(value) + " is not a " + enum_type + " (valid values: 0 to " + num(last) +
                  (built_with ? " with the CUDA " + num(CUDA_VERSION / 1000) + "." + num(CUDA_VERSION % 1000 / 10) +
                                    " headers cudrv was built with)"
                              : std::string(")")));
  }
}

void check_enumerators(const char* api, const common_fields& f) {
  check_enumerator(api, "data_type", "tensor_map_data_type", static_cast<int>(f.data_type), last_data_type, true);
  check_enumerator(api, "interleave", "tensor_map_interleave", static_cast<int>(f.interleave),
                   CU_TENSOR_MAP_INTERLEAVE_32B, false);
  check_enumerator(api, "swizzle", "tensor_map_swizzle", static_cast<int>(f.swizzle), last_swizzle, true);
  check_enumerator(api, "l2_promotion", "tensor_map_l2_promotion", static_cast<int>(f.l2_promotion),
                   CU_TENSOR_MAP_L2_PROMOTION_L2_256B, false);
  check_enumerator(api, "oob_fill", "tensor_map_oob_fill", static_cast<int>(f.oob_fill),
                   CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA, false);
}

void check_address(const char* api, const common_fields& f) {
  const std::uint64_t address = f.global_address;
  if (address % 16 != 0) {
    fail(api, "global_address = " + detail::format_address(address) + " must be 16-byte aligned (it is " +
                  num(address % 16) + " bytes past a multiple of 16)");
  }
  if (f.interleave == tensor_map_interleave::bytes_32 && address % 32 != 0) {
    fail(api,
         "global_address = " + detail::format_address(address) + " must be 32-byte aligned with interleave = bytes_32");
  }
  if (is_packed_align16(f.data_type) && address % 32 != 0) {
    fail(api, "global_address = " + detail::format_address(address) +
                  " must be 32-byte aligned for data_type = " + type_name(f.data_type));
  }
}

void check_global_dims(const char* api, const common_fields& f) {
  for (std::size_t i = 0; i < f.rank; ++i) {
    const std::uint64_t dim = f.global_dims[i];
    if (dim == 0 || dim > max_global_dim) {
      fail(api, index("global_dims", i) + " = " + num(dim) + " must be in 1.." + num(max_global_dim) + " (2^32)");
    }
  }
  if (is_packed_align16(f.data_type) && f.global_dims[0] % 128 != 0) {
    fail(api, "global_dims[0] = " + num(f.global_dims[0]) + " must be a multiple of 128 for data_type = " +
                  type_name(f.data_type) + " (it counts the packed values)");
  }
#if CUDA_VERSION >= 12080
  if (f.data_type == tensor_map_data_type::u4x16_align8b && f.global_dims[0] % 2 != 0) {
    fail(api, "global_dims[0] = " + num(f.global_dims[0]) +
                  " must be a multiple of 2 for data_type = u4x16_align8b (it counts the packed 4-bit values)");
  }
#endif
}

void check_global_strides(const char* api, const common_fields& f) {
  const std::uint64_t row_bits = f.global_dims[0] * global_bits(f.data_type);
  for (std::size_t i = 0; i + 1 < f.rank; ++i) {
    const std::uint64_t stride = f.global_strides[i];
    const std::string name = index("global_strides", i) + " = " + num(stride) + " bytes";
    if (stride % 16 != 0) {
      fail(api, name + " must be a multiple of 16");
    }
    if (stride >= stride_limit) {
      fail(api, name + " must be less than 2^40 (" + num(stride_limit) + ")");
    }
    if (f.interleave == tensor_map_interleave::bytes_32 && stride % 32 != 0) {
      fail(api, name + " must be a multiple of 32 with interleave = bytes_32");
    }
    if (is_packed_align16(f.data_type) && stride % 32 != 0) {
      fail(api, name + " must be a multiple of 32 for data_type = " + type_name(f.data_type));
    }
    // The driver's layout formula, globalStrides[0] = globalDim[0] * elementSize + padding[0] with
    // each later stride a multiple of the one before, means every stride spans at least one innermost
    // row. Only that consequence is checked: permuted outer dimensions are accepted by the driver and
    // used in practice. A dimension of size 1 never uses its stride.
    if (f.interleave == tensor_map_interleave::none && f.global_dims[i + 1] > 1 && stride * 8 < row_bits) {
      fail(api, name + " must be at least one innermost row: global_dims[0] = " +
                    describe_elements(f.global_dims[0], global_bits(f.data_type)) +
                    "; strides count bytes, not elements");
    }
  }
}

void check_element_strides(const char* api, const common_fields& f) {
  for (std::size_t i = 0; i < f.rank; ++i) {
    const std::uint32_t stride = f.element_strides[i];
    if (stride == 0 || stride > max_element_stride) {
      fail(api, index("element_strides", i) + " = " + num(stride) + " must be in 1.." + num(max_element_stride));
    }
  }
}

// The interleave and swizzle rules; inner_name and inner_count describe the box's inner dimension
// (box_dims[0] for tiled maps, channels_per_pixel for im2col maps).
void check_interleave_and_swizzle(const char* api, const common_fields& f, const std::string& inner_name,
                                  std::uint32_t inner_count) {
#if CUDA_VERSION >= 12080
  if (f.data_type == tensor_map_data_type::u6x16_align16b && f.interleave != tensor_map_interleave::none) {
    fail(api, "interleave = " + interleave_name(f.interleave) + " must be none for data_type = u6x16_align16b");
  }
#endif
  if (f.interleave == tensor_map_interleave::bytes_32 && f.swizzle != tensor_map_swizzle::bytes_32) {
    fail(api, "swizzle = " + swizzle_name(f.swizzle) + " must be bytes_32 with interleave = bytes_32");
  }
  if (f.interleave == tensor_map_interleave::none && f.swizzle != tensor_map_swizzle::none) {
    const std::uint64_t span = swizzle_span(f.swizzle);
    const std::uint64_t bits = std::uint64_t{inner_count} * shared_bits(f.data_type);
    if (bits > 8 * span) {
      fail(api, inner_name + " = " + describe_elements(inner_count, shared_bits(f.data_type)) + " must fit in the " +
                    num(span) + "-byte span of swizzle = " + swizzle_name(f.swizzle) + " (at most " + num(span) +
                    " bytes)");
    }
  }
#if CUDA_VERSION >= 12080
  if (f.data_type == tensor_map_data_type::u6x16_align16b) {
    switch (f.swizzle) {
      case tensor_map_swizzle::none:
      case tensor_map_swizzle::bytes_128:
      case tensor_map_swizzle::bytes_128_atom_32b:
      case tensor_map_swizzle::bytes_128_atom_64b: break;
      default:
        fail(api, "swizzle = " + swizzle_name(f.swizzle) +
                      " is not supported for data_type = u6x16_align16b (allowed: none, bytes_128, "
                      "bytes_128_atom_32b, bytes_128_atom_64b)");
    }
  }
  if (f.data_type == tensor_map_data_type::u4x16_align16b) {
    switch (f.swizzle) {
      case tensor_map_swizzle::none:
      case tensor_map_swizzle::bytes_128:
      case tensor_map_swizzle::bytes_128_atom_32b: break;
      default:
        fail(api, "swizzle = " + swizzle_name(f.swizzle) +
                      " is not supported for data_type = u4x16_align16b (allowed: none, bytes_128, "
                      "bytes_128_atom_32b)");
    }
  }
#endif
}

void check_fill(const char* api, const common_fields& f) {
  const bool floating = is_floating(f.data_type) && !is_packed(f.data_type);
  if (f.oob_fill == tensor_map_oob_fill::nan_request_zero_fma && !floating) {
    fail(api, "oob_fill = nan_request_zero_fma needs a floating-point data_type, not " + type_name(f.data_type) +
                  " (use oob_fill = zero)");
  }
}

// Desc: tiled_tensor_map_desc or im2col_tensor_map_desc.
template <class Desc>
common_fields fields_of(const Desc& d) {
  return {d.data_type,       d.rank,       d.global_address, d.global_dims,  d.global_strides,
          d.element_strides, d.interleave, d.swizzle,        d.l2_promotion, d.oob_fill};
}

// --- the two forms ----------------------------------------------------------------------------

void validate_tiled(const tiled_tensor_map_desc& d, const char* api) {
  const common_fields f = fields_of(d);
  check_enumerators(api, f);
  if (d.rank < 1 || d.rank > 5) {
    fail(api, "rank = " + num(d.rank) + " must be in 1..5 for a tiled tensor map");
  }
  if (d.interleave != tensor_map_interleave::none && d.rank < 3) {
    fail(api, "rank = " + num(d.rank) + " must be at least 3 with interleave = " + interleave_name(d.interleave));
  }
  check_address(api, f);
  check_global_dims(api, f);
  check_global_strides(api, f);
  for (std::size_t i = 0; i < d.rank; ++i) {
    if (d.box_dims[i] == 0 || d.box_dims[i] > max_box_dim) {
      fail(api, index("box_dims", i) + " = " + num(d.box_dims[i]) + " must be in 1.." + num(max_box_dim));
    }
  }
  if (is_packed_align16(d.data_type) && d.box_dims[0] != 128) {
    fail(api, "box_dims[0] = " + num(d.box_dims[0]) + " must be 128 for data_type = " + type_name(d.data_type));
  }
  const std::uint64_t box_row_bits = std::uint64_t{d.box_dims[0]} * shared_bits(d.data_type);
  if (d.interleave == tensor_map_interleave::none && box_row_bits % 128 != 0) {
    fail(api, "box_dims[0] = " + describe_elements(d.box_dims[0], shared_bits(d.data_type)) +
                  " must span a multiple of 16 bytes with interleave = none");
  }
  check_element_strides(api, f);
  check_interleave_and_swizzle(api, f, "box_dims[0]", d.box_dims[0]);
  check_fill(api, f);
}

void validate_im2col(const im2col_tensor_map_desc& d, const char* api) {
  const common_fields f = fields_of(d);
  check_enumerators(api, f);
  if (d.rank < 3 || d.rank > 5) {
    fail(api, "rank = " + num(d.rank) + " must be in 3..5 for an im2col tensor map");
  }
  check_address(api, f);
  check_global_dims(api, f);
  check_global_strides(api, f);
  // One corner offset per spatial dimension, with a range that shrinks as the rank grows.
  const int spatial = static_cast<int>(d.rank) - 2;
  const int low = d.rank == 3 ? -32768 : d.rank == 4 ? -128 : -16;
  const int high = -low - 1;
  static const char* const spatial_names[] = {"W", "H", "D"};
  for (int i = 0; i < spatial; ++i) {
    const auto ui = static_cast<std::size_t>(i);
    for (const auto* corner : {&d.pixel_box_lower_corner, &d.pixel_box_upper_corner}) {
      const int value = (*corner)[ui];
      if (value < low || value > high) {
        const char* name = corner == &d.pixel_box_lower_corner ? "pixel_box_lower_corner" : "pixel_box_upper_corner";
        fail(api, index(name, ui) + " = " + num(value) + " must be in " + num(low) + ".." + num(high) + " for rank " +
                      num(d.rank));
      }
    }
  }
  for (int i = 0; i < spatial; ++i) {
    const auto ui = static_cast<std::size_t>(i);
    const std::int64_t extent =
        static_cast<std::int64_t>(d.global_dims[ui + 1]) + d.pixel_box_upper_corner[ui] - d.pixel_box_lower_corner[ui];
    if (extent < 1) {
      fail(api, std::string("the pixel box must have a non-zero area, but along ") + spatial_names[i] + " it spans " +
                    index("global_dims", ui + 1) + " = " + num(d.global_dims[ui + 1]) + " + " +
                    index("pixel_box_upper_corner", ui) + " = " + num(d.pixel_box_upper_corner[ui]) + " - " +
                    index("pixel_box_lower_corner", ui) + " = " + num(d.pixel_box_lower_corner[ui]) + " = " +
                    num(extent) + " pixels (at least 1 needed)");
    }
  }
  if (d.channels_per_pixel == 0 || d.channels_per_pixel > max_channels_per_pixel) {
    fail(api, "channels_per_pixel = " + num(d.channels_per_pixel) + " must be in 1.." + num(max_channels_per_pixel));
  }
  if (is_packed_align16(d.data_type) && d.channels_per_pixel != 128) {
    fail(api, "channels_per_pixel = " + num(d.channels_per_pixel) +
                  " must be 128 for data_type = " + type_name(d.data_type));
  }
  if (d.pixels_per_column == 0 || d.pixels_per_column > max_pixels_per_column) {
    fail(api, "pixels_per_column = " + num(d.pixels_per_column) + " must be in 1.." + num(max_pixels_per_column));
  }
  check_element_strides(api, f);
  check_interleave_and_swizzle(api, f, "channels_per_pixel", d.channels_per_pixel);
  check_fill(api, f);
}

// --- descriptions for driver errors -----------------------------------------------------------

template <class T, std::size_t N>
std::string list(const std::array<T, N>& values, std::size_t count) {
  std::string out = "{";
  for (std::size_t i = 0; i < count && i < N; ++i) {
    out += (i == 0 ? "" : ", ") + std::to_string(values[i]);
  }
  return out + "}";
}

std::string describe_common(const common_fields& f) {
  return type_name(f.data_type) + ", rank " + num(f.rank) + ", address " + detail::format_address(f.global_address) +
         ", global_dims " + list(f.global_dims, f.rank) + ", global_strides " +
         list(f.global_strides, f.rank == 0 ? 0 : f.rank - 1) + " bytes";
}

std::string describe_options(const common_fields& f) {
  return ", element_strides " + list(f.element_strides, f.rank) + ", interleave " + interleave_name(f.interleave) +
         ", swizzle " + swizzle_name(f.swizzle) + ", l2_promotion " + l2_name(f.l2_promotion) + ", oob_fill " +
         fill_name(f.oob_fill);
}

std::string describe(const tiled_tensor_map_desc& d) {
  const common_fields f = fields_of(d);
  return "tiled tensor map: " + describe_common(f) + ", box_dims " + list(d.box_dims, d.rank) + describe_options(f);
}

std::string describe(const im2col_tensor_map_desc& d) {
  const common_fields f = fields_of(d);
  const std::size_t spatial = d.rank >= 2 ? d.rank - 2 : 0;
  return "im2col tensor map: " + describe_common(f) + ", pixel_box_lower_corner " +
         list(d.pixel_box_lower_corner, spatial) + ", pixel_box_upper_corner " +
         list(d.pixel_box_upper_corner, spatial) + ", channels_per_pixel " + num(d.channels_per_pixel) +
         ", pixels_per_column " + num(d.pixels_per_column) + describe_options(f);
}

// --- driver calls -----------------------------------------------------------------------------

// Runs fn, a tensor map driver call, with a context current (the driver refuses to encode without
// one): the caller's current one, or when none is, the context owning address (its device's primary
// context for memory of a pool, which names no context: the memory names the device). The caller's
// current context is restored. An address the driver does not know implies no context: refused.
template <class Fn>
void with_a_current_context(CUdeviceptr address, const char* api, Fn&& fn) {
  CUcontext current = nullptr;
  detail::check(detail::drv::cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  if (current != nullptr) {
    fn();
    return;
  }
  CUcontext target = nullptr;
  if (address != 0) {
    const pointer_attributes attr = get_pointer_attributes(address);
    if (attr.device_ordinal >= 0) {
      target = attr.context != nullptr ? attr.context : device(attr.device_ordinal).primary_context().native_handle();
    }
  }
  if (target == nullptr) {
    throw invalid_argument_error(api, "the driver encodes tensor maps only with a context current, none is, and the "
                                      "address " +
                                          detail::format_address(static_cast<std::uintptr_t>(address)) +
                                          " is not device memory that would name one: make a context current "
                                          "(device::set_current or a context_guard)");
  }
  context_guard guard{context_ref(target)};
  fn();
}

void* as_pointer(CUdeviceptr address) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(address)); }

// A description's enumerators as the driver's types.
struct driver_enums {
  CUtensorMapDataType type;
  CUtensorMapInterleave interleave;
  CUtensorMapSwizzle swizzle;
  CUtensorMapL2promotion l2;
  CUtensorMapFloatOOBfill fill;
};

// Encodes a validated description with encode_call(CUtensorMap*, const driver_enums&), the driver
// call named api, in a current context; a refusal's context describes desc.
template <class Desc, class EncodeCall>
tensor_map encode(const Desc& desc, const char* api, EncodeCall&& encode_call) {
  const driver_enums enums{static_cast<CUtensorMapDataType>(desc.data_type),
                           static_cast<CUtensorMapInterleave>(desc.interleave),
                           static_cast<CUtensorMapSwizzle>(desc.swizzle),
                           static_cast<CUtensorMapL2promotion>(desc.l2_promotion),
                           static_cast<CUtensorMapFloatOOBfill>(desc.oob_fill)};
  CUtensorMap map{};
  with_a_current_context(desc.global_address, api,
                         [&] { detail::check(encode_call(&map, enums), api, [&] { return describe(desc); }); });
  return tensor_map::from_native(map);
}

}  // namespace

void validate(const tiled_tensor_map_desc& desc) { validate_tiled(desc, "cudrv::validate"); }

void validate(const im2col_tensor_map_desc& desc) { validate_im2col(desc, "cudrv::validate"); }

tensor_map make_tiled_tensor_map(const tiled_tensor_map_desc& desc) {
  validate_tiled(desc, "cudrv::make_tiled_tensor_map");
  return encode(desc, "cuTensorMapEncodeTiled", [&](CUtensorMap* map, const driver_enums& e) {
    return detail::drv::cuTensorMapEncodeTiled(map, e.type, desc.rank, as_pointer(desc.global_address),
                                               desc.global_dims.data(), desc.global_strides.data(),
                                               desc.box_dims.data(), desc.element_strides.data(), e.interleave,
                                               e.swizzle, e.l2, e.fill);
  });
}

tensor_map make_im2col_tensor_map(const im2col_tensor_map_desc& desc) {
  validate_im2col(desc, "cudrv::make_im2col_tensor_map");
  return encode(desc, "cuTensorMapEncodeIm2col", [&](CUtensorMap* map, const driver_enums& e) {
    return detail::drv::cuTensorMapEncodeIm2col(map, e.type, desc.rank, as_pointer(desc.global_address),
                                                desc.global_dims.data(), desc.global_strides.data(),
                                                desc.pixel_box_lower_corner.data(), desc.pixel_box_upper_corner.data(),
                                                desc.channels_per_pixel, desc.pixels_per_column,
                                                desc.element_strides.data(), e.interleave, e.swizzle, e.l2, e.fill);
  });
}

void tensor_map::replace_address(CUdeviceptr address) {
  if (address % 16 != 0) {
    fail("cudrv::tensor_map::replace_address", "address = " + detail::format_address(address) +
                                                   " must be 16-byte aligned (it is " + num(address % 16) +
                                                   " bytes past a multiple of 16)");
  }
  CUtensorMap updated = map_;  // the map stays as it was if the driver refuses the address
  with_a_current_context(address, "cudrv::tensor_map::replace_address", [&] {
    detail::check(detail::drv::cuTensorMapReplaceAddress(&updated, as_pointer(address)), "cuTensorMapReplaceAddress",
                  [&] { return "new address " + detail::format_address(address); });
  });
  map_ = updated;
}

void tensor_map::replace_address(const void* address) {
  replace_address(static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(address)));
}

bool operator==(const tensor_map& a, const tensor_map& b) noexcept {
  return std::memcmp(&a.map_, &b.map_, sizeof(CUtensorMap)) == 0;
}

namespace detail {

std::uint64_t dense_tensor_strides(const char* api, std::size_t rank, const std::uint64_t* dims,
                                   std::size_t element_size, std::size_t span_size, std::uint64_t* strides) {
  constexpr std::uint64_t saturated = ~std::uint64_t{0};
  auto times = [](std::uint64_t a, std::uint64_t b) { return (a != 0 && b > saturated / a) ? saturated : a * b; };
  std::uint64_t elements = 1;
  for (std::size_t i = 0; i < rank; ++i) {
    if (i > 0) {
      // Saturated strides fail validation's "less than 2^40" rule with the numbers.
      strides[i - 1] = times(elements, element_size);
    }
    elements = times(elements, dims[i]);
  }
  if (elements > span_size) {
    std::string shape;
    for (std::size_t i = 0; i < rank; ++i) {
      shape += (i == 0 ? "" : ", ") + std::to_string(dims[i]);
    }
    fail(api, "global_dims {" + shape + "} describe " +
                  (elements == saturated ? std::string("more than 2^64") : std::to_string(elements)) +
                  " elements, more than the " + std::to_string(span_size) + " elements of the tensor's span");
  }
  return elements;
}

}  // namespace detail

}  // namespace cudrv
