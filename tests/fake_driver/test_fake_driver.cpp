// Driver behaviour a machine without a GPU cannot show, against the stand-in driver of
// fake_cuda.cpp (loaded through CUDRV_LIBCUDA): two devices, device 0 of compute capability 8.0 and
// unavailable (another process holds it in exclusive mode), device 1 of 9.0; handles and device
// addresses reused after destruction; a callback thread on which CUDA calls are refused; pageable
// copies that land at the next synchronisation. Each case is a regression test of issue 13.
#include <catch2/catch.hpp>

#include <cudrv/cudrv.hpp>
#include <cudrv/rtc.hpp>

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "fake_driver/fake_hooks.hpp"
#include "support/test_support.hpp"

using cudrv::test::contains;

// --- allocation failure on demand (the noexcept audit) ----------------------------------------------
namespace {
thread_local bool fail_allocations = false;
}  // namespace

void* operator new(std::size_t size) {
  if (fail_allocations) {
    throw std::bad_alloc();
  }
  if (void* p = std::malloc(size != 0 ? size : 1)) {
    return p;
  }
  throw std::bad_alloc();
}
// The nothrow forms too: every form that pairs with the replaced delete must come from the same malloc
// (AddressSanitizer's own nothrow new would otherwise meet std::free: alloc-dealloc-mismatch).
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  return fail_allocations ? nullptr : std::malloc(size != 0 ? size : 1);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace {

// The fake's counters and log, and its count of live allocations.
struct fake : cudrv::test::fake_probe {
  long long live() const { return cudrv::test::fake_hook<long long()>("fake_cuda_live_allocations")(); }
};

// Counts what the destruction handler receives, for the scope.
struct handler_recorder {
  static inline std::atomic<int> reports{0};
  static inline std::atomic<int> outlived{0};
  static inline std::atomic<int> callback_failures{0};
  cudrv::destruction_error_handler previous;
  handler_recorder() {
    reports = 0;
    outlived = 0;
    callback_failures = 0;
    previous = cudrv::set_destruction_error_handler([](const cudrv::error& e) noexcept {
      ++reports;
      if (e.code() == CUDA_ERROR_CONTEXT_IS_DESTROYED && e.source() == cudrv::error_source::cudrv) {
        ++outlived;
      }
      if (dynamic_cast<const cudrv::host_callback_error*>(&e) != nullptr) {
        ++callback_failures;
      }
    });
  }
  ~handler_recorder() { cudrv::set_destruction_error_handler(previous); }
};

// PTX for sm_90 only, compiled by NVRTC: a kernel with three parameters and a global.
const cudrv::object_code& sm90_ptx() {
  static const cudrv::object_code code =
      cudrv::program(
          "fake.cu",
          "__device__ int value;\n"
          "extern \"C\" __global__ void scale(float* x, float a, int n) {\n"
          "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a + value; }\n"
          "extern \"C\" __global__ void a_kernel_whose_name_does_not_fit_a_short_string(int* p) { *p = 1; }\n")
          .compile(cudrv::code_kind::ptx, {.arch = "sm_90"})
          .code;
  return code;
}

}  // namespace

TEST_CASE("fake driver: no call retains device 0 or makes it current when nobody named it", "[fake-driver]") {
  fake f;
  REQUIRE(cudrv::device_count() == 2);

  // Code for sm_90 only, loaded with no context current: it is not loaded into device 0's context
  // (device 0 is an 8.0, and taken): before, this threw NO_BINARY_FOR_GPU or DEVICES_UNAVAILABLE.
  cudrv::library lib(sm90_ptx());
  cudrv::kernel k = lib.get_kernel("scale");
  CHECK(k.parameter_count() == 3);  // read from the PTX: no context needed
  auto typed = lib.get_kernel<void(float*, float, int)>("scale");

  // Work on device 1 only.
  cudrv::device d1(1);
  cudrv::stream s(d1);
  cudrv::device_buffer<float> x(s, 256);
  cudrv::launch(s, {.grid = 1, .block = 256}, k, x.get(), 2.0f, 256);
  cudrv::launch(s, {.grid = 1, .block = 256}, typed, x.get(), 2.0f, 256);
  s.synchronize();
  CHECK(f.counter("launches") == 2);

  // A library named for device 1 is loaded there now; one loaded for device 0 cannot be.
  cudrv::library eager(sm90_ptx(), d1);
  CHECK(f.counter("loaded_in:1") > 0);

  // Where a context is needed and none is named or current: a typed error, never device 0.
  cudrv::graph g;
  g.add_empty();
  auto e1 = cudrv::test::catch_as<cudrv::invalid_argument_error>([&] { (void)g.instantiate(); });
  REQUIRE(e1);
  CHECK(contains(e1->what(), "no context is current"));
  auto e2 = cudrv::test::catch_as<cudrv::invalid_argument_error>(
      [&] { (void)cudrv::program("k.cu", "extern \"C\" __global__ void k() {}").compile(cudrv::code_kind::ptx); });
  REQUIRE(e2);
  CHECK(contains(e2->what(), "differ"));
  cudrv::tiled_tensor_map_desc desc{.data_type = cudrv::tensor_map_data_type::float32,
                                    .rank = 1,
                                    .global_address = 0x7f0000000000ull,
                                    .global_dims = {1024},
                                    .box_dims = {32}};
  auto e3 = cudrv::test::catch_as<cudrv::invalid_argument_error>([&] { (void)cudrv::make_tiled_tensor_map(desc); });
  REQUIRE(e3);
  CHECK(contains(e3->what(), "context"));

  // A host-to-host synchronous copy needs no context at all.
  std::vector<int> a{1, 2, 3};
  std::vector<int> b(3, 0);
  cudrv::copy(b, a);
  CHECK(b == a);

  CHECK(f.counter("primary_retain:0") == 0);
  CHECK(f.counter("made_current:0") == 0);
  CHECK(f.counter("loaded_in:0") == 0);
  // No failing driver call in all of this (what compute-sanitizer's --error-exitcode would flag), and
  // no parameter query: the layouts came from the PTX.
  CHECK(f.counter("param_info_calls") == 0);
  CHECK(f.counter("failed_calls") == 0);
}

