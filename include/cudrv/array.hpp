/// @file array.hpp
/// @brief CUDA arrays, the opaque texture-memory layouts that textures and surfaces read and write:
/// the owning @ref cudrv::array and @ref cudrv::mipmapped_array, their views @ref cudrv::array_ref and
/// @ref cudrv::mipmapped_array_ref, their shapes and formats, and @ref cudrv::copy to and from them.
///
/// An array is typed on its element (`cudrv::array<float4>`: four float channels); the channel format
/// and count are derived from the type at compile time (`cudrv::array_element_traits`).
/// `cudrv::array<>` (element `void`) is the untyped form, whose format is given at run time.
///
/// Layer: memory (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>
#include <vector_types.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "cudrv/context.hpp"
#include "cudrv/copy.hpp"
#include "cudrv/detail/exchange.hpp"
#include "cudrv/device.hpp"
#include "cudrv/span.hpp"
#include "cudrv/stream.hpp"

namespace cudrv {

// --- element formats -----------------------------------------------------------------------------

/// @brief The channel format and channel count of an array element (`CUarray_format`, 1, 2 or 4
/// channels). Two formats are equal when both members are.
struct array_format {
  CUarray_format format = CU_AD_FORMAT_FLOAT;  ///< The type of one channel.
  unsigned int channels = 1;                   ///< Channels per element: 1, 2 or 4.

  /// @brief Bytes of one channel of @p f: 1, 2 or 4, or 0 for a format cudrv does not describe
  /// (block-compressed and planar formats).
  [[nodiscard]] static constexpr std::size_t channel_size(CUarray_format f) noexcept {
    switch (f) {
      case CU_AD_FORMAT_UNSIGNED_INT8:
      case CU_AD_FORMAT_SIGNED_INT8: return 1;
      case CU_AD_FORMAT_UNSIGNED_INT16:
      case CU_AD_FORMAT_SIGNED_INT16:
      case CU_AD_FORMAT_HALF: return 2;
      case CU_AD_FORMAT_UNSIGNED_INT32:
      case CU_AD_FORMAT_SIGNED_INT32:
      case CU_AD_FORMAT_FLOAT: return 4;
      default: return 0;
    }
  }
  /// @brief Bytes of one element (channel size × channels); 0 for a format cudrv does not describe.
  [[nodiscard]] constexpr std::size_t element_size() const noexcept { return channel_size(format) * channels; }
  /// @brief Whether the channels are integers (8, 16 or 32 bits), not floating point.
  [[nodiscard]] constexpr bool is_integer() const noexcept {
    return format != CU_AD_FORMAT_FLOAT && format != CU_AD_FORMAT_HALF && channel_size(format) != 0;
  }
  /// @brief Formats compare member by member.
  [[nodiscard]] friend constexpr bool operator==(const array_format& a, const array_format& b) noexcept {
    return a.format == b.format && a.channels == b.channels;
  }
};

/// @brief The array format of the element type @p T: specialised for `float`, `float2`, `float4`,
/// and the 8-, 16- and 32-bit signed and unsigned integers with 1, 2 or 4 channels (`std::uint8_t`,
/// `uchar2`, `uchar4`, `std::int16_t`, `short2`, ..., `std::uint32_t`, `uint2`, `uint4`).
///
/// Specialise it for an element type of your own, for instance a half-precision type:
/// @code
/// template <> struct cudrv::array_element_traits<__half> {
///   static constexpr array_format format{CU_AD_FORMAT_HALF, 1};
/// };
/// @endcode
template <class T>
struct array_element_traits {};

/// @cond CUDRV_INTERNAL
#define CUDRV_ARRAY_ELEMENT(type, fmt, n)         \
  template <>                                     \
  struct array_element_traits<type> {             \
    static constexpr array_format format{fmt, n}; \
  };
CUDRV_ARRAY_ELEMENT(float, CU_AD_FORMAT_FLOAT, 1)
CUDRV_ARRAY_ELEMENT(float2, CU_AD_FORMAT_FLOAT, 2)
CUDRV_ARRAY_ELEMENT(float4, CU_AD_FORMAT_FLOAT, 4)
CUDRV_ARRAY_ELEMENT(std::int8_t, CU_AD_FORMAT_SIGNED_INT8, 1)
CUDRV_ARRAY_ELEMENT(char2, CU_AD_FORMAT_SIGNED_INT8, 2)
CUDRV_ARRAY_ELEMENT(char4, CU_AD_FORMAT_SIGNED_INT8, 4)
CUDRV_ARRAY_ELEMENT(std::uint8_t, CU_AD_FORMAT_UNSIGNED_INT8, 1)
CUDRV_ARRAY_ELEMENT(uchar2, CU_AD_FORMAT_UNSIGNED_INT8, 2)
CUDRV_ARRAY_ELEMENT(uchar4, CU_AD_FORMAT_UNSIGNED_INT8, 4)
CUDRV_ARRAY_ELEMENT(std::int16_t, CU_AD_FORMAT_SIGNED_INT16, 1)
CUDRV_ARRAY_ELEMENT(short2, CU_AD_FORMAT_SIGNED_INT16, 2)
CUDRV_ARRAY_ELEMENT(short4, CU_AD_FORMAT_SIGNED_INT16, 4)
CUDRV_ARRAY_ELEMENT(std::uint16_t, CU_AD_FORMAT_UNSIGNED_INT16, 1)
CUDRV_ARRAY_ELEMENT(ushort2, CU_AD_FORMAT_UNSIGNED_INT16, 2)
CUDRV_ARRAY_ELEMENT(ushort4, CU_AD_FORMAT_UNSIGNED_INT16, 4)
CUDRV_ARRAY_ELEMENT(std::int32_t, CU_AD_FORMAT_SIGNED_INT32, 1)
CUDRV_ARRAY_ELEMENT(int2, CU_AD_FORMAT_SIGNED_INT32, 2)
CUDRV_ARRAY_ELEMENT(int4, CU_AD_FORMAT_SIGNED_INT32, 4)
CUDRV_ARRAY_ELEMENT(std::uint32_t, CU_AD_FORMAT_UNSIGNED_INT32, 1)
CUDRV_ARRAY_ELEMENT(uint2, CU_AD_FORMAT_UNSIGNED_INT32, 2)
CUDRV_ARRAY_ELEMENT(uint4, CU_AD_FORMAT_UNSIGNED_INT32, 4)
#undef CUDRV_ARRAY_ELEMENT
/// @endcond

/// @brief An element type an array can hold: `cudrv::array_element_traits` names its format, and its
/// size is that of the format (so `cudrv::array<double>` does not compile).
template <class T>
concept array_element = requires {
  { array_element_traits<T>::format } -> std::convertible_to<array_format>;
}
&&sizeof(T) == array_element_traits<T>::format.element_size() && std::is_trivially_copyable_v<T>;

/// @brief The format of @p T (see `cudrv::array_element_traits`).
template <array_element T>
inline constexpr array_format array_format_of = array_element_traits<T>::format;

// --- shapes ----------------------------------------------------------------------------------------

/// @brief The kinds of array: dimensions, layers, cube maps.
enum class array_kind {
  one_d,            ///< A row of `width` elements.
  two_d,            ///< `width` × `height` elements.
  three_d,          ///< `width` × `height` × `depth` elements.
  layered_one_d,    ///< `layers` rows of `width` elements, sampled one layer at a time.
  layered_two_d,    ///< `layers` images of `width` × `height`, sampled one layer at a time.
  cubemap,          ///< Six square faces of `width` × `width`.
  cubemap_layered,  ///< `layers` cube maps (6 × `layers` faces).
};

/// @brief Extra uses of an array (the `CUDA_ARRAY3D_*` flags besides layers and cube maps).
enum class array_flags : unsigned int {
  none = 0,                                        ///< Textures only.
  surface_load_store = CUDA_ARRAY3D_SURFACE_LDST,  ///< Also bound to surfaces (@ref surface_object).
  texture_gather = CUDA_ARRAY3D_TEXTURE_GATHER,    ///< Read with `tex2Dgather` (2-D arrays only).
};

/// @brief Combines array flags.
[[nodiscard]] constexpr array_flags operator|(array_flags a, array_flags b) noexcept {
  return static_cast<array_flags>(static_cast<unsigned int>(a) | static_cast<unsigned int>(b));
}
/// @brief Intersects array flags.
[[nodiscard]] constexpr array_flags operator&(array_flags a, array_flags b) noexcept {
  return static_cast<array_flags>(static_cast<unsigned int>(a) & static_cast<unsigned int>(b));
}

/// @brief The shape of an array, made with one of the named constructors.
///
/// Copies address an array as `width` × @ref rows × @ref slices elements: a 1-D array has one row; the
/// slices are the depth of a 3-D array, the layers of a layered one, and the faces of a cube map
/// (face `f` of cube `c` of a layered cube map is slice `6 c + f`).
/// @code
/// auto img = cudrv::array_shape::two_d(1920, 1080);
/// auto stack = cudrv::array_shape::layered_two_d(256, 256, 16);   // 16 layers
/// @endcode
struct array_shape {
  array_kind kind = array_kind::one_d;  ///< Dimensions, layers, cube maps.
  std::size_t width = 0;                ///< Elements per row.
  std::size_t height = 0;               ///< Rows (0 for the 1-D kinds).
  std::size_t depth = 0;                ///< Slices of a 3-D array (0 for the other kinds).
  std::size_t layers = 0;               ///< Layers of the layered kinds (0 for the others).

