/// @file library.hpp
/// @brief Loaded device code: @ref cudrv::library (owning, context-independent `CUlibrary`) and its
/// view @ref cudrv::library_ref, with kernels, globals and managed variables.
///
/// Layer: code (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cudrv/copy.hpp"
#include "cudrv/device.hpp"
#include "cudrv/kernel.hpp"
#include "cudrv/object_code.hpp"
#include "cudrv/span.hpp"
#include "cudrv/stream.hpp"

namespace cudrv {

// Declared only: a library loads a compile_result's code, and whoever has one has included
// <cudrv/program.hpp> (or <cudrv/rtc.hpp>) already; the umbrella does not pay for run-time compilation.
struct compile_result;

/// @brief Options for the driver's JIT when a library is loaded. They matter for PTX (which is
/// compiled at load time); for a cubin the driver ignores the code-generation ones.
///
/// @code
/// cudrv::library lib(ptx, {.optimization_level = 4, .max_registers = 64, .line_info = true});
/// std::cout << lib.jit_log();        // ptxas info: Used 40 registers, ...  (with .verbose = true)
/// @endcode
struct jit_options {
  /// @brief PTX optimisation level, 0-4 (`CU_JIT_OPTIMIZATION_LEVEL`); empty: the driver's default (4).
  std::optional<int> optimization_level{};
  /// @brief Register limit per thread (`CU_JIT_MAX_REGISTERS`), positive; empty: no limit. An `int`, as
  /// in @ref compile_options and @ref link_options.
  std::optional<int> max_registers{};
  /// @brief Generate line information (`CU_JIT_GENERATE_LINE_INFO`).
  bool line_info = false;
  /// @brief Generate debug information (`CU_JIT_GENERATE_DEBUG_INFO`).
  bool debug = false;
  /// @brief Compile PTX for this compute capability (e.g. 90) instead of the current device's
  /// (`CU_JIT_TARGET`).
  std::optional<int> target{};
  /// @brief Ask the JIT for a verbose info log (`CU_JIT_LOG_VERBOSE`): registers, spills.
  bool verbose = false;
  /// @brief Capacity of each of the info and error log buffers, in bytes.
  std::size_t log_capacity = 16 * 1024;
  /// @brief Load the code and compile every kernel now, in the context the library is loaded for (the
  /// one named to the constructor, else the current one), so that a malformed or incompatible image
  /// fails in the constructor with the JIT's log. With no context named and none current, nothing is
  /// loaded into a context (cudrv never picks one, device 0's included): the image is checked
  /// structurally only and each context loads it at first use. With `false` the driver's lazy loading
  /// (the default of CUDA 12.2+) defers that work, and its errors, to the first use of each kernel in
  /// each context.
  bool eager = true;
};

namespace detail {
struct library_state;
/// @brief The number of bytes of a global, or throws when it does not hold whole elements (internal).
std::size_t check_global_size(const char* api, const std::string& name, std::size_t bytes, std::size_t element_size,
                              const char* element_type_hint);
}  // namespace detail

/// @brief A `__device__` or `__constant__` variable of a loaded library in one context: its address
/// and size, with typed synchronous read and write.
///
/// Reads and writes are synchronous (they have completed when they return) or, with a stream,
/// ordered on it; @ref span gives the device view for other copies and kernel arguments.
/// @code
/// auto scale = lib.get_global<float>("scale", dev);        // __constant__ float scale;
/// scale.write(2.5f);
/// auto table = lib.get_global<int>("table", dev);          // __device__ int table[256];
/// std::vector<int> host(table.size());
/// table.read(host.data(), host.size());
/// @endcode
template <class T>
class global_ref {
  static_assert(std::is_trivially_copyable_v<T>,
                "a global is read and written byte-wise: T must be trivially copyable");

