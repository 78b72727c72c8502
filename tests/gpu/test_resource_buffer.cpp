// GPU tier: cudrv::resource_buffer over every built-in memory resource (device, pinned, managed, a device
// pool, a pinned host pool where the device supports it, virtual memory), allocated synchronously and
// stream-ordered. Host data goes in by copies, the kernel vector_add writes a poisoned output buffer, and
// the result is compared with a host reference (and read directly where the memory is host-accessible);
// the buffers are freed in stream order, and the pool ends with nothing in use. With DLPack's header, the
// export of each kind of memory is imported back with the driver's check of the claimed memory.
//
// Data is random (the seed is printed on failure; CUDRV_TEST_SEED replays it).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <cudrv/virtual_memory.hpp>
#if defined(CUDRV_TEST_DLPACK)
#include <cudrv/dlpack.hpp>
#endif

#include "support/memory_support.hpp"
#include "support/test_support.hpp"

using cudrv::test::mismatch;
using cudrv::test::poison_value;
using cudrv::test::random_vector;

namespace {

cudrv::library& buffer_kernels() {
  static cudrv::library lib = cudrv::library::from_file(CUDRV_TEST_KERNELS_CUBIN);
  return lib;
}

bool supports_host_pools(const cudrv::device& dev) {
  try {
    return dev.attribute(static_cast<CUdevice_attribute>(144)) != 0;  // CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED
  } catch (const cudrv::error&) {
    return false;
  }
}

// Finite random floats (random bit patterns include NaNs and infinities).
std::vector<float> finite_vector(std::size_t n, std::uint64_t seed, float fallback) {
  std::vector<float> v = random_vector<float>(n, seed);
  for (float& x : v) {
    x = std::isfinite(x) ? x : fallback;
  }
  return v;
}

// Three buffers of n floats from mr (on s, or synchronously): a and b copied in from the host, c
// poisoned, vector_add c = a + b on s, c copied back and compared with the host's sums. c is freed with
// reset on `later`, which waits for s; a and b go on their own stream (or synchronously) when they leave.
void check_resource(cudrv::memory_resource& mr, bool ordered, cudrv::stream_ref s, cudrv::stream_ref later,
                    std::size_t n, std::uint64_t seed) {
  const std::vector<float> x = finite_vector(n, seed, 1.0f);
  const std::vector<float> y = finite_vector(n, seed + 1, 2.0f);
  std::vector<float> expected(n);
  for (std::size_t i = 0; i < n; ++i) {
    expected[i] = x[i] + y[i];
  }
  const std::size_t bytes = n * sizeof(float);
  auto make = [&] { return ordered ? cudrv::resource_buffer(mr, bytes, s) : cudrv::resource_buffer(mr, bytes); };
  cudrv::resource_buffer a = make();
  cudrv::resource_buffer b = make();
  cudrv::resource_buffer c = make();
  for (const cudrv::resource_buffer* buf : {&a, &b, &c}) {
    REQUIRE(*buf);
    CHECK(buf->size() == bytes);
    CHECK(buf->is_stream_ordered() == ordered);
    CHECK(buf->properties() == mr.properties());
    CHECK(&buf->resource() == &mr);
    CHECK(reinterpret_cast<std::uintptr_t>(buf->get()) % cudrv::memory_resource::default_alignment == 0);
  }
  // What the resource says agrees with the driver.
  const cudrv::memory_properties props = c.properties();
  const cudrv::pointer_attributes attr = cudrv::get_pointer_attributes(c.get());
  CHECK(props.host_accessible == (attr.memory_type == CU_MEMORYTYPE_HOST || attr.is_managed));
  if (!props.host_accessible) {
    CHECK(attr.device_ordinal == props.device_ordinal);
  }

  const std::vector<float> poison(n, poison_value<float>());
  cudrv::copy(a.as<float>(), x, s);
  cudrv::copy(b.as<float>(), y, s);
  cudrv::copy(c.as<float>(), poison, s);
  auto add = buffer_kernels().get_kernel<void(const float*, const float*, float*, int)>("vector_add");
  cudrv::launch(s, {.grid = static_cast<unsigned>((n + 255) / 256), .block = 256}, add, a.as<float>().get(),
                b.as<float>().get(), c.as<float>().get(), static_cast<int>(n));
  std::vector<float> back(n, poison_value<float>());
  cudrv::copy(back, std::as_const(c).as<float>(), s);
  s.synchronize();
  CHECK(mismatch(back, expected).empty());
  if (props.host_accessible) {
    const std::span<const float> direct = std::as_const(c).as_host<float>();
    CHECK(mismatch(direct.data(), expected.data(), n).empty());
  }
  // Free c in the order of `later`, after everything queued on s so far.
  later.wait(s);
  c.reset(later);
  CHECK_FALSE(c);
}

}  // namespace