  /// @brief A 1-D array of @p width elements.
  [[nodiscard]] static constexpr array_shape one_d(std::size_t width) noexcept {
    return {array_kind::one_d, width, 0, 0, 0};
  }
  /// @brief A 2-D array of @p width × @p height elements.
  [[nodiscard]] static constexpr array_shape two_d(std::size_t width, std::size_t height) noexcept {
    return {array_kind::two_d, width, height, 0, 0};
  }
  /// @brief A 3-D array of @p width × @p height × @p depth elements.
  [[nodiscard]] static constexpr array_shape three_d(std::size_t width, std::size_t height,
                                                     std::size_t depth) noexcept {
    return {array_kind::three_d, width, height, depth, 0};
  }
  /// @brief @p layers 1-D layers of @p width elements.
  [[nodiscard]] static constexpr array_shape layered_one_d(std::size_t width, std::size_t layers) noexcept {
    return {array_kind::layered_one_d, width, 0, 0, layers};
  }
  /// @brief @p layers 2-D layers of @p width × @p height elements.
  [[nodiscard]] static constexpr array_shape layered_two_d(std::size_t width, std::size_t height,
                                                           std::size_t layers) noexcept {
    return {array_kind::layered_two_d, width, height, 0, layers};
  }
  /// @brief A cube map of six @p side × @p side faces.
  [[nodiscard]] static constexpr array_shape cubemap(std::size_t side) noexcept {
    return {array_kind::cubemap, side, side, 0, 0};
  }
  /// @brief @p layers cube maps of six @p side × @p side faces.
  [[nodiscard]] static constexpr array_shape cubemap_layered(std::size_t side, std::size_t layers) noexcept {
    return {array_kind::cubemap_layered, side, side, 0, layers};
  }

