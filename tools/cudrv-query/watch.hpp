// cudrv-query --watch: the selected GPUs sampled at an interval through NVML (<cudrv/system.hpp>), like
// `nvidia-smi dmon` and `nvidia-smi --query-gpu=... -l`: a compact one-line-per-GPU text table, JSON
// lines, or CSV with nvidia-smi's field names and conventions. No CUDA context is created.
//
// The steps are separate so that tests can check each without a GPU: parse_watch_query() reads a
// --watch-query list, watch_sampler reads the GPUs, the watch_*_line() functions format a sample, and
// run_watch() schedules the samples against a steady clock.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cudrv::system {
struct nvlink_traffic;
}

namespace cudrv_query {

struct system_info;

/// Every field --watch can show (docs/cudrv-query.md, "Watch fields", lists them with units).
enum class watch_field {
  timestamp,             ///< wall-clock time of the sample, nvidia-smi's format
  elapsed,               ///< seconds since the watch started (steady clock)
  index,                 ///< NVML's index (nvidia-smi's)
  ordinal,               ///< CUDA's ordinal
  uuid,                  ///< the GPU's UUID
  name,                  ///< the product name
  pci_bus_id,            ///< the PCI bus id, nvidia-smi's form
  pstate,                ///< the performance state, P0 to P15
  utilization_gpu,       ///< percent of time a kernel ran
  utilization_memory,    ///< percent of time device memory was read or written
  memory_total,          ///< MiB
  memory_used,           ///< MiB
  memory_free,           ///< MiB
  memory_reserved,       ///< MiB reserved by the driver (not in memory_used)
  power_draw,            ///< W
  power_limit,           ///< W, the power-management limit
  clocks_sm,             ///< MHz
  clocks_mem,            ///< MHz
  clocks_gr,             ///< MHz
  temperature_gpu,       ///< degrees C
  temperature_memory,    ///< degrees C (HBM)
  clocks_event_reasons,  ///< the clock-event ("throttle") reasons mask
  pcie_tx,               ///< MiB/s sent over PCIe (NVML's 20 ms sample)
  pcie_rx,               ///< MiB/s received over PCIe
  nvlink_tx,             ///< MiB/s sent over every NVLink, between two samples
  nvlink_rx,             ///< MiB/s received over every NVLink
  processes_count,       ///< processes using the GPU
};

/// What is known of a field: its names, units and source.
struct watch_field_info {
  watch_field field;      ///< the field
  const char* name;       ///< its --watch-query name (nvidia-smi's where it has one)
  const char* unit;       ///< the unit of its CSV header ("" where nvidia-smi prints none)
  const char* column;     ///< its text column's header
  const char* text_unit;  ///< its text column's unit line
  int width;              ///< its text column's width
};

/// Every field, in the default order of the CSV and JSON-lines output.
[[nodiscard]] const std::vector<watch_field_info>& watch_fields();

/// The fields of the text output when --watch-query is not given.
[[nodiscard]] std::vector<watch_field> default_text_fields();

/// Parses a --watch-query list ("index,utilization.gpu,memory.used"; spaces around names are
/// ignored). nvidia-smi's other names of the same fields are accepted (clocks.current.sm,
/// clocks_throttle_reasons.active, ...). @p names receives each name as given (the CSV header).
/// @return the fields, or empty with @p error naming the bad name and listing the valid ones
[[nodiscard]] std::optional<std::vector<watch_field>> parse_watch_query(std::string_view text,
                                                                        std::vector<std::string>& names,
                                                                        std::string& error);

/// The output of --watch.
enum class watch_format { text, jsonl, csv };

/// The settings of --watch.
struct watch_options {
  double interval_s = 1.0;                   ///< --watch-interval
  long long count = 0;                       ///< --watch-count; 0: no bound
  double duration_s = 0;                     ///< --watch-duration; 0: no bound
  watch_format format = watch_format::text;  ///< --watch-format (--json: jsonl)
  bool header = true;                        ///< CSV: the header line (csv,noheader drops it)
  bool units = true;                         ///< CSV: units with the values (csv,nounits drops them)
  std::vector<watch_field> fields;           ///< --watch-query; empty: the format's default
  std::vector<std::string> names;            ///< the fields' names as given
  bool processes = false;                    ///< --watch-processes
};

/// Parses a --watch-format value: text, jsonl, or csv with nvidia-smi's modifiers (csv,noheader,nounits
/// in any order). @return an error message, empty when @p text is valid
[[nodiscard]] std::string parse_watch_format(std::string_view text, watch_options& options);

/// The samples of --watch: the most the bounds allow (0: no bound). Samples are due on slots, whole
/// intervals after the start, as long as the slot is within --watch-duration (at least one sample); a
/// slot missed while a sample took longer than an interval is skipped, so a run may take fewer.
[[nodiscard]] long long watch_sample_limit(const watch_options& options) noexcept;

/// NVLink throughput between two readings, bytes per second.
struct watch_rates {
  double tx_bytes_per_s = 0;  ///< sent
  double rx_bytes_per_s = 0;  ///< received
};

/// The NVLink rates from @p before to @p after (NVML's timestamps give the interval). Empty where the
/// readings are not comparable (another source of counters, or another set of links summed: a link
/// that dropped out or came back), a counter fell (a driver reload) or NVML's timestamp did not advance:
/// such a sample has no rate, never a negative or a huge one.
[[nodiscard]] std::optional<watch_rates> watch_nvlink_rate(const cudrv::system::nvlink_traffic& before,
                                                           const cudrv::system::nvlink_traffic& after) noexcept;

/// A process on a GPU.
struct watch_process {
  unsigned int pid = 0;                          ///< its id
  std::string name;                              ///< /proc/<pid>/comm, "" where it cannot be read
  std::optional<unsigned long long> used_bytes;  ///< device memory it uses
};

/// One GPU at one sample; each reading empty where NVML does not give it.
struct watch_sample {
  long long sample = 0;                                     ///< the sample's number, from 1
  std::string timestamp;                                    ///< "2026/11/28 20:10:00.123", local time
  std::string time_of_day;                                  ///< "20:10:00", for the text table
  double elapsed_s = 0;                                     ///< seconds since the watch started
  int ordinal = 0;                                          ///< CUDA ordinal
  std::optional<unsigned int> index;                        ///< NVML index
  std::string uuid;                                         ///< UUID
  std::string name;                                         ///< product name
  std::optional<std::string> pci_bus_id;                    ///< "00000000:1B:00.0"
  std::optional<int> pstate;                                ///< 0 to 15
  std::optional<unsigned int> utilization_gpu;              ///< percent
  std::optional<unsigned int> utilization_memory;           ///< percent
  std::optional<unsigned long long> memory_total_bytes;     ///< bytes
  std::optional<unsigned long long> memory_used_bytes;      ///< bytes
  std::optional<unsigned long long> memory_free_bytes;      ///< bytes
  std::optional<unsigned long long> memory_reserved_bytes;  ///< bytes
  std::optional<double> power_draw_w;                       ///< watts
  std::optional<double> power_limit_w;                      ///< watts
  std::optional<unsigned int> clocks_sm_mhz;                ///< MHz
  std::optional<unsigned int> clocks_mem_mhz;               ///< MHz
  std::optional<unsigned int> clocks_gr_mhz;                ///< MHz
  std::optional<unsigned int> temperature_gpu_c;            ///< degrees C
  std::optional<unsigned int> temperature_memory_c;         ///< degrees C
  std::optional<std::uint64_t> clocks_event_reasons;        ///< NVML's mask
  std::optional<double> pcie_tx_bytes_per_s;                ///< bytes per second
  std::optional<double> pcie_rx_bytes_per_s;                ///< bytes per second
  std::optional<double> nvlink_tx_bytes_per_s;              ///< bytes per second
  std::optional<double> nvlink_rx_bytes_per_s;              ///< bytes per second
  std::optional<std::vector<watch_process>> processes;      ///< the processes, when read
};

/// The fields a run shows: options.fields, or the format's default.
[[nodiscard]] std::vector<watch_field> watch_shown_fields(const watch_options& options);

/// The CSV header line (nvidia-smi's: "index, utilization.gpu [%], memory.used [MiB]"), with '\n'.
[[nodiscard]] std::string watch_csv_header(const watch_options& options);
/// One CSV line: values separated by ", ", "[N/A]" where NVML gave none; with '\n'.
[[nodiscard]] std::string watch_csv_line(const watch_sample& s, const watch_options& options);
/// One JSON-lines object (schema $defs/watch_sample), with '\n'.
[[nodiscard]] std::string watch_json_line(const watch_sample& s, const watch_options& options);
/// The two header lines of the text table (names, units), each starting with '#'.
[[nodiscard]] std::string watch_text_header(const watch_options& options);
/// One text line per GPU, and with --watch-processes a line per process under it.
[[nodiscard]] std::string watch_text_lines(const watch_sample& s, const watch_options& options);

/// Reads the selected GPUs through NVML. The constructor finds each GPU (by UUID) and reads the NVLink
/// counters once, so that the first sample has a rate.
class watch_sampler {
 public:
  /// Prepares the devices of @p info (NVML must be available).
  watch_sampler(const system_info& info, const watch_options& options);
  ~watch_sampler();                                         ///< releases nothing NVML holds
  watch_sampler(const watch_sampler&) = delete;             ///< not copyable
  watch_sampler& operator=(const watch_sampler&) = delete;  ///< not copyable
  /// One sample of every GPU: sample number @p sample, @p elapsed_s seconds after the start. Readings
  /// NVML does not give, or that fail, are empty.
  [[nodiscard]] std::vector<watch_sample> sample(long long sample, double elapsed_s);

 private:
  struct state;
  std::unique_ptr<state> state_;
};

/// Runs --watch on the selected devices: samples on the slots of the interval (skipping those a slow
/// sample missed) until the count is reached, the duration has passed on the clock, or SIGINT or
/// SIGTERM arrives (the sample in progress is finished and written; a signal ignored on entry stays
/// ignored, and the first one puts the previous disposition back), writing and flushing each sample on
/// @p out; stops early when @p out fails (the caller reports that).
/// @return exit_ok
[[nodiscard]] int run_watch(const system_info& info, const watch_options& options, std::ostream& out);

}  // namespace cudrv_query
