// <cudrv/ipc.hpp> against the stand-in driver of fake_cuda.cpp: shareable pools exported as a real
// file descriptor (a memfd) that travels over a cudrv::unix_socket and is imported again; pool
// pointers exported and imported; legacy IPC handles; the order in which the owners release (an
// imported buffer keeps its imported pool alive); typed errors for what the device cannot do (fabric
// handles) and for what the caller got wrong, before the driver is called.
#include <catch2/catch.hpp>

#include <dirent.h>
#include <unistd.h>

#include <sys/mman.h>
#include <cudrv/cudrv.hpp>
#include <cudrv/unix_socket.hpp>

#include <cstdlib>
#include <string>

#include "fake_driver/fake_hooks.hpp"
#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;

namespace {

struct fake_ipc : cudrv::test::fake_probe {
  // Where line first appears in the log after offset `from`; npos when absent.
  std::size_t find(const std::string& line, std::size_t from) const { return log().find(line, from); }
};

std::string hex(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%p", p);
  return buf;
}
std::string hex(CUdeviceptr p) { return hex(reinterpret_cast<void*>(p)); }

struct three_bytes {
  char v[3];
};

}  // namespace

TEST_CASE("fake driver: a pool exported as a descriptor, passed over a socket, imported, its buffers too",
          "[fake-driver][ipc]") {
  fake_ipc f;
  const long long failed = f.counter("failed_calls");
  cudrv::test::destruction_error_counter errors;
  const cudrv::device d1(1);
  cudrv::stream s(d1);
  CHECK(cudrv::supports_shareable_pools(d1, cudrv::shareable_handle_type::posix_file_descriptor));
  CHECK_FALSE(cudrv::supports_shareable_pools(d1, cudrv::shareable_handle_type::fabric));

  cudrv::memory_pool pool = cudrv::make_shareable_memory_pool(d1, cudrv::shareable_handle_type::posix_file_descriptor);
  cudrv::device_buffer<float> data(pool, s, 1000);

  // The producer's side: the pool's descriptor and the buffer's export data in one message.
  auto [producer, consumer] = cudrv::unix_socket::pair();
  {
    cudrv::file_descriptor fd = cudrv::export_pool_descriptor(pool);
    REQUIRE(fd);
    const cudrv::pointer_export exported = cudrv::export_pointer(data);
    CHECK(exported.bytes == 1000 * sizeof(float));
    producer.send_value(exported, {fd.native_handle()});
  }  // the producer's descriptor is closed; the message holds its own

  // The consumer's side.
  cudrv::received_message m = consumer.receive({.timeout = std::chrono::seconds(5)});
  REQUIRE(m.descriptors.size() == 1);
  const auto exported = m.as<cudrv::pointer_export>();
  cudrv::imported_memory_pool imported(d1, m.descriptors[0]);
  m.descriptors.clear();  // the descriptor may be closed once imported
  REQUIRE(imported);
  CHECK(imported.native_handle() != pool.native_handle());
  CHECK(imported.device() == d1);
  cudrv::imported_buffer<float> view = imported.import_pointer<float>(exported);
  REQUIRE(view);
  CHECK(view.size() == 1000);
  CHECK(view.size_bytes() == 4000);
  CHECK(view.data() != data.data());  // a mapping of its own
  cudrv::device_span<const float> span = view;
  CHECK(span.size() == 1000);
  auto as_bytes = imported.import_pointer<unsigned char>(exported);
  CHECK(as_bytes.size() == 4000);

  // Typed by the element size: 4000 bytes are not whole 3-float elements.
  struct three {
    float v[3];
  };
  auto odd = catch_as<cudrv::invalid_argument_error>([&] { (void)imported.import_pointer<three>(exported); });
  REQUIRE(odd);
  CHECK(contains(odd->what(), "4000 bytes"));

  // The imported pool goes first as an object, yet the driver's pool is destroyed only after the last
  // buffer imported from it is freed.
  const std::string imported_pool = hex(static_cast<void*>(imported.native_handle()));
  const std::size_t start = f.log().size();
  imported.reset();
  CHECK_FALSE(imported);
  CHECK(f.find("pool_destroy " + imported_pool, start) == std::string::npos);
  const CUdeviceptr first = view.data();
  view.reset();
  CHECK_FALSE(f.is_live(first));
  CHECK(f.find("pool_destroy " + imported_pool, start) == std::string::npos);  // as_bytes still uses it
  const CUdeviceptr second = as_bytes.data();
  as_bytes.reset();
  const std::size_t freed = f.find("free " + hex(second), start);
  const std::size_t destroyed = f.find("pool_destroy " + imported_pool, start);
  REQUIRE(freed != std::string::npos);
  REQUIRE(destroyed != std::string::npos);
  CHECK(freed < destroyed);
  CHECK(f.counter("pool_destroyed_with_imports") == 0);

  data.reset();
  s.synchronize();
  CHECK(f.counter("failed_calls") == failed);
  CHECK(errors.count() == 0);
  // Device 0 (taken by another process in the fake) was never touched.
  CHECK(f.counter("primary_retain:0") == 0);
  CHECK(f.counter("made_current:0") == 0);
}

