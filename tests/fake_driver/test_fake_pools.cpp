// Pools of every kind, pool buffers, buffer properties, graph memory and the concrete memory resources,
// against the stand-in driver of fake_cuda.cpp (two devices: device 0 unavailable and without a host
// NUMA node, device 1 next to host NUMA node 1 and the only one supporting host pools). What is
// checked here is what reaches the driver (the pool properties, the streams allocations and frees are
// queued on, which context is current), the argument checks made before it, and the error paths.
#include <catch2/catch.hpp>

#include <cudrv/cudrv.hpp>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "fake_driver/fake_hooks.hpp"
#include "support/memory_support.hpp"
#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;

namespace {

// The fake's counters, log and graph-memory setter, through the library cudrv loaded.
struct fake_driver : cudrv::test::fake_probe {
  void (*set_graph_memory_fn)(int, unsigned long long, unsigned long long) =
      cudrv::test::fake_hook<void(int, unsigned long long, unsigned long long)>("fake_cuda_set_graph_memory");
  long long (*live_host_fn)() = cudrv::test::fake_hook<long long()>("fake_cuda_live_host_allocations");
};

std::string text_of(const void* p) {
  char text[32];
  std::snprintf(text, sizeof(text), "%p", p);
  return text;
}

// The log lines written since construction.
struct log_since {
  const fake_driver& f;
  std::size_t start;
  explicit log_since(const fake_driver& fd) : f(fd), start(fd.log().size()) {}
  std::string text() const { return f.log().substr(start); }
};

// Counts destruction reports, and those for memory that outlived its context.
struct report_counter {
  static inline int reports = 0;
  static inline int outlived = 0;
  cudrv::destruction_error_handler previous;
  report_counter() {
    reports = 0;
    outlived = 0;
    previous = cudrv::set_destruction_error_handler([](const cudrv::error& e) noexcept {
      ++reports;
      if (e.code() == CUDA_ERROR_CONTEXT_IS_DESTROYED && e.source() == cudrv::error_source::cudrv) {
        ++outlived;
      }
    });
  }
  ~report_counter() { cudrv::set_destruction_error_handler(previous); }
};

}  // namespace

