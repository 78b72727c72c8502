// CPU tier: what stream memory operations decide before any driver call: a stream_memory_op checks its
// flag and carries the driver's description of the operation. Made-up device addresses suffice: nothing
// here reaches the driver.
#include <catch2/catch.hpp>

#include <cudrv/cudrv.hpp>

#include <cstdint>
#include <type_traits>

#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;

static_assert(std::is_trivially_copyable_v<cudrv::stream_memory_op>);
static_assert(cudrv::stream_flag_value<std::uint32_t> && cudrv::stream_flag_value<std::uint64_t>);
static_assert(!cudrv::stream_flag_value<int> && !cudrv::stream_flag_value<std::uint16_t>);

TEST_CASE("stream_memory_op carries the driver's description of the operation", "[stream_memory_ops]") {
  const cudrv::device_span<std::uint32_t> flag32(CUdeviceptr{0x10000}, 2);
  const cudrv::device_span<std::uint64_t> flag64(CUdeviceptr{0x20000}, 1);
  const auto w = cudrv::stream_memory_op::wait(flag32, 41u,
                                               {.condition = cudrv::wait_condition::nor, .flush_remote_writes = true});
  CHECK(w.native().waitValue.operation == CU_STREAM_MEM_OP_WAIT_VALUE_32);
  CHECK(w.native().waitValue.address == 0x10000);
  CHECK(w.native().waitValue.value == 41u);
  CHECK(w.native().waitValue.flags == (CU_STREAM_WAIT_VALUE_NOR | CU_STREAM_WAIT_VALUE_FLUSH));
  const auto w64 =
      cudrv::stream_memory_op::wait(cudrv::device_span<const std::uint64_t>(flag64), std::uint64_t{1} << 40);
  CHECK(w64.native().waitValue.operation == CU_STREAM_MEM_OP_WAIT_VALUE_64);
  CHECK(w64.native().waitValue.value64 == std::uint64_t{1} << 40);
  CHECK(w64.native().waitValue.flags == CU_STREAM_WAIT_VALUE_GEQ);
  const auto wr = cudrv::stream_memory_op::write(flag32.subspan(1), 7u);
  CHECK(wr.native().writeValue.operation == CU_STREAM_MEM_OP_WRITE_VALUE_32);
  CHECK(wr.native().writeValue.address == 0x10004);
  CHECK(wr.native().writeValue.value == 7u);
  CHECK(cudrv::stream_memory_op::barrier(cudrv::memory_barrier_scope::device).native().memoryBarrier.flags ==
        CU_STREAM_MEMORY_BARRIER_TYPE_GPU);
  CHECK(cudrv::stream_memory_op::flush_remote_writes().native().operation == CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES);

  auto misaligned = catch_as<cudrv::invalid_argument_error>(
      [&] { (void)cudrv::stream_memory_op::write(cudrv::device_span<std::uint64_t>(CUdeviceptr{0x20004}, 1), 1); });
  REQUIRE(misaligned);
  CHECK(contains(misaligned->what(), "8 bytes"));
  CHECK(catch_as<cudrv::invalid_argument_error>([&] { (void)cudrv::stream_memory_op::wait(flag32.first(0), 1u); }));
  CHECK(catch_as<cudrv::invalid_argument_error>(
      [&] { (void)cudrv::stream_memory_op::wait(flag32, 1u, {.condition = static_cast<cudrv::wait_condition>(5)}); }));
}
