// Managed memory in batches, typed advice and range attributes (issue 34 part 7) against the stand-in
// driver (fake_cuda.cpp): the arrays cudrv hands cuMemPrefetchBatchAsync / cuMemDiscardBatchAsync /
// cuMemDiscardAndPrefetchBatchAsync (one location entry per run of equal locations), the loop of
// cuMemPrefetchAsync, the refusals before the driver, and the decoding of cuMemRangeGetAttributes.
// The hidden [no-managed-batch] cases change the fake before cudrv asks it: the entry points hidden
// (FAKE_CUDA_HIDE) or a device without concurrent managed access (FAKE_CUDA_NO_CONCURRENT_MANAGED). ctest
// runs each case in a process of its own; a plain run of the binary leaves them out.
#include <catch2/catch.hpp>

#include <cudrv/cudrv.hpp>

#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "fake_driver/fake_hooks.hpp"
#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;

namespace {

std::string address(const void* p) {
  std::ostringstream o;
  o << p;
  return o.str();
}
template <class T>
std::string range_of(const cudrv::managed_buffer<T>& b) {
  return address(b.data()) + "+" + std::to_string(b.size_bytes());
}

struct fixture {
  cudrv::device dev{1};  // device 0 of the fake is held by another process
  cudrv::stream stream{dev};
};

}  // namespace

TEST_CASE("prefetch_batch passes every range and one location entry per run of equal locations",
          "[fake-driver][managed-batch]") {
  fixture f;
  cudrv::managed_buffer<int> a(f.dev, 100), b(f.dev, 300), c(f.dev, 7);
  cudrv::prefetch_batch batch;
  batch.add(a, f.dev).add(b, f.dev).add(c, cudrv::memory_location::host());
  REQUIRE(batch.size() == 3);
  CHECK(batch.locations().size() == 2);
  CHECK(std::vector<std::size_t>(batch.location_indices().begin(), batch.location_indices().end()) ==
        std::vector<std::size_t>{0, 2});
  CHECK(batch.sizes()[1] == 300 * sizeof(int));
  CHECK(batch.addresses()[2] == reinterpret_cast<CUdeviceptr>(c.data()));
  REQUIRE(cudrv::managed_batch_supported());
  const std::size_t before = cudrv::test::fake_log().size();
  const long long calls = cudrv::test::fake_counter("prefetch_batches");
  CHECK(cudrv::prefetch(batch, f.stream) == cudrv::managed_batch_path::driver_batch);
  CHECK(cudrv::test::fake_counter("prefetch_batches") == calls + 1);
  const std::string log = cudrv::test::fake_log().substr(before);
  CHECK(contains(log,
                 "prefetch_batch n=3 locs=1:1@0,2:0@2 ranges=" + range_of(a) + "," + range_of(b) + "," + range_of(c)));
  // The range attributes name the last prefetch location of each range.
  CHECK(cudrv::get_managed_range_attributes(a).last_prefetch_location == cudrv::memory_location(f.dev));
  CHECK(cudrv::get_managed_range_attributes(c).last_prefetch_location == cudrv::memory_location::host());
  // A copy holds the same arrays; a cleared batch is empty and refused.
  cudrv::prefetch_batch copy = batch;
  CHECK(copy.size() == 3);
  batch.clear();
  CHECK(batch.empty());
  auto e = catch_as<cudrv::invalid_argument_error>([&] { (void)cudrv::prefetch(batch, f.stream); });
  REQUIRE(e);
  CHECK(contains(e->what(), "no range"));
}

