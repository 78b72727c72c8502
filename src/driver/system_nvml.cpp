// NVML loaded with dlopen and initialised once per process (<cudrv/system.hpp>).
#include "driver/system_nvml.hpp"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <utility>

namespace cudrv::detail::nvml {

namespace {

constexpr const char* nvml_soname = "libnvidia-ml.so.1";
constexpr const char* nvml_env = "CUDRV_LIBNVML";

// NVML as this process loaded it: the library, its entry points, and whether nvmlInit_v2 succeeded.
// The one nvmlInit_v2 cudrv makes is balanced by an nvmlShutdown when the process exits (NVML counts
// its initialisations, so an application's own nvmlInit/nvmlShutdown pairs leave cudrv's in place).
// The state is never destroyed; the shutdown is an atexit handler registered after nvmlInit_v2, so that
// it runs before whatever NVML registered while loading and initialising.
struct state {
  std::string path;
  api fns;
  std::atomic<bool> ready{false};
  // Why not ready: a dlopen or dlsym failure (init_result == success) or nvmlInit_v2's result.
  std::string reason;
  std::string failed_call;
  ret init_result = success;
};

state& get_state();

void shutdown_at_exit() {
  state& s = get_state();
  if (s.ready.exchange(false)) {
    s.fns.nvmlShutdown();
  }
}

void resolve(state& s, void* lib) {
  std::string missing;
  auto get = [&](const char* name, auto& fn, bool required) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    if (fn == nullptr && required) {
      missing += (missing.empty() ? "" : ", ") + std::string(name);
    }
  };
#define CUDRV_NVML_GET(name, type) get(#name, s.fns.name, true);
  CUDRV_NVML_REQUIRED(CUDRV_NVML_GET)
#undef CUDRV_NVML_GET
#define CUDRV_NVML_GET(name, type) get(#name, s.fns.name, false);
  CUDRV_NVML_OPTIONAL(CUDRV_NVML_GET)
#undef CUDRV_NVML_GET
  if (!missing.empty()) {
    s.reason = s.path + " lacks " + missing + " (not NVML, or an NVML older than CUDA 11); set " + nvml_env +
               " to the path of " + nvml_soname;
    s.failed_call = "dlsym";
    s.fns = api{};
  }
}

void load(state& s) {
  const char* override_path = std::getenv(nvml_env);
  s.path = override_path != nullptr && *override_path != '\0' ? override_path : nvml_soname;
  void* lib = dlopen(s.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* e = dlerror();
    s.reason = "dlopen(\"" + s.path + "\") failed: " + (e != nullptr ? e : "unknown error");
    s.failed_call = "dlopen";
    return;
  }
  resolve(s, lib);
  if (!s.failed_call.empty()) {
    dlclose(lib);
    return;
  }
  // The library stays loaded for the rest of the process (handles and the exit-time shutdown use it).
  if (ret r = s.fns.nvmlInit_v2(); r != success) {
    const char* text = s.fns.nvmlErrorString(r);
    s.reason = "nvmlInit_v2 failed: " + std::string(text != nullptr ? text : "error") + " (" + std::to_string(r) + ")";
    s.failed_call = "nvmlInit_v2";
    s.init_result = r;
    return;
  }
  s.ready = true;
  std::atexit(shutdown_at_exit);
}

state& get_state() {
  static state* const s = [] {
    auto* fresh = new state;  // never deleted: see state
    load(*fresh);
    return fresh;
  }();
  return *s;
}

}  // namespace

const api& loaded() {
  state& s = get_state();
  if (s.ready) [[likely]] {
    return s.fns;
  }
  if (s.init_result != success) {
    throw nvml_error(s.init_result, s.reason, "nvmlInit_v2", "NVML (" + s.path + ")");
  }
  if (s.failed_call.empty()) {  // loaded and initialised, then shut down by the exit-time handler
    throw nvml_error(uninitialized, "NVML was shut down at process exit", "nvmlShutdown", "NVML (" + s.path + ")");
  }
  const ret code = s.failed_call == "dlsym" ? function_not_found : library_not_found;
  throw library_unavailable_error(error_source::nvml, code, return_name(code), s.reason, s.failed_call,
                                  std::string("NVML: install the NVIDIA driver, or set ") + nvml_env +
                                      " to the path of " + nvml_soname);
}

bool usable() noexcept {
  try {
    return get_state().ready;
  } catch (...) {
    return false;  // the first call's allocation failed: NVML is not usable (not a terminate)
  }
}

std::string why_unusable() {
  const state& s = get_state();
  return s.ready || !s.failed_call.empty() ? s.reason : "NVML was shut down at process exit";
}

std::string path() { return get_state().path; }

std::string return_name(ret r) {
  static constexpr std::pair<ret, const char*> names[] = {
      {0, "NVML_SUCCESS"},
      {1, "NVML_ERROR_UNINITIALIZED"},
      {2, "NVML_ERROR_INVALID_ARGUMENT"},
      {3, "NVML_ERROR_NOT_SUPPORTED"},
      {4, "NVML_ERROR_NO_PERMISSION"},
      {5, "NVML_ERROR_ALREADY_INITIALIZED"},
      {6, "NVML_ERROR_NOT_FOUND"},
      {7, "NVML_ERROR_INSUFFICIENT_SIZE"},
      {8, "NVML_ERROR_INSUFFICIENT_POWER"},
      {9, "NVML_ERROR_DRIVER_NOT_LOADED"},
      {10, "NVML_ERROR_TIMEOUT"},
      {11, "NVML_ERROR_IRQ_ISSUE"},
      {12, "NVML_ERROR_LIBRARY_NOT_FOUND"},
      {13, "NVML_ERROR_FUNCTION_NOT_FOUND"},
      {14, "NVML_ERROR_CORRUPTED_INFOROM"},
      {15, "NVML_ERROR_GPU_IS_LOST"},
      {16, "NVML_ERROR_RESET_REQUIRED"},
      {17, "NVML_ERROR_OPERATING_SYSTEM"},
      {18, "NVML_ERROR_LIB_RM_VERSION_MISMATCH"},
      {19, "NVML_ERROR_IN_USE"},
      {20, "NVML_ERROR_MEMORY"},
      {21, "NVML_ERROR_NO_DATA"},
      {22, "NVML_ERROR_VGPU_ECC_NOT_SUPPORTED"},
      {23, "NVML_ERROR_INSUFFICIENT_RESOURCES"},
      {24, "NVML_ERROR_FREQ_NOT_SUPPORTED"},
      {25, "NVML_ERROR_ARGUMENT_VERSION_MISMATCH"},
      {26, "NVML_ERROR_DEPRECATED"},
      {27, "NVML_ERROR_NOT_READY"},
      {28, "NVML_ERROR_GPU_NOT_FOUND"},
      {29, "NVML_ERROR_INVALID_STATE"},
      {999, "NVML_ERROR_UNKNOWN"},
  };
  for (const auto& [value, name] : names) {
    if (value == r) {
      return name;
    }
  }
  return "NVML_ERROR_" + std::to_string(r);
}

void throw_error(ret r, const char* fn, std::string context) {
  const char* text = usable() ? get_state().fns.nvmlErrorString(r) : nullptr;
  throw nvml_error(r, text != nullptr ? text : return_name(r), fn, std::move(context));
}

}  // namespace cudrv::detail::nvml

namespace cudrv {

nvml_error::nvml_error(int result, std::string description, std::string api, std::string context)
    : error(error_source::nvml, result, detail::nvml::return_name(result), std::move(description), std::move(api),
            std::move(context)) {}

}  // namespace cudrv
