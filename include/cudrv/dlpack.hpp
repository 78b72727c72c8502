/// @file dlpack.hpp
/// @brief DLPack interop: export cudrv memory as a `DLManagedTensorVersioned` (DLPack 1.x) or a legacy
/// `DLManagedTensor` (@ref cudrv::to_dlpack), import either into a checked, typed
/// @ref cudrv::strided_view owned by a @ref cudrv::dlpack_tensor (@ref cudrv::from_dlpack), and the
/// stream exchange of DLPack's Python protocol (@ref cudrv::dlpack_stream_exchange).
///
/// Opt-in: the umbrella `<cudrv/cudrv.hpp>` does not include this header, which needs DLPack's own
/// `<dlpack/dlpack.h>` (link the CMake target `cudrv::dlpack`, which adds the folder CMake found).
/// With a DLPack 0.x header only the legacy struct is available; with 1.0 or newer, both.
/// Header-only: nothing here is compiled into libcudrv. See docs/interop.md.
///
/// Layer: memory (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <dlpack/dlpack.h>

#include <complex>  // heavy, needed: std::complex element types map to DLPack's complex dtypes
#include <cstddef>
#include <cstdint>
#include <memory>  // heavy, needed: an export holds its owner in a std::shared_ptr, the manager in a std::unique_ptr
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cudrv/detail/exchange.hpp"
#include "cudrv/device_buffer.hpp"
#include "cudrv/error.hpp"
#include "cudrv/managed_buffer.hpp"
#include "cudrv/pinned_buffer.hpp"
#include "cudrv/pointer_attributes.hpp"
#include "cudrv/resource_buffer.hpp"
#include "cudrv/span.hpp"
#include "cudrv/stream.hpp"

#if defined(CUDRV_DOXYGEN)
/// @brief The version of the DLPack header in use, as major * 100 + minor (0.6 is 6, 1.3 is 103).
#define CUDRV_DLPACK_VERSION 103
#elif defined(DLPACK_MAJOR_VERSION)
#define CUDRV_DLPACK_VERSION (DLPACK_MAJOR_VERSION * 100 + DLPACK_MINOR_VERSION)
#elif defined(DLPACK_VERSION)
#define CUDRV_DLPACK_VERSION (DLPACK_VERSION / 10)
#else
#error "<dlpack/dlpack.h> defines neither DLPACK_MAJOR_VERSION nor DLPACK_VERSION"
#endif
/// @brief 1 when the header has `DLManagedTensorVersioned` (DLPack 1.0 or newer), else 0.
#define CUDRV_DLPACK_HAS_VERSIONED (CUDRV_DLPACK_VERSION >= 100)

namespace cudrv {

// ---------------------------------------------------------------------------------------------------
// Element types

/// @brief The DLPack data type of the element type @p T, decided at compile time (const ignored):
/// signed and unsigned integers (kDLInt / kDLUInt), `float` and `double`, `__half`, `__nv_bfloat16`,
/// `bool` (DLPack 0.8+), `__nv_fp8_e4m3` (kDLFloat8_e4m3fn) and `__nv_fp8_e5m2` (DLPack 1.1+),
/// `std::complex<float>` and `std::complex<double>`. One lane. Other types do not compile.
/// @code
/// static_assert(cudrv::dlpack_dtype<__nv_bfloat16>().code == kDLBfloat);
/// @endcode
template <class T>
[[nodiscard]] constexpr DLDataType dlpack_dtype() noexcept;

namespace detail {
constexpr DLDataType make_dtype(unsigned code, std::size_t bytes) noexcept {
  return DLDataType{static_cast<std::uint8_t>(code), static_cast<std::uint8_t>(bytes * 8), 1};
}

template <class T>
constexpr bool dlpack_supported() noexcept {
  using U = std::remove_cv_t<T>;
  return std::is_arithmetic_v<U> || std::is_same_v<U, __half> || std::is_same_v<U, __nv_bfloat16> ||
#if CUDRV_DLPACK_VERSION >= 101
         std::is_same_v<U, __nv_fp8_e4m3> || std::is_same_v<U, __nv_fp8_e5m2> ||
#endif
         std::is_same_v<U, std::complex<float>> || std::is_same_v<U, std::complex<double>>;
}
}  // namespace detail

/// @brief Whether @p T has a DLPack data type (@ref dlpack_dtype compiles for it).
template <class T>
inline constexpr bool is_dlpack_element_v = detail::dlpack_supported<T>() &&
#if CUDRV_DLPACK_VERSION < 8
                                            !std::is_same_v<std::remove_cv_t<T>, bool> &&
#endif
                                            !std::is_same_v<std::remove_cv_t<T>, long double>;

template <class T>
constexpr DLDataType dlpack_dtype() noexcept {
  using U = std::remove_cv_t<T>;
  static_assert(is_dlpack_element_v<T>, "this element type has no DLPack data type (see cudrv::dlpack_dtype)");
  if constexpr (std::is_same_v<U, bool>) {
#if CUDRV_DLPACK_VERSION >= 8
    return detail::make_dtype(kDLBool, 1);
#else
    return {};
#endif
  } else if constexpr (std::is_integral_v<U>) {
    return detail::make_dtype(std::is_signed_v<U> ? kDLInt : kDLUInt, sizeof(U));
  } else if constexpr (std::is_floating_point_v<U> || std::is_same_v<U, __half>) {
    return detail::make_dtype(kDLFloat, sizeof(U));
  } else if constexpr (std::is_same_v<U, __nv_bfloat16>) {
    return detail::make_dtype(kDLBfloat, sizeof(U));
#if CUDRV_DLPACK_VERSION >= 101
  } else if constexpr (std::is_same_v<U, __nv_fp8_e4m3>) {
    return detail::make_dtype(kDLFloat8_e4m3fn, 1);
  } else if constexpr (std::is_same_v<U, __nv_fp8_e5m2>) {
    return detail::make_dtype(kDLFloat8_e5m2, 1);
#endif
  } else {
    return detail::make_dtype(kDLComplex, sizeof(U));
  }
}

/// @brief A readable name of a DLPack data type for messages: `float32`, `bfloat16`, `int8`,
/// `float8_e4m3fn`, `complex64`, `bool`; lanes as `x4`; unknown codes as `code 42`.
[[nodiscard]] inline std::string dlpack_dtype_name(DLDataType dtype) {
  std::string name;
  bool sized = true;  // the name carries the bits (float32), or names a fixed width (bool, float8_e4m3fn)
  switch (dtype.code) {
    case kDLInt: name = "int"; break;
    case kDLUInt: name = "uint"; break;
    case kDLFloat: name = "float"; break;
    case kDLBfloat: name = "bfloat"; break;
    case kDLComplex: name = "complex"; break;
    case kDLOpaqueHandle: name = "handle"; break;
#if CUDRV_DLPACK_VERSION >= 8
    case kDLBool:
      name = "bool";
      sized = false;
      break;
#endif
#if CUDRV_DLPACK_VERSION >= 101
    case kDLFloat8_e4m3fn:
      name = "float8_e4m3fn";
      sized = false;
      break;
    case kDLFloat8_e5m2:
      name = "float8_e5m2";
      sized = false;
      break;
#endif
    default:
      name = "code ";
      name += std::to_string(dtype.code);
      name += ' ';
      break;
  }
  if (sized) {
    name += std::to_string(dtype.bits);
  } else if (dtype.bits != 8) {
    name += " of ";
    name += std::to_string(dtype.bits);
    name += " bits";
  }
  if (dtype.lanes != 1) {  // appended piece by piece: g++ 12 warns (-Wrestrict) on "x" + std::string here
    name += 'x';
    name += std::to_string(dtype.lanes);
  }
  return name;
}

// ---------------------------------------------------------------------------------------------------
// The typed view

/// @brief Which kinds of memory (DLPack device types) an import accepts; combine with `|`.
enum class dlpack_memory : unsigned {
  cpu = 1u << 0,           ///< kDLCPU: pageable host memory.
  cuda = 1u << 1,          ///< kDLCUDA: device memory of one device (its ordinal is checked).
  cuda_host = 1u << 2,     ///< kDLCUDAHost: page-locked host memory (cudrv::pinned_buffer).
  cuda_managed = 1u << 3,  ///< kDLCUDAManaged: managed memory (cudrv::managed_buffer).
};
/// @brief Combines memory kinds.
[[nodiscard]] constexpr dlpack_memory operator|(dlpack_memory a, dlpack_memory b) noexcept {
  return static_cast<dlpack_memory>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}
/// @brief Intersects memory kinds.
[[nodiscard]] constexpr dlpack_memory operator&(dlpack_memory a, dlpack_memory b) noexcept {
  return static_cast<dlpack_memory>(static_cast<unsigned>(a) & static_cast<unsigned>(b));
}

/// @brief What @ref from_dlpack requires of a tensor besides its element type.
struct dlpack_requirements {
  /// @brief The accepted memory kinds (DLPack device types).
  dlpack_memory memory = dlpack_memory::cuda;
  /// @brief The device ordinal a kDLCUDA tensor must have; -1 accepts any. (DLPack gives host, pinned
  /// and managed memory the device id 0, which says nothing of a device: it is not checked for them.)
  int device_ordinal = -1;
  /// @brief Refuse tensors that are not compact row-major (C order), for APIs that need contiguity.
  bool contiguous = false;
  /// @brief Check the memory against the driver (cuPointerGetAttributes), not only the description: the
  /// driver must know the address as memory of the tensor's kind (device, pinned host or managed), a
  /// kDLCUDA tensor's device id must be the memory's device, and every byte the view reaches must lie in
  /// allocations or mappings the driver knows (contiguous ones, for memory mapped in pieces). A few driver
  /// calls for a tensor within one allocation (about a microsecond). Skipped for kDLCPU (pageable memory the driver
  /// does not track) and where no driver can be loaded (then nothing in the process can touch CUDA memory).
  bool check_memory = true;

