// cudrv-query --watch (watch.hpp): sampling the selected GPUs through NVML at an interval.
#include "watch.hpp"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <ostream>
#include <thread>
#include <utility>

#include <cudrv/error.hpp>
#include <cudrv/system.hpp>
#include <nlohmann/json.hpp>

#include "query.hpp"

namespace cudrv_query {

namespace {

namespace sys = cudrv::system;
using json = nlohmann::json;
using steady = std::chrono::steady_clock;
using wf = watch_field;

constexpr double mib = 1024.0 * 1024.0;

// nvidia-smi's other names for the same fields.
constexpr std::pair<const char*, wf> aliases[] = {
    {"clocks.current.sm", wf::clocks_sm},
    {"clocks.current.memory", wf::clocks_mem},
    {"clocks.memory", wf::clocks_mem},
    {"clocks.current.graphics", wf::clocks_gr},
    {"clocks.graphics", wf::clocks_gr},
    {"clocks_throttle_reasons.active", wf::clocks_event_reasons},
    {"gpu_name", wf::name},
    {"gpu_bus_id", wf::pci_bus_id},
};

// One value, as each output writes it.
struct cell {
  enum kind_t { none, integer, real, text } kind = none;
  long long i = 0;
  double d = 0;
  int decimals = 0;
  std::string s;
};

template <class T>
cell integer(const std::optional<T>& v) {
  return v ? cell{cell::integer, static_cast<long long>(*v), 0, 0, {}} : cell{};
}
cell real(const std::optional<double>& v, int decimals, double scale = 1.0) {
  return v ? cell{cell::real, 0, *v / scale, decimals, {}} : cell{};
}
cell text(std::string s) { return cell{cell::text, 0, 0, 0, std::move(s)}; }
cell mebibytes(const std::optional<unsigned long long>& bytes) {
  return bytes ? cell{cell::integer, static_cast<long long>(*bytes >> 20), 0, 0, {}} : cell{};
}

cell identity_value(const watch_sample& s, wf f) {
  switch (f) {
    case wf::timestamp: return text(s.timestamp);
    case wf::elapsed: return cell{cell::real, 0, s.elapsed_s, 3, {}};
    case wf::index: return integer(s.index);
    case wf::ordinal: return cell{cell::integer, s.ordinal, 0, 0, {}};
    case wf::uuid: return text(s.uuid);
    case wf::name: return text(s.name);
    case wf::pci_bus_id: return s.pci_bus_id ? text(*s.pci_bus_id) : cell{};
    case wf::pstate: return s.pstate ? text(std::string(1, 'P').append(std::to_string(*s.pstate))) : cell{};
    default: return {};
  }
}

cell value_of(const watch_sample& s, wf f) {
  switch (f) {
    case wf::utilization_gpu: return integer(s.utilization_gpu);
    case wf::utilization_memory: return integer(s.utilization_memory);
    case wf::memory_total: return mebibytes(s.memory_total_bytes);
    case wf::memory_used: return mebibytes(s.memory_used_bytes);
    case wf::memory_free: return mebibytes(s.memory_free_bytes);
    case wf::memory_reserved: return mebibytes(s.memory_reserved_bytes);
    case wf::power_draw: return real(s.power_draw_w, 2);
    case wf::power_limit: return real(s.power_limit_w, 2);
    case wf::clocks_sm: return integer(s.clocks_sm_mhz);
    case wf::clocks_mem: return integer(s.clocks_mem_mhz);
    case wf::clocks_gr: return integer(s.clocks_gr_mhz);
    case wf::temperature_gpu: return integer(s.temperature_gpu_c);
    case wf::temperature_memory: return integer(s.temperature_memory_c);
    case wf::clocks_event_reasons: {
      if (!s.clocks_event_reasons) return {};
      char hex[24];
      std::snprintf(hex, sizeof(hex), "0x%016llx", static_cast<unsigned long long>(*s.clocks_event_reasons));
      return text(hex);
    }
    case wf::pcie_tx: return real(s.pcie_tx_bytes_per_s, 1, mib);
    case wf::pcie_rx: return real(s.pcie_rx_bytes_per_s, 1, mib);
    case wf::nvlink_tx: return real(s.nvlink_tx_bytes_per_s, 1, mib);
    case wf::nvlink_rx: return real(s.nvlink_rx_bytes_per_s, 1, mib);
    case wf::processes_count:
      return s.processes ? cell{cell::integer, static_cast<long long>(s.processes->size()), 0, 0, {}} : cell{};
    default: return identity_value(s, f);
  }
}

std::string fixed(double v, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", decimals, v);
  return buffer;
}

// A number as its text; a cell that is not a number as its string.
std::string plain(const cell& c) {
  switch (c.kind) {
    case cell::integer: return std::to_string(c.i);
    case cell::real: return fixed(c.d, c.decimals);
    case cell::text: return c.s;
    case cell::none: break;
  }
  return {};
}

json to_json_value(const cell& c) {
  switch (c.kind) {
    case cell::integer: return c.i;
    case cell::real: {
      const double scale = std::pow(10.0, c.decimals);
      return std::round(c.d * scale) / scale;
    }
    case cell::text: return c.s;
    case cell::none: break;
  }
  return nullptr;
}

const watch_field_info& info_of(wf f) { return watch_fields()[static_cast<std::size_t>(f)]; }

std::string valid_names() {
  std::string out;
  for (const watch_field_info& f : watch_fields()) {
    out += (out.empty() ? "" : ", ") + std::string(f.name);
  }
  return out;
}

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

}  // namespace

const std::vector<watch_field_info>& watch_fields() {
  // In watch_field's order (info_of indexes it).
  static const std::vector<watch_field_info> fields = {
      {wf::timestamp, "timestamp", "", "time", "", 8},
      {wf::elapsed, "elapsed", "s", "elapsed", "s", 8},
      {wf::index, "index", "", "idx", "", 3},
      {wf::ordinal, "ordinal", "", "gpu", "", 3},
      {wf::uuid, "uuid", "", "uuid", "", 40},
      {wf::name, "name", "", "name", "", 24},
      {wf::pci_bus_id, "pci.bus_id", "", "pci", "", 16},
      {wf::pstate, "pstate", "", "pst", "", 3},
      {wf::utilization_gpu, "utilization.gpu", "%", "sm", "%", 3},
      {wf::utilization_memory, "utilization.memory", "%", "mem", "%", 3},
      {wf::memory_total, "memory.total", "MiB", "total", "MiB", 6},
      {wf::memory_used, "memory.used", "MiB", "used", "MiB", 6},
      {wf::memory_free, "memory.free", "MiB", "free", "MiB", 6},
      {wf::memory_reserved, "memory.reserved", "MiB", "rsvd", "MiB", 6},
      {wf::power_draw, "power.draw", "W", "pwr", "W", 7},
      {wf::power_limit, "power.limit", "W", "plim", "W", 7},
      {wf::clocks_sm, "clocks.sm", "MHz", "smclk", "MHz", 5},
      {wf::clocks_mem, "clocks.mem", "MHz", "mclk", "MHz", 5},
      {wf::clocks_gr, "clocks.gr", "MHz", "grclk", "MHz", 5},
      {wf::temperature_gpu, "temperature.gpu", "", "temp", "C", 4},
      {wf::temperature_memory, "temperature.memory", "", "mtemp", "C", 5},
      {wf::clocks_event_reasons, "clocks_event_reasons.active", "", "events", "", 6},
      {wf::pcie_tx, "pcie.tx", "MiB/s", "pcie_tx", "MiB/s", 8},
      {wf::pcie_rx, "pcie.rx", "MiB/s", "pcie_rx", "MiB/s", 8},
      {wf::nvlink_tx, "nvlink.tx", "MiB/s", "nvl_tx", "MiB/s", 8},
      {wf::nvlink_rx, "nvlink.rx", "MiB/s", "nvl_rx", "MiB/s", 8},
      {wf::processes_count, "processes.count", "", "procs", "", 5},
  };
  return fields;
}

std::vector<watch_field> default_text_fields() {
  return {wf::timestamp,   wf::ordinal,    wf::utilization_gpu, wf::utilization_memory,
          wf::memory_used, wf::power_draw, wf::temperature_gpu, wf::temperature_memory,
          wf::clocks_sm,   wf::clocks_mem, wf::pcie_tx,         wf::pcie_rx,
          wf::nvlink_tx,   wf::nvlink_rx,  wf::processes_count, wf::clocks_event_reasons};
}

std::optional<std::vector<watch_field>> parse_watch_query(std::string_view text, std::vector<std::string>& names,
                                                          std::string& error) {
  std::vector<watch_field> out;
  names.clear();
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string name = trim(text.substr(start, comma - start));
    start = comma + 1;
    std::optional<wf> found;
    for (const watch_field_info& f : watch_fields()) {
      if (name == f.name) found = f.field;
    }
    for (const auto& [alias, field] : aliases) {
      if (name == alias) found = field;
    }
    if (!found) {
      error =
          "--watch-query: " + (name.empty() ? std::string("an empty field name") : "'" + name + "' is not a field") +
          "; valid fields: " + valid_names();
      return std::nullopt;
    }
    out.push_back(*found);
    names.push_back(name);
  }
  return out;
}

