// CPU tier: <cudrv/nccl.hpp> without a GPU. The argument checks of every collective run before NCCL
// is called, against a view of a made-up handle whose rank and size are given (never dereferenced);
// [no-nccl] cases run with CUDRV_LIBNCCL naming a file that does not exist, [nccl-refusing] with it
// naming a library that is not NCCL (the fake driver), and see typed errors.
#include <catch2/catch.hpp>

#include <cudrv/nccl.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;
namespace nccl = cudrv::nccl;

namespace {

// A handle NCCL never sees: every call below is refused before NCCL would be called.
ncclComm* const fake_handle = reinterpret_cast<ncclComm*>(std::uintptr_t{0x1000});
const CUdeviceptr fake_address = 0x7f0000000000ULL;

template <class T = float>
cudrv::device_span<T> fake_span(std::size_t n, std::size_t offset = 0) {
  return cudrv::device_span<T>(fake_address + offset * 0x100000, n);
}

// Runs f, which must throw invalid_argument_error whose message names api and contains part.
template <class F>
void refused(F&& f, const std::string& api, const std::string& part) {
  auto e = catch_as<cudrv::invalid_argument_error>(std::forward<F>(f));
  REQUIRE(e.has_value());
  INFO("what(): " << e->what());
  CHECK(e->api() == api);
  CHECK(e->source() == cudrv::error_source::cudrv);
  CHECK(contains(e->what(), part));
}

}  // namespace

// --- compile-time mapping of element types -----------------------------------------------------------

// What keeps a communicator or memory past the call refuses temporaries (at compile time): a registration
// with a temporary buffer would deregister freed memory, one with a temporary communicator would call
// ncclCommDeregister on a destroyed communicator, and a view of a temporary owner dangles at once.
template <class C, class D>
concept registrable = requires(C&& c, D&& d) {
  nccl::registration(std::forward<C>(c), std::forward<D>(d));
};
static_assert(registrable<nccl::communicator&, cudrv::device_buffer<float>&>);
static_assert(registrable<const nccl::communicator&, const cudrv::device_buffer<float>&>);
static_assert(registrable<nccl::communicator_ref, cudrv::device_span<float>>);  // a view, even a temporary
static_assert(!registrable<nccl::communicator&, cudrv::device_buffer<float>>);  // a temporary buffer
static_assert(!registrable<nccl::communicator&, const cudrv::device_buffer<float>>);
static_assert(!registrable<nccl::communicator, cudrv::device_buffer<float>&>);  // a temporary communicator
static_assert(std::is_convertible_v<const nccl::communicator&, nccl::communicator_ref>);
static_assert(!std::is_convertible_v<nccl::communicator, nccl::communicator_ref>);
static_assert(!std::is_constructible_v<nccl::communicator_ref, nccl::communicator>);

static_assert(nccl::data_type_of_v<float> == nccl::data_type::float32);
static_assert(nccl::data_type_of_v<double> == nccl::data_type::float64);
static_assert(nccl::data_type_of_v<std::int8_t> == nccl::data_type::int8);
static_assert(nccl::data_type_of_v<std::uint8_t> == nccl::data_type::uint8);
static_assert(nccl::data_type_of_v<std::int32_t> == nccl::data_type::int32);
static_assert(nccl::data_type_of_v<std::uint32_t> == nccl::data_type::uint32);
static_assert(nccl::data_type_of_v<std::int64_t> == nccl::data_type::int64);
static_assert(nccl::data_type_of_v<std::uint64_t> == nccl::data_type::uint64);
static_assert(nccl::data_type_of_v<const float> == nccl::data_type::float32);
static_assert(nccl::data_type_of_v<__half> == nccl::data_type::float16);
static_assert(nccl::data_type_of_v<__nv_bfloat16> == nccl::data_type::bfloat16);
static_assert(nccl::data_type_of_v<nccl::half_t> == nccl::data_type::float16);
static_assert(nccl::data_type_of_v<nccl::bfloat16_t> == nccl::data_type::bfloat16);
static_assert(nccl::element<float> && !nccl::element<bool> && !nccl::element<void*>);
static_assert(nccl::device_range<cudrv::device_buffer<float>>);
static_assert(nccl::device_range<const cudrv::device_buffer<float>>);
static_assert(nccl::device_range<cudrv::device_span<const int>>);
static_assert(!nccl::device_range<cudrv::device_buffer<bool>>);
static_assert(!nccl::device_range<std::vector<float>>);  // host memory is not a device range
static_assert(nccl::writable_device_range<cudrv::device_buffer<float>>);
static_assert(nccl::writable_device_range<cudrv::device_span<float>>);
static_assert(!nccl::writable_device_range<const cudrv::device_buffer<float>>);
static_assert(!nccl::writable_device_range<cudrv::device_span<const float>>);
// The handle model: the owner is move-only, the view trivially copyable, neither is the other.
static_assert(!std::is_copy_constructible_v<nccl::communicator> &&
              std::is_nothrow_move_constructible_v<nccl::communicator>);
