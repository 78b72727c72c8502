// NVML from the library (<cudrv/system.hpp>): versions, devices matched to CUDA's, their readings.
#include <cudrv/system.hpp>

#include <algorithm>
#include <cstring>
#include <utility>

#include <cudrv/device.hpp>
#include <cudrv/driver.hpp>

#include "driver/system_nvml.hpp"

namespace cudrv::system {

namespace nv = cudrv::detail::nvml;

namespace {

// What an error message says of a device: its UUID when NVML gives it.
std::string describe(nv::handle h) {
  char text[nv::text_buffer] = {};
  const nv::api& a = nv::loaded();
  if (a.nvmlDeviceGetUUID(h, text, nv::text_buffer) == nv::success) {
    return std::string("NVML device ") + text;
  }
  return "NVML device";
}

bool is_mig(nv::handle h) {
  unsigned int mig = 0;
  return nv::call(nv::loaded().nvmlDeviceIsMigDeviceHandle, h, &mig) == nv::success && mig != 0;
}

// Whether a reading is there: true when NVML answered, false where it does not support the reading on
// this device (NVML_ERROR_NOT_SUPPORTED, an entry point this NVML lacks, and for a MIG instance or an
// absent NVLink NVML_ERROR_INVALID_ARGUMENT). Anything else is a real error and throws.
bool got(nv::ret r, const char* fn, nv::handle h, bool invalid_is_absent = false) {
  if (r == nv::success) [[likely]] {
    return true;
  }
  if (r == nv::not_supported || r == nv::function_not_found) {
    return false;
  }
  if (r == nv::invalid_argument && (invalid_is_absent || is_mig(h))) {
    return false;
  }
  nv::throw_error(r, fn, describe(h));
}

// A reading of one entry point: `CUDRV_NVML_GOT(fn, h, args...)` calls fn(h, args...) and says whether
// it answered (see got).
#define CUDRV_NVML_GOT(fn, h, ...) got(nv::call(nv::loaded().fn, h, __VA_ARGS__), #fn, h)
#define CUDRV_NVML_LINK_GOT(fn, h, ...) got(nv::call(nv::loaded().fn, h, __VA_ARGS__), #fn, h, true)

std::string text_of(nv::ret (*fn)(char*, unsigned int), const char* name) {
  char text[nv::text_buffer] = {};
  if (fn == nullptr) {
    nv::throw_error(nv::function_not_found, name, "NVML");
  }
  if (nv::ret r = fn(text, nv::text_buffer); r != nv::success) {
    nv::throw_error(r, name, "NVML");
  }
  return text;
}

nv::handle lookup(nv::ret (*fn)(const char*, nv::handle*), const char* name, std::string_view key, const char* what) {
  std::string id(key);
  nv::handle h = nullptr;
  if (fn == nullptr) {
    nv::throw_error(nv::function_not_found, name, "NVML");
  }
  if (nv::ret r = fn(id.c_str(), &h); r != nv::success) {
    nv::throw_error(r, name, std::string(what) + " " + id);
  }
  return h;
}

pci_info to_pci(const nv::pci& p) {
  pci_info out;
  out.bus_id.assign(p.bus_id, strnlen(p.bus_id, sizeof(p.bus_id)));
  out.domain = p.domain;
  out.bus = p.bus;
  out.device = p.device;
  out.pci_device_id = p.pci_device_id;
  out.pci_subsystem_id = p.pci_subsystem_id;
  return out;
}

// (The value is taken by reference and read after the call that fills it: `maybe(got(f(&v)), v)`.)
std::optional<double> watts(bool ok, const unsigned int& milliwatts) {
  return ok ? std::optional<double>(milliwatts / 1000.0) : std::nullopt;
}

template <class T>
std::optional<T> maybe(bool ok, const T& value) {
  return ok ? std::optional<T>(value) : std::nullopt;
}

// A field value NVML answered, as an unsigned number (negative values read 0); empty for a type it
// does not say.
std::optional<unsigned long long> as_unsigned(const nv::field_value& v) {
  switch (v.value_type) {
    case nv::value_double: return v.v.d < 0 ? 0ULL : static_cast<unsigned long long>(v.v.d);
    case nv::value_unsigned_int: return v.v.ui;
    case nv::value_unsigned_long: return v.v.ul;
    case nv::value_unsigned_long_long: return v.v.ull;
    case nv::value_signed_long_long: return v.v.sll < 0 ? 0ULL : static_cast<unsigned long long>(v.v.sll);
    case nv::value_signed_int: return v.v.si < 0 ? 0ULL : static_cast<unsigned long long>(v.v.si);
    case nv::value_unsigned_short: return v.v.us;
    default: return std::nullopt;
  }
}

// A field value (nvmlDeviceGetFieldValues) as an unsigned number; empty where NVML has none.
std::optional<unsigned long long> field(nv::handle h, unsigned int id, unsigned int scope) {
  nv::field_value v{};
  v.field_id = id;
  v.scope_id = scope;
  if (!CUDRV_NVML_GOT(nvmlDeviceGetFieldValues, h, 1, &v) || !got(v.nvml_return, "nvmlDeviceGetFieldValues", h, true)) {
    return std::nullopt;
  }
  return as_unsigned(v);
}

clock_set read_clocks(nv::handle h, nv::ret (*fn)(nv::handle, int, unsigned int*), const char* name) {
  clock_set out;
  std::optional<unsigned int>* slots[] = {&out.graphics_mhz, &out.sm_mhz, &out.memory_mhz, &out.video_mhz};
  for (int type = 0; type < 4; ++type) {  // NVML_CLOCK_GRAPHICS, _SM, _MEM, _VIDEO
    unsigned int mhz = 0;
    if (got(nv::call(fn, h, type, &mhz), name, h)) {
      *slots[type] = mhz;
    }
  }
  return out;
}

nvlink_readings read_link(nv::handle h, unsigned int link, bool active) {
  nvlink_readings out;
  out.link = link;
  out.active = active;
  unsigned int version = 0;
  if (CUDRV_NVML_LINK_GOT(nvmlDeviceGetNvLinkVersion, h, link, &version)) {
    out.version = version;
  }
  if (nv::pci p{}; CUDRV_NVML_LINK_GOT(nvmlDeviceGetNvLinkRemotePciInfo_v2, h, link, &p)) {
    out.remote = to_pci(p);
  }
  out.tx_data_kib = field(h, nv::field_nvlink_data_tx, link);
  out.rx_data_kib = field(h, nv::field_nvlink_data_rx, link);
  std::optional<unsigned long long>* counters[] = {&out.replay_errors, &out.recovery_errors, &out.crc_flit_errors,
                                                   &out.crc_data_errors, &out.ecc_data_errors};
  for (int counter = 0; counter < 5; ++counter) {  // NVML_NVLINK_ERROR_DL_REPLAY ... _DL_ECC_DATA
    unsigned long long n = 0;
    if (CUDRV_NVML_LINK_GOT(nvmlDeviceGetNvLinkErrorCounter, h, link, counter, &n)) {
      *counters[counter] = n;
    }
  }
  return out;
}

process_info to_process(const nv::process& p, process_kind kind) {
  process_info out;
  out.pid = p.pid;
  out.kind = kind;
  if (p.used_gpu_memory != nv::value_not_available) {
    out.used_bytes = p.used_gpu_memory;
  }
  constexpr unsigned int none = 0xFFFFFFFFu;  // NVML's id when MIG is off
  if (p.gpu_instance_id != none) {
    out.gpu_instance_id = p.gpu_instance_id;
  }
  if (p.compute_instance_id != none) {
    out.compute_instance_id = p.compute_instance_id;
  }
  return out;
}

// NVML's two-call size protocol: ask with the room there is; NVML_ERROR_INSUFFICIENT_SIZE says how many
// there are now, so make room (with a margin) and ask again. Processes come and go between the calls:
// give up after a bounded number of tries.
void list_processes(nv::handle h, nv::ret (*fn)(nv::handle, unsigned int*, nv::process*), const char* name,
                    process_kind kind, std::vector<process_info>& out) {
  constexpr int tries = 6;
  std::vector<nv::process> room;
  for (int attempt = 0; attempt < tries; ++attempt) {
    auto count = static_cast<unsigned int>(room.size());
    const nv::ret r = nv::call(fn, h, &count, room.empty() ? nullptr : room.data());
    if (r == nv::success) {
      for (unsigned int i = 0; i < std::min<std::size_t>(count, room.size()); ++i) {
        out.push_back(to_process(room[i], kind));
      }
      return;
    }
    if (r != nv::insufficient_size) {
      if (!got(r, name, h)) {
        return;
      }
    }
    // NVML's count is foreign input: bounded before it sizes an allocation (a device runs far fewer).
    constexpr std::size_t max_processes = std::size_t{1} << 16;
    if (count > max_processes) {
      nv::throw_error(nv::insufficient_size, name,
                      describe(h) + ": NVML reports " + std::to_string(count) + " processes, more than " +
                          std::to_string(max_processes));
    }
    room.assign(std::size_t{count} + count / 4 + 1, nv::process{});
  }
  nv::throw_error(nv::insufficient_size, name,
                  describe(h) + ": the number of processes kept changing; gave up after " + std::to_string(tries) +
                      " tries");
}

}  // namespace

// --- the system ------------------------------------------------------------------------------------

bool available() noexcept {
  try {
    return nv::usable();
  } catch (...) {
    return false;
  }
}

std::string unavailable_reason() { return nv::why_unusable(); }

std::string library_path() { return nv::path(); }

std::string driver_version() { return text_of(nv::loaded().nvmlSystemGetDriverVersion, "nvmlSystemGetDriverVersion"); }

std::string nvml_version() { return text_of(nv::loaded().nvmlSystemGetNVMLVersion, "nvmlSystemGetNVMLVersion"); }

int cuda_driver_version() {
  int version = 0;
  const nv::api& a = nv::loaded();
  if (nv::ret r = nv::call(a.nvmlSystemGetCudaDriverVersion_v2, &version); r != nv::success) {
    nv::throw_error(r, "nvmlSystemGetCudaDriverVersion_v2", "NVML");
  }
  return version;
}

unsigned int device_count() {
  unsigned int count = 0;
  if (nv::ret r = nv::loaded().nvmlDeviceGetCount_v2(&count); r != nv::success) {
    nv::throw_error(r, "nvmlDeviceGetCount_v2", "NVML");
  }
  return count;
}

std::vector<nvml_device> devices() {
  std::vector<nvml_device> out;
  const unsigned int count = device_count();
  out.reserve(count);
  for (unsigned int i = 0; i < count; ++i) {
    out.push_back(nvml_device::at(i));
  }
  return out;
}

std::vector<std::string> clock_event_reasons::names() const {
  std::vector<std::string> out;
  for (unsigned int bit = 0; bit < 64; ++bit) {
    const std::uint64_t b = std::uint64_t{1} << bit;
    if ((mask & b) == 0) {
      continue;
    }
    std::string_view name = to_string(static_cast<clock_event>(b));
    out.emplace_back(name.empty() ? "bit_" + std::to_string(bit) : std::string(name));
  }
  return out;
}

std::string_view to_string(clock_event reason) noexcept {
  switch (reason) {
    case clock_event::gpu_idle: return "gpu_idle";
    case clock_event::applications_clocks: return "applications_clocks";
    case clock_event::sw_power_cap: return "sw_power_cap";
    case clock_event::hw_slowdown: return "hw_slowdown";
    case clock_event::sync_boost: return "sync_boost";
    case clock_event::sw_thermal_slowdown: return "sw_thermal_slowdown";
    case clock_event::hw_thermal_slowdown: return "hw_thermal_slowdown";
    case clock_event::hw_power_brake_slowdown: return "hw_power_brake_slowdown";
    case clock_event::display_clock_setting: return "display_clock_setting";
  }
  return "";
}

std::string_view to_string(compute_mode mode) noexcept {
  switch (mode) {
    case compute_mode::shared: return "Default";
    case compute_mode::exclusive_thread: return "Exclusive_Thread";
    case compute_mode::prohibited: return "Prohibited";
    case compute_mode::exclusive_process: return "Exclusive_Process";
  }
  return "";
}

// --- finding a device --------------------------------------------------------------------------------

nvml_device nvml_device::at(unsigned int index) {
  nv::handle h = nullptr;
  if (nv::ret r = nv::loaded().nvmlDeviceGetHandleByIndex_v2(index, &h); r != nv::success) {
    nv::throw_error(r, "nvmlDeviceGetHandleByIndex_v2",
                    "index " + std::to_string(index) + " (NVML sees " + std::to_string(device_count()) + " GPUs)");
  }
  return nvml_device(h);
}

nvml_device nvml_device::by_uuid(std::string_view uuid) {
  return nvml_device(lookup(nv::loaded().nvmlDeviceGetHandleByUUID, "nvmlDeviceGetHandleByUUID", uuid, "UUID"));
}

nvml_device nvml_device::by_pci_bus_id(std::string_view bus_id) {
  return nvml_device(
      lookup(nv::loaded().nvmlDeviceGetHandleByPciBusId_v2, "nvmlDeviceGetHandleByPciBusId_v2", bus_id, "PCI bus id"));
}

nvml_device nvml_device::of(const device& dev) { return of(dev.uuid()); }

nvml_device nvml_device::of(const device_uuid& uuid) {
  const nv::api& a = nv::loaded();
  const std::string gpu = uuid.to_string();  // GPU-xxxxxxxx-..., also for a MIG instance
  nv::handle h = nullptr;
  nv::ret r = a.nvmlDeviceGetHandleByUUID(gpu.c_str(), &h);
  if (r == nv::success) {
    return nvml_device(h);
  }
  if (r != nv::not_found && r != nv::invalid_argument) {
    nv::throw_error(r, "nvmlDeviceGetHandleByUUID", "UUID " + gpu);
  }
  const std::string mig = "MIG-" + gpu.substr(4);
  r = a.nvmlDeviceGetHandleByUUID(mig.c_str(), &h);
  if (r == nv::success) {
    return nvml_device(h);
  }
  if (r != nv::not_found && r != nv::invalid_argument) {
    nv::throw_error(r, "nvmlDeviceGetHandleByUUID", "UUID " + mig);
  }
  nv::throw_error(nv::not_found, "nvmlDeviceGetHandleByUUID",
                  "NVML sees no GPU " + gpu + " and no MIG instance " + mig + " (a GPU hidden from NVML?)");
}

// --- what a device is ----------------------------------------------------------------------------------

std::optional<unsigned int> nvml_device::index() const {
  unsigned int i = 0;
  return maybe(CUDRV_NVML_GOT(nvmlDeviceGetIndex, handle_, &i), i);
}

std::string nvml_device::name() const {
  char text[nv::text_buffer] = {};
  if (!CUDRV_NVML_GOT(nvmlDeviceGetName, handle_, text, nv::text_buffer)) {
    return {};
  }
  return text;
}

std::string nvml_device::uuid() const {
  char text[nv::text_buffer] = {};
  if (nv::ret r = nv::loaded().nvmlDeviceGetUUID(handle_, text, nv::text_buffer); r != nv::success) {
    nv::throw_error(r, "nvmlDeviceGetUUID", "NVML device");
  }
  return text;
}

std::optional<std::string> nvml_device::serial() const {
  char text[nv::text_buffer] = {};
  if (!CUDRV_NVML_GOT(nvmlDeviceGetSerial, handle_, text, nv::text_buffer)) {
    return std::nullopt;
  }
  return std::string(text);
}

std::optional<pci_info> nvml_device::pci() const {
  nv::pci p{};
  if (!CUDRV_NVML_GOT(nvmlDeviceGetPciInfo_v3, handle_, &p)) {
    return std::nullopt;
  }
  return to_pci(p);
}

bool nvml_device::is_mig_instance() const { return is_mig(handle_); }

nvml_device nvml_device::parent() const {
  if (!is_mig(handle_)) {
    return *this;
  }
  nv::handle whole = nullptr;
  const nv::api& a = nv::loaded();
  if (nv::ret r = nv::call(a.nvmlDeviceGetDeviceHandleFromMigDeviceHandle, handle_, &whole); r != nv::success) {
    nv::throw_error(r, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle", describe(handle_));
  }
  return nvml_device(whole);
}

std::optional<int> nvml_device::cuda_device() const {
  std::string id = uuid();
  if (id.rfind("MIG-", 0) == 0) {
    id = "GPU-" + id.substr(4);  // CUDA writes every UUID as GPU-...
  }
  if (!driver::available()) {
    return std::nullopt;
  }
  for (device dev : cudrv::devices()) {
    if (dev.uuid().to_string() == id) {
      return dev.ordinal();
    }
  }
  return std::nullopt;
}

// --- readings ------------------------------------------------------------------------------------------

std::optional<utilization_rates> nvml_device::utilization() const {
  nv::utilization u{};
  if (!CUDRV_NVML_GOT(nvmlDeviceGetUtilizationRates, handle_, &u)) {
    return std::nullopt;
  }
  return utilization_rates{u.gpu, u.memory};
}

std::optional<memory_usage> nvml_device::memory() const {
  nv::memory m{};
  if (!CUDRV_NVML_GOT(nvmlDeviceGetMemoryInfo, handle_, &m)) {
    return std::nullopt;
  }
  return memory_usage{m.total, m.free, m.used};
}

std::optional<memory_usage> nvml_device::bar1_memory() const {
  nv::memory m{};
  if (!CUDRV_NVML_GOT(nvmlDeviceGetBAR1MemoryInfo, handle_, &m)) {
    return std::nullopt;
  }
  return memory_usage{m.total, m.free, m.used};
}

power_readings nvml_device::power() const {
  power_readings out;
  unsigned int mw = 0;
  out.draw_w = watts(CUDRV_NVML_GOT(nvmlDeviceGetPowerUsage, handle_, &mw), mw);
  out.limit_w = watts(CUDRV_NVML_GOT(nvmlDeviceGetPowerManagementLimit, handle_, &mw), mw);
  out.enforced_limit_w = watts(CUDRV_NVML_GOT(nvmlDeviceGetEnforcedPowerLimit, handle_, &mw), mw);
  out.default_limit_w = watts(CUDRV_NVML_GOT(nvmlDeviceGetPowerManagementDefaultLimit, handle_, &mw), mw);
  unsigned int min_mw = 0;
  unsigned int max_mw = 0;
  if (CUDRV_NVML_GOT(nvmlDeviceGetPowerManagementLimitConstraints, handle_, &min_mw, &max_mw)) {
    out.min_limit_w = min_mw / 1000.0;
    out.max_limit_w = max_mw / 1000.0;
  }
  return out;
}

temperature_readings nvml_device::temperature() const {
  temperature_readings out;
  unsigned int c = 0;
  out.gpu_c = maybe(CUDRV_NVML_GOT(nvmlDeviceGetTemperature, handle_, 0, &c), c);  // NVML_TEMPERATURE_GPU
  if (std::optional<unsigned long long> m = field(handle_, nv::field_memory_temperature, 0)) {
    out.memory_c = static_cast<unsigned int>(*m);
  }
  // nvmlTemperatureThresholds_t: SHUTDOWN 0, SLOWDOWN 1, MEM_MAX 2, GPU_MAX 3.
  std::optional<unsigned int>* thresholds[] = {&out.shutdown_c, &out.slowdown_c, &out.memory_max_c, &out.gpu_max_c};
  for (int type = 0; type < 4; ++type) {
    if (CUDRV_NVML_GOT(nvmlDeviceGetTemperatureThreshold, handle_, type, &c)) {
      *thresholds[type] = c;
    }
  }
  return out;
}

clock_readings nvml_device::clocks() const {
  const nv::api& a = nv::loaded();
  return clock_readings{read_clocks(handle_, a.nvmlDeviceGetClockInfo, "nvmlDeviceGetClockInfo"),
                        read_clocks(handle_, a.nvmlDeviceGetMaxClockInfo, "nvmlDeviceGetMaxClockInfo"),
                        read_clocks(handle_, a.nvmlDeviceGetApplicationsClock, "nvmlDeviceGetApplicationsClock")};
}

std::optional<clock_event_reasons> nvml_device::clock_events() const {
  unsigned long long mask = 0;
  const bool ok = nv::loaded().nvmlDeviceGetCurrentClocksEventReasons != nullptr
                      ? CUDRV_NVML_GOT(nvmlDeviceGetCurrentClocksEventReasons, handle_, &mask)
                      : CUDRV_NVML_GOT(nvmlDeviceGetCurrentClocksThrottleReasons, handle_, &mask);
  if (!ok) {
    return std::nullopt;
  }
  return clock_event_reasons{mask};
}

pcie_readings nvml_device::pcie() const {
  pcie_readings out;
  unsigned int v = 0;
  out.generation = maybe(CUDRV_NVML_GOT(nvmlDeviceGetCurrPcieLinkGeneration, handle_, &v), v);
  out.max_generation = maybe(CUDRV_NVML_GOT(nvmlDeviceGetMaxPcieLinkGeneration, handle_, &v), v);
  out.gpu_max_generation = maybe(CUDRV_NVML_GOT(nvmlDeviceGetGpuMaxPcieLinkGeneration, handle_, &v), v);
  out.width = maybe(CUDRV_NVML_GOT(nvmlDeviceGetCurrPcieLinkWidth, handle_, &v), v);
  out.max_width = maybe(CUDRV_NVML_GOT(nvmlDeviceGetMaxPcieLinkWidth, handle_, &v), v);
  out.tx_kib_per_s = maybe(CUDRV_NVML_GOT(nvmlDeviceGetPcieThroughput, handle_, 0, &v), v);  // NVML_PCIE_UTIL_TX_BYTES
  out.rx_kib_per_s = maybe(CUDRV_NVML_GOT(nvmlDeviceGetPcieThroughput, handle_, 1, &v), v);  // NVML_PCIE_UTIL_RX_BYTES
  out.replay_count = maybe(CUDRV_NVML_GOT(nvmlDeviceGetPcieReplayCounter, handle_, &v), v);
  return out;
}

std::vector<nvlink_readings> nvml_device::nvlinks() const {
  std::vector<nvlink_readings> out;
  for (unsigned int link = 0; link < nv::max_nvlinks; ++link) {
    int active = 0;  // nvmlEnableState_t
    if (CUDRV_NVML_LINK_GOT(nvmlDeviceGetNvLinkState, handle_, link, &active)) {
      out.push_back(read_link(handle_, link, active != 0));
    }
  }
  return out;
}

ecc_readings nvml_device::ecc() const {
  ecc_readings out;
  int current = 0;
  int pending = 0;
  if (CUDRV_NVML_GOT(nvmlDeviceGetEccMode, handle_, &current, &pending)) {
    out.enabled = current != 0;
    out.pending = pending != 0;
  }
  // nvmlMemoryErrorType_t: CORRECTED 0, UNCORRECTED 1; nvmlEccCounterType_t: VOLATILE 0, AGGREGATE 1.
  std::optional<unsigned long long>* counts[2][2] = {{&out.volatile_corrected, &out.aggregate_corrected},
                                                     {&out.volatile_uncorrected, &out.aggregate_uncorrected}};
  for (int type = 0; type < 2; ++type) {
    for (int counter = 0; counter < 2; ++counter) {
      unsigned long long n = 0;
      if (CUDRV_NVML_GOT(nvmlDeviceGetTotalEccErrors, handle_, type, counter, &n)) {
        *counts[type][counter] = n;
      }
    }
  }
  return out;
}

std::optional<retired_pages_info> nvml_device::retired_pages() const {
  retired_pages_info out;
  unsigned int* counts[] = {&out.single_bit_ecc, &out.double_bit_ecc};  // nvmlPageRetirementCause_t 0, 1
  for (int cause = 0; cause < 2; ++cause) {
    unsigned int n = 0;  // 0 with no buffer: NVML gives the count (NVML_SUCCESS or NVML_ERROR_INSUFFICIENT_SIZE)
    nv::ret r =
        nv::call(nv::loaded().nvmlDeviceGetRetiredPages, handle_, cause, &n, static_cast<unsigned long long*>(nullptr));
    if (r == nv::insufficient_size) {
      r = nv::success;
    }
    if (!got(r, "nvmlDeviceGetRetiredPages", handle_)) {
      return std::nullopt;
    }
    *counts[cause] = n;
  }
  int pending = 0;
  if (CUDRV_NVML_GOT(nvmlDeviceGetRetiredPagesPendingStatus, handle_, &pending)) {
    out.pending = pending != 0;
  }
  return out;
}

std::optional<remapped_rows_info> nvml_device::remapped_rows() const {
  unsigned int corrected = 0;
  unsigned int uncorrected = 0;
  unsigned int pending = 0;
  unsigned int failure = 0;
  if (!CUDRV_NVML_GOT(nvmlDeviceGetRemappedRows, handle_, &corrected, &uncorrected, &pending, &failure)) {
    return std::nullopt;
  }
  return remapped_rows_info{corrected, uncorrected, pending != 0, failure != 0};
}

std::optional<compute_mode> nvml_device::compute_mode() const {
  int mode = 0;
  if (!CUDRV_NVML_GOT(nvmlDeviceGetComputeMode, handle_, &mode)) {
    return std::nullopt;
  }
  return static_cast<cudrv::system::compute_mode>(mode);
}

std::optional<mode_state> nvml_device::mig_mode() const {
  unsigned int current = 0;
  unsigned int pending = 0;
  if (!CUDRV_NVML_GOT(nvmlDeviceGetMigMode, handle_, &current, &pending)) {
    return std::nullopt;
  }
  return mode_state{current != 0, pending != 0};
}

std::optional<bool> nvml_device::persistence_mode() const {
  int mode = 0;
  if (!CUDRV_NVML_GOT(nvmlDeviceGetPersistenceMode, handle_, &mode)) {
    return std::nullopt;
  }
  return mode != 0;
}

std::optional<int> nvml_device::performance_state() const {
  int state = nv::pstate_unknown;
  if (!CUDRV_NVML_GOT(nvmlDeviceGetPerformanceState, handle_, &state) || state == nv::pstate_unknown) {
    return std::nullopt;
  }
  return state;
}

std::vector<process_info> nvml_device::processes() const {
  std::vector<process_info> out;
  const nv::api& a = nv::loaded();
  list_processes(handle_, a.nvmlDeviceGetComputeRunningProcesses_v3, "nvmlDeviceGetComputeRunningProcesses_v3",
                 process_kind::compute, out);
  list_processes(handle_, a.nvmlDeviceGetGraphicsRunningProcesses_v3, "nvmlDeviceGetGraphicsRunningProcesses_v3",
                 process_kind::graphics, out);
  return out;
}

// --- issue 36: topology --------------------------------------------------------------------------------

namespace {

// The numbers set in an NVML mask of unsigned longs (bit b of word w is number w * bits + b), ascending.
std::vector<unsigned int> mask_members(const std::vector<unsigned long>& mask) {
  std::vector<unsigned int> out;
  constexpr unsigned int bits = 8 * sizeof(unsigned long);
  for (std::size_t w = 0; w < mask.size(); ++w) {
    for (unsigned int b = 0; b < bits; ++b) {
      if ((mask[w] >> b) & 1UL) {
        out.push_back(static_cast<unsigned int>(w * bits + b));
      }
    }
  }
  return out;
}

}  // namespace

std::string_view to_string(topology_level level) noexcept {
  switch (level) {
    case topology_level::internal:
    case topology_level::single: return "PIX";
    case topology_level::multiple: return "PXB";
    case topology_level::host_bridge: return "PHB";
    case topology_level::node: return "NODE";
    case topology_level::system: return "SYS";
  }
  return "";
}

std::optional<topology_level> nvml_device::topology_common_ancestor(nvml_device other) const {
  int level = 0;  // nvmlGpuTopologyLevel_t
  if (!CUDRV_NVML_GOT(nvmlDeviceGetTopologyCommonAncestor, handle_, other.handle_, &level)) {
    return std::nullopt;
  }
  return static_cast<topology_level>(level);
}

std::optional<std::vector<unsigned int>> nvml_device::cpu_affinity() const {
  std::vector<unsigned long> mask(nv::cpu_mask_words, 0UL);
  const bool ok = nv::loaded().nvmlDeviceGetCpuAffinityWithinScope != nullptr
                      ? CUDRV_NVML_GOT(nvmlDeviceGetCpuAffinityWithinScope, handle_, nv::cpu_mask_words, mask.data(),
                                       nv::affinity_scope_node)
                      : CUDRV_NVML_GOT(nvmlDeviceGetCpuAffinity, handle_, nv::cpu_mask_words, mask.data());
  if (!ok) {
    return std::nullopt;
  }
  return mask_members(mask);
}

std::optional<std::vector<unsigned int>> nvml_device::memory_affinity() const {
  std::vector<unsigned long> mask(nv::node_mask_words, 0UL);
  if (!CUDRV_NVML_GOT(nvmlDeviceGetMemoryAffinity, handle_, nv::node_mask_words, mask.data(),
                      nv::affinity_scope_node)) {
    return std::nullopt;
  }
  return mask_members(mask);
}

std::optional<unsigned int> nvml_device::numa_node_id() const {
  unsigned int node = 0;
  return maybe(CUDRV_NVML_GOT(nvmlDeviceGetNumaNodeId, handle_, &node), node);
}

std::optional<nvlink_remote_device> nvml_device::nvlink_remote_type(unsigned int link) const {
  int type = 0;  // nvmlIntNvLinkDeviceType_t
  if (!CUDRV_NVML_LINK_GOT(nvmlDeviceGetNvLinkRemoteDeviceType, handle_, link, &type)) {
    return std::nullopt;
  }
  switch (type) {
    case 0: return nvlink_remote_device::gpu;
    case 1: return nvlink_remote_device::ibm_npu;
    case 2: return nvlink_remote_device::nvswitch;
    default: return nvlink_remote_device::unknown;
  }
}

// --- issue 36: watch ---------------------------------------------------------------------------------

namespace {

// One pair of NVLink data counters (transmit, receive) for the sum over the links (scope all_links) or
// one link: the counters times @p unit bytes, with NVML's timestamp; empty where NVML answers neither.
// A counter in bytes: empty where NVML gives none (NVML_VALUE_NOT_AVAILABLE, all ones) or where the
// product with the unit would not fit in 64 bits.
std::optional<unsigned long long> counter_bytes(const nv::field_value& v, unsigned long long unit) {
  const std::optional<unsigned long long> raw = as_unsigned(v);
  constexpr unsigned long long not_available = ~0ULL;
  const bool narrow_not_available = (v.value_type == nv::value_unsigned_int && v.v.ui == ~0U);
  if (!raw || *raw == not_available || narrow_not_available || *raw > not_available / unit) {
    return std::nullopt;
  }
  return *raw * unit;
}

std::optional<nvlink_traffic> read_traffic(nv::handle h, unsigned int tx_id, unsigned int rx_id, unsigned int scope,
                                           unsigned long long unit) {
  nv::field_value v[2] = {};
  v[0].field_id = tx_id;
  v[1].field_id = rx_id;
  v[0].scope_id = v[1].scope_id = scope;
  if (!CUDRV_NVML_GOT(nvmlDeviceGetFieldValues, h, 2, v)) {
    return std::nullopt;
  }
  if (!got(v[0].nvml_return, "nvmlDeviceGetFieldValues", h, true) ||
      !got(v[1].nvml_return, "nvmlDeviceGetFieldValues", h, true)) {
    return std::nullopt;
  }
  const std::optional<unsigned long long> tx = counter_bytes(v[0], unit);
  const std::optional<unsigned long long> rx = counter_bytes(v[1], unit);
  if (!tx || !rx) {
    return std::nullopt;
  }
  nvlink_traffic out;
  out.tx_bytes = *tx;
  out.rx_bytes = *rx;
  out.timestamp_us = std::max(v[0].timestamp, v[1].timestamp);
  return out;
}

}  // namespace

std::optional<nvlink_traffic> nvml_device::nvlink_traffic() const {
  constexpr unsigned long long kib = 1024;
  // Every link at once: the throughput counters (KiB), then NVLink 5's byte counters.
  if (auto all = read_traffic(handle_, nv::field_nvlink_data_tx, nv::field_nvlink_data_rx, nv::all_links, kib)) {
    return all;
  }
  if (auto all = read_traffic(handle_, nv::field_nvlink_count_xmit_bytes, nv::field_nvlink_count_rcv_bytes,
                              nv::all_links, 1)) {
    all->source = cudrv::system::nvlink_traffic::origin::bytes_all_links;
    return all;
  }
  // Else the sum of the active links' own counters.
  std::optional<cudrv::system::nvlink_traffic> sum;
  for (unsigned int link = 0; link < nv::max_nvlinks; ++link) {
    int active = 0;  // nvmlEnableState_t
    if (!CUDRV_NVML_LINK_GOT(nvmlDeviceGetNvLinkState, handle_, link, &active) || active == 0) {
      continue;
    }
    if (auto one = read_traffic(handle_, nv::field_nvlink_data_tx, nv::field_nvlink_data_rx, link, kib)) {
      sum = sum.value_or(cudrv::system::nvlink_traffic{});
      if (one->tx_bytes > ~0ULL - sum->tx_bytes || one->rx_bytes > ~0ULL - sum->rx_bytes) {
        return std::nullopt;  // a sum past 64 bits: no reading
      }
      sum->tx_bytes += one->tx_bytes;
      sum->rx_bytes += one->rx_bytes;
      sum->timestamp_us = std::max(sum->timestamp_us, one->timestamp_us);
      sum->source = cudrv::system::nvlink_traffic::origin::per_link_sum;
      sum->links |= 1U << link;
    }
  }
  return sum;
}

std::optional<memory_breakdown> nvml_device::memory_breakdown() const {
  nv::memory_v2 m{};
  m.version = nv::memory_v2_version;
  if (!CUDRV_NVML_GOT(nvmlDeviceGetMemoryInfo_v2, handle_, &m)) {
    return std::nullopt;
  }
  return cudrv::system::memory_breakdown{m.total, m.reserved, m.used, m.free};
}

}  // namespace cudrv::system
