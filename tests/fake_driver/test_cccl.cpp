// <cudrv/cccl.hpp> with real cudrv resources and streams, against the stand-in driver of fake_cuda.cpp
// (loaded through CUDRV_LIBCUDA): CCCL-typed calls reach the driver calls of the wrapped resource
// (cuMemAllocFromPoolAsync / cuMemFreeAsync on the converted stream, cuMemAlloc, cuMemHostAlloc), and
// a moved-from stream is refused rather than converted to stream 0. Compiled only when CMake found
// CCCL's headers (CUDRV_TEST_CCCL).
#include <catch2/catch.hpp>

#if defined(CUDRV_TEST_CCCL)
#include <cudrv/cccl.hpp>
#include <cudrv/cudrv.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "fake_driver/fake_hooks.hpp"
#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;

namespace {

using cccl_fake_probe = cudrv::test::fake_probe;

std::string pointer_text(const void* p) {
  char text[32];
  std::snprintf(text, sizeof(text), "%p", p);
  return text;
}

}  // namespace

TEST_CASE("fake driver: cccl adaptor over a pool allocates and frees stream-ordered on a converted stream",
          "[fake-driver][cccl]") {
  cccl_fake_probe f;
  const cudrv::device d1(1);  // device 0 of the fake is unavailable
  cudrv::stream s(d1);
  cudrv::memory_pool pool(d1);
  cudrv::pool_memory_resource upstream(pool);
  cudrv::cccl_device_resource adaptor(upstream);
  cuda::mr::async_resource_ref<cuda::mr::device_accessible> ref = adaptor;

  const long long pool_allocations = f.counter("pool_allocations");
  const std::size_t log_start = f.log().size();
  const cudrv::cccl_stream_ref cs = s;  // both a cuda::stream_ref and a cudrv::stream_ref
  void* p = ref.allocate_async(4096, 256, cs);
  REQUIRE(p != nullptr);
  CHECK(f.counter("pool_allocations") == pool_allocations + 1);
  CHECK(f.is_live(p));
  const std::string on_s = " on " + pointer_text(s.native_handle());
  CHECK(contains(f.log().substr(log_start),
                 "alloc_from_pool " + pointer_text(p) + " pool " + pointer_text(pool.native_handle()) + on_s));
  // Freed on a stream converted back and forth: cuMemFreeAsync on the same CUstream.
  const cudrv::stream_ref back = cs;
  ref.deallocate_async(p, 4096, 256, cudrv::cccl_stream_ref(back));
  CHECK(contains(f.log().substr(log_start), "free_async " + pointer_text(p) + on_s));
  s.synchronize();
  CHECK_FALSE(f.is_live(p));

  // The cudrv resource's checks apply: an alignment beyond the pool's is refused before the driver.
  auto too_much = catch_as<cudrv::invalid_argument_error>([&] { (void)ref.allocate_async(64, 1024, cs); });
  REQUIRE(too_much);
  CHECK(contains(too_much->what(), "1024"));
  CHECK(f.counter("pool_allocations") == pool_allocations + 1);
}

TEST_CASE("fake driver: cccl adaptors over device and pinned memory resources", "[fake-driver][cccl]") {
  cccl_fake_probe f;
  const cudrv::device d1(1);
  cudrv::device_memory_resource device_mr(d1);
  cudrv::cccl_device_resource device_adaptor(device_mr);
  const long long allocations = f.counter("allocations");
  void* p = device_adaptor.allocate(1000, 256);
  CHECK(f.counter("allocations") == allocations + 1);
  CHECK(f.is_live(p));
  device_adaptor.deallocate(p, 1000, 256);
  CHECK_FALSE(f.is_live(p));

  // Device memory cannot be presented as host-accessible.
  auto refused = catch_as<cudrv::invalid_argument_error>([&] { cudrv::cccl_shared_resource r(device_mr); });
  REQUIRE(refused);
  CHECK(contains(refused->what(), "host-accessible"));

  cudrv::pinned_memory_resource pinned_mr(d1);
  cudrv::cccl_shared_resource pinned_adaptor(pinned_mr);
  cuda::mr::resource_ref<cuda::mr::host_accessible> host_ref = pinned_adaptor;
  const long long host_allocations = f.counter("host_allocations");
  auto* h = static_cast<int*>(host_ref.allocate(16 * sizeof(int), alignof(int)));
  CHECK(f.counter("host_allocations") == host_allocations + 1);
  h[15] = 42;  // host memory
  host_ref.deallocate(h, 16 * sizeof(int), alignof(int));
  CHECK(f.counter("host_frees") >= 1);

  // The default stream-ordered path of a synchronous resource, on a stream converted from CCCL's type.
  cudrv::stream s(d1);
  const long long syncs = f.counter("stream_synchronize");
  void* q = device_adaptor.allocate_async(64, cudrv::to_cccl(s));
  device_adaptor.deallocate_async(q, 64, cudrv::to_cccl(s));
  CHECK(f.counter("stream_synchronize") == syncs + 1);  // waited for s before freeing
  CHECK_FALSE(f.is_live(q));
}

TEST_CASE("fake driver: a moved-from stream does not convert to a cuda::stream_ref", "[fake-driver][cccl]") {
  cccl_fake_probe f;
  const cudrv::device d1(1);
  cudrv::stream s(d1);
  const CUstream raw = s.native_handle();
  cudrv::stream moved = std::move(s);
  const cudrv::cccl_stream_ref ok = moved;
  CHECK(ok.get() == raw);
  CHECK(cudrv::to_cccl(moved).get() == raw);
  auto e = catch_as<cudrv::invalid_argument_error>([&] {
    const cudrv::cccl_stream_ref bad = s;
    (void)bad;
  });
  REQUIRE(e);
  CHECK(contains(e->what(), "moved-from"));
  auto f2 = catch_as<cudrv::invalid_argument_error>([&] { (void)cudrv::to_cccl(s); });
  REQUIRE(f2);
  CHECK(contains(f2->what(), "cudrv::to_cccl"));
}

#endif  // CUDRV_TEST_CCCL
