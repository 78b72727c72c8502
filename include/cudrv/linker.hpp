/// @file linker.hpp
/// @brief Run-time linking of device code with nvJitLink: @ref cudrv::linker and its options.
///
/// Layer: code (docs/design.md, "Source layers").
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cudrv/object_code.hpp"

namespace cudrv {

/// @brief The options of one nvJitLink link.
///
/// @code
/// cudrv::link_options options{.arch = "sm_90", .link_time_optimization = true};
/// options.output = cudrv::code_kind::ptx;
/// options.to_nvjitlink_options();   // {"-arch=sm_90", "-lto", "-ptx"}
/// @endcode
struct link_options {
  /// @brief The target architecture, spelled as for @ref compile_options::arch (`"sm_90"`,
  /// `"compute_90a"`, `"90"`); nvJitLink always receives `-arch=sm_NN`. Empty: as for
  /// @ref compile_options::arch (the current context's device, or the one architecture of all visible
  /// devices).
  std::string arch{};
  /// @brief Link-time optimisation (`-lto`); required to add @ref code_kind::ltoir inputs.
  bool link_time_optimization = false;
  /// @brief The optimisation level (`-O`): 0 or 3, the two levels nvJitLink (13.0) accepts; others
  /// are refused with an invalid_argument_error. Unset: nvJitLink's default (3).
  std::optional<int> optimization_level{};
  /// @brief Device debug information (`-g`).
  bool debug = false;
  /// @brief Line information for profilers (`-lineinfo`).
  bool line_info = false;
  /// @brief Flush denormals to zero (`-ftz=`); unset: nvJitLink's default.
  std::optional<bool> ftz{};
  /// @brief IEEE-rounded division (`-prec-div=`); unset: nvJitLink's default.
  std::optional<bool> prec_div{};
  /// @brief IEEE-rounded square root (`-prec-sqrt=`); unset: nvJitLink's default.
  std::optional<bool> prec_sqrt{};
  /// @brief Contract multiplies and adds into FMAs (`-fma=`); unset: nvJitLink's default.
  std::optional<bool> fmad{};
  /// @brief The most registers a thread may use (`-maxrregcount=`); must be positive.
  std::optional<int> max_registers{};
  /// @brief Resource usage and other messages in @ref linker::info_log (`-verbose`).
  bool verbose = false;
  /// @brief What @ref linker::link produces: @ref code_kind::cubin, or @ref code_kind::ptx (`-ptx`),
  /// which nvJitLink can only emit from a link-time-optimised link: it needs
  /// @ref link_time_optimization and LTO-IR inputs.
  code_kind output = code_kind::cubin;
  /// @brief Further nvJitLink options, passed as given after all others, e.g. `"-split-compile=0"`.
  std::vector<std::string> extra_options{};