  /// @brief Memory a kernel on device @p ordinal can use directly: kDLCUDA of that ordinal, or managed.
  [[nodiscard]] static constexpr dlpack_requirements device(int ordinal, bool contiguous = false) noexcept {
    return {dlpack_memory::cuda | dlpack_memory::cuda_managed, ordinal, contiguous, true};
  }
  /// @brief Memory the host can read: kDLCPU, kDLCUDAHost or kDLCUDAManaged.
  [[nodiscard]] static constexpr dlpack_requirements host(bool contiguous = false) noexcept {
    return {dlpack_memory::cpu | dlpack_memory::cuda_host | dlpack_memory::cuda_managed, -1, contiguous, true};
  }
};

/// @brief A non-owning, typed, strided view of an n-dimensional array: an address, a shape, strides
/// in elements (non-negative) and the DLPack device the memory is on. cuda.core's StridedMemoryView.
///
/// The shape and stride arrays are not copied: they must outlive the view (those of an imported
/// tensor live in its @ref dlpack_tensor). Empty strides mean compact row-major (C order). Views of
/// `T` convert to views of `const T`. Trivially copyable.
/// @code
/// std::int64_t shape[] = {4, 8};
/// cudrv::strided_view<float> v(buf.data(), shape, {}, {kDLCUDA, 0});   // a compact 4 x 8 matrix
/// float* p = v.get();                                                   // for a kernel argument
/// cudrv::device_span<float> all = v.span();                             // contiguous views only
/// @endcode
template <class T>
class strided_view {
 public:
  using element_type = T;                  ///< The element type, with its const.
  using value_type = std::remove_cv_t<T>;  ///< The element type without const.

