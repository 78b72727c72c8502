// GPU tier: stream memory operations (<cudrv/stream_memory_ops.hpp>) and their graph nodes. One stream
// releases another through a flag in device memory (NCCL/PyTorch-style synchronisation without events),
// the host releases a stream through a flag in pinned memory (32 and 64 bits, every condition the
// device supports), batches of operations, and a graph whose nodes wait for and write flags.
//
// Lazy loading: a kernel loaded for the first time while a stream is blocked in a wait can deadlock
// (the load waits for the device to go idle, the wait for a flag written after the load). Every kernel
// here comes from a library loaded eagerly into the device's context and is launched once, to
// completion, before any wait is enqueued. Every blocked stream is released within the test: a
// failing check never leaves a wait pending (the flag is written before the check).
//
// Results are checked against host references on random data; outputs are poisoned first.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <utility>
#include <vector>

#include "support/catch_support.hpp"
#include "support/memory_support.hpp"
#include "support/test_support.hpp"

using cudrv::test::mismatch;
using cudrv::test::poison_value;
using cudrv::test::random_vector;

namespace {

using add_kernel = cudrv::typed_kernel<void(const float*, const float*, float*, int)>;

// vector_add from the test kernels, loaded into dev's context now (no lazy load later) and launched once.
struct warm_kernels {
  cudrv::library lib;
  add_kernel add;
  explicit warm_kernels(const cudrv::device& dev)
      : lib(cudrv::library::from_file(CUDRV_TEST_KERNELS_CUBIN, dev.primary_context())),
        add(lib.get_kernel<void(const float*, const float*, float*, int)>("vector_add")) {
    cudrv::stream s(dev);
    cudrv::device_buffer<float> x(dev, 1);
    cudrv::fill(x, 0.0f, s);
    cudrv::launch(s, {.grid = 1, .block = 32}, add, x.get(), x.get(), x.get(), 1);
    s.synchronize();
  }
};

constexpr int n = 1 << 20;
const cudrv::launch_config config{.grid = (n + 255) / 256, .block = 256};

std::vector<float> sum(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> out(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    out[i] = a[i] + b[i];
  }
  return out;
}

std::vector<float> random_floats(std::size_t count, std::uint64_t seed) {
  auto r = random_vector<std::uint16_t>(count, seed);
  return {r.begin(), r.end()};
}

// Gives a stream that should be blocked time to (wrongly) finish.
void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(50)); }

// Runs `release` when the scope ends unless dismissed: a REQUIRE or an exception between enqueueing a
// wait and releasing it would otherwise leave the stream blocked, and the buffers' destructors
// (cuMemFree synchronises) would hang the whole test binary. The releases write the flag with a plain
// fill (memset), not a stream memory operation, so they work where those are what failed. Never throws.
template <class Release>
struct release_on_exit {
  Release release;
  bool armed = true;
  explicit release_on_exit(Release r) : release(std::move(r)) {}
  release_on_exit(const release_on_exit&) = delete;
  release_on_exit& operator=(const release_on_exit&) = delete;
  void dismiss() noexcept { armed = false; }
  ~release_on_exit() {
    if (armed) {
      try {
        release();
      } catch (...) {
        // nothing more can be done: the test has already failed
      }
    }
  }
};

}  // namespace

