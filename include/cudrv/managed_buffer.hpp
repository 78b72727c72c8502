/// @file managed_buffer.hpp
/// @brief @ref cudrv::managed_buffer : owning managed (unified) memory with attach, prefetch and advise.
///
/// Layer: memory (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <cstddef>
#include <span>
#include <type_traits>
#include <utility>

#include "cudrv/context.hpp"
#include "cudrv/detail/host_buffer.hpp"
#include "cudrv/device.hpp"
#include "cudrv/managed_range.hpp"
#include "cudrv/memory_location.hpp"
#include "cudrv/span.hpp"
#include "cudrv/stream.hpp"

namespace cudrv {

/// @brief How managed memory is attached (the `CU_MEM_ATTACH_*` values).
enum class managed_attach : unsigned int {
  global = CU_MEM_ATTACH_GLOBAL,  ///< Accessible from any stream on any device.
  host = CU_MEM_ATTACH_HOST,      ///< Accessible from the host; devices need an explicit attach first.
  single =
      CU_MEM_ATTACH_SINGLE,  ///< Accessible only from the stream it is attached to (with @ref managed_buffer::attach).
};

namespace detail {
void managed_attach_async(CUstream stream, CUdeviceptr address, std::size_t bytes, unsigned int flags);
void managed_prefetch_async(CUdeviceptr address, std::size_t bytes, memory_location where, CUstream stream);
void managed_advise(CUcontext ctx, CUdeviceptr address, std::size_t bytes, CUmem_advise advice, memory_location where);
}  // namespace detail

/// @brief Owning managed memory for `size()` elements of @p T (cuMemAllocManaged), accessible from
/// the host and from devices; freed with cuMemFree. Move-only; a contiguous range of @p T (`view()`
/// gives a `std::span<T>`, `device_view()` a @ref cudrv::device_span).
///
/// Host access, shared with the other host-accessible buffer: `data()`, `size()`, `size_bytes()`,
/// `empty()`, `operator[]`, `begin()` / `end()`, `view()` (a `std::span<T>`), `context()`, and
/// `release()`, which hands the memory over to the caller.
/// @code
/// cudrv::managed_buffer<float> m(dev, n);
/// for (auto& x : m) x = 1.0f;                              // touched on the host
/// m.advise(cudrv::memory_advice::set_preferred_location, dev);
/// m.prefetch(dev, stream);                                 // migrate before the kernel runs
/// // ... launch a kernel on stream with m.view() ...
/// m.prefetch(cudrv::memory_location::host(), stream);      // bring it back
/// stream.synchronize();
/// @endcode
template <class T>
class managed_buffer : public detail::host_buffer<T, &detail::host_allocation::free_managed> {
  using base = detail::host_buffer<T, &detail::host_allocation::free_managed>;

 public:
  /// @brief Allocates @p count elements of managed memory in @p dev's primary context.
  managed_buffer(const device& dev, std::size_t count, managed_attach attach = managed_attach::global)
      : managed_buffer(dev.primary_context(), count, attach) {}
  /// @brief Allocates @p count elements of managed memory in @p ctx.
  managed_buffer(context_ref ctx, std::size_t count, managed_attach attach = managed_attach::global)
      : base(detail::host_allocation::allocate_managed(ctx.native_handle(), count, sizeof(T),
                                                       static_cast<unsigned int>(attach))) {}

  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the temporary owner would be destroyed at the end of the statement, before this object.
  managed_buffer(cudrv::context&&, std::size_t, managed_attach = managed_attach::global) = delete;
  /// @brief Refused: the temporary owner would be destroyed at the end of the statement, before this object.
  managed_buffer(cudrv::primary_context&&, std::size_t, managed_attach = managed_attach::global) = delete;
  /// @}
  /// @brief Adopts memory from cuMemAllocManaged made in @p ctx.
  [[nodiscard]] static managed_buffer from_native_handle(T* pointer, std::size_t count, context_ref ctx) noexcept {
    return managed_buffer(
        detail::host_allocation{pointer, count * sizeof(T), detail::context_token::of(ctx.native_handle()), -2});
  }
  /// @brief What the memory is (no pointer-attribute query): host- and device-accessible, made for
  /// the device of its context; `{-1, false, false}` when the buffer is empty (moved-from or released).
  [[nodiscard]] memory_properties properties() const {
    if (this->alloc_.pointer == nullptr && this->alloc_.context.handle == nullptr) {
      return {};
    }
    return {this->alloc_.resolved_device(), true, true};
  }
  /// @brief A device view of all elements (the same address).
  [[nodiscard]] device_span<T> device_view() noexcept {
    return {reinterpret_cast<CUdeviceptr>(this->alloc_.pointer), this->size()};
  }
  /// @brief A read-only device view of all elements (the same address).
  [[nodiscard]] device_span<const T> device_view() const noexcept {
    return {reinterpret_cast<CUdeviceptr>(this->alloc_.pointer), this->size()};
  }

  /// @brief Attaches the memory to @p s (cuStreamAttachMemAsync): with @ref managed_attach::single only
  /// work on @p s may access it, which lets the host use it while other streams run.
  void attach(stream_ref s, managed_attach how = managed_attach::single) const {
    detail::managed_attach_async(s.native_handle(), device_view().data(), 0, static_cast<unsigned int>(how));
  }
  /// @brief Migrates the memory to @p where, ordered on @p s (cuMemPrefetchAsync).
  void prefetch(memory_location where, stream_ref s) const {
    detail::managed_prefetch_async(device_view().data(), this->alloc_.bytes, where, s.native_handle());
  }
  /// @brief Gives the driver a hint about the memory (cuMemAdvise) with the driver's enumerator, e.g.
  /// `CU_MEM_ADVISE_SET_READ_MOSTLY` or `CU_MEM_ADVISE_SET_PREFERRED_LOCATION` with a location. The typed
  /// overloads (@ref memory_advice) check the location an advice needs; this one passes what it is given.
  void advise(CUmem_advise advice, memory_location where = memory_location::host()) const {
    detail::managed_advise(this->alloc_.context.handle, device_view().data(), this->alloc_.bytes, advice, where);
  }
  /// @brief Gives the driver a typed hint that needs no location (cuMemAdvise), e.g.
  /// @ref memory_advice::set_read_mostly; the same as `cudrv::advise(*this, advice)`.
  /// @throws invalid_argument_error for an empty buffer or an advice that needs a location
  void advise(memory_advice advice) const {
    detail::advise_range(reinterpret_cast<std::uintptr_t>(this->alloc_.pointer), this->alloc_.bytes, advice, nullptr,
                         "cudrv::managed_buffer::advise");
  }
  /// @brief Gives the driver a typed hint for the processor or location @p where (cuMemAdvise), e.g.
  /// @ref memory_advice::set_preferred_location with a device.
  /// @throws invalid_argument_error for an empty buffer or @ref memory_location::none()
  void advise(memory_advice advice, memory_location where) const {
    detail::advise_range(reinterpret_cast<std::uintptr_t>(this->alloc_.pointer), this->alloc_.bytes, advice, &where,
                         "cudrv::managed_buffer::advise");
  }

 private:
  explicit managed_buffer(detail::host_allocation alloc) noexcept : base(alloc) {}
};

}  // namespace cudrv
