// Green contexts against the stand-in driver of fake_cuda.cpp (loaded through CUDRV_LIBCUDA): the
// arguments of splits and descriptors, the remainder, the rounding rule in the errors, the order in
// which a green context and its streams are destroyed, no context made current that nobody named, and
// drivers without green contexts (the hidden [fake-driver-12.3] and [fake-driver-12.4] cases, which
// ctest runs with FAKE_CUDA_DRIVER_VERSION set).
#include <catch2/catch.hpp>

#include <cudrv/cudrv.hpp>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>

#include "fake_driver/fake_hooks.hpp"
#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;

namespace {

// The fake's counters and event log, from the library cudrv loaded.
long long counter(const char* name) { return cudrv::test::fake_counter(name); }
std::string event_log() { return cudrv::test::fake_log(); }

CUcontext current_context() {
  CUcontext ctx = nullptr;
  auto get = reinterpret_cast<CUresult (*)(CUcontext*)>(cudrv::driver::get_entry_point("cuCtxGetCurrent", 4000));
  REQUIRE(get(&ctx) == CUDA_SUCCESS);
  return ctx;
}

// The group size the driver's rule gives (cuda.h 13.0): the count rounded up to the minimum and to a
// multiple of the alignment the resource reports.
unsigned rounded(const cudrv::sm_resource& r, unsigned min_count) {
  const unsigned size = std::max(min_count, r.min_partition_size());
  return (size + r.coscheduled_alignment() - 1) / r.coscheduled_alignment() * r.coscheduled_alignment();
}

// A kernel with one pointer parameter, as the fake's PTX parser reads it.
cudrv::object_code touch_ptx() {
  return cudrv::object_code(cudrv::code_kind::ptx,
                            ".version 8.0\n.target sm_90\n.address_size 64\n"
                            ".visible .entry touch(.param .u64 p)\n{\n  ret;\n}\n",
                            "touch.ptx");
}

}  // namespace

TEST_CASE("fake driver: an SM resource splits by the device's rules, with the remainder", "[fake-driver][green]") {
  REQUIRE(cudrv::driver::available());
  const long long made_current = counter("made_current:1");
  const cudrv::device d1(1);  // compute capability 9.0
  const cudrv::sm_resource all = cudrv::sm_resource::of(d1);
  REQUIRE(all);
  CHECK(all.sm_count() == static_cast<unsigned>(d1.attribute(cudrv::device_attributes::multiprocessor_count)));
  CHECK(all.min_partition_size() == 8);
  CHECK(all.coscheduled_alignment() == 8);

  SECTION("a number of groups: each rounded up, the rest in the remainder") {
    const long long splits = counter("sm_splits");
    const cudrv::sm_split split = all.split_by_count(10, 2);
    CHECK(counter("sm_splits") == splits + 1);
    REQUIRE(split.groups.size() == 2);
    const unsigned size = rounded(all, 10);
    CHECK(size == 16);
    for (const cudrv::sm_resource& g : split.groups) {
      CHECK(g.sm_count() == size);
    }
    CHECK(split.remainder.sm_count() == all.sm_count() - 2 * size);
    CHECK(split.remainder);
  }
  SECTION("as many groups as fit") {
    const unsigned fit = all.group_count(24);
    CHECK(fit == all.sm_count() / rounded(all, 24));
    const cudrv::sm_split split = all.split_by_count(24);
    CHECK(split.groups.size() == fit);
    CHECK(split.remainder.sm_count() == all.sm_count() - fit * rounded(all, 24));
  }
  SECTION("ignoring co-scheduling gives the exact count") {
    const cudrv::sm_split split = all.split_by_count(3, 1, cudrv::sm_split_flags::ignore_coscheduling);
    REQUIRE(split.groups.size() == 1);
    CHECK(split.groups[0].sm_count() == 3);
    CHECK(split.remainder.sm_count() == all.sm_count() - 3);
    CHECK(contains(event_log(), "split 1 x 3 flags 1"));  // the flag reached the driver
  }
  SECTION("a device of another architecture has other rules") {
    const cudrv::sm_resource d0 = cudrv::sm_resource::of(cudrv::device(0));  // 8.0, needs no context
    CHECK(d0.min_partition_size() == 4);
    CHECK(d0.coscheduled_alignment() == 2);
    CHECK(d0.split_by_count(5, 1).groups[0].sm_count() == rounded(d0, 5));
    CHECK(counter("primary_retain:0") == 0);
  }
  CHECK(counter("made_current:1") == made_current);  // a split needs no context
}

