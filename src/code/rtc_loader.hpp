// Internal: run-time loading of NVRTC, nvJitLink and libNVVM, their checked calls, and the helpers shared by
// program, compile_cache and linker (architecture spellings, the default architecture).
//
// Neither library is linked: each is opened with dlopen on first use, once per process, and every
// function is resolved with dlsym and typed with decltype of its declaration in the toolkit header.
// The outcome (the function table or the reason it could not be built) is cached and never
// destroyed, so a failed load fails the same way on every later call.
#pragma once

#include <cuda.h>
#include <nvJitLink.h>
#include <nvrtc.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cudrv/error.hpp"

// Every NVRTC function cudrv calls. The dlsym name is the function's own name.
#define CUDRV_NVRTC_FUNCTIONS(X) \
  X(nvrtcGetErrorString)         \
  X(nvrtcVersion)                \
  X(nvrtcGetNumSupportedArchs)   \
  X(nvrtcGetSupportedArchs)      \
  X(nvrtcCreateProgram)          \
  X(nvrtcDestroyProgram)         \
  X(nvrtcAddNameExpression)      \
  X(nvrtcCompileProgram)         \
  X(nvrtcGetProgramLogSize)      \
  X(nvrtcGetProgramLog)          \
  X(nvrtcGetPTXSize)             \
  X(nvrtcGetPTX)                 \
  X(nvrtcGetCUBINSize)           \
  X(nvrtcGetCUBIN)               \
  X(nvrtcGetLTOIRSize)           \
  X(nvrtcGetLTOIR)               \
  X(nvrtcGetLoweredName)

// Every nvJitLink function cudrv calls. nvJitLink.h declares each as a static inline wrapper around
// an extern symbol versioned with the header's CUDA version (nvJitLinkCreate calls
// __nvJitLinkCreate_13_0 in CUDA 13.0 headers); cudrv resolves that versioned symbol, the ABI the
// header was written for, and types it with the wrapper's signature.
#define CUDRV_NVJITLINK_FUNCTIONS(X) \
  X(nvJitLinkCreate)                 \
  X(nvJitLinkDestroy)                \
  X(nvJitLinkAddData)                \
  X(nvJitLinkComplete)               \
  X(nvJitLinkGetLinkedCubinSize)     \
  X(nvJitLinkGetLinkedCubin)         \
  X(nvJitLinkGetLinkedPtxSize)       \
  X(nvJitLinkGetLinkedPtx)           \
  X(nvJitLinkGetErrorLogSize)        \
  X(nvJitLinkGetErrorLog)            \
  X(nvJitLinkGetInfoLogSize)         \
  X(nvJitLinkGetInfoLog)

