/// @file launch_config.hpp
/// @brief The shape and options of a kernel launch: grid, block, dynamic shared memory, and every
/// launch attribute of the driver (clusters, cooperative launch, programmatic dependent launch, priority,
/// L2 access-policy window, memory-synchronisation domains, launch events, carveout, ...).
///
/// Layer: code (docs/design.md, "Source layers").
#pragma once

#include <cstddef>
#include <optional>
#include <type_traits>

// The event handle type of cuda.h (`CUevent` is `CUevent_st*`), declared here so that this header
// stays free of <cuda.h>.
struct CUevent_st;

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

/// @brief How the L2 cache treats the lines of an @ref cudrv::access_policy_window (`CUaccessProperty`).
enum class access_property : int {
  normal = 0,      ///< Normal cache persistence (`CU_ACCESS_PROPERTY_NORMAL`).
  streaming = 1,   ///< Less likely to stay in L2 (`CU_ACCESS_PROPERTY_STREAMING`).
  persisting = 2,  ///< More likely to stay in L2, in its persisting part (`CU_ACCESS_PROPERTY_PERSISTING`).
};

/// @brief An L2 access-policy window (`CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW`): of the accesses of
/// the kernel to [base, base + bytes), a fraction @ref hit_ratio gets the @ref hit property, the others
/// the @ref miss property.
///
/// Persisting lines only persist in the part of L2 set aside for them, the context's
/// `CU_LIMIT_PERSISTING_L2_CACHE_SIZE` (0 by default): set it for a scope with
/// @ref scoped_persisting_l2_limit. The window is not set while both @ref base and @ref bytes are
/// empty (the default).
struct access_policy_window {
  /// @brief The window's first byte (device memory); the driver may align it.
  const void* base = nullptr;
  /// @brief The window's size in bytes: at most the device's `CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE`.
  std::size_t bytes = 0;
  /// @brief The fraction of the window's accesses that get @ref hit, in [0, 1].
  float hit_ratio = 1.0f;
  /// @brief The property of the accesses in the hit fraction.
  access_property hit = access_property::persisting;
  /// @brief The property of the others: @ref access_property::normal or @ref access_property::streaming.
  access_property miss = access_property::streaming;

  /// @brief Whether the window is set (a base or a size given).
  [[nodiscard]] constexpr bool is_set() const noexcept { return base != nullptr || bytes != 0; }
};

/// @brief How the blocks of a cluster are spread over SMs (`CUclusterSchedulingPolicy`).
enum class cluster_scheduling_policy : int {
  default_policy = 0,  ///< The driver's default (`CU_CLUSTER_SCHEDULING_POLICY_DEFAULT`).
  spread = 1,          ///< Spread the blocks of a cluster over SMs (`CU_CLUSTER_SCHEDULING_POLICY_SPREAD`).
  load_balancing = 2,  ///< Let the hardware balance the load (`CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING`).
};

/// @brief The memory-synchronisation domain a kernel is launched in (`CUlaunchMemSyncDomain`): a
/// memory fence orders only the memory operations of its own domain.
enum class memory_sync_domain : int {
  default_domain = 0,  ///< The default domain (`CU_LAUNCH_MEM_SYNC_DOMAIN_DEFAULT`).
  remote = 1,          ///< The remote domain, for kernels that talk to other GPUs (`CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE`).
};

/// @brief Which domain ids the two logical domains map to (`CUlaunchMemSyncDomainMap`); each below
/// the device's `CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT`.
struct memory_sync_domain_map {
  unsigned default_id = 0;  ///< The domain id of kernels in @ref memory_sync_domain::default_domain.
  unsigned remote_id = 1;   ///< The domain id of kernels in @ref memory_sync_domain::remote.
};

/// @brief Named values of @ref launch_config::shared_memory_carveout (any percentage 0..100 is allowed).
namespace shared_memory_carveout {
inline constexpr unsigned max_l1 = 0;  ///< As much L1 cache as possible (`CU_SHAREDMEM_CARVEOUT_MAX_L1`).
inline constexpr unsigned max_shared =
    100;  ///< As much shared memory as possible (`CU_SHAREDMEM_CARVEOUT_MAX_SHARED`).
}  // namespace shared_memory_carveout

