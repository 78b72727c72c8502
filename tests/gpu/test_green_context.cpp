// GPU tier: green contexts. A kernel launched into a green context of N SMs records the SM each block
// ran on (%smid) into a poisoned buffer: at most N distinct SMs, every entry written, and the SMs of
// two green contexts of one split are disjoint. A stream of a green context runs a kernel checked
// against the host on random inputs; libraries, buffers and events work in the green context.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "support/memory_support.hpp"
#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;

namespace {

constexpr std::uint32_t poison = 0xFFFFFFFFu;

// smid: each block spins for `cycles` clock cycles (so that blocks stay resident long enough for the
// scheduler to use every SM it may) and then writes the SM it ran on. fma_axpy: y = fma(a, x, y), one
// rounding, which the host's std::fma reproduces bit for bit.
constexpr const char* source = R"(
extern "C" __global__ void smid(unsigned* out, long long cycles) {
  unsigned id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    out[blockIdx.x] = id;
  }
}
extern "C" __global__ void fma_axpy(float a, const float* x, float* y, unsigned n) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    y[i] = __fmaf_rn(a, x[i], y[i]);
  }
}
)";

const cudrv::object_code& kernels(const cudrv::device& dev) {
  static const cudrv::object_code code =
      cudrv::program("green.cu", source).compile(cudrv::code_kind::cubin, {.arch = dev.arch()}).code;
  return code;
}

// The device's SMs, or nothing (with a visible message) where the driver or device has no green contexts.
std::optional<cudrv::sm_resource> device_sms(const cudrv::device& dev) {
  try {
    return cudrv::sm_resource::of(dev);
  } catch (const cudrv::not_supported_error& e) {
    std::cout << "SKIPPED: green contexts are not supported here (" << e.what() << ")" << std::endl;
    return std::nullopt;
  }
}

// Starts a test case on device 0 (`dev`) with its SMs (`all`), or ends it with a visible skip message.
#define REQUIRE_GREEN_CONTEXTS(dev, all)      \
  CUDRV_REQUIRE_GPU();                        \
  const cudrv::device dev(0);                 \
  const auto all##_or_none = device_sms(dev); \
  if (!all##_or_none) {                       \
    return;                                   \
  }                                           \
  const cudrv::sm_resource& all = *all##_or_none

using smid_kernel = cudrv::typed_kernel<void(unsigned*, long long)>;

// Runs the smid kernel with `blocks` blocks on s and returns the distinct SM ids; every block must
// have written its entry of the poisoned buffer.
std::set<std::uint32_t> sms_used(cudrv::stream_ref s, const smid_kernel& k, unsigned blocks) {
  cudrv::device_buffer<std::uint32_t> out(s, blocks);
  cudrv::fill(out, poison, s);
  const long long cycles = 20000;  // about 10 to 20 us per block
  cudrv::launch(s, {.grid = blocks, .block = 128}, k, out.get(), cycles);
  std::vector<std::uint32_t> host(blocks, 0);
  cudrv::copy(host, out, s);
  s.synchronize();
  const auto unwritten = std::count(host.begin(), host.end(), poison);
  CHECK(unwritten == 0);
  return {host.begin(), host.end()};
}

}  // namespace

