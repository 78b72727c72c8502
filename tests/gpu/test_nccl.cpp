// GPU tier: <cudrv/nccl.hpp> with one-rank communicators on device 0 (ncclCommInitAll, and a unique id
// with ncclCommInitRankConfig): every collective, in place and out of place, for float, double, int32,
// __half and __nv_bfloat16, against host-computed results with poisoned outputs; groups with send and
// recv to self; split; async_error; abort; registration.
//
// NCCL 2.28's additions on one rank (the checks of tests/multigpu/collectives_nccl228.hpp on a one-rank
// communicator, where all_to_all, gather and scatter degenerate to copies): the collectives and their
// refusals before NCCL; premul_sum (host and device scalars, the wrong communicator refused); nccl::buffer
// (allocation, move, release and adoption); symmetric windows (a misaligned one refused);
// init_rank_scalable; wait_ready with a bound; the new calls on a non-blocking communicator;
// group::simulate_end's bookkeeping; revoke and shrink's refusals.
//
// NVLink SHARP multicast must stay off on the GPU machines: nccl_setup() sets NCCL_NVLS_ENABLE=0 in
// this process before the first NCCL call, unless the variable is already set.
#include <catch2/catch.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudrv/nccl.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "multigpu/collectives_nccl228.hpp"
#include "support/catch_support.hpp"
#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;
namespace nccl = cudrv::nccl;

namespace {

// Whether the NCCL cases can run; prints the skip line (matched by ctest's skip expression) if not.
bool nccl_setup() {
  ::setenv("NCCL_NVLS_ENABLE", "0", 0);  // before the first NCCL call; keeps a value already set
  if (!cudrv::test::gpu_available()) {
    std::cout << "SKIPPED: no CUDA device (" << cudrv::test::gpu_unavailable_reason() << ")" << std::endl;
    return false;
  }
  if (!nccl::available()) {
    std::cout << "SKIPPED: no CUDA device usable with NCCL (" << nccl::unavailable_reason() << ")" << std::endl;
    return false;
  }
  return true;
}

#define CUDRV_REQUIRE_NCCL() \
  do {                       \
    if (!nccl_setup()) {     \
      return;                \
    }                        \
  } while (0)

nccl::communicator one_rank(const cudrv::device& dev) {
  std::vector<nccl::communicator> comms = nccl::communicator::init_all(std::vector{dev});
  REQUIRE(comms.size() == 1);
  return std::move(comms[0]);
}

template <class T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

template <class T>
double to_double(T v) {
  if constexpr (std::is_same_v<T, __half>) {
    return static_cast<double>(__half2float(v));
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return static_cast<double>(__bfloat162float(v));
  } else {
    return static_cast<double>(v);
  }
}

// Small integers, exact in every type.
template <class T>
std::vector<T> pattern(std::size_t n, int salt) {
  std::vector<T> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = from_double<T>(static_cast<double>(static_cast<int>((i * 7 + static_cast<std::size_t>(salt)) % 61) - 20));
  }
  return out;
}

constexpr double poison = 99.0;

template <class T>
cudrv::device_buffer<T> upload(const cudrv::device& dev, const std::vector<T>& host, cudrv::stream_ref s) {
  cudrv::device_buffer<T> buf(dev, host.size());
  cudrv::copy(buf, host, s);
  return buf;
}

template <class T>
cudrv::device_buffer<T> poisoned(const cudrv::device& dev, std::size_t n, cudrv::stream_ref s) {
  return upload(dev, std::vector<T>(n, from_double<T>(poison)), s);
}

template <class T>
std::vector<double> download(const cudrv::device_buffer<T>& buf, cudrv::stream_ref s) {
  std::vector<T> host(buf.size());
  cudrv::copy(host, buf, s);
  s.synchronize();
  std::vector<double> out(host.size());
  for (std::size_t i = 0; i < host.size(); ++i) {
    out[i] = to_double(host[i]);
  }
  return out;
}

template <class T>
std::vector<double> as_double(const std::vector<T>& v) {
  std::vector<double> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    out[i] = to_double(v[i]);
  }
  return out;
}

CUcontext current_context() {
  auto get = reinterpret_cast<PFN_cuCtxGetCurrent_v4000>(cudrv::driver::get_entry_point("cuCtxGetCurrent", 4000));
  CUcontext ctx = nullptr;
  REQUIRE(get(&ctx) == CUDA_SUCCESS);
  return ctx;
}

}  // namespace

