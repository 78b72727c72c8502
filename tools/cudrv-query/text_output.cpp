// cudrv-query: the human-readable output of every view.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <ostream>

#include "query.hpp"

namespace cudrv_query {

namespace {

/// Bold (and a colour for headings) when colour is on.
struct painter {
  bool on;
  [[nodiscard]] std::string bold(const std::string& s) const { return on ? "\033[1m" + s + "\033[0m" : s; }
  [[nodiscard]] std::string heading(const std::string& s) const { return on ? "\033[1;36m" + s + "\033[0m" : s; }
  [[nodiscard]] std::string dim(const std::string& s) const { return on ? "\033[2m" + s + "\033[0m" : s; }
};

std::string fixed(double v, int decimals) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", decimals, v);
  return buffer;
}

/// Columns separated by two spaces, numbers right-aligned, no trailing blanks; the first row is the
/// header (bold when colour is on).
void print_table(std::ostream& out, const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& right,
                 const painter& paint, const std::string& indent = "") {
  if (rows.empty()) {
    return;
  }
  std::vector<std::size_t> width(rows.front().size(), 0);
  for (const auto& r : rows) {
    for (std::size_t c = 0; c < r.size(); ++c) {
      width[c] = std::max(width[c], r[c].size());
    }
  }
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::string line;
    for (std::size_t c = 0; c < rows[i].size(); ++c) {
      const std::string& cell = rows[i][c];
      std::string pad(width[c] - cell.size(), ' ');
      if (c > 0) {
        line += "  ";
      }
      bool last = c + 1 == rows[i].size();
      line += right[c] ? pad + cell : (last ? cell : cell + pad);
    }
    out << indent << (i == 0 ? paint.bold(line) : line) << '\n';
  }
}

std::string yes_no(bool b) { return b ? "yes" : "no"; }

/// A square table over @p ordinals, row = link.from, column = link.to; @p cell gives the text of a
/// link, "-" stands where there is none (the diagonal).
template <class Link, class Cell>
void print_pair_matrix(std::ostream& out, const std::vector<int>& ordinals, const std::vector<Link>& links, Cell cell,
                       const painter& paint) {
  std::vector<std::vector<std::string>> matrix{{""}};
  for (int o : ordinals) matrix.front().push_back(std::to_string(o));
  for (int from : ordinals) {
    std::vector<std::string> row{std::to_string(from)};
    for (int to : ordinals) {
      auto it = std::find_if(links.begin(), links.end(), [&](const Link& l) { return l.from == from && l.to == to; });
      row.push_back(it == links.end() ? "-" : cell(*it));
    }
    matrix.push_back(std::move(row));
  }
  print_table(out, matrix, std::vector<bool>(matrix.front().size(), true), paint, "  ");
}

std::string max_clocks(const device_info& d) {
  // The driver's clock attributes (the maximum SM and memory clocks; NVML's figures are in --details).
  return std::to_string(d.sm_clock_khz / 1000) + "/" + std::to_string(d.memory_clock_khz / 1000) + " MHz";
}

std::string format_attribute(const attribute_value& v) {
  if (!v.value) {
    return "unknown (" + (v.error.empty() ? std::string("not reported") : v.error) + ")";
  }
  const attribute_desc& a = *v.desc;
  long long x = *v.value;
  std::string unit = a.unit;
  switch (a.kind) {
    case attribute_kind::boolean: return yes_no(x != 0);
    case attribute_kind::enumeration: return describe(a, x) + " (" + std::to_string(x) + ")";
    case attribute_kind::bitmask: {
      char hex[32];
      std::snprintf(hex, sizeof(hex), "0x%llx", static_cast<unsigned long long>(x));
      return describe(a, x) + " (" + hex + ")";
    }
    case attribute_kind::integer: break;
  }
  if (std::string_view(a.key) == "gpu_pci_device_id" || std::string_view(a.key) == "gpu_pci_subsystem_id") {
    char hex[32];  // vendor and device ids, as lspci shows them
    std::snprintf(hex, sizeof(hex), "0x%08llx", static_cast<unsigned long long>(x) & 0xffffffffULL);
    return hex;
  }
  if (unit == "bytes" && x >= 1024) {
    return format_memory(static_cast<std::size_t>(x)) + " (" + std::to_string(x) + " bytes)";
  }
  if (unit == "kHz") {
    return std::to_string(x / 1000) + " MHz";
  }
  return unit.empty() ? std::to_string(x) : std::to_string(x) + " " + unit;
}

