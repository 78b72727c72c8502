// Stream memory operations against the stand-in driver (fake_cuda.cpp): the operations cudrv hands the
// driver for waits, writes and batches, on streams and as graph nodes, and the typed errors for
// operations a device does not support.
#include <catch2/catch.hpp>

#include <cudrv/cudrv.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "fake_driver/fake_hooks.hpp"
#include "support/catch_support.hpp"
#include "support/device_buffer_support.hpp"
#include "support/memory_support.hpp"
#include "support/test_support.hpp"

using cudrv::test::contains;
using cudrv::test::poison_value;
using cudrv::test::poisoned_buffer;
using cudrv::test::read_back;

namespace {

long long counter(const char* name) { return cudrv::test::fake_counter(name); }
std::string fake_log() { return cudrv::test::fake_log(); }

// The log lines written since `before` (a length of the log).
std::string log_since(std::size_t before) { return fake_log().substr(before); }

// An address as the fake writes it in its log.
std::string hex_address(CUdeviceptr p) {
  std::ostringstream o;
  o << reinterpret_cast<void*>(p);
  return o.str();
}

// Device 1 (sm_90) of the fake; device 0 (sm_80) is held by another process unless the test frees it.
struct fixture {
  cudrv::device dev{1};
  cudrv::stream stream{dev};
  std::uint64_t seed = cudrv::test::test_seed();
};

}  // namespace
TEST_CASE("waits, writes and batches reach the driver as typed", "[fake-driver][stream-memory-ops]") {
  fixture f;
  cudrv::device_buffer<std::uint32_t> flag32(f.dev, 2);
  cudrv::device_buffer<std::uint64_t> flag64(f.dev, 1);
  const auto support = cudrv::query_stream_memory_op_support(f.dev);
  CHECK(support.wait_write_64);
  CHECK_FALSE(support.wait_nor);
  CHECK_FALSE(support.flush_remote_writes);

  const std::string a32 = hex_address(flag32.data());
  const std::string a64 = hex_address(flag64.data());
  std::size_t before = fake_log().size();
  cudrv::write_value(f.stream, flag32.view(), 7u);
  cudrv::write_value(f.stream, flag64.view(), std::uint64_t{1} << 40);
  cudrv::wait_value(f.stream, flag32.view(), 7u, {.condition = cudrv::wait_condition::eq});
  cudrv::wait_value(f.stream, cudrv::device_span<const std::uint64_t>(flag64.view()), 5,
                    {.condition = cudrv::wait_condition::bit_and});
  CHECK(log_since(before) == "memop write32 " + a32 + " 7;\nmemop write64 " + a64 + " 1099511627776;\nmemop wait32 " +
                                 a32 + " 7 flags=" + std::to_string(CU_STREAM_WAIT_VALUE_EQ) + ";\nmemop wait64 " +
                                 a64 + " 5 flags=" + std::to_string(CU_STREAM_WAIT_VALUE_AND) + ";\n");
  CHECK(read_back(flag32)[0] == 7u);
  CHECK(read_back(flag64)[0] == std::uint64_t{1} << 40);

  before = fake_log().size();
  cudrv::batch_memory_ops(f.stream, {cudrv::stream_memory_op::wait(flag32.view(), 3u),
                                     cudrv::stream_memory_op::write(flag32.view().subspan(1), 9u),
                                     cudrv::stream_memory_op::barrier(cudrv::memory_barrier_scope::device)});
  const std::string second = hex_address(flag32.data() + 4);
  CHECK(log_since(before) == "batch_memop wait32 " + a32 + " 3 flags=" + std::to_string(CU_STREAM_WAIT_VALUE_GEQ) +
                                 ";write32 " + second + " 9;barrier " +
                                 std::to_string(CU_STREAM_MEMORY_BARRIER_TYPE_GPU) + ";\n");
  CHECK(read_back(flag32)[1] == 9u);
}

