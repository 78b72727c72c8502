// bench_foundation: what the foundation types of cudrv cost compared with the raw driver call.
//
//   bench_foundation [--quick]
//
// Both sides run in the same binary, on the same device, interleaved. The raw side calls driver
// entry points obtained with cudrv::driver::get_entry_point (cuGetProcAddress, the same loader
// cudrv uses), typed with the PFN_ typedefs of <cudaTypedefs.h>, and checks every status as cudrv
// does. Method:
//   - device 0's primary context is made current first (cudrv::device(0).set_current());
//   - each case is warmed up on both sides;
//   - then R rounds; each round runs the raw side and the cudrv side for N iterations each,
//     alternating which side goes first, and records the time per iteration;
//   - reported: per side the median and the best (min time, or max bandwidth) over the rounds, and
//     the ratio cudrv/raw of each.
// Host-side cases are timed with std::chrono::steady_clock; copies with timed CUDA events around
// each copy. Stream syncs that keep queues from filling are outside the timed sections.
//
// Exit status: 0 success, 1 usage error, 2 no CUDA driver, 3 no CUDA device, 4 CUDA error.
#include <cudaTypedefs.h>

#include <cudrv/cudrv.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using steady = std::chrono::steady_clock;

double ns_since(steady::time_point t0) { return std::chrono::duration<double, std::nano>(steady::now() - t0).count(); }

// The raw driver entry points, resolved at the same API versions cudrv uses.
struct raw_api {
  PFN_cuStreamCreateWithPriority_v5050 stream_create = nullptr;
  PFN_cuStreamDestroy_v4000 stream_destroy = nullptr;
  PFN_cuEventCreate_v2000 event_create = nullptr;
  PFN_cuEventDestroy_v4000 event_destroy = nullptr;
  PFN_cuEventRecord_v2000 event_record = nullptr;
  PFN_cuMemAllocAsync_v11020 mem_alloc_async = nullptr;
  PFN_cuMemFreeAsync_v11020 mem_free_async = nullptr;
  PFN_cuMemcpyAsync_v4000 memcpy_async = nullptr;
  PFN_cuCtxGetCurrent_v4000 ctx_get_current = nullptr;
};

template <class Pfn>
void load(Pfn& fn, const char* symbol, int api_version) {
  fn = reinterpret_cast<Pfn>(cudrv::driver::get_entry_point(symbol, api_version));
}

raw_api load_raw_api() {
  raw_api api;
  load(api.stream_create, "cuStreamCreateWithPriority", 5050);
  load(api.stream_destroy, "cuStreamDestroy", 4000);
  load(api.event_create, "cuEventCreate", 2000);
  load(api.event_destroy, "cuEventDestroy", 4000);
  load(api.event_record, "cuEventRecord", 2000);
  load(api.mem_alloc_async, "cuMemAllocAsync", 11020);
  load(api.mem_free_async, "cuMemFreeAsync", 11020);
  load(api.memcpy_async, "cuMemcpyAsync", 4000);
  load(api.ctx_get_current, "cuCtxGetCurrent", 4000);
  return api;
}

// The raw side checks every status, as cudrv does.
inline void check(CUresult status, const char* api) {
  if (status != CUDA_SUCCESS) [[unlikely]] {
    throw cudrv::error(status, api);
  }
}

struct config {
  int rounds = 41;           // rounds of the host-side cases
  int iteration_scale = 1;   // divides the iteration counts
  int copy_rounds = 7;       // rounds of the copy cases
  int copy_repetitions = 3;  // timed copies per side per round
  std::size_t copy_bytes = std::size_t(1) << 30;
};

enum class unit { time, bandwidth };

struct result {
  std::string name;
  unit kind = unit::time;
  std::vector<double> raw;  // ns per iteration, or GB/s
  std::vector<double> cudrv;
};

double median(std::vector<double> v) {
  if (v.empty()) {
    return 0.0;
  }
  std::sort(v.begin(), v.end());
  std::size_t mid = v.size() / 2;
  return v.size() % 2 == 1 ? v[mid] : 0.5 * (v[mid - 1] + v[mid]);
}

