// Run-time loading of libcuda.so.1 and lazy resolution of its entry points.
#include "cudrv/driver.hpp"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "driver/driver_api.hpp"
#include "driver/driver_log.hpp"

namespace cudrv::detail {
namespace {

using get_proc_v2_t = PFN_cuGetProcAddress_v12000;
using get_proc_v1_t = PFN_cuGetProcAddress_v11030;
using init_t = PFN_cuInit_v2000;
using driver_version_t = PFN_cuDriverGetVersion_v2020;

struct driver_state {
  void* library = nullptr;
  std::string path;
  get_proc_v2_t get_proc_v2 = nullptr;
  get_proc_v1_t get_proc_v1 = nullptr;
  int version = 0;
  CUresult init_status = CUDA_ERROR_NOT_INITIALIZED;
  bool usable = false;  // cuInit succeeded (or found no device: calls then report that)
  std::string reason;   // why not usable
};

std::string dl_error() {
  const char* e = dlerror();
  return e != nullptr ? e : "unknown dlopen error";
}

driver_state load_driver() {
  driver_state s;
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("CUDRV_LIBCUDA"); env != nullptr && *env != '\0') {
    candidates.emplace_back(env);
  } else {
    candidates = {"libcuda.so.1", "/usr/lib/wsl/lib/libcuda.so.1"};
  }
  std::string tried;
  for (const auto& name : candidates) {
    void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      tried += (tried.empty() ? "" : "; ") + name + " (" + dl_error() + ")";
      continue;
    }
    s.library = lib;
    s.path = name;
    if (link_map* map = nullptr;
        dlinfo(lib, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr && *map->l_name != '\0') {
      s.path = map->l_name;
    }
    break;
  }
  if (s.library == nullptr) {
    s.reason = "the CUDA driver was not found: tried " + tried +
               ". Install the NVIDIA driver, or set CUDRV_LIBCUDA to the path of libcuda.so.1";
    return s;
  }
  s.get_proc_v2 = reinterpret_cast<get_proc_v2_t>(dlsym(s.library, "cuGetProcAddress_v2"));
  if (s.get_proc_v2 == nullptr) {
    s.get_proc_v1 = reinterpret_cast<get_proc_v1_t>(dlsym(s.library, "cuGetProcAddress"));
  }
  if (s.get_proc_v2 == nullptr && s.get_proc_v1 == nullptr) {
    s.reason = s.path + " has no cuGetProcAddress: the CUDA driver is older than 11.3, which cudrv does not support";
    return s;
  }
  auto init = reinterpret_cast<init_t>(dlsym(s.library, "cuInit"));
  auto get_version = reinterpret_cast<driver_version_t>(dlsym(s.library, "cuDriverGetVersion"));
  if (get_version != nullptr) {
    get_version(&s.version);
  }
  if (init == nullptr) {
    s.reason = s.path + " has no cuInit";
    return s;
  }
  s.init_status = init(0);
  if (s.init_status == CUDA_SUCCESS || s.init_status == CUDA_ERROR_NO_DEVICE) {
    s.usable = true;
    return s;
  }
  s.reason = "cuInit(0) failed in " + s.path + ": " + error_name(s.init_status) + " (" +
             error_description(s.init_status) + ")";
  return s;
}

std::atomic<PFN_cuGetErrorString_v6000> error_string_fn{nullptr};

// --- fork() ------------------------------------------------------------------------------------------
// A child forked after cuInit must not call the driver: its state (contexts, memory mappings, the
// driver's threads) belongs to the parent, and calls hang, crash or act on the parent's objects. The
// child handler, registered once the driver is initialised, swaps every entry point for a stub that
// returns forked_child_status without reaching the driver: checked calls throw fork_error, and the
// destructors of the parent's objects do nothing. The normal path is unchanged (the same cached
// pointer, loaded the same way).
std::atomic<bool> forked{false};

template <class Pfn>
struct forked_stub;
template <class... Args>
struct forked_stub<CUresult(CUDAAPI*)(Args...)> {
  static CUresult CUDAAPI call(Args...) { return forked_child_status; }  // the exact PFN type: no noexcept
};

void on_fork_child() noexcept {
  forked.store(true, std::memory_order_release);
  error_string_fn.store(nullptr, std::memory_order_release);  // descriptions come from cudrv's table
#define CUDRV_STUB_ENTRY(name, ver) \
  drv::name##_entry.fn.store(&forked_stub<PFN_##name##_v##ver>::call, std::memory_order_release);
  CUDRV_DRIVER_ENTRY_POINTS(CUDRV_STUB_ENTRY)
#undef CUDRV_STUB_ENTRY
}

// An entry point looked up while the driver loads (inside state(): resolve_entry_point would re-enter it),
// or null where the driver lacks it.
void* find_at_load(const driver_state& s, const char* symbol, int api_version) noexcept {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SUCCESS;
  const CUresult status = s.get_proc_v2 != nullptr
                              ? s.get_proc_v2(symbol, &fn, api_version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &found)
                              : s.get_proc_v1(symbol, &fn, api_version, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
  return status == CUDA_SUCCESS && found == CU_GET_PROC_ADDRESS_SUCCESS ? fn : nullptr;
}

driver_state& state() {
  // Never destroyed: destructors of static cudrv objects may still call the driver at exit.
  static driver_state* s = [] {
    auto* loaded = new driver_state(load_driver());
    if (loaded->library != nullptr) {
      error_string_fn.store(reinterpret_cast<PFN_cuGetErrorString_v6000>(dlsym(loaded->library, "cuGetErrorString")),
                            std::memory_order_release);
    }
    if (loaded->usable) {
      pthread_atfork(nullptr, nullptr, &on_fork_child);  // cuInit ran: a child may no longer use CUDA
      // issue 34 part 2: the driver's log in errors, in place before the first call that can fail.
      start_driver_log(find_at_load(*loaded, "cuLogsRegisterCallback", 12090),
                       find_at_load(*loaded, "cuLogsUnregisterCallback", 12090));
    }
    return loaded;
  }();
  return *s;
}

}  // namespace

bool in_forked_child() noexcept { return forked.load(std::memory_order_acquire); }

const char* driver_error_string(CUresult code) noexcept {
  auto fn = error_string_fn.load(std::memory_order_acquire);
  const char* text = nullptr;
  if (fn == nullptr || fn(code, &text) != CUDA_SUCCESS) {
    return nullptr;
  }
  return text;
}

void ensure_driver() {
  const driver_state& s = state();
  if (in_forked_child()) [[unlikely]] {
    throw fork_error("cuInit", {});
  }
  if (!s.usable) [[unlikely]] {
    CUresult code = s.library == nullptr ? CUDA_ERROR_NOT_INITIALIZED : s.init_status;
    throw driver_unavailable_error(error_source::driver, code, error_name(code), s.reason, "cuInit", {});
  }
}

void* resolve_entry_point(const char* symbol, int api_version) {
  ensure_driver();
  const driver_state& s = state();
  void* fn = nullptr;
  CUresult status = CUDA_SUCCESS;
  CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SUCCESS;
  if (s.get_proc_v2 != nullptr) {
    status = s.get_proc_v2(symbol, &fn, api_version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &found);
  } else {
    status = s.get_proc_v1(symbol, &fn, api_version, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
  }
  if (status == CUDA_SUCCESS && found == CU_GET_PROC_ADDRESS_SUCCESS && fn != nullptr) {
    return fn;
  }
  auto as_version = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
  std::string why;
  if (found == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT) {
    // The driver has the symbol, but only in a version newer than the ABI asked for.
    why = std::string(symbol) + " does not exist at API version " + as_version(api_version) +
          ": it was introduced in a later CUDA version (installed driver: CUDA " + as_version(s.version) + ")";
  } else if (api_version > s.version) {
    why = std::string(symbol) + " requires a CUDA driver for CUDA " + as_version(api_version) +
          " or newer; the installed driver supports CUDA " + as_version(s.version);
  } else {
    why = std::string(symbol) + " (API version " + as_version(api_version) +
          ") was not found in the installed CUDA driver (CUDA " + as_version(s.version) + ")";
  }
  CUresult code = call_requires_newer_driver;
  throw not_supported_error(error_source::driver, code, error_name(code), why, "cuGetProcAddress", symbol);
}

}  // namespace cudrv::detail

namespace cudrv::driver {

bool available() noexcept {
  try {
    return detail::state().usable && !detail::in_forked_child();
  } catch (...) {
    return false;
  }
}

int version() noexcept {
  try {
    return detail::state().version;
  } catch (...) {
    return 0;
  }
}

std::string unavailable_reason() noexcept {
  try {
    if (detail::in_forked_child()) {
      return "this process was forked after its parent initialised CUDA; CUDA cannot be used in the child";
    }
    return detail::state().reason;
  } catch (...) {
    return "unknown";
  }
}

std::string library_path() noexcept {
  try {
    return detail::state().path;
  } catch (...) {
    return {};
  }
}

void* get_entry_point(const char* symbol, int api_version) { return detail::resolve_entry_point(symbol, api_version); }

}  // namespace cudrv::driver
