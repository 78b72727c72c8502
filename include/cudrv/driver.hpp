/// @file driver.hpp
/// @brief Run-time loading of the CUDA driver (libcuda.so.1).
///
/// cudrv never links libcuda. The first call that needs the driver loads libcuda.so.1 with
/// `dlopen`, takes `cuGetProcAddress_v2` from it and runs `cuInit(0)`. Each driver entry point is then
/// resolved the first time it is used, once, at the API version cudrv was written against, so a
/// binary built with a newer toolkit keeps working on an older driver for every call that driver
/// has. The environment variable `CUDRV_LIBCUDA` names a different library file to load.
///
/// Layer: driver (docs/design.md, "Source layers").
#pragma once

#include <string>

/// @brief Loading the CUDA driver at run time and looking up entry points cudrv does not wrap.
namespace cudrv::driver {

/// @brief Whether the CUDA driver could be loaded and initialised (`cuInit(0)` succeeded or reported
/// that there is no device). Never throws.
///
/// @code
/// if (!cudrv::driver::available()) {
///   std::cerr << cudrv::driver::unavailable_reason() << '\n';
///   return 2;
/// }
/// @endcode
[[nodiscard]] bool available() noexcept;

/// @brief The CUDA version the installed driver supports, as `1000 * major + 10 * minor`
/// (13000 for CUDA 13.0), or 0 when no driver could be loaded. Never throws.
[[nodiscard]] int version() noexcept;

/// @brief Why the driver is not available: the library names tried and what `dlopen` or `cuInit`
/// said. Empty when @ref available is true. Never throws.
[[nodiscard]] std::string unavailable_reason() noexcept;

/// @brief The path of the driver library that was loaded (or the name given to `dlopen` when the
/// loader did not report a path); empty when none was. Never throws.
[[nodiscard]] std::string library_path() noexcept;

/// @brief Resolves a driver entry point by name at an explicit API version, for the calls cudrv
/// does not wrap.
///
/// The result must be cast to the matching `PFN_` typedef of `<cudaTypedefs.h>`.
/// @code
/// #include <cudaTypedefs.h>
/// auto fn = reinterpret_cast<PFN_cuCtxGetApiVersion_v3020>(
///     cudrv::driver::get_entry_point("cuCtxGetApiVersion", 3020));
/// @endcode
/// @param symbol the base name of the entry point, without any `_v2` suffix
/// @param api_version the CUDA version whose ABI the caller expects, e.g. 12020
/// @return the function pointer (never null)
/// @throws driver_unavailable_error when no driver can be loaded
/// @throws not_supported_error when the installed driver lacks the entry point at that version
[[nodiscard]] void* get_entry_point(const char* symbol, int api_version);

}  // namespace cudrv::driver
