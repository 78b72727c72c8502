/// @file cccl.hpp
/// @brief Interop with CCCL (libcu++): implicit conversions between @ref cudrv::stream_ref and
/// `cuda::stream_ref`, and @ref cudrv::cccl_resource, which presents any @ref cudrv::memory_resource
/// as a `cuda::mr` resource (synchronous and stream-ordered) with the properties of its memory.
///
/// Opt-in (not included by <cudrv/cudrv.hpp>) and compiled only where CCCL's headers are found: the
/// CUDA toolkit ships them (CUDA 13: in `include/cccl`, which CMake's target `cudrv::cccl` adds to the
/// include path). `cuda::mr` is experimental in CCCL and needs
/// `LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE` defined before the first CCCL header: this header
/// defines it when it is not, and `cudrv::cccl` defines it for the whole target (so that a CCCL
/// header included before this one sees it too).
#pragma once

#if !__has_include(<cuda/memory_resource>) || !__has_include(<cuda/stream_ref>)
#error "<cudrv/cccl.hpp> needs CCCL's <cuda/stream_ref> and <cuda/memory_resource> (link cudrv::cccl)"
#endif

#ifndef LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE
#define LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE
#endif

#include <cuda.h>
#include <cuda/memory_resource>
#include <cuda/stream_ref>

#include <cstddef>
#include <string>
#include <type_traits>

#include "cudrv/error.hpp"
#include "cudrv/memory_resource.hpp"
#include "cudrv/stream.hpp"

namespace cudrv {

/// @brief Makes `cuda::stream_ref` and cudrv's stream handles convert into each other implicitly.
///
/// - `cuda::stream_ref` → @ref stream_ref: the handle is taken as it is, except that the null handle
///   (`cuda::stream_ref`'s default, the runtime's stream 0) becomes `CU_STREAM_LEGACY`, the rule of
///   @ref stream_ref's constructor. Code built with the runtime's per-thread default stream
///   (`--default-stream per-thread`) should pass `cudaStreamPerThread` rather than 0.
/// - @ref stream_ref or @ref stream → `cuda::stream_ref`: the handle is passed on as it is (never null:
///   the legacy default stream stays `CU_STREAM_LEGACY`, which the runtime accepts as
///   `cudaStreamLegacy`). A moved-from @ref stream is refused with @ref invalid_argument_error.
/// @code
/// cudrv::stream s(dev);
/// cuda::stream_ref c = s;                // for CCCL algorithms and resources
/// cudrv::stream_ref back = c;            // the same CUstream
/// @endcode
template <>
struct foreign_stream<::cuda::stream_ref> {
  /// @brief The handle @p s names (`cudaStream_t` is `CUstream`).
  [[nodiscard]] static CUstream native_handle(const ::cuda::stream_ref& s) noexcept { return s.get(); }
  /// @brief A `cuda::stream_ref` naming @p handle.
  [[nodiscard]] static ::cuda::stream_ref from_native_handle(CUstream handle) noexcept {
    return ::cuda::stream_ref(handle);
  }
};

/// @brief The `cuda::stream_ref` naming the same stream as @p s (the implicit conversion, spelled out).
[[nodiscard]] inline ::cuda::stream_ref to_cccl(stream_ref s) { return s; }

namespace detail {
/// @brief Whether @p P is one of the two `cuda::mr` properties @ref cccl_resource supports (internal).
template <class P>
inline constexpr bool cccl_memory_property =
    std::is_same_v<P, ::cuda::mr::device_accessible> || std::is_same_v<P, ::cuda::mr::host_accessible>;
}  // namespace detail

/// @brief A `cuda::mr` resource over a cudrv @ref memory_resource: satisfies `cuda::mr::resource` and
/// `cuda::mr::async_resource` (the synchronous and stream-ordered concepts of CCCL), and declares the
/// properties @p Properties (`cuda::mr::device_accessible`, `cuda::mr::host_accessible`), so that it
/// converts to `cuda::mr::resource_ref<Properties...>` and `cuda::mr::async_resource_ref<...>`.
///
/// A thin, trivially copyable forwarder: it views the resource, which must outlive it and every copy.
/// Each call goes to the same call of the wrapped resource (stream-ordered calls on the stream the
/// `cuda::stream_ref` names; a null one is the legacy default stream). The constructor checks that the
/// wrapped resource's memory has every property claimed (@ref memory_resource::properties), so a
/// device-only resource cannot be presented as host-accessible. Two adaptors are equal when their
/// resources are (@ref memory_resource::is_equal).
///
/// The usual instantiations are @ref cccl_device_resource (device memory, pools of device memory) and
/// @ref cccl_shared_resource (pinned and managed memory, host pools).
/// @code
/// cudrv::memory_pool pool(dev);
/// cudrv::pool_memory_resource mr(pool);
/// cudrv::cccl_device_resource cccl(mr);
/// cuda::mr::async_resource_ref<cuda::mr::device_accessible> ref = cccl;   // what CCCL code takes
/// void* p = ref.allocate_async(bytes, 256, cuda::stream_ref(s));           // cuMemAllocFromPoolAsync
/// ref.deallocate_async(p, bytes, 256, cuda::stream_ref(s));                // cuMemFreeAsync
/// @endcode
template <class... Properties>
class cccl_resource {
  static_assert((detail::cccl_memory_property<Properties> && ...),
                "cudrv::cccl_resource supports cuda::mr::device_accessible and cuda::mr::host_accessible");

