// bench_vmm: the growable buffer (virtual memory management) against what it replaces, in one binary,
// interleaved.
//
//   bench_vmm [--quick] [--max-gib N]
//
// (a) growth: a buffer grown from 256 MiB to N GiB (default 16) in 256 MiB steps, either as a
//     cudrv::growable_buffer (grow_to maps new chunks behind the old ones; the address never moves) or
//     by allocating the new size, copying the old contents and freeing the old buffer (raw cuMemAlloc +
//     cuMemcpyDtoD + cuMemFree, then a context synchronisation so that the copy has landed). Each round
//     runs both sequences, and the same growth made with raw VMM calls (cuMemCreate + cuMemMap per
//     chunk, one cuMemSetAccess per step: cudrv's overhead), alternating the order; reported per chunk
//     size (2 MiB, the default 64 MiB, 256 MiB; --quick: the default only) the total and the per-step
//     time (medians over rounds), the ratio of the totals, and growable_buffer/raw VMM. N is lowered when the device
//     cannot hold the old and the new buffer of the copy approach at once.
// (b) steady-state bandwidth: a read+write kernel (x[i] = x[i] * a + b over 16-byte elements, compiled
//     at run time with NVRTC) over 4 GiB, on a growable buffer (chunks of 2 MiB, 64 MiB, 256 MiB) and on
//     a plain cuMemAlloc allocation of the same size. Each round times a burst of launches on each side
//     with events, alternating the order; reported: the median over rounds of the paired ratio
//     growable/plain of the bandwidth (goal: at least 0.98), and an A/A row (a second plain allocation
//     against the first) that shows the noise. The buffers' contents are checked after the runs.
//
// Each figure prints a human line and a JSON line (starting with {"bench":"vmm").
// Exit status: 0 success, 1 usage error, 2 no CUDA driver, 3 no CUDA device, 4 CUDA error, 5 wrong
// contents after the bandwidth runs.
#include <cudaTypedefs.h>

#include <cudrv/cudrv.hpp>
#include <cudrv/rtc.hpp>

#include "bench_support.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;
constexpr std::size_t GiB = std::size_t{1} << 30;
constexpr std::size_t step_bytes = 256 * MiB;

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

template <class Pfn>
void load(Pfn& fn, const char* symbol, int version) {
  fn = reinterpret_cast<Pfn>(cudrv::driver::get_entry_point(symbol, version));
}

struct raw_api {
  PFN_cuMemAlloc_v3020 alloc = nullptr;
  PFN_cuMemFree_v3020 free = nullptr;
  PFN_cuMemcpyDtoD_v3020 copy = nullptr;
  PFN_cuCtxSynchronize_v2000 sync = nullptr;
  PFN_cuMemAddressReserve_v10020 reserve = nullptr;
  PFN_cuMemAddressFree_v10020 address_free = nullptr;
  PFN_cuMemCreate_v10020 create = nullptr;
  PFN_cuMemRelease_v10020 release = nullptr;
  PFN_cuMemMap_v10020 map = nullptr;
  PFN_cuMemUnmap_v10020 unmap = nullptr;
  PFN_cuMemSetAccess_v10020 set_access = nullptr;
  raw_api() {
    load(alloc, "cuMemAlloc", 3020);
    load(free, "cuMemFree", 3020);
    load(copy, "cuMemcpyDtoD", 3020);
    load(sync, "cuCtxSynchronize", 2000);
    load(reserve, "cuMemAddressReserve", 10020);
    load(address_free, "cuMemAddressFree", 10020);
    load(create, "cuMemCreate", 10020);
    load(release, "cuMemRelease", 10020);
    load(map, "cuMemMap", 10020);
    load(unmap, "cuMemUnmap", 10020);
    load(set_access, "cuMemSetAccess", 10020);
  }
};

std::string mib(std::size_t bytes) { return std::to_string(bytes / MiB) + " MiB"; }

// --- (a) growth ------------------------------------------------------------------------------------

// Per-step times (ms) of growing a growable buffer with `chunk` byte chunks to max_bytes.
std::vector<double> grow_growable(const cudrv::device& dev, std::size_t chunk, std::size_t max_bytes) {
  std::vector<double> steps;
  cudrv::growable_buffer<char> buf(dev, max_bytes, {.chunk_bytes = chunk});
  for (std::size_t size = step_bytes; size <= max_bytes; size += step_bytes) {
    const auto t0 = std::chrono::steady_clock::now();
    buf.grow_to(size);
    steps.push_back(ms_since(t0));
  }
  return steps;
}

