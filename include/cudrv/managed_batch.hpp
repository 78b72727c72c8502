/// @file managed_batch.hpp
/// @brief Managed memory in batches: many ranges prefetched, discarded, or discarded and prefetched with
/// one driver call (`cuMemPrefetchBatchAsync`, `cuMemDiscardBatchAsync`,
/// `cuMemDiscardAndPrefetchBatchAsync`, CUDA 13.0), with the ranges checked as they are added and a loop
/// of `cuMemPrefetchAsync` where the driver lacks the prefetch batch. See @ref cudrv::prefetch_batch,
/// @ref cudrv::discard_batch and @ref cudrv::discard_and_prefetch_batch.
///
/// Layer: memory (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <optional>  // managed_batch_error::failed_index (declared here, defined in src/)
#include <span>
#include <string>

#include "cudrv/copy.hpp"
#include "cudrv/detail/exchange.hpp"
#include "cudrv/error.hpp"
#include "cudrv/memory_location.hpp"
#include "cudrv/stream.hpp"

namespace cudrv {

namespace detail {
struct managed_batch_storage;
}  // namespace detail

/// @brief How a prefetch batch was enqueued.
enum class managed_batch_path {
  driver_batch,   ///< One call of the driver's batch entry point (`cuMemPrefetchBatchAsync`).
  fallback_loop,  ///< One `cuMemPrefetchAsync` per range.
};

/// @brief Which path `cudrv::prefetch(batch, stream, mode)` takes.
enum class managed_batch_mode {
  /// The driver's batch when the driver has it, the stream is not the legacy default stream (which the
  /// batch entry points refuse) and every device has `CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS`
  /// (which they need); the loop otherwise.
  automatic,
  /// The driver's batch, or @ref not_supported_error where it cannot be used (and
  /// @ref invalid_argument_error on the legacy default stream).
  driver_batch,
  /// The loop of single prefetches, whatever the driver offers (for comparisons and tests).
  fallback_loop,
};

/// @brief Whether the installed driver has the managed batch entry points (CUDA 13.0:
/// `cuMemPrefetchBatchAsync`, `cuMemDiscardBatchAsync`, `cuMemDiscardAndPrefetchBatchAsync`) and cudrv was
/// built with headers that declare them. Resolved once per process.
/// @throws driver_unavailable_error when there is no driver at all
[[nodiscard]] bool managed_batch_supported();

/// @brief A managed batch failed. @ref failed_index says which range the fallback loop's
/// `cuMemPrefetchAsync` refused (the driver's batch entry points name none); @ref error::context
/// describes it.
class managed_batch_error : public error {
 public:
  /// @brief Builds the error.
  /// @param code the status of the failed call
  /// @param api the driver call that failed
  /// @param failed_index the index of the range that failed, when the failure concerns one
  /// @param batch_size the number of ranges in the batch
  /// @param context a description of the failed range or the batch
  managed_batch_error(CUresult code, std::string api, std::optional<std::size_t> failed_index, std::size_t batch_size,
                      std::string context);
  /// @brief The index of the range that failed, or nothing when the failure concerns the batch as a whole.
  [[nodiscard]] std::optional<std::size_t> failed_index() const noexcept;
  /// @brief The number of ranges in the batch.
  [[nodiscard]] std::size_t batch_size() const noexcept { return batch_size_; }

