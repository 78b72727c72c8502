// GPU tier: the lifetimes and the context rule of issue 13 on a real device. Kernels keep their
// libraries loaded (also inside graphs, captured or built, and executables updated node by node);
// parameter layouts come from the images and equal the driver's; no context is retained that nobody
// named; a global written synchronously has landed; callables that own buffers free them off the
// callback thread; streams outlive their stream-ordered buffers; objects that outlive their context
// say so; and the conveniences found porting cuda.core's examples (record(), default streams,
// builders from a device or stream, reset, name expressions in one step, pool thresholds).
#include <catch2/catch.hpp>

#include <cudaTypedefs.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/memory_support.hpp"
#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;

namespace {

constexpr int n = 4099;

std::vector<float> floats(std::uint64_t seed) {
  auto raw = cudrv::test::random_vector<std::uint16_t>(n, seed);
  return std::vector<float>(raw.begin(), raw.end());
}

// c = a + b through `launch_it`, which queues the vector_add kernel on s; checks the result.
template <class Launch>
void check_vector_add(const cudrv::device& dev, cudrv::stream_ref s, Launch&& launch_it) {
  const auto seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  auto a = floats(seed);
  auto b = floats(seed + 1);
  cudrv::device_buffer<float> da(dev, n), db(dev, n), dc(dev, n);
  cudrv::copy(da, a);
  cudrv::copy(db, b);
  cudrv::fill(dc, -1.0f);  // poisoned
  launch_it(da.get(), db.get(), dc.get());
  s.synchronize();
  std::vector<float> c(n);
  cudrv::copy(c, dc);
  std::vector<float> expected(n);
  for (int i = 0; i < n; ++i) {
    expected[i] = a[i] + b[i];
  }
  CHECK(cudrv::test::mismatch(c, expected).empty());
}

const cudrv::launch_config config{.grid = (n + 255) / 256, .block = 256};

using add_t = void(const float*, const float*, float*, int);

// Instantiates g, destroys it, then launches the executable once on s and waits: what the graph's
// nodes need must be held by the executable alone.
void run_without_graph(cudrv::graph g, const cudrv::device& dev, cudrv::stream_ref s) {
  auto exec = g.instantiate(dev);
  g.reset();
  exec.launch(s);
  s.synchronize();
}

// The driver's own description of a kernel's parameters (a context current), for comparison.
std::vector<cudrv::kernel_parameter> driver_parameters(CUkernel k, cudrv::context_ref ctx) {
  auto info =
      reinterpret_cast<PFN_cuKernelGetParamInfo_v12040>(cudrv::driver::get_entry_point("cuKernelGetParamInfo", 12040));
  cudrv::context_guard guard(ctx);
  std::vector<cudrv::kernel_parameter> out;
  for (std::size_t i = 0;; ++i) {
    std::size_t offset = 0;
    std::size_t size = 0;
    if (info(k, i, &offset, &size) != CUDA_SUCCESS) {
      return out;
    }
    out.push_back({i, offset, size});
  }
}

bool same(const std::vector<cudrv::kernel_parameter>& a, const std::vector<cudrv::kernel_parameter>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
    return x.index == y.index && x.offset == y.offset && x.size == y.size;
  });
}

}  // namespace

TEST_CASE("a kernel keeps its library loaded after the library object is gone", "[gpu][lifetimes]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  cudrv::stream s(dev);
  cudrv::test::destruction_error_counter errors;
  SECTION("from a temporary library") {
    auto add = cudrv::library::from_file(CUDRV_TEST_KERNELS_CUBIN).get_kernel<add_t>("vector_add");
    check_vector_add(dev, s,
                     [&](const float* a, const float* b, float* c) { cudrv::launch(s, config, add, a, b, c, n); });
  }
  SECTION("a library moved over while its kernel is in use") {
    auto lib = cudrv::library::from_file(CUDRV_TEST_KERNELS_PTX);
    cudrv::kernel add = lib.get_kernel("vector_add");
    lib = cudrv::library::from_file(CUDRV_TEST_KERNELS_FATBIN);
    check_vector_add(dev, s,
                     [&](const float* a, const float* b, float* c) { cudrv::launch(s, config, add, a, b, c, n); });
  }
  CHECK(errors.count() == 0);
}

