// cudrv-query --bench: copy bandwidths and launch latency, timed with CUDA events.
//
// Every figure is the median over `trials` timed trials. A trial records an event, enqueues
// `iterations` operations of the same kind on one stream, records a second event and divides the
// elapsed time. One untimed operation before the trials warms up the path (page-locking of pageable
// staging buffers, first-touch of host pages, lazy loading). Bandwidths are in GB/s = 1e9 bytes per
// second and count the bytes copied once: a device-to-device copy of N bytes reads N and writes N
// bytes of device memory, which is reported as N (the JSON also gives the read+write figure).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include <cudrv/copy.hpp>
#include <cudrv/device.hpp>
#include <cudrv/device_buffer.hpp>
#include <cudrv/event.hpp>
#include <cudrv/launch.hpp>
#include <cudrv/library.hpp>
#include <cudrv/object_code.hpp>
#include <cudrv/pinned_buffer.hpp>
#include <cudrv/stream.hpp>

#include "query.hpp"

namespace cudrv_query {

namespace {

// An empty kernel every device since sm_50 can load (the driver JIT-compiles it for the device).
constexpr const char* empty_kernel_ptx = R"(
.version 6.0
.target sm_50
.address_size 64
.visible .entry cudrv_query_empty() { ret; }
)";

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// The progress line on stderr: rewritten in place on a terminal, one line per step otherwise.
class progress_line {
 public:
  progress_line(bool enabled, int total) : enabled_(enabled), tty_(isatty(STDERR_FILENO) != 0), total_(total) {}
  progress_line(const progress_line&) = delete;
  progress_line& operator=(const progress_line&) = delete;
  ~progress_line() {
    if (enabled_ && tty_ && step_ > 0) {
      std::fputs("\r\033[K", stderr);
      std::fflush(stderr);
    }
  }
  void step(const std::string& what) {
    ++step_;
    if (!enabled_) {
      return;
    }
    std::fprintf(stderr, "%scudrv-query: bench [%d/%d] %s%s", tty_ ? "\r\033[K" : "", step_, total_, what.c_str(),
                 tty_ ? "" : "\n");
    std::fflush(stderr);
  }

 private:
  bool enabled_;
  bool tty_;
  int total_;
  int step_ = 0;
};

/// Times `op` (enqueueing one operation on `s`) as described at the top of the file; returns the
/// median time of one operation in seconds.
double time_per_operation(cudrv::stream_ref s, const cudrv::event& start, const cudrv::event& stop,
                          const bench_options& o, int ops_per_trial, const std::function<void()>& op) {
  op();
  s.synchronize();
  std::vector<double> per_op;
  per_op.reserve(static_cast<std::size_t>(o.trials));
  for (int t = 0; t < o.trials; ++t) {
    start.record(s);
    for (int i = 0; i < ops_per_trial; ++i) {
      op();
    }
    stop.record(s);
    stop.synchronize();
    per_op.push_back(cudrv::elapsed_time(start, stop).count() * 1e-3 / ops_per_trial);
  }
  return median(std::move(per_op));
}

double gbps(std::size_t bytes, double seconds) { return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0; }

constexpr int launches_per_iteration = 100;

}  // namespace

/// What one device's measurements use, made once.
struct device_bench::state {
  state(int ordinal, const bench_options& o)
      : options(o),
        dev(ordinal),
        s(dev),
        start(dev, cudrv::event_flags::timing),
        stop(dev, cudrv::event_flags::timing),
        a(dev, o.size),
        b(dev, o.size),
        pinned(dev, o.size),
        pageable(o.size),
        lib(cudrv::object_code(cudrv::code_kind::ptx, empty_kernel_ptx, "cudrv_query_empty.ptx")),
        empty(lib.get_kernel("cudrv_query_empty")) {
    // Every page touched before anything is timed.
    std::memset(pinned.data(), 1, o.size);
    std::memset(pageable.data(), 1, o.size);
    cudrv::fill(a, std::byte{2}, s);
    cudrv::fill(b, std::byte{3}, s);
    s.synchronize();
  }

  double copy_gbps(auto&& dst, auto&& src) {
    return gbps(options.size,
                time_per_operation(s, start, stop, options, options.iterations, [&] { cudrv::copy(dst, src, s); }));
  }

  bench_options options;
  cudrv::device dev;
  cudrv::stream s;
  cudrv::event start;
  cudrv::event stop;
  cudrv::device_buffer<std::byte> a;
  cudrv::device_buffer<std::byte> b;
  cudrv::pinned_buffer<std::byte> pinned;
  std::vector<std::byte> pageable;
  cudrv::library lib;
  cudrv::kernel empty;
  const cudrv::launch_config one{.grid = 1, .block = 1};
};

device_bench::device_bench(int ordinal, const bench_options& options)
    : state_(std::make_unique<state>(ordinal, options)) {}