// Per-step times (ms) of the same growth with raw VMM calls: what growable_buffer does, by hand (one
// reservation aligned to the chunk, cuMemCreate + cuMemMap per chunk, one cuMemSetAccess per step).
std::vector<double> grow_raw_vmm(const cudrv::device& dev, const raw_api& raw, std::size_t chunk,
                                 std::size_t max_bytes) {
  std::vector<double> steps;
  const std::size_t reserved = (max_bytes + chunk - 1) / chunk * chunk;
  const bool power_of_two = (chunk & (chunk - 1)) == 0;
  CUdeviceptr base = 0;
  bench::check(raw.reserve(&base, reserved, power_of_two && chunk <= GiB ? chunk : 0, 0, 0), "cuMemAddressReserve");
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev.ordinal();
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  std::vector<CUmemGenericAllocationHandle> handles;
  for (std::size_t size = step_bytes; size <= max_bytes; size += step_bytes) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::size_t first = handles.size();
    while (handles.size() * chunk < size) {
      CUmemGenericAllocationHandle h = 0;
      bench::check(raw.create(&h, chunk, &prop, 0), "cuMemCreate");
      bench::check(raw.map(base + handles.size() * chunk, chunk, 0, h, 0), "cuMemMap");
      handles.push_back(h);
    }
    if (handles.size() > first) {
      bench::check(raw.set_access(base + first * chunk, (handles.size() - first) * chunk, &access, 1),
                   "cuMemSetAccess");
    }
    steps.push_back(ms_since(t0));
  }
  for (std::size_t i = handles.size(); i-- > 0;) {
    bench::check(raw.unmap(base + i * chunk, chunk), "cuMemUnmap");
    bench::check(raw.release(handles[i]), "cuMemRelease");
  }
  bench::check(raw.address_free(base, reserved), "cuMemAddressFree");
  return steps;
}

// Per-step times (ms) of allocate-new, copy, free-old up to max_bytes.
std::vector<double> grow_by_copy(const raw_api& raw, std::size_t max_bytes) {
  std::vector<double> steps;
  CUdeviceptr old = 0;
  std::size_t old_size = 0;
  for (std::size_t size = step_bytes; size <= max_bytes; size += step_bytes) {
    const auto t0 = std::chrono::steady_clock::now();
    CUdeviceptr fresh = 0;
    bench::check(raw.alloc(&fresh, size), "cuMemAlloc");
    if (old != 0) {
      bench::check(raw.copy(fresh, old, old_size), "cuMemcpyDtoD");
      bench::check(raw.sync(), "cuCtxSynchronize");
      bench::check(raw.free(old), "cuMemFree");
    }
    steps.push_back(ms_since(t0));
    old = fresh;
    old_size = size;
  }
  bench::check(raw.free(old), "cuMemFree");
  return steps;
}

double sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) {
    s += x;
  }
  return s;
}

