/// @file error.hpp
/// @brief The exception hierarchy of cudrv and the handler for errors met during destruction.
///
/// Layer: driver (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <cstddef>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

/// @brief cudrv: RAII types over the CUDA driver API (devices, contexts, streams, events, memory),
/// its exception hierarchy and run-time driver loading. See @ref design for the model.
namespace cudrv {

/// @brief Which library produced the status code carried by an @ref cudrv::error.
enum class error_source {
  driver,     ///< A CUDA driver API call returned a CUresult.
  cudrv,      ///< cudrv itself refused a request before any driver call (bad argument, empty handle).
  nvrtc,      ///< An NVRTC call returned an nvrtcResult (run-time compilation).
  nvjitlink,  ///< An nvJitLink call returned an nvJitLinkResult (run-time linking).
  runtime,    ///< A CUDA runtime call returned a cudaError_t (only where cudrv meets nvcc-compiled code).
  nccl,       ///< An NCCL call returned an ncclResult_t (<cudrv/nccl.hpp>), or NCCL could not be loaded.
  mpi,        ///< An MPI call returned an error code (<cudrv/mpi.hpp>, the optional cudrv::mpi component).
  system,     ///< An operating-system call failed; the code is its `errno` (<cudrv/unix_socket.hpp>).
  nvvm,       ///< A libNVVM call returned an nvvmResult (<cudrv/nvvm_program.hpp>), or libNVVM could not be loaded.
  nvml,       ///< An NVML call returned an nvmlReturn_t (<cudrv/system.hpp>), or NVML could not be loaded.
};

/// @brief The base of every exception cudrv throws.
///
/// It carries the status code and its symbolic name (`CUDA_ERROR_OUT_OF_MEMORY`), the driver's
/// description of it, the API call that failed (`cuMemAlloc`) and the context in which it failed
/// (device, stream, sizes). `what()` joins them into one line. Where the driver explains a failure
/// in its log (`cuLogsRegisterCallback`, drivers for CUDA 12.9 and later), an error of a failed driver
/// call also carries the lines the driver logged for it: @ref driver_log returns them, and `what()`
/// shows each on a line of its own after the rest, as `driver log: <line>` (see @ref reliability,
/// "The driver's log in errors", for which lines attach).
///
/// @code
/// try {
///   cudrv::device_buffer<float> huge(cudrv::device(0), std::size_t(1) << 40);
/// } catch (const cudrv::out_of_memory_error& e) {
///   std::cerr << e.what() << '\n';
///   // cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (out of memory) [4.00 TiB (4398046511104 bytes)
///   // requested on device 0 (78.6 GiB free of 79.2 GiB)]
///   std::cerr << e.name() << '\n';   // CUDA_ERROR_OUT_OF_MEMORY
/// } catch (const cudrv::error& e) {
///   std::cerr << e.api() << " failed with " << e.code() << '\n';
/// }
/// @endcode
class error : public std::runtime_error {
 public:
  /// @brief Builds an error with every field given explicitly.
  /// @param source which library the code comes from
  /// @param code the numeric status code (a CUresult for @ref error_source::driver)
  /// @param name the symbolic name of the code
  /// @param description a human-readable description of the code
  /// @param api the call that failed, e.g. `cuStreamCreate` or `cudrv::copy`
  /// @param context where it failed (device, stream, sizes); may be empty
  error(error_source source, int code, std::string name, std::string description, std::string api, std::string context);

  /// @brief Builds an error for a failed driver call; name and description come from the driver
  /// when it is loaded, otherwise from the table built into cudrv.
  error(CUresult code, std::string api, std::string context = {});

