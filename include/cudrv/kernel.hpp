/// @file kernel.hpp
/// @brief Kernels: non-owning views of a `CUkernel` with attributes, occupancy and parameter
/// information (@ref cudrv::kernel_ref), and their typed form (@ref cudrv::typed_kernel_ref).
///
/// Layer: code (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cudrv/detail/exchange.hpp"
#include "cudrv/device.hpp"
#include "cudrv/launch_config.hpp"

namespace cudrv {

class kernel_ref;
template <class Signature>
class typed_kernel_ref;
template <class Signature>
class typed_kernel;

namespace detail {
/// @brief One kernel parameter as the driver describes it (internal).
struct kernel_param {
  std::size_t offset;  ///< Byte offset in the parameter buffer.
  std::size_t size;    ///< Size in bytes.
};
struct library_state;
/// @brief What a library caches about one of its kernels (internal): immutable once published, owned
/// by the library's state, which lives as long as the library or any kernel taken from it.
struct kernel_signature {
  std::string name;                  ///< The kernel's (mangled) name.
  bool parameters_known = false;     ///< Whether the layout is known (from the image or the driver).
  std::vector<kernel_param> params;  ///< The parameters, when known.
  std::string unknown_reason;        ///< Why the parameters are unknown.
  library_state* library = nullptr;  ///< The library whose state owns this signature.
};
/// @brief Takes a counted reference on a library's state, which keeps the library loaded (internal;
/// null is ignored).
void retain_library(library_state* state) noexcept;
/// @brief Drops a reference taken with @ref retain_library; the last one unloads the library (internal).
void release_library(library_state* state) noexcept;
/// @brief Where an unchecked launch can ask the driver for a kernel's parameters (internal): the
/// context of the stream, or the given context.
struct query_target {
  CUstream stream = nullptr;    ///< The launch's stream (its context is used), or null.
  CUcontext context = nullptr;  ///< The context to use when there is no stream.
};
/// @brief Checks an untyped launch's argument sizes against the kernel when no layout is cached
/// (internal): asks the driver in the target's context.
void check_arguments_slow(CUkernel kernel, const kernel_signature* signature, const std::size_t* sizes,
                          std::size_t count, query_target target);
/// @brief Throws the launch_error of an untyped launch given @p given arguments where the kernel takes
/// @p expected (internal).
[[noreturn]] void throw_argument_count(CUkernel kernel, const kernel_signature* signature, std::size_t expected,
                                       std::size_t given);
/// @brief Throws the launch_error of an untyped launch whose argument @p index has @p given bytes where
/// the kernel's parameter has @p expected (internal).
[[noreturn]] void throw_argument_size(CUkernel kernel, const kernel_signature* signature, std::size_t index,
                                      std::size_t expected, std::size_t given);
/// @brief Suggests a block size with a per-block-size shared-memory function (internal).
std::pair<int, int> suggest_block_size(CUkernel kernel, CUdevice device, std::size_t (*fn)(void* data, int block_size),
                                       void* data, std::size_t fixed_shared, int block_size_limit);
/// @brief The parameter types of a typed kernel signature (internal).
template <class Signature>
struct signature_parameters;
/// @brief See @ref signature_parameters.
template <class... Params>
struct signature_parameters<void(Params...)> {
  /// @brief The parameter sizes, in order (one element for an empty list, never read then).
  static constexpr std::size_t sizes[sizeof...(Params) == 0 ? 1 : sizeof...(Params)] = {sizeof(Params)...};
};
}  // namespace detail

/// @brief One kernel parameter: its position, byte offset in the parameter buffer and size.
struct kernel_parameter {
  std::size_t index;   ///< Position in the parameter list, from 0.
  std::size_t offset;  ///< Byte offset in the kernel's parameter buffer.
  std::size_t size;    ///< Size in bytes.
};

/// @brief Every attribute the driver reports for a kernel on one device (`cuKernelGetAttribute`).
struct kernel_attributes {
  int max_threads_per_block;  ///< The most threads per block a launch may use (registers and shared memory included).
  int shared_size_bytes;      ///< Static shared memory per block, in bytes.
  int const_size_bytes;       ///< Constant memory used, in bytes.
  int local_size_bytes;       ///< Local memory per thread, in bytes.
  int num_regs;               ///< Registers per thread.
  int ptx_version;            ///< PTX ISA version the kernel was compiled for (major * 10 + minor).
  int binary_version;         ///< Architecture of the binary (major * 10 + minor).
  int cache_mode_ca;          ///< 1 when compiled with `-Xptxas --dlcm=ca`.
  int max_dynamic_shared_size_bytes;     ///< The dynamic shared memory a launch may use (see @ref
                                         ///< kernel_ref::set_max_dynamic_shared_memory).
  int preferred_shared_memory_carveout;  ///< Preferred L1/shared split, in percent of the maximum shared memory (-1: no
                                         ///< preference).
  int cluster_size_must_be_set;          ///< 1 when the kernel must be launched with a cluster.
  int required_cluster_width;            ///< Compile-time cluster width (0: none).
  int required_cluster_height;           ///< Compile-time cluster height (0: none).
  int required_cluster_depth;            ///< Compile-time cluster depth (0: none).
  int non_portable_cluster_size_allowed;     ///< 1 when clusters above the portable size 8 are allowed.
  int cluster_scheduling_policy_preference;  ///< A `CUclusterSchedulingPolicy` value.
};

/// @brief The occupancy calculator's suggestion: the block size that maximises occupancy and the
/// smallest grid that fills the device at that size.
struct block_size_suggestion {
  int min_grid_size;  ///< Blocks needed to reach full occupancy on the whole device.
  int block_size;     ///< Threads per block.
};

/// @brief The operations every kernel handle offers, shared by the views (@ref cudrv::kernel_ref,
/// @ref cudrv::typed_kernel_ref) and the owners (@ref cudrv::kernel, @ref cudrv::typed_kernel) of a
/// context-independent kernel (`CUkernel`). Not constructible or assignable on its own.
///
/// Device-specific queries take the device; occupancy queries run in the device's primary context.
class kernel_base {
 public:
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
  /// @brief The largest cluster size @p config could use on @p dev (its `cluster` is ignored; of its other
  /// launch attributes, those that shape residency reach the driver: cooperative, priority, programmatic
  /// stream serialization, cluster scheduling policy, shared-memory carveout).
  [[nodiscard]] int max_potential_cluster_size(const device& dev, const launch_config& config) const;
  /// @brief Clusters of @p config's size that can be co-resident on @p dev (with those of @p config's
  /// launch attributes that shape residency, as for @ref max_potential_cluster_size).
  [[nodiscard]] int max_active_clusters(const device& dev, const launch_config& config) const;