  /// @brief Rows per slice as copies address them: `height`, or 1 for the 1-D kinds.
  [[nodiscard]] constexpr std::size_t rows() const noexcept {
    return kind == array_kind::one_d || kind == array_kind::layered_one_d ? 1 : height;
  }
  /// @brief Slices as copies address them: the depth, the layers, or the faces (6 per cube).
  [[nodiscard]] constexpr std::size_t slices() const noexcept {
    switch (kind) {
      case array_kind::three_d: return depth;
      case array_kind::layered_one_d:
      case array_kind::layered_two_d: return layers;
      case array_kind::cubemap: return 6;
      case array_kind::cubemap_layered: return 6 * layers;
      default: return 1;
    }
  }
  /// @brief Elements in the whole array (width × rows × slices).
  [[nodiscard]] constexpr std::size_t element_count() const noexcept { return width * rows() * slices(); }
  /// @brief Shapes compare member by member.
  [[nodiscard]] friend constexpr bool operator==(const array_shape&, const array_shape&) noexcept = default;
};

/// @brief Everything the driver needs to make an array: element format, shape and flags, convertible
/// to and from the driver's `CUDA_ARRAY3D_DESCRIPTOR`.
struct array_description {
  array_format format{};                  ///< The element format.
  array_shape shape{};                    ///< The shape.
  array_flags flags = array_flags::none;  ///< Surface and gather uses.

  /// @brief The driver's descriptor (`Depth` counts layers or faces; `Flags` has the layered and cube-map bits).
  [[nodiscard]] CUDA_ARRAY3D_DESCRIPTOR native() const noexcept;
  /// @brief The description of a driver descriptor (the inverse of @ref native).
  [[nodiscard]] static array_description from_native(const CUDA_ARRAY3D_DESCRIPTOR& d) noexcept;
  /// @brief Descriptions compare member by member.
  [[nodiscard]] friend constexpr bool operator==(const array_description&, const array_description&) noexcept = default;
};

// --- arrays ----------------------------------------------------------------------------------------

template <class T>
class array_ref;
template <class T>
class array;

namespace detail {
/// @brief Creates an array in @p ctx after checking @p d and the device's limits (internal).
CUarray create_array(CUcontext ctx, const array_description& d);
/// @brief Destroys an array of context @p ctx, or reports that the context went first (internal).
void destroy_array(CUarray handle, const context_token& ctx) noexcept;
/// @brief The description the driver gives for @p handle (cuArray3DGetDescriptor, internal).
array_description query_array(CUarray handle);
/// @brief Throws invalid_argument_error when @p actual is not @p expected (internal).
void check_array_format(const char* api, const array_format& expected, const array_format& actual);
/// @brief Throws invalid_argument_error naming @p api: the array handle is null (internal).
[[noreturn]] void throw_empty_array(const char* api);

/// @brief The format of @p T, or nothing for the untyped `void` (internal).
template <class T>
struct element_format {
  static constexpr bool typed = true;
  static constexpr array_format value = array_format_of<T>;
};
template <>
struct element_format<void> {
  static constexpr bool typed = false;
  static constexpr array_format value{};
};
}  // namespace detail

/// @brief What every array handle holds and offers, shared by @ref cudrv::array_ref and
/// @ref cudrv::array. Not constructible or assignable on its own (see @ref cudrv::context_base).
class array_base {
 public:
  /// @brief The raw handle (also usable as a `cudaArray_t`).
  [[nodiscard]] constexpr CUarray native_handle() const noexcept { return handle_; }
  /// @brief Format, shape and flags, as the array was made (no driver call).
  [[nodiscard]] constexpr const array_description& description() const noexcept { return description_; }
  /// @brief The element format.
  [[nodiscard]] constexpr array_format format() const noexcept { return description_.format; }
  /// @brief The shape.
  [[nodiscard]] constexpr const array_shape& shape() const noexcept { return description_.shape; }
  /// @brief The flags.
  [[nodiscard]] constexpr array_flags flags() const noexcept { return description_.flags; }
  /// @brief Elements per row.
  [[nodiscard]] constexpr std::size_t width() const noexcept { return description_.shape.width; }
  /// @brief Rows per slice as copies address them (1 for 1-D kinds).
  [[nodiscard]] constexpr std::size_t rows() const noexcept { return description_.shape.rows(); }
  /// @brief Slices as copies address them (depth, layers or faces).
  [[nodiscard]] constexpr std::size_t slices() const noexcept { return description_.shape.slices(); }
  /// @brief The context the array was made in, when known (null for a view of an adopted handle).
  [[nodiscard]] constexpr CUcontext context_handle() const noexcept { return context_; }
  /// @brief The description the driver reports for the array (cuArray3DGetDescriptor).
  /// @throws invalid_argument_error for an empty owner
  [[nodiscard]] array_description query_description() const;

  /// @brief Two handles are equal when they name the same array (views and owners alike).
  [[nodiscard]] friend constexpr bool operator==(const array_base& a, const array_base& b) noexcept {
    return a.handle_ == b.handle_;
  }

 protected:
  /// @brief Holds @p handle, described by @p d, made in @p ctx.
  constexpr array_base(CUarray handle, const array_description& d, CUcontext ctx) noexcept
      : handle_(handle), description_(d), context_(ctx) {}
  /// @brief Copies the handle (for the view).
  constexpr array_base(const array_base&) noexcept = default;
  /// @brief Copies the handle (for the view).
  constexpr array_base& operator=(const array_base&) noexcept = default;
  ~array_base() = default;
  /// @brief The handle; null only in a moved-from owner.
  CUarray handle_;
  /// @brief Format, shape and flags.
  array_description description_;
  /// @brief The context the array belongs to, or null when not known.
  CUcontext context_;
};

/// @brief A non-owning view of a CUDA array of elements @p T (`void`: untyped). Trivially copyable;
/// valid while the array it views lives. Typed views convert to the untyped view.
///
/// @code
/// cudrv::array<float> img(dev, cudrv::array_shape::two_d(640, 480));
/// cudrv::array_ref<float> view = img;                        // what copies and textures take
/// auto adopted = cudrv::array_ref<>::from_native_handle(raw);  // format from cuArray3DGetDescriptor
/// @endcode
template <class T = void>
class array_ref : public array_base {
 public:
  /// @brief The element type (`void` for the untyped view).
  using element_type = T;

