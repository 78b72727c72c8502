// A stand-in for libnvidia-ml.so.1, loaded by cudrv through CUDRV_LIBNVML (tests/system/): three NVML
// devices with known readings.
//   index 0: "NVIDIA Fake H100", every reading supported; its UUID is the fake driver's CUDA device 1
//            (NVML's order is not CUDA's).
//   index 1: "NVIDIA Fake L4", whose optional readings all answer NVML_ERROR_NOT_SUPPORTED; its UUID is
//            the fake driver's CUDA device 0. MIG mode on.
//   a MIG instance of index 1 (no index), UUID MIG-d0..., which answers NVML_ERROR_INVALID_ARGUMENT to
//            what a MIG handle does not support, as NVML does.
// Hooks (fake_nvml_*): make a function fail, grow the process list between calls, read counters.
// FAKE_NVML_INIT_RESULT=<n> makes nvmlInit_v2 return n.
// Issue 36 (topology): FAKE_NVML_TOPOLOGY makes NVML see more GPUs, connected as it says; see the block
// at the end. GPUs from index 2 on are full GPUs like index 0; index i is the fake driver's CUDA device i.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

struct nvmlDevice_st {
  int id;  // 0, 1: the GPUs; 2: the MIG instance
};

namespace {

using ret = int;
constexpr ret ok = 0, uninitialized = 1, invalid_argument = 2, not_supported = 3, not_found = 6, insufficient_size = 7;

nvmlDevice_st gpus[10] = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}};  // ids 3..9: NVML index 2..8

// issue 36: topology (defined at the end). How many GPUs NVML sees, and an NVML index's device id.
unsigned int gpu_count();
inline int id_of_index(unsigned int i) { return i < 2 ? static_cast<int>(i) : static_cast<int>(i) + 1; }
inline unsigned int index_of_id(int id) {
  return id < 2 ? static_cast<unsigned int>(id) : static_cast<unsigned int>(id - 1);
}
bool topology_configured();
ret topo_link_state(nvmlDevice_st* d, unsigned int link, int* active);
ret topo_link_remote(nvmlDevice_st* d, unsigned int link, void* pci);

struct pci_t {
  char bus_id_legacy[16];
  unsigned int domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32];
};
struct memory_t {
  unsigned long long total, free, used;
};
struct utilization_t {
  unsigned int gpu, memory;
};
struct process_t {
  unsigned int pid;
  unsigned long long used;
  unsigned int gpu_instance_id, compute_instance_id;
};
struct field_value_t {
  unsigned int field_id, scope_id;
  long long timestamp, latency;
  int value_type;
  ret result;
  unsigned long long value;
};

struct fake_state {
  std::mutex mutex;
  int inits = 0;  // NVML's reference count
  std::map<std::string, long long> counters;
  std::map<std::string, ret> failures;
  int growth_per_call = 0;
  int growth_calls = 0;
  unsigned int compute_processes = 2;
};
fake_state& st() {
  static fake_state* const s = new fake_state;  // never destroyed: cudrv's exit-time nvmlShutdown uses it
  return *s;
}

// The entry of every device function: counts it, applies an injected failure, checks initialisation.
#define FAKE_ENTER(name)                                                             \
  std::lock_guard<std::mutex> lock(st().mutex);                                      \
  ++st().counters[name];                                                             \
  if (auto f = st().failures.find(name); f != st().failures.end()) return f->second; \
  if (st().inits == 0) return uninitialized;

// The UUID of the fake driver's CUDA device d (tests/fake_driver/fake_cuda.cpp, cuDeviceGetUuid): byte 0
// is 0xc0 + d, byte i is i; for the MIG instance byte 0 is 0xd0.
std::string uuid_text(const char* prefix, unsigned char first) {
  unsigned char b[16];
  for (int i = 0; i < 16; ++i) b[i] = static_cast<unsigned char>(i);
  b[0] = first;
  char out[64];
  std::snprintf(out, sizeof(out), "%s%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", prefix,
                b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
  return out;
}
std::string uuid_of(int id) {
  if (id >= 3) return uuid_text("GPU-", static_cast<unsigned char>(0xc0 + index_of_id(id)));
  return id == 0 ? uuid_text("GPU-", 0xc1) : id == 1 ? uuid_text("GPU-", 0xc0) : uuid_text("MIG-", 0xd0);
}

ret copy_text(const std::string& text, char* out, unsigned int size) {
  if (text.size() + 1 > size) return insufficient_size;
  std::memcpy(out, text.c_str(), text.size() + 1);
  return ok;
}

void fill_pci(int id, pci_t* p) {
  std::memset(p, 0, sizeof(*p));
  p->bus = id == 0 ? 0x1b : id == 1 ? 0x9a : 0x40 + 0x10 * (index_of_id(id) - 2);
  p->pci_device_id = id == 1 ? 0x27b810de : 0x233010de;
  p->pci_subsystem_id = 0x16c110de;
  std::snprintf(p->bus_id, sizeof(p->bus_id), "00000000:%02X:00.0", p->bus);
  std::snprintf(p->bus_id_legacy, sizeof(p->bus_id_legacy), "0000:%02X:00.0", p->bus);
}

// What device 0 alone supports; device 1 answers NOT_SUPPORTED, the MIG instance INVALID_ARGUMENT.
ret only_full(nvmlDevice_st* d) {
  return d == nullptr               ? invalid_argument
         : d->id == 0 || d->id >= 3 ? ok
         : d->id == 1               ? not_supported
                                    : invalid_argument;
}

}  // namespace

