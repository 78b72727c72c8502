// Virtual memory management against the stand-in driver (fake_cuda.cpp, loaded through CUDRV_LIBCUDA):
// argument checks that name the granularity before the driver is called, the lifetimes of ranges,
// allocations and mappings and the order they are destroyed in, the growable buffer's chunks, access
// calls and rollback of a growth that fails part way (failures injected into the n-th cuMemCreate,
// cuMemMap or cuMemSetAccess), the memory resource, shareable handles, and the device attributes that
// decide whether compression and GPUDirect RDMA may be requested. The fake's devices: 0 (sm_80, taken
// by another process: no context can be made on it, which VMM does not need) and 1 (sm_90).
#include <catch2/catch.hpp>

#include <cudrv/cudrv.hpp>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "fake_driver/fake_hooks.hpp"
#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;

namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

// The fake's counters, log, failure injection and VMM bookkeeping.
struct vmm_fake : cudrv::test::fake_probe {
  void (*fail_fn)(const char*, long long) = cudrv::test::fake_hook<void(const char*, long long)>("fake_cuda_vmm_fail");
  void (*granularity_fn)(std::size_t, std::size_t) =
      cudrv::test::fake_hook<void(std::size_t, std::size_t)>("fake_cuda_vmm_set_granularity");
  long long (*live_fn)(const char*) = cudrv::test::fake_hook<long long(const char*)>("fake_cuda_vmm_live");

  vmm_fake() { granularity_fn(2 * MiB, 2 * MiB); }
  long long live(const char* what) const { return live_fn(what); }
  void fail_nth(const char* api, long long n) const { fail_fn(api, n); }
  void granularity(std::size_t minimum, std::size_t recommended) const { granularity_fn(minimum, recommended); }
  // Everything the fake knows of VMM is gone.
  bool nothing_live() const {
    return live("reservations") == 0 && live("handles") == 0 && live("mappings") == 0 && live("physical") == 0;
  }
};

std::string hex(CUdeviceptr p) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%p", reinterpret_cast<void*>(p));
  return buf;
}

// The position in the log of the first line starting with `what`, after `from`.
std::size_t position(const std::string& log, const std::string& line, std::size_t from = 0) {
  return log.find(line + "\n", from);
}

}  // namespace

TEST_CASE("fake driver: physical allocations and mappings that miss the granularity are refused before the driver",
          "[fake-driver][vmm]") {
  vmm_fake f;
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(1);
  CHECK(cudrv::allocation_granularity(dev, cudrv::granularity::minimum) == 2 * MiB);
  CHECK(cudrv::allocation_granularity(dev) == 2 * MiB);

  const long long creates = f.counter("vmm_create");
  auto bad_size = catch_as<cudrv::invalid_argument_error>([&] { cudrv::physical_allocation a(dev, 3 * MiB); });
  REQUIRE(bad_size);
  CHECK(contains(bad_size->what(), "3.00 MiB"));
  CHECK(contains(bad_size->what(), "minimum allocation granularity 2.00 MiB"));
  CHECK(catch_as<cudrv::invalid_argument_error>([&] { cudrv::physical_allocation a(dev, 0); }));
  CHECK(f.counter("vmm_create") == creates);  // the driver was not asked

  cudrv::address_range range(8 * MiB);
  cudrv::physical_allocation mem(dev, 4 * MiB);
  CHECK(mem.size() == 4 * MiB);
  CHECK(mem.minimum_granularity() == 2 * MiB);
  const long long maps = f.counter("vmm_map");
  auto bad_offset = catch_as<cudrv::invalid_argument_error>([&] { cudrv::memory_mapping m(range, MiB, mem); });
  REQUIRE(bad_offset);
  CHECK(contains(bad_offset->what(), "the offset into the range 1.00 MiB"));
  CHECK(contains(bad_offset->what(), "granularity 2.00 MiB"));
  auto too_far = catch_as<cudrv::invalid_argument_error>([&] { cudrv::memory_mapping m(range, 6 * MiB, mem); });
  REQUIRE(too_far);
  CHECK(contains(too_far->what(), "do not fit in the address range"));
  auto bad_part = catch_as<cudrv::invalid_argument_error>([&] { cudrv::memory_mapping m(range, 0, mem, 0, 3 * MiB); });
  REQUIRE(bad_part);
  CHECK(contains(bad_part->what(), "the size 3.00 MiB"));
  CHECK(catch_as<cudrv::invalid_argument_error>([&] { cudrv::memory_mapping m(range, 0, mem, 2 * MiB, 4 * MiB); }));
  CHECK(f.counter("vmm_map") == maps);

  // A view of a handle made elsewhere learns the granularity from the driver.
  const cudrv::physical_allocation_ref view =
      cudrv::physical_allocation_ref::from_native_handle(mem.native_handle(), 4 * MiB);
  CHECK(view.minimum_granularity() == 2 * MiB);
  CHECK(view.properties().location == cudrv::physical_location::on(dev));
  CHECK(catch_as<cudrv::invalid_argument_error>([&] { cudrv::memory_mapping m(range, 0, view, MiB, 2 * MiB); }));

  // Bad reservations: sizes off the host page, alignments that are not powers of two.
  CHECK(catch_as<cudrv::invalid_argument_error>([] { cudrv::address_range r(1000); }));
  CHECK(catch_as<cudrv::invalid_argument_error>([] { cudrv::address_range r(0); }));
  auto bad_alignment =
      catch_as<cudrv::invalid_argument_error>([] { cudrv::address_range r(2 * MiB, {.alignment = 3 * MiB}); });
  REQUIRE(bad_alignment);
  CHECK(contains(bad_alignment->what(), "power of two"));
  CHECK(errors.count() == 0);
}