void print_header(std::ostream& out, const system_info& info, const painter& paint) {
  auto label = [&](const char* l) { out << paint.bold(l); };
  label("CUDA driver   ");
  out << format_cuda_version(info.driver_version);
  std::string detail = info.nvml.driver_version;
  if (!info.driver_library.empty()) {
    detail += (detail.empty() ? "" : "; ") + info.driver_library;
  }
  if (!detail.empty()) {
    out << " (" << detail << ")";
  }
  out << '\n';
  label("CUDA toolkit  ");
  out << format_cuda_version(info.toolkit_version) << " (cudrv-query was built with it)\n";
  label("NVRTC         ");
  out << format_cuda_version(info.toolkit_version) << " (built with)";
  if (info.nvrtc.checked) {
    out << "; "
        << (info.nvrtc.available ? "library " + format_cuda_version(info.nvrtc.version) + " loaded"
                                 : "library not loaded: " + info.nvrtc.reason);
  }
  out << '\n';
  label("NVML          ");
  out << (info.nvml.available ? info.nvml.nvml_version : "not loaded: " + info.nvml.reason) << '\n';
  label("Devices       ");
  out << info.devices.size();
  if (static_cast<int>(info.devices.size()) != info.device_count) {
    out << " selected of " << info.device_count;
  }
  if (info.visible_devices) {
    out << " (CUDA_VISIBLE_DEVICES=" << *info.visible_devices << ")";
  }
  if (info.device_order) {
    out << " (CUDA_DEVICE_ORDER=" << *info.device_order << ")";
  }
  out << '\n';
}

void print_summary(std::ostream& out, const system_info& info, const painter& paint) {
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"ID", "Name", "CC", "SMs", "Memory", "Free", "Max clocks SM/mem", "UUID", "PCI bus id"});
  for (const device_info& d : info.devices) {
    std::string free = d.nvml && d.nvml->memory_free_bytes ? format_memory(*d.nvml->memory_free_bytes) : "n/a";
    rows.push_back({std::to_string(d.ordinal), d.name, std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor),
                    std::to_string(d.multiprocessors), format_memory(d.total_memory), free, max_clocks(d), d.uuid,
                    d.pci_bus_id});
  }
  print_table(out, rows, {true, false, false, true, true, true, true, false, false}, paint);
}

void print_nvml(std::ostream& out, const nvml_device& n, const painter& paint) {
  out << "  " << paint.heading("nvml") << (n.via_mig ? " (the GPU holding this MIG instance)" : "") << '\n';
  std::vector<std::vector<std::string>> rows;
  auto row = [&](const std::string& name, const std::string& value) { rows.push_back({name, value}); };
  row("NVML index (nvidia-smi)", std::to_string(n.index));
  auto clocks = [&](const char* name, const nvml_clocks& c) {
    auto mhz = [](const std::optional<unsigned int>& v) { return v ? std::to_string(*v) : std::string("-"); };
    if (c.graphics_mhz || c.sm_mhz || c.memory_mhz) {
      row(name, mhz(c.graphics_mhz) + "/" + mhz(c.sm_mhz) + "/" + mhz(c.memory_mhz) + " MHz");
    }
  };
  clocks("Clocks graphics/SM/memory", n.clocks);
  clocks("Max clocks graphics/SM/memory", n.max_clocks);
  if (n.memory_total_bytes) row("Memory total", format_memory(*n.memory_total_bytes));
  if (n.memory_free_bytes) row("Memory free", format_memory(*n.memory_free_bytes));
  if (n.memory_used_bytes) row("Memory used", format_memory(*n.memory_used_bytes));
  if (n.temperature_c) row("Temperature", std::to_string(*n.temperature_c) + " C");
  if (n.power_draw_w) row("Power draw", fixed(*n.power_draw_w, 1) + " W");
  if (n.power_limit_w) row("Power limit", fixed(*n.power_limit_w, 1) + " W");
  if (n.pcie_generation || n.pcie_width) {
    auto v = [](const std::optional<unsigned int>& x) { return x ? std::to_string(*x) : std::string("?"); };
    std::string link = "gen ";
    link.append(v(n.pcie_generation)).append(" x").append(v(n.pcie_width));
    link.append(" (max gen ").append(v(n.pcie_max_generation)).append(" x").append(v(n.pcie_max_width)).append(")");
    row("PCIe link", link);
  }
  if (n.ecc_enabled) row("ECC", yes_no(*n.ecc_enabled) + (n.ecc_pending != n.ecc_enabled ? " (pending change)" : ""));
  if (n.mig_enabled) row("MIG", yes_no(*n.mig_enabled) + (n.mig_pending != n.mig_enabled ? " (pending change)" : ""));
  if (n.utilization_gpu_percent) {
    row("Utilization GPU/memory", std::to_string(*n.utilization_gpu_percent) + "/" +
                                      std::to_string(n.utilization_memory_percent.value_or(0)) + " %");
  }
  if (n.performance_state) row("Performance state", std::string("P").append(std::to_string(*n.performance_state)));
  if (n.persistence_mode) row("Persistence mode", yes_no(*n.persistence_mode));
  // No header row here: print_table bolds the first row, so print rows one by one.
  std::size_t width = 0;
  for (const auto& r : rows) width = std::max(width, r[0].size());
  for (const auto& r : rows) out << "    " << r[0] << std::string(width - r[0].size() + 2, ' ') << r[1] << '\n';
}

