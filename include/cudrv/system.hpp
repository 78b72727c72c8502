/// @file system.hpp
/// @brief NVML from the library: the driver's and NVML's versions, the GPUs NVML sees matched to
/// cudrv's devices, and what NVML measures of each (utilization, memory, power, temperature, clocks
/// and clock-event reasons, PCIe and NVLink, ECC, retired pages and remapped rows, modes, processes),
/// and how the GPUs are connected (PCIe levels, what each NVLink reaches, CPU and NUMA affinity).
///
/// NVML (`libnvidia-ml.so.1`, installed with the driver) is opened at run time with dlopen, never
/// linked, and initialised on first use (one `nvmlInit_v2` for the process, thread safe; the matching
/// `nvmlShutdown` runs when the process exits). The environment variable `CUDRV_LIBNVML` names another
/// file. Nothing here makes a CUDA context current. See @ref system "NVML from the library".
///
/// Opt-in: not included by `<cudrv/cudrv.hpp>`.
///
/// Layer: driver (docs/design.md, "Source layers").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cudrv/error.hpp"

/// @brief NVML's opaque device type (`nvmlDevice_t` is a pointer to it), declared as nvml.h does.
struct nvmlDevice_st;

namespace cudrv {

class device;
struct device_uuid;

/// @brief An NVML call failed. @ref error::source is @ref error_source::nvml, @ref error::code the
/// `nvmlReturn_t`, @ref error::name its enumerator (`NVML_ERROR_GPU_IS_LOST`), @ref error::description
/// NVML's own text (`nvmlErrorString`) and @ref error::api the NVML function (`nvmlDeviceGetPowerUsage`).
///
/// A field NVML does not support on a GPU (`NVML_ERROR_NOT_SUPPORTED`), or a function the installed
/// NVML lacks, is never an error: the field is empty. What is left is real: NVML uninitialised, the
/// GPU lost, no permission, a device not found.
///
/// @code
/// try {
///   auto gpu = cudrv::system::nvml_device::at(0);
///   std::printf("%s\n", gpu.name().c_str());
/// } catch (const cudrv::nvml_error& e) {
///   std::fprintf(stderr, "%s: %s\n", e.api().c_str(), e.description().c_str());
/// }
/// @endcode
class nvml_error : public error {
 public:
  /// @brief Builds the error.
  /// @param result the `nvmlReturn_t` NVML returned
  /// @param description NVML's text for it (`nvmlErrorString`)
  /// @param api the NVML function that failed
  /// @param context which device, which argument (may be empty)
  nvml_error(int result, std::string description, std::string api, std::string context);
  /// @brief The `nvmlReturn_t`, as an int (same as @ref error::code).
  [[nodiscard]] int nvml_result() const noexcept { return code(); }
};

/// @brief NVML from the library (`<cudrv/system.hpp>`): versions, devices and their measurements.
///
/// Every function throws @ref library_unavailable_error (source @ref error_source::nvml) when NVML
/// cannot be loaded, and @ref nvml_error when `nvmlInit_v2` or a call fails for real; @ref available
/// says beforehand whether NVML is usable, without throwing.
namespace system {

/// @brief Whether NVML is loaded and initialised (loads it on first use); never throws.
[[nodiscard]] bool available() noexcept;
/// @brief Why NVML is not usable ("" when it is), e.g. `dlopen("libnvidia-ml.so.1") failed: ...`.
[[nodiscard]] std::string unavailable_reason();
/// @brief The file handed to dlopen: `libnvidia-ml.so.1`, or the value of `CUDRV_LIBNVML`.
[[nodiscard]] std::string library_path();

/// @brief The kernel driver's version, e.g. `580.159.04` (`nvmlSystemGetDriverVersion`).
[[nodiscard]] std::string driver_version();
/// @brief NVML's own version, e.g. `13.580.159.04` (`nvmlSystemGetNVMLVersion`).
[[nodiscard]] std::string nvml_version();
/// @brief The CUDA version the driver supports, as `1000 * major + 10 * minor` (13000 for CUDA 13.0;
/// `nvmlSystemGetCudaDriverVersion_v2`).
[[nodiscard]] int cuda_driver_version();
/// @brief How many GPUs NVML sees (`nvmlDeviceGetCount_v2`): all of the machine's, whatever
/// `CUDA_VISIBLE_DEVICES` says.
[[nodiscard]] unsigned int device_count();

/// @brief A PCI location (`nvmlPciInfo_t`).
struct pci_info {
  std::string bus_id;                 ///< `domain:bus:device.function`, lower case, e.g. `00000000:1b:00.0`
  unsigned int domain = 0;            ///< PCI domain
  unsigned int bus = 0;               ///< bus number
  unsigned int device = 0;            ///< device number
  unsigned int pci_device_id = 0;     ///< combined device and vendor id
  unsigned int pci_subsystem_id = 0;  ///< subsystem id
};

/// @brief Utilization over NVML's last sample period (1/6 s to 1 s, by product), percent.
struct utilization_rates {
  unsigned int gpu_percent = 0;     ///< time a kernel was running
  unsigned int memory_percent = 0;  ///< time device memory was read or written
};

/// @brief A memory's size and use, in bytes (`nvmlMemory_t`, `nvmlBAR1Memory_t`).
struct memory_usage {
  unsigned long long total_bytes = 0;  ///< total
  unsigned long long free_bytes = 0;   ///< free
  unsigned long long used_bytes = 0;   ///< used (NVML's figure, which counts memory the driver reserves)
};

/// @brief Power figures, in watts; each empty where NVML does not support it.
struct power_readings {
  std::optional<double> draw_w;            ///< current draw (`nvmlDeviceGetPowerUsage`)
  std::optional<double> limit_w;           ///< the power-management limit (nvidia-smi's `power.limit`)
  std::optional<double> enforced_limit_w;  ///< the limit in force (`nvmlDeviceGetEnforcedPowerLimit`)
  std::optional<double> default_limit_w;   ///< the default limit
  std::optional<double> min_limit_w;       ///< the lowest limit that can be set
  std::optional<double> max_limit_w;       ///< the highest limit that can be set
};

/// @brief Temperatures and thresholds, degrees Celsius; each empty where NVML does not support it.
struct temperature_readings {
  std::optional<unsigned int> gpu_c;         ///< the GPU core (`NVML_TEMPERATURE_GPU`)
  std::optional<unsigned int> memory_c;      ///< the memory (HBM), from the field `NVML_FI_DEV_MEMORY_TEMP`
  std::optional<unsigned int> slowdown_c;    ///< where the GPU slows down (`NVML_TEMPERATURE_THRESHOLD_SLOWDOWN`)
  std::optional<unsigned int> shutdown_c;    ///< where it shuts down (`NVML_TEMPERATURE_THRESHOLD_SHUTDOWN`)
  std::optional<unsigned int> gpu_max_c;     ///< the GPU's maximum operating temperature
  std::optional<unsigned int> memory_max_c;  ///< the memory's maximum operating temperature
};

/// @brief One set of clocks, MHz; each empty where NVML does not support it.
struct clock_set {
  std::optional<unsigned int> graphics_mhz;  ///< graphics clock (`NVML_CLOCK_GRAPHICS`)
  std::optional<unsigned int> sm_mhz;        ///< SM clock (`NVML_CLOCK_SM`)
  std::optional<unsigned int> memory_mhz;    ///< memory clock (`NVML_CLOCK_MEM`)
  std::optional<unsigned int> video_mhz;     ///< video encoder/decoder clock (`NVML_CLOCK_VIDEO`)
};

/// @brief Current, maximum and application clocks.
struct clock_readings {
  clock_set current;      ///< now (`nvmlDeviceGetClockInfo`)
  clock_set max;          ///< the highest the GPU runs at (`nvmlDeviceGetMaxClockInfo`)
  clock_set application;  ///< the application clocks set (`nvmlDeviceGetApplicationsClock`)
};

/// @brief One reason why the clocks are below their maximum (NVML's clock-event, formerly "throttle",
/// reasons): a bit of @ref cudrv::system::clock_event_reasons.
enum class clock_event : std::uint64_t {
  gpu_idle = 0x1,                  ///< nothing runs
  applications_clocks = 0x2,       ///< the application clocks setting limits them
  sw_power_cap = 0x4,              ///< the software power cap
  hw_slowdown = 0x8,               ///< hardware slowdown (temperature, power brake)
  sync_boost = 0x10,               ///< held with other GPUs of a sync-boost group
  sw_thermal_slowdown = 0x20,      ///< software thermal slowdown
  hw_thermal_slowdown = 0x40,      ///< hardware thermal slowdown
  hw_power_brake_slowdown = 0x80,  ///< hardware power-brake slowdown (external signal)
  display_clock_setting = 0x100,   ///< the display clocks setting
};

/// @brief A set of @ref clock_event reasons, as NVML's 64-bit mask.
struct clock_event_reasons {
  std::uint64_t mask = 0;  ///< the raw mask (bits NVML adds later are kept)
  /// @brief Whether @p reason is among them.
  [[nodiscard]] constexpr bool has(clock_event reason) const noexcept {
    return (mask & static_cast<std::uint64_t>(reason)) != 0;
  }
  /// @brief Whether no reason is set (the clocks are free to run at their maximum).
  [[nodiscard]] constexpr bool none() const noexcept { return mask == 0; }
  /// @brief The names of the reasons set, lowest bit first (`gpu_idle`, `sw_power_cap`, ...); an
  /// unknown bit reads `bit_<n>`.
  [[nodiscard]] std::vector<std::string> names() const;
};

/// @brief The name of a reason: `gpu_idle`, `sw_power_cap`, ...
[[nodiscard]] std::string_view to_string(clock_event reason) noexcept;

/// @brief The PCIe link and its counters; each empty where NVML does not support it.
struct pcie_readings {
  std::optional<unsigned int> generation;          ///< current link generation (an idle GPU may downshift)
  std::optional<unsigned int> max_generation;      ///< the highest the GPU and the system allow
  std::optional<unsigned int> gpu_max_generation;  ///< the highest the GPU allows
  std::optional<unsigned int> width;               ///< current link width (lanes)
  std::optional<unsigned int> max_width;           ///< maximum link width
  std::optional<unsigned int> tx_kib_per_s;        ///< transmit throughput over a 20 ms sample, KiB/s
  std::optional<unsigned int> rx_kib_per_s;        ///< receive throughput over a 20 ms sample, KiB/s
  std::optional<unsigned int> replay_count;        ///< PCIe replays since the driver loaded
};

/// @brief One NVLink of a GPU.
struct nvlink_readings {
  unsigned int link = 0;                              ///< the link's number
  bool active = false;                                ///< whether the link is up
  std::optional<unsigned int> version;                ///< NVLink version (4 on the H100)
  std::optional<pci_info> remote;                     ///< the PCI location at the other end
  std::optional<unsigned long long> tx_data_kib;      ///< data sent since the driver loaded, KiB
  std::optional<unsigned long long> rx_data_kib;      ///< data received since the driver loaded, KiB
  std::optional<unsigned long long> replay_errors;    ///< data-link replays
  std::optional<unsigned long long> recovery_errors;  ///< data-link recoveries
  std::optional<unsigned long long> crc_flit_errors;  ///< flow-control CRC errors
  std::optional<unsigned long long> crc_data_errors;  ///< data CRC errors
  std::optional<unsigned long long> ecc_data_errors;  ///< data ECC errors
};

/// @brief ECC mode and error counts; each empty where NVML does not support it.
struct ecc_readings {
  std::optional<bool> enabled;                              ///< ECC on now
  std::optional<bool> pending;                              ///< ECC on after the next reboot
  std::optional<unsigned long long> volatile_corrected;     ///< corrected since the driver loaded
  std::optional<unsigned long long> volatile_uncorrected;   ///< uncorrected since the driver loaded
  std::optional<unsigned long long> aggregate_corrected;    ///< corrected over the GPU's life
  std::optional<unsigned long long> aggregate_uncorrected;  ///< uncorrected over the GPU's life
};

/// @brief Pages retired for ECC errors (GPUs before Ampere; later ones remap rows instead).
struct retired_pages_info {
  unsigned int single_bit_ecc = 0;  ///< retired for repeated single-bit errors
  unsigned int double_bit_ecc = 0;  ///< retired for double-bit errors
  std::optional<bool> pending;      ///< a retirement waits for the next driver reload
};

/// @brief Rows of memory remapped for ECC errors (Ampere and later).
struct remapped_rows_info {
  unsigned int corrected = 0;    ///< rows remapped for correctable errors
  unsigned int uncorrected = 0;  ///< rows remapped for uncorrectable errors
  bool pending = false;          ///< a remapping waits for a GPU reset
  bool failure = false;          ///< a remapping failed
};

/// @brief Who may create contexts on the GPU (`nvmlComputeMode_t`).
enum class compute_mode {
  shared = 0,             ///< any number of processes and contexts ("Default")
  exclusive_thread = 1,   ///< one context, used by one thread (deprecated by NVIDIA)
  prohibited = 2,         ///< no context at all
  exclusive_process = 3,  ///< one context, used by any thread of one process
};

/// @brief The name nvidia-smi prints: `Default`, `Exclusive_Thread`, `Prohibited`, `Exclusive_Process`.
[[nodiscard]] std::string_view to_string(compute_mode mode) noexcept;

/// @brief A mode now and after its next reset or reboot.
struct mode_state {
  bool current = false;  ///< on now
  bool pending = false;  ///< on after the next GPU reset (MIG) or reboot
};

/// @brief Which kind of work a process runs on the GPU.
enum class process_kind {
  compute,   ///< CUDA (`nvmlDeviceGetComputeRunningProcesses_v3`)
  graphics,  ///< graphics (`nvmlDeviceGetGraphicsRunningProcesses_v3`)
};

/// @brief A process that uses the GPU.
struct process_info {
  /// @brief The process id (in a container, NVML may give the host's ids, or list no process at all).
  unsigned int pid = 0;
  process_kind kind = process_kind::compute;        ///< compute or graphics
  std::optional<unsigned long long> used_bytes;     ///< device memory it uses; empty where NVML cannot tell
  std::optional<unsigned int> gpu_instance_id;      ///< MIG GPU instance, when MIG is on
  std::optional<unsigned int> compute_instance_id;  ///< MIG compute instance, when MIG is on
};

// --- issue 36: topology (the types; the functions are at the end of nvml_device) ---------------

/// @brief How far apart two GPUs are on PCIe: the nearest ancestor they share in the PCI tree
/// (`nvmlGpuTopologyLevel_t`), nearest first. `to_string` gives nvidia-smi's names (`PIX`, `PXB`, ...).
enum class topology_level {
  internal = 0,      ///< on one board (a board with two GPUs)
  single = 10,       ///< through at most one PCIe bridge or switch (nvidia-smi's `PIX`)
  multiple = 20,     ///< through several PCIe bridges, below one host bridge (`PXB`)
  host_bridge = 30,  ///< through a PCIe host bridge, the CPU's root complex (`PHB`)
  node = 40,         ///< across host bridges within one NUMA node (`NODE`)
  system = 50,       ///< across NUMA nodes, over the link between CPU sockets (`SYS`)
};

/// @brief nvidia-smi's name of a level: `PIX` (@ref topology_level::internal too: two GPUs of one board
/// sit behind the board's own PCIe switch), `PXB`, `PHB`, `NODE`, `SYS`; "" for a value NVML may add later.
[[nodiscard]] std::string_view to_string(topology_level level) noexcept;

/// @brief What is at the far end of an NVLink (`nvmlIntNvLinkDeviceType_t`).
enum class nvlink_remote_device {
  gpu = 0,        ///< another GPU (its PCI location is @ref nvlink_readings::remote)
  ibm_npu = 1,    ///< an IBM POWER CPU's NVLink port
  nvswitch = 2,   ///< an NVSwitch (every GPU on the switches is reached through it)
  unknown = 255,  ///< NVML cannot tell
};

// --- end of issue 36: topology types ------------------------------------------------------------

// issue 36: watch
/// @brief The NVLink data counters of a whole GPU, summed over its links: what a rate is computed from
/// (see @ref nvml_device::nvlink_traffic). Two readings give the throughput:
/// `(b.tx_bytes - a.tx_bytes) * 1e6 / (b.timestamp_us - a.timestamp_us)` bytes per second.
/// Two readings are comparable only when they have the same `source` and `links`: a link that
/// drops out of (or comes back into) a per-link sum changes the total by its whole counter.
struct nvlink_traffic {
  unsigned long long tx_bytes = 0;  ///< data sent over every NVLink since the driver loaded, bytes
  unsigned long long rx_bytes = 0;  ///< data received over every NVLink since the driver loaded, bytes
  long long timestamp_us = 0;       ///< when NVML read the counters: microseconds since 1970 (NVML's clock)
  /// @brief Which NVML counters the reading comes from.
  enum class origin {
    throughput_all_links,  ///< `NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX`/`_RX` for every link at once (KiB)
    bytes_all_links,       ///< `NVML_FI_DEV_NVLINK_COUNT_XMIT_BYTES`/`_RCV_BYTES` for every link at once
    per_link_sum,          ///< the sum of the active links' own throughput counters (see @ref links)
  };
  origin source = origin::throughput_all_links;  ///< the counters read
  /// @brief For origin::per_link_sum, the links summed (bit l for link l); 0 for the other sources.
  unsigned int links = 0;
};

/// @brief Device memory with what the driver reserves apart, in bytes, as nvidia-smi reports it
/// (`memory.total`, `memory.reserved`, `memory.used`, `memory.free`; `nvmlMemory_v2_t`). Unlike
/// @ref memory_usage, @ref used_bytes does not count the reservation.
struct memory_breakdown {
  unsigned long long total_bytes = 0;     ///< total
  unsigned long long reserved_bytes = 0;  ///< reserved by the driver and the firmware
  unsigned long long used_bytes = 0;      ///< used by allocations (the reservation not included)
  unsigned long long free_bytes = 0;      ///< free
};

/// @brief A GPU (or a MIG instance) as NVML sees it: a non-owning handle (NVML devices are never
/// released), cheap to copy.
///
/// NVML numbers GPUs in PCI order, which need not be CUDA's: match them by UUID (@ref of,
/// @ref cuda_device). Every reading calls NVML when it is asked for; a field NVML does not support on
/// this GPU is empty (`std::nullopt`), never an error.
///
/// @code
/// for (const cudrv::system::nvml_device& gpu : cudrv::system::devices()) {
///   auto power = gpu.power();
///   std::printf("%s: %.0f W of %.0f W\n", gpu.name().c_str(), power.draw_w.value_or(0), power.limit_w.value_or(0));
/// }
/// @endcode
class nvml_device {
 public:
  /// @brief The GPU NVML numbers @p index (nvidia-smi's `-i`; `nvmlDeviceGetHandleByIndex_v2`).
  /// @throws nvml_error `NVML_ERROR_INVALID_ARGUMENT` when @p index >= @ref device_count
  [[nodiscard]] static nvml_device at(unsigned int index);
  /// @brief The GPU or MIG instance with this UUID (`GPU-…` or `MIG-…`; `nvmlDeviceGetHandleByUUID`).
  /// @throws nvml_error `NVML_ERROR_NOT_FOUND` when NVML knows no such UUID
  [[nodiscard]] static nvml_device by_uuid(std::string_view uuid);
  /// @brief The GPU at this PCI bus id, in either form (`0000:1b:00.0` or `00000000:1B:00.0`;
  /// `nvmlDeviceGetHandleByPciBusId_v2`).
  /// @throws nvml_error `NVML_ERROR_NOT_FOUND` when no GPU is there
  [[nodiscard]] static nvml_device by_pci_bus_id(std::string_view bus_id);
  /// @brief The GPU, or the MIG instance, that is this CUDA device: matched by UUID. CUDA writes every
  /// UUID as `GPU-…`; NVML writes a MIG instance's as `MIG-…`, so a UUID NVML does not know as a GPU
  /// is looked up as a MIG instance's. Makes no context current.
  /// @throws nvml_error `NVML_ERROR_NOT_FOUND` when NVML sees neither (a GPU hidden from NVML)
  [[nodiscard]] static nvml_device of(const device& dev);
  /// @brief The same match for a UUID as CUDA reports it (`cudrv::device::uuid`).
  /// @throws nvml_error `NVML_ERROR_NOT_FOUND` when NVML sees neither
  [[nodiscard]] static nvml_device of(const device_uuid& uuid);
  /// @brief Wraps an `nvmlDevice_t` obtained from NVML directly.
  [[nodiscard]] static nvml_device from_native_handle(nvmlDevice_st* handle) noexcept { return nvml_device(handle); }
  /// @brief The `nvmlDevice_t`.
  [[nodiscard]] nvmlDevice_st* native_handle() const noexcept { return handle_; }