TEST_CASE("fake driver: a split that cannot be made names the rule", "[fake-driver][green][driver_error]") {
  REQUIRE(cudrv::driver::available());
  const cudrv::sm_resource all = cudrv::sm_resource::of(cudrv::device(1));
  const long long splits = counter("sm_splits");
  const long long failed = counter("failed_calls");

  // More SMs per group than the resource has: refused before the driver is called.
  auto too_many = catch_as<cudrv::invalid_argument_error>([&] { (void)all.split_by_count(all.sm_count() + 1, 1); });
  REQUIRE(too_many);
  CHECK(contains(too_many->what(), "exceeds the " + std::to_string(all.sm_count()) + " SMs"));

  // More groups than fit once the count is rounded up: the message gives the rule and the numbers.
  const unsigned fit = all.group_count(33);
  auto not_enough = catch_as<cudrv::invalid_argument_error>([&] { (void)all.split_by_count(33, fit + 1); });
  REQUIRE(not_enough);
  INFO(not_enough->what());
  CHECK(contains(not_enough->what(), "only " + std::to_string(fit) + " fit"));
  CHECK(contains(not_enough->what(), "at least " + std::to_string(all.min_partition_size()) + " SMs"));
  CHECK(contains(not_enough->what(), "multiple of " + std::to_string(all.coscheduled_alignment()) + " SMs"));
  CHECK(contains(not_enough->what(), std::to_string(rounded(all, 33)) + " SMs per group here"));
  CHECK(counter("sm_splits") == splits);  // nothing split

  // An empty resource (a remainder with nothing left) and unknown flags.
  const cudrv::sm_split exact = all.split_by_count(all.sm_count() / 4, 4, cudrv::sm_split_flags::ignore_coscheduling);
  REQUIRE(exact.remainder.sm_count() == all.sm_count() % 4);
  CHECK_THROWS_AS(cudrv::sm_resource().split_by_count(8), cudrv::invalid_argument_error);
  CHECK_THROWS_AS(all.split_by_count(8, 1, static_cast<cudrv::sm_split_flags>(64)), cudrv::invalid_argument_error);
  CHECK(counter("failed_calls") == failed);

  // A group or a remainder cannot be split again (a rule of the driver): cudrv refuses before the
  // driver is called, and says how to do it instead.
  CHECK(exact.groups[0].from_split());
  CHECK_FALSE(all.from_split());
  const long long splits_before = counter("sm_splits");
  auto again = catch_as<cudrv::invalid_argument_error>([&] { (void)exact.groups[0].split_by_count(8); });
  REQUIRE(again);
  CHECK(contains(again->what(), "cannot split again"));
  CHECK(contains(again->what(), "docs/green-contexts.md"));
  const cudrv::sm_split uneven = all.split_by_count(8, 1);
  REQUIRE(uneven.remainder);
  CHECK(uneven.remainder.from_split());
  CHECK_THROWS_AS((void)uneven.remainder.group_count(8), cudrv::invalid_argument_error);
  CHECK(counter("sm_splits") == splits_before + 1);  // only the split of `all` reached the driver

  // A resource that is not of SM type is refused.
  CUdevResource other{};
  other.type = CU_DEV_RESOURCE_TYPE_INVALID;
  CHECK_THROWS_AS(cudrv::sm_resource::from_native(other), cudrv::invalid_argument_error);
}

