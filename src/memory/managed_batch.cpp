// Managed memory in batches (<cudrv/managed_batch.hpp>): cuMemPrefetchBatchAsync, cuMemDiscardBatchAsync and
// cuMemDiscardAndPrefetchBatchAsync (CUDA 13.0), and the loop of cuMemPrefetchAsync taken where the prefetch
// batch cannot be used.
#include "cudrv/managed_batch.hpp"

#include <atomic>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cudrv/device.hpp"
#include "cudrv/error.hpp"
#include "driver/driver_api.hpp"
#include "memory/memory_support.hpp"
#include "streams/stream_support.hpp"

namespace cudrv {

namespace detail {
struct managed_batch_storage {
  std::vector<CUdeviceptr> addresses;
  std::vector<std::size_t> sizes;
  std::vector<memory_location> locations;  // one per run of equal locations
  std::vector<std::size_t> location_indices;
};
}  // namespace detail

namespace {

std::string index_of(std::size_t i, std::size_t n) { return "range " + std::to_string(i) + " of " + std::to_string(n); }

std::string describe_location(const memory_location& where) {
  switch (where.kind()) {
    case memory_location_kind::device: return "device " + std::to_string(where.device_ordinal());
    case memory_location_kind::host: return "the host";
    case memory_location_kind::host_numa: return "host NUMA node " + std::to_string(where.numa_node());
    default: return "no location";
  }
}

// Makes room for one more element, so that the push_back that follows cannot throw.
template <class T>
void make_room(std::vector<T>& v) {
  if (v.size() == v.capacity()) {
    v.reserve(v.capacity() < 8 ? 8 : v.capacity() * 2);
  }
}

detail::managed_batch_storage& storage_of(detail::managed_batch_storage*& s) {
  if (s == nullptr) {
    s = new detail::managed_batch_storage;
  }
  return *s;
}

// -1 not asked yet, 0 no, 1 yes.
std::atomic<int> batch_state{-1};
std::atomic<int> concurrent_state{-1};

// Whether every device has CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, which the batch entry points
// need (cuda.h); asked once per process.
bool all_devices_concurrent_managed() {
  int known = concurrent_state.load(std::memory_order_acquire);
  if (known < 0) {
    known = 1;
    for (const device d : devices()) {
      if (!d.attribute(device_attributes::concurrent_managed_access)) {
        known = 0;
      }
    }
    concurrent_state.store(known, std::memory_order_release);
  }
  return known == 1;
}

[[noreturn]] void refuse_concurrent(const char* api) {
  throw not_supported_error(CUDA_ERROR_NOT_SUPPORTED, api,
                            "the driver's managed batches need CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS on "
                            "every device, and a device of this system lacks it");
}

// Throws not_supported_error naming entry when the driver (or the headers cudrv was built with) lacks the
// managed batch entry points, which come together (CUDA 13.0).
void require_entry(const char* entry) {
  if (!managed_batch_supported()) {
    const bool prefetch = std::string(entry) == "cuMemPrefetchBatchAsync";
    throw not_supported_error(detail::call_requires_newer_driver, entry,
                              std::string(CUDRV_HAS_MANAGED_BATCH ? "the installed driver lacks it (CUDA 13.0)"
                                                                  : "cudrv was built with CUDA headers older "
                                                                    "than 13.0, which do not declare it") +
                                  (prefetch ? "; managed_batch_mode::automatic prefetches with cuMemPrefetchAsync"
                                            : "; discarding has no fallback"));
  }
}

bool legacy_stream(CUstream stream) { return stream == nullptr || stream == CU_STREAM_LEGACY; }

// The checks common to the three submissions, and the path for mode (discards pass driver_batch).
managed_batch_path choose_path(const char* api, const char* entry, std::size_t size, managed_batch_mode mode,
                               CUstream stream) {
  if (size == 0) {
    throw invalid_argument_error(api, "nothing to do: the batch holds no range");
  }
  detail::require_stream(stream, api);
  if (mode == managed_batch_mode::fallback_loop) {
    return managed_batch_path::fallback_loop;
  }
  if (mode == managed_batch_mode::automatic) {
    return !legacy_stream(stream) && managed_batch_supported() && all_devices_concurrent_managed()
               ? managed_batch_path::driver_batch
               : managed_batch_path::fallback_loop;
  }
  if (legacy_stream(stream)) {
    throw invalid_argument_error(api, std::string("the driver's managed batches refuse the legacy default stream: "
                                                  "enqueue the batch on a created stream (") +
                                          entry + ")");
  }
  require_entry(entry);
  if (!all_devices_concurrent_managed()) {
    refuse_concurrent(entry);
  }
  return managed_batch_path::driver_batch;
}

std::string describe_range(const managed_range_batch& batch, std::size_t i, const memory_location* where) {
  return index_of(i, batch.size()) + ": " + detail::format_bytes(batch.sizes()[i]) + " at " +
         detail::format_address(static_cast<std::uintptr_t>(batch.addresses()[i])) +
         (where != nullptr ? " to " + describe_location(*where) : std::string());
}

#if CUDRV_HAS_MANAGED_BATCH
std::vector<CUmemLocation> native_locations(const managed_range_batch& batch) {
  std::vector<CUmemLocation> out;
  out.reserve(batch.locations().size());
  for (const memory_location& l : batch.locations()) {
    out.push_back(l.native());
  }
  return out;
}

[[noreturn]] void throw_batch(CUresult status, const char* entry, const managed_range_batch& batch) {
  throw managed_batch_error(status, entry, std::nullopt, batch.size(),
                            "the batch of " + std::to_string(batch.size()) + " ranges with " +
                                std::to_string(batch.locations().size()) +
                                " location entries (the driver names no range)");
}
#endif

}  // namespace

managed_batch_error::managed_batch_error(CUresult code, std::string api, std::optional<std::size_t> failed_index,
                                         std::size_t batch_size, std::string context)
    : error(code, std::move(api), std::move(context)),
      failed_index_(failed_index.value_or(0)),
      has_failed_index_(failed_index.has_value()),
      batch_size_(batch_size) {}

std::optional<std::size_t> managed_batch_error::failed_index() const noexcept {
  return has_failed_index_ ? std::optional<std::size_t>(failed_index_) : std::nullopt;
}

bool managed_batch_supported() {
#if CUDRV_HAS_MANAGED_BATCH
  int known = batch_state.load(std::memory_order_acquire);
  if (known < 0) {
    try {
      (void)detail::drv::cuMemPrefetchBatchAsync_entry.get();
      (void)detail::drv::cuMemDiscardBatchAsync_entry.get();
      (void)detail::drv::cuMemDiscardAndPrefetchBatchAsync_entry.get();
      known = 1;
    } catch (const not_supported_error&) {
      known = 0;
    }
    batch_state.store(known, std::memory_order_release);
  }
  return known == 1;
#else
  detail::ensure_driver();
  return false;
#endif
}

// --- the batch --------------------------------------------------------------------------------------

managed_range_batch::managed_range_batch(const managed_range_batch& other)
    : storage_(other.storage_ == nullptr ? nullptr : new detail::managed_batch_storage(*other.storage_)) {}

managed_range_batch& managed_range_batch::operator=(const managed_range_batch& other) {
  if (this != &other) {
    auto* copy = other.storage_ == nullptr ? nullptr : new detail::managed_batch_storage(*other.storage_);
    delete storage_;
    storage_ = copy;
  }
  return *this;
}

managed_range_batch& managed_range_batch::operator=(managed_range_batch&& other) noexcept {
  if (this != &other) {
    delete storage_;
    storage_ = detail::exchange(other.storage_, nullptr);
  }
  return *this;
}

managed_range_batch::~managed_range_batch() { delete storage_; }

std::size_t managed_range_batch::size() const noexcept { return storage_ == nullptr ? 0 : storage_->addresses.size(); }

void managed_range_batch::clear() noexcept {
  if (storage_ != nullptr) {
    storage_->addresses.clear();
    storage_->sizes.clear();
    storage_->locations.clear();
    storage_->location_indices.clear();
  }
}

void managed_range_batch::reserve(std::size_t ranges) {
  detail::managed_batch_storage& st = storage_of(storage_);
  st.addresses.reserve(ranges);
  st.sizes.reserve(ranges);
}

std::span<const CUdeviceptr> managed_range_batch::addresses() const noexcept {
  return storage_ == nullptr ? std::span<const CUdeviceptr>() : std::span<const CUdeviceptr>(storage_->addresses);
}
std::span<const std::size_t> managed_range_batch::sizes() const noexcept {
  return storage_ == nullptr ? std::span<const std::size_t>() : std::span<const std::size_t>(storage_->sizes);
}
std::span<const memory_location> managed_range_batch::locations() const noexcept {
  return storage_ == nullptr ? std::span<const memory_location>()
                             : std::span<const memory_location>(storage_->locations);
}
std::span<const std::size_t> managed_range_batch::location_indices() const noexcept {
  return storage_ == nullptr ? std::span<const std::size_t>()
                             : std::span<const std::size_t>(storage_->location_indices);
}

void managed_range_batch::add_checked(std::uintptr_t address, std::size_t bytes, const memory_location* where,
                                      const char* api) {
  const std::size_t i = size();
  if (where != nullptr && where->kind() == memory_location_kind::none) {
    throw invalid_argument_error(api, index_of(i, i + 1) +
                                          ": memory_location::none() is no place to prefetch to: name a device, "
                                          "the host or a host NUMA node");
  }
  (void)detail::check_managed_range(address, bytes, api, index_of(i, i + 1));
  detail::managed_batch_storage& st = storage_of(storage_);  // may throw: the batch is unchanged
  const bool new_entry = where != nullptr && (st.locations.empty() || !(st.locations.back() == *where));
  // Room first (may throw, changing capacities only), then the appends, which cannot throw: the arrays
  // never disagree.
  make_room(st.addresses);
  make_room(st.sizes);
  if (new_entry) {
    make_room(st.locations);
    make_room(st.location_indices);
    st.locations.push_back(*where);
    st.location_indices.push_back(i);
  }
  st.addresses.push_back(static_cast<CUdeviceptr>(address));
  st.sizes.push_back(bytes);
}

// --- submission --------------------------------------------------------------------------------------

namespace {

// The location that applies to range i (the last entry whose first range is at most i).
const memory_location& location_of(const managed_range_batch& batch, std::size_t i) {
  const auto idx = batch.location_indices();
  std::size_t k = idx.size() - 1;
  while (idx[k] > i) {
    --k;
  }
  return batch.locations()[k];
}

void prefetch_loop(const prefetch_batch& batch, CUstream stream) {
  const std::size_t n = batch.size();
  for (std::size_t i = 0; i < n; ++i) {
    const memory_location& where = location_of(batch, i);
    const CUresult status =
        detail::drv::cuMemPrefetchAsync(batch.addresses()[i], batch.sizes()[i], where.native(), 0u, stream);
    if (status != CUDA_SUCCESS) [[unlikely]] {
      throw managed_batch_error(status, "cuMemPrefetchAsync", i, n,
                                describe_range(batch, i, &where) +
                                    (i > 0 ? " (fallback path: the ranges before it were enqueued)"
                                           : " (fallback path)"));
    }
  }
}

}  // namespace

managed_batch_path prefetch(const prefetch_batch& batch, stream_ref s, managed_batch_mode mode) {
  const CUstream stream = s.native_handle();
  const managed_batch_path path =
      choose_path("cudrv::prefetch(prefetch_batch)", "cuMemPrefetchBatchAsync", batch.size(), mode, stream);
  detail::stream_context_scope scope(stream);
  if (path == managed_batch_path::fallback_loop) {
    prefetch_loop(batch, stream);
    return path;
  }
#if CUDRV_HAS_MANAGED_BATCH
  std::vector<CUmemLocation> locations = native_locations(batch);
  const CUresult status =
      detail::drv::cuMemPrefetchBatchAsync(const_cast<CUdeviceptr*>(batch.addresses().data()),
                                           const_cast<std::size_t*>(batch.sizes().data()), batch.size(),
                                           locations.data(), const_cast<std::size_t*>(batch.location_indices().data()),
                                           locations.size(), 0, stream);
  if (status != CUDA_SUCCESS) [[unlikely]] {
    throw_batch(status, "cuMemPrefetchBatchAsync", batch);
  }
#endif
  return path;
}

void discard(const discard_batch& batch, stream_ref s) {
  const CUstream stream = s.native_handle();
  (void)choose_path("cudrv::discard(discard_batch)", "cuMemDiscardBatchAsync", batch.size(),
                    managed_batch_mode::driver_batch, stream);
#if CUDRV_HAS_MANAGED_BATCH
  detail::stream_context_scope scope(stream);
  const CUresult status =
      detail::drv::cuMemDiscardBatchAsync(const_cast<CUdeviceptr*>(batch.addresses().data()),
                                          const_cast<std::size_t*>(batch.sizes().data()), batch.size(), 0, stream);
  if (status != CUDA_SUCCESS) [[unlikely]] {
    throw_batch(status, "cuMemDiscardBatchAsync", batch);
  }
#endif
}

void discard_and_prefetch(const discard_and_prefetch_batch& batch, stream_ref s) {
  const CUstream stream = s.native_handle();
  (void)choose_path("cudrv::discard_and_prefetch(discard_and_prefetch_batch)", "cuMemDiscardAndPrefetchBatchAsync",
                    batch.size(), managed_batch_mode::driver_batch, stream);
#if CUDRV_HAS_MANAGED_BATCH
  detail::stream_context_scope scope(stream);
  std::vector<CUmemLocation> locations = native_locations(batch);
  const CUresult status = detail::drv::cuMemDiscardAndPrefetchBatchAsync(
      const_cast<CUdeviceptr*>(batch.addresses().data()), const_cast<std::size_t*>(batch.sizes().data()), batch.size(),
      locations.data(), const_cast<std::size_t*>(batch.location_indices().data()), locations.size(), 0, stream);
  if (status != CUDA_SUCCESS) [[unlikely]] {
    throw_batch(status, "cuMemDiscardAndPrefetchBatchAsync", batch);
  }
#endif
}

}  // namespace cudrv