  /// @brief An empty view (no dimension, null address, kDLCPU).
  constexpr strided_view() noexcept = default;
  /// @brief Views the array at @p address with @p shape and @p strides (in elements; empty means
  /// compact row-major) on @p device. The arrays are not copied.
  /// @throws invalid_argument_error when @p strides is neither empty nor as long as @p shape, or an
  /// extent or stride is negative
  strided_view(std::uintptr_t address, std::span<const std::int64_t> shape, std::span<const std::int64_t> strides,
               DLDevice device)
      : address_(address), shape_(shape), strides_(strides), device_(device) {
    if (!strides.empty() && strides.size() != shape.size()) {
      throw invalid_argument_error("cudrv::strided_view", std::to_string(strides.size()) + " strides for " +
                                                              std::to_string(shape.size()) + " dimensions");
    }
    for (std::size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] < 0 || (!strides.empty() && strides[i] < 0)) {
        throw invalid_argument_error("cudrv::strided_view",
                                     "dimension " + std::to_string(i) + " has a negative extent or stride");
      }
    }
  }
  /// @brief As the address form, from a typed pointer.
  strided_view(T* pointer, std::span<const std::int64_t> shape, std::span<const std::int64_t> strides, DLDevice device)
      : strided_view(reinterpret_cast<std::uintptr_t>(pointer), shape, strides, device) {}
  /// @brief Converts a view of `U` to a view of `T` when `U(*)[]` converts to `T(*)[]` (adds const).
  template <class U>
  requires(std::is_convertible_v<U (*)[], T (*)[]>) constexpr strided_view(
      const strided_view<U>& other) noexcept  // NOLINT: implicit on purpose
      : address_(other.address()), shape_(other.shape()), strides_(other.strides()), device_(other.device()) {}

  /// @brief The address of element (0, ..., 0), host or device.
  [[nodiscard]] constexpr std::uintptr_t address() const noexcept { return address_; }
  /// @brief The address as a `CUdeviceptr`.
  [[nodiscard]] constexpr CUdeviceptr data() const noexcept { return static_cast<CUdeviceptr>(address_); }
  /// @brief The address as a typed pointer (dereference it on the host only for host memory).
  [[nodiscard]] T* get() const noexcept { return reinterpret_cast<T*>(address_); }
  /// @brief The DLPack device of the memory.
  [[nodiscard]] constexpr DLDevice device() const noexcept { return device_; }
  /// @brief The number of dimensions.
  [[nodiscard]] constexpr std::size_t ndim() const noexcept { return shape_.size(); }
  /// @brief The extents.
  [[nodiscard]] constexpr std::span<const std::int64_t> shape() const noexcept { return shape_; }
  /// @brief The strides in elements as given; empty for compact row-major (use @ref stride).
  [[nodiscard]] constexpr std::span<const std::int64_t> strides() const noexcept { return strides_; }
  /// @brief The extent of dimension @p i (unchecked).
  [[nodiscard]] constexpr std::int64_t extent(std::size_t i) const noexcept { return shape_[i]; }
  /// @brief The stride of dimension @p i in elements (unchecked), computed when the strides are empty.
  [[nodiscard]] constexpr std::int64_t stride(std::size_t i) const noexcept {
    if (!strides_.empty()) {
      return strides_[i];
    }
    std::int64_t s = 1;
    for (std::int64_t e : shape_.subspan(i + 1)) {
      s *= e;
    }
    return s;
  }
  /// @brief The number of elements (the product of the extents; 1 for zero dimensions).
  [[nodiscard]] constexpr std::size_t size() const noexcept {
    std::size_t n = 1;
    for (std::int64_t e : shape_) {
      n *= static_cast<std::size_t>(e);
    }
    return n;
  }
  /// @brief Whether the layout is compact row-major (dimensions of extent 1 may have any stride).
  [[nodiscard]] constexpr bool is_contiguous() const noexcept {
    if (strides_.empty() || size() == 0) {
      return true;
    }
    std::int64_t expected = 1;
    for (std::size_t i = shape_.size(); i-- > 0;) {
      if (shape_[i] != 1 && strides_[i] != expected) {
        return false;
      }
      expected *= shape_[i];
    }
    return true;
  }
  /// @brief The elements as a @ref device_span (for cudrv::copy, kernels taking a flat array).
  /// @throws invalid_argument_error when the layout is not contiguous
  [[nodiscard]] device_span<T> span() const {
    if (!is_contiguous()) {
      throw invalid_argument_error("cudrv::strided_view::span",
                                   "the view is not compact row-major (strided); copy it into a contiguous buffer "
                                   "first");
    }
    return {data(), size()};
  }

 private:
  std::uintptr_t address_ = 0;
  std::span<const std::int64_t> shape_{};
  std::span<const std::int64_t> strides_{};
  DLDevice device_{kDLCPU, 0};
};

// ---------------------------------------------------------------------------------------------------
// Owning a managed tensor

/// @brief The struct a default export produces and a default import reads: `DLManagedTensorVersioned`
/// with a DLPack 1.x header, `DLManagedTensor` with 0.x.
#if CUDRV_DLPACK_HAS_VERSIONED
using dlpack_managed_default = DLManagedTensorVersioned;
#else
using dlpack_managed_default = DLManagedTensor;
#endif

namespace detail {
template <class M>
inline constexpr bool is_dlpack_managed_v = std::is_same_v<M, DLManagedTensor>
#if CUDRV_DLPACK_HAS_VERSIONED
                                            || std::is_same_v<M, DLManagedTensorVersioned>
#endif
    ;
template <class M>
inline constexpr bool is_dlpack_versioned_v = !std::is_same_v<M, DLManagedTensor>;
}  // namespace detail

/// @brief Owns one managed tensor (@p M is `DLManagedTensorVersioned` or `DLManagedTensor`): calls its
/// deleter exactly once when destroyed or reset. Move-only. @ref release hands the tensor on (to
/// a consumer, which then calls the deleter). What @ref to_dlpack returns.
/// @code
/// cudrv::dlpack_ptr<DLManagedTensorVersioned> t = cudrv::to_dlpack(std::move(buffer));
/// DLManagedTensorVersioned* raw = t.release();   // e.g. into a PyCapsule named "dltensor_versioned"
/// @endcode
template <class M>
class dlpack_ptr {
  static_assert(detail::is_dlpack_managed_v<M>, "dlpack_ptr holds a DLManagedTensorVersioned or a DLManagedTensor");

 public:
  /// @brief Owns nothing.
  constexpr dlpack_ptr() noexcept = default;
  /// @brief Takes ownership of @p managed (may be null).
  explicit dlpack_ptr(M* managed) noexcept : managed_(managed) {}
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  dlpack_ptr(const dlpack_ptr&) = delete;
  dlpack_ptr& operator=(const dlpack_ptr&) = delete;
  /// @}
  /// @brief Takes over @p other's tensor; @p other becomes empty.
  dlpack_ptr(dlpack_ptr&& other) noexcept : managed_(cudrv::detail::exchange(other.managed_, nullptr)) {}
  /// @brief Deletes the held tensor, then takes over @p other's.
  dlpack_ptr& operator=(dlpack_ptr&& other) noexcept {
    if (this != &other) {
      reset(cudrv::detail::exchange(other.managed_, nullptr));
    }
    return *this;
  }
  /// @brief Calls the deleter of the held tensor (if any, and if it has one).
  ~dlpack_ptr() { reset(); }

  /// @brief The tensor, or null.
  [[nodiscard]] M* get() const noexcept { return managed_; }
  /// @brief The tensor's fields.
  M* operator->() const noexcept { return managed_; }
  /// @brief Whether a tensor is held.
  [[nodiscard]] explicit operator bool() const noexcept { return managed_ != nullptr; }
  /// @brief Gives up ownership without calling the deleter.
  [[nodiscard]] M* release() noexcept { return cudrv::detail::exchange(managed_, nullptr); }
  /// @brief Calls the deleter of the held tensor, then holds @p managed.
  void reset(M* managed = nullptr) noexcept {
    M* old = cudrv::detail::exchange(managed_, managed);
    if (old != nullptr && old->deleter != nullptr) {
      old->deleter(old);
    }
  }

 private:
  M* managed_ = nullptr;
};

// ---------------------------------------------------------------------------------------------------
// Export

/// @brief The flags of an exported `DLManagedTensorVersioned`. A view of const elements is always
/// exported read-only. The legacy struct has no flags: exporting it with either set is refused.
struct dlpack_export_options {
  bool read_only = false;  ///< DLPACK_FLAG_BITMASK_READ_ONLY: the consumer must not write.
  bool copied = false;     ///< DLPACK_FLAG_BITMASK_IS_COPIED: the data is a copy made for this export.
};

