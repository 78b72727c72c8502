// cudrv-query --bandwidth: nvbandwidth's copy patterns (bandwidth.hpp says how a figure is made).
//
// A test is a list of copies that run at the same time, each on its own non-blocking stream of the
// device that runs it (the "context" nvbandwidth prefers: the source device for a write, the
// destination device for a read, the device for a copy with host memory). measure() times such a
// list; the pattern functions below build the lists test by test, with fresh buffers per
// measurement as nvbandwidth allocates them. Host buffers are page-locked and placed on the NUMA node
// of the GPU they are copied with (bind_to_node below). After every sample the destination of each
// copy is read back and checked, byte for byte, against the source's pattern.
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <numeric>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <cudrv/copy.hpp>
#include <cudrv/device.hpp>
#include <cudrv/device_buffer.hpp>
#include <cudrv/error.hpp>
#include <cudrv/event.hpp>
#include <cudrv/launch.hpp>
#include <cudrv/library.hpp>
#include <cudrv/object_code.hpp>
#include <cudrv/pinned_buffer.hpp>
#include <cudrv/stream.hpp>

#include "bandwidth.hpp"
#include "bandwidth_detail.hpp"

namespace cudrv_query {

namespace {

using engine = bandwidth_engine;

constexpr int warmup_copies = 4;                             // nvbandwidth's WARMUP_COUNT
constexpr unsigned int threads_per_block = 512;              // its SM copies' block size
constexpr std::size_t small_buffer = std::size_t{64} << 20;  // below: the simple copy kernel
constexpr long long spin_timeout_ms = 10000;                 // the spin kernel gives up after this
constexpr std::size_t chain_stride = 128;                    // bytes between the links of a pointer chain
constexpr std::size_t check_chunk = std::size_t{32} << 20;   // bytes read back at a time when checking
constexpr std::byte poison{0xEE};                            // a destination before a copy

const std::vector<bandwidth_test_desc> tests_table = {
    {"host_to_device_memcpy_ce", "host_to_device_memcpy_ce", engine::ce, false, false, "host to device"},
    {"device_to_host_memcpy_ce", "device_to_host_memcpy_ce", engine::ce, false, false, "device to host"},
    {"host_to_device_bidirectional_memcpy_ce", "host_to_device_bidirectional_memcpy_ce", engine::ce, false, false,
     "host to device, measured while device to host runs"},
    {"device_to_host_bidirectional_memcpy_ce", "device_to_host_bidirectional_memcpy_ce", engine::ce, false, false,
     "device to host, measured while host to device runs"},
    {"device_to_device_memcpy_read_ce", "device_to_device_memcpy_read_ce", engine::ce, true, false,
     "each pair: the row device reads the column device's memory"},
    {"device_to_device_memcpy_write_ce", "device_to_device_memcpy_write_ce", engine::ce, true, false,
     "each pair: the row device writes the column device's memory"},
    {"device_to_device_bidirectional_memcpy_read_ce", "device_to_device_bidirectional_memcpy_read_ce", engine::ce, true,
     false, "each pair, both devices reading the other's memory at once"},
    {"device_to_device_bidirectional_memcpy_write_ce", "device_to_device_bidirectional_memcpy_write_ce", engine::ce,
     true, false, "each pair, both devices writing the other's memory at once"},
    {"all_to_host_memcpy_ce", "all_to_host_memcpy_ce", engine::ce, false, false,
     "device to host while every other device copies to the host"},
    {"all_to_host_bidirectional_memcpy_ce", "all_to_host_bidirectional_memcpy_ce", engine::ce, false, false,
     "device to host while host to device runs on it and both ways on every other device"},
    {"host_to_all_memcpy_ce", "host_to_all_memcpy_ce", engine::ce, false, false,
     "host to device while the host copies to every other device"},
    {"host_to_all_bidirectional_memcpy_ce", "host_to_all_bidirectional_memcpy_ce", engine::ce, false, false,
     "host to device while device to host runs on it and both ways on every other device"},
    {"all_to_one_write_ce", "all_to_one_write_ce", engine::ce, true, false,
     "every other device writes the column device's memory at once: total"},
    {"all_to_one_read_ce", "all_to_one_read_ce", engine::ce, true, false,
     "every other device reads the column device's memory at once: total"},
    {"one_to_all_write_ce", "one_to_all_write_ce", engine::ce, true, false,
     "the column device writes every other device's memory at once: total"},
    {"one_to_all_read_ce", "one_to_all_read_ce", engine::ce, true, false,
     "the column device reads every other device's memory at once: total"},
    {"host_to_device_memcpy_sm", "host_to_device_memcpy_sm", engine::sm, false, false, "host to device"},
    {"device_to_host_memcpy_sm", "device_to_host_memcpy_sm", engine::sm, false, false, "device to host"},
    {"host_to_device_bidirectional_memcpy_sm", "host_to_device_bidirectional_memcpy_sm", engine::sm, false, false,
     "both ways in one kernel (alternate warps), half the total"},
    {"device_to_host_bidirectional_memcpy_sm", "device_to_host_bidirectional_memcpy_sm", engine::sm, false, false,
     "both ways in one kernel (alternate warps), half the total"},
    {"device_to_device_memcpy_read_sm", "device_to_device_memcpy_read_sm", engine::sm, true, false,
     "each pair: the row device reads the column device's memory"},
    {"device_to_device_memcpy_write_sm", "device_to_device_memcpy_write_sm", engine::sm, true, false,
     "each pair: the row device writes the column device's memory"},
    {"device_to_device_bidirectional_memcpy_read_sm", "device_to_device_bidirectional_memcpy_read_sm", engine::sm, true,
     false, "each pair, both devices reading the other's memory at once"},
    {"device_to_device_bidirectional_memcpy_write_sm", "device_to_device_bidirectional_memcpy_write_sm", engine::sm,
     true, false, "each pair, both devices writing the other's memory at once"},
    {"all_to_host_memcpy_sm", "all_to_host_memcpy_sm", engine::sm, false, false,
     "device to host while every other device copies to the host"},
    {"all_to_host_bidirectional_memcpy_sm", "all_to_host_bidirectional_memcpy_sm", engine::sm, false, false,
     "both ways on the device (alternate warps) while every other device copies to the host"},
    {"host_to_all_memcpy_sm", "host_to_all_memcpy_sm", engine::sm, false, false,
     "host to device while the host copies to every other device"},
    {"host_to_all_bidirectional_memcpy_sm", "host_to_all_bidirectional_memcpy_sm", engine::sm, false, false,
     "both ways on the device (alternate warps) while the host copies to every other device"},
    {"all_to_one_write_sm", "all_to_one_write_sm", engine::sm, true, false,
     "every other device writes the column device's memory at once: total"},
    {"all_to_one_read_sm", "all_to_one_read_sm", engine::sm, true, false,
     "every other device reads the column device's memory at once: total"},
    {"one_to_all_write_sm", "one_to_all_write_sm", engine::sm, true, false,
     "the column device writes every other device's memory at once: total"},
    {"one_to_all_read_sm", "one_to_all_read_sm", engine::sm, true, false,
     "the column device reads every other device's memory at once: total"},
    {"host_device_latency_sm", "host_device_latency_sm", engine::sm, false, true,
     "dependent loads from the device over a chain in host memory, ns each"},
    {"device_to_device_latency_sm", "device_to_device_latency_sm", engine::sm, true, true,
     "dependent loads by the row device over a chain in the column device's memory, ns each"},
    {"device_local_copy", "device_local_copy", engine::ce, false, false, "within each device"},
    {"all_to_all_memcpy_write_ce", nullptr, engine::ce, true, false,
     "every device writes every other device's memory at once: total (no nvbandwidth test)"},
    {"all_to_all_memcpy_write_sm", nullptr, engine::sm, true, false,
     "every device writes every other device's memory at once: total (no nvbandwidth test)"},
};

double median(std::vector<double> v) {
  if (v.empty()) {
    return 0;
  }
  std::sort(v.begin(), v.end());
  // nvbandwidth's median: the middle value, or the mean of the two middle values.
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// --- host memory on a NUMA node --------------------------------------------------------------------

constexpr int mpol_preferred = 1;  // <linux/mempolicy.h>'s MPOL_PREFERRED
constexpr unsigned long max_nodes = 1024;
using node_mask = std::array<unsigned long, max_nodes / (8 * sizeof(unsigned long))>;

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

/// "0-15,32-47" (sysfs's cpulist) into a CPU set; false when it cannot be read.
bool parse_cpulist(const std::string& list, cpu_set_t& set) {
  CPU_ZERO(&set);
  bool any = false;
  std::size_t pos = 0;
  while (pos < list.size()) {
    std::size_t end = list.find(',', pos);
    if (end == std::string::npos) {
      end = list.size();
    }
    const std::string item = list.substr(pos, end - pos);
    unsigned first = 0;
    unsigned last = 0;
    const int n = std::sscanf(item.c_str(), "%u-%u", &first, &last);
    if (n < 1) {
      return false;
    }
    for (unsigned c = first; c <= (n == 2 ? last : first) && c < CPU_SETSIZE; ++c) {
      CPU_SET(c, &set);
      any = true;
    }
    pos = end + 1;
  }
  return any;
}

// --- buffers and the measurement ------------------------------------------------------------------

/// One allocation: device memory of one device, or page-locked host memory (device == -1).
struct buffer {
  int device = -1;
  std::size_t bytes = 0;
  std::optional<cudrv::device_buffer<std::byte>> dev;
  std::optional<cudrv::pinned_buffer<std::byte>> host;

  [[nodiscard]] std::uintptr_t address() const {
    return dev ? reinterpret_cast<std::uintptr_t>(dev->get()) : reinterpret_cast<std::uintptr_t>(host->data());
  }
};

/// One copy of a test: from src to dst, on a stream of device `exec`.
struct copy_op {
  buffer* src;
  buffer* dst;
  int exec;
};

/// CUDRV_QUERY_BANDWIDTH_UNGATED set and not empty (for tests only): no spin kernel holds the streams,
/// so that a sanitizer that serialises kernel launches can run the SM copies (their figures then do
/// not mean what the view's figures mean: the copies start as they are enqueued).
bool ungated_for_tests() {
  const char* v = std::getenv("CUDRV_QUERY_BANDWIDTH_UNGATED");
  return v != nullptr && *v != '\0';
}

/// Which figure a measurement gives (nvbandwidth's BandwidthValue).
enum class figure {
  first,  ///< the first copy's bandwidth; the others interfere
  total,  ///< all bytes over the time from the first start to the last end
  each,   ///< every copy's bandwidth
};

/// What every measurement of a run shares.
class session {
 public:
  session(const std::vector<int>& ordinals, const std::vector<std::string>& bus_ids, const bandwidth_options& o,
          bandwidth_results& results)
      : options_(o),
        lib_(cudrv::object_code(cudrv::code_kind::ptx, detail::bandwidth_kernels_ptx(), "cudrv_query_bandwidth.ptx")),
        spin_(lib_.get_kernel("cudrv_bw_spin")),
        copy_(lib_.get_kernel("cudrv_bw_copy")),
        copy_small_(lib_.get_kernel("cudrv_bw_copy_small")),
        copy_split_(lib_.get_kernel("cudrv_bw_copy_split")),
        chase_(lib_.get_kernel("cudrv_bw_chase")),
        gated_(!ungated_for_tests()) {
    for (std::size_t i = 0; i < ordinals.size(); ++i) {
      devices_.emplace_back(ordinals[i]);
      bandwidth_host_node n;
      n.ordinal = ordinals[i];
      n.numa_node = numa_node_of(i < bus_ids.size() ? bus_ids[i] : std::string(), "/sys/bus/pci/devices");
      results.host_nodes.push_back(n);
    }
    nodes_ = &results.host_nodes;
    flag_.emplace(devices_.front(), std::size_t{2});  // [0]: release, [1]: a spin timed out
    std::memset(flag_->data(), 0, 2 * sizeof(int));
    // Peer access wherever the driver allows it, both ways, as nvbandwidth enables it.
    for (const cudrv::device& a : devices_) {
      for (const cudrv::device& b : devices_) {
        if (a.ordinal() != b.ordinal() && a.can_access_peer(b)) {
          a.enable_peer_access(b);
        }
      }
    }
  }

  [[nodiscard]] const bandwidth_options& options() const noexcept { return options_; }
  [[nodiscard]] std::size_t count() const noexcept { return devices_.size(); }
  [[nodiscard]] int ordinal(std::size_t i) const { return devices_[i].ordinal(); }
  [[nodiscard]] const cudrv::device& device_of(int ordinal) const {
    return *std::find_if(devices_.begin(), devices_.end(),
                         [&](const cudrv::device& d) { return d.ordinal() == ordinal; });
  }
  [[nodiscard]] bool peers(int a, int b) const { return device_of(a).can_access_peer(device_of(b)); }
  /// Peer access from @p a to @p b and from @p b to @p a (for patterns that run copies on both).
  [[nodiscard]] bool peers_both_ways(int a, int b) const { return peers(a, b) && peers(b, a); }

  buffer device_buffer(int ordinal, std::size_t bytes) {
    buffer b;
    b.device = ordinal;
    b.bytes = bytes;
    b.dev.emplace(device_of(ordinal), bytes);
    return b;
  }

  /// Page-locked host memory on the NUMA node of device @p ordinal.
  buffer host_buffer(int ordinal, std::size_t bytes) {
    buffer b;
    b.bytes = bytes;
    for (bandwidth_host_node& n : *nodes_) {
      if (n.ordinal == ordinal) {
        bind_to_node bind(n.numa_node);
        b.host.emplace(device_of(ordinal), bytes);
        n.bound = bind.bound();
        n.used = true;
      }
    }
    return b;
  }

  /// Times @p ops (see the file's head); @p cell names the test and matrix cell, for errors.
  std::vector<double> measure(const std::vector<copy_op>& ops, engine e, bool split, figure f, const std::string& cell);
  double chase(int ordinal, const buffer& chain);

 private:
  std::size_t copy_bytes(const copy_op& op, engine e, bool split) const;
  void enqueue(const copy_op& op, engine e, bool split, cudrv::stream_ref s, int copies);
  void prepare(const std::vector<copy_op>& ops, bool split);
  void check(const std::vector<copy_op>& ops, const std::vector<std::size_t>& bytes, bool split,
             const std::string& cell) const;

  bandwidth_options options_;
  std::vector<cudrv::device> devices_;
  std::vector<bandwidth_host_node>* nodes_ = nullptr;
  cudrv::library lib_;
  cudrv::kernel spin_, copy_, copy_small_, copy_split_, chase_;
  bool gated_ = true;  ///< the spin kernel holds the streams until every copy is enqueued
  std::optional<cudrv::pinned_buffer<int>> flag_;
};

/// The pattern byte of copy @p i's source.
std::byte pattern_of(std::size_t i) { return static_cast<std::byte>(0x21 + (i * 37) % 0xC0); }

std::size_t small_copy_bytes(std::size_t size) {
  const std::size_t elements = size / 16;
  const std::size_t block = std::min<std::size_t>(elements, 1024);
  return block == 0 ? 0 : (elements / block) * block * 16;
}

std::size_t session::copy_bytes(const copy_op& op, engine e, bool split) const {
  if (e == engine::ce) {
    return op.src->bytes;
  }
  if (split) {
    return small_copy_bytes(op.src->bytes);
  }
  return sm_copy_bytes(op.src->bytes, device_of(op.exec).attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT));
}

void session::enqueue(const copy_op& op, engine e, bool split, cudrv::stream_ref s, int copies) {
  const std::size_t bytes = copy_bytes(op, e, split);
  if (e == engine::ce) {
    auto* dst = reinterpret_cast<std::byte*>(op.dst->address());
    const auto* src = reinterpret_cast<const std::byte*>(op.src->address());
    for (int c = 0; c < copies; ++c) {
      cudrv::copy(std::span<std::byte>(dst, bytes), std::span<const std::byte>(src, bytes), s);
    }
    return;
  }
  const auto loops = static_cast<std::uint64_t>(copies);
  const std::uint64_t dst = op.dst->address();
  const std::uint64_t src = op.src->address();
  if (split || op.src->bytes < small_buffer) {
    const std::size_t elements = op.src->bytes / 16;
    const auto block = static_cast<unsigned int>(std::min<std::size_t>(elements, 1024));
    const auto grid = static_cast<unsigned int>(elements / block);
    cudrv::launch(s, {.grid = grid, .block = block}, split ? copy_split_ : copy_small_, loops, dst, src);
    return;
  }
  const auto sms = static_cast<unsigned int>(device_of(op.exec).attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT));
  const std::uint64_t threads = std::uint64_t{sms} * threads_per_block;
  const std::uint64_t chunk = bytes / 16 / threads;
  cudrv::launch(s, {.grid = sms, .block = threads_per_block}, copy_, threads, loops, dst, src, chunk);
}

/// Sources get their pattern, destinations the poison (for a split-warp copy, the destination gets
/// a pattern too: half of it is copied back into the source).
void session::prepare(const std::vector<copy_op>& ops, bool split) {
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const std::pair<buffer*, std::byte> fills[] = {{ops[i].src, pattern_of(i)},
                                                   {ops[i].dst, split ? pattern_of(i + 1) : poison}};
    for (const auto& [b, value] : fills) {
      if (b->host) {
        std::memset(b->host->data(), static_cast<int>(value), b->bytes);
      } else {
        cudrv::fill(*b->dev, value);
      }
    }
  }
}

