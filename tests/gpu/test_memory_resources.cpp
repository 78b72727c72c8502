// GPU tier: pools of every kind (pinned host, host NUMA, managed), host_accessible_pool_buffer, buffer properties
// checked against the driver's pointer attributes, graph memory and trimming, and the concrete memory
// resources (device, pinned, managed, pool) behind cudrv::memory_resource, their memory owned by
// cudrv::resource_buffer.
//
// Every test case makes device 0's primary context current for its duration. Pools that the device or
// the driver does not support (host pools need CUDA 12.6, managed pools CUDA 13, NUMA pools a NUMA
// system) end the case with a printed note. Data is random (the seed is printed on failure;
// CUDRV_TEST_SEED replays it), outputs are poisoned first and compared with a host reference.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "support/memory_support.hpp"
#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;
using cudrv::test::MiB;
using cudrv::test::mismatch;
using cudrv::test::poison_value;
using cudrv::test::random_vector;

namespace {

cudrv::library& resource_kernels() {
  static cudrv::library lib = cudrv::library::from_file(CUDRV_TEST_KERNELS_CUBIN);
  return lib;
}

// Whether the device reports an attribute as non-zero; false when the driver does not know it.
bool supports(const cudrv::device& dev, int attribute) {
  try {
    return dev.attribute(static_cast<CUdevice_attribute>(attribute)) != 0;
  } catch (const cudrv::error&) {
    return false;
  }
}

constexpr int host_memory_pools_supported = 144;  // CU_DEVICE_ATTRIBUTE_HOST_MEMORY_POOLS_SUPPORTED

// Host writes a and b, the kernel vector_add reads them and writes c, the host checks c = a + b.
// a, b and c are host-accessible memory of n floats (pool buffers); c is poisoned first.
void check_vector_add(cudrv::stream_ref s, float* a, float* b, float* c, std::size_t n, std::uint64_t seed) {
  const std::vector<float> x = random_vector<float>(n, seed);
  const std::vector<float> y = random_vector<float>(n, seed + 1);
  std::vector<float> expected(n);
  for (std::size_t i = 0; i < n; ++i) {
    // Random bit patterns include NaNs and infinities; keep finite values and compare bitwise.
    a[i] = std::isfinite(x[i]) ? x[i] : 1.0f;
    b[i] = std::isfinite(y[i]) ? y[i] : 2.0f;
    c[i] = poison_value<float>();
    expected[i] = a[i] + b[i];
  }
  auto add = resource_kernels().get_kernel<void(const float*, const float*, float*, int)>("vector_add");
  cudrv::launch(s, {.grid = static_cast<unsigned>((n + 255) / 256), .block = 256}, add, a, b, c, static_cast<int>(n));
  s.synchronize();
  CHECK(mismatch(c, expected.data(), n).empty());
}

}  // namespace

