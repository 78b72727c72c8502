// GPU tier: virtual memory management. Physical memory mapped into reserved ranges, written by a
// kernel compiled at run time and by copies, read back and compared with a host reference (destinations
// poisoned first); the same memory seen through two mappings and through an exported and imported
// handle; access rights queried; the growable buffer keeping its address and its data across growth,
// shrinking and growing again; the virtual memory resource. Tests that provoke driver errors on purpose
// are tagged [driver_error].
#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "support/memory_support.hpp"
#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;
using cudrv::test::MiB;
using cudrv::test::mismatch;
using cudrv::test::poison_value;

namespace {

constexpr const char* affine_source = R"(
extern "C" __global__ void affine(unsigned* x, unsigned long long n, unsigned a, unsigned b) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    x[i] = x[i] * a + b;
  }
}
)";

using affine_signature = void(unsigned*, unsigned long long, unsigned, unsigned);

const cudrv::library& affine_library(const cudrv::device& dev) {
  static const cudrv::library lib(
      cudrv::program("vmm_affine.cu", affine_source).compile(cudrv::code_kind::cubin, {.arch = dev.arch()}).code, dev);
  return lib;
}

// x[i] = x[i] * a + b on the device, over the span.
void affine(const cudrv::device& dev, cudrv::stream_ref s, cudrv::device_span<unsigned> x, unsigned a, unsigned b) {
  auto k = affine_library(dev).get_kernel<affine_signature>("affine");
  cudrv::launch(s, {.grid = 256, .block = 256}, k, x.get(), static_cast<unsigned long long>(x.size()), a, b);
}

std::vector<unsigned> affine_reference(std::vector<unsigned> x, unsigned a, unsigned b) {
  for (unsigned& v : x) {
    v = v * a + b;
  }
  return x;
}

// The span's elements, copied to the host.
std::vector<unsigned> read(cudrv::device_span<const unsigned> span, cudrv::stream_ref s) {
  std::vector<unsigned> out(span.size(), poison_value<unsigned>());
  cudrv::copy(out, span, s);
  s.synchronize();
  return out;
}

}  // namespace

/// Ends the test case with a visible skip message unless device 0 exists and supports VMM.
#define CUDRV_REQUIRE_VMM()                                                                           \
  do {                                                                                                \
    CUDRV_REQUIRE_GPU();                                                                              \
    if (!cudrv::device(0).attribute(cudrv::device_attributes::virtual_memory_management_supported)) { \
      std::cout << "SKIPPED: device 0 has no virtual memory management" << std::endl;                 \
      return;                                                                                         \
    }                                                                                                 \
  } while (0)

TEST_CASE("virtual memory: mapped physical memory is written by a kernel and read back", "[gpu][vmm]") {
  CUDRV_REQUIRE_VMM();
  const cudrv::device dev(0);
  cudrv::test::destruction_error_counter errors;
  const auto seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  const std::size_t g = cudrv::allocation_granularity(dev);
  const std::size_t gmin = cudrv::allocation_granularity(dev, cudrv::granularity::minimum);
  CHECK(gmin > 0);
  CHECK(g % gmin == 0);

  cudrv::stream s(dev);
  {
    cudrv::address_range range(4 * g);
    cudrv::physical_allocation mem(dev, 2 * g);
    cudrv::memory_mapping m(range, g, mem);  // the middle of the range
    m.set_access(dev);
    CHECK(m.access(dev) == cudrv::access_rights::read_write);
    CHECK(range.mapping_count() == 1);

    const std::size_t n = 2 * g / sizeof(unsigned);
    cudrv::device_span<unsigned> x(m.address(), n);
    cudrv::fill(x, poison_value<unsigned>(), s);
    CHECK(mismatch(read(x, s), std::vector<unsigned>(n, poison_value<unsigned>())).empty());
    const auto input = cudrv::test::random_vector<unsigned>(n, seed);
    cudrv::copy(x, input, s);
    affine(dev, s, x, 2654435761u, 12345u);
    const std::string diff = mismatch(read(x, s), affine_reference(input, 2654435761u, 12345u));
    CHECK(diff.empty());
  }
  CHECK(errors.count() == 0);
}

