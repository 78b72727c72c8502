// cudax-query: collecting from the driver, printing as text.
#include "query.hpp"

#include <cuda.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <ostream>

#include <cudax/device.hpp>
#include <cudax/driver.hpp>

namespace cudax_query {

namespace {

device_info collect_device(const cudax::device& dev) {
  device_info d;
  d.ordinal = dev.ordinal();
  d.name = dev.name();
  cudax::compute_capability cc = dev.compute_capability();
  d.cc_major = cc.major;
  d.cc_minor = cc.minor;
  d.multiprocessors = dev.attribute(cudax::device_attributes::multiprocessor_count);
  d.total_memory = dev.total_memory();  // cuDeviceTotalMem: no context (free_memory would create one)
  d.uuid = dev.uuid().to_string();
  d.pci_bus_id = dev.pci_bus_id();
  return d;
}

}  // namespace

system_info collect() {
  system_info info;
  info.toolkit_version = CUDA_VERSION;
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"); visible != nullptr) {
    info.visible_devices = visible;
  }
  // None of the cudax::driver queries throws; they load the driver on first use.
  info.driver_available = cudax::driver::available();
  info.driver_version = cudax::driver::version();
  info.driver_library = cudax::driver::library_path();
  if (!info.driver_available) {
    info.unavailable_reason = cudax::driver::unavailable_reason();
    return info;
  }
  // Ordinals are CUDA's: cudax::devices() enumerates what the driver exposes after
  // CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER.
  for (cudax::device dev : cudax::devices()) {
    info.devices.push_back(collect_device(dev));
  }
  return info;
}

std::string format_cuda_version(int version) {
  if (version <= 0) {
    return "unknown";
  }
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

std::string format_memory(std::size_t bytes) {
  char buffer[64];
  constexpr double mib = 1024.0 * 1024.0;
  constexpr double gib = 1024.0 * mib;
  if (static_cast<double>(bytes) >= gib) {
    std::snprintf(buffer, sizeof(buffer), "%.1f GiB", static_cast<double>(bytes) / gib);
  } else {
    std::snprintf(buffer, sizeof(buffer), "%.0f MiB", static_cast<double>(bytes) / mib);
  }
  return buffer;
}

void print_text(std::ostream& out, const system_info& info) {
  out << "CUDA driver:   " << format_cuda_version(info.driver_version);
  if (!info.driver_library.empty()) {
    out << " (" << info.driver_library << ")";
  }
  out << '\n';
  out << "CUDA toolkit:  " << format_cuda_version(info.toolkit_version) << " (cudax-query was built with)\n";
  out << "Devices:       " << info.devices.size();
  if (info.visible_devices) {
    out << " (CUDA_VISIBLE_DEVICES=" << *info.visible_devices << ")";
  }
  out << '\n';
  if (info.devices.empty()) {
    return;
  }
  out << '\n';

  constexpr std::size_t columns = 7;
  using row = std::array<std::string, columns>;
  std::vector<row> rows;
  rows.push_back({"ID", "Name", "CC", "SMs", "Memory", "UUID", "PCI bus id"});
  for (const device_info& d : info.devices) {
    rows.push_back({std::to_string(d.ordinal), d.name, std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor),
                    std::to_string(d.multiprocessors), format_memory(d.total_memory), d.uuid, d.pci_bus_id});
  }
  std::array<std::size_t, columns> width{};
  for (const row& r : rows) {
    for (std::size_t c = 0; c < columns; ++c) {
      width[c] = std::max(width[c], r[c].size());
    }
  }
  // Numbers right-aligned, text left-aligned; two spaces between columns, no trailing blanks.
  constexpr std::array<bool, columns> right_aligned{true, false, false, true, true, false, false};
  for (const row& r : rows) {
    std::string line;
    for (std::size_t c = 0; c < columns; ++c) {
      std::string pad(width[c] - r[c].size(), ' ');
      if (c > 0) {
        line += "  ";
      }
      line += right_aligned[c] ? pad + r[c] : (c + 1 < columns ? r[c] + pad : r[c]);
    }
    out << line << '\n';
  }
}

}  // namespace cudax_query
