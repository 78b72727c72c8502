/// @file nvvm_program.hpp
/// @brief Run-time compilation of NVVM IR with libNVVM: @ref cudrv::nvvm_program, its modules and
/// options.
///
/// NVVM IR is the LLVM IR dialect that front ends other than CUDA C++ (Numba, Julia, MLIR- and
/// Rust-based compilers) emit for NVIDIA GPUs; libNVVM turns it into PTX or LTO-IR. It is what
/// cuda.core's `Program(code, "nvvm", options)` wraps. libNVVM is loaded at run time on first use,
/// like NVRTC; it is never linked. Part of the opt-in <cudrv/rtc.hpp>.
///
/// Layer: code (docs/design.md, "Source layers").
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cudrv/program.hpp"

namespace cudrv {

/// @brief One NVVM IR module of an @ref nvvm_program, LLVM IR as text (`.ll`) or bitcode (`.bc`).
///
/// libNVVM tells the two apart by the bytes: bitcode starts with `BC\xC0\xDE` (or the bitcode
/// wrapper's magic), anything else is parsed as text.
struct nvvm_module {
  /// @brief The module's name, used in libNVVM's log (`"kernel.ll"`); must not be empty.
  std::string name{};
  /// @brief The IR, text or bitcode; must not be empty.
  std::string ir{};
};

/// @brief The options of one libNVVM compilation.
///
/// Every field has a neutral default, so designated initializers name only what differs:
/// `{.arch = "sm_90", .libdevice = true}`. Fields are checked before libNVVM is called
/// (@ref invalid_argument_error names the field); @ref extra_options are passed through unchecked
/// and libNVVM rejects unknown ones with a @ref compile_error.
///
/// @code
/// cudrv::nvvm_options options{.arch = "sm_90", .opt_level = 3, .fast_math = true};
/// for (const std::string& o : options.to_nvvm_options(cudrv::code_kind::ptx)) {
///   std::cout << o << ' ';   // -arch=compute_90 -opt=3 -ftz=1 -prec-div=0 -prec-sqrt=0 -fma=1
/// }
/// @endcode
struct nvvm_options {
  /// @brief The target architecture, in any spelling @ref compile_options::arch accepts (`"sm_90"`,
  /// `"compute_90a"`, `"100f"`); libNVVM always gets `-arch=compute_NN`. Empty: the architecture of
  /// the current context's device (or of the visible devices when they agree), asked from the driver.
  std::string arch{};
  /// @brief The optimisation level (`-opt=`), 0 (none) to 3 (libNVVM's default); unset: the default.
  std::optional<int> opt_level{};
  /// @brief Device debug information (`-g`).
  bool debug = false;
  /// @brief Line information for profilers (`-generate-line-info`).
  bool line_info = false;
  /// @brief Fast, less precise math: each of @ref ftz, @ref prec_div, @ref prec_sqrt and @ref fma that
  /// is unset becomes the fast choice (`-ftz=1 -prec-div=0 -prec-sqrt=0 -fma=1`, what nvcc's
  /// `--use_fast_math` means for these); one that is set keeps its value.
  bool fast_math = false;
  /// @brief Flush single-precision denormals to zero (`-ftz=`); unset: libNVVM's default (no).
  std::optional<bool> ftz{};
  /// @brief IEEE-rounded single-precision division (`-prec-div=`); unset: libNVVM's default (yes).
  std::optional<bool> prec_div{};
  /// @brief IEEE-rounded single-precision square root (`-prec-sqrt=`); unset: libNVVM's default (yes).
  std::optional<bool> prec_sqrt{};
  /// @brief Contract multiplies and adds into FMAs (`-fma=`); unset: libNVVM's default (yes).
  std::optional<bool> fma{};
  /// @brief Link the toolkit's libdevice (`libdevice.10.bc`, found by @ref find_libdevice) as a lazy
  /// module, so that calls to its `__nv_` math functions (`__nv_sinf`, `__nv_expf`) resolve; only
  /// the functions the program calls are kept.
  bool libdevice = false;
  /// @brief Verify the program (`nvvmVerifyProgram`) before compiling it, as cuda.core does: libNVVM's
  /// compilation alone accepts some IR that breaks the NVVM IR rules (a wrong data layout).
  bool verify = true;
  /// @brief Further libNVVM options, passed as given after all others, e.g. `"-jump-table-density=0"`.
  std::vector<std::string> extra_options{};

  /// @brief The exact option list given to libNVVM for @p target.
  ///
  /// The order is fixed: `-arch=compute_NN`, `-opt=`, `-g`, `-generate-line-info`, `-ftz=`,
  /// `-prec-div=`, `-prec-sqrt=`, `-fma=`, `-gen-lto` (for @ref code_kind::ltoir), then
  /// @ref extra_options. An empty @ref arch is resolved here, through the driver.
  /// @param target @ref code_kind::ptx or @ref code_kind::ltoir
  /// @throws invalid_argument_error for another target or an invalid field
  [[nodiscard]] std::vector<std::string> to_nvvm_options(code_kind target) const;
};

/// @brief NVVM IR compiled at run time by libNVVM, to PTX that @ref library loads or to LTO-IR that
/// @ref linker links.
///
/// A program is a plain value, like a @ref program, made of its name (the name of the code it produces, and
/// the context of its errors) and its modules, added in order and linked together by libNVVM. Each
/// @ref verify and @ref compile call creates and destroys its own libNVVM program, so one
/// `nvvm_program` can be compiled for several targets and options, from several threads at once.
/// @ref compile_cache caches its compilations like NVRTC's.
///
/// A kernel is a function with the `ptx_kernel` calling convention or listed in `!nvvm.annotations`
/// with `"kernel"`; libNVVM 2.0 (CUDA 12 and 13) reads LLVM 7-era IR (typed pointers such as
/// `float*`) for every architecture and opaque pointers (`ptr`) only from `compute_100` on.
/// @code
/// cudrv::nvvm_program prog("scale.ll", ir_text);   // one module; add_module() adds more
/// cudrv::compile_result built = prog.compile(cudrv::code_kind::ptx, {.arch = "sm_90", .libdevice = true});
/// cudrv::library lib(built, dev);
/// cudrv::kernel k = lib.get_kernel("scale");
/// @endcode
class nvvm_program {
 public:
  /// @brief Makes a program of one module, named after the program.
  /// @param name the program's name, e.g. `"saxpy.ll"`; also the module's name
  /// @param ir the module's IR, text or bitcode
  /// @throws invalid_argument_error when @p name or @p ir is empty
  nvvm_program(std::string name, std::string ir);