  /// @brief Views @p handle, described by @p d, of context @p ctx (null when not known). No driver call.
  /// @throws invalid_argument_error when @p d's format is not that of @p T
  array_ref(CUarray handle, const array_description& d, CUcontext ctx = nullptr) : array_base(handle, d, ctx) {
    if constexpr (detail::element_format<T>::typed) {
      detail::check_array_format("cudrv::array_ref", detail::element_format<T>::value, d.format);
    }
  }
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  array_ref(std::nullptr_t) = delete;
  array_ref(int) = delete;
  /// @}
  /// @brief Views the same array as @p other.
  constexpr array_ref(const array_ref& other) noexcept = default;
  /// @brief Views the array @p other views.
  constexpr array_ref& operator=(const array_ref& other) noexcept = default;
  /// @brief The untyped view of the same array.
  constexpr operator array_ref<void>() const noexcept  // NOLINT: implicit on purpose
      requires(!std::is_void_v<T>) {
    return array_ref<void>::unchecked(handle_, description_, context_);
  }

  /// @brief Views an array made elsewhere; its description comes from the driver (cuArray3DGetDescriptor).
  /// @throws invalid_argument_error when the array's format is not that of @p T
  [[nodiscard]] static array_ref from_native_handle(CUarray handle, CUcontext ctx = nullptr) {
    return array_ref(handle, detail::query_array(handle), ctx);
  }
  /// @brief The typed view of this untyped view.
  /// @throws invalid_argument_error when the format is not that of @p U
  template <array_element U>
  [[nodiscard]] array_ref<U> as() const requires std::is_void_v<T> {
    return array_ref<U>(handle_, description_, context_);
  }

 private:
  template <class>
  friend class array_ref;
  template <class>
  friend class array;
  template <class>
  friend class mipmapped_array_ref;
  template <class>
  friend class mipmapped_array;
  friend class mipmapped_array_base;
  // A private tag, hidden: Doxygen 1.9 would link the class page to a section it leaves out.
  /// @cond
  struct unchecked_tag {};
  /// @endcond
  constexpr array_ref(unchecked_tag, CUarray handle, const array_description& d, CUcontext ctx) noexcept
      : array_base(handle, d, ctx) {}
  static constexpr array_ref unchecked(CUarray handle, const array_description& d, CUcontext ctx) noexcept {
    return array_ref(unchecked_tag{}, handle, d, ctx);
  }
};

/// @brief An owning CUDA array of elements @p T (`cudrv::array<>`: untyped, format given at run
/// time), made with cuArray3DCreate in a context and destroyed with cuArrayDestroy. Move-only;
/// converts to @ref array_ref (it is not one).
///
/// The shape is checked before the driver is called, against its kind (a cube map is square, texture
/// gather is for 2-D arrays) and against the device's limits (`CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE*`,
/// and `..._SURFACE*` with @ref array_flags::surface_load_store): an error names the limit exceeded.
/// The contents are not initialised. An array whose context was destroyed first (which destroyed the
/// array) destroys nothing and tells the destruction handler.
/// @code
/// cudrv::array<float4> img(dev, cudrv::array_shape::two_d(1024, 768), cudrv::array_flags::surface_load_store);
/// cudrv::copy(img, host_pixels, stream);           // 1024 × 768 float4 from a std::vector<float4>
/// cudrv::array<> raw(dev, {CU_AD_FORMAT_HALF, 4}, cudrv::array_shape::one_d(4096));   // untyped
/// @endcode
template <class T = void>
class array : public array_base {
 public:
  /// @brief The element type (`void` for the untyped array).
  using element_type = T;

  /// @brief Makes an array of @p shape in @p dev's primary context.
  /// @throws invalid_argument_error for a shape its kind or the device's limits refuse
  array(const device& dev, const array_shape& shape, array_flags flags = array_flags::none) requires(!std::is_void_v<T>)
      : array(dev.primary_context(), shape, flags) {}
  /// @brief Makes an array of @p shape in @p ctx.
  /// @throws invalid_argument_error for a shape its kind or the device's limits refuse
  array(context_ref ctx, const array_shape& shape, array_flags flags = array_flags::none) requires(!std::is_void_v<T>)
      : array(ctx, array_description{detail::element_format<T>::value, shape, flags}) {}
  /// @brief Makes an untyped array of @p format in @p dev's primary context.
  array(const device& dev, const array_format& format, const array_shape& shape,
        array_flags flags = array_flags::none) requires std::is_void_v<T>
      : array(dev.primary_context(), array_description{format, shape, flags}) {}
  /// @brief Makes an untyped array of @p format in @p ctx.
  array(context_ref ctx, const array_format& format, const array_shape& shape,
        array_flags flags = array_flags::none) requires std::is_void_v<T>
      : array(ctx, array_description{format, shape, flags}) {}
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the temporary owner would be destroyed at the end of the statement, before this object.
  array(cudrv::context&&, const array_shape&, array_flags = array_flags::none) = delete;
  /// @brief Refused: the temporary owner would be destroyed at the end of the statement, before this object.
  array(cudrv::primary_context&&, const array_shape&, array_flags = array_flags::none) = delete;
  array(const array&) = delete;
  array& operator=(const array&) = delete;
  /// @}
  /// @brief Takes over @p other's array; @p other becomes empty.
  array(array&& other) noexcept
      : array_base(cudrv::detail::exchange(other.handle_, nullptr), cudrv::detail::exchange(other.description_, {}),
                   cudrv::detail::exchange(other.context_, nullptr)),
        token_(cudrv::detail::exchange(other.token_, {})) {}
  /// @brief Destroys the held array, then takes over @p other's.
  array& operator=(array&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = cudrv::detail::exchange(other.handle_, nullptr);
      description_ = cudrv::detail::exchange(other.description_, {});
      context_ = cudrv::detail::exchange(other.context_, nullptr);
      token_ = cudrv::detail::exchange(other.token_, {});
    }
    return *this;
  }
  /// @brief Destroys the array; errors go to the destruction handler.
  ~array() { reset(); }

