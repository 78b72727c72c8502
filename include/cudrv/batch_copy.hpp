/// @file batch_copy.hpp
/// @brief Batched copies: many copies described once and enqueued with one driver call
/// (`cuMemcpyBatchAsync`, `cuMemcpy3DBatchAsync`, CUDA 12.8+), with per-copy attributes, the index of
/// the copy that failed in the error, and a fallback (a loop of single copies) for drivers without the
/// entry point. See @ref cudrv::batch_copy and @ref cudrv::batch_copy_3d.
///
/// Layer: memory (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <optional>  // batch_copy_error::failed_index (declared here, defined in src/)
#include <span>
#include <string>

#include "cudrv/copy.hpp"
#include "cudrv/detail/exchange.hpp"
#include "cudrv/device.hpp"
#include "cudrv/error.hpp"
#include "cudrv/span.hpp"
#include "cudrv/stream.hpp"

namespace cudrv {

namespace detail {
struct batch_copy_storage;
struct batch_copy_3d_storage;
}  // namespace detail

/// @brief When the driver may read the source of a batched copy (`CUmemcpySrcAccessOrder`). The
/// destination is always written in stream order.
enum class source_access_order : unsigned {
  /// In stream order, after the work queued before the batch (the default, and what `cudrv::copy` does).
  stream = 1,
  /// Out of stream order, and finished when the call returns: for sources that die right after the call
  /// (a stack variable), when no earlier work on the stream touches them. No synchronisation is needed
  /// before reusing the source.
  during_api_call = 2,
  /// Out of stream order, possibly after the call returns: for host memory allocated outside CUDA that
  /// no earlier work on the stream touches.
  any = 3,
};

/// @brief What kind of place a @ref cudrv::copy_location_hint names.
enum class location_kind : unsigned {
  none,               ///< No hint.
  device,             ///< A device (the hint's id is its ordinal).
  host,               ///< The host.
  host_numa,          ///< A host NUMA node (the id is the node).
  host_numa_current,  ///< The NUMA node of the calling thread.
};

/// @brief Where the driver should place a batched copy's operand when the memory has no fixed place
/// (managed memory on devices with concurrent managed access, pageable memory on devices that access
/// it); ignored for every other kind of memory (`CUmemLocation`).
struct copy_location_hint {
  location_kind kind = location_kind::none;  ///< The kind of place.
  int id = 0;                                ///< The device ordinal or NUMA node (for device / host_numa).