// --- hooks -----------------------------------------------------------------------------------------

/// Makes @p name return @p code from now on; code 0 clears it.
FAKE_EXPORT void fake_nvml_fail(const char* name, int code) {
  std::lock_guard<std::mutex> lock(st().mutex);
  if (code == 0) {
    st().failures.erase(name);
  } else {
    st().failures[name] = code;
  }
}
/// How often @p name was called ("nvmlInit_v2", "nvmlShutdown", "nvmlDeviceGetComputeRunningProcesses_v3", ...).
FAKE_EXPORT long long fake_nvml_counter(const char* name) {
  std::lock_guard<std::mutex> lock(st().mutex);
  return st().counters[name];
}
/// NVML's initialisation count now.
FAKE_EXPORT int fake_nvml_init_count() {
  std::lock_guard<std::mutex> lock(st().mutex);
  return st().inits;
}
/// Back to two compute processes; then the next @p calls compute-process queries each find @p per_call
/// more processes than the last (-1: twice as many).
FAKE_EXPORT void fake_nvml_grow_processes(int per_call, int calls) {
  std::lock_guard<std::mutex> lock(st().mutex);
  st().compute_processes = 2;
  st().growth_per_call = per_call;
  st().growth_calls = calls;
}

// --- NVML ------------------------------------------------------------------------------------------