  /// @brief Which library produced @ref code.
  [[nodiscard]] error_source source() const noexcept { return source_; }
  /// @brief The numeric status code.
  [[nodiscard]] int code() const noexcept { return code_; }
  /// @brief The status as a CUresult (meaningful for both sources: cudrv validation errors use
  /// `CUDA_ERROR_INVALID_VALUE` and friends).
  [[nodiscard]] CUresult result() const noexcept { return static_cast<CUresult>(code_); }
  /// @brief The symbolic name of the code, e.g. `CUDA_ERROR_INVALID_VALUE`.
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  /// @brief The description of the code.
  [[nodiscard]] const std::string& description() const noexcept { return description_; }
  /// @brief The API call that failed.
  [[nodiscard]] const std::string& api() const noexcept { return api_; }
  /// @brief Where the call failed (device, stream, sizes); may be empty.
  [[nodiscard]] const std::string& context() const noexcept { return context_; }
  /// @brief Whether this is a sticky fault reported by the driver (see @ref cudrv::is_sticky): the
  /// context the call ran in is unusable until it is reset. The error is then a
  /// @ref context_fault_error, unless a more specific type (a @ref launch_error) carries it.
  [[nodiscard]] bool is_sticky() const noexcept;
  /// @brief The lines the CUDA driver logged on this thread for the failed call, oldest first
  /// (empty where the driver has no log callback, the log is switched off, or it logged nothing).
  ///
  /// Only an error whose @ref source is @ref error_source::driver carries lines: those the driver
  /// logged on the thread that built the error since the previous such error of that thread, at most
  /// one second before it, the newest 8, each cut at 511 bytes (@ref reliability, "The driver's log in
  /// errors").
  /// @code
  /// try {
  ///   cudrv::device_buffer<std::byte> huge(dev, std::size_t(1) << 50);
  /// } catch (const cudrv::error& e) {
  ///   for (const std::string& line : e.driver_log()) {
  ///     std::cerr << "driver: " << line << '\n';
  ///   }
  /// }
  /// @endcode
  [[nodiscard]] const std::vector<std::string>& driver_log() const noexcept { return driver_log_; }

 private:
  error(error_source source, int code, std::string name, std::string description, std::string api, std::string context,
        std::vector<std::string> driver_log);

  error_source source_;
  int code_;
  std::string name_;
  std::string description_;
  std::string api_;
  std::string context_;
  std::vector<std::string> driver_log_;
};

/// @brief The CUDA driver cannot be used: libcuda.so.1 was not found, it is a stub, it is too old
/// for this machine's kernel module, or it sees no device.
class driver_unavailable_error : public error {
 public:
  using error::error;
};

/// @brief A device or host allocation failed for lack of memory (`CUDA_ERROR_OUT_OF_MEMORY`).
///
/// When cudrv made the allocation it records the figures of the moment: the bytes asked for, the
/// bytes free where the memory was to come from (`cuMemGetInfo` in the allocation's context, or the
/// host's available physical memory for pinned memory) and, for a pool, what the pool reserved from
/// the system and what of it was in use. A figure cudrv could not read safely (no context of the
/// device was current, and cudrv makes none current that the user did not name) is
/// @ref unknown_bytes; the message then says why. See @ref reliability, "Out of memory and limits".
///
/// @code
/// try {
///   cudrv::device_buffer<std::byte> b(dev, std::size_t(1) << 40);
/// } catch (const cudrv::out_of_memory_error& e) {
///   std::cerr << e.requested_bytes() << " asked, " << e.free_bytes() << " free\n";
/// }
/// @endcode
class out_of_memory_error : public error {
 public:
  /// @brief A figure that was not known or could not be read safely.
  static constexpr std::size_t unknown_bytes = static_cast<std::size_t>(-1);

  /// @brief The memory figures at the time of the failure (@ref unknown_bytes where unknown).
  struct figures {
    std::size_t requested = unknown_bytes;      ///< Bytes the allocation asked for.
    std::size_t free = unknown_bytes;           ///< Bytes free where the memory was to come from.
    std::size_t total = unknown_bytes;          ///< Total bytes there.
    std::size_t pool_reserved = unknown_bytes;  ///< For a pool: bytes it holds from the system.
    std::size_t pool_used = unknown_bytes;      ///< For a pool: bytes of it in use.
  };

  using error::error;
  /// @brief Builds the error of a failed driver allocation with the figures of the moment.
  /// @param code the status (`CUDA_ERROR_OUT_OF_MEMORY`)
  /// @param api the call that failed, e.g. `cuMemAlloc`
  /// @param context where it failed, with the figures in words
  /// @param numbers the same figures as numbers
  out_of_memory_error(CUresult code, std::string api, std::string context, const figures& numbers);