static_assert(std::is_trivially_copyable_v<nccl::communicator_ref>);
static_assert(std::is_convertible_v<const nccl::communicator&, nccl::communicator_ref>);
static_assert(!std::is_convertible_v<nccl::communicator_ref, nccl::communicator>);
static_assert(!std::is_base_of_v<nccl::communicator_ref, nccl::communicator>);
static_assert(!std::is_copy_constructible_v<nccl::group> && !std::is_move_constructible_v<nccl::group>);
static_assert(!std::is_copy_constructible_v<nccl::registration> &&
              std::is_nothrow_move_constructible_v<nccl::registration>);
static_assert(std::is_base_of_v<cudrv::error, cudrv::nccl_error>);
static_assert(std::is_base_of_v<cudrv::nccl_error, nccl::timeout_error>);

// issue 35: the owners of NCCL 2.19-2.28's objects keep addresses past the call and refuse temporaries.
template <class C, class D>
concept windowable = requires(C&& c, D&& d) {
  nccl::window(std::forward<C>(c), std::forward<D>(d));
};
static_assert(windowable<nccl::communicator&, nccl::buffer<float>&>);
static_assert(windowable<nccl::communicator&, cudrv::device_buffer<float>&>);
static_assert(windowable<nccl::communicator_ref, cudrv::device_span<float>>);
static_assert(!windowable<nccl::communicator&, nccl::buffer<float>>);  // a temporary buffer
static_assert(!windowable<nccl::communicator&, cudrv::device_buffer<float>>);
static_assert(!windowable<nccl::communicator, nccl::buffer<float>&>);  // a temporary communicator
static_assert(
    std::is_constructible_v<nccl::premul_sum<float>, nccl::communicator_ref, const cudrv::device_buffer<float>&>);
static_assert(!std::is_constructible_v<nccl::premul_sum<float>, nccl::communicator_ref, cudrv::device_buffer<float>>);
static_assert(!std::is_constructible_v<nccl::premul_sum<float>, nccl::communicator, float>);
// A premultiplied sum is for its element type only: another type's collective does not compile.
static_assert(nccl::reduction_operator_for<nccl::reduction, float>);
static_assert(nccl::reduction_operator_for<nccl::premul_sum<float>, float>);
static_assert(!nccl::reduction_operator_for<nccl::premul_sum<double>, float>);
template <class Op, class T>
concept reduces_with = requires(nccl::communicator_ref c, cudrv::device_span<T> d, const Op& op) {
  c.all_reduce(d, op, cudrv::stream_ref::legacy_default());
};
static_assert(reduces_with<nccl::premul_sum<float>, float>);
static_assert(!reduces_with<nccl::premul_sum<double>, float>);
static_assert(!reduces_with<int, float>);  // not an operator
// NCCL's memory is a device range like a device_buffer, viewed from lvalues only.
static_assert(nccl::device_range<nccl::buffer<float>> && nccl::writable_device_range<nccl::buffer<float>>);
static_assert(!nccl::writable_device_range<const nccl::buffer<float>>);
static_assert(std::is_convertible_v<nccl::buffer<float>&, cudrv::device_span<float>>);
static_assert(!std::is_convertible_v<nccl::buffer<float>, cudrv::device_span<const float>>);
static_assert(!std::is_copy_constructible_v<nccl::buffer<float>> &&
              std::is_nothrow_move_constructible_v<nccl::buffer<float>>);
static_assert(!std::is_copy_constructible_v<nccl::window> && std::is_nothrow_move_constructible_v<nccl::window>);
static_assert(!std::is_copy_constructible_v<nccl::premul_sum<float>> &&
              std::is_nothrow_move_constructible_v<nccl::premul_sum<float>>);

