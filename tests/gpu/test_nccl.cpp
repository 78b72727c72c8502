// GPU tier: <cudrv/nccl.hpp> with one-rank communicators on device 0 (ncclCommInitAll, and a unique id
// with ncclCommInitRankConfig): every collective, in place and out of place, for float, double, int32,
// __half and __nv_bfloat16, against host-computed results with poisoned outputs; groups with send and
// recv to self; split; async_error; abort; registration.
//
// NVLink SHARP multicast must stay off on the GPU machines: nccl_setup() sets NCCL_NVLS_ENABLE=0 in
// this process before the first NCCL call, unless the variable is already set.
#include <catch2/catch.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudrv/nccl.hpp>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

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