TEST_CASE("a kernel in a green context of N SMs runs on at most N SMs", "[gpu][green]") {
  REQUIRE_GREEN_CONTEXTS(dev, all);
  cudrv::test::destruction_error_counter errors;
  INFO("device: " << all.sm_count() << " SMs, min partition " << all.min_partition_size() << ", alignment "
                  << all.coscheduled_alignment());
  REQUIRE(all.sm_count() == static_cast<unsigned>(dev.attribute(cudrv::device_attributes::multiprocessor_count)));
  // A small group, and the rest of the device in the other green context.
  const unsigned want = std::max(all.min_partition_size(), std::min(16u, all.sm_count() / 4));
  const cudrv::sm_split split = all.split_by_count(want, 1);
  REQUIRE(split.groups.size() == 1);
  const unsigned n = split.groups[0].sm_count();
  INFO("group: " << n << " SMs (asked " << want << "), remainder " << split.remainder.sm_count());
  CHECK(n >= want);
  CHECK(n % all.coscheduled_alignment() == 0);
  CHECK(n + split.remainder.sm_count() <= all.sm_count());
  REQUIRE(split.remainder);
  {
    cudrv::library lib(kernels(dev), dev);
    const smid_kernel k = lib.get_kernel<void(unsigned*, long long)>("smid");
    const unsigned blocks = 16 * all.sm_count();  // many more blocks than SMs

    cudrv::green_context small(dev, split.groups[0]);
    cudrv::green_context rest(dev, split.remainder);
    CHECK(small.sm_resource().sm_count() == n);
    CHECK(rest.sm_resource().sm_count() == split.remainder.sm_count());
    cudrv::stream s_small = small.create_stream();
    cudrv::stream s_rest = rest.create_stream();
    CHECK(cudrv::green_context_of(s_small).value() == small);

    // The same kernel on an ordinary stream spreads over more SMs than the group has: the test can fail.
    cudrv::stream plain(dev);
    const std::set<std::uint32_t> everywhere = sms_used(plain, k, blocks);
    INFO("ordinary stream: " << everywhere.size() << " distinct SMs");
    CHECK(everywhere.size() > n);

    const std::set<std::uint32_t> in_small = sms_used(s_small, k, blocks);
    INFO("green context of " << n << " SMs: " << in_small.size() << " distinct SMs");
    CHECK(!in_small.empty());
    CHECK(in_small.size() <= n);
    const std::set<std::uint32_t> in_rest = sms_used(s_rest, k, blocks);
    INFO("green context of the remainder: " << in_rest.size() << " distinct SMs");
    CHECK(!in_rest.empty());
    CHECK(in_rest.size() <= split.remainder.sm_count());
    // The partitions of one split are disjoint.
    std::vector<std::uint32_t> both;
    std::set_intersection(in_small.begin(), in_small.end(), in_rest.begin(), in_rest.end(), std::back_inserter(both));
    CHECK(both.empty());
  }
  CHECK(errors.count() == 0);
}