namespace detail {
/// @brief An event handle (@ref event, @ref event_ref): something whose `native_handle()` is a `CUevent`.
template <class E>
concept event_handle = requires(const E& e) {
  static_cast<::CUevent_st*>(e.native_handle());
};
}  // namespace detail

/// @brief The event a launch attribute records (@ref programmatic_event_record,
/// @ref completion_event_record): the handle of an @ref event or @ref event_ref, taken from an lvalue.
///
/// Default-constructed it names no event (the attribute is not set). One made from an empty event (a
/// moved-from owner) is refused at launch. A temporary owner is refused at compile time: the event
/// would be destroyed before the launch records it.
class launch_event {
 public:
  /// @brief No event: the attribute that holds it is not set.
  constexpr launch_event() noexcept = default;
  /// @brief The event @p e (an @ref event or @ref event_ref).
  template <class E>
  requires detail::event_handle<E>
  constexpr launch_event(const E& e) noexcept  // NOLINT: implicit on purpose
      : handle_(e.native_handle()), named_(true) {}
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: a temporary owner would be destroyed before the launch records it.
  template <class E>
  requires(detail::event_handle<E> && !std::is_trivially_copyable_v<E>) launch_event(const E&&)
  = delete;
  /// @}

  /// @brief The raw handle (null when none or an empty event was given).
  [[nodiscard]] constexpr ::CUevent_st* native_handle() const noexcept { return handle_; }
  /// @brief Whether an event was given (even an empty one).
  [[nodiscard]] constexpr bool is_named() const noexcept { return named_; }

 private:
  ::CUevent_st* handle_ = nullptr;
  bool named_ = false;
};

/// @brief A programmatic event (`CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT`, stream launches only): the
/// event fires once every block has triggered it (`cudaTriggerProgrammaticLaunchCompletion`), or has
/// started when @ref trigger_at_block_start is set; launches that wait on it use
/// `cudaGridDependencySynchronize`. The event must be untimed and not interprocess.
struct programmatic_event_record {
  launch_event event{};                 ///< The event; none (the default) leaves the attribute unset.
  bool trigger_at_block_start = false;  ///< Every block triggers the event when it starts.
  unsigned record_flags = 0;            ///< `cuEventRecordWithFlags` flags: only 0 (`CU_EVENT_RECORD_DEFAULT`).
};

/// @brief A launch-completion event (`CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT`, stream launches
/// only): the event fires once every block of the kernel has started (best effort: it may fire only
/// when the kernel ends), so work waiting on it may overlap the kernel. The event must be untimed
/// and not interprocess.
struct completion_event_record {
  launch_event event{};       ///< The event; none (the default) leaves the attribute unset.
  unsigned record_flags = 0;  ///< `cuEventRecordWithFlags` flags: only 0 (`CU_EVENT_RECORD_DEFAULT`).
};

