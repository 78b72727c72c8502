// Internal: what launches (launch.cpp) and kernel nodes of graphs (graph.cpp) share.
#pragma once

#include <cuda.h>

#include <string>

#include "cudrv/launch_config.hpp"

namespace cudrv::detail {

// Compares a launch the driver refused (status) in context ctx with the device's and the kernel's
// limits and names the limit exceeded, with the numbers and the configuration. Best effort: a query
// that fails only drops the checks that need it. Never throws.
std::string diagnose_launch(CUresult status, CUcontext ctx, const launch_config& c, CUkernel kernel) noexcept;

}  // namespace cudrv::detail