TEST_CASE("a stream of a green context runs a kernel checked against the host", "[gpu][green]") {
  REQUIRE_GREEN_CONTEXTS(dev, all);
  cudrv::test::destruction_error_counter errors;
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  const std::size_t n = 1000003;
  // Multiples of 1/64 in [-512, 512): finite, no denormals.
  auto random_floats = [](std::size_t count, std::uint64_t s) {
    const auto raw = cudrv::test::random_vector<std::uint16_t>(count, s);
    std::vector<float> v(count);
    std::transform(raw.begin(), raw.end(), v.begin(),
                   [](std::uint16_t r) { return static_cast<float>(r) / 64.0f - 512.0f; });
    return v;
  };
  const auto x = random_floats(n, seed);
  const auto y = random_floats(n, seed + 1);
  const float a = 0.75f;
  std::vector<float> expected(n);
  for (std::size_t i = 0; i < n; ++i) {
    expected[i] = std::fma(a, x[i], y[i]);
  }
  {
    const cudrv::sm_split split = all.split_by_count(all.min_partition_size(), 1);
    cudrv::green_context g(dev, split.groups[0]);
    // The library loaded into the green context, a stream of it, buffers ordered on that stream and a
    // buffer allocated in the green context.
    cudrv::library lib(kernels(dev), g.context());
    const auto k = lib.get_kernel<void(float, const float*, float*, unsigned)>("fma_axpy");
    cudrv::stream s = g.create_stream();
    CHECK(s.is_non_blocking());
    cudrv::device_buffer<float> dx(s, n);
    cudrv::device_buffer<float> dy(g.context(), n);
    cudrv::copy(dx, x, s);
    cudrv::copy(dy, y, s);
    std::vector<float> out(n, std::nanf(""));  // poisoned
    cudrv::launch(s, {.grid = cudrv::dims::checked((n + 255) / 256), .block = 256}, k, a, dx.get(), dy.get(),
                  static_cast<unsigned>(n));
    // The green context's own event: recorded after the kernel, waited on by an ordinary stream.
    cudrv::event done = g.record(cudrv::event_flags::none);
    cudrv::stream reader(dev);
    reader.wait(done);
    cudrv::copy(out, dy, reader);
    reader.synchronize();
    const std::string differ = cudrv::test::mismatch(out.data(), expected.data(), n);
    INFO(differ);
    CHECK(differ.empty());  // bit for bit: one rounding on both sides

    // A green context waits for an event of another stream: the kernel runs after the copy.
    std::vector<float> again(n, std::nanf(""));
    cudrv::fill(dy, 0.0f, reader);
    cudrv::event copied = reader.record();  // named: a temporary owner does not convert to its view
    g.wait(copied);
    cudrv::launch(s, {.grid = cudrv::dims::checked((n + 255) / 256), .block = 256}, k, a, dx.get(), dy.get(),
                  static_cast<unsigned>(n));
    cudrv::copy(again, dy, s);
    g.synchronize();
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i) {
      wrong += again[i] == a * x[i] ? 0 : 1;  // the poison (NaN) never compares equal
    }
    CHECK(wrong == 0);
    s.synchronize();
  }
  CHECK(errors.count() == 0);
}

TEST_CASE("a green context's SMs split again, bad splits name the rule", "[gpu][green][driver_error]") {
  REQUIRE_GREEN_CONTEXTS(dev, all);
  cudrv::test::destruction_error_counter errors;
  {
    auto too_big = catch_as<cudrv::invalid_argument_error>([&] { (void)all.split_by_count(all.sm_count() + 1); });
    REQUIRE(too_big);
    CHECK(contains(too_big->what(), "exceeds"));
    const unsigned per_group = all.sm_count() / 3 + 1;
    const unsigned fit = all.group_count(per_group);
    auto too_many = catch_as<cudrv::invalid_argument_error>([&] { (void)all.split_by_count(per_group, fit + 1); });
    REQUIRE(too_many);
    INFO(too_many->what());
    CHECK(contains(too_many->what(), "only " + std::to_string(fit) + " fit"));
    CHECK(contains(too_many->what(), "min_partition_size"));

    // A group is split again only through a green context made of it. Two halves of a size the
    // rounding keeps (a multiple of the alignment).
    const unsigned align = all.coscheduled_alignment();
    const unsigned half_size = std::max(all.sm_count() / 2 / align, 1u) * align;
    const cudrv::sm_split halves = all.split_by_count(half_size, 2);
    REQUIRE(halves.groups.size() == 2);
    CHECK_THROWS_AS(halves.groups[0].split_by_count(all.min_partition_size()), cudrv::error);
    cudrv::green_context half(dev, halves.groups[0]);
    const cudrv::sm_resource mine = half.sm_resource();
    CHECK(mine.sm_count() == halves.groups[0].sm_count());
    CHECK(cudrv::sm_resource::of(half.context()).sm_count() == mine.sm_count());
    const unsigned quarters = mine.group_count(mine.min_partition_size());
    CHECK(quarters >= 1);
    const cudrv::sm_split inner = mine.split_by_count(mine.min_partition_size());
    CHECK(inner.groups.size() == quarters);
    cudrv::green_context nested(dev, inner.groups[0]);
    CHECK(nested.sm_resource().sm_count() == inner.groups[0].sm_count());
    CHECK(nested.device() == dev);
    CHECK(nested.id() != half.id());
  }
  CHECK(errors.count() == 0);
}