  /// @brief The exact option list given to nvJitLink, in the order `-arch`, `-lto`, `-ptx`, `-O`,
  /// `-g`, `-lineinfo`, `-ftz`, `-prec-div`, `-prec-sqrt`, `-fma`, `-maxrregcount`, `-verbose`, then
  /// @ref extra_options. An empty @ref arch is resolved here, through the driver.
  /// @throws invalid_argument_error for an invalid field or combination
  [[nodiscard]] std::vector<std::string> to_nvjitlink_options() const;
};

/// @brief One nvJitLink link: add inputs, then @ref link once.
///
/// It owns the nvJitLink handle and destroys it in its destructor; it is move-only. nvJitLink is
/// loaded on first use and never linked. Inputs are PTX, cubins, fatbins, LTO-IR, host objects and
/// archives with embedded device code (@ref code_kind); their names appear in errors and logs.
///
/// @code
/// // Two units compiled separately to LTO-IR, one calling a __device__ function of the other.
/// cudrv::compile_options copts{.arch = "sm_90", .relocatable_device_code = true};
/// auto main_ir = cudrv::program("main.cu", main_source).compile(cudrv::code_kind::ltoir, copts).code;
/// auto util_ir = cudrv::program("util.cu", util_source).compile(cudrv::code_kind::ltoir, copts).code;
///
/// cudrv::linker lk({.arch = "sm_90", .link_time_optimization = true});
/// cudrv::object_code cubin = lk.add(main_ir).add(util_ir).link();
/// cudrv::library lib(cubin);
/// @endcode
///
/// Failures throw @ref link_error with nvJitLink's error log; its context names the input being
/// added, or all inputs for a failed link (an unresolved symbol is named in the log).
class linker {
 public:
  /// @brief Creates the nvJitLink handle.
  /// @throws invalid_argument_error for invalid options (see @ref link_options::to_nvjitlink_options)
  /// @throws link_error when nvJitLink refuses the options (an unknown extra option)
  /// @throws library_unavailable_error when nvJitLink cannot be loaded: it is searched as
  ///   `libnvJitLink.so.<CUDA major of cudrv's headers>`, then in `/usr/local/cuda/lib64` and
  ///   `/usr/local/cuda/lib`; the environment variable `CUDRV_LIBNVJITLINK`, when set, names the only
  ///   file tried
  explicit linker(const link_options& options = {});
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  linker(const linker&) = delete;
  linker& operator=(const linker&) = delete;
  /// @}
  /// @brief Takes over the handle and the inputs; @p other is left empty.
  linker(linker&& other) noexcept;
  /// @brief Destroys the current handle, then takes over @p other's.
  linker& operator=(linker&& other) noexcept;
  /// @brief Destroys the handle; a failure goes to the destruction error handler.
  ~linker();

  /// @brief Whether the linker holds a handle (false after a move).
  [[nodiscard]] explicit operator bool() const noexcept { return handle_ != nullptr; }

  /// @brief Adds one input.
  /// @param code the input; its @ref object_code::name names it in logs and errors
  /// @return `*this`, to chain adds
  /// @throws invalid_argument_error for an empty input, an LTO-IR input without
  ///   @ref link_options::link_time_optimization, after @ref link or on an empty linker
  /// @throws invalid_image_error when a PTX, cubin or fatbin input fails the checks of
  ///   @ref object_code::validate, before nvJitLink sees it
  /// @throws link_error when nvJitLink refuses the input (wrong type, bad PTX, wrong architecture)
  linker& add(const object_code& code);
  /// @brief Adds a file, its kind taken from the extension (see @ref object_code::from_file).
  /// @throws invalid_argument_error for an unreadable file or an unknown extension
  linker& add_file(const std::string& path);
  /// @brief Adds a file of the given kind.
  /// @throws invalid_argument_error for an unreadable file
  linker& add_file(const std::string& path, code_kind kind);

  /// @brief Links the inputs and returns the linked cubin, or PTX for @ref link_options::output
  /// `ptx`. May be called once; the linker keeps its logs afterwards.
  /// @throws invalid_argument_error when called a second time, with no input, or on an empty linker
  /// @throws link_error when the link fails (an unresolved symbol, an error in LTO)
  [[nodiscard]] object_code link();

  /// @brief nvJitLink's information log (resource usage with @ref link_options::verbose, warnings).
  [[nodiscard]] std::string info_log() const;
  /// @brief nvJitLink's error log, accumulated over all calls.
  [[nodiscard]] std::string error_log() const;

 private:
  void* handle_ = nullptr;  // nvJitLinkHandle
  code_kind output_ = code_kind::cubin;
  bool lto_ = false;
  bool linked_ = false;
  std::string target_;  // "sm_90", for messages
  std::vector<std::string> inputs_;
};

/// @brief The version of the nvJitLink library cudrv loaded, as `1000 * major + 10 * minor`
/// (13000 for nvJitLink 13.0). Loads nvJitLink on first use.
/// @throws library_unavailable_error when nvJitLink cannot be loaded, or is older than 12.3 and
///   cannot report its version
[[nodiscard]] int nvjitlink_version();

}  // namespace cudrv