TEST_CASE("prefetch falls back to one cuMemPrefetchAsync per range, in order", "[fake-driver][managed-batch]") {
  fixture f;
  cudrv::managed_buffer<float> a(f.dev, 64), b(f.dev, 32);
  cudrv::prefetch_batch batch;
  batch.add(a, cudrv::memory_location::host_numa(1)).add(b, f.dev);
  const long long batches = cudrv::test::fake_counter("prefetch_batches");
  const long long singles = cudrv::test::fake_counter("prefetches");
  std::size_t before = cudrv::test::fake_log().size();
  CHECK(cudrv::prefetch(batch, f.stream, cudrv::managed_batch_mode::fallback_loop) ==
        cudrv::managed_batch_path::fallback_loop);
  std::string log = cudrv::test::fake_log().substr(before);
  const auto first = log.find("prefetch " + address(a.data()) + " " + std::to_string(a.size_bytes()) + " to 3:1");
  const auto second = log.find("prefetch " + address(b.data()) + " " + std::to_string(b.size_bytes()) + " to 1:1");
  CHECK(first != std::string::npos);
  CHECK(second != std::string::npos);
  CHECK(first < second);
  CHECK(cudrv::test::fake_counter("prefetches") == singles + 2);
  // The legacy default stream: the batch entry points refuse it, so automatic takes the loop too.
  CHECK(cudrv::prefetch(batch, cudrv::stream_ref::legacy_default()) == cudrv::managed_batch_path::fallback_loop);
  CHECK(cudrv::test::fake_counter("prefetch_batches") == batches);
  auto e = catch_as<cudrv::invalid_argument_error>([&] {
    (void)cudrv::prefetch(batch, cudrv::stream_ref::legacy_default(), cudrv::managed_batch_mode::driver_batch);
  });
  REQUIRE(e);
  CHECK(contains(e->what(), "legacy default stream"));
  // A range the driver refuses on the loop names its index; the ranges before it were enqueued.
  cudrv::managed_buffer<float> gone(f.dev, 16);
  cudrv::prefetch_batch late;
  late.add(a, f.dev).add(gone, f.dev);
  gone.reset();  // freed after it was checked: the driver refuses it
  before = cudrv::test::fake_log().size();
  auto failed = catch_as<cudrv::managed_batch_error>(
      [&] { (void)cudrv::prefetch(late, f.stream, cudrv::managed_batch_mode::fallback_loop); });
  REQUIRE(failed);
  CHECK(failed->failed_index() == std::optional<std::size_t>(1));
  CHECK(failed->batch_size() == 2);
  CHECK(failed->api() == "cuMemPrefetchAsync");
  CHECK(contains(failed->what(), "range 1 of 2"));
  CHECK(contains(cudrv::test::fake_log().substr(before), "prefetch " + address(a.data())));
}

TEST_CASE("managed batches refuse ranges before the driver and stay unchanged", "[fake-driver][managed-batch]") {
  fixture f;
  cudrv::managed_buffer<int> m(f.dev, 10);
  cudrv::device_buffer<int> d(f.dev, 10);
  cudrv::prefetch_batch batch;
  batch.add(m, f.dev);
  const long long queries = cudrv::test::fake_counter("pointer_queries");
  auto not_managed = catch_as<cudrv::invalid_argument_error>([&] { batch.add(d, f.dev); });
  REQUIRE(not_managed);
  CHECK(contains(not_managed->what(), "range 1"));
  CHECK(contains(not_managed->what(), "not managed memory"));
  CHECK(cudrv::test::fake_counter("pointer_queries") == queries + 1);
  auto empty = catch_as<cudrv::invalid_argument_error>([&] { batch.add(m.view().first(0), f.dev); });
  REQUIRE(empty);
  CHECK(contains(empty->what(), "is empty"));
  auto nowhere = catch_as<cudrv::invalid_argument_error>([&] { batch.add(m, cudrv::memory_location::none()); });
  REQUIRE(nowhere);
  CHECK(contains(nowhere->what(), "memory_location::none()"));
  const cudrv::device_span<int> past(reinterpret_cast<CUdeviceptr>(m.data()) + 32, 4);  // 2 elements past the end
  auto beyond = catch_as<cudrv::invalid_argument_error>([&] { batch.add(past, f.dev); });
  REQUIRE(beyond);
  CHECK(contains(beyond->what(), "runs past the end of its managed allocation"));
  cudrv::managed_buffer<int> moved = std::move(m);
  cudrv::discard_batch discards;
  auto null = catch_as<cudrv::invalid_argument_error>([&] { discards.add(m); });  // NOLINT(bugprone-use-after-move)
  REQUIRE(null);
  CHECK(contains(null->what(), "null"));
  CHECK(batch.size() == 1);  // every refused range left the batch as it was
  CHECK(discards.empty());
}