std::string parse_watch_format(std::string_view text, watch_options& options) {
  std::string usage(1, '\'');
  usage.append(text).append("' is not text, jsonl or csv[,noheader][,nounits]");
  if (text == "text" || text == "jsonl") {
    options.format = text == "text" ? watch_format::text : watch_format::jsonl;
    return {};
  }
  if (text.substr(0, 3) != "csv") {
    return usage;
  }
  options.format = watch_format::csv;
  std::string_view rest = text.substr(3);
  while (!rest.empty()) {
    if (rest.front() != ',') return usage;
    rest.remove_prefix(1);
    const std::size_t comma = std::min(rest.find(','), rest.size());
    const std::string_view word = rest.substr(0, comma);
    if (word == "noheader") {
      options.header = false;
    } else if (word == "nounits") {
      options.units = false;
    } else {
      return usage;
    }
    rest.remove_prefix(comma);
  }
  return {};
}

long long watch_sample_limit(const watch_options& options) noexcept {
  long long limit = options.count;
  if (options.duration_s > 0) {
    const auto by_duration =
        std::max(1LL, static_cast<long long>(std::floor(options.duration_s / options.interval_s + 1e-9)));
    limit = limit > 0 ? std::min(limit, by_duration) : by_duration;
  }
  return limit;
}

