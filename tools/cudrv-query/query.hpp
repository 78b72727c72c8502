// cudrv-query: what is collected about the driver and the devices, and how it is turned into output.
//
// The tool works in steps so that each can be tested on its own: the command line (cli.cpp) picks
// a view and the devices; collect() fills a system_info from the driver and NVML; the p2p and bench
// steps add their parts; print_text() and to_json() turn the result into output. Only the collecting
// steps call the driver, so the output code is tested on machines without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "attributes.hpp"
#include "bandwidth.hpp"
#include "nvml.hpp"
#include "topo.hpp"   // issue 36: topology
#include "watch.hpp"  // issue 36: watch

namespace cudrv_query {

/// The exit statuses of cudrv-query (also listed in the --help footer and docs/cudrv-query.md).
enum exit_status : int {
  exit_ok = 0,            ///< success
  exit_usage = 1,         ///< bad command line (unknown option, bad value, a -d that matches no device)
  exit_no_driver = 2,     ///< no usable CUDA driver (libcuda.so.1 missing, or cuInit failed)
  exit_no_device = 3,     ///< the driver works but sees no device
  exit_cuda_error = 4,    ///< a CUDA (or other) error while querying or measuring
  exit_output_error = 5,  ///< the run succeeded but its output could not be written (a full disk, a closed pipe)
};

/// The version of the JSON documents; bumped when a key changes meaning or goes away (new keys may
/// be added without a bump). docs/cudrv-query.schema.json describes this version.
inline constexpr int json_schema_version = 1;

/// Which output the command line asked for.
enum class view { summary, details, p2p, bench, topo, watch, bandwidth, inspect };

/// "summary", "details", "p2p", "bench", "topo", "watch", "bandwidth", "inspect": the `view` key of the JSON
/// documents.
[[nodiscard]] const char* view_name(view v) noexcept;

/// One device attribute as read from the driver (details view).
struct attribute_value {
  const attribute_desc* desc = nullptr;  ///< what it is (attributes.hpp)
  std::optional<long long> value;        ///< empty when the driver does not know it
  std::string error;                     ///< the driver's status name when it is empty
};

/// What is known about one device. Only queries that need no CUDA context are made.
struct device_info {
  int ordinal = 0;                          ///< CUDA's ordinal (after CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER)
  std::string name;                         ///< e.g. "NVIDIA H100 80GB HBM3"
  int cc_major = 0;                         ///< compute capability, major
  int cc_minor = 0;                         ///< compute capability, minor
  int multiprocessors = 0;                  ///< SM count
  std::size_t total_memory = 0;             ///< bytes (cuDeviceTotalMem)
  int sm_clock_khz = 0;                     ///< CU_DEVICE_ATTRIBUTE_CLOCK_RATE
  int memory_clock_khz = 0;                 ///< CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE
  std::string uuid;                         ///< "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (MIG-… for a MIG instance)
  std::string pci_bus_id;                   ///< "0000:c1:00.0", as the driver writes it
  std::optional<nvml_device> nvml;          ///< NVML's view of the same GPU, matched by UUID
  std::vector<attribute_value> attributes;  ///< details view only: every attribute of attributes.hpp
};

/// A library cudrv-query loads at run time (NVRTC), and what it said.
struct library_status {
  bool checked = false;    ///< the view looked for it (the summary does not: start-up time)
  bool available = false;  ///< loaded
  int version = 0;         ///< 1000 * major + 10 * minor
  std::string reason;      ///< why not, when checked and !available
};

/// One ordered pair of devices in the P2P view: what the driver says of the link from one to the other.
struct p2p_link {
  int from = 0;                                              ///< ordinal of the accessing device
  int to = 0;                                                ///< ordinal of the device whose memory is accessed
  bool can_access = false;                                   ///< cuDeviceCanAccessPeer
  std::optional<int> performance_rank;                       ///< CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK
  std::optional<bool> access_supported;                      ///< CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED
  std::optional<bool> native_atomic_supported;               ///< CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED
  std::optional<bool> cuda_array_access_supported;           ///< CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED
  std::optional<bool> only_partial_native_atomic_supported;  ///< CUDA 13.0 headers and drivers
};

/// The settings of --bench.
struct bench_options {
  std::size_t size = std::size_t{64} << 20;  ///< bytes per copy
  int iterations = 10;                       ///< copies (or 100x launches) per timed trial
  int trials = 5;                            ///< timed trials; the median is reported
  bool progress = true;                      ///< progress line on stderr
};

/// How many launch + synchronize round trips --bench times: 10 per copy of a trial, at most 10000.
[[nodiscard]] constexpr int round_trips_for(const bench_options& o) noexcept {
  long long n = 10LL * o.trials * o.iterations;
  return static_cast<int>(n < 10000 ? n : 10000);
}

/// The bench results of one device (medians over the trials).
struct bench_device {
  int ordinal = 0;               ///< CUDA ordinal
  double h2d_pinned_gbps = 0;    ///< host (page-locked) to device, 1e9 bytes per second
  double d2h_pinned_gbps = 0;    ///< device to host (page-locked)
  double h2d_pageable_gbps = 0;  ///< host (pageable) to device
  double d2h_pageable_gbps = 0;  ///< device to host (pageable)
  double d2d_copy_gbps = 0;      ///< device to device: bytes copied per second
  double launch_us = 0;          ///< empty kernel, back-to-back on one stream: event-timed time per launch
  double launch_sync_us = 0;     ///< empty kernel launch + stream synchronize, host-timed round trip
};

/// The bench result of one ordered pair of devices.
struct bench_p2p {
  int from = 0;              ///< ordinal of the source device
  int to = 0;                ///< ordinal of the destination device
  bool peer_access = false;  ///< peer access was enabled (else the driver staged the copy through the host)
  double gbps = 0;           ///< bytes copied per second, 1e9 bytes
};

/// The results of --bench.
struct bench_results {
  bench_options options;              ///< what was run
  std::vector<bench_device> devices;  ///< one per selected device
  std::vector<bench_p2p> p2p;         ///< every ordered pair of selected devices (none for one device)
};

/// What is known about the driver and the selected devices: the content of every view.
struct system_info {
  bool driver_available = false;       ///< libcuda loaded and cuInit succeeded (or found no device)
  std::string unavailable_reason;      ///< why not, when !driver_available
  int driver_version = 0;              ///< CUDA version of the driver: 1000 * major + 10 * minor; 0 when unknown
  std::string driver_library;          ///< path of the loaded libcuda
  int toolkit_version = CUDA_VERSION;  ///< the CUDA toolkit cudrv-query was built with
  library_status nvrtc;                ///< the NVRTC library cudrv would load (not in the summary)
  nvml_status nvml;                    ///< NVML: loaded or not, kernel driver version
  std::optional<std::string> visible_devices;  ///< CUDA_VISIBLE_DEVICES, when set
  std::optional<std::string> device_order;     ///< CUDA_DEVICE_ORDER, when set
  int device_count = 0;                        ///< devices the driver exposes (before -d)
  std::vector<device_info> devices;            ///< the selected devices, in ordinal order
  std::vector<p2p_link> p2p;                   ///< p2p view: every ordered pair of selected devices
  std::optional<bench_results> bench;          ///< bench view
  std::optional<topology_info> topology;       ///< topo view (issue 36: topology)
  std::optional<bandwidth_results> bandwidth;  ///< bandwidth view (issue 36)
};

/// How a failure ended the run; reported in the JSON's `status` and `error` and by the exit status.
struct failure {
  exit_status status = exit_ok;              ///< the exit status
  std::string message;                       ///< one line, without the "cudrv-query: " prefix
  std::vector<std::string> valid_selectors;  ///< for a -d that matched nothing: what would have
};

/// What collect() reads besides the driver.
struct collect_options {
  nvml_fields nvml = nvml_fields::all;  ///< how much of NVML's data
  bool nvrtc = true;                    ///< load NVRTC to report its version
};

/// Loads the driver and reads the versions, the environment and the identity of every device the
/// driver exposes, plus NVML's data and NVRTC's version as @p options say, read on a second thread
/// while cuInit runs. Never throws for a missing driver (that is reported in the result); throws
/// cudrv::error when a query on a present driver fails.
[[nodiscard]] system_info collect(const collect_options& options);

/// Fills info.visible_devices and info.device_order from the environment.
void read_environment(system_info& info);

/// Reads every attribute of attributes.hpp for the devices in @p info (details view).
void collect_attributes(system_info& info);

/// Fills info.p2p for every ordered pair of the selected devices (no context is created).
void collect_p2p(system_info& info);

/// The measurements of --bench on one device, each on its own, so that tests can interleave them with
/// the same measurements made with raw driver calls. The constructor makes what they use, once: a
/// stream, two timing events, two device buffers, a pinned and a pageable host buffer of
/// options.size bytes (every page touched), and an empty kernel (loaded from PTX). Each measurement
/// warms up with one untimed operation, then returns the median over options.trials trials.
class device_bench {
 public:
  /// Prepares device @p ordinal (its primary context). @throws cudrv::error, std::bad_alloc
  device_bench(int ordinal, const bench_options& options);
  ~device_bench();                                   ///< frees everything
  device_bench(device_bench&&) noexcept;             ///< movable
  device_bench& operator=(device_bench&&) noexcept;  ///< movable
  [[nodiscard]] int ordinal() const noexcept;        ///< the device
  [[nodiscard]] double h2d_pinned_gbps();            ///< pinned host to device, GB/s
  [[nodiscard]] double d2h_pinned_gbps();            ///< device to pinned host
  [[nodiscard]] double h2d_pageable_gbps();          ///< pageable host to device
  [[nodiscard]] double d2h_pageable_gbps();          ///< device to pageable host
  [[nodiscard]] double d2d_copy_gbps();              ///< within the device, bytes copied per second
  [[nodiscard]] double launch_us();                  ///< empty kernel, back-to-back, per launch
  [[nodiscard]] double launch_sync_us();             ///< empty kernel + synchronize, round trip
  /// From this device's buffer to @p destination's, on this device's stream, with peer access
  /// enabled where the driver allows it (@p peer_access says whether it did).
  [[nodiscard]] double p2p_gbps(device_bench& destination, bool& peer_access);
  /// The pinned host buffer (options.size bytes), for measurements that must use the same memory.
  [[nodiscard]] std::byte* pinned_data() noexcept;
  /// The pageable host buffer (options.size bytes), likewise: pageable copies depend on the pages.
  [[nodiscard]] std::byte* pageable_data() noexcept;