/// A cudrv::error of the view itself (no driver call failed): @p code names the kind of failure.
cudrv::error bandwidth_error(CUresult code, const char* name, const char* description, std::string context) {
  return {cudrv::error_source::cudrv, static_cast<int>(code), name, description,
          "cudrv-query --bandwidth",  std::move(context)};
}

/// Reads @p bytes of @p b from @p offset into @p out (a device buffer through a synchronous copy).
void read_back(const buffer& b, std::size_t offset, std::span<std::byte> out) {
  if (b.host) {
    std::memcpy(out.data(), b.host->data() + offset, out.size());
  } else {
    cudrv::copy(out, b.dev->view().subspan(offset, out.size()));
  }
}

/// Throws when a byte of @p b below @p bytes differs from what the copy should have left: @p odd for
/// the bytes of odd 512-byte blocks (odd warps' elements), @p even for the others (nothing to check
/// where empty). Compared a 512-byte block at a time against a block of the expected byte.
void expect(const buffer& b, std::size_t bytes, std::optional<std::byte> even, std::optional<std::byte> odd,
            const std::string& what) {
  constexpr std::size_t block = 512;
  std::vector<std::byte> chunk(std::min(bytes, check_chunk));
  std::array<std::byte, block> even_block{};
  std::array<std::byte, block> odd_block{};
  even_block.fill(even.value_or(std::byte{0}));
  odd_block.fill(odd.value_or(std::byte{0}));
  for (std::size_t offset = 0; offset < bytes; offset += chunk.size()) {  // check_chunk: whole blocks
    const std::size_t n = std::min(chunk.size(), bytes - offset);
    read_back(b, offset, std::span(chunk).first(n));
    for (std::size_t at = 0; at < n; at += block) {
      const bool is_odd = ((offset + at) / block) % 2 == 1;
      const std::optional<std::byte>& want = is_odd ? odd : even;
      const std::size_t len = std::min(block, n - at);
      if (!want || std::memcmp(chunk.data() + at, (is_odd ? odd_block : even_block).data(), len) == 0) {
        continue;
      }
      std::size_t k = at;
      while (chunk[k] == *want) {
        ++k;
      }
      char message[200];
      std::snprintf(message, sizeof message, "%s: byte %zu is 0x%02x, the copy should have left 0x%02x", what.c_str(),
                    offset + k, static_cast<unsigned>(chunk[k]), static_cast<unsigned>(*want));
      throw bandwidth_error(CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "a copy left wrong bytes", message);
    }
  }
}

