// CPU tier: <cudrv/cccl.hpp> without a driver. The concepts of CCCL's cuda::mr are checked at compile
// time; stream views convert both ways (a view is a handle, no driver call); the adaptor forwards every
// call, with its arguments and stream, to a cudrv::memory_resource written here on host memory that
// counts its calls. Compiled only when CMake found CCCL's headers (CUDRV_TEST_CCCL).
#include <catch2/catch.hpp>

#if defined(CUDRV_TEST_CCCL)
#include <cudrv/cccl.hpp>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <type_traits>
#include <vector>

#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;

namespace mr = cuda::mr;

// The concepts, as CCCL code would check them.
static_assert(mr::resource<cudrv::cccl_device_resource>);
static_assert(mr::async_resource<cudrv::cccl_device_resource>);
static_assert(mr::async_resource_with<cudrv::cccl_device_resource, mr::device_accessible>);
static_assert(!mr::resource_with<cudrv::cccl_device_resource, mr::host_accessible>);
static_assert(mr::async_resource_with<cudrv::cccl_shared_resource, mr::device_accessible, mr::host_accessible>);
static_assert(mr::resource_with<cudrv::cccl_resource<mr::host_accessible>, mr::host_accessible>);
static_assert(!mr::resource_with<cudrv::cccl_resource<mr::host_accessible>, mr::device_accessible>);
static_assert(std::is_trivially_copyable_v<cudrv::cccl_shared_resource>);
// The type-erased references CCCL's APIs take are made from the adaptor, and only with its properties.
static_assert(std::is_constructible_v<mr::async_resource_ref<mr::device_accessible>, cudrv::cccl_device_resource&>);
static_assert(std::is_constructible_v<mr::resource_ref<mr::device_accessible>, cudrv::cccl_device_resource&>);
static_assert(!std::is_constructible_v<mr::resource_ref<mr::host_accessible>, cudrv::cccl_device_resource&>);
static_assert(std::is_constructible_v<mr::async_resource_ref<mr::host_accessible, mr::device_accessible>,
                                      cudrv::cccl_shared_resource&>);
// The bridge: made implicitly from either view (and from the owner), converts implicitly to both.
static_assert(std::is_convertible_v<cudrv::stream_ref, cudrv::cccl_stream_ref>);
static_assert(std::is_convertible_v<const cudrv::stream&, cudrv::cccl_stream_ref>);
static_assert(std::is_convertible_v<cuda::stream_ref, cudrv::cccl_stream_ref>);
static_assert(std::is_convertible_v<cudrv::cccl_stream_ref, cuda::stream_ref>);
static_assert(std::is_convertible_v<cudrv::cccl_stream_ref, cudrv::stream_ref>);
static_assert(std::is_trivially_copyable_v<cudrv::cccl_stream_ref>);
static_assert(!std::is_convertible_v<cudrv::event_ref, cudrv::cccl_stream_ref>);
static_assert(!std::is_convertible_v<int, cudrv::cccl_stream_ref>);

namespace {

// A cudrv resource on host memory (aligned_alloc) that records what reached it.
class counting_resource final : public cudrv::memory_resource {
 public:
  explicit counting_resource(cudrv::memory_properties props) : props_(props) {}
  int allocations = 0;
  int deallocations = 0;
  int async_allocations = 0;
  int async_deallocations = 0;
  std::size_t last_bytes = 0;
  std::size_t last_alignment = 0;
  void* last_pointer = nullptr;
  CUstream last_stream = nullptr;

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    ++allocations;
    return note(std::aligned_alloc(alignment, (bytes + alignment - 1) / alignment * alignment), bytes, alignment);
  }
  void do_deallocate(void* ptr, std::size_t bytes, std::size_t alignment) noexcept override {
    ++deallocations;
    note(ptr, bytes, alignment);
    std::free(ptr);
  }
  void* do_allocate_async(std::size_t bytes, std::size_t alignment, cudrv::stream_ref s) override {
    ++async_allocations;
    last_stream = s.native_handle();
    void* p = do_allocate(bytes, alignment);
    --allocations;
    return p;
  }
  void do_deallocate_async(void* ptr, std::size_t bytes, std::size_t alignment, cudrv::stream_ref s) noexcept override {
    ++async_deallocations;
    last_stream = s.native_handle();
    do_deallocate(ptr, bytes, alignment);
    --deallocations;
  }
  [[nodiscard]] cudrv::memory_properties do_properties() const noexcept override { return props_; }
  void* note(void* p, std::size_t bytes, std::size_t alignment) {
    last_pointer = p;
    last_bytes = bytes;
    last_alignment = alignment;
    return p;
  }
  cudrv::memory_properties props_;
};

CUstream fake_stream(std::uintptr_t value) { return reinterpret_cast<CUstream>(value); }

}  // namespace

