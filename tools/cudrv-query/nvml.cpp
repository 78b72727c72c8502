// cudrv-query: NVML through the library (<cudrv/system.hpp>). The tool's output omits what NVML does not
// give, so every reading that fails (not only those NVML does not support) is left empty here.
#include "nvml.hpp"

#include <utility>

#include <cudrv/error.hpp>
#include <cudrv/system.hpp>

namespace cudrv_query {

namespace {

namespace sys = cudrv::system;

nvml_clocks to_clocks(const sys::clock_set& c) { return nvml_clocks{c.graphics_mhz, c.sm_mhz, c.memory_mhz}; }

void read_memory(const sys::nvml_device& gpu, nvml_device& d) {
  if (std::optional<sys::memory_usage> m = quietly([&] { return gpu.memory(); })) {
    d.memory_total_bytes = m->total_bytes;
    d.memory_free_bytes = m->free_bytes;
    d.memory_used_bytes = m->used_bytes;
  }
}

void read_links_and_modes(const sys::nvml_device& gpu, nvml_device& d) {
  const sys::pcie_readings pcie = quietly([&] { return gpu.pcie(); });
  d.pcie_generation = pcie.generation;
  d.pcie_max_generation = pcie.max_generation;
  d.pcie_width = pcie.width;
  d.pcie_max_width = pcie.max_width;
  const sys::ecc_readings ecc = quietly([&] { return gpu.ecc(); });
  d.ecc_enabled = ecc.enabled;
  d.ecc_pending = ecc.pending;
  if (std::optional<sys::mode_state> mig = quietly([&] { return gpu.mig_mode(); })) {
    d.mig_enabled = mig->current;
    d.mig_pending = mig->pending;
  }
  if (std::optional<sys::utilization_rates> u = quietly([&] { return gpu.utilization(); })) {
    d.utilization_gpu_percent = u->gpu_percent;
    d.utilization_memory_percent = u->memory_percent;
  }
  d.performance_state = quietly([&] { return gpu.performance_state(); });
  d.persistence_mode = quietly([&] { return gpu.persistence_mode(); });
}

// Everything about one GPU; each field only when NVML answers.
nvml_device read(const sys::nvml_device& gpu, nvml_fields fields) {
  nvml_device d;
  d.uuid = quietly([&] { return gpu.uuid(); });
  d.index = quietly([&] { return gpu.index(); }).value_or(0);
  read_memory(gpu, d);
  if (fields == nvml_fields::memory) {
    return d;
  }
  const sys::clock_readings clocks = quietly([&] { return gpu.clocks(); });
  d.clocks = to_clocks(clocks.current);
  d.max_clocks = to_clocks(clocks.max);
  d.temperature_c = quietly([&] { return gpu.temperature(); }).gpu_c;
  const sys::power_readings power = quietly([&] { return gpu.power(); });
  d.power_draw_w = power.draw_w;
  d.power_limit_w = power.enforced_limit_w;
  read_links_and_modes(gpu, d);
  return d;
}

}  // namespace

nvml_session::nvml_session() {
  status_.library = quietly([] { return sys::library_path(); });
  if (!sys::available()) {
    status_.reason = quietly([] { return sys::unavailable_reason(); });
    return;
  }
  status_.driver_version = quietly([] { return sys::driver_version(); });
  status_.nvml_version = quietly([] { return sys::nvml_version(); });
  status_.available = true;
}

std::vector<nvml_device> nvml_session::devices(nvml_fields fields) {
  std::vector<nvml_device> out;
  if (!status_.available) {
    return out;
  }
  const unsigned int count = quietly([] { return sys::device_count(); });
  for (unsigned int i = 0; i < count; ++i) {
    // A GPU NVML cannot open (no permission, lost) is left out; the CUDA row then has no NVML data.
    if (std::optional<sys::nvml_device> gpu = quietly([i] { return std::optional(sys::nvml_device::at(i)); })) {
      out.push_back(read(*gpu, fields));
      out.back().index = i;
    }
  }
  return out;
}

std::optional<nvml_device> nvml_session::by_uuid(std::string_view uuid, nvml_fields fields) {
  if (!status_.available) {
    return std::nullopt;
  }
  std::optional<sys::nvml_device> found = quietly([&] { return std::optional(sys::nvml_device::by_uuid(uuid)); });
  if (!found) {
    return std::nullopt;
  }
  if (!quietly([&] { return found->is_mig_instance(); })) {
    return read(*found, fields);
  }
  // A MIG instance: the GPU's clocks, temperature, power, link and modes, the instance's memory.
  std::optional<sys::nvml_device> parent = quietly([&] { return std::optional(found->parent()); });
  if (!parent) {
    return std::nullopt;
  }
  nvml_device d = read(*parent, fields);
  d.via_mig = true;
  d.memory_total_bytes.reset();
  d.memory_free_bytes.reset();
  d.memory_used_bytes.reset();
  read_memory(*found, d);
  return d;
}

}  // namespace cudrv_query
