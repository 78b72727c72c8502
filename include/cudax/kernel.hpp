/// @file kernel.hpp
/// @brief Kernels: non-owning views of a `CUkernel` with attributes, occupancy and parameter
/// information (@ref cudax::kernel_ref), and their typed form (@ref cudax::typed_kernel_ref).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cudax/device.hpp"
#include "cudax/launch_config.hpp"

namespace cudax {

class library_ref;
template <class Signature>
class typed_kernel_ref;

namespace detail {
/// @brief One kernel parameter as the driver describes it (internal).
struct kernel_param {
  std::size_t offset;  ///< Byte offset in the parameter buffer.
  std::size_t size;    ///< Size in bytes.
};
/// @brief What a library caches about one of its kernels (internal): immutable once published.
struct kernel_signature {
  std::string name;                 ///< The kernel's (mangled) name.
  bool parameters_known = false;    ///< Whether the driver described the parameters (CUDA 12.4+).
  std::vector<kernel_param> params; ///< The parameters, when known.
  std::string unknown_reason;       ///< Why the parameters are unknown.
  bool permanently_unknown = false; ///< Unknown because the headers or the driver predate CUDA 12.4.
};
/// @brief Checks an untyped launch's argument sizes against the kernel (internal; the slow path
/// queries the driver when no cached signature is at hand).
void check_arguments_slow(CUkernel kernel, const kernel_signature* signature, const std::size_t* sizes,
                          std::size_t count);
/// @brief Suggests a block size with a per-block-size shared-memory function (internal).
std::pair<int, int> suggest_block_size(CUkernel kernel, CUdevice device,
                                       std::size_t (*fn)(void* data, int block_size), void* data,
                                       std::size_t fixed_shared, int block_size_limit);
}  // namespace detail

/// @brief One kernel parameter: its position, byte offset in the parameter buffer and size.
struct kernel_parameter {
  std::size_t index;   ///< Position in the parameter list, from 0.
  std::size_t offset;  ///< Byte offset in the kernel's parameter buffer.
  std::size_t size;    ///< Size in bytes.
};

/// @brief Every attribute the driver reports for a kernel on one device (`cuKernelGetAttribute`).
struct kernel_attributes {
  int max_threads_per_block;          ///< The most threads per block a launch may use (registers and shared memory included).
  int shared_size_bytes;              ///< Static shared memory per block, in bytes.
  int const_size_bytes;               ///< Constant memory used, in bytes.
  int local_size_bytes;               ///< Local memory per thread, in bytes.
  int num_regs;                       ///< Registers per thread.
  int ptx_version;                    ///< PTX ISA version the kernel was compiled for (major * 10 + minor).
  int binary_version;                 ///< Architecture of the binary (major * 10 + minor).
  int cache_mode_ca;                  ///< 1 when compiled with `-Xptxas --dlcm=ca`.
  int max_dynamic_shared_size_bytes;  ///< The dynamic shared memory a launch may use (see @ref kernel_ref::set_max_dynamic_shared_memory).
  int preferred_shared_memory_carveout;  ///< Preferred L1/shared split, in percent of the maximum shared memory (-1: no preference).
  int cluster_size_must_be_set;       ///< 1 when the kernel must be launched with a cluster.
  int required_cluster_width;         ///< Compile-time cluster width (0: none).
  int required_cluster_height;        ///< Compile-time cluster height (0: none).
  int required_cluster_depth;         ///< Compile-time cluster depth (0: none).
  int non_portable_cluster_size_allowed;  ///< 1 when clusters above the portable size 8 are allowed.
  int cluster_scheduling_policy_preference;  ///< A `CUclusterSchedulingPolicy` value.
};

/// @brief The occupancy calculator's suggestion: the block size that maximises occupancy and the
/// smallest grid that fills the device at that size.
struct block_size_suggestion {
  int min_grid_size;  ///< Blocks needed to reach full occupancy on the whole device.
  int block_size;     ///< Threads per block.
};

/// @brief A non-owning view of a context-independent kernel (`CUkernel`).
///
/// Get one from a @ref library (which owns it, with its parameter layout cached so that untyped
/// launches are checked at no cost), from @ref get_kernel for a `__global__` function compiled by nvcc
/// in this program, or adopt a handle with @ref from_native_handle. Device-specific queries take the
/// device; occupancy queries run in the device's primary context. A kernel_ref is valid while the
/// library that contains it is loaded.
///
/// @code
/// cudax::library lib(cudax::object_code::from_file("saxpy.cubin"));
/// cudax::kernel_ref k = lib.get_kernel("saxpy");
/// cudax::device dev(0);
/// auto attrs = k.attributes(dev);                 // registers, shared sizes, max threads...
/// auto best = k.suggested_block_size(dev);        // {min_grid_size, block_size}
/// cudax::launch(stream, {.grid = best.min_grid_size, .block = best.block_size}, k, 2.0f, x, y, n);
/// @endcode
class kernel_ref {
 public:
  /// @brief Views a `CUkernel` the caller keeps loaded. Untyped launches of such a view are checked
  /// by asking the driver for the parameter layout on every launch; prefer kernels from a
  /// @ref library, whose layouts are cached.
  [[nodiscard]] static kernel_ref from_native_handle(CUkernel handle) noexcept { return kernel_ref(handle, nullptr); }
  kernel_ref(std::nullptr_t) = delete;