  /// @brief The number of parameters: from the layout cached when the kernel was taken from a
  /// @ref library (read from the image), else from the driver (`cuKernelGetParamInfo`, CUDA 12.4+) in
  /// the current context.
  /// @throws not_supported_error when neither can tell (an older driver, or no context current for an
  ///   adopted kernel), with the reason
  [[nodiscard]] std::size_t parameter_count() const;
  /// @brief Offset and size of every parameter (see @ref parameter_count for where they come from).
  [[nodiscard]] std::vector<kernel_parameter> parameters() const;

  /// @brief A typed view of this kernel, after checking that the parameter sizes of @p Signature
  /// match the kernel's (when known: from the image, or from the driver with CUDA 12.4+).
  /// @throws invalid_argument_error naming the kernel, the parameter index and both sizes
  template <class Signature>
  [[nodiscard]] typed_kernel_ref<Signature> as() const&;

  /// @brief The cached layout, if any (internal).
  [[nodiscard]] const detail::kernel_signature* cached_signature() const noexcept { return signature_; }

  /// @brief Same kernel (views and owners alike).
  friend bool operator==(const kernel_base& a, const kernel_base& b) noexcept { return a.handle_ == b.handle_; }

 protected:
  /// @brief Holds @p handle and its cached layout @p signature.
  kernel_base(CUkernel handle, const detail::kernel_signature* signature) noexcept
      : handle_(handle), signature_(signature) {}
  /// @brief Copies the handle (for the views).
  kernel_base(const kernel_base&) noexcept = default;
  /// @brief Copies the handle (for the views).
  kernel_base& operator=(const kernel_base&) noexcept = default;
  ~kernel_base() = default;
  /// @brief Throws when the sizes do not match the kernel's parameters (internal).
  void check_signature(const std::size_t* sizes, std::size_t count) const;
  /// @brief Throws @ref invalid_argument_error for an empty (moved-from) owner.
  void require_handle(const char* api) const;