  /// @brief Takes ownership of @p handle, an array of context @p ctx (described by the driver).
  /// @throws invalid_argument_error when the array's format is not that of @p T
  [[nodiscard]] static array from_native_handle(CUarray handle, context_ref ctx) {
    array out(handle, detail::query_array(handle), detail::context_token::of(ctx.native_handle()));
    if constexpr (detail::element_format<T>::typed) {
      detail::check_array_format("cudrv::array::from_native_handle", detail::element_format<T>::value,
                                 out.description_.format);
    }
    return out;
  }
  /// @brief Gives up ownership; the caller must destroy the returned array with cuArrayDestroy.
  [[nodiscard]] CUarray release() noexcept {
    description_ = {};
    context_ = nullptr;
    token_ = {};
    return cudrv::detail::exchange(handle_, nullptr);
  }
  /// @brief Destroys the array now; the object becomes empty.
  void reset() noexcept {
    if (handle_ != nullptr) {
      detail::destroy_array(cudrv::detail::exchange(handle_, nullptr), cudrv::detail::exchange(token_, {}));
      description_ = {};
      context_ = nullptr;
    }
  }
  /// @brief Whether this object holds an array (false after a move or @ref release).
  [[nodiscard]] explicit operator bool() const noexcept { return handle_ != nullptr; }
  /// @brief A view of the array.
  operator array_ref<T>() const& noexcept {  // NOLINT: implicit on purpose
    return array_ref<T>::unchecked(handle_, description_, context_);
  }
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the view would outlive the temporary array.
  operator array_ref<T>() const&& = delete;
  /// @}
  /// @brief The untyped view of the array.
  operator array_ref<void>() const& noexcept  // NOLINT: implicit on purpose
      requires(!std::is_void_v<T>) {
    return array_ref<void>::unchecked(handle_, description_, context_);
  }
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the view would outlive the temporary array.
  operator array_ref<void>() const&& requires(!std::is_void_v<T>) = delete;
  /// @}
  /// @brief A view of the array (the same as the conversion).
  [[nodiscard]] array_ref<T> view() const& noexcept { return *this; }
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the view would outlive the temporary array.
  array_ref<T> view() const&& = delete;
  /// @}
  /// @brief The context the array was made in.
  /// @throws invalid_argument_error for an empty owner
  [[nodiscard]] context_ref context() const {
    if (handle_ == nullptr) {
      detail::throw_empty_array("cudrv::array::context");
    }
    return context_ref(context_);
  }

 private:
  array(context_ref ctx, const array_description& d)
      : array_base(nullptr, d, ctx.native_handle()), token_(detail::context_token::of(ctx.native_handle())) {
    handle_ = detail::create_array(ctx.native_handle(), d);
  }
  array(CUarray handle, const array_description& d, detail::context_token token) noexcept
      : array_base(handle, d, token.handle), token_(token) {}
  detail::context_token token_;
};

// --- mipmapped arrays -------------------------------------------------------------------------------

namespace detail {
/// @brief Creates a mipmapped array in @p ctx after the checks of @ref create_array (internal).
CUmipmappedArray create_mipmapped_array(CUcontext ctx, const array_description& d, unsigned int levels);
/// @brief Destroys a mipmapped array, or reports that its context went first (internal).
void destroy_mipmapped_array(CUmipmappedArray handle, const context_token& ctx) noexcept;
/// @brief Level @p level of a mipmapped array (cuMipmappedArrayGetLevel) with its description (internal).
CUarray mipmapped_level(CUmipmappedArray handle, unsigned int levels, unsigned int level, const array_description& d,
                        array_description* out);
}  // namespace detail

/// @brief What every mipmapped-array handle holds and offers, shared by the view
/// @ref cudrv::mipmapped_array_ref and the owner @ref cudrv::mipmapped_array.
class mipmapped_array_base {
 public:
  /// @brief The raw handle (also usable as a `cudaMipmappedArray_t`).
  [[nodiscard]] constexpr CUmipmappedArray native_handle() const noexcept { return handle_; }
  /// @brief Format, shape (of level 0) and flags.
  [[nodiscard]] constexpr const array_description& description() const noexcept { return description_; }
  /// @brief The number of levels.
  [[nodiscard]] constexpr unsigned int levels() const noexcept { return levels_; }
  /// @brief The context the array was made in, when known.
  [[nodiscard]] constexpr CUcontext context_handle() const noexcept { return context_; }
  /// @brief Two handles are equal when they name the same mipmapped array.
  [[nodiscard]] friend constexpr bool operator==(const mipmapped_array_base& a,
                                                 const mipmapped_array_base& b) noexcept {
    return a.handle_ == b.handle_;
  }

 protected:
  /// @brief Holds @p handle.
  constexpr mipmapped_array_base(CUmipmappedArray handle, const array_description& d, unsigned int levels,
                                 CUcontext ctx) noexcept
      : handle_(handle), description_(d), levels_(levels), context_(ctx) {}
  /// @brief Copies the handle (for the view).
  constexpr mipmapped_array_base(const mipmapped_array_base&) noexcept = default;
  /// @brief Copies the handle (for the view).
  constexpr mipmapped_array_base& operator=(const mipmapped_array_base&) noexcept = default;
  ~mipmapped_array_base() = default;
  /// @brief Level @p level as an untyped view (cuMipmappedArrayGetLevel).
  [[nodiscard]] array_ref<void> untyped_level(unsigned int level) const {
    array_description d{};
    CUarray h = detail::mipmapped_level(handle_, levels_, level, description_, &d);
    return array_ref<void>::unchecked(h, d, context_);
  }
  /// @brief The handle; null only in a moved-from owner.
  CUmipmappedArray handle_;
  /// @brief Format, level-0 shape and flags.
  array_description description_;
  /// @brief The number of levels.
  unsigned int levels_;
  /// @brief The context, or null when not known.
  CUcontext context_;
};