TEST_CASE("graphs and executables keep the libraries of their kernels loaded", "[gpu][lifetimes][graph]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  cudrv::stream s(dev);
  cudrv::test::destruction_error_counter errors;
  SECTION("a graph built with a builder") {
    check_vector_add(dev, s, [&](const float* a, const float* b, float* c) {
      cudrv::graph g;
      {
        auto add = cudrv::library::from_file(CUDRV_TEST_KERNELS_CUBIN).get_kernel<add_t>("vector_add");
        cudrv::graph_builder builder(g, dev);
        cudrv::launch(builder, config, add, a, b, c, n);
      }  // kernel and library objects gone: the graph holds the code
      auto exec = g.instantiate(dev);
      g.reset();
      exec.launch(s);
      s.synchronize();
    });
  }
  SECTION("a graph captured from a stream") {
    check_vector_add(dev, s, [&](const float* a, const float* b, float* c) {
      std::optional<cudrv::graph> g;
      {
        auto add = cudrv::library::from_file(CUDRV_TEST_KERNELS_FATBIN).get_kernel<add_t>("vector_add");
        cudrv::stream_capture capture(s);
        cudrv::launch(s, config, add, a, b, c, n);
        g.emplace(capture.end());
      }
      run_without_graph(std::move(*g), dev, s);
    });
  }
  SECTION("a kernel dropped before the capture ends") {
    check_vector_add(dev, s, [&](const float* a, const float* b, float* c) {
      std::optional<cudrv::graph> g;
      {
        cudrv::stream_capture capture(s);
        {
          auto add = cudrv::library::from_file(CUDRV_TEST_KERNELS_FATBIN).get_kernel<add_t>("vector_add");
          cudrv::launch(s, config, add, a, b, c, n);
        }  // the last reference goes while the capture runs: parked, not unloaded
        g.emplace(capture.end());
      }
      run_without_graph(std::move(*g), dev, s);
    });
  }
  SECTION("a library loaded after one that was released and unloaded by the caller") {
    // The released library is no longer cudrv's: its handle, which the driver may give to the next
    // library, must not lead a capture to the old bookkeeping.
    auto unload =
        reinterpret_cast<PFN_cuLibraryUnload_v12000>(cudrv::driver::get_entry_point("cuLibraryUnload", 12000));
    for (int round = 0; round < 3; ++round) {
      CUlibrary released = cudrv::library::from_file(CUDRV_TEST_KERNELS_CUBIN).release();
      REQUIRE(unload(released) == CUDA_SUCCESS);
      check_vector_add(dev, s, [&](const float* a, const float* b, float* c) {
        std::optional<cudrv::graph> g;
        {
          cudrv::stream_capture capture(s);
          cudrv::launch(s, config, cudrv::library::from_file(CUDRV_TEST_KERNELS_CUBIN).get_kernel<add_t>("vector_add"),
                        a, b, c, n);
          g.emplace(capture.end());
        }
        run_without_graph(std::move(*g), dev, s);
      });
    }
  }
  SECTION("an executable whose kernel node was set to a kernel of another library") {
    check_vector_add(dev, s, [&](const float* a, const float* b, float* c) {
      cudrv::graph g;
      auto first = cudrv::library::from_file(CUDRV_TEST_KERNELS_CUBIN).get_kernel<add_t>("vector_add");
      cudrv::graph_builder builder(g, s);
      auto node = cudrv::launch(builder, config, first, a, a, c, n);  // c = a + a, replaced below
      auto exec = g.instantiate(dev);
      {
        auto second = cudrv::library::from_file(CUDRV_TEST_KERNELS_PTX).get_kernel<add_t>("vector_add");
        exec.set_kernel_node(node, dev.primary_context(), config, second, a, b, c, n);
      }
      exec.launch(s);
      s.synchronize();
    });
  }
  CHECK(errors.count() == 0);
}

