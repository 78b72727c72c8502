// Batched copies: cuMemcpyBatchAsync / cuMemcpy3DBatchAsync (CUDA 12.8+) and the loop of single
// copies taken where the driver lacks them.
#include "cudrv/batch_copy.hpp"

#include <atomic>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "cudrv/error.hpp"
#include "driver/driver_api.hpp"
#include "memory/memory_support.hpp"
#include "streams/nvtx_support.hpp"
#include "streams/stream_support.hpp"

namespace cudrv {

namespace {

// Whether an entry point resolves, found out once: -1 not asked yet, 0 absent, 1 present.
template <class Entry>
bool probe(std::atomic<int>& state, Entry& entry) {
  int known = state.load(std::memory_order_acquire);
  if (known < 0) {
    try {
      (void)entry.get();
      known = 1;
    } catch (const not_supported_error&) {
      known = 0;
    }
    state.store(known, std::memory_order_release);
  }
  return known == 1;
}

#if CUDRV_HAS_BATCH_COPY
std::atomic<int> linear_state{-1};
std::atomic<int> pitched_state{-1};
#endif

const char* order_name(source_access_order order) {
  switch (order) {
    case source_access_order::during_api_call: return "during_api_call";
    case source_access_order::any: return "any";
    default: return "stream";
  }
}

// Makes room in v for one more element, growing geometrically as push_back would, so that the
// push_back that follows cannot throw.
template <class T>
void make_room(std::vector<T>& v) {
  static_assert(std::is_nothrow_copy_constructible_v<T>, "push_back into reserved room must not throw");
  if (v.size() == v.capacity()) {
    v.reserve(v.capacity() < 8 ? 8 : v.capacity() * 2);
  }
}

std::string index_of(std::size_t i, std::size_t n) { return "copy " + std::to_string(i) + " of " + std::to_string(n); }

// Whether work on stream is being captured into a graph: the batch entry points have no graph-node form,
// so a capture takes the loop of single copies, which captures as memcpy nodes.
bool capturing(CUstream stream) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  detail::check(detail::drv::cuStreamIsCapturing(stream, &status), "cuStreamIsCapturing");
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

// Checks a batch of size copies and the stream, and picks the path for mode: automatic takes the driver's
// batch where it exists and the stream is neither the legacy default stream (which the batch entry points
// refuse) nor capturing.
batch_copy_path choose_path(const char* api, std::size_t size, batch_copy_mode mode, CUstream stream,
                            bool (*supported)(), void (*require_entry)()) {
  if (size == 0) {
    throw invalid_argument_error(api, "nothing to copy: the batch holds no copy");
  }
  detail::require_stream(stream, api);
  const bool legacy = stream == CU_STREAM_LEGACY || stream == nullptr;
  switch (mode) {
    case batch_copy_mode::fallback_loop: return batch_copy_path::fallback_loop;
    case batch_copy_mode::driver_batch:
      if (legacy) {
        throw invalid_argument_error(api, "the driver's batched copies refuse the legacy default stream: enqueue the "
                                          "batch on a created stream, or let batch_copy_mode::automatic fall back to "
                                          "single copies");
      }
      require_entry();  // throws not_supported_error naming the entry point and the driver's version
      if (capturing(stream)) {
        throw invalid_argument_error(api, "the stream is capturing, and the driver's batched copies cannot be captured "
                                          "into a graph: let batch_copy_mode::automatic fall back to single copies, "
                                          "which are captured as memcpy nodes");
      }
      return batch_copy_path::driver_batch;
    case batch_copy_mode::automatic:
    default:
      return !legacy && supported() && !capturing(stream) ? batch_copy_path::driver_batch
                                                          : batch_copy_path::fallback_loop;
  }
}

void check_attributes(const char* api, const copy_attributes& a, std::size_t index) {
  const auto order = static_cast<unsigned>(a.order);
  if (order < 1 || order > 3) {
    throw invalid_argument_error(api, index_of(index, index + 1) + ": source_access_order " + std::to_string(order) +
                                          " is none of stream, during_api_call and any");
  }
  for (const copy_location_hint* h : {&a.source_hint, &a.destination_hint}) {
    if (static_cast<unsigned>(h->kind) > static_cast<unsigned>(location_kind::host_numa_current)) {
      throw invalid_argument_error(api, index_of(index, index + 1) + ": the location hint kind " +
                                            std::to_string(static_cast<unsigned>(h->kind)) + " is not a location_kind");
    }
  }
}

bool any_during_api_call(std::span<const copy_attributes> attrs) {
  for (const copy_attributes& a : attrs) {
    if (a.order == source_access_order::during_api_call) {
      return true;
    }
  }
  return false;
}

// What source_access_order::during_api_call promises, on the fallback path: the sources are read when
// the call returns.
void finish_during_api_call(CUstream stream) {
  detail::check(detail::drv::cuStreamSynchronize(stream), "cuStreamSynchronize", [] {
    return std::string("completing a batch with source_access_order::during_api_call on the fallback path");
  });
}

#if CUDRV_HAS_BATCH_COPY
CUmemLocation to_native(const copy_location_hint& h) {
  CUmemLocation l{};
  switch (h.kind) {
    case location_kind::device:
      l.type = CU_MEM_LOCATION_TYPE_DEVICE;
      l.id = h.id;
      break;
    case location_kind::host: l.type = CU_MEM_LOCATION_TYPE_HOST; break;
    case location_kind::host_numa:
      l.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
      l.id = h.id;
      break;
    case location_kind::host_numa_current: l.type = CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT; break;
    case location_kind::none:
    default: l.type = CU_MEM_LOCATION_TYPE_INVALID; break;
  }
  return l;
}

CUmemcpyAttributes to_native(const copy_attributes& a) {
  CUmemcpyAttributes n{};
  n.srcAccessOrder = static_cast<CUmemcpySrcAccessOrder>(a.order);
  n.srcLocHint = to_native(a.source_hint);
  n.dstLocHint = to_native(a.destination_hint);
  n.flags = a.prefer_overlap_with_compute ? CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE : CU_MEMCPY_FLAG_DEFAULT;
  return n;
}

void require_linear_entry() { (void)detail::drv::cuMemcpyBatchAsync_entry.get(); }
void require_pitched_entry() { (void)detail::drv::cuMemcpy3DBatchAsync_entry.get(); }
#else
[[noreturn]] void require_built_with_12080(const char* entry) {
  throw not_supported_error(CUDA_ERROR_NOT_SUPPORTED, entry,
                            "cudrv was built with CUDA headers older than 12.8, which do not declare it; "
                            "batch_copy_mode::automatic falls back to single copies");
}
void require_linear_entry() { require_built_with_12080("cuMemcpyBatchAsync"); }
void require_pitched_entry() { require_built_with_12080("cuMemcpy3DBatchAsync"); }
#endif

// The attribute entry that applies to copy i (the last entry whose first copy is at most i).
const copy_attributes& attributes_of(const batch_copy& batch, std::size_t i) {
  const auto idx = batch.attribute_indices();
  std::size_t k = idx.size() - 1;
  while (idx[k] > i) {
    --k;
  }
  return batch.attributes()[k];
}

std::string describe_linear(const batch_copy& batch, std::size_t i) {
  return index_of(i, batch.size()) + ": " +
         detail::describe_copy({static_cast<std::uintptr_t>(batch.destinations()[i]), 0,
                                static_cast<std::uintptr_t>(batch.sources()[i]), 0, batch.sizes()[i]}) +
         ", source_access_order " + order_name(attributes_of(batch, i).order);
}

std::string describe_pitched(const batch_copy_3d& batch, std::size_t i) {
  const batch_copy_3d_op& op = batch.operations()[i];
  return index_of(i, batch.size()) + ": source " + detail::describe_layout(op.src) + " at " +
         detail::format_address(op.src.address) + ", destination " + detail::describe_layout(op.dst) + " at " +
         detail::format_address(op.dst.address) + ", source_access_order " + order_name(op.attributes.order);
}

}  // namespace

bool batch_copy_supported() {
#if CUDRV_HAS_BATCH_COPY
  return probe(linear_state, detail::drv::cuMemcpyBatchAsync_entry);
#else
  detail::ensure_driver();
  return false;
#endif
}

bool batch_copy_3d_supported() {
#if CUDRV_HAS_BATCH_COPY
  return probe(pitched_state, detail::drv::cuMemcpy3DBatchAsync_entry);
#else
  detail::ensure_driver();
  return false;
#endif
}

}  // namespace cudrv