TEMPLATE_TEST_CASE("nccl: every collective on a one-rank communicator, in place and out of place", "[gpu][nccl]", float,
                   double, std::int32_t, __half, __nv_bfloat16) {
  CUDRV_REQUIRE_NCCL();
  using T = TestType;
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  {
    nccl::communicator comm = one_rank(dev);
    REQUIRE(comm.rank() == 0);
    REQUIRE(comm.size() == 1);
    CHECK(comm.device() == dev);
    cudrv::stream s(dev);
    constexpr std::size_t n = 4099;  // not a multiple of anything NCCL likes
    const std::vector<T> src = pattern<T>(n, 3);
    const std::vector<double> expected = as_double(src);
    auto send = upload(dev, src, s);

    SECTION("all_reduce") {
      for (auto op : {nccl::reduction::sum, nccl::reduction::max, nccl::reduction::min, nccl::reduction::prod}) {
        auto recv = poisoned<T>(dev, n, s);
        comm.all_reduce(send, recv, op, s);
        CHECK(download(recv, s) == expected);
      }
      auto inout = upload(dev, src, s);
      comm.all_reduce(inout, nccl::reduction::sum, s);
      CHECK(download(inout, s) == expected);
      CHECK(download(send, s) == expected);  // the source is left alone
    }
    SECTION("broadcast") {
      auto recv = poisoned<T>(dev, n, s);
      comm.broadcast(send, recv, 0, s);
      CHECK(download(recv, s) == expected);
      auto inout = upload(dev, src, s);
      comm.broadcast(inout, 0, s);
      CHECK(download(inout, s) == expected);
    }
    SECTION("reduce") {
      auto recv = poisoned<T>(dev, n, s);
      comm.reduce(send, recv, nccl::reduction::sum, 0, s);
      CHECK(download(recv, s) == expected);
      auto inout = upload(dev, src, s);
      comm.reduce(inout, nccl::reduction::max, 0, s);
      CHECK(download(inout, s) == expected);
    }
    SECTION("all_gather") {
      auto recv = poisoned<T>(dev, n, s);
      comm.all_gather(send, recv, s);
      CHECK(download(recv, s) == expected);
      auto inout = upload(dev, src, s);
      comm.all_gather(inout, s);
      CHECK(download(inout, s) == expected);
    }
    SECTION("reduce_scatter") {
      auto recv = poisoned<T>(dev, n, s);
      comm.reduce_scatter(send, recv, nccl::reduction::sum, s);
      CHECK(download(recv, s) == expected);
      auto inout = upload(dev, src, s);
      comm.reduce_scatter(inout, nccl::reduction::sum, s);
      CHECK(download(inout, s) == expected);
    }
    SECTION("subspans: part of a buffer, the rest stays poisoned") {
      auto recv = poisoned<T>(dev, n, s);
      cudrv::device_span<const T> in = send;
      comm.all_reduce(in.subspan(0, 100), recv.view().subspan(200, 100), nccl::reduction::sum, s);
      const std::vector<double> got = download(recv, s);
      for (std::size_t i = 0; i < n; ++i) {
        const double want = (i >= 200 && i < 300) ? expected[i - 200] : poison;
        if (got[i] != want) {
          FAIL("element " << i << ": " << got[i] << ", expected " << want);
        }
      }
    }
    SECTION("send and recv to self in a group") {
      auto recv = poisoned<T>(dev, n, s);
      {
        nccl::group g;
        CHECK(g.is_open());
        comm.send(send, 0, s);
        comm.recv(recv, 0, s);
        g.end();
        CHECK_FALSE(g.is_open());
        CHECK_THROWS_AS(g.end(), cudrv::invalid_argument_error);
      }
      CHECK(download(recv, s) == expected);
    }
    s.synchronize();
    CHECK(comm.async_error() == nccl::result::success);
  }
  CHECK(errors.count() == 0);
}

TEST_CASE("nccl: avg and integer reductions", "[gpu][nccl]") {
  CUDRV_REQUIRE_NCCL();
  const cudrv::device dev(0);
  nccl::communicator comm = one_rank(dev);
  cudrv::stream s(dev);
  const std::vector<float> src = pattern<float>(1000, 1);
  auto buf = upload(dev, src, s);
  comm.all_reduce(buf, nccl::reduction::avg, s);
  CHECK(download(buf, s) == as_double(src));
  const std::vector<std::int64_t> big{std::int64_t{1} << 40, -(std::int64_t{1} << 41), 7};
  auto ibuf = upload(dev, big, s);
  comm.all_reduce(ibuf, nccl::reduction::sum, s);
  CHECK(download(ibuf, s) == as_double(big));
}

