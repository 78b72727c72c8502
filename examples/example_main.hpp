// Shared by the examples: the documented exit statuses, sizes on the command line, run-time compilation
// through the compile cache, timing with events, the copy-bandwidth reference, and the two output
// lines every measuring example prints (one for people, one JSON line for scripts/run-examples.sh).
//
// Exit statuses: 0 success, 1 usage error, 2 no CUDA driver, 3 no CUDA device, 4 CUDA or compiler
// error, 5 the GPU's result differs from the host's.
#pragma once

#include <cudrv/cudrv.hpp>
#include <cudrv/rtc.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace example {

/// Thrown for a bad command line: run() prints it with the usage and returns 1.
struct usage_error {
  std::string message;
};

/// Runs body() (which returns true when the GPU's result matched the host's) and returns the exit status.
template <class Body>
int run(const char* name, Body&& body) {
  try {
    if (cudrv::device_count() == 0) {
      std::fprintf(stderr, "%s: the CUDA driver sees no device\n", name);
      return 3;
    }
    return body() ? 0 : 5;
  } catch (const usage_error& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.message.c_str());
    return 1;
  } catch (const cudrv::driver_unavailable_error& e) {
    std::fprintf(stderr, "%s: no usable CUDA driver: %s\n", name, e.what());
    return 2;
  } catch (const cudrv::error& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", name, e.what());
  }
  return 4;
}

/// A count with an optional binary suffix: "4096", "64K", "256M", "1G". Throws usage_error for
/// anything else, zero included.
inline std::size_t parse_size(const char* text, const char* what) {
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  std::size_t scale = 1;
  if (end != nullptr && *end != '\0') {
    switch (*end) {
      case 'k':
      case 'K': scale = std::size_t{1} << 10; break;
      case 'm':
      case 'M': scale = std::size_t{1} << 20; break;
      case 'g':
      case 'G': scale = std::size_t{1} << 30; break;
      default: scale = 0;
    }
    if (end[1] != '\0') {
      scale = 0;
    }
  }
  if (errno != 0 || end == text || scale == 0 || v == 0 || v > (~std::size_t{0}) / scale) {
    throw usage_error{std::string("invalid ") + what + " '" + text + "' (a positive count, optionally with K, M or G)"};
  }
  return static_cast<std::size_t>(v) * scale;
}

/// The n-th command-line argument as a size, or fallback when it is absent.
inline std::size_t size_arg(int argc, char** argv, int n, std::size_t fallback, const char* what) {
  return argc > n ? parse_size(argv[n], what) : fallback;
}

/// The architecture to compile for: the device's own ("sm_90"), or its arch-specific variant
/// ("sm_90a", for wgmma, setmaxnreg and the other instructions of one architecture only).
inline std::string arch_of(const cudrv::device& dev, bool arch_specific = false) {
  return dev.arch() + (arch_specific ? "a" : "");
}

/// Compiles source with NVRTC through the persistent compile cache (a second run of an example loads
/// its cubin from the cache) and loads it into dev's primary context. name_expressions are template
/// instantiations to lower; their kernels are then found by the expression (`lib.get_kernel("f<4>")`).
inline cudrv::library compile(const cudrv::device& dev, const char* name, const char* source,
                              const std::vector<std::string>& name_expressions = {},
                              cudrv::compile_options options = {}) {
  if (options.arch.empty()) {
    options.arch = arch_of(dev);
  }
  if (options.cpp_standard.empty()) {
    options.cpp_standard = "c++17";
  }
  static cudrv::compile_cache cache = cudrv::compile_cache::from_environment();
  const cudrv::program prog(name, source);
  return cudrv::library(cache.compile(prog, cudrv::code_kind::cubin, options, name_expressions), dev);
}

/// The median of values (which it reorders); 0 for none.
inline double median(std::vector<double> values) {
  if (values.empty()) {
    return 0;
  }
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

/// A reproducible generator (splitmix64) for example data: next() gives 64 random bits, uniform() a value
/// in [-1, 1) with 24 random bits (exact in float).
struct random_source {
  std::uint64_t state;  ///< the seed, then the generator's state
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 40) * 0x1p-23 - 1.0; }
};

/// "3.012 ms (3.020 3.012)": the best of the rounds' times, then every round's, for a table row.
inline std::string format_rounds(const std::vector<double>& ms) {
  std::string text;
  char buffer[32];
  for (const double t : ms) {
    std::snprintf(buffer, sizeof buffer, "%s%.3f", text.empty() ? "" : " ", t);
    text += buffer;
  }
  std::snprintf(buffer, sizeof buffer, "%8.3f ms (", ms.empty() ? 0.0 : *std::min_element(ms.begin(), ms.end()));
  return buffer + text + ")";
}

