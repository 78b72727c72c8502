/// @file builtin_memory_resources.hpp
/// @brief The memory resources cudrv builds in, each implementing the interface of
/// memory_resource.hpp (@ref cudrv::memory_resource): device memory (cuMemAlloc), pinned host memory
/// (cuMemHostAlloc), managed memory (cuMemAllocManaged) and memory from a pool of any kind
/// (cuMemAllocFromPoolAsync).
///
/// Layer: memory (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <cstddef>

#include "cudrv/context.hpp"
#include "cudrv/device.hpp"
#include "cudrv/managed_buffer.hpp"
#include "cudrv/memory_location.hpp"
#include "cudrv/memory_pool.hpp"
#include "cudrv/memory_resource.hpp"
#include "cudrv/pinned_buffer.hpp"
#include "cudrv/stream.hpp"

namespace cudrv {

namespace detail {
/// @brief What the resources that allocate in a context share (internal): the context, remembered with
/// its unique id so that memory freed after the context was destroyed is not freed again, and equality
/// (resources of the same type and context free each other's memory).
class context_memory_resource : public memory_resource {
 public:
  /// @brief The context the memory is allocated in.
  [[nodiscard]] context_ref context() const noexcept { return context_ref(context_.handle); }

 protected:
  /// @brief Allocates in @p ctx (not null).
  explicit context_memory_resource(CUcontext ctx) noexcept : context_(context_token::of(ctx)) {}
  /// @brief The context and its unique id.
  context_token context_;

 private:
  [[nodiscard]] bool do_is_equal(const memory_resource& other) const noexcept override;
};
}  // namespace detail

/// @brief Device memory allocated synchronously with cuMemAlloc in a context, freed with cuMemFree
/// (like `device_buffer(dev, n)`). Stream-ordered calls use the interface's defaults: allocation is
/// synchronous, and @ref memory_resource::deallocate_async waits for the stream before it frees. For
/// native stream-ordered device memory use a @ref pool_memory_resource on a device pool.
///
/// Alignments up to @ref max_alignment are honoured; larger ones are refused. Copyable: copies allocate
/// in the same context and are equal (each frees the other's memory). Memory that outlives its context
/// (a created context destroyed first) is not freed again; the destruction handler is told.
/// @code
/// cudrv::device_memory_resource mr(dev);               // dev's primary context
/// {
///   cudrv::resource_buffer buf(mr, 1 << 20);           // cuMemAlloc
///   cudrv::copy(buf.as<float>(), host_floats, s);
///   s.synchronize();
/// }                                                    // cuMemFree
/// @endcode
class device_memory_resource final : public detail::context_memory_resource {
 public:
  /// @brief The largest alignment this resource guarantees (cuMemAlloc's).
  static constexpr std::size_t max_alignment = 256;

  /// @brief Allocates in @p dev's primary context (retained once by cudrv for the process).
  explicit device_memory_resource(const device& dev);
  /// @brief Allocates in @p ctx, which must outlive the memory.
  explicit device_memory_resource(context_ref ctx);
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the temporary context would be destroyed before the memory.
  explicit device_memory_resource(cudrv::context&&) = delete;
  /// @brief Refused: the temporary reference would be released before the memory.
  explicit device_memory_resource(cudrv::primary_context&&) = delete;
  /// @}

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override;
  void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment) noexcept override;
  [[nodiscard]] memory_resource_properties do_properties() const noexcept override;

  int device_;
};

/// @brief Page-locked host memory allocated with cuMemHostAlloc in a context, freed with cuMemFreeHost
/// (like `pinned_buffer(dev, n)`): host-accessible, and device-accessible through unified addressing.
/// Stream-ordered calls use the interface's defaults (see @ref device_memory_resource). For
/// stream-ordered pinned memory use a @ref pool_memory_resource on a host pool.
/// @code
/// cudrv::pinned_memory_resource staging(dev);
/// cudrv::resource_buffer buf(staging, n * sizeof(float));
/// std::span<float> host = buf.as_host<float>();
/// host[0] = 1.0f;                                      // the host writes it directly
/// cudrv::copy(device_floats, std::as_const(buf).as<float>(), s);
/// @endcode
class pinned_memory_resource final : public detail::context_memory_resource {
 public:
  /// @brief The largest alignment this resource guarantees.
  static constexpr std::size_t max_alignment = 256;

  /// @brief Allocates with @p flags in @p dev's primary context.
  explicit pinned_memory_resource(const device& dev, pinned_flags flags = pinned_flags::portable);
  /// @brief Allocates with @p flags in @p ctx, which must outlive the memory.
  explicit pinned_memory_resource(context_ref ctx, pinned_flags flags = pinned_flags::portable);
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the temporary context would be destroyed before the memory.
  explicit pinned_memory_resource(cudrv::context&&, pinned_flags = pinned_flags::portable) = delete;
  /// @brief Refused: the temporary reference would be released before the memory.
  explicit pinned_memory_resource(cudrv::primary_context&&, pinned_flags = pinned_flags::portable) = delete;
  /// @}

  /// @brief The cuMemHostAlloc flags.
  [[nodiscard]] pinned_flags flags() const noexcept { return flags_; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override;
  void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment) noexcept override;
  [[nodiscard]] memory_resource_properties do_properties() const noexcept override;