TEST_CASE("one stream releases another through a flag in device memory", "[gpu][stream_memory_ops]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  warm_kernels k(dev);
  const auto seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  const auto a = random_floats(n, seed), b = random_floats(n, seed + 1), e = random_floats(n, seed + 2);
  cudrv::stream producer(dev), consumer(dev);
  cudrv::device_buffer<float> da(dev, n), db(dev, n), de(dev, n), c(dev, n), d(dev, n);
  cudrv::copy(da, a, producer);
  cudrv::copy(db, b, producer);
  cudrv::copy(de, e, producer);
  cudrv::fill(c, poison_value<float>(), producer);
  cudrv::fill(d, poison_value<float>(), producer);
  cudrv::device_buffer<std::uint32_t> flag(dev, 1);
  cudrv::fill(flag, 0u, producer);
  producer.synchronize();

  // B: wait for the flag, then d = c + e. A (held back by the host): c = a + b, then the flag.
  cudrv::stream rescue(dev);
  cudrv::test::gate gate;
  release_on_exit guard([&] {
    gate.open();
    cudrv::fill(flag, 1u, rescue);  // a plain memset: works even where the memory operations failed
    rescue.synchronize();
    consumer.synchronize();
  });
  cudrv::wait_value(consumer, flag.view(), 1u, {.condition = cudrv::wait_condition::eq});
  cudrv::launch(consumer, config, k.add, c.get(), de.get(), d.get(), n);
  producer.enqueue(gate.blocker());
  cudrv::launch(producer, config, k.add, da.get(), db.get(), c.get(), n);
  cudrv::write_value(producer, flag.view(), 1u);
  settle();
  const bool early = consumer.is_done();
  gate.open();
  producer.synchronize();
  consumer.synchronize();
  guard.dismiss();
  CHECK_FALSE(early);  // the consumer waited for the flag
  std::vector<float> got(n);
  cudrv::copy(got, d);
  CHECK(mismatch(got, sum(sum(a, b), e)).empty());
}

TEST_CASE("the host releases a stream through a flag in pinned memory, for every condition the device has",
          "[gpu][stream_memory_ops]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  warm_kernels k(dev);
  const auto support = cudrv::query_stream_memory_op_support(dev);
  INFO("64-bit " << support.wait_write_64 << ", nor " << support.wait_nor << ", flush " << support.flush_remote_writes);
  const auto seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  const auto a = random_floats(n, seed), b = random_floats(n, seed + 1);
  cudrv::stream s(dev);
  cudrv::device_buffer<float> da(dev, n), db(dev, n), out(dev, n);
  cudrv::copy(da, a, s);
  cudrv::copy(db, b, s);
  s.synchronize();
  const auto want = sum(a, b);

  struct wait_case {
    cudrv::wait_condition condition;
    std::uint64_t initial, operand, release;  // the flag before, the wait's operand, the flag that releases
  };
  std::vector<wait_case> cases = {
      {cudrv::wait_condition::geq, 0, 5, 9},
      {cudrv::wait_condition::eq, 3, 4, 4},
      {cudrv::wait_condition::bit_and, 0b0001, 0b0110, 0b0100},
  };
  if (support.wait_nor) {
    cases.push_back(
        {cudrv::wait_condition::nor, ~std::uint64_t{0}, 0b1010, ~std::uint64_t{0b0001}});  // bit 0 clear in both
  }
  cudrv::pinned_buffer<std::uint64_t> flag64(dev, 1);
  cudrv::pinned_buffer<std::uint32_t> flag32(dev, 1);
  for (const bool wide : {false, true}) {
    if (wide && !support.wait_write_64) {
      WARN("device 0 has no 64-bit stream memory operations: 64-bit waits not checked");
      continue;
    }
    for (const wait_case& wc : cases) {
      INFO((wide ? "64" : "32") << "-bit, condition " << static_cast<int>(wc.condition));
      cudrv::fill(out, poison_value<float>(), s);
      std::atomic_ref<std::uint64_t>(flag64[0]).store(wc.initial);
      std::atomic_ref<std::uint32_t>(flag32[0]).store(static_cast<std::uint32_t>(wc.initial));
      release_on_exit guard([&] {
        std::atomic_ref<std::uint64_t>(flag64[0]).store(wc.release);
        std::atomic_ref<std::uint32_t>(flag32[0]).store(static_cast<std::uint32_t>(wc.release));
        s.synchronize();
      });
      if (wide) {
        cudrv::wait_value(s, flag64.device_view(), wc.operand, {.condition = wc.condition});
      } else {
        cudrv::wait_value(s, flag32.device_view(), static_cast<std::uint32_t>(wc.operand), {.condition = wc.condition});
      }
      cudrv::launch(s, config, k.add, da.get(), db.get(), out.get(), n);
      settle();
      const bool early = s.is_done();
      std::atomic_ref<std::uint64_t>(flag64[0]).store(wc.release);
      std::atomic_ref<std::uint32_t>(flag32[0]).store(static_cast<std::uint32_t>(wc.release));
      s.synchronize();
      guard.dismiss();
      CHECK_FALSE(early);
      std::vector<float> got(n);
      cudrv::copy(got, out);
      CHECK(mismatch(got, want).empty());
    }
  }
}

