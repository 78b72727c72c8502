/// @file green_context.hpp
/// @brief Green contexts: a device's streaming multiprocessors as a value (@ref cudrv::sm_resource),
/// split into disjoint groups (@ref cudrv::sm_resource::split_by_count), and contexts confined to one
/// group (@ref cudrv::green_context, viewed by @ref cudrv::green_context_ref), with streams in them.
///
/// See the page "Green contexts" (docs/green-contexts.md) for the split rules and a worked example.
///
/// Layer: streams (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <cstddef>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "cudrv/context.hpp"
#include "cudrv/detail/exchange.hpp"
#include "cudrv/device.hpp"
#include "cudrv/event.hpp"
#include "cudrv/stream.hpp"

namespace cudrv {

/// @brief How @ref cudrv::sm_resource::split_by_count may place SMs (the `CU_DEV_SM_RESOURCE_SPLIT_*` flags).
enum class sm_split_flags : unsigned int {
  /// @brief The default: groups respect the device's co-scheduling (on compute capability 9.0, groups
  /// of a multiple of 8 SMs, at least 8).
  none = 0,
  /// @brief Treat every SM on its own, ignoring the GPU's hierarchy: smaller groups and a finer
  /// granularity, at the cost of features such as large thread-block clusters
  /// (`CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING`).
  ignore_coscheduling = CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING,
  /// @brief Compute capability 9.0 and later: try to make groups that allow the largest thread-block
  /// clusters (`CU_DEV_SM_RESOURCE_SPLIT_MAX_POTENTIAL_CLUSTER_SIZE`).
  max_potential_cluster_size = CU_DEV_SM_RESOURCE_SPLIT_MAX_POTENTIAL_CLUSTER_SIZE,
};

/// @brief Combines split flags.
[[nodiscard]] constexpr sm_split_flags operator|(sm_split_flags a, sm_split_flags b) noexcept {
  return static_cast<sm_split_flags>(static_cast<unsigned int>(a) | static_cast<unsigned int>(b));
}

struct sm_split;

/// @brief A set of streaming multiprocessors (SMs): a `CUdevResource` of type `CU_DEV_RESOURCE_TYPE_SM`.
///
/// A plain value (nothing to destroy): the whole device (@ref of), what a context or a green context
/// may use (@ref of(context_ref), @ref green_context_base::sm_resource), or a group of a split. A
/// green context is made from one or more groups of the same split.
///
/// The driver's rules for a split, which @ref min_partition_size and @ref coscheduled_alignment give
/// for this device: each group has at least `min_partition_size()` SMs and a multiple of
/// `coscheduled_alignment()` SMs, the requested count being rounded up to both (cuda.h 13.0's guideline:
/// compute capability 6.x and 7.x at least 2, a multiple of 2; 8.x at least 4, a multiple of 2; 9.0 and
/// later at least 8, a multiple of 8). @ref sm_split_flags::ignore_coscheduling lowers both.
/// @code
/// cudrv::device dev(0);
/// cudrv::sm_resource all = cudrv::sm_resource::of(dev);          // 132 SMs on an H100 SXM
/// cudrv::sm_split split = all.split_by_count(16, 1);               // one group of 16 SMs
/// cudrv::green_context small(dev, split.groups[0]);                // kernels there use those 16 SMs
/// cudrv::green_context rest(dev, split.remainder);                 // and the other 116
/// @endcode
class sm_resource {
 public:
  /// @brief An empty resource (no SMs, type `CU_DEV_RESOURCE_TYPE_INVALID`).
  sm_resource() noexcept;

  /// @brief The SMs of @p dev (cuDeviceGetDevResource); needs no context.
  /// @throws not_supported_error when the driver has no green contexts (before CUDA 12.4)
  [[nodiscard]] static sm_resource of(const cudrv::device& dev);
  /// @brief The SMs that @p ctx may use (cuCtxGetDevResource): all of the device's for an ordinary
  /// context, the green context's for the view returned by @ref green_context_base::context.
  [[nodiscard]] static sm_resource of(context_ref ctx);
  /// @brief Wraps a resource the driver filled in.
  /// @throws invalid_argument_error when @p resource is not of type `CU_DEV_RESOURCE_TYPE_SM`
  [[nodiscard]] static sm_resource from_native(const CUdevResource& resource);