FAKE_EXPORT ret nvmlInit_v2() {
  std::lock_guard<std::mutex> lock(st().mutex);
  ++st().counters["nvmlInit_v2"];
  if (const char* r = std::getenv("FAKE_NVML_INIT_RESULT"); r != nullptr && std::atoi(r) != 0) {
    return std::atoi(r);
  }
  ++st().inits;
  return ok;
}
FAKE_EXPORT ret nvmlShutdown() {
  std::lock_guard<std::mutex> lock(st().mutex);
  ++st().counters["nvmlShutdown"];
  // issue 36: watch. FAKE_NVML_COUNTS=<file>: how often each function was called, "name count" lines.
  if (const char* path = std::getenv("FAKE_NVML_COUNTS"); path != nullptr) {
    if (std::FILE* f = std::fopen(path, "w")) {
      for (const auto& [name, n] : st().counters) std::fprintf(f, "%s %lld\n", name.c_str(), n);
      std::fclose(f);
    }
  }
  if (st().inits == 0) return uninitialized;
  --st().inits;
  return ok;
}
FAKE_EXPORT const char* nvmlErrorString(ret r) {
  switch (r) {
    case 0: return "Success";
    case 1: return "Uninitialized (fake)";
    case 2: return "Invalid Argument (fake)";
    case 3: return "Not Supported (fake)";
    case 4: return "Insufficient Permissions (fake)";
    case 6: return "Not Found (fake)";
    case 7: return "Insufficient Size (fake)";
    case 9: return "Driver Not Loaded (fake)";
    case 15: return "GPU is lost (fake)";
    default: return "Unknown Error (fake)";
  }
}
FAKE_EXPORT ret nvmlSystemGetDriverVersion(char* out, unsigned int size) {
  FAKE_ENTER("nvmlSystemGetDriverVersion");
  return copy_text("999.88.77", out, size);
}
FAKE_EXPORT ret nvmlSystemGetNVMLVersion(char* out, unsigned int size) {
  FAKE_ENTER("nvmlSystemGetNVMLVersion");
  return copy_text("13.999.88.77", out, size);
}
FAKE_EXPORT ret nvmlSystemGetCudaDriverVersion_v2(int* v) {
  FAKE_ENTER("nvmlSystemGetCudaDriverVersion_v2");
  *v = 13020;
  return ok;
}
FAKE_EXPORT ret nvmlDeviceGetCount_v2(unsigned int* n) {
  FAKE_ENTER("nvmlDeviceGetCount_v2");
  *n = gpu_count();
  return ok;
}
FAKE_EXPORT ret nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_st** h) {
  FAKE_ENTER("nvmlDeviceGetHandleByIndex_v2");
  if (i >= gpu_count()) return invalid_argument;
  *h = &gpus[id_of_index(i)];
  return ok;
}
FAKE_EXPORT ret nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_st** h) {
  FAKE_ENTER("nvmlDeviceGetHandleByUUID");
  for (int id = 0; id < static_cast<int>(gpu_count()) + 1; ++id) {
    if (uuid_of(id) == uuid) {
      *h = &gpus[id];
      return ok;
    }
  }
  return not_found;
}
FAKE_EXPORT ret nvmlDeviceGetHandleByPciBusId_v2(const char* bus_id, nvmlDevice_st** h) {
  FAKE_ENTER("nvmlDeviceGetHandleByPciBusId_v2");
  const std::string id(bus_id);
  if (id == "00000000:1B:00.0" || id == "0000:1b:00.0") {
    *h = &gpus[0];
  } else if (id == "00000000:9A:00.0" || id == "0000:9a:00.0") {
    *h = &gpus[1];
  } else {
    return not_found;
  }
  return ok;
}
FAKE_EXPORT ret nvmlDeviceGetUUID(nvmlDevice_st* d, char* out, unsigned int size) {
  FAKE_ENTER("nvmlDeviceGetUUID");
  return copy_text(uuid_of(d->id), out, size);
}
FAKE_EXPORT ret nvmlDeviceGetIndex(nvmlDevice_st* d, unsigned int* i) {
  FAKE_ENTER("nvmlDeviceGetIndex");
  if (d->id == 2) return invalid_argument;
  *i = index_of_id(d->id);
  return ok;
}
FAKE_EXPORT ret nvmlDeviceGetName(nvmlDevice_st* d, char* out, unsigned int size) {
  FAKE_ENTER("nvmlDeviceGetName");
  return copy_text(d->id == 1   ? "NVIDIA Fake L4"
                   : d->id == 2 ? "NVIDIA Fake L4 MIG 1g.6gb"
                                : "NVIDIA Fake H100",
                   out, size);
}
FAKE_EXPORT ret nvmlDeviceGetSerial(nvmlDevice_st* d, char* out, unsigned int size) {
  FAKE_ENTER("nvmlDeviceGetSerial");
  if (ret r = only_full(d); r != ok) return r;
  return copy_text("1650000000001", out, size);
}
FAKE_EXPORT ret nvmlDeviceGetPciInfo_v3(nvmlDevice_st* d, pci_t* p) {
  FAKE_ENTER("nvmlDeviceGetPciInfo_v3");
  if (d->id == 2) return invalid_argument;
  fill_pci(d->id, p);
  return ok;
}
FAKE_EXPORT ret nvmlDeviceIsMigDeviceHandle(nvmlDevice_st* d, unsigned int* is_mig) {
  FAKE_ENTER("nvmlDeviceIsMigDeviceHandle");
  *is_mig = d->id == 2 ? 1 : 0;
  return ok;
}
FAKE_EXPORT ret nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_st* d, nvmlDevice_st** parent) {
  FAKE_ENTER("nvmlDeviceGetDeviceHandleFromMigDeviceHandle");
  if (d->id != 2) return invalid_argument;
  *parent = &gpus[1];
  return ok;
}
FAKE_EXPORT ret nvmlDeviceGetUtilizationRates(nvmlDevice_st* d, utilization_t* u) {
  FAKE_ENTER("nvmlDeviceGetUtilizationRates");
  if (ret r = only_full(d); r != ok) return r;
  *u = {37, 12};
  return ok;
}
FAKE_EXPORT ret nvmlDeviceGetMemoryInfo(nvmlDevice_st* d, memory_t* m) {
  FAKE_ENTER("nvmlDeviceGetMemoryInfo");
  constexpr unsigned long long gib = 1ULL << 30;
  if (d->id == 0 || d->id >= 3) *m = {80 * gib, 70 * gib, 10 * gib};
  if (d->id == 1) *m = {24 * gib, 20 * gib, 4 * gib};
  if (d->id == 2) *m = {6 * gib, 5 * gib, 1 * gib};  // the MIG instance's own
  return ok;
}
FAKE_EXPORT ret nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_st* d, memory_t* m) {
  FAKE_ENTER("nvmlDeviceGetBAR1MemoryInfo");
  if (ret r = only_full(d); r != ok) return r;
  *m = {128ULL << 30, 127ULL << 30, 1ULL << 30};
  return ok;
}