std::optional<watch_rates> watch_nvlink_rate(const cudrv::system::nvlink_traffic& before,
                                             const cudrv::system::nvlink_traffic& after) noexcept {
  if (after.source != before.source || after.links != before.links || after.timestamp_us <= before.timestamp_us ||
      after.tx_bytes < before.tx_bytes || after.rx_bytes < before.rx_bytes) {
    return std::nullopt;
  }
  const double seconds = static_cast<double>(after.timestamp_us - before.timestamp_us) / 1e6;
  return watch_rates{static_cast<double>(after.tx_bytes - before.tx_bytes) / seconds,
                     static_cast<double>(after.rx_bytes - before.rx_bytes) / seconds};
}

std::vector<watch_field> watch_shown_fields(const watch_options& options) {
  if (!options.fields.empty()) {
    return options.fields;
  }
  if (options.format == watch_format::text) {
    return default_text_fields();
  }
  std::vector<watch_field> all;
  for (const watch_field_info& f : watch_fields()) all.push_back(f.field);
  return all;
}

// --- output ------------------------------------------------------------------------------------------

std::string watch_csv_header(const watch_options& options) {
  std::string line;
  const std::vector<watch_field> fields = watch_shown_fields(options);
  for (std::size_t i = 0; i < fields.size(); ++i) {
    const watch_field_info& f = info_of(fields[i]);
    line += (i == 0 ? "" : ", ") + (i < options.names.size() ? options.names[i] : std::string(f.name));
    if (*f.unit != '\0') line += std::string(" [") + f.unit + "]";
  }
  return line + "\n";
}

std::string watch_csv_line(const watch_sample& s, const watch_options& options) {
  std::string line;
  const std::vector<watch_field> fields = watch_shown_fields(options);
  for (std::size_t i = 0; i < fields.size(); ++i) {
    const cell c = value_of(s, fields[i]);
    const char* unit = info_of(fields[i]).unit;
    std::string value = c.kind == cell::none ? "[N/A]" : plain(c);
    if (c.kind != cell::none && options.units && *unit != '\0') value += std::string(" ") + unit;
    line += (i == 0 ? "" : ", ") + value;
  }
  return line + "\n";
}

