// library: loading code with the context-independent library API, kernels, globals, managed variables.
#include "cudrv/library.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "code/code_metadata.hpp"
#include "code/image_check.hpp"
#include "code/kernel_support.hpp"
#include "cudrv/context.hpp"
#include "cudrv/driver.hpp"
#include "cudrv/program.hpp"  // library(const compile_result&): the header only declares compile_result
#include "driver/driver_api.hpp"
#include "memory/memory_support.hpp"

#include <atomic>

namespace cudrv {
namespace detail {

struct library_state {
  // Counted references: the library object and every kernel taken from it (and graphs whose kernel
  // nodes launch it). The last one unloads the code.
  std::atomic<int> refs{1};
  CUlibrary handle = nullptr;
  bool owned = true;  // unload at the last reference (false after library::release())
  bool lazy = false;  // loaded without jit_options::eager: the driver may write the logs later
  std::string name;
  // The JIT's log buffers live as long as the library: under lazy loading the driver compiles and
  // writes its logs when a kernel is first used, long after cuLibraryLoadData returned.
  std::size_t log_capacity = 0;
  // The JIT option arrays too: some values are outputs (the log sizes), written when the JIT runs.
  CUjit_option jit_keys[12] = {};
  void* jit_values[12] = {};
  // What was loaded, for messages about failures found later (lazy loading).
  code_kind kind = code_kind::cubin;
  std::size_t image_size = 0;
  std::unique_ptr<char[]> info_log;
  std::unique_ptr<char[]> error_log;
  // The context the code was loaded into eagerly, named by the user or current at the time: where
  // parameter queries run when the image's metadata does not describe a kernel.
  context_token context;
  // Parameter layouts read from the image (code_metadata.hpp); complete when layouts_known.
  kernel_layouts layouts;
  bool layouts_known = false;
  // Name expressions of the compilation the code came from, with their lowered names.
  std::vector<std::pair<std::string, std::string>> expressions;
  std::mutex mutex;
  // Signatures are published once and never change or move: kernels keep pointers to them.
  std::unordered_map<CUkernel, std::unique_ptr<kernel_signature>> signatures;
};

namespace {

// Live libraries by handle, for stream_capture::end, which finds the library of a captured kernel
// node through cuKernelGetLibrary and makes the graph keep it.
//
// While a capture that cudrv began is running, a library whose last reference goes is parked, not
// unloaded: a kernel node of that capture may launch it, and only end() can make the graph keep it.
// The park holds one reference, dropped when the last running capture ends, so a library the graph
// took is unloaded with the graph, and one nobody took is unloaded then.
struct library_registry {
  std::mutex mutex;
  std::unordered_map<CUlibrary, library_state*> live;
  int captures = 0;
  std::vector<library_state*> parked;
};

library_registry& registry() {
  static auto* r = new library_registry;  // never destroyed: kernels may be released during exit
  return *r;
}

// Under the registry's lock: forgets state's entry, unless the handle has since been registered again.
void forget(library_registry& r, const library_state* state) noexcept {
  auto found = r.live.find(state->handle);
  if (found != r.live.end() && found->second == state) {
    r.live.erase(found);
  }
}

// Called with state's count at zero.
void unload(library_state* state) noexcept {
  if (state->handle != nullptr) {
    library_registry& r = registry();
    try {
      std::lock_guard lock(r.mutex);
      if (r.captures > 0 && state->owned) {
        r.parked.push_back(state);
        state->refs.store(1, std::memory_order_relaxed);  // the park's reference; none other exists
        return;
      }
      forget(r, state);
    } catch (...) {
      // No memory to park it (or no lock): unloaded now, as without a capture.
    }
    if (state->owned) {
      CUlibrary h = state->handle;
      destroy_noexcept("cuLibraryUnload", [h] { return drv::cuLibraryUnload(h); });
    }
  }
  delete state;
}

// Registers a library just loaded or adopted; on failure unloads it and rethrows (the caller's
// unique_ptr deletes the state).
void register_library(library_state* state) {
  try {
    std::lock_guard lock(registry().mutex);
    registry().live.insert_or_assign(state->handle, state);
  } catch (...) {
    CUlibrary h = state->handle;
    destroy_noexcept("cuLibraryUnload", [h] { return drv::cuLibraryUnload(h); });
    throw;
  }
}

}  // namespace

void retain_library(library_state* state) noexcept {
  if (state != nullptr) {
    state->refs.fetch_add(1, std::memory_order_relaxed);
  }
}

void release_library(library_state* state) noexcept {
  if (state != nullptr && state->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    unload(state);
  }
}

library_state* retain_library_of(CUlibrary handle) noexcept {
  try {
    library_registry& r = registry();
    for (;;) {
      {
        std::lock_guard lock(r.mutex);
        auto found = r.live.find(handle);
        if (found == r.live.end()) {
          return nullptr;
        }
        library_state* state = found->second;
        int refs = state->refs.load(std::memory_order_relaxed);
        while (refs > 0 && !state->refs.compare_exchange_weak(refs, refs + 1, std::memory_order_acq_rel)) {
        }
        if (refs > 0) {
          return state;
        }
        // The last reference was dropped on another thread, which has yet to take the lock in
        // unload(). During a capture it will park the library (a reference again): look once more.
        if (r.captures == 0) {
          return nullptr;
        }
      }
      std::this_thread::yield();
    }
  } catch (...) {
    return nullptr;
  }
}

void capture_began() {
  std::lock_guard lock(registry().mutex);  // std::mutex::lock throws only for a broken system
  ++registry().captures;
}

void capture_ended() noexcept {
  std::vector<library_state*> parked;
  {
    std::lock_guard lock(registry().mutex);
    if (--registry().captures > 0) {
      return;
    }
    parked.swap(registry().parked);
  }
  for (library_state* state : parked) {
    release_library(state);  // the park's reference: unloads what no graph took
  }
}

std::size_t check_global_size(const char* api, const std::string& name, std::size_t bytes, std::size_t element_size,
                              const char*) {
  if (bytes % element_size != 0) {
    throw invalid_argument_error(api, "the variable '" + name + "' has " + std::to_string(bytes) +
                                          " bytes, which is not a whole number of elements of " +
                                          std::to_string(element_size) + " bytes: use an element type of its size");
  }
  return bytes / element_size;
}

namespace {

std::string describe_library(const library_state* state) {
  if (state == nullptr || state->name.empty()) {
    return "the library";
  }
  return "library '" + state->name + "'";
}

std::string load_failure_advice(CUresult status, code_kind kind, std::size_t size) {
  switch (static_cast<int>(status)) {
    case CUDA_ERROR_INVALID_PTX: return "the driver's JIT could not compile the PTX (see its log below)";
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
      return "the PTX uses an ISA version this driver (CUDA " + std::to_string(driver::version() / 1000) + "." +
             std::to_string(driver::version() % 1000 / 10) +
             ") does not know: generate PTX with an older toolkit or update the driver";
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
      return "the image has no code for the devices of this machine: build a cubin for their architecture "
             "(see cudrv::device::arch) or include PTX";
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_INVALID_SOURCE:
      return "the " + std::string(to_string(kind)) + " image is malformed or truncated (" + std::to_string(size) +
             " bytes)";
    case CUDA_ERROR_JIT_COMPILER_NOT_FOUND:
    case CUDA_ERROR_JIT_COMPILATION_DISABLED:
      return "the PTX needs the driver's JIT, which is unavailable or disabled: load a cubin instead";
    default: return "the driver refused the " + std::string(to_string(kind)) + " image";
  }
}

}  // namespace

kernel_signature* signature_of(library_state* state, CUkernel kernel, const std::string& name) {
  std::lock_guard lock(state->mutex);
  auto found = state->signatures.find(kernel);
  if (found != state->signatures.end()) {
    return found->second.get();
  }
  auto sig = std::make_unique<kernel_signature>();
  sig->library = state;
  if (auto layout = state->layouts.find(name); state->layouts_known && layout != state->layouts.end()) {
    sig->name = name;
    sig->params = layout->second;
    sig->parameters_known = true;
  } else {
    // The image does not describe it (a compressed fatbin, an adopted handle): ask the driver in the
    // context the code was loaded into, or the current one; never in a context nobody named.
    CUcontext ctx = nullptr;
    if (state->context.handle != nullptr && state->context.alive()) {
      ctx = state->context.handle;
    }
    describe_kernel(kernel, *sig, ctx);
  }
  return state->signatures.emplace(kernel, std::move(sig)).first->second.get();
}

}  // namespace detail

// --- library_ref -------------------------------------------------------------------------------

void library_base::require_handle(const char* api) const {
  if (handle_ == nullptr) [[unlikely]] {
    throw invalid_argument_error(api, "the library is empty (a moved-from or released cudrv::library)");
  }
}

namespace {
// A name expression of the compilation the code came from stands for its lowered name.
const std::string& symbol_of(const detail::library_state* state, const std::string& requested) {
  if (state != nullptr) {
    for (const auto& [expression, mangled] : state->expressions) {
      if (expression == requested) {
        return mangled;
      }
    }
  }
  return requested;
}
}  // namespace

kernel library_base::get_kernel(const std::string& requested) const {
  require_handle("cudrv::library::get_kernel");
  const std::string& name = symbol_of(state_, requested);
  CUkernel handle = nullptr;
  // Where the image lists its kernels, a name that is none of them is refused as the driver refuses a
  // missing one: the driver hands out a handle for a __device__ function of a -G or -rdc image (driver
  // 580.159.04, lazily loaded library), which no launch could use.
  const bool not_a_kernel = state_ != nullptr && state_->layouts_known && state_->layouts.count(name) == 0;
  CUresult status =
      not_a_kernel ? CUDA_ERROR_NOT_FOUND : detail::drv::cuLibraryGetKernel(&handle, handle_, name.c_str());
  if (status == CUDA_ERROR_NOT_FOUND) {
    std::string message = "no kernel named '" + requested + "' in " + detail::describe_library(state_);
    try {
      auto names = kernel_names();
      message += names.empty() ? "; it contains no kernel" : "; it contains: ";
      std::string near;
      for (std::size_t i = 0; i < names.size(); ++i) {
        message += (i == 0 ? "" : ", ") + names[i];
        if (near.empty() && names[i] != name && names[i].find(name) != std::string::npos) {
          near = names[i];
        }
      }
      if (!near.empty()) {
        message += " (" + near +
                   " is a C++-mangled name: declare the kernel extern \"C\", pass the mangled name, or get the "
                   "lowered name from a cudrv::program name expression)";
      }
    } catch (const error&) {
      message += " (the driver cannot list the kernels it contains: CUDA 12.4 or newer is needed for that)";
    }
    throw error(status, "cuLibraryGetKernel", std::move(message));
  }
  if (detail::is_context_lost(status)) [[unlikely]] {
    detail::throw_driver_error(status, "cuLibraryGetKernel", "kernel '" + name + "'");
  }
  if (status == CUDA_ERROR_NO_BINARY_FOR_GPU || status == CUDA_ERROR_INVALID_PTX ||
      status == CUDA_ERROR_INVALID_IMAGE || status == CUDA_ERROR_UNSUPPORTED_PTX_VERSION) {
    // Under lazy loading (jit_options::eager = false) the image is compiled and checked here.
    throw load_error(error_source::driver, static_cast<int>(status), error_name(status), error_description(status),
                     "cuLibraryGetKernel",
                     "kernel '" + name + "' in " + detail::describe_library(state_) + ": " +
                         detail::load_failure_advice(status, state_ != nullptr ? state_->kind : code_kind::cubin,
                                                     state_ != nullptr ? state_->image_size : 0),
                     state_ != nullptr && state_->error_log
                         ? std::string(state_->error_log.get(), strnlen(state_->error_log.get(), state_->log_capacity))
                         : std::string());
  }
  detail::check(status, "cuLibraryGetKernel",
                [&] { return "kernel '" + name + "' in " + detail::describe_library(state_); });
  if (state_ == nullptr) {
    return kernel(handle, nullptr, nullptr);
  }
  return kernel(handle, detail::signature_of(state_, handle, name), state_);
}

bool library_base::has_kernel(const std::string& requested) const {
  require_handle("cudrv::library::has_kernel");
  const std::string& name = symbol_of(state_, requested);
  if (state_ != nullptr && state_->layouts_known) {
    // The image lists its kernels: asking the driver for a missing one would be a failing call.
    return state_->layouts.count(name) != 0;
  }
  CUkernel kernel = nullptr;
  CUresult status = detail::drv::cuLibraryGetKernel(&kernel, handle_, name.c_str());
  if (status == CUDA_ERROR_NOT_FOUND) {
    return false;
  }
  detail::check(status, "cuLibraryGetKernel", [&] { return "kernel '" + name + "'"; });
  return true;
}

std::vector<std::string> library_base::kernel_names() const {
  require_handle("cudrv::library::kernel_names");
#if CUDRV_HAS_KERNEL_INTROSPECTION
  unsigned count = 0;
  detail::check(detail::drv::cuLibraryGetKernelCount(&count, handle_), "cuLibraryGetKernelCount");
  std::vector<CUkernel> kernels(count);
  if (count > 0) {
    detail::check(detail::drv::cuLibraryEnumerateKernels(kernels.data(), count, handle_), "cuLibraryEnumerateKernels");
  }
  std::vector<std::string> names;
  names.reserve(count);
  for (CUkernel k : kernels) {
    names.push_back(kernel_ref::from_native_handle(k).name());
  }
  std::sort(names.begin(), names.end());
  return names;
#else
  throw not_supported_error(error_source::cudrv, CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED",
                            "listing kernels needs CUDA 12.4 headers; cudrv was built with older ones",
                            "cudrv::library::kernel_names", {});
#endif
}

std::pair<CUdeviceptr, std::size_t> library_base::raw_global(const std::string& name, context_ref ctx) const& {
  require_handle("cudrv::library::get_global");
  CUdeviceptr address = 0;
  std::size_t bytes = 0;
  detail::run_in_context(ctx.native_handle(), "cudrv::library::get_global", [&] {
    detail::check(detail::drv::cuLibraryGetGlobal(&address, &bytes, handle_, name.c_str()), "cuLibraryGetGlobal",
                  [&] { return "global variable '" + name + "' in " + detail::describe_library(state_); });
  });
  return {address, bytes};
}

std::pair<CUdeviceptr, std::size_t> library_base::raw_managed(const std::string& name) const& {
  require_handle("cudrv::library::get_managed");
  CUdeviceptr address = 0;
  std::size_t bytes = 0;
  detail::check(detail::drv::cuLibraryGetManaged(&address, &bytes, handle_, name.c_str()), "cuLibraryGetManaged",
                [&] { return "managed variable '" + name + "' in " + detail::describe_library(state_); });
  return {address, bytes};
}

CUmodule library_base::module(context_ref ctx) const& {
  require_handle("cudrv::library::module");
  CUmodule mod = nullptr;
  detail::run_in_context(ctx.native_handle(), "cudrv::library::module",
                         [&] { detail::check(detail::drv::cuLibraryGetModule(&mod, handle_), "cuLibraryGetModule"); });
  return mod;
}

std::string library_base::jit_log() const {
  if (state_ == nullptr || !state_->info_log) {
    return {};
  }
  return std::string(state_->info_log.get(), strnlen(state_->info_log.get(), state_->log_capacity));
}

std::string library_base::name() const { return state_ != nullptr ? state_->name : std::string(); }

// --- library -----------------------------------------------------------------------------------

namespace {

// Loads the library into ctx and every kernel's code with it, so that a bad image fails now rather
// than at first use under the driver's lazy loading. Returns the first failure.
CUresult load_now(CUlibrary lib, CUcontext ctx) {
  CUresult status = CUDA_SUCCESS;
  detail::run_in_context(ctx, "cudrv::library", [&] {
    CUmodule mod = nullptr;
    status = detail::drv::cuLibraryGetModule(&mod, lib);
    if (status != CUDA_SUCCESS) {
      return;
    }
    try {
      unsigned count = 0;
      status = detail::drv::cuLibraryGetKernelCount(&count, lib);
      std::vector<CUkernel> kernels(count);
      if (status == CUDA_SUCCESS && count > 0) {
        status = detail::drv::cuLibraryEnumerateKernels(kernels.data(), count, lib);
      }
      for (std::size_t i = 0; status == CUDA_SUCCESS && i < kernels.size(); ++i) {
        CUfunction fn = nullptr;
        status = detail::drv::cuKernelGetFunction(&fn, kernels[i]);
        if (status == CUDA_SUCCESS) {
          status = detail::drv::cuFuncLoad(fn);
        }
      }
    } catch (const not_supported_error&) {
      // A driver older than 12.4 cannot list or load kernels one by one: the module load above is
      // as eager as it gets there.
    }
  });
  return status;
}

// Refuses, typed, what cannot be loaded: code kinds that need linking, an empty image, jit_options out
// of range, and an image whose structure is malformed.
void check_loadable(const object_code& code, const jit_options& options) {
  constexpr const char* api = "cudrv::library";
  if (code.kind() == code_kind::ltoir || code.kind() == code_kind::object || code.kind() == code_kind::library) {
    throw invalid_argument_error(api, "cannot load " + std::string(to_string(code.kind())) + " code ('" + code.name() +
                                          "') directly: link it to a cubin with cudrv::linker first");
  }
  if (code.empty()) {
    throw invalid_argument_error(api, "the " + std::string(to_string(code.kind())) + " image" +
                                          (code.name().empty() ? std::string() : " '" + code.name() + "'") +
                                          " is empty");
  }
  if (options.optimization_level && (*options.optimization_level < 0 || *options.optimization_level > 4)) {
    throw invalid_argument_error(api, "jit_options::optimization_level is " +
                                          std::to_string(*options.optimization_level) + "; it must be 0 to 4");
  }
  if (options.max_registers && *options.max_registers <= 0) {
    throw invalid_argument_error(api, "jit_options::max_registers is " + std::to_string(*options.max_registers) +
                                          "; give a positive limit or leave it empty");
  }
  if (options.target && (*options.target < 30 || *options.target > 199)) {
    throw invalid_argument_error(api, "jit_options::target is " + std::to_string(*options.target) +
                                          "; give a compute capability as major * 10 + minor, e.g. 90");
  }
  // The driver trusts the offsets and sizes in an image: a truncated cubin made cuLibraryLoadData
  // hang or crash (driver 580). Garbage is refused here, typed, before the driver sees it.
  if (std::string problem = detail::image_problem(code.kind(), code.bytes()); !problem.empty()) {
    throw invalid_image_error(api, "the " + std::string(to_string(code.kind())) + " image" +
                                       (code.name().empty() ? std::string() : " '" + code.name() + "'") +
                                       " is malformed: " + problem);
  }
}

// Writes the JIT options of a load into state's jit_keys and jit_values (the log buffers of state, then
// what options sets); returns how many.
unsigned write_jit_options(detail::library_state& state, const jit_options& options) {
  CUjit_option* keys = state.jit_keys;
  void** values = state.jit_values;
  unsigned n = 0;
  auto add = [&](CUjit_option key, std::uintptr_t value) {
    keys[n] = key;
    values[n] = reinterpret_cast<void*>(value);
    ++n;
  };
  add(CU_JIT_INFO_LOG_BUFFER, reinterpret_cast<std::uintptr_t>(state.info_log.get()));
  add(CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, state.log_capacity);
  add(CU_JIT_ERROR_LOG_BUFFER, reinterpret_cast<std::uintptr_t>(state.error_log.get()));
  add(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, state.log_capacity);
  if (options.verbose) {
    add(CU_JIT_LOG_VERBOSE, 1);
  }
  if (options.optimization_level) {
    add(CU_JIT_OPTIMIZATION_LEVEL, static_cast<std::uintptr_t>(*options.optimization_level));
  }
  if (options.max_registers) {
    add(CU_JIT_MAX_REGISTERS, static_cast<std::uintptr_t>(*options.max_registers));
  }
  if (options.line_info) {
    add(CU_JIT_GENERATE_LINE_INFO, 1);
  }
  if (options.debug) {
    add(CU_JIT_GENERATE_DEBUG_INFO, 1);
  }
  if (options.target) {
    add(CU_JIT_TARGET, static_cast<std::uintptr_t>(*options.target));
  }
  return n;
}

// Loads the loaded library of state into ctx now (load_now); on failure the library is unloaded (its
// handle null), and the failure returned or rethrown.
CUresult load_eagerly(detail::library_state& state, CUcontext ctx) {
  CUresult status = CUDA_SUCCESS;
  try {
    state.context = detail::context_token::of(ctx);
    status = load_now(state.handle, ctx);
  } catch (...) {
    CUlibrary h = std::exchange(state.handle, nullptr);
    detail::destroy_noexcept("cuLibraryUnload", [h] { return detail::drv::cuLibraryUnload(h); });
    throw;
  }
  if (status != CUDA_SUCCESS) {
    CUlibrary h = std::exchange(state.handle, nullptr);
    detail::destroy_noexcept("cuLibraryUnload", [h] { return detail::drv::cuLibraryUnload(h); });
  }
  return status;
}

// Throws the error of a failed load of code: a driver_error for the driver's own state, else a
// load_error with advice and the JIT's log from state.
[[noreturn]] void throw_load_failure(CUresult status, const object_code& code, const detail::library_state& state) {
  std::string context = detail::load_failure_advice(status, code.kind(), code.size());
  if (!code.name().empty()) {
    context = "'" + code.name() + "': " + context;
  }
  auto text = [&](const std::unique_ptr<char[]>& buffer) {
    return std::string(buffer.get(), strnlen(buffer.get(), state.log_capacity));
  };
  std::string log = text(state.error_log);
  if (log.empty()) {
    log = text(state.info_log);
  }
  if (status == CUDA_ERROR_NOT_INITIALIZED || status == CUDA_ERROR_NO_DEVICE || status == CUDA_ERROR_OUT_OF_MEMORY ||
      status == CUDA_ERROR_DEINITIALIZED || detail::is_context_lost(status)) {
    detail::throw_driver_error(status, "cuLibraryLoadData", context);
  }
  throw load_error(error_source::driver, static_cast<int>(status), error_name(status), error_description(status),
                   "cuLibraryLoadData", std::move(context), std::move(log));
}

// Loads code; eagerly into ctx when given, else into the current context if one is current, else
// into none (cudrv never picks a context). The state starts with one reference.
std::unique_ptr<detail::library_state> load_library(const object_code& code, CUcontext ctx,
                                                    const jit_options& options) {
  check_loadable(code, options);
  if (options.eager && ctx == nullptr) {
    detail::check(detail::drv::cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
  }
  auto state = std::make_unique<detail::library_state>();
  state->name = code.name();
  state->lazy = !options.eager;
  state->layouts_known = detail::read_kernel_layouts(code.kind(), code.bytes(), state->layouts);
  state->kind = code.kind();
  state->image_size = code.size();
  const std::size_t capacity = std::max<std::size_t>(options.log_capacity, 256);
  state->log_capacity = capacity;
  state->info_log = std::make_unique<char[]>(capacity);  // zero-filled
  state->error_log = std::make_unique<char[]>(capacity);
  const unsigned n = write_jit_options(*state, options);
  CUresult status = detail::drv::cuLibraryLoadData(&state->handle, code.data(), state->jit_keys, state->jit_values, n,
                                                   nullptr, nullptr, 0);
  if (status == CUDA_SUCCESS && options.eager && ctx != nullptr) {
    status = load_eagerly(*state, ctx);
  }
  if (status != CUDA_SUCCESS) {
    throw_load_failure(status, code, *state);
  }
  detail::register_library(state.get());
  return state;
}

}  // namespace

library::library(const object_code& code, const jit_options& options)
    : library(load_library(code, nullptr, options).release()) {}

library::library(const object_code& code, context_ref ctx, const jit_options& options)
    : library(load_library(code, detail::require_context_handle(ctx.native_handle(), "cudrv::library"), options)
                  .release()) {}

library::library(const object_code& code, const device& dev, const jit_options& options)
    : library(code, dev.primary_context(), options) {}

namespace {
detail::library_state* with_expressions(detail::library_state* state, const compile_result& result) noexcept {
  // Attached after loading, which cannot fail any more; a failure to copy them leaves the names out.
  try {
    state->expressions = result.lowered_names;
  } catch (...) {
  }
  return state;
}
}  // namespace

library::library(const compile_result& result, const jit_options& options)
    : library(with_expressions(load_library(result.code, nullptr, options).release(), result)) {}

library::library(const compile_result& result, context_ref ctx, const jit_options& options)
    : library(
          with_expressions(load_library(result.code,
                                        detail::require_context_handle(ctx.native_handle(), "cudrv::library"), options)
                               .release(),
                           result)) {}

library::library(const compile_result& result, const device& dev, const jit_options& options)
    : library(result, dev.primary_context(), options) {}

library::library(detail::library_state* state) noexcept : library_base(state->handle, state) {}

library library::from_file(const std::string& path, const jit_options& options) {
  return library(object_code::from_file(path), options);
}

library library::from_file(const std::string& path, context_ref ctx, const jit_options& options) {
  return library(object_code::from_file(path), ctx, options);
}

library library::from_file(const std::string& path, const device& dev, const jit_options& options) {
  return library(object_code::from_file(path), dev, options);
}

library library::from_native_handle(CUlibrary handle) {
  std::unique_ptr<detail::library_state> state;
  try {
    state = std::make_unique<detail::library_state>();
  } catch (...) {
    // Adopted either way: a failure to adopt unloads the handle, as std::shared_ptr deletes a pointer
    // it could not take.
    detail::destroy_noexcept("cuLibraryUnload", [handle] { return detail::drv::cuLibraryUnload(handle); });
    throw;
  }
  state->handle = handle;
  detail::register_library(state.get());
  return library(state.release());
}

library::library(library&& other) noexcept
    : library_base(std::exchange(other.handle_, nullptr), std::exchange(other.state_, nullptr)) {}

library& library::operator=(library&& other) noexcept {
  if (this != &other) {
    reset();
    handle_ = std::exchange(other.handle_, nullptr);
    state_ = std::exchange(other.state_, nullptr);
  }
  return *this;
}

library::~library() { reset(); }

void library::reset() noexcept {
  handle_ = nullptr;
  detail::release_library(std::exchange(state_, nullptr));
}

CUlibrary library::release() noexcept {
  CUlibrary h = std::exchange(handle_, nullptr);
  detail::library_state* state = std::exchange(state_, nullptr);
  if (state == nullptr) {
    return h;
  }
  state->owned = false;  // read only by unload(), after the last reference: ordered by the count
  // No longer cudrv's: graphs captured later cannot keep it loaded, and the driver may give its handle
  // to a library loaded after the caller unloads this one.
  try {
    std::lock_guard lock(detail::registry().mutex);
    detail::forget(detail::registry(), state);
  } catch (...) {
  }
  // Under lazy loading the driver may still write JIT logs into the state's buffers while the caller
  // keeps the code loaded: that reference is never dropped.
  if (!state->lazy) {
    detail::release_library(state);
  }
  return h;
}

}  // namespace cudrv