namespace cudrv::detail {

// What a batch_copy holds, in the driver's layout: one array per cuMemcpyBatchAsync argument.
struct batch_copy_storage {
  std::vector<CUdeviceptr> dsts;
  std::vector<CUdeviceptr> srcs;
  std::vector<std::size_t> sizes;
  std::vector<copy_attributes> attrs;
  std::vector<std::size_t> attr_indices;
};

struct batch_copy_3d_storage {
  std::vector<batch_copy_3d_op> ops;
};

}  // namespace cudrv::detail

namespace cudrv {
namespace {

// The storage of a batch, made on first use (a moved-from or new batch has none).
template <class Storage>
Storage& storage_of(Storage*& storage) {
  if (storage == nullptr) {
    storage = new Storage();
  }
  return *storage;
}

template <class Storage>
Storage* copy_of(const Storage* storage) {
  return storage == nullptr ? nullptr : new Storage(*storage);
}

// Copy and move assignment of a batch's storage (not to itself: the callers check); the copy is made
// first, so a failure leaves `mine` as it was.
template <class Storage>
void assign_copy(Storage*& mine, const Storage* theirs) {
  Storage* copy = copy_of(theirs);
  delete mine;
  mine = copy;
}

template <class Storage>
void assign_move(Storage*& mine, Storage*& theirs) noexcept {
  if (&mine != &theirs) {
    delete mine;
    mine = detail::exchange(theirs, nullptr);
  }
}

}  // namespace

batch_copy_error::batch_copy_error(CUresult code, std::string api, std::optional<std::size_t> failed_index,
                                   std::size_t batch_size, std::string context)
    : error(code, std::move(api), std::move(context)),
      failed_index_(failed_index.value_or(0)),
      has_failed_index_(failed_index.has_value()),
      batch_size_(batch_size) {}

std::optional<std::size_t> batch_copy_error::failed_index() const noexcept {
  return has_failed_index_ ? std::optional<std::size_t>(failed_index_) : std::nullopt;
}

batch_copy::batch_copy(const batch_copy& other) : storage_(copy_of(other.storage_)) {}

batch_copy& batch_copy::operator=(const batch_copy& other) {
  if (this != &other) {
    assign_copy(storage_, other.storage_);
  }
  return *this;
}

batch_copy& batch_copy::operator=(batch_copy&& other) noexcept {
  assign_move(storage_, other.storage_);
  return *this;
}

batch_copy::~batch_copy() { delete storage_; }

std::size_t batch_copy::size() const noexcept { return storage_ == nullptr ? 0 : storage_->sizes.size(); }

void batch_copy::reserve(std::size_t copies) {
  detail::batch_copy_storage& st = storage_of(storage_);
  st.dsts.reserve(copies);
  st.srcs.reserve(copies);
  st.sizes.reserve(copies);
}

std::span<const CUdeviceptr> batch_copy::destinations() const noexcept {
  return storage_ == nullptr ? std::span<const CUdeviceptr>() : std::span<const CUdeviceptr>(storage_->dsts);
}
std::span<const CUdeviceptr> batch_copy::sources() const noexcept {
  return storage_ == nullptr ? std::span<const CUdeviceptr>() : std::span<const CUdeviceptr>(storage_->srcs);
}
std::span<const std::size_t> batch_copy::sizes() const noexcept {
  return storage_ == nullptr ? std::span<const std::size_t>() : std::span<const std::size_t>(storage_->sizes);
}
std::span<const copy_attributes> batch_copy::attributes() const noexcept {
  return storage_ == nullptr ? std::span<const copy_attributes>() : std::span<const copy_attributes>(storage_->attrs);
}
std::span<const std::size_t> batch_copy::attribute_indices() const noexcept {
  return storage_ == nullptr ? std::span<const std::size_t>() : std::span<const std::size_t>(storage_->attr_indices);
}

void batch_copy::clear() noexcept {
  if (storage_ != nullptr) {
    storage_->dsts.clear();
    storage_->srcs.clear();
    storage_->sizes.clear();
    storage_->attrs.clear();
    storage_->attr_indices.clear();
  }
}

batch_copy_3d::batch_copy_3d(const batch_copy_3d& other) : storage_(copy_of(other.storage_)) {}

batch_copy_3d& batch_copy_3d::operator=(const batch_copy_3d& other) {
  if (this != &other) {
    assign_copy(storage_, other.storage_);
  }
  return *this;
}

batch_copy_3d& batch_copy_3d::operator=(batch_copy_3d&& other) noexcept {
  assign_move(storage_, other.storage_);
  return *this;
}

batch_copy_3d::~batch_copy_3d() { delete storage_; }

std::size_t batch_copy_3d::size() const noexcept { return storage_ == nullptr ? 0 : storage_->ops.size(); }

std::span<const batch_copy_3d_op> batch_copy_3d::operations() const noexcept {
  return storage_ == nullptr ? std::span<const batch_copy_3d_op>() : std::span<const batch_copy_3d_op>(storage_->ops);
}

void batch_copy_3d::clear() noexcept {
  if (storage_ != nullptr) {
    storage_->ops.clear();
  }
}

void batch_copy::add_checked(const detail::linear_copy& c, const copy_attributes& attributes) {
  const char* api = "cudrv::batch_copy::add";
  try {
    detail::check_linear(api, c);
  } catch (const invalid_argument_error& e) {
    throw invalid_argument_error(api, index_of(size(), size() + 1) + ": " + e.description());
  }
  check_attributes(api, attributes, size());
  detail::batch_copy_storage& st = storage_of(storage_);  // may throw: the batch is unchanged
  const bool new_group = st.attrs.empty() || !(st.attrs.back() == attributes);
  // The strong guarantee: room for the new entries is made first (which may throw, changing only
  // capacities), then they are appended, which cannot throw. The five arrays never disagree, so no
  // attribute entry is left without its first copy (the driver would get numAttrs = 1 and no index).
  make_room(st.dsts);
  make_room(st.srcs);
  make_room(st.sizes);
  if (new_group) {
    make_room(st.attrs);
    make_room(st.attr_indices);
    st.attrs.push_back(attributes);
    st.attr_indices.push_back(size());
  }
  st.dsts.push_back(static_cast<CUdeviceptr>(c.dst));
  st.srcs.push_back(static_cast<CUdeviceptr>(c.src));
  st.sizes.push_back(c.bytes);
}

void batch_copy_3d::add_checked(const batch_copy_3d_op& op) {
  const char* api = "cudrv::batch_copy_3d::add";
  try {
    detail::check_pitched(api, op.dst, op.src);
  } catch (const invalid_argument_error& e) {
    throw invalid_argument_error(api, index_of(size(), size() + 1) + ": " + e.description());
  }
  check_attributes(api, op.attributes, size());
  storage_of(storage_).ops.push_back(op);
}

batch_copy_path copy(const batch_copy& batch, stream_ref s, batch_copy_mode mode) {
  CUDRV_NVTX_AUTOMATIC_RANGE("cudrv::batch_copy", [n = batch.size()] { return std::to_string(n) + " copies"; });
  const CUstream stream = s.native_handle();
  const batch_copy_path path =
      choose_path("cudrv::copy(batch_copy)", batch.size(), mode, stream, &batch_copy_supported, &require_linear_entry);
  const std::size_t n = batch.size();
  auto* dsts = const_cast<CUdeviceptr*>(batch.destinations().data());  // the driver only reads them
  auto* srcs = const_cast<CUdeviceptr*>(batch.sources().data());
  auto* sizes = const_cast<std::size_t*>(batch.sizes().data());
  detail::stream_context_scope scope(stream);
  if (path == batch_copy_path::fallback_loop) {
    for (std::size_t i = 0; i < n; ++i) {
      const CUresult status = detail::drv::cuMemcpyAsync(dsts[i], srcs[i], sizes[i], stream);
      if (status != CUDA_SUCCESS) [[unlikely]] {
        throw batch_copy_error(status, "cuMemcpyAsync", i, n,
                               describe_linear(batch, i) + (i > 0
                                                                ? " (fallback path: the copies before it were enqueued)"
                                                                : " (fallback path)"));
      }
    }
    if (any_during_api_call(batch.attributes())) {
      finish_during_api_call(stream);
    }
    return path;
  }
#if CUDRV_HAS_BATCH_COPY
  const auto groups = batch.attributes();
  CUmemcpyAttributes one[4];
  std::vector<CUmemcpyAttributes> many;
  CUmemcpyAttributes* attrs = one;
  if (groups.size() > std::size(one)) {
    many.resize(groups.size());
    attrs = many.data();
  }
  for (std::size_t k = 0; k < groups.size(); ++k) {
    attrs[k] = to_native(groups[k]);
  }
  std::size_t fail = SIZE_MAX;
  const CUresult status = detail::drv::cuMemcpyBatchAsync(dsts, srcs, sizes, n, attrs,
                                                          const_cast<std::size_t*>(batch.attribute_indices().data()),
                                                          groups.size(), &fail, stream);
  if (status != CUDA_SUCCESS) [[unlikely]] {
    if (fail < n) {
      throw batch_copy_error(status, "cuMemcpyBatchAsync", fail, n, describe_linear(batch, fail));
    }
    throw batch_copy_error(status, "cuMemcpyBatchAsync", std::nullopt, n,
                           "the batch of " + std::to_string(n) + " copies with " + std::to_string(groups.size()) +
                               " attribute entries (the driver named no copy)");
  }
#endif
  return path;
}

batch_copy_path copy(const batch_copy_3d& batch, stream_ref s, batch_copy_mode mode) {
  CUDRV_NVTX_AUTOMATIC_RANGE("cudrv::batch_copy_3d", [n = batch.size()] { return std::to_string(n) + " copies"; });
  const CUstream stream = s.native_handle();
  const batch_copy_path path = choose_path("cudrv::copy(batch_copy_3d)", batch.size(), mode, stream,
                                           &batch_copy_3d_supported, &require_pitched_entry);
  const auto ops = batch.operations();
  const std::size_t n = ops.size();
  if (path == batch_copy_path::fallback_loop) {
    bool during_call = false;
    for (std::size_t i = 0; i < n; ++i) {
      try {
        detail::copy_pitched(ops[i].dst, ops[i].src, stream, true);
      } catch (const batch_copy_error&) {
        throw;
      } catch (const error& e) {
        if (e.source() != error_source::driver) {
          throw;
        }
        throw batch_copy_error(e.result(), e.api(), i, n,
                               describe_pitched(batch, i) +
                                   (i > 0 ? " (fallback path: the copies before it were enqueued)"
                                          : " (fallback path)"));
      }
      during_call = during_call || ops[i].attributes.order == source_access_order::during_api_call;
    }
    if (during_call) {
      finish_during_api_call(stream);
    }
    return path;
  }
#if CUDRV_HAS_BATCH_COPY
  std::vector<CUDA_MEMCPY3D_BATCH_OP> list(n);
  for (std::size_t i = 0; i < n; ++i) {
    const batch_copy_3d_op& op = ops[i];
    CUDA_MEMCPY3D_BATCH_OP& o = list[i];
    // Pointer to pointer: the element is one byte, so rows and extents are in bytes.
    o.src.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
    o.src.op.ptr.ptr = static_cast<CUdeviceptr>(op.src.address);
    o.src.op.ptr.rowLength = op.src.pitch;
    o.src.op.ptr.layerHeight = op.src.height;
    o.src.op.ptr.locHint = to_native(op.attributes.source_hint);
    o.dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
    o.dst.op.ptr.ptr = static_cast<CUdeviceptr>(op.dst.address);
    o.dst.op.ptr.rowLength = op.dst.pitch;
    o.dst.op.ptr.layerHeight = op.dst.height;
    o.dst.op.ptr.locHint = to_native(op.attributes.destination_hint);
    o.extent = {op.src.width_bytes, op.src.height, op.src.depth};
    o.srcAccessOrder = static_cast<CUmemcpySrcAccessOrder>(op.attributes.order);
    o.flags =
        op.attributes.prefer_overlap_with_compute ? CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE : CU_MEMCPY_FLAG_DEFAULT;
  }
  detail::stream_context_scope scope(stream);
  std::size_t fail = SIZE_MAX;
  const CUresult status = detail::drv::cuMemcpy3DBatchAsync(n, list.data(), &fail, 0, stream);
  if (status != CUDA_SUCCESS) [[unlikely]] {
    if (fail < n) {
      throw batch_copy_error(status, "cuMemcpy3DBatchAsync", fail, n, describe_pitched(batch, fail));
    }
    throw batch_copy_error(status, "cuMemcpy3DBatchAsync", std::nullopt, n,
                           "the batch of " + std::to_string(n) + " copies (the driver named no copy)");
  }
#endif
  return path;
}

}  // namespace cudrv