TEST_CASE("fake driver: pools of every kind reach cuMemPoolCreate with their location and allocation type",
          "[fake-driver][pool]") {
  fake_driver f;
  const cudrv::device d1(1);
  const cudrv::device d0(0);
  const long long retains = f.counter("primary_retain:1");
  log_since log(f);

  cudrv::memory_pool device_pool(d1, {.handle_type = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR});
  CHECK(contains(log.text(), "pool_create " + text_of(device_pool.native_handle()) + " type 1 location 1:1 handles 1"));
  REQUIRE(device_pool.is_described());
  CHECK(device_pool.location() == cudrv::memory_location(d1));
  CHECK(device_pool.allocation_type() == cudrv::memory_allocation_type::pinned);
  CHECK(device_pool.properties() == cudrv::memory_properties{1, true, false});
  CHECK_FALSE(contains(log.text(), "pool_access"));  // a device pool is its device's already

  // A pinned host pool: any node, accessible from the devices that support host pools (device 1 only).
  cudrv::memory_pool host_pool(cudrv::memory_location::host());
  const std::string host_handle = text_of(host_pool.native_handle());
  CHECK(contains(log.text(), "pool_create " + host_handle + " type 1 location 2:0 handles 0"));
  CHECK(contains(log.text(), "pool_access " + host_handle + " device 1 flags 3"));
  CHECK_FALSE(contains(log.text(), "pool_access " + host_handle + " device 0"));
  CHECK(host_pool.location() == cudrv::memory_location::host());
  CHECK(host_pool.location().is_host());
  CHECK(host_pool.properties() == cudrv::memory_properties{-1, true, true});
  CHECK(host_pool.release_threshold() == SIZE_MAX);  // cudrv's default, as for device pools

  // The NUMA node nearest device 1 (its CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID), shareable.
  const cudrv::memory_location near = cudrv::memory_location::nearest_host_numa(d1);
  CHECK(near.kind() == cudrv::memory_location_kind::host_numa);
  CHECK(near.numa_node() == 1);
  CHECK(near.device_ordinal() == -1);
  cudrv::memory_pool numa_pool(near, {.handle_type = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR});
  const std::string numa_handle = text_of(numa_pool.native_handle());
  CHECK(contains(log.text(), "pool_create " + numa_handle + " type 1 location 3:1 handles 1"));
  CHECK(contains(log.text(), "pool_access " + numa_handle + " device 0 flags 3"));
  CHECK(contains(log.text(), "pool_access " + numa_handle + " device 1 flags 3"));
  CHECK(numa_pool.location() == cudrv::memory_location::host_numa(1));
  CHECK(numa_pool.access(d1) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);

  // Managed pools, with and without a preferred device; the maximum size reaches the driver.
  cudrv::memory_pool anywhere = cudrv::memory_pool::managed();
  CHECK(contains(log.text(), "pool_create " + text_of(anywhere.native_handle()) + " type 2 location 0:0 handles 0"));
  CHECK(anywhere.allocation_type() == cudrv::memory_allocation_type::managed);
  CHECK(anywhere.location() == cudrv::memory_location::none());
  CHECK(anywhere.properties() == cudrv::memory_properties{-1, true, true});
  cudrv::memory_pool preferring = cudrv::memory_pool::managed(d1, {.max_size = 1 << 20});
  CHECK(contains(log.text(), "pool_create " + text_of(preferring.native_handle()) +
                                 " type 2 location 1:1 handles 0 max " + std::to_string(1 << 20)));
  CHECK(preferring.properties() == cudrv::memory_properties{1, true, true});

  // Creating pools neither retains nor makes current any context.
  CHECK(f.counter("primary_retain:1") == retains);
  CHECK(f.counter("primary_retain:0") == 0);
  CHECK(f.counter("made_current:0") == 0);
  CHECK(f.counter("made_current:1") == 0);
  CHECK(cudrv::test::raw_current_context() == nullptr);
  CHECK(f.counter("failed_calls") == 0);

  // The device's own pools are described too; a bare handle is not until it is described.
  CHECK(cudrv::default_memory_pool(d1).location() == cudrv::memory_location(d1));
  CHECK(cudrv::current_memory_pool(d1).properties() == cudrv::memory_properties{1, true, false});
  const cudrv::memory_pool_ref bare(host_pool.native_handle());
  CHECK_FALSE(bare.is_described());
  CHECK(bare == host_pool);
  auto e = catch_as<cudrv::invalid_argument_error>([&] { (void)bare.location(); });
  REQUIRE(e);
  CHECK(contains(e->what(), "memory_pool_ref(handle, location, type)"));
  const cudrv::memory_pool_ref described(host_pool.native_handle(), cudrv::memory_location::host(),
                                         cudrv::memory_allocation_type::pinned);
  CHECK(described.properties() == host_pool.properties());

  // Moves carry the description; release() and adoption hand it over explicitly.
  cudrv::memory_pool moved(std::move(numa_pool));
  CHECK(moved.location() == cudrv::memory_location::host_numa(1));
  CHECK_FALSE(numa_pool.is_described());
  CHECK_THROWS_AS((void)numa_pool.location(), cudrv::invalid_argument_error);
  device_pool = std::move(moved);  // destroys the device pool
  CHECK(device_pool.location() == cudrv::memory_location::host_numa(1));
  const CUmemoryPool raw = device_pool.release();
  CHECK_FALSE(device_pool.is_described());
  cudrv::memory_pool adopted = cudrv::memory_pool::from_native_handle(raw, cudrv::memory_location::host_numa(1),
                                                                      cudrv::memory_allocation_type::pinned);
  const cudrv::memory_pool_ref view = adopted;
  CHECK(view.location() == cudrv::memory_location::host_numa(1));
  CHECK(f.counter("pools_destroyed") == 1);
}

