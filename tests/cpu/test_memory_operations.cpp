// CPU tier: what batched copies and stream memory operations decide before any driver call. A
// copy_batch groups its attributes into the driver's runs (attrs / attrsIdxs) and checks each copy when
// it is added; a stream_memory_op checks its flag and carries the driver's description of the operation.
// Host ranges and made-up device addresses suffice: nothing here reaches the driver, except the
// [driverless] cases, which check the typed error when there is no driver at all.
#include <catch2/catch.hpp>

#include <cudrv/cudrv.hpp>

#include <array>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;

static_assert(std::is_trivially_copyable_v<cudrv::stream_memory_op>);

// What keeps addresses past the call (a copy batch, a graph's memcpy and memset nodes and their updates)
// refuses a temporary owner at compile time; a named object or a view, even a temporary view, is taken.
template <class D, class S>
concept batchable = requires(cudrv::copy_batch& b, D&& d, S&& s) { b.add(std::forward<D>(d), std::forward<S>(s)); };
template <class D, class S>
concept batchable_count =
    requires(cudrv::copy_batch& b, D&& d, S&& s) { b.add(std::forward<D>(d), std::forward<S>(s), std::size_t{1}); };
template <class D, class S>
concept graph_copyable =
    requires(cudrv::graph_builder& g, D&& d, S&& s) { cudrv::copy(std::forward<D>(d), std::forward<S>(s), g); };
template <class D>
concept graph_fillable = requires(cudrv::graph_builder& g, D&& d) { cudrv::fill(std::forward<D>(d), 1.f, g); };
template <class D, class S>
concept exec_copyable = requires(cudrv::graph_exec& e, cudrv::memcpy_node n, cudrv::context_ref c, D&& d, S&& s) {
  e.set_copy_node(n, c, std::forward<D>(d), std::forward<S>(s));
};
using fvec = std::vector<float>;
using dbuf = cudrv::device_buffer<float>;
using dspan = cudrv::device_span<float>;
static_assert(batchable<dbuf&, fvec&> && batchable<fvec&, const dbuf&> && batchable<dspan, std::span<const float>>);
static_assert(batchable<dspan, const fvec&> && batchable_count<dbuf&, fvec&>);
static_assert(!batchable<dbuf&, fvec> && !batchable<dbuf, fvec&> && !batchable<dspan, dbuf>);  // temporaries
static_assert(!batchable_count<dbuf&, fvec> && !batchable_count<fvec, const dbuf&>);
static_assert(!batchable<dspan, cudrv::pinned_buffer<float>>);
static_assert(graph_copyable<dbuf&, fvec&> && graph_copyable<dspan, std::span<float>>);
static_assert(!graph_copyable<dbuf&, fvec> && !graph_copyable<dbuf, const fvec&>);
static_assert(graph_fillable<dbuf&> && graph_fillable<dspan> && !graph_fillable<dbuf>);
static_assert(exec_copyable<dbuf&, fvec&> && !exec_copyable<dbuf&, fvec> && !exec_copyable<dbuf, fvec&>);
static_assert(cudrv::stream_flag_value<std::uint32_t> && cudrv::stream_flag_value<std::uint64_t>);
static_assert(!cudrv::stream_flag_value<int> && !cudrv::stream_flag_value<std::uint16_t>);

TEST_CASE("copy_batch: one attribute entry per run of equal attributes, indices of the first copies",
          "[memory_operations]") {
  std::vector<float> src(64), dst(64);
  const cudrv::copy_attributes fast{.order = cudrv::source_access_order::any};
  const cudrv::copy_attributes overlap{.prefer_overlap_with_compute = true};
  // runs: default x2, fast x3, default x1, overlap x2, fast x1
  const cudrv::copy_attributes plan[] = {{}, {}, fast, fast, fast, {}, overlap, overlap, fast};
  cudrv::copy_batch batch;
  for (std::size_t i = 0; i < std::size(plan); ++i) {
    batch.add(std::span(dst).subspan(i, 1), std::span(src).subspan(i, 1), plan[i]);
  }
  REQUIRE(batch.size() == std::size(plan));
  CHECK(std::vector<std::size_t>(batch.attribute_indices().begin(), batch.attribute_indices().end()) ==
        std::vector<std::size_t>{0, 2, 5, 6, 8});
  REQUIRE(batch.attributes().size() == 5);
  CHECK(batch.attributes()[1] == fast);
  CHECK(batch.attributes()[3] == overlap);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    CHECK(batch.sizes()[i] == sizeof(float));
    CHECK(batch.sources()[i] == reinterpret_cast<CUdeviceptr>(&src[i]));
    CHECK(batch.destinations()[i] == reinterpret_cast<CUdeviceptr>(&dst[i]));
  }
  batch.clear();
  CHECK(batch.empty());
  CHECK(batch.attributes().empty());
  CHECK(batch.attribute_indices().empty());
}

