/// @file cccl.hpp
/// @brief Interop with CCCL (libcu++): conversions between @ref cudrv::stream_ref and
/// `cuda::stream_ref` (@ref cudrv::cccl_stream_ref converts implicitly to both), and
/// @ref cudrv::cccl_resource, which presents any @ref cudrv::memory_resource as a `cuda::mr` resource
/// (synchronous and stream-ordered) with the properties of its memory.
///
/// Opt-in (not included by <cudrv/cudrv.hpp>) and compiled only where CCCL's headers are found: the
/// CUDA toolkit ships them (CUDA 13: in `include/cccl`, which CMake's target `cudrv::cccl` adds to the
/// include path). `cuda::mr` is experimental in CCCL and needs
/// `LIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE` defined before the first CCCL header: this header
/// defines it when it is not, and `cudrv::cccl` defines it for the whole target (so that a CCCL
/// header included before this one sees it too).
///
/// Layer: memory (docs/design.md, "Source layers").
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

/// @brief The `cuda::stream_ref` naming the same stream as @p s: the handle as it is, never null (the
/// legacy default stream stays `CU_STREAM_LEGACY`, which the runtime accepts as `cudaStreamLegacy`).
/// @throws invalid_argument_error for the view of a moved-from @ref stream (its null handle would
/// name stream 0 on the CCCL side)
[[nodiscard]] inline ::cuda::stream_ref to_cccl(stream_ref s) {
  if (s.native_handle() == nullptr) {
    throw invalid_argument_error("cudrv::to_cccl", "the stream is empty (a moved-from or released cudrv::stream)");
  }
  return ::cuda::stream_ref(s.native_handle());
}

/// @brief The @ref stream_ref naming the same stream as @p s; the null handle (`cuda::stream_ref`'s
/// default, the runtime's stream 0) is the legacy default stream, the rule of @ref stream_ref for a
/// null `CUstream`. Code built with the runtime's per-thread default stream means the per-thread
/// stream by 0 and should pass `cudaStreamPerThread` instead.
[[nodiscard]] inline stream_ref from_cccl(::cuda::stream_ref s) noexcept { return stream_ref(s.get()); }

/// @brief A stream view that is both a `cuda::stream_ref` (it derives from it) and converts implicitly
/// to @ref stream_ref, made implicitly from either: the bridge that lets one variable be passed to
/// CCCL and to cudrv alike without a spelled-out conversion.
///
/// `cuda::stream_ref` cannot gain a constructor from cudrv's view, and <cudrv/stream.hpp> (the streams
/// layer) does not know CCCL, so the two views do not convert into each other directly; a
/// `cccl_stream_ref` made from either converts to both. The handle rules are those of @ref to_cccl
/// and @ref from_cccl : a null `cuda::stream_ref` becomes `CU_STREAM_LEGACY`, and the view of a
/// moved-from @ref stream is refused.
/// @code
/// cudrv::stream s(dev);
/// cudrv::cccl_stream_ref cs = s;                        // from the owner, or from any stream_ref
/// void* p = ref.allocate_async(bytes, 256, cs);         // a cuda::stream_ref for CCCL
/// cudrv::copy(dst, src, cs);                            // a cudrv::stream_ref for cudrv
/// @endcode
class cccl_stream_ref : public ::cuda::stream_ref {
 public:
  /// @brief Views the stream @p s views.
  /// @throws invalid_argument_error when @p s views a moved-from @ref stream
  cccl_stream_ref(cudrv::stream_ref s) : ::cuda::stream_ref(to_cccl(s)) {}  // NOLINT: implicit on purpose
  /// @brief Views the stream @p s owns.
  /// @throws invalid_argument_error when @p s is moved-from
  cccl_stream_ref(const stream& s) : cccl_stream_ref(cudrv::stream_ref(s)) {}  // NOLINT: implicit on purpose
  /// @brief Views the stream @p s names; null is the legacy default stream.
  cccl_stream_ref(::cuda::stream_ref s) noexcept  // NOLINT: implicit on purpose
      : ::cuda::stream_ref(from_cccl(s).native_handle()) {}
  /// @brief cudrv's view of the same stream.
  operator cudrv::stream_ref() const noexcept { return cudrv::stream_ref(get()); }  // NOLINT: implicit on purpose
};

namespace detail {
/// @brief Whether @p P is one of the two `cuda::mr` properties @ref cccl_resource supports (internal).
template <class P>
inline constexpr bool cccl_memory_property =
    std::is_same_v<P, ::cuda::mr::device_accessible> || std::is_same_v<P, ::cuda::mr::host_accessible>;
}  // namespace detail

/// @brief A `cuda::mr` resource over a cudrv @ref memory_resource : satisfies `cuda::mr::resource` and
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
/// void* p = ref.allocate_async(bytes, 256, cudrv::to_cccl(s));             // cuMemAllocFromPoolAsync
/// ref.deallocate_async(p, bytes, 256, cudrv::to_cccl(s));                  // cuMemFreeAsync
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
    const bool device_ok =
        !(std::is_same_v<Properties, ::cuda::mr::device_accessible> || ...) || props.device_accessible;
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
    return resource_->allocate_async(bytes, alignment, from_cccl(s));
  }
  /// @brief As the other overload, with @ref memory_resource::default_alignment.
  [[nodiscard]] void* allocate_async(std::size_t bytes, ::cuda::stream_ref s) {
    return allocate_async(bytes, memory_resource::default_alignment, s);
  }
  /// @brief @ref memory_resource::deallocate_async on the stream @p s names.
  void deallocate_async(void* ptr, std::size_t bytes, std::size_t alignment, ::cuda::stream_ref s) noexcept {
    resource_->deallocate_async(ptr, bytes, alignment, from_cccl(s));
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
  requires(std::is_same_v<P, Properties> || ...) friend constexpr void get_property(const cccl_resource&, P) noexcept {}

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
static_assert(
    ::cuda::mr::async_resource_with<cccl_shared_resource, ::cuda::mr::device_accessible, ::cuda::mr::host_accessible>);

}  // namespace cudrv
