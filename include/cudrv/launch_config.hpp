/// @file launch_config.hpp
/// @brief The shape and options of a kernel launch: grid, block, dynamic shared memory, clusters,
/// cooperative launch, programmatic stream serialization and priority.
///
/// Layer: code (docs/design.md, "Source layers").
#pragma once

#include <cstddef>
#include <optional>
#include <type_traits>

namespace cudrv {

namespace detail {
/// @brief Whether an extent of type @p T converts to `unsigned` without losing values of its range
/// other than negative ones, which launches refuse at run time (internal).
template <class T>
inline constexpr bool is_extent_type =
    std::is_integral_v<T> && !std::is_same_v<std::remove_cv_t<T>, bool> && sizeof(T) <= sizeof(unsigned);
/// @brief Throws @ref invalid_argument_error for an extent above 2^32 - 1 (internal).
[[noreturn]] void throw_extent_overflow(unsigned long long value, char axis);
}  // namespace detail

/// @brief Up to three extents, like CUDA's `dim3`; missing extents are 1.
///
/// Converts implicitly from integers of at most 32 bits (`int`, `unsigned`), so `.grid = 80,
/// .block = 256` reads naturally. A 64-bit value (`std::size_t`) does not convert: it could narrow
/// silently (4294967301 blocks would become 5), so it must go through @ref checked, which refuses
/// what does not fit, or an explicit cast. Extents the device does not allow (0, a negative `int`,
/// more blocks than the grid limit) are refused when launching, with the limit named.
/// @code
/// cudrv::dims grid(64, 32);                               // 64 x 32 x 1
/// cudrv::dims block = 256;                                // 256 x 1 x 1
/// std::size_t n = 1ull << 33;
/// auto g = cudrv::dims::checked((n + 255) / 256);         // 33554432 blocks, checked
/// // cudrv::dims bad = (n + 255) / 256;                   // error: a 64-bit extent
/// @endcode
struct dims {
  unsigned x = 1;  ///< Extent in x.
  unsigned y = 1;  ///< Extent in y.
  unsigned z = 1;  ///< Extent in z.

  /// @brief 1 x 1 x 1.
  constexpr dims() noexcept = default;
  /// @brief @p x_ x @p y_ x @p z_, from integers of at most 32 bits.
  template <class X, class Y = unsigned, class Z = unsigned>
  requires(detail::is_extent_type<X>&& detail::is_extent_type<Y>&& detail::is_extent_type<Z>) constexpr dims(
      X x_, Y y_ = 1u, Z z_ = 1u) noexcept  // NOLINT: implicit on purpose
      : x(static_cast<unsigned>(x_)), y(static_cast<unsigned>(y_)), z(static_cast<unsigned>(z_)) {}
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused at compile time: a 64-bit (or floating-point, or bool) extent could be truncated
  /// silently; use @ref checked, which refuses what does not fit.
  ///
  /// Deleted rather than a body that fails a `static_assert`, so that traits and requires-expressions
  /// see the refusal (`std::is_convertible_v<std::size_t, dims>` is false). The compiler's error
  /// points here, and the line it quotes (the one below) names @ref checked; C++26 compilers print
  /// the reason of `= delete("…")` itself.
  template <class X, class Y = unsigned, class Z = unsigned>
  requires(!(detail::is_extent_type<X> && detail::is_extent_type<Y> && detail::is_extent_type<Z>))
      dims(X, Y = 1u, Z = 1u)  // a 64-bit extent could be truncated: use dims::checked(x, y, z)
#if defined(__cpp_deleted_function) && __cpp_deleted_function >= 202403L
  = delete ("a 64-bit, floating-point or bool extent could be truncated: use dims::checked(x, y, z)");
#else
  = delete;
#endif
  /// @}
  /// @brief @p x_ x @p y_ x @p z_ from 64-bit values, each checked to fit 32 bits.
  /// @throws invalid_argument_error naming the axis and the value when one does not
  [[nodiscard]] static constexpr dims checked(unsigned long long x_, unsigned long long y_ = 1,
                                              unsigned long long z_ = 1) {
    constexpr unsigned long long max = 0xFFFFFFFFull;
    if (x_ > max) {
      detail::throw_extent_overflow(x_, 'x');
    }
    if (y_ > max) {
      detail::throw_extent_overflow(y_, 'y');
    }
    if (z_ > max) {
      detail::throw_extent_overflow(z_, 'z');
    }
    return dims(static_cast<unsigned>(x_), static_cast<unsigned>(y_), static_cast<unsigned>(z_));
  }

  /// @brief x * y * z, without overflow.
  [[nodiscard]] constexpr unsigned long long count() const noexcept {
    return static_cast<unsigned long long>(x) * y * z;
  }
  /// @brief Component-wise equality.
  friend constexpr bool operator==(const dims&, const dims&) noexcept = default;
};

/// @brief How a kernel is launched: passed to @ref launch together with the stream and the kernel.
///
/// An aggregate, meant for designated initialisers. Only what differs from the defaults needs to be
/// written; a plain configuration (no cluster, not cooperative, no priority, no programmatic stream
/// serialization) is launched with `cuLaunchKernel`, any of those options with `cuLaunchKernelEx`.
///
/// @code
/// cudrv::launch_config config{.grid = (n + 255) / 256, .block = 256};
/// cudrv::launch_config tiles{.grid = {8, 8}, .block = {16, 16}, .dynamic_shared_memory = 48 * 1024};
/// cudrv::launch_config clustered{.grid = 128, .block = 128, .cluster = 2};  // 2-block clusters (sm_90+)
/// cudrv::launch_config coop{.grid = sms * blocks_per_sm, .block = 256, .cooperative = true};
/// @endcode
struct launch_config {
  /// @brief Blocks in the grid (each extent >= 1; with clusters, a multiple of the cluster extents).
  dims grid{};
  /// @brief Threads per block (each extent >= 1).
  dims block{};
  /// @brief Bytes of dynamic shared memory per block. Above 48 KiB the kernel must first allow it with
  /// @ref kernel_ref::set_max_dynamic_shared_memory.
  std::size_t dynamic_shared_memory = 0;
  /// @brief Blocks per thread-block cluster; `{0, 0, 0}` (the default) launches without clusters.
  /// Needs compute capability 9.0; more than 8 blocks needs
  /// @ref kernel_ref::set_non_portable_cluster_size_allowed.
  dims cluster{0, 0, 0};
  /// @brief A cooperative launch: all blocks are co-resident, so grid-wide synchronisation
  /// (`cooperative_groups::this_grid().sync()`) is allowed. The grid must fit on the device at once.
  bool cooperative = false;
  /// @brief Programmatic dependent launch: this kernel may start before the previous kernel in the
  /// stream has finished (it must call `cudaGridDependencySynchronize`). Off by default.
  bool programmatic_stream_serialization = false;
  /// @brief The launch's scheduling priority (lower numbers are higher priority, as for streams);
  /// empty uses the stream's.
  std::optional<int> priority{};

  /// @brief Whether the launch uses thread-block clusters.
  [[nodiscard]] constexpr bool has_cluster() const noexcept {
    return cluster.x != 0 || cluster.y != 0 || cluster.z != 0;
  }
  /// @brief Whether the launch needs `cuLaunchKernelEx` (any option beyond grid, block and shared memory).
  [[nodiscard]] constexpr bool needs_extended_launch() const noexcept {
    return has_cluster() || cooperative || programmatic_stream_serialization || priority.has_value();
  }
};

}  // namespace cudrv