// A view adopting a raw handle is noexcept and calls no NCCL function; what it does not know is
// asked of NCCL where a call needs it.
static_assert(noexcept(nccl::communicator_ref::from_native_handle(fake_handle)));
static_assert(noexcept(nccl::communicator_ref::from_native_handle(fake_handle, 0, 1)));

TEST_CASE("nccl: a view of a known handle keeps its rank and size, impossible ones are asked of NCCL",
          "[nccl][no-nccl]") {
  auto comm = nccl::communicator_ref::from_native_handle(fake_handle, 1, 4);
  CHECK(comm.rank() == 1);
  CHECK(comm.size() == 4);
  CHECK(comm.native_handle() == fake_handle);
  // Figures that cannot be a communicator's are not kept: with no NCCL loaded here, asking fails
  // (the loader's error), which shows that the figure was not taken from the caller.
  for (auto [rank, size] : {std::pair{4, 4}, std::pair{-1, 4}, std::pair{0, 0}}) {
    auto unknown = nccl::communicator_ref::from_native_handle(fake_handle, rank, size);
    CHECK(unknown.native_handle() == fake_handle);
    CHECK_THROWS_AS(unknown.size(), cudrv::library_unavailable_error);
  }
  // A view of a null handle is made; every operation refuses it.
  auto null_view = nccl::communicator_ref::from_native_handle(nullptr, 0, 1);
  refused([&] { (void)null_view.rank(); }, "cudrv::nccl::communicator::rank", "empty");
  auto null_lazy = nccl::communicator_ref::from_native_handle(nullptr);
  refused([&] { (void)null_lazy.size(); }, "cudrv::nccl::communicator::size", "empty");
}

TEST_CASE("nccl: all_reduce, broadcast and reduce check sizes, emptiness and the root first", "[nccl]") {
  auto comm = nccl::communicator_ref::from_native_handle(fake_handle, 1, 4);
  constexpr auto sum = nccl::reduction::sum;
  cudrv::stream_ref s = cudrv::stream_ref::legacy_default();
  const std::string all_reduce = "cudrv::nccl::communicator::all_reduce";
  refused([&] { comm.all_reduce(fake_span(10), fake_span(9, 1), sum, s); }, all_reduce, "differ in size");
  refused([&] { comm.all_reduce(fake_span(9), fake_span(10, 1), sum, s); }, all_reduce, "9 elements");
  refused([&] { comm.all_reduce(fake_span(0), fake_span(0, 1), sum, s); }, all_reduce, "empty");
  refused([&] { comm.all_reduce(fake_span(0), sum, s); }, all_reduce, "empty");
  const std::string broadcast = "cudrv::nccl::communicator::broadcast";
  refused([&] { comm.broadcast(fake_span(8), fake_span(16, 1), 0, s); }, broadcast, "differ in size");
  refused([&] { comm.broadcast(fake_span(8), fake_span(8, 1), 4, s); }, broadcast, "root 4 is not a rank");
  refused([&] { comm.broadcast(fake_span(8), -1, s); }, broadcast, "root -1 is not a rank of this communicator of 4");
  refused([&] { comm.broadcast(fake_span(0), 0, s); }, broadcast, "empty");
  const std::string reduce = "cudrv::nccl::communicator::reduce";
  refused([&] { comm.reduce(fake_span(8), fake_span(7, 1), sum, 0, s); }, reduce, "differ in size");
  refused([&] { comm.reduce(fake_span(8), fake_span(8, 1), sum, 7, s); }, reduce, "root 7");
  refused([&] { comm.reduce(fake_span(8), sum, 4, s); }, reduce, "root 4");
}

