// GPU tier, issue 34 part 6: nodes of an executable graph switched off and on, capture into an existing
// graph, graphs launched from the device (tail launch, fire and forget; the device runtime linked through
// nvJitLink), and graph allocations keeping their address across replays. The kernels are compiled here
// with NVRTC (relocatable device code) and linked with the toolkit's libcudadevrt.a.
#include <catch2/catch.hpp>

#include <cudrv/rtc.hpp>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;

namespace {

constexpr int poison = -7;

const char* const kernel_source = R"CUDA(
// The device runtime's graph launch (cuda_device_runtime_api.h, which NVRTC does not ship); its
// implementation is in libcudadevrt.a.
extern "C" __device__ cudaError_t cudaGraphLaunch(cudaGraphExec_t graph, cudaStream_t stream);
#define TAIL_LAUNCH ((cudaStream_t)0x0100000000000000ULL)
#define FIRE_AND_FORGET ((cudaStream_t)0x0200000000000000ULL)

__device__ int volatile_read(int* p) { return *(volatile int*)p; }

__device__ cudaGraphExec_t current_graph_exec() {
  unsigned long long g;
  asm("mov.u64 %0, %%current_graph_exec;" : "=l"(g));
  return (cudaGraphExec_t)g;
}

extern "C" __global__ void write_int(int* out, int value) { *out = value; }

// x[i] = x[i] * mul + add
extern "C" __global__ void affine(int* x, int n, int mul, int add) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    x[i] = x[i] * mul + add;
  }
}

// Records where the graph allocation p is at this replay, after writing and reading it back.
extern "C" __global__ void record_address(int* p, unsigned long long* addresses, int* round_trips, int* next) {
  const int slot = atomicAdd(next, 1);
  p[0] = slot * 3 + 1;
  __threadfence();
  round_trips[slot] = volatile_read(p);
  addresses[slot] = (unsigned long long)p;
}

// One step of a loop run by tail launches: counts, and launches its own graph again until limit.
extern "C" __global__ void count_and_relaunch(int* counter, int limit, int* errors) {
  const int n = atomicAdd(counter, 1) + 1;
  if (n < limit && cudaGraphLaunch(current_graph_exec(), TAIL_LAUNCH) != cudaSuccess) {
    atomicAdd(errors, 1);
  }
}

extern "C" __global__ void launch_tail(cudaGraphExec_t graph, int* errors) {
  if (cudaGraphLaunch(graph, TAIL_LAUNCH) != cudaSuccess) {
    atomicAdd(errors, 1);
  }
}

// Launches child fire and forget, and verify as the tail: the tail runs once this graph and its
// fire-and-forget children are done.
extern "C" __global__ void fork_and_verify(cudaGraphExec_t child, cudaGraphExec_t verify, int* errors) {
  if (cudaGraphLaunch(child, FIRE_AND_FORGET) != cudaSuccess) {
    atomicAdd(errors, 1);
  }
  if (cudaGraphLaunch(verify, TAIL_LAUNCH) != cudaSuccess) {
    atomicAdd(errors, 2);
  }
}

extern "C" __global__ void verify_value(const int* value, int expected, int* verdict) {
  *verdict = *value == expected ? 1 : 2;
}
)CUDA";

// The device runtime library of the toolkit whose headers cudrv finds (lib64 next to include).
std::string device_runtime_library() {
  const std::string include = cudrv::find_toolkit_headers().include;
  for (const char* lib : {"/../lib64/libcudadevrt.a", "/../lib/libcudadevrt.a"}) {
    if (std::ifstream(include + lib).good()) {
      return include + lib;
    }
  }
  FAIL("no libcudadevrt.a next to " << include);
  return {};
}

cudrv::library& kernels() {
  static cudrv::library lib = [] {
    cudrv::compile_options options;
    options.relocatable_device_code = true;
    auto unit = cudrv::program("graph_switches.cu", kernel_source).compile(cudrv::code_kind::cubin, options);
    cudrv::linker linker;
    linker.add(unit.code).add_file(device_runtime_library(), cudrv::code_kind::library);
    return cudrv::library(linker.link());
  }();
  return lib;
}

