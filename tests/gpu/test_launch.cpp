// GPU tier: typed and untyped launches checked on random data against a host reference, argument
// checks, the diagnosis of refused launches, cooperative and cluster launches, launch attributes,
// and __global__ functions compiled by nvcc in this binary.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "nvcc_kernels.hpp"
#include "support/memory_support.hpp"
#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;

namespace {

struct triple {
  double a;
  float b;
  int c;
  long long d;
};
static_assert(sizeof(triple) == 24);

cudrv::library& test_library() {
  static cudrv::library lib = cudrv::library::from_file(CUDRV_TEST_KERNELS_CUBIN);
  return lib;
}

std::vector<float> random_floats(std::size_t n, std::uint64_t seed) {
  auto raw = cudrv::test::random_vector<std::uint16_t>(n, seed);
  std::vector<float> out(n);
  std::transform(raw.begin(), raw.end(), out.begin(), [](std::uint16_t v) { return static_cast<float>(v) / 64.0f; });
  return out;
}

// y = alpha * x + y on random inputs: the device buffers (dy not yet filled), and the host reference.
struct saxpy_problem {
  static constexpr std::size_t n = 100003;
  static constexpr float alpha = 1.5f;
  std::vector<float> x, y, expected;
  cudrv::device_buffer<float> dx, dy;

  saxpy_problem(const cudrv::device& dev, std::uint64_t seed)
      : x(random_floats(n, seed)), y(random_floats(n, seed + 1)), expected(n), dx(dev, n), dy(dev, n) {
    for (std::size_t i = 0; i < n; ++i) {
      expected[i] = alpha * x[i] + y[i];
    }
    cudrv::copy(dx, x);
  }
  [[nodiscard]] static cudrv::launch_config config() {
    return {.grid = static_cast<unsigned>((n + 255) / 256), .block = 256};
  }
  [[nodiscard]] std::vector<float> result() {
    std::vector<float> out(n);
    cudrv::copy(out, dy);
    return out;
  }
};

}  // namespace

TEST_CASE("typed and untyped launches compute what the host computes", "[gpu][launch]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  auto& lib = test_library();
  cudrv::stream s(dev);
  auto seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  saxpy_problem p(dev, seed);
  const std::size_t n = saxpy_problem::n;
  const float alpha = saxpy_problem::alpha;
  const std::vector<float>& y = p.y;
  const std::vector<float>& expected = p.expected;
  cudrv::device_buffer<float>& dx = p.dx;
  cudrv::device_buffer<float>& dy = p.dy;
  const cudrv::launch_config config = saxpy_problem::config();

  SECTION("typed: arguments converted at compile time") {
    cudrv::copy(dy, y);
    auto saxpy = lib.get_kernel<void(float, const float*, float*, std::size_t)>("saxpy_sized");
    // double -> float, float* -> const float*, int -> size_t: all converted to the parameter types.
    cudrv::launch(s, config, saxpy, 1.5, dx.get(), dy.get(), static_cast<int>(n));
  }
  SECTION("untyped: arguments passed as they are, checked against the layout") {
    cudrv::copy(dy, y);
    cudrv::kernel saxpy = lib.get_kernel("saxpy_sized");
    cudrv::launch(s, config, saxpy, alpha, dx.get(), dy.get(), n);
  }
  SECTION("on the legacy default stream, in the current context") {
    cudrv::copy(dy, y);
    dev.set_current();
    cudrv::launch(cudrv::stream_ref::legacy_default(), config, lib.get_kernel("saxpy_sized"), alpha, dx.get(), dy.get(),
                  n);
    cudrv::stream_ref::legacy_default().synchronize();
  }
  SECTION("with launch attributes: priority and programmatic stream serialization") {
    cudrv::copy(dy, y);
    auto saxpy = lib.get_kernel<void(float, const float*, float*, std::size_t)>("saxpy_sized");
    cudrv::launch_config extended = config;
    extended.priority = -1;
    extended.programmatic_stream_serialization = true;
    REQUIRE(extended.needs_extended_launch());
    cudrv::launch(s, extended, saxpy, alpha, dx.get(), dy.get(), n);
  }
  s.synchronize();
  CHECK(cudrv::test::mismatch(p.result(), expected).empty());
}