TEST_CASE("nccl: a communicator from a unique id, blocking and not, leaves the current context alone", "[gpu][nccl]") {
  CUDRV_REQUIRE_NCCL();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  const CUcontext before = current_context();
  {
    const nccl::unique_id id = nccl::unique_id::generate();
    CHECK(id != nccl::unique_id{});
    nccl::communicator comm =
        nccl::communicator::init_rank(id, 1, 0, dev, {.cga_cluster_size = 2, .name = "cudrv-test"});
    CHECK(current_context() == before);
    CHECK(comm.rank() == 0);
    CHECK(comm.size() == 1);
    CHECK(comm.device() == dev);
    cudrv::stream s(dev);
    const std::vector<double> src = pattern<double>(512, 5);
    auto buf = upload(dev, src, s);
    comm.all_reduce(buf, nccl::reduction::sum, s);
    CHECK(current_context() == before);  // NCCL switched to the device for the call; cudrv switched back
    CHECK(download(buf, s) == src);
    CHECK(comm.async_error() == nccl::result::success);
    {
      // With the device's primary context current (the collectives' fast path) it stays current, for
      // the owner and for a view of it, in place and out of place.
      cudrv::context_guard guard(dev.primary_context());
      comm.all_reduce(buf, nccl::reduction::sum, s);
      CHECK(current_context() == dev.primary_context().native_handle());
      cudrv::device_buffer<double> out(dev, src.size());
      nccl::communicator_ref(comm).all_reduce(buf, out, nccl::reduction::sum, s);
      CHECK(current_context() == dev.primary_context().native_handle());
      CHECK(download(out, s) == src);
    }
    CHECK(current_context() == before);
  }
  {
    nccl::communicator comm =
        nccl::communicator::init_rank(nccl::unique_id::generate(), 1, 0, dev, {.blocking = false});
    comm.wait_ready();
    cudrv::stream s(dev);
    const std::vector<float> src = pattern<float>(256, 2);
    auto buf = upload(dev, src, s);
    comm.all_reduce(buf, nccl::reduction::sum, s);
    comm.wait_ready();
    CHECK(download(buf, s) == as_double(src));
    CHECK(comm.async_error() == nccl::result::success);
  }  // finalize waits for the non-blocking communicator
  CHECK(current_context() == before);
  CHECK(errors.count() == 0);
}

TEST_CASE("nccl: split keeps or leaves out a rank", "[gpu][nccl]") {
  CUDRV_REQUIRE_NCCL();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  {
    nccl::communicator comm = one_rank(dev);
    nccl::communicator sub = comm.split(7, 0);
    REQUIRE(sub);
    CHECK(sub.rank() == 0);
    CHECK(sub.size() == 1);
    CHECK(sub != comm);
    cudrv::stream s(dev);
    const std::vector<float> src = pattern<float>(300, 9);
    auto buf = upload(dev, src, s);
    sub.all_reduce(buf, nccl::reduction::sum, s);
    CHECK(download(buf, s) == as_double(src));
    nccl::communicator none = comm.split(nccl::no_color, 0);
    CHECK_FALSE(none);
    nccl::communicator configured = comm.split(1, 0, nccl::communicator_config{.max_ctas = 4});
    CHECK(configured.size() == 1);
    // Inside a group the new communicator could not be asked its rank and size: refused before NCCL.
    nccl::group g;
    try {
      (void)comm.split(3, 0);
      FAIL("split inside a group was not refused");
    } catch (const cudrv::invalid_argument_error& e) {
      CHECK_THAT(e.what(), Catch::Matchers::Contains("inside a cudrv::nccl::group"));
    }
    g.end();
    nccl::communicator after = comm.split(3, 0);  // the group is closed: splitting works again
    CHECK(after.size() == 1);
  }
  CHECK(errors.count() == 0);
}

TEST_CASE("nccl: abort on a healthy communicator empties it", "[gpu][nccl]") {
  CUDRV_REQUIRE_NCCL();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  nccl::communicator comm = one_rank(dev);
  cudrv::stream s(dev);
  auto buf = upload(dev, pattern<float>(64, 0), s);
  comm.all_reduce(buf, nccl::reduction::sum, s);
  s.synchronize();
  comm.abort();
  CHECK_FALSE(comm);
  CHECK_THROWS_AS(comm.all_reduce(buf, nccl::reduction::sum, s), cudrv::invalid_argument_error);
  CHECK_THROWS_AS(comm.abort(), cudrv::invalid_argument_error);
  comm = one_rank(dev);  // an aborted owner can take a new communicator
  CHECK(comm.size() == 1);
  comm.reset();
  CHECK(errors.count() == 0);
}