std::vector<int> read(const cudrv::device_buffer<int>& b) {
  std::vector<int> out(b.size());
  cudrv::copy(out, b);
  return out;
}

}  // namespace

TEST_CASE("a disabled kernel or memset node leaves its output poisoned while the others run, and runs again once "
          "enabled",
          "[gpu][graph][graph-switches]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  cudrv::stream s(dev);
  auto write_int = kernels().get_kernel<void(int*, int)>("write_int");
  cudrv::device_buffer<int> a(dev, 1), b(dev, 1), c(dev, 16);
  cudrv::graph g;
  cudrv::graph_builder builder(g, dev);
  const cudrv::kernel_node ka = cudrv::launch(builder, {}, write_int, a.get(), 1);
  const cudrv::kernel_node kb = cudrv::launch(builder, {}, write_int, b.get(), 2);
  const cudrv::memset_node fc = cudrv::fill(c, 3, builder);
  cudrv::graph_exec exec = g.instantiate(dev);
  auto run = [&] {
    cudrv::fill(a, poison);
    cudrv::fill(b, poison);
    cudrv::fill(c, poison);
    exec.launch(s);
    s.synchronize();
  };

  run();
  CHECK(read(a) == std::vector<int>{1});
  CHECK(read(b) == std::vector<int>{2});
  CHECK(read(c) == std::vector<int>(16, 3));

  exec.set_enabled(ka, false);
  exec.set_enabled(fc, false);
  CHECK_FALSE(exec.enabled(ka));
  CHECK(exec.enabled(kb));
  CHECK_FALSE(exec.enabled(fc));
  run();
  CHECK(read(a) == std::vector<int>{poison});  // skipped
  CHECK(read(b) == std::vector<int>{2});       // ran, after the disabled node
  CHECK(read(c) == std::vector<int>(16, poison));
  run();  // stays off
  CHECK(read(a) == std::vector<int>{poison});

  exec.set_enabled(ka, true);
  exec.set_enabled(fc, true);
  CHECK(exec.enabled(ka));
  run();
  CHECK(read(a) == std::vector<int>{1});
  CHECK(read(c) == std::vector<int>(16, 3));

  // Other kinds are refused before the driver, naming the kind.
  const cudrv::graph_node_ref joined = g.add_empty({kb});
  auto refused = catch_as<cudrv::invalid_argument_error>([&] { exec.set_enabled(joined, false); });
  REQUIRE(refused.has_value());
  CHECK(contains(refused->what(), "(empty)"));
  // A node of another graph is refused before the driver too.
  cudrv::graph other;
  cudrv::graph_builder other_builder(other, dev);
  const cudrv::kernel_node foreign = cudrv::launch(other_builder, {}, write_int, a.get(), 9);
  auto not_ours = catch_as<cudrv::invalid_argument_error>([&] { exec.set_enabled(foreign, false); });
  REQUIRE(not_ours.has_value());
  CHECK(contains(not_ours->what(), "not a node of the graph this executable was instantiated from"));
}