  /// @brief The number of SMs.
  [[nodiscard]] unsigned int sm_count() const noexcept;
  /// @brief The fewest SMs a group of a split of this resource can have (`minSmPartitionSize`).
  [[nodiscard]] unsigned int min_partition_size() const noexcept;
  /// @brief The granularity of a group of a split, in SMs (`smCoscheduledAlignment`): the number of
  /// SMs guaranteed to be scheduled together on one GPU processing cluster.
  [[nodiscard]] unsigned int coscheduled_alignment() const noexcept;
  /// @brief Whether this holds an SM resource with at least one SM (an empty remainder holds none).
  [[nodiscard]] explicit operator bool() const noexcept;

  /// @brief How many groups of at least @p min_count SMs a split would make (a dry run of
  /// cuDevSmResourceSplitByCount): what @ref split_by_count with `groups = 0` returns, without making them.
  /// @throws invalid_argument_error for an empty resource or @p min_count above @ref sm_count
  [[nodiscard]] unsigned int group_count(unsigned int min_count, sm_split_flags flags = sm_split_flags::none) const;

  /// @brief Splits the SMs into disjoint groups of equal size and a remainder (cuDevSmResourceSplitByCount).
  ///
  /// Each group gets @p min_count SMs, rounded up by the driver to @ref min_partition_size and to a
  /// multiple of @ref coscheduled_alignment (see the class). The remainder holds what is left over
  /// (possibly nothing); it has no co-scheduling guarantee and should not be split further. Groups and
  /// remainder cannot themselves be split until a green context is made of them
  /// (@ref green_context_base::sm_resource), a rule of the driver.
  /// @param min_count the fewest SMs each group must have, 1 to @ref sm_count (0 asks for the
  ///   smallest group the device allows)
  /// @param groups how many groups to make; 0 makes as many as fit
  /// @param flags how SMs may be placed
  /// @throws invalid_argument_error for an empty resource, @p min_count above @ref sm_count, or when
  ///   fewer than @p groups groups fit; the message gives the group size the driver's rounding makes
  ///   and how many fit
  [[nodiscard]] sm_split split_by_count(unsigned int min_count, unsigned int groups = 0,
                                        sm_split_flags flags = sm_split_flags::none) const;

  /// @brief The driver's structure.
  [[nodiscard]] const CUdevResource& native() const noexcept { return resource_; }

  /// @brief Whether this resource is a group or the remainder of a @ref split_by_count. The driver
  /// cannot split such a resource again, so @ref split_by_count and @ref group_count refuse it: make a
  /// green context of it and split that green context's resource instead.
  [[nodiscard]] bool from_split() const noexcept { return from_split_; }

 private:
  CUdevResource resource_;
  bool from_split_ = false;
};

/// @brief The result of @ref cudrv::sm_resource::split_by_count "split_by_count": the groups, all of
/// the same size, and what is left over.
struct sm_split {
  std::vector<sm_resource> groups;  ///< Disjoint groups of SMs, each of the rounded size.
  sm_resource remainder;            ///< The SMs in no group; `sm_count()` may be 0.
};

/// @brief A descriptor of the resources of a green context to be (cuDevResourceGenerateDesc).
///
/// A plain value: the driver has no call to destroy one. Several SM resources can be combined only
/// when they come from one split (its groups and its remainder); the driver refuses others with
/// `CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION`.
class resource_descriptor {
 public:
  /// @brief Describes @p resources.
  /// @throws invalid_argument_error when @p resources is empty or holds an empty resource
  [[nodiscard]] static resource_descriptor generate(std::span<const sm_resource> resources);
  /// @brief Describes one resource.
  [[nodiscard]] static resource_descriptor generate(const sm_resource& resource);
  /// @brief Wraps a descriptor made elsewhere.
  [[nodiscard]] static resource_descriptor from_native_handle(CUdevResourceDesc handle) noexcept {
    return resource_descriptor(handle);
  }
  /// @brief The raw handle.
  [[nodiscard]] CUdevResourceDesc native_handle() const noexcept { return handle_; }