// Power, in milliwatts.
#define FAKE_UINT_READING(fn, value)                      \
  FAKE_EXPORT ret fn(nvmlDevice_st* d, unsigned int* v) { \
    FAKE_ENTER(#fn);                                      \
    if (ret r = only_full(d); r != ok) return r;          \
    *v = value;                                           \
    return ok;                                            \
  }
FAKE_UINT_READING(nvmlDeviceGetPowerUsage, 123456)
FAKE_UINT_READING(nvmlDeviceGetPowerManagementLimit, 700000)
FAKE_UINT_READING(nvmlDeviceGetEnforcedPowerLimit, 690000)
FAKE_UINT_READING(nvmlDeviceGetPowerManagementDefaultLimit, 700000)
FAKE_UINT_READING(nvmlDeviceGetCurrPcieLinkGeneration, 4)
FAKE_UINT_READING(nvmlDeviceGetMaxPcieLinkGeneration, 5)
FAKE_UINT_READING(nvmlDeviceGetGpuMaxPcieLinkGeneration, 5)
FAKE_UINT_READING(nvmlDeviceGetCurrPcieLinkWidth, 8)
FAKE_UINT_READING(nvmlDeviceGetMaxPcieLinkWidth, 16)
FAKE_UINT_READING(nvmlDeviceGetPcieReplayCounter, 3)

FAKE_EXPORT ret nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_st* d, unsigned int* lo, unsigned int* hi) {
  FAKE_ENTER("nvmlDeviceGetPowerManagementLimitConstraints");
  if (ret r = only_full(d); r != ok) return r;
  *lo = 200000;
  *hi = 700000;
  return ok;
}
FAKE_EXPORT ret nvmlDeviceGetTemperature(nvmlDevice_st* d, int sensor, unsigned int* c) {
  FAKE_ENTER("nvmlDeviceGetTemperature");
  if (ret r = only_full(d); r != ok) return r;
  if (sensor != 0) return invalid_argument;
  *c = 41;
  return ok;
}
FAKE_EXPORT ret nvmlDeviceGetTemperatureThreshold(nvmlDevice_st* d, int type, unsigned int* c) {
  FAKE_ENTER("nvmlDeviceGetTemperatureThreshold");
  if (ret r = only_full(d); r != ok) return r;
  static const unsigned int values[] = {92, 89, 95, 87};  // shutdown, slowdown, memory max, GPU max
  if (type < 0 || type > 3) return invalid_argument;
  *c = values[type];
  return ok;
}
// issue 36: watch. Device 0's NVLink data counters summed over its links (scope 0xFFFFFFFF, fields 138 and
// 139, KiB): each call that asks for them advances the fake's clock by 0.5 s (NVML's timestamp), the
// transmit counter by 4096 KiB and the receive counter by 1024 KiB, so that any two readings give
// 8 MiB/s sent and 2 MiB/s received. Called with the fake's mutex held.
// fake_nvml_watch_counters(mode, tx, rx) changes that: mode 1 answers the raw values tx and rx instead
// (NVML_VALUE_NOT_AVAILABLE, a counter too large to be counted in bytes), mode 2 answers NOT_SUPPORTED
// for every link at once (so that cudrv sums the links' own counters), mode 0 is back to normal.
// FAKE_NVML_STALL=<n>:<ms> makes the n-th call of nvmlDeviceGetFieldValues (from 1) take ms longer.
namespace {
unsigned long long watch_calls = 0;
int watch_mode = 0;
unsigned long long watch_raw[2] = {0, 0};
bool watch_field(const nvmlDevice_st* d, const field_value_t& v) {
  return (v.field_id == 138 || v.field_id == 139) && v.scope_id == 0xFFFFFFFFu && d != nullptr && d->id == 0;
}
void watch_stall(long long call) {
  const char* stall = std::getenv("FAKE_NVML_STALL");
  if (stall != nullptr && std::atoll(stall) == call) {
    const char* ms = std::strchr(stall, ':');
    if (ms != nullptr) std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(ms + 1)));
  }
}
}  // namespace
FAKE_EXPORT void fake_nvml_watch_counters(int mode, unsigned long long tx, unsigned long long rx) {
  std::lock_guard<std::mutex> lock(st().mutex);
  watch_mode = mode;
  watch_raw[0] = tx;
  watch_raw[1] = rx;
}
namespace {
// Once per call: advances the counters when the call asks for them.
void watch_advance(const nvmlDevice_st* d, const field_value_t* values, int count) {
  for (int i = 0; i < count; ++i) {
    if (watch_field(d, values[i])) {
      ++watch_calls;
      return;
    }
  }
}
bool watch_traffic(const nvmlDevice_st* d, field_value_t& v) {
  if (!watch_field(d, v)) return false;
  v.result = watch_mode == 2 ? not_supported : ok;
  v.value_type = 3;  // unsigned long long
  if (watch_mode == 1) {
    v.timestamp = 1'700'000'000'000'000LL;
    v.value = watch_raw[v.field_id == 138 ? 0 : 1];
    return true;
  }
  v.timestamp = 1'700'000'000'000'000LL + static_cast<long long>(watch_calls) * 500'000;
  v.value = v.field_id == 138 ? 1'000'000 + 4096 * watch_calls : 2'000'000 + 1024 * watch_calls;
  return true;
}
}  // namespace