TEST_CASE("nccl: all_gather and reduce_scatter check the rank multiple, in place and out of place", "[nccl]") {
  auto comm = nccl::communicator_ref::from_native_handle(fake_handle, 1, 4);
  cudrv::stream_ref s = cudrv::stream_ref::legacy_default();
  const std::string gather = "cudrv::nccl::communicator::all_gather";
  refused([&] { comm.all_gather(fake_span(10), fake_span(30, 1), s); }, gather, "4 (ranks) times the source");
  refused([&] { comm.all_gather(fake_span(10), fake_span(41, 1), s); }, gather, "destination of 41");
  refused([&] { comm.all_gather(fake_span(0), fake_span(40, 1), s); }, gather, "empty");
  refused([&] { comm.all_gather(fake_span(10), s); }, gather, "does not split into 4 equal parts");
  refused([&] { comm.all_gather(fake_span(0), s); }, gather, "empty");
  const std::string scatter = "cudrv::nccl::communicator::reduce_scatter";
  constexpr auto sum = nccl::reduction::sum;
  refused([&] { comm.reduce_scatter(fake_span(30), fake_span(10, 1), sum, s); }, scatter,
          "4 (ranks) times the destination");
  refused([&] { comm.reduce_scatter(fake_span(40), fake_span(0, 1), sum, s); }, scatter, "empty");
  refused([&] { comm.reduce_scatter(fake_span(6), sum, s); }, scatter, "does not split into 4 equal parts");
  // A source count overflowing nranks * count is refused too, not wrapped around.
  refused([&] { comm.all_gather(fake_span(SIZE_MAX / 2), fake_span(SIZE_MAX / 2 * 4, 1), s); }, gather,
          "times the source");
}

TEST_CASE("nccl: all_to_all, gather, scatter and the uneven all-to-all check their blocks before NCCL", "[nccl]") {
  auto comm = nccl::communicator_ref::from_native_handle(fake_handle, 1, 4);
  cudrv::stream_ref s = cudrv::stream_ref::legacy_default();
  const std::string a2a = "cudrv::nccl::communicator::all_to_all";
  refused([&] { comm.all_to_all(fake_span(12), fake_span(16, 1), s); }, a2a, "differ in size");
  refused([&] { comm.all_to_all(fake_span(10), fake_span(10, 1), s); }, a2a, "does not split into 4 equal parts");
  refused([&] { comm.all_to_all(fake_span(16), fake_span(16), s); }, a2a, "overlap");
  refused([&] { comm.all_to_all(fake_span(0), fake_span(0, 1), s); }, a2a, "empty");
  const std::string gather = "cudrv::nccl::communicator::gather";
  refused([&] { comm.gather(fake_span(4), fake_span(16, 1), 4, s); }, gather, "root 4");
  refused([&] { comm.gather(fake_span(4), fake_span(12, 1), 1, s); }, gather, "4 (ranks) times the source");
  refused([&] { comm.gather(fake_span(0), fake_span(0, 1), 0, s); }, gather, "empty");
  refused([&] { comm.gather(fake_span(10), 0, s); }, gather, "does not split into 4 equal parts");
  const std::string scatter = "cudrv::nccl::communicator::scatter";
  refused([&] { comm.scatter(fake_span(12), fake_span(4, 1), 1, s); }, scatter, "4 (ranks) times the destination");
  refused([&] { comm.scatter(fake_span(16), fake_span(0, 1), 0, s); }, scatter, "empty");
  refused([&] { comm.scatter(fake_span(16), -1, s); }, scatter, "root -1");
  const std::string a2av = "cudrv::nccl::communicator::all_to_all_v";
  const std::vector<std::size_t> ones(4, 1), offsets{0, 1, 2, 3};
  refused([&] { comm.all_to_all_v(fake_span(4), ones, offsets, fake_span(3, 1), ones, offsets, s); }, a2av,
          "receive block of rank 3 (1 elements at offset 3) lies outside the receive buffer of 3");
  refused(
      [&] {
        comm.all_to_all_v(fake_span(4), ones, std::vector<std::size_t>(4, 0), fake_span(4, 1), ones,
                          std::vector<std::size_t>(4, 0), s);
      },
      a2av, "overlap");
  refused(
      [&] {
        comm.all_to_all_v(fake_span(4), std::vector<std::size_t>(3, 1), offsets, fake_span(4, 1), ones, offsets, s);
      },
      a2av, "one entry per rank (4), not 3 and 4");
  const std::string shrink = "cudrv::nccl::communicator::shrink";
  refused([&] { (void)comm.shrink(std::vector<int>{1}); }, shrink, "this rank (1) is in the exclusion list");
  refused([&] { (void)comm.shrink(std::vector<int>{0, 0}); }, shrink, "excluded twice");
  refused([&] { (void)comm.shrink(std::vector<int>{9}); }, shrink, "excluded rank 9");
}