void session::check(const std::vector<copy_op>& ops, const std::vector<std::size_t>& bytes, bool split,
                    const std::string& cell) const {
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const std::string what =
        "bandwidth check of " + cell + ", copy " + std::to_string(i) + " (device " + std::to_string(ops[i].exec) + ")";
    if (split) {  // odd warps copied src to dst, even warps dst to src
      expect(*ops[i].dst, bytes[i], std::nullopt, pattern_of(i), what);
      expect(*ops[i].src, bytes[i], pattern_of(i + 1), std::nullopt, what);
    } else {
      expect(*ops[i].dst, bytes[i], pattern_of(i), pattern_of(i), what);
    }
  }
}

/// Bytes per second as nvbandwidth computes it: the elapsed time in whole microseconds.
double rate(double bytes, float milliseconds) {
  const double us = std::floor(static_cast<double>(milliseconds) * 1000.0);
  return us > 0 ? bytes * 1e6 / us : 0;
}

/// Releases the spin kernels and drains the streams of a measurement however it ends: on an exception
/// after the spins started, the streams would otherwise stay blocked until the spins time out while
/// their buffers and the flag are freed. Never throws: a failure here goes to cudrv's destruction
/// error handler.
class release_on_exit {
 public:
  release_on_exit(volatile int* release, std::vector<cudrv::stream>& streams) noexcept
      : release_(release), streams_(streams) {}
  release_on_exit(const release_on_exit&) = delete;
  release_on_exit& operator=(const release_on_exit&) = delete;
  ~release_on_exit() {
    *release_ = 1;
    for (cudrv::stream& s : streams_) {
      try {
        s.synchronize();
      } catch (const cudrv::error& e) {
        cudrv::get_destruction_error_handler()(e);
      } catch (...) {  // nothing else is expected from a synchronisation; never let it escape
      }
    }
  }