TEST_CASE("copy_batch and copy_batch_3d refuse bad copies when they are added", "[memory_operations]") {
  std::vector<int> small(3), large(9), none;
  cudrv::copy_batch batch;
  batch.add(large, small);
  auto e = catch_as<cudrv::invalid_argument_error>([&] { batch.add(small, large); });
  REQUIRE(e);
  CHECK(e->api() == "cudrv::copy_batch::add");
  CHECK(contains(e->what(), "copy 1 of 2"));
  CHECK(catch_as<cudrv::invalid_argument_error>([&] { batch.add(large, none); }));
  CHECK(catch_as<cudrv::invalid_argument_error>([&] { batch.add(large, small, 4); }));
  CHECK(catch_as<cudrv::invalid_argument_error>(
      [&] { batch.add(large, small, cudrv::copy_attributes{.source_hint = {static_cast<cudrv::location_kind>(9), 0}}); }));
  CHECK(batch.size() == 1);

  cudrv::copy_batch_3d b3;
  std::vector<double> host(100);
  const auto src = cudrv::pitched_span<double>::dense(host.data(), 10, 10);
  b3.add(src, cudrv::pitched_span<const double>(src));
  const cudrv::pitched_span<double> bad_pitch{src.address, 8, 10, 10, 1};  // 8 bytes < a row of 80
  auto p = catch_as<cudrv::invalid_argument_error>([&] { b3.add(bad_pitch, cudrv::pitched_span<const double>(src)); });
  REQUIRE(p);
  CHECK(contains(p->what(), "pitch is smaller than its row"));
  CHECK(contains(p->what(), "copy 1 of 2"));
  REQUIRE(b3.size() == 1);
  CHECK(b3.operations()[0].src.width_bytes == 80);
  CHECK(b3.operations()[0].dst.pitch == 80);
}

TEST_CASE("stream_memory_op carries the driver's description of the operation", "[memory_operations]") {
  const cudrv::device_span<std::uint32_t> flag32(CUdeviceptr{0x10000}, 2);
  const cudrv::device_span<std::uint64_t> flag64(CUdeviceptr{0x20000}, 1);
  const auto w = cudrv::stream_memory_op::wait(flag32, 41u, {.condition = cudrv::wait_condition::nor, .flush_remote_writes = true});
  CHECK(w.native().waitValue.operation == CU_STREAM_MEM_OP_WAIT_VALUE_32);
  CHECK(w.native().waitValue.address == 0x10000);
  CHECK(w.native().waitValue.value == 41u);
  CHECK(w.native().waitValue.flags == (CU_STREAM_WAIT_VALUE_NOR | CU_STREAM_WAIT_VALUE_FLUSH));
  const auto w64 = cudrv::stream_memory_op::wait(cudrv::device_span<const std::uint64_t>(flag64), std::uint64_t{1} << 40);
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

TEST_CASE("driverless: batch-copy probes and stream memory operations throw driver_unavailable_error",
          "[memory_operations][driverless]") {
  CHECK(catch_as<cudrv::driver_unavailable_error>([] { (void)cudrv::batch_copy_supported(); }));
  CHECK(catch_as<cudrv::driver_unavailable_error>([] { (void)cudrv::batch_copy_3d_supported(); }));
  std::vector<int> a(4), b(4);
  cudrv::copy_batch batch;
  batch.add(a, b);  // checks alone: no driver needed
  CHECK(batch.size() == 1);
}