TEST_CASE("virtual memory: one physical allocation mapped twice shows the same bytes at both addresses", "[gpu][vmm]") {
  CUDRV_REQUIRE_VMM();
  const cudrv::device dev(0);
  cudrv::test::destruction_error_counter errors;
  const auto seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  const std::size_t g = cudrv::allocation_granularity(dev, cudrv::granularity::minimum);
  cudrv::stream s(dev);
  cudrv::address_range range(2 * g);
  cudrv::memory_mapping a(range, 0, cudrv::physical_allocation(dev, g));  // the handle goes, the memory stays
  const cudrv::physical_allocation_ref none(0, 0);
  CHECK(catch_as<cudrv::invalid_argument_error>([&] { cudrv::memory_mapping bad(range, g, none); }));
  cudrv::physical_allocation mem(dev, g);
  cudrv::memory_mapping first(cudrv::address_range_ref(range), g, mem);
  cudrv::address_range other(g);
  cudrv::memory_mapping second(other, 0, mem);
  // One access call over both mappings of `range`, one for `other`.
  range.set_access(0, 2 * g, std::array{cudrv::access_descriptor::for_device(dev)});
  second.set_access(dev);

  const std::size_t n = g / sizeof(unsigned);
  const auto input = cudrv::test::random_vector<unsigned>(n, seed);
  cudrv::fill(cudrv::device_span<unsigned>(second.address(), n), poison_value<unsigned>(), s);
  cudrv::copy(cudrv::device_span<unsigned>(first.address(), n), input, s);
  CHECK(mismatch(read(cudrv::device_span<const unsigned>(second.address(), n), s), input).empty());
  affine(dev, s, cudrv::device_span<unsigned>(second.address(), n), 3u, 7u);
  CHECK(mismatch(read(cudrv::device_span<const unsigned>(first.address(), n), s), affine_reference(input, 3u, 7u))
            .empty());
  // The first mapping (a temporary allocation) is separate memory.
  cudrv::fill(cudrv::device_span<unsigned>(a.address(), n), 42u, s);
  CHECK(mismatch(read(cudrv::device_span<const unsigned>(a.address(), n), s), std::vector<unsigned>(n, 42u)).empty());
  CHECK(errors.count() == 0);
}

TEST_CASE("virtual memory: access rights are granted per device and reported", "[gpu][vmm]") {
  CUDRV_REQUIRE_VMM();
  const cudrv::device dev(0);
  cudrv::test::destruction_error_counter errors;
  const std::size_t g = cudrv::allocation_granularity(dev, cudrv::granularity::minimum);
  cudrv::address_range range(g);
  cudrv::memory_mapping m(range, 0, cudrv::physical_allocation(dev, g));
  m.set_access(dev, cudrv::access_rights::read_only);
  CHECK(m.access(dev) == cudrv::access_rights::read_only);
  CHECK(cudrv::get_access(m.address(), cudrv::physical_location::on(dev)) == cudrv::access_rights::read_only);
  m.set_access(dev, cudrv::access_rights::read_write);
  CHECK(range.access(0, cudrv::physical_location::on(dev)) == cudrv::access_rights::read_write);

  // A peer, where there is one that can reach device 0.
  for (const cudrv::device peer : cudrv::devices()) {
    if (peer != dev && peer.can_access_peer(dev)) {
      CHECK(m.access(peer) == cudrv::access_rights::none);
      m.set_access({cudrv::access_descriptor::for_device(dev), cudrv::access_descriptor::for_device(peer)});
      CHECK(m.access(peer) == cudrv::access_rights::read_write);
      break;
    }
  }
  CHECK(errors.count() == 0);
}