 private:
  volatile int* release_;
  std::vector<cudrv::stream>& streams_;
};

std::vector<double> session::measure(const std::vector<copy_op>& ops, engine e, bool split, figure f,
                                     const std::string& cell) {
  const std::size_t n = ops.size();
  std::vector<cudrv::stream> streams;
  std::vector<cudrv::event> starts;
  std::vector<cudrv::event> ends;
  std::vector<std::size_t> bytes;
  streams.reserve(n);
  for (const copy_op& op : ops) {
    const cudrv::device& dev = device_of(op.exec);
    streams.emplace_back(dev);
    starts.emplace_back(dev, cudrv::event_flags::timing);
    ends.emplace_back(dev, cudrv::event_flags::timing);
    bytes.push_back(copy_bytes(op, e, split));
  }
  cudrv::event total_end(device_of(ops.front().exec), cudrv::event_flags::timing);
  const std::uint64_t flag = reinterpret_cast<std::uintptr_t>(flag_->data());
  const std::uint64_t timed_out_word = flag + sizeof(int);
  volatile int* release = flag_->data();
  volatile int* timed_out = flag_->data() + 1;
  const release_on_exit guard(release, streams);  // after the streams: runs before they are destroyed
  std::vector<std::vector<double>> samples(n);
  std::vector<double> totals;
  for (int sample = 0; sample < options_.samples; ++sample) {
    *release = 0;
    *timed_out = 0;
    prepare(ops, split);
    for (std::size_t i = 0; i < n; ++i) {
      const auto khz = static_cast<std::uint64_t>(device_of(ops[i].exec).attribute(CU_DEVICE_ATTRIBUTE_CLOCK_RATE));
      if (gated_) {
        cudrv::launch(streams[i], {.grid = 1, .block = 1}, spin_, flag, khz * spin_timeout_ms, timed_out_word);
      }
      enqueue(ops[i], e, split, streams[i], warmup_copies);
    }
    streams[0].record(starts[0]);
    for (std::size_t i = 1; i < n; ++i) {
      streams[i].wait(starts[0]);
      streams[i].record(starts[i]);
    }
    for (std::size_t i = 0; i < n; ++i) {
      enqueue(ops[i], e, split, streams[i], options_.iterations);
      streams[i].record(ends[i]);
      if (f == figure::total && i != 0) {
        streams[0].wait(ends[i]);
      }
    }
    streams[0].record(total_end);
    *release = 1;
    for (cudrv::stream& s : streams) {
      s.synchronize();
    }
    if (*timed_out != 0) {
      throw bandwidth_error(CUDA_ERROR_TIMEOUT, "CUDA_ERROR_TIMEOUT", "the wait operation has timed out",
                            cell + ": a spin kernel holding the streams timed out (" +
                                std::to_string(spin_timeout_ms / 1000) +
                                " s) before every copy was enqueued, so the copies did not start together; lower "
                                "--bandwidth-iterations (now " +
                                std::to_string(options_.iterations) + ")");
    }
    check(ops, bytes, split, cell);
    for (std::size_t i = 0; i < n; ++i) {
      double r =
          rate(static_cast<double>(bytes[i]) * options_.iterations, cudrv::elapsed_time(starts[i], ends[i]).count());
      samples[i].push_back(split ? r / 2 : r);  // a split-warp copy: half in each direction
    }
    const double all = std::accumulate(bytes.begin(), bytes.end(), 0.0) * options_.iterations;
    totals.push_back(rate(all, cudrv::elapsed_time(starts[0], total_end).count()));
  }
  std::vector<double> out;
  if (f == figure::total) {
    out.push_back(median(totals) * 1e-9);
  } else {
    for (std::size_t i = 0; i < (f == figure::first ? 1 : n); ++i) {
      out.push_back(median(samples[i]) * 1e-9);
    }
  }
  return out;
}