FAKE_EXPORT ret nvmlDeviceGetFieldValues(nvmlDevice_st* d, int count, field_value_t* values) {
  FAKE_ENTER("nvmlDeviceGetFieldValues");
  watch_advance(d, values, count);                         // issue 36: watch
  watch_stall(st().counters["nvmlDeviceGetFieldValues"]);  // issue 36: watch
  for (int i = 0; i < count; ++i) {
    field_value_t& v = values[i];
    v.result = only_full(d);
    if (v.result != ok) continue;
    if (watch_traffic(d, v)) {
    } else if (v.field_id == 82) {  // memory temperature, an unsigned int
      v.value_type = 1;
      v.value = 0;
      unsigned int c = 47;
      std::memcpy(&v.value, &c, sizeof(c));
    } else if ((v.field_id == 138 || v.field_id == 139) && v.scope_id < 2) {  // NVLink data KiB, unsigned long long
      v.value_type = 3;
      v.value = (v.field_id == 138 ? 1000ULL : 2000ULL) + v.scope_id;
    } else {
      v.result = not_supported;
    }
  }
  return ok;
}

// Clocks: graphics, SM, memory, video.
#define FAKE_CLOCKS(fn, g, sm, mem, video)                          \
  FAKE_EXPORT ret fn(nvmlDevice_st* d, int type, unsigned int* v) { \
    FAKE_ENTER(#fn);                                                \
    if (ret r = only_full(d); r != ok) return r;                    \
    static const unsigned int values[] = {g, sm, mem, video};       \
    if (type < 0 || type > 3) return invalid_argument;              \
    *v = values[type];                                              \
    return ok;                                                      \
  }
FAKE_CLOCKS(nvmlDeviceGetClockInfo, 1755, 1755, 2619, 1545)
FAKE_CLOCKS(nvmlDeviceGetMaxClockInfo, 1980, 1980, 2619, 1710)
FAKE_CLOCKS(nvmlDeviceGetApplicationsClock, 1755, 1755, 2619, 1545)

FAKE_EXPORT ret nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_st* d, unsigned long long* mask) {
  FAKE_ENTER("nvmlDeviceGetCurrentClocksEventReasons");
  if (ret r = only_full(d); r != ok) return r;
  *mask = 0x1ULL | 0x4ULL | (1ULL << 40);  // GPU idle, software power cap, a bit NVML may add later
  return ok;
}
FAKE_EXPORT ret nvmlDeviceGetPcieThroughput(nvmlDevice_st* d, int counter, unsigned int* kib) {
  FAKE_ENTER("nvmlDeviceGetPcieThroughput");
  if (ret r = only_full(d); r != ok) return r;
  *kib = counter == 0 ? 1234 : 5678;
  return ok;
}
// NVLinks: device 0 has link 0 up and link 1 down; other links do not exist (INVALID_ARGUMENT).
FAKE_EXPORT ret nvmlDeviceGetNvLinkState(nvmlDevice_st* d, unsigned int link, int* active) {
  FAKE_ENTER("nvmlDeviceGetNvLinkState");
  if (topology_configured()) return topo_link_state(d, link, active);  // issue 36: topology
  if (ret r = only_full(d); r != ok) return r;
  if (link >= 2) return invalid_argument;
  *active = link == 0 ? 1 : 0;
  return ok;
}
FAKE_EXPORT ret nvmlDeviceGetNvLinkVersion(nvmlDevice_st* d, unsigned int link, unsigned int* version) {
  FAKE_ENTER("nvmlDeviceGetNvLinkVersion");
  if (ret r = only_full(d); r != ok) return r;
  if (link >= 2) return invalid_argument;
  *version = 4;
  return ok;
}
FAKE_EXPORT ret nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_st* d, unsigned int link, pci_t* p) {
  FAKE_ENTER("nvmlDeviceGetNvLinkRemotePciInfo_v2");
  if (topology_configured()) return topo_link_remote(d, link, p);  // issue 36: topology
  if (ret r = only_full(d); r != ok) return r;
  if (link != 0) return not_supported;  // a link that is down has no remote end
  std::memset(p, 0, sizeof(*p));
  p->bus = 0x2a;
  std::snprintf(p->bus_id, sizeof(p->bus_id), "00000000:2A:00.0");
  return ok;
}
FAKE_EXPORT ret nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_st* d, unsigned int link, int counter,
                                                unsigned long long* n) {
  FAKE_ENTER("nvmlDeviceGetNvLinkErrorCounter");
  if (ret r = only_full(d); r != ok) return r;
  if (link >= 2 || counter < 0 || counter > 4) return invalid_argument;
  *n = link == 0 ? static_cast<unsigned long long>(counter + 1) : 0;
  return ok;
}
FAKE_EXPORT ret nvmlDeviceGetEccMode(nvmlDevice_st* d, int* current, int* pending) {
  FAKE_ENTER("nvmlDeviceGetEccMode");
  if (ret r = only_full(d); r != ok) return r;
  *current = 1;
  *pending = 0;
  return ok;
}
FAKE_EXPORT ret nvmlDeviceGetTotalEccErrors(nvmlDevice_st* d, int type, int counter, unsigned long long* n) {
  FAKE_ENTER("nvmlDeviceGetTotalEccErrors");
  if (ret r = only_full(d); r != ok) return r;
  static const unsigned long long values[2][2] = {{7, 70}, {0, 1}};  // [corrected, uncorrected][volatile, aggregate]
  *n = values[type][counter];
  return ok;
}
FAKE_EXPORT ret nvmlDeviceGetRetiredPages(nvmlDevice_st* d, int, unsigned int*, unsigned long long*) {
  FAKE_ENTER("nvmlDeviceGetRetiredPages");
  (void)d;
  return not_supported;  // a GPU that remaps rows
}
FAKE_EXPORT ret nvmlDeviceGetRemappedRows(nvmlDevice_st* d, unsigned int* corrected, unsigned int* uncorrected,
                                          unsigned int* pending, unsigned int* failure) {
  FAKE_ENTER("nvmlDeviceGetRemappedRows");
  if (ret r = only_full(d); r != ok) return r;
  *corrected = 2;
  *uncorrected = 1;
  *pending = 1;
  *failure = 0;
  return ok;
}
FAKE_EXPORT ret nvmlDeviceGetComputeMode(nvmlDevice_st* d, int* mode) {
  FAKE_ENTER("nvmlDeviceGetComputeMode");
  if (ret r = only_full(d); r != ok) return r;
  *mode = 3;  // exclusive process
  return ok;
}
FAKE_EXPORT ret nvmlDeviceGetMigMode(nvmlDevice_st* d, unsigned int* current, unsigned int* pending) {
  FAKE_ENTER("nvmlDeviceGetMigMode");
  if (d->id == 2) return invalid_argument;
  *current = d->id == 1 ? 1 : 0;
  *pending = d->id == 1 ? 1 : 0;
  return ok;
}
FAKE_EXPORT ret nvmlDeviceGetPersistenceMode(nvmlDevice_st* d, int* mode) {
  FAKE_ENTER("nvmlDeviceGetPersistenceMode");
  if (ret r = only_full(d); r != ok) return r;
  *mode = 1;
  return ok;
}
FAKE_EXPORT ret nvmlDeviceGetPerformanceState(nvmlDevice_st* d, int* state) {
  FAKE_ENTER("nvmlDeviceGetPerformanceState");
  if (d->id == 2) return invalid_argument;
  *state = d->id == 0 ? 2 : 32;  // device 1: NVML_PSTATE_UNKNOWN
  return ok;
}