TEST_CASE("fake driver: bad pool requests are refused before the driver, the driver's refusals are typed",
          "[fake-driver][pool][driver_error]") {
  fake_driver f;
  const cudrv::device d0(0);
  const cudrv::device d1(1);
  const long long created = f.counter("pools_created");

  auto shared_host = catch_as<cudrv::invalid_argument_error>([] {
    cudrv::memory_pool p(cudrv::memory_location::host(), {.handle_type = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR});
  });
  REQUIRE(shared_host);
  CHECK(contains(shared_host->what(), "host_numa"));
  auto pinned_nowhere =
      catch_as<cudrv::invalid_argument_error>([] { cudrv::memory_pool p(cudrv::memory_location::none()); });
  REQUIRE(pinned_nowhere);
  CHECK(contains(pinned_nowhere->what(), "memory_pool::managed"));
  auto negative = catch_as<cudrv::invalid_argument_error>([] { (void)cudrv::memory_location::host_numa(-3); });
  REQUIRE(negative);
  CHECK(contains(negative->what(), "-3"));
  CHECK(f.counter("pools_created") == created);  // none of these reached the driver

  // Device 0 reports no host NUMA node: a typed error that says so.
  auto no_numa = catch_as<cudrv::not_supported_error>([&] { (void)cudrv::memory_location::nearest_host_numa(d0); });
  REQUIRE(no_numa);
  CHECK(contains(no_numa->what(), "device 0"));
  CHECK(contains(no_numa->what(), "-1"));

  // Locations from the driver's form.
  CUmemLocation native{};
  native.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
  native.id = 1;
  CHECK(cudrv::memory_location::from_native(native) == cudrv::memory_location::host_numa(1));
  const CUmemLocation back = cudrv::memory_location::host_numa(1).native();
  CHECK(back.type == CU_MEM_LOCATION_TYPE_HOST_NUMA);
  CHECK(back.id == 1);
  native.type = CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
  CHECK_THROWS_AS(cudrv::memory_location::from_native(native), cudrv::invalid_argument_error);
  native.type = CU_MEM_LOCATION_TYPE_DEVICE;
  native.id = -1;
  CHECK_THROWS_AS(cudrv::memory_location::from_native(native), cudrv::invalid_argument_error);

  // A node the system does not have: the driver refuses, and the error names the location.
  auto refused = catch_as<cudrv::error>([] { cudrv::memory_pool p(cudrv::memory_location::host_numa(7)); });
  REQUIRE(refused);
  CHECK(refused->api() == "cuMemPoolCreate");
  CHECK(refused->result() == CUDA_ERROR_INVALID_VALUE);
  CHECK(contains(refused->what(), "host NUMA node 7"));
  CHECK(f.counter("pools_created") == created);

  // host_accessible_pool_buffer takes only pools whose memory the host can access, and only described ones.
  cudrv::stream s(d1);
  cudrv::memory_pool device_pool(d1);
  auto not_host =
      catch_as<cudrv::invalid_argument_error>([&] { cudrv::host_accessible_pool_buffer<int> b(device_pool, s, 4); });
  REQUIRE(not_host);
  CHECK(contains(not_host->what(), "device_buffer(pool, stream, count)"));
  cudrv::memory_pool host_pool(cudrv::memory_location::host());
  auto unknown = catch_as<cudrv::invalid_argument_error>(
      [&] { cudrv::host_accessible_pool_buffer<int> b(cudrv::memory_pool_ref(host_pool.native_handle()), s, 4); });
  REQUIRE(unknown);
  CHECK(contains(unknown->what(), "unknown"));
  cudrv::memory_pool gone(std::move(host_pool));
  auto empty =
      catch_as<cudrv::invalid_argument_error>([&] { cudrv::host_accessible_pool_buffer<int> b(host_pool, s, 4); });
  REQUIRE(empty);
  CHECK(contains(empty->what(), "moved-from"));
  CHECK(f.counter("pool_allocations") == 0);
}

