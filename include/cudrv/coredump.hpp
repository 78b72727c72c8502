/// @file coredump.hpp
/// @brief GPU coredump settings, process-wide and per context (`cuCoredumpSetAttribute[Global]`), and
/// @ref cudrv::scoped_coredump_settings, which sets some and restores their previous values.
///
/// Opt-in (not in the umbrella): debugging support that most programs never use. See @ref gpu-coredumps for
/// what the driver needs to write a core file, and a worked example.
///
/// Layer: driver (docs/design.md, "Source layers").
#pragma once

#include <cstddef>
#include <optional>  // the settings a scope changes: each one is either named or left alone
#include <string>

#include "cudrv/context.hpp"

namespace cudrv {

/// @brief What a GPU core dump leaves out, and whether a GPU exception aborts the host process
/// (`CUCoredumpGenerationFlags`, CUDA 12.5+ drivers). Combine with `|`.
enum class coredump_flags : unsigned {
  none = 0,                                ///< Everything the driver can reach (`CU_COREDUMP_DEFAULT_FLAGS`).
  skip_nonrelocated_elf_images = 1u << 0,  ///< No code images not relocated at run time.
  skip_global_memory = 1u << 1,            ///< No device global memory that belongs to no context.
  skip_shared_memory = 1u << 2,            ///< No shared memory of the dumped kernel's warp.
  skip_local_memory = 1u << 3,             ///< No local memory of the kernel.
  skip_abort = 1u << 4,                    ///< A GPU exception does not `abort()` the host process.
  skip_constbank_memory = 1u << 5,         ///< No constant-bank memory.
  /// @brief All the `skip_*_memory` and image flags, not @ref coredump_flags::skip_abort
  /// (`CU_COREDUMP_LIGHTWEIGHT_FLAGS`).
  lightweight = (1u << 0) | (1u << 1) | (1u << 2) | (1u << 3) | (1u << 5),
};

/// @brief Both sets of flags.
[[nodiscard]] constexpr coredump_flags operator|(coredump_flags a, coredump_flags b) noexcept {
  return static_cast<coredump_flags>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}
/// @brief The flags in both.
[[nodiscard]] constexpr coredump_flags operator&(coredump_flags a, coredump_flags b) noexcept {
  return static_cast<coredump_flags>(static_cast<unsigned>(a) & static_cast<unsigned>(b));
}

/// @brief GPU coredump settings (`CUcoredumpSettings`): each member is set when it holds a value and left
/// alone when empty. A read (@ref coredump::get_global, @ref coredump::get) fills every member it reads.
struct coredump_settings {
  /// @brief The longest file name or pipe name the driver takes (cuda.h: "up to 1023 characters").
  static constexpr std::size_t max_name_length = 1023;