TEST_CASE("nccl: send and recv check the peer and the count", "[nccl]") {
  auto comm = nccl::communicator_ref::from_native_handle(fake_handle, 0, 2);
  cudrv::stream_ref s = cudrv::stream_ref::legacy_default();
  refused([&] { comm.send(fake_span(4), 2, s); }, "cudrv::nccl::communicator::send",
          "peer 2 is not a rank of this communicator of 2");
  refused([&] { comm.send(fake_span(4), -1, s); }, "cudrv::nccl::communicator::send", "peer -1");
  refused([&] { comm.send(fake_span(0), 1, s); }, "cudrv::nccl::communicator::send", "empty");
  refused([&] { comm.recv(fake_span(4), 5, s); }, "cudrv::nccl::communicator::recv", "peer 5");
  refused([&] { comm.recv(fake_span(0), 1, s); }, "cudrv::nccl::communicator::recv", "empty");
}

TEST_CASE("nccl: the explicit check functions take sizes", "[nccl]") {
  using namespace cudrv::detail;
  CHECK_NOTHROW(nccl_check_count("api", 5, 5, 8));
  refused([] { nccl_check_count("api", 6, 5, 8); }, "api", "count of 6 elements exceeds the source");
  refused([] { nccl_check_count("api", 6, 8, 5); }, "api", "exceeds the destination");
  refused([] { nccl_check_count("api", 0, 8, 5); }, "api", "empty");
  CHECK_NOTHROW(nccl_check_gather("api", 3, 12, 4));
  CHECK_NOTHROW(nccl_check_scatter("api", 12, 3, 4));
  CHECK_NOTHROW(nccl_check_in_place("api", 12, 4));
  CHECK_NOTHROW(nccl_check_rank("api", "root", 3, 4));
  CHECK_NOTHROW(nccl_check_point_to_point("api", 1, 0, 1));
  refused([] { nccl_check_in_place("api", 12, 0); }, "api", "0 equal parts");
}

TEST_CASE("nccl: an empty owner is refused by every operation, before NCCL", "[nccl]") {
  nccl::communicator comm;
  CHECK_FALSE(comm);
  CHECK(comm.native_handle() == nullptr);
  cudrv::stream_ref s = cudrv::stream_ref::legacy_default();
  refused([&] { (void)comm.rank(); }, "cudrv::nccl::communicator::rank", "empty");
  refused([&] { (void)comm.size(); }, "cudrv::nccl::communicator::size", "empty");
  refused([&] { comm.all_reduce(fake_span(4), nccl::reduction::sum, s); }, "cudrv::nccl::communicator::all_reduce",
          "empty");
  refused([&] { comm.broadcast(fake_span(4), 0, s); }, "cudrv::nccl::communicator::broadcast", "empty");
  refused([&] { comm.send(fake_span(4), 0, s); }, "cudrv::nccl::communicator::send", "empty");
  refused([&] { (void)comm.split(0, 0); }, "cudrv::nccl::communicator::split", "empty");
  refused([&] { (void)comm.async_error(); }, "cudrv::nccl::communicator::async_error", "empty");
  refused([&] { comm.abort(); }, "cudrv::nccl::communicator::abort", "empty");
  refused([&] { nccl::registration r(comm, fake_span(4)); }, "cudrv::nccl::registration", "empty");
  refused([&] { nccl::window w(comm, fake_span(4)); }, "cudrv::nccl::window", "empty");
  refused([&] { nccl::premul_sum<float> p(comm, 2.0f); }, "cudrv::nccl::premul_sum", "empty");
  refused([&] { (void)comm.shrink({}); }, "cudrv::nccl::communicator::shrink", "empty");
  refused([&] { comm.revoke(); }, "cudrv::nccl::communicator::revoke", "empty");
  refused([&] { comm.wait_ready(); }, "cudrv::nccl::communicator::wait_ready", "empty");
  refused([&] { comm.gather(fake_span(4), fake_span(4, 1), 0, s); }, "cudrv::nccl::communicator::gather", "empty");
  comm.reset();  // nothing to do
  nccl::communicator_ref view = comm;
  CHECK(view.native_handle() == nullptr);
}

