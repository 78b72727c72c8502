// cudax-query: what is collected about the driver and the devices, and how it is printed.
//
// The tool is split in two steps so that it can grow (filters, more fields, other output formats)
// without touching the driver code: collect() fills a system_info from the driver, the print_*
// functions turn a system_info into text. Only collect() calls cudax.
#pragma once

#include <cstddef>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace cudax_query {

/// The exit statuses of cudax-query (also listed in the --help footer).
enum exit_status : int {
  exit_ok = 0,          ///< success
  exit_usage = 1,       ///< bad command line (unknown option, extra argument)
  exit_no_driver = 2,   ///< no usable CUDA driver (libcuda.so.1 missing, or cuInit failed)
  exit_no_device = 3,   ///< the driver works but sees no device
  exit_cuda_error = 4,  ///< a CUDA (or other) error while querying
};

/// What is known about one device. Only queries that need no CUDA context are made.
struct device_info {
  int ordinal = 0;                ///< CUDA's ordinal (after CUDA_VISIBLE_DEVICES)
  std::string name;               ///< e.g. "NVIDIA H100 80GB HBM3"
  int cc_major = 0;               ///< compute capability, major
  int cc_minor = 0;               ///< compute capability, minor
  int multiprocessors = 0;        ///< SM count
  std::size_t total_memory = 0;   ///< bytes (cuDeviceTotalMem)
  std::string uuid;               ///< "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
  std::string pci_bus_id;         ///< "0000:c1:00.0"
};

/// What is known about the driver and all visible devices.
struct system_info {
  bool driver_available = false;                ///< libcuda loaded and cuInit succeeded (or found no device)
  std::string unavailable_reason;               ///< why not, when !driver_available
  int driver_version = 0;                       ///< 1000 * major + 10 * minor; 0 when unknown
  std::string driver_library;                   ///< path of the loaded libcuda
  int toolkit_version = 0;                      ///< CUDA_VERSION cudax-query was built with
  std::optional<std::string> visible_devices;   ///< CUDA_VISIBLE_DEVICES, when set
  std::vector<device_info> devices;             ///< in ordinal order
};

/// Queries the driver and every visible device. Never throws for a missing driver (that is reported
/// in the result); throws cudax::error when a query on a present driver fails.
[[nodiscard]] system_info collect();

/// The human-readable report: driver and toolkit versions, then one row per device.
void print_text(std::ostream& out, const system_info& info);

/// "13.0" for 13000, "12.9" for 12090; "unknown" for 0.
[[nodiscard]] std::string format_cuda_version(int version);

/// "79.6 GiB" from 1 GiB up, "512 MiB" below.
[[nodiscard]] std::string format_memory(std::size_t bytes);

}  // namespace cudax_query