device_bench::~device_bench() = default;
device_bench::device_bench(device_bench&&) noexcept = default;
device_bench& device_bench::operator=(device_bench&&) noexcept = default;

int device_bench::ordinal() const noexcept { return state_->dev.ordinal(); }
std::byte* device_bench::pinned_data() noexcept { return state_->pinned.data(); }
std::byte* device_bench::pageable_data() noexcept { return state_->pageable.data(); }

double device_bench::h2d_pinned_gbps() { return state_->copy_gbps(state_->a, state_->pinned); }
double device_bench::d2h_pinned_gbps() { return state_->copy_gbps(state_->pinned, state_->a); }
double device_bench::h2d_pageable_gbps() { return state_->copy_gbps(state_->a, state_->pageable); }
double device_bench::d2h_pageable_gbps() { return state_->copy_gbps(state_->pageable, state_->a); }
double device_bench::d2d_copy_gbps() { return state_->copy_gbps(state_->b, state_->a); }

double device_bench::launch_us() {
  state& st = *state_;
  return 1e6 * time_per_operation(st.s, st.start, st.stop, st.options, st.options.iterations * launches_per_iteration,
                                  [&] { cudrv::launch(st.s, st.one, st.empty); });
}

double device_bench::launch_sync_us() {
  state& st = *state_;
  const int n = round_trips_for(st.options);
  std::vector<double> round_trips;
  round_trips.reserve(static_cast<std::size_t>(n));
  cudrv::launch(st.s, st.one, st.empty);
  st.s.synchronize();
  for (int t = 0; t < n; ++t) {
    auto t0 = std::chrono::steady_clock::now();
    cudrv::launch(st.s, st.one, st.empty);
    st.s.synchronize();
    round_trips.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(std::move(round_trips));
}

double device_bench::p2p_gbps(device_bench& destination, bool& peer_access) {
  state& src = *state_;
  state& dst = *destination.state_;
  // Peer access where the driver allows it (both ways, as a copy engine may sit on either side);
  // elsewhere the driver stages the copy through host memory.
  peer_access = src.dev.can_access_peer(dst.dev) && dst.dev.can_access_peer(src.dev);
  if (peer_access) {
    src.dev.enable_peer_access(dst.dev);
    dst.dev.enable_peer_access(src.dev);
  }
  return gbps(src.options.size, time_per_operation(src.s, src.start, src.stop, src.options, src.options.iterations,
                                                   [&] { cudrv::copy_peer(dst.a, dst.dev, src.a, src.dev, src.s); }));
}

bench_results run_bench(const system_info& info, const bench_options& options) {
  bench_results results;
  results.options = options;
  constexpr int device_steps = 7;
  const int devices = static_cast<int>(info.devices.size());
  progress_line progress(options.progress, devices * device_steps + devices * (devices - 1));

  // What is measured on each device, in order: the progress label, the measurement, the result.
  struct step {
    const char* label;
    double (device_bench::*measure)();
    double bench_device::*result;
  };
  static constexpr step steps[] = {
      {"host to device, pinned", &device_bench::h2d_pinned_gbps, &bench_device::h2d_pinned_gbps},
      {"device to host, pinned", &device_bench::d2h_pinned_gbps, &bench_device::d2h_pinned_gbps},
      {"host to device, pageable", &device_bench::h2d_pageable_gbps, &bench_device::h2d_pageable_gbps},
      {"device to host, pageable", &device_bench::d2h_pageable_gbps, &bench_device::d2h_pageable_gbps},
      {"device to device", &device_bench::d2d_copy_gbps, &bench_device::d2d_copy_gbps},
      {"empty kernel launches", &device_bench::launch_us, &bench_device::launch_us},
      {"launch and synchronize", &device_bench::launch_sync_us, &bench_device::launch_sync_us},
  };
  static_assert(std::size(steps) == device_steps);

  std::vector<device_bench> benches;
  for (const device_info& d : info.devices) {
    std::string who = "device " + std::to_string(d.ordinal) + ": ";
    benches.emplace_back(d.ordinal, options);
    bench_device r;
    r.ordinal = d.ordinal;
    for (const step& st : steps) {
      progress.step(who + st.label);
      r.*st.result = (benches.back().*st.measure)();
    }
    results.devices.push_back(r);
  }
  for (device_bench& src : benches) {
    for (device_bench& dst : benches) {
      if (&src == &dst) {
        continue;
      }
      progress.step("device " + std::to_string(src.ordinal()) + " to device " + std::to_string(dst.ordinal()));
      bench_p2p p;
      p.from = src.ordinal();
      p.to = dst.ordinal();
      p.gbps = src.p2p_gbps(dst, p.peer_access);
      results.p2p.push_back(p);
    }
  }
  return results;
}

}  // namespace cudrv_query
