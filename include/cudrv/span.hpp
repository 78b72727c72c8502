/// @file span.hpp
/// @brief Typed, non-owning views of memory: @ref cudrv::device_span for device-addressable memory and
/// @ref cudrv::pitched_span for pitched 2D/3D layouts. Sizes are in elements.
///
/// Layer: driver (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <span>  // also std::ranges::enable_borrowed_range (detail::is_view_type)
#include <type_traits>

namespace cudrv {

namespace detail {
/// @brief Throws invalid_argument_error for a view range that does not fit (internal).
[[noreturn]] void throw_out_of_range(const char* api, std::size_t offset, std::size_t count, std::size_t size);
}  // namespace detail

/// @brief A non-owning view of `size()` elements of type @p T in device-addressable memory.
///
/// Like `std::span`, but the address is a `CUdeviceptr` that the host must not dereference. Views of
/// `T` convert to views of `const T`. Trivially copyable.
/// @code
/// cudrv::device_buffer<float> buf(dev, 1024);
/// cudrv::device_span<float> all = buf;                   // the whole buffer
/// cudrv::device_span<float> tail = all.subspan(512);     // elements 512..1023
/// cudrv::device_span<const float> in = tail;             // read-only view
/// float* raw = tail.get();                               // for a kernel argument
/// @endcode
template <class T>
class device_span {
 public:
  using element_type = T;                  ///< The element type, with its const.
  using value_type = std::remove_cv_t<T>;  ///< The element type without const.
  using size_type = std::size_t;           ///< Sizes and offsets.

  /// @brief An empty view.
  constexpr device_span() noexcept = default;
  /// @brief Views @p count elements starting at device address @p address.
  constexpr device_span(CUdeviceptr address, std::size_t count) noexcept : address_(address), size_(count) {}
  /// @brief Views @p count elements starting at the typed device pointer @p pointer.
  device_span(T* pointer, std::size_t count) noexcept
      : address_(reinterpret_cast<CUdeviceptr>(pointer)), size_(count) {}
  /// @brief Converts a view of `U` to a view of `T` when `U(*)[]` converts to `T(*)[]` (adds const).
  template <class U>
  requires(std::is_convertible_v<U (*)[], T (*)[]>) constexpr device_span(device_span<U> other) noexcept
      : address_(other.data()), size_(other.size()) {}

  /// @brief The device address of the first element.
  [[nodiscard]] constexpr CUdeviceptr data() const noexcept { return address_; }
  /// @brief The address as a typed pointer, for kernel arguments; never dereference it on the host.
  [[nodiscard]] T* get() const noexcept { return reinterpret_cast<T*>(address_); }
  /// @brief The number of elements.
  [[nodiscard]] constexpr std::size_t size() const noexcept { return size_; }
  /// @brief The number of bytes.
  [[nodiscard]] constexpr std::size_t size_bytes() const noexcept { return size_ * sizeof(T); }
  /// @brief Whether the view has no element.
  [[nodiscard]] constexpr bool empty() const noexcept { return size_ == 0; }

  /// @brief The elements from @p offset to the end.
  /// @throws invalid_argument_error when @p offset > size()
  [[nodiscard]] device_span subspan(std::size_t offset) const {
    if (offset > size_) {
      detail::throw_out_of_range("cudrv::device_span::subspan", offset, 0, size_);
    }
    return device_span(address_ + offset * sizeof(T), size_ - offset);
  }
  /// @brief @p count elements from @p offset.
  /// @throws invalid_argument_error when the range does not fit in the view
  [[nodiscard]] device_span subspan(std::size_t offset, std::size_t count) const {
    if (offset > size_ || count > size_ - offset) {
      detail::throw_out_of_range("cudrv::device_span::subspan", offset, count, size_);
    }
    return device_span(address_ + offset * sizeof(T), count);
  }
  /// @brief The first @p count elements.
  /// @throws invalid_argument_error when @p count > size()
  [[nodiscard]] device_span first(std::size_t count) const { return subspan(0, count); }
  /// @brief The last @p count elements.
  /// @throws invalid_argument_error when @p count > size()
  [[nodiscard]] device_span last(std::size_t count) const {
    if (count > size_) {
      detail::throw_out_of_range("cudrv::device_span::last", 0, count, size_);
    }
    return device_span(address_ + (size_ - count) * sizeof(T), count);
  }

 private:
  CUdeviceptr address_ = 0;
  std::size_t size_ = 0;
};

namespace detail {
/// @brief Whether @p D is a view whose memory lives elsewhere, so that keeping a temporary of it is
/// safe: a @ref cudrv::device_span, or a borrowed range such as `std::span` (internal).
template <class D>
inline constexpr bool is_view_type = std::ranges::enable_borrowed_range<D>;
template <class T>
inline constexpr bool is_view_type<device_span<T>> = true;
}  // namespace detail

/// @brief A non-owning view of a pitched 2D or 3D array of @p T: `depth` slices of `height` rows of
/// `width` elements, consecutive rows `pitch` bytes apart. The memory may be device, pinned,
/// managed or pageable host memory. Trivially copyable.
///
/// @code
/// cudrv::pitched_buffer<float> image(dev, 640, 480);        // device, padded rows
/// std::vector<float> host(640 * 480);
/// auto dense = cudrv::pitched_span<float>::dense(host.data(), 640, 480);   // pitch = 640 floats
/// cudrv::copy(image.view(), cudrv::pitched_span<const float>(dense), stream);
/// @endcode
template <class T>
struct pitched_span {
  using element_type = T;  ///< The element type, with its const.

  std::uintptr_t address = 0;  ///< Address of element (0, 0, 0), host or device.
  std::size_t pitch = 0;       ///< Bytes from one row to the next (at least width * sizeof(T)).
  std::size_t width = 0;       ///< Elements per row.
  std::size_t height = 0;      ///< Rows per slice.
  std::size_t depth = 1;       ///< Slices.

  /// @brief A dense (unpadded) layout over host memory: pitch = width * sizeof(T).
  [[nodiscard]] static pitched_span dense(T* pointer, std::size_t width, std::size_t height,
                                          std::size_t depth = 1) noexcept {
    return {reinterpret_cast<std::uintptr_t>(pointer), width * sizeof(T), width, height, depth};
  }
  /// @brief A dense layout over the device memory viewed by @p span.
  /// @throws invalid_argument_error when @p span holds fewer than width * height * depth elements
  [[nodiscard]] static pitched_span dense(device_span<T> span, std::size_t width, std::size_t height,
                                          std::size_t depth = 1) {
    if (height != 0 && depth != 0 && (width > span.size() / height / depth)) {
      detail::throw_out_of_range("cudrv::pitched_span::dense", 0, width * height * depth, span.size());
    }
    return {static_cast<std::uintptr_t>(span.data()), width * sizeof(T), width, height, depth};
  }
  /// @brief Converts to a view of const elements.
  constexpr operator pitched_span<const T>() const noexcept requires(!std::is_const_v<T>) {
    return {address, pitch, width, height, depth};
  }
};

}  // namespace cudrv