 public:
  /// @brief Views @p count elements at @p address in @p ctx (no check).
  global_ref(CUdeviceptr address, std::size_t count, context_ref ctx) noexcept
      : address_(address), count_(count), ctx_(ctx) {}
  /// @brief The device address.
  [[nodiscard]] CUdeviceptr address() const noexcept { return address_; }
  /// @brief The number of elements of type T.
  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  /// @brief The number of bytes.
  [[nodiscard]] std::size_t size_bytes() const noexcept { return count_ * sizeof(T); }
  /// @brief The context the address belongs to.
  [[nodiscard]] context_ref context() const noexcept { return ctx_; }
  /// @brief A device view, for stream-ordered copies and kernel arguments.
  [[nodiscard]] device_span<T> span() const noexcept { return device_span<T>(address_, count_); }
  /// @brief Reads the first (or only) element; synchronous: returns once the value has arrived.
  [[nodiscard]] T read() const {
    T value;
    read(&value, 1);
    return value;
  }
  /// @brief Reads the first @p count elements into @p out; synchronous.
  /// @throws invalid_argument_error when @p count is 0 or exceeds @ref size
  void read(T* out, std::size_t count) const {
    check_count(count, "cudrv::global_ref::read");
    copy(std::span<T>(out, count), span(), count);
  }
  /// @brief Reads the first @p count elements into @p out, ordered on @p s: @p out holds them once
  /// the stream's work up to here has completed.
  void read(T* out, std::size_t count, stream_ref s) const {
    check_count(count, "cudrv::global_ref::read");
    copy(std::span<T>(out, count), span(), count, s);
  }
  /// @brief Writes the first (or only) element; synchronous: the value has landed when the call
  /// returns, so a kernel launched next on any stream sees it.
  void write(const T& value) const { write(&value, 1); }
  /// @brief Writes @p count elements from @p in; synchronous (see @ref write(const T&) const).
  /// @throws invalid_argument_error when @p count is 0 or exceeds @ref size
  void write(const T* in, std::size_t count) const {
    check_count(count, "cudrv::global_ref::write");
    copy(span(), std::span<const T>(in, count), count);
  }
  /// @brief Writes the first (or only) element, ordered on @p s: kernels queued on @p s after this
  /// call see the value. @p value is read before the call returns (the driver stages pageable memory),
  /// so a temporary is fine.
  /// @code
  /// scale.write(2.5f, stream);                       // ordered with the launches on stream
  /// cudrv::launch(stream, config, k, data.get(), n);
  /// @endcode
  void write(const T& value, stream_ref s) const { write(&value, 1, s); }
  /// @brief Writes @p count elements from @p in, ordered on @p s. From pageable memory the elements are
  /// read before the call returns; from pinned memory they are read when the copy runs, so they must
  /// stay unchanged until then.
  void write(const T* in, std::size_t count, stream_ref s) const {
    check_count(count, "cudrv::global_ref::write");
    copy(span(), std::span<const T>(in, count), count, s);
  }

 private:
  void check_count(std::size_t count, const char* api) const {
    if (count > count_) [[unlikely]] {
      detail::throw_out_of_range(api, 0, count, count_);
    }
  }
  CUdeviceptr address_;
  std::size_t count_;
  context_ref ctx_;
};

/// @brief The operations every library handle offers, shared by the view @ref cudrv::library_ref and
/// the owner @ref cudrv::library. Not constructible or assignable on its own (see
/// @ref cudrv::context_base).
class library_base {
 public:
  /// @brief The `CUlibrary` handle.
  [[nodiscard]] CUlibrary native_handle() const noexcept { return handle_; }

  /// @brief The kernel named @p name: `extern "C"` names as written, C++ names mangled, or, for a
  /// library loaded from a @ref compile_result, the name expressions given to the compilation
  /// (`"saxpy<float>"`), looked up by their lowered names.
  ///
  /// The result keeps the library loaded (see @ref kernel). Its parameter layout comes from the image's
  /// metadata when cudrv loaded the image itself (PTX, cubin, or a fatbin with an uncompressed entry),
  /// else from the driver in the library's context or the current one; no context is made current or
  /// retained for it.
  /// @throws error with `CUDA_ERROR_NOT_FOUND` whose message lists the kernels the library contains
  [[nodiscard]] kernel get_kernel(const std::string& name) const;
  /// @brief The kernel named @p name, typed: its parameter sizes are checked once, here, against the
  /// image's (or the driver's) description.
  /// @throws invalid_argument_error naming the parameter index and both sizes on a mismatch
  template <class Signature>
  [[nodiscard]] typed_kernel<Signature> get_kernel(const std::string& name) const {
    return get_kernel(name).template as_owned<Signature>();
  }
  /// @brief Whether the library contains a kernel named @p name (a name as for @ref get_kernel):
  /// answered from the image when cudrv read it (a cubin's entry functions: a `__device__` function of
  /// a `-G` or `-rdc` image is none), else by the driver.
  [[nodiscard]] bool has_kernel(const std::string& name) const;
  /// @brief The names of all kernels in the library (CUDA 12.4+).
  [[nodiscard]] std::vector<std::string> kernel_names() const;

