// Batched copies against the stand-in driver (fake_cuda.cpp): the descriptors cudrv hands the driver
// (attribute entries and their first copies, source access orders, hints, pitched operands), the index
// of the failing copy in the error, and the fallback taken when the driver lacks the batch entry points
// ([no-batch-copy]: FAKE_CUDA_HIDE hides them; its own process). The fake's device memory is host
// memory, so every copy really moves bytes and the results are checked against the sources.
#include <catch2/catch.hpp>

#include <cudrv/cudrv.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "fake_driver/fake_hooks.hpp"
#include "support/catch_support.hpp"
#include "support/device_buffer_support.hpp"
#include "support/memory_support.hpp"
#include "support/test_support.hpp"

using cudrv::test::contains;
using cudrv::test::mismatch;
using cudrv::test::poison_value;
using cudrv::test::poisoned_buffer;
using cudrv::test::random_vector;
using cudrv::test::read_back;

namespace {

long long counter(const char* name) { return cudrv::test::fake_counter(name); }
std::string fake_log() { return cudrv::test::fake_log(); }

// The log lines written since `before` (a length of the log).
std::string log_since(std::size_t before) { return fake_log().substr(before); }

std::string loc(CUmemLocationType type, int id) {
  return std::to_string(static_cast<int>(type)) + ":" + std::to_string(id);
}

// Device 1 (sm_90) of the fake; device 0 (sm_80) is held by another process unless the test frees it.
struct fixture {
  cudrv::device dev{1};
  cudrv::stream stream{dev};
  std::uint64_t seed = cudrv::test::test_seed();
};

}  // namespace

TEST_CASE("batch_copy passes one descriptor per copy and one attribute entry per run of equal attributes",
          "[fake-driver][batch-copy]") {
  fixture f;
  INFO("seed " << f.seed);
  constexpr std::size_t n = 6;
  std::vector<std::vector<int>> host;
  std::vector<cudrv::device_buffer<int>> src, dst;
  for (std::size_t i = 0; i < n; ++i) {
    host.push_back(random_vector<int>(100 + 37 * i, f.seed + i));
    src.emplace_back(f.dev, host.back().size());
    cudrv::copy(src.back(), host.back());
    dst.push_back(poisoned_buffer<int>(f.dev, host.back().size() + 5));
  }
  const cudrv::copy_attributes during{.order = cudrv::source_access_order::during_api_call};
  const cudrv::copy_attributes hinted{.order = cudrv::source_access_order::any,
                                      .source_hint = cudrv::copy_location_hint::on(f.dev),
                                      .destination_hint = cudrv::copy_location_hint::on_host_numa(3),
                                      .prefer_overlap_with_compute = true};
  cudrv::batch_copy batch;
  batch.add(dst[0], src[0]).add(dst[1], src[1]).add(dst[2], src[2]);
  batch.add(dst[3], src[3], during).add(dst[4], src[4], during);
  batch.add(dst[5], src[5], 10, hinted);  // the first 10 elements only
  REQUIRE(batch.size() == n);
  CHECK(batch.attributes().size() == 3);
  CHECK(std::vector<std::size_t>(batch.attribute_indices().begin(), batch.attribute_indices().end()) ==
        std::vector<std::size_t>{0, 3, 5});
  CHECK(batch.sizes()[5] == 10 * sizeof(int));
  CHECK(batch.destinations()[4] == dst[4].data());

  REQUIRE(cudrv::batch_copy_supported());
  const std::size_t before = fake_log().size();
  const long long singles = counter("memcpy_async");
  CHECK(cudrv::copy(batch, f.stream) == cudrv::batch_copy_path::driver_batch);
  f.stream.synchronize();
  CHECK(counter("memcpy_batch") == 1);
  CHECK(counter("memcpy_async") == singles);
  const std::string expected =
      "memcpy_batch n=6 attrs=3 idx=0,3,5 order=1,2,3 flags=0,0,1 srchint=" + loc(CU_MEM_LOCATION_TYPE_INVALID, 0) +
      "," + loc(CU_MEM_LOCATION_TYPE_INVALID, 0) + "," + loc(CU_MEM_LOCATION_TYPE_DEVICE, 1) +
      " dsthint=" + loc(CU_MEM_LOCATION_TYPE_INVALID, 0) + "," + loc(CU_MEM_LOCATION_TYPE_INVALID, 0) + "," +
      loc(CU_MEM_LOCATION_TYPE_HOST_NUMA, 3);
  CHECK(log_since(before) == expected + "\n");
  for (std::size_t i = 0; i < n; ++i) {
    INFO("copy " << i);
    std::vector<int> want(dst[i].size(), poison_value<int>());
    const std::size_t copied = i == 5 ? 10 : host[i].size();
    std::copy(host[i].begin(), host[i].begin() + static_cast<std::ptrdiff_t>(copied), want.begin());
    CHECK(mismatch(read_back(dst[i]), want).empty());
  }
}

