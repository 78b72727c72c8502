// launch: the kernel launch itself and the diagnosis of a refused launch.
#include "cudrv/launch.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "code/kernel_support.hpp"
#include "code/launch_attributes.hpp"
#include "driver/driver_api.hpp"
#include "execution/launch_support.hpp"
#include "streams/nvtx_support.hpp"

namespace cudrv::detail {
namespace {

std::string format_dims(const dims& d) {
  return std::to_string(d.x) + "x" + std::to_string(d.y) + "x" + std::to_string(d.z);
}

std::string describe_config(const launch_config& c) {
  std::string out = "grid " + format_dims(c.grid) + ", block " + format_dims(c.block) + ", " +
                    std::to_string(c.dynamic_shared_memory) + " bytes of dynamic shared memory";
  // Every attribute the launch sets, by the name error messages use; the two with a value, with it.
  for_each_launch_attribute(c, [&](bool wanted, CUlaunchAttributeID id, const char* name, unsigned, const auto&) {
    if (!wanted) {
      return;
    }
    if (id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      out += ", cluster " + format_dims(c.cluster);
    } else if (id == CU_LAUNCH_ATTRIBUTE_PRIORITY) {
      out += ", priority " + std::to_string(*c.priority);
    } else {
      out += std::string(", ") + name;
    }
  });
  return out;
}

// diagnose_launch (launch_support.hpp) for a launch on a stream, whose context it finds first.
std::string diagnose(CUresult status, CUstream stream, const launch_config& c, CUkernel kernel) noexcept {
  try {
    CUcontext ctx = nullptr;
    if (stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD) {
      drv::cuCtxGetCurrent(&ctx);
      if (ctx == nullptr) {
        return "no context is current, and the default stream runs in the current context: make one current "
               "(cudrv::device::set_current) or launch on a cudrv::stream";
      }
    } else if (drv::cuStreamGetCtx(stream, &ctx) != CUDA_SUCCESS || ctx == nullptr) {
      return "the stream is invalid (destroyed?)";
    }
    return diagnose_launch(status, ctx, c, kernel);
  } catch (...) {
    return {};
  }
}

// What diagnose_launch knows while it checks one limit after another: the context and its device, the
// launch, and the problems found so far. An attribute the driver cannot tell reads -1.
struct launch_diagnosis {
  CUcontext ctx;
  CUdevice dev;
  const launch_config& c;
  CUkernel kernel;
  std::string on_device;  // " on device N"
  std::string arch;       // "compute capability X.Y"
  std::vector<std::string> problems;

  int device_attribute(CUdevice_attribute a) const {
    int v = -1;
    if (drv::cuDeviceGetAttribute(&v, a, dev) != CUDA_SUCCESS) {
      v = -1;
    }
    return v;
  }
  int kernel_attribute(CUfunction_attribute a) const {
    int v = -1;
    if (drv::cuKernelGetAttribute(&v, a, kernel, dev) != CUDA_SUCCESS) {
      v = -1;
    }
    return v;
  }
};

const char* const axis_names[3] = {"x", "y", "z"};

// The failure codes that name the kernel's code or handle as the problem.
void check_code_and_handle(launch_diagnosis& d, CUresult status) {
  if (status == CUDA_ERROR_NO_BINARY_FOR_GPU || status == CUDA_ERROR_INVALID_PTX ||
      status == CUDA_ERROR_UNSUPPORTED_PTX_VERSION || status == CUDA_ERROR_INVALID_IMAGE) {
    d.problems.push_back("the kernel's code cannot run" + d.on_device + " (" + d.arch +
                         "): load a cubin built for it, or PTX this driver can compile");
  }
  if (status == CUDA_ERROR_INVALID_HANDLE || status == CUDA_ERROR_NOT_FOUND) {
    d.problems.push_back("the kernel handle is invalid: was its library unloaded?");
  }
}

// Grid and block extents against the device's maxima, and the threads of a block against the device's
// and the kernel's limits.
void check_grid_and_block(launch_diagnosis& d) {
  const launch_config& c = d.c;
  const unsigned long long threads = c.block.count();
  if (c.grid.count() == 0 || threads == 0) {
    d.problems.push_back("every grid and block extent must be at least 1 (grid " + format_dims(c.grid) + ", block " +
                         format_dims(c.block) + ")");
  }
  const int max_block[3] = {d.device_attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X),
                            d.device_attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y),
                            d.device_attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)};
  const int max_grid[3] = {d.device_attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X),
                           d.device_attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y),
                           d.device_attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)};
  const unsigned block_ext[3] = {c.block.x, c.block.y, c.block.z};
  const unsigned grid_ext[3] = {c.grid.x, c.grid.y, c.grid.z};
  for (int i = 0; i < 3; ++i) {
    if (max_block[i] > 0 && block_ext[i] > static_cast<unsigned>(max_block[i])) {
      d.problems.push_back("block extent " + std::string(axis_names[i]) + " = " + std::to_string(block_ext[i]) +
                           " exceeds the device's maximum of " + std::to_string(max_block[i]));
    }
    if (max_grid[i] > 0 && grid_ext[i] > static_cast<unsigned>(max_grid[i])) {
      d.problems.push_back("grid extent " + std::string(axis_names[i]) + " = " + std::to_string(grid_ext[i]) +
                           " exceeds the device's maximum of " + std::to_string(max_grid[i]));
    }
  }
  const int device_threads = d.device_attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  const int kernel_threads = d.kernel_attribute(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  const int regs = d.kernel_attribute(CU_FUNC_ATTRIBUTE_NUM_REGS);
  if (device_threads > 0 && threads > static_cast<unsigned long long>(device_threads)) {
    d.problems.push_back("block of " + std::to_string(threads) + " threads exceeds the device's maximum of " +
                         std::to_string(device_threads) + " threads per block");
  } else if (kernel_threads > 0 && threads > static_cast<unsigned long long>(kernel_threads)) {
    d.problems.push_back("block of " + std::to_string(threads) + " threads exceeds the " +
                         std::to_string(kernel_threads) + " threads per block this kernel allows (it uses " +
                         std::to_string(regs) + " registers per thread, and an SM has " +
                         std::to_string(d.device_attribute(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK)) +
                         " registers per block): use smaller blocks or limit registers (max_registers)");
  }
}