  /// @brief Bytes the failed allocation asked for, or @ref unknown_bytes.
  [[nodiscard]] std::size_t requested_bytes() const noexcept { return figures_.requested; }
  /// @brief Bytes free at the time of the failure where the memory was to come from (the device,
  /// or the host for pinned memory), or @ref unknown_bytes when it could not be read safely.
  [[nodiscard]] std::size_t free_bytes() const noexcept { return figures_.free; }
  /// @brief Total bytes there, or @ref unknown_bytes.
  [[nodiscard]] std::size_t total_bytes() const noexcept { return figures_.total; }
  /// @brief For a pool allocation: bytes the pool held from the system (`CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT`),
  /// else @ref unknown_bytes.
  [[nodiscard]] std::size_t pool_reserved_bytes() const noexcept { return figures_.pool_reserved; }
  /// @brief For a pool allocation: bytes of the pool in use (`CU_MEMPOOL_ATTR_USED_MEM_CURRENT`),
  /// else @ref unknown_bytes.
  [[nodiscard]] std::size_t pool_used_bytes() const noexcept { return figures_.pool_used; }
  /// @brief All the figures at once.
  [[nodiscard]] const figures& memory_figures() const noexcept { return figures_; }

 private:
  figures figures_{};
};

/// @brief Whether a driver status is *sticky*: a fault in a kernel (an illegal address or
/// instruction, a misaligned access, a device-side assert, a hardware stack error, a timeout...)
/// after which the context it happened in is unusable, and every later call in it returns the same
/// code. The CUDA documentation says of these codes that the context "cannot be used anymore" or
/// that "the process must be terminated". See @ref reliability, "Sticky faults and recovery".
[[nodiscard]] bool is_sticky(CUresult code) noexcept;

/// @brief A sticky fault (@ref is_sticky): a kernel faulted and the context it ran in is unusable.
///
/// `what()` says so and names the recovery: destroy every cudrv object made in that context (their
/// destructors free nothing and never throw), then end the process and start a new one (the CUDA
/// documentation says these faults need a new process; driver 580.159.04 keeps the process poisoned
/// after an illegal address). Where a driver recovers the context, @ref device::reset_primary_context
/// does it; where it does not, that call throws this error again.
///
/// @code
/// try {
///   stream.synchronize();
/// } catch (const cudrv::context_fault_error& e) {
///   objects.clear();                 // everything made in the faulted context: no throw, no hang
///   try {
///     dev.reset_primary_context();   // usable again, empty, where the driver allows it
///   } catch (const cudrv::context_fault_error&) {
///     std::exit(restart_me);         // the process stays poisoned: let the supervisor start another
///   }
/// }
/// @endcode
class context_fault_error : public error {
 public:
  using error::error;
};

/// @brief This process was forked after its parent initialised CUDA, and CUDA cannot be used in the
/// child: the driver's state belongs to the parent. Thrown by the first cudrv call in the child that
/// would reach the driver; objects inherited from the parent are destroyed without calling it. Run
/// CUDA in the child by `exec`-ing a program, or fork before the first cudrv call. See
/// @ref reliability, "fork()".
class fork_error : public driver_unavailable_error {
 public:
  /// @brief Builds the error.
  /// @param api the call the child made, e.g. `cuMemAlloc`
  /// @param context where it was made (may be empty)
  fork_error(std::string api, std::string context);
};

/// @brief The device or the installed driver does not support the request (`CUDA_ERROR_NOT_SUPPORTED`,
/// or an entry point that the installed driver lacks: `CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER`).
class not_supported_error : public error {
 public:
  using error::error;
};

/// @brief cudrv refused an argument before calling the driver: an empty (moved-from) handle, a copy
/// larger than its source or destination view, an invalid flag combination. Its code is
/// `CUDA_ERROR_INVALID_VALUE` and @ref error::api names the cudrv function.
class invalid_argument_error : public error {
 public:
  /// @brief Builds the error.
  /// @param api the cudrv function that refused the request, e.g. `cudrv::copy`
  /// @param message what is wrong and what to do about it
  invalid_argument_error(std::string api, std::string message);
};

/// @brief A host callable enqueued with @ref stream_ref::enqueue threw. It is raised by the next
/// @ref stream_ref::synchronize of that stream; @ref original gives the exception the callable threw.
class host_callback_error : public error {
 public:
  /// @brief Builds the error from the exception a callable threw.
  /// @param original the exception thrown inside the callable
  /// @param stream_context a description of the stream it ran on
  host_callback_error(std::exception_ptr original, std::string stream_context);
  /// @brief The exception the callable threw; rethrow it with `std::rethrow_exception`.
  [[nodiscard]] std::exception_ptr original() const noexcept { return original_; }