  CUkernel handle_;                            ///< The kernel.
  const detail::kernel_signature* signature_;  ///< Cached parameter layout, owned by a library; may be null.
};

/// @brief A non-owning view of a kernel. Trivially copyable; valid while the @ref kernel (or
/// @ref library) it was taken from lives.
///
/// Take views from an owning @ref kernel (`cudrv::kernel_ref k = owner;`); a view of a temporary
/// kernel does not compile (`cudrv::kernel_ref k = lib.get_kernel("x");`), because the temporary
/// would be gone, its library perhaps unloaded, at the end of the statement.
///
/// @code
/// cudrv::library lib(cudrv::object_code::from_file("saxpy.cubin"));
/// cudrv::kernel k = lib.get_kernel("saxpy");       // owning: keeps the library loaded
/// cudrv::device dev(0);
/// auto attrs = k.attributes(dev);                 // registers, shared sizes, max threads...
/// auto best = k.suggested_block_size(dev);        // {min_grid_size, block_size}
/// cudrv::launch(stream, {.grid = best.min_grid_size, .block = best.block_size}, k, 2.0f, x, y, n);
/// @endcode
class kernel_ref : public kernel_base {
 public:
  /// @brief Views a `CUkernel` the caller keeps loaded. Untyped launches of such a view are checked
  /// by asking the driver for the parameter layout on every launch; prefer kernels from a
  /// @ref library, whose layouts are cached.
  [[nodiscard]] static kernel_ref from_native_handle(CUkernel handle) noexcept { return kernel_ref(handle, nullptr); }
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  kernel_ref(std::nullptr_t) = delete;
  /// @}
  /// @brief Views the same kernel as @p other.
  kernel_ref(const kernel_ref& other) noexcept = default;
  /// @brief Views the kernel @p other views.
  kernel_ref& operator=(const kernel_ref& other) noexcept = default;

 private:
  kernel_ref(CUkernel handle, const detail::kernel_signature* signature) noexcept : kernel_base(handle, signature) {}
  friend class kernel_base;
  friend class kernel;
  template <class>
  friend class typed_kernel_ref;
  template <class>
  friend class typed_kernel;
};

/// @brief A kernel whose parameter types are known at compile time: launches convert the arguments
/// to the parameter types and refuse a wrong count or an inconvertible argument at compile time.
///
/// A view (valid while the @ref typed_kernel it was taken from lives); it converts to
/// @ref kernel_ref.
/// @code
/// auto saxpy = lib.get_kernel<void(float, const float*, float*, std::size_t)>("saxpy");
/// cudrv::launch(stream, config, saxpy, 2.0f, x.get(), y.get(), n);   // checked at compile time
/// // cudrv::launch(stream, config, saxpy, 2.0f, x.get());            // error: argument count
/// @endcode
/// @tparam Signature `void(Params...)`
template <class Signature>
class typed_kernel_ref;

/// @brief See @ref typed_kernel_ref.
template <class... Params>
class typed_kernel_ref<void(Params...)> : public kernel_base {
  static_assert((std::is_trivially_copyable_v<Params> && ...),
                "kernel parameters must be trivially copyable (no references, no owning types)");

 public:
  /// @brief The signature, `void(Params...)`.
  using signature_type = void(Params...);
  /// @brief Views a `CUkernel` whose parameters the caller vouches for (not checked).
  [[nodiscard]] static typed_kernel_ref from_native_handle(CUkernel handle) noexcept {
    return typed_kernel_ref(handle, nullptr);
  }
  /// @brief Views the same kernel as @p other.
  typed_kernel_ref(const typed_kernel_ref& other) noexcept = default;
  /// @brief Views the kernel @p other views.
  typed_kernel_ref& operator=(const typed_kernel_ref& other) noexcept = default;
  /// @brief The untyped view.
  operator kernel_ref() const noexcept { return kernel_ref(handle_, signature_); }  // NOLINT: implicit on purpose
  /// @brief The number of parameters.
  static constexpr std::size_t arity = sizeof...(Params);