TEST_CASE("nccl: a group left by an exception is ended, so later calls run", "[gpu][nccl]") {
  CUDRV_REQUIRE_NCCL();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  nccl::communicator comm = one_rank(dev);
  cudrv::stream s(dev);
  const std::vector<float> src = pattern<float>(128, 4);
  auto send = upload(dev, src, s);
  auto recv = poisoned<float>(dev, 128, s);
  CHECK_THROWS_AS(
      [&] {
        nccl::group g;
        comm.send(send, 0, s);
        comm.recv(recv, 0, s);
        comm.send(send, 3, s);  // no rank 3: refused before NCCL, and the group is ended on the way out
      }(),
      cudrv::invalid_argument_error);
  CHECK(download(recv, s) == as_double(src));  // the calls made in the group were launched
  auto after = poisoned<float>(dev, 128, s);
  comm.all_reduce(send, after, nccl::reduction::sum, s);  // outside any group: runs now
  CHECK(download(after, s) == as_double(src));
  CHECK(errors.count() == 0);
}

TEST_CASE("nccl: user buffers can be registered and deregistered", "[gpu][nccl]") {
  CUDRV_REQUIRE_NCCL();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  {
    nccl::communicator comm = one_rank(dev);
    cudrv::stream s(dev);
    const std::vector<float> src = pattern<float>(1 << 16, 8);
    auto buf = upload(dev, src, s);
    try {
      nccl::registration reg(comm, buf);
      nccl::registration moved = std::move(reg);
      CHECK_FALSE(reg);
      comm.all_reduce(buf, nccl::reduction::sum, s);
      CHECK(download(buf, s) == as_double(src));
    } catch (const cudrv::not_supported_error& e) {
      std::cout << "NCCL has no buffer registration: " << e.what() << std::endl;
    }
  }
  CHECK(errors.count() == 0);
}

TEST_CASE("nccl: NCCL's own refusals are nccl_errors with NCCL's last error", "[gpu][nccl]") {
  CUDRV_REQUIRE_NCCL();
  const cudrv::device dev(0);
  nccl::communicator comm = one_rank(dev);
  cudrv::stream s(dev);
  auto buf = upload(dev, pattern<float>(16, 0), s);
  // A reduction operator no one created: cudrv passes it on, NCCL refuses it.
  auto e = catch_as<cudrv::nccl_error>([&] { comm.all_reduce(buf, static_cast<nccl::reduction>(100), s); });
  REQUIRE(e.has_value());
  INFO("what(): " << e->what());
  CHECK(e->source() == cudrv::error_source::nccl);
  CHECK(e->api() == "ncclAllReduce");
  CHECK(e->nccl_result() == static_cast<int>(nccl::result::invalid_argument));
  CHECK(e->name() == "ncclInvalidArgument");
  CHECK_FALSE(e->description().empty());
  CHECK_FALSE(e->last_error().empty());
  s.synchronize();
  CHECK(comm.async_error() == nccl::result::success);  // a refused call does not break the communicator
}

// --- NCCL 2.28 on one rank (issue 35) -------------------------------------------------------------------

namespace mg = cudrv::test::multigpu;

// Temporaries that would be freed while NCCL still uses them do not compile.
static_assert(!std::is_constructible_v<nccl::window, nccl::communicator_ref, nccl::buffer<float>&&>,
              "a window over a temporary nccl::buffer must not compile");
static_assert(!std::is_constructible_v<nccl::premul_sum<float>, nccl::communicator_ref, cudrv::device_buffer<float>&&>,
              "a premul_sum over a temporary device scalar must not compile");
static_assert(!std::is_copy_constructible_v<nccl::premul_sum<float>> &&
              std::is_nothrow_move_constructible_v<nccl::premul_sum<float>>);
static_assert(!std::is_copy_constructible_v<nccl::buffer<float>> &&
              std::is_nothrow_move_constructible_v<nccl::buffer<float>>);
static_assert(!std::is_copy_constructible_v<nccl::window> && std::is_nothrow_move_constructible_v<nccl::window>);
static_assert(nccl::device_range<nccl::buffer<float>> && nccl::writable_device_range<nccl::buffer<float>&>);
static_assert(!nccl::writable_device_range<const nccl::buffer<float>&>);

TEMPLATE_TEST_CASE("nccl: all_to_all, gather, scatter and all_to_all_v on a one-rank communicator", "[gpu][nccl]",
                   float, std::int32_t, nccl::half_t, nccl::bfloat16_t) {
  CUDRV_REQUIRE_NCCL();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  const std::uint64_t seed = cudrv::test::test_seed();
  {
    nccl::communicator comm = one_rank(dev);
    cudrv::stream s(dev);
    const mg::rank_slot slot{comm, dev, s};
    mg::check_new_copy_collectives<TestType>(std::span<const mg::rank_slot>(&slot, 1), seed);
    s.synchronize();
    CHECK(comm.async_error() == nccl::result::success);
  }
  CHECK(errors.count() == 0);
}