/// nvbandwidth's latency measurement: one launch per multiprocessor, each with one block chasing
/// latency_accesses / SMs links; the sum of the launches' times over the accesses, in ns.
double session::chase(int ordinal, const buffer& chain) {
  const cudrv::device& dev = device_of(ordinal);
  cudrv::stream s(dev);
  cudrv::event start(dev, cudrv::event_flags::timing);
  cudrv::event stop(dev, cudrv::event_flags::timing);
  const auto sms = static_cast<unsigned int>(dev.attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT));
  const auto per_launch = static_cast<std::uint32_t>(latency_accesses / sms);
  const std::uint64_t data = chain.address();
  double seconds = 0;
  for (unsigned int target = 0; target < sms; ++target) {
    s.record(start);
    cudrv::launch(s, {.grid = sms, .block = 1}, chase_, data, per_launch, static_cast<std::uint32_t>(target));
    s.record(stop);
    s.synchronize();
    seconds += cudrv::elapsed_time(start, stop).count() / 1000.0;
  }
  return seconds * 1e9 / static_cast<double>(latency_accesses);
}

// --- the patterns ---------------------------------------------------------------------------------

/// A matrix of @p rows x @p cols empty values with device or other labels.
bandwidth_matrix make_matrix(std::string title, std::string key, std::vector<std::string> rows,
                             std::vector<std::string> cols) {
  bandwidth_matrix m;
  m.title = std::move(title);
  m.key = std::move(key);
  m.values.assign(rows.size(), std::vector<std::optional<double>>(cols.size()));
  m.row_labels = std::move(rows);
  m.column_labels = std::move(cols);
  return m;
}

/// "host_to_device_memcpy_ce (row CPU, column 1)": the test (its matrix's key) and the cell being measured.
std::string cell_of(const bandwidth_matrix& m, std::size_t row, std::size_t column) {
  return m.key + " (row " + m.row_labels[row] + ", column " + m.column_labels[column] + ")";
}

std::vector<std::string> device_labels(const session& s) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < s.count(); ++i) {
    out.push_back(std::to_string(s.ordinal(i)));
  }
  return out;
}

const char* engine_word(engine e) { return e == engine::ce ? "CE" : "SM"; }

/// The nvbandwidth-style caption: "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)".
std::string caption(engine e, const char* rows, const char* arrow, const char* cols, const char* extra = "") {
  return std::string("memcpy ") + engine_word(e) + " " + rows + "(row) " + arrow + " " + cols + "(column) " + extra +
         "bandwidth (GB/s)";
}

