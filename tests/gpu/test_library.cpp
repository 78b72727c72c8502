// GPU tier: loading code (PTX, cubin, fatbin; from memory and from files), kernels by name, globals,
// managed variables, kernel attributes, occupancy and parameter information, and every bad image.
// The images are the test kernels (tests/gpu/kernels/test_kernels.cu) built by nvcc at build time.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "support/memory_support.hpp"
#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;

namespace {

const char* const image_paths[] = {CUDRV_TEST_KERNELS_PTX, CUDRV_TEST_KERNELS_CUBIN, CUDRV_TEST_KERNELS_FATBIN};

// Runs vector_add from lib on random data and compares with the host.
void check_vector_add(const cudrv::library& lib, const cudrv::device& dev) {
  const int n = 10007;
  auto seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  auto a = cudrv::test::random_vector<std::uint16_t>(n, seed);
  auto b = cudrv::test::random_vector<std::uint16_t>(n, seed + 1);
  std::vector<float> fa(a.begin(), a.end());
  std::vector<float> fb(b.begin(), b.end());
  cudrv::stream s(dev);
  cudrv::device_buffer<float> da(dev, n), db(dev, n), dc(dev, n);
  cudrv::copy(da, fa);
  cudrv::copy(db, fb);
  cudrv::fill(dc, -1.0f);
  auto k = lib.get_kernel<void(const float*, const float*, float*, int)>("vector_add");
  cudrv::launch(s, {.grid = (n + 255) / 256, .block = 256}, k, da.get(), db.get(), dc.get(), n);
  s.synchronize();
  std::vector<float> out(n);
  cudrv::copy(out, dc);
  std::vector<float> expected(n);
  for (int i = 0; i < n; ++i) {
    expected[i] = fa[i] + fb[i];
  }
  CHECK(cudrv::test::mismatch(out, expected).empty());
}

std::size_t shared_bytes_per_block(int threads) { return static_cast<std::size_t>(threads) * sizeof(int); }

}  // namespace

TEST_CASE("libraries load from files and from memory: PTX, cubin, fatbin", "[gpu][library]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  for (const char* path : image_paths) {
    INFO(path);
    auto from_file = cudrv::library::from_file(path);
    CHECK(from_file.name() == path);
    check_vector_add(from_file, dev);
    auto code = cudrv::object_code::from_file(path);
    cudrv::library from_memory(code);
    check_vector_add(from_memory, dev);
  }
  // The kind can also be given explicitly.
  auto ptx = cudrv::object_code::from_file(CUDRV_TEST_KERNELS_PTX, cudrv::code_kind::ptx);
  CHECK(ptx.kind() == cudrv::code_kind::ptx);
  CHECK(contains(ptx.bytes(), ".entry vector_add"));
}

TEST_CASE("JIT options reach the driver and the info log is kept", "[gpu][library]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  // The driver caches JIT results on disk (~/.nv/ComputeCache) and writes no log for a cached
  // compile: a comment unique to this run makes the PTX new to the cache.
  auto file = cudrv::object_code::from_file(CUDRV_TEST_KERNELS_PTX);
  cudrv::object_code ptx(cudrv::code_kind::ptx,
                         file.bytes() + "\n// cudrv test run " + std::to_string(cudrv::test::test_seed()) + "\n",
                         file.name());
  // Loaded for the device: the JIT compiles now, in its primary context (with no context named or
  // current, the load would wait for the first use, and so would the log).
  cudrv::library verbose(ptx, dev, {.optimization_level = 3, .line_info = true, .verbose = true});
  INFO(verbose.jit_log());
  CHECK(contains(verbose.jit_log(), "registers"));
  // A register limit is honoured by the JIT.
  cudrv::library unlimited(ptx, dev);
  cudrv::library limited(ptx, dev, {.max_registers = 24});
  REQUIRE(unlimited.get_kernel("table_to_counter").attributes(dev).num_regs > 24);
  CHECK(limited.get_kernel("table_to_counter").attributes(dev).num_regs <= 24);
  // Compiling for the device's own target explicitly works too.
  auto cc = dev.compute_capability();
  cudrv::library targeted(ptx, dev, {.target = cc.as_int()});
  check_vector_add(targeted, dev);
  // Bad option values are refused before the driver is called.
  CHECK(catch_as<cudrv::invalid_argument_error>([&] { cudrv::library l(ptx, {.optimization_level = 7}); }));
  CHECK(catch_as<cudrv::invalid_argument_error>([&] { cudrv::library l(ptx, {.max_registers = 0}); }));
  CHECK(catch_as<cudrv::invalid_argument_error>([&] { cudrv::library l(ptx, {.target = 5}); }));
}

