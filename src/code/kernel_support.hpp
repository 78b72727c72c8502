// Internal helpers of the code layer (kernel.cpp, library.cpp), also used by launches and graphs.
#pragma once

#include <cuda.h>

#include <string>

#include "cudrv/kernel.hpp"

namespace cudrv::detail {

struct library_state;

// Fills sig with the kernel's name and, asking the driver in ctx (the current context when null), its
// parameter layout; parameters_known stays false, with the reason, when no context is at hand or the
// driver cannot describe parameters. Never throws for a missing capability. The driver is asked one
// parameter past the last (the only way to count them), a failing call that compute-sanitizer reports:
// libraries avoid it by reading the layout from their image (code_metadata.hpp).
void describe_kernel(CUkernel kernel, kernel_signature& sig, CUcontext ctx);

// The library's cached signature for kernel (looked up as name), created on first use (thread-safe).
kernel_signature* signature_of(library_state* state, CUkernel kernel, const std::string& name);

// A counted reference on the state of the live cudrv library with this handle, or null (library.cpp).
library_state* retain_library_of(CUlibrary handle) noexcept;

// A capture cudrv runs began / ended (stream_capture): while one runs, libraries whose last reference
// goes are parked rather than unloaded, until the last running capture has ended and its graph has
// taken references on the libraries its kernel nodes launch (library.cpp).
// capture_began may throw std::bad_alloc (the registry is made at first use): call it before the
// capture begins (issue 34 part 6: the failure sweep found it terminating the process as noexcept).
void capture_began();
void capture_ended() noexcept;

// The kernel's name, or "" when the driver cannot tell (or memory is short); never throws.
std::string kernel_name_noexcept(CUkernel kernel, const kernel_signature* sig) noexcept;

// The CUfunction of kernel in the primary context of dev (for occupancy queries).
CUfunction function_in_primary_context(CUkernel kernel, CUdevice dev);

[[noreturn]] void throw_shared_memory_too_large(const launch_config& c, CUkernel kernel, const kernel_signature* sig);

// Throws launch_error when the launch's dynamic shared memory does not fit the 32 bits of a launch
// (the stream launch and the graph kernel node share the check).
inline void check_shared_memory_fits(const launch_config& c, CUkernel kernel, const kernel_signature* sig) {
  if (c.dynamic_shared_memory > 0xFFFFFFFFu) [[unlikely]] {
    throw_shared_memory_too_large(c, kernel, sig);
  }
}

}  // namespace cudrv::detail