/// @brief A non-owning view of a mipmapped array of elements @p T. Trivially copyable.
template <class T = void>
class mipmapped_array_ref : public mipmapped_array_base {
 public:
  /// @brief The element type.
  using element_type = T;
  /// @brief Views @p handle with @p levels levels described by @p d (level 0), of context @p ctx.
  /// @throws invalid_argument_error when @p d's format is not that of @p T
  mipmapped_array_ref(CUmipmappedArray handle, const array_description& d, unsigned int levels, CUcontext ctx = nullptr)
      : mipmapped_array_base(handle, d, levels, ctx) {
    if constexpr (detail::element_format<T>::typed) {
      detail::check_array_format("cudrv::mipmapped_array_ref", detail::element_format<T>::value, d.format);
    }
  }
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  mipmapped_array_ref(std::nullptr_t) = delete;
  mipmapped_array_ref(int) = delete;
  /// @}
  /// @brief Views the same array as @p other.
  constexpr mipmapped_array_ref(const mipmapped_array_ref& other) noexcept = default;
  /// @brief Views the array @p other views.
  constexpr mipmapped_array_ref& operator=(const mipmapped_array_ref& other) noexcept = default;
  /// @brief A view of level @p level (valid while the mipmapped array lives); level 0 is the largest.
  /// @throws invalid_argument_error when @p level is not below @ref levels
  [[nodiscard]] array_ref<T> level(unsigned int level) const {
    array_ref<void> l = untyped_level(level);
    return array_ref<T>::unchecked(l.native_handle(), l.description(), context_);
  }

 private:
  template <class>
  friend class mipmapped_array;
  // A private tag, hidden: Doxygen 1.9 would link the class page to a section it leaves out.
  /// @cond
  struct unchecked_tag {};
  /// @endcond
  constexpr mipmapped_array_ref(unchecked_tag, const mipmapped_array_base& b) noexcept : mipmapped_array_base(b) {}
};

/// @brief An owning mipmapped array (cuMipmappedArrayCreate / cuMipmappedArrayDestroy) of elements
/// @p T with a number of levels, each half the size of the one before (at least 1).
/// Move-only; converts to @ref mipmapped_array_ref. @ref level gives a non-owning view of one level,
/// for copies and surfaces.
/// @code
/// cudrv::mipmapped_array<float> mip(dev, cudrv::array_shape::two_d(1024, 1024), 11);  // down to 1 × 1
/// cudrv::copy(mip.level(0), host_image, stream);
/// @endcode
template <class T = void>
class mipmapped_array : public mipmapped_array_base {
 public:
  /// @brief The element type.
  using element_type = T;
  /// @brief Makes @p levels levels of @p shape (level 0) in @p dev's primary context.
  /// @throws invalid_argument_error for 0 levels or more than the largest extent allows, or a shape the
  ///   device's mipmap limits refuse
  mipmapped_array(const device& dev, const array_shape& shape, unsigned int levels,
                  array_flags flags = array_flags::none) requires(!std::is_void_v<T>)
      : mipmapped_array(dev.primary_context(), array_description{detail::element_format<T>::value, shape, flags},
                        levels) {}
  /// @brief Makes @p levels levels of @p shape in @p ctx.
  mipmapped_array(context_ref ctx, const array_shape& shape, unsigned int levels,
                  array_flags flags = array_flags::none) requires(!std::is_void_v<T>)
      : mipmapped_array(ctx, array_description{detail::element_format<T>::value, shape, flags}, levels) {}
  /// @brief Makes an untyped mipmapped array described by @p d in @p ctx.
  mipmapped_array(context_ref ctx, const array_description& d, unsigned int levels)
      : mipmapped_array_base(nullptr, d, levels, ctx.native_handle()),
        token_(detail::context_token::of(ctx.native_handle())) {
    if constexpr (detail::element_format<T>::typed) {
      detail::check_array_format("cudrv::mipmapped_array", detail::element_format<T>::value, d.format);
    }
    handle_ = detail::create_mipmapped_array(ctx.native_handle(), d, levels);
  }
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the temporary owner would be destroyed at the end of the statement, before this object.
  mipmapped_array(cudrv::context&&, const array_shape&, unsigned int, array_flags = array_flags::none) = delete;
  /// @brief Refused: the temporary owner would be destroyed at the end of the statement, before this object.
  mipmapped_array(cudrv::primary_context&&, const array_shape&, unsigned int, array_flags = array_flags::none) = delete;
  mipmapped_array(const mipmapped_array&) = delete;
  mipmapped_array& operator=(const mipmapped_array&) = delete;
  /// @}
  /// @brief Takes over @p other's array; @p other becomes empty.
  mipmapped_array(mipmapped_array&& other) noexcept
      : mipmapped_array_base(cudrv::detail::exchange(other.handle_, nullptr),
                             cudrv::detail::exchange(other.description_, {}),
                             cudrv::detail::exchange(other.levels_, 0u),
                             cudrv::detail::exchange(other.context_, nullptr)),
        token_(cudrv::detail::exchange(other.token_, {})) {}
  /// @brief Destroys the held array, then takes over @p other's.
  mipmapped_array& operator=(mipmapped_array&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = cudrv::detail::exchange(other.handle_, nullptr);
      description_ = cudrv::detail::exchange(other.description_, {});
      levels_ = cudrv::detail::exchange(other.levels_, 0u);
      context_ = cudrv::detail::exchange(other.context_, nullptr);
      token_ = cudrv::detail::exchange(other.token_, {});
    }
    return *this;
  }
  /// @brief Destroys the array; errors go to the destruction handler.
  ~mipmapped_array() { reset(); }

  /// @brief Takes ownership of @p handle, made in @p ctx with @p levels levels described by @p d.
  [[nodiscard]] static mipmapped_array from_native_handle(CUmipmappedArray handle, const array_description& d,
                                                          unsigned int levels, context_ref ctx) {
    if constexpr (detail::element_format<T>::typed) {
      detail::check_array_format("cudrv::mipmapped_array::from_native_handle", detail::element_format<T>::value,
                                 d.format);
    }
    return mipmapped_array(handle, d, levels, detail::context_token::of(ctx.native_handle()));
  }
  /// @brief Gives up ownership; the caller must destroy the array with cuMipmappedArrayDestroy.
  [[nodiscard]] CUmipmappedArray release() noexcept {
    description_ = {};
    levels_ = 0;
    context_ = nullptr;
    token_ = {};
    return cudrv::detail::exchange(handle_, nullptr);
  }
  /// @brief Destroys the array now; the object becomes empty.
  void reset() noexcept {
    if (handle_ != nullptr) {
      detail::destroy_mipmapped_array(cudrv::detail::exchange(handle_, nullptr), cudrv::detail::exchange(token_, {}));
      description_ = {};
      levels_ = 0;
      context_ = nullptr;
    }
  }
  /// @brief Whether this object holds an array.
  [[nodiscard]] explicit operator bool() const noexcept { return handle_ != nullptr; }
  /// @brief A view of the array.
  operator mipmapped_array_ref<T>() const& noexcept {  // NOLINT: implicit on purpose
    return mipmapped_array_ref<T>(typename mipmapped_array_ref<T>::unchecked_tag{}, *this);
  }
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the view would outlive the temporary array.
  operator mipmapped_array_ref<T>() const&& = delete;
  /// @}
  /// @brief A view of level @p level (valid while this array lives); level 0 is the largest.
  /// @throws invalid_argument_error when @p level is not below @ref levels, or the array is empty
  [[nodiscard]] array_ref<T> level(unsigned int level) const& {
    array_ref<void> l = untyped_level(level);
    return array_ref<T>::unchecked(l.native_handle(), l.description(), context_);
  }
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the view would outlive the temporary array.
  array_ref<T> level(unsigned int) const&& = delete;
  /// @}

 private:
  mipmapped_array(CUmipmappedArray handle, const array_description& d, unsigned int levels,
                  detail::context_token token) noexcept
      : mipmapped_array_base(handle, d, levels, token.handle), token_(token) {}
  detail::context_token token_;
};

