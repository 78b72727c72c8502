// cudrv-query --bandwidth (issue 36: bandwidth): nvbandwidth's copy patterns, measured the way
// nvbandwidth measures them, so that the figures can be set beside its own.
//
// Every test is named after nvbandwidth's test of the same pattern (host_to_device_memcpy_ce, ...);
// the one pattern nvbandwidth has no single-node test for (all-to-all) has a name of its own and no
// nvbandwidth_name. How a figure is made (bandwidth.cpp): per sample, a spin kernel blocks every
// stream of the pattern on a flag in host memory while the copies are enqueued (a start event, four
// untimed warm-up copies, `iterations` timed copies, an end event per stream); the flag is released,
// the streams drain and bandwidth = bytes copied / the time between the events. The figure reported is
// the median over `samples` samples, as nvbandwidth reports by default.
#pragma once

#include <cstddef>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cudrv_query {

/// What moves the bytes of a test.
enum class bandwidth_engine {
  ce,  ///< the copy engines: cuMemcpyAsync
  sm,  ///< the multiprocessors: a copy kernel (or the pointer-chase kernel of a latency test)
};

/// One test the view can run, from the table all_bandwidth_tests().
struct bandwidth_test_desc {
  const char* name;              ///< the test's name for --bandwidth-tests (nvbandwidth's where it has one)
  const char* nvbandwidth_name;  ///< nvbandwidth's name of the same test; nullptr when it has none
  bandwidth_engine engine;       ///< copy engine or SM copy
  bool needs_peers;              ///< needs two devices with peer access (else it is skipped)
  bool latency;                  ///< a latency test (ns), not a bandwidth test (GB/s)
  const char* description;       ///< one line, for --help and the manual
};

/// Every test of the view, in the order they run (nvbandwidth's order; all-to-all last).
[[nodiscard]] const std::vector<bandwidth_test_desc>& all_bandwidth_tests();

/// The test named @p name, or nullptr.
[[nodiscard]] const bandwidth_test_desc* find_bandwidth_test(std::string_view name);

/// The settings of --bandwidth.
struct bandwidth_options {
  std::size_t size = std::size_t{512} << 20;  ///< bytes per copy (nvbandwidth's default, 512 MiB)
  int iterations = 16;                        ///< timed copies per sample (nvbandwidth's loop count)
  int samples = 3;                            ///< samples per figure; the median is reported
  std::vector<std::string> tests;             ///< names to run (validated); empty: every test
  bool progress = true;                       ///< progress line on stderr
};

/// The most --bandwidth-iterations a run with a copy-engine test takes. Each timed CE copy is one
/// cuMemcpyAsync, enqueued while a spin kernel holds every stream of the test (the spin gives up after
/// 10 s); at most 1004 calls per stream (with the warm-up) and at most 56 streams (all-to-all on eight
/// GPUs) keep the enqueue far below that. An SM test is one launch whatever the count. A spin that
/// times out anyway is detected and refuses the sample (run_bandwidth throws).
inline constexpr int max_ce_iterations = 1000;

/// Usage check of @p o: empty when fine, else the message (iterations above max_ce_iterations while
/// a copy-engine test is selected; no test named means every test, the CE tests among them).
[[nodiscard]] std::string check_bandwidth_options(const bandwidth_options& o);

/// Accesses of a latency test in all (nvbandwidth's count), split over one launch per multiprocessor.
inline constexpr unsigned long latency_accesses = 1000000;

/// Bytes of the pointer chain of a latency test (nvbandwidth runs its latency tests on 2 MiB).
inline constexpr std::size_t latency_buffer_bytes = std::size_t{2} << 20;

/// One matrix of figures: rows by columns, each value empty where nothing was measured (a device
/// with itself, a pair without peer access).
struct bandwidth_matrix {
  std::string title;  ///< e.g. "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)"
  std::string key;    ///< nvbandwidth's key of this matrix (its test name, or with _read1, _total ...)
  std::vector<std::string> row_labels;                     ///< "CPU" or device ordinals ("0", "1", ...)
  std::vector<std::string> column_labels;                  ///< device ordinals, or "total"
  std::vector<std::vector<std::optional<double>>> values;  ///< [row][column]
};