namespace detail {
[[noreturn]] inline void dlpack_refuse(const char* api, const std::string& message) {
  throw invalid_argument_error(api, message);
}

// The manager context of an exported tensor: the struct handed out, the shape and stride arrays it
// points to, and what keeps the memory alive (a buffer moved in, or a shared owner).
template <class M>
struct dlpack_manager {
  M managed{};
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
  std::shared_ptr<const void> owner;

  static void destroy(M* self) noexcept { delete static_cast<dlpack_manager*>(self->manager_ctx); }
};

// Element count of a shape, refusing negative extents and overflow of the byte size.
inline std::size_t dlpack_checked_count(const char* api, std::span<const std::int64_t> shape, std::size_t element) {
  std::size_t n = 1;
  bool zero = false;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      dlpack_refuse(api, "dimension " + std::to_string(i) + " has the negative extent " + std::to_string(shape[i]));
    }
    zero = zero || shape[i] == 0;
  }
  if (zero) {
    return 0;
  }
  for (std::size_t i = 0; i < shape.size(); ++i) {
    auto e = static_cast<std::size_t>(shape[i]);
    if (n > SIZE_MAX / element / e || n * e > static_cast<std::size_t>(INT64_MAX)) {
      dlpack_refuse(api, "the shape overflows: its element count times " + std::to_string(element) +
                             " bytes does not fit in 64 bits (dimension " + std::to_string(i) + ")");
    }
    n *= e;
  }
  return n;
}

template <class M, class T>
dlpack_ptr<M> dlpack_export(const char* api, const strided_view<T>& view, std::shared_ptr<const void> owner,
                            dlpack_export_options options) {
  static_assert(detail::is_dlpack_managed_v<M>, "export to a DLManagedTensorVersioned or a DLManagedTensor");
  static_assert(is_dlpack_element_v<T>, "this element type has no DLPack data type (see cudrv::dlpack_dtype)");
  if (view.ndim() > static_cast<std::size_t>(INT32_MAX)) {
    dlpack_refuse(api, "too many dimensions for DLPack's int32 ndim");
  }
  if (dlpack_checked_count(api, view.shape(), sizeof(T)) != 0 && view.address() == 0) {
    dlpack_refuse(api, "the view has elements but a null address");
  }
  auto manager = std::make_unique<dlpack_manager<M>>();
  manager->shape.assign(view.shape().begin(), view.shape().end());
  manager->strides.resize(view.ndim());
  for (std::size_t i = 0; i < view.ndim(); ++i) {
    manager->strides[i] = view.stride(i);  // always written: DLPack 1.2+ forbids null strides
  }
  manager->owner = std::move(owner);
  DLTensor* t = nullptr;
  if constexpr (is_dlpack_versioned_v<M>) {
#if CUDRV_DLPACK_HAS_VERSIONED
    manager->managed.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    manager->managed.flags = ((options.read_only || std::is_const_v<T>) ? DLPACK_FLAG_BITMASK_READ_ONLY : 0) |
                             (options.copied ? DLPACK_FLAG_BITMASK_IS_COPIED : 0);
    t = &manager->managed.dl_tensor;
#endif
  } else {
    static_assert(!std::is_const_v<T>,
                  "a view of const elements exports only as DLManagedTensorVersioned: the legacy DLManagedTensor "
                  "cannot say read-only");
    if (options.read_only || options.copied) {
      dlpack_refuse(api, "the legacy DLManagedTensor has no flags: export a DLManagedTensorVersioned to mark the "
                         "tensor read-only or copied");
    }
    t = &manager->managed.dl_tensor;
  }
  t->data = reinterpret_cast<void*>(view.address());
  t->device = view.device();
  t->ndim = static_cast<std::int32_t>(view.ndim());
  t->dtype = dlpack_dtype<T>();
  t->shape = manager->shape.empty() ? nullptr : manager->shape.data();
  t->strides = manager->strides.empty() ? nullptr : manager->strides.data();
  t->byte_offset = 0;
  manager->managed.manager_ctx = manager.get();
  manager->managed.deleter = &dlpack_manager<M>::destroy;
  M* managed = &manager.release()->managed;
  return dlpack_ptr<M>(managed);
}

// What a cudrv buffer is to DLPack: its element type, address and device.
template <class B>
struct dlpack_buffer_traits {
  static constexpr bool supported = false;
};
template <class T>
struct dlpack_buffer_traits<device_buffer<T>> {
  static constexpr bool supported = true;
  using element = T;
  static std::uintptr_t address(const device_buffer<T>& b) noexcept { return static_cast<std::uintptr_t>(b.data()); }
  // The memory's own device, not the device of the context it was allocated in: a stream-ordered buffer
  // from device 0's pool allocated on a device-1 stream lives on device 0.
  static DLDevice device(const device_buffer<T>& b) {
    return {kDLCUDA, static_cast<std::int32_t>(b.properties().device_ordinal)};
  }
};
// Host-accessible buffers: the host pointer, and a device type whose device id is 0.
template <class B, class T, DLDeviceType Type>
struct dlpack_host_buffer_traits {
  static constexpr bool supported = true;
  using element = T;
  static std::uintptr_t address(const B& b) noexcept { return reinterpret_cast<std::uintptr_t>(b.data()); }
  static DLDevice device(const B&) noexcept { return {Type, 0}; }
};
template <class T>
struct dlpack_buffer_traits<managed_buffer<T>> : dlpack_host_buffer_traits<managed_buffer<T>, T, kDLCUDAManaged> {};
template <class T>
struct dlpack_buffer_traits<pinned_buffer<T>> : dlpack_host_buffer_traits<pinned_buffer<T>, T, kDLCUDAHost> {};

// Checks a buffer and the shape it is exported with; the layout to export (before the buffer moves).
template <class E, class B>
struct dlpack_buffer_layout {
  std::uintptr_t address = 0;
  DLDevice device{};
  std::vector<std::int64_t> shape;

  dlpack_buffer_layout(const B& buffer, std::span<const std::int64_t> requested) {
    constexpr const char* api = "cudrv::to_dlpack";
    using traits = dlpack_buffer_traits<std::remove_cv_t<B>>;
    if (!buffer) {
      dlpack_refuse(api, "the buffer holds no memory (empty, moved-from or released), so its device is unknown; "
                         "export a zero-element strided_view with an explicit device instead");
    }
    if (requested.empty()) {
      shape.assign(1, static_cast<std::int64_t>(buffer.size()));
    } else if (std::size_t n = dlpack_checked_count(api, requested, sizeof(E)); n != buffer.size()) {
      dlpack_refuse(api, "the shape holds " + std::to_string(n) + " elements but the buffer holds " +
                             std::to_string(buffer.size()));
    } else {
      shape.assign(requested.begin(), requested.end());
    }
    address = traits::address(buffer);
    device = traits::device(buffer);
  }
  template <class M>
  dlpack_ptr<M> export_with(std::shared_ptr<const void> owner, dlpack_export_options options) const {
    return dlpack_export<M>("cudrv::to_dlpack", strided_view<E>(address, shape, {}, device), std::move(owner), options);
  }
};
}  // namespace detail

