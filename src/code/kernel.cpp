// kernel_ref: attributes, occupancy and parameter information of a CUkernel.
#include "cudrv/kernel.hpp"

#include <cstdint>
#include <exception>

#include "code/kernel_support.hpp"
#include "code/launch_attributes.hpp"
#include "driver/driver_api.hpp"
#include "driver/driver_log.hpp"

namespace cudrv {
namespace detail {

void describe_kernel(CUkernel kernel, kernel_signature& sig, CUcontext ctx) {
  sig.name = kernel_name_noexcept(kernel, nullptr);
  try {
    if (ctx == nullptr) {
      check(drv::cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
    }
    if (ctx == nullptr) {
      sig.unknown_reason = "the image does not describe the kernel's parameters and no context was named or current "
                           "to ask the driver in; launches ask in the context of their stream";
      return;
    }
    std::vector<kernel_param> params;
    CUresult failure = CUDA_SUCCESS;
    run_in_context(ctx, "cuKernelGetParamInfo", [&] {
      const std::uint64_t log_mark = driver_log_mark();
      for (std::size_t i = 0;; ++i) {
        std::size_t offset = 0;
        std::size_t size = 0;
        CUresult status = drv::cuKernelGetParamInfo(kernel, i, &offset, &size);
        if (status == CUDA_ERROR_INVALID_VALUE) {
          forget_driver_log_since(log_mark);  // the refusal that ends the walk is no error's
          break;                              // past the last parameter
        }
        if (status != CUDA_SUCCESS) {
          failure = status;
          return;
        }
        params.push_back({offset, size});
      }
    });
    if (failure != CUDA_SUCCESS) {
      sig.unknown_reason = "cuKernelGetParamInfo failed with " + error_name(failure);
      return;
    }
    sig.params = std::move(params);
    sig.parameters_known = true;
  } catch (const error& e) {
    sig.unknown_reason = e.what();  // a driver older than 12.4, or a context that could not be made current
  }
}

std::string kernel_name_noexcept(CUkernel kernel, const kernel_signature* sig) noexcept {
  try {
    if (sig != nullptr && !sig->name.empty()) {
      return sig->name;
    }
    const char* name = nullptr;
    if (kernel != nullptr && drv::cuKernelGetName(&name, kernel) == CUDA_SUCCESS && name != nullptr) {
      return name;
    }
  } catch (...) {
  }
  return {};
}

CUfunction function_in_primary_context(CUkernel kernel, CUdevice dev) {
  CUfunction fn = nullptr;
  context_ref ctx = device::from_native_handle(dev).primary_context();
  run_in_context(ctx.native_handle(), "cuKernelGetFunction",
                 [&] { check(drv::cuKernelGetFunction(&fn, kernel), "cuKernelGetFunction"); });
  return fn;
}

namespace {

std::string kernel_label(CUkernel kernel, const kernel_signature* sig) {
  std::string name = kernel_name_noexcept(kernel, sig);
  return name.empty() ? std::string("the kernel") : "kernel '" + name + "'";
}

// Parameters as the cache or the driver knows them; false when unknown.
bool known_parameters(CUkernel kernel, const kernel_signature* sig, kernel_signature& scratch,
                      const kernel_signature*& out) {
  if (sig != nullptr) {
    out = sig;
    return sig->parameters_known;
  }
  describe_kernel(kernel, scratch, nullptr);
  out = &scratch;
  return scratch.parameters_known;
}

// The occupancy calculator's callback carries no user data: the callable travels in a thread_local.
struct block_size_callback {
  std::size_t (*fn)(void*, int);
  void* data;
  std::exception_ptr failure;
};
thread_local block_size_callback* current_callback = nullptr;

std::size_t block_size_trampoline(int block_size) {
  block_size_callback* cb = current_callback;
  if (cb == nullptr || cb->failure) {
    return 0;
  }
  try {
    return cb->fn(cb->data, block_size);
  } catch (...) {
    cb->failure = std::current_exception();
    return 0;
  }
}

}  // namespace

void throw_shared_memory_too_large(const launch_config& c, CUkernel kernel, const kernel_signature* sig) {
  throw launch_error(error_source::cudrv, CUDA_ERROR_INVALID_VALUE, "cudrv::launch", kernel_name_noexcept(kernel, sig),
                     std::to_string(c.dynamic_shared_memory) + " bytes of dynamic shared memory do not fit a launch");
}

void check_arguments_slow(CUkernel kernel, const kernel_signature* sig, const std::size_t* sizes, std::size_t count,
                          query_target target) {
  // No layout cached (an adopted handle, or an image that does not describe its kernels): walk the
  // driver's description in the launch's context without allocating; the full layout is built only
  // for the message of a mismatch.
  constexpr std::size_t none = static_cast<std::size_t>(-1);
  std::size_t expected_count = none;
  std::size_t wrong_size = none;
  bool unknown = false;
  CUcontext ctx = target.context;
  try {
    if (ctx == nullptr && target.stream != nullptr && target.stream != CU_STREAM_LEGACY &&
        target.stream != CU_STREAM_PER_THREAD) {
      check(drv::cuStreamGetCtx(target.stream, &ctx), "cuStreamGetCtx");
    }
    if (ctx == nullptr) {
      check(drv::cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
    }
    if (ctx == nullptr) {
      return;  // a default stream with no context current: the launch itself fails and says so
    }
    run_in_context(ctx, "cuKernelGetParamInfo", [&] {
      const std::uint64_t log_mark = driver_log_mark();
      for (std::size_t i = 0;; ++i) {
        std::size_t offset = 0;
        std::size_t size = 0;
        const CUresult status = drv::cuKernelGetParamInfo(kernel, i, &offset, &size);
        if (status == CUDA_ERROR_INVALID_VALUE) {
          forget_driver_log_since(log_mark);  // the refusal that ends the walk is no error's
          expected_count = i;
          return;
        }
        if (status != CUDA_SUCCESS) {
          unknown = true;
          return;
        }
        if (i < count && size != sizes[i] && wrong_size == none) {
          wrong_size = i;
        }
      }
    });
  } catch (const error&) {
    return;  // the driver cannot tell: the launch goes unchecked, as with an older driver
  }
  if (unknown || (expected_count == count && wrong_size == none)) {
    return;
  }
  kernel_signature full;
  describe_kernel(kernel, full, ctx);
  if (sig != nullptr && full.name.empty()) {
    full.name = sig->name;
  }
  if (expected_count != count) {
    throw_argument_count(kernel, &full, expected_count, count);
  }
  throw_argument_size(kernel, &full, wrong_size, full.params.size() > wrong_size ? full.params[wrong_size].size : 0,
                      sizes[wrong_size]);
}

void throw_argument_count(CUkernel kernel, const kernel_signature* sig, std::size_t expected, std::size_t given) {
  std::string sizes;
  if (sig != nullptr && sig->parameters_known) {
    for (std::size_t i = 0; i < sig->params.size(); ++i) {
      sizes += (i == 0 ? "" : ", ") + std::to_string(sig->params[i].size);
    }
  }
  throw launch_error(error_source::cudrv, CUDA_ERROR_INVALID_VALUE, "cudrv::launch", kernel_name_noexcept(kernel, sig),
                     std::to_string(given) + " argument" + (given == 1 ? "" : "s") + " given, but the kernel has " +
                         std::to_string(expected) + " parameter" + (expected == 1 ? "" : "s") +
                         (sizes.empty() ? std::string() : " (sizes in bytes: " + sizes + ")"));
}

void throw_argument_size(CUkernel kernel, const kernel_signature* sig, std::size_t index, std::size_t expected,
                         std::size_t given) {
  throw launch_error(error_source::cudrv, CUDA_ERROR_INVALID_VALUE, "cudrv::launch", kernel_name_noexcept(kernel, sig),
                     "argument " + std::to_string(index) + " has " + std::to_string(given) + " bytes, but parameter " +
                         std::to_string(index) + " has " + std::to_string(expected) +
                         " bytes: pass a value of the parameter's type (e.g. std::size_t{n} for a size_t)");
}

std::pair<int, int> suggest_block_size(CUkernel kernel, CUdevice device, std::size_t (*fn)(void*, int), void* data,
                                       std::size_t fixed_shared, int block_size_limit) {
  if (block_size_limit < 0) {
    throw invalid_argument_error("cudrv::kernel::suggested_block_size",
                                 "block_size_limit is " + std::to_string(block_size_limit) + "; it must be >= 0");
  }
  CUfunction f = function_in_primary_context(kernel, device);
  int min_grid = 0;
  int block = 0;
  block_size_callback cb{fn, data, nullptr};
  block_size_callback* previous = current_callback;
  current_callback = fn != nullptr ? &cb : nullptr;
  CUresult status = CUDA_SUCCESS;
  try {
    run_in_context(device::from_native_handle(device).primary_context().native_handle(),
                   "cuOccupancyMaxPotentialBlockSize", [&] {
                     status = drv::cuOccupancyMaxPotentialBlockSizeWithFlags(&min_grid, &block, f,
                                                                             fn != nullptr ? &block_size_trampoline
                                                                                           : nullptr,
                                                                             fixed_shared, block_size_limit, 0);
                   });
  } catch (...) {
    current_callback = previous;
    throw;
  }
  current_callback = previous;
  if (cb.failure) {
    std::rethrow_exception(cb.failure);
  }
  check(status, "cuOccupancyMaxPotentialBlockSizeWithFlags", [&] { return kernel_label(kernel, nullptr); });
  return {min_grid, block};
}

}  // namespace detail

using detail::check;

CUfunction kernel_base::function(context_ref ctx) const {
  CUfunction fn = nullptr;
  detail::run_in_context(ctx.native_handle(), "cudrv::kernel::function",
                         [&] { check(detail::drv::cuKernelGetFunction(&fn, handle_), "cuKernelGetFunction"); });
  return fn;
}

void kernel_base::require_handle(const char* api) const {
  if (handle_ == nullptr) [[unlikely]] {
    throw invalid_argument_error(api, "the kernel is empty (a moved-from or reset cudrv::kernel)");
  }
}

std::string kernel_base::name() const {
  require_handle("cudrv::kernel::name");
  if (signature_ != nullptr && !signature_->name.empty()) {
    return signature_->name;
  }
  const char* name = nullptr;
  check(detail::drv::cuKernelGetName(&name, handle_), "cuKernelGetName");
  return name != nullptr ? name : "";
}

int kernel_base::attribute(CUfunction_attribute attr, const device& dev) const {
  int value = 0;
  check(detail::drv::cuKernelGetAttribute(&value, attr, handle_, dev.native_handle()), "cuKernelGetAttribute", [&] {
    return detail::kernel_label(handle_, signature_) + ", attribute " + std::to_string(static_cast<int>(attr)) +
           ", device " + std::to_string(dev.ordinal());
  });
  return value;
}

kernel_attributes kernel_base::attributes(const device& dev) const {
  kernel_attributes a{};
  a.max_threads_per_block = attribute(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, dev);
  a.shared_size_bytes = attribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, dev);
  a.const_size_bytes = attribute(CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, dev);
  a.local_size_bytes = attribute(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, dev);
  a.num_regs = attribute(CU_FUNC_ATTRIBUTE_NUM_REGS, dev);
  a.ptx_version = attribute(CU_FUNC_ATTRIBUTE_PTX_VERSION, dev);
  a.binary_version = attribute(CU_FUNC_ATTRIBUTE_BINARY_VERSION, dev);
  a.cache_mode_ca = attribute(CU_FUNC_ATTRIBUTE_CACHE_MODE_CA, dev);
  a.max_dynamic_shared_size_bytes = attribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dev);
  a.preferred_shared_memory_carveout = attribute(CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, dev);
  a.cluster_size_must_be_set = attribute(CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET, dev);
  a.required_cluster_width = attribute(CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH, dev);
  a.required_cluster_height = attribute(CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT, dev);
  a.required_cluster_depth = attribute(CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH, dev);
  a.non_portable_cluster_size_allowed = attribute(CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, dev);
  a.cluster_scheduling_policy_preference = attribute(CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE, dev);
  return a;
}

void kernel_base::set_attribute(CUfunction_attribute attr, int value, const device& dev) const {
  check(detail::drv::cuKernelSetAttribute(attr, value, handle_, dev.native_handle()), "cuKernelSetAttribute", [&] {
    return detail::kernel_label(handle_, signature_) + ", attribute " + std::to_string(static_cast<int>(attr)) + " = " +
           std::to_string(value) + ", device " + std::to_string(dev.ordinal());
  });
}

void kernel_base::set_max_dynamic_shared_memory(const device& dev, std::size_t bytes) const {
  auto optin = static_cast<std::size_t>(dev.attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN));
  auto static_bytes = static_cast<std::size_t>(attribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, dev));
  std::size_t allowed = optin > static_bytes ? optin - static_bytes : 0;
  if (bytes > allowed) {
    throw invalid_argument_error("cudrv::kernel::set_max_dynamic_shared_memory",
                                 detail::kernel_label(handle_, signature_) + ": " + std::to_string(bytes) +
                                     " bytes of dynamic shared memory exceed the " + std::to_string(allowed) +
                                     " bytes allowed on device " + std::to_string(dev.ordinal()) + " (opt-in maximum " +
                                     std::to_string(optin) + " bytes per block minus " + std::to_string(static_bytes) +
                                     " bytes of static shared memory)");
  }
  set_attribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(bytes), dev);
}