void print_details(std::ostream& out, const system_info& info, const painter& paint) {
  for (const device_info& d : info.devices) {
    out << '\n'
        << paint.bold("Device " + std::to_string(d.ordinal) + ": " + d.name) << " (" << d.uuid << ", " << d.pci_bus_id
        << ")\n";
    const std::string total = "Total global memory";
    std::size_t width = total.size();
    for (const attribute_value& v : d.attributes) {
      width = std::max(width, std::string(v.desc->name).size());
    }
    out << "  " << total << std::string(width - total.size() + 4, ' ') << format_memory(d.total_memory) << " ("
        << d.total_memory << " bytes)\n";
    for (const char* group : group_names()) {
      bool any = false;
      for (const attribute_value& v : d.attributes) {
        if (std::string_view(v.desc->group) != group) {
          continue;
        }
        if (!any) {
          out << "  " << paint.heading(group) << '\n';
          any = true;
        }
        std::string name = v.desc->name;
        out << "    " << name << std::string(width - name.size() + 2, ' ') << format_attribute(v) << '\n';
      }
    }
    if (d.nvml) {
      print_nvml(out, *d.nvml, paint);
    }
  }
}

void print_p2p(std::ostream& out, const system_info& info, const painter& paint) {
  out << '\n';
  if (info.devices.size() < 2) {
    out << "Peer access needs two devices; " << info.devices.size() << " selected.\n";
    return;
  }
  std::vector<std::vector<std::string>> devices;
  devices.push_back({"ID", "Name", "UUID", "PCI bus id"});
  for (const device_info& d : info.devices)
    devices.push_back({std::to_string(d.ordinal), d.name, d.uuid, d.pci_bus_id});
  print_table(out, devices, {true, false, false, false}, paint);
  out << '\n'
      << paint.heading("Peer access") << " (row: the device that accesses, column: the device whose memory it reads)\n";
  std::vector<int> ordinals;
  for (const device_info& d : info.devices) ordinals.push_back(d.ordinal);
  print_pair_matrix(
      out, ordinals, info.p2p, [](const p2p_link& l) { return yes_no(l.can_access); }, paint);
  out << '\n' << paint.heading("Links") << '\n';
  auto opt_bool = [](const std::optional<bool>& b) { return b ? yes_no(*b) : std::string("n/a"); };
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"From", "To", "Access", "Rank", "Native atomics", "Partial atomics only", "CUDA arrays"});
  for (const p2p_link& l : info.p2p) {
    rows.push_back({std::to_string(l.from), std::to_string(l.to), yes_no(l.can_access),
                    l.performance_rank ? std::to_string(*l.performance_rank) : "n/a",
                    opt_bool(l.native_atomic_supported), opt_bool(l.only_partial_native_atomic_supported),
                    opt_bool(l.cuda_array_access_supported)});
  }
  print_table(out, rows, {true, true, false, true, false, false, false}, paint, "  ");
  out << paint.dim("  Rank: the driver's relative performance of the link (lower is better).") << '\n';
}