TEST_CASE("nccl: creation arguments are checked before NCCL", "[nccl]") {
  const nccl::unique_id id{};
  const auto dev = cudrv::device::from_native_handle(0);
  const std::string init_rank = "cudrv::nccl::communicator::init_rank";
  refused([&] { (void)nccl::communicator::init_rank(id, 0, 0, dev); }, init_rank, "nranks 0");
  refused([&] { (void)nccl::communicator::init_rank(id, 2, 2, dev); }, init_rank, "rank 2 is not a rank");
  refused([&] { (void)nccl::communicator::init_rank(id, 2, -1, dev); }, init_rank, "rank -1");
  refused([&] { (void)nccl::communicator::init_rank(id, 1, 0, dev, {.cga_cluster_size = 9}); }, init_rank,
          "cga_cluster_size 9");
  refused([&] { (void)nccl::communicator::init_rank(id, 1, 0, dev, {.min_ctas = 4, .max_ctas = 2}); }, init_rank,
          "min_ctas 4 exceeds max_ctas 2");
  refused([&] { (void)nccl::communicator::init_rank(id, 1, 0, dev, {.cta_policy = 3}); }, init_rank, "cta_policy 3");
  refused([&] { (void)nccl::communicator::init_rank(id, 1, 0, dev, {.timeout = std::chrono::milliseconds(0)}); },
          init_rank, "timeout 0 ms is less than 1 ms");
  const std::string scalable = "cudrv::nccl::communicator::init_rank_scalable";
  refused([&] { (void)nccl::communicator::init_rank_scalable({}, 2, 0, dev); }, scalable, "0 unique ids");
  refused([&] { (void)nccl::communicator::init_rank_scalable(std::vector<nccl::unique_id>(3), 2, 0, dev); }, scalable,
          "3 unique ids");
  refused([&] { (void)nccl::communicator::init_rank_scalable(std::vector<nccl::unique_id>(1), 2, 2, dev); }, scalable,
          "rank 2");
  const std::string init_all = "cudrv::nccl::communicator::init_all";
  refused([] { (void)nccl::communicator::init_all({}); }, init_all, "no device");
  const std::vector<cudrv::device> twice{dev, cudrv::device::from_native_handle(1), dev};
  refused([&] { (void)nccl::communicator::init_all(twice); }, init_all, "device 0 is named twice");
  auto comm = nccl::communicator_ref::from_native_handle(fake_handle, 0, 2);
  refused([&] { (void)comm.split(-5, 0); }, "cudrv::nccl::communicator::split", "color -5");
  refused([&] { (void)comm.split(0, 0, nccl::communicator_config{.max_ctas = 0}); }, "cudrv::nccl::communicator::split",
          "max_ctas 0");
}

TEST_CASE("nccl: nccl_error carries the result, its name, NCCL's text and its last error", "[nccl]") {
  const cudrv::nccl_error e(5, "ncclInvalidUsage", "invalid usage", "the communicator was revoked", "ncclAllReduce",
                            "16 elements");
  const cudrv::error& base = e;
  CHECK(base.source() == cudrv::error_source::nccl);
  CHECK(e.nccl_result() == 5);
  CHECK(e.code() == 5);
  CHECK(e.name() == "ncclInvalidUsage");
  CHECK(e.description() == "invalid usage");
  CHECK(e.last_error() == "the communicator was revoked");
  CHECK(e.api() == "ncclAllReduce");
  CHECK(std::string(e.what()) ==
        "ncclAllReduce: ncclInvalidUsage (invalid usage) [16 elements; NCCL: the communicator was revoked]");
  const cudrv::nccl_error bare(2, "ncclSystemError", "unhandled system error", "", "ncclGroupEnd", "");
  CHECK(std::string(bare.what()) == "ncclGroupEnd: ncclSystemError (unhandled system error)");
}

TEST_CASE("nccl: where NCCL is installed, it is loaded at run time and reports its version", "[nccl]") {
  if (!nccl::available()) {
    std::cout << "SKIPPED: NCCL is not installed here (" << nccl::unavailable_reason() << ")" << std::endl;
    return;
  }
  CHECK(nccl::unavailable_reason().empty());
  CHECK(contains(nccl::library_path(), "libnccl"));
  CHECK(nccl::version() >= 21800);
}