TEST_CASE(
    "fake driver: host_accessible_pool_buffer is host-accessible, stream-ordered memory that keeps its stream alive",
    "[fake-driver][pool]") {
  fake_driver f;
  report_counter reports;
  const cudrv::device d1(1);
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");
  const std::vector<int> data = cudrv::test::random_vector<int>(257, seed);

  cudrv::memory_pool staging(cudrv::memory_location::nearest_host_numa(d1));
  std::optional<cudrv::stream> s(std::in_place, d1);
  const CUstream raw = s->native_handle();
  log_since log(f);
  std::optional<cudrv::host_accessible_pool_buffer<int>> h(std::in_place, staging, *s, data.size());
  REQUIRE(bool(*h));
  CHECK(h->size() == data.size());
  CHECK(h->size_bytes() == data.size() * sizeof(int));
  CHECK(contains(log.text(), "alloc_from_pool " + text_of(h->data()) + " pool " + text_of(staging.native_handle()) +
                                 " on " + text_of(raw)));
  CHECK(h->stream() == cudrv::stream_ref(raw));
  CHECK(h->properties() == cudrv::memory_properties{-1, true, true});
  s->synchronize();
  std::copy(data.begin(), data.end(), h->begin());  // written by the host
  for (std::size_t i = 0; i < data.size(); ++i) {
    REQUIRE((*h)[i] == data[i]);
  }
  CHECK(h->view().data() == h->data());
  CHECK(h->device_view().data() == reinterpret_cast<CUdeviceptr>(h->data()));

  // Through device memory and back, into a poisoned destination.
  cudrv::device_buffer<int> dev_copy(*s, data.size());
  std::vector<int> back(data.size(), cudrv::test::poison_value<int>());
  cudrv::copy(dev_copy, *h, *s);
  cudrv::copy(back, dev_copy, *s);
  s->synchronize();
  CHECK(cudrv::test::mismatch(back, data).empty());

  // The owner of the stream goes first: the buffer keeps the CUstream until it is freed on it.
  const CUdeviceptr address = reinterpret_cast<CUdeviceptr>(h->data());
  dev_copy.reset();
  const long long destroyed = f.counter("streams_destroyed");
  s.reset();
  CHECK(f.counter("streams_destroyed") == destroyed);
  h.reset();
  const std::string text = log.text();
  const auto freed = text.find("free_async " + text_of(reinterpret_cast<void*>(address)) + " on " + text_of(raw));
  const auto stream_gone = text.find("stream_destroy " + text_of(raw));
  REQUIRE(freed != std::string::npos);
  REQUIRE(stream_gone != std::string::npos);
  CHECK(freed < stream_gone);
  CHECK_FALSE(f.is_live(address));
  CHECK(reports.reports == 0);
  CHECK(f.counter("pointer_queries") == 0);  // the properties came from the pool, not from the driver
}