  /// @brief A hint naming device @p dev.
  [[nodiscard]] static copy_location_hint on(const device& dev) noexcept {
    return {location_kind::device, dev.ordinal()};
  }
  /// @brief A hint naming the host.
  [[nodiscard]] static copy_location_hint on_host() noexcept { return {location_kind::host, 0}; }
  /// @brief A hint naming host NUMA node @p node.
  [[nodiscard]] static copy_location_hint on_host_numa(int node) noexcept { return {location_kind::host_numa, node}; }
  /// @brief Same hint.
  friend bool operator==(const copy_location_hint&, const copy_location_hint&) = default;
};

/// @brief The attributes of copies in a batch (`CUmemcpyAttributes`): when the source may be read, where
/// operands without a fixed place should be, and whether the copy should rather overlap with kernels.
///
/// Consecutive copies with equal attributes share one entry of the driver's attribute array (the
/// `attrs` / `attrsIdxs` pair), so a batch of 1,000 copies with the default attributes passes one.
/// @code
/// cudrv::copy_attributes temp{.order = cudrv::source_access_order::during_api_call};
/// batch.add(dev_small, std::span(stack_array), temp);
/// @endcode
struct copy_attributes {
  source_access_order order = source_access_order::stream;  ///< When the source may be read.
  copy_location_hint source_hint{};                         ///< Where the source should be (hint).
  copy_location_hint destination_hint{};                    ///< Where the destination should be (hint).
  bool prefer_overlap_with_compute = false;                 ///< `CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE` (a hint).
  /// @brief Same attributes.
  friend bool operator==(const copy_attributes&, const copy_attributes&) = default;
};

/// @brief How a batch was (or is to be) enqueued.
enum class batch_copy_path {
  driver_batch,   ///< One call of the driver's batch entry point (`cuMemcpyBatchAsync` / `cuMemcpy3DBatchAsync`).
  fallback_loop,  ///< One `cuMemcpyAsync` (or `cuMemcpy3DAsync`) per copy.
};

/// @brief Which path `cudrv::copy(batch, stream, mode)` takes.
enum class batch_copy_mode {
  /// The driver's batch when the driver has it and the stream is neither the legacy default stream (which
  /// the batch entry points refuse) nor capturing (they have no graph-node form), the loop otherwise.
  automatic,
  /// The driver's batch, or @ref not_supported_error when the driver lacks it (and
  /// @ref invalid_argument_error on the legacy default stream or a capturing stream).
  driver_batch,
  /// The loop of single copies, whatever the driver offers (for comparisons and tests).
  fallback_loop,
};

/// @brief Whether the installed driver has `cuMemcpyBatchAsync` (CUDA 12.8+) and cudrv was built with
/// headers that declare it. Resolved once per process.
/// @throws driver_unavailable_error when there is no driver at all
[[nodiscard]] bool batch_copy_supported();

/// @brief Whether the installed driver has `cuMemcpy3DBatchAsync` (CUDA 12.8+). Resolved once per process.
/// @throws driver_unavailable_error when there is no driver at all
[[nodiscard]] bool batch_copy_3d_supported();

/// @brief A batched copy failed. @ref failed_index says which copy of the batch the driver (or the
/// fallback loop) refused, when the failure concerns one copy; @ref error::context describes it.
///
/// On the fallback path the copies before the failed one have been enqueued; on the driver's path
/// none is.
class batch_copy_error : public error {
 public:
  /// @brief Builds the error.
  /// @param code the status of the failed call
  /// @param api the driver call that failed (`cuMemcpyBatchAsync`, `cuMemcpyAsync`, ...)
  /// @param failed_index the index of the copy that failed, when the failure concerns one
  /// @param batch_size the number of copies in the batch
  /// @param context a description of the failed copy and the batch
  batch_copy_error(CUresult code, std::string api, std::optional<std::size_t> failed_index, std::size_t batch_size,
                   std::string context);
  /// @brief The index of the copy that failed (the driver's `failIdx`), or nothing when the failure
  /// concerns the batch as a whole.
  [[nodiscard]] std::optional<std::size_t> failed_index() const noexcept;
  /// @brief The number of copies in the batch.
  [[nodiscard]] std::size_t batch_size() const noexcept { return batch_size_; }

 private:
  // A count and a flag, not a std::optional member: the class would instantiate std::optional<std::size_t>
  // in every translation unit of the umbrella (docs/design.md, "Header cost").
  std::size_t failed_index_ = 0;
  bool has_failed_index_ = false;
  std::size_t batch_size_;
};

/// @brief A list of linear copies enqueued together by `cudrv::copy(batch, stream)`.
///
/// Each @ref add takes the same arguments as the stream-ordered `cudrv::copy` (views, buffers, host
/// ranges; the element types must match) and checks the sizes at once: a copy of nothing, larger than
/// its source or destination, with a null view, or whose source and destination overlap, throws
/// @ref invalid_argument_error naming its index and is not added. The batch keeps addresses and sizes only: the memory
/// must stay valid until the copies have run, and a temporary owner (`batch.add(dst, std::vector<float>(n))`) does not
/// compile (`cudrv::borrowed_linear_view`). An @ref add that throws (a refused copy, or no host memory) leaves the
/// batch as it was. Copies within a batch are not ordered among themselves; the batch as a whole is ordered on the
/// stream.
/// @code
/// cudrv::batch_copy batch;
/// for (std::size_t i = 0; i < n; ++i) {
///   batch.add(dst[i], src[i]);                       // device to device, checked here
/// }
/// batch.add(host_out, dev_result, {.prefer_overlap_with_compute = true});
/// cudrv::batch_copy_path path = cudrv::copy(batch, stream);   // one cuMemcpyBatchAsync (CUDA 12.8+)
/// @endcode
class batch_copy {
 public:
  /// @brief An empty batch (it allocates nothing until the first @ref add or @ref reserve).
  batch_copy() noexcept = default;
  /// @brief A copy of @p other's copies.
  batch_copy(const batch_copy& other);
  /// @brief Takes @p other's copies; @p other is left empty.
  batch_copy(batch_copy&& other) noexcept : storage_(detail::exchange(other.storage_, nullptr)) {}
  /// @brief Replaces the copies with @p other's.
  batch_copy& operator=(const batch_copy& other);
  /// @brief Takes @p other's copies; @p other is left empty.
  batch_copy& operator=(batch_copy&& other) noexcept;
  ~batch_copy();
  /// @brief Reserves room for @p copies copies.
  void reserve(std::size_t copies);

