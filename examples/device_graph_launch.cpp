// device_graph_launch: a loop of graph launches driven by the GPU itself (device-side graph launch, tail
// launches) against the same loop driven by the host (cuGraphLaunch from a host thread).
//
//   example_device_graph_launch [steps [elements]]      defaults: 20000 4096
//
// The loop body is one small kernel node that adds its step's value to every element of a buffer and
// counts the step. Two ways of running `steps` iterations of it:
//   device  the body's graph is instantiated with graph_instantiate_flags::device_launch; at the end of
//           each step its kernel launches the graph again as a tail launch (cudaGraphLaunch with
//           cudaStreamGraphTailLaunch, its own handle from %current_graph_exec) until the count is
//           reached. A host graph whose kernel launches the loop's graph (a cudrv::device_graph_exec
//           argument) starts it: one host launch in all.
//   host    the same body in an ordinary graph, launched `steps` times from the host on one stream.
// The kernels call the device runtime, so they are compiled with relocatable device code (NVRTC) and
// linked with the toolkit's libcudadevrt.a through nvJitLink; their source is here rather than in
// kernels/, whose sources build without the device runtime.
//
// Measured: graph launches per second in each mode (steps over the time between two events around the
// whole loop), the device loop's rate against the host loop's. A device-side tail launch needs no host
// work and no trip through the host's launch queue; whether it is faster than a host launch of a
// one-block graph depends on the GPU and driver, so no target is set (docs/examples.md).
//
// Verified in both modes: the buffer starts from random values and every step adds a value that depends
// on the step, so a missing or repeated step gives another sum; the host checks every element
// and the step count (and that no device-side cudaGraphLaunch failed).
//
// Exit status: 0 success, 1 usage error, 2 no CUDA driver, 3 no CUDA device, 4 CUDA or compiler error,
// 5 the result differs from the host's.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "example_main.hpp"

namespace {

const char* const source = R"CUDA(
// The device runtime's graph launch (cuda_device_runtime_api.h, which NVRTC does not ship).
extern "C" __device__ cudaError_t cudaGraphLaunch(cudaGraphExec_t graph, cudaStream_t stream);
#define TAIL_LAUNCH ((cudaStream_t)0x0100000000000000ULL)

__device__ unsigned step_value(unsigned step) { return step * 2654435761u + 1u; }

// One step: adds the step's value to every element; the last block to finish counts the step.
__device__ void add_step(unsigned* data, unsigned n, unsigned* step) {
  const unsigned s = *(volatile unsigned*)step;
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    data[i] += step_value(s);
  }
}

extern "C" __global__ void host_step(unsigned* data, unsigned n, unsigned* step) {
  add_step(data, n, step);
  __syncthreads();
  if (threadIdx.x == 0) {
    *step += 1;  // one block: the next launch sees it
  }
}

// The device loop's body: a step, then the same graph again as a tail launch until `steps`.
extern "C" __global__ void device_step(unsigned* data, unsigned n, unsigned* step, unsigned steps, int* errors) {
  add_step(data, n, step);
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned next = *step + 1;
    *step = next;
    if (next < steps) {
      unsigned long long self;
      asm("mov.u64 %0, %%current_graph_exec;" : "=l"(self));
      if (cudaGraphLaunch((cudaGraphExec_t)self, TAIL_LAUNCH) != cudaSuccess) {
        atomicAdd(errors, 1);
      }
    }
  }
}

// In a host graph: starts the device loop.
extern "C" __global__ void start(cudaGraphExec_t loop, int* errors) {
  if (cudaGraphLaunch(loop, TAIL_LAUNCH) != cudaSuccess) {
    atomicAdd(errors, 1);
  }
}
)CUDA";

constexpr unsigned block_size = 1024;  // one block: a step is one small launch

unsigned step_value(unsigned step) { return step * 2654435761u + 1u; }

std::string device_runtime_library() {
  const std::string include = cudrv::find_toolkit_headers().include;
  for (const char* lib : {"/../lib64/libcudadevrt.a", "/../lib/libcudadevrt.a"}) {
    if (std::ifstream(include + lib).good()) {
      return include + lib;
    }
  }
  throw std::runtime_error("no libcudadevrt.a next to " + include);
}

cudrv::library build(const cudrv::device& dev) {
  cudrv::compile_options options;
  options.arch = example::arch_of(dev);
  options.relocatable_device_code = true;
  auto unit = cudrv::program("device_graph_launch.cu", source).compile(cudrv::code_kind::cubin, options);
  cudrv::linker linker({.arch = options.arch});
  linker.add(unit.code).add_file(device_runtime_library(), cudrv::code_kind::library);
  return cudrv::library(linker.link());
}

struct loop_state {
  cudrv::device_buffer<unsigned> data, step;
  cudrv::device_buffer<int> errors;
  std::vector<unsigned> initial;
};