std::string watch_json_line(const watch_sample& s, const watch_options& options) {
  json j;
  j["schema_version"] = json_schema_version;
  j["view"] = view_name(view::watch);
  j["sample"] = s.sample;
  j["ordinal"] = s.ordinal;
  for (watch_field f : watch_shown_fields(options)) {
    j[info_of(f).name] = to_json_value(value_of(s, f));
  }
  if (options.processes && s.processes) {
    json list = json::array();
    for (const watch_process& p : *s.processes) {
      list.push_back(json{{"pid", p.pid},
                          {"name", p.name.empty() ? json(nullptr) : json(p.name)},
                          {"used_memory_mib", p.used_bytes ? json(*p.used_bytes >> 20) : json(nullptr)}});
    }
    j["processes"] = list;
  }
  return j.dump() + "\n";
}

namespace {

// A text column: right-aligned to the field's width, the last column left as it is.
void append_column(std::string& line, const std::string& value, int width, bool last) {
  line += "  ";
  const auto pad = static_cast<std::size_t>(std::max(0, width - static_cast<int>(value.size())));
  line += last ? value : std::string(pad, ' ') + value;
}

std::string text_value(const watch_sample& s, wf f) {
  if (f == wf::timestamp) return s.time_of_day;
  if (f == wf::clocks_event_reasons && s.clocks_event_reasons) {
    const std::vector<std::string> names = sys::clock_event_reasons{*s.clocks_event_reasons}.names();
    std::string out;
    for (const std::string& n : names) out += (out.empty() ? "" : ",") + n;
    return out.empty() ? "none" : out;
  }
  const cell c = value_of(s, f);
  return c.kind == cell::none ? "-" : plain(c);
}

}  // namespace

std::string watch_text_header(const watch_options& options) {
  const std::vector<watch_field> fields = watch_shown_fields(options);
  std::string names = "#";
  std::string units = "#";
  for (std::size_t i = 0; i < fields.size(); ++i) {
    const watch_field_info& f = info_of(fields[i]);
    const bool last = i + 1 == fields.size();
    append_column(names, f.column, f.width, last);
    append_column(units, f.text_unit, f.width, last);
  }
  while (!units.empty() && units.back() == ' ') units.pop_back();
  return names + "\n" + units + "\n";
}

std::string watch_text_lines(const watch_sample& s, const watch_options& options) {
  const std::vector<watch_field> fields = watch_shown_fields(options);
  std::string line = " ";
  for (std::size_t i = 0; i < fields.size(); ++i) {
    append_column(line, text_value(s, fields[i]), info_of(fields[i]).width, i + 1 == fields.size());
  }
  line += "\n";
  if (options.processes && s.processes) {
    for (const watch_process& p : *s.processes) {
      line += "      pid " + std::to_string(p.pid) + "  " + (p.name.empty() ? std::string("-") : p.name) + "  " +
              (p.used_bytes ? std::to_string(*p.used_bytes >> 20) + " MiB" : std::string("-")) + "\n";
    }
  }
  return line;
}

// --- sampling ------------------------------------------------------------------------------------------

namespace watch_detail {

// What a run reads, from the fields it shows.
struct wanted {
  bool utilization = false, memory = false, power = false, clocks = false, temperature = false, events = false,
       pcie = false, nvlink = false, processes = false, pstate = false;
};

}  // namespace watch_detail