TEST_CASE("a capture into an existing graph appends after the given node, and the graph runs in that order",
          "[gpu][graph][graph-switches]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  cudrv::stream s(dev);
  auto affine = kernels().get_kernel<void(int*, int, int, int)>("affine");
  constexpr int n = 1000;
  const cudrv::launch_config config{.grid = (n + 255) / 256, .block = 256};
  cudrv::device_buffer<int> x(dev, n);
  cudrv::graph g;
  cudrv::graph_builder builder(g, dev);
  const cudrv::memset_node start = cudrv::fill(x, 1, builder);  // x = 1
  const cudrv::graph_node_ref unrelated = g.add_empty();

  cudrv::appended_nodes added;
  {
    cudrv::stream_capture capture(s, g, {start});
    CHECK(capture.target() == g);
    cudrv::launch(s, config, affine, x.get(), n, 3, 0);  // x = 3
    cudrv::launch(s, config, affine, x.get(), n, 1, 4);  // x = 7
    added = capture.end_appended();
  }
  REQUIRE(added.nodes.size() == 2);
  CHECK(added.nodes[0].kind() == cudrv::graph_node_kind::kernel);
  CHECK(added.nodes[1].kind() == cudrv::graph_node_kind::kernel);
  CHECK(added.nodes[0].dependencies() == std::vector<cudrv::graph_node_ref>{start});
  REQUIRE(added.last.size() == 1);
  CHECK(added.last[0] == added.nodes[1]);
  CHECK(unrelated.dependents().empty());
  CHECK(g.node_count() == 4);  // the capture's graph is the caller's: nothing else was made

  // Continue after the captured work with the builder: x = 14.
  cudrv::graph_builder after(g, dev, added.last);
  cudrv::launch(after, config, affine, x.get(), n, 2, 0);
  cudrv::fill(x, poison);
  cudrv::graph_exec exec = g.instantiate(dev);
  exec.launch(s);
  s.synchronize();
  CHECK(read(x) == std::vector<int>(n, 14));  // 1, *3, +4, *2 in that order; any other order differs

  // An exception in the scope ends the capture and takes its nodes out of the graph.
  struct failure {};
  CHECK_THROWS_AS(
      [&] {
        cudrv::stream_capture capture(s, g, added.last);
        cudrv::launch(s, config, affine, x.get(), n, 5, 5);
        throw failure{};
      }(),
      failure);
  CHECK(cudrv::capture_status_of(s) == cudrv::capture_status::none);
  CHECK(g.node_count() == 5);
}

TEST_CASE("a graph allocation keeps its address on every replay, freed in the graph or on the next launch",
          "[gpu][graph][graph-switches]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  cudrv::stream s(dev);
  auto record = kernels().get_kernel<void(int*, unsigned long long*, int*, int*)>("record_address");
  constexpr int replays = 12;
  // Host-visible: the kernel writes straight into pinned host memory.
  cudrv::pinned_buffer<unsigned long long> addresses(dev, 2 * replays);
  cudrv::pinned_buffer<int> round_trips(dev, 2 * replays);
  cudrv::device_buffer<int> next(dev, 1);
  std::fill(addresses.begin(), addresses.end(), 0ULL);
  std::fill(round_trips.begin(), round_trips.end(), poison);
  cudrv::fill(next, 0);

  // (1) Allocated and freed inside the graph.
  cudrv::graph inside;
  auto [alloc, address] = inside.add_mem_alloc(dev, 256 * sizeof(int));
  cudrv::graph_builder b(inside, dev, {alloc});
  cudrv::launch(b, {}, record, reinterpret_cast<int*>(address), addresses.device_view().get(),
                round_trips.device_view().get(), next.get());
  (void)inside.add_mem_free(address, {b.last()});
  {
    cudrv::graph_exec exec = inside.instantiate(dev);
    for (int i = 0; i < replays; ++i) {
      exec.launch(s);
    }
    s.synchronize();
  }
  // (2) Never freed in the graph: auto-free on launch frees it before the next launch, which allocates again.
  cudrv::graph kept;
  auto [kept_alloc, kept_address] = kept.add_mem_alloc(dev, 256 * sizeof(int));
  cudrv::graph_builder kb(kept, dev, {kept_alloc});
  cudrv::launch(kb, {}, record, reinterpret_cast<int*>(kept_address), addresses.device_view().get(),
                round_trips.device_view().get(), next.get());
  {
    cudrv::graph_exec exec = kept.instantiate(dev, cudrv::graph_instantiate_flags::auto_free_on_launch);
    for (int i = 0; i < replays; ++i) {
      exec.launch(s);
    }
    s.synchronize();
  }
  auto free_async =
      reinterpret_cast<PFN_cuMemFreeAsync_v11020>(cudrv::driver::get_entry_point("cuMemFreeAsync", 11020));
  REQUIRE(free_async(kept_address, s.native_handle()) == CUDA_SUCCESS);  // the last launch's allocation
  s.synchronize();

  for (int i = 0; i < 2 * replays; ++i) {
    INFO("replay " << i);
    CHECK(addresses[i] == (i < replays ? address : kept_address));
    CHECK(round_trips[i] == i * 3 + 1);  // the memory was usable at that address
  }
}