TEST_CASE("fake driver: descriptors combine the resources of one split only", "[fake-driver][green][driver_error]") {
  REQUIRE(cudrv::driver::available());
  const cudrv::device d1(1);
  const cudrv::sm_resource all = cudrv::sm_resource::of(d1);
  const cudrv::sm_split a = all.split_by_count(8, 2);
  const cudrv::sm_split b = all.split_by_count(8, 1);
  const long long descriptors = counter("descriptors");

  const cudrv::resource_descriptor both = cudrv::resource_descriptor::generate(a.groups);
  CHECK(both.native_handle() != nullptr);
  const cudrv::sm_resource group_and_rest[] = {a.groups[0], a.remainder};
  CHECK(cudrv::resource_descriptor::generate(group_and_rest).native_handle() != nullptr);
  CHECK(counter("descriptors") == descriptors + 2);

  const cudrv::sm_resource mixed[] = {a.groups[0], b.groups[0]};
  auto e = catch_as<cudrv::error>([&] { (void)cudrv::resource_descriptor::generate(mixed); });
  REQUIRE(e);
  CHECK(e->result() == CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION);
  CHECK(contains(e->what(), "one split"));

  CHECK_THROWS_AS(cudrv::resource_descriptor::generate(std::span<const cudrv::sm_resource>()),
                  cudrv::invalid_argument_error);
  const cudrv::sm_split whole = all.split_by_count(all.sm_count(), 1, cudrv::sm_split_flags::ignore_coscheduling);
  REQUIRE_FALSE(whole.remainder);
  auto empty = catch_as<cudrv::invalid_argument_error>([&] { (void)cudrv::green_context(d1, whole.remainder); });
  REQUIRE(empty);
  CHECK(contains(empty->what(), "empty"));
  CHECK(counter("descriptors") == descriptors + 2);
}