namespace {

using watch_detail::wanted;

wanted wanted_by(const watch_options& options) {
  wanted w;
  for (wf f : watch_shown_fields(options)) {
    w.utilization |= f == wf::utilization_gpu || f == wf::utilization_memory;
    w.memory |= f == wf::memory_total || f == wf::memory_used || f == wf::memory_free || f == wf::memory_reserved;
    w.power |= f == wf::power_draw || f == wf::power_limit;
    w.clocks |= f == wf::clocks_sm || f == wf::clocks_mem || f == wf::clocks_gr;
    w.temperature |= f == wf::temperature_gpu || f == wf::temperature_memory;
    w.events |= f == wf::clocks_event_reasons;
    w.pcie |= f == wf::pcie_tx || f == wf::pcie_rx;
    w.nvlink |= f == wf::nvlink_tx || f == wf::nvlink_rx;
    w.processes |= f == wf::processes_count;
    w.pstate |= f == wf::pstate;
  }
  w.processes |= options.processes;
  return w;
}

// The name of a process: /proc/<pid>/comm, "" where it cannot be read (gone, another PID namespace).
// NVML gives the host's PIDs: inside a container the number can be missing from this /proc or name an
// unrelated process of the container (docs/cudrv-query.md says so).
std::string process_name(unsigned int pid) {
  std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(comm, name);
  return name;
}

std::pair<std::string, std::string> wall_clock_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm local{};
  localtime_r(&seconds, &local);
  char date[32];
  char time[16];
  std::strftime(date, sizeof(date), "%Y/%m/%d %H:%M:%S", &local);
  std::strftime(time, sizeof(time), "%H:%M:%S", &local);
  char full[48];
  std::snprintf(full, sizeof(full), "%s.%03d", date, static_cast<int>(ms));
  return {full, time};
}

}  // namespace

namespace watch_detail {

// One selected device: its NVML handle (a MIG instance's for memory and processes) and the whole GPU.
struct gpu {
  int ordinal = 0;
  std::optional<sys::nvml_device> device;
  std::optional<sys::nvml_device> whole;
  std::optional<unsigned int> index;
  std::string uuid;
  std::string name;
  std::optional<std::string> pci_bus_id;
  std::optional<sys::nvlink_traffic> last_traffic;  // the baseline of the NVLink rates
  bool no_nvlink = false;                           // NVML said so at the first reading: not asked again
};

}  // namespace watch_detail

struct watch_sampler::state {
  wanted want;
  std::vector<watch_detail::gpu> gpus;
};