/// @brief Exports @p view as a managed tensor of type @p M (`DLManagedTensorVersioned` by default with
/// a DLPack 1.x header, or `DLManagedTensor`). The shape and strides are copied into the manager
/// context (strides always written); @p owner, which may be null, is kept until the deleter runs:
/// it is what keeps the memory alive (a `shared_ptr` to a buffer, or any object), so a span whose
/// memory is owned elsewhere exports with that owner. Views of const elements are read-only.
/// @throws invalid_argument_error when the shape overflows, or for the legacy struct with flags set
/// @code
/// auto storage = std::make_shared<cudrv::device_buffer<float>>(dev, 12);
/// std::int64_t shape[] = {3, 4}, strides[] = {1, 3};                     // column-major 3 x 4
/// cudrv::strided_view<float> v(storage->data(), shape, strides, {kDLCUDA, dev.ordinal()});
/// auto tensor = cudrv::to_dlpack(v, storage);                            // shares the buffer
/// @endcode
template <class M = dlpack_managed_default, class T>
[[nodiscard]] dlpack_ptr<M> to_dlpack(const strided_view<T>& view, std::shared_ptr<const void> owner,
                                      dlpack_export_options options = {}) {
  return detail::dlpack_export<M>("cudrv::to_dlpack", view, std::move(owner), options);
}

/// @brief Exports a cudrv buffer (device_buffer, managed_buffer or pinned_buffer) by moving it into the
/// managed tensor: the deleter frees it, exactly once. @p shape (in elements; empty for 1-D) must
/// hold as many elements as the buffer, which is checked before the buffer moves (on a refusal the
/// caller keeps it). A stream-ordered device_buffer is freed on its own stream: `set_stream` it to
/// the consumer's stream first when the consumer may drop the tensor with work still queued. kDLCUDA with the device
/// ordinal of the memory itself for a device_buffer (`properties().device_ordinal`: a pool's device, which
/// need not be the device of the stream it was allocated on), kDLCUDAManaged and kDLCUDAHost (device id 0) for
/// the others.
/// @throws invalid_argument_error for an empty buffer or a shape of another size
/// @code
/// cudrv::device_buffer<__nv_bfloat16> w(dev, 64 * 32);
/// std::int64_t shape[] = {64, 32};
/// cudrv::dlpack_ptr<DLManagedTensorVersioned> t = cudrv::to_dlpack(std::move(w), shape);
/// @endcode
template <class M = dlpack_managed_default, class B>
requires(!std::is_lvalue_reference_v<B> && detail::dlpack_buffer_traits<std::remove_cv_t<B>>::supported)
    [[nodiscard]] dlpack_ptr<M> to_dlpack(B&& buffer, std::span<const std::int64_t> shape = {},
                                          dlpack_export_options options = {}) {
  using E = typename detail::dlpack_buffer_traits<std::remove_cv_t<B>>::element;
  detail::dlpack_buffer_layout<E, B> layout(buffer, shape);  // checked before the buffer moves
  auto held = std::make_shared<std::remove_cv_t<B>>(std::move(buffer));
  return layout.template export_with<M>(std::move(held), options);
}

/// @brief Exports a cudrv buffer shared with the caller: the managed tensor holds a reference to
/// @p buffer until its deleter runs. A `shared_ptr<const B>` exports read-only.
/// @throws invalid_argument_error for a null pointer, an empty buffer or a shape of another size
template <class M = dlpack_managed_default, class B>
requires(detail::dlpack_buffer_traits<std::remove_cv_t<B>>::supported)
    [[nodiscard]] dlpack_ptr<M> to_dlpack(std::shared_ptr<B> buffer, std::span<const std::int64_t> shape = {},
                                          dlpack_export_options options = {}) {
  using E =
      std::conditional_t<std::is_const_v<B>, const typename detail::dlpack_buffer_traits<std::remove_cv_t<B>>::element,
                         typename detail::dlpack_buffer_traits<std::remove_cv_t<B>>::element>;
  if (!buffer) {
    detail::dlpack_refuse("cudrv::to_dlpack", "the buffer pointer is null");
  }
  detail::dlpack_buffer_layout<E, std::remove_cv_t<B>> layout(*buffer, shape);
  return layout.template export_with<M>(std::move(buffer), options);
}

namespace detail {
// The DLPack device of a resource_buffer's memory, from its resource's description: device-only memory
// is kDLCUDA of its device; host-only memory kDLCPU; memory both may access is managed or page-locked
// host memory, which the description does not tell apart (a pinned pool and a managed pool with no
// preferred device both say {-1, true, true}), so the driver is asked (one cuPointerGetAttributes).
inline DLDevice dlpack_device_of(const resource_buffer& buffer) {
  constexpr const char* api = "cudrv::to_dlpack";
  const memory_properties props = buffer.properties();
  if (props.device_accessible && !props.host_accessible) {
    if (props.device_ordinal < 0) {
      dlpack_refuse(api, "the buffer's resource describes device memory of no device (device ordinal " +
                             std::to_string(props.device_ordinal) + "), which DLPack cannot name");
    }
    return {kDLCUDA, static_cast<std::int32_t>(props.device_ordinal)};
  }
  if (props.host_accessible && !props.device_accessible) {
    return {kDLCPU, 0};
  }
  if (!props.host_accessible) {
    dlpack_refuse(api, "the buffer's resource describes its memory as neither device- nor host-accessible");
  }
  return {get_pointer_attributes(buffer.get()).is_managed ? kDLCUDAManaged : kDLCUDAHost, 0};
}
}  // namespace detail