  std::optional<bool>
      enable_on_exception{};  ///< A GPU exception writes a core dump (`CU_COREDUMP_ENABLE_ON_EXCEPTION`).
  /// @brief The host process also dumps core (`CU_COREDUMP_TRIGGER_HOST`; deprecated since CUDA 12.5 for
  /// @ref coredump_flags::skip_abort).
  std::optional<bool> trigger_host{};
  /// @brief No device memory or non-relocated images in the dump (`CU_COREDUMP_LIGHTWEIGHT`; deprecated since
  /// CUDA 12.5 for @ref coredump_flags::lightweight).
  std::optional<bool> lightweight{};
  /// @brief Writing to @ref pipe triggers a dump (`CU_COREDUMP_ENABLE_USER_TRIGGER`; process-wide only).
  std::optional<bool> enable_user_trigger{};
  /// @brief Where dumps are written (`CU_COREDUMP_FILE`), at most @ref max_name_length characters; the
  /// driver's default is `core.cuda.HOSTNAME.PID`, and the cuda-gdb specifiers `%h`, `%p`, `%t` expand.
  std::optional<std::string> file{};
  /// @brief The pipe watched for user triggers (`CU_COREDUMP_PIPE`; process-wide only), at most
  /// @ref max_name_length characters.
  std::optional<std::string> pipe{};
  std::optional<coredump_flags> generation_flags{};  ///< What a dump leaves out (`CU_COREDUMP_GENERATION_FLAGS`).
};

/// @brief Reading and changing the driver's coredump settings.
///
/// Every function initialises the driver first (cudrv runs `cuInit` before its first driver call): setting
/// an attribute before `cuInit` crashes driver 580.159.04 inside the driver, an order cudrv therefore never
/// produces. Environment variables (`CUDA_ENABLE_COREDUMP_ON_EXCEPTION`, `CUDA_COREDUMP_FILE`, ...) present
/// when the driver initialises take precedence over these settings for the whole process (cuda.h).
/// A context takes its initial settings from the process-wide ones when it is created, so change those
/// before the context (the primary context included) exists, or set the context's own.
namespace coredump {

/// @brief The process-wide settings, every member read (`cuCoredumpGetAttributeGlobal`).
[[nodiscard]] coredump_settings get_global();

/// @brief Sets the members of @p settings that hold a value, process-wide (`cuCoredumpSetAttributeGlobal`),
/// in the order of the struct. A failure leaves the members before it set.
/// `enable_on_exception` reaches the driver only when it changes, and a change is refused while a context
/// exists (a primary context active on any device, or a context current on this thread): switching it then
/// makes the driver refuse every later module load in the existing contexts (driver 580.159.04). Set it
/// before the first context, or per context with @ref set.
/// @throws invalid_argument_error for a name longer than @ref coredump_settings::max_name_length or holding a
/// NUL character, or for a switch of `enable_on_exception` while a context exists (before that driver call)
void set_global(const coredump_settings& settings);

/// @brief The settings of context @p ctx (`cuCoredumpGetAttribute`, with @p ctx made current for the call
/// and the caller's current context restored). @ref coredump_settings::enable_user_trigger and
/// @ref coredump_settings::pipe, which exist only process-wide, are left empty.
[[nodiscard]] coredump_settings get(context_ref ctx);

/// @brief Sets the members of @p settings that hold a value for context @p ctx (`cuCoredumpSetAttribute`,
/// with @p ctx current for the call).
/// @throws invalid_argument_error for @ref coredump_settings::enable_user_trigger or
/// @ref coredump_settings::pipe (process-wide only, cuda.h), or a name as for @ref set_global;
/// not_supported_error for `enable_on_exception` on a device of compute capability below 6.0;
/// invalid_argument_error for switching `enable_on_exception` off once it is on (driver 580.159.04 then
/// refuses every module load in the context), before that driver call
void set(context_ref ctx, const coredump_settings& settings);

}  // namespace coredump

/// @brief Sets the coredump settings it is given, process-wide or for one context, and restores their
/// previous values when it goes out of scope.
///
/// The constructor reads the current value of each named setting, then sets them; should a setting fail,
/// it restores those already set and throws. The destructor restores exactly the
/// settings it changed; it never throws (a failure goes to the destruction handler,
/// @ref set_destruction_error_handler). A scope guard: neither copyable nor movable.
///
/// @code
/// {
///   cudrv::scoped_coredump_settings dumps(ctx, {.file = "/tmp/dumps/core.%p",
///                                               .generation_flags = cudrv::coredump_flags::lightweight});
///   run_risky_kernels();
/// }  // the previous settings are back
/// @endcode
class scoped_coredump_settings {
 public:
  /// @brief Sets @p settings process-wide (@ref coredump::set_global) and remembers the previous values.
  explicit scoped_coredump_settings(const coredump_settings& settings);
  /// @brief Sets @p settings for context @p ctx (@ref coredump::set) and remembers the previous values.
  scoped_coredump_settings(context_ref ctx, const coredump_settings& settings);
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Not copyable: one scope restores once.
  scoped_coredump_settings(const scoped_coredump_settings&) = delete;
  /// @brief Not assignable.
  scoped_coredump_settings& operator=(const scoped_coredump_settings&) = delete;
  /// @}
  /// @brief Restores the previous values of what the constructor set; never throws.
  ~scoped_coredump_settings();

  /// @brief The values the named settings had before (the members the constructor set, read back).
  [[nodiscard]] const coredump_settings& previous() const noexcept { return previous_; }

 private:
  coredump_settings previous_;
  CUcontext context_ = nullptr;  // null: process-wide
};

}  // namespace cudrv