TEST_CASE("batch_copy checks every copy when it is added, before any driver call", "[fake-driver][batch-copy]") {
  fixture f;
  const long long batches = counter("memcpy_batch");
  cudrv::device_buffer<float> small(f.dev, 4), large(f.dev, 8);
  std::vector<float> empty;
  cudrv::batch_copy batch;
  batch.add(large, small);
  auto e = cudrv::test::catch_as<cudrv::invalid_argument_error>([&] { batch.add(small, large); });
  REQUIRE(e);
  CHECK(e->api() == "cudrv::batch_copy::add");
  CHECK(contains(e->what(), "copy 1 of 2"));
  CHECK(contains(e->what(), "larger than the destination"));
  CHECK(cudrv::test::catch_as<cudrv::invalid_argument_error>([&] { batch.add(large, empty); }));
  CHECK(cudrv::test::catch_as<cudrv::invalid_argument_error>([&] { batch.add(large, small, 5); }));
  CHECK(cudrv::test::catch_as<cudrv::invalid_argument_error>(
      [&] { batch.add(cudrv::device_span<float>(CUdeviceptr{0}, 8), small); }));
  const cudrv::copy_attributes bad{.order = static_cast<cudrv::source_access_order>(7)};
  auto o = cudrv::test::catch_as<cudrv::invalid_argument_error>([&] { batch.add(large, small, bad); });
  REQUIRE(o);
  CHECK(contains(o->what(), "source_access_order 7"));
  CHECK(batch.size() == 1);  // the refused copies were not added
  CHECK(batch.attributes().size() == 1);

  cudrv::batch_copy none;
  CHECK(cudrv::test::catch_as<cudrv::invalid_argument_error>([&] { (void)cudrv::copy(none, f.stream); }));
  CHECK(counter("memcpy_batch") == batches);
}

TEST_CASE("copies of overlapping ranges are refused on every path that shares the linear checks, before the driver",
          "[fake-driver][copy][batch-copy]") {
  fixture f;
  INFO("seed " << f.seed);
  const std::vector<float> values = random_vector<float>(16, f.seed);
  cudrv::device_buffer<float> d(f.dev, values.size());
  cudrv::copy(d, values);
  const auto all = d.view();
  // The overlaps: the destination after the source, before it, and the same memory.
  struct overlap {
    std::size_t dst, src;
    const char* says;
  };
  for (const overlap& o : {overlap{2, 0, "overlap"}, overlap{0, 5, "overlap"}, overlap{3, 3, "the same memory"}}) {
    INFO("destination at element " << o.dst << ", source at element " << o.src);
    const cudrv::device_span<float> dst = all.subspan(o.dst, 8);
    const cudrv::device_span<const float> src = all.subspan(o.src, 8);
    auto refused = [&](const char* api, auto&& copy) {
      INFO(api);
      const long long async_copies = counter("memcpy_async");
      const long long refusals = counter("failed_calls");
      const cudrv::invalid_argument_error e = cudrv::test::require_invalid_argument(api, copy);
      CHECK(e.api() == api);
      CHECK(contains(e.what(), o.says));
      CHECK(contains(e.what(), "copy through a separate buffer"));
      CHECK(counter("memcpy_async") == async_copies);
      CHECK(counter("failed_calls") == refusals);
    };
    refused("cudrv::copy", [&] { cudrv::copy(dst, src, f.stream); });
    refused("cudrv::copy", [&] { cudrv::copy(dst, src); });
    refused("cudrv::copy", [&] { cudrv::copy(dst, src, 6, f.stream); });
    refused("cudrv::copy_peer", [&] { cudrv::copy_peer(dst, f.dev, src, f.dev, f.stream); });
    refused("cudrv::copy_peer", [&] { cudrv::copy_peer(dst, f.dev.primary_context(), src, f.dev.primary_context()); });
    cudrv::batch_copy batch;
    refused("cudrv::batch_copy::add", [&] { batch.add(dst, src); });
    CHECK(batch.empty());
    cudrv::graph g;
    cudrv::graph_builder b(g, f.dev);
    refused("cudrv::copy", [&] { (void)cudrv::copy(dst, src, b); });
  }
  f.stream.synchronize();
  CHECK(mismatch(read_back(d), values).empty());  // nothing was copied
  // Ranges that only touch are no overlap: the copy is made.
  cudrv::copy(all.subspan(8, 8), cudrv::device_span<const float>(all.first(8)), f.stream);
  f.stream.synchronize();
  std::vector<float> expected = values;
  std::copy(values.begin(), values.begin() + 8, expected.begin() + 8);
  CHECK(mismatch(read_back(d), expected).empty());
}

