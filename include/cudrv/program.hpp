/// @file program.hpp
/// @brief Run-time compilation of CUDA C++ with NVRTC: @ref cudrv::program, its options and results.
///
/// Layer: code (docs/design.md, "Source layers").
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cudrv/object_code.hpp"

namespace cudrv {

/// @brief NVRTC's precompiled headers (NVRTC 12.8 and newer), the `pch` field of @ref compile_options.
///
/// A precompiled header (PCH) is NVRTC's parsed state after the leading `#include` directives of a
/// program. NVRTC keeps it in a heap of the process (see @ref nvrtc_pch_heap_size): a PCH created by
/// one compilation can be used by later compilations **in the same process** whose programs start
/// with the same includes and use the same options; NVRTC refuses a PCH file written by another
/// process (warning 20282, then it compiles without it). With CUB's `BlockReduce` a compilation that
/// uses a PCH takes a fraction of one that parses the headers (see the measured figures in
/// docs/interop.md). The output is the same either way.
///
/// @code
/// cudrv::compile_options options{.arch = "sm_90", .toolkit_headers = true, .pch = {.automatic = true}};
/// auto first = prog_a.compile(cudrv::code_kind::cubin, options);   // creates the PCH
/// auto later = prog_b.compile(cudrv::code_kind::cubin, options);   // same includes: uses it
/// // first.pch == cudrv::pch_status::created
/// @endcode
struct pch_options {
  /// @brief Automatic PCH (`-pch`): NVRTC creates a PCH for the program's leading includes when it has
  /// none that fits, and uses one that fits.
  bool automatic = false;
  /// @brief Create a PCH under this name (`--create-pch=`); empty: none. Not with @ref automatic or
  /// @ref use.
  std::string create{};
  /// @brief Use the PCH of this name (`--use-pch=`), created earlier in this process; empty: none. Not
  /// with @ref automatic or @ref create.
  std::string use{};
  /// @brief The directory of the PCH names (`--pch-dir=`): where automatic PCH looks for and creates
  /// them, and the prefix of a relative @ref create or @ref use name. Empty: NVRTC's default. Needs a
  /// mode (@ref automatic, @ref create or @ref use).
  std::string directory{};
  /// @brief In automatic mode, say in the log why each PCH that exists could not be used
  /// (`--pch-verbose=`); unset: NVRTC's default (true).
  std::optional<bool> verbose{};
  /// @brief Say in the log when a PCH was created or used (`--pch-messages=`); unset: NVRTC's default
  /// (true).
  std::optional<bool> messages{};
  /// @brief Instantiate templates before creating the PCH (`--instantiate-templates-in-pch=`): a
  /// larger PCH, cheaper to use; unset: NVRTC's default (true).
  std::optional<bool> instantiate_templates{};