  /// @brief Adds a copy of all elements of @p src to the start of @p dst.
  /// @throws invalid_argument_error when @p src is empty or larger than @p dst, a view is null, or the
  ///   bytes copied overlap
  template <borrowed_linear_view Dst, borrowed_linear_view Src>
  batch_copy& add(Dst&& dst, Src&& src, const copy_attributes& attributes = {}) {
    add_checked(detail::plan_copy(dst, src, nullptr), attributes);
    return *this;
  }
  /// @brief Adds a copy of the first @p count elements of @p src to the start of @p dst.
  /// @throws invalid_argument_error when @p count is 0 or exceeds either view, or the bytes copied overlap
  template <borrowed_linear_view Dst, borrowed_linear_view Src>
  batch_copy& add(Dst&& dst, Src&& src, std::size_t count, const copy_attributes& attributes = {}) {
    add_checked(detail::plan_copy(dst, src, &count), attributes);
    return *this;
  }

  /// @brief The number of copies.
  [[nodiscard]] std::size_t size() const noexcept;
  /// @brief Whether the batch holds no copy.
  [[nodiscard]] bool empty() const noexcept { return size() == 0; }
  /// @brief Removes every copy (keeps the memory reserved).
  void clear() noexcept;

  /// @brief The destination address of each copy.
  [[nodiscard]] std::span<const CUdeviceptr> destinations() const noexcept;
  /// @brief The source address of each copy.
  [[nodiscard]] std::span<const CUdeviceptr> sources() const noexcept;
  /// @brief The size of each copy, in bytes.
  [[nodiscard]] std::span<const std::size_t> sizes() const noexcept;
  /// @brief The distinct attribute entries, one per run of consecutive copies with equal attributes.
  [[nodiscard]] std::span<const copy_attributes> attributes() const noexcept;
  /// @brief For each entry of @ref attributes, the index of the first copy it applies to (the driver's
  /// `attrsIdxs`: starts at 0, increasing; an entry applies up to the next one's first copy).
  [[nodiscard]] std::span<const std::size_t> attribute_indices() const noexcept;

 private:
  void add_checked(const detail::linear_copy& c, const copy_attributes& attributes);