TEST_CASE("fake driver: an imported buffer outlives a temporary pool, release hands the pool over",
          "[fake-driver][ipc]") {
  fake_ipc f;
  cudrv::test::destruction_error_counter errors;
  const cudrv::device d1(1);
  cudrv::stream s(d1);
  cudrv::memory_pool pool = cudrv::make_shareable_memory_pool(d1, cudrv::shareable_handle_type::posix_file_descriptor);
  cudrv::device_buffer<int> data(pool, s, 64);
  const cudrv::pointer_export exported = cudrv::export_pointer(data);
  {
    cudrv::file_descriptor fd = cudrv::export_pool_descriptor(pool);
    // One expression: the pool object is a temporary, the buffer keeps the pool.
    cudrv::imported_buffer<int> b = cudrv::imported_memory_pool(d1, fd).import_pointer<int>(exported);
    CHECK(b.size() == 64);
    const long long destroyed = f.counter("pools_destroyed");
    cudrv::imported_buffer<int> moved = std::move(b);
    CHECK_FALSE(b);  // NOLINT: moved-from is empty by contract
    CHECK(f.counter("pools_destroyed") == destroyed);
    moved.reset();
    CHECK(f.counter("pools_destroyed") == destroyed + 1);

    // release(): the caller destroys the pool; the buffers no longer do.
    cudrv::imported_memory_pool p2(d1, fd);
    cudrv::imported_buffer<int> c = p2.import_pointer<int>(exported);
    CUmemoryPool raw = p2.release();
    CHECK_FALSE(p2);
    auto empty = catch_as<cudrv::invalid_argument_error>([&] { (void)p2.import_pointer<int>(exported); });
    REQUIRE(empty);
    CHECK(contains(empty->what(), "empty"));
    c.reset();
    CHECK(f.counter("pools_destroyed") == destroyed + 1);
    cudrv::memory_pool::from_native_handle(raw).reset();
    CHECK(f.counter("pools_destroyed") == destroyed + 2);
  }
  data.reset();
  s.synchronize();
  CHECK(f.counter("pool_destroyed_with_imports") == 0);
  CHECK(errors.count() == 0);
}

// The real driver (580.159.04) refuses cuMemPoolExportPointer with CUDA_ERROR_INVALID_VALUE until the
// pool itself was exported once; the fake does the same. make_shareable_memory_pool exports once when it
// creates the pool, and export_pointer arms a shareable pool made another way before it gives up.
TEST_CASE("fake driver: pointers of a pool never exported still export (the pool is armed first)",
          "[fake-driver][ipc]") {
  fake_ipc f;
  cudrv::test::destruction_error_counter errors;
  const cudrv::device d1(1);
  cudrv::stream s(d1);
  SECTION("make_shareable_memory_pool arms the pool when it creates it") {
    const long long exports = f.counter("pool_exports");
    const long long failed = f.counter("failed_calls");
    cudrv::memory_pool pool =
        cudrv::make_shareable_memory_pool(d1, cudrv::shareable_handle_type::posix_file_descriptor);
    CHECK(f.counter("pool_exports") == exports + 1);
    cudrv::device_buffer<int> data(pool, s, 256);
    const cudrv::pointer_export e = cudrv::export_pointer(data);
    CHECK(e.bytes == 256 * sizeof(int));
    CHECK(f.counter("failed_calls") == failed);  // no refused call on the way
    data.reset();
  }
  SECTION("a shareable pool made with memory_pool and a handle type") {
    cudrv::memory_pool_properties props;
    props.handle_type = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    cudrv::memory_pool pool(d1, props);
    const long long exports = f.counter("pool_exports");
    cudrv::device_buffer<int> data(pool, s, 256);
    const cudrv::pointer_export e = cudrv::export_pointer(data);
    CHECK(e.bytes == 256 * sizeof(int));
    CHECK(f.counter("pool_exports") == exports + 1);  // armed once, on the way
    // Importable: the export data names this pool's allocation.
    cudrv::file_descriptor fd = cudrv::export_pool_descriptor(pool);
    cudrv::imported_memory_pool imported(d1, fd);
    cudrv::imported_buffer<int> b = imported.import_pointer<int>(e);
    CHECK(b.size() == 256);
    b.reset();
    data.reset();
  }
  s.synchronize();
  CHECK(errors.count() == 0);
}