TEST_CASE("fake driver: host_accessible_pool_buffer moves, set_stream, reset on a stream, release and adoption",
          "[fake-driver][pool]") {
  fake_driver f;
  report_counter reports;
  const cudrv::device d1(1);
  cudrv::stream a(d1);
  cudrv::stream b(d1);
  cudrv::memory_pool managed = cudrv::memory_pool::managed(d1);
  log_since log(f);

  cudrv::host_accessible_pool_buffer<double> x(managed, a, 8);
  CHECK(x.properties() == cudrv::memory_properties{1, true, true});  // managed memory preferring device 1
  cudrv::host_accessible_pool_buffer<double> y(std::move(x));
  CHECK_FALSE(bool(x));
  CHECK(x.properties() == cudrv::memory_properties{});
  CHECK_THROWS_AS((void)x.stream(), cudrv::invalid_argument_error);
  y.set_stream(b);
  CHECK(y.stream() == b);
  const void* first = y.data();
  y.reset(a);  // freed on a, not on b
  CHECK(contains(log.text(), "free_async " + text_of(first) + " on " + text_of(a.native_handle())));
  CHECK_FALSE(bool(y));

  cudrv::host_accessible_pool_buffer<double> z(managed, b, 4);
  double* raw = z.release();
  CHECK_FALSE(bool(z));
  cudrv::host_accessible_pool_buffer<double> adopted =
      cudrv::host_accessible_pool_buffer<double>::from_native_handle(raw, 4, b, managed);
  CHECK(adopted.data() == raw);
  CHECK(adopted.properties() == cudrv::memory_properties{1, true, true});
  adopted =
      cudrv::host_accessible_pool_buffer<double>(managed, a, 0);  // frees raw on b; a zero-element buffer holds nothing
  CHECK(contains(log.text(), "free_async " + text_of(raw) + " on " + text_of(b.native_handle())));
  CHECK(adopted.empty());
  CHECK(adopted.properties() == cudrv::memory_properties{1, true, true});
  CHECK(reports.reports == 0);
}

TEST_CASE("fake driver: every buffer says what its memory is without a pointer-attribute query",
          "[fake-driver][pool]") {
  fake_driver f;
  const cudrv::device d1(1);
  cudrv::stream s(d1);
  const long long queries = f.counter("pointer_queries");

  cudrv::device_buffer<float> sync(d1, 16);
  CHECK(sync.properties() == cudrv::memory_properties{1, true, false});
  cudrv::device_buffer<float> ordered(s, 16);  // the device's current pool, found from the stream
  CHECK(ordered.properties() == cudrv::memory_properties{1, true, false});
  cudrv::memory_pool host_pool(cudrv::memory_location::host());
  cudrv::device_buffer<float> from_host_pool(host_pool, s, 16);  // device memory view of host memory
  CHECK(from_host_pool.properties() == cudrv::memory_properties{-1, true, true});
  cudrv::device_buffer<float> from_bare(cudrv::memory_pool_ref(cudrv::default_memory_pool(d1).native_handle()), s, 16);
  CHECK(from_bare.properties() == cudrv::memory_properties{1, true, false});  // the stream's device
  cudrv::pinned_buffer<float> pinned(d1, 16);
  CHECK(pinned.properties() == cudrv::memory_properties{-1, true, true});
  cudrv::managed_buffer<float> managed(d1, 16);
  CHECK(managed.properties() == cudrv::memory_properties{1, true, true});
  auto adopted = cudrv::managed_buffer<float>::from_native_handle(managed.release(), 16, d1.primary_context());
  CHECK(adopted.properties() == cudrv::memory_properties{1, true, true});  // found from its context

  // A stream-ordered buffer moved to another stream keeps the device it was allocated on.
  cudrv::stream t(d1);
  ordered.set_stream(t);
  CHECK(ordered.properties().device_ordinal == 1);

  // Empty owners describe nothing.
  cudrv::device_buffer<float> moved(std::move(sync));
  CHECK(sync.properties() == cudrv::memory_properties{});
  cudrv::pinned_buffer<float> moved_pinned(std::move(pinned));
  CHECK(pinned.properties() == cudrv::memory_properties{});
  CHECK(f.counter("pointer_queries") == queries);
  CHECK(f.counter("primary_retain:0") == 0);
}