TEST_CASE("kernels by name: a missing name lists the kernels", "[gpu][library][driver_error]") {
  CUDRV_REQUIRE_GPU();
  auto lib = cudrv::library::from_file(CUDRV_TEST_KERNELS_CUBIN);
  CHECK(lib.has_kernel("vector_add"));
  CHECK_FALSE(lib.has_kernel("vector_sub"));
  auto names = lib.kernel_names();
  CHECK(std::is_sorted(names.begin(), names.end()));
  for (const char* expected : {"empty_kernel", "vector_add", "saxpy_sized", "cooperative_sum", "cluster_neighbours"}) {
    CHECK(std::find(names.begin(), names.end(), expected) != names.end());
  }
  CHECK(lib.get_kernel("vector_add").name() == "vector_add");
  CHECK(lib.get_kernel("vector_add") == lib.get_kernel("vector_add"));

  auto e = catch_as<cudrv::error>([&] { (void)lib.get_kernel("vector_sub"); });
  REQUIRE(e);
  CHECK(e->result() == CUDA_ERROR_NOT_FOUND);
  CHECK(contains(e->what(), "no kernel named 'vector_sub'"));
  CHECK(contains(e->what(), "vector_add"));
  CHECK(contains(e->what(), "saxpy_sized"));
}

namespace {

// Checks that the library's kernels are exactly @p kernels (has_kernel, get_kernel and the driver's
// kernel_names agree) and that none of @p functions, __device__ functions of the image, is taken for one.
void check_kernels_only(const cudrv::library& lib, std::vector<std::string> kernels,
                        const std::vector<std::string>& functions) {
  for (const std::string& k : kernels) {
    INFO("kernel " << k);
    CHECK(lib.has_kernel(k));
    CHECK(lib.get_kernel(k).name() == k);
  }
  for (const std::string& f : functions) {
    INFO("__device__ function " << f);
    CHECK_FALSE(lib.has_kernel(f));  // said yes before the fix, for -G and -rdc images
    auto e = catch_as<cudrv::error>([&] { (void)lib.get_kernel(f); });
    REQUIRE(e);
    INFO("what(): " << e->what());
    CHECK(e->result() == CUDA_ERROR_NOT_FOUND);
  }
  CHECK_FALSE(lib.has_kernel("no_such_function"));
  std::sort(kernels.begin(), kernels.end());
  const std::vector<std::string> listed = lib.kernel_names();
  INFO("kernel_names(): " << ::Catch::Detail::stringify(listed));
  CHECK(listed == kernels);
}

// Runs entry (device_functions.cu) on 64 values with n = 50: each of the first 50 becomes 2x + 1 through
// the __device__ function helper, the rest stay.
void check_entry_runs(const cudrv::library& lib, const cudrv::device& dev) {
  std::vector<float> values(64);
  std::iota(values.begin(), values.end(), -10.0f);
  cudrv::device_buffer<float> d(dev, values.size());
  cudrv::copy(d, values);
  cudrv::stream s(dev);
  auto entry = lib.get_kernel<void(float*, int)>("entry");
  cudrv::launch(s, {.grid = 1, .block = 64}, entry, d.get(), 50);
  s.synchronize();
  std::vector<float> out(values.size());
  cudrv::copy(out, d);
  std::vector<float> expected = values;
  for (std::size_t i = 0; i < 50; ++i) {
    expected[i] = 2.0f * values[i] + 1.0f;
  }
  CHECK(cudrv::test::mismatch(out, expected).empty());
}

std::string read_text(const char* path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("__device__ functions of -G and -rdc images are not kernels: has_kernel, get_kernel and kernel_names agree",
          "[gpu][library][driver_error]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  const std::string arch = dev.arch();
  INFO("device " << dev.name() << " (" << arch << ")");
  const std::string source = read_text(CUDRV_TEST_DEVICE_FUNCTIONS_CU);
  SECTION("nvcc -G cubin, built at build time") {
    const cudrv::library lib =
        cudrv::library::from_file(CUDRV_TEST_DEVICE_FUNCTIONS_DEBUG_CUBIN, dev.primary_context());
    check_kernels_only(lib, {"entry", "noparams"}, {"helper"});
    check_entry_runs(lib, dev);
  }
  SECTION("NVRTC -G cubin") {
    auto compiled =
        cudrv::program("device_functions.cu", source).compile(cudrv::code_kind::cubin, {.arch = arch, .debug = true});
    const cudrv::library lib(compiled.code, dev);
    check_kernels_only(lib, {"entry", "noparams"}, {"helper"});
    check_entry_runs(lib, dev);
  }
  SECTION("NVRTC -rdc cubin linked by nvJitLink") {
    auto unit = cudrv::program("device_functions.cu", source)
                    .compile(cudrv::code_kind::cubin, {.arch = arch, .relocatable_device_code = true});
    cudrv::linker lk({.arch = arch});
    const cudrv::library lib(lk.add(unit.code).link(), dev);
    check_kernels_only(lib, {"entry", "noparams"}, {"helper"});
    check_entry_runs(lib, dev);
  }
  SECTION("two -rdc units, the kernel's __device__ function in the other, linked by nvJitLink") {
    const cudrv::compile_options rdc{.arch = arch, .relocatable_device_code = true};
    auto caller = cudrv::program("caller.cu", R"(
extern "C" __device__ float scale_by_two(float x);
extern "C" __global__ void caller(float* out) { out[threadIdx.x] = scale_by_two(out[threadIdx.x]); }
)")
                      .compile(cudrv::code_kind::cubin, rdc);
    auto callee = cudrv::program("callee.cu", R"(
extern "C" __device__ __noinline__ float scale_by_two(float x) { return 2.0f * x; }
)")
                      .compile(cudrv::code_kind::cubin, rdc);
    cudrv::linker lk({.arch = arch});
    const cudrv::library lib(lk.add(caller.code).add(callee.code).link(), dev);
    check_kernels_only(lib, {"caller"}, {"scale_by_two"});
    std::vector<float> values = {1.5f, -2.0f, 3.25f, 0.0f};
    cudrv::device_buffer<float> d(dev, values.size());
    cudrv::copy(d, values);
    cudrv::stream s(dev);
    cudrv::launch(s, {.grid = 1, .block = static_cast<unsigned>(values.size())}, lib.get_kernel<void(float*)>("caller"),
                  d.get());
    s.synchronize();
    std::vector<float> out(values.size());
    cudrv::copy(out, d);
    CHECK(out == std::vector<float>{3.0f, -4.0f, 6.5f, 0.0f});
  }
}

TEST_CASE("parameter information from the driver", "[gpu][library][driver_error]") {
  CUDRV_REQUIRE_GPU();
  auto lib = cudrv::library::from_file(CUDRV_TEST_KERNELS_CUBIN);
  auto k = lib.get_kernel("saxpy_sized");
  REQUIRE(k.parameter_count() == 4);
  auto params = k.parameters();
  const std::size_t sizes[] = {sizeof(float), sizeof(void*), sizeof(void*), sizeof(std::size_t)};
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(params[i].index == i);
    CHECK(params[i].size == sizes[i]);
    CHECK(params[i].offset % params[i].size == 0);
  }
  CHECK(params[1].offset >= params[0].offset + params[0].size);
  CHECK(lib.get_kernel("empty_kernel").parameter_count() == 0);
  CHECK(lib.get_kernel("struct_argument").parameters()[0].size == 24);
  // The same through an adopted handle, without the library's cache: the driver answers, in a context
  // the caller makes current.
  auto adopted = cudrv::kernel_ref::from_native_handle(k.native_handle());
  cudrv::test::raw_set_current_context(nullptr);  // whatever an earlier case left current
  CHECK(catch_as<cudrv::not_supported_error>([&] { (void)adopted.parameter_count(); }));
  {
    cudrv::context_guard guard(cudrv::device(0).primary_context());
    CHECK(adopted.parameter_count() == 4);
  }
  CHECK(adopted.cached_signature() == nullptr);
  // Typed views are checked against it once.
  CHECK_NOTHROW(lib.get_kernel<void(float, const float*, float*, std::size_t)>("saxpy_sized"));
  auto wrong_size = catch_as<cudrv::invalid_argument_error>(
      [&] { (void)lib.get_kernel<void(float, const float*, float*, int)>("saxpy_sized"); });
  REQUIRE(wrong_size);
  CHECK(contains(wrong_size->what(), "parameter 3 has 8 bytes"));
  CHECK(contains(wrong_size->what(), "has 4"));
  auto wrong_count = catch_as<cudrv::invalid_argument_error>([&] { (void)lib.get_kernel<void(float)>("saxpy_sized"); });
  REQUIRE(wrong_count);
  CHECK(contains(wrong_count->what(), "has 4 parameters"));
}

TEST_CASE("globals: typed read and write, and kernels see them", "[gpu][library][driver_error]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  auto lib = cudrv::library::from_file(CUDRV_TEST_KERNELS_CUBIN);
  auto scale = lib.get_global<float>("constant_scale", dev);
  CHECK(scale.size() == 1);
  CHECK(scale.size_bytes() == sizeof(float));
  scale.write(2.5f);
  CHECK(scale.read() == 2.5f);

  auto table = lib.get_global<int>("device_table", dev);
  REQUIRE(table.size() == 64);
  auto seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  auto values = cudrv::test::random_vector<std::uint8_t>(64, seed);
  std::vector<int> host(values.begin(), values.end());
  table.write(host.data(), host.size());
  std::vector<int> back(64, -1);
  table.read(back.data(), back.size());
  CHECK(back == host);

  auto managed = lib.get_managed<int>("managed_value");
  REQUIRE(managed.size() == 1);
  managed[0] = 20;
  auto counter = lib.get_global<int>("device_counter", dev);
  counter.write(-1);
  cudrv::stream s(dev);
  cudrv::launch(s, {}, lib.get_kernel("table_to_counter"));
  s.synchronize();
  dev.synchronize();
  CHECK(counter.read() == std::accumulate(host.begin(), host.end(), 0));
  CHECK(managed[0] == 41);

  // Kernels read the constant.
  const int n = 1000;
  std::vector<float> data(n);
  std::iota(data.begin(), data.end(), 0.0f);
  cudrv::device_buffer<float> d(dev, n);
  cudrv::copy(d, data);
  cudrv::launch(s, {.grid = 4, .block = 256}, lib.get_kernel("scale_by_constant"), d.get(), n);
  s.synchronize();
  std::vector<float> out(n);
  cudrv::copy(out, d);
  for (int i = 0; i < n; ++i) {
    REQUIRE(out[i] == data[i] * 2.5f);
  }

  // Stream-ordered access through the span.
  std::vector<int> again(64, 0);
  cudrv::copy(again, table.span(), s);
  s.synchronize();
  CHECK(again == host);

  // Bad requests.
  CHECK(catch_as<cudrv::error>([&] { (void)lib.get_global<int>("no_such_global", dev); })->result() ==
        CUDA_ERROR_NOT_FOUND);
  CHECK(lib.get_global<double>("device_table", dev).size() == 32);  // 256 bytes = 32 doubles
  auto odd =
      catch_as<cudrv::invalid_argument_error>([&] { (void)lib.get_global<std::array<char, 3>>("device_table", dev); });
  REQUIRE(odd);
  CHECK(contains(odd->what(), "256 bytes"));
  std::vector<int> too_many(65);
  CHECK(catch_as<cudrv::invalid_argument_error>([&] { table.read(too_many.data(), too_many.size()); }));
  CHECK(catch_as<cudrv::invalid_argument_error>([&] { table.write(too_many.data(), too_many.size()); }));
}

TEST_CASE("kernel attributes and their setters", "[gpu][kernel]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  auto lib = cudrv::library::from_file(CUDRV_TEST_KERNELS_CUBIN);
  auto bounded = lib.get_kernel("bounded_kernel");
  auto a = bounded.attributes(dev);
  CHECK(a.max_threads_per_block == 256);  // __launch_bounds__(256)
  CHECK(a.num_regs > 0);
  CHECK(a.binary_version == dev.compute_capability().as_int());
  CHECK(a.ptx_version >= 80);
  CHECK(a.local_size_bytes == 0);
  CHECK(a.shared_size_bytes == 0);
  CHECK(a.max_threads_per_block == bounded.attribute(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, dev));

  auto coop = lib.get_kernel("cooperative_sum");
  CHECK(coop.attributes(dev).shared_size_bytes >= static_cast<int>(sizeof(int)));  // plus the grid sync's own

  auto fixed = lib.get_kernel("fixed_cluster");
  auto fa = fixed.attributes(dev);
  CHECK(fa.required_cluster_width == 2);
  CHECK(fa.required_cluster_height == 1);
  CHECK(fa.required_cluster_depth == 1);

  auto shared = lib.get_kernel("reverse_in_shared");
  const int optin = dev.attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  shared.set_max_dynamic_shared_memory(dev, 100 * 1024);
  CHECK(shared.attributes(dev).max_dynamic_shared_size_bytes == 100 * 1024);
  auto too_much = catch_as<cudrv::invalid_argument_error>(
      [&] { shared.set_max_dynamic_shared_memory(dev, static_cast<std::size_t>(optin) + 1); });
  REQUIRE(too_much);
  CHECK(contains(too_much->what(), std::to_string(optin)));
  shared.set_max_dynamic_shared_memory(dev, 48 * 1024);

  shared.set_preferred_shared_memory_carveout(dev, 50);
  CHECK(shared.attributes(dev).preferred_shared_memory_carveout == 50);
  shared.set_preferred_shared_memory_carveout(dev, -1);
  CHECK(catch_as<cudrv::invalid_argument_error>([&] { shared.set_preferred_shared_memory_carveout(dev, 101); }));

  auto clusters = lib.get_kernel("cluster_neighbours");
  clusters.set_non_portable_cluster_size_allowed(dev, true);
  CHECK(clusters.attributes(dev).non_portable_cluster_size_allowed == 1);
  clusters.set_non_portable_cluster_size_allowed(dev, false);
  CHECK(clusters.attributes(dev).non_portable_cluster_size_allowed == 0);
  clusters.set_cluster_scheduling_policy(dev, CU_CLUSTER_SCHEDULING_POLICY_SPREAD);
  CHECK(clusters.attributes(dev).cluster_scheduling_policy_preference == CU_CLUSTER_SCHEDULING_POLICY_SPREAD);
  clusters.set_cache_config(dev, CU_FUNC_CACHE_PREFER_SHARED);

  // The kernel's function in a context, for module-based APIs.
  CUfunction f = bounded.function(dev.primary_context());
  CHECK(f != nullptr);
  CHECK(lib.module(dev.primary_context()) != nullptr);
}

TEST_CASE("occupancy: active blocks, suggested block size, shared memory, clusters", "[gpu][kernel]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  auto lib = cudrv::library::from_file(CUDRV_TEST_KERNELS_CUBIN);
  auto add = lib.get_kernel("vector_add");
  const int max_threads_sm = dev.attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
  const int sms = dev.attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  const int blocks = add.max_active_blocks_per_multiprocessor(dev, 256);
  CHECK(blocks > 0);
  CHECK(blocks * 256 <= max_threads_sm);

  auto best = add.suggested_block_size(dev);
  CHECK(best.block_size > 0);
  CHECK(best.block_size <= 1024);
  CHECK(best.block_size % 32 == 0);
  CHECK(best.min_grid_size >= sms);
  auto limited = add.suggested_block_size(dev, 0, 64);
  CHECK(limited.block_size <= 64);

  // Shared memory that grows with the block: the calculator must call the function.
  int calls = 0;
  auto shared = lib.get_kernel("reverse_in_shared");
  auto by_fn = shared.suggested_block_size(dev, [&](int threads) {
    ++calls;
    return static_cast<std::size_t>(threads) * sizeof(int);
  });
  CHECK(calls > 0);
  CHECK(by_fn.block_size > 0);
  // Const callables and plain functions work too, and give the same answer.
  const auto per_thread = [](int threads) { return static_cast<std::size_t>(threads) * sizeof(int); };
  auto by_const = shared.suggested_block_size(dev, per_thread);
  auto by_function = shared.suggested_block_size(dev, &shared_bytes_per_block);
  CHECK(by_const.block_size == by_fn.block_size);
  CHECK(by_function.block_size == by_fn.block_size);
  CHECK(by_function.min_grid_size == by_fn.min_grid_size);
  // An exception from the function is rethrown, not lost in the driver.
  struct custom_failure {};
  CHECK_THROWS_AS(shared.suggested_block_size(dev, [](int) -> std::size_t { throw custom_failure{}; }), custom_failure);

  const std::size_t available = shared.available_dynamic_shared_memory(dev, 2, 256);
  CHECK(available > 0);
  CHECK(available <= static_cast<std::size_t>(dev.attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)));
  CHECK(shared.max_active_blocks_per_multiprocessor(dev, 256, available) >= 2);