void growth_figure(const cudrv::device& dev, const raw_api& raw, std::size_t chunk, bool is_default,
                   std::size_t max_bytes, int rounds) {
  std::vector<double> g_total, c_total, g_step, c_step, ratio, g_last, c_last, v_total, overhead;
  grow_growable(dev, chunk, 2 * step_bytes);  // warm-up
  grow_raw_vmm(dev, raw, chunk, 2 * step_bytes);
  grow_by_copy(raw, 2 * step_bytes);
  for (int r = 0; r < rounds; ++r) {
    std::vector<double> g, c, v;
    if (r % 2 == 0) {
      g = grow_growable(dev, chunk, max_bytes);
      v = grow_raw_vmm(dev, raw, chunk, max_bytes);
      c = grow_by_copy(raw, max_bytes);
    } else {
      c = grow_by_copy(raw, max_bytes);
      v = grow_raw_vmm(dev, raw, chunk, max_bytes);
      g = grow_growable(dev, chunk, max_bytes);
    }
    g_total.push_back(sum(g));
    c_total.push_back(sum(c));
    v_total.push_back(sum(v));
    ratio.push_back(sum(c) / sum(g));
    overhead.push_back(sum(g) / sum(v));
    g_step.push_back(bench::median(g));
    c_step.push_back(bench::median(c));
    g_last.push_back(g.back());
    c_last.push_back(c.back());
  }
  const std::size_t steps = max_bytes / step_bytes;
  std::printf(
      "growth %s -> %s in %zu steps of %s, chunks of %s%s: growable_buffer %.2f ms total (%.3f ms per step, last "
      "step %.3f ms); cuMemAlloc+cuMemcpyDtoD+cuMemFree %.2f ms total (%.3f ms per step, last step %.3f ms); "
      "copying is %.1fx slower; raw VMM calls %.2f ms total, growable_buffer/raw %.3f (median of %d rounds)\n",
      mib(step_bytes).c_str(), mib(max_bytes).c_str(), steps, mib(step_bytes).c_str(), mib(chunk).c_str(),
      is_default ? " (default)" : "", bench::median(g_total), bench::median(g_step), bench::median(g_last),
      bench::median(c_total), bench::median(c_step), bench::median(c_last), bench::median(ratio),
      bench::median(v_total), bench::median(overhead), rounds);
  std::printf("{\"bench\":\"vmm\",\"figure\":\"growth\",\"device\":\"%s\",\"chunk_bytes\":%zu,\"default_chunk\":%s,"
              "\"step_bytes\":%zu,\"max_bytes\":%zu,\"steps\":%zu,\"rounds\":%d,\"growable_total_ms\":%.4f,"
              "\"growable_step_ms\":%.4f,\"growable_last_step_ms\":%.4f,\"copy_total_ms\":%.4f,\"copy_step_ms\":%.4f,"
              "\"copy_last_step_ms\":%.4f,\"copy_over_growable\":%.3f,\"raw_vmm_total_ms\":%.4f,"
              "\"growable_over_raw_vmm\":%.4f}\n",
              dev.name().c_str(), chunk, is_default ? "true" : "false", step_bytes, max_bytes, steps, rounds,
              bench::median(g_total), bench::median(g_step), bench::median(g_last), bench::median(c_total),
              bench::median(c_step), bench::median(c_last), bench::median(ratio), bench::median(v_total),
              bench::median(overhead));
  std::fflush(stdout);
}

// --- (b) bandwidth ---------------------------------------------------------------------------------

constexpr const char* kernel_source = R"(
extern "C" __global__ void read_write(uint4* x, unsigned long long n, unsigned a, unsigned b) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    uint4 v = x[i];
    v.x = v.x * a + b; v.y = v.y * a + b; v.z = v.z * a + b; v.w = v.w * a + b;
    x[i] = v;
  }
}
)";

struct uint4_t {
  unsigned x, y, z, w;
};
using kernel_signature = void(uint4_t*, unsigned long long, unsigned, unsigned);

struct bandwidth_bench {
  cudrv::device dev;
  cudrv::stream stream{dev};
  cudrv::library lib;
  cudrv::typed_kernel<kernel_signature> kernel;
  cudrv::launch_config config{};
  std::size_t bytes;
  int launches;  // per timed burst
  int total_launches_plain = 0;
  cudrv::event start{dev, cudrv::event_flags::timing};
  cudrv::event stop{dev, cudrv::event_flags::timing};

  bandwidth_bench(const cudrv::device& d, std::size_t b, int l)
      : dev(d),
        lib(cudrv::program("bench_vmm.cu", kernel_source).compile(cudrv::code_kind::cubin, {.arch = d.arch()}).code, d),
        kernel(lib.get_kernel<kernel_signature>("read_write")),
        bytes(b),
        launches(l) {
    const int block = 256;
    const int sms = dev.attribute(cudrv::device_attributes::multiprocessor_count);
    const int per_sm = kernel.max_active_blocks_per_multiprocessor(dev, block);
    config = {.grid = static_cast<unsigned>(sms * std::max(per_sm, 1)), .block = static_cast<unsigned>(block)};
  }

  // GB/s of one burst of launches over x (bytes read and written).
  double burst(CUdeviceptr x) {
    const unsigned long long n = bytes / sizeof(uint4_t);
    stream.record(start);
    for (int i = 0; i < launches; ++i) {
      cudrv::launch(stream, config, kernel, reinterpret_cast<uint4_t*>(x), n, 1u, 1u);  // x += 1
    }
    stream.record(stop);
    stop.synchronize();
    const double ms = cudrv::elapsed_time(start, stop).count();
    return 2.0 * static_cast<double>(bytes) * launches / (ms * 1e-3) / 1e9;
  }