TEST_CASE("a synchronous copy of overlapping pageable host ranges is refused too, not memmoved",
          "[fake-driver][copy]") {
  // No context is current and the memory is pageable: the copy would run on the host (memmove, which
  // handles overlap), while with a context current it goes to cuMemcpy (undefined for overlap). The two
  // must not differ: both refuse.
  // (ctest runs each case in a process of its own, where nothing made a context current.)
  REQUIRE(cudrv::driver::available());
  std::vector<int> host(12);
  for (std::size_t i = 0; i < host.size(); ++i) {
    host[i] = static_cast<int>(i);
  }
  const std::vector<int> before = host;
  const std::span<int> all(host);
  auto e = cudrv::test::require_invalid_argument("overlapping host copy", [&] {
    cudrv::copy(all.subspan(1, 8), std::span<const int>(all.first(8)));
  });
  CHECK(contains(e.what(), "overlap"));
  CHECK(host == before);
  cudrv::copy(all.subspan(6, 6), std::span<const int>(all.first(6)));  // touching, not overlapping: copied
  CHECK(std::equal(host.begin() + 6, host.end(), before.begin()));
}

TEST_CASE("a copy the driver refuses is named by its index in the batch", "[fake-driver][batch-copy][driver_error]") {
  fixture f;
  std::vector<cudrv::device_buffer<int>> a, b;
  for (int i = 0; i < 4; ++i) {
    a.emplace_back(f.dev, 64);
    b.emplace_back(f.dev, 64);
  }
  CUdeviceptr stale = 0;
  {
    cudrv::device_buffer<int> gone(f.dev, 1000);
    stale = gone.data();
  }  // freed: the driver refuses its address
  cudrv::batch_copy batch;
  batch.add(b[0], a[0]).add(b[1], a[1]).add(b[2], cudrv::device_span<int>(stale, 64)).add(b[3], a[3]);
  auto e = cudrv::test::catch_as<cudrv::batch_copy_error>([&] { (void)cudrv::copy(batch, f.stream); });
  REQUIRE(e);
  INFO(e->what());
  CHECK(e->failed_index() == std::optional<std::size_t>(2));
  CHECK(e->batch_size() == 4);
  CHECK(e->api() == "cuMemcpyBatchAsync");
  CHECK(e->source() == cudrv::error_source::driver);
  CHECK(contains(e->what(), "copy 2 of 4"));
}

TEST_CASE("the fallback loop: chosen for the legacy default stream, forced by the mode", "[fake-driver][batch-copy]") {
  fixture f;
  INFO("seed " << f.seed);
  const auto data = random_vector<std::uint16_t>(3000, f.seed);
  cudrv::device_buffer<std::uint16_t> src(f.dev, data.size());
  cudrv::copy(src, data);
  std::vector<cudrv::device_buffer<std::uint16_t>> dst;
  cudrv::batch_copy batch;
  for (std::size_t i = 0; i < 3; ++i) {
    dst.push_back(poisoned_buffer<std::uint16_t>(f.dev, 1000));
    batch.add(dst[i], src.view().subspan(i * 1000, 1000), {.order = cudrv::source_access_order::during_api_call});
  }
  const long long singles = counter("memcpy_async");
  const long long syncs = counter("stream_synchronize");
  const long long batches = counter("memcpy_batch");
  CHECK(cudrv::copy(batch, f.stream, cudrv::batch_copy_mode::fallback_loop) == cudrv::batch_copy_path::fallback_loop);
  CHECK(counter("memcpy_async") == singles + 3);
  CHECK(counter("stream_synchronize") == syncs + 1);  // what during_api_call promises
  CHECK(counter("memcpy_batch") == batches);
  for (std::size_t i = 0; i < 3; ++i) {
    const std::vector<std::uint16_t> want(data.begin() + static_cast<std::ptrdiff_t>(i * 1000),
                                          data.begin() + static_cast<std::ptrdiff_t>((i + 1) * 1000));
    CHECK(mismatch(read_back(dst[i]), want).empty());
  }

  // The batch entry points refuse the legacy default stream: automatic falls back, driver_batch refuses.
  f.dev.set_current();
  const auto legacy = cudrv::stream_ref::legacy_default();
  CHECK(cudrv::copy(batch, legacy) == cudrv::batch_copy_path::fallback_loop);
  CHECK(counter("memcpy_batch") == batches);
  auto e = cudrv::test::catch_as<cudrv::invalid_argument_error>(
      [&] { (void)cudrv::copy(batch, legacy, cudrv::batch_copy_mode::driver_batch); });
  REQUIRE(e);
  CHECK(contains(e->what(), "legacy default stream"));
}