namespace {

std::optional<sys::nvml_device> find_nvml(const std::string& cuda_uuid) {
  if (auto d = quietly([&] { return std::optional(sys::nvml_device::by_uuid(cuda_uuid)); })) return d;
  if (cuda_uuid.rfind("GPU-", 0) != 0) return std::nullopt;
  return quietly([&] { return std::optional(sys::nvml_device::by_uuid("MIG-" + cuda_uuid.substr(4))); });
}

// The first NVLink reading, the baseline of the first rate. A GPU whose NVML answers (without an error)
// that it has no NVLink counters is not asked again: that costs field queries and a state query per
// link at every sample.
void first_nvlink(watch_detail::gpu& g) {
  try {
    g.last_traffic = g.whole->nvlink_traffic();
    g.no_nvlink = !g.last_traffic;
  } catch (const cudrv::error&) {
    g.last_traffic.reset();  // a failure now says nothing of the links: asked again at the samples
  }
}

// The NVLink rates since the last reading (watch_nvlink_rate); every reading, or its absence, is the
// baseline of the next rate.
void read_nvlink(watch_detail::gpu& g, watch_sample& s) {
  if (g.no_nvlink) {
    return;
  }
  const std::optional<sys::nvlink_traffic> t = quietly([&] { return g.whole->nvlink_traffic(); });
  if (t && g.last_traffic) {
    if (const std::optional<watch_rates> r = watch_nvlink_rate(*g.last_traffic, *t)) {
      s.nvlink_tx_bytes_per_s = r->tx_bytes_per_s;
      s.nvlink_rx_bytes_per_s = r->rx_bytes_per_s;
    }
  }
  g.last_traffic = t;
}

void read_processes(const sys::nvml_device& dev, watch_sample& s) {
  std::optional<std::vector<sys::process_info>> list = quietly([&] { return std::optional(dev.processes()); });
  if (!list) return;
  s.processes.emplace();
  for (const sys::process_info& p : *list) {
    s.processes->push_back(watch_process{p.pid, process_name(p.pid), p.used_bytes});
  }
}

void read_gpu(const wanted& w, watch_detail::gpu& g, watch_sample& s) {
  const sys::nvml_device& whole = *g.whole;
  if (w.utilization) {
    if (auto u = quietly([&] { return whole.utilization(); })) {
      s.utilization_gpu = u->gpu_percent;
      s.utilization_memory = u->memory_percent;
    }
  }
  if (w.memory) {
    // As nvidia-smi: the reservation apart where NVML can say it, else counted as used.
    if (auto m = quietly([&] { return g.device->memory_breakdown(); })) {
      s.memory_total_bytes = m->total_bytes;
      s.memory_used_bytes = m->used_bytes;
      s.memory_free_bytes = m->free_bytes;
      s.memory_reserved_bytes = m->reserved_bytes;
    } else if (auto v1 = quietly([&] { return g.device->memory(); })) {
      s.memory_total_bytes = v1->total_bytes;
      s.memory_used_bytes = v1->used_bytes;
      s.memory_free_bytes = v1->free_bytes;
    }
  }
  if (w.power) {
    const sys::power_readings p = quietly([&] { return whole.power(); });
    s.power_draw_w = p.draw_w;
    s.power_limit_w = p.limit_w;
  }
  if (w.clocks) {
    const sys::clock_set c = quietly([&] { return whole.clocks(); }).current;
    s.clocks_sm_mhz = c.sm_mhz;
    s.clocks_mem_mhz = c.memory_mhz;
    s.clocks_gr_mhz = c.graphics_mhz;
  }
  if (w.temperature) {
    const sys::temperature_readings t = quietly([&] { return whole.temperature(); });
    s.temperature_gpu_c = t.gpu_c;
    s.temperature_memory_c = t.memory_c;
  }
  if (w.events) {
    if (auto e = quietly([&] { return whole.clock_events(); })) s.clocks_event_reasons = e->mask;
  }
  if (w.pcie) {
    const sys::pcie_readings p = quietly([&] { return whole.pcie(); });
    if (p.tx_kib_per_s) s.pcie_tx_bytes_per_s = *p.tx_kib_per_s * 1024.0;
    if (p.rx_kib_per_s) s.pcie_rx_bytes_per_s = *p.rx_kib_per_s * 1024.0;
  }
  if (w.pstate) s.pstate = quietly([&] { return whole.performance_state(); });
  if (w.nvlink) read_nvlink(g, s);
  if (w.processes) read_processes(*g.device, s);
}

}  // namespace

watch_sampler::watch_sampler(const system_info& info, const watch_options& options)
    : state_(std::make_unique<state>()) {
  state_->want = wanted_by(options);
  for (const device_info& d : info.devices) {
    watch_detail::gpu g;
    g.ordinal = d.ordinal;
    g.uuid = d.uuid;
    g.name = d.name;
    g.device = find_nvml(d.uuid);
    if (g.device) {
      g.whole = quietly([&] { return std::optional(g.device->parent()); });
    }
    if (g.whole) {
      g.index = quietly([&] { return g.whole->index(); });
      if (std::string name = quietly([&] { return g.device->name(); }); !name.empty()) g.name = std::move(name);
      g.uuid = quietly([&] { return g.device->uuid(); });
      if (g.uuid.empty()) g.uuid = d.uuid;
      if (auto pci = quietly([&] { return g.whole->pci(); })) g.pci_bus_id = pci->bus_id;
      if (state_->want.nvlink) {
        first_nvlink(g);
      }
    }
    state_->gpus.push_back(std::move(g));
  }
}

watch_sampler::~watch_sampler() = default;

std::vector<watch_sample> watch_sampler::sample(long long sample, double elapsed_s) {
  const auto [timestamp, time_of_day] = wall_clock_now();
  std::vector<watch_sample> out;
  for (watch_detail::gpu& g : state_->gpus) {
    watch_sample s;
    s.sample = sample;
    s.timestamp = timestamp;
    s.time_of_day = time_of_day;
    s.elapsed_s = elapsed_s;
    s.ordinal = g.ordinal;
    s.index = g.index;
    s.uuid = g.uuid;
    s.name = g.name;
    s.pci_bus_id = g.pci_bus_id;
    if (g.whole) read_gpu(state_->want, g, s);
    out.push_back(std::move(s));
  }
  return out;
}

// --- the run -------------------------------------------------------------------------------------------