TEST_CASE("fake driver: the fixed address of a range is a hint and the address obtained is reported",
          "[fake-driver][vmm]") {
  vmm_fake f;
  cudrv::address_range first(4 * MiB, {.alignment = 2 * MiB, .fixed_address = 0x200000000000ULL});
  CHECK(first.address() == 0x200000000000ULL);  // free: honoured
  cudrv::address_range second(4 * MiB, {.fixed_address = 0x200000000000ULL});
  CHECK(second.address() != first.address());  // taken: placed elsewhere, and said so
  CHECK(second.size() == 4 * MiB);
  CHECK(second.address() % (2 * MiB) == 0);
  first.reset();
  second.reset();
  CHECK(f.nothing_live());
}

TEST_CASE("fake driver: a mapping keeps its range reserved, and unmap, release and free come in that order",
          "[fake-driver][vmm][driver_error]") {
  vmm_fake f;
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(1);
  CUdeviceptr base = 0;
  CUmemGenericAllocationHandle handle = 0;
  {
    auto range = std::make_optional<cudrv::address_range>(8 * MiB);
    base = range->address();
    cudrv::physical_allocation mem(dev, 4 * MiB);
    handle = mem.native_handle();
    cudrv::memory_mapping low(*range, 0, mem);
    cudrv::memory_mapping high(*range, 4 * MiB, mem);  // the same memory twice
    CHECK(range->mapping_count() == 2);
    CHECK(low.address() == base);
    CHECK(high.address() == base + 4 * MiB);

    // The whole range in one access call, over both mappings.
    range->set_access(0, 8 * MiB, std::array{cudrv::access_descriptor::for_device(dev)});
    CHECK(high.access(dev) == cudrv::access_rights::read_write);
    CHECK(low.access(cudrv::device(0)) == cudrv::access_rights::none);
    low.set_access({cudrv::access_descriptor::for_device(dev, cudrv::access_rights::read_only),
                    cudrv::access_descriptor::for_device(cudrv::device(0))});
    CHECK(low.access(dev) == cudrv::access_rights::read_only);
    CHECK(range->access(0, cudrv::physical_location::on(cudrv::device(0))) == cudrv::access_rights::read_write);
    CHECK(cudrv::get_access(base + 4 * MiB, cudrv::physical_location::on(dev)) == cudrv::access_rights::read_write);
    CHECK(catch_as<cudrv::invalid_argument_error>(
        [&] { range->set_access(4 * MiB, 8 * MiB, std::array{cudrv::access_descriptor::for_device(dev)}); }));

    // Mapping over mapped bytes: the driver refuses, and cudrv throws.
    CHECK(catch_as<cudrv::error>([&] { cudrv::memory_mapping again(*range, 0, mem); }));
    CHECK(range->mapping_count() == 2);

    // The range owner goes first: nothing is freed while mapped.
    range.reset();
    CHECK(f.live("reservations") == 1);
    CHECK(low.access(dev) == cudrv::access_rights::read_only);
    // Locals go in reverse order: high, low (the range is freed after it), then mem.
  }
  const std::string log = f.log();
  const std::size_t unmap_high = position(log, "vmm_unmap " + hex(base + 4 * MiB));
  const std::size_t unmap_low = position(log, "vmm_unmap " + hex(base));
  const std::size_t freed = position(log, "vmm_free " + hex(base));
  const std::size_t released = position(log, "vmm_release " + std::to_string(handle));
  REQUIRE(unmap_high != std::string::npos);
  REQUIRE(unmap_low != std::string::npos);
  REQUIRE(freed != std::string::npos);
  REQUIRE(released != std::string::npos);
  CHECK(unmap_high < unmap_low);
  CHECK(unmap_low < freed);
  CHECK(f.counter("vmm_free_while_mapped") == 0);
  CHECK(f.nothing_live());
  CHECK(errors.count() == 0);
}