 private:
  std::exception_ptr original_;
};

/// @brief A library cudrv loads at run time (NVRTC, nvJitLink or NCCL) could not be loaded or lacks a
/// function cudrv needs. @ref error::source says which library; the description says where cudrv looked
/// and which environment variable (`CUDRV_LIBNVRTC`, `CUDRV_LIBNVJITLINK`, `CUDRV_LIBNCCL`) names another
/// path.
class library_unavailable_error : public error {
 public:
  using error::error;
};

/// @brief The base of the errors that come with a log from a compiler, linker or the driver's JIT:
/// @ref compile_error, @ref link_error and @ref load_error.
///
/// `what()` and @ref error::context end with the log, so printing the exception shows the reason.
/// @ref log gives the log alone.
///
/// @code
/// try {
///   auto code = cudrv::program("broken.cu", "__global__ void k() { int x = ; }")
///                   .compile(cudrv::code_kind::ptx, {.arch = "sm_90"});
/// } catch (const cudrv::compile_error& e) {
///   std::cerr << e.log();   // broken.cu(1): error: expected an expression ...
/// }
/// @endcode
class jit_error : public error {
 public:
  /// @brief Builds the error; @p log is appended to @p context on a new line.
  /// @param source which library the code comes from
  /// @param code the numeric status code of that library
  /// @param name the symbolic name of the code
  /// @param description a description of the code
  /// @param api the call that failed
  /// @param context what was being compiled, linked or loaded
  /// @param log the compiler's, linker's or JIT's log (may be empty)
  jit_error(error_source source, int code, std::string name, std::string description, std::string api,
            std::string context, std::string log);
  /// @brief The log of the compiler, linker or JIT, as it produced it.
  [[nodiscard]] const std::string& log() const noexcept { return log_; }

 private:
  std::string log_;
};

/// @brief NVRTC or libNVVM refused a program: a syntax error, invalid IR, an unknown option, a name
/// expression that does not name a `__global__` function. @ref jit_error::log holds the compiler's
/// program log; @ref error::source says which compiler (@ref error_source::nvrtc or
/// @ref error_source::nvvm).
class compile_error : public jit_error {
 public:
  using jit_error::jit_error;
};

/// @brief nvJitLink failed to add an input or to link. @ref jit_error::log holds nvJitLink's error
/// log (and its info log when the error log is empty).
class link_error : public jit_error {
 public:
  using jit_error::jit_error;
};

/// @brief The driver could not load a code object: malformed PTX, a truncated or empty image, a
/// cubin for another architecture. @ref jit_error::log holds the driver JIT's error log.
class load_error : public jit_error {
 public:
  using jit_error::jit_error;
};

/// @brief cudrv refused a PTX, cubin or fatbin image before the driver or nvJitLink saw it: the bytes
/// are not the format their @ref code_kind says, or an offset or size in its headers points outside
/// the image (a truncated or corrupted file). @ref error::source is @ref error_source::cudrv, the code
/// `CUDA_ERROR_INVALID_IMAGE`, and the message says what is wrong, e.g. `cubin: section header table
/// at offset 4096 + 640 bytes exceeds the image size 2048 (truncated?)`. The log is empty.
///
/// @code
/// try {
///   cudrv::library lib(cudrv::object_code::from_file("kernels.cubin"));
/// } catch (const cudrv::invalid_image_error& e) {
///   std::cerr << e.what() << '\n';   // the file is damaged: rebuild it
/// }
/// @endcode
class invalid_image_error : public load_error {
 public:
  /// @brief Builds the error.
  /// @param api the cudrv function that refused the image, e.g. `cudrv::library`
  /// @param message what is wrong with the image (which image, which header, which offsets)
  invalid_image_error(std::string api, std::string message);
};

/// @brief A kernel launch was refused, by cudrv before the driver call (wrong argument count or
/// sizes) or by the driver. For a driver refusal cudrv compares the request with the device's and
/// the kernel's limits and names the limit exceeded with the numbers, e.g. `block of 1024 threads
/// exceeds the 640 threads per block this kernel allows (it uses 96 registers per thread)`.
/// @ref kernel_name names the kernel.
class launch_error : public error {
 public:
  /// @brief Builds the error.
  /// @param source @ref error_source::driver for a refused driver call, @ref error_source::cudrv for
  ///   a request cudrv refused before calling the driver
  /// @param code the status code (a CUresult)
  /// @param api the call that failed, e.g. `cuLaunchKernelEx` or `cudrv::launch`
  /// @param kernel_name the kernel's name ("" when unknown)
  /// @param diagnosis what is wrong, with the numbers
  launch_error(error_source source, CUresult code, std::string api, std::string kernel_name, std::string diagnosis);
  /// @brief The name of the kernel that was launched ("" when unknown).
  [[nodiscard]] const std::string& kernel_name() const noexcept { return kernel_name_; }