namespace cudrv::detail {

struct nvrtc_api {
// NOLINTNEXTLINE(bugprone-macro-parentheses): name is a function's name, declared as a member
#define CUDRV_NVRTC_MEMBER(name) decltype(&::name) name = nullptr;
  CUDRV_NVRTC_FUNCTIONS(CUDRV_NVRTC_MEMBER)
#undef CUDRV_NVRTC_MEMBER
  // Precompiled headers, NVRTC 12.8 and newer: null when the library lacks them.
  nvrtcResult (*nvrtcGetPCHCreateStatus)(nvrtcProgram) = nullptr;
  nvrtcResult (*nvrtcGetPCHHeapSizeRequired)(nvrtcProgram, std::size_t*) = nullptr;
  nvrtcResult (*nvrtcGetPCHHeapSize)(std::size_t*) = nullptr;
  nvrtcResult (*nvrtcSetPCHHeapSize)(std::size_t) = nullptr;
};

struct nvjitlink_api {
// NOLINTNEXTLINE(bugprone-macro-parentheses): name is a function's name, declared as a member
#define CUDRV_NVJITLINK_MEMBER(name) decltype(&::name) name = nullptr;
  CUDRV_NVJITLINK_FUNCTIONS(CUDRV_NVJITLINK_MEMBER)
#undef CUDRV_NVJITLINK_MEMBER
  // Unversioned and only in nvJitLink 12.3 and newer: null when the library lacks it.
  nvJitLinkResult (*nvJitLinkVersion)(unsigned int*, unsigned int*) = nullptr;
};

// The function tables, loading the library on first use (thread-safe). They throw
// library_unavailable_error, naming what was tried and the environment variable, when the library
// cannot be loaded or lacks a function.
const nvrtc_api& nvrtc();
const nvjitlink_api& nvjitlink();

// NVRTC's version as major * 1000 + minor * 10 (13000 for 13.0), read once.
int nvrtc_version_number();

// The loaded NVRTC file: its path, size and modification time (part of the compile cache's key,
// so that a patch release of the toolkit, which keeps the version number, invalidates entries).
const std::string& nvrtc_identity();

// The path of the loaded NVRTC file, as the dynamic loader resolved it.
const std::string& nvrtc_path();

// Throws compile_error for a failed NVRTC call: name from nvrtcGetErrorString, the log attached.
[[noreturn]] void throw_nvrtc_error(nvrtcResult status, const char* api, std::string context, std::string log = {});

// Throws link_error for a failed nvJitLink call with the log attached.
[[noreturn]] void throw_nvjitlink_error(nvJitLinkResult status, const char* api, std::string context, std::string log);

// The symbolic name of an nvJitLinkResult, e.g. NVJITLINK_ERROR_PTX_COMPILE.
std::string nvjitlink_result_name(int status);

// The architecture number and suffix of any accepted spelling ("sm_90a", "compute_90a", "lto_90a",
// "90a" all give "90a"; the suffix is "", "a" or "f"). An empty spelling means the current device
// (the one of the current context, else device 0), queried through the driver. Throws
// invalid_argument_error, naming api and field, for a bad spelling or when no device can be asked.
std::string resolve_arch(std::string_view spelling, const char* api, const char* field);

// Appends the floating-point and register options NVRTC and nvJitLink share, those that are set:
// "-ftz=", "-prec-div=", "-prec-sqrt=" and fma_option ("-fmad" for NVRTC, "-fma" for nvJitLink),
// each followed by "=true" or "=false", then "-maxrregcount=N".
void append_math_options(std::vector<std::string>& out, const std::optional<bool>& ftz,
                         const std::optional<bool>& prec_div, const std::optional<bool>& prec_sqrt,
                         const char* fma_option, const std::optional<bool>& fma,
                         const std::optional<int>& max_registers);

// "a, b, c" (for messages).
std::string join(const std::vector<std::string>& items, std::string_view separator = ", ");

// issue 34 part 9: NVVM IR. libNVVM's C API, declared here rather than taken from <nvvm.h>: a standard
// toolkit keeps that header in nvvm/include, outside the include directory cudrv is built with. The
// ABI is libNVVM's since CUDA 7 (nvvmResult values are only ever appended).
enum nvvm_result : int {
  nvvm_success = 0,
  nvvm_error_out_of_memory = 1,
  nvvm_error_program_creation_failure = 2,
  nvvm_error_ir_version_mismatch = 3,
  nvvm_error_invalid_input = 4,
  nvvm_error_invalid_program = 5,
  nvvm_error_invalid_ir = 6,
  nvvm_error_invalid_option = 7,
  nvvm_error_no_module_in_program = 8,
  nvvm_error_compilation = 9,
  nvvm_error_cancelled = 10,
};
using nvvm_program_handle = struct nvvm_program_opaque*;  // nvvmProgram

struct nvvm_api {
  const char* (*nvvmGetErrorString)(nvvm_result) = nullptr;
  nvvm_result (*nvvmVersion)(int*, int*) = nullptr;
  nvvm_result (*nvvmIRVersion)(int*, int*, int*, int*) = nullptr;
  nvvm_result (*nvvmCreateProgram)(nvvm_program_handle*) = nullptr;
  nvvm_result (*nvvmDestroyProgram)(nvvm_program_handle*) = nullptr;
  nvvm_result (*nvvmAddModuleToProgram)(nvvm_program_handle, const char*, std::size_t, const char*) = nullptr;
  nvvm_result (*nvvmLazyAddModuleToProgram)(nvvm_program_handle, const char*, std::size_t, const char*) = nullptr;
  nvvm_result (*nvvmCompileProgram)(nvvm_program_handle, int, const char**) = nullptr;
  nvvm_result (*nvvmVerifyProgram)(nvvm_program_handle, int, const char**) = nullptr;
  nvvm_result (*nvvmGetCompiledResultSize)(nvvm_program_handle, std::size_t*) = nullptr;
  nvvm_result (*nvvmGetCompiledResult)(nvvm_program_handle, char*) = nullptr;
  nvvm_result (*nvvmGetProgramLogSize)(nvvm_program_handle, std::size_t*) = nullptr;
  nvvm_result (*nvvmGetProgramLog)(nvvm_program_handle, char*) = nullptr;
};

// libNVVM's function table, loading it on first use (thread-safe); throws library_unavailable_error
// like nvrtc(). Searched as libnvvm.so.4, then in the toolkit's nvvm/lib64, lib64 and lib; only
// $CUDRV_LIBNVVM when that is set.
const nvvm_api& nvvm();

// The loaded libNVVM file: its path, size and modification time (part of the compile cache's key).
const std::string& nvvm_identity();

// The path of the loaded libNVVM file.
const std::string& nvvm_path();

// Throws compile_error (source nvvm) for a failed libNVVM call, the log attached.
[[noreturn]] void throw_nvvm_error(nvvm_result status, const char* api, std::string context, std::string log = {});

}  // namespace cudrv::detail