TEST_CASE("device launch: a tail-launch loop relaunches its graph N times from the device",
          "[gpu][graph][graph-switches]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  cudrv::stream s(dev);
  auto step = kernels().get_kernel<void(int*, int, int*)>("count_and_relaunch");
  auto launch_tail = kernels().get_kernel<void(cudrv::device_graph_exec, int*)>("launch_tail");
  constexpr int limit = 100;
  cudrv::device_buffer<int> counter(dev, 1), errors(dev, 1);

  cudrv::graph loop;
  cudrv::graph_builder lb(loop, dev);
  cudrv::launch(lb, {}, step, counter.get(), limit, errors.get());
  cudrv::graph_exec loop_exec = loop.instantiate(dev, cudrv::graph_instantiate_flags::device_launch);
  CHECK(loop_exec.flags() == cudrv::graph_instantiate_flags::device_launch);
  loop_exec.upload(s);

  // The launcher is an ordinary graph whose kernel launches the loop as its tail.
  cudrv::graph launcher;
  cudrv::graph_builder hb(launcher, dev);
  cudrv::launch(hb, {}, launch_tail, loop_exec.device_handle(), errors.get());
  cudrv::graph_exec launcher_exec = launcher.instantiate(dev);
  for (int round = 0; round < 2; ++round) {
    INFO("round " << round);
    cudrv::fill(counter, 0);
    cudrv::fill(errors, 0);
    launcher_exec.launch(s);
    s.synchronize();
    CHECK(read(counter) == std::vector<int>{limit});
    CHECK(read(errors) == std::vector<int>{0});
  }
  // A host graph has no device handle.
  auto refused = catch_as<cudrv::invalid_argument_error>([&] { (void)launcher_exec.device_handle(); });
  REQUIRE(refused.has_value());
  CHECK(contains(refused->what(), "not instantiated for device launch"));
}

TEST_CASE("device launch: a fire-and-forget child writes a result that the parent's tail graph verifies",
          "[gpu][graph][graph-switches]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  cudrv::stream s(dev);
  auto write_int = kernels().get_kernel<void(int*, int)>("write_int");
  auto verify = kernels().get_kernel<void(const int*, int, int*)>("verify_value");
  auto fork = kernels().get_kernel<void(cudrv::device_graph_exec, cudrv::device_graph_exec, int*)>("fork_and_verify");
  cudrv::device_buffer<int> result(dev, 1), verdict(dev, 1), errors(dev, 1);
  const int expected = 4242;

  cudrv::graph child;
  cudrv::graph_builder cb(child, dev);
  cudrv::launch(cb, {}, write_int, result.get(), expected);
  cudrv::graph_exec child_exec =
      child.instantiate(dev, cudrv::graph_instantiate_flags::device_launch | cudrv::graph_instantiate_flags::upload);
  cudrv::graph check;
  cudrv::graph_builder vb(check, dev);
  cudrv::launch(vb, {}, verify, result.get(), expected, verdict.get());
  cudrv::graph_exec check_exec = check.instantiate(dev, cudrv::graph_instantiate_flags::device_launch);
  check_exec.upload(s);

  cudrv::graph parent;
  cudrv::graph_builder pb(parent, dev);
  cudrv::launch(pb, {}, fork, child_exec.device_handle(), check_exec.device_handle(), errors.get());
  cudrv::graph_exec parent_exec = parent.instantiate(dev);
  cudrv::fill(result, poison);
  cudrv::fill(verdict, 0);
  cudrv::fill(errors, 0);
  parent_exec.launch(s);
  s.synchronize();
  CHECK(read(errors) == std::vector<int>{0});
  CHECK(read(result) == std::vector<int>{expected});
  CHECK(read(verdict) == std::vector<int>{1});  // the tail saw the child's write
}
