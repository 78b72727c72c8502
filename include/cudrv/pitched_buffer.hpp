/// @file pitched_buffer.hpp
/// @brief @ref cudrv::pitched_buffer : owning device memory for 2D/3D arrays with padded rows
/// (cuMemAllocPitch).
///
/// Layer: memory (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <cstddef>
#include <type_traits>
#include <utility>

#include "cudrv/context.hpp"
#include "cudrv/detail/exchange.hpp"
#include "cudrv/device.hpp"
#include "cudrv/device_buffer.hpp"
#include "cudrv/span.hpp"

namespace cudrv {

namespace detail {
/// @brief Allocates pitched memory; returns the allocation and writes the pitch (internal).
device_allocation allocate_pitched(CUcontext ctx, std::size_t width, std::size_t height, std::size_t depth,
                                   std::size_t element_size, std::size_t* pitch);
}  // namespace detail

/// @brief Owning device memory for a `width` × `height` × `depth` array of @p T whose rows are padded
/// to a pitch the driver chooses for coalesced access. Freed with cuMemFree. Move-only.
///
/// @code
/// cudrv::pitched_buffer<float> img(dev, 1000, 700);        // 1000 floats per row, 700 rows
/// std::printf("pitch %zu bytes\n", img.pitch());            // e.g. 4096
/// std::vector<float> host(1000 * 700);
/// cudrv::copy(img.view(), cudrv::pitched_span<const float>::dense(host.data(), 1000, 700), stream);
/// @endcode
template <class T>
class pitched_buffer {
  static_assert(std::is_trivially_copyable_v<T>, "pitched_buffer holds trivially copyable elements");

 public:
  using value_type = T;  ///< The element type.

  /// @brief Allocates @p width × @p height × @p depth elements in @p dev's primary context.
  pitched_buffer(const device& dev, std::size_t width, std::size_t height, std::size_t depth = 1)
      : pitched_buffer(dev.primary_context(), width, height, depth) {}
  /// @brief Allocates @p width × @p height × @p depth elements in @p ctx.
  pitched_buffer(context_ref ctx, std::size_t width, std::size_t height, std::size_t depth = 1)
      : width_(width), height_(height), depth_(depth) {
    alloc_ = detail::allocate_pitched(ctx.native_handle(), width, height, depth, sizeof(T), &pitch_);
  }
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the temporary owner would be destroyed at the end of the statement, before this object.
  pitched_buffer(cudrv::context&&, std::size_t, std::size_t, std::size_t = 1) = delete;
  /// @brief Refused: the temporary owner would be destroyed at the end of the statement, before this object.
  pitched_buffer(cudrv::primary_context&&, std::size_t, std::size_t, std::size_t = 1) = delete;
  pitched_buffer(const pitched_buffer&) = delete;
  pitched_buffer& operator=(const pitched_buffer&) = delete;
  /// @}
  /// @brief Takes over @p other's memory; @p other becomes empty.
  pitched_buffer(pitched_buffer&& other) noexcept
      : alloc_(cudrv::detail::exchange(other.alloc_, {})),
        pitch_(cudrv::detail::exchange(other.pitch_, 0)),
        width_(cudrv::detail::exchange(other.width_, 0)),
        height_(cudrv::detail::exchange(other.height_, 0)),
        depth_(cudrv::detail::exchange(other.depth_, 0)) {}
  /// @brief Frees the held memory, then takes over @p other's.
  pitched_buffer& operator=(pitched_buffer&& other) noexcept {
    if (this != &other) {
      alloc_.free();
      alloc_ = cudrv::detail::exchange(other.alloc_, {});
      pitch_ = cudrv::detail::exchange(other.pitch_, 0);
      width_ = cudrv::detail::exchange(other.width_, 0);
      height_ = cudrv::detail::exchange(other.height_, 0);
      depth_ = cudrv::detail::exchange(other.depth_, 0);
    }
    return *this;
  }
  /// @brief Frees the memory (errors go to the destruction handler).
  ~pitched_buffer() { alloc_.free(); }

  /// @brief Adopts memory from cuMemAllocPitch made in @p ctx: @p depth slices of @p height rows of
  /// @p width elements, rows @p pitch bytes apart (at least `width * sizeof(T)`); it will be freed with
  /// cuMemFree in @p ctx.
  [[nodiscard]] static pitched_buffer from_native_handle(CUdeviceptr address, std::size_t pitch, std::size_t width,
                                                         std::size_t height, std::size_t depth, context_ref ctx) {
    pitched_buffer out;
    out.alloc_ = detail::device_allocation::adopt(address, pitch * height * depth, ctx.native_handle());
    out.pitch_ = pitch;
    out.width_ = width;
    out.height_ = height;
    out.depth_ = depth;
    return out;
  }
  /// @brief Gives up ownership; the caller must free the returned address with cuMemFree.
  [[nodiscard]] CUdeviceptr release() noexcept {
    pitch_ = width_ = height_ = depth_ = 0;
    return alloc_.release();
  }
  /// @brief Frees the memory now; the buffer becomes empty.
  void reset() noexcept {
    pitch_ = width_ = height_ = depth_ = 0;
    alloc_.free();
  }
  /// @brief The device address of element (0, 0, 0).
  [[nodiscard]] CUdeviceptr data() const noexcept { return alloc_.address; }
  /// @brief The address of element (0, 0, 0) as a typed pointer, for kernel arguments.
  [[nodiscard]] T* get() const noexcept { return reinterpret_cast<T*>(alloc_.address); }
  /// @brief Bytes from one row to the next.
  [[nodiscard]] std::size_t pitch() const noexcept { return pitch_; }
  /// @brief Elements per row.
  [[nodiscard]] std::size_t width() const noexcept { return width_; }
  /// @brief Rows per slice.
  [[nodiscard]] std::size_t height() const noexcept { return height_; }
  /// @brief Slices.
  [[nodiscard]] std::size_t depth() const noexcept { return depth_; }
  /// @brief Whether the buffer holds memory (false after a move or @ref release).
  [[nodiscard]] explicit operator bool() const noexcept { return alloc_.address != 0; }
  /// @brief A view of the whole array.
  [[nodiscard]] pitched_span<T> view() noexcept { return {alloc_.address, pitch_, width_, height_, depth_}; }
  /// @brief A read-only view of the whole array.
  [[nodiscard]] pitched_span<const T> view() const noexcept {
    return {alloc_.address, pitch_, width_, height_, depth_};
  }
  /// @brief Converts to a view of the whole array.
  operator pitched_span<T>() & noexcept { return view(); }  // NOLINT: implicit on purpose
  /// @brief Converts to a read-only view of the whole array.
  operator pitched_span<const T>() const& noexcept { return view(); }  // NOLINT: implicit on purpose
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: a view of a temporary buffer would outlive its memory.
  operator pitched_span<T>() && = delete;
  /// @brief Refused: a view of a temporary buffer would outlive its memory.
  operator pitched_span<const T>() const&& = delete;
  /// @}
  /// @brief The context the memory belongs to.
  [[nodiscard]] context_ref context() const noexcept { return context_ref(alloc_.context.handle); }
  /// @brief What the memory is (no pointer-attribute query): device memory of its context's device,
  /// not host-accessible; `{-1, false, false}` when the buffer is empty (moved-from or released).
  [[nodiscard]] memory_properties properties() const { return alloc_.properties(); }

 private:
  pitched_buffer() noexcept = default;
  detail::device_allocation alloc_{};
  std::size_t pitch_ = 0;
  std::size_t width_ = 0;
  std::size_t height_ = 0;
  std::size_t depth_ = 0;
};

}  // namespace cudrv