 private:
  std::size_t failed_index_ = 0;  // a count and a flag, as batch_copy_error (header cost)
  bool has_failed_index_ = false;
  std::size_t batch_size_;
};

/// @brief The ranges of a managed batch and their locations, as the driver receives them: the part
/// common to @ref prefetch_batch, @ref discard_batch and @ref discard_and_prefetch_batch. Not
/// constructible on its own.
///
/// Each range is checked as it is added: it must be non-empty and non-null, and where the driver can
/// tell (`cuPointerGetAttributes`), managed memory lying within one allocation; memory the driver does
/// not know (system-allocated memory, which the batches take on devices with pageable memory access)
/// is left to the driver. A prefetch location must be a device, the host or a host NUMA node, not
/// @ref memory_location::none(). A refused range throws @ref invalid_argument_error naming its index and
/// is not added. The batch keeps addresses and sizes: the memory must stay valid until the batch has
/// run on its stream, and a temporary owner does not compile (`cudrv::borrowed_linear_view`).
class managed_range_batch {
 public:
  /// @brief The number of ranges.
  [[nodiscard]] std::size_t size() const noexcept;
  /// @brief Whether the batch holds no range.
  [[nodiscard]] bool empty() const noexcept { return size() == 0; }
  /// @brief Removes every range (keeps the memory reserved).
  void clear() noexcept;
  /// @brief Reserves room for @p ranges ranges.
  void reserve(std::size_t ranges);
  /// @brief The start address of each range (the driver's `dptrs`).
  [[nodiscard]] std::span<const CUdeviceptr> addresses() const noexcept;
  /// @brief The size of each range in bytes (the driver's `sizes`).
  [[nodiscard]] std::span<const std::size_t> sizes() const noexcept;
  /// @brief The distinct prefetch locations, one per run of consecutive ranges with the same location
  /// (the driver's `prefetchLocs`); empty for a @ref discard_batch.
  [[nodiscard]] std::span<const memory_location> locations() const noexcept;
  /// @brief For each entry of @ref locations, the index of its first range (the driver's
  /// `prefetchLocIdxs`: starts at 0, increasing, each below @ref size).
  [[nodiscard]] std::span<const std::size_t> location_indices() const noexcept;

 protected:
  /// @brief An empty batch (it allocates nothing until the first range).
  managed_range_batch() noexcept = default;
  /// @brief A copy of @p other's ranges.
  managed_range_batch(const managed_range_batch& other);
  /// @brief Takes @p other's ranges; @p other is left empty.
  managed_range_batch(managed_range_batch&& other) noexcept : storage_(detail::exchange(other.storage_, nullptr)) {}
  /// @brief Replaces the ranges with @p other's.
  managed_range_batch& operator=(const managed_range_batch& other);
  /// @brief Takes @p other's ranges; @p other is left empty.
  managed_range_batch& operator=(managed_range_batch&& other) noexcept;
  ~managed_range_batch();
  /// @brief Checks and appends the @p bytes at @p address, with the location @p where (null: none);
  /// @p api names the caller in errors.
  void add_checked(std::uintptr_t address, std::size_t bytes, const memory_location* where, const char* api);
  /// @brief Checks and appends the bytes of @p range's view (the add functions' common step).
  template <class R>
  void add_view(R& range, const memory_location* where, const char* api) {
    auto v = detail::to_linear(range);
    using E = typename detail::view_element<decltype(v)>::type;
    add_checked(v.address, detail::saturating_bytes(v.count, sizeof(E)), where, api);
  }