void print_bench(std::ostream& out, const system_info& info, const painter& paint) {
  if (!info.bench) {
    return;
  }
  const bench_results& b = *info.bench;
  out << '\n'
      << paint.heading("Bench") << ": " << format_memory(b.options.size) << " per copy, " << b.options.iterations
      << " copies (" << b.options.iterations * 100 << " launches) per trial, median of " << b.options.trials
      << " trials, timed with CUDA events.\n"
      << "GB/s = 1e9 bytes per second, counting the bytes copied once.\n";
  for (const bench_device& r : b.devices) {
    std::string name;
    for (const device_info& d : info.devices) {
      if (d.ordinal == r.ordinal) name = d.name;
    }
    out << '\n' << paint.bold("Device " + std::to_string(r.ordinal) + ": " + name) << '\n';
    std::vector<std::vector<std::string>> rows;
    rows.push_back({"Measurement", "Result"});
    rows.push_back({"Host to device, pinned", fixed(r.h2d_pinned_gbps, 1) + " GB/s"});
    rows.push_back({"Device to host, pinned", fixed(r.d2h_pinned_gbps, 1) + " GB/s"});
    rows.push_back({"Host to device, pageable", fixed(r.h2d_pageable_gbps, 1) + " GB/s"});
    rows.push_back({"Device to host, pageable", fixed(r.d2h_pageable_gbps, 1) + " GB/s"});
    rows.push_back({"Device to device",
                    fixed(r.d2d_copy_gbps, 1) + " GB/s (" + fixed(2 * r.d2d_copy_gbps, 1) + " GB/s read + written)"});
    rows.push_back({"Empty kernel, back-to-back", fixed(r.launch_us, 2) + " us per launch"});
    rows.push_back({"Empty kernel + synchronize", fixed(r.launch_sync_us, 2) + " us round trip"});
    print_table(out, rows, {false, false}, paint, "  ");
  }
  if (!b.p2p.empty()) {
    out << '\n'
        << paint.heading("Peer to peer") << " (GB/s; row: source, column: destination; * staged through the host)\n";
    std::vector<int> ordinals;
    for (const bench_device& d : b.devices) ordinals.push_back(d.ordinal);
    print_pair_matrix(
        out, ordinals, b.p2p, [](const bench_p2p& p) { return fixed(p.gbps, 1) + (p.peer_access ? "" : "*"); }, paint);
  }
}

}  // namespace

std::string format_memory(std::size_t bytes) {
  char buffer[64];
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) {
    std::snprintf(buffer, sizeof(buffer), "%.1f GiB", b / (1024.0 * 1024 * 1024));
  } else if (b >= 1024.0 * 1024) {
    std::snprintf(buffer, sizeof(buffer), "%.0f MiB", b / (1024.0 * 1024));
  } else if (b >= 1024.0) {
    std::snprintf(buffer, sizeof(buffer), "%.0f KiB", b / 1024.0);
  } else {
    std::snprintf(buffer, sizeof(buffer), "%zu B", bytes);
  }
  return buffer;
}

bool color_wanted(std::string_view mode, std::string_view no_color, std::string_view term, bool is_tty) {
  if (mode == "always") {
    return true;
  }
  if (mode == "never" || !no_color.empty() || term == "dumb") {
    return false;
  }
  return is_tty;
}

void print_text(std::ostream& out, const system_info& info, view v, const text_style& style) {
  painter paint{style.color};
  print_header(out, info, paint);
  if (info.devices.empty()) {
    return;
  }
  switch (v) {
    case view::summary:
      out << '\n';
      print_summary(out, info, paint);
      break;
    case view::details: print_details(out, info, paint); break;
    case view::p2p: print_p2p(out, info, paint); break;
    case view::bench: print_bench(out, info, paint); break;
    case view::topo:  // issue 36: topology
      if (info.topology) print_topology(out, *info.topology, style.color);
      break;
    case view::watch: break;  // issue 36: watch prints its samples itself (watch.cpp)
    case view::bandwidth:     // issue 36: bandwidth
      if (info.bandwidth) {
        print_bandwidth_text(out, *info.bandwidth);
      }
      break;
    case view::inspect: break;  // issue 36: inspect: printed by print_inspect_text (inspect.cpp)
  }
}

}  // namespace cudrv_query