TEST_CASE("discard and discard_and_prefetch reach their entry points", "[fake-driver][managed-batch]") {
  fixture f;
  cudrv::managed_buffer<unsigned char> a(f.dev, 256), b(f.dev, 128);
  cudrv::discard_batch discards;
  discards.add(a).add(b.view().subspan(64));
  CHECK(discards.locations().empty());
  std::size_t before = cudrv::test::fake_log().size();
  cudrv::discard(discards, f.stream);
  CHECK(contains(cudrv::test::fake_log().substr(before),
                 "discard_batch n=2 ranges=" + range_of(a) + "," + address(b.data() + 64) + "+64"));
  cudrv::discard_and_prefetch_batch both;
  both.add(a, f.dev).add(b, cudrv::memory_location::host());
  before = cudrv::test::fake_log().size();
  cudrv::discard_and_prefetch(both, f.stream);
  CHECK(contains(cudrv::test::fake_log().substr(before),
                 "discard_and_prefetch_batch n=2 locs=1:1@0,2:0@1 ranges=" + range_of(a) + "," + range_of(b)));
  CHECK(cudrv::get_managed_range_attributes(b).last_prefetch_location == cudrv::memory_location::host());
  auto legacy =
      catch_as<cudrv::invalid_argument_error>([&] { cudrv::discard(discards, cudrv::stream_ref::legacy_default()); });
  REQUIRE(legacy);
  CHECK(contains(legacy->what(), "cuMemDiscardBatchAsync"));
}

TEST_CASE("typed advice reaches cuMemAdvise and the range attributes decode it", "[fake-driver][managed-batch]") {
  fixture f;
  cudrv::managed_buffer<double> m(f.dev, 50);
  const std::size_t before = cudrv::test::fake_log().size();
  cudrv::advise(m, cudrv::memory_advice::set_read_mostly);
  m.advise(cudrv::memory_advice::set_preferred_location, cudrv::memory_location::host_numa(1));
  cudrv::advise(m.view(), cudrv::memory_advice::set_accessed_by, cudrv::device(0));
  cudrv::advise(m, cudrv::memory_advice::set_accessed_by, f.dev);
  const std::string log = cudrv::test::fake_log().substr(before);
  const std::string at = "advise " + address(m.data()) + " " + std::to_string(m.size_bytes());
  CHECK(contains(log, at + " " + std::to_string(CU_MEM_ADVISE_SET_READ_MOSTLY) + " at 2:0"));
  CHECK(contains(log, at + " " + std::to_string(CU_MEM_ADVISE_SET_PREFERRED_LOCATION) + " at 3:1"));
  CHECK(contains(log, at + " " + std::to_string(CU_MEM_ADVISE_SET_ACCESSED_BY) + " at 1:0"));
  const cudrv::managed_range_attributes a = cudrv::get_managed_range_attributes(m);
  CHECK(a.read_mostly);
  CHECK(a.preferred_location == cudrv::memory_location::host_numa(1));
  CHECK(a.last_prefetch_location == cudrv::memory_location::none());  // never prefetched
  REQUIRE(a.accessed_by.size() == 2);
  CHECK(a.accessed_by[0] == cudrv::memory_location(cudrv::device(0)));
  CHECK(a.accessed_by[1] == cudrv::memory_location(f.dev));
  cudrv::advise(m, cudrv::memory_advice::unset_read_mostly);
  cudrv::advise(m, cudrv::memory_advice::unset_preferred_location);
  cudrv::advise(m, cudrv::memory_advice::unset_accessed_by, cudrv::device(0));
  const cudrv::managed_range_attributes b =
      cudrv::get_managed_range_attributes(reinterpret_cast<CUdeviceptr>(m.data()), m.size_bytes());
  CHECK_FALSE(b.read_mostly);
  CHECK(b.preferred_location == cudrv::memory_location::none());
  REQUIRE(b.accessed_by.size() == 1);
  CHECK(b.accessed_by[0] == cudrv::memory_location(f.dev));
  // Refusals before the driver: a location the advice needs, managed memory.
  auto no_location =
      catch_as<cudrv::invalid_argument_error>([&] { cudrv::advise(m, cudrv::memory_advice::set_preferred_location); });
  REQUIRE(no_location);
  CHECK(contains(no_location->what(), "set_preferred_location needs a location"));
  cudrv::device_buffer<double> d(f.dev, 50);
  auto device_memory =
      catch_as<cudrv::invalid_argument_error>([&] { cudrv::advise(d, cudrv::memory_advice::set_read_mostly); });
  REQUIRE(device_memory);
  CHECK(contains(device_memory->what(), "not managed memory"));
  auto attributes = catch_as<cudrv::invalid_argument_error>([&] { (void)cudrv::get_managed_range_attributes(d); });
  REQUIRE(attributes);
  CHECK(contains(attributes->what(), "cudrv::get_managed_range_attributes"));
}