// --- copies ----------------------------------------------------------------------------------------

/// @brief A box of an array in elements, rows and slices (see @ref array_shape for what slices are).
/// An extent of 0 means "to the end of the array" from the offset, so the default region is the
/// whole array; `array_region::slice(z)` is one slice (one layer, one face).
struct array_region {
  std::size_t x = 0;       ///< First element of each row.
  std::size_t y = 0;       ///< First row (0 for 1-D kinds).
  std::size_t z = 0;       ///< First slice: 3-D slice, layer, or face (6 × cube + face).
  std::size_t width = 0;   ///< Elements per row to copy; 0: to the end of the row.
  std::size_t height = 0;  ///< Rows to copy; 0: to the last row.
  std::size_t depth = 0;   ///< Slices to copy; 0: to the last slice.

  /// @brief All of slice (layer, face) @p z.
  [[nodiscard]] static constexpr array_region slice(std::size_t z) noexcept { return {0, 0, z, 0, 0, 1}; }
};

namespace detail {
/// @brief One side of an array copy (internal): an array and a region of it, or linear memory with
/// its pitch, rows per slice and extent in bytes.
struct array_copy_side {
  CUarray array = nullptr;
  array_description description{};
  array_region region{};
  std::uintptr_t address = 0;
  std::size_t bytes = 0;          // the linear view's size, for the checks
  std::size_t pitch = 0;          // 0: dense (the copy's row width)
  std::size_t rows = 0;           // rows per slice of a pitched layout; 0: dense
  std::size_t pitched_width = 0;  // elements per row of a pitched layout (bytes)
  std::size_t pitched_depth = 0;  // slices of a pitched layout
};
/// @brief Checks both sides and copies with cuMemcpy3DAsync on @p stream (internal).
void copy_array(array_copy_side dst, array_copy_side src, std::size_t element_size, CUstream stream);

template <class A>
struct array_view_of;
template <class T>
struct array_view_of<array_ref<T>> {
  using element = T;
};
template <class T>
struct array_view_of<array<T>> {
  using element = T;
};
/// @brief Whether @p A is an array owner or view (internal).
template <class A>
concept array_like = requires {
  typename array_view_of<std::remove_cvref_t<A>>::element;
};
/// @brief The element type of an array owner or view (internal).
template <class A>
using array_element_t = typename array_view_of<std::remove_cvref_t<A>>::element;

template <class A>
array_copy_side array_side(const A& a, const array_region& r) {
  const array_base& b = a;
  if (b.native_handle() == nullptr) {
    throw_empty_array("cudrv::copy");
  }
  return {b.native_handle(), b.description(), r};
}

template <class E, class L>
array_copy_side linear_side(L& l) {
  auto v = to_linear(l);
  using V = typename view_element<decltype(v)>::type;
  if constexpr (!std::is_void_v<E>) {
    static_assert(std::is_same_v<std::remove_cv_t<V>, std::remove_cv_t<E>>,
                  "copy needs the same element type on both sides");
  }
  static_assert(std::is_trivially_copyable_v<std::remove_cv_t<V>>, "copy needs trivially copyable elements");
  array_copy_side s;
  s.address = v.address;
  s.bytes = saturating_bytes(v.count, sizeof(V));
  return s;
}

template <class E, class U>
array_copy_side pitched_side(const pitched_span<U>& p) {
  if constexpr (!std::is_void_v<E>) {
    static_assert(std::is_same_v<std::remove_cv_t<U>, std::remove_cv_t<E>>,
                  "copy needs the same element type on both sides");
  }
  array_copy_side s;
  s.address = p.address;
  s.pitch = p.pitch;
  s.rows = p.height;
  s.pitched_width = saturating_bytes(p.width, sizeof(U));
  s.pitched_depth = p.depth;
  s.bytes = SIZE_MAX;
  return s;
}

template <class A>
std::size_t element_size_of(const A& a) {
  const array_base& b = a;
  return b.format().element_size();
}
}  // namespace detail