  CHECK(catch_as<cudrv::invalid_argument_error>([&] { (void)add.max_active_blocks_per_multiprocessor(dev, 0); }));

  if (dev.compute_capability().major >= 9) {
    auto clusters = lib.get_kernel("cluster_neighbours");
    const int potential = clusters.max_potential_cluster_size(dev, {.grid = 128, .block = 128});
    CHECK(potential >= 8);
    const int active = clusters.max_active_clusters(dev, {.grid = 128, .block = 128, .cluster = 2});
    CHECK(active > 0);
    // The occupancy queries hand the driver every attribute a launch would (one translation): those
    // that do not shape residency leave the answer as it was, and the driver accepts them there.
    CHECK(clusters.max_active_clusters(dev, {.grid = 128, .block = 128, .cluster = 2, .priority = 0}) == active);
    CHECK(clusters.max_active_clusters(
              dev, {.grid = 128, .block = 128, .cluster = 2, .programmatic_stream_serialization = true}) == active);
    CHECK(clusters.max_potential_cluster_size(dev, {.grid = 128, .block = 128, .priority = 0}) == potential);
    CHECK(catch_as<cudrv::invalid_argument_error>(
        [&] { (void)clusters.max_active_clusters(dev, {.grid = 128, .block = 128}); }));
  }
}