// An adopted kernel carries no layout: each untyped launch asks the driver in the stream's context,
// which counts the parameters by failing one query past the last (reported by compute-sanitizer).
TEST_CASE("untyped launches of an adopted kernel ask the driver for its layout", "[gpu][launch][driver_error]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  auto& lib = test_library();
  cudrv::stream s(dev);
  auto seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  saxpy_problem p(dev, seed);
  cudrv::copy(p.dy, p.y);
  cudrv::kernel owner = lib.get_kernel("saxpy_sized");
  auto saxpy = cudrv::kernel_ref::from_native_handle(owner.native_handle());
  cudrv::launch(s, saxpy_problem::config(), saxpy, saxpy_problem::alpha, p.dx.get(), p.dy.get(), saxpy_problem::n);
  CHECK_THROWS_AS(cudrv::launch(s, {}, saxpy, saxpy_problem::alpha, p.dx.get()), cudrv::launch_error);
  s.synchronize();
  CHECK(cudrv::test::mismatch(p.result(), p.expected).empty());
}

TEST_CASE("3D grids and blocks, struct arguments, zero-argument kernels", "[gpu][launch]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  auto& lib = test_library();
  cudrv::stream s(dev);
  const cudrv::launch_config config{.grid = {3, 4, 5}, .block = {8, 4, 2}};
  const std::size_t total = config.grid.count() * config.block.count();
  cudrv::device_buffer<unsigned> out(dev, total);
  cudrv::fill(out, 0xFFFFFFFFu);
  cudrv::launch(s, config, lib.get_kernel<void(unsigned*)>("write_index_3d"), out.get());
  s.synchronize();
  std::vector<unsigned> host(total);
  cudrv::copy(host, out);
  std::vector<unsigned> expected(total);
  std::iota(expected.begin(), expected.end(), 0u);
  CHECK(host == expected);

  triple t{3.25, -1.5f, 42, -(1LL << 40)};
  cudrv::device_buffer<double> d(dev, 4);
  cudrv::copy(d, std::vector<double>(4, -7.0));
  cudrv::launch(s, {}, lib.get_kernel("struct_argument"), t, d.get());
  s.synchronize();
  std::vector<double> r(4);
  cudrv::copy(r, d);
  CHECK(r == std::vector<double>{3.25, -1.5, 42.0, static_cast<double>(-(1LL << 40))});

  cudrv::launch(s, {.grid = 2, .block = 32}, lib.get_kernel("empty_kernel"));
  cudrv::launch(s, {.grid = 2, .block = 32}, lib.get_kernel<void()>("empty_kernel"));
  s.synchronize();
}

TEST_CASE("dynamic shared memory, above 48 KiB after opting in", "[gpu][launch]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  auto& lib = test_library();
  cudrv::stream s(dev);
  auto k = lib.get_kernel<void(const int*, int*)>("reverse_in_shared");
  const unsigned block = 512;
  const unsigned blocks = 37;
  auto seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  auto in = cudrv::test::random_vector<int>(block * blocks, seed);
  cudrv::device_buffer<int> din(dev, in.size()), dout(dev, in.size());
  cudrv::copy(din, in);
  std::vector<int> expected(in.size());
  for (unsigned b = 0; b < blocks; ++b) {
    for (unsigned t = 0; t < block; ++t) {
      expected[b * block + t] = in[b * block + block - 1 - t];
    }
  }
  for (std::size_t shared : {std::size_t(block * sizeof(int)), std::size_t(96 * 1024)}) {
    INFO("dynamic shared memory " << shared);
    if (shared > 48 * 1024) {
      k.set_max_dynamic_shared_memory(dev, shared);
    }
    cudrv::fill(dout, -1);
    cudrv::launch(s, {.grid = blocks, .block = block, .dynamic_shared_memory = shared}, k, din.get(), dout.get());
    s.synchronize();
    std::vector<int> out(in.size());
    cudrv::copy(out, dout);
    CHECK(cudrv::test::mismatch(out, expected).empty());
  }
  k.set_max_dynamic_shared_memory(dev, 48 * 1024);
}