TEST_CASE("fake driver: a temporary allocation may be mapped, and the memory lives until it is unmapped",
          "[fake-driver][vmm]") {
  vmm_fake f;
  const cudrv::device dev(1);
  cudrv::address_range range(4 * MiB);
  {
    cudrv::memory_mapping m(range, 0, cudrv::physical_allocation(dev, 4 * MiB));
    CHECK(f.live("handles") == 0);   // released at the end of the statement
    CHECK(f.live("physical") == 1);  // still mapped
    m.set_access(dev);
    CHECK(m.access(dev) == cudrv::access_rights::read_write);
  }
  CHECK(f.live("physical") == 0);
  range.reset();
  CHECK(f.nothing_live());
}

TEST_CASE("fake driver: moved-from, released and adopted VMM owners", "[fake-driver][vmm]") {
  vmm_fake f;
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(1);
  cudrv::address_range a(4 * MiB);
  cudrv::address_range b(std::move(a));
  CHECK_FALSE(a);
  CHECK(b);
  auto empty = catch_as<cudrv::invalid_argument_error>(
      [&] { cudrv::memory_mapping m(a, 0, cudrv::physical_allocation(dev, 2 * MiB)); });
  REQUIRE(empty);
  CHECK(contains(empty->what(), "moved-from"));
  cudrv::physical_allocation mem(dev, 2 * MiB);
  cudrv::physical_allocation moved = std::move(mem);
  CHECK_FALSE(mem);
  CHECK(catch_as<cudrv::invalid_argument_error>([&] { (void)mem.properties(); }));
  CHECK(catch_as<cudrv::invalid_argument_error>([&] { cudrv::memory_mapping m(b, 0, mem); }));

  // release(): cudrv no longer frees the range, even when its last mapping goes.
  cudrv::memory_mapping m(b, 0, moved);
  const std::size_t size = b.size();
  const CUdeviceptr raw = b.release();
  CHECK_FALSE(b);
  m.reset();
  CHECK(f.live("reservations") == 1);
  // Adopted again, it is freed by its new owner.
  cudrv::address_range adopted = cudrv::address_range::from_native_handle(raw, size);
  CHECK(adopted.address() == raw);
  adopted.reset();
  CHECK(f.live("reservations") == 0);

  // A mapping adopted from a raw cuMemMap is unmapped by its owner.
  cudrv::address_range r(2 * MiB);
  {
    cudrv::memory_mapping made(r, 0, moved);
    const CUdeviceptr at = made.release();
    CHECK(r.mapping_count() == 0);
    cudrv::memory_mapping owner = cudrv::memory_mapping::from_native_handle(at, 2 * MiB);
    CHECK(owner.size() == 2 * MiB);
  }
  CHECK(f.live("mappings") == 0);
  moved.reset();
  r.reset();
  CHECK(f.nothing_live());
  CHECK(errors.count() == 0);
}