double best(const std::vector<double>& v, unit kind) {
  if (v.empty()) {
    return 0.0;
  }
  return kind == unit::time ? *std::min_element(v.begin(), v.end()) : *std::max_element(v.begin(), v.end());
}

std::string format_value(double value, unit kind) {
  char buffer[48];
  if (kind == unit::time) {
    std::snprintf(buffer, sizeof(buffer), "%.3f us", value / 1000.0);
  } else {
    std::snprintf(buffer, sizeof(buffer), "%.1f GB/s", value);
  }
  return buffer;
}

// The median over the rounds of cudrv_i / raw_i: each ratio compares two measurements taken next to
// each other, so drift of the machine between rounds cancels out.
double paired_ratio(const result& r) {
  std::vector<double> ratios;
  for (std::size_t i = 0; i < r.raw.size() && i < r.cudrv.size(); ++i) {
    if (r.raw[i] > 0.0) {
      ratios.push_back(r.cudrv[i] / r.raw[i]);
    }
  }
  return median(ratios);
}

std::string format_ratio(double cudrv, double raw) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.3f", raw > 0.0 ? cudrv / raw : 0.0);
  return buffer;
}

void print_progress(const result& r) {
  const double raw_median = median(r.raw);
  const double cudrv_median = median(r.cudrv);
  std::printf("  %-40s raw %12s  cudrv %12s  ratio %s  paired %.3f  (best: raw %s, cudrv %s)\n", r.name.c_str(),
              format_value(raw_median, r.kind).c_str(), format_value(cudrv_median, r.kind).c_str(),
              format_ratio(cudrv_median, raw_median).c_str(), paired_ratio(r),
              format_value(best(r.raw, r.kind), r.kind).c_str(), format_value(best(r.cudrv, r.kind), r.kind).c_str());
  std::fflush(stdout);
}

// A side of a host-side case: runs n iterations, returns the nanoseconds of the timed part.
using timed_loop = std::function<double(int)>;

result measure_host(const std::string& name, const timed_loop& raw, const timed_loop& cudrv, int iterations,
                    const config& cfg) {
  result r{name, unit::time, {}, {}};
  raw(iterations);  // warm-up: caches, lazily resolved entry points, driver free lists
  cudrv(iterations);
  for (int round = 0; round < cfg.rounds; ++round) {
    if (round % 2 == 0) {
      r.raw.push_back(raw(iterations) / iterations);
      r.cudrv.push_back(cudrv(iterations) / iterations);
    } else {
      r.cudrv.push_back(cudrv(iterations) / iterations);
      r.raw.push_back(raw(iterations) / iterations);
    }
  }
  print_progress(r);
  return r;
}

// Runs `body(batch)` in batches of at most `batch` iterations, timing only the bodies; `between`
// (untimed) runs after each batch, e.g. a stream sync so that the queue never fills.
template <class Body, class Between>
double batched(int n, int batch, Body&& body, Between&& between) {
  double ns = 0.0;
  for (int done = 0; done < n; done += batch) {
    const int count = std::min(batch, n - done);
    const steady::time_point t0 = steady::now();
    body(count);
    ns += ns_since(t0);
    between();
  }
  return ns;
}