TEST_CASE("virtual memory: a growable buffer keeps its address and its data as it grows, shrinks and grows again",
          "[gpu][vmm][growable]") {
  CUDRV_REQUIRE_VMM();
  const cudrv::device dev(0);
  cudrv::test::destruction_error_counter errors;
  const auto seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  const std::size_t g = cudrv::allocation_granularity(dev);
  cudrv::stream s(dev);
  {
    cudrv::growable_buffer<unsigned> buf(dev, 64 * g / sizeof(unsigned), {.chunk_bytes = 2 * g});
    const CUdeviceptr address = buf.data();
    const std::size_t per_chunk = 2 * g / sizeof(unsigned);

    // One chunk and a half: data in, transformed in place.
    const std::size_t n1 = per_chunk + per_chunk / 2;
    buf.grow_to(n1);
    CHECK(buf.chunk_count() == 2);
    const auto first = cudrv::test::random_vector<unsigned>(n1, seed);
    cudrv::copy(buf.view(), first, s);
    affine(dev, s, buf, 5u, 1u);
    std::vector<unsigned> expected = affine_reference(first, 5u, 1u);
    CHECK(mismatch(read(buf, s), expected).empty());

    // Grow to 9.25 chunks: same address, old data kept, new part writable.
    const std::size_t n2 = 9 * per_chunk + per_chunk / 4;
    buf.grow_to(n2);
    CHECK(buf.data() == address);
    CHECK(buf.chunk_count() == 10);
    CHECK(mismatch(read(cudrv::device_span<const unsigned>(buf).first(n1), s), expected).empty());
    const auto second = cudrv::test::random_vector<unsigned>(n2 - n1, seed + 1);
    cudrv::device_span<unsigned> tail = cudrv::device_span<unsigned>(buf).subspan(n1);
    cudrv::fill(tail, poison_value<unsigned>(), s);
    cudrv::copy(tail, second, s);
    affine(dev, s, buf, 7u, 3u);
    expected.insert(expected.end(), second.begin(), second.end());
    expected = affine_reference(expected, 7u, 3u);
    CHECK(mismatch(read(buf, s), expected).empty());

    // Shrink to less than a chunk: the others are released; the first chunk keeps its data.
    s.synchronize();
    const std::size_t n3 = per_chunk / 3;
    buf.shrink_to(n3);
    CHECK(buf.chunk_count() == 1);
    CHECK(buf.data() == address);
    expected.resize(n3);
    CHECK(mismatch(read(buf, s), expected).empty());

    // Grow again over the released addresses: fresh memory, writable.
    buf.grow_to(3 * per_chunk);
    CHECK(buf.chunk_count() == 3);
    cudrv::device_span<unsigned> fresh = cudrv::device_span<unsigned>(buf).subspan(n3);
    cudrv::fill(fresh, 99u, s);
    CHECK(mismatch(read(fresh, s), std::vector<unsigned>(fresh.size(), 99u)).empty());
    CHECK(mismatch(read(cudrv::device_span<const unsigned>(buf).first(n3), s), expected).empty());
    s.synchronize();
  }
  CHECK(errors.count() == 0);
}

TEST_CASE("virtual memory: the default growable buffer chunk is at least 64 MiB and a multiple of the recommended "
          "granularity",
          "[gpu][vmm][growable]") {
  CUDRV_REQUIRE_VMM();
  const cudrv::device dev(0);
  const std::size_t g = cudrv::allocation_granularity(dev);
  cudrv::growable_buffer<float> buf(dev, std::size_t{1} << 30);  // 4 GiB of addresses, nothing mapped
  CHECK(buf.chunk_bytes() >= 64 * MiB);
  CHECK(buf.chunk_bytes() % g == 0);
  CHECK(buf.chunk_bytes() < 64 * MiB + g);
  CHECK(buf.capacity() == 0);
  buf.grow_to(1);
  CHECK(buf.capacity() == buf.chunk_bytes() / sizeof(float));
}

TEST_CASE("virtual memory: the memory resource hands out mapped, accessible memory", "[gpu][vmm][memory_resource]") {
  CUDRV_REQUIRE_VMM();
  const cudrv::device dev(0);
  cudrv::test::destruction_error_counter errors;
  const auto seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  cudrv::stream s(dev);
  {
    cudrv::virtual_memory_resource vmr(dev);
    cudrv::memory_resource& mr = vmr;
    CHECK(mr.properties().device_ordinal == 0);
    const std::size_t n = 3 * MiB / sizeof(unsigned) + 17;  // not a multiple of anything
    void* p = mr.allocate(n * sizeof(unsigned));
    REQUIRE(p != nullptr);
    CHECK(reinterpret_cast<std::uintptr_t>(p) % cudrv::memory_resource::default_alignment == 0);
    cudrv::device_span<unsigned> x(static_cast<unsigned*>(p), n);
    cudrv::fill(x, poison_value<unsigned>(), s);
    const auto input = cudrv::test::random_vector<unsigned>(n, seed);
    cudrv::copy(x, input, s);
    affine(dev, s, x, 11u, 13u);
    CHECK(mismatch(read(x, s), affine_reference(input, 11u, 13u)).empty());
    CHECK(cudrv::get_access(reinterpret_cast<CUdeviceptr>(p), cudrv::physical_location::on(dev)) ==
          cudrv::access_rights::read_write);
    mr.deallocate_async(p, n * sizeof(unsigned), s);
    CHECK(vmr.allocation_count() == 0);
  }
  CHECK(errors.count() == 0);
}