void kernel_base::set_preferred_shared_memory_carveout(const device& dev, int percent) const {
  if (percent < -1 || percent > 100) {
    throw invalid_argument_error("cudrv::kernel::set_preferred_shared_memory_carveout",
                                 "the carveout is " + std::to_string(percent) +
                                     "; give a percentage from 0 to 100, or -1 for no preference");
  }
  set_attribute(CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, percent, dev);
}

void kernel_base::set_non_portable_cluster_size_allowed(const device& dev, bool allowed) const {
  set_attribute(CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, allowed ? 1 : 0, dev);
}

void kernel_base::set_cluster_scheduling_policy(const device& dev, CUclusterSchedulingPolicy policy) const {
  set_attribute(CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE, static_cast<int>(policy), dev);
}

void kernel_base::set_cache_config(const device& dev, CUfunc_cache config) const {
  check(detail::drv::cuKernelSetCacheConfig(handle_, config, dev.native_handle()), "cuKernelSetCacheConfig",
        [&] { return detail::kernel_label(handle_, signature_); });
}

int kernel_base::max_active_blocks_per_multiprocessor(const device& dev, int block_size,
                                                      std::size_t dynamic_shared_memory) const {
  if (block_size <= 0) {
    throw invalid_argument_error("cudrv::kernel::max_active_blocks_per_multiprocessor",
                                 "block_size is " + std::to_string(block_size) + "; it must be positive");
  }
  CUfunction f = detail::function_in_primary_context(handle_, dev.native_handle());
  int blocks = 0;
  detail::run_in_context(dev.primary_context().native_handle(), "cuOccupancyMaxActiveBlocksPerMultiprocessor", [&] {
    check(detail::drv::cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&blocks, f, block_size,
                                                                            dynamic_shared_memory, 0),
          "cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags", [&] {
            return detail::kernel_label(handle_, signature_) + ", block size " + std::to_string(block_size) + ", " +
                   std::to_string(dynamic_shared_memory) + " bytes of dynamic shared memory";
          });
  });
  return blocks;
}