TEST_CASE("bad images: each a typed error that says what to fix, nothing leaked", "[gpu][library][bad-input]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  cudrv::test::destruction_error_counter errors;

  SECTION("malformed PTX carries the JIT log") {
    cudrv::object_code bad(cudrv::code_kind::ptx,
                           ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k() { this is not ptx; }\n",
                           "bad.ptx");
    auto e = catch_as<cudrv::load_error>([&] { cudrv::library lib(bad, dev); });
    REQUIRE(e);
    CHECK(e->result() == CUDA_ERROR_INVALID_PTX);
    CHECK_FALSE(e->log().empty());
    CHECK(contains(e->what(), "bad.ptx"));
    CHECK(contains(e->what(), e->log()));
  }
  SECTION("a truncated cubin") {
    auto cubin = cudrv::object_code::from_file(CUDRV_TEST_KERNELS_CUBIN);
    cudrv::object_code truncated(cudrv::code_kind::cubin, cubin.bytes().substr(0, cubin.size() / 3), "truncated.cubin");
    auto e = catch_as<cudrv::load_error>([&] { cudrv::library lib(truncated); });
    REQUIRE(e);
    CHECK(contains(e->what(), "truncated.cubin"));
    CHECK(contains(e->what(), "truncated?"));
    CHECK(e->source() == cudrv::error_source::cudrv);  // found before the driver, which may hang on it
    auto fatbin = cudrv::object_code::from_file(CUDRV_TEST_KERNELS_FATBIN);
    cudrv::object_code cut(cudrv::code_kind::fatbin, fatbin.bytes().substr(0, fatbin.size() / 2), "cut.fatbin");
    auto f = catch_as<cudrv::load_error>([&] { cudrv::library lib(cut); });
    REQUIRE(f);
    CHECK(contains(f->what(), "truncated?"));
  }
  SECTION("garbage bytes as a cubin and as a fatbin") {
    for (auto kind : {cudrv::code_kind::cubin, cudrv::code_kind::fatbin}) {
      auto bytes = cudrv::test::random_bytes(4096, cudrv::test::test_seed());
      cudrv::object_code garbage(kind, std::string(bytes.begin(), bytes.end()), "garbage");
      auto e = catch_as<cudrv::load_error>([&] { cudrv::library lib(garbage); });
      REQUIRE(e);
      CHECK(contains(e->what(), "garbage"));
    }
  }
  SECTION("an empty image is refused before the driver") {
    auto e = catch_as<cudrv::invalid_argument_error>(
        [&] { cudrv::library lib(cudrv::object_code(cudrv::code_kind::cubin, "", "empty.cubin")); });
    REQUIRE(e);
    CHECK(contains(e->what(), "empty"));
    CHECK(catch_as<cudrv::invalid_argument_error>([&] { cudrv::library lib{cudrv::object_code{}}; }));
  }
  SECTION("LTO-IR and objects must be linked first") {
    auto e = catch_as<cudrv::invalid_argument_error>(
        [&] { cudrv::library lib(cudrv::object_code(cudrv::code_kind::ltoir, "x", "unit.ltoir")); });
    REQUIRE(e);
    CHECK(contains(e->what(), "cudrv::linker"));
  }
  SECTION("a cubin for another architecture (sm_100 on this GPU)") {
    if (dev.compute_capability().major == 10 && dev.compute_capability().minor == 0) {
      WARN("the device is sm_100: the foreign-architecture case cannot be provoked");
      return;
    }
    // Depending on the driver, the load itself or the first use of a kernel is refused; either way
    // the error is typed and says which architecture the device needs.
    auto e = catch_as<cudrv::error>([&] {
      auto lib = cudrv::library::from_file(CUDRV_TEST_OTHER_ARCH_CUBIN, dev.primary_context());
      cudrv::device_buffer<int> out(dev, 1);
      cudrv::stream s(dev);
      cudrv::launch(s, {}, lib.get_kernel("other_arch_kernel"), out.get());
      s.synchronize();
    });
    REQUIRE(e);
    INFO(e->what());
    CHECK(e->result() == CUDA_ERROR_NO_BINARY_FOR_GPU);
    CHECK(contains(e->what(), "no code for the devices"));
    CHECK(contains(e->what(), "other_arch.cubin"));
    // Loaded for no context (none named or current): the first use (taking the kernel, or launching it)
    // is refused, typed.
    cudrv::test::raw_set_current_context(nullptr);  // whatever an earlier case left current
    auto lazy = cudrv::library::from_file(CUDRV_TEST_OTHER_ARCH_CUBIN);
    cudrv::device_buffer<int> out(dev, 1);
    cudrv::stream s(dev);
    auto l = catch_as<cudrv::error>([&] { cudrv::launch(s, {}, lazy.get_kernel("other_arch_kernel"), out.get()); });
    REQUIRE(l);
    INFO(l->what());
    CHECK(l->result() == CUDA_ERROR_NO_BINARY_FOR_GPU);
    CHECK(contains(l->what(), "other_arch"));
  }
  SECTION("lazy loading defers the failure to the kernel's first use, still typed") {
    auto lib = cudrv::library(cudrv::object_code::from_file(CUDRV_TEST_OTHER_ARCH_CUBIN), {.eager = false});
    auto e = catch_as<cudrv::load_error>([&] { (void)lib.get_kernel("other_arch_kernel"); });
    REQUIRE(e);
    CHECK(e->result() == CUDA_ERROR_NO_BINARY_FOR_GPU);
    CHECK(contains(e->what(), "other_arch_kernel"));
  }
  SECTION("a missing file") {
    auto e = catch_as<cudrv::invalid_argument_error>([&] { (void)cudrv::library::from_file("/nonexistent/k.cubin"); });
    REQUIRE(e);
    CHECK(contains(e->what(), "/nonexistent/k.cubin"));
    CHECK(catch_as<cudrv::invalid_argument_error>([&] { (void)cudrv::library::from_file("/tmp/kernels.unknown"); }));
  }
  CHECK(errors.count() == 0);
}