/// host_to_device, device_to_host, their bidirectional forms, all_to_host and host_to_all (each
/// with `interfere`: every other device's copies at twice the size).
void host_pattern(session& s, bandwidth_test_result& r, engine e, bool to_device, bool bidir, bool all) {
  const std::size_t size = s.options().size;
  const bool split = e == engine::sm && bidir;
  bandwidth_matrix m = make_matrix(caption(e, "CPU",
                                           bidir       ? "<->"
                                           : to_device ? "->"
                                                       : "<-",
                                           "GPU"),
                                   r.desc->nvbandwidth_name, {"CPU"}, device_labels(s));
  for (std::size_t d = 0; d < s.count(); ++d) {
    const int dev = s.ordinal(d);
    std::vector<buffer> owned;
    owned.reserve(4 + 4 * s.count());
    std::vector<copy_op> ops;
    auto add = [&](int device, bool host_to_dev, std::size_t bytes) {
      buffer& h = owned.emplace_back(s.host_buffer(device, bytes));
      buffer& g = owned.emplace_back(s.device_buffer(device, bytes));
      ops.push_back(host_to_dev ? copy_op{&h, &g, device} : copy_op{&g, &h, device});
    };
    add(dev, to_device, size);
    if (bidir && !split) {
      add(dev, !to_device, 2 * size);
    }
    for (std::size_t o = 0; all && o < s.count(); ++o) {
      if (o == d) {
        continue;
      }
      if (split) {  // nvbandwidth's split-warp interference: device to host, same size, split too
        add(s.ordinal(o), false, size);
        continue;
      }
      add(s.ordinal(o), to_device, 2 * size);
      if (bidir) {
        add(s.ordinal(o), !to_device, 2 * size);
      }
    }
    m.values[0][d] = s.measure(ops, e, split, figure::first, cell_of(m, 0, d))[0];
  }
  r.matrices.push_back(std::move(m));
}

/// Device-to-device, one pair at a time: device_to_device_memcpy_{read,write} (one copy) and their
/// bidirectional forms (two copies at once, read1/read2/total or write1/write2/total).
void pair_pattern(session& s, bandwidth_test_result& r, engine e, bool read, bool bidir) {
  const std::string key = r.desc->nvbandwidth_name;
  const std::vector<std::string> labels = device_labels(s);
  std::vector<bandwidth_matrix> ms;
  if (!bidir) {
    ms.push_back(make_matrix(caption(e, "GPU", read ? "->" : "<-", "GPU"), key, labels, labels));
  } else {
    const std::string word = read ? "Read" : "Write";
    const std::string lower = read ? "read" : "write";
    for (const std::string& which : {word + "1 ", word + "2 ", std::string("Total ")}) {
      std::string k = which == "Total " ? "total" : lower + which.substr(word.size(), 1);
      ms.push_back(make_matrix(caption(e, "GPU", "<->", "GPU", which.c_str()), key + "_" + k, labels, labels));
    }
  }
  for (std::size_t a = 0; a < s.count(); ++a) {
    for (std::size_t b = 0; b < s.count(); ++b) {
      const int src = s.ordinal(a);
      const int peer = s.ordinal(b);
      // one way: src runs the copy, with peer's memory; both ways: each device runs a copy with the
      // other's memory, so each needs access to the other (a pair without stays empty, N/A)
      if (a == b || !(bidir ? s.peers_both_ways(src, peer) : s.peers(src, peer))) {
        continue;
      }
      const std::size_t size = s.options().size;
      buffer src1 = s.device_buffer(src, size);
      buffer peer1 = s.device_buffer(peer, size);
      if (!bidir) {
        // write: src's memory to peer's, run by src; read: peer's memory to src's, run by src
        copy_op op = read ? copy_op{&peer1, &src1, src} : copy_op{&src1, &peer1, src};
        ms[0].values[a][b] = s.measure({op}, e, false, figure::first, cell_of(ms[0], a, b))[0];
        continue;
      }
      buffer src2 = s.device_buffer(src, size);
      buffer peer2 = s.device_buffer(peer, size);
      // nvbandwidth's two copies: peer1 -> src1 and src2 -> peer2, each run by the reading device
      // (read) or the writing device (write)
      std::vector<double> v = s.measure({{&peer1, &src1, read ? src : peer}, {&src2, &peer2, read ? peer : src}}, e,
                                        false, figure::each, cell_of(ms[2], a, b));
      ms[0].values[a][b] = v[0];
      ms[1].values[a][b] = v[1];
      ms[2].values[a][b] = v[0] + v[1];
    }
  }
  r.matrices = std::move(ms);
}

/// all_to_one_{write,read} (@p one_is_destination) and one_to_all_{write,read}: the column device
/// and every other device with peer access, all copies at once, the total bandwidth.
void fan_pattern(session& s, bandwidth_test_result& r, engine e, bool all_to_one, bool read) {
  const std::size_t size = s.options().size;
  const char* arrow = (all_to_one != read) ? "<-" : "->";
  bandwidth_matrix m = make_matrix(caption(e, "GPU", arrow, "GPU"), r.desc->nvbandwidth_name, {"0"}, device_labels(s));
  for (std::size_t d = 0; d < s.count(); ++d) {
    const int one = s.ordinal(d);
    std::vector<buffer> owned;
    owned.reserve(2 * s.count());
    std::vector<copy_op> ops;
    for (std::size_t o = 0; o < s.count(); ++o) {
      const int other = s.ordinal(o);
      // the device that runs the copy (see below) needs access to the other one's memory
      const int runner = all_to_one ? other : one;
      if (o == d || !s.peers(runner, runner == one ? other : one)) {
        continue;
      }
      buffer& at_one = owned.emplace_back(s.device_buffer(one, size));
      buffer& at_other = owned.emplace_back(s.device_buffer(other, size));
      // nvbandwidth's helpers: all-to-one copies other -> one (write: run by the other device; read:
      // the same buffers the other way, run by the other device); one-to-all copies one -> other
      // (write: run by one; read: the other way, run by one).
      buffer* from = all_to_one ? &at_other : &at_one;
      buffer* to = all_to_one ? &at_one : &at_other;
      ops.push_back(read ? copy_op{to, from, runner} : copy_op{from, to, runner});
    }
    if (!ops.empty()) {
      m.values[0][d] = s.measure(ops, e, false, figure::total, cell_of(m, 0, d))[0];
    }
  }
  r.matrices.push_back(std::move(m));
}