TEST_CASE("wrong argument count or size: a launch_error naming kernel, index and sizes", "[gpu][launch][bad-input]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  auto& lib = test_library();
  cudrv::stream s(dev);
  cudrv::device_buffer<float> buf(dev, 16);
  for (bool adopted : {false, true}) {
    INFO((adopted ? "adopted handle" : "library kernel"));
    cudrv::kernel owner = lib.get_kernel("saxpy_sized");
    cudrv::kernel_ref k =
        adopted ? cudrv::kernel_ref::from_native_handle(owner.native_handle()) : cudrv::kernel_ref(owner);
    auto count = catch_as<cudrv::launch_error>([&] { cudrv::launch(s, {}, k, 1.0f, buf.get()); });
    REQUIRE(count);
    CHECK(count->source() == cudrv::error_source::cudrv);
    CHECK(count->kernel_name() == "saxpy_sized");
    CHECK(contains(count->what(), "2 arguments given, but the kernel has 4 parameters"));
    CHECK(contains(count->what(), "sizes in bytes: 4, 8, 8, 8"));

    // An int where the kernel takes a size_t.
    auto size = catch_as<cudrv::launch_error>([&] { cudrv::launch(s, {}, k, 1.0f, buf.get(), buf.get(), 16); });
    REQUIRE(size);
    CHECK(contains(size->what(), "argument 3 has 4 bytes, but parameter 3 has 8 bytes"));
    // A double where the kernel takes a float.
    auto first =
        catch_as<cudrv::launch_error>([&] { cudrv::launch(s, {}, k, 1.0, buf.get(), buf.get(), std::size_t{16}); });
    REQUIRE(first);
    CHECK(contains(first->what(), "argument 0 has 8 bytes, but parameter 0 has 4 bytes"));
  }
  s.synchronize();
  // A moved-from stream is refused before the driver sees a null stream.
  cudrv::stream moved(dev);
  cudrv::stream taker(std::move(moved));
  CHECK(catch_as<cudrv::invalid_argument_error>([&] { cudrv::launch(moved, {}, lib.get_kernel("empty_kernel")); }));
}