TEST_CASE("a child graph's node and a clone keep the source graph's libraries and host callables",
          "[gpu][lifetimes][graph]") {
  // cudrv hangs a graph's libraries and host callables on CUDA user objects of that graph. A child-graph
  // node holds the driver's copy of the child, and a clone is a copy too: the copies carry the user
  // objects' references (measured on driver 580.159.04), so nothing has to move them along. Here the
  // library, the kernel and the source graph are all gone before the copy is instantiated and replayed.
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  cudrv::stream s(dev);
  cudrv::test::destruction_error_counter errors;
  enum class copy_kind { child_node, clone };
  for (const copy_kind kind : {copy_kind::child_node, copy_kind::clone}) {
    INFO((kind == copy_kind::child_node ? "a child-graph node" : "a clone"));
    auto calls = std::make_shared<std::atomic<int>>(0);
    const std::weak_ptr<std::atomic<int>> watch = calls;
    std::atomic<int>* counter = calls.get();
    std::optional<cudrv::graph_exec> exec;
    check_vector_add(dev, s, [&](const float* a, const float* b, float* c) {
      std::optional<cudrv::graph> copy;
      {
        cudrv::graph source;
        {
          auto add = cudrv::library::from_file(CUDRV_TEST_KERNELS_CUBIN).get_kernel<add_t>("vector_add");
          cudrv::graph_builder builder(source, dev);
          cudrv::launch(builder, config, add, a, b, c, n);
          (void)source.add_host([owned = std::move(calls)] { owned->fetch_add(1); }, {builder.last()});
        }  // the library and kernel objects are gone: the source graph holds the code and the callable
        if (kind == copy_kind::child_node) {
          copy.emplace();
          (void)copy->add_child_graph(source);
        } else {
          copy.emplace(source.clone());
        }
      }  // the source graph is gone: only the copy holds them now
      // What the source graph's end released is released by now: the driver drops user objects
      // asynchronously, and cudrv unloads libraries and destroys callables on its disposal thread, which
      // a device synchronisation waits for.
      dev.synchronize();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      dev.synchronize();
      INFO("the host callable " << (watch.expired() ? "was destroyed" : "is alive") << " before the replay");
      CHECK_FALSE(watch.expired());
      exec.emplace(copy->instantiate(dev));  // a kernel of an unloaded library would fail here or at launch
      copy.reset();
      exec->launch(s);
    });
    CHECK(counter->load() == 1);  // the host node ran (the executable keeps the callable alive)
    exec.reset();
    dev.synchronize();
    CHECK(cudrv::test::wait_until([&] { return watch.expired(); }, std::chrono::seconds(5)));
  }
  CHECK(errors.count() == 0);
}

TEST_CASE("parameter layouts read from the images equal the driver's", "[gpu][lifetimes][library][driver_error]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  const auto ctx = dev.primary_context();
  for (const char* path : {CUDRV_TEST_KERNELS_CUBIN, CUDRV_TEST_KERNELS_PTX, CUDRV_TEST_KERNELS_FATBIN}) {
    INFO(path);
    auto lib = cudrv::library::from_file(path);
    for (const std::string& name : lib.kernel_names()) {
      INFO(name);
      cudrv::kernel k = lib.get_kernel(name);
      REQUIRE(k.cached_signature() != nullptr);
      CHECK(k.cached_signature()->parameters_known);
      CHECK(same(k.parameters(), driver_parameters(k.native_handle(), ctx)));
    }
  }
  // Code compiled by NVRTC and linked by nvJitLink at run time, with parameters of every size class.
  const std::string source = R"(
    struct odd { char c[3]; };
    struct alignas(16) wide { float x[5]; };
    struct big { int v[1000]; };
    extern "C" __global__ void mixed(char a, double b, odd c, wide d, short e, int* f, float g, unsigned long long h) {}
    extern "C" __global__ void large(int a, big b, char c) {}
    template <class T> __global__ void tmpl(T a, const T* b, int n) {}
  )";
  const auto arch = dev.arch();
  for (auto kind : {cudrv::code_kind::ptx, cudrv::code_kind::cubin}) {
    auto r = cudrv::program("params.cu", source).compile(kind, {.arch = arch}, {"tmpl<double>"});
    cudrv::library lib(r);
    for (const char* name : {"mixed", "large", "tmpl<double>"}) {
      INFO(name << " " << cudrv::to_string(kind));
      cudrv::kernel k = lib.get_kernel(name);  // the name expression in one step
      CHECK(k.cached_signature()->parameters_known);
      CHECK(same(k.parameters(), driver_parameters(k.native_handle(), ctx)));
    }
  }
  auto ltoir = cudrv::program("lto.cu", source).compile(cudrv::code_kind::ltoir, {.arch = arch});
  cudrv::linker linker({.arch = arch, .link_time_optimization = true});
  linker.add(ltoir.code);
  cudrv::library linked(linker.link());
  cudrv::kernel mixed = linked.get_kernel("mixed");
  CHECK(same(mixed.parameters(), driver_parameters(mixed.native_handle(), ctx)));
}

