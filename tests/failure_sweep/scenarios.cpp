// The failure sweep's scenarios: each is what a user of one part of cudrv's public API would write,
// against the stand-in driver (two devices; device 0 is taken by another process, so everything runs on
// device 1, compute capability 9.0). A scenario owns every object it makes, and they are all destroyed
// when it returns or throws; it catches nothing, so that an injected failure surfaces as it would in a
// user's program. Run unarmed, each must complete and leave only what cudrv keeps for the process.
#include "failure_sweep/scenarios.hpp"

#include <cudrv/cudrv.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace cudrv::sweep {
namespace {

constexpr std::size_t MiB = std::size_t{1} << 20;

const cudrv::device& dev() {
  static const cudrv::device d(1);
  return d;
}

// A user's check: the scenarios verify what they read back, so that a failure that is swallowed and
// leaves wrong data behind would not go unnoticed. std::logic_error is no cudrv::error: the sweep reports
// it as an unexpected exception.
void expect(bool condition, const char* what) {
  if (!condition) {
    throw std::logic_error(what);
  }
}

// Whether the calling thread has no context current, asked as a user would who calls the driver next to
// cudrv.
bool no_context_current() {
  auto get = reinterpret_cast<CUresult (*)(CUcontext*)>(cudrv::driver::get_entry_point("cuCtxGetCurrent", 4000));
  CUcontext ctx = nullptr;
  if (const CUresult status = get(&ctx); status != CUDA_SUCCESS) {
    throw cudrv::error(status, "cuCtxGetCurrent (scenario)");
  }
  return ctx == nullptr;
}

// PTX as the stand-in driver reads it: two kernels and their parameters (no code runs), for sm_90.
cudrv::object_code kernels_ptx() {
  return cudrv::object_code(cudrv::code_kind::ptx,
                            ".version 8.0\n.target sm_90\n.address_size 64\n"
                            ".global .align 4 .b32 counter;\n"
                            ".visible .entry scale(.param .u64 x, .param .f32 a, .param .u32 n)\n{\n  ret;\n}\n"
                            ".visible .entry touch(.param .u64 p)\n{\n  ret;\n}\n",
                            "sweep.ptx");
}

cudrv::jit_options jit_options_lazy() {
  cudrv::jit_options o;
  o.eager = false;  // the driver's lazy loading: each context loads the code at its first use
  return o;
}

// --- devices and contexts ------------------------------------------------------------------------------

// The first cudrv calls of a process: loading the driver, listing devices, retaining device 1's primary
// context (which sets its default pool's release threshold) and making its default stream. Run without
// the warm-up the other scenarios get.
void first_use() {
  (void)cudrv::driver::available();  // noexcept: false when the driver could not be loaded (no memory included)
  expect(cudrv::device_count() == 2, "two devices");
  const cudrv::device d(1);
  expect(!d.name().empty(), "a name");
  expect(d.compute_capability().as_int() == 90, "sm_90");
  expect(d.total_memory() > 0, "memory");
  (void)d.primary_context();
  expect(d.primary_context_active(), "active");
  d.default_stream().synchronize();
  expect(d.free_memory() > 0, "free memory");
  d.synchronize();
}

void device_queries() {
  const cudrv::device d = dev();
  expect(d.arch() == "sm_90", "arch");
  expect(d.attribute(cudrv::device_attributes::multiprocessor_count) == 100, "SMs");
  expect(cudrv::devices().size() == 2, "device range");
  (void)d.primary_context_flags();
  const cudrv::context_ref ctx = d.primary_context();
  expect(ctx.device() == d, "primary context device");
  ctx.synchronize();
  {
    cudrv::context_guard guard(ctx);
    expect(cudrv::device::current() == d, "current device");
  }
  {
    cudrv::context_guard restore(ctx);  // what set_current changes, the guard puts back
    d.set_current();
  }
  expect(cudrv::memory_location::nearest_host_numa(d).numa_node() == 1, "NUMA node");
}

// device::reset_primary_context, the recovery from a sticky fault: the default stream made before is gone
// with the context, and the device works again.
void primary_context_reset() {
  const cudrv::device d = dev();
  {
    cudrv::stream s(d);
    cudrv::device_buffer<int> b(s, 16);
    s.synchronize();
  }
  d.default_stream().synchronize();
  d.reset_primary_context();
  cudrv::stream s(d);
  cudrv::device_buffer<int> b(s, 16);
  d.default_stream().synchronize();
  s.synchronize();
}

void contexts() {
  const cudrv::device d = dev();
  cudrv::context ctx(d);  // destroyed last: everything made in it goes first
  expect(no_context_current(), "creating a context leaves the caller's context current");
  expect(ctx.device() == d, "context device");
  cudrv::stream s(ctx);
  cudrv::event e(ctx);
  cudrv::device_buffer<int> b(ctx, 64);
  std::vector<int> host(64, 3);
  cudrv::copy(b, host, s);
  e.record(s);
  s.synchronize();
  ctx.synchronize();
  cudrv::primary_context retained(d);
  expect(retained.native_handle() == d.primary_context().native_handle(), "primary handle");
  {
    cudrv::context_guard guard(ctx);
    cudrv::device_buffer<int> current(cudrv::context_ref::current(), 16);
  }
  cudrv::context spare(d);
  cudrv::context moved = std::move(spare);
  moved.reset();
}

// --- streams and events ---------------------------------------------------------------------------------

void streams() {
  const cudrv::device d = dev();
  cudrv::stream s(d);
  cudrv::stream urgent(d, {.priority = -1});
  expect(urgent.priority() == -1, "priority");
  expect(s.is_non_blocking(), "non-blocking");
  expect(s.id() != urgent.id(), "ids");
  expect(s.context() == d.primary_context(), "context");
  expect(s.device() == d, "device");
  cudrv::event marker = s.record();
  urgent.wait(marker);
  urgent.wait(s);
  int ran = 0;
  s.enqueue([&ran] { ++ran; });
  s.synchronize();
  expect(ran == 1, "host callable ran");
  expect(s.is_done(), "done");
  urgent.synchronize();
  cudrv::stream adopted = cudrv::stream::from_native_handle(cudrv::stream(d).release());
  adopted.synchronize();
  cudrv::stream_ref legacy = cudrv::stream_ref::legacy_default();
  (void)legacy;
}

// A callable that keeps a buffer alive until it has run (freed with it on cudrv's disposal thread), and
// says when it is gone.
struct keeps_buffer {
  cudrv::device_buffer<int> buffer;
  std::string label;
  std::atomic<bool>* gone;
  void operator()() const { (void)buffer.size(); }
  keeps_buffer(cudrv::device_buffer<int> b, std::string l, std::atomic<bool>* g)
      : buffer(std::move(b)), label(std::move(l)), gone(g) {}
  keeps_buffer(keeps_buffer&& other) noexcept
      : buffer(std::move(other.buffer)), label(std::move(other.label)), gone(std::exchange(other.gone, nullptr)) {}
  keeps_buffer(const keeps_buffer&) = delete;
  keeps_buffer& operator=(const keeps_buffer&) = delete;
  keeps_buffer& operator=(keeps_buffer&&) = delete;
  ~keeps_buffer() {
    buffer.reset();
    if (gone != nullptr) {
      gone->store(true);
    }
  }
};

// A host callable that keeps a buffer alive, and one that throws: the buffer is freed on cudrv's
// disposal thread, the exception comes back from synchronize. The scenario waits until the first
// callable is gone before its next driver call, so that the disposal thread's calls come at the same
// place in every run (the sweep numbers the calls of all threads in the order they reach the driver).
void host_callables() {
  const cudrv::device d = dev();
  cudrv::stream s(d);
  std::atomic<bool> gone{false};
  s.enqueue(keeps_buffer(cudrv::device_buffer<int>(d, 16), "a label long enough to allocate", &gone));
  for (int i = 0; i < 20000 && !gone.load(); ++i) {  // at most about 20 s
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  s.synchronize();
  s.enqueue([] { throw std::runtime_error("a failing host callable"); });
  bool thrown = false;
  try {
    s.synchronize();
  } catch (const cudrv::host_callback_error& e) {
    thrown = e.original() != nullptr;
  }
  expect(thrown, "host_callback_error");
}

void events() {
  const cudrv::device d = dev();
  cudrv::stream s(d);
  cudrv::event start(d, cudrv::event_flags::timing);
  cudrv::event stop(d.primary_context(), cudrv::event_flags::timing);
  start.record(s);
  s.record(stop);
  stop.synchronize();
  expect(stop.is_done(), "done");
  expect(cudrv::elapsed_time(start, stop).count() >= 0.0f, "elapsed");
  expect(start.context() == d.primary_context(), "context");
  {
    cudrv::context_guard current(d.primary_context());  // the legacy default stream stands for it
    cudrv::event on_legacy(d);
    on_legacy.record(cudrv::stream_ref::legacy_default());
    s.wait(on_legacy);
    expect(on_legacy.is_done(), "legacy event done");
  }
  cudrv::event moved = std::move(start);
  moved.reset();
}

// issue 37: events recycled by a pool, one outliving the pool object, one in a created context.
void event_pools() {
  const cudrv::device d = dev();
  cudrv::stream s(d);
  std::optional<cudrv::event_pool> pool(std::in_place, d, cudrv::event_flags::timing);
  pool->reserve(2);
  {
    cudrv::pooled_event start = pool->acquire();
    cudrv::pooled_event stop = pool->acquire();
    start.record(s);
    stop.record(s);
    stop.synchronize();
    expect(cudrv::elapsed_time(start, stop).count() >= 0.0f, "elapsed");
  }
  cudrv::pooled_event out = pool->acquire();
  pool.reset();  // the idle event goes now, out's when it is given back
  out.record(s);
  out.reset();
  cudrv::context ctx(d);
  cudrv::stream theirs(ctx);
  cudrv::event_pool mine(ctx);
  cudrv::pooled_event e = mine.acquire();
  e.record(theirs);
  theirs.synchronize();
}

// --- memory ---------------------------------------------------------------------------------------------

void device_buffers() {
  const cudrv::device d = dev();
  cudrv::stream s(d);
  cudrv::stream other(d);
  std::vector<float> host(256, 1.5f);
  std::vector<float> back(256, 0.0f);

  cudrv::device_buffer<float> plain(d, host.size());
  cudrv::copy(plain, host);
  cudrv::copy(back, plain);
  expect(back == host, "synchronous round trip");

  cudrv::device_buffer<float> ordered(s, host.size());
  cudrv::copy(ordered, plain, s);
  cudrv::fill(ordered.view().first(8), 2.0f, s);
  cudrv::copy(back, ordered, s);
  s.synchronize();
  expect(back[7] == 2.0f && back[8] == 1.5f, "stream-ordered round trip");
  cudrv::fill(plain, 0.25f);
  cudrv::copy(back, plain, 4);
  expect(back[0] == 0.25f, "fill");

  ordered.set_stream(other);
  cudrv::device_buffer<std::uint16_t> halves(other, 32);
  cudrv::fill(halves, std::uint16_t{7}, other);
  cudrv::device_buffer<std::uint8_t> bytes(d.primary_context(), 32);
  cudrv::fill(bytes, std::uint8_t{1});
  expect(ordered.properties().device_accessible, "properties");
  expect(cudrv::get_pointer_attributes(ordered.data()).device_ordinal == 1, "pointer attributes");
  ordered.reset(other);
  other.synchronize();
  {
    // The legacy default stream stands for the current context, which the buffer remembers.
    cudrv::context_guard current(d.primary_context());
    const cudrv::stream_ref legacy = cudrv::stream_ref::legacy_default();
    cudrv::device_buffer<int> on_legacy(legacy, 16);
    cudrv::fill(on_legacy, 3, legacy);
    legacy.synchronize();
  }
  cudrv::device_buffer<float> moved = std::move(plain);
  const std::size_t n = moved.size();
  auto adopted = cudrv::device_buffer<float>::from_native_handle(moved.release(), n, d.primary_context());
  adopted.reset();
}

void pitched_copies() {
  const cudrv::device d = dev();
  cudrv::stream s(d);
  cudrv::device_buffer<int> src(d, 8 * 8);
  cudrv::device_buffer<int> dst(d, 16 * 8 * 2);
  std::vector<int> host(8 * 8, 5);
  cudrv::copy(src, host);
  const auto from = cudrv::pitched_span<const int>::dense(src.view(), 8, 8);
  const cudrv::pitched_span<int> to{dst.data(), 16 * sizeof(int), 16, 8, 1};
  cudrv::copy(to, from, s);
  const auto volume = cudrv::pitched_span<const int>::dense(src.view(), 4, 4, 4);
  const cudrv::pitched_span<int> into{dst.data(), 16 * sizeof(int), 16, 4, 4};
  cudrv::copy(into, volume, s);
  s.synchronize();
}

void pinned_and_managed() {
  const cudrv::device d = dev();
  cudrv::stream s(d);
  cudrv::pinned_buffer<int> pinned(d, 64);
  pinned.data()[0] = 9;
  cudrv::device_buffer<int> dev_copy(s, 64);
  cudrv::copy(dev_copy, pinned, s);
  cudrv::managed_buffer<int> managed(d, 64);
  managed.data()[0] = 4;
  managed.prefetch(cudrv::memory_location(d), s);
  managed.advise(CU_MEM_ADVISE_SET_PREFERRED_LOCATION, cudrv::memory_location::host());
  s.synchronize();
  expect(managed.properties().host_accessible, "managed is host accessible");
  cudrv::pinned_buffer<int> moved = std::move(pinned);
  moved.reset();
}

void memory_pools() {
  const cudrv::device d = dev();
  cudrv::stream s(d);
  cudrv::memory_pool pool(d);
  pool.set_release_threshold(MiB);
  expect(pool.release_threshold() == MiB, "threshold");
  cudrv::device_buffer<double> a(pool, s, 1000);
  cudrv::device_buffer<double> b(pool, s, 10);
  expect(pool.used_current() >= 8080, "used");
  (void)pool.reserved_current();
  a.reset();
  pool.trim_to(0);
  pool.set_access(d);
  expect(pool.access(d) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE, "access");
  const cudrv::memory_pool_ref def = cudrv::default_memory_pool(d);
  (void)def.release_threshold();
  expect(cudrv::current_memory_pool(d) == def, "current pool");
  cudrv::memory_pool host_pool(cudrv::memory_location::host());
  cudrv::host_accessible_pool_buffer<int> staging(host_pool, s, 32);
  staging.data()[0] = 1;
  cudrv::memory_pool managed = cudrv::memory_pool::managed(d);
  cudrv::device_buffer<int> m(managed, s, 16);
  cudrv::memory_pool near(cudrv::memory_location::nearest_host_numa(d));
  cudrv::host_accessible_pool_buffer<double> numa(near, s, 8);
  cudrv::memory_pool anywhere = cudrv::memory_pool::managed();
  cudrv::device_buffer<char> a_bit(anywhere, s, 100);
  s.synchronize();
}

void graph_memory() {
  const cudrv::device d = dev();
  const cudrv::graph_memory_usage usage = cudrv::graph_memory(d);
  expect(usage.used_current <= usage.reserved_current, "usage");
  cudrv::reset_graph_memory_high_watermarks(d);
  cudrv::trim_graph_memory(d);
}

void memory_resources() {
  const cudrv::device d = dev();
  cudrv::stream s(d);
  cudrv::device_memory_resource device_mr(d);
  cudrv::pinned_memory_resource pinned_mr(d);
  cudrv::managed_memory_resource managed_mr(d);
  cudrv::memory_pool pool(d);
  cudrv::pool_memory_resource pool_mr(pool);
  cudrv::memory_resource* all[] = {&device_mr, &pinned_mr, &managed_mr, &pool_mr};
  for (cudrv::memory_resource* mr : all) {
    cudrv::resource_buffer kept(*mr, 512);        // allocate; deallocate when it goes (never throws)
    cudrv::resource_buffer ordered(*mr, 256, s);  // allocate_async on s
    ordered.reset(s);                             // deallocate_async on s
  }
  s.synchronize();
}

// --- IPC (the stand-in driver lets one process be producer and consumer) ------------------------------------

void ipc_pools() {
  const cudrv::device d = dev();
  cudrv::stream s(d);
  cudrv::memory_pool pool = cudrv::make_shareable_memory_pool(d, cudrv::shareable_handle_type::posix_file_descriptor);
  cudrv::device_buffer<float> data(pool, s, 1000);
  const cudrv::pointer_export exported = cudrv::export_pointer(data);
  cudrv::file_descriptor fd = cudrv::export_pool_descriptor(pool);
  // The consumer's side.
  cudrv::imported_memory_pool imported(d, fd);
  fd.reset();
  cudrv::imported_buffer<float> view = imported.import_pointer<float>(exported);
  expect(view.size() == 1000, "imported size");
  imported.reset();  // the imported buffer keeps the pool
  view.reset();
  data.reset();
  s.synchronize();
}

void ipc_legacy() {
  const cudrv::device d = dev();
  cudrv::device_buffer<double> data(d, 100);
  const cudrv::ipc_memory_handle h = cudrv::ipc_handle(data);
  cudrv::ipc_mapped_buffer<double> mapped(d, h);
  expect(mapped.size() == 100, "mapped size");
  cudrv::ipc_mapped_buffer<double> moved = std::move(mapped);
  moved.reset();
}

// --- batched copies and stream memory operations ---------------------------------------------------------

void batched_copies() {
  const cudrv::device d = dev();
  cudrv::stream s(d);
  std::vector<cudrv::device_buffer<int>> src;
  std::vector<cudrv::device_buffer<int>> dst;
  for (int i = 0; i < 3; ++i) {
    src.emplace_back(d, 64);
    dst.emplace_back(d, 64);
  }
  cudrv::batch_copy batch;
  batch.add(dst[0], src[0]).add(dst[1], src[1]);
  batch.add(dst[2], src[2], 10, {.order = cudrv::source_access_order::during_api_call});
  expect(cudrv::copy(batch, s) == cudrv::batch_copy_path::driver_batch, "batch path");
  expect(cudrv::copy(batch, s, cudrv::batch_copy_mode::fallback_loop) == cudrv::batch_copy_path::fallback_loop,
         "loop path");
  cudrv::batch_copy_3d batch3;
  batch3.add(cudrv::pitched_span<int>::dense(dst[0].view(), 8, 4, 2),
             cudrv::pitched_span<const int>::dense(src[0].view(), 8, 4, 2));
  (void)cudrv::copy(batch3, s);
  (void)cudrv::copy(batch3, s, cudrv::batch_copy_mode::fallback_loop);
  s.synchronize();
}

// A batch that lives on after an add failed (host memory ran out): the add must leave it exactly as it was
// (the strong guarantee), so that later adds and both enqueue paths see consistent arrays. Copies alternate
// between two attribute sets, so that each add starts a new attribute group, where a failure between the
// group's two appends used to leave an attribute without its first copy (issue 30, 8).
void batch_copy_reuse() {
  const cudrv::device d = dev();
  cudrv::stream s(d);
  cudrv::device_buffer<int> src(d, 64);
  cudrv::device_buffer<int> dst(d, 64);
  const cudrv::copy_attributes during{.order = cudrv::source_access_order::during_api_call};
  auto consistent = [](const cudrv::batch_copy& b) {
    const auto idx = b.attribute_indices();
    if (idx.size() != b.attributes().size() || (b.empty() != idx.empty()) || (!idx.empty() && idx[0] != 0)) {
      return false;
    }
    for (std::size_t k = 0; k < idx.size(); ++k) {
      if (idx[k] >= b.size() || (k > 0 && idx[k] <= idx[k - 1])) {
        return false;
      }
    }
    return b.destinations().size() == b.size() && b.sources().size() == b.size();
  };
  cudrv::batch_copy batch;
  for (std::size_t i = 0; i < 24; ++i) {
    const std::size_t copies = batch.size();
    const std::size_t groups = batch.attributes().size();
    try {
      batch.add(dst.view().subspan(i, 1), src.view().subspan(i, 1), i % 2 == 0 ? cudrv::copy_attributes{} : during);
    } catch (const std::bad_alloc&) {
      expect(batch.size() == copies && batch.attributes().size() == groups, "a failed add changed the batch");
    }
    expect(consistent(batch), "the batch's attribute groups are inconsistent");
  }
  if (!batch.empty()) {
    (void)cudrv::copy(batch, s);
    (void)cudrv::copy(batch, s, cudrv::batch_copy_mode::fallback_loop);
  }
  s.synchronize();
}

void stream_memory_ops() {
  const cudrv::device d = dev();
  cudrv::stream s(d);
  cudrv::device_buffer<std::uint32_t> flag(d, 2);
  cudrv::device_buffer<std::uint64_t> wide(d, 1);
  expect(cudrv::query_stream_memory_op_support(d).wait_write_64, "64-bit operations");
  cudrv::write_value(s, flag.view(), 7u);
  cudrv::write_value(s, wide.view(), std::uint64_t{1} << 40);
  cudrv::wait_value(s, flag.view(), 7u, {.condition = cudrv::wait_condition::eq});
  cudrv::batch_memory_ops(s, {cudrv::stream_memory_op::wait(flag.view(), 3u),
                              cudrv::stream_memory_op::write(flag.view().subspan(1), 9u),
                              cudrv::stream_memory_op::barrier(cudrv::memory_barrier_scope::device)});
  s.synchronize();
}

// --- virtual memory -------------------------------------------------------------------------------------

void virtual_memory() {
  const cudrv::device d = dev();
  const std::size_t g = cudrv::allocation_granularity(d, cudrv::granularity::minimum);
  cudrv::address_range range(4 * g);
  cudrv::physical_allocation mem(d, 2 * g);
  cudrv::memory_mapping low(range, 0, mem);
  cudrv::memory_mapping high(range, 2 * g, mem);
  range.set_access(0, 4 * g, std::array{cudrv::access_descriptor::for_device(d)});
  expect(high.access(d) == cudrv::access_rights::read_write, "access");
  low.set_access({cudrv::access_descriptor::for_device(d, cudrv::access_rights::read_only)});
  cudrv::physical_allocation shared(2 * g, {.location = cudrv::physical_location::on(d),
                                            .handle_types = cudrv::shareable_handle_types::posix_fd});
  cudrv::file_descriptor fd = shared.export_posix_fd();
  cudrv::physical_allocation imported = cudrv::physical_allocation::import_posix_fd(fd.native_handle(), shared.size());
  cudrv::address_range other(2 * g);
  cudrv::memory_mapping m(other, 0, imported);
}

void growable_buffers() {
  const cudrv::device d = dev();
  cudrv::growable_buffer<float> buf(d, 16 * MiB / sizeof(float), {.chunk_bytes = 4 * MiB});
  buf.grow_to(1);
  buf.grow_to(3 * 4 * MiB / sizeof(float) + 1);
  buf.shrink_to(4 * MiB / sizeof(float) + 1);
  buf.resize(10);
  buf.shrink_to_fit();
  cudrv::growable_buffer<int> shared(d, 8 * MiB / sizeof(int), {.chunk_bytes = 2 * MiB, .peers = {cudrv::device(0)}});
  shared.grow_to(3 * MiB / sizeof(int));
  cudrv::virtual_memory_resource mr(d);
  cudrv::resource_buffer vm(mr, MiB);
}

// --- arrays, textures, surfaces ---------------------------------------------------------------------------

void arrays_and_textures() {
  const cudrv::device d = dev();
  cudrv::stream s(d);
  std::vector<float> in(33 * 17, 2.0f);
  std::vector<float> out(in.size(), 0.0f);
  cudrv::array<float> a(d, cudrv::array_shape::two_d(33, 17));
  cudrv::copy(a, in, s);
  cudrv::copy(out, a, s);
  s.synchronize();
  expect(out == in, "array round trip");
  expect(a.query_description() == a.description(), "description");
  cudrv::texture_object t(a, {.filter = cudrv::filter_mode::linear});
  cudrv::array<float> rw(d, cudrv::array_shape::two_d(8, 8), cudrv::array_flags::surface_load_store);
  cudrv::surface_object surface(rw);
  cudrv::array<float> copy_of(d, cudrv::array_shape::two_d(33, 17));
  cudrv::copy(copy_of, cudrv::array_region{}, a, cudrv::array_region{}, s);
  cudrv::device_buffer<float4> lin(d, 256);
  cudrv::texture_object linear(lin);
  cudrv::texture_object pitched(cudrv::pitched_span<float4>{lin.data(), 16 * sizeof(float4), 16, 16, 1});
  cudrv::array<float> moved = std::move(rw);
  moved.reset();
}

void mipmapped_arrays() {
  const cudrv::device d = dev();
  cudrv::stream s(d);
  cudrv::mipmapped_array<float> m(d, cudrv::array_shape::two_d(16, 16), 3);
  std::vector<float> level1(8 * 8, 1.0f);
  cudrv::copy(m.level(1), level1, s);
  cudrv::texture_object t(m, {.normalized_coordinates = true});
  s.synchronize();
}

// --- code ----------------------------------------------------------------------------------------------

void libraries_and_launches() {
  const cudrv::device d = dev();
  cudrv::stream s(d);
  cudrv::device_buffer<float> x(s, 64);
  cudrv::library lazy(kernels_ptx());  // no context current: checked, loaded at first use
  cudrv::kernel k = lazy.get_kernel("scale");
  expect(k.parameter_count() == 3, "parameters");
  expect(k.name() == "scale", "name");
  (void)k.attributes(d);
  cudrv::launch(s, {.grid = 1, .block = 64}, k, x.get(), 2.0f, 64u);
  auto typed = lazy.get_kernel<void(float*, float, unsigned)>("scale");
  cudrv::launch(s, {.grid = 2, .block = 32}, typed, x.get(), 1.0f, 64u);
  expect(lazy.has_kernel("touch"), "has_kernel");
  expect(lazy.kernel_names().size() == 2, "kernel names");

  cudrv::library eager(kernels_ptx(), d);
  auto touch = eager.get_kernel<void(float*)>("touch");
  cudrv::launch(s, {.grid = 4, .block = 32}, touch, x.get());
  auto counter = eager.get_global<int>("counter", d);
  counter.write(1234);
  expect(counter.read() == 1234, "global");
  (void)eager.module(d.primary_context());
  s.synchronize();
  {
    cudrv::context ctx(d);
    cudrv::stream in_ctx(ctx);
    cudrv::library there(kernels_ptx(), ctx);
    cudrv::library lazier(kernels_ptx(), jit_options_lazy());
    cudrv::launch(in_ctx, {.grid = 1, .block = 32}, lazier.get_kernel("touch"), x.get());
    in_ctx.synchronize();
  }
  cudrv::kernel kept = cudrv::library(kernels_ptx()).get_kernel("touch");  // keeps its library
  cudrv::launch(s, {.grid = 1, .block = 1}, kept, x.get());
  s.synchronize();
}

void graphs() {
  const cudrv::device d = dev();
  cudrv::device_buffer<std::uint32_t> flag(d, 1);
  cudrv::graph g;
  auto first = g.add_empty();
  auto second = g.add_empty({first});
  (void)g.add_empty({first, second});
  cudrv::graph_builder b(g, d);
  (void)cudrv::wait_value(b, flag.view(), 1u);
  cudrv::write_value(b, flag.view(), 2u);
  cudrv::graph moved = std::move(g);
  moved.reset();
}

// --- issue 34 part 6: capture into an existing graph ----------------------------------------------------

// The fake captures no work: a node added to the graph while the capture runs stands for captured work.
// Ended, the capture leaves its node in the caller's graph; left without end_appended (the second
// scope), it removes it again. Neither destroys the caller's graph.
void graph_capture_into() {
  const cudrv::device d = dev();
  cudrv::stream s(d);
  cudrv::graph g;
  const cudrv::graph_node_ref first = g.add_empty();
  {
    cudrv::stream_capture capture(s, g, {first});
    (void)g.add_empty({first});
    const cudrv::appended_nodes added = capture.end_appended();
    expect(added.nodes.size() == 1, "one appended node");
  }
  {
    cudrv::stream_capture left(s, g, {first}, {cudrv::edge_data{}});
    (void)g.add_empty({first});
  }
}

// --- green contexts ------------------------------------------------------------------------------------

void green_contexts() {
  const cudrv::device d = dev();
  const cudrv::sm_split split = cudrv::sm_resource::of(d).split_by_count(16, 1);
  cudrv::green_context g(d, split.groups[0]);
  expect(cudrv::sm_resource::of(g.context()).sm_count() == split.groups[0].sm_count(), "SMs");
  cudrv::stream s = g.create_stream();
  expect(cudrv::green_context_of(s).has_value(), "green stream");
  cudrv::library lib(kernels_ptx());
  cudrv::device_buffer<int> buf(s, 64);
  cudrv::launch(s, {.grid = 1, .block = 32}, lib.get_kernel("touch"), buf.get());
  cudrv::event done = g.record();
  g.wait(done);
  g.synchronize();
  done.reset();
  (void)g.id();
  const cudrv::sm_split pair = cudrv::sm_resource::of(d).split_by_count(8, 2);
  cudrv::green_context both(d, pair.groups);
  const cudrv::green_context_ref view = both;
  expect(view.context() == both.context(), "a view's context");
  cudrv::stream t = both.create_stream({.priority = -1});
  t.synchronize();
}

// issue 34 parts 7 and 8: managed batches, advice and range attributes, notification subscriptions.
void managed_batches_and_notifications() {
  const cudrv::device d = dev();
  cudrv::stream s(d);
  cudrv::managed_buffer<int> a(d, 64);
  cudrv::managed_buffer<int> b(d, 32);
  cudrv::prefetch_batch batch;
  batch.add(a, d).add(b, cudrv::memory_location::host());
  (void)cudrv::prefetch(batch, s);
  (void)cudrv::prefetch(batch, s, cudrv::managed_batch_mode::fallback_loop);
  cudrv::discard_batch discards;
  discards.add(b);
  cudrv::discard(discards, s);
  cudrv::advise(a, cudrv::memory_advice::set_read_mostly);
  expect(cudrv::get_managed_range_attributes(a).read_mostly, "read mostly");
  cudrv::memory_pool pool(d);
  cudrv::async_notification_subscription trim = pool.trim_on_pressure(d);
  cudrv::async_notification_subscription watch(d, [](const cudrv::async_notification&) {});
  s.synchronize();
}

const scenario all_scenarios[] = {
    {"first_use", &first_use, true, true},
    {"device_queries", &device_queries, false, false},
    {"contexts", &contexts, false, false},
    {"primary_context_reset", &primary_context_reset, false, false},
    {"graph_capture_into", &graph_capture_into, false, false},  // issue 34 part 6
    {"streams", &streams, false, false},
    {"host_callables", &host_callables, false, false},
    {"events", &events, false, false},
    {"event_pools", &event_pools, false, false},  // issue 37
    {"device_buffers", &device_buffers, false, false},
    {"pitched_copies", &pitched_copies, false, false},
    {"pinned_and_managed", &pinned_and_managed, false, false},
    {"memory_pools", &memory_pools, false, false},
    {"graph_memory", &graph_memory, false, false},
    {"memory_resources", &memory_resources, false, false},
    {"ipc_pools", &ipc_pools, false, false},
    {"ipc_legacy", &ipc_legacy, false, false},
    {"batched_copies", &batched_copies, false, false},
    {"batch_copy_reuse", &batch_copy_reuse, false, true},
    {"stream_memory_ops", &stream_memory_ops, false, false},
    {"virtual_memory", &virtual_memory, false, false},
    {"growable_buffers", &growable_buffers, false, false},
    {"arrays_and_textures", &arrays_and_textures, false, false},
    {"mipmapped_arrays", &mipmapped_arrays, false, false},
    {"libraries_and_launches", &libraries_and_launches, false, false},
    {"graphs", &graphs, false, false},
    {"green_contexts", &green_contexts, false, false},
    // issue 34 parts 7 and 8
    {"managed_batches_and_notifications", &managed_batches_and_notifications, false, false},
};

}  // namespace

std::span<const scenario> scenarios() noexcept { return all_scenarios; }

void warm_up() { (void)dev().primary_context(); }

}  // namespace cudrv::sweep