  /// @brief Makes a program of several modules, linked together in this order.
  /// @param name the program's name (of the code it produces, and in messages)
  /// @param modules the modules; at least one
  /// @throws invalid_argument_error when @p name is empty, there is no module, or a module has an empty
  ///   name or IR
  nvvm_program(std::string name, std::vector<nvvm_module> modules);

  /// @brief Adds a module after the others.
  /// @return this program, for chaining
  /// @throws invalid_argument_error when @p module_name or @p ir is empty
  nvvm_program& add_module(std::string module_name, std::string ir);

  /// @brief The name given at construction.
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  /// @brief The modules, in the order libNVVM gets them.
  [[nodiscard]] const std::vector<nvvm_module>& modules() const noexcept { return modules_; }

  /// @brief Checks the program against the NVVM IR rules for @p options (`nvvmVerifyProgram`)
  /// without compiling it; @ref nvvm_options::libdevice adds libdevice first, so calls to it verify.
  /// @return libNVVM's log (empty when it had nothing to say)
  /// @throws invalid_argument_error for an invalid option, before libNVVM is called
  /// @throws compile_error when libNVVM finds the IR invalid or refuses an option (its log in
  ///   @ref jit_error::log; @ref error::source is @ref error_source::nvvm)
  /// @throws library_unavailable_error when libNVVM or, with @ref nvvm_options::libdevice, libdevice
  ///   cannot be found
  std::string verify(const nvvm_options& options = {}) const;

  /// @brief Compiles the program: verifies it (unless @ref nvvm_options::verify is false), then
  /// compiles it.
  /// @param target @ref code_kind::ptx or @ref code_kind::ltoir (`-gen-lto`, for @ref linker)
  /// @param options the options; see @ref nvvm_options::to_nvvm_options
  /// @return the code, named after the program, and libNVVM's log; no lowered names (NVVM IR names
  ///   are not mangled by libNVVM)
  /// @throws invalid_argument_error for a bad target or option, before libNVVM is called
  /// @throws compile_error when libNVVM refuses a module, an option or the program (its log in
  ///   @ref jit_error::log; @ref error::source is @ref error_source::nvvm)
  /// @throws library_unavailable_error when libNVVM or, with @ref nvvm_options::libdevice, libdevice
  ///   cannot be found
  [[nodiscard]] compile_result compile(code_kind target = code_kind::ptx, const nvvm_options& options = {}) const;

 private:
  std::string name_;
  std::vector<nvvm_module> modules_;
};

/// @brief The version of the libNVVM cudrv loaded and of the NVVM IR it reads.
struct nvvm_version_info {
  int major = 0;        ///< libNVVM's version (`nvvmVersion`): 2 in CUDA 12 and 13.
  int minor = 0;        ///< libNVVM's minor version.
  int ir_major = 0;     ///< The NVVM IR version it reads (`nvvmIRVersion`), the `!nvvmir.version` metadata.
  int ir_minor = 0;     ///< The NVVM IR minor version.
  int debug_major = 0;  ///< The version of the debug metadata it reads.
  int debug_minor = 0;  ///< The debug metadata's minor version.
};

/// @brief The versions of the loaded libNVVM. Loads libNVVM on first use.
/// @throws library_unavailable_error when libNVVM cannot be loaded: it is searched as `libnvvm.so.4`,
///   then in `/usr/local/cuda/nvvm/lib64`, `/usr/local/cuda/lib64` and `/usr/local/cuda/lib`; the
///   environment variable `CUDRV_LIBNVVM`, when set, names the only file tried
[[nodiscard]] nvvm_version_info nvvm_version();

/// @brief The toolkit's libdevice (`libdevice.10.bc`), the bitcode library of `__nv_` math functions
/// that @ref nvvm_options::libdevice links. Found once per process.
///
/// Looked for next to the loaded libNVVM (`<its directory>/../libdevice`, the toolkit's
/// `nvvm/lib64` layout, then `<its directory>/../nvvm/libdevice`), then in
/// `$CUDA_PATH/nvvm/libdevice`, `$CUDA_HOME/nvvm/libdevice` and `/usr/local/cuda/nvvm/libdevice`; the
/// environment variable `CUDRV_LIBDEVICE`, when set, names the only file tried.
/// @return the path of the file found
/// @throws library_unavailable_error naming every path tried when none holds it, or when libNVVM
///   cannot be loaded
[[nodiscard]] const std::string& find_libdevice();

}  // namespace cudrv