TEST_CASE("loading code and taking kernels retains no context", "[gpu][lifetimes][context]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  if (dev.primary_context_active()) {
    WARN("device 0's primary context is already active in this process (a whole-binary run): nothing to observe");
    return;
  }
  REQUIRE(cudrv::test::raw_current_context() == nullptr);
  cudrv::library lib = cudrv::library::from_file(CUDRV_TEST_KERNELS_CUBIN);
  cudrv::kernel k = lib.get_kernel("saxpy_sized");
  CHECK(k.parameter_count() == 4);
  CHECK(lib.has_kernel("vector_add"));
  CHECK(lib.kernel_names().size() > 3);
  CHECK(k.attribute(CU_FUNC_ATTRIBUTE_NUM_REGS, dev) > 0);
  CHECK(cudrv::test::raw_current_context() == nullptr);
  CHECK_FALSE(dev.primary_context_active());
  // Where a context is needed and none is named or current: a typed error.
  cudrv::graph g;
  (void)g.add_empty();
  auto e = catch_as<cudrv::invalid_argument_error>([&] { (void)g.instantiate(); });
  REQUIRE(e);
  CHECK(contains(e->what(), "no context is current"));
  CHECK_FALSE(dev.primary_context_active());
}

TEST_CASE("a global written synchronously has landed before the next launch on any stream", "[gpu][lifetimes]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  cudrv::library lib(cudrv::object_code::from_file(CUDRV_TEST_KERNELS_CUBIN), dev);
  auto scale = lib.get_global<float>("constant_scale", dev);
  auto k = lib.get_kernel<void(float*, int)>("scale_by_constant");
  cudrv::stream s(dev);  // non-blocking: not ordered after the legacy default stream
  cudrv::device_buffer<float> data(dev, n);
  std::vector<float> out(n);
  for (int round = 0; round < 20; ++round) {
    const float factor = 1.0f + static_cast<float>(round);
    cudrv::fill(data, 2.0f);
    scale.write(factor);  // returns once the value is in device memory
    cudrv::launch(s, config, k, data.get(), n);
    s.synchronize();
    cudrv::copy(out, data);
    CHECK(std::all_of(out.begin(), out.end(), [&](float v) { return v == 2.0f * factor; }));
    // The stream-ordered form, from a temporary.
    cudrv::fill(data, 3.0f, s);
    scale.write(factor + 0.5f, s);
    cudrv::launch(s, config, k, data.get(), n);
    s.synchronize();
    cudrv::copy(out, data);
    CHECK(std::all_of(out.begin(), out.end(), [&](float v) { return v == 3.0f * (factor + 0.5f); }));
  }
  CHECK(scale.read() == 20.5f);
}

TEST_CASE("a callable that owns a buffer frees it after it ran, off the callback thread", "[gpu][lifetimes][stream]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  cudrv::test::destruction_error_counter errors;
  cudrv::stream s(dev);
  cudrv::memory_pool pool(dev);
  {
    cudrv::device_buffer<int> ordered(pool, s, 1 << 20);
    cudrv::device_buffer<int> plain(dev, 1 << 20);
    cudrv::fill(ordered, 7, s);
    REQUIRE(pool.used_current() >= (std::size_t{1} << 22));
    std::atomic<bool> ran{false};
    s.enqueue([keep = std::move(ordered), also = std::move(plain), &ran] { ran = keep.size() > 0 && also.size() > 0; });
    s.synchronize();  // the callable ran and was destroyed: its buffers are freed
    CHECK(ran);
  }
  s.synchronize();
  CHECK(pool.used_current() == 0);
  CHECK(errors.count() == 0);
}

