// CPU tier: what batched copies decide before any driver call. A batch_copy groups its attributes into
// the driver's runs (attrs / attrsIdxs) and checks each copy when it is added. Host ranges and made-up
// device addresses suffice: nothing here reaches the driver, except the [driverless] case, which checks
// the typed error when there is no driver at all.
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

// What keeps addresses past the call (a copy batch, a graph's memcpy and memset nodes and their updates)
// refuses a temporary owner at compile time; a named object or a view, even a temporary view, is taken.
template <class D, class S>
concept batchable = requires(cudrv::batch_copy& b, D&& d, S&& s) {
  b.add(std::forward<D>(d), std::forward<S>(s));
};
template <class D, class S>
concept batchable_count = requires(cudrv::batch_copy& b, D&& d, S&& s) {
  b.add(std::forward<D>(d), std::forward<S>(s), std::size_t{1});
};
template <class D, class S>
concept graph_copyable = requires(cudrv::graph_builder& g, D&& d, S&& s) {
  cudrv::copy(std::forward<D>(d), std::forward<S>(s), g);
};
template <class D>
concept graph_fillable = requires(cudrv::graph_builder& g, D&& d) {
  cudrv::fill(std::forward<D>(d), 1.f, g);
};
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
TEST_CASE("batch_copy: one attribute entry per run of equal attributes, indices of the first copies", "[batch_copy]") {
  std::vector<float> src(64), dst(64);
  const cudrv::copy_attributes fast{.order = cudrv::source_access_order::any};
  const cudrv::copy_attributes overlap{.prefer_overlap_with_compute = true};
  // runs: default x2, fast x3, default x1, overlap x2, fast x1
  const cudrv::copy_attributes plan[] = {{}, {}, fast, fast, fast, {}, overlap, overlap, fast};
  cudrv::batch_copy batch;
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

// The arrays of a batch live in the library's sources (docs/design.md, "Header cost"): copies are deep,
// a move hands them over and leaves the source empty, and a new or moved-from batch works as an empty one.
TEST_CASE("batch_copy and batch_copy_3d: deep copies, moves that empty the source, empty batches", "[batch_copy]") {
  std::vector<float> src(16), dst(16);
  cudrv::batch_copy empty;
  CHECK(empty.size() == 0);
  CHECK(empty.empty());
  CHECK(empty.sizes().empty());
  CHECK(empty.destinations().empty());
  CHECK(empty.attributes().empty());
  empty.clear();  // nothing to clear
  cudrv::batch_copy copy_of_empty(empty);
  CHECK(copy_of_empty.empty());

  cudrv::batch_copy a;
  a.reserve(4);
  a.add(std::span(dst).subspan(0, 4), std::span(src).subspan(0, 4));
  a.add(std::span(dst).subspan(4, 2), std::span(src).subspan(8, 2), {.prefer_overlap_with_compute = true});
  cudrv::batch_copy b(a);
  REQUIRE(b.size() == 2);
  CHECK(b.sizes()[0] == 4 * sizeof(float));
  CHECK(b.sources()[1] == reinterpret_cast<CUdeviceptr>(&src[8]));
  CHECK(b.attributes().size() == 2);
  CHECK(b.destinations().data() != a.destinations().data());  // its own arrays
  b.add(std::span(dst).subspan(8, 1), std::span(src).subspan(0, 1));
  CHECK(a.size() == 2);  // the copy grew, the original did not
  CHECK(b.size() == 3);

  cudrv::batch_copy c;
  c = b;  // copy assignment replaces
  CHECK(c.size() == 3);
  c = empty;  // and an empty batch replaces with nothing
  CHECK(c.empty());
  CHECK(c.sizes().empty());

  cudrv::batch_copy moved(std::move(b));
  CHECK(moved.size() == 3);
  CHECK(b.empty());  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  CHECK(b.sizes().empty());
  b.add(std::span(dst).subspan(0, 1), std::span(src).subspan(0, 1));  // usable again
  CHECK(b.size() == 1);
  moved = std::move(b);
  CHECK(moved.size() == 1);
  CHECK(b.empty());  // NOLINT(bugprone-use-after-move)
  auto& self = moved;
  moved = self;  // self-assignment keeps the copies
  CHECK(moved.size() == 1);

  std::vector<double> host(100);
  const auto span = cudrv::pitched_span<double>::dense(host.data(), 10, 10);
  cudrv::batch_copy_3d d3;
  CHECK(d3.empty());
  CHECK(d3.operations().empty());
  d3.add(span, cudrv::pitched_span<const double>(span));
  cudrv::batch_copy_3d e3(d3);
  CHECK(e3.size() == 1);
  CHECK(e3.operations()[0].src.address == span.address);
  cudrv::batch_copy_3d f3(std::move(d3));
  CHECK(f3.size() == 1);
  CHECK(d3.empty());  // NOLINT(bugprone-use-after-move)
  d3 = e3;
  CHECK(d3.size() == 1);
  e3.clear();
  CHECK(e3.empty());
  CHECK(d3.size() == 1);
}

TEST_CASE("batch_copy and batch_copy_3d refuse bad copies when they are added", "[batch_copy]") {
  std::vector<int> small(3), large(9), none;
  cudrv::batch_copy batch;
  batch.add(large, small);
  auto e = catch_as<cudrv::invalid_argument_error>([&] { batch.add(small, large); });
  REQUIRE(e);
  CHECK(e->api() == "cudrv::batch_copy::add");
  CHECK(contains(e->what(), "copy 1 of 2"));
  CHECK(catch_as<cudrv::invalid_argument_error>([&] { batch.add(large, none); }));
  CHECK(catch_as<cudrv::invalid_argument_error>([&] { batch.add(large, small, 4); }));
  CHECK(catch_as<cudrv::invalid_argument_error>([&] {
    batch.add(large, small, cudrv::copy_attributes{.source_hint = {static_cast<cudrv::location_kind>(9), 0}});
  }));
  CHECK(batch.size() == 1);

  cudrv::batch_copy_3d b3;
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

TEST_CASE("driverless: the batch-copy probes throw driver_unavailable_error, adding a copy needs no driver",
          "[batch_copy][driverless]") {
  CHECK(catch_as<cudrv::driver_unavailable_error>([] { (void)cudrv::batch_copy_supported(); }));
  CHECK(catch_as<cudrv::driver_unavailable_error>([] { (void)cudrv::batch_copy_3d_supported(); }));
  std::vector<int> a(4), b(4);
  cudrv::batch_copy batch;
  batch.add(a, b);  // checks alone: no driver needed
  CHECK(batch.size() == 1);
}