TEST_CASE("library ownership: move, release, adopt", "[gpu][library][driver_error]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  cudrv::test::destruction_error_counter errors;
  auto lib = cudrv::library::from_file(CUDRV_TEST_KERNELS_CUBIN);
  CUlibrary raw = lib.native_handle();
  cudrv::library moved(std::move(lib));
  CHECK(moved.native_handle() == raw);
  CHECK(lib.native_handle() == nullptr);
  CHECK(catch_as<cudrv::invalid_argument_error>([&] { (void)lib.get_kernel("vector_add"); }));
  CUlibrary released = moved.release();
  CHECK(moved.native_handle() == nullptr);
  {
    auto view = cudrv::library_ref::from_native_handle(released);
    auto k = view.get_kernel("vector_add");
    CHECK(k.cached_signature() == nullptr);
    cudrv::context_guard guard(dev.primary_context());
    CHECK(k.parameter_count() == 4);
  }
  auto adopted = cudrv::library::from_native_handle(released);
  CHECK(adopted.get_kernel("vector_add").cached_signature() != nullptr);
  cudrv::library other = cudrv::library::from_file(CUDRV_TEST_KERNELS_PTX);
  other = std::move(adopted);  // unloads the PTX library, takes the adopted one
  CHECK(other.native_handle() == released);
  check_vector_add(other, dev);
  CHECK(errors.count() == 0);
}