  /// @brief The `CUkernel` handle.
  [[nodiscard]] CUkernel native_handle() const noexcept { return handle_; }
  /// @brief The handle as the `CUfunction` that `cuLaunchKernel` accepts for a `CUkernel`.
  [[nodiscard]] CUfunction native_function() const noexcept { return reinterpret_cast<CUfunction>(handle_); }
  /// @brief The kernel's `CUfunction` in a context (`cuKernelGetFunction`), for APIs that need one.
  [[nodiscard]] CUfunction function(context_ref ctx) const;

  /// @brief The kernel's name as in the image (mangled for C++ kernels without `extern "C"`).
  [[nodiscard]] std::string name() const;

  /// @brief All attributes on @p dev.
  [[nodiscard]] kernel_attributes attributes(const device& dev) const;
  /// @brief One attribute on @p dev (`cuKernelGetAttribute`).
  [[nodiscard]] int attribute(CUfunction_attribute attr, const device& dev) const;
  /// @brief Sets one attribute on @p dev (`cuKernelSetAttribute`).
  void set_attribute(CUfunction_attribute attr, int value, const device& dev) const;
  /// @brief Allows launches on @p dev with up to @p bytes of dynamic shared memory (needed above
  /// 48 KiB). @throws invalid_argument_error above what the device allows (the opt-in maximum minus
  /// the kernel's static shared memory), with both numbers.
  void set_max_dynamic_shared_memory(const device& dev, std::size_t bytes) const;
  /// @brief Sets the preferred shared-memory carveout on @p dev, in percent (0-100) of the maximum
  /// shared memory, or -1 for no preference.
  void set_preferred_shared_memory_carveout(const device& dev, int percent) const;
  /// @brief Allows cluster sizes above the portable maximum of 8 blocks on @p dev.
  void set_non_portable_cluster_size_allowed(const device& dev, bool allowed) const;
  /// @brief Sets the cluster scheduling policy preference on @p dev.
  void set_cluster_scheduling_policy(const device& dev, CUclusterSchedulingPolicy policy) const;
  /// @brief Sets the L1/shared cache preference on @p dev (`cuKernelSetCacheConfig`).
  void set_cache_config(const device& dev, CUfunc_cache config) const;

  /// @brief Blocks of @p block_size threads that fit on one SM of @p dev at once.
  [[nodiscard]] int max_active_blocks_per_multiprocessor(const device& dev, int block_size,
                                                         std::size_t dynamic_shared_memory = 0) const;
  /// @brief The block size with the highest occupancy on @p dev, for a fixed dynamic shared memory.
  /// @param dev the device
  /// @param dynamic_shared_memory bytes of dynamic shared memory per block
  /// @param block_size_limit the largest block size to consider (0: no limit)
  [[nodiscard]] block_size_suggestion suggested_block_size(const device& dev, std::size_t dynamic_shared_memory = 0,
                                                           int block_size_limit = 0) const;
  /// @brief The block size with the highest occupancy on @p dev, when dynamic shared memory depends
  /// on the block size.
  ///
  /// @code
  /// // one float of shared memory per thread
  /// auto s = k.suggested_block_size(dev, [](int threads) { return threads * sizeof(float); });
  /// @endcode
  /// @param dev the device
  /// @param shared_memory_for `std::size_t(int block_size)`: bytes of dynamic shared memory for a block size;
  ///   an exception it throws is rethrown
  /// @param block_size_limit the largest block size to consider (0: no limit)
  template <class F>
    requires std::is_invocable_r_v<std::size_t, F&, int>
  [[nodiscard]] block_size_suggestion suggested_block_size(const device& dev, F&& shared_memory_for,
                                                           int block_size_limit = 0) const {
    // A local, non-const wrapper: works for const callables and plain functions alike.
    auto call = [&shared_memory_for](int block_size) -> std::size_t {
      return static_cast<std::size_t>(shared_memory_for(block_size));
    };
    auto [grid, block] = detail::suggest_block_size(
        handle_, dev.native_handle(),
        [](void* data, int block_size) -> std::size_t { return (*static_cast<decltype(call)*>(data))(block_size); },
        static_cast<void*>(&call), 0, block_size_limit);
    return {grid, block};
  }
  /// @brief Dynamic shared memory per block left when @p blocks_per_multiprocessor blocks of
  /// @p block_size threads share an SM of @p dev.
  [[nodiscard]] std::size_t available_dynamic_shared_memory(const device& dev, int blocks_per_multiprocessor,
                                                            int block_size) const;
  /// @brief The largest cluster size @p config could use on @p dev (its `cluster` is ignored).
  [[nodiscard]] int max_potential_cluster_size(const device& dev, const launch_config& config) const;
  /// @brief Clusters of @p config's size that can be co-resident on @p dev.
  [[nodiscard]] int max_active_clusters(const device& dev, const launch_config& config) const;

