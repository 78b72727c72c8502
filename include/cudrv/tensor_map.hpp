/// @file tensor_map.hpp
/// @brief TMA tensor maps (Hopper's Tensor Memory Accelerator descriptors): @ref cudrv::tensor_map,
/// the descriptions @ref cudrv::tiled_tensor_map_desc and @ref cudrv::im2col_tensor_map_desc, their
/// driver-free @ref cudrv::validate "validation", and the `make_*_tensor_map` functions that encode them
/// with `cuTensorMapEncodeTiled` / `cuTensorMapEncodeIm2col`.
///
/// Every rule the CUDA driver documents for these calls is checked before the driver is called, each
/// with its own message naming the field, the dimension, the value given and the value allowed, e.g.
/// `global_strides[1] = 1000 bytes must be a multiple of 16`. Dimensions are listed innermost first,
/// as the driver lists them: a row-major `rows x cols` matrix has `global_dims = {cols, rows}`.
///
/// Layer: memory (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "cudrv/span.hpp"

namespace cudrv {

/// @brief The element type of a tensor map (`CUtensorMapDataType`). TMA copies bits: the type gives
/// the element size, whether an out-of-bounds NaN fill is allowed, and the conversions of the
/// `_ftz` and `tfloat32` types.
enum class tensor_map_data_type : int {
  uint8 = CU_TENSOR_MAP_DATA_TYPE_UINT8,                ///< 1 byte, unsigned.
  uint16 = CU_TENSOR_MAP_DATA_TYPE_UINT16,              ///< 2 bytes, unsigned.
  uint32 = CU_TENSOR_MAP_DATA_TYPE_UINT32,              ///< 4 bytes, unsigned.
  int32 = CU_TENSOR_MAP_DATA_TYPE_INT32,                ///< 4 bytes, signed.
  uint64 = CU_TENSOR_MAP_DATA_TYPE_UINT64,              ///< 8 bytes, unsigned.
  int64 = CU_TENSOR_MAP_DATA_TYPE_INT64,                ///< 8 bytes, signed.
  float16 = CU_TENSOR_MAP_DATA_TYPE_FLOAT16,            ///< 2 bytes, IEEE half precision (`__half`).
  float32 = CU_TENSOR_MAP_DATA_TYPE_FLOAT32,            ///< 4 bytes, `float`.
  float64 = CU_TENSOR_MAP_DATA_TYPE_FLOAT64,            ///< 8 bytes, `double`.
  bfloat16 = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,          ///< 2 bytes, `__nv_bfloat16`.
  float32_ftz = CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ,    ///< 4 bytes, `float`, denormals flushed to zero.
  tfloat32 = CU_TENSOR_MAP_DATA_TYPE_TFLOAT32,          ///< 4 bytes, `float` rounded to TF32.
  tfloat32_ftz = CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ,  ///< 4 bytes, TF32 with denormals flushed to zero.
#if CUDA_VERSION >= 12080 || defined(CUDRV_DOXYGEN)
  /// 16 packed 4-bit values in 8 bytes, copied without gaps (CUDA 12.8+). `global_dims[0]` counts
  /// 4-bit values and must be even.
  u4x16_align8b = CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B,
  /// 16 packed 4-bit values, 8 bytes in global memory, 16 bytes (8 of them a gap) in shared memory
  /// (CUDA 12.8+). Needs 32-byte alignment, `global_dims[0]` a multiple of 128 and a 128-value box row.
  u4x16_align16b = CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN16B,
  /// 16 packed 6-bit values, 12 bytes in global memory, 16 bytes (4 of them a gap) in shared memory
  /// (CUDA 12.8+). Same rules as `u4x16_align16b`, and no interleave.
  u6x16_align16b = CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B,
#endif
};

/// @brief An interleaved global layout (`CUtensorMapInterleave`), such as NC/8HWC8 where 8 channels
/// of 2 bytes fill 16 bytes. Interleaved tiled maps need a rank of 3 or more.
enum class tensor_map_interleave : int {
  none = CU_TENSOR_MAP_INTERLEAVE_NONE,     ///< No interleave (the usual dense or padded layout).
  bytes_16 = CU_TENSOR_MAP_INTERLEAVE_16B,  ///< 16-byte interleave.
  /// 32-byte interleave: needs a 32-byte aligned address and strides, and the 32-byte swizzle.
  bytes_32 = CU_TENSOR_MAP_INTERLEAVE_32B,
};

/// @brief How the box is swizzled across shared-memory banks (`CUtensorMapSwizzle`). Without interleave,
/// the box's inner dimension (`box_dims[0]` or `channels_per_pixel` times the element size) must fit
/// in the swizzle span: 32, 64 or 128 bytes.
enum class tensor_map_swizzle : int {
  none = CU_TENSOR_MAP_SWIZZLE_NONE,       ///< No swizzle.
  bytes_32 = CU_TENSOR_MAP_SWIZZLE_32B,    ///< 16-byte chunks swizzled within a 32-byte span.
  bytes_64 = CU_TENSOR_MAP_SWIZZLE_64B,    ///< 16-byte chunks swizzled within a 64-byte span.
  bytes_128 = CU_TENSOR_MAP_SWIZZLE_128B,  ///< 16-byte chunks swizzled within a 128-byte span.
#if CUDA_VERSION >= 12080 || defined(CUDRV_DOXYGEN)
  bytes_128_atom_32b = CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B,  ///< 32-byte chunks within a 128-byte span (CUDA 12.8+).
  /// 32-byte chunks within a 128-byte span, the 8-byte halves of each 16 bytes swapped on every other
  /// row (CUDA 12.8+).
  bytes_128_atom_32b_flip_8b = CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B_FLIP_8B,
  bytes_128_atom_64b = CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B,  ///< 64-byte chunks within a 128-byte span (CUDA 12.8+).
#endif
};

/// @brief The granularity at which L2 fills requests from DRAM (`CUtensorMapL2promotion`).
enum class tensor_map_l2_promotion : int {
  none = CU_TENSOR_MAP_L2_PROMOTION_NONE,          ///< No promotion.
  bytes_64 = CU_TENSOR_MAP_L2_PROMOTION_L2_64B,    ///< 64-byte requests.
  bytes_128 = CU_TENSOR_MAP_L2_PROMOTION_L2_128B,  ///< 128-byte requests.
  bytes_256 = CU_TENSOR_MAP_L2_PROMOTION_L2_256B,  ///< 256-byte requests.
};

/// @brief What out-of-bounds elements of a box read as (`CUtensorMapFloatOOBfill`).
enum class tensor_map_oob_fill : int {
  zero = CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,  ///< Zeros (the driver's `CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE`).
  /// A special NaN that FMA instructions take as zero; floating-point data types only.
  nan_request_zero_fma = CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA,
};

namespace detail {
/// @brief No mapping for this type (internal); see @ref tensor_map_data_type_of.
template <class T>
struct tensor_map_data_type_unknown : std::false_type {};
/// @brief The element size in bytes of a whole-byte data type, 0 for the packed sub-byte types (internal).
constexpr std::size_t tensor_map_element_size(tensor_map_data_type type) noexcept {
  switch (type) {
    case tensor_map_data_type::uint8: return 1;
    case tensor_map_data_type::uint16:
    case tensor_map_data_type::float16:
    case tensor_map_data_type::bfloat16: return 2;
    case tensor_map_data_type::uint32:
    case tensor_map_data_type::int32:
    case tensor_map_data_type::float32:
    case tensor_map_data_type::float32_ftz:
    case tensor_map_data_type::tfloat32:
    case tensor_map_data_type::tfloat32_ftz: return 4;
    case tensor_map_data_type::uint64:
    case tensor_map_data_type::int64:
    case tensor_map_data_type::float64: return 8;
    default: return 0;
  }
}
}  // namespace detail

/// @brief The @ref tensor_map_data_type of the C++ element type @p T, used by the typed
/// `make_*_tensor_map` overloads: `std::uint8_t`, `std::uint16_t`, `std::uint32_t`, `std::int32_t`,
/// `std::uint64_t`, `std::int64_t`, `float` and `double` (cv-qualifiers ignored). The signed 8- and
/// 16-bit integers map to `uint8` and `uint16`: TMA copies their bits unchanged.
///
/// cudrv does not include `cuda_fp16.h`; specialize the template for the half types a program uses:
/// @code
/// #include <cuda_fp16.h>
/// template <> inline constexpr cudrv::tensor_map_data_type
///     cudrv::tensor_map_data_type_of<__half> = cudrv::tensor_map_data_type::float16;
///
/// cudrv::device_buffer<__half> x(dev, 4096 * 4096);
/// auto map = cudrv::make_tiled_tensor_map(x.view(), {4096, 4096}, {64, 64});
/// @endcode
template <class T>
inline constexpr tensor_map_data_type tensor_map_data_type_of = [] {
  static_assert(detail::tensor_map_data_type_unknown<T>::value,
                "cudrv::tensor_map_data_type_of: no tensor map data type for this element type; specialize "
                "cudrv::tensor_map_data_type_of<T> or fill a tiled_tensor_map_desc by hand");
  return tensor_map_data_type::uint8;
}();
/// @cond CUDRV_SPECIALIZATIONS
template <class T>
inline constexpr tensor_map_data_type tensor_map_data_type_of<const T> = tensor_map_data_type_of<T>;
template <class T>
inline constexpr tensor_map_data_type tensor_map_data_type_of<volatile T> = tensor_map_data_type_of<T>;
template <class T>
inline constexpr tensor_map_data_type tensor_map_data_type_of<const volatile T> = tensor_map_data_type_of<T>;
template <>
inline constexpr tensor_map_data_type tensor_map_data_type_of<std::uint8_t> = tensor_map_data_type::uint8;
template <>
inline constexpr tensor_map_data_type tensor_map_data_type_of<std::int8_t> = tensor_map_data_type::uint8;
template <>
inline constexpr tensor_map_data_type tensor_map_data_type_of<std::uint16_t> = tensor_map_data_type::uint16;
template <>
inline constexpr tensor_map_data_type tensor_map_data_type_of<std::int16_t> = tensor_map_data_type::uint16;
template <>
inline constexpr tensor_map_data_type tensor_map_data_type_of<std::uint32_t> = tensor_map_data_type::uint32;
template <>
inline constexpr tensor_map_data_type tensor_map_data_type_of<std::int32_t> = tensor_map_data_type::int32;
template <>
inline constexpr tensor_map_data_type tensor_map_data_type_of<std::uint64_t> = tensor_map_data_type::uint64;
template <>
inline constexpr tensor_map_data_type tensor_map_data_type_of<std::int64_t> = tensor_map_data_type::int64;
template <>
inline constexpr tensor_map_data_type tensor_map_data_type_of<float> = tensor_map_data_type::float32;
template <>
inline constexpr tensor_map_data_type tensor_map_data_type_of<double> = tensor_map_data_type::float64;
/// @endcond

/// @brief A TMA descriptor: the 128 opaque bytes of a `CUtensorMap`, with the same size, alignment and
/// layout, trivially copyable.
///
/// It is what a kernel receives as a `const __grid_constant__ CUtensorMap` parameter: pass it by value
/// to @ref launch (it converts to `const CUtensorMap&` for typed kernels and has the parameter's 128
/// bytes for untyped ones). Build one with @ref make_tiled_tensor_map or @ref make_im2col_tensor_map;
/// a default-constructed map is all zeros and describes nothing.
///
/// @code
/// // __global__ void k(const __grid_constant__ CUtensorMap a, float* out);
/// cudrv::device_buffer<float> a(dev, 1024 * 512);
/// cudrv::tensor_map map = cudrv::make_tiled_tensor_map(a.view(), {1024, 512}, {32, 16});
/// cudrv::launch(stream, {.grid = 64, .block = 128}, kernel, map, out.get());
/// map.replace_address(other.data());   // same shape, another buffer of the same layout
/// @endcode
class alignas(alignof(CUtensorMap)) tensor_map {
 public:
  /// @brief A map of 128 zero bytes, to be assigned later.
  constexpr tensor_map() noexcept = default;