  // The five arrays live in src/memory/batch_copy.cpp: as std::vector members here they would instantiate
  // four vector types in every translation unit of the umbrella (docs/design.md, "Header cost").
  detail::batch_copy_storage* storage_ = nullptr;
};

/// @brief One copy of a @ref cudrv::batch_copy_3d (a pitched source and destination, in bytes, and its attributes).
struct batch_copy_3d_op {
  detail::pitched_layout dst;  ///< The destination layout (address, pitch, row bytes, rows, slices).
  detail::pitched_layout src;  ///< The source layout; its extent is what is copied.
  copy_attributes attributes;  ///< The copy's attributes.
};

/// @brief A list of pitched 2D/3D copies enqueued together by `cudrv::copy(batch, stream)`
/// (`cuMemcpy3DBatchAsync`, pointer operands).
///
/// @ref add takes the pitched views of the stream-ordered pitched `cudrv::copy` and checks them at once
/// the same way (non-empty extent, pitches at least a row, the source fits the destination, non-null).
/// @code
/// cudrv::batch_copy_3d batch;
/// batch.add(image_a.view(), host_a);   // pitched_span<float> each
/// batch.add(image_b.view(), host_b);
/// cudrv::copy(batch, stream);
/// @endcode
class batch_copy_3d {
 public:
  /// @brief An empty batch (it allocates nothing until the first @ref add).
  batch_copy_3d() noexcept = default;
  /// @brief A copy of @p other's copies.
  batch_copy_3d(const batch_copy_3d& other);
  /// @brief Takes @p other's copies; @p other is left empty.
  batch_copy_3d(batch_copy_3d&& other) noexcept : storage_(detail::exchange(other.storage_, nullptr)) {}
  /// @brief Replaces the copies with @p other's.
  batch_copy_3d& operator=(const batch_copy_3d& other);
  /// @brief Takes @p other's copies; @p other is left empty.
  batch_copy_3d& operator=(batch_copy_3d&& other) noexcept;
  ~batch_copy_3d();
  /// @brief Adds a copy of the extent of @p src (`width` × `height` × `depth` elements) to @p dst.
  /// @throws invalid_argument_error as the stream-ordered pitched `cudrv::copy`
  template <class T, class U>
  batch_copy_3d& add(pitched_span<T> dst, pitched_span<U> src, const copy_attributes& attributes = {}) {
    detail::check_copy_types<T, U>();
    // Named types, not bare braces: nvcc's host code wraps a braced argument in parentheses.
    add_checked(
        batch_copy_3d_op{detail::pitched_layout{dst.address, dst.pitch, dst.width * sizeof(T), dst.height, dst.depth},
                         detail::pitched_layout{src.address, src.pitch, src.width * sizeof(U), src.height, src.depth},
                         attributes});
    return *this;
  }
  /// @brief The number of copies.
  [[nodiscard]] std::size_t size() const noexcept;
  /// @brief Whether the batch holds no copy.
  [[nodiscard]] bool empty() const noexcept { return size() == 0; }
  /// @brief Removes every copy.
  void clear() noexcept;
  /// @brief The copies, in bytes.
  [[nodiscard]] std::span<const batch_copy_3d_op> operations() const noexcept;

 private:
  void add_checked(const batch_copy_3d_op& op);
  detail::batch_copy_3d_storage* storage_ = nullptr;  // in src/, as for batch_copy
};

/// @brief Enqueues every copy of @p batch on @p s: one `cuMemcpyBatchAsync` where the driver has it
/// (CUDA 12.8+), else (or with @ref batch_copy_mode::fallback_loop) one `cuMemcpyAsync` per copy, in
/// the batch's order. Returns the path taken.
///
/// On the fallback path the attributes that are hints are ignored, and a batch holding a copy with
/// @ref source_access_order::during_api_call synchronises @p s before returning, which is what that
/// order promises (the source is free again when the call returns).
/// @throws invalid_argument_error for an empty batch, or the legacy default stream or a capturing stream
///   with @ref batch_copy_mode::driver_batch
/// @throws not_supported_error with @ref batch_copy_mode::driver_batch when the driver lacks the entry point
/// @throws batch_copy_error when the driver refuses a copy (@ref batch_copy_error::failed_index says which)
batch_copy_path copy(const batch_copy& batch, stream_ref s, batch_copy_mode mode = batch_copy_mode::automatic);

/// @brief Enqueues every copy of @p batch on @p s: one `cuMemcpy3DBatchAsync` where the driver has it
/// (CUDA 12.8+), else one `cuMemcpy2DAsync` / `cuMemcpy3DAsync` per copy (as the pitched `cudrv::copy`).
/// Returns the path taken; the rules are those of the linear batch.
/// @throws as the linear batch
batch_copy_path copy(const batch_copy_3d& batch, stream_ref s, batch_copy_mode mode = batch_copy_mode::automatic);

/// @brief The former name of @ref batch_copy, kept for one release (deprecated: the feature is named
/// `batch_copy` in its header, types, source, tests and docs).
using copy_batch [[deprecated("use cudrv::batch_copy")]] = batch_copy;
/// @brief The former name of @ref batch_copy_3d, kept for one release (deprecated).
using copy_batch_3d [[deprecated("use cudrv::batch_copy_3d")]] = batch_copy_3d;

}  // namespace cudrv