 private:
  // The arrays live in src/memory/managed_batch.cpp (header cost, as for batch_copy).
  detail::managed_batch_storage* storage_ = nullptr;
};

/// @brief Managed ranges to migrate, each to its location, enqueued together by
/// `cudrv::prefetch(batch, stream)` (`cuMemPrefetchBatchAsync`, CUDA 13.0; a loop of
/// `cuMemPrefetchAsync` elsewhere). Ranges within a batch are not ordered among themselves; the batch
/// as a whole is ordered on the stream. See @ref managed_range_batch for the checks.
/// @code
/// cudrv::prefetch_batch batch;
/// batch.add(inputs, dev).add(weights, dev).add(results, cudrv::memory_location::host());
/// cudrv::prefetch(batch, stream);             // one cuMemPrefetchBatchAsync, two location entries
/// @endcode
class prefetch_batch : public managed_range_batch {
 public:
  /// @brief An empty batch.
  prefetch_batch() noexcept = default;
  /// @brief Adds all of @p range (anything `cudrv::copy` takes: a @ref managed_buffer, a view of one)
  /// to be prefetched to @p where.
  /// @throws invalid_argument_error for a refused range or location (see @ref managed_range_batch)
  template <borrowed_linear_view R>
  prefetch_batch& add(R&& range, memory_location where) {
    add_view(range, &where, "cudrv::prefetch_batch::add");
    return *this;
  }
};

/// @brief Managed ranges whose contents are no longer needed, enqueued together by
/// `cudrv::discard(batch, stream)` (`cuMemDiscardBatchAsync`, CUDA 13.0; no fallback).
///
/// Discarding tells the driver it need not keep or migrate the data: a later read of a discarded range,
/// before a write or a prefetch, returns indeterminate values; a write or prefetch makes it ordinary
/// memory again. Reads, writes or prefetches of the range that run concurrently with the discard are
/// undefined behaviour (cuda.h).
/// @code
/// cudrv::discard_batch scratch;
/// scratch.add(temporaries);
/// cudrv::discard(scratch, stream);            // the next prefetch of temporaries copies nothing
/// @endcode
class discard_batch : public managed_range_batch {
 public:
  /// @brief An empty batch.
  discard_batch() noexcept = default;
  /// @brief Adds all of @p range to be discarded.
  /// @throws invalid_argument_error for a refused range (see @ref managed_range_batch)
  template <borrowed_linear_view R>
  discard_batch& add(R&& range) {
    add_view(range, nullptr, "cudrv::discard_batch::add");
    return *this;
  }
};

/// @brief Managed ranges to discard and then prefetch to a location, enqueued together by
/// `cudrv::discard_and_prefetch(batch, stream)` (`cuMemDiscardAndPrefetchBatchAsync`, CUDA 13.0; no
/// fallback): the pages appear at the location without their old contents being copied, e.g. an output
/// buffer that a kernel is about to overwrite on the device.
/// @code
/// cudrv::discard_and_prefetch_batch outputs;
/// outputs.add(result, dev);
/// cudrv::discard_and_prefetch(outputs, stream);   // result's pages on dev, nothing migrated
/// @endcode
class discard_and_prefetch_batch : public managed_range_batch {
 public:
  /// @brief An empty batch.
  discard_and_prefetch_batch() noexcept = default;
  /// @brief Adds all of @p range to be discarded, then prefetched to @p where.
  /// @throws invalid_argument_error for a refused range or location (see @ref managed_range_batch)
  template <borrowed_linear_view R>
  discard_and_prefetch_batch& add(R&& range, memory_location where) {
    add_view(range, &where, "cudrv::discard_and_prefetch_batch::add");
    return *this;
  }
};

/// @brief Enqueues every prefetch of @p batch on @p s: one `cuMemPrefetchBatchAsync` where it can be used
/// (see @ref managed_batch_mode::automatic), else one `cuMemPrefetchAsync` per range, in the batch's order.
/// Returns the path taken.
/// @throws invalid_argument_error for an empty batch, or the legacy default stream with
///   @ref managed_batch_mode::driver_batch
/// @throws not_supported_error with @ref managed_batch_mode::driver_batch when the driver lacks the entry
///   point or a device lacks concurrent managed access
/// @throws managed_batch_error when the driver refuses (on the loop, @ref managed_batch_error::failed_index
///   names the range; the ranges before it were enqueued)
managed_batch_path prefetch(const prefetch_batch& batch, stream_ref s,
                            managed_batch_mode mode = managed_batch_mode::automatic);

/// @brief Enqueues the discard of every range of @p batch on @p s (`cuMemDiscardBatchAsync`).
/// @throws invalid_argument_error for an empty batch or the legacy default stream
/// @throws not_supported_error when the driver lacks the entry point (before CUDA 13.0; discarding has no
///   fallback) or a device lacks concurrent managed access
/// @throws managed_batch_error when the driver refuses the batch
void discard(const discard_batch& batch, stream_ref s);

/// @brief Enqueues the discard of every range of @p batch and its prefetch to its location on @p s
/// (`cuMemDiscardAndPrefetchBatchAsync`).
/// @throws as @ref discard
void discard_and_prefetch(const discard_and_prefetch_batch& batch, stream_ref s);

}  // namespace cudrv
