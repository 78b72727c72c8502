// Internal helpers shared by kernel.cpp, library.cpp and launch.cpp.
#pragma once

#include <cuda.h>

#include <string>

#include "cudax/kernel.hpp"

namespace cudax::detail {

struct library_state;

// Fills sig with the kernel's name and parameter layout (parameters_known stays false when the
// driver or the headers cannot describe parameters). Never throws for a missing capability.
void describe_kernel(CUkernel kernel, kernel_signature& sig);

// The library's cached signature for kernel, created on first use (thread-safe).
kernel_signature* signature_of(library_state* state, CUkernel kernel);

// The kernel's name, or "" when the driver cannot tell; never throws.
std::string kernel_name_noexcept(CUkernel kernel, const kernel_signature* sig) noexcept;

// The CUfunction of kernel in the primary context of dev (for occupancy queries).
CUfunction function_in_primary_context(CUkernel kernel, CUdevice dev);

[[noreturn]] void throw_shared_memory_too_large(const launch_config& c, CUkernel kernel, const kernel_signature* sig);

// A CUlaunchConfig for config (grid, block, shared memory, and the cluster as attrs[0] when set);
// attrs must have room for one attribute. Stream and other attributes are left to the caller.
void fill_launch_config(const launch_config& config, CUlaunchConfig& out, CUlaunchAttribute* attrs);

// Throws launch_error when the launch's dynamic shared memory does not fit the 32 bits of a launch
// (the stream launch and the graph kernel node share the check).
inline void check_shared_memory_fits(const launch_config& c, CUkernel kernel, const kernel_signature* sig) {
  if (c.dynamic_shared_memory > 0xFFFFFFFFu) [[unlikely]] {
    throw_shared_memory_too_large(c, kernel, sig);
  }
}

}  // namespace cudax::detail