  /// @brief NVML's index (nvidia-smi's), not CUDA's ordinal; empty for a MIG instance.
  [[nodiscard]] std::optional<unsigned int> index() const;
  /// @brief The product name, e.g. `NVIDIA H100 80GB HBM3`.
  [[nodiscard]] std::string name() const;
  /// @brief The UUID as nvidia-smi prints it (`GPU-…`, or `MIG-…` for a MIG instance).
  [[nodiscard]] std::string uuid() const;
  /// @brief The board's serial number; empty where the board has none NVML can read.
  [[nodiscard]] std::optional<std::string> serial() const;
  /// @brief Where the GPU sits on PCI (`nvmlDeviceGetPciInfo_v3`); empty for a MIG instance.
  [[nodiscard]] std::optional<pci_info> pci() const;
  /// @brief Whether this is a MIG instance rather than a whole GPU.
  [[nodiscard]] bool is_mig_instance() const;
  /// @brief The whole GPU: the one holding this MIG instance, or this device itself.
  [[nodiscard]] nvml_device parent() const;
  /// @brief The ordinal of the CUDA device with this UUID among those the process sees
  /// (`CUDA_VISIBLE_DEVICES` applies); empty when CUDA does not see it, or no CUDA driver can be
  /// loaded. Makes no context current.
  [[nodiscard]] std::optional<int> cuda_device() const;

