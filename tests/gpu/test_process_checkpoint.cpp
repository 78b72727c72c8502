// GPU tier: checkpoint and restore of another process (<cudrv/process_checkpoint.hpp>, issue 34 part 3).
//
// The parent case starts this binary again (fork + exec of /proc/self/exe, so the child is a CUDA process
// of its own) with the hidden case "[.][checkpoint_child]". The child allocates 1 GiB of device memory and
// a 64 MiB pool allocation, fills both with a pattern by a kernel it compiled (NVRTC) and loaded, says
// "ready" and waits for commands. The parent locks and checkpoints it, sees the device's free memory rise
// by about the child's allocations (cuMemGetInfo in its own context), checks that illegal transitions are
// refused, restores and unlocks it, and has it verify its data (on the device and against a host
// reference) and launch again; then the same through a process_checkpoint_lock scope. Every wait is
// bounded and the child is killed on failure. The case forks, so it carries [fork] (left out of the
// compute-sanitizer passes of scripts/gpu-suite.sh, as the other cases that start children).
//
// Run it: build/tests/cudrv_gpu_tests "[process_checkpoint]"
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cudrv/process_checkpoint.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "support/child_process.hpp"
#include "support/test_support.hpp"

using cudrv::process_state;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;
constexpr std::size_t big_elements = 1024 * MiB / sizeof(std::uint32_t);  // 1 GiB
constexpr std::size_t pool_elements = 64 * MiB / sizeof(std::uint32_t);   // 64 MiB from the default pool
constexpr std::size_t child_bytes = (big_elements + pool_elements) * sizeof(std::uint32_t);

const char* const pattern_source = R"(
extern "C" __global__ void fill(unsigned* p, unsigned long long n, unsigned seed) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    p[i] = (unsigned)(i * 2654435761ull) ^ seed;
  }
}
extern "C" __global__ void verify(const unsigned* p, unsigned long long n, unsigned seed, unsigned long long* bad) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    if (p[i] != ((unsigned)(i * 2654435761ull) ^ seed)) atomicAdd(bad, 1ull);
  }
}
)";

std::uint32_t expected(std::size_t i, std::uint32_t seed) {
  return static_cast<std::uint32_t>(i * 2654435761ull) ^ seed;
}

// The child's side: its buffers, its kernels, and the checks it runs when the parent says "verify".
struct checkpoint_child {
  cudrv::device dev{0};
  cudrv::stream s{dev};
  cudrv::library lib{
      cudrv::program("pattern.cu", pattern_source).compile(cudrv::code_kind::cubin, {.arch = dev.arch()}).code, dev};
  cudrv::typed_kernel<void(unsigned*, unsigned long long, unsigned)> fill =
      lib.get_kernel<void(unsigned*, unsigned long long, unsigned)>("fill");
  cudrv::typed_kernel<void(const unsigned*, unsigned long long, unsigned, unsigned long long*)> verify =
      lib.get_kernel<void(const unsigned*, unsigned long long, unsigned, unsigned long long*)>("verify");
  cudrv::device_buffer<std::uint32_t> big{dev, big_elements};    // cuMemAlloc
  cudrv::device_buffer<std::uint32_t> pooled{s, pool_elements};  // the default pool, stream-ordered
  cudrv::device_buffer<unsigned long long> bad{dev, 1};
  std::uint32_t seed = 0x5eed0001u;
  const cudrv::launch_config grid{.grid = 1024, .block = 256};

  void fill_both() {
    cudrv::launch(s, grid, fill, big.get(), static_cast<unsigned long long>(big_elements), seed);
    cudrv::launch(s, grid, fill, pooled.get(), static_cast<unsigned long long>(pool_elements), seed ^ 0xffu);
    s.synchronize();
  }

  // Mismatches found on the device, and in the first and last MiB of each buffer compared on the host.
  std::pair<unsigned long long, std::size_t> check_both() {
    const std::vector<unsigned long long> zero(1, 0);
    cudrv::copy(bad, zero, s);
    cudrv::launch(s, grid, verify, big.get(), static_cast<unsigned long long>(big_elements), seed, bad.get());
    cudrv::launch(s, grid, verify, pooled.get(), static_cast<unsigned long long>(pool_elements), seed ^ 0xffu,
                  bad.get());
    std::vector<unsigned long long> device_bad(1, ~0ull);  // poisoned
    cudrv::copy(device_bad, bad, s);
    s.synchronize();
    struct part {
      const cudrv::device_buffer<std::uint32_t>* buffer;
      std::size_t count;
      std::uint32_t salt;
    };
    std::size_t host_bad = 0;
    const std::size_t slice = MiB / sizeof(std::uint32_t);
    for (const part& b : {part{&big, big_elements, 0u}, part{&pooled, pool_elements, 0xffu}}) {
      for (const std::size_t first : {std::size_t{0}, b.count - slice}) {
        std::vector<std::uint32_t> host(slice, 0xdeadbeefu);  // poisoned
        cudrv::copy(host, b.buffer->view().subspan(first, slice), s);
        s.synchronize();
        for (std::size_t i = 0; i < slice; ++i) {
          host_bad += host[i] != expected(first + i, seed ^ b.salt) ? 1 : 0;
        }
      }
    }
    s.synchronize();
    return {device_bad[0], host_bad};
  }
};

}  // namespace

