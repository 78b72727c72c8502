/// @file growable_buffer.hpp
/// @brief @ref cudrv::growable_buffer : device memory that grows in place. A large address range is
/// reserved once; physical chunks are mapped into it as the buffer grows and released as it shrinks, so
/// the address never moves and nothing is copied.
///
/// Layer: memory (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <cstddef>
#include <type_traits>
#include <utility>
#include <vector>

#include "cudrv/detail/exchange.hpp"
#include "cudrv/device.hpp"
#include "cudrv/span.hpp"
#include "cudrv/virtual_memory.hpp"

namespace cudrv {

/// @brief Options of a @ref growable_buffer.
struct growable_buffer_options {
  /// @brief The size of each physical chunk, in bytes: a multiple of the device's minimum allocation
  /// granularity. 0 (the default) means 64 MiB rounded up to the recommended granularity. Small chunks
  /// waste less memory past the end of the buffer, but each growth step costs more driver calls and the
  /// GPU's address translation works better over large physical allocations (on an H100, 2 MiB chunks
  /// made growth ~100x slower per step than 256 MiB chunks and lowered the bandwidth of kernels over
  /// the buffer).
  std::size_t chunk_bytes = 0;
  /// @brief Other devices given access to the buffer, besides its own device.
  std::vector<device> peers{};
  /// @brief What the peers may do.
  access_rights peer_access = access_rights::read_write;
};

namespace detail {
struct growable_chunks;

/// @brief The untyped storage of a @ref cudrv::growable_buffer (internal): the reserved range, the
/// mapped chunks, and the access list granted over each newly mapped span.
class growable_storage {
 public:
  growable_storage() noexcept = default;
  growable_storage(const device& dev, std::size_t max_bytes, const growable_buffer_options& options);
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  growable_storage(const growable_storage&) = delete;
  growable_storage& operator=(const growable_storage&) = delete;
  /// @}
  growable_storage(growable_storage&& other) noexcept;
  growable_storage& operator=(growable_storage&& other) noexcept;
  ~growable_storage();

  // Maps chunks until at least `bytes` are mapped; on failure, unmaps and releases what this call
  // mapped and throws (the mapped size is unchanged).
  void map_at_least(std::size_t bytes, const char* api);
  // Unmaps and releases the chunks that lie wholly beyond `bytes`.
  void unmap_beyond(std::size_t bytes) noexcept;
  // Unmaps and releases every chunk (last first), then frees the range.
  void reset() noexcept;

  [[nodiscard]] CUdeviceptr address() const noexcept { return range_.address(); }
  [[nodiscard]] std::size_t mapped_bytes() const noexcept { return chunk_count_ * chunk_bytes_; }
  [[nodiscard]] std::size_t reserved_bytes() const noexcept { return range_.size(); }
  [[nodiscard]] std::size_t chunk_bytes() const noexcept { return chunk_bytes_; }
  [[nodiscard]] std::size_t chunk_count() const noexcept { return chunk_count_; }
  [[nodiscard]] int device_ordinal() const noexcept { return device_; }
  [[nodiscard]] explicit operator bool() const noexcept { return static_cast<bool>(range_); }