// The two-call size protocol: fewer slots than processes gives INSUFFICIENT_SIZE and the count now.
FAKE_EXPORT ret nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_st* d, unsigned int* count, process_t* out) {
  FAKE_ENTER("nvmlDeviceGetComputeRunningProcesses_v3");
  if (ret r = only_full(d); r != ok) return r;
  if (st().growth_calls > 0) {
    --st().growth_calls;
    st().compute_processes = st().growth_per_call < 0
                                 ? 2 * st().compute_processes
                                 : st().compute_processes + static_cast<unsigned int>(st().growth_per_call);
  }
  const unsigned int n = st().compute_processes;
  if (*count < n) {
    *count = n;
    return insufficient_size;
  }
  for (unsigned int i = 0; i < n; ++i) {
    // The second process's memory is unknown (NVML_VALUE_NOT_AVAILABLE); MIG is off (ids ~0u).
    out[i] = {4242 + i, i == 1 ? ~0ULL : (1ULL << 30) * (i + 1), ~0u, ~0u};
  }
  *count = n;
  return ok;
}
FAKE_EXPORT ret nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_st* d, unsigned int* count, process_t* out) {
  FAKE_ENTER("nvmlDeviceGetGraphicsRunningProcesses_v3");
  if (ret r = only_full(d); r != ok) return r;
  if (*count < 1) {
    *count = 1;
    return insufficient_size;
  }
  out[0] = {99, 5ULL << 20, 1, 0};
  *count = 1;
  return ok;
}

// --- issue 36: topology ------------------------------------------------------------------------------
// Without FAKE_NVML_TOPOLOGY: the two GPUs above, index 0 answering (SYS between them, CPUs 0-7, NUMA
// node 0), index 1 NOT_SUPPORTED. With it, NVML sees one GPU per row of the matrix it gives:
//   FAKE_NVML_TOPOLOGY  rows separated by ';', entries by ','; entry j of row i is how NVML index i
//                       reaches index j: X (itself), a PCIe level (PIX, PXB, PHB, NODE, SYS), and
//                       "+NV<n>" for n NVLinks between the two, e.g. "X,PXB+NV4;PXB+NV4,X"
//   FAKE_NVML_NVSWITCH  per GPU, ','-separated: how many more of its links go to an NVSwitch
//   FAKE_NVML_CPUS      per GPU, ';'-separated: its CPU affinity as a list ("0-3,8-11"), "-" for
//                       NOT_SUPPORTED, "" for an empty mask
//   FAKE_NVML_NUMA      per GPU, ';'-separated: its memory affinity (NUMA nodes), likewise
//   FAKE_NVML_GPU_NUMA  per GPU, ';'-separated: its GPU memory's NUMA node, "-" for NOT_SUPPORTED
//   FAKE_NVML_NO_REMOTE_TYPE  when set, nvmlDeviceGetNvLinkRemoteDeviceType answers NOT_SUPPORTED
// A GPU's links are numbered in order of the GPUs they reach, then its NVSwitch links.
namespace {

struct topo_config {
  bool configured = false;
  std::vector<std::vector<int>> level;  // nvmlGpuTopologyLevel_t, -1 on the diagonal
  std::vector<std::vector<int>> links;  // NVLinks between two GPUs
  std::vector<int> switch_links;
  std::vector<std::string> cpus, numa, gpu_numa;  // "-": not supported
};

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, sep)) out.push_back(item);
  if (!text.empty() && text.back() == sep) out.push_back("");
  return out;
}