TEST_CASE("fake driver: a kernel keeps its library loaded", "[fake-driver]") {
  fake f;
  cudrv::device d1(1);
  cudrv::stream s(d1);
  cudrv::device_buffer<float> x(s, 64);
  const long long unloaded = f.counter("libraries_unloaded");
  SECTION("a kernel taken from a temporary library") {
    cudrv::kernel k = cudrv::library(sm90_ptx()).get_kernel("scale");
    CHECK(f.counter("libraries_unloaded") == unloaded);
    cudrv::launch(s, {.grid = 1, .block = 64}, k, x.get(), 1.0f, 64);  // the code is still loaded
    k.reset();
    CHECK(f.counter("libraries_unloaded") == unloaded + 1);
  }
  SECTION("a library moved over while its kernels are in use") {
    cudrv::library lib(sm90_ptx());
    cudrv::kernel k = lib.get_kernel("scale");
    lib = cudrv::library(sm90_ptx());
    CHECK(f.counter("libraries_unloaded") == unloaded);
    cudrv::launch(s, {.grid = 1, .block = 64}, k, x.get(), 1.0f, 64);
    CHECK(k.name() == "scale");
    lib.reset();  // the new library goes at once: no kernel of it remains
    CHECK(f.counter("libraries_unloaded") == unloaded + 1);
  }
  s.synchronize();
  CHECK(f.counter("failed_calls") == 0);
}

TEST_CASE("fake driver: a failure of a host callable is never thrown by another stream with the same handle",
          "[fake-driver]") {
  fake f;
  handler_recorder handler;
  cudrv::device d1(1);
  CUstream raw = nullptr;
  {
    cudrv::stream a(d1);
    a.enqueue([] { throw std::runtime_error("failure of the first stream"); });
    raw = a.release();  // another owner destroys it, after its work
  }
  auto sync = reinterpret_cast<CUresult (*)(CUstream)>(cudrv::driver::get_entry_point("cuStreamSynchronize", 2000));
  auto destroy = reinterpret_cast<CUresult (*)(CUstream)>(cudrv::driver::get_entry_point("cuStreamDestroy", 4000));
  REQUIRE(sync(raw) == CUDA_SUCCESS);
  REQUIRE(destroy(raw) == CUDA_SUCCESS);
  cudrv::stream b(d1);
  REQUIRE(b.native_handle() == raw);  // the driver handed the value out again
  CHECK_NOTHROW(b.synchronize());
  CHECK_NOTHROW(cudrv::stream_ref(raw).synchronize());
  CHECK(handler.callback_failures == 1);  // the failure went to the handler when its stream was given up

  // A view of an owned stream shares its failures; the owner rethrows them.
  cudrv::stream c(d1);
  cudrv::stream_ref view = c;
  view.enqueue([] { throw std::runtime_error("through a view"); });
  CHECK_THROWS_AS(c.synchronize(), cudrv::host_callback_error);
  CHECK_NOTHROW(c.synchronize());  // thrown once
}