  /// @brief Whether any PCH mode is set (@ref automatic, @ref create or @ref use).
  [[nodiscard]] bool enabled() const noexcept { return automatic || !create.empty() || !use.empty(); }
};

/// @brief The options of one NVRTC compilation.
///
/// Every field has a neutral default, so designated initializers name only what differs:
/// `{.arch = "sm_90", .cpp_standard = "c++20", .defines = {"N=256"}}`. Fields are checked before
/// NVRTC is called (@ref invalid_argument_error names the field); @ref extra_options are passed
/// through unchecked and NVRTC rejects unknown ones with a @ref compile_error.
///
/// @code
/// cudrv::compile_options options{.arch = "sm_90", .cpp_standard = "c++20", .defines = {"BLOCK=128"}};
/// options.ftz = true;
/// for (const std::string& o : options.to_nvrtc_options(cudrv::code_kind::cubin)) {
///   std::cout << o << ' ';   // -arch=sm_90 -std=c++20 -ftz=true -DBLOCK=128
/// }
/// @endcode
struct compile_options {
  /// @brief The target architecture: `"sm_90"`, `"sm_90a"`, `"compute_90"`, `"90"`, `"90a"` or
  /// `"100f"`. Only the number and the `a`/`f` suffix matter: PTX is compiled for `compute_NN`,
  /// a cubin for `sm_NN`. Empty: the architecture of the current context's device, or, with no
  /// context current, that of the visible devices when they all have the same one, asked from the
  /// driver (no context is created); without a usable driver or device, or with devices of different
  /// architectures and none current, the compilation throws @ref invalid_argument_error asking for an
  /// explicit value.
  std::string arch{};
  /// @brief The C++ dialect, `"c++NN"` (`-std=`); NVRTC 13.0 knows `c++03`, `c++11`, `c++14`,
  /// `c++17` (its default) and `c++20`. Empty: NVRTC's default.
  std::string cpp_standard{};
  /// @brief Macros to define, `"NAME"` or `"NAME=VALUE"` (`-D`); NAME must be an identifier.
  std::vector<std::string> defines{};
  /// @brief Directories searched for `#include` after the program's own @ref header list (`-I`).
  std::vector<std::string> include_paths{};
  /// @brief Also search the CUDA toolkit's headers, after the @ref include_paths, first its CCCL directory
  /// (`<cub/...>`, `<thrust/...>`, `<cuda/std/...>`, `<cuda/barrier>`) then its include directory
  /// (`<cuda_fp16.h>`, `<cuda_runtime.h>`), as @ref find_toolkit_headers finds them. NVRTC itself
  /// knows none of them.
  bool toolkit_headers = false;
  /// @brief Relocatable device code (`-rdc=true`), for calls across separately compiled units.
  bool relocatable_device_code = false;
  /// @brief Emit LTO-IR for @ref linker (`-dlto`). Only valid for the target @ref code_kind::ltoir,
  /// which implies it.
  bool link_time_optimization = false;
  /// @brief Line information for profilers (`-lineinfo`).
  bool line_info = false;
  /// @brief Device debug information, optimisations off (`-G`).
  bool debug = false;
  /// @brief Fast, less precise math (`--use_fast_math`; implies ftz, approximate div and sqrt).
  bool fast_math = false;
  /// @brief Flush denormals to zero (`-ftz=`); unset: NVRTC's default.
  std::optional<bool> ftz{};
  /// @brief IEEE-rounded division (`-prec-div=`); unset: NVRTC's default.
  std::optional<bool> prec_div{};
  /// @brief IEEE-rounded square root (`-prec-sqrt=`); unset: NVRTC's default.
  std::optional<bool> prec_sqrt{};
  /// @brief Contract multiplies and adds into FMAs (`-fmad=`); unset: NVRTC's default.
  std::optional<bool> fmad{};
  /// @brief The most registers a thread may use (`-maxrregcount=`); must be positive.
  std::optional<int> max_registers{};
  /// @brief Precompiled headers (NVRTC 12.8+); by default none.
  pch_options pch{};
  /// @brief Further NVRTC options, passed as given after all others, e.g. `"-default-device"`.
  std::vector<std::string> extra_options{};

  /// @brief The exact option list given to NVRTC for @p target.
  ///
  /// The order is fixed: `-arch`, `-std`, `-rdc`, `-dlto`, `-lineinfo`, `-G`, `--use_fast_math`,
  /// `-ftz`, `-prec-div`, `-prec-sqrt`, `-fmad`, `-maxrregcount`, `-D...`, `-I...` (the toolkit's
  /// directories last, with @ref toolkit_headers), the PCH options (`-pch`, `--create-pch=`,
  /// `--use-pch=`, `--pch-dir=`, `--pch-verbose=`, `--pch-messages=`,
  /// `--instantiate-templates-in-pch=`), then @ref extra_options. An empty @ref arch is resolved here,
  /// through the driver.
  /// @param target @ref code_kind::ptx, @ref code_kind::cubin or @ref code_kind::ltoir
  /// @throws invalid_argument_error for another target or an invalid field (two PCH modes at once, a
  ///   PCH directory or flag without a mode)
  /// @throws library_unavailable_error with @ref toolkit_headers when the toolkit's headers cannot be
  ///   found
  [[nodiscard]] std::vector<std::string> to_nvrtc_options(code_kind target) const;
};

/// @brief A header made available to a @ref program by name: `#include "name"` finds it without
/// a file on disk.
struct header {
  std::string name{};    ///< The name `#include` uses, e.g. `"my_header.cuh"` or `"lib/vec.h"`.
  std::string source{};  ///< The header's text.
};

/// @brief What became of the precompiled header a compilation was asked to create
/// (`nvrtcGetPCHCreateStatus`).
enum class pch_status {
  not_requested,   ///< No PCH option was given (or the result came from a @ref compile_cache entry).
  created,         ///< A PCH was created.
  not_attempted,   ///< None was created: an existing one was used, or automatic mode chose not to.
  heap_exhausted,  ///< The PCH heap was too small: see @ref compile_result::pch_heap_required and
                   ///< @ref set_nvrtc_pch_heap_size.
  failed,          ///< An error prevented the PCH's creation (the log says which); the code is still valid.
};

/// @brief What @ref program::compile produces: the code, NVRTC's log and the lowered names.
struct compile_result {
  /// @brief The compiled code, of the kind asked for; named after the program.
  object_code code{};
  /// @brief NVRTC's log, kept on success too (warnings); empty when NVRTC had nothing to say.
  std::string log{};
  /// @brief Each name expression given to the compilation, in order, with its lowered (mangled)
  /// name, e.g. `{"saxpy<float>", "_Z5saxpyIfEvT_PKS0_PS0_i"}`.
  std::vector<std::pair<std::string, std::string>> lowered_names{};
  /// @brief With a PCH option, whether the compilation created a PCH.
  pch_status pch = pch_status::not_requested;
  /// @brief With @ref pch_status::created or @ref pch_status::heap_exhausted, the PCH heap size the
  /// PCH needs, in bytes (`nvrtcGetPCHHeapSizeRequired`); 0 otherwise.
  std::size_t pch_heap_required = 0;