 private:
  address_range range_;  // declared first, destroyed last: freed after every chunk is unmapped
  // The mapped chunks and the access list, in src/memory/growable_buffer.cpp (made with the range): as
  // std::vector members here they would instantiate two vector types in every translation unit of the
  // umbrella (docs/design.md, "Header cost").
  growable_chunks* chunks_ = nullptr;
  std::size_t chunk_count_ = 0;  // chunks_'s size, read inline by mapped_bytes()
  physical_allocation_properties properties_{};
  std::size_t chunk_bytes_ = 0;
  int device_ = -1;
};
}  // namespace detail

/// @brief A device buffer of up to @ref max_size elements of @p T whose size changes without moving:
/// growing maps more physical memory behind the existing elements, shrinking releases it. Move-only;
/// converts to @ref device_span like @ref device_buffer.
///
/// The buffer reserves addresses for its maximum size once (which costs no memory) and maps physical
/// chunks (@ref growable_buffer_options::chunk_bytes) as it grows, granting read-write access to its
/// device, and to the peers named in the options, with one cuMemSetAccess call over the newly mapped
/// span. The vocabulary is `std::vector`'s: @ref size is the elements in use, @ref capacity those
/// mapped; @ref resize and @ref grow_to change the size and map what is missing, @ref reserve maps
/// ahead, @ref shrink_to and @ref shrink_to_fit release whole chunks. New elements are not initialised.
/// A growth that fails part way (out of memory) releases what it mapped and leaves the buffer as it was.
///
/// Memory is mapped and unmapped synchronously: shrink only when no queued work uses the released
/// elements. Pointers and views taken before a growth stay valid after it; those into released chunks
/// do not.
/// @code
/// cudrv::device dev(0);
/// cudrv::growable_buffer<float> log(dev, std::size_t(1) << 32);  // up to 16 GiB of addresses
/// log.grow_to(1 << 20);                                          // maps one 64 MiB chunk
/// float* p = log.get();
/// log.grow_to(std::size_t(1) << 28);                             // 1 GiB: p is still valid, data kept
/// cudrv::fill(cudrv::device_span<float>(log).subspan(1 << 20), 0.0f, stream);
/// log.shrink_to(1 << 20);                                        // releases the chunks past 4 MiB
/// @endcode
template <class T>
class growable_buffer {
  static_assert(std::is_trivially_copyable_v<T>, "growable_buffer holds trivially copyable elements");

 public:
  using value_type = T;           ///< The element type.
  using size_type = std::size_t;  ///< Sizes in elements.

  /// @brief Reserves addresses for @p max_count elements on @p dev (rounded up to whole chunks);
  /// maps nothing yet.
  /// @throws invalid_argument_error when @p max_count is 0, or the chunk size is not a multiple of the
  /// minimum granularity (the message names it)
  growable_buffer(const device& dev, std::size_t max_count, const growable_buffer_options& options = {})
      : storage_(dev, checked_bytes(max_count), options) {}
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  growable_buffer(const growable_buffer&) = delete;
  growable_buffer& operator=(const growable_buffer&) = delete;
  /// @}
  /// @brief Takes over @p other's memory; @p other becomes empty.
  growable_buffer(growable_buffer&& other) noexcept
      : storage_(std::move(other.storage_)), size_(cudrv::detail::exchange(other.size_, 0)) {}
  /// @brief Frees the held memory, then takes over @p other's.
  growable_buffer& operator=(growable_buffer&& other) noexcept {
    if (this != &other) {
      storage_ = std::move(other.storage_);
      size_ = cudrv::detail::exchange(other.size_, 0);
    }
    return *this;
  }
  /// @brief Unmaps and releases every chunk, then frees the range.
  ~growable_buffer() = default;

  /// @brief Sets the size to @p count elements, mapping chunks when the capacity is too small. A
  /// smaller size keeps the capacity (see @ref shrink_to).
  /// @throws invalid_argument_error when @p count > @ref max_size
  void resize(std::size_t count) {
    reserve(count);
    size_ = count;
  }
  /// @brief Grows the size to @p count elements (at least the current size).
  /// @throws invalid_argument_error when @p count is smaller than the size or larger than @ref max_size
  void grow_to(std::size_t count) {
    if (count < size_) {
      throw_bad_count("cudrv::growable_buffer::grow_to", count, "is smaller than the size", size_);
    }
    resize(count);
  }
  /// @brief Shrinks the size to @p count elements (at most the current size) and releases the chunks
  /// that hold no element any more.
  /// @throws invalid_argument_error when @p count is larger than the size
  void shrink_to(std::size_t count) {
    if (count > size_) {
      throw_bad_count("cudrv::growable_buffer::shrink_to", count, "is larger than the size", size_);
    }
    size_ = count;
    shrink_to_fit();
  }
  /// @brief Maps chunks until the capacity is at least @p count elements; the size does not change.
  /// @throws invalid_argument_error when @p count > @ref max_size
  void reserve(std::size_t count) {
    if (count > max_size()) {
      throw_bad_count("cudrv::growable_buffer::reserve", count, "exceeds the maximum size", max_size());
    }
    storage_.map_at_least(count * sizeof(T), "cudrv::growable_buffer");
  }
  /// @brief Releases the chunks that lie wholly beyond the size.
  void shrink_to_fit() noexcept { storage_.unmap_beyond(size_ * sizeof(T)); }
  /// @brief Unmaps and releases everything and frees the range; the buffer becomes empty.
  void reset() noexcept {
    storage_.reset();
    size_ = 0;
  }