TEST_CASE("nccl: the new collectives refuse sizes, roots, overlaps and blocks before NCCL", "[gpu][nccl]") {
  CUDRV_REQUIRE_NCCL();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  {
    nccl::communicator comm = one_rank(dev);
    cudrv::stream s(dev);
    cudrv::device_buffer<float> a(dev, 64);
    cudrv::device_buffer<float> b(dev, 64);
    cudrv::device_buffer<float> c(dev, 65);
    auto refused = [](const char* what, auto&& f) { (void)cudrv::test::require_invalid_argument(what, f); };
    refused("all_to_all with a destination larger than the source", [&] { comm.all_to_all(a, c, s); });
    refused("all_to_all with a destination smaller than the source", [&] { comm.all_to_all(c, a, s); });
    refused("all_to_all of a buffer onto itself", [&] { comm.all_to_all(a, a, s); });
    refused("all_to_all between overlapping parts of one buffer",
            [&] { comm.all_to_all(c.view().subspan(0, 64), c.view().subspan(1, 64), s); });
    for (int root : {1, -1}) {
      INFO("root " << root);
      refused("gather to a root outside the communicator", [&] { comm.gather(a, b, root, s); });
      refused("in-place gather to a root outside the communicator", [&] { comm.gather(a, root, s); });
      refused("scatter from a root outside the communicator", [&] { comm.scatter(a, b, root, s); });
      refused("in-place scatter from a root outside the communicator", [&] { comm.scatter(a, root, s); });
    }
    refused("gather into a destination that is not size() times the source", [&] { comm.gather(a, c, 0, s); });
    refused("scatter of a source that is not size() times the destination", [&] { comm.scatter(c, a, 0, s); });
    const std::vector<std::size_t> one{16};
    const std::vector<std::size_t> at0{0};
    const std::vector<std::size_t> two{8, 8};
    const std::vector<std::size_t> two_at{0, 8};
    refused("all_to_all_v with two send counts on one rank",
            [&] { comm.all_to_all_v(a, two, two_at, b, one, at0, s); });
    refused("all_to_all_v with two receive offsets on one rank",
            [&] { comm.all_to_all_v(a, one, at0, b, one, two_at, s); });
    const std::vector<std::size_t> at60{60};
    refused("all_to_all_v with a send block past the source's end",
            [&] { comm.all_to_all_v(a, one, at60, b, one, at0, s); });
    refused("all_to_all_v with a receive block past the destination's end",
            [&] { comm.all_to_all_v(a, one, at0, b, one, at60, s); });
    const std::vector<std::size_t> too_many{65};
    refused("all_to_all_v sending more elements than the source holds",
            [&] { comm.all_to_all_v(a, too_many, at0, c, too_many, at0, s); });
    // Nothing reached NCCL: the communicator still works.
    const std::vector<float> src = pattern<float>(64, 6);
    auto send = upload(dev, src, s);
    auto recv = poisoned<float>(dev, 64, s);
    comm.all_to_all(send, recv, s);
    CHECK(download(recv, s) == as_double(src));
    // A zero count moves nothing (on one rank the shared checks always move a block to the rank itself).
    const std::vector<std::size_t> zero{0};
    auto untouched = poisoned<float>(dev, 64, s);
    comm.all_to_all_v(send, zero, at0, untouched, zero, at0, s);
    CHECK(download(untouched, s) == std::vector<double>(64, poison));
    CHECK(comm.async_error() == nccl::result::success);
  }
  CHECK(errors.count() == 0);
}

TEMPLATE_TEST_CASE("nccl: premul_sum with host and device scalars on a one-rank communicator", "[gpu][nccl]", float,
                   double) {
  CUDRV_REQUIRE_NCCL();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  const std::uint64_t seed = cudrv::test::test_seed();
  {
    nccl::communicator comm = one_rank(dev);
    cudrv::stream s(dev);
    const mg::rank_slot slot{comm, dev, s};
    // One rank: the result is the scalar times the input.
    mg::check_premul_sum<TestType>(std::span<const mg::rank_slot>(&slot, 1), seed);
    CHECK(comm.async_error() == nccl::result::success);
  }
  CHECK(errors.count() == 0);
}