TEST_CASE("stream memory operations refuse bad flags before the driver", "[fake-driver][stream-memory-ops]") {
  fixture f;
  cudrv::device_buffer<std::uint32_t> flag(f.dev, 4);
  const std::size_t before = fake_log().size();
  cudrv::test::require_invalid_argument("empty", [&] { cudrv::write_value(f.stream, flag.view().first(0), 1u); });
  cudrv::test::require_invalid_argument("null", [&] {
    cudrv::wait_value(f.stream, cudrv::device_span<std::uint32_t>(CUdeviceptr{0}, 1), 1u);
  });
  auto e = cudrv::test::require_invalid_argument("misaligned", [&] {
    cudrv::wait_value(f.stream, cudrv::device_span<std::uint32_t>(flag.data() + 2, 1), 1u);
  });
  CHECK(contains(e.what(), "aligned"));
  // cuda.h: "count ... Must be less than 256": 256 operations are refused before the driver.
  std::vector<cudrv::stream_memory_op> many(256, cudrv::stream_memory_op::barrier());
  auto m = cudrv::test::require_invalid_argument("256 operations", [&] { cudrv::batch_memory_ops(f.stream, many); });
  CHECK(contains(m.what(), "at most 255"));
  cudrv::test::require_invalid_argument("empty batch", [&] {
    cudrv::batch_memory_ops(f.stream, std::span<const cudrv::stream_memory_op>());
  });
  CHECK(log_since(before).empty());
}

TEST_CASE("operations a device lacks give not_supported_error naming the attribute",
          "[fake-driver][stream-memory-ops][driver_error]") {
  setenv("FAKE_CUDA_UNAVAILABLE", "", 1);  // device 0 (sm_80, no 64-bit operations) usable: read at cuInit
  fixture f;
  cudrv::device_buffer<std::uint32_t> flag(f.dev, 1);
  auto nor = cudrv::test::catch_as<cudrv::not_supported_error>(
      [&] { cudrv::wait_value(f.stream, flag.view(), 1u, {.condition = cudrv::wait_condition::nor}); });
  REQUIRE(nor);
  CHECK(contains(nor->what(), "CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR"));
  CHECK(nor->api() == "cuStreamWaitValue32");
  auto flush = cudrv::test::catch_as<cudrv::not_supported_error>(
      [&] { cudrv::wait_value(f.stream, flag.view(), 1u, {.flush_remote_writes = true}); });
  REQUIRE(flush);
  CHECK(contains(flush->what(), "CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES"));

  cudrv::device old(0);
  try {
    (void)old.primary_context();
  } catch (const cudrv::error&) {
    WARN("device 0 of the fake is held: FAKE_CUDA_UNAVAILABLE was read before this case; run it in its own process");
    return;
  }
  const auto support = cudrv::query_stream_memory_op_support(old);
  CHECK_FALSE(support.wait_write_64);
  cudrv::stream s(old);
  cudrv::device_buffer<std::uint64_t> wide(old, 1);
  auto e = cudrv::test::catch_as<cudrv::not_supported_error>([&] { cudrv::write_value(s, wide.view(), 1); });
  REQUIRE(e);
  CHECK(contains(e->what(), "CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS"));
  CHECK(contains(e->what(), "device 0"));
  auto b = cudrv::test::catch_as<cudrv::not_supported_error>(
      [&] { cudrv::batch_memory_ops(s, {cudrv::stream_memory_op::wait(wide.view(), 2)}); });
  REQUIRE(b);
  CHECK(b->api() == "cuStreamBatchMemOp");
  // 32-bit operations work there.
  cudrv::device_buffer<std::uint32_t> narrow(old, 1);
  cudrv::write_value(s, narrow.view(), 4u);
  CHECK(read_back(narrow)[0] == 4u);

  cudrv::graph g;
  cudrv::graph_builder builder(g, old);
  auto n = cudrv::test::catch_as<cudrv::not_supported_error>([&] { cudrv::wait_value(builder, wide.view(), 1); });
  REQUIRE(n);
  CHECK(n->api() == "cuGraphAddBatchMemOpNode");
  CHECK(contains(n->what(), "CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS"));
}