  /// @brief Wraps a descriptor encoded elsewhere (copies its 128 bytes).
  [[nodiscard]] static tensor_map from_native(const CUtensorMap& map) noexcept {
    tensor_map out;
    out.map_ = map;
    return out;
  }
  /// @brief The driver's descriptor, for raw driver calls and kernel parameters.
  [[nodiscard]] const CUtensorMap& native() const noexcept { return map_; }
  /// @brief Converts to the driver's descriptor, so a map passes to a typed kernel whose parameter is a
  /// `CUtensorMap`.
  operator const CUtensorMap&() const noexcept { return map_; }

  /// @brief Points the map at another tensor of the same shape, strides and type
  /// (`cuTensorMapReplaceAddress`).
  ///
  /// @code
  /// cudrv::tensor_map map = cudrv::make_tiled_tensor_map(a.view(), {1024, 512}, {32, 16});
  /// map.replace_address(b.data());   // b: another 1024 x 512 float tensor
  /// @endcode
  /// @param address the new global address; 16-byte aligned, and 32-byte aligned when the map was
  ///   made with the 32-byte interleave or a 16-byte-aligned packed type (the driver checks that part)
  /// @throws invalid_argument_error when @p address is not 16-byte aligned (before any driver call)
  /// @throws error when the driver refuses the address
  void replace_address(CUdeviceptr address);
  /// @brief As @ref replace_address(CUdeviceptr), from a typed device pointer such as `buffer.get()`.
  /// @param address the new global address (device memory; never dereferenced on the host)
  void replace_address(const void* address);