block_size_suggestion kernel_base::suggested_block_size(const device& dev, std::size_t dynamic_shared_memory,
                                                        int block_size_limit) const {
  auto [grid, block] = detail::suggest_block_size(handle_, dev.native_handle(), nullptr, nullptr, dynamic_shared_memory,
                                                  block_size_limit);
  return {grid, block};
}

std::size_t kernel_base::available_dynamic_shared_memory(const device& dev, int blocks_per_multiprocessor,
                                                         int block_size) const {
  if (blocks_per_multiprocessor <= 0 || block_size <= 0) {
    throw invalid_argument_error("cudrv::kernel::available_dynamic_shared_memory",
                                 "blocks_per_multiprocessor (" + std::to_string(blocks_per_multiprocessor) +
                                     ") and block_size (" + std::to_string(block_size) + ") must be positive");
  }
  CUfunction f = detail::function_in_primary_context(handle_, dev.native_handle());
  std::size_t bytes = 0;
  detail::run_in_context(dev.primary_context().native_handle(), "cuOccupancyAvailableDynamicSMemPerBlock", [&] {
    check(detail::drv::cuOccupancyAvailableDynamicSMemPerBlock(&bytes, f, blocks_per_multiprocessor, block_size),
          "cuOccupancyAvailableDynamicSMemPerBlock", [&] { return detail::kernel_label(handle_, signature_); });
  });
  return bytes;
}

