// multi_gpu: several GPUs from one process, without MPI: peer access where the devices allow it, a
// ring of peer copies through cudrv::copy_peer, and an NCCL all-reduce over one communicator per device
// made by ncclCommInitAll (cudrv::nccl::communicator::init_all), driven from one thread.
//
//   example_multi_gpu [n] [--devices N] [--no-nccl]
//       n          32-bit integers per device (default 64M, 256 MiB; the GPU tier uses 1M)
//       --devices  use the first N devices (default: all the driver sees)
//       --no-nccl  leave the NCCL part out (as the sanitizer run does)
//
// Device d holds elements [d n, (d + 1) n) of a global vector (element g is g mod 1021, generated on
// the device, the vector of example_mpi_sum).
//  1. Peer access: for every ordered pair of devices, device::can_access_peer, and where it says yes,
//     device::enable_peer_access, so that copies (and kernels) reach the peer's memory directly.
//  2. The ring: device d's slice is copied into a buffer of device (d + 1) mod N with
//     cudrv::copy_peer on device d's stream, all N copies at once; every received buffer is checked
//     against the slice it came from (exit 5). With one device the ring is a copy onto itself.
//  3. NCCL: one communicator per device (init_all, ncclCommInitAll), then an all-reduce (sum) of every
//     device's slice into a second buffer of each device. NCCL requires calls for several devices from
//     one thread to be grouped: a cudrv::nccl::group around them (ncclGroupStart/End). Every device's
//     result is checked on the host against the sum of the N slices (exit 5). Without NCCL this part
//     is skipped with a line saying why.
//
// The figures: the ring's bandwidth per link (bytes copied per second by each device, all links at
// once), against a copy of the same bytes within device 0; and NCCL's bus bandwidth (2 (N - 1) / N times
// the bytes per device over the time; for one device the algorithm bandwidth, the bytes over the
// time), against the ring's per-link bandwidth. Times are medians of 10 repetitions.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include <cudrv/nccl.hpp>

#include "example_main.hpp"
#include "kernels/integer_sum.hpp"