TEST_CASE("refused launches name the limit exceeded, with the numbers", "[gpu][launch][bad-input]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  auto& lib = test_library();
  cudrv::stream s(dev);
  cudrv::device_buffer<int> out(dev, 4096);
  auto bounded = lib.get_kernel<void(int*)>("bounded_kernel");
  auto expect = [&](const cudrv::launch_config& config, const cudrv::kernel_base& k, std::vector<std::string> parts,
                    auto... args) {
    auto e = catch_as<cudrv::launch_error>([&] { cudrv::launch(s, config, k, args...); });
    REQUIRE(e);
    INFO(e->what());
    CHECK(e->source() == cudrv::error_source::driver);
    CHECK_FALSE(e->kernel_name().empty());
    for (const auto& part : parts) {
      CHECK(contains(e->what(), part));
    }
  };
  const int regs = bounded.attributes(dev).num_regs;
  SECTION("block larger than the kernel allows") {
    expect({.block = 512}, bounded,
           {"block of 512 threads exceeds the 256 threads per block this kernel allows",
            "uses " + std::to_string(regs) + " registers per thread"},
           out.get());
  }
  SECTION("block larger than the device allows") {
    expect({.block = 2048}, bounded, {"block of 2048 threads exceeds the device's maximum of 1024"}, out.get());
    expect({.block = {1, 1, 128}}, bounded, {"block extent z = 128 exceeds the device's maximum of 64"}, out.get());
  }
  SECTION("grid over the limits, or empty") {
    expect({.grid = {1, 70000}, .block = 32}, bounded, {"grid extent y = 70000 exceeds the device's maximum of 65535"},
           out.get());
    expect({.grid = 0, .block = 32}, bounded, {"at least 1"}, out.get());
  }
  SECTION("dynamic shared memory over the kernel's limit and over the device's") {
    auto shared = lib.get_kernel("reverse_in_shared");
    shared.set_max_dynamic_shared_memory(dev, 48 * 1024);
    expect({.block = 32, .dynamic_shared_memory = 64 * 1024}, shared,
           {"65536 bytes of dynamic shared memory exceed the kernel's current limit of 49152",
            "set_max_dynamic_shared_memory"},
           out.get(), out.get());
    const int optin = dev.attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    expect({.block = 32, .dynamic_shared_memory = static_cast<std::size_t>(optin) + 1024}, shared,
           {"opt-in maximum", std::to_string(optin)}, out.get(), out.get());
  }
  SECTION("cooperative grid larger than the device holds at once") {
    auto coop = lib.get_kernel("cooperative_sum");
    const int per_sm = coop.max_active_blocks_per_multiprocessor(dev, 1024);
    const int sms = dev.attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    const unsigned too_many = static_cast<unsigned>(per_sm * sms + 1);
    expect({.grid = too_many, .block = 1024, .cooperative = true}, coop,
           {"cooperative launch of " + std::to_string(too_many) + " blocks exceeds the " +
            std::to_string(per_sm * sms) + " blocks"},
           out.get(), 16, out.get(), static_cast<long long*>(nullptr));
  }
  SECTION("cluster shape errors") {
    if (dev.compute_capability().major < 9) {
      expect({.grid = 2, .block = 32, .cluster = 2}, lib.get_kernel("cluster_neighbours"),
             {"clusters are not supported"}, out.get());
      return;
    }
    auto clusters = lib.get_kernel("cluster_neighbours");
    expect({.grid = 3, .block = 32, .cluster = 2}, clusters,
           {"grid extent x = 3 is not a multiple of the cluster extent 2"}, out.get());
    clusters.set_non_portable_cluster_size_allowed(dev, false);
    expect({.grid = 32, .block = 32, .cluster = 16}, clusters,
           {"cluster of 16 blocks exceeds the portable maximum of 8"}, out.get());
    expect({.grid = 8, .block = 32, .cluster = 4}, lib.get_kernel("fixed_cluster"),
           {"compiled with cluster dimensions 2x1x1", "asks for 4x1x1"}, out.get());
  }
  SECTION("no context current for the legacy default stream") {
    CUcontext saved = cudrv::test::raw_current_context();
    cudrv::test::raw_set_current_context(nullptr);
    auto e = catch_as<cudrv::launch_error>(
        [&] { cudrv::launch(cudrv::stream_ref::legacy_default(), {}, bounded, out.get()); });
    cudrv::test::raw_set_current_context(saved);
    REQUIRE(e);
    CHECK(contains(e->what(), "no context is current"));
  }
  // None of the refused launches broke the context: a good launch still works.
  cudrv::launch(s, {.block = 256}, bounded, out.get());
  s.synchronize();
  std::vector<int> host(256);
  cudrv::copy(host, cudrv::device_span<int>(out).first(256));
  for (int i = 0; i < 256; ++i) {
    REQUIRE(host[i] == i);
  }
}

TEST_CASE("a cooperative launch with a grid-wide sync", "[gpu][launch]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  REQUIRE(dev.attribute(CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH) == 1);
  auto& lib = test_library();
  cudrv::stream s(dev);
  auto k = lib.get_kernel<void(const int*, int, int*, long long*)>("cooperative_sum");
  const int block = 256;
  const unsigned grid = static_cast<unsigned>(k.max_active_blocks_per_multiprocessor(dev, block) *
                                              dev.attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT));
  const int n = 1 << 22;
  auto seed = cudrv::test::test_seed();
  INFO("seed " << seed << ", grid " << grid);
  auto raw = cudrv::test::random_vector<std::uint16_t>(n, seed);
  std::vector<int> in(raw.begin(), raw.end());
  cudrv::device_buffer<int> din(dev, n), partial(dev, grid);
  cudrv::device_buffer<long long> total(dev, 1);
  cudrv::copy(din, in);
  cudrv::copy(total, std::vector<long long>{-1});
  cudrv::launch(s, {.grid = grid, .block = block, .cooperative = true}, k, din.get(), n, partial.get(), total.get());
  s.synchronize();
  std::vector<long long> result(1);
  cudrv::copy(result, total);
  CHECK(result[0] == std::accumulate(in.begin(), in.end(), 0LL));
}