TEST_CASE("fake driver: IPC refusals are typed and name what to do", "[fake-driver][ipc][driver_error]") {
  fake_ipc f;
  cudrv::test::destruction_error_counter errors;
  const cudrv::device d1(1);
  cudrv::stream s(d1);

  SECTION("fabric handles where the device has none") {
    auto e = catch_as<cudrv::not_supported_error>(
        [&] { (void)cudrv::make_shareable_memory_pool(d1, cudrv::shareable_handle_type::fabric); });
    REQUIRE(e);
    CHECK(contains(e->what(), "device 1"));
    CHECK(contains(e->what(), "fabric"));
    auto i = catch_as<cudrv::not_supported_error>([&] { cudrv::imported_memory_pool p(d1, cudrv::fabric_handle{}); });
    REQUIRE(i);
    CHECK(contains(i->what(), "CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED"));
    cudrv::memory_pool pool =
        cudrv::make_shareable_memory_pool(d1, cudrv::shareable_handle_type::posix_file_descriptor);
    auto x = catch_as<cudrv::not_supported_error>([&] { (void)cudrv::export_pool_fabric_handle(pool); });
    REQUIRE(x);
    CHECK(contains(x->what(), "no visible device supports fabric handles"));
  }
  SECTION("a pool that was not created shareable") {
    cudrv::memory_pool local(d1);
    auto e = catch_as<cudrv::error>([&] { (void)cudrv::export_pool_descriptor(local); });
    REQUIRE(e);
    CHECK(e->api() == "cuMemPoolExportToShareableHandle");
    CHECK(contains(e->what(), "make_shareable_memory_pool"));
    cudrv::device_buffer<float> b(local, s, 16);
    auto p = catch_as<cudrv::error>([&] { (void)cudrv::export_pointer(b); });
    REQUIRE(p);
    CHECK(p->api() == "cuMemPoolExportPointer");
    b.reset();
  }
  SECTION("the wrong kind of buffer for each mechanism, empty owners") {
    cudrv::device_buffer<float> plain(d1, 16);
    auto e = catch_as<cudrv::invalid_argument_error>([&] { (void)cudrv::export_pointer(plain); });
    REQUIRE(e);
    CHECK(contains(e->what(), "ipc_handle"));
    cudrv::memory_pool pool =
        cudrv::make_shareable_memory_pool(d1, cudrv::shareable_handle_type::posix_file_descriptor);
    cudrv::device_buffer<float> ordered(pool, s, 16);
    auto l = catch_as<cudrv::invalid_argument_error>([&] { (void)cudrv::ipc_handle(ordered); });
    REQUIRE(l);
    CHECK(contains(l->what(), "export_pointer"));
    cudrv::device_buffer<float> none(d1, 4);
    cudrv::device_buffer<float> taker = std::move(none);
    auto n = catch_as<cudrv::invalid_argument_error>([&] { (void)cudrv::ipc_handle(none); });
    REQUIRE(n);
    CHECK(contains(n->what(), "empty"));
    auto fd =
        catch_as<cudrv::invalid_argument_error>([&] { cudrv::imported_memory_pool p(d1, cudrv::file_descriptor{}); });
    REQUIRE(fd);
    cudrv::memory_pool moved = std::move(pool);
    auto m = catch_as<cudrv::invalid_argument_error>([&] { (void)cudrv::export_pool_descriptor(pool); });
    REQUIRE(m);
    ordered.reset();
  }
  SECTION("a descriptor this driver did not export, export data of another pool") {
    cudrv::file_descriptor junk = cudrv::file_descriptor::from_native_handle(::memfd_create("junk", MFD_CLOEXEC));
    auto e = catch_as<cudrv::error>([&] { cudrv::imported_memory_pool p(d1, junk); });
    REQUIRE(e);
    CHECK(e->api() == "cuMemPoolImportFromShareableHandle");
    CHECK(contains(e->what(), "device 1"));
    cudrv::memory_pool a = cudrv::make_shareable_memory_pool(d1, cudrv::shareable_handle_type::posix_file_descriptor);
    cudrv::memory_pool b = cudrv::make_shareable_memory_pool(d1, cudrv::shareable_handle_type::posix_file_descriptor);
    cudrv::device_buffer<int> from_a(a, s, 8);
    cudrv::imported_memory_pool imported_b(d1, cudrv::export_pool_descriptor(b));
    auto w = catch_as<cudrv::error>([&] { (void)imported_b.import_pointer<int>(cudrv::export_pointer(from_a)); });
    REQUIRE(w);
    CHECK(w->api() == "cuMemPoolImportPointer");
    CHECK(contains(w->what(), "the pool this process imported"));
    from_a.reset();
  }
  s.synchronize();
  CHECK(errors.count() == 0);
  CHECK(f.counter("pool_destroyed_with_imports") == 0);
}