TEST_CASE("fake driver: compression, GPUDirect RDMA and handle types are requested only where the device supports them",
          "[fake-driver][vmm]") {
  vmm_fake f;
  const cudrv::device sm80(0);
  const cudrv::device sm90(1);
  const long long creates = f.counter("vmm_create");
  auto compressed = catch_as<cudrv::not_supported_error>([&] {
    cudrv::physical_allocation a(2 * MiB, {.location = cudrv::physical_location::on(sm90), .compression = true});
  });
  REQUIRE(compressed);
  CHECK(contains(compressed->what(), "generic_compression_supported"));
  auto rdma = catch_as<cudrv::not_supported_error>([&] {
    cudrv::physical_allocation a(2 * MiB, {.location = cudrv::physical_location::on(sm80), .gpu_direct_rdma = true});
  });
  REQUIRE(rdma);
  CHECK(contains(rdma->what(), "gpu_direct_rdma_with_cuda_vmm_supported"));
  auto fabric = catch_as<cudrv::not_supported_error>([&] {
    cudrv::physical_allocation a(2 * MiB, {.location = cudrv::physical_location::on(sm90),
                                           .handle_types = cudrv::shareable_handle_types::fabric});
  });
  REQUIRE(fabric);
  CHECK(contains(fabric->what(), "handle_type_fabric_supported"));
  auto nowhere = catch_as<cudrv::invalid_argument_error>(
      [&] { cudrv::physical_allocation a(2 * MiB, {.handle_types = cudrv::shareable_handle_types::posix_fd}); });
  REQUIRE(nowhere);
  CHECK(contains(nowhere->what(), "no location named"));
  CHECK(catch_as<cudrv::invalid_argument_error>(
      [] { (void)cudrv::allocation_granularity(cudrv::physical_allocation_properties{}); }));
  CHECK(f.counter("vmm_create") == creates);

  cudrv::physical_allocation ok(2 * MiB, {.location = cudrv::physical_location::on(sm90), .gpu_direct_rdma = true});
  const cudrv::physical_allocation_properties p = ok.properties();
  CHECK(p.gpu_direct_rdma);
  CHECK_FALSE(p.compression);
  CHECK(p.location == cudrv::physical_location::on(sm90));
  CHECK(p.handle_types == cudrv::shareable_handle_types::none);
}

TEST_CASE("fake driver: a physical allocation exported to a POSIX fd is imported and mapped", "[fake-driver][vmm]") {
  vmm_fake f;
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(1);
  cudrv::physical_allocation plain(dev, 2 * MiB);
  auto refused = catch_as<cudrv::invalid_argument_error>([&] { (void)plain.export_posix_fd(); });
  REQUIRE(refused);
  CHECK(contains(refused->what(), "posix_fd"));

  cudrv::physical_allocation shared(2 * MiB, {.location = cudrv::physical_location::on(dev),
                                              .handle_types = cudrv::shareable_handle_types::posix_fd});
  cudrv::file_descriptor fd = shared.export_posix_fd();
  REQUIRE(fd);
  cudrv::physical_allocation imported = cudrv::physical_allocation::import_posix_fd(fd.native_handle(), shared.size());
  CHECK(imported.native_handle() != shared.native_handle());
  CHECK(imported.size() == 2 * MiB);
  CHECK(
      catch_as<cudrv::invalid_argument_error>([] { (void)cudrv::physical_allocation::import_posix_fd(-1, 2 * MiB); }));
  CHECK(catch_as<cudrv::invalid_argument_error>(
      [&] { (void)cudrv::physical_allocation::import_posix_fd(fd.native_handle(), 0); }));

  cudrv::address_range range(2 * MiB);
  cudrv::memory_mapping m(range, 0, imported);
  shared.reset();
  imported.reset();
  CHECK(f.live("physical") == 2);  // `plain`, and the shared memory, still mapped
  m.reset();
  CHECK(f.live("physical") == 1);
  fd.reset();
  CHECK_FALSE(fd);
  CHECK(errors.count() == 0);
}