TEST_CASE("virtual memory: an allocation exported to a POSIX fd and imported shows the same bytes", "[gpu][vmm][ipc]") {
  CUDRV_REQUIRE_VMM();
  const cudrv::device dev(0);
  if (!dev.attribute(cudrv::device_attributes::handle_type_posix_file_descriptor_supported)) {
    std::cout << "SKIPPED: device 0 cannot export VMM memory to a POSIX file descriptor" << std::endl;
    return;
  }
  cudrv::test::destruction_error_counter errors;
  const auto seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  const std::size_t g = cudrv::allocation_granularity(dev, cudrv::granularity::minimum);
  cudrv::stream s(dev);
  cudrv::physical_allocation mem(g, {.location = cudrv::physical_location::on(dev),
                                     .handle_types = cudrv::shareable_handle_types::posix_fd});
  CHECK((mem.properties().handle_types & cudrv::shareable_handle_types::posix_fd) ==
        cudrv::shareable_handle_types::posix_fd);
  cudrv::file_descriptor fd = mem.export_posix_fd();
  REQUIRE(fd);
  cudrv::physical_allocation imported = cudrv::physical_allocation::import_posix_fd(fd.native_handle(), g);
  cudrv::address_range r1(g), r2(g);
  cudrv::memory_mapping m1(r1, 0, mem), m2(r2, 0, imported);
  m1.set_access(dev);
  m2.set_access(dev);
  const std::size_t n = g / sizeof(unsigned);
  const auto input = cudrv::test::random_vector<unsigned>(n, seed);
  cudrv::fill(cudrv::device_span<unsigned>(m2.address(), n), poison_value<unsigned>(), s);
  cudrv::copy(cudrv::device_span<unsigned>(m1.address(), n), input, s);
  CHECK(mismatch(read(cudrv::device_span<const unsigned>(m2.address(), n), s), input).empty());
  CHECK(errors.count() == 0);
}

TEST_CASE("virtual memory: the driver's refusals become typed errors", "[gpu][vmm][driver_error]") {
  CUDRV_REQUIRE_VMM();
  const cudrv::device dev(0);
  cudrv::test::destruction_error_counter errors;
  const std::size_t g = cudrv::allocation_granularity(dev, cudrv::granularity::minimum);
  cudrv::address_range range(2 * g);
  cudrv::physical_allocation mem(dev, g);
  cudrv::memory_mapping m(range, 0, mem);
  // Mapping over mapped bytes.
  auto twice = catch_as<cudrv::error>([&] { cudrv::memory_mapping again(range, 0, mem); });
  REQUIRE(twice);
  CHECK(twice->api() == "cuMemMap");
  // Access over a span that is not mapped entirely.
  auto hole = catch_as<cudrv::error>(
      [&] { range.set_access(0, 2 * g, std::array{cudrv::access_descriptor::for_device(dev)}); });
  REQUIRE(hole);
  CHECK(hole->api() == "cuMemSetAccess");
  // Granularity, checked by cudrv.
  if (g > 4096) {
    auto odd = catch_as<cudrv::invalid_argument_error>([&] { cudrv::physical_allocation a(dev, g + 4096); });
    REQUIRE(odd);
    CHECK(contains(odd->what(), "granularity"));
  }
  // Compression and GPUDirect RDMA: refused up front where unsupported, else created.
  const cudrv::physical_allocation_properties compressed{.location = cudrv::physical_location::on(dev),
                                                         .compression = true};
  if (dev.attribute(cudrv::device_attributes::generic_compression_supported)) {
    // The attribute says the hardware can; the driver may still refuse here (virtualised or
    // confidential-computing machines): a typed refusal, reported, is not a failure of cudrv.
    try {
      cudrv::physical_allocation c(cudrv::allocation_granularity(compressed, cudrv::granularity::minimum), compressed);
      INFO("compression granted: " << c.properties().compression);
      CHECK(c.size() > 0);
    } catch (const cudrv::not_supported_error& e) {
      std::cout << "note: compressible memory reported but refused here: " << e.what() << std::endl;
    }
  } else {
    CHECK(catch_as<cudrv::not_supported_error>([&] { cudrv::physical_allocation c(g, compressed); }));
  }
  const cudrv::physical_allocation_properties rdma{.location = cudrv::physical_location::on(dev),
                                                   .gpu_direct_rdma = true};
  if (dev.attribute(cudrv::device_attributes::gpu_direct_rdma_with_cuda_vmm_supported)) {
    try {
      cudrv::physical_allocation r(g, rdma);
      CHECK(r.properties().gpu_direct_rdma);
    } catch (const cudrv::not_supported_error& e) {
      std::cout << "note: GPUDirect RDMA memory reported but refused here: " << e.what() << std::endl;
    }
  } else {
    CHECK(catch_as<cudrv::not_supported_error>([&] { cudrv::physical_allocation r(g, rdma); }));
  }
  m.reset();
  CHECK(errors.count() == 0);
}