TEST_CASE("pinned host pool: host-written memory read by a kernel, a result the host reads", "[gpu][pool][resource]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  if (!supports(dev, host_memory_pools_supported)) {
    std::cout << "note: device 0 or its driver does not support host memory pools (CUDA 12.6+); not tested"
              << std::endl;
    return;
  }
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");
  constexpr std::size_t n = 100003;
  {
    cudrv::stream s(dev);
    cudrv::memory_pool pool(cudrv::memory_location::host());
    CHECK(pool.location() == cudrv::memory_location::host());
    CHECK(pool.access(dev) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);  // granted by cudrv at creation
    cudrv::host_accessible_pool_buffer<float> a(pool, s, n);
    cudrv::host_accessible_pool_buffer<float> b(pool, s, n);
    cudrv::host_accessible_pool_buffer<float> c(pool, s, n);
    CHECK(pool.used_current() >= 3 * n * sizeof(float));
    s.synchronize();  // the allocations have happened: the host may touch the memory
    check_vector_add(s, a.data(), b.data(), c.data(), n, seed);

    // What the buffer says agrees with the driver's pointer attributes.
    CHECK(c.properties() == cudrv::memory_properties{-1, true, true});
    const cudrv::pointer_attributes attr = cudrv::get_pointer_attributes(c.data());
    CHECK(attr.memory_type == CU_MEMORYTYPE_HOST);
    CHECK(attr.pool == pool.native_handle());

    // Copies to and from device memory, into poisoned destinations.
    cudrv::device_buffer<float> d(s, n);
    std::vector<float> back(n, poison_value<float>());
    cudrv::copy(d, c, s);
    cudrv::copy(back, d, s);
    s.synchronize();
    CHECK(mismatch(back.data(), c.data(), n).empty());
  }  // freed on s, then s goes
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("host NUMA pool next to the device: shareable, host-written, copied through the device",
          "[gpu][pool][numa]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  std::optional<cudrv::memory_location> near;
  try {
    near = cudrv::memory_location::nearest_host_numa(dev);
  } catch (const cudrv::not_supported_error& e) {
    std::cout << "note: " << e.what() << "; the NUMA pool is not tested" << std::endl;
    return;
  }
  if (!supports(dev, CU_DEVICE_ATTRIBUTE_HOST_NUMA_MEMORY_POOLS_SUPPORTED)) {
    std::cout << "note: device 0 does not support host NUMA pools; not tested" << std::endl;
    return;
  }
  INFO("nearest host NUMA node " << near->numa_node());
  CHECK(near->numa_node() == dev.attribute(cudrv::device_attributes::host_numa_id));
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");
  const std::vector<std::uint32_t> data = random_vector<std::uint32_t>(MiB / 4 + 7, seed);
  {
    cudrv::stream s(dev);
    const unsigned supported = dev.attribute(cudrv::device_attributes::mempool_supported_handle_types);
    const CUmemAllocationHandleType handle = (supported & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != 0
                                                 ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
                                                 : CU_MEM_HANDLE_TYPE_NONE;
    cudrv::memory_pool pool(*near, {.handle_type = handle});
    CHECK(pool.location() == *near);
    CHECK(pool.access(dev) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    cudrv::host_accessible_pool_buffer<std::uint32_t> h(pool, s, data.size());
    s.synchronize();
    std::copy(data.begin(), data.end(), h.begin());
    cudrv::device_buffer<std::uint32_t> d(s, data.size());
    cudrv::fill(d, 0xA5A5A5A5u, s);
    cudrv::copy(d, h, s);
    std::vector<std::uint32_t> back(data.size(), poison_value<std::uint32_t>());
    cudrv::copy(back, d, s);
    s.synchronize();
    CHECK(mismatch(back, data).empty());
    CHECK(h.properties() == cudrv::memory_properties{-1, true, true});
    CHECK(cudrv::get_pointer_attributes(h.data()).memory_type == CU_MEMORYTYPE_HOST);
  }
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("managed pool: memory the host writes, a kernel adds, the host reads", "[gpu][pool][managed]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  std::optional<cudrv::memory_pool> pool;
  try {
    pool.emplace(cudrv::memory_pool::managed(dev));
  } catch (const cudrv::error& e) {
    std::cout << "note: no managed pool on device 0 (" << e.what() << "); not tested" << std::endl;
    return;
  }
  CHECK(pool->allocation_type() == cudrv::memory_allocation_type::managed);
  CHECK(pool->properties() == cudrv::memory_properties{0, true, true});
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");
  constexpr std::size_t n = 65537;
  {
    cudrv::stream s(dev);
    cudrv::host_accessible_pool_buffer<float> a(*pool, s, n);
    cudrv::host_accessible_pool_buffer<float> b(*pool, s, n);
    cudrv::host_accessible_pool_buffer<float> c(*pool, s, n);
    s.synchronize();
    check_vector_add(s, a.data(), b.data(), c.data(), n, seed);
    CHECK(cudrv::get_pointer_attributes(c.data()).is_managed);
    CHECK(c.properties() == cudrv::memory_properties{0, true, true});
  }
  pool.reset();
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("buffer properties agree with the driver's pointer attributes", "[gpu][memory][properties]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  {
    cudrv::stream s(dev);
    auto device_side = [&](CUdeviceptr p, const cudrv::memory_properties& props) {
      const cudrv::pointer_attributes attr = cudrv::get_pointer_attributes(p);
      if (!attr.is_managed) {
        CHECK(props.device_ordinal == attr.device_ordinal);
      }
      CHECK(props.device_accessible);
      CHECK(props.host_accessible == (attr.memory_type == CU_MEMORYTYPE_HOST || attr.is_managed));
    };
    cudrv::device_buffer<int> sync(dev, 100);
    device_side(sync.data(), sync.properties());
    cudrv::device_buffer<int> ordered(s, 100);
    device_side(ordered.data(), ordered.properties());
    cudrv::memory_pool pool(dev);
    cudrv::device_buffer<int> pooled(pool, s, 100);
    device_side(pooled.data(), pooled.properties());
    cudrv::pitched_buffer<int> pitched(dev, 33, 7);
    device_side(static_cast<CUdeviceptr>(pitched.view().address), pitched.properties());
    cudrv::managed_buffer<int> managed(dev, 100);
    device_side(managed.device_view().data(), managed.properties());
    CHECK(managed.properties().host_accessible);

    cudrv::pinned_buffer<int> pinned(dev, 100);
    CHECK(pinned.properties() == cudrv::memory_properties{-1, true, true});
    CHECK(cudrv::get_pointer_attributes(pinned.data()).memory_type == CU_MEMORYTYPE_HOST);
    std::vector<int> host(100);
    cudrv::host_registration reg(dev, std::span<int>(host));
    CHECK(reg.properties() == cudrv::memory_properties{-1, true, true});
    CHECK(cudrv::get_pointer_attributes(host.data()).memory_type == CU_MEMORYTYPE_HOST);
    s.synchronize();
  }
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("graph memory grows when a graph allocates, is given back when freed and trimmed", "[gpu][pool][graph]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  const std::size_t bytes = 64 * MiB;
  cudrv::stream s(dev);
  s.synchronize();
  cudrv::trim_graph_memory(dev);
  cudrv::reset_graph_memory_high_watermarks(dev);
  const cudrv::graph_memory_usage before = cudrv::graph_memory(dev);
  INFO("before: used " << before.used_current << ", reserved " << before.reserved_current);

  CUdeviceptr address = 0;
  {
    cudrv::graph g;
    auto [alloc, a] = g.add_mem_alloc(dev, bytes);
    address = a;
    cudrv::graph_builder b(g, dev.primary_context(), {alloc});
    cudrv::fill(cudrv::device_span<std::uint32_t>(address, bytes / 4), 7u, b);
    cudrv::graph_exec exec = g.instantiate(dev);
    exec.launch(s);
    s.synchronize();
    std::vector<std::uint32_t> first(16, poison_value<std::uint32_t>());
    cudrv::copy(first, cudrv::device_span<const std::uint32_t>(address, 16), s);
    s.synchronize();
    CHECK(first == std::vector<std::uint32_t>(16, 7u));
  }
  const cudrv::graph_memory_usage running = cudrv::graph_memory(dev);
  INFO("after the launch: used " << running.used_current << ", reserved " << running.reserved_current);
  CHECK(running.used_current >= before.used_current + bytes);
  CHECK(running.reserved_current >= bytes);
  CHECK(running.used_high >= running.used_current);
  CHECK(cudrv::graph_memory_attribute(dev, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT) == running.used_current);

  // The allocation outlives the graph until freed. Freed, its memory stays mapped for the next graph
  // allocation (the driver, 580.159.04, still counts it as used) until a trim returns it: the use does
  // not grow, and the trim takes both the use and the reservation down.
  auto free_async =
      reinterpret_cast<PFN_cuMemFreeAsync_v11020>(cudrv::driver::get_entry_point("cuMemFreeAsync", 11020));
  REQUIRE(free_async(address, s.native_handle()) == CUDA_SUCCESS);
  s.synchronize();
  const cudrv::graph_memory_usage freed = cudrv::graph_memory(dev);
  INFO("after the free: used " << freed.used_current << ", reserved " << freed.reserved_current);
  CHECK(freed.used_current <= running.used_current);
  CHECK(freed.used_high >= bytes);  // the peak stays until reset

  cudrv::trim_graph_memory(dev);
  const cudrv::graph_memory_usage trimmed = cudrv::graph_memory(dev);
  INFO("after the trim: used " << trimmed.used_current << ", reserved " << trimmed.reserved_current);
  CHECK(trimmed.reserved_current < running.reserved_current);
  CHECK(trimmed.used_current <= before.used_current);
  cudrv::reset_graph_memory_high_watermarks(dev);
  CHECK(cudrv::graph_memory(dev).used_high < bytes);
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("memory resources: device, pinned, managed and pool memory through one interface", "[gpu][resource]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");
  const std::vector<std::uint8_t> data = cudrv::test::random_bytes(MiB + 13, seed);
  {
    cudrv::stream s(dev);
    cudrv::memory_pool pool(dev);
    cudrv::device_memory_resource device_mr(dev);
    cudrv::pinned_memory_resource pinned_mr(dev);
    cudrv::managed_memory_resource managed_mr(dev);
    cudrv::pool_memory_resource pool_mr(pool);
    struct entry {
      cudrv::memory_resource* mr;
      const char* name;
    };
    const entry resources[] = {{&device_mr, "device"},
                               {&pinned_mr, "pinned"},
                               {&managed_mr, "managed"},
                               {&pool_mr, "pool"}};
    for (const entry& e : resources) {
      INFO("resource " << e.name);
      const cudrv::memory_properties props = e.mr->properties();
      for (bool ordered : {false, true}) {
        INFO((ordered ? "stream-ordered" : "synchronous"));
        // Owned through the resource: freed with deallocate_async on s, or with deallocate.
        cudrv::resource_buffer buf =
            ordered ? cudrv::resource_buffer(*e.mr, data.size(), s) : cudrv::resource_buffer(*e.mr, data.size());
        REQUIRE(buf);
        CHECK(buf.properties() == props);
        CHECK(reinterpret_cast<std::uintptr_t>(buf.get()) % cudrv::memory_resource::default_alignment == 0);
        const cudrv::pointer_attributes attr = cudrv::get_pointer_attributes(buf.get());
        CHECK(props.host_accessible == (attr.memory_type == CU_MEMORYTYPE_HOST || attr.is_managed));
        if (!props.host_accessible) {  // device memory: the driver names the same device
          CHECK(attr.device_ordinal == props.device_ordinal);
        }
        std::vector<std::uint8_t> back(data.size(), poison_value<std::uint8_t>());
        cudrv::copy(buf.as<std::uint8_t>(), data, s);
        cudrv::copy(back, std::as_const(buf).as<std::uint8_t>(), s);
        s.synchronize();
        CHECK(mismatch(back, data).empty());
        if (props.host_accessible) {
          CHECK(mismatch(std::as_const(buf).as_host<std::uint8_t>().data(), data.data(), data.size()).empty());
        }
      }
      auto refused = catch_as<cudrv::invalid_argument_error>([&] { cudrv::resource_buffer b(*e.mr, 64, 4096); });
      REQUIRE(refused);
      CHECK(contains(refused->what(), "256"));
    }
    // A pinned host pool through the same interface, with a stream for the synchronous calls.
    if (supports(dev, host_memory_pools_supported)) {
      cudrv::memory_pool host_pool(cudrv::memory_location::host());
      cudrv::pool_memory_resource host_mr(host_pool, s);
      CHECK(host_mr.properties() == cudrv::memory_properties{-1, true, true});
      cudrv::resource_buffer h(host_mr, data.size());  // synchronous: on s, waited for
      const std::span<std::uint8_t> host = h.as_host<std::uint8_t>();
      std::copy(data.begin(), data.end(), host.begin());  // usable by the host when allocated
      cudrv::device_buffer<std::uint8_t> d(s, data.size());
      std::vector<std::uint8_t> back(data.size(), poison_value<std::uint8_t>());
      cudrv::copy(d, std::as_const(h).as<std::uint8_t>(), s);
      cudrv::copy(back, d, s);
      s.synchronize();
      CHECK(mismatch(back, data).empty());
    }
    s.synchronize();
  }
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}