  /// @brief The global `__device__` or `__constant__` variable @p name in @p dev's primary context,
  /// as @p T elements.
  /// @throws error with `CUDA_ERROR_NOT_FOUND` for an unknown name; invalid_argument_error when its
  ///   size is not a multiple of `sizeof(T)`
  template <class T>
  [[nodiscard]] global_ref<T> get_global(const std::string& name, const device& dev) const& {
    return get_global<T>(name, dev.primary_context());
  }
  /// @brief The global variable @p name in context @p ctx, as @p T elements.
  template <class T>
  [[nodiscard]] global_ref<T> get_global(const std::string& name, context_ref ctx) const& {
    auto [address, bytes] = raw_global(name, ctx);
    std::size_t count = detail::check_global_size("cudrv::library_ref::get_global", name, bytes, sizeof(T), nullptr);
    return global_ref<T>(address, count, ctx);
  }
  /// @brief Address and size in bytes of the global @p name in @p ctx (`cuLibraryGetGlobal`).
  [[nodiscard]] std::pair<CUdeviceptr, std::size_t> raw_global(const std::string& name, context_ref ctx) const&;

  /// @brief The `__managed__` variable @p name as @p T elements, accessible from the host (after the
  /// device work that writes it has completed).
  /// @throws error with `CUDA_ERROR_NOT_FOUND` for an unknown name; invalid_argument_error when its
  ///   size is not a multiple of `sizeof(T)`
  template <class T>
  [[nodiscard]] std::span<T> get_managed(const std::string& name) const& {
    auto [address, bytes] = raw_managed(name);
    std::size_t count = detail::check_global_size("cudrv::library_ref::get_managed", name, bytes, sizeof(T), nullptr);
    return std::span<T>(reinterpret_cast<T*>(address), count);
  }
  /// @brief Address and size in bytes of the managed variable @p name (`cuLibraryGetManaged`).
  [[nodiscard]] std::pair<CUdeviceptr, std::size_t> raw_managed(const std::string& name) const&;

  /// @brief The library's module in @p ctx (`cuLibraryGetModule`), for module-based APIs.
  [[nodiscard]] CUmodule module(context_ref ctx) const&;

  /// @brief The JIT's info log of the load (empty for a view without a @ref library).
  [[nodiscard]] std::string jit_log() const;
  /// @brief The name given at load (the file or object name; empty for an adopted handle).
  [[nodiscard]] std::string name() const;

  /// @brief Same library (views and owners alike).
  friend bool operator==(const library_base& a, const library_base& b) noexcept { return a.handle_ == b.handle_; }

 protected:
  /// @brief Holds @p handle and the owner's @p state.
  library_base(CUlibrary handle, detail::library_state* state) noexcept : handle_(handle), state_(state) {}
  /// @brief Copies the handle (for the view).
  library_base(const library_base&) noexcept = default;
  /// @brief Copies the handle (for the view).
  library_base& operator=(const library_base&) noexcept = default;
  ~library_base() = default;
  /// @brief Throws for an empty (moved-from) library (internal).
  void require_handle(const char* api) const;