TEST_CASE("a capturing stream takes the loop, which captures as memcpy nodes", "[fake-driver][batch-copy]") {
  fixture f;
  cudrv::device_buffer<int> a(f.dev, 64), b(f.dev, 64);
  cudrv::batch_copy batch;
  batch.add(b, a);
  auto* set_capturing = cudrv::test::fake_hook<void(CUstream)>("fake_cuda_set_capturing");
  set_capturing(f.stream.native_handle());
  const long long batches = counter("memcpy_batch");
  const long long singles = counter("memcpy_async");
  CHECK(cudrv::copy(batch, f.stream) == cudrv::batch_copy_path::fallback_loop);
  auto e = cudrv::test::catch_as<cudrv::invalid_argument_error>(
      [&] { (void)cudrv::copy(batch, f.stream, cudrv::batch_copy_mode::driver_batch); });
  set_capturing(nullptr);
  REQUIRE(e);
  CHECK(contains(e->what(), "capturing"));
  CHECK(counter("memcpy_batch") == batches);
  CHECK(counter("memcpy_async") == singles + 1);
  CHECK(cudrv::copy(batch, f.stream) == cudrv::batch_copy_path::driver_batch);  // no longer capturing
}

TEST_CASE("batch_copy_3d passes pitched pointer operands in bytes, the fallback copies the same",
          "[fake-driver][batch-copy]") {
  fixture f;
  INFO("seed " << f.seed);
  constexpr std::size_t w = 5, h = 3, d = 2, pitch_elems = 8, dst_rows = 4;
  const auto data = random_vector<float>(w * h * d, f.seed);
  cudrv::device_buffer<float> src(f.dev, data.size());
  cudrv::copy(src, data);
  for (const auto mode : {cudrv::batch_copy_mode::automatic, cudrv::batch_copy_mode::fallback_loop}) {
    INFO("mode " << static_cast<int>(mode));
    auto dst = poisoned_buffer<float>(f.dev, pitch_elems * dst_rows * d);
    const auto src_view = cudrv::pitched_span<float>::dense(src.view(), w, h, d);
    const cudrv::pitched_span<float> dst_view{dst.data(), pitch_elems * sizeof(float), pitch_elems, dst_rows, d};
    cudrv::batch_copy_3d batch;
    batch.add(dst_view, cudrv::pitched_span<const float>(src_view), {.prefer_overlap_with_compute = true});
    const std::size_t before = fake_log().size();
    const auto path = cudrv::copy(batch, f.stream, mode);
    f.stream.synchronize();
    if (mode == cudrv::batch_copy_mode::automatic) {
      CHECK(path == cudrv::batch_copy_path::driver_batch);
      CHECK(log_since(before) == "memcpy_3d_batch n=1 [" + std::to_string(w * sizeof(float)) +
                                     "x3x2 src_row=" + std::to_string(w * sizeof(float)) + " src_layer=3 dst_row=" +
                                     std::to_string(pitch_elems * sizeof(float)) + " dst_layer=4 order=1 flags=1]\n");
    } else {
      CHECK(path == cudrv::batch_copy_path::fallback_loop);
      CHECK(counter("memcpy_3d_async") == 1);
    }
    std::vector<float> want(dst.size(), poison_value<float>());
    for (std::size_t z = 0; z < d; ++z) {
      for (std::size_t y = 0; y < h; ++y) {
        for (std::size_t x = 0; x < w; ++x) {
          want[(z * dst_rows + y) * pitch_elems + x] = data[(z * h + y) * w + x];
        }
      }
    }
    CHECK(mismatch(read_back(dst), want).empty());
  }
  // Checked when added, as the pitched cudrv::copy.
  cudrv::batch_copy_3d batch;
  const auto wide = cudrv::pitched_span<float>::dense(src.view(), w * h, 1, 1);
  const cudrv::pitched_span<float> narrow{src.data(), w * sizeof(float), w, h, d};
  auto e = cudrv::test::catch_as<cudrv::invalid_argument_error>([&] { batch.add(narrow, wide); });
  REQUIRE(e);
  CHECK(contains(e->what(), "copy 0 of 1"));
  CHECK(batch.empty());
}