TEST_CASE("fake driver: a growable buffer grows in place, sets access once per growth and shrinks by whole chunks",
          "[fake-driver][vmm][growable]") {
  vmm_fake f;
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(1);
  const long long retains0 = f.counter("primary_retain:0");
  const long long retains1 = f.counter("primary_retain:1");
  {
    cudrv::growable_buffer<float> buf(dev, 16 * MiB / sizeof(float),
                                      {.chunk_bytes = 4 * MiB, .peers = {cudrv::device(0)}});
    CHECK(buf.max_size() == 16 * MiB / sizeof(float));
    CHECK(buf.chunk_bytes() == 4 * MiB);
    CHECK(buf.capacity() == 0);
    CHECK(buf.empty());
    CHECK(buf.device() == dev);
    const CUdeviceptr address = buf.data();
    CHECK(address % (4 * MiB) == 0);

    const long long access_calls = f.counter("vmm_set_access");
    buf.grow_to(1);
    CHECK(buf.size() == 1);
    CHECK(buf.chunk_count() == 1);
    CHECK(buf.capacity() == 4 * MiB / sizeof(float));
    CHECK(f.counter("vmm_set_access") == access_calls + 1);

    const std::size_t three_chunks_and_one = 3 * 4 * MiB / sizeof(float) + 1;
    buf.grow_to(three_chunks_and_one);
    CHECK(buf.data() == address);  // never moves
    CHECK(buf.chunk_count() == 4);
    CHECK(f.counter("vmm_set_access") == access_calls + 2);  // one call for the three new chunks
    CHECK(contains(f.log(), "vmm_set_access " + hex(address + 4 * MiB) + " " + std::to_string(12 * MiB) + " 2\n"));
    CHECK(cudrv::get_access(address + 12 * MiB, cudrv::physical_location::on(cudrv::device(0))) ==
          cudrv::access_rights::read_write);
    const cudrv::device_span<float> view = buf;
    CHECK(view.data() == address);
    CHECK(view.size() == three_chunks_and_one);

    buf.resize(10);  // smaller size, same capacity
    CHECK(buf.chunk_count() == 4);
    buf.reserve(4 * MiB / sizeof(float) * 4);  // already mapped
    CHECK(buf.chunk_count() == 4);
    CHECK(buf.size() == 10);
    buf.resize(buf.capacity());

    const long long unmaps = f.counter("vmm_unmap");
    const long long releases = f.counter("vmm_release");
    buf.shrink_to(4 * MiB / sizeof(float) + 1);  // two chunks hold elements
    CHECK(buf.chunk_count() == 2);
    CHECK(f.counter("vmm_unmap") == unmaps + 2);
    CHECK(f.counter("vmm_release") == releases + 2);
    CHECK(buf.data() == address);
    buf.shrink_to(0);
    CHECK(buf.chunk_count() == 0);
    buf.grow_to(buf.max_size());
    CHECK(buf.chunk_count() == 4);

    auto too_big = catch_as<cudrv::invalid_argument_error>([&] { buf.grow_to(buf.max_size() + 1); });
    REQUIRE(too_big);
    CHECK(contains(too_big->what(), "exceeds the maximum size"));
    CHECK(catch_as<cudrv::invalid_argument_error>([&] { buf.grow_to(1); }));
    CHECK(catch_as<cudrv::invalid_argument_error>([&] { buf.shrink_to(buf.max_size() + 1); }));

    cudrv::growable_buffer<float> moved = std::move(buf);
    CHECK_FALSE(buf);
    CHECK(moved.data() == address);
    CHECK(moved.chunk_count() == 4);
    CHECK(catch_as<cudrv::invalid_argument_error>([&] { buf.reserve(1); }));
  }
  CHECK(f.nothing_live());
  // Virtual memory names no context: nothing was retained or made current.
  CHECK(f.counter("primary_retain:0") == retains0);
  CHECK(f.counter("primary_retain:1") == retains1);
  CHECK(errors.count() == 0);
}

TEST_CASE("fake driver: a growable buffer that fails part way through a growth rolls it back",
          "[fake-driver][vmm][growable][driver_error]") {
  vmm_fake f;
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(1);
  cudrv::growable_buffer<int> buf(dev, 32 * MiB / sizeof(int), {.chunk_bytes = 2 * MiB});
  buf.grow_to(100);
  const CUdeviceptr address = buf.data();
  const std::size_t capacity = buf.capacity();
  const long long handles = f.live("handles");
  const long long mappings = f.live("mappings");
  const long long physical = f.live("physical");

  auto expect_rolled_back = [&](const char* api, long long nth) {
    INFO(api << ", call " << nth);
    f.fail_nth(api, nth);
    auto e = catch_as<cudrv::out_of_memory_error>([&] { buf.grow_to(10 * MiB / sizeof(int)); });
    REQUIRE(e);
    CHECK(e->api() == api);
    CHECK(f.counter(std::string("injected:") + api) >= 1);
    CHECK(buf.size() == 100);
    CHECK(buf.capacity() == capacity);
    CHECK(buf.data() == address);
    CHECK(f.live("handles") == handles);
    CHECK(f.live("mappings") == mappings);
    CHECK(f.live("physical") == physical);
  };
  expect_rolled_back("cuMemCreate", 3);     // two chunks made and mapped, the third fails
  expect_rolled_back("cuMemMap", 4);        // four made, the fourth mapping fails
  expect_rolled_back("cuMemSetAccess", 1);  // everything mapped, access refused

  buf.grow_to(10 * MiB / sizeof(int));  // and then it works
  CHECK(buf.chunk_count() == 5);
  CHECK(errors.count() == 0);
}