/// device_local_copy: within each device, by its copy engine.
void local_pattern(session& s, bandwidth_test_result& r) {
  bandwidth_matrix m =
      make_matrix("memcpy local GPU(column) bandwidth (GB/s)", r.desc->nvbandwidth_name, {"0"}, device_labels(s));
  for (std::size_t d = 0; d < s.count(); ++d) {
    const int dev = s.ordinal(d);
    buffer a = s.device_buffer(dev, s.options().size);
    buffer b = s.device_buffer(dev, s.options().size);
    m.values[0][d] = s.measure({{&a, &b, dev}}, engine::ce, false, figure::first, cell_of(m, 0, d))[0];
  }
  r.matrices.push_back(std::move(m));
}

/// all_to_all_memcpy_write_{ce,sm}: every device writes every other device with peer access, all at
/// once; the total bandwidth.
void all_to_all_pattern(session& s, bandwidth_test_result& r, engine e) {
  bandwidth_matrix m =
      make_matrix(caption(e, "GPU", "<->", "GPU", "all to all total "), r.desc->name, {"all"}, {"total"});
  std::vector<buffer> owned;
  owned.reserve(2 * s.count() * s.count());
  std::vector<copy_op> ops;
  for (std::size_t a = 0; a < s.count(); ++a) {
    for (std::size_t b = 0; b < s.count(); ++b) {
      if (a != b && s.peers(s.ordinal(a), s.ordinal(b))) {
        buffer& from = owned.emplace_back(s.device_buffer(s.ordinal(a), s.options().size));
        buffer& to = owned.emplace_back(s.device_buffer(s.ordinal(b), s.options().size));
        ops.push_back({&from, &to, s.ordinal(a)});
      }
    }
  }
  if (!ops.empty()) {
    m.values[0][0] = s.measure(ops, e, false, figure::total, cell_of(m, 0, 0))[0];
  }
  r.matrices.push_back(std::move(m));
}

/// Writes a pointer chain into @p b: links 128 bytes apart, visited in a random order (a fixed seed,
/// so that runs compare), closing into one cycle that starts at the buffer's first byte.
void write_chain(buffer& b) {
  const std::size_t links = b.bytes / chain_stride;
  std::vector<std::size_t> order(links);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::mt19937_64 rng(36);
  std::shuffle(order.begin() + 1, order.end(), rng);
  std::vector<std::byte> image(b.bytes, std::byte{0});
  for (std::size_t k = 0; k < links; ++k) {
    const std::uint64_t next = b.address() + order[(k + 1) % links] * chain_stride;
    std::memcpy(image.data() + order[k] * chain_stride, &next, sizeof next);
  }
  if (b.host) {
    std::memcpy(b.host->data(), image.data(), b.bytes);
  } else {
    cudrv::copy(*b.dev, image);
  }
}

/// host_device_latency_sm and device_to_device_latency_sm.
void latency_pattern(session& s, bandwidth_test_result& r, bool peers) {
  const std::vector<std::string> labels = device_labels(s);
  if (!peers) {
    bandwidth_matrix m =
        make_matrix("memory latency SM CPU(row) <-> GPU(column) (ns)", r.desc->nvbandwidth_name, {"CPU"}, labels);
    for (std::size_t d = 0; d < s.count(); ++d) {
      buffer chain = s.host_buffer(s.ordinal(d), latency_buffer_bytes);
      write_chain(chain);
      m.values[0][d] = s.chase(s.ordinal(d), chain);
    }
    r.matrices.push_back(std::move(m));
    return;
  }
  bandwidth_matrix m = make_matrix("Device to Device Latency SM GPU(row) <-> GPU(column) (ns)",
                                   r.desc->nvbandwidth_name, labels, labels);
  for (std::size_t p = 0; p < s.count(); ++p) {
    buffer chain = s.device_buffer(s.ordinal(p), latency_buffer_bytes);
    write_chain(chain);
    for (std::size_t d = 0; d < s.count(); ++d) {
      if (d != p && s.peers(s.ordinal(d), s.ordinal(p))) {
        m.values[d][p] = s.chase(s.ordinal(d), chain);
      }
    }
  }
  r.matrices.push_back(std::move(m));
}

/// Runs one test by its name.
void run_test(session& s, bandwidth_test_result& r) {
  const std::string_view name = r.desc->name;
  const engine e = r.desc->engine;
  auto has = [&](std::string_view part) { return name.find(part) != std::string_view::npos; };
  const bool bidir = has("bidirectional");
  if (has("latency")) {
    latency_pattern(s, r, r.desc->needs_peers);
  } else if (name == "device_local_copy") {
    local_pattern(s, r);
  } else if (has("all_to_all")) {
    all_to_all_pattern(s, r, e);
  } else if (has("all_to_one") || has("one_to_all")) {
    fan_pattern(s, r, e, has("all_to_one"), has("_read"));
  } else if (has("device_to_device")) {
    pair_pattern(s, r, e, has("_read"), bidir);
  } else {
    const bool to_device = name.starts_with("host_to");
    host_pattern(s, r, e, to_device, bidir, has("all"));
  }
}

}  // namespace

const std::vector<bandwidth_test_desc>& all_bandwidth_tests() { return tests_table; }

const bandwidth_test_desc* find_bandwidth_test(std::string_view name) {
  for (const bandwidth_test_desc& t : tests_table) {
    if (name == t.name) {
      return &t;
    }
  }
  return nullptr;
}

/// What bind_to_node restores.
struct bind_to_node::saved {
  cpu_set_t cpus{};
  int mode = 0;
  node_mask nodes{};
};

