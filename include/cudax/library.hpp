/// @file library.hpp
/// @brief Loaded device code: @ref cudax::library (owning, context-independent `CUlibrary`) and its
/// view @ref cudax::library_ref, with kernels, globals and managed variables.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cudax/device.hpp"
#include "cudax/kernel.hpp"
#include "cudax/object_code.hpp"
#include "cudax/span.hpp"

namespace cudax {

/// @brief Options for the driver's JIT when a library is loaded. They matter for PTX (which is
/// compiled at load time); for a cubin the driver ignores the code-generation ones.
///
/// @code
/// cudax::library lib(ptx, {.optimization_level = 4, .max_registers = 64, .line_info = true});
/// std::cout << lib.jit_log();        // ptxas info: Used 40 registers, ...  (with .verbose = true)
/// @endcode
struct jit_options {
  /// @brief PTX optimisation level, 0-4 (`CU_JIT_OPTIMIZATION_LEVEL`); empty: the driver's default (4).
  std::optional<int> optimization_level{};
  /// @brief Register limit per thread (`CU_JIT_MAX_REGISTERS`); empty: no limit.
  std::optional<unsigned> max_registers{};
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
  /// @brief Load the code and compile every kernel now, in the current context (or device 0's
  /// primary context when none is current), so that a malformed or incompatible image fails in the
  /// constructor with the JIT's log. With `false` the driver's lazy loading (the default of CUDA 12.2+)
  /// defers that work, and its errors, to the first use of each kernel in each context.
  bool eager = true;
};

namespace detail {
struct library_state;
/// @brief The number of bytes of a global, or throws when it does not hold whole elements (internal).
std::size_t check_global_size(const char* api, const std::string& name, std::size_t bytes, std::size_t element_size,
                              const char* element_type_hint);
/// @brief Synchronous copy between host and a global in ctx (internal).
void copy_global(CUcontext ctx, CUdeviceptr address, void* host, std::size_t bytes, bool to_device);
}  // namespace detail

/// @brief A `__device__` or `__constant__` variable of a loaded library in one context: its address
/// and size, with typed synchronous read and write.
///
/// For stream-ordered access, take @ref span and use @ref copy.
/// @code
/// auto scale = lib.get_global<float>("scale", dev);        // __constant__ float scale;
/// scale.write(2.5f);
/// auto table = lib.get_global<int>("table", dev);          // __device__ int table[256];
/// std::vector<int> host(table.size());
/// table.read(host.data(), host.size());
/// @endcode
template <class T>
class global_ref {
  static_assert(std::is_trivially_copyable_v<T>, "a global is read and written byte-wise: T must be trivially copyable");

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
  /// @brief Reads the first (or only) element; synchronous.
  [[nodiscard]] T read() const {
    T value;
    read(&value, 1);
    return value;
  }
  /// @brief Reads the first @p count elements into @p out; synchronous.
  /// @throws invalid_argument_error when @p count exceeds @ref size
  void read(T* out, std::size_t count) const {
    check_count(count, "cudax::global_ref::read");
    detail::copy_global(ctx_.native_handle(), address_, static_cast<void*>(out), count * sizeof(T), false);
  }
  /// @brief Writes the first (or only) element; synchronous.
  void write(const T& value) const { write(&value, 1); }
  /// @brief Writes @p count elements from @p in; synchronous.
  /// @throws invalid_argument_error when @p count exceeds @ref size
  void write(const T* in, std::size_t count) const {
    check_count(count, "cudax::global_ref::write");
    detail::copy_global(ctx_.native_handle(), address_, const_cast<void*>(static_cast<const void*>(in)),
                        count * sizeof(T), true);
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

/// @brief A non-owning view of a loaded library (`CUlibrary`).
///
/// Views taken from a @ref library share its cache of kernel parameter layouts; a view adopted with
/// @ref from_native_handle has none (untyped launches of its kernels then ask the driver).
class library_ref {
 public:
  /// @brief Views a `CUlibrary` the caller keeps loaded.
  [[nodiscard]] static library_ref from_native_handle(CUlibrary handle) noexcept { return library_ref(handle, nullptr); }
  library_ref(std::nullptr_t) = delete;

  /// @brief The `CUlibrary` handle.
  [[nodiscard]] CUlibrary native_handle() const noexcept { return handle_; }

  /// @brief The kernel named @p name (`extern "C"` names as written, C++ names mangled or as lowered
  /// by @ref program name expressions).
  /// @throws error with `CUDA_ERROR_NOT_FOUND` whose message lists the kernels the library contains
  [[nodiscard]] kernel_ref get_kernel(const std::string& name) const;
  /// @brief The kernel named @p name, typed: its parameter sizes are checked once, here, against the
  /// driver's description (CUDA 12.4+).
  /// @throws invalid_argument_error naming the parameter index and both sizes on a mismatch
  template <class Signature>
  [[nodiscard]] typed_kernel_ref<Signature> get_kernel(const std::string& name) const {
    return get_kernel(name).template as<Signature>();
  }
  /// @brief Whether the library contains a kernel named @p name.
  [[nodiscard]] bool has_kernel(const std::string& name) const;
  /// @brief The names of all kernels in the library (CUDA 12.4+).
  [[nodiscard]] std::vector<std::string> kernel_names() const;

  /// @brief The global `__device__` or `__constant__` variable @p name in @p dev's primary context,
  /// as @p T elements.
  /// @throws error with `CUDA_ERROR_NOT_FOUND` for an unknown name; invalid_argument_error when its
  ///   size is not a multiple of `sizeof(T)`
  template <class T>
  [[nodiscard]] global_ref<T> get_global(const std::string& name, const device& dev) const {
    return get_global<T>(name, dev.primary_context());
  }
  /// @brief The global variable @p name in context @p ctx, as @p T elements.
  template <class T>
  [[nodiscard]] global_ref<T> get_global(const std::string& name, context_ref ctx) const {
    auto [address, bytes] = raw_global(name, ctx);
    std::size_t count = detail::check_global_size("cudax::library_ref::get_global", name, bytes, sizeof(T), nullptr);
    return global_ref<T>(address, count, ctx);
  }
  /// @brief Address and size in bytes of the global @p name in @p ctx (`cuLibraryGetGlobal`).
  [[nodiscard]] std::pair<CUdeviceptr, std::size_t> raw_global(const std::string& name, context_ref ctx) const;

  /// @brief The `__managed__` variable @p name as @p T elements, accessible from the host (after the
  /// device work that writes it has completed).
  /// @throws error with `CUDA_ERROR_NOT_FOUND` for an unknown name; invalid_argument_error when its
  ///   size is not a multiple of `sizeof(T)`
  template <class T>
  [[nodiscard]] std::span<T> get_managed(const std::string& name) const {
    auto [address, bytes] = raw_managed(name);
    std::size_t count = detail::check_global_size("cudax::library_ref::get_managed", name, bytes, sizeof(T), nullptr);
    return std::span<T>(reinterpret_cast<T*>(address), count);
  }
  /// @brief Address and size in bytes of the managed variable @p name (`cuLibraryGetManaged`).
  [[nodiscard]] std::pair<CUdeviceptr, std::size_t> raw_managed(const std::string& name) const;

  /// @brief The library's module in @p ctx (`cuLibraryGetModule`), for module-based APIs.
  [[nodiscard]] CUmodule module(context_ref ctx) const;

  /// @brief The JIT's info log of the load (empty for a view without a @ref library).
  [[nodiscard]] std::string jit_log() const;
  /// @brief The name given at load (the file or object name; empty for an adopted handle).
  [[nodiscard]] std::string name() const;

 protected:
  /// @brief For @ref library.
  library_ref(CUlibrary handle, detail::library_state* state) noexcept : handle_(handle), state_(state) {}
  /// @brief Throws for an empty (moved-from) library (internal).
  void require_handle(const char* api) const;

  CUlibrary handle_;              ///< The library.
  detail::library_state* state_;  ///< The owner's cache; null for an adopted view.
};

/// @brief Loaded device code, context-independent (`cuLibraryLoadData`): PTX, cubin or fatbin,
/// owned and unloaded on destruction.
///
/// The driver loads the code into each context when it is first used there. PTX is compiled by the
/// driver's JIT at load time with @ref jit_options; its info log is kept (@ref jit_log) and a failed
/// load throws a @ref load_error carrying the JIT's error log. Move-only.
///
/// @code
/// cudax::library lib = cudax::library::from_file("build/kernels.cubin");
/// cudax::kernel_ref k = lib.get_kernel("vector_add");
/// cudax::launch(stream, {.grid = (n + 255) / 256, .block = 256}, k, a.get(), b.get(), c.get(), n);
///
/// try {
///   cudax::library bad(cudax::object_code(cudax::code_kind::ptx, "not ptx"));
/// } catch (const cudax::load_error& e) {
///   std::cerr << e.log();   // ptxas application ptx input, line 1; fatal : Parsing error ...
/// }
/// @endcode
class library : public library_ref {
 public:
  /// @brief Loads @p code (ptx, cubin or fatbin).
  /// @throws invalid_argument_error for an empty image or a kind that must be linked first (ltoir,
  ///   object, library); load_error when the driver refuses the image (the message says why and
  ///   carries the JIT log); driver_unavailable_error without a driver
  explicit library(const object_code& code, const jit_options& options = {});
  /// @brief Loads a file; the kind comes from the extension (see @ref object_code::from_file).
  [[nodiscard]] static library from_file(const std::string& path, const jit_options& options = {});
  /// @brief Adopts a loaded `CUlibrary`: it will be unloaded by this object.
  [[nodiscard]] static library from_native_handle(CUlibrary handle);

  library(const library&) = delete;
  library& operator=(const library&) = delete;
  /// @brief Takes over @p other's library; @p other becomes empty.
  library(library&& other) noexcept;
  /// @brief Unloads the current library, then takes over @p other's.
  library& operator=(library&& other) noexcept;
  /// @brief Unloads the library (`cuLibraryUnload`); errors go to the destruction handler. Kernels
  /// and globals of the library must no longer be used.
  ~library();

  /// @brief Gives up ownership: returns the handle, which the caller must unload. Kernel views taken
  /// before stay usable while the library is loaded; cudax keeps its small bookkeeping for them
  /// (parameter layouts, the JIT log buffers the driver may still write to) until the process ends.
  [[nodiscard]] CUlibrary release() noexcept;

 private:
  explicit library(detail::library_state* state) noexcept;
  void reset() noexcept;
  // The library owns state_ (no std::unique_ptr: <memory> would cost 0.7 s per including file).
};

}  // namespace cudax
