/// @file copy.hpp
/// @brief Copies and fills: @ref cudrv::copy (1D and pitched 2D/3D, every direction, synchronous or on a
/// stream), @ref cudrv::copy_peer, and @ref cudrv::fill.
///
/// A copy takes views (or anything that gives one: buffers, `std::span`, `std::vector`,
/// `std::array`) and copies whole elements. Sizes are checked before any driver call: a copy larger
/// than its source or its destination, or of nothing at all, throws @ref cudrv::invalid_argument_error.
///
/// Layer: memory (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cudrv/context.hpp"
#include "cudrv/device.hpp"
#include "cudrv/span.hpp"
#include "cudrv/stream.hpp"

namespace cudrv {

namespace detail {

/// @brief An address and an element count (internal).
template <class T>
struct linear_view {
  std::uintptr_t address;
  std::size_t count;
};

template <class V>
struct is_device_span : std::false_type {};
template <class T>
struct is_device_span<device_span<T>> : std::true_type {};

/// @brief Whether @p V is a device_span, has a view() returning one, or is a contiguous host range
/// with data() returning a pointer and size() (internal).
template <class V>
concept linear_source = is_device_span<std::remove_cvref_t<V>>::value || requires(V& v) {
  requires is_device_span<std::remove_cvref_t<decltype(v.view())>>::value;
} || requires(V& v) {
  { v.data() } -> std::convertible_to<const volatile void*>;
  { v.size() } -> std::convertible_to<std::size_t>;
};

/// @brief The view of anything satisfying linear_source (internal).
template <class V>
auto to_linear(V& v) {
  using D = std::remove_cvref_t<V>;
  if constexpr (is_device_span<D>::value) {
    return linear_view<typename D::element_type>{static_cast<std::uintptr_t>(v.data()), v.size()};
  } else if constexpr (requires { requires is_device_span<std::remove_cvref_t<decltype(v.view())>>::value; }) {
    auto s = v.view();
    return linear_view<typename decltype(s)::element_type>{static_cast<std::uintptr_t>(s.data()), s.size()};
  } else {
    using E = std::remove_pointer_t<decltype(v.data())>;
    return linear_view<E>{reinterpret_cast<std::uintptr_t>(v.data()), static_cast<std::size_t>(v.size())};
  }
}

template <class L>
struct view_element;
template <class T>
struct view_element<linear_view<T>> {
  using type = T;
};
/// @brief The element type of the view of @p V (internal).
template <class V>
using element_t = typename view_element<decltype(to_linear(std::declval<V&>()))>::type;

/// @brief A copy between two linear views, in bytes, before any check (internal).
struct linear_copy {
  std::uintptr_t dst;
  std::size_t dst_bytes;
  std::uintptr_t src;
  std::size_t src_bytes;
  std::size_t bytes;  // what to copy
};
void copy_linear(const linear_copy& c, CUstream stream, bool async);
void copy_linear_peer(const linear_copy& c, CUcontext dst_ctx, CUcontext src_ctx, CUstream stream, bool async);
void fill_linear(std::uintptr_t dst, std::size_t count, std::uint32_t pattern, std::size_t element_size,
                 CUstream stream, bool async);

/// @brief An untyped pitched layout (internal).
struct pitched_layout {
  std::uintptr_t address;
  std::size_t pitch, width_bytes, height, depth;
};
void copy_pitched(pitched_layout dst, pitched_layout src, CUstream stream, bool async);

/// @brief @p count * @p size, saturated at SIZE_MAX so that a count whose byte size overflows fails the
/// size checks instead of wrapping to a small copy (internal).
constexpr std::size_t saturating_bytes(std::size_t count, std::size_t size) noexcept {
  return count > SIZE_MAX / size ? SIZE_MAX : count * size;
}

template <class D, class S>
constexpr void check_copy_types() {
  static_assert(!std::is_const_v<D>, "the destination of a copy must not be a view of const elements");
  static_assert(std::is_same_v<std::remove_cv_t<D>, std::remove_cv_t<S>>,
                "copy needs the same element type on both sides");
  static_assert(std::is_trivially_copyable_v<std::remove_cv_t<D>>, "copy needs trivially copyable elements");
}

/// @brief Fills the view of @p dst with the bytes of @p value repeated (internal).
template <class Dst>
void fill_view(Dst& dst, const element_t<Dst>& value, CUstream stream, bool async) {
  using D = element_t<Dst>;
  static_assert(!std::is_const_v<D>, "fill needs a view of non-const elements");
  static_assert(sizeof(D) == 1 || sizeof(D) == 2 || sizeof(D) == 4, "fill supports elements of 1, 2 or 4 bytes");
  auto d = to_linear(dst);
  std::uint32_t pattern = 0;
  std::memcpy(&pattern, &value, sizeof(D));
  fill_linear(d.address, d.count, pattern, sizeof(D), stream, async);
}

/// @brief The byte ranges of copying all of @p src (or its first @p count elements, when given) into
/// @p dst, after the compile-time checks of the element types (internal).
template <class Dst, class Src>
linear_copy plan_copy(Dst& dst, Src& src, const std::size_t* count) {
  using D = element_t<Dst>;
  using S = element_t<Src>;
  check_copy_types<D, S>();
  auto d = to_linear(dst);
  auto r = to_linear(src);
  return {d.address, d.count * sizeof(D), r.address, r.count * sizeof(S),
          count != nullptr ? saturating_bytes(*count, sizeof(S)) : r.count * sizeof(S)};
}

}  // namespace detail

/// @brief Anything @ref cudrv::copy and @ref cudrv::fill accept as a linear view: a @ref cudrv::device_span, a buffer,
/// or a contiguous host range (`std::span`, `std::vector`, `std::array`, @ref cudrv::pinned_buffer).
template <class V>
concept linear_view_source = detail::linear_source<V>;

/// @brief A `cudrv::linear_view_source` whose memory outlives the call it is passed to: a named object (a
/// buffer, a `std::vector`, a span variable) or a view, even a temporary one (`buf.view().first(8)`,
/// `std::span(v)`). What keeps the address past the call (a @ref cudrv::batch_copy, a graph's memcpy and
/// memset nodes, their updates) takes these, so that a temporary owner made in the call, freed at the end
/// of the statement, does not compile there.
/// @code
/// batch.add(dst, host);                               // compiles: host is a named std::vector
/// batch.add(dst, std::vector<float>(n, 1.f));         // does not compile: freed before the copy runs
/// @endcode
template <class V>
concept borrowed_linear_view = linear_view_source<V> &&
    (std::is_lvalue_reference_v<V> || detail::is_view_type<std::remove_cvref_t<V>>);

/// @brief Copies all elements of @p src to the start of @p dst, ordered on @p s (cuMemcpyAsync).
///
/// Works in every direction (host to device, device to host, device to device, host to host); the
/// driver infers it from the addresses. Host memory should be pinned for the copy to be
/// asynchronous.
/// @code
/// cudrv::copy(dev_buf, host_vec, stream);                            // H2D
/// cudrv::copy(std::span(out), dev_buf.view().first(10), stream);     // D2H of 10 elements
/// @endcode
/// @throws invalid_argument_error when @p src is empty or larger than @p dst, a view is null, or the
///   bytes copied overlap (the driver's copies are undefined for overlapping memory)
template <linear_view_source Dst, linear_view_source Src>
void copy(Dst&& dst, Src&& src, stream_ref s) {
  detail::copy_linear(detail::plan_copy(dst, src, nullptr), s.native_handle(), true);
}

/// @brief Copies the first @p count elements of @p src to the start of @p dst, ordered on @p s.
/// @throws invalid_argument_error when @p count is 0 or exceeds either view, or the bytes copied overlap
template <linear_view_source Dst, linear_view_source Src>
void copy(Dst&& dst, Src&& src, std::size_t count, stream_ref s) {
  detail::copy_linear(detail::plan_copy(dst, src, &count), s.native_handle(), true);
}

/// @brief Copies all elements of @p src to the start of @p dst synchronously: when it returns, the
/// copy has completed (cuMemcpy, then a synchronisation of the legacy default stream, since
/// cuMemcpy may return before a device-to-device or pageable host-to-device copy has landed). It
/// runs in the context that owns the device memory involved, whatever context is current.
/// @throws invalid_argument_error when @p src is empty or larger than @p dst, a view is null, or the
///   bytes copied overlap (the driver's copies are undefined for overlapping memory)
template <linear_view_source Dst, linear_view_source Src>
void copy(Dst&& dst, Src&& src) {
  detail::copy_linear(detail::plan_copy(dst, src, nullptr), nullptr, false);
}

/// @brief Copies the first @p count elements of @p src to the start of @p dst synchronously.
/// @throws invalid_argument_error when @p count is 0 or exceeds either view, or the bytes copied overlap
template <linear_view_source Dst, linear_view_source Src>
void copy(Dst&& dst, Src&& src, std::size_t count) {
  detail::copy_linear(detail::plan_copy(dst, src, &count), nullptr, false);
}

/// @brief Copies a pitched 2D or 3D array, ordered on @p s (cuMemcpy2DAsync / cuMemcpy3DAsync).
///
/// Copies `src.width` × `src.height` × `src.depth` elements; the destination must be at least as
/// large in each dimension. Either side may be device, pinned, managed or pageable host memory.
/// @code
/// cudrv::pitched_buffer<float> img(dev, w, h);
/// cudrv::copy(img.view(), cudrv::pitched_span<const float>::dense(host.data(), w, h), stream);
/// @endcode
/// @throws invalid_argument_error when an extent is zero, the source does not fit the destination,
/// or a pitch is smaller than its row
template <class T, class U>
void copy(pitched_span<T> dst, pitched_span<U> src, stream_ref s) {
  detail::check_copy_types<T, U>();
  // The layouts are named: nvcc's host code turns a bare braced argument into "({...})", which g++
  // then reads as a statement expression.
  detail::copy_pitched(detail::pitched_layout{dst.address, dst.pitch, dst.width * sizeof(T), dst.height, dst.depth},
                       detail::pitched_layout{src.address, src.pitch, src.width * sizeof(U), src.height, src.depth},
                       s.native_handle(), true);
}

/// @brief Copies a pitched 2D or 3D array synchronously (cuMemcpy2DUnaligned / cuMemcpy3D).
/// @throws invalid_argument_error as the stream-ordered form
template <class T, class U>
void copy(pitched_span<T> dst, pitched_span<U> src) {
  detail::check_copy_types<T, U>();
  // The layouts are named: nvcc's host code turns a bare braced argument into "({...})", which g++
  // then reads as a statement expression.
  detail::copy_pitched(detail::pitched_layout{dst.address, dst.pitch, dst.width * sizeof(T), dst.height, dst.depth},
                       detail::pitched_layout{src.address, src.pitch, src.width * sizeof(U), src.height, src.depth},
                       nullptr, false);
}

/// @brief Copies all elements of @p src, memory of context @p src_ctx, to the start of @p dst, memory
/// of context @p dst_ctx, ordered on @p s (cuMemcpyPeerAsync). Works without peer access enabled
/// (the driver stages through the host then).
/// @code
/// cudrv::device d0(0), d1(1);
/// cudrv::copy_peer(buf1, d1, buf0, d0, stream0);
/// @endcode
/// @throws invalid_argument_error when @p src is empty or larger than @p dst, or the bytes copied overlap
template <linear_view_source Dst, linear_view_source Src>
void copy_peer(Dst&& dst, context_ref dst_ctx, Src&& src, context_ref src_ctx, stream_ref s) {
  detail::copy_linear_peer(detail::plan_copy(dst, src, nullptr), dst_ctx.native_handle(), src_ctx.native_handle(),
                           s.native_handle(), true);
}

/// @brief As the context form, with the devices' primary contexts.
template <linear_view_source Dst, linear_view_source Src>
void copy_peer(Dst&& dst, const device& dst_dev, Src&& src, const device& src_dev, stream_ref s) {
  copy_peer(dst, dst_dev.primary_context(), src, src_dev.primary_context(), s);
}

/// @brief Copies all elements of @p src to @p dst between contexts, synchronously (cuMemcpyPeer).
template <linear_view_source Dst, linear_view_source Src>
void copy_peer(Dst&& dst, context_ref dst_ctx, Src&& src, context_ref src_ctx) {
  detail::copy_linear_peer(detail::plan_copy(dst, src, nullptr), dst_ctx.native_handle(), src_ctx.native_handle(),
                           nullptr, false);
}

/// @brief Sets every element of @p dst to @p value, ordered on @p s (cuMemsetD8/D16/D32Async).
///
/// Elements must be 1, 2 or 4 bytes wide; the value's bytes are repeated.
/// @code
/// cudrv::fill(dev_buf, 0.0f, stream);
/// cudrv::fill(dev_buf.view().subspan(10, 5), -1.0f, stream);
/// @endcode
/// @throws invalid_argument_error when @p dst is empty or null, or misaligned for its element size
template <linear_view_source Dst>
void fill(Dst&& dst, const detail::element_t<Dst>& value, stream_ref s) {
  detail::fill_view(dst, value, s.native_handle(), true);
}

/// @brief Sets every element of @p dst to @p value synchronously (cuMemsetD8/D16/D32); returns when done.
/// @throws invalid_argument_error as the stream-ordered form
template <linear_view_source Dst>
void fill(Dst&& dst, const detail::element_t<Dst>& value) {
  detail::fill_view(dst, value, nullptr, false);
}

}  // namespace cudrv