 private:
  struct state;
  std::unique_ptr<state> state_;
};

/// Runs the measurements of --bench on the selected devices (creates contexts, allocates memory).
/// @throws cudrv::error on a CUDA failure
[[nodiscard]] bench_results run_bench(const system_info& info, const bench_options& options);

// --- device selection (select.cpp) -----------------------------------------------------------------

/// A -d argument, classified: an ordinal, a UUID (or a prefix of one), or a PCI bus id.
struct selector {
  /// What kind of selector it is.
  enum class kind { ordinal, uuid, pci_bus_id };
  kind type = kind::ordinal;  ///< the kind
  std::string text;           ///< as given
  int ordinal = -1;           ///< kind::ordinal
  std::string uuid_prefix;    ///< kind::uuid: lower case, with its "GPU-"/"MIG-" prefix
  unsigned int pci_domain = 0, pci_bus = 0, pci_device = 0, pci_function = 0;  ///< kind::pci_bus_id
};

/// Classifies a -d argument. A number is an ordinal; "GPU-…"/"MIG-…" (any case, any prefix of the
/// UUID) is a UUID; "[domain:]bus:device.function" in hexadecimal (CUDA's 0000:c1:00.0 or
/// nvidia-smi's 00000000:C1:00.0) is a PCI bus id.
/// @return the selector, or an error message
[[nodiscard]] std::optional<selector> parse_selector(std::string_view text, std::string& error);

/// Parses a PCI bus id as CUDA or nvidia-smi writes it; false when it is not one.
[[nodiscard]] bool parse_pci_bus_id(std::string_view text, unsigned int& domain, unsigned int& bus,
                                    unsigned int& device, unsigned int& function);

/// The devices the selectors pick, in ordinal order, each once. When a selector matches no device or
/// a UUID prefix matches several, returns a failure with status exit_usage that names the selector and
/// lists the valid ones.
[[nodiscard]] std::optional<failure> select_devices(std::vector<device_info>& devices,
                                                    const std::vector<std::string>& selectors);

/// "0, GPU-8f3a…, 0000:c1:00.0": how to select a device, for error messages and --help.
[[nodiscard]] std::string describe_selectors(const device_info& d);

// --- output (text_output.cpp, json_output.cpp) -----------------------------------------------------

/// Options of the text output.
struct text_style {
  bool color = false;  ///< ANSI colours (never when NO_COLOR is set or stdout is not a terminal)
};

/// Whether the text output is coloured. @p mode is the --color value: "always" (colour, even with
/// NO_COLOR set: an explicit request wins), "never", or "auto": colour only on a terminal, when
/// NO_COLOR is unset or empty and TERM is not "dumb".
[[nodiscard]] bool color_wanted(std::string_view mode, std::string_view no_color, std::string_view term, bool is_tty);

/// The human-readable report of a view.
void print_text(std::ostream& out, const system_info& info, view v, const text_style& style);

/// The JSON document of a view, serialised (two-space indent, a final newline).
[[nodiscard]] std::string to_json(const system_info& info, view v, const failure* error);

/// What --version reports: the tool, the library it is linked with, the driver and the toolkit.
struct version_info {
  std::string tool;                    ///< cudrv-query's version (the cudrv headers it was built with)
  std::string library;                 ///< the linked cudrv library's version
  bool driver_available = false;       ///< libcuda loaded and cuInit succeeded
  int driver_version = 0;              ///< CUDA version of the driver; 0 when unknown
  std::string driver_library;          ///< path of the loaded libcuda
  std::string unavailable_reason;      ///< why not, when !driver_available
  int toolkit_version = CUDA_VERSION;  ///< the CUDA toolkit cudrv-query was built with
};

/// The text of --version: four lines ("cudrv-query X", "cudrv library: X", "CUDA driver: …",
/// "CUDA toolkit (built with): CUDA X"), without a final newline.
[[nodiscard]] std::string version_text(const version_info& v);

/// The JSON document of --version --json (`view` "version"), serialised as to_json() does.
[[nodiscard]] std::string version_to_json(const version_info& v);

/// The JSON document of a command line that could not be parsed: status "usage_error", exit_code 1
/// and @p message (without the "cudrv-query: " prefix), and nothing else, since nothing was run.
[[nodiscard]] std::string usage_error_to_json(const std::string& message);

// --- the command line (cli.cpp) ---------------------------------------------------------------------

/// What a command line asks for, once parsed.
struct command_line {
  view v = view::summary;              ///< --details, --p2p, --bench, --topo, --watch, --bandwidth, or the summary
  std::vector<std::string> selectors;  ///< -d values, each a valid selector (whether it matches is checked later)
  bool json = false;                   ///< --json
  std::string color = "auto";          ///< --color: auto, always or never
  bench_options bench;                 ///< --bench-size, --bench-iterations, --bench-trials, --no-progress
  watch_options watch;                 ///< issue 36: --watch-interval, --watch-count, ... (watch.hpp)
  bandwidth_options bandwidth;         ///< --bandwidth-size, -iterations, -samples, -tests, --no-progress (issue 36)
  std::string inspect_file;            ///< issue 36: inspect: --inspect FILE
};

/// Parses argv (argv[0] is the program name). Never exits the process: --help and --version write
/// their text on @p out and return exit_ok (--version --json its JSON document); a usage error writes
/// one line starting "cudrv-query: " on @p err (and, when --json is among the arguments, the JSON
/// document of usage_error_to_json() on @p out) and returns exit_usage. Otherwise returns the command
/// line. --version reads the driver's version (loading it).
[[nodiscard]] std::variant<command_line, int> parse_command_line(int argc, const char* const* argv, std::ostream& out,
                                                                 std::ostream& err);

/// Runs a parsed command line: collects, prints the view on @p out (text or JSON) and failures on
/// @p err, and returns the exit status: exit_output_error, with one line on @p err, when the run
/// succeeded but @p out failed (checked after a flush). @p out_is_terminal decides --color=auto.
[[nodiscard]] int run(const command_line& cmd, std::ostream& out, std::ostream& err, bool out_is_terminal);

/// parse_command_line() then run(): the whole of cudrv-query; returns the exit status (exit_output_error
/// also when the text of --help or --version could not be written).
[[nodiscard]] int run(int argc, const char* const* argv, std::ostream& out, std::ostream& err, bool out_is_terminal);

/// "13.0" for 13000, "12.9" for 12090; "unknown" for 0.
[[nodiscard]] std::string format_cuda_version(int version);

/// "79.6 GiB" from 1 GiB up, "512 MiB" from 1 MiB, "48 KiB" from 1 KiB, else "100 B".
[[nodiscard]] std::string format_memory(std::size_t bytes);

}  // namespace cudrv_query
