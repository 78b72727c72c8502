// Internal: NVML, loaded at run time (<cudrv/system.hpp>). The few types, constants and entry points
// cudrv uses are declared here from NVML's documented C ABI (nvml.h is not part of the CUDA toolkit
// packages cudrv builds with, and NVML is never linked).
#pragma once

#include <cudrv/system.hpp>

#include <string>
#include <type_traits>

namespace cudrv::detail::nvml {

using ret = int;  // nvmlReturn_t
constexpr ret success = 0;
constexpr ret uninitialized = 1;
constexpr ret invalid_argument = 2;
constexpr ret not_supported = 3;
constexpr ret not_found = 6;
constexpr ret insufficient_size = 7;
constexpr ret library_not_found = 12;
constexpr ret function_not_found = 13;
constexpr ret gpu_is_lost = 15;
constexpr ret unknown = 999;

using handle = nvmlDevice_st*;  // nvmlDevice_t

struct memory {  // nvmlMemory_t
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct utilization {  // nvmlUtilization_t
  unsigned int gpu;
  unsigned int memory;
};
struct pci {                      // nvmlPciInfo_t
  char bus_id_legacy[16];         // busIdLegacy
  unsigned int domain;            // domain
  unsigned int bus;               // bus
  unsigned int device;            // device
  unsigned int pci_device_id;     // pciDeviceId
  unsigned int pci_subsystem_id;  // pciSubSystemId
  char bus_id[32];                // busId (NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE)
};
struct process {  // nvmlProcessInfo_t (the _v3 process queries' element, nvmlProcessInfo_v2_t)
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};
union value {  // nvmlValue_t
  double d;
  unsigned int ui;
  unsigned long ul;
  unsigned long long ull;
  long long sll;
  int si;
  unsigned short us;
};
struct field_value {  // nvmlFieldValue_t
  unsigned int field_id;
  unsigned int scope_id;
  long long timestamp;
  long long latency_usec;
  int value_type;  // nvmlValueType_t
  ret nvml_return;
  value v;
};
static_assert(sizeof(pci) == 68 && sizeof(process) == 24 && sizeof(field_value) == 40, "NVML's ABI");

// nvmlValueType_t
constexpr int value_double = 0;
constexpr int value_unsigned_int = 1;
constexpr int value_unsigned_long = 2;
constexpr int value_unsigned_long_long = 3;
constexpr int value_signed_long_long = 4;
constexpr int value_signed_int = 5;
constexpr int value_unsigned_short = 6;

// nvmlFieldId values
constexpr unsigned int field_memory_temperature = 82;  // NVML_FI_DEV_MEMORY_TEMP
constexpr unsigned int field_nvlink_data_tx = 138;     // NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX (KiB)
constexpr unsigned int field_nvlink_data_rx = 139;     // NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX (KiB)

// issue 36: watch: nvmlMemory_v2_t, whose version field is NVML_STRUCT_VERSION(Memory, 2)
struct memory_v2 {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
};
static_assert(sizeof(memory_v2) == 40, "NVML's ABI");
constexpr unsigned int memory_v2_version = static_cast<unsigned int>(sizeof(memory_v2)) | (2u << 24);
// issue 36: watch: the NVLink data counters of every link at once (scope all_links)
constexpr unsigned int field_nvlink_count_xmit_bytes = 202;  // NVML_FI_DEV_NVLINK_COUNT_XMIT_BYTES (bytes)
constexpr unsigned int field_nvlink_count_rcv_bytes = 204;   // NVML_FI_DEV_NVLINK_COUNT_RCV_BYTES (bytes)
constexpr unsigned int all_links = 0xFFFFFFFFu;              // a field's scope id for the sum over the links

constexpr unsigned int max_nvlinks = 18;                   // NVML_NVLINK_MAX_LINKS
constexpr unsigned long long value_not_available = ~0ULL;  // NVML_VALUE_NOT_AVAILABLE
constexpr int pstate_unknown = 32;                         // NVML_PSTATE_UNKNOWN
constexpr unsigned int text_buffer = 96;  // larger than NVML's name (96), UUID (80) and version (80) sizes
// issue 36: topology. nvmlAffinityScope_t's NVML_AFFINITY_SCOPE_NODE; the room given to the CPU and
// NUMA-node masks, in unsigned longs (8192 CPUs, 1024 nodes).
constexpr int affinity_scope_node = 0;
constexpr unsigned int cpu_mask_words = 8192 / (8 * sizeof(unsigned long));
constexpr unsigned int node_mask_words = 1024 / (8 * sizeof(unsigned long));

// The entry points: name and type. The first seven are required; the others may be missing from an
// older NVML (then the fields they give are empty).
#define CUDRV_NVML_REQUIRED(X)                                     \
  X(nvmlInit_v2, ret (*)())                                        \
  X(nvmlShutdown, ret (*)())                                       \
  X(nvmlErrorString, const char* (*)(ret))                         \
  X(nvmlDeviceGetCount_v2, ret (*)(unsigned int*))                 \
  X(nvmlDeviceGetHandleByIndex_v2, ret (*)(unsigned int, handle*)) \
  X(nvmlDeviceGetHandleByUUID, ret (*)(const char*, handle*))      \
  X(nvmlDeviceGetUUID, ret (*)(handle, char*, unsigned int))
#define CUDRV_NVML_OPTIONAL(X)                                                                              \
  X(nvmlSystemGetDriverVersion, ret (*)(char*, unsigned int))                                               \
  X(nvmlSystemGetNVMLVersion, ret (*)(char*, unsigned int))                                                 \
  X(nvmlSystemGetCudaDriverVersion_v2, ret (*)(int*))                                                       \
  X(nvmlDeviceGetHandleByPciBusId_v2, ret (*)(const char*, handle*))                                        \
  X(nvmlDeviceGetIndex, ret (*)(handle, unsigned int*))                                                     \
  X(nvmlDeviceGetName, ret (*)(handle, char*, unsigned int))                                                \
  X(nvmlDeviceGetSerial, ret (*)(handle, char*, unsigned int))                                              \
  X(nvmlDeviceGetPciInfo_v3, ret (*)(handle, pci*))                                                         \
  X(nvmlDeviceIsMigDeviceHandle, ret (*)(handle, unsigned int*))                                            \
  X(nvmlDeviceGetDeviceHandleFromMigDeviceHandle, ret (*)(handle, handle*))                                 \
  X(nvmlDeviceGetUtilizationRates, ret (*)(handle, utilization*))                                           \
  X(nvmlDeviceGetMemoryInfo, ret (*)(handle, memory*))                                                      \
  X(nvmlDeviceGetBAR1MemoryInfo, ret (*)(handle, memory*))                                                  \
  X(nvmlDeviceGetPowerUsage, ret (*)(handle, unsigned int*))                                                \
  X(nvmlDeviceGetPowerManagementLimit, ret (*)(handle, unsigned int*))                                      \
  X(nvmlDeviceGetEnforcedPowerLimit, ret (*)(handle, unsigned int*))                                        \
  X(nvmlDeviceGetPowerManagementDefaultLimit, ret (*)(handle, unsigned int*))                               \
  X(nvmlDeviceGetPowerManagementLimitConstraints, ret (*)(handle, unsigned int*, unsigned int*))            \
  X(nvmlDeviceGetTemperature, ret (*)(handle, int, unsigned int*))                                          \
  X(nvmlDeviceGetTemperatureThreshold, ret (*)(handle, int, unsigned int*))                                 \
  X(nvmlDeviceGetFieldValues, ret (*)(handle, int, field_value*))                                           \
  X(nvmlDeviceGetClockInfo, ret (*)(handle, int, unsigned int*))                                            \
  X(nvmlDeviceGetMaxClockInfo, ret (*)(handle, int, unsigned int*))                                         \
  X(nvmlDeviceGetApplicationsClock, ret (*)(handle, int, unsigned int*))                                    \
  X(nvmlDeviceGetCurrentClocksEventReasons, ret (*)(handle, unsigned long long*))                           \
  X(nvmlDeviceGetCurrentClocksThrottleReasons, ret (*)(handle, unsigned long long*))                        \
  X(nvmlDeviceGetCurrPcieLinkGeneration, ret (*)(handle, unsigned int*))                                    \
  X(nvmlDeviceGetMaxPcieLinkGeneration, ret (*)(handle, unsigned int*))                                     \
  X(nvmlDeviceGetGpuMaxPcieLinkGeneration, ret (*)(handle, unsigned int*))                                  \
  X(nvmlDeviceGetCurrPcieLinkWidth, ret (*)(handle, unsigned int*))                                         \
  X(nvmlDeviceGetMaxPcieLinkWidth, ret (*)(handle, unsigned int*))                                          \
  X(nvmlDeviceGetPcieThroughput, ret (*)(handle, int, unsigned int*))                                       \
  X(nvmlDeviceGetPcieReplayCounter, ret (*)(handle, unsigned int*))                                         \
  X(nvmlDeviceGetNvLinkState, ret (*)(handle, unsigned int, int*))                                          \
  X(nvmlDeviceGetNvLinkVersion, ret (*)(handle, unsigned int, unsigned int*))                               \
  X(nvmlDeviceGetNvLinkRemotePciInfo_v2, ret (*)(handle, unsigned int, pci*))                               \
  X(nvmlDeviceGetNvLinkErrorCounter, ret (*)(handle, unsigned int, int, unsigned long long*))               \
  X(nvmlDeviceGetEccMode, ret (*)(handle, int*, int*))                                                      \
  X(nvmlDeviceGetTotalEccErrors, ret (*)(handle, int, int, unsigned long long*))                            \
  X(nvmlDeviceGetRetiredPages, ret (*)(handle, int, unsigned int*, unsigned long long*))                    \
  X(nvmlDeviceGetRetiredPagesPendingStatus, ret (*)(handle, int*))                                          \
  X(nvmlDeviceGetRemappedRows, ret (*)(handle, unsigned int*, unsigned int*, unsigned int*, unsigned int*)) \
  X(nvmlDeviceGetComputeMode, ret (*)(handle, int*))                                                        \
  X(nvmlDeviceGetMigMode, ret (*)(handle, unsigned int*, unsigned int*))                                    \
  X(nvmlDeviceGetPersistenceMode, ret (*)(handle, int*))                                                    \
  X(nvmlDeviceGetPerformanceState, ret (*)(handle, int*))                                                   \
  X(nvmlDeviceGetComputeRunningProcesses_v3, ret (*)(handle, unsigned int*, process*))                      \
  X(nvmlDeviceGetGraphicsRunningProcesses_v3, ret (*)(handle, unsigned int*, process*))                     \
  /* issue 36: topology */                                                                                  \
  X(nvmlDeviceGetTopologyCommonAncestor, ret (*)(handle, handle, int*))                                     \
  X(nvmlDeviceGetCpuAffinity, ret (*)(handle, unsigned int, unsigned long*))                                \
  X(nvmlDeviceGetCpuAffinityWithinScope, ret (*)(handle, unsigned int, unsigned long*, int))                \
  X(nvmlDeviceGetMemoryAffinity, ret (*)(handle, unsigned int, unsigned long*, int))                        \
  X(nvmlDeviceGetNumaNodeId, ret (*)(handle, unsigned int*))                                                \
  X(nvmlDeviceGetNvLinkRemoteDeviceType, ret (*)(handle, unsigned int, int*))                               \
  /* issue 36: watch */                                                                                     \
  X(nvmlDeviceGetMemoryInfo_v2, ret (*)(handle, memory_v2*))

struct api {
#define CUDRV_NVML_MEMBER(name, type) std::type_identity_t<type> name = nullptr;
  CUDRV_NVML_REQUIRED(CUDRV_NVML_MEMBER)
  CUDRV_NVML_OPTIONAL(CUDRV_NVML_MEMBER)
#undef CUDRV_NVML_MEMBER
};

// The loaded and initialised NVML; loads it on first use (thread safe).
// Throws library_unavailable_error when it cannot be loaded, nvml_error when nvmlInit_v2 failed.
const api& loaded();
// Whether loaded() succeeds, and why not; never throw.
bool usable() noexcept;
std::string why_unusable();
std::string path();

// nvmlReturn_t's enumerator name, e.g. "NVML_ERROR_NOT_SUPPORTED"; "NVML_ERROR_<n>" when unknown.
std::string return_name(ret r);
// Throws the nvml_error of a failed call of fn.
[[noreturn]] void throw_error(ret r, const char* fn, std::string context);

// Calls an optional entry point; NVML_ERROR_FUNCTION_NOT_FOUND when this NVML lacks it.
template <class Fn, class... A>
ret call(Fn* fn, A... args) {
  return fn != nullptr ? fn(args...) : function_not_found;
}

}  // namespace cudrv::detail::nvml
