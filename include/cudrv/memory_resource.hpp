/// @file memory_resource.hpp
/// @brief @ref cudrv::memory_resource : the one interface behind which every kind of cudrv allocation
/// (device, pinned, managed, pool, virtual memory) sits, for allocators that want to take any of them.
///
/// Layer: memory (docs/design.md, "Source layers").
#pragma once

#include <cstddef>

#include "cudrv/memory_location.hpp"
#include "cudrv/stream.hpp"

namespace cudrv {

class resource_buffer;

namespace detail {
/// @brief What a @ref resource_buffer holds of its resource (internal): the resource, cleared when the
/// resource is destroyed, and a count of the buffers that still refer to it.
struct resource_link;
}  // namespace detail

/// @brief What memory a @ref memory_resource hands out, known without a pointer-attribute query: the
/// same description buffers give (@ref memory_properties).
using memory_resource_properties = memory_properties;

/// @brief The interface of every cudrv memory resource, and the one a framework's allocator can take
/// (or implement) to get memory without caring where it comes from.
///
/// Two ways to allocate, shaped like the resource concepts of CCCL's `cuda::mr` so that an adaptor is a
/// thin forwarder:
/// - synchronous: @ref allocate / @ref deallocate. The memory is usable as soon as @ref allocate
///   returns, and @ref deallocate may free it at once: the caller makes sure no queued work still uses it.
/// - stream-ordered: @ref allocate_async / @ref deallocate_async. The memory is usable by work queued
///   on the stream after the call; the free happens after the work queued on the stream before it.
///   A resource without native stream-ordered allocation allocates synchronously and, on
///   @ref deallocate_async, waits for the stream before it frees (the default implementation).
///
/// Implementations override the private `do_*` functions (the non-virtual interface idiom: the public
/// functions check the arguments once for all of them). Deallocation never throws: a failure goes to
/// the destruction handler (@ref set_destruction_error_handler).
///
/// These calls hand out raw pointers, for allocators that keep their own books. Code that wants the
/// memory owned allocates a @ref resource_buffer, which frees through the resource when it goes. A
/// resource must outlive the buffers allocated from it: destroying it first frees none of their memory
/// through it again, and tells the destruction handler how many buffers were left.
/// @code
/// void fill(cudrv::memory_resource& mr, cudrv::stream_ref s, std::size_t n) {
///   cudrv::resource_buffer buf(mr, n * sizeof(float), s);   // mr.allocate_async on s
///   // ... kernels on s use buf.as<float>() ...
/// }                                                          // mr.deallocate_async on s
/// @endcode
class memory_resource {
 public:
  /// @brief The alignment used when none is given; every cudrv resource returns at least this.
  static constexpr std::size_t default_alignment = 256;

  /// @brief Detaches the @ref resource_buffer objects still allocated from this resource: they will
  /// free nothing through it, and the destruction handler is told how many there were.
  virtual ~memory_resource();

  /// @brief Allocates @p bytes aligned to @p alignment, usable when the call returns. Zero bytes give
  /// a null pointer.
  /// @throws invalid_argument_error when @p alignment is not a power of two, or larger than the
  /// resource supports
  [[nodiscard]] void* allocate(std::size_t bytes, std::size_t alignment = default_alignment);
  /// @brief Frees memory from @ref allocate with the same @p bytes and @p alignment. Null does nothing.
  void deallocate(void* ptr, std::size_t bytes, std::size_t alignment = default_alignment) noexcept;

  /// @brief Allocates @p bytes aligned to @p alignment, usable by work queued on @p s after this call.
  /// @throws invalid_argument_error as @ref allocate
  [[nodiscard]] void* allocate_async(std::size_t bytes, std::size_t alignment, stream_ref s);
  /// @brief As the other overload, with @ref default_alignment.
  [[nodiscard]] void* allocate_async(std::size_t bytes, stream_ref s) {
    return allocate_async(bytes, default_alignment, s);
  }
  /// @brief Frees memory from @ref allocate_async (or @ref allocate) after the work queued on @p s.
  void deallocate_async(void* ptr, std::size_t bytes, std::size_t alignment, stream_ref s) noexcept;
  /// @brief As the other overload, with @ref default_alignment.
  void deallocate_async(void* ptr, std::size_t bytes, stream_ref s) noexcept {
    deallocate_async(ptr, bytes, default_alignment, s);
  }

  /// @brief Where the memory lives and who may access it.
  [[nodiscard]] memory_resource_properties properties() const noexcept { return do_properties(); }

  /// @brief Whether memory from @p other may be freed through this resource and the reverse.
  [[nodiscard]] bool is_equal(const memory_resource& other) const noexcept {
    return this == &other || do_is_equal(other);
  }
  /// @brief @ref is_equal.
  [[nodiscard]] friend bool operator==(const memory_resource& a, const memory_resource& b) noexcept {
    return a.is_equal(b);
  }

 protected:
  memory_resource() = default;
  /// @brief Resources are copied or moved only by their concrete types. A copy starts with no buffers
  /// of its own: those of @p other stay with @p other.
  memory_resource(const memory_resource& /*other*/) noexcept {}
  /// @brief Resources are copied or moved only by their concrete types. The buffers allocated from
  /// this resource stay with it and are freed through its new state: assign only a resource equal to
  /// this one (@ref is_equal) while such buffers live.
  memory_resource& operator=(const memory_resource& /*other*/) noexcept { return *this; }

 private:
  friend class resource_buffer;
  /// @brief The record the resource's buffers hold, made when the first one is allocated (internal).
  detail::resource_link* link_ = nullptr;

  /// @brief Allocates; @p bytes > 0 and @p alignment a power of two (checked by the caller).
  virtual void* do_allocate(std::size_t bytes, std::size_t alignment) = 0;
  /// @brief Frees; @p ptr is not null. Must not throw.
  virtual void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment) noexcept = 0;
  /// @brief Stream-ordered allocation. The default allocates synchronously with @ref do_allocate.
  virtual void* do_allocate_async(std::size_t bytes, std::size_t alignment, stream_ref s);
  /// @brief Stream-ordered free. The default synchronises @p s, then calls @ref do_deallocate
  /// (a failure to synchronise is reported to the destruction handler and the memory is not freed; a
  /// @ref host_callback_error, thrown once the stream has completed, is reported and the memory freed).
  virtual void do_deallocate_async(void* ptr, std::size_t bytes, std::size_t alignment, stream_ref s) noexcept;
  /// @brief See @ref properties.
  [[nodiscard]] virtual memory_resource_properties do_properties() const noexcept = 0;
  /// @brief Whether @p other (not this object) hands out memory this resource can free. Default: no.
  [[nodiscard]] virtual bool do_is_equal(const memory_resource& other) const noexcept;
};

}  // namespace cudrv