TEST_CASE("fake driver: managed memory is prefetched and advised to a device, the host or a host NUMA node",
          "[fake-driver][pool]") {
  fake_driver f;
  const cudrv::device d1(1);
  cudrv::stream s(d1);
  cudrv::managed_buffer<int> m(d1, 64);
  const std::string at = text_of(m.data()) + " " + std::to_string(64 * sizeof(int));
  log_since log(f);
  m.prefetch(d1, s);
  m.prefetch(cudrv::memory_location::host(), s);
  m.prefetch(cudrv::memory_location::nearest_host_numa(d1), s);
  m.advise(CU_MEM_ADVISE_SET_PREFERRED_LOCATION, cudrv::memory_location::host_numa(0));
  m.advise(CU_MEM_ADVISE_SET_ACCESSED_BY, d1);
  const std::string text = log.text();
  CHECK(contains(text, "prefetch " + at + " to 1:1"));
  CHECK(contains(text, "prefetch " + at + " to 2:0"));
  CHECK(contains(text, "prefetch " + at + " to 3:1"));
  CHECK(contains(text, "advise " + at + " " + std::to_string(CU_MEM_ADVISE_SET_PREFERRED_LOCATION) + " at 3:0"));
  CHECK(contains(text, "advise " + at + " " + std::to_string(CU_MEM_ADVISE_SET_ACCESSED_BY) + " at 1:1"));
  CHECK(f.counter("failed_calls") == 0);
}

TEST_CASE("fake driver: graph memory attributes, resetting the high watermarks, trimming",
          "[fake-driver][pool][driver_error]") {
  fake_driver f;
  const cudrv::device d1(1);
  CHECK(cudrv::graph_memory(d1).used_current == 0);

  f.set_graph_memory_fn(1, 3000, 8192);  // a graph with a 3000-byte allocation ran
  f.set_graph_memory_fn(1, 1000, 8192);  // part of it was freed
  cudrv::graph_memory_usage u = cudrv::graph_memory(d1);
  CHECK(u.used_current == 1000);
  CHECK(u.used_high == 3000);
  CHECK(u.reserved_current == 8192);
  CHECK(u.reserved_high == 8192);
  CHECK(cudrv::graph_memory_attribute(d1, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH) == 3000);

  cudrv::reset_graph_memory_high_watermarks(d1);
  u = cudrv::graph_memory(d1);
  CHECK(u.used_high == 0);
  CHECK(u.reserved_high == 0);
  CHECK(u.used_current == 1000);  // the current values stay

  // The fake wants a current context for the trim: cudrv uses device 1's primary context for the
  // call and leaves nothing current.
  REQUIRE(cudrv::test::raw_current_context() == nullptr);
  const long long failed = f.counter("failed_calls");
  cudrv::trim_graph_memory(d1);
  CHECK(f.counter("graph_memory_trims:1") == 1);
  CHECK(f.counter("failed_calls") == failed + 1);  // the first try, without a context
  CHECK(cudrv::graph_memory(d1).reserved_current == 1000);
  CHECK(cudrv::test::raw_current_context() == nullptr);
  {
    cudrv::context_guard current(d1.primary_context());  // with a context current: one call
    cudrv::trim_graph_memory(d1);
    CHECK(f.counter("failed_calls") == failed + 1);
    CHECK(f.counter("graph_memory_trims:1") == 2);
  }
  CHECK(f.counter("made_current:0") == 0);

  // The driver refuses an attribute (as one it does not know; a value outside CUgraphMem_attribute's
  // enumerators cannot be passed, that is undefined behaviour): its error, typed.
  cudrv::test::fake_hook<void(const char*, long long)>("fake_cuda_vmm_fail")("cuDeviceGetGraphMemAttribute", 1);
  auto e = catch_as<cudrv::error>([&] { (void)cudrv::graph_memory_attribute(d1, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH); });
  REQUIRE(e);
  CHECK(e->api() == "cuDeviceGetGraphMemAttribute");
  CHECK(contains(e->what(), "device 1"));
}