TEST_CASE("fake driver: the default chunk is 64 MiB rounded up to the recommended granularity",
          "[fake-driver][vmm][growable]") {
  vmm_fake f;
  const cudrv::device dev(1);
  f.granularity(2 * MiB, 6 * MiB);
  cudrv::growable_buffer<char> buf(dev, 100 * MiB);
  CHECK(buf.chunk_bytes() == 66 * MiB);
  CHECK(buf.max_size() == 132 * MiB);  // whole chunks
  auto bad_chunk = catch_as<cudrv::invalid_argument_error>(
      [&] { cudrv::growable_buffer<char> b(dev, 100 * MiB, {.chunk_bytes = 3 * MiB}); });
  REQUIRE(bad_chunk);
  CHECK(contains(bad_chunk->what(), "chunk size 3.00 MiB"));
  CHECK(contains(bad_chunk->what(), "minimum allocation granularity 2.00 MiB"));
  CHECK(catch_as<cudrv::invalid_argument_error>([&] { cudrv::growable_buffer<char> b(dev, 0); }));
  f.granularity(2 * MiB, 2 * MiB);
}

TEST_CASE("fake driver: the virtual memory resource reserves, creates, maps and sets access, and undoes it in reverse",
          "[fake-driver][vmm][memory_resource]") {
  vmm_fake f;
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(1);
  {
    cudrv::virtual_memory_resource mr(dev,
                                      {.peers = {cudrv::device(0)}, .peer_access = cudrv::access_rights::read_only});
    CHECK(mr.granularity_bytes() == 2 * MiB);
    const cudrv::memory_resource_properties props = mr.properties();
    CHECK(props.device_ordinal == 1);
    CHECK(props.device_accessible);
    CHECK_FALSE(props.host_accessible);
    cudrv::memory_resource& base = mr;

    void* p = base.allocate(3 * MiB);  // rounded up to 4 MiB
    REQUIRE(p != nullptr);
    const auto address = reinterpret_cast<CUdeviceptr>(p);
    CHECK(address % (2 * MiB) == 0);
    CHECK(mr.allocation_count() == 1);
    CHECK(contains(f.log(), "vmm_set_access " + hex(address) + " " + std::to_string(4 * MiB) + " 2\n"));
    CHECK(cudrv::get_access(address, cudrv::physical_location::on(cudrv::device(0))) ==
          cudrv::access_rights::read_only);
    CHECK(cudrv::get_access(address, cudrv::physical_location::on(dev)) == cudrv::access_rights::read_write);
    CHECK(base.allocate(0) == nullptr);

    void* q = base.allocate_async(MiB, cudrv::memory_resource::default_alignment, cudrv::stream_ref::legacy_default());
    CHECK(mr.allocation_count() == 2);
    void* aligned = base.allocate(2 * MiB, 8 * MiB);
    CHECK(reinterpret_cast<CUdeviceptr>(aligned) % (8 * MiB) == 0);

    const std::string before = f.log();
    base.deallocate(p, 3 * MiB);
    const std::string log = f.log().substr(before.size());
    const std::size_t unmap = position(log, "vmm_unmap " + hex(address));
    const std::size_t release = log.find("vmm_release ");
    const std::size_t freed = position(log, "vmm_free " + hex(address));
    REQUIRE(unmap != std::string::npos);
    REQUIRE(release != std::string::npos);
    REQUIRE(freed != std::string::npos);
    CHECK(unmap < release);
    CHECK(release < freed);
    CHECK(mr.allocation_count() == 2);

    // Not ours: reported, nothing freed.
    int local = 0;
    base.deallocate(&local, 4);
    CHECK(errors.count() == 1);
    CHECK(contains(errors.messages(), "was not allocated by this resource"));
    CHECK(mr.allocation_count() == 2);
    base.deallocate(aligned, 2 * MiB, 8 * MiB);
    (void)q;  // left for the destructor
  }
  CHECK(f.nothing_live());
  CHECK(errors.count() == 1);
}

TEST_CASE("fake driver: a failed step of a resource allocation leaves nothing behind",
          "[fake-driver][vmm][memory_resource][driver_error]") {
  vmm_fake f;
  cudrv::test::destruction_error_counter errors;
  cudrv::virtual_memory_resource mr(cudrv::device(1));
  for (const char* api : {"cuMemAddressReserve", "cuMemCreate", "cuMemMap", "cuMemSetAccess"}) {
    INFO(api);
    f.fail_nth(api, 1);
    CHECK(catch_as<cudrv::out_of_memory_error>([&] { (void)mr.allocate(4 * MiB); }));
    CHECK(mr.allocation_count() == 0);
    CHECK(f.nothing_live());
  }
  CHECK(errors.count() == 0);
}