namespace {
void require_32bit_shared(const launch_config& config, const char* api) {
  if (config.dynamic_shared_memory > 0xFFFFFFFFu) {
    throw invalid_argument_error(api, std::to_string(config.dynamic_shared_memory) +
                                          " bytes of dynamic shared memory do not fit a launch");
  }
}
}  // namespace

int kernel_base::max_potential_cluster_size(const device& dev, const launch_config& config) const {
  require_32bit_shared(config, "cudrv::kernel::max_potential_cluster_size");
  CUfunction f = detail::function_in_primary_context(handle_, dev.native_handle());
  launch_config without_cluster = config;
  without_cluster.cluster = dims(0, 0, 0);
  detail::check_launch_attributes(without_cluster, detail::occupancy_path,
                                  detail::launch_target{nullptr, nullptr, dev.ordinal(), nullptr},
                                  "cudrv::kernel::max_potential_cluster_size");
  detail::launch_attribute_array attrs;
  const CUlaunchConfig lc = detail::native_launch_config(without_cluster, attrs, detail::occupancy_path);
  int size = 0;
  detail::run_in_context(dev.primary_context().native_handle(), "cuOccupancyMaxPotentialClusterSize", [&] {
    check(detail::drv::cuOccupancyMaxPotentialClusterSize(&size, f, &lc), "cuOccupancyMaxPotentialClusterSize",
          [&] { return detail::kernel_label(handle_, signature_) + " on device " + std::to_string(dev.ordinal()); });
  });
  return size;
}