int run(const config& cfg, bool quick) {
  if (!cudrv::driver::available()) {
    std::fprintf(stderr, "bench_foundation: no usable CUDA driver: %s\n", cudrv::driver::unavailable_reason().c_str());
    return 2;
  }
  if (cudrv::device_count() == 0) {
    std::fprintf(stderr, "bench_foundation: the CUDA driver sees no device\n");
    return 3;
  }

  cudrv::device dev(0);
  dev.set_current();  // both sides then run in device 0's primary context
  const raw_api api = load_raw_api();
  const int driver = cudrv::driver::version();
  std::printf("bench_foundation%s: device 0 (%s, %s), driver CUDA %d.%d, built with CUDA %d.%d\n",
              quick ? " --quick" : "", dev.name().c_str(), dev.arch().c_str(), driver / 1000, driver % 1000 / 10,
              CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10);
  std::printf("host cases: %d rounds, raw and cudrv interleaved, order alternating; copies: %d rounds x %d copies "
              "of %zu MiB per side\n\n",
              cfg.rounds, cfg.copy_rounds, cfg.copy_repetitions, cfg.copy_bytes >> 20);

  std::vector<result> results;
  const int scale = cfg.iteration_scale;
  constexpr int sync_batch = 256;  // operations queued between two (untimed) stream syncs

  // (a) stream create + destroy: non-blocking, priority 0 on both sides.
  {
    timed_loop raw = [&](int n) {
      const steady::time_point t0 = steady::now();
      for (int i = 0; i < n; ++i) {
        CUstream s = nullptr;
        check(api.stream_create(&s, CU_STREAM_NON_BLOCKING, 0), "cuStreamCreateWithPriority");
        check(api.stream_destroy(s), "cuStreamDestroy");
      }
      return ns_since(t0);
    };
    timed_loop wrapped = [&](int n) {
      const steady::time_point t0 = steady::now();
      for (int i = 0; i < n; ++i) {
        cudrv::stream s(dev);
      }
      return ns_since(t0);
    };
    results.push_back(measure_host("stream create+destroy", raw, wrapped, 2000 / scale, cfg));
  }

  // (b) event create + destroy, untimed events on both sides; then (b1) the noise floor: the raw
  // side against itself (an A/A comparison), which shows how far two identical sides drift apart.
  {
    timed_loop raw = [&](int n) {
      const steady::time_point t0 = steady::now();
      for (int i = 0; i < n; ++i) {
        CUevent e = nullptr;
        check(api.event_create(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
        check(api.event_destroy(e), "cuEventDestroy");
      }
      return ns_since(t0);
    };
    timed_loop wrapped = [&](int n) {
      const steady::time_point t0 = steady::now();
      for (int i = 0; i < n; ++i) {
        cudrv::event e(dev);
      }
      return ns_since(t0);
    };
    results.push_back(measure_host("event create+destroy", raw, wrapped, 20000 / scale, cfg));
    results.push_back(measure_host("A/A: raw event create+destroy vs itself", raw, raw, 20000 / scale, cfg));
    // (b1') Where the difference goes: the raw calls plus the one check cudrv adds (cuCtxGetCurrent,
    // compared with the context the event is for, as a careful raw caller would) against cudrv. What
    // remains between the two is cudrv's own code; the rest of (b) is the driver's cuCtxGetCurrent.
    const CUcontext primary = dev.primary_context().native_handle();
    timed_loop checked = [&](int n) {
      const steady::time_point t0 = steady::now();
      for (int i = 0; i < n; ++i) {
        CUcontext c = nullptr;
        check(api.ctx_get_current(&c), "cuCtxGetCurrent");
        if (c != primary) {
          throw std::runtime_error("the primary context is not current");
        }
        CUevent e = nullptr;
        check(api.event_create(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
        check(api.event_destroy(e), "cuEventDestroy");
      }
      return ns_since(t0);
    };
    results.push_back(
        measure_host("event create+destroy against raw + context check", checked, wrapped, 20000 / scale, cfg));
    // (b1c) The price of the guarantee alone: the raw sequence with the check against the raw one.
    results.push_back(measure_host("context check alone: raw+check vs raw", raw, checked, 20000 / scale, cfg));
    // (b1p) The fast path without the check: an event_pool hands out an idle event and takes it back,
    // no driver call, against the raw create+destroy it replaces.
    cudrv::event_pool pool(dev);
    pool.reserve(1);
    timed_loop pooled = [&](int n) {
      const steady::time_point t0 = steady::now();
      for (int i = 0; i < n; ++i) {
        cudrv::pooled_event e = pool.acquire();
      }
      return ns_since(t0);
    };
    results.push_back(
        measure_host("event_pool acquire+release vs raw create+destroy", raw, pooled, 20000 / scale, cfg));
  }

  // (b2) event create + record + destroy: the "event create+record", as one operation.
  {
    cudrv::stream s(dev);
    const CUstream hs = s.native_handle();
    auto sync = [&] { s.synchronize(); };
    timed_loop raw = [&](int n) {
      return batched(
          n, sync_batch,
          [&](int count) {
            for (int i = 0; i < count; ++i) {
              CUevent e = nullptr;
              check(api.event_create(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
              check(api.event_record(e, hs), "cuEventRecord");
              check(api.event_destroy(e), "cuEventDestroy");
            }
          },
          sync);
    };
    timed_loop wrapped = [&](int n) {
      return batched(
          n, sync_batch,
          [&](int count) {
            for (int i = 0; i < count; ++i) {
              cudrv::event e(dev);
              e.record(s);
            }
          },
          sync);
    };
    results.push_back(measure_host("event create+record+destroy", raw, wrapped, 20000 / scale, cfg));
    // (b2p) The same with the fast path: a pooled event recorded and given back.
    cudrv::event_pool pool(dev);
    pool.reserve(1);
    timed_loop pooled = [&](int n) {
      return batched(
          n, sync_batch,
          [&](int count) {
            for (int i = 0; i < count; ++i) {
              cudrv::pooled_event e = pool.acquire();
              e.record(s);
            }
          },
          sync);
    };
    results.push_back(measure_host("event_pool acquire+record+release vs raw create+record+destroy", raw, pooled,
                                   20000 / scale, cfg));
  }

  // (b3) the one driver call cudrv adds to every creation: reading the current context, to make
  // the object's context current only when it is not. Raw cuCtxGetCurrent against
  // cudrv::context_ref::current() (the same call, checked).
  {
    timed_loop raw = [&](int n) {
      const steady::time_point t0 = steady::now();
      CUcontext sink = nullptr;
      for (int i = 0; i < n; ++i) {
        CUcontext c = nullptr;
        check(api.ctx_get_current(&c), "cuCtxGetCurrent");
        sink = c;
      }
      const double t = ns_since(t0);
      if (sink == nullptr) {
        throw std::runtime_error("no current context");
      }
      return t;
    };
    timed_loop wrapped = [&](int n) {
      const steady::time_point t0 = steady::now();
      CUcontext sink = nullptr;
      for (int i = 0; i < n; ++i) {
        sink = cudrv::context_ref::current().native_handle();
      }
      const double t = ns_since(t0);
      if (sink == nullptr) {
        throw std::runtime_error("no current context");
      }
      return t;
    };
    results.push_back(measure_host("current-context read (cuCtxGetCurrent)", raw, wrapped, 200000 / scale, cfg));
  }

  // (c) event record on a stream; each side records its own untimed event.
  {
    cudrv::stream s(dev);
    cudrv::event raw_event(dev);
    cudrv::event cudrv_event(dev);
    const CUstream hs = s.native_handle();
    const CUevent he = raw_event.native_handle();
    auto sync = [&] { s.synchronize(); };
    timed_loop raw = [&](int n) {
      return batched(
          n, sync_batch,
          [&](int count) {
            for (int i = 0; i < count; ++i) {
              check(api.event_record(he, hs), "cuEventRecord");
            }
          },
          sync);
    };
    timed_loop wrapped = [&](int n) {
      return batched(
          n, sync_batch,
          [&](int count) {
            for (int i = 0; i < count; ++i) {
              cudrv_event.record(s);
            }
          },
          sync);
    };
    results.push_back(measure_host("event record", raw, wrapped, 20000 / scale, cfg));
  }

  // (d) stream-ordered allocate + free of 1 MiB from the device's current pool, on one stream.
  if (dev.attribute(cudrv::device_attributes::memory_pools_supported)) {
    constexpr std::size_t bytes = std::size_t(1) << 20;
    cudrv::memory_pool_ref pool = cudrv::current_memory_pool(dev);
    // Keep freed memory in the pool across the untimed syncs, so that no batch starts by mapping
    // memory again; restored below.
    const std::size_t previous_threshold = pool.release_threshold();
    pool.set_release_threshold(std::numeric_limits<std::size_t>::max());
    cudrv::stream s(dev);
    const CUstream hs = s.native_handle();
    auto sync = [&] { s.synchronize(); };
    timed_loop raw = [&](int n) {
      return batched(
          n, sync_batch,
          [&](int count) {
            for (int i = 0; i < count; ++i) {
              CUdeviceptr p = 0;
              check(api.mem_alloc_async(&p, bytes, hs), "cuMemAllocAsync");
              check(api.mem_free_async(p, hs), "cuMemFreeAsync");
            }
          },
          sync);
    };
    timed_loop wrapped = [&](int n) {
      return batched(
          n, sync_batch,
          [&](int count) {
            for (int i = 0; i < count; ++i) {
              cudrv::device_buffer<std::byte> b(s, bytes);
            }
          },
          sync);
    };
    results.push_back(measure_host("pool alloc+free 1 MiB (stream-ordered)", raw, wrapped, 10000 / scale, cfg));
    // (d1) The price of the lifetime guarantee alone: a buffer on a cudrv::stream holds a counted reference
    // on the stream's state (one increment at allocation, one decrement at the free), made here by hand
    // around the raw calls, against the raw calls.
    std::atomic<long> users{1};
    timed_loop counted = [&](int n) {
      return batched(
          n, sync_batch,
          [&](int count) {
            for (int i = 0; i < count; ++i) {
              CUdeviceptr p = 0;
              check(api.mem_alloc_async(&p, bytes, hs), "cuMemAllocAsync");
              users.fetch_add(1, std::memory_order_relaxed);
              check(api.mem_free_async(p, hs), "cuMemFreeAsync");
              if (users.fetch_sub(1, std::memory_order_acq_rel) == 1) {
                throw std::runtime_error("the stream's count reached 0");
              }
            }
          },
          sync);
    };
    results.push_back(measure_host("stream reference alone: raw+count vs raw", raw, counted, 10000 / scale, cfg));
    s.synchronize();
    pool.set_release_threshold(previous_threshold);
  } else {
    std::printf("  %-40s skipped: the device has no memory pools\n", "pool alloc+free 1 MiB (stream-ordered)");
  }

  // (e) 1 GiB copies, pinned host memory, timed with events around each copy.
  {
    const std::size_t bytes = cfg.copy_bytes;
    cudrv::pinned_buffer<std::byte> host(dev, bytes);
    cudrv::device_buffer<std::byte> d0(dev, bytes);
    cudrv::device_buffer<std::byte> d1(dev, bytes);
    cudrv::stream s(dev);
    const CUstream hs = s.native_handle();
    std::memset(host.data(), 0x5a, bytes);
    cudrv::fill(d0, std::byte{0x3c}, s);
    cudrv::fill(d1, std::byte{0x00}, s);
    s.synchronize();

    cudrv::event start(dev, cudrv::event_flags::timing);
    cudrv::event stop(dev, cudrv::event_flags::timing);
    const auto host_address = reinterpret_cast<CUdeviceptr>(host.data());

    // One copy between two timed events; returns GB/s with `counted` bytes.
    auto timed_copy = [&](const std::function<void()>& enqueue, std::size_t counted) {
      start.record(s);
      enqueue();
      stop.record(s);
      stop.synchronize();
      const double ms = cudrv::elapsed_time(start, stop).count();
      return ms > 0.0 ? static_cast<double>(counted) / (ms * 1e6) : 0.0;
    };
    auto measure_copy = [&](const std::string& name, const std::function<void()>& raw,
                            const std::function<void()>& wrapped, std::size_t counted) {
      result r{name, unit::bandwidth, {}, {}};
      timed_copy(raw, counted);  // warm-up
      timed_copy(wrapped, counted);
      for (int round = 0; round < cfg.copy_rounds; ++round) {
        for (int rep = 0; rep < cfg.copy_repetitions; ++rep) {
          if ((round + rep) % 2 == 0) {
            r.raw.push_back(timed_copy(raw, counted));
            r.cudrv.push_back(timed_copy(wrapped, counted));
          } else {
            r.cudrv.push_back(timed_copy(wrapped, counted));
            r.raw.push_back(timed_copy(raw, counted));
          }
        }
      }
      print_progress(r);
      results.push_back(std::move(r));
    };

    const std::string size = std::to_string(bytes >> 20) + " MiB";
    measure_copy(
        "H2D pinned " + size, [&] { check(api.memcpy_async(d0.data(), host_address, bytes, hs), "cuMemcpyAsync"); },
        [&] { cudrv::copy(d0, host, s); }, bytes);
    measure_copy(
        "D2H pinned " + size, [&] { check(api.memcpy_async(host_address, d0.data(), bytes, hs), "cuMemcpyAsync"); },
        [&] { cudrv::copy(host, d0, s); }, bytes);
    measure_copy(
        "D2D " + size + " (read+write counted)",
        [&] { check(api.memcpy_async(d1.data(), d0.data(), bytes, hs), "cuMemcpyAsync"); },
        [&] { cudrv::copy(d1, d0, s); }, 2 * bytes);
    s.synchronize();
  }

  std::printf("\n| case | raw | cudrv | ratio cudrv/raw | paired ratio | raw (best) | cudrv (best) | ratio (best) |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const result& r : results) {
    const double raw_median = median(r.raw);
    const double cudrv_median = median(r.cudrv);
    const double raw_best = best(r.raw, r.kind);
    const double cudrv_best = best(r.cudrv, r.kind);
    std::printf("| %s | %s | %s | %s | %.3f | %s | %s | %s |\n", r.name.c_str(),
                format_value(raw_median, r.kind).c_str(), format_value(cudrv_median, r.kind).c_str(),
                format_ratio(cudrv_median, raw_median).c_str(), paired_ratio(r), format_value(raw_best, r.kind).c_str(),
                format_value(cudrv_best, r.kind).c_str(), format_ratio(cudrv_best, raw_best).c_str());
  }
  std::printf(
      "\nraw, cudrv: medians over the rounds (times per iteration; bandwidth per copy). best: min time, max "
      "bandwidth.\n"
      "ratio = cudrv/raw: for times above 1 means cudrv is slower; for bandwidth below 1 means cudrv is slower.\n"
      "paired ratio: the median over the rounds of the ratio within each round (raw and cudrv run back to back).\n"
      "D2D bandwidth counts the bytes read and the bytes written (2 x size per copy), like the REFERENCE baseline.\n"
      "The pool case runs with the pool's release threshold raised so that memory stays mapped across syncs.\n");
  return 0;
}

void usage(std::FILE* to) {
  std::fprintf(to, "usage: bench_foundation [--quick]\n"
                   "  --quick   fewer rounds and iterations (a few seconds less; for smoke runs)\n"
                   "exit status: 0 ok, 1 usage, 2 no CUDA driver, 3 no CUDA device, 4 CUDA error\n");
}

}  // namespace

int main(int argc, char** argv) {
  config cfg;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "bench_foundation: unknown argument '%s'\n", argv[i]);
      usage(stderr);
      return 1;
    }
  }
  if (quick) {
    cfg.rounds = 5;
    cfg.iteration_scale = 4;
    cfg.copy_rounds = 2;
    cfg.copy_repetitions = 2;
  }
  try {
    return run(cfg, quick);
  } catch (const cudrv::driver_unavailable_error& e) {
    std::fprintf(stderr, "bench_foundation: no usable CUDA driver: %s\n", e.what());
    return 2;
  } catch (const cudrv::error& e) {
    std::fprintf(stderr, "bench_foundation: CUDA error: %s\n", e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_foundation: error: %s\n", e.what());
  }
  return 4;
}
