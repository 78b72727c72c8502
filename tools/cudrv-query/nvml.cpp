// cudrv-query: NVML loaded with dlopen. The few types and constants used here are declared from
// NVML's documented C ABI (nvml.h is not part of the CUDA toolkit packages this project builds with).
#include "nvml.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

namespace cudrv_query {

namespace {

// --- the NVML ABI used here ----------------------------------------------------------------------
using nvml_return = int;  // nvmlReturn_t
constexpr nvml_return nvml_success = 0;
using nvml_handle = struct nvml_device_opaque*;  // nvmlDevice_t
struct nvml_memory {                             // nvmlMemory_t
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct nvml_utilization {  // nvmlUtilization_t
  unsigned int gpu;
  unsigned int memory;
};
constexpr int nvml_clock_graphics = 0;  // nvmlClockType_t
constexpr int nvml_clock_sm = 1;
constexpr int nvml_clock_mem = 2;
constexpr int nvml_temperature_gpu = 0;   // nvmlTemperatureSensors_t
constexpr int nvml_pstate_unknown = 32;   // nvmlPstates_t
constexpr unsigned int nvml_buffer = 96;  // larger than NVML's UUID (80) and version (80) buffers

template <class F>
F symbol(void* lib, const char* name) {
  return reinterpret_cast<F>(dlsym(lib, name));
}

}  // namespace

/// The entry points; optional ones may be null (older NVML).
struct nvml_session::api {
  void* library = nullptr;
  nvml_return (*init)() = nullptr;
  nvml_return (*shutdown)() = nullptr;
  const char* (*error_string)(nvml_return) = nullptr;
  nvml_return (*get_count)(unsigned int*) = nullptr;
  nvml_return (*by_index)(unsigned int, nvml_handle*) = nullptr;
  nvml_return (*by_uuid)(const char*, nvml_handle*) = nullptr;
  nvml_return (*get_uuid)(nvml_handle, char*, unsigned int) = nullptr;
  nvml_return (*get_index)(nvml_handle, unsigned int*) = nullptr;
  nvml_return (*driver_version)(char*, unsigned int) = nullptr;
  nvml_return (*nvml_version)(char*, unsigned int) = nullptr;
  nvml_return (*memory_info)(nvml_handle, nvml_memory*) = nullptr;
  nvml_return (*clock_info)(nvml_handle, int, unsigned int*) = nullptr;
  nvml_return (*max_clock_info)(nvml_handle, int, unsigned int*) = nullptr;
  nvml_return (*temperature)(nvml_handle, int, unsigned int*) = nullptr;
  nvml_return (*power_usage)(nvml_handle, unsigned int*) = nullptr;
  nvml_return (*power_limit)(nvml_handle, unsigned int*) = nullptr;
  nvml_return (*pcie_generation)(nvml_handle, unsigned int*) = nullptr;
  nvml_return (*pcie_width)(nvml_handle, unsigned int*) = nullptr;
  nvml_return (*pcie_max_generation)(nvml_handle, unsigned int*) = nullptr;
  nvml_return (*pcie_max_width)(nvml_handle, unsigned int*) = nullptr;
  nvml_return (*ecc_mode)(nvml_handle, int*, int*) = nullptr;
  nvml_return (*mig_mode)(nvml_handle, unsigned int*, unsigned int*) = nullptr;
  nvml_return (*utilization)(nvml_handle, nvml_utilization*) = nullptr;
  nvml_return (*performance_state)(nvml_handle, int*) = nullptr;
  nvml_return (*persistence_mode)(nvml_handle, int*) = nullptr;
  nvml_return (*is_mig_handle)(nvml_handle, unsigned int*) = nullptr;
  nvml_return (*mig_parent)(nvml_handle, nvml_handle*) = nullptr;