  pinned_flags flags_;
};

/// @brief Managed memory allocated with cuMemAllocManaged in a context, freed with cuMemFree (like
/// `managed_buffer(dev, n)`): host- and device-accessible. Stream-ordered calls use the interface's
/// defaults (see @ref device_memory_resource). For stream-ordered managed memory use a
/// @ref pool_memory_resource on a managed pool (CUDA 13).
/// @code
/// cudrv::managed_memory_resource mr(dev);
/// cudrv::resource_buffer buf(mr, sizeof(int) * n);
/// buf.as_host<int>()[0] = 42;                          // host and kernels use the same memory
/// kernel_taking_ints(s, buf.as<int>());
/// @endcode
class managed_memory_resource final : public detail::context_memory_resource {
 public:
  /// @brief The largest alignment this resource guarantees.
  static constexpr std::size_t max_alignment = 256;

  /// @brief Allocates attached as @p attach in @p dev's primary context.
  explicit managed_memory_resource(const device& dev, managed_attach attach = managed_attach::global);
  /// @brief Allocates attached as @p attach in @p ctx, which must outlive the memory.
  explicit managed_memory_resource(context_ref ctx, managed_attach attach = managed_attach::global);
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the temporary context would be destroyed before the memory.
  explicit managed_memory_resource(cudrv::context&&, managed_attach = managed_attach::global) = delete;
  /// @brief Refused: the temporary reference would be released before the memory.
  explicit managed_memory_resource(cudrv::primary_context&&, managed_attach = managed_attach::global) = delete;
  /// @}

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override;
  void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment) noexcept override;
  [[nodiscard]] memory_resource_properties do_properties() const noexcept override;

  int device_;
  managed_attach attach_;
};

/// @brief Memory from a @ref memory_pool of any kind (device, pinned host, host NUMA, managed), allocated
/// natively stream-ordered: @ref memory_resource::allocate_async is cuMemAllocFromPoolAsync on the
/// stream, @ref memory_resource::deallocate_async cuMemFreeAsync on it.
///
/// Synchronous @ref memory_resource::allocate allocates on the resource's synchronisation stream and
/// waits for that stream (so the memory is usable by any stream or the host when it returns);
/// @ref memory_resource::deallocate queues cuMemFreeAsync on that stream without waiting (the caller
/// guarantees that no work uses the memory any more). The synchronisation stream is the one named to the
/// constructor, or by default the default stream of the pool's device (@ref device::default_stream, in
/// its primary context); pools of host memory, and managed pools with no preferred device, name no
/// device and need a stream.
///
/// The resource views the pool and the stream: both must outlive it (temporaries are refused).
/// Resources on the same pool are equal: each frees the other's memory.
/// @code
/// cudrv::memory_pool pool(dev);
/// cudrv::pool_memory_resource mr(pool);
/// {
///   cudrv::resource_buffer buf(mr, bytes, s);          // cuMemAllocFromPoolAsync on s
///   // ... kernels on s use buf.as<float>() ...
/// }                                                    // cuMemFreeAsync on s
/// @endcode
class pool_memory_resource final : public memory_resource {
 public:
  /// @brief The largest alignment this resource guarantees (that of pool allocations).
  static constexpr std::size_t max_alignment = 256;

  /// @brief Allocates from @p pool; synchronous calls use the default stream of the pool's device.
  /// @throws invalid_argument_error when @p pool is empty or not described, or names no device
  /// (a host pool, a managed pool with no preferred device: use the other constructor)
  explicit pool_memory_resource(memory_pool_ref pool);
  /// @brief Allocates from @p pool; synchronous calls use @p sync_stream, which must outlive the resource.
  /// @throws invalid_argument_error when @p pool is empty or not described, or @p sync_stream is a
  /// moved-from stream
  pool_memory_resource(memory_pool_ref pool, stream_ref sync_stream);
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the temporary pool would be destroyed before the resource.
  explicit pool_memory_resource(cudrv::memory_pool&&) = delete;
  /// @brief Refused: the temporary pool would be destroyed before the resource.
  pool_memory_resource(cudrv::memory_pool&&, stream_ref) = delete;
  /// @brief Refused: the temporary stream would be destroyed before the resource.
  pool_memory_resource(memory_pool_ref, cudrv::stream&&) = delete;
  /// @}

  /// @brief The pool memory comes from.
  [[nodiscard]] memory_pool_ref pool() const noexcept { return pool_; }
  /// @brief The stream synchronous allocations and frees are queued on.
  [[nodiscard]] stream_ref sync_stream() const noexcept { return sync_stream_; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override;
  void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment) noexcept override;
  void* do_allocate_async(std::size_t bytes, std::size_t alignment, stream_ref s) override;
  void do_deallocate_async(void* ptr, std::size_t bytes, std::size_t alignment, stream_ref s) noexcept override;
  [[nodiscard]] memory_resource_properties do_properties() const noexcept override;
  [[nodiscard]] bool do_is_equal(const memory_resource& other) const noexcept override;

  memory_pool_ref pool_;
  stream_ref sync_stream_;
  memory_properties properties_;
};

}  // namespace cudrv