int level_of(const std::string& name) {
  static const std::map<std::string, int> levels{{"X", -1},   {"PIX", 10},  {"PXB", 20},
                                                 {"PHB", 30}, {"NODE", 40}, {"SYS", 50}};
  auto it = levels.find(name);
  if (it == levels.end()) {
    std::fprintf(stderr, "fake NVML: FAKE_NVML_TOPOLOGY: unknown level '%s'\n", name.c_str());
    std::abort();
  }
  return it->second;
}

std::vector<std::string> per_gpu(const char* env, std::size_t n, const char* fallback) {
  const char* v = std::getenv(env);
  std::vector<std::string> out = v != nullptr ? split(v, ';') : std::vector<std::string>{};
  out.resize(n, fallback);
  return out;
}

const topo_config& topo() {
  static const topo_config config = [] {
    topo_config c;
    const char* spec = std::getenv("FAKE_NVML_TOPOLOGY");
    if (spec == nullptr || *spec == '\0') {
      c.level = {{-1, 50}, {50, -1}};
      c.links = {{0, 0}, {0, 0}};
      c.switch_links = {0, 0};
      c.cpus = {"0-7", "-"};
      c.numa = {"0", "-"};
      c.gpu_numa = {"-", "-"};
      return c;
    }
    c.configured = true;
    for (const std::string& row : split(spec, ';')) {
      c.level.emplace_back();
      c.links.emplace_back();
      for (const std::string& entry : split(row, ',')) {
        const std::size_t plus = entry.find("+NV");
        c.level.back().push_back(level_of(entry.substr(0, plus)));
        c.links.back().push_back(plus == std::string::npos ? 0 : std::atoi(entry.c_str() + plus + 3));
      }
    }
    const std::size_t n = c.level.size();
    if (const char* sw = std::getenv("FAKE_NVML_NVSWITCH"); sw != nullptr) {
      for (const std::string& s : split(sw, ',')) c.switch_links.push_back(std::atoi(s.c_str()));
    }
    c.switch_links.resize(n, 0);
    c.cpus = per_gpu("FAKE_NVML_CPUS", n, "-");
    c.numa = per_gpu("FAKE_NVML_NUMA", n, "-");
    c.gpu_numa = per_gpu("FAKE_NVML_GPU_NUMA", n, "-");
    return c;
  }();
  return config;
}

// A list such as "0-3,8" into an NVML mask of size words.
ret fill_mask(const std::string& list, unsigned int size, unsigned long* mask) {
  if (list == "-") return not_supported;
  std::memset(mask, 0, size * sizeof(unsigned long));
  constexpr unsigned int bits = 8 * sizeof(unsigned long);
  for (const std::string& range : split(list, ',')) {
    if (range.empty()) continue;
    const std::size_t dash = range.find('-');
    const unsigned int lo = static_cast<unsigned int>(std::atoi(range.c_str()));
    const unsigned int hi =
        dash == std::string::npos ? lo : static_cast<unsigned int>(std::atoi(range.c_str() + dash + 1));
    for (unsigned int b = lo; b <= hi; ++b) {
      if (b / bits >= size) return insufficient_size;
      mask[b / bits] |= 1UL << (b % bits);
    }
  }
  return ok;
}

// The GPU (NVML index) link @p link of GPU @p index reaches: -1 for the NVSwitch, -2 when there is no such link.
int link_target(unsigned int index, unsigned int link) {
  const topo_config& c = topo();
  unsigned int next = 0;
  for (std::size_t j = 0; j < c.links[index].size(); ++j) {
    next += static_cast<unsigned int>(c.links[index][j]);
    if (link < next) return static_cast<int>(j);
  }
  return link < next + static_cast<unsigned int>(c.switch_links[index]) ? -1 : -2;
}

// The GPU's NVML index, or -1 for the MIG instance and an unknown handle.
int gpu_index(nvmlDevice_st* d) {
  if (d == nullptr || d->id == 2) return -1;
  const unsigned int i = index_of_id(d->id);
  return i < gpu_count() ? static_cast<int>(i) : -1;
}

unsigned int gpu_count() { return static_cast<unsigned int>(topo().level.size()); }
bool topology_configured() { return topo().configured; }