TEST_CASE("nccl: premul_sum is a move-only owner tied to its communicator", "[gpu][nccl]") {
  CUDRV_REQUIRE_NCCL();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  {
    nccl::communicator comm = one_rank(dev);
    nccl::communicator other = one_rank(dev);
    cudrv::stream s(dev);
    const std::vector<float> src = pattern<float>(300, 2);
    auto buf = upload(dev, src, s);
    auto out = poisoned<float>(dev, 300, s);

    nccl::premul_sum<float> empty;
    CHECK_FALSE(empty);
    CHECK(empty.communicator_handle() == nullptr);

    nccl::premul_sum<float> op(comm, 2.0f);
    REQUIRE(op);
    CHECK(op.communicator_handle() == comm.native_handle());
    const int handle = op.native_handle();
    CHECK(handle >= 5);  // past NCCL's built-in operators
    nccl::premul_sum<float> moved(std::move(op));
    CHECK_FALSE(op);
    CHECK(moved.native_handle() == handle);
    comm.all_reduce(buf, out, moved, s);
    std::vector<double> twice = as_double(src);
    for (double& v : twice) {
      v *= 2.0;
    }
    CHECK(download(out, s) == twice);

    // Another communicator's operator, or none, is refused before NCCL.
    auto refused = [](const char* what, auto&& f) { (void)cudrv::test::require_invalid_argument(what, f); };
    refused("all_reduce with another communicator's operator", [&] { other.all_reduce(buf, out, moved, s); });
    refused("in-place all_reduce with another communicator's operator", [&] { other.all_reduce(buf, moved, s); });
    refused("reduce with another communicator's operator", [&] { other.reduce(buf, out, moved, 0, s); });
    refused("reduce_scatter with another communicator's operator", [&] { other.reduce_scatter(buf, out, moved, s); });
    refused("all_reduce with an empty operator", [&] { comm.all_reduce(buf, out, empty, s); });
    refused("all_reduce through a view with another communicator's operator",
            [&] { nccl::communicator_ref(other).all_reduce(buf, out, moved, s); });

    nccl::premul_sum<float> assigned;
    assigned = std::move(moved);
    CHECK(assigned.native_handle() == handle);
    assigned.reset();  // ncclRedOpDestroy
    CHECK_FALSE(assigned);
    s.synchronize();
    CHECK(comm.async_error() == nccl::result::success);
    CHECK(other.async_error() == nccl::result::success);
  }
  CHECK(errors.count() == 0);
}

TEST_CASE("nccl: nccl::buffer allocates, moves, releases and adopts NCCL memory", "[gpu][nccl]") {
  CUDRV_REQUIRE_NCCL();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  const CUcontext before = current_context();
  {
    nccl::buffer<float> none;
    CHECK(none.empty());
    CHECK(none.size() == 0);
    CHECK(none.data() == 0);

    constexpr std::size_t n = 5000;
    nccl::buffer<float> mem(dev, n);
    CHECK(current_context() == before);  // the device's primary context was current during the call only
    REQUIRE(mem.data() != 0);
    CHECK(mem.size() == n);
    CHECK(mem.size_bytes() == n * sizeof(float));
    CHECK_FALSE(mem.empty());
    CHECK(mem.device() == dev);
    CHECK(mem.view().data() == mem.data());
    CHECK(mem.view().size() == n);

    nccl::communicator comm = one_rank(dev);
    cudrv::stream s(dev);
    const std::vector<float> src = pattern<float>(n, 11);
    cudrv::copy(mem.view(), src, s);
    comm.all_reduce(mem, nccl::reduction::sum, s);  // an nccl::buffer is a device_range
    nccl::buffer<float> out(dev, n);
    comm.all_reduce(mem, out, nccl::reduction::max, s);
    const mg::rank_slot slot{comm, dev, s};
    CHECK(mg::fetch<float>(slot, std::as_const(out).view()) == src);

    const CUdeviceptr address = mem.data();
    nccl::buffer<float> moved(std::move(mem));
    CHECK(mem.data() == 0);
    CHECK(mem.empty());
    CHECK(moved.data() == address);
    CHECK(moved.size() == n);

    const CUdeviceptr raw = moved.release();
    CHECK(raw == address);
    CHECK(moved.data() == 0);
    CHECK(moved.empty());
    nccl::buffer<float> adopted = nccl::buffer<float>::from_native_handle(raw, n, dev);
    CHECK(adopted.data() == raw);
    CHECK(adopted.size() == n);
    CHECK(adopted.device() == dev);
    CHECK(mg::fetch<float>(slot, std::as_const(adopted).view()) == src);  // the same memory, still holding the data

    out = std::move(adopted);  // the old memory of out is freed (ncclMemFree)
    CHECK(out.data() == raw);
    out.reset();
    CHECK(out.empty());
    CHECK(out.data() == 0);

    nccl::buffer<nccl::bfloat16_t> halves(dev, 3);  // any element type
    CHECK(halves.size_bytes() == 6);
    s.synchronize();
  }
  CHECK(current_context() == before);
  CHECK(errors.count() == 0);
}

