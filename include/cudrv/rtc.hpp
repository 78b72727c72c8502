/// @file rtc.hpp
/// @brief Run-time compilation, all of it: @ref cudrv::program (NVRTC), @ref cudrv::nvvm_program
/// (libNVVM), @ref cudrv::linker (nvJitLink) and @ref cudrv::compile_cache, with their options and
/// results.
///
/// Kept out of the umbrella <cudrv/cudrv.hpp>: a program that loads PTX or cubin built ahead of time
/// needs none of it, and its option and result types (optional switches, lists of strings) are the
/// largest part of what the library's declarations cost a translation unit (docs/design.md, "Header
/// cost"). NVRTC, libNVVM and nvJitLink themselves are loaded at run time, on the first call that needs them.
/// @code
/// #include <cudrv/cudrv.hpp>
/// #include <cudrv/rtc.hpp>
///
/// cudrv::program prog("saxpy.cu", source);
/// cudrv::compile_result built = prog.compile(cudrv::code_kind::cubin, {.arch = "sm_90"});
/// cudrv::library lib(built, dev);
/// @endcode
///
/// Layer: code (docs/design.md, "Source layers").
#pragma once

#include "cudrv/compile_cache.hpp"
#include "cudrv/linker.hpp"
#include "cudrv/nvvm_program.hpp"
#include "cudrv/program.hpp"