/// FNV-1a over the bit patterns of the elements (floats, BF16 words...): equal hashes of two results
/// mean that they are equal bit for bit.
template <class T>
std::uint64_t hash_bits(const std::vector<T>& v) {
  using word = std::conditional_t<sizeof(T) == 2, std::uint16_t,
                                  std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>;
  static_assert(sizeof(word) == sizeof(T), "elements of 2, 4 or 8 bytes");
  std::uint64_t h = 1469598103934665603ull;
  for (const T& x : v) {
    word bits = 0;
    std::memcpy(&bits, &x, sizeof bits);
    h = (h ^ bits) * 1099511628211ull;
  }
  return h;
}

/// Runs work(stream) once to warm up, then `repetitions` times between two events each, and returns the
/// median time in milliseconds. work must only enqueue on the stream.
template <class Work>
double time_ms(const cudrv::device& dev, cudrv::stream_ref stream, int repetitions, Work&& work) {
  work(stream);
  stream.synchronize();
  cudrv::event start(dev, cudrv::event_flags::timing);
  cudrv::event stop(dev, cudrv::event_flags::timing);
  std::vector<double> times;
  times.reserve(static_cast<std::size_t>(repetitions));
  for (int r = 0; r < repetitions; ++r) {
    start.record(stream);
    work(stream);
    stop.record(stream);
    stop.synchronize();
    times.push_back(cudrv::elapsed_time(start, stop).count());
  }
  return median(times);
}

/// The device-to-device copy bandwidth, bytes read plus bytes written per second (GB/s, 1e9), of
/// copies of `bytes` through cuMemcpyAsync: the memory-bound examples' limit, measured in the same run.
inline double copy_bandwidth_gbs(const cudrv::device& dev, cudrv::stream_ref stream, std::size_t bytes,
                                 int repetitions = 20) {
  cudrv::device_buffer<unsigned char> a(dev, bytes), b(dev, bytes);
  cudrv::fill(a, static_cast<unsigned char>(1), stream);
  const double ms = time_ms(dev, stream, repetitions, [&](cudrv::stream_ref s) { cudrv::copy(b, a, s); });
  return 2.0 * static_cast<double>(bytes) / (ms * 1e6);
}

/// Prints the two lines of a measuring example: one for people and one JSON line,
/// `{"example":..., "metric":..., "value":..., "reference":..., "fraction":..., ...}`.
/// fraction is value / reference (for a time, where lower is better, pass the reference's rate and
/// the example's rate so that above 1 always means faster). target is the fraction the issue asks
/// for (0: none); reference_name says what the reference is.
struct figure {
  const char* example;         ///< the example's name, as in its executable example_<name>
  const char* metric;          ///< what is measured, with its unit: "GB/s", "TFLOP/s", "speedup"
  double value;                ///< the example's figure
  double reference;            ///< the limit or the vendor library's figure, same unit, same run
  const char* reference_name;  ///< what the reference is: "D2D copy", "CUB DeviceReduce::Sum", ...
  double target = 0;           ///< the fraction of the reference the example should reach
  std::string detail = {};     ///< size and configuration, for people
  double bytes = 0;            ///< bytes moved through device memory per run (for the roofline), or 0
  double flops = 0;            ///< floating-point operations per run (for the roofline), or 0
  double seconds = 0;          ///< time per run, or 0
  std::string json = {};       ///< more members for the JSON line, `"key": value, ...` (the MPI examples' "ranks")
};

inline void report(const figure& f) {
  const double fraction = f.reference > 0 ? f.value / f.reference : 0;
  std::printf("%s: %.4g %s = %.3f x %s (%.4g %s)%s%s%s\n", f.example, f.value, f.metric, fraction, f.reference_name,
              f.reference, f.metric,
              f.target > 0 ? (fraction >= f.target ? ", target met (" : ", TARGET MISSED (") : "",
              f.target > 0 ? (std::to_string(f.target).substr(0, 4) + " x)").c_str() : "",
              f.detail.empty() ? "" : ("; " + f.detail).c_str());
  std::printf(
      "{\"example\": \"%s\", \"metric\": \"%s\", \"value\": %.6g, \"reference\": %.6g, \"fraction\": %.4f, "
      "\"reference_name\": \"%s\", \"target\": %.4g, \"bytes\": %.6g, \"flops\": %.6g, \"seconds\": %.6g%s%s}\n",
      f.example, f.metric, f.value, f.reference, fraction, f.reference_name, f.target, f.bytes, f.flops, f.seconds,
      f.json.empty() ? "" : ", ", f.json.c_str());
  std::fflush(stdout);
}

/// The relative error ||out - ref|| / ||ref|| (2-norms, in double).
template <class T>
double relative_error(const std::vector<T>& out, const std::vector<double>& ref) {
  double num = 0;
  double den = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double d = static_cast<double>(out[i]) - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

}  // namespace example