TEST_CASE("nccl: a symmetric window over nccl::buffer on one rank and a misaligned one refused", "[gpu][nccl]") {
  CUDRV_REQUIRE_NCCL();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  const std::uint64_t seed = cudrv::test::test_seed();
  {
    nccl::communicator comm = one_rank(dev);
    cudrv::stream s(dev);
    const mg::rank_slot slot{comm, dev, s};
    const std::span<const mg::rank_slot> slots(&slot, 1);
    mg::check_window_all_reduce<std::int32_t>(slots, seed, (std::size_t{1} << 18) - 7, mg::this_rank_only{});
    mg::check_window_all_reduce<float>(slots, seed, 4099, mg::this_rank_only{});

    nccl::buffer<float> mem(dev, 4096);
    nccl::window empty;
    CHECK_FALSE(empty);
    CHECK(empty.native_handle() == nullptr);
    // A symmetric window must start at a multiple of 4096 bytes (NCCL_WIN_REQUIRED_ALIGNMENT).
    (void)cudrv::test::require_invalid_argument("a symmetric window 4 bytes into an nccl::buffer",
                                                [&] { nccl::window w(comm, mem.view().subspan(1)); });
    (void)cudrv::test::require_invalid_argument("a symmetric window 2 KiB into an nccl::buffer", [&] {
      nccl::window w(comm, mem.view().subspan(512), nccl::window_flags::collective_symmetric);
    });
    // A window over the whole (aligned) allocation, moved and deregistered by reset (where NCCL gives
    // one: see mg::windows_required).
    nccl::window w(comm, mem);
    if (w || mg::windows_required(1)) {
      REQUIRE(w);
      CHECK(w.communicator_handle() == comm.native_handle());
      nccl::window moved(std::move(w));
      CHECK_FALSE(w);
      CHECK(moved);
      moved.reset();
      CHECK_FALSE(moved);
    } else {
      WARN("NOTE: NCCL gave no window on a one-rank communicator");
    }
    CHECK(comm.async_error() == nccl::result::success);
  }
  CHECK(errors.count() == 0);
}

TEST_CASE("nccl: init_rank_scalable with one unique id on one rank", "[gpu][nccl]") {
  CUDRV_REQUIRE_NCCL();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  {
    const std::vector<nccl::unique_id> ids{nccl::unique_id::generate()};
    nccl::communicator comm = nccl::communicator::init_rank_scalable(ids, 1, 0, dev);
    CHECK(comm.rank() == 0);
    CHECK(comm.size() == 1);
    CHECK(comm.device() == dev);
    cudrv::stream s(dev);
    const std::vector<float> src = pattern<float>(777, 4);
    auto buf = upload(dev, src, s);
    comm.all_reduce(buf, nccl::reduction::sum, s);
    CHECK(download(buf, s) == as_double(src));

    auto refused = [](const char* what, auto&& f) { (void)cudrv::test::require_invalid_argument(what, f); };
    refused("init_rank_scalable without an id",
            [&] { (void)nccl::communicator::init_rank_scalable(std::span<const nccl::unique_id>(), 1, 0, dev); });
    const std::vector<nccl::unique_id> two{nccl::unique_id::generate(), nccl::unique_id::generate()};
    refused("init_rank_scalable with more ids than ranks",
            [&] { (void)nccl::communicator::init_rank_scalable(two, 1, 0, dev); });
    refused("init_rank_scalable with a rank outside the communicator",
            [&] { (void)nccl::communicator::init_rank_scalable(ids, 1, 1, dev); });
  }
  CHECK(errors.count() == 0);
}