TEST_CASE("a thread-block cluster launch with distributed shared memory", "[gpu][launch]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  if (dev.compute_capability().major < 9) {
    WARN("SKIPPED: clusters need compute capability 9.0");
    return;
  }
  auto& lib = test_library();
  cudrv::stream s(dev);
  auto k = lib.get_kernel<void(int*)>("cluster_neighbours");
  for (unsigned cluster : {2u, 4u, 8u}) {
    INFO("cluster " << cluster);
    const unsigned grid = 8 * cluster;
    cudrv::device_buffer<int> out(dev, grid * 3);
    cudrv::fill(out, -1);
    cudrv::launch(s, {.grid = grid, .block = 64, .cluster = cluster}, k, out.get());
    s.synchronize();
    std::vector<int> host(grid * 3);
    cudrv::copy(host, out);
    for (unsigned b = 0; b < grid; ++b) {
      const unsigned rank = b % cluster;
      const unsigned neighbour_block = b - rank + (rank + 1) % cluster;
      CHECK(host[b * 3 + 0] == static_cast<int>(rank));
      CHECK(host[b * 3 + 1] == static_cast<int>(cluster));
      CHECK(host[b * 3 + 2] == static_cast<int>(neighbour_block * 10));
    }
  }
  // A kernel compiled with __cluster_dims__ launches with or without the matching cluster attribute.
  auto fixed = lib.get_kernel<void(int*)>("fixed_cluster");
  cudrv::device_buffer<int> flags(dev, 8);
  cudrv::fill(flags, 0);
  cudrv::launch(s, {.grid = 8, .block = 32, .cluster = 2}, fixed, flags.get());
  s.synchronize();
  std::vector<int> f(8);
  cudrv::copy(f, flags);
  CHECK(f == std::vector<int>(8, 1));
}

TEST_CASE("cooperative launches with clusters: the whole grid runs at once, or the driver refuses it",
          "[gpu][launch][bad-input]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  if (dev.compute_capability().major < 9) {
    WARN("SKIPPED: clusters need compute capability 9.0");
    return;
  }
  REQUIRE(dev.attribute(CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH) == 1);
  auto& lib = test_library();
  cudrv::stream s(dev);
  auto k = lib.get_kernel<void(int*)>("cluster_neighbours");
  // One block per SM: dynamic shared memory (unused by the kernel) over half of what an SM holds.
  const auto shared = static_cast<std::size_t>(dev.attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)) -
                      static_cast<std::size_t>(k.attributes(dev).shared_size_bytes);
  k.set_max_dynamic_shared_memory(dev, shared);
  k.set_non_portable_cluster_size_allowed(dev, true);
  const int sms = dev.attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  REQUIRE(k.max_active_blocks_per_multiprocessor(dev, 32, shared) == 1);
  auto config = [&](unsigned clusters, unsigned cluster) {
    return cudrv::launch_config{.grid = clusters * cluster,
                                .block = 32,
                                .dynamic_shared_memory = shared,
                                .cluster = cluster,
                                .cooperative = true};
  };

  // As many clusters of 2 as fit at once: accepted, and every block read its neighbour's shared memory.
  const int pairs = k.max_active_clusters(dev, config(1, 2));
  REQUIRE(pairs >= 1);
  const unsigned grid = 2 * static_cast<unsigned>(pairs);
  cudrv::device_buffer<int> out(dev, grid * 3);
  cudrv::fill(out, -1, s);
  cudrv::launch(s, config(static_cast<unsigned>(pairs), 2), k, out.get());
  s.synchronize();
  std::vector<int> host(grid * 3);
  cudrv::copy(host, out);
  for (unsigned b = 0; b < grid; ++b) {
    const unsigned rank = b % 2;
    CHECK(host[b * 3 + 0] == static_cast<int>(rank));
    CHECK(host[b * 3 + 1] == 2);
    CHECK(host[b * 3 + 2] == static_cast<int>((b - rank + (rank + 1) % 2) * 10));
  }

  // One cluster more than fit: refused. Where the clusters leave at least one cluster's worth of SMs
  // idle (clusters cannot span GPCs), the blocks would fit one per SM, and the diagnosis names the clusters.
  bool cluster_limited = false;
  for (unsigned cluster : {16u, 8u, 4u, 2u}) {
    const int fit = k.max_active_clusters(dev, config(1, cluster));
    INFO("clusters of " << cluster << ": " << fit << " at once, " << sms << " SMs");
    if (fit < 1) {
      continue;
    }
    const unsigned clusters = static_cast<unsigned>(fit) + 1;
    auto e = catch_as<cudrv::launch_error>([&] { cudrv::launch(s, config(clusters, cluster), k, out.get()); });
    REQUIRE(e);
    INFO(e->what());
    CHECK(e->result() == CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
    if (clusters * cluster <= static_cast<unsigned>(sms)) {
      cluster_limited = true;
      CHECK(contains(e->what(), "a cooperative launch of " + std::to_string(clusters) + " clusters of " +
                                    std::to_string(cluster) + " blocks exceeds the " + std::to_string(fit) +
                                    " clusters that can be resident at once"));
    } else {
      CHECK(contains(e->what(), "a cooperative launch of " + std::to_string(clusters * cluster) +
                                    " blocks exceeds the " + std::to_string(sms) + " blocks"));
    }
  }
  if (!cluster_limited) {
    WARN("no cluster size leaves a cluster's worth of SMs idle on this device: the cluster diagnosis is shown "
         "by the stand-in driver's test only");
  }
  // The refusals left the context usable.
  cudrv::fill(out, -1, s);
  cudrv::launch(s, config(1, 2), k, out.get());
  s.synchronize();
  cudrv::copy(host, out);
  CHECK(host[3 * 1 + 2] == 0);  // block 1 read block 0's value
  k.set_non_portable_cluster_size_allowed(dev, false);
}