  /// @brief Utilization over NVML's last sample period.
  [[nodiscard]] std::optional<utilization_rates> utilization() const;
  /// @brief Device memory (for a MIG instance, the instance's).
  [[nodiscard]] std::optional<memory_usage> memory() const;
  /// @brief The BAR1 aperture, through which the host and peers map device memory.
  [[nodiscard]] std::optional<memory_usage> bar1_memory() const;
  /// @brief Power draw and limits.
  [[nodiscard]] power_readings power() const;
  /// @brief Temperatures and thresholds.
  [[nodiscard]] temperature_readings temperature() const;
  /// @brief Current, maximum and application clocks.
  [[nodiscard]] clock_readings clocks() const;
  /// @brief Why the clocks are below their maximum now (`nvmlDeviceGetCurrentClocksEventReasons`, or
  /// `nvmlDeviceGetCurrentClocksThrottleReasons` where NVML predates it).
  [[nodiscard]] std::optional<clock_event_reasons> clock_events() const;
  /// @brief The PCIe link and its counters.
  [[nodiscard]] pcie_readings pcie() const;
  /// @brief The GPU's NVLinks (those NVML reports a state for, at most 18); empty without NVLink.
  [[nodiscard]] std::vector<nvlink_readings> nvlinks() const;
  /// @brief ECC mode and error counts.
  [[nodiscard]] ecc_readings ecc() const;
  /// @brief Retired pages; empty on GPUs that remap rows instead (Ampere and later).
  [[nodiscard]] std::optional<retired_pages_info> retired_pages() const;
  /// @brief Remapped rows; empty on GPUs before Ampere.
  [[nodiscard]] std::optional<remapped_rows_info> remapped_rows() const;
  /// @brief The compute mode.
  [[nodiscard]] std::optional<cudrv::system::compute_mode> compute_mode() const;
  /// @brief MIG mode now and after the next GPU reset; empty on GPUs without MIG.
  [[nodiscard]] std::optional<mode_state> mig_mode() const;
  /// @brief Whether the driver stays loaded with no client (persistence mode).
  [[nodiscard]] std::optional<bool> persistence_mode() const;
  /// @brief The performance state, 0 (fastest) to 15; empty when NVML reports it unknown.
  [[nodiscard]] std::optional<int> performance_state() const;
  /// @brief The processes using the GPU, compute ones first, then graphics ones. Their number may
  /// change between NVML's size query and its answer: cudrv asks again, a bounded number of times.
  /// @throws nvml_error `NVML_ERROR_INSUFFICIENT_SIZE` when the list kept growing past those tries
  [[nodiscard]] std::vector<process_info> processes() const;
  // issue 36: watch
  /// @brief The NVLink data counters, summed over the GPU's links (NVML's field values
  /// `NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX`/`_RX` for every link at once, in KiB; where NVML does
  /// not answer that, `NVML_FI_DEV_NVLINK_COUNT_XMIT_BYTES`/`_RCV_BYTES`, then the sum of the active
  /// links' own counters). A counter NVML gives as not available (`NVML_VALUE_NOT_AVAILABLE`), or one
  /// too large to count in 64-bit bytes, is no answer: the next of these sources is asked. Empty on a
  /// GPU without NVLink or an NVML without these counters. Compare readings of the same
  /// @ref nvlink_traffic::source and @ref nvlink_traffic::links only.
  [[nodiscard]] std::optional<cudrv::system::nvlink_traffic> nvlink_traffic() const;
  /// @brief Device memory with the driver's reservation apart (`nvmlDeviceGetMemoryInfo_v2`), as
  /// nvidia-smi reports it; for a MIG instance, the instance's. Empty where NVML lacks the function or
  /// does not support it on this GPU (then @ref memory has the figures, reservation counted as used).
  [[nodiscard]] std::optional<cudrv::system::memory_breakdown> memory_breakdown() const;