  /// @brief The elements in use.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// @brief The bytes in use.
  [[nodiscard]] std::size_t size_bytes() const noexcept { return size_ * sizeof(T); }
  /// @brief Whether no element is in use.
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  /// @brief The elements mapped (the size can grow to this without a driver call).
  [[nodiscard]] std::size_t capacity() const noexcept { return storage_.mapped_bytes() / sizeof(T); }
  /// @brief The most elements the buffer can hold (its reserved addresses).
  [[nodiscard]] std::size_t max_size() const noexcept { return storage_.reserved_bytes() / sizeof(T); }
  /// @brief The size of each physical chunk, in bytes.
  [[nodiscard]] std::size_t chunk_bytes() const noexcept { return storage_.chunk_bytes(); }
  /// @brief The number of chunks mapped.
  [[nodiscard]] std::size_t chunk_count() const noexcept { return storage_.chunk_count(); }
  /// @brief The device the memory lives on.
  [[nodiscard]] cudrv::device device() const { return cudrv::device::from_native_handle(storage_.device_ordinal()); }
  /// @brief Whether the buffer holds a reserved range (false after a move or @ref reset).
  [[nodiscard]] explicit operator bool() const noexcept { return static_cast<bool>(storage_); }

  /// @brief The device address of the first element; it never changes while the buffer lives.
  [[nodiscard]] CUdeviceptr data() const noexcept { return storage_.address(); }
  /// @brief The address as a typed pointer, for kernel arguments.
  [[nodiscard]] T* get() const noexcept { return reinterpret_cast<T*>(storage_.address()); }
  /// @brief A view of the elements in use.
  [[nodiscard]] device_span<T> view() noexcept { return {storage_.address(), size_}; }
  /// @brief A read-only view of the elements in use.
  [[nodiscard]] device_span<const T> view() const noexcept { return {storage_.address(), size_}; }
  /// @brief Converts to a view of the elements in use.
  operator device_span<T>() & noexcept { return view(); }  // NOLINT: implicit on purpose
  /// @brief Converts to a read-only view of the elements in use.
  operator device_span<const T>() const& noexcept { return view(); }  // NOLINT: implicit on purpose
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: a view of a temporary buffer would outlive its memory.
  operator device_span<T>() && = delete;
  /// @brief Refused: a view of a temporary buffer would outlive its memory.
  operator device_span<const T>() const&& = delete;
  /// @}

 private:
  static std::size_t checked_bytes(std::size_t count) {
    if (count == 0 || count > static_cast<std::size_t>(-1) / sizeof(T)) {
      throw_bad_count("cudrv::growable_buffer", count, "is not a valid maximum for elements of size", sizeof(T));
    }
    return count * sizeof(T);
  }
  [[noreturn]] static void throw_bad_count(const char* api, std::size_t count, const char* what, std::size_t limit);

  detail::growable_storage storage_;
  std::size_t size_ = 0;
};

namespace detail {
/// @brief Throws invalid_argument_error "<count> elements <what> <limit>" (internal).
[[noreturn]] void throw_growable_count(const char* api, std::size_t count, const char* what, std::size_t limit);
}  // namespace detail

template <class T>
void growable_buffer<T>::throw_bad_count(const char* api, std::size_t count, const char* what, std::size_t limit) {
  detail::throw_growable_count(api, count, what, limit);
}

}  // namespace cudrv