// The child: runs only when the parent case below starts it (CUDRV_TEST_CHECKPOINT_CHILD=1).
TEST_CASE("process_checkpoint child: holds device memory, a pool allocation and a kernel, verifies on command",
          "[.][checkpoint_child]") {
  if (std::getenv("CUDRV_TEST_CHECKPOINT_CHILD") == nullptr) {
    std::cout << "SKIPPED: run by the [process_checkpoint] case in a child process" << std::endl;
    return;
  }
  checkpoint_child c;
  c.fill_both();
  std::cout << "ready " << child_bytes << std::endl;
  for (;;) {
    const std::string command = cudrv::test::read_command(120s);
    if (command == "verify") {
      const auto [device_bad, host_bad] = c.check_both();
      c.seed += 0x101u;  // launch again: a new pattern, written and checked after the restore
      c.fill_both();
      const auto [again_device_bad, again_host_bad] = c.check_both();
      std::cout << "verified bad=" << device_bad << " host_bad=" << host_bad << " again_bad=" << again_device_bad
                << " again_host_bad=" << again_host_bad << std::endl;
      CHECK(device_bad == 0);
      CHECK(host_bad == 0);
      CHECK(again_device_bad == 0);
      CHECK(again_host_bad == 0);
    } else {
      REQUIRE(command == "exit");  // an empty command: the parent went away or the wait timed out
      return;
    }
  }
}

TEST_CASE("process_checkpoint: a checkpointed child's device memory is released, and intact after restore",
          "[gpu][process_checkpoint][fork]") {
  CUDRV_REQUIRE_GPU();
  if (!cudrv::process_checkpoint::supported()) {
    std::cout << "SKIPPED: needs a driver with checkpoint and restore (CUDA 12.8+), and cudrv built with its headers"
              << std::endl;
    return;
  }
  const cudrv::device dev(0);
  (void)dev.free_memory();  // the parent's own context: its free-memory readings see the whole device
  cudrv::test::child_process child({"[checkpoint_child]"}, {"CUDRV_TEST_CHECKPOINT_CHILD=1"});
  REQUIRE(child.started());
  const auto ready = child.wait_for_line("ready", 40s);  // ctest gives the whole case 120 s
  INFO("child output:\n" << child.output());
  REQUIRE(ready.has_value());
  const cudrv::process_checkpoint p(child.pid());
  CHECK(p.state() == process_state::running);
  const auto release_bound = child_bytes / 10 * 9;  // at least 90% of what the child allocated comes back

  // Round 1: the operations one by one.
  p.lock();
  CHECK(p.state() == process_state::locked);
  const std::size_t free_locked = dev.free_memory();
  p.checkpoint();
  CHECK(p.state() == process_state::checkpointed);
  const std::size_t free_checkpointed = dev.free_memory();
  INFO("free memory: " << free_locked << " B locked, " << free_checkpointed << " B checkpointed");
  CHECK(free_checkpointed >= free_locked + release_bound);
  std::cout << "checkpoint: the device's free memory rose by " << (free_checkpointed - free_locked) / (1 << 20)
            << " MiB while the child was checkpointed (it holds " << child_bytes / (1 << 20) << " MiB)\n";
  // The real driver's state, refused before it: unlock, checkpoint and lock need other states.
  for (const auto& refused : {+[](const cudrv::process_checkpoint& q) { q.unlock(); },
                              +[](const cudrv::process_checkpoint& q) { q.checkpoint(); },
                              +[](const cudrv::process_checkpoint& q) { q.lock(); }}) {
    const auto e = cudrv::test::catch_as<cudrv::process_state_error>([&] { refused(p); });
    REQUIRE(e.has_value());
    CHECK(e->current_state() == process_state::checkpointed);
    CHECK(e->source() == cudrv::error_source::cudrv);
  }
  p.restore();
  CHECK(p.state() == process_state::locked);
  CHECK(dev.free_memory() + release_bound <= free_checkpointed);  // the child's memory is back on the device
  CHECK(p.restore_thread_id() > 0);
  p.unlock();
  CHECK(p.state() == process_state::running);
  REQUIRE(child.send("verify"));
  const auto first = child.wait_for_line("verified", 25s);
  INFO("child output after the first verification:\n" << child.output());
  REQUIRE(first.has_value());
  CHECK(*first == "verified bad=0 host_bad=0 again_bad=0 again_host_bad=0");

  // Round 2: a scope, whose end restores and unlocks.
  {
    const cudrv::process_checkpoint_lock paused(p, std::chrono::seconds(60));
    const std::size_t before = dev.free_memory();
    paused.process().checkpoint();
    CHECK(dev.free_memory() >= before + release_bound);
  }
  CHECK(p.state() == process_state::running);
  REQUIRE(child.send("verify"));
  const auto second = child.wait_for_line("verified", 25s);
  INFO("child output after the second verification:\n" << child.output());
  REQUIRE(second.has_value());
  CHECK(*second == "verified bad=0 host_bad=0 again_bad=0 again_host_bad=0");

  REQUIRE(child.send("exit"));
  CHECK(child.wait(15s) == 0);
}