/// @brief How a kernel is launched: passed to @ref launch together with the stream and the kernel.
///
/// An aggregate, meant for designated initialisers. Only what differs from the defaults needs to be
/// written, in declaration order; every default means "not set". A plain configuration (grid, block,
/// dynamic shared memory) is launched with `cuLaunchKernel`, any launch attribute with
/// `cuLaunchKernelEx`. docs/loading-and-launching.md, "Launch attributes", lists each attribute's
/// driver id, the paths that accept it (stream launches, graph kernel nodes, occupancy queries) and the
/// checks made before the driver is called.
///
/// @code
/// cudrv::launch_config config{.grid = (n + 255) / 256, .block = 256};
/// cudrv::launch_config tiles{.grid = {8, 8}, .block = {16, 16}, .dynamic_shared_memory = 48 * 1024};
/// cudrv::launch_config clustered{.grid = 128, .block = 128, .cluster = 2};  // 2-block clusters (sm_90+)
/// cudrv::launch_config coop{.grid = sms * blocks_per_sm, .block = 256, .cooperative = true};
/// cudrv::launch_config hot{.grid = 528, .block = 256,
///                          .access_policy = {.base = table.get(), .bytes = table.size_bytes(), .hit_ratio = 0.6f}};
/// @endcode
struct launch_config {
  /// @brief Blocks in the grid (each extent >= 1; with clusters, a multiple of the cluster extents).
  dims grid{};
  /// @brief Threads per block (each extent >= 1).
  dims block{};
  /// @brief Bytes of dynamic shared memory per block. Above 48 KiB the kernel must first allow it with
  /// @ref kernel_ref::set_max_dynamic_shared_memory.
  std::size_t dynamic_shared_memory = 0;
  /// @brief Blocks per thread-block cluster (`CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`); `{0, 0, 0}` (the
  /// default) launches without clusters. Needs compute capability 9.0; more than 8 blocks needs
  /// @ref kernel_ref::set_non_portable_cluster_size_allowed.
  dims cluster{0, 0, 0};
  /// @brief A cooperative launch (`CU_LAUNCH_ATTRIBUTE_COOPERATIVE`): all blocks are co-resident, so
  /// grid-wide synchronisation (`cooperative_groups::this_grid().sync()`) is allowed. The grid must fit
  /// on the device at once.
  bool cooperative = false;
  /// @brief Programmatic dependent launch (`CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`,
  /// stream launches only): this kernel may start before the previous kernel in the stream has finished
  /// (it must call `cudaGridDependencySynchronize`). Off by default.
  bool programmatic_stream_serialization = false;
  /// @brief The launch's scheduling priority (`CU_LAUNCH_ATTRIBUTE_PRIORITY`; lower numbers are higher
  /// priority, as for streams); empty uses the stream's.
  std::optional<int> priority{};
  /// @brief An L2 access-policy window (`CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW`); not set by default.
  access_policy_window access_policy{};
  /// @brief How the blocks of a cluster are scheduled
  /// (`CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE`); empty leaves the kernel's.
  std::optional<cluster_scheduling_policy> cluster_scheduling{};
  /// @brief A preferred, larger cluster (`CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION`, CUDA 12.8):
  /// blocks are grouped in clusters of this size where the device has room, else of @ref cluster's.
  /// Needs @ref cluster; x and y multiples of the cluster's, z equal to it, each dividing the grid.
  /// `{0, 0, 0}` (the default) is not set.
  dims preferred_cluster{0, 0, 0};
  /// @brief A programmatic event (`CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT`, stream launches only); not
  /// set by default.
  programmatic_event_record programmatic_event{};
  /// @brief A launch-completion event (`CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT`, stream launches
  /// only); not set by default.
  completion_event_record completion_event{};
  /// @brief The memory-synchronisation domain (`CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN`); empty uses the
  /// stream's.
  std::optional<cudrv::memory_sync_domain> memory_sync_domain{};
  /// @brief The domain ids of the two domains (`CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP`); empty uses
  /// the stream's.
  std::optional<cudrv::memory_sync_domain_map> memory_sync_domain_map{};
  /// @brief The preferred shared-memory carveout in percent of the maximum, 0..100
  /// (`CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT`; see @ref shared_memory_carveout); empty
  /// leaves the kernel's. A hint.
  std::optional<unsigned> shared_memory_carveout{};
  /// @brief Makes the graph kernel node device-updatable (`CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE`;
  /// graph nodes and launches into a capturing stream only): its handle for device-side updates is
  /// @ref typed_graph_node::device_updatable_handle. Such a node cannot be removed, and its graph can
  /// be instantiated only once and not updated with `graph_exec::update`.
  bool device_updatable = false;
  /// @brief A hint to lay the launch out for NVLink traffic
  /// (`CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING`, CUDA 13.0). Off by default.
  bool nvlink_util_centric_scheduling = false;

  /// @brief Whether the launch uses thread-block clusters.
  [[nodiscard]] constexpr bool has_cluster() const noexcept {
    return cluster.x != 0 || cluster.y != 0 || cluster.z != 0;
  }
  /// @brief Whether a preferred cluster is set.
  [[nodiscard]] constexpr bool has_preferred_cluster() const noexcept {
    return preferred_cluster.x != 0 || preferred_cluster.y != 0 || preferred_cluster.z != 0;
  }
  /// @brief Whether the launch needs `cuLaunchKernelEx` (any launch attribute).
  [[nodiscard]] constexpr bool needs_extended_launch() const noexcept {
    return has_cluster() || cooperative || programmatic_stream_serialization || priority.has_value() ||
           access_policy.is_set() || cluster_scheduling.has_value() || has_preferred_cluster() ||
           programmatic_event.event.is_named() || completion_event.event.is_named() || memory_sync_domain.has_value() ||
           memory_sync_domain_map.has_value() || shared_memory_carveout.has_value() || device_updatable ||
           nvlink_util_centric_scheduling;
  }
};

}  // namespace cudrv