TEST_CASE("a stream outlives the stream-ordered buffers on it", "[gpu][lifetimes]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  cudrv::test::destruction_error_counter errors;
  {
    cudrv::memory_pool pool(dev);
    std::optional<cudrv::stream> s(std::in_place, dev);
    cudrv::device_buffer<int> buf(pool, *s, 1 << 20);
    cudrv::fill(buf, 1, *s);
    s.reset();  // the owner goes; the CUstream stays until the buffer is freed on it
    buf.reset();
    dev.synchronize();
    CHECK(pool.used_current() == 0);
    CHECK(errors.count() == 0);
  }
}

// Misuse on purpose: the context goes first, which frees its memory with it (compute-sanitizer counts
// that memory as leaked, and reports the failing id query that finds the context gone).
TEST_CASE("objects that outlive their context free nothing and say so", "[gpu][lifetimes][driver_error][misuse]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  cudrv::test::destruction_error_counter errors;
  {
    std::optional<cudrv::context> ctx(std::in_place, dev);
    std::optional<cudrv::device_buffer<int>> buf(std::in_place, *ctx, 1024);
    std::optional<cudrv::event> ev(std::in_place, *ctx);
    std::optional<cudrv::stream> st(std::in_place, *ctx);
    ctx.reset();
    buf.reset();
    ev.reset();
    st.reset();
    CHECK(errors.count() == 3);  // each said its context went first; nothing was freed twice
  }
}

TEST_CASE("conveniences: record(), default and current device, builders, reset, pools keep memory",
          "[gpu][lifetimes]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  cudrv::stream s(dev);
  // stream.record() makes the event.
  cudrv::event done = s.record();
  done.synchronize();
  CHECK(done.is_done());
  cudrv::event timed_start = s.record(cudrv::event_flags::timing);
  cudrv::event timed_stop = s.record(cudrv::event_flags::timing);
  timed_stop.synchronize();
  CHECK(cudrv::elapsed_time(timed_start, timed_stop).count() >= 0.0f);
  // The device's default stream, whatever is current.
  cudrv::stream_ref def = dev.default_stream();
  CHECK(def == dev.default_stream());
  CHECK(def.device() == dev);
  CHECK_FALSE(def.is_non_blocking());
  check_vector_add(dev, def, [&](const float* a, const float* b, float* c) {
    cudrv::launch(def, config, cudrv::library::from_file(CUDRV_TEST_KERNELS_CUBIN).get_kernel("vector_add"), a, b, c,
                  n);
  });
  // The current device.
  cudrv::test::raw_set_current_context(nullptr);  // whatever an earlier case left current
  CHECK(catch_as<cudrv::invalid_argument_error>([] { (void)cudrv::device::current(); }));
  {
    cudrv::context_guard guard(dev.primary_context());
    CHECK(cudrv::device::current() == dev);
  }
  // reset() on owners.
  cudrv::device_buffer<int> buf(s, 16);
  buf.reset(s);
  CHECK_FALSE(buf);
  cudrv::device_buffer<int> plain(dev, 16);
  plain.reset(s);
  CHECK_FALSE(plain);
  cudrv::event ev(dev);
  ev.reset();
  CHECK_FALSE(ev);
  cudrv::stream other(dev);
  other.reset();
  CHECK_FALSE(other);
  // Pools keep freed memory: cudrv's own and, once cudrv used the device, the default pool.
  cudrv::memory_pool pool(dev);
  CHECK(pool.release_threshold() == SIZE_MAX);
  CHECK(cudrv::default_memory_pool(dev).release_threshold() == SIZE_MAX);
  { cudrv::device_buffer<char> big(pool, s, std::size_t{64} << 20); }
  s.synchronize();
  CHECK(pool.reserved_current() >= (std::size_t{64} << 20));  // kept across the synchronisation
  pool.trim_to(0);
  CHECK(pool.reserved_current() == 0);
}