/// @brief Copies dense elements from @p src (a device span, a buffer or a host range) into @p region
/// of the array @p dst (the whole array by default), ordered on @p s (cuMemcpy3DAsync). The region's
/// elements are read row after row, slice after slice, from the start of @p src.
/// @code
/// cudrv::array<float> img(dev, cudrv::array_shape::two_d(w, h));
/// cudrv::copy(img, host, stream);                                        // all w × h elements
/// cudrv::copy(layered, cudrv::array_region::slice(3), one_layer, stream);  // layer 3 of a layered array
/// @endcode
/// @throws invalid_argument_error when the region leaves the array or is empty, @p src holds fewer
///   elements than the region, or a view is empty; all before the driver is called
template <detail::array_like Dst, linear_view_source Src>
void copy(Dst&& dst, const array_region& region, Src&& src, stream_ref s) {
  detail::copy_array(detail::array_side(dst, region), detail::linear_side<detail::array_element_t<Dst>>(src),
                     detail::element_size_of(dst), s.native_handle());
}
/// @brief Copies the whole array @p dst from @p src, ordered on @p s (see the region form).
template <detail::array_like Dst, linear_view_source Src>
void copy(Dst&& dst, Src&& src, stream_ref s) {
  copy(dst, array_region{}, src, s);
}
/// @brief Copies @p region of the array @p src (the whole array by default) into dense elements at
/// the start of @p dst, ordered on @p s (cuMemcpy3DAsync).
/// @throws invalid_argument_error when the region leaves the array or is empty, or @p dst holds fewer
///   elements than the region
template <linear_view_source Dst, detail::array_like Src>
void copy(Dst&& dst, Src&& src, const array_region& region, stream_ref s) {
  static_assert(!std::is_const_v<detail::element_t<Dst>>,
                "the destination of a copy must not be a view of const elements");
  detail::copy_array(detail::linear_side<detail::array_element_t<Src>>(dst), detail::array_side(src, region),
                     detail::element_size_of(src), s.native_handle());
}
/// @brief Copies the whole array @p src into dense elements at the start of @p dst, ordered on @p s.
template <linear_view_source Dst, detail::array_like Src>
void copy(Dst&& dst, Src&& src, stream_ref s) {
  copy(dst, src, array_region{}, s);
}
/// @brief Copies a pitched layout (a @ref pitched_buffer's view, or host rows with padding) into
/// @p region of the array @p dst, ordered on @p s; element (0, 0, 0) of @p src goes to the region's
/// first element.
/// @throws invalid_argument_error when the region is larger than @p src in a dimension or leaves the array
template <detail::array_like Dst, class U>
void copy(Dst&& dst, const array_region& region, pitched_span<U> src, stream_ref s) {
  detail::copy_array(detail::array_side(dst, region), detail::pitched_side<detail::array_element_t<Dst>>(src),
                     detail::element_size_of(dst), s.native_handle());
}
/// @brief Copies @p region of the array @p src into a pitched layout, ordered on @p s.
template <class U, detail::array_like Src>
void copy(pitched_span<U> dst, Src&& src, const array_region& region, stream_ref s) {
  static_assert(!std::is_const_v<U>, "the destination of a copy must not be a view of const elements");
  detail::copy_array(detail::pitched_side<detail::array_element_t<Src>>(dst), detail::array_side(src, region),
                     detail::element_size_of(src), s.native_handle());
}
/// @brief Copies @p src_region of the array @p src to the array @p dst, its first element at
/// (`dst_offset.x`, `.y`, `.z`; the extent of @p dst_offset is not used), ordered on @p s. Both arrays
/// need elements of the same size.
/// @throws invalid_argument_error when the element sizes differ, or a region leaves its array
template <detail::array_like Dst, detail::array_like Src>
void copy(Dst&& dst, const array_region& dst_offset, Src&& src, const array_region& src_region, stream_ref s) {
  using D = detail::array_element_t<Dst>;
  using S = detail::array_element_t<Src>;
  static_assert(std::is_void_v<D> || std::is_void_v<S> || std::is_same_v<D, S>,
                "copy needs the same element type on both sides");
  const std::size_t size = detail::element_size_of(src);
  if (detail::element_size_of(dst) != size) {
    detail::check_array_format("cudrv::copy", static_cast<const array_base&>(dst).format(),
                               static_cast<const array_base&>(src).format());
  }
  detail::copy_array(detail::array_side(dst, dst_offset), detail::array_side(src, src_region), size, s.native_handle());
}
/// @brief Copies the whole array @p src to the start of the array @p dst, ordered on @p s.
template <detail::array_like Dst, detail::array_like Src>
void copy(Dst&& dst, Src&& src, stream_ref s) {
  copy(dst, array_region{}, src, array_region{}, s);
}

}  // namespace cudrv