  // Whether the first and last MiB of x hold `value` in every 32-bit word.
  bool holds(CUdeviceptr x, unsigned value) {
    std::vector<unsigned> head(MiB / sizeof(unsigned)), tail(MiB / sizeof(unsigned));
    cudrv::copy(head, cudrv::device_span<const unsigned>(x, head.size()));
    cudrv::copy(tail, cudrv::device_span<const unsigned>(x + bytes - MiB, tail.size()));
    auto all = [&](const std::vector<unsigned>& v) {
      return std::all_of(v.begin(), v.end(), [&](unsigned w) { return w == value; });
    };
    return all(head) && all(tail);
  }
};

struct pair_result {
  double ratio = 0;   // median of paired ratios b/a
  double a_gbps = 0;  // median bandwidth of side a
  double b_gbps = 0;
};

// Paired rounds: side a and side b, alternating which goes first. Returns the number of bursts each got.
pair_result compare(bandwidth_bench& bb, CUdeviceptr a, CUdeviceptr b, int rounds) {
  std::vector<double> ra, rb, ratios;
  bb.burst(a);  // warm-up
  bb.burst(b);
  for (int r = 0; r < rounds; ++r) {
    double x = 0;
    double y = 0;
    if (r % 2 == 0) {
      x = bb.burst(a);
      y = bb.burst(b);
    } else {
      y = bb.burst(b);
      x = bb.burst(a);
    }
    ra.push_back(x);
    rb.push_back(y);
    ratios.push_back(y / x);
  }
  return {bench::median(ratios), bench::median(ra), bench::median(rb)};
}