 private:
  typed_kernel_ref(CUkernel handle, const detail::kernel_signature* signature) noexcept
      : kernel_base(handle, signature) {}
  friend class kernel_base;
  template <class>
  friend class typed_kernel;
};

namespace detail {
/// @brief The reference a kernel owner holds on its library's state (internal): move-only.
class library_hold {
 public:
  library_hold() noexcept = default;
  explicit library_hold(library_state* state) noexcept : state_(state) { retain_library(state_); }
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  library_hold(const library_hold&) = delete;
  library_hold& operator=(const library_hold&) = delete;
  /// @}
  library_hold(library_hold&& other) noexcept : state_(other.state_) { other.state_ = nullptr; }
  library_hold& operator=(library_hold&& other) noexcept {
    if (this != &other) {
      release_library(state_);
      state_ = other.state_;
      other.state_ = nullptr;
    }
    return *this;
  }
  ~library_hold() { release_library(state_); }
  void reset() noexcept {
    release_library(state_);
    state_ = nullptr;
  }
  [[nodiscard]] library_state* get() const noexcept { return state_; }

 private:
  library_state* state_ = nullptr;
};
}  // namespace detail

/// @brief A kernel that keeps its library loaded, as cuda.core's `Kernel` keeps its `ObjectCode`:
/// what @ref library_base::get_kernel returns. Move-only; converts to @ref kernel_ref.
///
/// Obtaining it takes one reference on the library (an atomic increment); launching costs nothing
/// more than launching a view. The library's code stays loaded until the library object and every
/// kernel taken from it are gone, whatever order they are destroyed in.
/// @code
/// cudrv::kernel k = cudrv::library(code).get_kernel("scale");   // the temporary library stays loaded
/// cudrv::launch(stream, {.grid = 4, .block = 256}, k, data.get(), 2.0f, n);
/// @endcode
class kernel : public kernel_base {
 public:
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  kernel(const kernel&) = delete;
  kernel& operator=(const kernel&) = delete;
  /// @}
  /// @brief Takes over @p other's kernel and library reference; @p other becomes empty.
  kernel(kernel&& other) noexcept
      : kernel_base(cudrv::detail::exchange(other.handle_, nullptr),
                    cudrv::detail::exchange(other.signature_, nullptr)),
        hold_(std::move(other.hold_)) {}
  /// @brief Drops the held reference, then takes over @p other's.
  kernel& operator=(kernel&& other) noexcept {
    if (this != &other) {
      handle_ = cudrv::detail::exchange(other.handle_, nullptr);
      signature_ = cudrv::detail::exchange(other.signature_, nullptr);
      hold_ = std::move(other.hold_);
    }
    return *this;
  }
  /// @brief Drops the reference on the library (the last one unloads it).
  ~kernel() = default;

  /// @brief Drops the reference now; the object becomes empty.
  void reset() noexcept {
    handle_ = nullptr;
    signature_ = nullptr;
    hold_.reset();
  }
  /// @brief Whether this object holds a kernel (false after a move or @ref reset).
  [[nodiscard]] explicit operator bool() const noexcept { return handle_ != nullptr; }
  /// @brief A view, valid while this kernel lives.
  operator kernel_ref() const& noexcept { return kernel_ref(handle_, signature_); }  // NOLINT: implicit on purpose
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the view of a temporary kernel would outlive it (and perhaps its library).
  operator kernel_ref() const&& = delete;
  /// @}
  /// @brief A typed view, valid while this kernel lives (see @ref kernel_base::as).
  using kernel_base::as;
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the typed view of a temporary kernel would outlive it (and perhaps its library);
  /// use @ref as_owned.
  template <class Signature>
  typed_kernel_ref<Signature> as() const&& = delete;
  /// @}
  /// @brief A typed owner of the same kernel (another reference on the library), after the checks of
  /// @ref kernel_base::as.
  template <class Signature>
  [[nodiscard]] typed_kernel<Signature> as_owned() const;