TEST_CASE("fake driver: legacy IPC handles of cuMemAlloc memory, opened and closed in the named device's context",
          "[fake-driver][ipc]") {
  fake_ipc f;
  cudrv::test::destruction_error_counter errors;
  const long long failed = f.counter("failed_calls");
  const cudrv::device d1(1);
  cudrv::device_buffer<double> data(d1, 100);
  const cudrv::ipc_memory_handle h = cudrv::ipc_handle(data);
  CHECK(h.bytes == 800);
  const long long opened = f.counter("ipc_opened_in:1");
  {
    cudrv::ipc_mapped_buffer<double> mapped(d1, h);
    REQUIRE(mapped);
    CHECK(mapped.size() == 100);
    CHECK(f.counter("ipc_opened_in:1") == opened + 1);
    cudrv::ipc_mapped_buffer<double> moved = std::move(mapped);
    CHECK_FALSE(mapped);  // NOLINT: moved-from is empty by contract
    const CUdeviceptr p = moved.data();
    const std::size_t start = f.log().size();
    moved.reset();
    CHECK(f.find("ipc_close " + hex(p), start) != std::string::npos);
    CHECK_FALSE(f.is_live(p));
  }
  auto odd = catch_as<cudrv::invalid_argument_error>([&] { cudrv::ipc_mapped_buffer<three_bytes> m(d1, h); });
  REQUIRE(odd);
  CHECK(contains(odd->what(), "800 bytes"));
  CHECK(f.counter("ipc_closed") >= 1);
  CHECK(f.counter("failed_calls") == failed);
  CHECK(errors.count() == 0);
  CHECK(f.counter("made_current:0") == 0);
}

TEST_CASE("fake driver: fabric handles the device reports but the driver refuses (no IMEX channel) are not_supported",
          "[fake-driver][ipc][driver_error]") {
  // A single H100 machine: the device reports fabric support, and creating a fabric pool or allocation
  // fails with CUDA_ERROR_NOT_PERMITTED because the process has no IMEX channel. Callers (and the GPU
  // tier) must be able to tell "not here" from a failure.
  fake_ipc f;
  auto* set = cudrv::test::fake_hook<void(int)>("fake_cuda_set_fabric_without_imex");
  REQUIRE(set != nullptr);
  struct restore {
    void (*fn)(int);
    ~restore() { fn(0); }
  } restore_default{set};
  set(1);
  cudrv::test::destruction_error_counter errors;
  const cudrv::device d1(1);
  // Pools: the real driver (580.159.04) creates a fabric pool without an IMEX channel and crashes when it
  // is destroyed, so cudrv looks for a channel first and refuses without asking the driver. This machine
  // (CI, a container) has no channel; where one exists, the pool part is not what this case tests.
  bool has_channels = false;
  if (DIR* dir = ::opendir("/dev/nvidia-caps-imex-channels")) {
    while (const dirent* entry = ::readdir(dir)) {
      has_channels = has_channels || std::string(entry->d_name).rfind("channel", 0) == 0;
    }
    ::closedir(dir);
  }
  if (!has_channels) {
    CHECK_FALSE(cudrv::supports_shareable_pools(d1, cudrv::shareable_handle_type::fabric));
    const long long calls_before = f.counter("failed_calls");
    auto e = catch_as<cudrv::not_supported_error>(
        [&] { (void)cudrv::make_shareable_memory_pool(d1, cudrv::shareable_handle_type::fabric); });
    REQUIRE(e);
    CHECK(e->result() == CUDA_ERROR_NOT_PERMITTED);
    CHECK(contains(e->what(), "IMEX"));
    CHECK(contains(e->what(), "device 1"));
    cudrv::memory_pool_properties props;
    props.handle_type = static_cast<CUmemAllocationHandleType>(0x8);  // CU_MEM_HANDLE_TYPE_FABRIC
    auto d = catch_as<cudrv::not_supported_error>([&] { cudrv::memory_pool direct(d1, props); });
    REQUIRE(d);
    CHECK(d->result() == CUDA_ERROR_NOT_PERMITTED);
    CHECK(contains(d->what(), "IMEX"));
    CHECK(f.counter("failed_calls") == calls_before);  // the driver was not asked
  } else {
    WARN("this machine has /dev/nvidia-caps-imex-channels: the refusal of fabric pools is not tested here");
  }

  const cudrv::physical_allocation_properties fabric{.location = cudrv::physical_location::on(d1),
                                                     .handle_types = cudrv::shareable_handle_types::fabric};
  auto v = catch_as<cudrv::not_supported_error>([&] {
    cudrv::physical_allocation a(cudrv::allocation_granularity(fabric, cudrv::granularity::minimum), fabric);
  });
  REQUIRE(v);
  CHECK(v->result() == CUDA_ERROR_NOT_PERMITTED);
  CHECK(contains(v->what(), "IMEX"));

  // Other refusals keep their own type: a POSIX pool is still made.
  cudrv::memory_pool pool = cudrv::make_shareable_memory_pool(d1, cudrv::shareable_handle_type::posix_file_descriptor);
  CHECK(pool);
  CHECK(errors.count() == 0);
}