/// @brief Exports a @ref resource_buffer as a tensor of @p T (bytes as `uint8` by default, as cuda.core's
/// `Buffer` exports them) by moving it into the managed tensor: the deleter frees it through its
/// resource, exactly once, on its stream for a stream-ordered buffer (`set_stream` it to the consumer's
/// stream first when the consumer may drop the tensor with work still queued). @p shape (in elements;
/// empty for 1-D) must hold as many elements of @p T as the buffer has bytes for, and the address must
/// be aligned for @p T, which is checked before the buffer moves (on a refusal the caller keeps it).
/// The device comes from the resource's description (@ref resource_buffer::properties): kDLCUDA with
/// its device ordinal for device memory, kDLCPU for host-only memory, and for memory both may access
/// kDLCUDAManaged or kDLCUDAHost (device id 0) as the driver says (one pointer-attribute query).
///
/// The element type comes first (`to_dlpack<float>(...)`, `to_dlpack<float, DLManagedTensor>(...)`),
/// since a resource buffer has none of its own.
/// @throws invalid_argument_error for an empty buffer, a size that is not a whole number of elements,
/// a shape of another size, a misaligned address or memory DLPack cannot name
/// @code
/// cudrv::resource_buffer buf(mr, 64 * 32 * sizeof(float), s);
/// std::int64_t shape[] = {64, 32};
/// cudrv::dlpack_ptr<DLManagedTensorVersioned> t = cudrv::to_dlpack<float>(std::move(buf), shape);
/// @endcode
template <class T = std::uint8_t, class M = dlpack_managed_default>
requires(is_dlpack_element_v<T>&& detail::is_dlpack_managed_v<M>)
    [[nodiscard]] dlpack_ptr<M> to_dlpack(resource_buffer&& buffer, std::span<const std::int64_t> shape = {},
                                          dlpack_export_options options = {}) {
  constexpr const char* api = "cudrv::to_dlpack";
  using V = std::remove_cv_t<T>;
  if (!buffer) {
    detail::dlpack_refuse(api, "the buffer holds no memory (empty, moved-from, released or reset), so its device is "
                               "unknown; export a zero-element strided_view with an explicit device instead");
  }
  if (buffer.size() % sizeof(V) != 0) {
    detail::dlpack_refuse(api, "the buffer's " + std::to_string(buffer.size()) + " bytes are not a whole number of " +
                                   dlpack_dtype_name(dlpack_dtype<V>()) + " elements");
  }
  if (reinterpret_cast<std::uintptr_t>(buffer.get()) % alignof(V) != 0) {
    detail::dlpack_refuse(api, "the buffer's address is not aligned to the " + std::to_string(alignof(V)) +
                                   " bytes of " + dlpack_dtype_name(dlpack_dtype<V>()));
  }
  const std::size_t count = buffer.size() / sizeof(V);
  std::vector<std::int64_t> layout;
  if (shape.empty()) {
    layout.assign(1, static_cast<std::int64_t>(count));
  } else if (std::size_t n = detail::dlpack_checked_count(api, shape, sizeof(V)); n != count) {
    detail::dlpack_refuse(api, "the shape holds " + std::to_string(n) + " elements but the buffer holds " +
                                   std::to_string(count) + " (" + std::to_string(buffer.size()) + " bytes)");
  } else {
    layout.assign(shape.begin(), shape.end());
  }
  const DLDevice device = detail::dlpack_device_of(buffer);
  const strided_view<T> view(reinterpret_cast<std::uintptr_t>(buffer.get()), layout, {}, device);
  auto held = std::make_shared<resource_buffer>(std::move(buffer));  // checked: the buffer moves now
  return detail::dlpack_export<M>(api, view, std::move(held), options);
}

// ---------------------------------------------------------------------------------------------------
// Import

namespace detail {
/// @brief The key of @ref dlpack_tensor's internal constructor (internal).
struct dlpack_checked {
  explicit dlpack_checked() = default;
};
}  // namespace detail

/// @brief An imported tensor: owns the managed tensor @p M (calls its deleter exactly once, when
/// destroyed or reset) and presents it as a checked @ref strided_view of @p T, made by
/// @ref from_dlpack. Move-only; the view stays valid while the tensor is held (moves included).
/// @code
/// auto t = cudrv::from_dlpack<const float>(capsule_pointer, cudrv::dlpack_requirements::device(0));
/// cudrv::strided_view<const float> v = t.view();
/// launch(k, cfg, v.get(), v.size());
/// @endcode
template <class T, class M = dlpack_managed_default>
class dlpack_tensor {
 public:
  using element_type = T;  ///< The element type, with its const.

  /// @brief Holds nothing.
  dlpack_tensor() noexcept = default;
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  dlpack_tensor(const dlpack_tensor&) = delete;
  dlpack_tensor& operator=(const dlpack_tensor&) = delete;
  /// @}
  /// @brief Takes over @p other's tensor; @p other becomes empty.
  dlpack_tensor(dlpack_tensor&& other) noexcept
      : managed_(std::move(other.managed_)), view_(cudrv::detail::exchange(other.view_, {})) {}
  /// @brief Deletes the held tensor, then takes over @p other's.
  dlpack_tensor& operator=(dlpack_tensor&& other) noexcept {
    if (this != &other) {
      managed_ = std::move(other.managed_);
      view_ = cudrv::detail::exchange(other.view_, {});
    }
    return *this;
  }
  /// @brief Calls the deleter (once).
  ~dlpack_tensor() = default;
  /// @brief Holds @p managed viewed as @p view, unchecked (internal: @ref from_dlpack makes them).
  dlpack_tensor(detail::dlpack_checked, dlpack_ptr<M>&& managed, strided_view<T> view) noexcept
      : managed_(std::move(managed)), view_(view) {}

  /// @brief The typed view (empty when nothing is held).
  [[nodiscard]] const strided_view<T>& view() const noexcept { return view_; }
  /// @brief The typed address of element (0, ..., 0).
  [[nodiscard]] T* get() const noexcept { return view_.get(); }
  /// @brief The number of elements.
  [[nodiscard]] std::size_t size() const noexcept { return view_.size(); }
  /// @brief The managed tensor, or null.
  [[nodiscard]] M* managed() const noexcept { return managed_.get(); }
  /// @brief Whether a tensor is held.
  [[nodiscard]] explicit operator bool() const noexcept { return static_cast<bool>(managed_); }
  /// @brief Whether the producer marked the tensor read-only (always false for the legacy struct).
  [[nodiscard]] bool read_only() const noexcept { return flag(read_only_bit()); }
  /// @brief Whether the producer marked the data as a copy (always false for the legacy struct).
  [[nodiscard]] bool copied() const noexcept { return flag(copied_bit()); }
  /// @brief Gives up ownership without calling the deleter; the view becomes empty.
  [[nodiscard]] M* release() noexcept {
    view_ = {};
    return managed_.release();
  }
  /// @brief Calls the deleter now; the tensor becomes empty.
  void reset() noexcept {
    view_ = {};
    managed_.reset();
  }

 private:
  static constexpr std::uint64_t read_only_bit() noexcept {
#if CUDRV_DLPACK_HAS_VERSIONED
    return DLPACK_FLAG_BITMASK_READ_ONLY;
#else
    return 0;
#endif
  }
  static constexpr std::uint64_t copied_bit() noexcept {
#if CUDRV_DLPACK_HAS_VERSIONED
    return DLPACK_FLAG_BITMASK_IS_COPIED;
#else
    return 0;
#endif
  }
  [[nodiscard]] bool flag([[maybe_unused]] std::uint64_t bit) const noexcept {
    if constexpr (detail::is_dlpack_versioned_v<M>) {
#if CUDRV_DLPACK_HAS_VERSIONED
      return managed_ && (managed_->flags & bit) != 0;
#endif
    }
    return false;
  }

