// ipc_producer_consumer: two processes share GPU memory without a copy.
//
//   example_ipc_producer_consumer [bytes per buffer [buffers]]      defaults: 64M 4
//
// The program starts a second copy of itself (fork + exec of /proc/self/exe, before either touches
// CUDA) in the consumer role, connected by a Unix socket pair. The producer creates a shareable memory
// pool (cudrv::make_shareable_memory_pool), allocates the buffers from it on a stream, fills them from
// the host and records an IPC event after the copies, without waiting for them. It then sends, in one
// message over the socket, the pool's file descriptor (SCM_RIGHTS), each buffer's export data
// (cudrv::export_pointer) and the event's IPC handle.
//
// The consumer imports the pool (cudrv::imported_memory_pool) and the buffers (import_pointer), makes
// its stream wait for the producer's event, and sums each buffer with a kernel that reads the producer's
// memory in place. On one GPU both processes use device 0; with two or more, the consumer uses another
// device that can reach device 0 and reads through peer access (the imported pool's set_access). It
// sends the sums back; the producer checks them against the host's (in double) and frees the buffers
// only after that answer: an exporter must not free memory that an importer still maps.
//
// Printed: the hand-over latency (from the producer starting to send to the consumer holding device
// pointers and its stream ordered after the event; both processes read the same monotonic clock) and
// the consumer's read bandwidth (bytes summed per second, median of 10 runs) against the device-to-device
// copy bandwidth of the consumer's device measured in the same run (bytes read + written per second).
//
// Exit status: 0 success, 1 usage error, 2 no CUDA driver, 3 no CUDA device, 4 CUDA or compiler error
// (also: the device cannot share pools, or the consumer failed), 5 a sum differs from the host's.
#include <fcntl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <cudrv/unix_socket.hpp>  // the producer hands the pool descriptor to the consumer
#include "example_main.hpp"

namespace {

constexpr std::size_t max_buffers = 16;
constexpr auto timeout = std::chrono::seconds(120);

// Producer -> consumer, with the pool's descriptor.
struct handover {
  std::int64_t send_start_ns;  // CLOCK_MONOTONIC, shared by the processes of one host
  int producer_device;
  int consumer_device;
  std::uint32_t count;
  std::uint64_t elements;  // floats per buffer, a multiple of 4
  CUipcEventHandle ready;
  cudrv::pointer_export buffers[max_buffers];
};

// Consumer -> producer.
struct answer {
  int ok;
  char error[400];
  double sums[max_buffers];
  double handover_us;
  double read_gbs;
  double reference_gbs;
};

// The device the consumer uses: the first other device that can reach device 0's memory, else device 0.
// Both processes compute it (the consumer before the hand-over, to be ready for it).
int pick_consumer_device() {
  const cudrv::device producer(0);
  for (cudrv::device d : cudrv::devices()) {
    if (d != producer && d.can_access_peer(producer)) {
      return d.ordinal();
    }
  }
  return 0;
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

const char* reduce_source = R"(
extern "C" __global__ void partial_sums(const float* in_floats, unsigned long long n4, double* partial) {
  const float4* in = reinterpret_cast<const float4*>(in_floats);  // pool allocations are 256-byte aligned
  __shared__ double warp_sums[32];
  double acc = 0.0;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n4;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    const float4 v = in[i];
    acc += (double)v.x + (double)v.y + (double)v.z + (double)v.w;
  }
  for (int offset = 16; offset > 0; offset /= 2) acc += __shfl_down_sync(0xffffffffu, acc, offset);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x / 32] = acc;
  __syncthreads();
  if (threadIdx.x < 32) {
    acc = threadIdx.x < blockDim.x / 32 ? warp_sums[threadIdx.x] : 0.0;
    for (int offset = 16; offset > 0; offset /= 2) acc += __shfl_down_sync(0xffffffffu, acc, offset);
    if (threadIdx.x == 0) partial[blockIdx.x] = acc;
  }
}
)";

// --- the consumer ----------------------------------------------------------------------------------

