// Example: a chunked host -> device -> host round trip, pipelined over several streams.
//
//   example_copy_pipeline [total_MiB [chunk_MiB [streams]]]      defaults: 256 8 3
//
// The data is split into chunks; chunk k goes to stream k % streams, which copies it into that
// stream's device staging buffer (H2D) and straight back into a second host buffer (D2H). Work on
// one stream is ordered, so the staging buffer is reused safely; work on different streams
// overlaps, so one stream's H2D runs while another's D2H does (one copy engine each way).
//
// Shows: pinned host buffers (cudrv::pinned_buffer), stream-ordered device buffers
// (cudrv::device_buffer<T>(stream, n), freed on their stream), cudrv::copy in both directions,
// cudrv::fill, timed events (cudrv::event_flags::timing, cudrv::elapsed_time) around the whole
// pipeline and per stream, and cross-stream ordering with stream.wait(event). The round trip is
// verified byte for byte on random data.
//
// Exit status: 0 success, 1 usage error, 2 no CUDA driver, 3 no CUDA device, 4 CUDA error,
// 5 the data came back different.
#include <cudrv/cudrv.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <span>
#include <string>
#include <vector>

namespace {

using element = std::uint32_t;
constexpr element host_poison = 0xbaadf00du;    // what the destination holds before a pass
constexpr element device_poison = 0xdeadbeefu;  // what the staging buffers hold before a pass

struct options {
  std::size_t total_mib = 256;
  std::size_t chunk_mib = 8;
  std::size_t streams = 3;
};

// One stream of the pipeline with its staging buffer and timing events. Members are destroyed in
// reverse order: the events, then the buffer (freed on its stream), then the stream.
struct lane {
  cudrv::stream stream;
  cudrv::device_buffer<element> staging;
  cudrv::event begin;
  cudrv::event end;
  std::size_t chunks = 0;
  std::size_t bytes_moved = 0;  // H2D + D2H
};

bool parse_size(const char* text, std::size_t& out) {
  char* end = nullptr;
  unsigned long long value = std::strtoull(text, &end, 10);
  if (end == text || *end != '\0' || value == 0 || text[0] == '-') {
    return false;
  }
  out = static_cast<std::size_t>(value);
  return true;
}

void usage(std::FILE* to) {
  std::fprintf(to, "usage: example_copy_pipeline [total_MiB [chunk_MiB [streams]]]   (defaults: 256 8 3)\n"
                   "exit status: 0 ok, 1 usage, 2 no CUDA driver, 3 no CUDA device, 4 CUDA error, 5 data mismatch\n");
}

double gb_per_s(std::size_t bytes, float ms) { return ms > 0.0f ? static_cast<double>(bytes) / (ms * 1e6) : 0.0; }

// A fast, reproducible generator (splitmix64); the data only needs to be random-looking.
void fill_random(std::span<element> data, std::uint64_t seed) {
  std::uint64_t state = seed;
  for (element& x : data) {
    state += 0x9e3779b97f4a7c15ull;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    x = static_cast<element>((z ^ (z >> 31)) >> 16);
  }
}

// Returns the index of the first element that differs, or data size when all match.
std::size_t first_mismatch(std::span<const element> expected, std::span<const element> actual) {
  if (std::memcmp(expected.data(), actual.data(), expected.size_bytes()) == 0) {
    return expected.size();
  }
  return static_cast<std::size_t>(std::mismatch(expected.begin(), expected.end(), actual.begin()).first -
                                  expected.begin());
}

int run(const options& opt) {
  if (!cudrv::driver::available()) {
    std::fprintf(stderr, "copy_pipeline: no usable CUDA driver: %s\n", cudrv::driver::unavailable_reason().c_str());
    return 2;
  }
  if (cudrv::device_count() == 0) {
    std::fprintf(stderr, "copy_pipeline: the CUDA driver sees no device\n");
    return 3;
  }

  cudrv::device dev(0);
  // Like cudaSetDevice(0): stream-ordered driver calls (cuMemcpyAsync, cuMemAllocAsync) run in the
  // current context, so make the device's primary context current once.
  dev.set_current();

  const std::size_t total = (opt.total_mib << 20) / sizeof(element);
  const std::size_t chunk = (std::min(opt.chunk_mib, opt.total_mib) << 20) / sizeof(element);
  const std::size_t chunk_count = (total + chunk - 1) / chunk;
  std::printf("copy_pipeline: %zu MiB in %zu chunks of %zu MiB over %zu streams on device %d (%s)\n", opt.total_mib,
              chunk_count, chunk * sizeof(element) >> 20, opt.streams, dev.ordinal(), dev.name().c_str());

  // Page-locked host memory: what makes the copies asynchronous and fast.
  cudrv::pinned_buffer<element> source(dev, total);
  cudrv::pinned_buffer<element> result(dev, total);
  fill_random(source.view(), 20261122);

  const auto timing = cudrv::event_flags::timing;
  cudrv::stream control(dev);
  cudrv::event start(dev, timing);
  cudrv::event stop(dev, timing);

  std::vector<lane> lanes;
  lanes.reserve(opt.streams);
  for (std::size_t i = 0; i < opt.streams; ++i) {
    cudrv::stream s(dev);
    cudrv::device_buffer<element> staging(s, chunk);  // stream-ordered: allocated, and later freed, on s
    lanes.push_back(lane{std::move(s), std::move(staging), cudrv::event(dev, timing), cudrv::event(dev, timing)});
  }

  constexpr int passes = 2;  // the first one warms up (pool growth, copy engine set-up)
  int status = 0;
  for (int pass = 1; pass <= passes; ++pass) {
    std::fill(result.begin(), result.end(), host_poison);

    // Every lane starts after `start`: stream.wait(event) orders work across streams.
    control.record(start);
    for (lane& l : lanes) {
      l.chunks = 0;
      l.bytes_moved = 0;
      l.stream.wait(start);
      l.begin.record(l.stream);
      // Poison the staging buffer: a chunk whose H2D copy went missing would come back as 0xdeadbeef.
      cudrv::fill(l.staging, device_poison, l.stream);
    }

    for (std::size_t k = 0; k < chunk_count; ++k) {
      const std::size_t offset = k * chunk;
      const std::size_t count = std::min(chunk, total - offset);
      lane& l = lanes[k % lanes.size()];
      cudrv::copy(l.staging, std::span<const element>(source.data() + offset, count), l.stream);   // H2D
      cudrv::copy(std::span<element>(result.data() + offset, count), l.staging, count, l.stream);  // D2H
      ++l.chunks;
      l.bytes_moved += 2 * count * sizeof(element);
    }

    // `stop` on the control stream comes after the last copy of every lane.
    for (lane& l : lanes) {
      l.end.record(l.stream);
      control.wait(l.end);
    }
    control.record(stop);
    control.synchronize();  // all lanes are done once stop is

    const float total_ms = cudrv::elapsed_time(start, stop).count();
    const std::size_t bytes_moved = 2 * total * sizeof(element);
    std::printf("pass %d%s: %zu MiB H2D + %zu MiB D2H in %.3f ms: %.1f GB/s (both directions counted)\n", pass,
                pass == 1 ? " (warm-up)" : "", opt.total_mib, opt.total_mib, total_ms, gb_per_s(bytes_moved, total_ms));
    for (std::size_t i = 0; i < lanes.size(); ++i) {
      const float ms = cudrv::elapsed_time(lanes[i].begin, lanes[i].end).count();
      std::printf("  stream %zu: %zu chunks, %zu MiB moved in %.3f ms: %.1f GB/s\n", i, lanes[i].chunks,
                  lanes[i].bytes_moved >> 20, ms, gb_per_s(lanes[i].bytes_moved, ms));
    }

    const std::size_t bad = first_mismatch(source.view(), result.view());
    if (bad != total) {
      std::fprintf(stderr,
                   "copy_pipeline: MISMATCH in pass %d at element %zu (byte %zu): expected 0x%08x, got 0x%08x\n", pass,
                   bad, bad * sizeof(element), static_cast<unsigned>(source[bad]), static_cast<unsigned>(result[bad]));
      status = 5;
    } else {
      std::printf("  verified: %zu bytes identical\n", total * sizeof(element));
    }
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  options opt;
  if (argc > 1 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    usage(stdout);
    return 0;
  }
  std::size_t* fields[] = {&opt.total_mib, &opt.chunk_mib, &opt.streams};
  if (argc > 4) {
    usage(stderr);
    return 1;
  }
  for (int i = 1; i < argc; ++i) {
    if (!parse_size(argv[i], *fields[i - 1])) {
      std::fprintf(stderr, "copy_pipeline: not a positive number: '%s'\n", argv[i]);
      usage(stderr);
      return 1;
    }
  }
  if (opt.streams > 64 || opt.total_mib > (std::size_t(1) << 20)) {
    std::fprintf(stderr, "copy_pipeline: at most 64 streams and 1 TiB\n");
    return 1;
  }
  try {
    return run(opt);
  } catch (const cudrv::driver_unavailable_error& e) {
    std::fprintf(stderr, "copy_pipeline: no usable CUDA driver: %s\n", e.what());
    return 2;
  } catch (const cudrv::error& e) {
    std::fprintf(stderr, "copy_pipeline: CUDA error: %s\n", e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "copy_pipeline: error: %s\n", e.what());
  }
  return 4;
}