/// The result of one test.
struct bandwidth_test_result {
  const bandwidth_test_desc* desc = nullptr;  ///< which test
  std::vector<bandwidth_matrix> matrices;     ///< one, or three (read1/read2/total) for the bidirectional device tests
  std::string skipped;                        ///< why it did not run (e.g. one device); empty when it ran
};

/// Where a device's host buffers were placed.
struct bandwidth_host_node {
  int ordinal = 0;     ///< CUDA ordinal
  int numa_node = -1;  ///< /sys/bus/pci/devices/<bdf>/numa_node; -1 when the system does not say
  bool bound = false;  ///< the allocation was bound to that node (memory policy and CPU affinity)
  bool used = false;   ///< a test allocated host memory for this GPU
};

/// The results of --bandwidth.
struct bandwidth_results {
  bandwidth_options options;                    ///< what was run
  std::vector<bandwidth_host_node> host_nodes;  ///< one per selected device
  std::vector<bandwidth_test_result> tests;     ///< in the order run
};

/// nvbandwidth's size rule for SM copies: at least 64 MiB, the striding kernel's truncation to a whole
/// number of uint4 elements per thread (@p multiprocessors x 512 threads); below, 16-byte elements.
[[nodiscard]] std::size_t sm_copy_bytes(std::size_t size, int multiprocessors) noexcept;

/// The PCI bus id "0000:c1:00.0" in the form sysfs names it (lower case), and the NUMA node sysfs
/// gives for it under @p sysfs_root (normally "/sys/bus/pci/devices"); -1 when unknown.
[[nodiscard]] int numa_node_of(const std::string& pci_bus_id, const std::string& sysfs_root);

/// While alive, the calling thread runs on the CPUs of NUMA node @p node
/// (/sys/devices/system/node/node<N>/cpulist) and prefers that node's memory (set_mempolicy,
/// MPOL_PREFERRED), so that host memory allocated and touched meanwhile lands there; the destructor
/// puts back the CPU affinity and memory policy it found. A node < 0, or a system that refuses,
/// changes nothing (bound() is false).
class bind_to_node {
 public:
  explicit bind_to_node(int node);  ///< binds (see the class)
  ~bind_to_node();                  ///< restores
  bind_to_node(const bind_to_node&) = delete;
  bind_to_node& operator=(const bind_to_node&) = delete;
  /// Whether both the affinity and the memory policy were set.
  [[nodiscard]] bool bound() const noexcept { return affinity_set_ && policy_set_; }

 private:
  struct saved;
  std::unique_ptr<saved> saved_;
  bool affinity_set_ = false;
  bool policy_set_ = false;
};

/// Runs the selected tests on the devices @p ordinals (each with the PCI bus id beside it, for the NUMA
/// node). Creates contexts, enables peer access where possible, allocates options.size bytes per buffer.
/// @throws cudrv::error on a CUDA failure; cudrv::error (CUDA_ERROR_UNKNOWN, naming the test, the cell
/// and the byte's offset) when a copy's bytes are wrong afterwards; cudrv::error (CUDA_ERROR_TIMEOUT)
/// when a spin kernel timed out before a sample was enqueued (lower the iterations);
/// cudrv::invalid_argument_error when check_bandwidth_options() refuses @p options
[[nodiscard]] bandwidth_results run_bandwidth(const std::vector<int>& ordinals,
                                              const std::vector<std::string>& pci_bus_ids,
                                              const bandwidth_options& options);

/// The text of the view: one block per test, nvbandwidth's layout (a "Running <name>." line, the
/// matrix title, a column header and one line per row, "N/A" where empty), plus the settings.
void print_bandwidth_text(std::ostream& out, const bandwidth_results& r);

/// Usage check of a --bandwidth-tests list (comma-separated): empty when every name is known (the
/// names go to @p out), else the message naming the first unknown name.
[[nodiscard]] std::string parse_bandwidth_tests(std::string_view list, std::vector<std::string>& out);

}  // namespace cudrv_query