bool verify(const char* mode, const loop_state& s, unsigned steps) {
  std::vector<unsigned> out(s.initial.size());
  std::vector<unsigned> step(1);
  std::vector<int> errors(1);
  cudrv::copy(out, s.data);
  cudrv::copy(step, s.step);
  cudrv::copy(errors, s.errors);
  unsigned sum = 0;
  for (unsigned i = 0; i < steps; ++i) {
    sum += step_value(i);
  }
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    wrong += out[i] != s.initial[i] + sum ? 1 : 0;
  }
  if (wrong != 0 || step[0] != steps || errors[0] != 0) {
    std::printf("%s: %zu of %zu elements WRONG, %u steps of %u, %d failed device launches\n", mode, wrong, out.size(),
                step[0], steps, errors[0]);
    return false;
  }
  std::printf("%s: all %zu elements match the host after %u steps\n", mode, out.size(), steps);
  return true;
}

void reset(loop_state& s) {
  cudrv::copy(s.data, s.initial);
  cudrv::fill(s.step, 0u);
  cudrv::fill(s.errors, 0);
}

bool run(std::size_t steps_arg, std::size_t n_arg) {
  cudrv::device dev(0);
  const auto steps = static_cast<unsigned>(steps_arg);
  const auto n = static_cast<unsigned>(n_arg);
  cudrv::library lib = build(dev);
  auto device_step = lib.get_kernel<void(unsigned*, unsigned, unsigned*, unsigned, int*)>("device_step");
  auto host_step = lib.get_kernel<void(unsigned*, unsigned, unsigned*)>("host_step");
  auto start = lib.get_kernel<void(cudrv::device_graph_exec, int*)>("start");
  cudrv::stream stream(dev);
  loop_state s{cudrv::device_buffer<unsigned>(dev, n), cudrv::device_buffer<unsigned>(dev, 1),
               cudrv::device_buffer<int>(dev, 1), std::vector<unsigned>(n)};
  example::random_source r{n};
  for (unsigned& v : s.initial) {
    v = static_cast<unsigned>(r.next());
  }
  const cudrv::launch_config one_block{.grid = 1, .block = block_size};
  std::printf("device_graph_launch: %u steps of a 1-block kernel over %u elements; %s\n", steps, n, dev.name().c_str());

  // Device loop: a device-launchable body, started by a host graph.
  cudrv::graph body;
  cudrv::graph_builder bb(body, dev);
  cudrv::launch(bb, one_block, device_step, s.data.get(), n, s.step.get(), steps, s.errors.get());
  cudrv::graph_exec body_exec = body.instantiate(dev, cudrv::graph_instantiate_flags::device_launch);
  body_exec.upload(stream);
  cudrv::graph starter;
  cudrv::graph_builder sb(starter, dev);
  cudrv::launch(sb, {}, start, body_exec.device_handle(), s.errors.get());
  cudrv::graph_exec starter_exec = starter.instantiate(dev);
  // Host loop: the same work in an ordinary graph.
  cudrv::graph host_body;
  cudrv::graph_builder hb(host_body, dev);
  cudrv::launch(hb, one_block, host_step, s.data.get(), n, s.step.get());
  cudrv::graph_exec host_exec = host_body.instantiate(dev, cudrv::graph_instantiate_flags::upload);

  cudrv::event begin(dev, cudrv::event_flags::timing), end(dev, cudrv::event_flags::timing);
  auto timed = [&](auto&& loop) {
    reset(s);
    begin.record(stream);
    loop();
    end.record(stream);
    end.synchronize();
    return static_cast<double>(cudrv::elapsed_time(begin, end).count());
  };
  (void)timed([&] { starter_exec.launch(stream); });  // warm-up of both paths
  (void)timed([&] { host_exec.launch(stream); });
  const double device_ms = timed([&] { starter_exec.launch(stream); });
  bool ok = verify("device", s, steps);
  const double host_ms = timed([&] {
    for (unsigned i = 0; i < steps; ++i) {
      host_exec.launch(stream);
    }
  });
  ok = verify("host", s, steps) && ok;

  const double device_rate = steps / (device_ms * 1e-3);
  const double host_rate = steps / (host_ms * 1e-3);
  example::report({.example = "device_graph_launch",
                   .metric = "launches/s",
                   .value = device_rate,
                   .reference = host_rate,
                   .reference_name = "host graph launches",
                   .detail = std::to_string(steps) + " steps: device " + std::to_string(device_ms) + " ms, host " +
                             std::to_string(host_ms) + " ms",
                   .seconds = device_ms * 1e-3});
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  return example::run("device_graph_launch", [&] {
    if (argc > 3) {
      throw example::usage_error{"usage: example_device_graph_launch [steps [elements]]"};
    }
    const std::size_t steps = example::size_arg(argc, argv, 1, 20000, "steps");
    const std::size_t n = example::size_arg(argc, argv, 2, 4096, "elements");
    if (steps > (1u << 30) || n > (1u << 28)) {
      throw example::usage_error{"steps at most 1G, elements at most 256M"};
    }
    return run(steps, n);
  });
}