TEST_CASE("fake driver: a green context outlives its streams and makes nothing current", "[fake-driver][green]") {
  REQUIRE(cudrv::driver::available());
  cudrv::test::destruction_error_counter errors;
  const cudrv::device d1(1);
  const cudrv::sm_split split = cudrv::sm_resource::of(d1).split_by_count(16, 1);
  cudrv::stream plain(d1);  // an ordinary stream, created in the primary context (made current to create it)
  const long long made_current = counter("made_current:1");
  const long long green_destroyed = counter("green_destroyed");
  const long long launches = counter("green_launches");
  REQUIRE(current_context() == nullptr);

  std::optional<cudrv::green_context> g(std::in_place, d1, split.groups[0]);
  REQUIRE(bool(*g));
  CHECK(g->sm_resource().sm_count() == split.groups[0].sm_count());
  CHECK(cudrv::sm_resource::of(g->context()).sm_count() == split.groups[0].sm_count());
  CHECK(cudrv::sm_resource::of(d1.primary_context()).sm_count() == cudrv::sm_resource::of(d1).sm_count());
  CHECK(g->context() != d1.primary_context());

  std::optional<cudrv::stream> s(std::in_place, g->create_stream());
  const auto owner = cudrv::green_context_of(*s);
  REQUIRE(owner.has_value());
  CHECK(*owner == *g);
  CHECK(s->context() == g->context());
  CHECK_FALSE(cudrv::green_context_of(plain).has_value());

  // A launch and a stream-ordered buffer on the green stream.
  cudrv::library lib(touch_ptx());
  cudrv::kernel k = lib.get_kernel("touch");
  std::optional<cudrv::device_buffer<int>> buf(std::in_place, *s, 64);
  cudrv::launch(*s, {.grid = 4, .block = 32}, k, buf->get());
  CHECK(counter("green_launches") == launches + 1);
  // Creating the green context and its stream, allocating and launching there made nothing current.
  CHECK(counter("made_current:1") == made_current);

  // Events through the green context.
  cudrv::event done = g->record(cudrv::event_flags::none);
  g->wait(done);
  CHECK(counter("green_records") >= 1);
  CHECK(counter("green_waits") >= 1);
  g->synchronize();
  CHECK(current_context() == nullptr);  // restored after synchronize
  // Only the two calls that need the green context current made it so: creating the event, synchronising.
  CHECK(counter("made_current:1") == made_current + 2);

  // The owner goes first; the stream keeps the green context; the buffer keeps the stream.
  done.reset();  // an event of the green context goes before it (else it is reported as outliving it)
  const std::size_t log_before = event_log().size();
  g.reset();
  CHECK(counter("green_destroyed") == green_destroyed);
  s.reset();
  CHECK(counter("green_destroyed") == green_destroyed);
  buf.reset();  // frees on the stream, destroys the stream, then the green context
  CHECK(counter("green_destroyed") == green_destroyed + 1);
  const std::string log = event_log().substr(log_before);
  const auto freed = log.find("free_async");
  const auto stream_gone = log.find("stream_destroy");
  const auto green_gone = log.find("green_destroy");
  REQUIRE(freed != std::string::npos);
  REQUIRE(stream_gone != std::string::npos);
  REQUIRE(green_gone != std::string::npos);
  CHECK(freed < stream_gone);
  CHECK(stream_gone < green_gone);
  CHECK(counter("green_destroyed_with_live_streams") == 0);
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("fake driver: green context ownership and bad arguments", "[fake-driver][green]") {
  REQUIRE(cudrv::driver::available());
  cudrv::test::destruction_error_counter errors;
  const cudrv::device d1(1);
  const cudrv::sm_split split = cudrv::sm_resource::of(d1).split_by_count(8, 2);
  const long long created = counter("green_created");
  const long long destroyed = counter("green_destroyed");
  const long long streams = counter("streams_created");

  cudrv::green_context a(d1, split.groups);  // both groups in one green context
  CHECK(a.sm_resource().sm_count() == split.groups[0].sm_count() + split.groups[1].sm_count());
  CHECK(a.id() != 0);
  cudrv::green_context_ref view = a;
  CHECK(view.context() == a.context());  // a view asks the driver; the owner knows it

  // A blocking stream is refused before the driver is called.
  auto blocking = catch_as<cudrv::invalid_argument_error>([&] { (void)a.create_stream({.non_blocking = false}); });
  REQUIRE(blocking);
  CHECK(contains(blocking->what(), "non-blocking"));
  CHECK(counter("streams_created") == streams);

  // Moves, an empty owner, release and adoption.
  cudrv::green_context b = std::move(a);
  CHECK_FALSE(bool(a));  // NOLINT(bugprone-use-after-move): moved-from owners are empty
  for (auto call : {+[](const cudrv::green_context& g) { (void)g.context(); },
                    +[](const cudrv::green_context& g) { (void)g.create_stream(); },
                    +[](const cudrv::green_context& g) { (void)g.sm_resource(); },
                    +[](const cudrv::green_context& g) { g.synchronize(); }}) {
    auto e = catch_as<cudrv::invalid_argument_error>([&] { call(a); });
    REQUIRE(e);
    CHECK(contains(e->what(), "empty"));
  }
  CHECK_THROWS_AS(cudrv::green_context::from_native_handle(nullptr), cudrv::invalid_argument_error);
  CUgreenCtx raw = b.release();
  CHECK_FALSE(bool(b));
  CHECK(counter("green_destroyed") == destroyed);
  {
    cudrv::green_context adopted = cudrv::green_context::from_native_handle(raw);
    cudrv::stream s = adopted.create_stream({.priority = -1});
    s.synchronize();
  }
  CHECK(counter("green_destroyed") == destroyed + 1);
  CHECK(counter("green_created") == created + 1);
  CHECK(counter("green_destroyed_with_live_streams") == 0);
  CHECK(errors.count() == 0);
}

// Run by ctest with FAKE_CUDA_DRIVER_VERSION=12030: a driver without green contexts.
TEST_CASE("fake driver 12.3: green contexts are not supported", "[.][fake-driver-12.3]") {
  REQUIRE(cudrv::driver::version() == 12030);
  auto e = catch_as<cudrv::not_supported_error>([] { (void)cudrv::sm_resource::of(cudrv::device(1)); });
  REQUIRE(e);
  INFO(e->what());
  CHECK(contains(e->what(), "cuDeviceGetDevResource"));
  CHECK(contains(e->what(), "12.4"));
}

// Run by ctest with FAKE_CUDA_DRIVER_VERSION=12040: green contexts, but no cuGreenCtxStreamCreate.
TEST_CASE("fake driver 12.4: a green stream falls back to creating it in the current green context",
          "[.][fake-driver-12.4]") {
  REQUIRE(cudrv::driver::version() == 12040);
  cudrv::test::destruction_error_counter errors;
  const cudrv::device d1(1);
  cudrv::green_context g(d1, cudrv::sm_resource::of(d1).split_by_count(8, 1).groups[0]);
  REQUIRE(current_context() == nullptr);
  {
    cudrv::stream s = g.create_stream();
    CHECK(counter("green_streams_created") == 0);
    const auto owner = cudrv::green_context_of(s);
    REQUIRE(owner.has_value());
    CHECK(*owner == g);
    CHECK(current_context() == nullptr);  // the green context was current only while creating
  }
  auto e = catch_as<cudrv::not_supported_error>([&] { (void)g.id(); });
  REQUIRE(e);
  CHECK(contains(e->what(), "cuGreenCtxGetId"));
  g.reset();
  CHECK(counter("green_destroyed_with_live_streams") == 0);
  CHECK(errors.count() == 0);
}