bind_to_node::bind_to_node(int node) : saved_(std::make_unique<saved>()) {
  if (node < 0 || node >= static_cast<int>(max_nodes)) {
    return;
  }
  cpu_set_t cpus;
  const std::string list = read_first_line("/sys/devices/system/node/node" + std::to_string(node) + "/cpulist");
  if (sched_getaffinity(0, sizeof(cpu_set_t), &saved_->cpus) != 0 || !parse_cpulist(list, cpus)) {
    return;
  }
  if (syscall(SYS_get_mempolicy, &saved_->mode, saved_->nodes.data(), max_nodes, nullptr, 0UL) != 0) {
    return;
  }
  node_mask want{};
  want[static_cast<std::size_t>(node) / (8 * sizeof(unsigned long))] = 1UL << (node % (8 * sizeof(unsigned long)));
  if (sched_setaffinity(0, sizeof(cpus), &cpus) != 0) {
    return;
  }
  affinity_set_ = true;
  if (syscall(SYS_set_mempolicy, mpol_preferred, want.data(), max_nodes) == 0) {
    policy_set_ = true;
  }
}

bind_to_node::~bind_to_node() {
  if (policy_set_) {
    syscall(SYS_set_mempolicy, saved_->mode, saved_->nodes.data(), max_nodes);
  }
  if (affinity_set_) {
    sched_setaffinity(0, sizeof(cpu_set_t), &saved_->cpus);
  }
}

std::size_t sm_copy_bytes(std::size_t size, int multiprocessors) noexcept {
  if (size < small_buffer) {
    return small_copy_bytes(size);
  }
  const std::size_t threads = static_cast<std::size_t>(multiprocessors) * threads_per_block;
  return threads == 0 ? 0 : (size / 16 / threads) * threads * 16;
}

int numa_node_of(const std::string& pci_bus_id, const std::string& sysfs_root) {
  std::string id = pci_bus_id;
  std::transform(id.begin(), id.end(), id.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (id.empty()) {
    return -1;
  }
  const std::string line = read_first_line(sysfs_root + "/" + id + "/numa_node");
  int node = -1;
  if (line.empty() || std::sscanf(line.c_str(), "%d", &node) != 1) {
    return -1;
  }
  return node;
}

}  // namespace cudrv_query

namespace cudrv_query {

bandwidth_results run_bandwidth(const std::vector<int>& ordinals, const std::vector<std::string>& pci_bus_ids,
                                const bandwidth_options& options) {
  if (const std::string problem = check_bandwidth_options(options); !problem.empty()) {
    throw cudrv::invalid_argument_error("cudrv-query --bandwidth", problem);
  }
  bandwidth_results results;
  results.options = options;
  std::vector<const bandwidth_test_desc*> chosen;
  for (const bandwidth_test_desc& t : all_bandwidth_tests()) {
    if (options.tests.empty() || std::find(options.tests.begin(), options.tests.end(), t.name) != options.tests.end()) {
      chosen.push_back(&t);
    }
  }
  if (ordinals.empty()) {
    return results;
  }
  session s(ordinals, pci_bus_ids, options, results);
  const bool tty = isatty(STDERR_FILENO) != 0;
  int step = 0;
  for (const bandwidth_test_desc* t : chosen) {
    bandwidth_test_result r;
    r.desc = t;
    ++step;
    if (options.progress) {
      std::fprintf(stderr, "%scudrv-query: bandwidth [%d/%zu] %s%s", tty ? "\r\033[K" : "", step, chosen.size(),
                   t->name, tty ? "" : "\n");
      std::fflush(stderr);
    }
    bool any_pair = false;
    for (std::size_t a = 0; a < s.count(); ++a) {
      for (std::size_t b = 0; b < s.count(); ++b) {
        any_pair = any_pair || (a != b && s.peers(s.ordinal(a), s.ordinal(b)));
      }
    }
    if (t->needs_peers && !any_pair) {
      r.skipped = s.count() < 2 ? "needs two devices" : "no two selected devices have peer access";
    } else {
      run_test(s, r);
    }
    results.tests.push_back(std::move(r));
  }
  if (options.progress && tty && step > 0) {
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
  }
  return results;
}

std::string check_bandwidth_options(const bandwidth_options& o) {
  if (o.iterations <= max_ce_iterations) {
    return {};
  }
  for (const bandwidth_test_desc& t : tests_table) {
    const bool chosen = o.tests.empty() || std::find(o.tests.begin(), o.tests.end(), t.name) != o.tests.end();
    if (chosen && t.engine == engine::ce) {
      const std::string which = o.tests.empty()
                                    ? std::string("without --bandwidth-tests every test runs, the CE ones too")
                                    : std::string(t.name) + " is one";
      return "--bandwidth-iterations " + std::to_string(o.iterations) + " is above " +
             std::to_string(max_ce_iterations) + ", the most a copy-engine test takes (" + which +
             "): each of its timed copies is enqueued while the streams are held";
    }
  }
  return {};
}

std::string parse_bandwidth_tests(std::string_view list, std::vector<std::string>& out) {
  out.clear();
  std::size_t pos = 0;
  while (pos <= list.size()) {
    std::size_t end = list.find(',', pos);
    if (end == std::string_view::npos) {
      end = list.size();
    }
    const std::string_view name = list.substr(pos, end - pos);
    if (!name.empty()) {
      if (find_bandwidth_test(name) == nullptr) {
        return "unknown test '" + std::string(name) + "' (--help and docs/cudrv-query.md list the names)";
      }
      if (std::find(out.begin(), out.end(), name) == out.end()) {
        out.emplace_back(name);
      }
    }
    pos = end + 1;
  }
  if (out.empty()) {
    return "no test named";
  }
  return {};
}

}  // namespace cudrv_query