TEST_CASE("fake driver: device, pinned and managed memory resources", "[fake-driver][resource]") {
  fake_driver f;
  report_counter reports;
  const cudrv::device d1(1);
  REQUIRE(cudrv::test::raw_current_context() == nullptr);

  cudrv::device_memory_resource device_mr(d1);
  CHECK(device_mr.properties() == cudrv::memory_properties{1, true, false});
  CHECK(device_mr.context() == d1.primary_context());
  void* p = device_mr.allocate(1000);
  REQUIRE(p != nullptr);
  CHECK(f.is_live(reinterpret_cast<CUdeviceptr>(p)));
  CHECK(cudrv::test::raw_current_context() == nullptr);  // allocated in the primary context, restored
  device_mr.deallocate(p, 1000);
  CHECK_FALSE(f.is_live(reinterpret_cast<CUdeviceptr>(p)));
  CHECK(device_mr.allocate(0) == nullptr);

  // Alignments: a power of two up to 256.
  auto too_much = catch_as<cudrv::invalid_argument_error>([&] { (void)device_mr.allocate(64, 512); });
  REQUIRE(too_much);
  CHECK(contains(too_much->what(), "512"));
  CHECK(contains(too_much->what(), "256"));
  auto odd = catch_as<cudrv::invalid_argument_error>([&] { (void)device_mr.allocate(64, 3); });
  REQUIRE(odd);
  CHECK(contains(odd->what(), "power of two"));

  // Stream-ordered calls on a resource without native support: allocate now, free after the stream.
  cudrv::stream s(d1);
  void* q = device_mr.allocate_async(64, s);
  CHECK(f.is_live(reinterpret_cast<CUdeviceptr>(q)));
  device_mr.deallocate_async(q, 64, s);
  CHECK_FALSE(f.is_live(reinterpret_cast<CUdeviceptr>(q)));

  // Equality: resources of one context free each other's memory.
  const cudrv::device_memory_resource copy = device_mr;
  CHECK(copy == device_mr);
  cudrv::pinned_memory_resource pinned_mr(d1);
  CHECK_FALSE(pinned_mr == device_mr);
  CHECK(pinned_mr.properties() == cudrv::memory_properties{-1, true, true});
  CHECK(pinned_mr.flags() == cudrv::pinned_flags::portable);
  const long long host_before = f.live_host_fn();
  auto* h = static_cast<int*>(pinned_mr.allocate(10 * sizeof(int), alignof(int)));
  CHECK(f.live_host_fn() == host_before + 1);
  h[9] = 7;  // host memory
  pinned_mr.deallocate(h, 10 * sizeof(int), alignof(int));
  CHECK(f.live_host_fn() == host_before);

  cudrv::managed_memory_resource managed_mr(d1);
  CHECK(managed_mr.properties() == cudrv::memory_properties{1, true, true});
  auto* m = static_cast<int*>(managed_mr.allocate(sizeof(int)));
  *m = 5;
  CHECK(f.counter("managed_allocations") == 1);
  managed_mr.deallocate(m, sizeof(int));
  CHECK_FALSE(f.is_live(reinterpret_cast<CUdeviceptr>(m)));
  CHECK_FALSE(managed_mr == device_mr);
  CHECK(cudrv::test::raw_current_context() == nullptr);

  // Through the interface, as a framework's allocator would hold them.
  cudrv::memory_resource* any[] = {&device_mr, &pinned_mr, &managed_mr};
  for (cudrv::memory_resource* mr : any) {
    void* r = mr->allocate(128);
    CHECK(r != nullptr);
    mr->deallocate(r, 128);
  }
  CHECK(f.counter("primary_retain:0") == 0);
  CHECK(reports.reports == 0);
}

TEST_CASE("fake driver: the default stream-ordered free frees after a host callable on the stream failed",
          "[fake-driver][resource]") {
  fake_driver f;
  report_counter reports;
  const cudrv::device d1(1);
  cudrv::stream s(d1);
  cudrv::device_memory_resource mr(d1);
  void* p = mr.allocate_async(64, s);
  s.enqueue([] { throw std::runtime_error("a callable on the stream failed"); });
  mr.deallocate_async(p, 64, s);  // synchronises s (which completed), reports the failure, frees
  CHECK_FALSE(f.is_live(reinterpret_cast<CUdeviceptr>(p)));
  CHECK(reports.reports == 1);
  CHECK_NOTHROW(s.synchronize());  // the failure was taken by the free, once
}