TEST_CASE("nccl: the new calls on a non-blocking communicator and wait_ready with a bound", "[gpu][nccl]") {
  CUDRV_REQUIRE_NCCL();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  const std::uint64_t seed = cudrv::test::test_seed();
  using seconds = std::chrono::duration<double>;
  {
    // An idle blocking communicator: wait_ready returns at once, whatever the bound.
    nccl::communicator blocking = one_rank(dev);
    auto start = std::chrono::steady_clock::now();
    blocking.wait_ready(std::chrono::seconds(60));
    CHECK(seconds(std::chrono::steady_clock::now() - start).count() < 5.0);

    nccl::communicator_config config;
    config.blocking = false;
    config.timeout = std::chrono::seconds(120);
    nccl::communicator comm = nccl::communicator::init_rank(nccl::unique_id::generate(), 1, 0, dev, config);
    comm.wait_ready(std::chrono::seconds(60));
    start = std::chrono::steady_clock::now();
    comm.wait_ready(std::chrono::seconds(60));  // idle now
    CHECK(seconds(std::chrono::steady_clock::now() - start).count() < 5.0);

    cudrv::stream s(dev);
    const mg::rank_slot slot{comm, dev, s};
    const std::span<const mg::rank_slot> slots(&slot, 1);
    // mg::launch waits for the communicator (wait_ready) before each result is read.
    mg::check_new_copy_collectives<float>(slots, seed, {1031});
    mg::check_new_copy_collectives<nccl::half_t>(slots, seed, {4099});
    mg::check_premul_sum<float>(slots, seed, {1031});
    mg::check_window_all_reduce<std::int32_t>(slots, seed, 4099, mg::this_rank_only{});
    CHECK(comm.async_error() == nccl::result::success);
  }  // finalize waits (bounded) for the non-blocking communicator
  CHECK(errors.count() == 0);
}

TEST_CASE("nccl: group simulate_end closes the group", "[gpu][nccl]") {
  CUDRV_REQUIRE_NCCL();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  {
    nccl::communicator comm = one_rank(dev);
    cudrv::stream s(dev);
    const std::vector<float> src = pattern<float>(1024, 3);
    auto send = upload(dev, src, s);
    auto recv = poisoned<float>(dev, 1024, s);
    {
      nccl::group g;
      comm.all_reduce(send, recv, nccl::reduction::sum, s);
      // One rank: NCCL runs the collective at once (no group work to estimate), so the estimate is not
      // checked here (the multi-GPU suites do); the group is ended all the same.
      (void)g.simulate_end();
      CHECK_FALSE(g.is_open());
      CHECK_THROWS_AS(g.end(), cudrv::invalid_argument_error);
    }
    {
      nccl::group empty;
      (void)empty.simulate_end();
      CHECK_FALSE(empty.is_open());
    }
    // The group machinery is left clean: a collective outside any group runs now.
    auto after = poisoned<float>(dev, 1024, s);
    comm.all_reduce(send, after, nccl::reduction::sum, s);
    CHECK(download(after, s) == as_double(src));
    CHECK(comm.async_error() == nccl::result::success);
  }
  CHECK(errors.count() == 0);
}

TEST_CASE("nccl: shrink refuses to leave out the calling rank and a revoked communicator is split then destroyed",
          "[gpu][nccl]") {
  CUDRV_REQUIRE_NCCL();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  {
    nccl::communicator comm = one_rank(dev);
    cudrv::stream s(dev);
    const std::vector<int> me{0};
    (void)cudrv::test::require_invalid_argument("shrink naming the calling rank", [&] { (void)comm.shrink(me); });
    (void)cudrv::test::require_invalid_argument("shrink naming the calling rank, abort mode",
                                                [&] { (void)comm.shrink(me, nccl::shrink_mode::abort); });
    auto buf = upload(dev, pattern<float>(256, 1), s);
    comm.all_reduce(buf, nccl::reduction::sum, s);
    s.synchronize();
    CHECK_FALSE(comm.revoked());
    if (!nccl::supports(nccl::feature::revoke)) {
      std::cout << "NOTE: the loaded NCCL (" << nccl::library_path()
                << ") lacks ncclCommRevoke (NCCL 2.28.9): the revoke part is not run" << std::endl;
      return;
    }
    comm.revoke();  // waits until quiescent
    CHECK(comm.revoked());
    CHECK(comm.async_error() == nccl::result::success);  // quiescent: no longer in progress, no error
    // A revoked communicator can still be split (NCCL: management calls proceed once quiescent); the
    // child works.
    nccl::communicator child = comm.split(0, 0);
    REQUIRE(child);
    CHECK(child.size() == 1);
    const std::vector<float> src = pattern<float>(256, 5);
    auto in = upload(dev, src, s);
    auto out = poisoned<float>(dev, 256, s);
    child.all_reduce(in, out, nccl::reduction::sum, s);
    CHECK(download(out, s) == as_double(src));
    nccl::communicator moved(std::move(comm));
    CHECK(moved.revoked());  // the mark moves with the communicator
    CHECK_FALSE(comm.revoked());
  }  // the revoked communicator is destroyed without finalizing, with no error reported
  CHECK(errors.count() == 0);
}