TEST_CASE("fake driver: a callable that owns a buffer is destroyed off the callback thread", "[fake-driver]") {
  fake f;
  handler_recorder handler;
  cudrv::device d1(1);
  cudrv::stream s(d1);
  cudrv::device_buffer<int> ordered(s, 32);
  cudrv::device_buffer<int> plain(d1, 32);
  const CUdeviceptr a = ordered.data();
  const CUdeviceptr b = plain.data();
  bool ran = false;
  s.enqueue(
      [keep = std::move(ordered), also = std::move(plain), &ran] { ran = keep.size() == 32 && also.size() == 32; });
  s.synchronize();  // returns once the callable has run and been destroyed
  CHECK(ran);
  CHECK_FALSE(f.is_live(a));
  CHECK_FALSE(f.is_live(b));
  CHECK(f.counter("not_permitted") == 0);  // no CUDA call from the callback thread
  CHECK(handler.reports == 0);
}

TEST_CASE("fake driver: library::from_file takes the targets the constructors take", "[fake-driver]") {
  fake f;
  const std::string path =
      (std::filesystem::temp_directory_path() / ("cudrv-fake-from-file-" + std::to_string(::getpid()) + ".ptx"))
          .string();
  sm90_ptx().write_to_file(path);
  struct remove_file {
    std::string path;
    ~remove_file() { std::remove(path.c_str()); }
  } cleanup{path};
  auto text_of = [](CUcontext ctx) {
    char text[32];
    std::snprintf(text, sizeof(text), "%p", static_cast<void*>(ctx));
    return "library_load_in " + std::string(text) + "\n";
  };
  cudrv::device d1(1);
  cudrv::context own(d1);  // not d1's primary context: the two targets must not be confused
  REQUIRE(own.native_handle() != d1.primary_context().native_handle());
  const long long loads = f.counter("library_load_calls");
  const long long in0 = f.counter("loaded_in:0");
  const long long in1 = f.counter("loaded_in:1");

  // (path, options), no context current: loaded into no context.
  std::size_t mark = f.log().size();
  auto plain = cudrv::library::from_file(path, {.verbose = true});
  CHECK(plain.name() == path);
  CHECK(f.counter("library_load_calls") == loads + 1);
  CHECK(f.counter("loaded_in:1") == in1);
  CHECK_FALSE(contains(f.log().substr(mark), "library_load_in "));

  // (path, device, options): into the device's primary context, now.
  mark = f.log().size();
  auto on_device = cudrv::library::from_file(path, d1, {.eager = true});
  CHECK(contains(f.log().substr(mark), text_of(d1.primary_context().native_handle())));
  CHECK_FALSE(contains(f.log().substr(mark), text_of(own.native_handle())));
  const long long in1_after_device = f.counter("loaded_in:1");
  CHECK(in1_after_device > in1);

  // (path, context_ref, options): into that context, not the primary one.
  mark = f.log().size();
  auto in_context = cudrv::library::from_file(path, own);
  CHECK(contains(f.log().substr(mark), text_of(own.native_handle())));
  CHECK_FALSE(contains(f.log().substr(mark), text_of(d1.primary_context().native_handle())));
  CHECK(f.counter("loaded_in:1") > in1_after_device);

  // The same three, through the constructors, reach the same contexts.
  const auto code = cudrv::object_code::from_file(path);
  mark = f.log().size();
  cudrv::library c_device(code, d1);
  cudrv::library c_context(code, own);
  const std::string log = f.log().substr(mark);
  CHECK(contains(log, text_of(d1.primary_context().native_handle())));
  CHECK(contains(log, text_of(own.native_handle())));

  CHECK(f.counter("library_load_calls") == loads + 5);
  CHECK(f.counter("loaded_in:0") == in0);  // device 0 was never named
  // Each is usable: the kernel's layout came from the PTX.
  CHECK(on_device.get_kernel("scale").parameter_count() == 3);
  CHECK(in_context.get_kernel("scale").parameter_count() == 3);
}

TEST_CASE("fake driver: global_ref::write has landed when it returns", "[fake-driver]") {
  fake f;
  cudrv::device d1(1);
  cudrv::library lib(sm90_ptx(), d1);
  auto value = lib.get_global<int>("value", d1);
  value.write(1234);
  // The fake delays pageable copies until a synchronisation, as the driver may: read the device
  // memory directly (the fake's device memory is host memory).
  CHECK(*reinterpret_cast<const int*>(value.address()) == 1234);
  cudrv::stream s(d1);
  value.write(99, s);  // stream-ordered: the value is staged before the call returns
  s.synchronize();
  CHECK(*reinterpret_cast<const int*>(value.address()) == 99);
  CHECK(value.read() == 99);
}