TEST_CASE("resource_buffer over every built-in resource: copies in, a kernel, a checked result, stream-ordered frees",
          "[gpu][resource][resource-buffer]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");
  const std::size_t n = (std::size_t(1) << 18) + 77;  // not a multiple of the block
  {
    cudrv::stream s(dev);
    cudrv::stream later(dev);
    cudrv::memory_pool pool(dev);
    cudrv::device_memory_resource device_mr(dev);
    cudrv::pinned_memory_resource pinned_mr(dev);
    cudrv::managed_memory_resource managed_mr(dev);
    cudrv::pool_memory_resource pool_mr(pool);
    cudrv::virtual_memory_resource virtual_mr(dev);
    struct entry {
      cudrv::memory_resource* mr;
      const char* name;
    };
    std::vector<entry> resources = {{&device_mr, "device"},
                                    {&pinned_mr, "pinned"},
                                    {&managed_mr, "managed"},
                                    {&pool_mr, "device pool"},
                                    {&virtual_mr, "virtual memory"}};
    std::optional<cudrv::memory_pool> host_pool;
    std::optional<cudrv::pool_memory_resource> host_mr;
    if (supports_host_pools(dev)) {
      host_pool.emplace(cudrv::memory_location::host());
      host_mr.emplace(*host_pool, s);
      resources.push_back({&*host_mr, "pinned host pool"});
    } else {
      std::cout << "note: device 0 or its driver does not support host memory pools (CUDA 12.6+); the host pool "
                   "is not tested"
                << std::endl;
    }
    for (const entry& e : resources) {
      for (bool ordered : {false, true}) {
        INFO("resource " << e.name << (ordered ? ", stream-ordered" : ", synchronous"));
        check_resource(*e.mr, ordered, s, later, n, seed);
      }
    }
    s.synchronize();
    later.synchronize();
    dev.default_stream().synchronize();  // the pool resource's synchronous frees were queued there
    CHECK(pool.used_current() == 0);
    CHECK(virtual_mr.allocation_count() == 0);
  }
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("resource_buffer: a stream-ordered pool buffer outlives its cudrv::stream and is freed on it",
          "[gpu][resource][resource-buffer]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  cudrv::memory_pool pool(dev);
  cudrv::pool_memory_resource mr(pool);
  const std::vector<std::uint32_t> pattern(4096, 0xA5A5A5A5u);
  std::vector<std::uint32_t> back(pattern.size(), poison_value<std::uint32_t>());
  {
    std::optional<cudrv::stream> s(std::in_place, dev);
    cudrv::resource_buffer buf(mr, pattern.size() * sizeof(std::uint32_t), *s);
    cudrv::fill(buf.as<std::uint32_t>(), 0xA5A5A5A5u, *s);
    cudrv::copy(back, std::as_const(buf).as<std::uint32_t>(), *s);
    const cudrv::stream_ref view = *s;
    s.reset();  // the buffer keeps the CUstream alive until it is freed on it
    view.synchronize();
    CHECK(mismatch(back, pattern).empty());
    CHECK(pool.used_current() >= pattern.size() * sizeof(std::uint32_t));
  }  // freed on the stream, which then goes
  dev.synchronize();
  CHECK(pool.used_current() == 0);
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

#if defined(CUDRV_TEST_DLPACK)
TEST_CASE("resource_buffer: DLPack export names each kind of memory as the driver sees it",
          "[gpu][resource][resource-buffer][dlpack]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");
  cudrv::stream s(dev);
  cudrv::device_memory_resource device_mr(dev);
  cudrv::pinned_memory_resource pinned_mr(dev);
  cudrv::managed_memory_resource managed_mr(dev);
  struct entry {
    cudrv::memory_resource* mr;
    DLDeviceType type;
    cudrv::dlpack_memory kind;
  };
  const entry entries[] = {{&device_mr, kDLCUDA, cudrv::dlpack_memory::cuda},
                           {&pinned_mr, kDLCUDAHost, cudrv::dlpack_memory::cuda_host},
                           {&managed_mr, kDLCUDAManaged, cudrv::dlpack_memory::cuda_managed}};
  const std::size_t n = 1000;
  const std::vector<float> x = finite_vector(n, seed, 3.0f);
  for (const entry& e : entries) {
    INFO("device type " << static_cast<int>(e.type));
    cudrv::resource_buffer buf(*e.mr, n * sizeof(float), s);
    cudrv::copy(buf.as<float>(), x, s);
    const std::int64_t shape[] = {10, 100};
    auto tensor = cudrv::to_dlpack<float>(std::move(buf), shape);
    CHECK(tensor->dl_tensor.device.device_type == e.type);
    CHECK(tensor->dl_tensor.device.device_id == (e.type == kDLCUDA ? dev.ordinal() : 0));
    // The import checks the claimed kind against the driver (cuPointerGetAttributes).
    auto imported = cudrv::from_dlpack<const float>(std::move(tensor), {e.kind, -1, true, true});
    std::vector<float> back(n, poison_value<float>());
    cudrv::copy(back, imported.view().span(), s);
    s.synchronize();
    CHECK(mismatch(back, x).empty());
  }  // each tensor's deleter frees its buffer on s
  s.synchronize();
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}
#endif