int consumer_main(int fd) {
  const cudrv::unix_socket sock =
      cudrv::unix_socket::from_native_handle(cudrv::file_descriptor::from_native_handle(fd));
  answer a{};
  const int status = example::run("ipc_producer_consumer (consumer)", [&] {
    try {
      // Everything that does not depend on the hand-over is ready before it: the context, the stream,
      // the kernel. Then the producer is told to go, and the hand-over is timed from its send.
      const cudrv::device dev(pick_consumer_device());
      cudrv::stream s(dev);
      cudrv::library lib = example::compile(dev, "ipc_reduce.cu", reduce_source);
      auto reduce = lib.get_kernel<void(const float*, unsigned long long, double*)>("partial_sums");
      sock.send_value(dev.ordinal());

      cudrv::received_message m = sock.receive({.timeout = timeout});
      const handover h = m.as<handover>();
      if (m.descriptors.size() != 1 || h.count == 0 || h.count > max_buffers || h.consumer_device != dev.ordinal()) {
        throw std::runtime_error("the producer's message is not a hand-over for this consumer");
      }
      cudrv::imported_memory_pool pool(dev, m.descriptors[0]);
      if (h.consumer_device != h.producer_device) {
        pool.set_access(dev);  // the memory is on the producer's device: read it through peer access
      }
      std::vector<cudrv::imported_buffer<float>> buffers;
      for (std::uint32_t b = 0; b < h.count; ++b) {
        buffers.push_back(pool.import_pointer<float>(h.buffers[b]));
      }
      cudrv::event ready = cudrv::event::from_ipc_handle(dev, h.ready);
      s.wait(ready);  // ordered after the producer's copies, without a host wait
      a.handover_us = static_cast<double>(now_ns() - h.send_start_ns) / 1e3;
      const unsigned blocks = static_cast<unsigned>(4 * dev.attribute(cudrv::device_attributes::multiprocessor_count));
      cudrv::device_buffer<double> partial(dev, static_cast<std::size_t>(blocks) * h.count);
      auto sum_all = [&](cudrv::stream_ref st) {
        for (std::uint32_t b = 0; b < h.count; ++b) {
          cudrv::launch(st, {.grid = blocks, .block = 256}, reduce, buffers[b].get(),
                        static_cast<unsigned long long>(h.elements / 4), partial.get() + std::size_t{b} * blocks);
        }
      };
      const double ms = example::time_ms(dev, s, 10, sum_all);  // the first run waits for the event
      std::vector<double> host(partial.size(), std::nan(""));   // poisoned before the copy
      cudrv::copy(std::span(host), partial.view(), s);
      s.synchronize();
      for (std::uint32_t b = 0; b < h.count; ++b) {
        double sum = 0;
        for (unsigned i = 0; i < blocks; ++i) {
          sum += host[std::size_t{b} * blocks + i];
        }
        a.sums[b] = sum;
      }
      const double bytes = static_cast<double>(h.count) * static_cast<double>(h.elements) * sizeof(float);
      a.read_gbs = bytes / (ms * 1e6);
      a.reference_gbs = example::copy_bandwidth_gbs(dev, s, std::size_t{h.elements} * sizeof(float));
      a.ok = 1;
      // The imports are freed here, before the producer hears from us.
      return true;
    } catch (const cudrv::error& e) {
      std::snprintf(a.error, sizeof(a.error), "%s", e.what());
      throw;
    } catch (const std::exception& e) {
      std::snprintf(a.error, sizeof(a.error), "%s", e.what());
      throw;
    }
  });
  try {
    sock.send_value(a);
  } catch (const cudrv::peer_closed_error&) {
    // The producer is gone already (it failed first and said why).
  } catch (const cudrv::error& e) {
    std::fprintf(stderr, "ipc_producer_consumer (consumer): %s\n", e.what());
  }
  return status;
}

// --- the producer ----------------------------------------------------------------------------------