// Dynamic shared memory against the device's opt-in maximum and the kernel's current limit.
void check_shared_memory(launch_diagnosis& d) {
  const std::size_t dynamic = d.c.dynamic_shared_memory;
  const int kernel_dynamic = d.kernel_attribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
  const int static_shared = d.kernel_attribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
  const int optin = d.device_attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  if (optin > 0 && static_shared >= 0 &&
      dynamic + static_cast<std::size_t>(static_shared) > static_cast<std::size_t>(optin)) {
    d.problems.push_back(std::to_string(dynamic) +
                         " bytes of dynamic shared memory exceed the device's opt-in maximum: " +
                         std::to_string(optin) + " bytes per block minus the kernel's " +
                         std::to_string(static_shared) + " bytes of static shared memory leaves " +
                         std::to_string(static_cast<std::size_t>(optin) - static_cast<std::size_t>(static_shared)));
  } else if (kernel_dynamic >= 0 && dynamic > static_cast<std::size_t>(kernel_dynamic)) {
    d.problems.push_back(std::to_string(dynamic) +
                         " bytes of dynamic shared memory exceed the kernel's current limit of " +
                         std::to_string(kernel_dynamic) +
                         " bytes: raise it first with kernel_ref::set_max_dynamic_shared_memory(device, " +
                         std::to_string(dynamic) + ")");
  }
}

// The cluster of a launch that has one: the device's support, the grid's divisibility, the cluster's
// size and the dimensions the kernel was compiled with.
void check_cluster_shape(launch_diagnosis& d) {
  const launch_config& c = d.c;
  const unsigned long long cluster_blocks = c.cluster.count();
  if (d.device_attribute(CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH) == 0) {
    d.problems.push_back("thread-block clusters are not supported" + d.on_device + " (" + d.arch +
                         "; clusters need 9.0 or newer)");
    return;
  }
  if (cluster_blocks == 0) {
    d.problems.push_back("every cluster extent must be at least 1 (cluster " + format_dims(c.cluster) + ")");
    return;
  }
  const unsigned grid_ext[3] = {c.grid.x, c.grid.y, c.grid.z};
  const unsigned cluster_ext[3] = {c.cluster.x, c.cluster.y, c.cluster.z};
  for (int i = 0; i < 3; ++i) {
    if (cluster_ext[i] != 0 && grid_ext[i] % cluster_ext[i] != 0) {
      d.problems.push_back("grid extent " + std::string(axis_names[i]) + " = " + std::to_string(grid_ext[i]) +
                           " is not a multiple of the cluster extent " + std::to_string(cluster_ext[i]));
    }
  }
  const int non_portable = d.kernel_attribute(CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED);
  if (cluster_blocks > 8 && non_portable == 0) {
    d.problems.push_back("a cluster of " + std::to_string(cluster_blocks) +
                         " blocks exceeds the portable maximum of 8: allow it with "
                         "kernel_ref::set_non_portable_cluster_size_allowed (the hardware maximum is 16)");
  } else if (cluster_blocks > 16) {
    d.problems.push_back("a cluster of " + std::to_string(cluster_blocks) + " blocks exceeds the maximum of 16");
  }
  const int rw = d.kernel_attribute(CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH);
  const int rh = d.kernel_attribute(CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT);
  const int rd = d.kernel_attribute(CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH);
  if (rw > 0 && (c.cluster.x != static_cast<unsigned>(rw) || c.cluster.y != static_cast<unsigned>(rh) ||
                 c.cluster.z != static_cast<unsigned>(rd))) {
    d.problems.push_back("the kernel was compiled with cluster dimensions " + std::to_string(rw) + "x" +
                         std::to_string(rh) + "x" + std::to_string(rd) + ", but the launch asks for " +
                         format_dims(c.cluster));
  }
}