TEST_CASE("a batch of memory operations waits, then writes, in order", "[gpu][stream_memory_ops]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  cudrv::stream a(dev), b(dev);
  const auto seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  const auto values = random_vector<std::uint32_t>(3, seed);
  cudrv::device_buffer<std::uint32_t> flags(dev, 3);
  cudrv::fill(flags, 0u, a);
  a.synchronize();
  // b: wait for flags[0] >= 1, write values[1] to flags[1], barrier, write values[2] to flags[2].
  release_on_exit guard([&] {
    cudrv::fill(flags.view().first(1), 1u, a);
    a.synchronize();
    b.synchronize();
  });
  cudrv::batch_memory_ops(b, {cudrv::stream_memory_op::wait(flags.view().first(1), 1u),
                              cudrv::stream_memory_op::write(flags.view().subspan(1, 1), values[1]),
                              cudrv::stream_memory_op::barrier(cudrv::memory_barrier_scope::device),
                              cudrv::stream_memory_op::write(flags.view().subspan(2, 1), values[2])});
  settle();
  const bool early = b.is_done();
  cudrv::write_value(a, flags.view().first(1), 1u);
  a.synchronize();
  b.synchronize();
  guard.dismiss();
  CHECK_FALSE(early);
  std::vector<std::uint32_t> got(3);
  cudrv::copy(got, flags);
  CHECK(got == std::vector<std::uint32_t>{1u, values[1], values[2]});
}

TEST_CASE("graph nodes wait for a flag, run a kernel and write a flag at every launch",
          "[gpu][stream_memory_ops][graph]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  warm_kernels k(dev);
  const auto seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  const auto a = random_floats(n, seed), b = random_floats(n, seed + 1);
  cudrv::stream s(dev), releaser(dev);
  cudrv::device_buffer<float> da(dev, n), db(dev, n), out(dev, n);
  cudrv::copy(da, a, s);
  cudrv::copy(db, b, s);
  cudrv::device_buffer<std::uint32_t> go(dev, 1);
  cudrv::device_buffer<std::uint64_t> done(dev, 1);
  const bool wide = cudrv::query_stream_memory_op_support(dev).wait_write_64;

  cudrv::graph g;
  cudrv::graph_builder builder(g, dev);
  auto wait_node = cudrv::wait_value(builder, go.view(), 1u, {.condition = cudrv::wait_condition::geq});
  CHECK(wait_node.kind() == cudrv::graph_node_kind::stream_memory_ops);
  cudrv::launch(builder, config, k.add, da.get(), db.get(), out.get(), n);
  if (wide) {
    cudrv::write_value(builder, done.view(), std::uint64_t{1} << 33);
  } else {
    const cudrv::stream_memory_op ops[] = {cudrv::stream_memory_op::barrier()};
    cudrv::batch_memory_ops(builder, ops);
  }
  auto exec = g.instantiate(dev);
  for (int launch = 0; launch < 2; ++launch) {
    INFO("launch " << launch);
    cudrv::fill(out, poison_value<float>(), s);
    cudrv::fill(go, 0u, s);
    if (wide) {
      cudrv::write_value(s, done.view(), 0);
    }
    s.synchronize();  // go is 0 before the releaser can write 1
    release_on_exit guard([&] {
      cudrv::fill(go, 1u, releaser);
      releaser.synchronize();
      s.synchronize();
    });
    exec.launch(s);
    settle();
    const bool early = s.is_done();
    cudrv::write_value(releaser, go.view(), 1u);
    releaser.synchronize();
    s.synchronize();
    guard.dismiss();
    CHECK_FALSE(early);
    std::vector<float> got(n);
    cudrv::copy(got, out);
    CHECK(mismatch(got, sum(a, b)).empty());
    if (wide) {
      std::vector<std::uint64_t> d(1);
      cudrv::copy(d, done);
      CHECK(d[0] == std::uint64_t{1} << 33);
    }
  }
}