TEST_CASE("the 3-D fallback names the copy that failed", "[fake-driver][batch-copy][driver_error]") {
  fixture f;
  cudrv::device_buffer<int> a(f.dev, 64), b(f.dev, 64);
  CUdeviceptr stale = 0;
  {
    cudrv::device_buffer<int> gone(f.dev, 999);
    stale = gone.data();
  }
  cudrv::batch_copy_3d batch;
  const auto good = cudrv::pitched_span<int>::dense(a.view(), 8, 8);
  batch.add(cudrv::pitched_span<int>::dense(b.view(), 8, 8), cudrv::pitched_span<const int>(good));
  batch.add(cudrv::pitched_span<int>{stale, 32, 8, 8, 1}, cudrv::pitched_span<const int>(good));
  for (const auto mode : {cudrv::batch_copy_mode::automatic, cudrv::batch_copy_mode::fallback_loop}) {
    auto e = cudrv::test::catch_as<cudrv::batch_copy_error>([&] { (void)cudrv::copy(batch, f.stream, mode); });
    REQUIRE(e);
    INFO(e->what());
    CHECK(e->failed_index() == std::optional<std::size_t>(1));
    CHECK(e->batch_size() == 2);
    CHECK(contains(e->what(), "copy 1 of 2"));
    CHECK(e->api() == (mode == cudrv::batch_copy_mode::automatic ? "cuMemcpy3DBatchAsync" : "cuMemcpy2DAsync"));
  }
}

TEST_CASE("without the batch entry points the loop is taken, and forcing the batch is not supported",
          "[.][no-batch-copy]") {
  setenv("FAKE_CUDA_HIDE", "cuMemcpyBatchAsync,cuMemcpy3DBatchAsync", 1);  // read by the fake's cuGetProcAddress
  fixture f;
  INFO("seed " << f.seed);
  CHECK_FALSE(cudrv::batch_copy_supported());
  CHECK_FALSE(cudrv::batch_copy_3d_supported());
  const auto data = random_vector<double>(500, f.seed);
  cudrv::device_buffer<double> src(f.dev, data.size());
  cudrv::copy(src, data);
  auto dst = poisoned_buffer<double>(f.dev, 600);
  cudrv::batch_copy batch;
  batch.add(dst, src);
  CHECK(cudrv::copy(batch, f.stream) == cudrv::batch_copy_path::fallback_loop);
  f.stream.synchronize();
  std::vector<double> want(600, poison_value<double>());
  std::copy(data.begin(), data.end(), want.begin());
  CHECK(mismatch(read_back(dst), want).empty());
  auto e = cudrv::test::catch_as<cudrv::not_supported_error>(
      [&] { (void)cudrv::copy(batch, f.stream, cudrv::batch_copy_mode::driver_batch); });
  REQUIRE(e);
  CHECK(contains(e->what(), "cuMemcpyBatchAsync"));
  cudrv::batch_copy_3d b3;
  b3.add(cudrv::pitched_span<double>::dense(dst.view(), 10, 5),
         cudrv::pitched_span<const double>::dense(src.view(), 10, 5));
  CHECK(cudrv::copy(b3, f.stream) == cudrv::batch_copy_path::fallback_loop);
  CHECK(cudrv::test::catch_as<cudrv::not_supported_error>(
      [&] { (void)cudrv::copy(b3, f.stream, cudrv::batch_copy_mode::driver_batch); }));
  CHECK(counter("memcpy_batch") == 0);
  CHECK(counter("memcpy_3d_batch") == 0);
}
