// cudrv-query: NVML's view of each GPU, read through the library's <cudrv/system.hpp> (NVML loaded at
// run time when present, never linked).
//
// NVML (libnvidia-ml.so.1, installed with the driver) knows what the CUDA driver API does not:
// current clocks, temperature, power, the PCIe link, ECC and MIG modes. Its device order is not
// CUDA's, so devices are matched by UUID. Every field is optional: a field NVML does not support on a
// GPU, a function an older NVML lacks, or a reading that fails is left empty and omitted from the output.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <cudrv/error.hpp>

namespace cudrv_query {

/// f(), or an empty (value-initialised) result when it throws a cudrv error: a GPU NVML lost, no
/// permission, a reading NVML refuses. For readings that are optional in every view.
template <class F>
auto quietly(F&& f) -> decltype(f()) {
  try {
    return std::forward<F>(f)();
  } catch (const cudrv::error&) {
    return {};
  }
}

/// Three clock domains, in MHz.
struct nvml_clocks {
  std::optional<unsigned int> graphics_mhz;  ///< graphics clock
  std::optional<unsigned int> sm_mhz;        ///< SM clock
  std::optional<unsigned int> memory_mhz;    ///< memory clock
};

/// What NVML says of one GPU.
struct nvml_device {
  unsigned int index = 0;  ///< NVML's index (nvidia-smi's), not CUDA's ordinal
  std::string uuid;        ///< the GPU's UUID, as nvidia-smi prints it
  bool via_mig = false;    ///< matched through a MIG instance's UUID: memory is the instance's, the rest the GPU's
  std::optional<unsigned long long> memory_total_bytes;    ///< framebuffer total (nvidia-smi's memory.total)
  std::optional<unsigned long long> memory_free_bytes;     ///< free
  std::optional<unsigned long long> memory_used_bytes;     ///< used (reserved memory included)
  nvml_clocks clocks;                                      ///< current clocks
  nvml_clocks max_clocks;                                  ///< maximum clocks
  std::optional<unsigned int> temperature_c;               ///< GPU core temperature, degrees Celsius
  std::optional<double> power_draw_w;                      ///< power draw, watts
  std::optional<double> power_limit_w;                     ///< enforced power limit, watts
  std::optional<unsigned int> pcie_generation;             ///< current PCIe link generation (idle GPUs may downshift)
  std::optional<unsigned int> pcie_max_generation;         ///< maximum generation of the GPU and the system
  std::optional<unsigned int> pcie_width;                  ///< current link width (lanes)
  std::optional<unsigned int> pcie_max_width;              ///< maximum link width
  std::optional<bool> ecc_enabled;                         ///< ECC mode now
  std::optional<bool> ecc_pending;                         ///< ECC mode after the next reboot
  std::optional<bool> mig_enabled;                         ///< MIG mode now
  std::optional<bool> mig_pending;                         ///< MIG mode after the next GPU reset
  std::optional<unsigned int> utilization_gpu_percent;     ///< kernel activity over the last sample period
  std::optional<unsigned int> utilization_memory_percent;  ///< memory-controller activity
  std::optional<int> performance_state;                    ///< P-state: 0 (fastest) to 15
  std::optional<bool> persistence_mode;                    ///< driver persistence mode
};

/// How much to read of each GPU.
enum class nvml_fields {
  memory,  ///< index, UUID and memory only: the summary view (each NVML call costs start-up time)
  all,     ///< everything nvml_device holds
};

/// Whether NVML could be used, and its versions.
struct nvml_status {
  bool available = false;      ///< loaded and initialised
  std::string library;         ///< the file name given to dlopen
  std::string reason;          ///< why not, when !available
  std::string driver_version;  ///< the kernel driver's version, e.g. "580.159.04"
  std::string nvml_version;    ///< NVML's own version, e.g. "13.580.159.04"
};

/// NVML as cudrv::system loads it (libnvidia-ml.so.1, or the file named by the environment variable
/// CUDRV_LIBNVML; initialised once for the process). Construction never throws; status() says whether
/// NVML can be used. Safe to construct on one thread and use on another.
class nvml_session {
 public:
  /// Loads and initialises NVML (through cudrv::system); never throws.
  nvml_session();
  /// Nothing to release: cudrv::system keeps NVML initialised until the process exits.
  ~nvml_session() = default;
  nvml_session(const nvml_session&) = delete;             ///< not copyable
  nvml_session& operator=(const nvml_session&) = delete;  ///< not copyable

  /// Whether NVML is usable, and why not.
  [[nodiscard]] const nvml_status& status() const noexcept { return status_; }
  /// Every GPU NVML sees, in NVML's order; empty when NVML is unavailable.
  [[nodiscard]] std::vector<nvml_device> devices(nvml_fields fields);
  /// The GPU with this UUID; for a MIG instance's UUID ("MIG-…") the instance's memory and the parent
  /// GPU's other data, with via_mig set.
  [[nodiscard]] std::optional<nvml_device> by_uuid(std::string_view uuid, nvml_fields fields);

 private:
  nvml_status status_;
};

}  // namespace cudrv_query