  /// @brief Whether two maps hold the same 128 bytes.
  friend bool operator==(const tensor_map& a, const tensor_map& b) noexcept;

 private:
  CUtensorMap map_{};
};

static_assert(sizeof(tensor_map) == sizeof(CUtensorMap) && alignof(tensor_map) == alignof(CUtensorMap),
              "cudrv::tensor_map must have CUtensorMap's layout");
static_assert(alignof(tensor_map) >= 64, "the driver needs tensor maps aligned to 64 bytes");

/// @brief Everything `cuTensorMapEncodeTiled` takes: a tensor in global memory and the box a TMA copy
/// moves to or from shared memory. Entries past @ref rank are ignored.
///
/// Dimensions are listed innermost (contiguous) first. @ref global_strides holds the byte strides of
/// dimensions 1 to rank - 1 (dimension 0 is contiguous): for a dense row-major `rows x cols` float
/// matrix, `global_dims = {cols, rows}` and `global_strides = {cols * 4}`.
///
/// @code
/// cudrv::device_buffer<float> m(dev, 512 * 1024);         // 512 rows of 1024 floats
/// cudrv::tiled_tensor_map_desc desc{
///     .data_type = cudrv::tensor_map_data_type::float32,
///     .rank = 2,
///     .global_address = m.data(),
///     .global_dims = {1024, 512},
///     .global_strides = {1024 * sizeof(float)},
///     .box_dims = {32, 16},                                 // 32 floats = 128 bytes per box row
///     .swizzle = cudrv::tensor_map_swizzle::bytes_128,
/// };
/// cudrv::validate(desc);                                    // no driver needed; throws on a broken rule
/// cudrv::tensor_map map = cudrv::make_tiled_tensor_map(desc);
/// @endcode
struct tiled_tensor_map_desc {
  /// The element type.
  tensor_map_data_type data_type = tensor_map_data_type::uint8;
  /// Number of dimensions, 1 to 5 (3 to 5 with interleave).
  std::uint32_t rank = 0;
  /// Start of the tensor; 16-byte aligned (32 with the 32-byte interleave or a 16-byte-aligned packed type).
  CUdeviceptr global_address = 0;
  /// Elements per dimension, innermost first; each 1 to 2^32.
  std::array<std::uint64_t, 5> global_dims{};
  /// Bytes from one index to the next of dimensions 1 to rank - 1: multiples of 16 (32 with the 32-byte
  /// interleave), below 2^40, and without interleave at least one innermost row.
  std::array<std::uint64_t, 4> global_strides{};
  /// The box: elements per dimension, each 1 to 256; without interleave, box_dims[0] spans a multiple of
  /// 16 bytes, and no more than the swizzle span.
  std::array<std::uint32_t, 5> box_dims{};
  /// Traversal step per dimension, 1 to 8 (dimension 0's is ignored without interleave).
  std::array<std::uint32_t, 5> element_strides{1, 1, 1, 1, 1};
  tensor_map_interleave interleave = tensor_map_interleave::none;        ///< Interleaved layout.
  tensor_map_swizzle swizzle = tensor_map_swizzle::none;                 ///< Shared-memory swizzle.
  tensor_map_l2_promotion l2_promotion = tensor_map_l2_promotion::none;  ///< L2 promotion.
  tensor_map_oob_fill oob_fill = tensor_map_oob_fill::zero;              ///< Out-of-bounds fill.
};

/// @brief Everything `cuTensorMapEncodeIm2col` takes: an NWC, NHWC or NDHWC tensor (rank 3, 4 or 5)
/// whose boxes are gathered the way an implicit-GEMM convolution reads them. Entries past @ref rank
/// (and, for the corners, past rank - 2) are ignored.
///
/// Dimensions are innermost first: `{C, W, N}`, `{C, W, H, N}` or `{C, W, H, D, N}`. The pixel-box
/// corners hold one offset per spatial dimension, also innermost first (W, then H, then D). Along
/// each spatial dimension of size `n`, the box spans from `lower` to `n - 1 + upper`; for a filter of
/// `k` taps with padding `p` the usual values are `lower = -p` and `upper = p - (k - 1)`.
///
/// @code
/// // NHWC fp16 activations: N = 8, H = W = 56, C = 64; 3 x 3 filter, padding 1.
/// cudrv::im2col_tensor_map_desc desc{
///     .data_type = cudrv::tensor_map_data_type::float16,
///     .rank = 4,
///     .global_address = x.data(),
///     .global_dims = {64, 56, 56, 8},
///     .global_strides = {64 * 2, 64 * 2 * 56, 64 * 2 * 56 * 56},
///     .pixel_box_lower_corner = {-1, -1},
///     .pixel_box_upper_corner = {-1, -1},
///     .channels_per_pixel = 64,                             // 128 bytes per pixel
///     .pixels_per_column = 128,
///     .swizzle = cudrv::tensor_map_swizzle::bytes_128,
/// };
/// cudrv::tensor_map map = cudrv::make_im2col_tensor_map(desc);
/// @endcode
struct im2col_tensor_map_desc {
  /// The element type.
  tensor_map_data_type data_type = tensor_map_data_type::uint8;
  /// Number of dimensions: 3, 4 or 5.
  std::uint32_t rank = 0;
  /// Start of the tensor; 16-byte aligned (32 with the 32-byte interleave or a 16-byte-aligned packed type).
  CUdeviceptr global_address = 0;
  /// Elements per dimension, innermost (C) first; each 1 to 2^32.
  std::array<std::uint64_t, 5> global_dims{};
  /// Bytes from one index to the next of dimensions 1 to rank - 1, as for @ref tiled_tensor_map_desc.
  std::array<std::uint64_t, 4> global_strides{};
  /// Offsets of the box's lower corner per spatial dimension (W, H, D): within [-32768, 32767] for
  /// rank 3, [-128, 127] for rank 4, [-16, 15] for rank 5.
  std::array<int, 3> pixel_box_lower_corner{};
  /// Offsets of the box's upper corner, from the last pixel, per spatial dimension (W, H, D); same
  /// ranges as @ref pixel_box_lower_corner.
  std::array<int, 3> pixel_box_upper_corner{};
  /// Elements read along C per pixel, 1 to 256; the box's inner dimension for the swizzle span.
  std::uint32_t channels_per_pixel = 0;
  /// Pixels read along N, D, H and W per column, 1 to 1024.
  std::uint32_t pixels_per_column = 0;
  /// Traversal step per dimension, 1 to 8 (dimension 0's is ignored without interleave).
  std::array<std::uint32_t, 5> element_strides{1, 1, 1, 1, 1};
  tensor_map_interleave interleave = tensor_map_interleave::none;        ///< Interleaved layout.
  tensor_map_swizzle swizzle = tensor_map_swizzle::none;                 ///< Shared-memory swizzle.
  tensor_map_l2_promotion l2_promotion = tensor_map_l2_promotion::none;  ///< L2 promotion.
  tensor_map_oob_fill oob_fill = tensor_map_oob_fill::zero;              ///< Out-of-bounds fill.
};

/// @brief The options of the typed `make_*_tensor_map` overloads, which compute everything else.
struct tensor_map_options {
  tensor_map_swizzle swizzle = tensor_map_swizzle::none;                 ///< Shared-memory swizzle.
  tensor_map_l2_promotion l2_promotion = tensor_map_l2_promotion::none;  ///< L2 promotion.
  tensor_map_oob_fill oob_fill = tensor_map_oob_fill::zero;              ///< Out-of-bounds fill.
};

/// @brief Checks @p desc against every rule the driver documents for `cuTensorMapEncodeTiled`,
/// without calling the driver (it works with no driver at all).
///
/// The first rule broken throws, with a message naming the field, the dimension index, the value
/// and what is allowed: the rank (1..5, 3..5 with interleave); the address alignment (16 bytes, 32
/// with the 32-byte interleave or a 16-byte-aligned packed type); each global dimension (1..2^32; a
/// multiple of 128, or of 2, for the packed types); each stride (a multiple of 16, or 32, below 2^40,
/// and without interleave at least one innermost row, as the driver's layout formula implies); each
/// box dimension (1..256; the inner one a multiple of 16 bytes without interleave, 128 for the
/// 16-byte-aligned packed types); each element stride (1..8); the swizzle (the 32-byte swizzle with
/// the 32-byte interleave; without interleave, the box's inner dimension within the swizzle span; the
/// swizzles a packed type supports); the NaN fill (floating-point types only); and every enumerator.
///
/// @code
/// desc.global_strides[0] = 1000;
/// try {
///   cudrv::validate(desc);
/// } catch (const cudrv::invalid_argument_error& e) {
///   std::cerr << e.what() << '\n';   // ... global_strides[0] = 1000 bytes must be a multiple of 16 ...
/// }
/// @endcode
/// @param desc the description to check
/// @throws invalid_argument_error for the first rule @p desc breaks
void validate(const tiled_tensor_map_desc& desc);

/// @brief Checks @p desc against every rule the driver documents for `cuTensorMapEncodeIm2col`,
/// without calling the driver.
///
/// The rules are those of the tiled form for the data type, address, dimensions, strides, element
/// strides, interleave, swizzle (with `channels_per_pixel` as the box's inner dimension) and fill,
/// plus: a rank of 3 to 5; pixel-box corner offsets within the range of the rank ([-32768, 32767],
/// [-128, 127], [-16, 15]); a box that is not empty along any spatial dimension; 1 to 256 channels
/// per pixel (exactly 128 for the 16-byte-aligned packed types); and 1 to 1024 pixels per column.
///
/// @code
/// desc.pixel_box_lower_corner[0] = -200;   // rank 4 allows [-128, 127]
/// cudrv::validate(desc);                   // throws invalid_argument_error
/// @endcode
/// @param desc the description to check
/// @throws invalid_argument_error for the first rule @p desc breaks
void validate(const im2col_tensor_map_desc& desc);

/// @brief Validates @p desc (see @ref validate(const tiled_tensor_map_desc&)), then encodes it with
/// `cuTensorMapEncodeTiled`.
///
/// When no context is current, the driver call runs in the context that owns @p desc's address (or
/// in device 0's primary context); the caller's current context is left as it was.
/// @code
/// cudrv::tensor_map map = cudrv::make_tiled_tensor_map(desc);
/// @endcode
/// @param desc the tensor and its box
/// @return the encoded map
/// @throws invalid_argument_error when @p desc breaks a documented rule (no driver call is made)
/// @throws error when the driver refuses the description; the context describes it
[[nodiscard]] tensor_map make_tiled_tensor_map(const tiled_tensor_map_desc& desc);

/// @brief Validates @p desc (see @ref validate(const im2col_tensor_map_desc&)), then encodes it with
/// `cuTensorMapEncodeIm2col`, like @ref make_tiled_tensor_map(const tiled_tensor_map_desc&).
/// @code
/// cudrv::tensor_map map = cudrv::make_im2col_tensor_map(desc);
/// @endcode
/// @param desc the tensor and its pixel box
/// @return the encoded map
/// @throws invalid_argument_error when @p desc breaks a documented rule (no driver call is made)
/// @throws error when the driver refuses the description
[[nodiscard]] tensor_map make_im2col_tensor_map(const im2col_tensor_map_desc& desc);

namespace detail {
/// @brief The dense strides and the size checks of the typed overloads (internal); returns the
/// number of elements the dimensions describe.
std::uint64_t dense_tensor_strides(const char* api, std::size_t rank, const std::uint64_t* dims,
                                   std::size_t element_size, std::size_t span_size, std::uint64_t* strides);

/// @brief The part of a typed overload's description common to both forms (internal): the data type,
/// rank, address, dimensions, dense strides and options of the dense tensor @p tensor.
template <class Desc, class T, std::size_t Rank>
Desc dense_tensor_map_desc(const char* api, device_span<T> tensor, const std::uint64_t (&global_dims)[Rank],
                           const tensor_map_options& options) {
  Desc desc{};
  desc.data_type = tensor_map_data_type_of<std::remove_cv_t<T>>;
  desc.rank = static_cast<std::uint32_t>(Rank);
  desc.global_address = tensor.data();
  for (std::size_t i = 0; i < Rank; ++i) {
    desc.global_dims[i] = global_dims[i];
  }
  dense_tensor_strides(api, Rank, desc.global_dims.data(), sizeof(T), tensor.size(), desc.global_strides.data());
  desc.swizzle = options.swizzle;
  desc.l2_promotion = options.l2_promotion;
  desc.oob_fill = options.oob_fill;
  return desc;
}
}  // namespace detail

/// @brief Encodes a tiled map of the dense (unpadded) tensor @p tensor: the data type comes from
/// @ref tensor_map_data_type_of, the strides from @p global_dims.
///
/// Both lists are innermost first and must have the same length, the rank (1 to 5).
/// @code
/// cudrv::device_buffer<float> m(dev, 512 * 1024);            // 512 rows of 1024 floats
/// auto map = cudrv::make_tiled_tensor_map(m.view(), {1024, 512}, {32, 16},
///                                         {.swizzle = cudrv::tensor_map_swizzle::bytes_128});
/// @endcode
/// @param tensor the tensor's memory; it must hold at least the product of @p global_dims elements
/// @param global_dims elements per dimension, innermost first
/// @param box_dims the box, innermost first
/// @param options swizzle, L2 promotion and out-of-bounds fill
/// @return the encoded map
/// @throws invalid_argument_error when @p tensor is too small or a documented rule is broken
/// @throws error when the driver refuses the description
template <class T, std::size_t Rank>
requires(Rank >= 1 && Rank <= 5) [[nodiscard]] tensor_map
    make_tiled_tensor_map(device_span<T> tensor, const std::uint64_t (&global_dims)[Rank],
                          const std::uint32_t (&box_dims)[Rank], const tensor_map_options& options = {}) {
  static_assert(detail::tensor_map_element_size(tensor_map_data_type_of<std::remove_cv_t<T>>) == sizeof(T),
                "cudrv::make_tiled_tensor_map: sizeof(T) differs from the size of its tensor map data type");
  auto desc = detail::dense_tensor_map_desc<tiled_tensor_map_desc>("cudrv::make_tiled_tensor_map", tensor, global_dims,
                                                                   options);
  for (std::size_t i = 0; i < Rank; ++i) {
    desc.box_dims[i] = box_dims[i];
  }
  return make_tiled_tensor_map(desc);
}

/// @brief Encodes an im2col map of the dense NWC, NHWC or NDHWC tensor @p tensor (rank 3, 4 or 5):
/// the data type comes from @ref tensor_map_data_type_of, the strides from @p global_dims.
///
/// @code
/// // NHWC float: N = 8, H = W = 32, C = 32; a 3 x 3 filter with padding 1.
/// cudrv::device_buffer<float> x(dev, 8 * 32 * 32 * 32);
/// auto map = cudrv::make_im2col_tensor_map(x.view(), {32, 32, 32, 8}, {-1, -1}, {-1, -1},
///                                          32, 64, {.swizzle = cudrv::tensor_map_swizzle::bytes_128});
/// @endcode
/// @param tensor the tensor's memory; it must hold at least the product of @p global_dims elements
/// @param global_dims elements per dimension, innermost first: C, W, (H, (D,)) N
/// @param lower_corner the pixel box's lower corner per spatial dimension, W first
/// @param upper_corner the pixel box's upper corner per spatial dimension, W first
/// @param channels_per_pixel elements read along C per pixel (1 to 256)
/// @param pixels_per_column pixels read per column (1 to 1024)
/// @param options swizzle, L2 promotion and out-of-bounds fill
/// @return the encoded map
/// @throws invalid_argument_error when @p tensor is too small or a documented rule is broken
/// @throws error when the driver refuses the description
template <class T, std::size_t Rank>
requires(Rank >= 3 && Rank <= 5) [[nodiscard]] tensor_map
    make_im2col_tensor_map(device_span<T> tensor, const std::uint64_t (&global_dims)[Rank],
                           const int (&lower_corner)[Rank - 2], const int (&upper_corner)[Rank - 2],
                           std::uint32_t channels_per_pixel, std::uint32_t pixels_per_column,
                           const tensor_map_options& options = {}) {
  static_assert(detail::tensor_map_element_size(tensor_map_data_type_of<std::remove_cv_t<T>>) == sizeof(T),
                "cudrv::make_im2col_tensor_map: sizeof(T) differs from the size of its tensor map data type");
  auto desc = detail::dense_tensor_map_desc<im2col_tensor_map_desc>("cudrv::make_im2col_tensor_map", tensor,
                                                                    global_dims, options);
  for (std::size_t i = 0; i < Rank - 2; ++i) {
    desc.pixel_box_lower_corner[i] = lower_corner[i];
    desc.pixel_box_upper_corner[i] = upper_corner[i];
  }
  desc.channels_per_pixel = channels_per_pixel;
  desc.pixels_per_column = pixels_per_column;
  return make_im2col_tensor_map(desc);
}

}  // namespace cudrv