 private:
  explicit resource_descriptor(CUdevResourceDesc handle) noexcept : handle_(handle) {}
  CUdevResourceDesc handle_;
};

namespace detail {
/// @brief What cudrv keeps for a green context it owns (internal): the handle and who still needs it
/// (the owner and the streams created through it).
struct green_context_state;
}  // namespace detail

class green_context_ref;

/// @brief The operations every green-context handle offers, shared by the view
/// @ref cudrv::green_context_ref and the owner @ref cudrv::green_context. Not constructible or
/// assignable on its own (see @ref cudrv::context_base).
///
/// None of the operations makes a context current on the calling thread, except those that need one
/// by nature and run in the green context named (@ref synchronize, @ref record(event_flags) const,
/// @ref device, and the stream fallback of @ref create_stream), which restore the caller's context.
class green_context_base {
 public:
  /// @brief The raw handle (null for a moved-from owner).
  [[nodiscard]] constexpr CUgreenCtx native_handle() const noexcept { return handle_; }
  /// @brief The green context as a `CUcontext` (cuCtxFromGreenCtx), for everything that takes a
  /// context: buffers, events, libraries, @ref context_guard. Work in it uses the green context's SMs.
  /// Valid as long as the green context.
  [[nodiscard]] context_ref context() const;
  /// @brief The device of the green context.
  [[nodiscard]] cudrv::device device() const;
  /// @brief The SMs the green context may use (cuGreenCtxGetDevResource); this one can be split again.
  [[nodiscard]] cudrv::sm_resource sm_resource() const;

  /// @brief Creates a stream whose work runs on the green context's SMs (cuGreenCtxStreamCreate).
  ///
  /// The stream keeps the green context alive: the green context is destroyed when its owner and
  /// every stream made here are gone, in any order (streams made from a view of a handle cudrv does
  /// not own do not, and must be destroyed before it). With a driver older than CUDA 12.5, which lacks
  /// cuGreenCtxStreamCreate, the stream is created with cuStreamCreateWithPriority while the green
  /// context is current on the thread, which the driver documents as the same association.
  /// @throws invalid_argument_error for `options.non_blocking == false`: the driver requires
  ///   non-blocking streams in green contexts
  [[nodiscard]] stream create_stream(stream_options options = {}) const;

  /// @brief Records in @p ev all work submitted to the green context so far (cuGreenCtxRecordEvent);
  /// @p ev must belong to the same device.
  void record(event_ref ev) const;
  /// @brief Creates an event in the green context and records it (as @ref record(event_ref) const).
  [[nodiscard]] event record(event_flags flags) const;
  /// @brief As @ref record(event_flags) const, with an untimed event.
  [[nodiscard]] event record() const { return record(event_flags::none); }
  /// @brief Makes all work submitted to the green context from now on wait for @p ev
  /// (cuGreenCtxWaitEvent); @p ev may come from any context or device.
  void wait(event_ref ev) const;
  /// @brief Blocks until all work submitted to the green context has completed.
  void synchronize() const;
  /// @brief The driver's unique id of the green context (cuGreenCtxGetId).
  /// @throws not_supported_error with a driver (or a toolkit at build time) older than CUDA 12.9
  [[nodiscard]] unsigned long long id() const;

  /// @brief cudrv's bookkeeping of an owned green context, null for others (internal).
  [[nodiscard]] detail::green_context_state* state() const noexcept { return state_; }

  /// @brief Two handles are equal when they name the same green context (views and owners alike).
  [[nodiscard]] friend constexpr bool operator==(const green_context_base& a, const green_context_base& b) noexcept {
    return a.handle_ == b.handle_;
  }

 protected:
  /// @brief Holds the handles unchanged.
  constexpr green_context_base(CUgreenCtx handle, CUcontext ctx, detail::green_context_state* state) noexcept
      : handle_(handle), context_(ctx), state_(state) {}
  /// @brief Copies the handles (for the view).
  constexpr green_context_base(const green_context_base&) noexcept = default;
  /// @brief Copies the handles (for the view).
  constexpr green_context_base& operator=(const green_context_base&) noexcept = default;
  ~green_context_base() = default;
  /// @brief Throws @ref invalid_argument_error when the handle is null (a moved-from owner).
  void require_handle(const char* api) const;
  /// @brief The green context; null only in a moved-from owner.
  CUgreenCtx handle_;
  /// @brief Its `CUcontext` when known (owners know it from creation), else null: asked for on use.
  CUcontext context_;
  /// @brief The owner's bookkeeping, shared by its views; null for green contexts cudrv does not own.
  detail::green_context_state* state_;
};

/// @brief A non-owning view of a green context. Trivially copyable; it does not keep the green
/// context alive.
/// @code
/// void run_on(cudrv::green_context_ref g, cudrv::event_ref ready) {
///   g.wait(ready);                    // everything submitted to g from now on waits for ready
///   cudrv::stream s = g.create_stream();
///   // ... launches on s use g's SMs only
/// }
/// @endcode
class green_context_ref : public green_context_base {
 public:
  /// @brief Views @p handle.
  explicit green_context_ref(CUgreenCtx handle) noexcept : green_context_base(handle, nullptr, nullptr) {}
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  green_context_ref(std::nullptr_t) = delete;
  green_context_ref(int) = delete;
  /// @}
  /// @brief Views the same green context as @p other.
  constexpr green_context_ref(const green_context_ref& other) noexcept = default;
  /// @brief Views the green context @p other views.
  constexpr green_context_ref& operator=(const green_context_ref& other) noexcept = default;
  /// @brief Views an existing green context without owning it (same as the constructor).
  [[nodiscard]] static green_context_ref from_native_handle(CUgreenCtx handle) noexcept {
    return green_context_ref(handle);
  }