TEST_CASE("__global__ functions compiled by nvcc launch through the same API", "[gpu][launch][nvcc][driver_error]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  cudrv::stream s(dev);
  auto fill = cudrv_test::nvcc_fill_kernel();
  // nvcc's code is not read by cudrv: the driver describes it, in a context the caller names (none is
  // picked for it).
  cudrv::test::raw_set_current_context(nullptr);  // whatever an earlier case left current
  auto none = catch_as<cudrv::not_supported_error>([&] { (void)fill.parameter_count(); });
  REQUIRE(none);
  CHECK(contains(none->what(), "no context was named or current"));
  {
    cudrv::context_guard guard(dev.primary_context());
    CHECK(fill.parameter_count() == 3);
  }
  const int n = 5000;
  cudrv::device_buffer<int> out(dev, n);
  cudrv::fill(out, -1);
  cudrv::launch(s, {.grid = (n + 127) / 128, .block = 128}, fill, out.get(), 1000, n);
  s.synchronize();
  std::vector<int> host(n);
  cudrv::copy(host, out);
  for (int i = 0; i < n; ++i) {
    REQUIRE(host[i] == 1000 + i);
  }

  auto seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  auto xr = cudrv::test::random_vector<std::uint16_t>(n, seed);
  auto yr = cudrv::test::random_vector<std::uint16_t>(n, seed + 7);
  std::vector<double> x(xr.begin(), xr.end()), y(yr.begin(), yr.end());
  cudrv::device_buffer<double> dx(dev, n), dy(dev, n);
  cudrv::copy(dx, x);
  cudrv::copy(dy, y);
  cudrv_test::launch_axpy_by_pointer(s, {.grid = (n + 255) / 256, .block = 256}, 0.25, dx.get(), dy.get(), n);
  s.synchronize();
  std::vector<double> r(n);
  cudrv::copy(r, dy);
  for (int i = 0; i < n; ++i) {
    REQUIRE(r[i] == 0.25 * x[i] + y[i]);
  }
  // Attributes and occupancy work for nvcc kernels too.
  CHECK(fill.attributes(dev).num_regs > 0);
  CHECK(fill.suggested_block_size(dev).block_size > 0);
}