ret topo_link_state(nvmlDevice_st* d, unsigned int link, int* active) {
  const int i = gpu_index(d);
  if (i < 0 || link >= 18 || link_target(static_cast<unsigned int>(i), link) == -2) return invalid_argument;
  *active = 1;
  return ok;
}

ret topo_link_remote(nvmlDevice_st* d, unsigned int link, void* out) {
  const int i = gpu_index(d);
  if (i < 0 || link >= 18) return invalid_argument;
  const int target = link_target(static_cast<unsigned int>(i), link);
  if (target == -2) return invalid_argument;
  if (target == -1) {  // an NVSwitch: its own PCI location, no GPU's
    auto* p = static_cast<pci_t*>(out);
    std::memset(p, 0, sizeof(*p));
    p->bus = 0xf0;
    std::snprintf(p->bus_id, sizeof(p->bus_id), "00000000:F0:00.0");
    return ok;
  }
  fill_pci(id_of_index(static_cast<unsigned int>(target)), static_cast<pci_t*>(out));
  return ok;
}

}  // namespace

FAKE_EXPORT ret nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_st* d, unsigned int link, int* type) {
  FAKE_ENTER("nvmlDeviceGetNvLinkRemoteDeviceType");
  if (std::getenv("FAKE_NVML_NO_REMOTE_TYPE") != nullptr) return not_supported;  // an NVML that cannot tell
  if (!topo().configured) {  // the NVLinks above: index 0's link 0 reaches a GPU, link 1 is down
    if (ret r = only_full(d); r != ok) return r;
    if (link >= 2) return invalid_argument;
    if (link != 0) return not_supported;
    *type = 0;
    return ok;
  }
  const int i = gpu_index(d);
  if (i < 0 || link >= 18) return invalid_argument;
  const int target = link_target(static_cast<unsigned int>(i), link);
  if (target == -2) return invalid_argument;
  *type = target == -1 ? 2 : 0;  // NVML_NVLINK_DEVICE_TYPE_SWITCH, _GPU
  return ok;
}
FAKE_EXPORT ret nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_st* a, nvmlDevice_st* b, int* level) {
  FAKE_ENTER("nvmlDeviceGetTopologyCommonAncestor");
  const int i = gpu_index(a);
  const int j = gpu_index(b);
  if (i < 0 || j < 0) return invalid_argument;
  if (!topo().configured && (i == 1 || j == 1)) return not_supported;
  *level = i == j ? 0 : topo().level[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)];
  return ok;
}
FAKE_EXPORT ret nvmlDeviceGetCpuAffinityWithinScope(nvmlDevice_st* d, unsigned int size, unsigned long* mask,
                                                    int scope) {
  FAKE_ENTER("nvmlDeviceGetCpuAffinityWithinScope");
  const int i = gpu_index(d);
  if (i < 0 || scope != 0) return invalid_argument;
  return fill_mask(topo().cpus[static_cast<std::size_t>(i)], size, mask);
}
FAKE_EXPORT ret nvmlDeviceGetMemoryAffinity(nvmlDevice_st* d, unsigned int size, unsigned long* mask, int scope) {
  FAKE_ENTER("nvmlDeviceGetMemoryAffinity");
  const int i = gpu_index(d);
  if (i < 0 || scope != 0) return invalid_argument;
  return fill_mask(topo().numa[static_cast<std::size_t>(i)], size, mask);
}
FAKE_EXPORT ret nvmlDeviceGetNumaNodeId(nvmlDevice_st* d, unsigned int* node) {
  FAKE_ENTER("nvmlDeviceGetNumaNodeId");
  const int i = gpu_index(d);
  if (i < 0) return invalid_argument;
  const std::string& v = topo().gpu_numa[static_cast<std::size_t>(i)];
  if (v == "-" || v.empty()) return not_supported;
  *node = static_cast<unsigned int>(std::atoi(v.c_str()));
  return ok;
}

// issue 36: watch. nvmlDeviceGetMemoryInfo_v2 on device 0 only (the others answer NOT_SUPPORTED, the
// MIG instance INVALID_ARGUMENT): the same memory as nvmlDeviceGetMemoryInfo with 512 MiB of it
// reserved, so that used is 512 MiB less; a wrong struct version is refused as NVML does.
struct memory_v2_t {
  unsigned int version;
  unsigned long long total, reserved, free, used;
};
FAKE_EXPORT ret nvmlDeviceGetMemoryInfo_v2(nvmlDevice_st* d, memory_v2_t* m) {
  FAKE_ENTER("nvmlDeviceGetMemoryInfo_v2");
  if (ret r = only_full(d); r != ok) return r;
  if (m->version != (static_cast<unsigned int>(sizeof(memory_v2_t)) | (2u << 24)))
    return 25;  // ARGUMENT_VERSION_MISMATCH
  constexpr unsigned long long gib = 1ULL << 30, mib = 1ULL << 20;
  m->total = 80 * gib;
  m->reserved = 512 * mib;
  m->used = 10 * gib - 512 * mib;
  m->free = 70 * gib;
  return ok;
}