namespace {

volatile std::sig_atomic_t stop_requested = 0;
struct sigaction previous_int {};   // SIGINT's disposition before the watch
struct sigaction previous_term {};  // SIGTERM's

// The first SIGINT or SIGTERM asks the watch to stop and puts the signal's previous disposition back,
// so that a second one acts as it would without this handler (by default: ends the process).
void on_stop_signal(int signal_number) {
  stop_requested = 1;
  sigaction(signal_number, signal_number == SIGINT ? &previous_int : &previous_term, nullptr);
}

// SIGINT and SIGTERM set stop_requested while the watch runs, except a signal ignored on entry (nohup,
// a background job), which stays ignored. SA_RESTART: a write interrupted by the signal (a full pipe)
// goes on instead of failing with EINTR. The previous dispositions come back at the end.
class stop_signals {
 public:
  stop_signals() {
    stop_requested = 0;
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    int_ = install(SIGINT, action, previous_int);
    term_ = install(SIGTERM, action, previous_term);
  }
  ~stop_signals() {
    if (int_) sigaction(SIGINT, &previous_int, nullptr);
    if (term_) sigaction(SIGTERM, &previous_term, nullptr);
  }
  stop_signals(const stop_signals&) = delete;
  stop_signals& operator=(const stop_signals&) = delete;

 private:
  // Installs @p action for @p signal_number unless it is ignored; false when it was left alone.
  static bool install(int signal_number, const struct sigaction& action, struct sigaction& previous) {
    if (sigaction(signal_number, nullptr, &previous) != 0 ||
        ((previous.sa_flags & SA_SIGINFO) == 0 && previous.sa_handler == SIG_IGN)) {
      return false;
    }
    return sigaction(signal_number, &action, nullptr) == 0;
  }
  bool int_ = false;
  bool term_ = false;
};

// Sleeps until @p due in steps of at most 50 ms; false when a stop was asked for first.
bool wait_until(steady::time_point due) {
  while (stop_requested == 0) {
    const steady::time_point now = steady::now();
    if (now >= due) return true;
    std::this_thread::sleep_for(std::min<steady::duration>(due - now, std::chrono::milliseconds(50)));
  }
  return false;
}

std::string format_sample(const watch_sample& s, const watch_options& options) {
  switch (options.format) {
    case watch_format::csv: return watch_csv_line(s, options);
    case watch_format::jsonl: return watch_json_line(s, options);
    case watch_format::text: break;
  }
  return watch_text_lines(s, options);
}

}  // namespace

int run_watch(const system_info& info, const watch_options& options, std::ostream& out) {
  stop_signals signals;
  watch_sampler sampler(info, options);
  if (options.format == watch_format::text) out << watch_text_header(options);
  if (options.format == watch_format::csv && options.header) out << watch_csv_header(options);
  out.flush();
  const steady::time_point start = steady::now();
  const double interval = options.interval_s;
  const auto slot_time = [&](long long slot) {
    return start + std::chrono::duration_cast<steady::duration>(
                       std::chrono::duration<double>(interval * static_cast<double>(slot)));
  };
  // Samples are due on slots, whole intervals after the start, whatever the samples before took: no
  // drift. A slot missed while a sample took longer than an interval is skipped, not made up.
  long long slot = 1;
  for (long long k = 1; out.good() && (options.count == 0 || k <= options.count); ++k) {
    if (k > 1 && options.duration_s > 0 && interval * static_cast<double>(slot) > options.duration_s + 1e-9) {
      break;  // --watch-duration is on the clock: the next slot is past it
    }
    if (!wait_until(slot_time(slot))) {
      break;
    }
    const double elapsed = std::chrono::duration<double>(steady::now() - start).count();
    for (const watch_sample& s : sampler.sample(k, elapsed)) out << format_sample(s, options);
    out.flush();
    if (stop_requested != 0) break;  // the sample in progress is written: end cleanly
    const double now_s = std::chrono::duration<double>(steady::now() - start).count();
    slot = std::max(slot + 1, static_cast<long long>(std::floor(now_s / interval)) + 1);
  }
  return exit_ok;  // a failed stream is reported by the caller (check_output)
}

}  // namespace cudrv_query