void bandwidth_line(const cudrv::device& dev, const char* label, std::size_t chunk, std::size_t bytes,
                    const pair_result& r, int rounds) {
  const bool aa = chunk == 0;
  std::printf(
      "bandwidth, read+write kernel over %s: %s %.1f GB/s, %s %.1f GB/s, paired ratio %.3f (median of %d rounds)%s\n",
      mib(bytes).c_str(), "plain cuMemAlloc", r.a_gbps, label, r.b_gbps, r.ratio, rounds,
      aa ? " [A/A: the noise]" : (r.ratio >= 0.98 ? " [goal >= 0.98 met]" : " [goal >= 0.98 MISSED]"));
  std::printf("{\"bench\":\"vmm\",\"figure\":\"bandwidth\",\"device\":\"%s\",\"case\":\"%s\",\"chunk_bytes\":%zu,"
              "\"bytes\":%zu,\"rounds\":%d,\"plain_gbps\":%.2f,\"other_gbps\":%.2f,\"ratio\":%.4f,\"goal\":%s}\n",
              dev.name().c_str(), label, chunk, bytes, rounds, r.a_gbps, r.b_gbps, r.ratio, aa ? "null" : "0.98");
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::size_t max_gib = 16;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--max-gib") == 0 && i + 1 < argc && std::atoi(argv[i + 1]) > 0) {
      max_gib = static_cast<std::size_t>(std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--quick] [--max-gib N]\n", argv[0]);
      return 1;
    }
  }
  bool ignored = false;
  char* no_args[] = {argv[0], nullptr};
  if (int status = bench::start("bench_vmm", 1, no_args, ignored); status >= 0) {
    return status;
  }
  try {
    cudrv::device dev(0);
    dev.set_current();
    if (!dev.attribute(cudrv::device_attributes::virtual_memory_management_supported)) {
      std::fprintf(stderr, "bench_vmm: device 0 has no virtual memory management\n");
      return 3;
    }
    const raw_api raw;
    const std::size_t g = cudrv::allocation_granularity(dev);
    std::printf("bench_vmm: device 0 (%s), driver CUDA %d.%d, allocation granularity %s minimum, %s recommended\n",
                dev.name().c_str(), cudrv::driver::version() / 1000, cudrv::driver::version() % 1000 / 10,
                mib(cudrv::allocation_granularity(dev, cudrv::granularity::minimum)).c_str(), mib(g).c_str());

    // (a) growth. The copy approach holds the old and the new buffer at once.
    std::size_t free_bytes = 0;
    std::size_t total_bytes = 0;
    {
      auto mem_info = reinterpret_cast<PFN_cuMemGetInfo_v3020>(cudrv::driver::get_entry_point("cuMemGetInfo", 3020));
      bench::check(mem_info(&free_bytes, &total_bytes), "cuMemGetInfo");
    }
    std::size_t max_bytes = max_gib * GiB;
    while (max_bytes > step_bytes && 2 * max_bytes > free_bytes / 10 * 9) {
      max_bytes -= step_bytes;
    }
    if (max_bytes != max_gib * GiB) {
      std::printf("growth: lowered the maximum to %s (the copy approach needs twice that; %s free)\n",
                  mib(max_bytes).c_str(), mib(free_bytes).c_str());
    }
    const cudrv::growable_buffer<char> probe(dev, step_bytes);
    const std::size_t default_chunk = probe.chunk_bytes();
    std::vector<std::size_t> chunks = {default_chunk};
    if (!quick) {
      chunks = {2 * MiB, default_chunk, 256 * MiB};
    }
    for (std::size_t chunk : chunks) {
      if (chunk % cudrv::allocation_granularity(dev, cudrv::granularity::minimum) == 0) {
        growth_figure(dev, raw, chunk, chunk == default_chunk, max_bytes, quick ? 1 : 3);
      }
    }

    // (b) bandwidth over 4 GiB (less on small devices).
    std::size_t bytes = 4 * GiB;
    while (bytes > 256 * MiB && 3 * bytes > free_bytes / 10 * 9) {
      bytes /= 2;
    }
    bandwidth_bench bb(dev, bytes, quick ? 3 : 10);
    cudrv::device_buffer<char> plain(dev, bytes);
    cudrv::device_buffer<char> plain2(dev, bytes);
    cudrv::fill(cudrv::device_span<unsigned>(plain.data(), bytes / 4), 0u, bb.stream);
    cudrv::fill(cudrv::device_span<unsigned>(plain2.data(), bytes / 4), 0u, bb.stream);
    bb.stream.synchronize();
    const int bw_rounds = quick ? 5 : 15;
    int plain_bursts = 0;
    int plain2_bursts = 0;
    bool correct = true;

    const pair_result aa = compare(bb, plain.data(), plain2.data(), bw_rounds);
    plain_bursts += bw_rounds + 1;
    plain2_bursts += bw_rounds + 1;
    bandwidth_line(dev, "second plain cuMemAlloc", 0, bytes, aa, bw_rounds);
    for (std::size_t chunk : {2 * MiB, default_chunk, 256 * MiB}) {
      if (chunk % cudrv::allocation_granularity(dev, cudrv::granularity::minimum) != 0) {
        continue;
      }
      cudrv::growable_buffer<unsigned> grown(dev, bytes / sizeof(unsigned), {.chunk_bytes = chunk});
      grown.grow_to(bytes / sizeof(unsigned));
      cudrv::fill(grown, 0u, bb.stream);
      bb.stream.synchronize();
      const pair_result r = compare(bb, plain.data(), grown.data(), bw_rounds);
      plain_bursts += bw_rounds + 1;
      const std::string label = "growable_buffer, " + mib(chunk) + " chunks";
      bandwidth_line(dev, label.c_str(), chunk, bytes, r, bw_rounds);
      const unsigned expected = static_cast<unsigned>((bw_rounds + 1) * bb.launches);
      if (!bb.holds(grown.data(), expected)) {
        std::fprintf(stderr, "bench_vmm: the growable buffer (%s chunks) does not hold %u after the runs\n",
                     mib(chunk).c_str(), expected);
        correct = false;
      }
    }
    if (!bb.holds(plain.data(), static_cast<unsigned>(plain_bursts * bb.launches)) ||
        !bb.holds(plain2.data(), static_cast<unsigned>(plain2_bursts * bb.launches))) {
      std::fprintf(stderr, "bench_vmm: a plain buffer does not hold the expected count after the runs\n");
      correct = false;
    }
    return correct ? 0 : 5;
  } catch (const cudrv::error& e) {
    std::fprintf(stderr, "bench_vmm: %s\n", e.what());
    return 4;
  }
}