// Clusters: the cluster a launch asks for, or the one the kernel needs and the launch lacks.
void check_cluster(launch_diagnosis& d) {
  const int must_cluster = d.kernel_attribute(CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET);
  if (d.c.has_cluster()) {
    check_cluster_shape(d);
  } else if (must_cluster == 1) {
    d.problems.push_back("the kernel must be launched with a cluster: set launch_config::cluster");
  }
}

// Cooperative launches: the device's support, and the whole grid resident at once: as blocks per SM,
// and for a cluster launch as clusters (cuOccupancyMaxActiveClusters: the clusters that fit at once can be
// fewer than the blocks per SM suggest, since a cluster's blocks share one GPC).
void check_cooperative(launch_diagnosis& d) {
  const launch_config& c = d.c;
  const unsigned long long threads = c.block.count();
  if (!c.cooperative) {
    return;
  }
  if (d.device_attribute(CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH) == 0) {
    d.problems.push_back("cooperative launches are not supported" + d.on_device);
    return;
  }
  if (threads == 0) {
    return;
  }
  const unsigned long long cluster_blocks = c.has_cluster() ? c.cluster.count() : 0;
  const bool whole_clusters = cluster_blocks != 0 && c.grid.x % std::max(c.cluster.x, 1U) == 0 &&
                              c.grid.y % std::max(c.cluster.y, 1U) == 0 && c.grid.z % std::max(c.cluster.z, 1U) == 0;
  int per_sm = 0;
  int max_clusters = -1;
  CUfunction f = nullptr;
  run_in_context(d.ctx, "cuKernelGetFunction", [&] {
    if (drv::cuKernelGetFunction(&f, d.kernel) != CUDA_SUCCESS ||
        drv::cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&per_sm, f, static_cast<int>(threads),
                                                                  c.dynamic_shared_memory, 0) != CUDA_SUCCESS) {
      per_sm = -1;
    }
    if (f != nullptr && whole_clusters) {
      launch_attribute_array attrs;
      const CUlaunchConfig lc = native_launch_config(c, attrs, occupancy_path);
      if (drv::cuOccupancyMaxActiveClusters(&max_clusters, f, &lc) != CUDA_SUCCESS) {
        max_clusters = -1;
      }
    }
  });
  const int sms = d.device_attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  if (per_sm >= 0 && sms > 0 && c.grid.count() > static_cast<unsigned long long>(per_sm) * sms) {
    d.problems.push_back("a cooperative launch of " + std::to_string(c.grid.count()) + " blocks exceeds the " +
                         std::to_string(static_cast<long long>(per_sm) * sms) +
                         " blocks that can be resident at once (" + std::to_string(per_sm) + " per SM x " +
                         std::to_string(sms) + " SMs at this block size and shared memory)");
  } else if (max_clusters >= 0 && c.grid.count() / cluster_blocks > static_cast<unsigned long long>(max_clusters)) {
    d.problems.push_back("a cooperative launch of " + std::to_string(c.grid.count() / cluster_blocks) +
                         " clusters of " + std::to_string(cluster_blocks) + " blocks exceeds the " +
                         std::to_string(max_clusters) +
                         " clusters that can be resident at once (cuOccupancyMaxActiveClusters at this cluster "
                         "shape, block size and shared memory)");
  }
}

// Launch events: what the driver asks of them and cudrv cannot see in a handle.
void check_launch_events(launch_diagnosis& d) {
  const char* names[2] = {d.c.programmatic_event.event.is_named() ? "programmatic event" : nullptr,
                          d.c.completion_event.event.is_named() ? "launch-completion event" : nullptr};
  for (const char* name : names) {
    if (name != nullptr) {
      d.problems.push_back(std::string("the ") + name +
                           " must be an event of the launch's context, created without event_flags::timing "
                           "and not interprocess (the driver refuses others; cudrv cannot tell from the handle)");
    }
  }
}