TEST_CASE("nccl: without NCCL, every NCCL call throws library_unavailable_error naming the path and the variable",
          "[no-nccl]") {
  // ctest runs this with CUDRV_LIBNCCL=/nonexistent/libnccl.so.2.
  const char* env = std::getenv("CUDRV_LIBNCCL");
  if (env == nullptr || std::string(env) != "/nonexistent/libnccl.so.2") {
    std::cout << "SKIPPED: run with CUDRV_LIBNCCL=/nonexistent/libnccl.so.2 (ctest does)" << std::endl;
    return;
  }
  CHECK_FALSE(nccl::available());
  CHECK(nccl::library_path().empty());
  CHECK(contains(nccl::unavailable_reason(), "/nonexistent/libnccl.so.2"));
  for (int attempt = 0; attempt < 2; ++attempt) {  // the failure is cached, and the same
    auto e = catch_as<cudrv::library_unavailable_error>([] { (void)nccl::unique_id::generate(); });
    REQUIRE(e.has_value());
    INFO("what(): " << e->what());
    CHECK(e->source() == cudrv::error_source::nccl);
    CHECK(e->result() == CUDA_ERROR_FILE_NOT_FOUND);
    CHECK(contains(e->what(), "NCCL could not be loaded"));
    CHECK(contains(e->what(), "/nonexistent/libnccl.so.2"));
    CHECK(contains(e->what(), "CUDRV_LIBNCCL"));
  }
  CHECK_THROWS_AS(nccl::version(), cudrv::library_unavailable_error);
  CHECK_THROWS_AS(nccl::group(), cudrv::library_unavailable_error);
  const auto dev = cudrv::device::from_native_handle(0);
  CHECK_THROWS_AS(nccl::communicator::init_all(std::vector{dev}), cudrv::library_unavailable_error);
  CHECK_THROWS_AS(nccl::communicator::init_rank(nccl::unique_id{}, 1, 0, dev), cudrv::library_unavailable_error);
  // Adopting a raw handle asks NCCL nothing; its rank is asked at first use, and that fails.
  auto lazy = nccl::communicator_ref::from_native_handle(fake_handle);
  CHECK_THROWS_AS(lazy.rank(), cudrv::library_unavailable_error);
  // The argument checks still come first, so they say what is wrong with the call.
  auto comm = nccl::communicator_ref::from_native_handle(fake_handle, 0, 2);
  CHECK_THROWS_AS(comm.all_reduce(fake_span(4), fake_span(5, 1), nccl::reduction::sum,
                                  cudrv::stream_ref::legacy_default()),
                  cudrv::invalid_argument_error);
  CHECK_THROWS_AS(nccl::communicator::init_rank(nccl::unique_id{}, 1, 1, dev), cudrv::invalid_argument_error);
  // A well-formed call reaches the loader and fails there.
  CHECK_THROWS_AS(comm.all_reduce(fake_span(4), nccl::reduction::sum, cudrv::stream_ref::legacy_default()),
                  cudrv::library_unavailable_error);
  CHECK_THROWS_AS(comm.async_error(), cudrv::library_unavailable_error);
}

TEST_CASE("nccl: a library that is not NCCL is refused, naming what it lacks", "[nccl-refusing]") {
  // ctest runs this with CUDRV_LIBNCCL naming the fake driver, a library without any NCCL function.
  const char* env = std::getenv("CUDRV_LIBNCCL");
  if (env == nullptr || !contains(env, "fake_cuda")) {
    std::cout << "SKIPPED: run with CUDRV_LIBNCCL naming a library that is not NCCL (ctest does)" << std::endl;
    return;
  }
  CHECK_FALSE(nccl::available());
  auto e = catch_as<cudrv::library_unavailable_error>([] { (void)nccl::version(); });
  REQUIRE(e.has_value());
  INFO("what(): " << e->what());
  CHECK(e->source() == cudrv::error_source::nccl);
  CHECK(e->result() == CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND);
  CHECK(e->api() == "dlsym");
  CHECK(contains(e->what(), "is not a usable NCCL"));
  CHECK(contains(e->what(), "ncclGetVersion"));
  CHECK(contains(e->what(), "ncclCommInitRankConfig"));
  CHECK(contains(e->what(), "CUDRV_LIBNCCL"));
  CHECK_THROWS_AS(nccl::group(), cudrv::library_unavailable_error);
}