  /// @brief The lowered name of one of the name expressions, the name to look the kernel up by.
  /// @param expression the expression exactly as it was given to the compilation
  /// @throws invalid_argument_error when it was not given; the message lists those that were
  [[nodiscard]] const std::string& lowered_name(std::string_view expression) const;
};

/// @brief A CUDA C++ source compiled at run time by NVRTC.
///
/// A program is a plain value: its name (used in messages, `__FILE__` and NVRTC's log), its
/// source and the headers it may include by name. Each @ref compile call creates and destroys its
/// own NVRTC program, so one `program` can be compiled for several targets and options, from
/// several threads at once. NVRTC is loaded on first use (see @ref nvrtc_version); it is never
/// linked.
///
/// Templates and overloads have mangled names; pass the C++ expressions naming them as name
/// expressions and read the lowered names from the result:
/// @code
/// cudrv::program prog("saxpy.cu", R"(
///   #include "scale.cuh"
///   template <class T>
///   __global__ void saxpy(T a, const T* x, T* y, int n) {
///     int i = blockIdx.x * blockDim.x + threadIdx.x;
///     if (i < n) y[i] = scale(a, x[i]) + y[i];
///   })",
///   {{"scale.cuh", "template <class T> __device__ T scale(T a, T x) { return a * x; }"}});
///
/// cudrv::compile_result r = prog.compile(cudrv::code_kind::cubin, {.arch = "sm_90", .cpp_standard = "c++20"},
///                                        {"saxpy<float>", "saxpy<double>"});
/// std::string kernel = r.lowered_name("saxpy<float>");   // _Z5saxpyIfEvT_PKS0_PS0_i
/// r.code.write_to_file("saxpy.cubin");
/// if (!r.log.empty()) std::cerr << r.log;                // warnings
/// @endcode
class program {
 public:
  /// @brief Makes a program.
  /// @param name the program's name, e.g. `"saxpy.cu"`
  /// @param source the CUDA C++ source
  /// @param headers headers the source may `#include` by name
  /// @throws invalid_argument_error when a header has an empty name
  program(std::string name, std::string source, std::vector<header> headers = {});

  /// @brief The name given at construction.
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  /// @brief The source.
  [[nodiscard]] const std::string& source() const noexcept { return source_; }
  /// @brief The headers available by name.
  [[nodiscard]] const std::vector<header>& headers() const noexcept { return headers_; }

  /// @brief Compiles the program.
  ///
  /// @param target @ref code_kind::ptx, @ref code_kind::cubin or @ref code_kind::ltoir (which
  ///   implies `-dlto`)
  /// @param options the compile options; see @ref compile_options::to_nvrtc_options
  /// @param name_expressions C++ expressions naming `__global__` functions or `__device__`
  ///   variables (`"saxpy<float>"`, `"&counter"`) whose lowered names the result reports
  /// @return the code, the log and the lowered names
  /// @throws invalid_argument_error for a bad target or option, before NVRTC is called
  /// @throws compile_error when NVRTC refuses an option or the program (its log in
  ///   @ref jit_error::log), or a name expression
  /// @throws library_unavailable_error when NVRTC cannot be loaded
  [[nodiscard]] compile_result compile(code_kind target, const compile_options& options = {},
                                       const std::vector<std::string>& name_expressions = {}) const;