  CUlibrary handle_;              ///< The library.
  detail::library_state* state_;  ///< The owner's bookkeeping (counted); null for an adopted view.
};

/// @brief A non-owning view of a loaded library (`CUlibrary`). Trivially copyable; valid while the
/// library lives.
///
/// Views taken from a @ref library share its bookkeeping (parameter layouts, name expressions), and
/// kernels taken through them keep the library loaded; a view adopted with @ref from_native_handle has
/// none (untyped launches of its kernels then ask the driver).
class library_ref : public library_base {
 public:
  /// @brief Views a `CUlibrary` the caller keeps loaded.
  [[nodiscard]] static library_ref from_native_handle(CUlibrary handle) noexcept {
    return library_ref(handle, nullptr);
  }
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  library_ref(std::nullptr_t) = delete;
  /// @}
  /// @brief Views the same library as @p other.
  library_ref(const library_ref& other) noexcept = default;
  /// @brief Views the library @p other views.
  library_ref& operator=(const library_ref& other) noexcept = default;

 private:
  friend class library;
  library_ref(CUlibrary handle, detail::library_state* state) noexcept : library_base(handle, state) {}
};

/// @brief Loaded device code, context-independent (`cuLibraryLoadData`): PTX, cubin or fatbin,
/// owned and unloaded when the library object and every @ref kernel taken from it are gone. Move-only;
/// converts to @ref library_ref.
///
/// The driver loads the code into each context when it is first used there. PTX is compiled by the
/// driver's JIT at load time with @ref jit_options; its info log is kept (@ref jit_log) and a failed
/// load throws a @ref load_error carrying the JIT's error log. With eager loading (the default) the
/// code is loaded now into the context named here (a device stands for its primary context), else
/// into the current one; with neither, cudrv loads it into no context (it never picks one itself).
///
/// @code
/// cudrv::library lib = cudrv::library::from_file("build/kernels.cubin");
/// cudrv::kernel k = lib.get_kernel("vector_add");
/// cudrv::launch(stream, {.grid = (n + 255) / 256, .block = 256}, k, a.get(), b.get(), c.get(), n);
///
/// cudrv::library on1(code, cudrv::device(1));      // checked and loaded on device 1 now
/// cudrv::library jit(prog.compile(cudrv::code_kind::cubin, {}, {"saxpy<float>"}));
/// auto saxpy = jit.get_kernel("saxpy<float>");      // a name expression, in one step
///
/// try {
///   cudrv::library bad(cudrv::object_code(cudrv::code_kind::ptx, "not ptx"));
/// } catch (const cudrv::load_error& e) {
///   std::cerr << e.log();   // ptxas application ptx input, line 1; fatal : Parsing error ...
/// }
/// @endcode
class library : public library_base {
 public:
  /// @brief Loads @p code (ptx, cubin or fatbin), eagerly into the current context if one is current.
  /// @throws invalid_argument_error for an empty image or a kind that must be linked first (ltoir,
  ///   object, library); invalid_image_error (a load_error) when the image fails the checks of
  ///   @ref object_code::validate, before the driver sees it; load_error when the driver refuses the
  ///   image (the message says why and carries the JIT log); driver_unavailable_error without a driver
  explicit library(const object_code& code, const jit_options& options = {});
  /// @brief Loads @p code, eagerly into @p ctx (which later parameter queries use too).
  library(const object_code& code, context_ref ctx, const jit_options& options = {});
  /// @brief Loads @p code, eagerly into @p dev's primary context.
  library(const object_code& code, const device& dev, const jit_options& options = {});
  /// @brief Loads the code of a compilation; its name expressions become kernel names for
  /// @ref library_base::get_kernel.
  explicit library(const compile_result& result, const jit_options& options = {});
  /// @brief Loads the code of a compilation, eagerly into @p ctx.
  library(const compile_result& result, context_ref ctx, const jit_options& options = {});
  /// @brief Loads the code of a compilation, eagerly into @p dev's primary context.
  library(const compile_result& result, const device& dev, const jit_options& options = {});
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the temporary owner would be destroyed at the end of the statement, before this object.
  library(const object_code&, cudrv::context&&, const jit_options& = {}) = delete;
  /// @brief Refused, as the form that loads an @ref object_code into a temporary context.
  library(const compile_result&, cudrv::context&&, const jit_options& = {}) = delete;
  /// @brief Refused: the temporary context would be destroyed at the end of the statement, before the
  /// library that was loaded into it.
  static library from_file(const std::string&, cudrv::context&&, const jit_options& = {}) = delete;
  /// @}
  /// @brief Loads a file; the kind comes from the extension (see @ref object_code::from_file).
  /// Otherwise as the constructor from an @ref object_code, eagerly into the current context if one is
  /// current.
  /// @throws invalid_argument_error for an unknown extension or a file that cannot be read; otherwise
  ///   as the constructor from an @ref object_code
  [[nodiscard]] static library from_file(const std::string& path, const jit_options& options = {});
  /// @brief Loads a file, eagerly into @p ctx (which later parameter queries use too).
  [[nodiscard]] static library from_file(const std::string& path, context_ref ctx, const jit_options& options = {});
  /// @brief Loads a file, eagerly into @p dev's primary context: the same targets as the constructors.
  ///
  /// @code
  /// cudrv::device dev(0);
  /// auto lib = cudrv::library::from_file("kernels.cubin", dev);   // nvcc -cubin -arch=sm_90 kernels.cu
  /// @endcode
  /// @throws invalid_argument_error for an unknown extension or a file that cannot be read; otherwise
  ///   as the constructor from an @ref object_code and a device
  [[nodiscard]] static library from_file(const std::string& path, const device& dev, const jit_options& options = {});
  /// @brief Adopts a loaded `CUlibrary`: it will be unloaded by this object (and its kernels). The
  /// handle is adopted even when this throws for want of memory: it is unloaded then.
  [[nodiscard]] static library from_native_handle(CUlibrary handle);

  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  library(const library&) = delete;
  library& operator=(const library&) = delete;
  /// @}
  /// @brief Takes over @p other's library; @p other becomes empty.
  library(library&& other) noexcept;
  /// @brief Drops the current library, then takes over @p other's.
  library& operator=(library&& other) noexcept;
  /// @brief Drops this object's reference: the code is unloaded (`cuLibraryUnload`) once no kernel
  /// taken from it remains; errors go to the destruction handler.
  ~library();