int kernel_base::max_active_clusters(const device& dev, const launch_config& config) const {
  if (!config.has_cluster()) {
    throw invalid_argument_error("cudrv::kernel::max_active_clusters",
                                 "the launch_config has no cluster dimensions: set launch_config::cluster");
  }
  require_32bit_shared(config, "cudrv::kernel::max_active_clusters");
  detail::check_launch_attributes(config, detail::occupancy_path,
                                  detail::launch_target{nullptr, nullptr, dev.ordinal(), nullptr},
                                  "cudrv::kernel::max_active_clusters");
  CUfunction f = detail::function_in_primary_context(handle_, dev.native_handle());
  detail::launch_attribute_array attrs;
  const CUlaunchConfig lc = detail::native_launch_config(config, attrs, detail::occupancy_path);
  int clusters = 0;
  detail::run_in_context(dev.primary_context().native_handle(), "cuOccupancyMaxActiveClusters", [&] {
    check(detail::drv::cuOccupancyMaxActiveClusters(&clusters, f, &lc), "cuOccupancyMaxActiveClusters", [&] {
      return detail::kernel_label(handle_, signature_) + ", cluster " + std::to_string(config.cluster.x) + "x" +
             std::to_string(config.cluster.y) + "x" + std::to_string(config.cluster.z) + " on device " +
             std::to_string(dev.ordinal());
    });
  });
  return clusters;
}

namespace {
const detail::kernel_signature& require_parameters(CUkernel kernel, const detail::kernel_signature* sig,
                                                   detail::kernel_signature& scratch, const char* api) {
  const detail::kernel_signature* known = nullptr;
  if (!detail::known_parameters(kernel, sig, scratch, known)) {
    throw not_supported_error(error_source::cudrv, CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED",
                              "the kernel's parameters are not known: " + known->unknown_reason, api,
                              detail::kernel_label(kernel, sig));
  }
  return *known;
}
}  // namespace

std::size_t kernel_base::parameter_count() const {
  detail::kernel_signature scratch;
  return require_parameters(handle_, signature_, scratch, "cudrv::kernel::parameter_count").params.size();
}

std::vector<kernel_parameter> kernel_base::parameters() const {
  detail::kernel_signature scratch;
  const auto& sig = require_parameters(handle_, signature_, scratch, "cudrv::kernel::parameters");
  std::vector<kernel_parameter> out;
  out.reserve(sig.params.size());
  for (std::size_t i = 0; i < sig.params.size(); ++i) {
    out.push_back({i, sig.params[i].offset, sig.params[i].size});
  }
  return out;
}

void kernel_base::check_signature(const std::size_t* sizes, std::size_t count) const {
  detail::kernel_signature scratch;
  const detail::kernel_signature* known = nullptr;
  if (!detail::known_parameters(handle_, signature_, scratch, known)) {
    return;  // cannot check with this driver
  }
  const char* api = "cudrv::kernel::as";
  if (known->params.size() != count) {
    throw invalid_argument_error(api, detail::kernel_label(handle_, known) + " has " +
                                          std::to_string(known->params.size()) + " parameters, but the signature has " +
                                          std::to_string(count));
  }
  for (std::size_t i = 0; i < count; ++i) {
    if (known->params[i].size != sizes[i]) {
      throw invalid_argument_error(api, detail::kernel_label(handle_, known) + ": parameter " + std::to_string(i) +
                                            " has " + std::to_string(known->params[i].size) +
                                            " bytes, but the signature's type has " + std::to_string(sizes[i]));
    }
  }
}

}  // namespace cudrv