  dlpack_ptr<M> managed_;
  strided_view<T> view_;
};

namespace detail {
inline const char* dlpack_device_name(std::int32_t type) {
  switch (type) {
    case kDLCPU: return "kDLCPU";
    case kDLCUDA: return "kDLCUDA";
    case kDLCUDAHost: return "kDLCUDAHost";
    case kDLCUDAManaged: return "kDLCUDAManaged";
    default: return "another DLPack device type";
  }
}

inline std::optional<dlpack_memory> dlpack_memory_of(std::int32_t type) noexcept {
  switch (type) {
    case kDLCPU: return dlpack_memory::cpu;
    case kDLCUDA: return dlpack_memory::cuda;
    case kDLCUDAHost: return dlpack_memory::cuda_host;
    case kDLCUDAManaged: return dlpack_memory::cuda_managed;
    default: return std::nullopt;
  }
}

inline std::string dlpack_accepted(dlpack_memory accepted) {
  std::string s;
  for (std::int32_t type :
       {std::int32_t{kDLCPU}, std::int32_t{kDLCUDA}, std::int32_t{kDLCUDAHost}, std::int32_t{kDLCUDAManaged}}) {
    if ((*dlpack_memory_of(type) & accepted) != dlpack_memory{}) {
      s += (s.empty() ? "" : ", ") + std::string(dlpack_device_name(type));
    }
  }
  return s.empty() ? "none" : s;
}

// Checks a DLTensor against T and the requirements; returns the view. Throws invalid_argument_error.
template <class T>
strided_view<T> dlpack_check(const DLTensor& t, const dlpack_requirements& req) {
  constexpr const char* api = "cudrv::from_dlpack";
  using V = std::remove_cv_t<T>;
  auto type = static_cast<std::int32_t>(t.device.device_type);
  auto kind = dlpack_memory_of(type);
  if (!kind || (*kind & req.memory) == dlpack_memory{}) {
    dlpack_refuse(api, "the tensor is on " + std::string(dlpack_device_name(type)) + " (device type " +
                           std::to_string(type) + "); accepted here: " + dlpack_accepted(req.memory));
  }
  if (type == kDLCUDA && req.device_ordinal >= 0 && t.device.device_id != req.device_ordinal) {
    dlpack_refuse(api, "the tensor is on CUDA device " + std::to_string(t.device.device_id) + ", not on device " +
                           std::to_string(req.device_ordinal) + " as required");
  }
  constexpr DLDataType want = dlpack_dtype<T>();
  if (t.dtype.code != want.code || t.dtype.bits != want.bits || t.dtype.lanes != want.lanes) {
    dlpack_refuse(api, "the tensor's data type is " + dlpack_dtype_name(t.dtype) + " (code " +
                           std::to_string(t.dtype.code) + ", " + std::to_string(t.dtype.bits) + " bits, " +
                           std::to_string(t.dtype.lanes) + " lanes); the view's element type is " +
                           dlpack_dtype_name(want));
  }
  if (t.ndim < 0) {
    dlpack_refuse(api, "the tensor has a negative number of dimensions (" + std::to_string(t.ndim) + ")");
  }
  auto ndim = static_cast<std::size_t>(t.ndim);
  if (ndim > 0 && t.shape == nullptr) {
    dlpack_refuse(api, "the tensor has " + std::to_string(ndim) + " dimensions but a null shape");
  }
  std::span<const std::int64_t> shape(t.shape, ndim);
  std::span<const std::int64_t> strides;
  if (ndim > 0 && t.strides != nullptr) {
    strides = {t.strides, ndim};
  }
  std::size_t count = dlpack_checked_count(api, shape, sizeof(V));
  // The span of memory the view reaches, in elements: overflow-checked, negative strides refused.
  std::size_t reach = strides.empty() ? count : (count == 0 ? 0 : 1);
  for (std::size_t i = 0; i < strides.size(); ++i) {
    if (strides[i] < 0) {
      dlpack_refuse(api, "dimension " + std::to_string(i) + " has the negative stride " + std::to_string(strides[i]) +
                             "; negative strides are not supported (make the tensor contiguous first)");
    }
    if (count != 0) {
      auto step = static_cast<std::size_t>(shape[i] - 1);
      auto stride = static_cast<std::size_t>(strides[i]);
      if (stride != 0 && step > (SIZE_MAX / sizeof(V) - reach) / stride) {
        dlpack_refuse(api, "the strides overflow: the tensor would reach past 2^64 bytes (dimension " +
                               std::to_string(i) + ")");
      }
      reach += step * stride;
    }
  }
  strided_view<T> probe(std::uintptr_t{0}, shape, strides, t.device);
  if (req.contiguous && !probe.is_contiguous()) {
    dlpack_refuse(api, "the tensor is not compact row-major (its strides describe a strided or transposed "
                       "layout) and this use needs a contiguous tensor");
  }
  auto data = reinterpret_cast<std::uintptr_t>(t.data);
  if (data == 0 && count != 0) {
    dlpack_refuse(api, "the tensor has a null data pointer but " + std::to_string(count) + " elements");
  }
  if (t.byte_offset > UINTPTR_MAX - data || reach * sizeof(V) > UINTPTR_MAX - data - t.byte_offset) {
    dlpack_refuse(api, "the data pointer plus the byte offset " + std::to_string(t.byte_offset) +
                           " and the tensor's extent overflow the address space");
  }
  std::uintptr_t address = data + static_cast<std::uintptr_t>(t.byte_offset);
  if (address % alignof(V) != 0) {
    dlpack_refuse(api, "the data pointer plus the byte offset " + std::to_string(t.byte_offset) +
                           " is not aligned to the " + std::to_string(alignof(V)) + " bytes of the element type " +
                           dlpack_dtype_name(want));
  }
  if (req.check_memory && type != kDLCPU && reach != 0) {
    const auto claimed = type == kDLCUDA       ? claimed_memory::device
                         : type == kDLCUDAHost ? claimed_memory::pinned_host
                                               : claimed_memory::managed;
    check_claimed_memory(api, address, reach * sizeof(V), claimed, t.device.device_id,
                         std::string(dlpack_device_name(type)) +
                             (type == kDLCUDA ? " " + std::to_string(t.device.device_id) : ""));
  }
  return strided_view<T>(address, shape, strides, t.device);
}
}  // namespace detail