namespace {

using u64 = unsigned long long;
constexpr u64 period = 1021;  // element g is g mod period, as in the kernel
constexpr int block_size = 256;
constexpr int repetitions = 10;

struct per_device {
  cudrv::device dev;
  cudrv::typed_kernel<void(unsigned*, u64, u64)> generate;
  cudrv::stream stream;
  cudrv::device_buffer<unsigned> slice;     // elements [d n, (d + 1) n)
  cudrv::device_buffer<unsigned> received;  // the ring's copy from the previous device, then NCCL's sum
};

double elapsed_ms(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Whether host[i] == expected(i) for every i; prints the first difference.
template <class Expected>
bool check(const char* what, int d, const std::vector<unsigned>& host, Expected&& expected) {
  for (std::size_t i = 0; i < host.size(); ++i) {
    if (host[i] != expected(i)) {
      std::printf("  %s on device %d: element %zu is %u, expected %u: WRONG\n", what, d, i, host[i],
                  static_cast<unsigned>(expected(i)));
      return false;
    }
  }
  return true;
}

bool run(std::size_t n, int wanted, bool use_nccl) {
  const int available = cudrv::device_count();
  const int count = wanted > 0 ? wanted : available;
  if (count > available) {
    throw example::usage_error{"--devices " + std::to_string(wanted) + ": the driver sees only " +
                               std::to_string(available) + " device(s)"};
  }
  std::vector<cudrv::device> devices;
  for (int d = 0; d < count; ++d) {
    devices.emplace_back(d);
  }
  std::printf("multi_gpu: %d device%s, %zu integers (%zu MiB) per device\n", count, count == 1 ? "" : "s", n,
              n * sizeof(unsigned) >> 20);

  // 1. Peer access.
  int links = 0;
  for (const cudrv::device& a : devices) {
    std::string line;
    for (const cudrv::device& b : devices) {
      if (a == b) {
        continue;
      }
      const bool can = a.can_access_peer(b);
      if (can) {
        a.enable_peer_access(b);
        ++links;
      }
      line += ' ';
      line += std::to_string(b.ordinal());
      line += can ? ": yes" : ": no";
    }
    std::printf("  device %d (%s, %s) peer access to%s\n", a.ordinal(), a.name().c_str(), a.pci_bus_id().c_str(),
                line.empty() ? " no other device" : line.c_str());
  }
  if (count == 1) {
    std::printf("  one device: the ring below is a copy onto itself (no peer link to use)\n");
  } else {
    std::printf("  peer access enabled on %d of %d ordered pairs (the others copy through the host)\n", links,
                count * (count - 1));
  }

  std::vector<per_device> gpus;
  for (int d = 0; d < count; ++d) {
    const cudrv::device& dev = devices[static_cast<std::size_t>(d)];
    cudrv::library lib = example::compile(dev, "integer_sum.cu", example::integer_sum_kernels::source);
    auto generate = lib.get_kernel<void(unsigned*, u64, u64)>("generate");
    cudrv::stream s(dev);
    gpus.push_back(per_device{dev, std::move(generate), std::move(s), cudrv::device_buffer<unsigned>(dev, n),
                              cudrv::device_buffer<unsigned>(dev, n)});
    per_device& g = gpus.back();
    const u64 blocks =
        std::min<u64>(static_cast<u64>(dev.attribute(cudrv::device_attributes::multiprocessor_count)) * 4,
                      (n + block_size - 1) / block_size);
    cudrv::launch(g.stream, {.grid = cudrv::dims::checked(blocks), .block = block_size}, g.generate, g.slice.get(),
                  static_cast<u64>(d) * n, static_cast<u64>(n));
  }
  auto synchronize_all = [&] {
    for (per_device& g : gpus) {
      g.stream.synchronize();
    }
  };
  synchronize_all();

  // 2. The ring: device d -> device (d + 1) mod N, all at once, each on the source's stream.
  auto ring = [&] {
    for (int d = 0; d < count; ++d) {
      per_device& from = gpus[static_cast<std::size_t>(d)];
      per_device& to = gpus[static_cast<std::size_t>((d + 1) % count)];
      cudrv::copy_peer(to.received, to.dev, from.slice, from.dev, from.stream);
    }
  };
  ring();
  synchronize_all();
  bool ok = true;
  std::vector<unsigned> host(n);
  for (int d = 0; d < count; ++d) {
    cudrv::copy(std::span<unsigned>(host), gpus[static_cast<std::size_t>(d)].received);
    const u64 first = static_cast<u64>((d + count - 1) % count) * n;
    ok =
        check("the ring's copy", d, host, [&](std::size_t i) { return static_cast<unsigned>((first + i) % period); }) &&
        ok;
  }
  std::printf("  peer copy ring: every device received its predecessor's slice %s\n", ok ? "intact" : "WRONG");

  std::vector<double> times;
  for (int r = 0; r < repetitions + 1; ++r) {
    synchronize_all();
    const auto t0 = std::chrono::steady_clock::now();
    ring();
    synchronize_all();
    if (r > 0) {  // the first is the warm-up
      times.push_back(elapsed_ms(t0));
    }
  }
  const double ring_ms = example::median(times);
  const double bytes = static_cast<double>(n) * sizeof(unsigned);
  const double link_gbs = bytes / (ring_ms * 1e6);
  per_device& g0 = gpus.front();
  const double local_ms = example::time_ms(g0.dev, g0.stream, repetitions,
                                           [&](cudrv::stream_ref s) { cudrv::copy(g0.received, g0.slice, s); });
  const double local_gbs = bytes / (local_ms * 1e6);
  char detail[200];
  std::snprintf(detail, sizeof detail, "%d device%s, %zu bytes per link, %.3f ms, aggregate %.1f GB/s", count,
                count == 1 ? " (a copy onto itself)" : "s", n * sizeof(unsigned), ring_ms, count * link_gbs);
  char json[96];
  std::snprintf(json, sizeof json, "\"devices\": %d, \"peer_links\": %d, \"part\": \"copy_peer ring\"", count, links);
  example::report({.example = "multi_gpu",
                   .metric = "GB/s per link",
                   .value = link_gbs,
                   .reference = local_gbs,
                   .reference_name = "copy within device 0",
                   .target = 0,
                   .detail = detail,
                   .seconds = ring_ms * 1e-3,
                   .json = json});

  // 3. NCCL: one communicator per device, an all-reduce of the slices, grouped from this thread.
  if (!use_nccl) {
    std::printf("multi_gpu: NCCL all-reduce skipped (--no-nccl)\n");
    return ok;
  }
  if (!cudrv::nccl::available()) {
    std::printf("multi_gpu: NCCL all-reduce skipped: NCCL cannot be loaded: %s\n",
                cudrv::nccl::unavailable_reason().c_str());
    std::printf("{\"example\": \"multi_gpu\", \"part\": \"nccl all_reduce\", \"devices\": %d, \"skipped\": true}\n",
                count);
    return ok;
  }
  std::vector<cudrv::nccl::communicator> comms = cudrv::nccl::communicator::init_all(devices);
  auto all_reduce = [&] {
    cudrv::nccl::group grp;
    for (int d = 0; d < count; ++d) {
      per_device& g = gpus[static_cast<std::size_t>(d)];
      comms[static_cast<std::size_t>(d)].all_reduce(g.slice, g.received, cudrv::nccl::reduction::sum, g.stream);
    }
    grp.end();
  };
  auto check_sums = [&] {
    bool all_equal = true;
    for (int d = 0; d < count; ++d) {
      cudrv::copy(std::span<unsigned>(host), gpus[static_cast<std::size_t>(d)].received);
      all_equal = check("NCCL's sum", d, host,
                        [&](std::size_t i) {
                          u64 sum = 0;
                          for (int e = 0; e < count; ++e) {
                            sum += (static_cast<u64>(e) * n + i) % period;
                          }
                          return static_cast<unsigned>(sum);
                        }) &&
                  all_equal;
    }
    return all_equal;
  };
  for (per_device& g : gpus) {
    cudrv::fill(g.received, 0u, g.stream);  // no trace of the ring left
  }
  all_reduce();
  synchronize_all();
  const bool sums_ok = check_sums();
  times.clear();
  for (int r = 0; r < repetitions + 1; ++r) {
    synchronize_all();
    const auto t0 = std::chrono::steady_clock::now();
    all_reduce();
    synchronize_all();
    if (r > 0) {
      times.push_back(elapsed_ms(t0));
    }
  }
  const bool again_ok = check_sums();
  for (cudrv::nccl::communicator& c : comms) {
    if (c.async_error() != cudrv::nccl::result::success) {
      std::printf("  NCCL reports an asynchronous error on device %d\n", c.device().ordinal());
      ok = false;
    }
  }
  std::printf("  NCCL all-reduce (NCCL %d) over %d device%s: every device's sum %s, %s after the timed runs\n",
              cudrv::nccl::version(), count, count == 1 ? "" : "s", sums_ok ? "equal to the host's" : "WRONG",
              again_ok ? "still equal" : "WRONG");
  ok = ok && sums_ok && again_ok;
  const double nccl_ms = example::median(times);
  const double algorithm_gbs = bytes / (nccl_ms * 1e6);
  const double bus_gbs = count > 1 ? algorithm_gbs * 2.0 * (count - 1) / count : algorithm_gbs;
  std::snprintf(detail, sizeof detail, "%d device%s, %zu bytes per device, %.3f ms, algorithm bandwidth %.1f GB/s",
                count, count == 1 ? "" : "s", n * sizeof(unsigned), nccl_ms, algorithm_gbs);
  std::snprintf(json, sizeof json, "\"devices\": %d, \"part\": \"nccl all_reduce\"", count);
  example::report({.example = "multi_gpu",
                   .metric = count > 1 ? "GB/s bus bandwidth" : "GB/s algorithm bandwidth",
                   .value = bus_gbs,
                   .reference = link_gbs,
                   .reference_name = "copy_peer ring per link",
                   .target = 0,
                   .detail = detail,
                   .seconds = nccl_ms * 1e-3,
                   .json = json});
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  // NVLink SHARP (multicast objects) must never be used on these machines: NCCL reads this before its
  // first communicator. An explicit setting in the environment is left as it is.
  ::setenv("NCCL_NVLS_ENABLE", "0", 0);
  return example::run("multi_gpu", [&] {
    std::size_t n = std::size_t{64} << 20;
    int devices = 0;
    bool use_nccl = true;
    bool have_n = false;
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "--no-nccl") {
        use_nccl = false;
      } else if (arg == "--devices" || arg.rfind("--devices=", 0) == 0) {
        const std::string value = arg == "--devices" ? (i + 1 < argc ? argv[++i] : "") : arg.substr(10);
        const std::size_t v = example::parse_size(value.c_str(), "device count");
        if (v > 1024) {
          throw example::usage_error{"--devices " + value + ": too many"};
        }
        devices = static_cast<int>(v);
      } else if (arg.rfind("--", 0) != 0 && !have_n) {
        n = example::parse_size(arg.c_str(), "integers per device");
        have_n = true;
      } else {
        throw example::usage_error{"unexpected argument '" + arg +
                                   "'; usage: example_multi_gpu [n] [--devices N] [--no-nccl]"};
      }
    }
    return run(n, devices, use_nccl);
  });
}