TEST_CASE("fake driver: a stream outlives the stream-ordered buffers on it", "[fake-driver]") {
  fake f;
  handler_recorder handler;
  cudrv::device d1(1);
  const long long destroyed_before = f.counter("streams_destroyed");
  std::optional<cudrv::stream> s(std::in_place, d1);
  const CUstream raw = s->native_handle();
  cudrv::device_buffer<int> buf(*s, 64);
  const CUdeviceptr a = buf.data();
  s.reset();  // the owner goes first, as when a class declares the buffer before the stream
  CHECK(f.counter("streams_destroyed") == destroyed_before);
  const std::size_t log_before = f.log().size();
  buf = cudrv::device_buffer<int>(d1, 1);  // frees the first buffer on its stream, then the stream goes
  const std::string log = f.log().substr(log_before);
  const auto freed = log.find("free_async ");
  const auto destroyed = log.find("stream_destroy");
  REQUIRE(freed != std::string::npos);
  REQUIRE(destroyed != std::string::npos);
  CHECK(freed < destroyed);
  CHECK_FALSE(f.is_live(a));
  CHECK(f.counter("streams_destroyed") == destroyed_before + 1);
  CHECK(contains(
      log, "stream_destroy " + [&] {
        char text[32];
        std::snprintf(text, sizeof(text), "%p", static_cast<void*>(raw));
        return std::string(text);
      }()));
  CHECK(handler.reports == 0);
}

TEST_CASE("fake driver: objects that outlive their context free nothing and say so", "[fake-driver]") {
  fake f;
  handler_recorder handler;
  cudrv::device d1(1);
  std::optional<cudrv::context> ctx(std::in_place, d1);
  const CUcontext first = ctx->native_handle();
  std::optional<cudrv::device_buffer<int>> old(std::in_place, *ctx, 16);
  std::optional<cudrv::event> old_event(std::in_place, *ctx);
  std::optional<cudrv::stream> old_stream(std::in_place, *ctx);
  const CUdeviceptr address = old->data();
  ctx.reset();  // destroys the context, and with it the buffer, the event and the stream
  // The driver hands out the same context handle and the same address again.
  cudrv::context again(d1);
  REQUIRE(again.native_handle() == first);
  cudrv::device_buffer<int> fresh(again, 16);
  REQUIRE(fresh.data() == address);
  old.reset();  // must not free the new buffer at the same address in the new context
  old_event.reset();
  old_stream.reset();
  CHECK(f.is_live(address));
  CHECK(handler.outlived == 3);
}

TEST_CASE("fake driver: a failing launch under memory exhaustion throws, it does not terminate", "[fake-driver]") {
  fake f;
  cudrv::device d1(1);
  cudrv::stream s(d1);
  cudrv::library lib(sm90_ptx());
  // A name longer than a short string's inline buffer: copying it allocates.
  cudrv::kernel k = lib.get_kernel("a_kernel_whose_name_does_not_fit_a_short_string");
  cudrv::device_buffer<int> x(s, 4);
  bool threw = false;
  try {
    fail_allocations = true;  // every allocation fails from here: the error path must still throw
    cudrv::launch(s, {.grid = 1, .block = 2048}, k, x.get());  // refused by the fake
  } catch (const std::bad_alloc&) {
    threw = true;
  } catch (const cudrv::error&) {
    threw = true;
  }
  fail_allocations = false;
  CHECK(threw);
}

// Found by the failure sweep: the legacy default stream's failure sink was allocated on its first use,
// in a noexcept function, so that an allocation failure there terminated the program. (The sink exists
// for the rest of the process once made: this case checks its first use when run alone, as ctest does.)
TEST_CASE("fake driver: synchronizing the legacy default stream under memory exhaustion does not terminate",
          "[fake-driver]") {
  fake f;
  cudrv::device d1(1);
  cudrv::context_guard current(d1.primary_context());  // the legacy default stream stands for it
  const cudrv::stream_ref legacy = cudrv::stream_ref::legacy_default();
  bool threw = false;
  fail_allocations = true;  // every allocation fails from here
  try {
    legacy.synchronize();
  } catch (...) {
    threw = true;
  }
  fail_allocations = false;
  CHECK_FALSE(threw);  // it completes: nothing it cannot do without is allocated
}

TEST_CASE("fake driver: node dependencies reach the driver as the nodes' own handles", "[fake-driver]") {
  fake f;
  const long long seen = f.counter("graph_deps_seen");
  const long long bad = f.counter("graph_bad_deps");
  cudrv::graph g;
  std::vector<cudrv::graph_node_ref> roots;
  for (int i = 0; i < 5; ++i) {
    roots.push_back(g.add_empty());
  }
  CHECK(f.counter("graph_deps_seen") == seen);  // roots: no dependency array
  const cudrv::graph_node_ref join = g.add_empty(roots);
  CHECK(f.counter("graph_deps_seen") == seen + 5);
  (void)g.add_empty({join, roots[2]});
  CHECK(f.counter("graph_deps_seen") == seen + 7);
  CHECK(f.counter("graph_bad_deps") == bad);
  // Nodes of another graph are handed over as they are, and the driver can tell.
  cudrv::graph other;
  (void)other.add_empty({join});
  CHECK(f.counter("graph_bad_deps") == bad + 1);
}