 private:
  std::string name_;
  std::string source_;
  std::vector<header> headers_;
};

/// @brief The version of the NVRTC library cudrv loaded, as `1000 * major + 10 * minor` (13000 for
/// NVRTC 13.0), the encoding of `CUDA_VERSION`. Loads NVRTC on first use.
/// @throws library_unavailable_error when NVRTC cannot be loaded: it is searched as
///   `libnvrtc.so.<CUDA major of cudrv's headers>`, then in `/usr/local/cuda/lib64` and
///   `/usr/local/cuda/lib`; the environment variable `CUDRV_LIBNVRTC`, when set, names the only file
///   tried
[[nodiscard]] int nvrtc_version();

/// @brief The size of NVRTC's PCH heap in bytes (`nvrtcGetPCHHeapSize`; 256 MiB by default in
/// NVRTC 13.0), the memory of the process in which precompiled headers live.
/// @throws not_supported_error when the loaded NVRTC is older than 12.8 (no precompiled headers)
/// @throws library_unavailable_error when NVRTC cannot be loaded
[[nodiscard]] std::size_t nvrtc_pch_heap_size();

/// @brief Sets the size of NVRTC's PCH heap (`nvrtcSetPCHHeapSize`); the precompiled headers created so
/// far are lost. Use it when a compilation reports @ref pch_status::heap_exhausted, with
/// @ref compile_result::pch_heap_required, then compile again.
/// @throws not_supported_error when the loaded NVRTC is older than 12.8
/// @throws compile_error when NVRTC refuses the size
/// @throws library_unavailable_error when NVRTC cannot be loaded
void set_nvrtc_pch_heap_size(std::size_t bytes);

/// @brief The CUDA toolkit's header directories, found for run-time compilation: NVRTC knows none of
/// the toolkit's headers (not even `<cuda_fp16.h>`), so a kernel that includes CUB, Thrust,
/// `<cuda/std/...>` or `<cuda/barrier>` needs these directories in its include path
/// (@ref compile_options::toolkit_headers adds them).
///
/// @code
/// const cudrv::toolkit_header_dirs& tk = cudrv::find_toolkit_headers();
/// std::printf("CCCL %d in %s\n", tk.cccl_version, tk.cccl.c_str());   // CCCL 3000001 in
/// /usr/local/cuda-13.0/include/cccl
/// @endcode
struct toolkit_header_dirs {
  /// @brief The toolkit's include directory (`cuda_runtime.h`, `cuda_fp16.h`), canonical.
  std::string include{};
  /// @brief Its CCCL directory (`cub/`, `thrust/`, `cuda/std/`, `nv/`), canonical: `<include>/cccl`
  /// (CUDA 13), or @ref include itself when CCCL lies there (CUDA 12).
  std::string cccl{};
  /// @brief `CCCL_VERSION` of those headers, `major * 1000000 + minor * 1000 + patch` (3000001 for 3.0.1).
  int cccl_version = 0;
  /// @brief Where they were found: `"CUDA_PATH"`, `"CUDA_HOME"`, `"NVRTC"` (next to the loaded library) or
  /// `"build"` (the toolkit cudrv was built with).
  std::string found_by{};

  /// @brief The directories to search, in order: @ref cccl, then @ref include (once when equal).
  [[nodiscard]] std::vector<std::string> include_paths() const;
};

/// @brief Finds the CUDA toolkit's headers once per process (later calls return the same object).
///
/// Looked for, in order, where a directory holds CCCL's `cuda/std/__cccl/version.h`: `$CUDA_PATH/include`
/// when `CUDA_PATH` is set; `$CUDA_HOME/include` when `CUDA_HOME` is set; the `include` directory next to
/// the loaded NVRTC's `lib64`/`lib` (so the headers match the compiler); the toolkit cudrv was built with. In each,
/// `include/cccl` (CUDA 13) is tried before `include` (CUDA 12).
/// @throws library_unavailable_error naming every directory tried when none holds CCCL
[[nodiscard]] const toolkit_header_dirs& find_toolkit_headers();

/// @brief The architectures the loaded NVRTC can compile for, as `10 * major + minor`, ascending
/// (`{75, 80, 86, 87, 88, 89, 90, 100, ...}` for NVRTC 13.0).
/// @throws library_unavailable_error when NVRTC cannot be loaded
[[nodiscard]] std::vector<int> nvrtc_supported_archs();

}  // namespace cudrv