TEST_CASE("cccl: stream views convert both ways and keep the handle", "[cccl]") {
  std::mt19937_64 rng(Catch::rngSeed());
  for (int i = 0; i < 16; ++i) {
    const CUstream raw = fake_stream((rng() | 0x1000u) & ~std::uintptr_t{0xf});  // never dereferenced
    const cudrv::stream_ref ours(raw);
    const cuda::stream_ref theirs = cudrv::to_cccl(ours);
    CHECK(theirs.get() == raw);
    const cudrv::stream_ref back = cudrv::from_cccl(theirs);
    CHECK(back.native_handle() == raw);
    CHECK(back == ours);
    // Through the bridge, both ways.
    const cudrv::cccl_stream_ref bridge = ours;
    const cuda::stream_ref as_cccl = bridge;
    const cudrv::stream_ref as_cudrv = bridge;
    CHECK(as_cccl == theirs);
    CHECK(as_cudrv == ours);
    const cudrv::cccl_stream_ref from_theirs = theirs;
    CHECK(cudrv::stream_ref(from_theirs) == ours);
  }
  // The special handles pass through unchanged.
  CHECK(cudrv::to_cccl(cudrv::stream_ref::per_thread_default()).get() == CU_STREAM_PER_THREAD);
  CHECK(cudrv::to_cccl(cudrv::stream_ref::legacy_default()).get() == CU_STREAM_LEGACY);
  const cuda::stream_ref per_thread = cudrv::cccl_stream_ref(cudrv::stream_ref::per_thread_default());
  CHECK(per_thread.get() == CU_STREAM_PER_THREAD);
}

TEST_CASE("cccl: a null cuda::stream_ref is the legacy default stream, as for a null CUstream", "[cccl]") {
  const cuda::stream_ref zero{};  // the runtime's stream 0
  REQUIRE(zero.get() == nullptr);
  const cudrv::stream_ref ours = cudrv::from_cccl(zero);
  CHECK(ours.native_handle() == CU_STREAM_LEGACY);
  CHECK(ours == cudrv::stream_ref(static_cast<CUstream>(nullptr)));
  // Back to CCCL it is named explicitly: never null.
  CHECK(cudrv::to_cccl(ours).get() == CU_STREAM_LEGACY);
  const cudrv::cccl_stream_ref bridge = zero;
  CHECK(bridge.get() == CU_STREAM_LEGACY);
  CHECK(cudrv::stream_ref(bridge).native_handle() == CU_STREAM_LEGACY);
}

TEST_CASE("cccl: the adaptor forwards every call to the cudrv resource", "[cccl]") {
  counting_resource upstream({0, true, false});
  cudrv::cccl_device_resource adaptor(upstream);
  CHECK(&adaptor.upstream_resource() == &upstream);

  void* p = adaptor.allocate(1000, 64);
  REQUIRE(p != nullptr);
  CHECK(upstream.allocations == 1);
  CHECK(upstream.last_bytes == 1000);
  CHECK(upstream.last_alignment == 64);
  CHECK(reinterpret_cast<std::uintptr_t>(p) % 64 == 0);
  adaptor.deallocate(p, 1000, 64);
  CHECK(upstream.deallocations == 1);
  CHECK(upstream.last_pointer == p);

  // Stream-ordered, through the type-erased reference CCCL code holds, on a cudrv stream converted.
  const cudrv::cccl_stream_ref s = cudrv::stream_ref(fake_stream(0x7000));
  mr::async_resource_ref<mr::device_accessible> ref = adaptor;
  void* q = ref.allocate_async(512, 128, s);
  CHECK(upstream.async_allocations == 1);
  CHECK(upstream.last_stream == s.get());
  CHECK(upstream.last_alignment == 128);
  ref.deallocate_async(q, 512, 128, cuda::stream_ref(fake_stream(0x8000)));
  CHECK(upstream.async_deallocations == 1);
  CHECK(upstream.last_pointer == q);
  CHECK(upstream.last_stream == fake_stream(0x8000));
  // A null cuda::stream_ref reaches cudrv as the legacy default stream.
  void* r = adaptor.allocate_async(16, cuda::stream_ref{});
  CHECK(upstream.last_stream == CU_STREAM_LEGACY);
  CHECK(upstream.last_alignment == cudrv::memory_resource::default_alignment);
  adaptor.deallocate_async(r, 16, cuda::stream_ref{});
  CHECK(upstream.async_deallocations == 2);
  CHECK(upstream.allocations == 1);  // nothing went through the synchronous path on the way
  CHECK(upstream.deallocations == 1);

  // The cudrv resource's argument checks are kept.
  auto odd = catch_as<cudrv::invalid_argument_error>([&] { (void)adaptor.allocate(64, 3); });
  REQUIRE(odd);
  CHECK(contains(odd->what(), "power of two"));
  CHECK(upstream.allocations == 1);
  CHECK(adaptor.allocate(0) == nullptr);
}

TEST_CASE("cccl: adaptors compare as their resources, and refuse properties the memory lacks", "[cccl]") {
  counting_resource device_only({0, true, false});
  counting_resource shared({-1, true, true});
  counting_resource host_only({-1, false, true});
  const cudrv::cccl_device_resource a(device_only);
  const cudrv::cccl_device_resource b(device_only);
  const cudrv::cccl_device_resource c(shared);  // shared memory is device-accessible too
  CHECK(a == b);
  CHECK_FALSE(a != b);
  CHECK(a != c);

  auto not_host = catch_as<cudrv::invalid_argument_error>([&] { cudrv::cccl_shared_resource r(device_only); });
  REQUIRE(not_host);
  CHECK(contains(not_host->what(), "cudrv::cccl_resource"));
  CHECK(contains(not_host->what(), "not host-accessible"));
  auto not_device = catch_as<cudrv::invalid_argument_error>([&] { cudrv::cccl_device_resource r(host_only); });
  REQUIRE(not_device);
  CHECK(contains(not_device->what(), "not device-accessible"));
  CHECK_NOTHROW(cudrv::cccl_shared_resource(shared));
  CHECK_NOTHROW(cudrv::cccl_resource<mr::host_accessible>(host_only));
  CHECK(device_only.allocations + shared.allocations + host_only.allocations == 0);
}

#endif  // CUDRV_TEST_CCCL