// The problems found, joined, with the configuration; or that none was.
std::string summarize(const launch_diagnosis& d) {
  if (d.problems.empty()) {
    return "the driver refused the launch (" + describe_config(d.c) +
           "); no device or kernel limit that cudrv checks is exceeded";
  }
  std::string out;
  for (std::size_t i = 0; i < d.problems.size(); ++i) {
    out += (i == 0 ? "" : "; ") + d.problems[i];
  }
  return out + " (" + describe_config(d.c) + ")";
}

}  // namespace

std::string diagnose_launch(CUresult status, CUcontext ctx, const launch_config& c, CUkernel kernel) noexcept {
  try {
    CUdevice dev = 0;
    bool have_device = false;
    run_in_context(ctx, "cuCtxGetDevice", [&] { have_device = drv::cuCtxGetDevice(&dev) == CUDA_SUCCESS; });
    if (!have_device) {
      return "the stream's context has no device";
    }
    launch_diagnosis d{ctx, dev, c, kernel, " on device " + std::to_string(static_cast<int>(dev)), {}, {}};
    const int major = d.device_attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    const int minor = d.device_attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    d.arch = "compute capability " + std::to_string(major) + "." + std::to_string(minor);
    check_code_and_handle(d, status);
    check_grid_and_block(d);
    check_shared_memory(d);
    check_cluster(d);
    check_cooperative(d);
    check_launch_events(d);
    return summarize(d);
  } catch (...) {
    // Diagnosis is best effort (out of memory, say); the driver's code is reported regardless.
    return {};
  }
}

namespace {

[[noreturn]] void throw_launch_failure(CUresult status, const char* api, CUstream stream, const launch_config& c,
                                       CUkernel kernel, const kernel_signature* sig) {
  if (is_context_lost(status)) [[unlikely]] {
    // An earlier kernel faulted (or this is a forked child): nothing to diagnose in this launch.
    throw_driver_error(status, api, "launching kernel '" + kernel_name_noexcept(kernel, sig) + "'");
  }
  std::string diagnosis = diagnose(status, stream, c, kernel);
  throw launch_error(error_source::driver, status, api, kernel_name_noexcept(kernel, sig), std::move(diagnosis));
}

}  // namespace

void launch_kernel(CUstream stream, const launch_config& c, CUkernel kernel, void** args, const kernel_signature* sig) {
  CUDRV_NVTX_AUTOMATIC_RANGE("cudrv::launch", [kernel, sig] { return kernel_name_noexcept(kernel, sig); });
  if (stream == nullptr) [[unlikely]] {
    throw invalid_argument_error("cudrv::launch", "the stream is empty (a moved-from or released cudrv::stream)");
  }
  if (kernel == nullptr) [[unlikely]] {
    throw invalid_argument_error("cudrv::launch", "the kernel is empty (a moved-from or reset cudrv::kernel)");
  }
  check_shared_memory_fits(c, kernel, sig);
  if (!c.needs_extended_launch()) [[likely]] {
    CUresult status =
        drv::cuLaunchKernel(reinterpret_cast<CUfunction>(kernel), c.grid.x, c.grid.y, c.grid.z, c.block.x, c.block.y,
                            c.block.z, static_cast<unsigned>(c.dynamic_shared_memory), stream, args, nullptr);
    if (status != CUDA_SUCCESS) [[unlikely]] {
      throw_launch_failure(status, "cuLaunchKernel", stream, c, kernel, sig);
    }
    return;
  }
  if (needs_stream_attribute_checks(c)) {
    check_launch_attributes(c, stream_path, launch_target{stream, nullptr, -1, nullptr}, "cudrv::launch");
  }
  launch_attribute_array attrs;
  CUlaunchConfig lc = native_launch_config(c, attrs, stream_path);
  lc.hStream = stream;
  CUresult status = drv::cuLaunchKernelEx(&lc, reinterpret_cast<CUfunction>(kernel), args, nullptr);
  if (status != CUDA_SUCCESS) [[unlikely]] {
    throw_launch_failure(status, "cuLaunchKernelEx", stream, c, kernel, sig);
  }
}

void throw_runtime_error(int code, const char* name, const char* description, const char* api, std::string context) {
  throw error(error_source::runtime, code, name != nullptr ? name : "cudaError " + std::to_string(code),
              description != nullptr ? description : "", api, std::move(context));
}

}  // namespace cudrv::detail
