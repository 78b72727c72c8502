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

// A CUlaunchConfig for config (grid, block, shared memory, and the cluster as attrs[0] when set);
// attrs must have room for one attribute. Stream and other attributes are left to the caller.
void fill_launch_config(const launch_config& config, CUlaunchConfig& out, CUlaunchAttribute* attrs);

}  // namespace cudax::detail