/// @brief Imports the managed tensor held by @p managed as a view of @p T, after checking it: the
/// version (a `DLManagedTensorVersioned` of another major version is refused without reading more
/// of it), the read-only flag (a read-only tensor imports only as const @p T), the device type and
/// ordinal (@p requirements), the data type against @p T (code, bits, lanes), the shape and strides
/// (negative extents or strides, overflow, and non-contiguous layouts when required), a null data
/// pointer, and the alignment of data + byte_offset for @p T. Null strides mean compact row-major.
///
/// On success the returned @ref dlpack_tensor owns the tensor and @p managed is empty. On failure
/// @p managed still holds it (try another type, or let it go: its destructor calls the deleter).
/// @throws invalid_argument_error naming what does not match, for an empty @p managed too
template <class T, class M>
[[nodiscard]] dlpack_tensor<T, M> from_dlpack(dlpack_ptr<M>&& managed, dlpack_requirements requirements = {}) {
  static_assert(is_dlpack_element_v<T>, "this element type has no DLPack data type (see cudrv::dlpack_dtype)");
  constexpr const char* api = "cudrv::from_dlpack";
  if (!managed) {
    detail::dlpack_refuse(api, "the managed tensor pointer is null");
  }
  if constexpr (detail::is_dlpack_versioned_v<M>) {
#if CUDRV_DLPACK_HAS_VERSIONED
    const DLPackVersion v = managed->version;
    if (v.major != DLPACK_MAJOR_VERSION) {
      detail::dlpack_refuse(api, "the tensor's DLPack version is " + std::to_string(v.major) + "." +
                                     std::to_string(v.minor) + " and this build reads major version " +
                                     std::to_string(DLPACK_MAJOR_VERSION) + " only (its header is " +
                                     std::to_string(DLPACK_MAJOR_VERSION) + "." + std::to_string(DLPACK_MINOR_VERSION) +
                                     ")");
    }
    if ((managed->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0 && !std::is_const_v<T>) {
      detail::dlpack_refuse(api, "the tensor is read-only (DLPACK_FLAG_BITMASK_READ_ONLY): import it as a view of "
                                 "const elements");
    }
#endif
  }
  strided_view<T> view = detail::dlpack_check<T>(managed->dl_tensor, requirements);
  return dlpack_tensor<T, M>(detail::dlpack_checked{}, std::move(managed), view);
}

/// @brief Imports @p managed (taking ownership on every path: when a check fails, the deleter is
/// called before the exception propagates, as DLPack asks of a consumer that cannot use a tensor).
/// Checks as the @ref dlpack_ptr form.
/// @throws invalid_argument_error naming what does not match
/// @code
/// DLManagedTensorVersioned* raw = producer();       // e.g. from a PyCapsule
/// auto t = cudrv::from_dlpack<float>(raw, cudrv::dlpack_requirements::device(dev.ordinal(), true));
/// cudrv::device_span<float> flat = t.view().span();
/// @endcode
template <class T, class M>
requires(detail::is_dlpack_managed_v<M>)
    [[nodiscard]] dlpack_tensor<T, M> from_dlpack(M* managed, dlpack_requirements requirements = {}) {
  dlpack_ptr<M> owner(managed);
  return from_dlpack<T>(std::move(owner), requirements);
}

// ---------------------------------------------------------------------------------------------------
// Streams

/// @brief The special stream values of DLPack's Python protocol (`__dlpack__(stream=...)` for CUDA).
enum class dlpack_stream_value : std::intptr_t {
  no_sync = -1,            ///< The consumer asks for no synchronisation.
  legacy_default = 1,      ///< The legacy default stream.
  per_thread_default = 2,  ///< The per-thread default stream.
};

/// @brief The consumer's stream named by a protocol value: -1 gives no stream (no synchronisation),
/// 1 the legacy default stream, 2 the per-thread default stream, any other value a `CUstream`
/// (`cudaStream_t`) handle. 0 is refused: the protocol disallows it for CUDA, being ambiguous.
/// (Python's `None` is the legacy default stream: pass 1.)
/// @throws invalid_argument_error for 0 and other negative values
[[nodiscard]] inline std::optional<stream_ref> dlpack_consumer_stream(std::intptr_t value) {
  if (value == static_cast<std::intptr_t>(dlpack_stream_value::no_sync)) {
    return std::nullopt;
  }
  if (value == static_cast<std::intptr_t>(dlpack_stream_value::legacy_default)) {
    return stream_ref::legacy_default();
  }
  if (value == static_cast<std::intptr_t>(dlpack_stream_value::per_thread_default)) {
    return stream_ref::per_thread_default();
  }
  if (value <= 0) {
    throw invalid_argument_error("cudrv::dlpack_consumer_stream",
                                 "stream value " + std::to_string(value) +
                                     " is not valid for CUDA in the DLPack protocol (0 is ambiguous and refused; use "
                                     "1 for the legacy default stream, 2 for the per-thread default stream, -1 for "
                                     "no synchronisation, or a stream handle)");
  }
  return stream_ref(reinterpret_cast<CUstream>(value));
}

/// @brief The protocol value that names @p s, for a consumer calling a producer's `__dlpack__`: 1 for
/// the legacy default stream (its null handle too), 2 for the per-thread default stream, else the
/// handle.
[[nodiscard]] inline std::intptr_t dlpack_stream_value_of(stream_ref s) noexcept {
  CUstream h = s.native_handle();
  if (h == nullptr || h == CU_STREAM_LEGACY) {
    return static_cast<std::intptr_t>(dlpack_stream_value::legacy_default);
  }
  return reinterpret_cast<std::intptr_t>(h);
}

/// @brief The producer's side of DLPack's stream exchange: makes @p consumer wait for the work
/// queued on @p producer so far (an event recorded on @p producer, waited on by @p consumer), so
/// that the consumer's later work sees the data. Nothing happens when @p consumer is empty (no
/// synchronisation asked) or names the same stream (the null handle and `CU_STREAM_LEGACY` both
/// being the legacy default stream). Call it before handing the tensor over.
/// @throws invalid_argument_error for a moved-from stream; a driver error from recording or waiting
/// @code
/// // in __dlpack__(stream=value): the tensor's data was written on `producer`
/// cudrv::dlpack_stream_exchange(producer, cudrv::dlpack_consumer_stream(value));
/// @endcode
inline void dlpack_stream_exchange(stream_ref producer, std::optional<stream_ref> consumer) {
  if (!consumer || dlpack_stream_value_of(*consumer) == dlpack_stream_value_of(producer)) {
    return;
  }
  consumer->wait(producer);
}

/// @brief As the `stream_ref` form, from the protocol's stream value (see @ref dlpack_consumer_stream).
/// @throws invalid_argument_error for 0 and other invalid values
inline void dlpack_stream_exchange(stream_ref producer, std::intptr_t consumer_stream) {
  dlpack_stream_exchange(producer, dlpack_consumer_stream(consumer_stream));
}

}  // namespace cudrv