  /// @brief The number of parameters (`cuKernelGetParamInfo`, CUDA 12.4+).
  /// @throws not_supported_error with an older toolkit or driver
  [[nodiscard]] std::size_t parameter_count() const;
  /// @brief Offset and size of every parameter (CUDA 12.4+).
  [[nodiscard]] std::vector<kernel_parameter> parameters() const;

  /// @brief A typed view of this kernel, after checking that the parameter sizes of @p Signature
  /// match the kernel's (when the driver can tell: CUDA 12.4+).
  /// @throws invalid_argument_error naming the kernel, the parameter index and both sizes
  template <class Signature>
  [[nodiscard]] typed_kernel_ref<Signature> as() const;

  /// @brief The cached layout, if any (internal).
  [[nodiscard]] const detail::kernel_signature* cached_signature() const noexcept { return signature_; }

  /// @brief Same handle.
  friend bool operator==(const kernel_ref& a, const kernel_ref& b) noexcept { return a.handle_ == b.handle_; }

 protected:
  /// @brief For @ref library_ref and @ref typed_kernel_ref.
  kernel_ref(CUkernel handle, const detail::kernel_signature* signature) noexcept
      : handle_(handle), signature_(signature) {}
  /// @brief Throws when the sizes do not match the kernel's parameters (internal).
  void check_signature(const std::size_t* sizes, std::size_t count) const;

  CUkernel handle_;                             ///< The kernel.
  const detail::kernel_signature* signature_;  ///< Cached parameter layout, owned by a library; may be null.

  friend class library_ref;
};

/// @brief A kernel whose parameter types are known at compile time: launches convert the arguments
/// to the parameter types and refuse a wrong count or an inconvertible argument at compile time.
///
/// @code
/// auto saxpy = lib.get_kernel<void(float, const float*, float*, std::size_t)>("saxpy");
/// cudax::launch(stream, config, saxpy, 2.0f, x.get(), y.get(), n);   // checked at compile time
/// // cudax::launch(stream, config, saxpy, 2.0f, x.get());            // error: argument count
/// @endcode
/// @tparam Signature `void(Params...)`
template <class Signature>
class typed_kernel_ref;

/// @brief See @ref typed_kernel_ref.
template <class... Params>
class typed_kernel_ref<void(Params...)> : public kernel_ref {
  static_assert((std::is_trivially_copyable_v<Params> && ...),
                "kernel parameters must be trivially copyable (no references, no owning types)");

 public:
  /// @brief Views a `CUkernel` whose parameters the caller vouches for (not checked).
  [[nodiscard]] static typed_kernel_ref from_native_handle(CUkernel handle) noexcept {
    return typed_kernel_ref(kernel_ref::from_native_handle(handle));
  }
  /// @brief The number of parameters.
  static constexpr std::size_t arity = sizeof...(Params);

 private:
  explicit typed_kernel_ref(const kernel_ref& k) noexcept : kernel_ref(k) {}
  friend class kernel_ref;
  friend class library_ref;
};

template <class Signature>
typed_kernel_ref<Signature> kernel_ref::as() const {
  return [this]<class... Params>(std::type_identity<void(Params...)>) {
    if constexpr (sizeof...(Params) == 0) {
      check_signature(nullptr, 0);
    } else {
      static constexpr std::size_t sizes[] = {sizeof(Params)...};
      check_signature(sizes, sizeof...(Params));
    }
    return typed_kernel_ref<void(Params...)>(*this);
  }(std::type_identity<Signature>{});
}

}  // namespace cudax