int wait_for(pid_t pid) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (r < 0 || std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return 124;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

bool produce(const cudrv::unix_socket& sock, std::size_t bytes, std::size_t count) {
  const cudrv::device dev(0);
  const int consumer = pick_consumer_device();
  const std::size_t elements = bytes / sizeof(float) / 4 * 4;
  if (elements == 0) {
    throw example::usage_error{"a buffer needs at least 16 bytes"};
  }
  cudrv::stream s(dev);
  cudrv::memory_pool pool = cudrv::make_shareable_memory_pool(dev, cudrv::shareable_handle_type::posix_file_descriptor);
  std::vector<cudrv::device_buffer<float>> buffers;
  std::vector<double> reference(count, 0.0);
  std::vector<double> magnitude(count, 0.0);
  std::mt19937_64 gen(12345);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  {
    std::vector<float> host(elements);
    for (std::size_t b = 0; b < count; ++b) {
      for (float& x : host) {
        x = dist(gen);
        reference[b] += x;
        magnitude[b] += std::fabs(x);
      }
      buffers.emplace_back(pool, s, elements);
      cudrv::copy(buffers.back(), host, s);
      s.synchronize();  // the host vector is refilled for the next buffer
    }
  }
  cudrv::event ready(dev, cudrv::event_flags::interprocess);
  ready.record(s);

  {
    // The consumer says it is ready (its device), or, having failed already, sends its answer.
    const cudrv::received_message hello = sock.receive({.timeout = timeout});
    if (hello.payload.size() == sizeof(answer)) {
      throw std::runtime_error(std::string("the consumer process failed: ") + hello.as<answer>().error);
    }
    if (hello.as<int>() != consumer) {
      throw std::runtime_error("the consumer chose another device");
    }
  }
  handover h{};
  h.send_start_ns = now_ns();
  h.producer_device = dev.ordinal();
  h.consumer_device = consumer;
  h.count = static_cast<std::uint32_t>(count);
  h.elements = elements;
  h.ready = ready.ipc_handle();
  for (std::size_t b = 0; b < count; ++b) {
    h.buffers[b] = cudrv::export_pointer(buffers[b]);
  }
  {
    cudrv::file_descriptor fd = cudrv::export_pool_descriptor(pool);
    sock.send_value(h, {fd.native_handle()});
  }
  const answer a = sock.receive({.timeout = timeout}).as<answer>();
  if (a.ok == 0) {
    throw std::runtime_error(std::string("the consumer process failed: ") + a.error);
  }
  bool matched = true;
  for (std::size_t b = 0; b < count; ++b) {
    const double err = std::fabs(a.sums[b] - reference[b]);
    if (!(err <= 1e-9 * magnitude[b])) {
      std::fprintf(stderr, "buffer %zu: the consumer's sum %.17g differs from the host's %.17g\n", b, a.sums[b],
                   reference[b]);
      matched = false;
    }
  }
  const double total = static_cast<double>(count) * static_cast<double>(elements) * sizeof(float);
  const bool peer = consumer != dev.ordinal();
  char detail[200];
  std::snprintf(detail, sizeof(detail), "%zu buffers of %.2f MiB, consumer on device %d%s, hand-over %.1f us", count,
                static_cast<double>(elements * sizeof(float)) / (1 << 20), consumer,
                peer ? " (peer access to device 0)" : "", a.handover_us);
  char json[120];
  std::snprintf(json, sizeof(json), "\"handover_us\": %.3f, \"consumer_device\": %d, \"peer\": %s", a.handover_us,
                consumer, peer ? "true" : "false");
  example::report({.example = "ipc_producer_consumer",
                   .metric = "GB/s",
                   .value = a.read_gbs,
                   .reference = a.reference_gbs,
                   .reference_name = "D2D copy",
                   .target = peer ? 0.0 : 0.8,
                   .detail = detail,
                   .bytes = total,
                   .seconds = total / (a.read_gbs * 1e9),
                   .json = json});
  // The consumer freed its imports before answering: now the buffers and the pool can go.
  return matched;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--consumer") == 0) {
    return consumer_main(std::atoi(argv[2]));
  }
  std::size_t bytes = std::size_t{64} << 20;
  std::size_t count = 4;
  try {
    bytes = example::size_arg(argc, argv, 1, bytes, "bytes per buffer");
    count = example::size_arg(argc, argv, 2, count, "buffers");
    if (count > max_buffers) {
      throw example::usage_error{"at most " + std::to_string(max_buffers) + " buffers"};
    }
  } catch (const example::usage_error& e) {
    std::fprintf(stderr, "usage: %s [bytes per buffer [buffers]]: %s\n", argv[0], e.message.c_str());
    return 1;
  }
  // The consumer is started before this process touches CUDA: a forked child must not use its parent's
  // CUDA state, and exec gives it a fresh process. Its end of the socket survives the exec (no CLOEXEC).
  auto [mine, theirs] = cudrv::unix_socket::pair();
  const pid_t pid = ::fork();
  if (pid < 0) {
    std::perror("fork");
    return 4;
  }
  if (pid == 0) {
    const int fd = theirs.native_handle();
    ::fcntl(fd, F_SETFD, 0);
    char fd_text[16];
    std::snprintf(fd_text, sizeof(fd_text), "%d", fd);
    char consumer_flag[] = "--consumer";
    char* child_argv[] = {argv[0], consumer_flag, fd_text, nullptr};
    ::execv("/proc/self/exe", child_argv);
    ::_exit(127);
  }
  theirs.reset();
  const int status = example::run("ipc_producer_consumer", [&] { return produce(mine, bytes, count); });
  mine.reset();  // a consumer still waiting sees the producer gone and exits
  const int consumer_status = wait_for(pid);
  if (status == 0 && consumer_status != 0) {
    std::fprintf(stderr, "ipc_producer_consumer: the consumer exited with status %d\n", consumer_status);
    return 4;
  }
  return status;
}
