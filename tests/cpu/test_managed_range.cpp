// CPU tier, no driver (issue 34 parts 7 and 8): the typed advice matches cuda.h's CU_MEM_ADVISE_* values, the
// range-attribute locations and the async notifications decode the driver's structures, and what the
// batch and subscription types promise at compile time.
#include <catch2/catch.hpp>

#include <cudrv/cudrv.hpp>

#include <type_traits>

static_assert(static_cast<int>(cudrv::memory_advice::set_read_mostly) == CU_MEM_ADVISE_SET_READ_MOSTLY);
static_assert(static_cast<int>(cudrv::memory_advice::unset_read_mostly) == CU_MEM_ADVISE_UNSET_READ_MOSTLY);
static_assert(static_cast<int>(cudrv::memory_advice::set_preferred_location) == CU_MEM_ADVISE_SET_PREFERRED_LOCATION);
static_assert(static_cast<int>(cudrv::memory_advice::unset_preferred_location) ==
              CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION);
static_assert(static_cast<int>(cudrv::memory_advice::set_accessed_by) == CU_MEM_ADVISE_SET_ACCESSED_BY);
static_assert(static_cast<int>(cudrv::memory_advice::unset_accessed_by) == CU_MEM_ADVISE_UNSET_ACCESSED_BY);
static_assert(static_cast<unsigned>(cudrv::async_notification_type::over_budget) ==
              CU_ASYNC_NOTIFICATION_TYPE_OVER_BUDGET);

// A batch keeps addresses: a temporary owner does not compile, a named one and a view do.
template <class B, class R>
concept adds = requires(B& b, R&& r) {
  b.add(static_cast<R&&>(r));
};
template <class B, class R>
concept adds_to = requires(B& b, R&& r, cudrv::memory_location l) {
  b.add(static_cast<R&&>(r), l);
};
static_assert(adds_to<cudrv::prefetch_batch, cudrv::managed_buffer<float>&>);
static_assert(adds_to<cudrv::prefetch_batch, cudrv::device_span<float>>);
static_assert(!adds_to<cudrv::prefetch_batch, cudrv::managed_buffer<float>>);
static_assert(adds<cudrv::discard_batch, cudrv::managed_buffer<float>&>);
static_assert(!adds<cudrv::discard_batch, cudrv::managed_buffer<float>>);
static_assert(!adds<cudrv::prefetch_batch, cudrv::managed_buffer<float>&>);  // a prefetch needs its location
static_assert(adds_to<cudrv::discard_and_prefetch_batch, cudrv::managed_buffer<float>&>);
static_assert(std::is_copy_constructible_v<cudrv::prefetch_batch> &&
              std::is_nothrow_move_constructible_v<cudrv::prefetch_batch>);
// The base is not a batch of its own.
static_assert(!std::is_default_constructible_v<cudrv::managed_range_batch>);
// A subscription is move-only; a pool's trimming subscription is refused on a temporary pool.
static_assert(!std::is_copy_constructible_v<cudrv::async_notification_subscription>);
static_assert(std::is_nothrow_move_assignable_v<cudrv::async_notification_subscription>);
template <class P>
concept trims = requires(P&& p, const cudrv::device& d) {
  static_cast<P&&>(p).trim_on_pressure(d);
};
static_assert(trims<cudrv::memory_pool&>);
static_assert(trims<const cudrv::memory_pool&>);
static_assert(!trims<cudrv::memory_pool>);
static_assert(trims<cudrv::memory_pool_ref>);  // a view: the pool lives on
static_assert(trims<cudrv::imported_memory_pool&>);
static_assert(!trims<cudrv::imported_memory_pool>);
// A subscription takes callables of a notification only.
static_assert(std::is_constructible_v<cudrv::async_notification_subscription, const cudrv::device&,
                                      void (*)(const cudrv::async_notification&)>);
static_assert(!std::is_constructible_v<cudrv::async_notification_subscription, const cudrv::device&, void (*)(int)>);

TEST_CASE("advice that names a location is told apart", "[managed-range]") {
  CHECK(cudrv::advice_takes_location(cudrv::memory_advice::set_preferred_location));
  CHECK(cudrv::advice_takes_location(cudrv::memory_advice::set_accessed_by));
  CHECK(cudrv::advice_takes_location(cudrv::memory_advice::unset_accessed_by));
  CHECK_FALSE(cudrv::advice_takes_location(cudrv::memory_advice::set_read_mostly));
  CHECK_FALSE(cudrv::advice_takes_location(cudrv::memory_advice::unset_read_mostly));
  CHECK_FALSE(cudrv::advice_takes_location(cudrv::memory_advice::unset_preferred_location));
}

TEST_CASE("range-attribute locations decode the driver's type and id", "[managed-range]") {
  using cudrv::detail::decode_range_location;
  const cudrv::memory_location dev2 = decode_range_location(CU_MEM_LOCATION_TYPE_DEVICE, 2);
  CHECK(dev2.kind() == cudrv::memory_location_kind::device);
  CHECK(dev2.device_ordinal() == 2);
  CHECK(decode_range_location(CU_MEM_LOCATION_TYPE_HOST, 12345) == cudrv::memory_location::host());
  CHECK(decode_range_location(CU_MEM_LOCATION_TYPE_HOST_NUMA, 3) == cudrv::memory_location::host_numa(3));
  // INVALID: the pages disagree, or nothing was set; the id is then meaningless.
  CHECK(decode_range_location(CU_MEM_LOCATION_TYPE_INVALID, 0) == cudrv::memory_location::none());
  CHECK(decode_range_location(CU_MEM_LOCATION_TYPE_INVALID, 5) == cudrv::memory_location::none());
  CHECK(decode_range_location(CU_MEM_LOCATION_TYPE_DEVICE, -2) == cudrv::memory_location::none());
  CHECK(decode_range_location(CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT, 0) == cudrv::memory_location::none());
}

TEST_CASE("async notifications decode the driver's info", "[notification]") {
  CUasyncNotificationInfo info{};
  info.type = CU_ASYNC_NOTIFICATION_TYPE_OVER_BUDGET;
  info.info.overBudget.bytesOverBudget = 3ULL << 30;
  const cudrv::async_notification n = cudrv::async_notification::from_native(info, 4);
  CHECK(n.type == cudrv::async_notification_type::over_budget);
  CHECK(n.bytes_over_budget == 3ULL << 30);
  CHECK(n.device_ordinal == 4);
  CHECK(n.raw_type == 1);
  info.type = static_cast<CUasyncNotificationType>(9);
  const cudrv::async_notification other = cudrv::async_notification::from_native(info, 0);
  CHECK(other.type == cudrv::async_notification_type::unknown);
  CHECK(other.raw_type == 9);
  CHECK(other.bytes_over_budget == 0);
  // An empty subscription unregisters nothing (no driver here).
  cudrv::async_notification_subscription none;
  CHECK_FALSE(static_cast<bool>(none));
  none.reset();
  CHECK(none.device_ordinal() == -1);
}