TEST_CASE("without the CUDA 13.0 entry points prefetches loop and discards are not supported",
          "[.][no-managed-batch]") {
  setenv("FAKE_CUDA_HIDE",
         "cuMemPrefetchBatchAsync,cuMemDiscardBatchAsync,cuMemDiscardAndPrefetchBatchAsync,"
         "cuDeviceRegisterAsyncNotification,cuDeviceUnregisterAsyncNotification",
         1);  // read by the fake's cuGetProcAddress
  fixture f;
  CHECK_FALSE(cudrv::managed_batch_supported());
  cudrv::managed_buffer<int> m(f.dev, 10);
  cudrv::prefetch_batch batch;
  batch.add(m, f.dev);
  const long long singles = cudrv::test::fake_counter("prefetches");
  CHECK(cudrv::prefetch(batch, f.stream) == cudrv::managed_batch_path::fallback_loop);
  CHECK(cudrv::test::fake_counter("prefetches") == singles + 1);
  auto forced = catch_as<cudrv::not_supported_error>(
      [&] { (void)cudrv::prefetch(batch, f.stream, cudrv::managed_batch_mode::driver_batch); });
  REQUIRE(forced);
  CHECK(contains(forced->what(), "cuMemPrefetchBatchAsync"));
  cudrv::discard_batch discards;
  discards.add(m);
  auto discard = catch_as<cudrv::not_supported_error>([&] { cudrv::discard(discards, f.stream); });
  REQUIRE(discard);
  CHECK(contains(discard->what(), "cuMemDiscardBatchAsync"));
  CHECK(contains(discard->what(), "no fallback"));
  CHECK(discard->result() == static_cast<CUresult>(36));  // CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER
  // Notifications: a driver before CUDA 12.4.
  CHECK_FALSE(cudrv::async_notifications_supported());
  auto subscribe = catch_as<cudrv::not_supported_error>(
      [&] { cudrv::async_notification_subscription s(f.dev, [](const cudrv::async_notification&) {}); });
  REQUIRE(subscribe);
  CHECK(contains(subscribe->what(), "cuDeviceRegisterAsyncNotification"));
}

TEST_CASE("a device without concurrent managed access keeps batches off the driver", "[.][no-managed-batch]") {
  setenv("FAKE_CUDA_NO_CONCURRENT_MANAGED", "1", 1);  // read by the fake's cuDeviceGetAttribute
  fixture f;
  cudrv::managed_buffer<int> m(f.dev, 10);
  cudrv::prefetch_batch batch;
  batch.add(m, f.dev);
  CHECK(cudrv::prefetch(batch, f.stream) == cudrv::managed_batch_path::fallback_loop);
  auto forced = catch_as<cudrv::not_supported_error>(
      [&] { (void)cudrv::prefetch(batch, f.stream, cudrv::managed_batch_mode::driver_batch); });
  REQUIRE(forced);
  CHECK(contains(forced->what(), "CONCURRENT_MANAGED_ACCESS"));
  cudrv::discard_and_prefetch_batch both;
  both.add(m, f.dev);
  CHECK(catch_as<cudrv::not_supported_error>([&] { cudrv::discard_and_prefetch(both, f.stream); }).has_value());
  CHECK(cudrv::test::fake_counter("discard_and_prefetch_batches") == 0);
}