TEST_CASE("fake driver: memory of a resource whose context was destroyed first is not freed again",
          "[fake-driver][resource]") {
  fake_driver f;
  report_counter reports;
  const cudrv::device d1(1);
  std::optional<cudrv::context> ctx(std::in_place, d1);
  cudrv::device_memory_resource mr(*ctx);
  CHECK(mr.properties().device_ordinal == 1);
  void* p = mr.allocate(32);
  ctx.reset();  // frees p with the context
  cudrv::context again(d1);
  cudrv::device_buffer<char> fresh(again, 32);
  REQUIRE(reinterpret_cast<void*>(fresh.data()) == p);  // the driver handed the address out again
  mr.deallocate(p, 32);
  CHECK(f.is_live(fresh.data()));
  CHECK(reports.outlived == 1);
}

TEST_CASE("fake driver: the pool memory resource allocates stream-ordered, natively", "[fake-driver][resource]") {
  fake_driver f;
  report_counter reports;
  const cudrv::device d1(1);
  cudrv::stream s(d1);
  cudrv::memory_pool pool(d1);
  cudrv::pool_memory_resource mr(pool);
  CHECK(mr.pool() == pool);
  CHECK(mr.sync_stream() == d1.default_stream());
  CHECK(mr.properties() == cudrv::memory_properties{1, true, false});
  log_since log(f);

  void* p = mr.allocate_async(4096, s);
  CHECK(contains(log.text(), "alloc_from_pool " + text_of(p) + " pool " + text_of(pool.native_handle()) + " on " +
                                 text_of(s.native_handle())));
  mr.deallocate_async(p, 4096, s);
  CHECK(contains(log.text(), "free_async " + text_of(p) + " on " + text_of(s.native_handle())));

  // Synchronous calls: on the default stream of the pool's device.
  const std::string on_default = " on " + text_of(d1.default_stream().native_handle());
  void* q = mr.allocate(100);
  CHECK(contains(log.text(), "alloc_from_pool " + text_of(q) + " pool " + text_of(pool.native_handle()) + on_default));
  mr.deallocate(q, 100);
  CHECK(contains(log.text(), "free_async " + text_of(q) + on_default));
  CHECK_THROWS_AS((void)mr.allocate_async(64, 1024, s), cudrv::invalid_argument_error);

  // Equality follows the pool.
  cudrv::pool_memory_resource same(pool, s);
  CHECK(same == mr);
  cudrv::memory_pool other(d1);
  CHECK_FALSE(cudrv::pool_memory_resource(other) == mr);
  CHECK_FALSE(mr == cudrv::device_memory_resource(d1));

  // A host pool names no device: synchronous calls need a stream.
  cudrv::memory_pool host_pool(cudrv::memory_location::host());
  auto e = catch_as<cudrv::invalid_argument_error>([&] { cudrv::pool_memory_resource r(host_pool); });
  REQUIRE(e);
  CHECK(contains(e->what(), "pool_memory_resource(pool, stream)"));
  cudrv::pool_memory_resource host_mr(host_pool, s);
  CHECK(host_mr.properties() == cudrv::memory_properties{-1, true, true});
  auto* h = static_cast<float*>(host_mr.allocate(8 * sizeof(float)));
  h[7] = 1.5f;  // usable by the host once allocate returns
  host_mr.deallocate(h, 8 * sizeof(float));
  CHECK(contains(log.text(), "free_async " + text_of(h) + " on " + text_of(s.native_handle())));

  // A pool whose location is unknown is refused.
  auto bare = catch_as<cudrv::invalid_argument_error>(
      [&] { cudrv::pool_memory_resource r(cudrv::memory_pool_ref(pool.native_handle()), s); });
  REQUIRE(bare);
  CHECK(contains(bare->what(), "unknown"));
  s.synchronize();
  CHECK(f.counter("primary_retain:0") == 0);
  CHECK(reports.reports == 0);
}