 public:
  /// @brief Views @p resource.
  /// @throws invalid_argument_error when the memory of @p resource lacks a property in @p Properties
  explicit cccl_resource(memory_resource& resource) : resource_(&resource) {
    const memory_resource_properties props = resource.properties();
    const bool device_ok = !(std::is_same_v<Properties, ::cuda::mr::device_accessible> || ...) || props.device_accessible;
    const bool host_ok = !(std::is_same_v<Properties, ::cuda::mr::host_accessible> || ...) || props.host_accessible;
    if (!device_ok || !host_ok) {
      throw invalid_argument_error("cudrv::cccl_resource",
                                   std::string("the wrapped memory_resource's memory is not ") +
                                       (device_ok ? "host-accessible" : "device-accessible") +
                                       " (memory_resource::properties), which the adaptor's properties claim");
    }
  }

  /// @brief @ref memory_resource::allocate.
  [[nodiscard]] void* allocate(std::size_t bytes, std::size_t alignment = memory_resource::default_alignment) {
    return resource_->allocate(bytes, alignment);
  }
  /// @brief @ref memory_resource::deallocate.
  void deallocate(void* ptr, std::size_t bytes, std::size_t alignment = memory_resource::default_alignment) noexcept {
    resource_->deallocate(ptr, bytes, alignment);
  }
  /// @brief @ref memory_resource::allocate_async on the stream @p s names.
  [[nodiscard]] void* allocate_async(std::size_t bytes, std::size_t alignment, ::cuda::stream_ref s) {
    return resource_->allocate_async(bytes, alignment, stream_ref(s));
  }
  /// @brief As the other overload, with @ref memory_resource::default_alignment.
  [[nodiscard]] void* allocate_async(std::size_t bytes, ::cuda::stream_ref s) {
    return allocate_async(bytes, memory_resource::default_alignment, s);
  }
  /// @brief @ref memory_resource::deallocate_async on the stream @p s names.
  void deallocate_async(void* ptr, std::size_t bytes, std::size_t alignment, ::cuda::stream_ref s) noexcept {
    resource_->deallocate_async(ptr, bytes, alignment, stream_ref(s));
  }
  /// @brief As the other overload, with @ref memory_resource::default_alignment.
  void deallocate_async(void* ptr, std::size_t bytes, ::cuda::stream_ref s) noexcept {
    deallocate_async(ptr, bytes, memory_resource::default_alignment, s);
  }

  /// @brief The wrapped resource.
  [[nodiscard]] memory_resource& upstream_resource() const noexcept { return *resource_; }

  /// @brief Whether the wrapped resources free each other's memory.
  [[nodiscard]] friend bool operator==(const cccl_resource& a, const cccl_resource& b) noexcept {
    return a.resource_->is_equal(*b.resource_);
  }

  /// @brief Declares each property in @p Properties (CCCL's stateless-property protocol).
  template <class P>
    requires(std::is_same_v<P, Properties> || ...)
  friend constexpr void get_property(const cccl_resource&, P) noexcept {}

 private:
  memory_resource* resource_;
};

/// @brief A `cuda::mr` resource of device-accessible memory: for @ref device_memory_resource and
/// @ref pool_memory_resource on a device pool (and any resource whose memory kernels can use).
using cccl_device_resource = cccl_resource<::cuda::mr::device_accessible>;
/// @brief A `cuda::mr` resource of memory both the host and devices access: for
/// @ref pinned_memory_resource, @ref managed_memory_resource and pools of host or managed memory.
using cccl_shared_resource = cccl_resource<::cuda::mr::device_accessible, ::cuda::mr::host_accessible>;

static_assert(::cuda::mr::resource_with<cccl_device_resource, ::cuda::mr::device_accessible>);
static_assert(::cuda::mr::async_resource_with<cccl_device_resource, ::cuda::mr::device_accessible>);
static_assert(!::cuda::mr::resource_with<cccl_device_resource, ::cuda::mr::host_accessible>);
static_assert(::cuda::mr::async_resource_with<cccl_shared_resource, ::cuda::mr::device_accessible,
                                              ::cuda::mr::host_accessible>);

}  // namespace cudrv