  // Reads everything about one GPU; each field only when NVML answers.
  nvml_device read(nvml_handle h, nvml_fields fields) const {
    nvml_device d;
    char text[nvml_buffer] = {};
    if (get_uuid(h, text, nvml_buffer) == nvml_success) {
      d.uuid = text;
    }
    unsigned int u = 0;
    unsigned int u2 = 0;
    int i = 0;
    int i2 = 0;
    if (get_index && get_index(h, &u) == nvml_success) {
      d.index = u;
    }
    if (nvml_memory m{}; memory_info && memory_info(h, &m) == nvml_success) {
      d.memory_total_bytes = m.total;
      d.memory_free_bytes = m.free;
      d.memory_used_bytes = m.used;
    }
    if (fields == nvml_fields::memory) {
      return d;
    }
    auto clocks = [&](auto fn, nvml_clocks& out) {
      if (!fn) {
        return;
      }
      if (fn(h, nvml_clock_graphics, &u) == nvml_success) out.graphics_mhz = u;
      if (fn(h, nvml_clock_sm, &u) == nvml_success) out.sm_mhz = u;
      if (fn(h, nvml_clock_mem, &u) == nvml_success) out.memory_mhz = u;
    };
    clocks(clock_info, d.clocks);
    clocks(max_clock_info, d.max_clocks);
    if (temperature && temperature(h, nvml_temperature_gpu, &u) == nvml_success) d.temperature_c = u;
    if (power_usage && power_usage(h, &u) == nvml_success) d.power_draw_w = u / 1000.0;
    if (power_limit && power_limit(h, &u) == nvml_success) d.power_limit_w = u / 1000.0;
    if (pcie_generation && pcie_generation(h, &u) == nvml_success) d.pcie_generation = u;
    if (pcie_max_generation && pcie_max_generation(h, &u) == nvml_success) d.pcie_max_generation = u;
    if (pcie_width && pcie_width(h, &u) == nvml_success) d.pcie_width = u;
    if (pcie_max_width && pcie_max_width(h, &u) == nvml_success) d.pcie_max_width = u;
    if (ecc_mode && ecc_mode(h, &i, &i2) == nvml_success) {
      d.ecc_enabled = i != 0;
      d.ecc_pending = i2 != 0;
    }
    if (mig_mode && mig_mode(h, &u, &u2) == nvml_success) {
      d.mig_enabled = u != 0;
      d.mig_pending = u2 != 0;
    }
    if (nvml_utilization ut{}; utilization && utilization(h, &ut) == nvml_success) {
      d.utilization_gpu_percent = ut.gpu;
      d.utilization_memory_percent = ut.memory;
    }
    if (performance_state && performance_state(h, &i) == nvml_success && i != nvml_pstate_unknown) {
      d.performance_state = i;
    }
    if (persistence_mode && persistence_mode(h, &i) == nvml_success) d.persistence_mode = i != 0;
    return d;
  }
};

nvml_session::nvml_session() {
  const char* override_path = std::getenv("CUDRV_LIBNVML");
  status_.library = override_path != nullptr && *override_path != '\0' ? override_path : "libnvidia-ml.so.1";
  void* lib = dlopen(status_.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* e = dlerror();
    status_.reason = std::string("dlopen(\"") + status_.library + "\") failed: " + (e != nullptr ? e : "unknown error");
    return;
  }
  auto a = std::make_unique<api>();
  a->library = lib;
  a->init = symbol<decltype(a->init)>(lib, "nvmlInit_v2");
  a->shutdown = symbol<decltype(a->shutdown)>(lib, "nvmlShutdown");
  a->error_string = symbol<decltype(a->error_string)>(lib, "nvmlErrorString");
  a->get_count = symbol<decltype(a->get_count)>(lib, "nvmlDeviceGetCount_v2");
  a->by_index = symbol<decltype(a->by_index)>(lib, "nvmlDeviceGetHandleByIndex_v2");
  a->by_uuid = symbol<decltype(a->by_uuid)>(lib, "nvmlDeviceGetHandleByUUID");
  a->get_uuid = symbol<decltype(a->get_uuid)>(lib, "nvmlDeviceGetUUID");
  a->get_index = symbol<decltype(a->get_index)>(lib, "nvmlDeviceGetIndex");
  a->driver_version = symbol<decltype(a->driver_version)>(lib, "nvmlSystemGetDriverVersion");
  a->nvml_version = symbol<decltype(a->nvml_version)>(lib, "nvmlSystemGetNVMLVersion");
  a->memory_info = symbol<decltype(a->memory_info)>(lib, "nvmlDeviceGetMemoryInfo");
  a->clock_info = symbol<decltype(a->clock_info)>(lib, "nvmlDeviceGetClockInfo");
  a->max_clock_info = symbol<decltype(a->max_clock_info)>(lib, "nvmlDeviceGetMaxClockInfo");
  a->temperature = symbol<decltype(a->temperature)>(lib, "nvmlDeviceGetTemperature");
  a->power_usage = symbol<decltype(a->power_usage)>(lib, "nvmlDeviceGetPowerUsage");
  a->power_limit = symbol<decltype(a->power_limit)>(lib, "nvmlDeviceGetEnforcedPowerLimit");
  a->pcie_generation = symbol<decltype(a->pcie_generation)>(lib, "nvmlDeviceGetCurrPcieLinkGeneration");
  a->pcie_width = symbol<decltype(a->pcie_width)>(lib, "nvmlDeviceGetCurrPcieLinkWidth");
  a->pcie_max_generation = symbol<decltype(a->pcie_max_generation)>(lib, "nvmlDeviceGetMaxPcieLinkGeneration");
  a->pcie_max_width = symbol<decltype(a->pcie_max_width)>(lib, "nvmlDeviceGetMaxPcieLinkWidth");
  a->ecc_mode = symbol<decltype(a->ecc_mode)>(lib, "nvmlDeviceGetEccMode");
  a->mig_mode = symbol<decltype(a->mig_mode)>(lib, "nvmlDeviceGetMigMode");
  a->utilization = symbol<decltype(a->utilization)>(lib, "nvmlDeviceGetUtilizationRates");
  a->performance_state = symbol<decltype(a->performance_state)>(lib, "nvmlDeviceGetPerformanceState");
  a->persistence_mode = symbol<decltype(a->persistence_mode)>(lib, "nvmlDeviceGetPersistenceMode");
  a->is_mig_handle = symbol<decltype(a->is_mig_handle)>(lib, "nvmlDeviceIsMigDeviceHandle");
  a->mig_parent = symbol<decltype(a->mig_parent)>(lib, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle");
  if (!a->init || !a->shutdown || !a->get_count || !a->by_index || !a->by_uuid || !a->get_uuid) {
    status_.reason = status_.library + " lacks nvmlInit_v2, nvmlShutdown or the device enumeration functions";
    dlclose(lib);
    return;
  }
  if (nvml_return r = a->init(); r != nvml_success) {
    status_.reason = "nvmlInit_v2 failed: " + std::string(a->error_string ? a->error_string(r) : "error") + " (" +
                     std::to_string(r) + ")";
    dlclose(lib);
    return;
  }
  char text[nvml_buffer] = {};
  if (a->driver_version && a->driver_version(text, nvml_buffer) == nvml_success) {
    status_.driver_version = text;
  }
  std::memset(text, 0, sizeof(text));
  if (a->nvml_version && a->nvml_version(text, nvml_buffer) == nvml_success) {
    status_.nvml_version = text;
  }
  status_.available = true;
  api_ = std::move(a);
}

nvml_session::~nvml_session() {
  if (api_) {
    api_->shutdown();
    dlclose(api_->library);
  }
}

std::vector<nvml_device> nvml_session::devices(nvml_fields fields) {
  std::vector<nvml_device> out;
  unsigned int count = 0;
  if (!api_ || api_->get_count(&count) != nvml_success) {
    return out;
  }
  for (unsigned int i = 0; i < count; ++i) {
    nvml_handle h = nullptr;
    // A GPU NVML cannot open (no permission, lost) is left out; the CUDA row then has no NVML data.
    if (api_->by_index(i, &h) == nvml_success) {
      out.push_back(api_->read(h, fields));
      out.back().index = i;
    }
  }
  return out;
}

std::optional<nvml_device> nvml_session::by_uuid(std::string_view uuid, nvml_fields fields) {
  if (!api_) {
    return std::nullopt;
  }
  std::string id(uuid);
  nvml_handle h = nullptr;
  if (api_->by_uuid(id.c_str(), &h) != nvml_success) {
    return std::nullopt;
  }
  unsigned int is_mig = 0;
  if (!api_->is_mig_handle || api_->is_mig_handle(h, &is_mig) != nvml_success || is_mig == 0) {
    return api_->read(h, fields);
  }
  // A MIG instance: the GPU's clocks, temperature, power, link and modes, the instance's memory.
  nvml_handle parent = nullptr;
  if (!api_->mig_parent || api_->mig_parent(h, &parent) != nvml_success) {
    return std::nullopt;
  }
  nvml_device d = api_->read(parent, fields);
  d.via_mig = true;
  d.memory_total_bytes.reset();
  d.memory_free_bytes.reset();
  d.memory_used_bytes.reset();
  if (nvml_memory m{}; api_->memory_info && api_->memory_info(h, &m) == nvml_success) {
    d.memory_total_bytes = m.total;
    d.memory_free_bytes = m.free;
    d.memory_used_bytes = m.used;
  }
  return d;
}

}  // namespace cudrv_query