 private:
  std::string kernel_name_;
};

/// @brief `cuGraphExecUpdate` refused to update an executable graph. @ref reason is the driver's
/// `CUgraphExecUpdateResult` (e.g. `CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED`); the message says
/// in words what differs and which node.
class graph_update_error : public error {
 public:
  /// @brief Builds the error.
  /// @param code the status of `cuGraphExecUpdate`
  /// @param reason the update result the driver reported
  /// @param explanation what differs, naming the node involved
  graph_update_error(CUresult code, int reason, std::string explanation);
  /// @brief The driver's `CUgraphExecUpdateResult`, as an int.
  [[nodiscard]] int reason() const noexcept { return reason_; }

 private:
  int reason_;
};

/// @brief The symbolic name of a CUresult, e.g. `CUDA_ERROR_OUT_OF_MEMORY`. Works without a driver;
/// an unknown value gives `CUDA_ERROR_<number>`.
[[nodiscard]] std::string error_name(CUresult code);

/// @brief A description of a CUresult: the driver's own text when the driver is loaded, otherwise
/// the description of the CUDA headers cudrv was built with.
[[nodiscard]] std::string error_description(CUresult code);

/// @brief A function that receives errors met in destructors, which never throw.
///
/// The handler must not throw. It is called from the destroying thread, or, for an exception thrown
/// by a host callable whose stream was destroyed before it ran, from the driver's callback thread.
using destruction_error_handler = void (*)(const error&) noexcept;

/// @brief Replaces the handler for errors met while destroying cudrv objects.
///
/// The default handler writes one line to stderr, e.g.
/// `cudrv: error during destruction: cuStreamDestroy: CUDA_ERROR_INVALID_HANDLE (invalid resource handle)`.
/// `CUDA_ERROR_DEINITIALIZED` (the driver shutting down at process exit) never reaches the handler.
///
/// @code
/// static std::atomic<int> failures{0};
/// cudrv::set_destruction_error_handler([](const cudrv::error&) noexcept { ++failures; });
/// @endcode
/// @param handler the new handler; `nullptr` restores the default
/// @return the previous handler
destruction_error_handler set_destruction_error_handler(destruction_error_handler handler) noexcept;

/// @brief The handler currently installed (never `nullptr`).
[[nodiscard]] destruction_error_handler get_destruction_error_handler() noexcept;

/// @brief Switches the driver's log in errors on or off, for the whole process (see
/// @ref error::driver_log and @ref reliability, "The driver's log in errors").
///
/// It is on by default, unless the environment variable `CUDRV_DRIVER_LOG` is `0` when the driver is
/// loaded. While it is off, the callback cudrv registered with the driver records nothing and errors carry
/// no lines. Switching it on where it was off at load registers the callback then. Never throws.
/// @code
/// const bool was = cudrv::set_driver_log_enabled(false);   // errors without the driver's lines
/// // ...
/// cudrv::set_driver_log_enabled(was);
/// @endcode
/// @param enabled whether errors carry the driver's lines
/// @return the previous setting
bool set_driver_log_enabled(bool enabled) noexcept;

/// @brief Whether the driver's log in errors is switched on (@ref set_driver_log_enabled). Never throws.
[[nodiscard]] bool driver_log_enabled() noexcept;

/// @brief Whether errors carry the driver's log now: the driver is loaded (this call loads it), has
/// `cuLogsRegisterCallback` (CUDA 12.9 and later; cudrv built with CUDA 12.9 headers or later), cudrv's
/// callback is registered, and the log is switched on. Never throws.
[[nodiscard]] bool driver_log_active() noexcept;

}  // namespace cudrv