 private:
  friend class green_context;
  constexpr green_context_ref(CUgreenCtx handle, CUcontext ctx, detail::green_context_state* state) noexcept
      : green_context_base(handle, ctx, state) {}
};

/// @brief An owning green context (cuGreenCtxCreate, destroyed with cuGreenCtxDestroy): a context of
/// the device's primary context whose kernels run only on the SMs it was given.
///
/// Creating one does not change the calling thread's current context; the device's primary context is
/// retained by cudrv as for every object made from a device (the driver needs it). Move-only;
/// converts to @ref green_context_ref (it is not one). The green context is destroyed when the owner
/// and every stream made by @ref create_stream are gone. Buffers and events made in its
/// @ref context() should be destroyed before it; one that outlives it frees nothing and tells the
/// destruction handler.
/// @code
/// cudrv::device dev(0);
/// cudrv::sm_split split = cudrv::sm_resource::of(dev).split_by_count(16, 1);
/// cudrv::green_context g(dev, split.groups[0]);
/// cudrv::stream s = g.create_stream();
/// cudrv::launch(s, {.grid = 1024, .block = 256}, kernel, out.get());   // runs on 16 SMs
/// s.synchronize();
/// @endcode
class green_context : public green_context_base {
 public:
  /// @brief Creates a green context on @p dev with the SMs of @p sms (a group or remainder of a split,
  /// or a whole device's resource).
  green_context(const cudrv::device& dev, const cudrv::sm_resource& sms);
  /// @brief Creates a green context on @p dev with the resources of @p resources (from one split).
  green_context(const cudrv::device& dev, std::span<const cudrv::sm_resource> resources);
  /// @brief Creates a green context on @p dev with the resources described by @p desc.
  green_context(const cudrv::device& dev, resource_descriptor desc);
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  green_context(const green_context&) = delete;
  green_context& operator=(const green_context&) = delete;
  /// @}
  /// @brief Takes over @p other's green context; @p other becomes empty.
  green_context(green_context&& other) noexcept
      : green_context_base(cudrv::detail::exchange(other.handle_, nullptr),
                           cudrv::detail::exchange(other.context_, nullptr),
                           cudrv::detail::exchange(other.state_, nullptr)) {}
  /// @brief Gives up the held green context, then takes over @p other's.
  green_context& operator=(green_context&& other) noexcept;
  /// @brief Destroys the green context once no stream made by @ref create_stream needs it any more;
  /// errors go to the destruction handler.
  ~green_context();

  /// @brief Takes ownership of @p handle (from cuGreenCtxCreate). The handle is adopted even when
  /// this throws (for want of memory, or when cuCtxFromGreenCtx refuses it): it is destroyed then.
  /// @throws invalid_argument_error for a null handle
  [[nodiscard]] static green_context from_native_handle(CUgreenCtx handle);
  /// @brief Gives up ownership: the caller must destroy the returned green context (after the streams
  /// made in it, which no longer keep it alive).
  [[nodiscard]] CUgreenCtx release() noexcept;
  /// @brief Gives up the green context now, as the destructor does; the object becomes empty.
  void reset() noexcept;
  /// @brief Whether this object holds a green context (false after a move or @ref release).
  [[nodiscard]] explicit operator bool() const noexcept { return handle_ != nullptr; }
  /// @brief A view of the green context, sharing its bookkeeping (streams made through it keep it alive).
  operator green_context_ref() const& noexcept {  // NOLINT: implicit on purpose
    return green_context_ref(handle_, context_, state_);
  }
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: a view of a temporary green context would outlive it.
  operator green_context_ref() const&& = delete;
  /// @}

 private:
  green_context(CUgreenCtx handle, CUcontext ctx, detail::green_context_state* state) noexcept
      : green_context_base(handle, ctx, state) {}
};

/// @brief The green context a stream belongs to (cuStreamGetGreenCtx), or nothing for a stream of an
/// ordinary context. For the default streams, the answer depends on the context current on the thread.
[[nodiscard]] std::optional<green_context_ref> green_context_of(stream_ref s);

}  // namespace cudrv