  /// @brief Gives up ownership: returns the handle, which the caller must unload (after the kernels
  /// taken from it). Kernels taken before keep their parameter layouts; cudrv keeps the JIT log
  /// buffers of a lazily loaded library until the process ends, since the driver may still write them.
  [[nodiscard]] CUlibrary release() noexcept;
  /// @brief Drops this object's reference now (as the destructor does); the object becomes empty.
  void reset() noexcept;
  /// @brief Whether this object holds a library (false after a move, @ref release or @ref reset).
  [[nodiscard]] explicit operator bool() const noexcept { return handle_ != nullptr; }
  /// @brief A view of the library, valid while this object (or a kernel taken from it) lives.
  operator library_ref() const& noexcept { return library_ref(handle_, state_); }  // NOLINT: implicit on purpose
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the view of a temporary library would outlive it (the code unloaded at the end of
  /// the statement).
  operator library_ref() const&& = delete;
  /// @}

  using library_base::get_global;
  using library_base::get_managed;
  using library_base::module;
  using library_base::raw_global;
  using library_base::raw_managed;
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the variable of a temporary library would be unloaded with it at the end of the
  /// statement. Keep the library in a variable.
  template <class T>
  global_ref<T> get_global(const std::string&, const device&) const&& = delete;
  /// @brief Refused, as the other form on a temporary library.
  template <class T>
  global_ref<T> get_global(const std::string&, context_ref) const&& = delete;
  /// @brief Refused, as @ref library_base::get_global on a temporary library.
  void raw_global(const std::string&, context_ref) const&& = delete;
  /// @brief Refused: the host view of a temporary library's managed variable would dangle.
  template <class T>
  std::span<T> get_managed(const std::string&) const&& = delete;
  /// @brief Refused, as @ref get_managed on a temporary library.
  void raw_managed(const std::string&) const&& = delete;
  /// @brief Refused: the module of a temporary library would be unloaded with it.
  CUmodule module(context_ref) const&& = delete;
  /// @}

 private:
  explicit library(detail::library_state* state) noexcept;
};

}  // namespace cudrv