 private:
  friend class library_base;
  kernel(CUkernel handle, const detail::kernel_signature* signature, detail::library_state* library) noexcept
      : kernel_base(handle, signature), hold_(library) {}
  detail::library_hold hold_;
};

/// @brief A typed kernel that keeps its library loaded: what `get_kernel<Signature>` returns.
/// Move-only; converts to @ref typed_kernel_ref and @ref kernel_ref.
/// @tparam Signature `void(Params...)`
template <class Signature>
class typed_kernel;

/// @brief See @ref typed_kernel.
template <class... Params>
class typed_kernel<void(Params...)> : public kernel_base {
 public:
  /// @brief The signature, `void(Params...)`.
  using signature_type = void(Params...);
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  typed_kernel(const typed_kernel&) = delete;
  typed_kernel& operator=(const typed_kernel&) = delete;
  /// @}
  /// @brief Takes over @p other's kernel and library reference; @p other becomes empty.
  typed_kernel(typed_kernel&& other) noexcept
      : kernel_base(cudrv::detail::exchange(other.handle_, nullptr),
                    cudrv::detail::exchange(other.signature_, nullptr)),
        hold_(std::move(other.hold_)) {}
  /// @brief Drops the held reference, then takes over @p other's.
  typed_kernel& operator=(typed_kernel&& other) noexcept {
    if (this != &other) {
      handle_ = cudrv::detail::exchange(other.handle_, nullptr);
      signature_ = cudrv::detail::exchange(other.signature_, nullptr);
      hold_ = std::move(other.hold_);
    }
    return *this;
  }
  /// @brief Drops the reference on the library (the last one unloads it).
  ~typed_kernel() = default;

  /// @brief Drops the reference now; the object becomes empty.
  void reset() noexcept {
    handle_ = nullptr;
    signature_ = nullptr;
    hold_.reset();
  }
  /// @brief Whether this object holds a kernel (false after a move or @ref reset).
  [[nodiscard]] explicit operator bool() const noexcept { return handle_ != nullptr; }
  /// @brief A typed view, valid while this kernel lives.
  operator typed_kernel_ref<void(Params...)>() const& noexcept {  // NOLINT: implicit on purpose
    return typed_kernel_ref<void(Params...)>(handle_, signature_);
  }
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the view of a temporary kernel would outlive it.
  operator typed_kernel_ref<void(Params...)>() const&& = delete;
  /// @}
  /// @brief An untyped view, valid while this kernel lives.
  operator kernel_ref() const& noexcept { return kernel_ref(handle_, signature_); }  // NOLINT: implicit on purpose
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the view of a temporary kernel would outlive it.
  operator kernel_ref() const&& = delete;
  /// @}
  /// @brief A typed view, valid while this kernel lives (see @ref kernel_base::as).
  using kernel_base::as;
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the typed view of a temporary kernel would outlive it (and perhaps its library).
  template <class Signature>
  typed_kernel_ref<Signature> as() const&& = delete;
  /// @}
  /// @brief The number of parameters.
  static constexpr std::size_t arity = sizeof...(Params);

 private:
  friend class kernel;
  friend class library_base;
  typed_kernel(CUkernel handle, const detail::kernel_signature* signature, detail::library_state* library) noexcept
      : kernel_base(handle, signature), hold_(library) {}
  detail::library_hold hold_;
};

/// @cond
template <class Signature>
typed_kernel_ref<Signature> kernel_base::as() const& {
  using params = detail::signature_parameters<Signature>;
  check_signature(params::sizes, typed_kernel_ref<Signature>::arity);
  return typed_kernel_ref<Signature>(handle_, signature_);
}
/// @endcond

template <class Signature>
typed_kernel<Signature> kernel::as_owned() const {
  (void)as<Signature>();  // the checks
  return typed_kernel<Signature>(handle_, signature_, hold_.get());
}

/// @brief Whether `K` is one of the kernel handles (`kernel_ref`, `kernel`, `typed_kernel_ref`,
/// `typed_kernel`) that `cudrv::launch` accepts.
template <class K>
concept kernel_handle = std::is_base_of_v<kernel_base, K>;

}  // namespace cudrv
