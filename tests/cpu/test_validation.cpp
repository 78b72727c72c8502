// Arguments that cudrv refuses before calling the driver. Run without a driver ([driverless]): a
// check that came after a driver call would surface as driver_unavailable_error instead.
#include <catch2/catch.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "support/catch_support.hpp"
#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;
using cudrv::test::require_invalid_argument;

namespace {

CUcontext fake_context() { return reinterpret_cast<CUcontext>(std::uintptr_t{0x1000}); }
CUevent fake_event() { return reinterpret_cast<CUevent>(std::uintptr_t{0x2000}); }

}  // namespace

TEST_CASE("event flags are validated before any driver call", "[driverless][event]") {
  CUDRV_REQUIRE_DRIVERLESS();
  const cudrv::context_ref ctx(fake_context());
  auto both = require_invalid_argument("timing | interprocess", [&] {
    cudrv::event e(ctx, cudrv::event_flags::timing | cudrv::event_flags::interprocess);
  });
  CHECK(both.api() == "cudrv::event");
  CHECK(contains(both.what(), "interprocess"));
  CHECK(contains(both.what(), "timing"));

  auto unknown =
      require_invalid_argument("unknown bit 64", [&] { cudrv::event e(ctx, static_cast<cudrv::event_flags>(64)); });
  CHECK(contains(unknown.what(), "unknown event flags"));
  require_invalid_argument("unknown bit with valid ones", [&] {
    cudrv::event e(ctx, cudrv::event_flags::timing | static_cast<cudrv::event_flags>(8));
  });
}

TEST_CASE("context flags are validated before any driver call", "[driverless][context]") {
  CUDRV_REQUIRE_DRIVERLESS();
  const cudrv::device dev = cudrv::device::from_native_handle(0);
  auto e = require_invalid_argument("unknown context flag",
                                    [&] { cudrv::context c(dev, static_cast<cudrv::context_flags>(0x100000u)); });
  CHECK(e.api() == "cudrv::context");
}

TEST_CASE("stream::from_native_handle refuses null and the default streams", "[driverless][stream]") {
  CUDRV_REQUIRE_DRIVERLESS();
  require_invalid_argument("nullptr", [] { (void)cudrv::stream::from_native_handle(nullptr); });
  require_invalid_argument("CU_STREAM_LEGACY", [] { (void)cudrv::stream::from_native_handle(CU_STREAM_LEGACY); });
  require_invalid_argument("CU_STREAM_PER_THREAD",
                           [] { (void)cudrv::stream::from_native_handle(CU_STREAM_PER_THREAD); });
}

TEST_CASE("empty event and context views are refused", "[driverless][event][context]") {
  CUDRV_REQUIRE_DRIVERLESS();
  const cudrv::event_ref null_event(static_cast<CUevent>(nullptr));
  const cudrv::context_ref null_context(static_cast<CUcontext>(nullptr));
  const cudrv::stream_ref legacy = cudrv::stream_ref::legacy_default();

  auto rec = require_invalid_argument("event_ref::record", [&] { null_event.record(legacy); });
  CHECK(contains(rec.what(), "empty"));
  require_invalid_argument("event_ref::synchronize", [&] { null_event.synchronize(); });
  require_invalid_argument("event_ref::is_done", [&] { (void)null_event.is_done(); });
  require_invalid_argument("stream_ref::record(empty event)", [&] { legacy.record(null_event); });
  require_invalid_argument("stream_ref::wait(empty event)", [&] { legacy.wait(null_event); });
  require_invalid_argument("elapsed_time(empty, empty)", [&] { (void)cudrv::elapsed_time(null_event, null_event); });
  require_invalid_argument("elapsed_time(event, empty)",
                           [&] { (void)cudrv::elapsed_time(cudrv::event_ref(fake_event()), null_event); });

  require_invalid_argument("context_ref::synchronize", [&] { null_context.synchronize(); });
  require_invalid_argument("context_ref::device", [&] { (void)null_context.device(); });
  require_invalid_argument("context_ref::flags", [&] { (void)null_context.flags(); });
  require_invalid_argument("context_ref::stream_priority_range", [&] { (void)null_context.stream_priority_range(); });
  require_invalid_argument("context_ref::limit", [&] { (void)null_context.limit(CU_LIMIT_STACK_SIZE); });
  require_invalid_argument("context_guard(empty)", [&] { cudrv::context_guard guard(null_context); });
  require_invalid_argument("stream(empty context)", [&] { cudrv::stream s(null_context); });
  require_invalid_argument("event(empty context)", [&] { cudrv::event e(null_context); });
}

TEST_CASE("copies of overlapping ranges are refused before any driver call, on every linear path",
          "[driverless][copy]") {
  CUDRV_REQUIRE_DRIVERLESS();
  std::vector<int> host(16, 7);
  const std::span<int> all(host);
  const cudrv::context_ref ctx(fake_context());
  for (const auto& [dst_at, src_at] : {std::pair<std::size_t, std::size_t>{4, 0}, {0, 1}, {2, 2}}) {
    INFO("destination at element " << dst_at << ", source at element " << src_at);
    const std::span<int> dst = all.subspan(dst_at, 8);
    const std::span<const int> src = all.subspan(src_at, 8);
    for (const auto& e : {require_invalid_argument("synchronous", [&] { cudrv::copy(dst, src); }),
                          require_invalid_argument("stream-ordered",
                                                   [&] { cudrv::copy(dst, src, cudrv::stream_ref::legacy_default()); }),
                          require_invalid_argument("first 5", [&] { cudrv::copy(dst, src, 5); }),
                          require_invalid_argument("peer", [&] { cudrv::copy_peer(dst, ctx, src, ctx); }),
                          require_invalid_argument("batch", [&] {
                            cudrv::batch_copy batch;
                            batch.add(dst, src);
                          })}) {
      INFO("what(): " << e.what());
      CHECK((contains(e.what(), "overlap") || contains(e.what(), "the same memory")));
    }
  }
  // Fewer elements than the distance between the starts: no overlap, and the check passes (the copy then
  // needs the driver, which is missing here).
  CHECK(
      catch_as<cudrv::driver_unavailable_error>([&] { cudrv::copy(all.subspan(4, 8), std::span<const int>(all), 4); }));
}