// The byte count that comes with an export is the peer's word: cudrv checks it against the extent the
// driver mapped (cuMemGetAddressRange) before a buffer reports it, so neither cudrv's own copy checks nor a
// span over the import can reach past the memory that was shared. Before the check, a 65,536-float copy
// landed in a 1,000-float import (ASan: heap-buffer-overflow in the fake's memory).
TEST_CASE("fake driver: an exporter's inflated byte count is refused against the driver's extent, nothing stays mapped",
          "[fake-driver][ipc][hostile]") {
  fake_ipc f;
  cudrv::test::destruction_error_counter errors;
  const cudrv::device d1(1);
  cudrv::stream s(d1);
  constexpr std::size_t real = 1000;
  constexpr std::size_t claimed = 65536;

  SECTION("pool pointer export") {
    cudrv::memory_pool pool =
        cudrv::make_shareable_memory_pool(d1, cudrv::shareable_handle_type::posix_file_descriptor);
    cudrv::device_buffer<float> data(pool, s, real);
    cudrv::imported_memory_pool imported(d1, cudrv::export_pool_descriptor(pool));
    cudrv::pointer_export lying = cudrv::export_pointer(data);
    lying.bytes = claimed * sizeof(float);
    const long long imports = f.counter("pointer_imports");
    const long long frees = f.counter("frees");
    auto e = catch_as<cudrv::invalid_argument_error>([&] { (void)imported.import_pointer<float>(lying); });
    REQUIRE(e);
    CHECK(contains(e->what(), std::to_string(claimed * sizeof(float))));  // the claim
    CHECK(contains(e->what(), std::to_string(real * sizeof(float))));     // and what the driver mapped
    CHECK(contains(e->what(), "cuMemGetAddressRange"));
    CHECK(f.counter("pointer_imports") == imports + 1);  // it was imported, then
    CHECK(f.counter("frees") == frees + 1);              // freed again at once
    // A claim within the mapping (a prefix) is taken as it is; the exact one too.
    lying.bytes = 10 * sizeof(float);
    cudrv::imported_buffer<float> prefix = imported.import_pointer<float>(lying);
    CHECK(prefix.size() == 10);
    lying.bytes = real * sizeof(float);
    cudrv::imported_buffer<float> whole = imported.import_pointer<float>(lying);
    CHECK(whole.size() == real);
    // What cudrv then allows on the import is bounded by the real size.
    std::vector<float> big(claimed, 1.f);
    auto c = catch_as<cudrv::invalid_argument_error>([&] { cudrv::copy(whole, big, s); });
    REQUIRE(c);
    prefix.reset();
    whole.reset();
    data.reset();
  }
  SECTION("legacy IPC handle") {
    cudrv::device_buffer<float> data(d1, real);
    cudrv::ipc_memory_handle lying = cudrv::ipc_handle(data);
    lying.bytes = claimed * sizeof(float);
    const long long opened = f.counter("ipc_opened");
    const long long closed = f.counter("ipc_closed");
    auto e = catch_as<cudrv::invalid_argument_error>([&] { cudrv::ipc_mapped_buffer<float> m(d1, lying); });
    REQUIRE(e);
    CHECK(contains(e->what(), std::to_string(claimed * sizeof(float))));
    CHECK(contains(e->what(), std::to_string(real * sizeof(float))));
    CHECK(f.counter("ipc_opened") == opened + 1);
    CHECK(f.counter("ipc_closed") == closed + 1);  // nothing stays mapped
    lying.bytes = real * sizeof(float);
    cudrv::ipc_mapped_buffer<float> m(d1, lying);
    CHECK(m.size() == real);
  }
  s.synchronize();
  CHECK(errors.count() == 0);
}