  // --- issue 36: topology ------------------------------------------------------------------------
  /// @brief How this GPU and @p other are connected on PCIe (`nvmlDeviceGetTopologyCommonAncestor`);
  /// empty where NVML does not support it (a MIG instance, some virtual machines). NVLink is not
  /// considered: see @ref nvlinks and @ref nvlink_remote_type.
  [[nodiscard]] std::optional<topology_level> topology_common_ancestor(nvml_device other) const;
  /// @brief The CPUs close to the GPU, ascending (`nvmlDeviceGetCpuAffinityWithinScope` with the NUMA
  /// node scope, or `nvmlDeviceGetCpuAffinity` where NVML predates it): where a process that uses the
  /// GPU should run. Empty where NVML cannot tell; an empty list where it answers with no CPU.
  [[nodiscard]] std::optional<std::vector<unsigned int>> cpu_affinity() const;
  /// @brief The NUMA nodes whose memory is close to the GPU, ascending (`nvmlDeviceGetMemoryAffinity`
  /// with the NUMA node scope: nvidia-smi's "NUMA Affinity"). Empty where NVML cannot tell.
  [[nodiscard]] std::optional<std::vector<unsigned int>> memory_affinity() const;
  /// @brief The NUMA node that is the GPU's own memory, on systems where the GPU memory is a NUMA node
  /// (coherent CPU-GPU systems such as Grace Hopper; `nvmlDeviceGetNumaNodeId`); empty elsewhere
  /// (nvidia-smi's "GPU NUMA ID" N/A).
  [[nodiscard]] std::optional<unsigned int> numa_node_id() const;
  /// @brief What link @p link connects to (`nvmlDeviceGetNvLinkRemoteDeviceType`); empty for a link
  /// that does not exist or is down, or where NVML predates the function.
  [[nodiscard]] std::optional<nvlink_remote_device> nvlink_remote_type(unsigned int link) const;

  /// @brief Handles compare by the NVML device they name.
  [[nodiscard]] friend bool operator==(nvml_device a, nvml_device b) noexcept { return a.handle_ == b.handle_; }

 private:
  explicit nvml_device(nvmlDevice_st* handle) noexcept : handle_(handle) {}
  nvmlDevice_st* handle_;
};

/// @brief Every GPU NVML sees, in NVML's order (whole GPUs; MIG instances through @ref nvml_device::of
/// or @ref nvml_device::by_uuid).
[[nodiscard]] std::vector<nvml_device> devices();

}  // namespace system
}  // namespace cudrv