TEST_CASE("memory-operation graph nodes run in the builder's context after its dependencies",
          "[fake-driver][stream-memory-ops]") {
  fixture f;
  cudrv::device_buffer<std::uint32_t> flag(f.dev, 1);
  cudrv::device_buffer<std::uint64_t> wide(f.dev, 1);
  cudrv::graph g;
  cudrv::graph_builder b(g, f.dev);
  const std::size_t before = fake_log().size();
  const long long seen = counter("graph_deps_seen");
  const long long bad = counter("graph_bad_deps");
  auto first = cudrv::wait_value(b, flag.view(), 1u);
  CHECK(b.last() == first);
  cudrv::write_value(b, wide.view(), 2);
  const cudrv::stream_memory_op ops[] = {cudrv::stream_memory_op::write(flag.view(), 0u),
                                         cudrv::stream_memory_op::barrier()};
  cudrv::batch_memory_ops(b, ops);
  CHECK(log_since(before) ==
        "graph_memop deps=0 ctx_device=1 " + std::to_string(CU_STREAM_MEM_OP_WAIT_VALUE_32) +
            ";\ngraph_memop deps=1 ctx_device=1 " + std::to_string(CU_STREAM_MEM_OP_WRITE_VALUE_64) +
            ";\ngraph_memop deps=1 ctx_device=1 " + std::to_string(CU_STREAM_MEM_OP_WRITE_VALUE_32) + ";" +
            std::to_string(CU_STREAM_MEM_OP_BARRIER) + ";\n");
  CHECK(counter("graph_deps_seen") == seen + 2);  // each node after the previous one, a node of this graph
  CHECK(counter("graph_bad_deps") == bad);
  CHECK(cudrv::test::catch_as<cudrv::invalid_argument_error>(
      [&] { cudrv::batch_memory_ops(b, std::span<const cudrv::stream_memory_op>()); }));
}

TEST_CASE("a batch of 255 memory operations, the driver's largest, reaches the driver",
          "[fake-driver][stream-memory-ops]") {
  fixture f;
  std::vector<cudrv::stream_memory_op> most(255, cudrv::stream_memory_op::barrier());
  cudrv::batch_memory_ops(f.stream, most);
  f.stream.synchronize();
  cudrv::graph g;
  cudrv::graph_builder b(g, f.dev);
  auto m = cudrv::test::require_invalid_argument("256 operations in a node", [&] {
    (void)cudrv::batch_memory_ops(b, std::vector<cudrv::stream_memory_op>(256, cudrv::stream_memory_op::barrier()));
  });
  CHECK(contains(m.what(), "at most 255"));
  (void)cudrv::batch_memory_ops(b, most);
}

TEST_CASE("stream memory operations retry in the stream's context where the driver wants it current, and restore "
          "the caller's",
          "[fake-driver][stream-memory-ops]") {
  fixture f;
  cudrv::device_buffer<std::uint32_t> flag = poisoned_buffer<std::uint32_t>(f.dev, 2);
  auto* need_current = cudrv::test::fake_hook<void(int)>("fake_cuda_memops_need_current");
  struct restore {
    void (*fn)(int);
    ~restore() { fn(0); }
  } off{need_current};
  need_current(1);
  cudrv::test::raw_set_current_context(nullptr);
  cudrv::write_value(f.stream, flag.view().first(1), 7u);
  cudrv::batch_memory_ops(f.stream, {cudrv::stream_memory_op::write(flag.view().subspan(1, 1), 9u)});
  f.stream.synchronize();
  CHECK(cudrv::test::raw_current_context() == nullptr);  // no context left current
  CHECK(read_back(flag) == std::vector<std::uint32_t>{7u, 9u});
}
