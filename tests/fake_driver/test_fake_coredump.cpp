// GPU coredump settings (<cudrv/coredump.hpp>, issue 34 part 4) against the stand-in driver of
// fake_cuda.cpp, which checks sizes as the real driver does (a bool's size for the booleans, an int's for
// the flags, NUL-terminated names of at most 1023 characters), refuses a call made before cuInit (the real
// driver crashes), and copies the process-wide settings into a context on its first use.
#include <catch2/catch.hpp>

#include <cudrv/coredump.hpp>
#include <string>

#include "fake_driver/fake_hooks.hpp"
#include "support/test_support.hpp"

using cudrv::coredump_flags;
using cudrv::coredump_settings;
using cudrv::test::catch_as;
using cudrv::test::contains;

namespace {

long long counter(const char* name) { return cudrv::test::fake_counter(name); }
CUcontext fake_current() { return cudrv::test::fake_hook<CUcontext()>("fake_cuda_current_context")(); }

}  // namespace

// First in the file, and the first cudrv call of its process under ctest (one process per case): cudrv
// initialises the driver before the setting reaches it.
TEST_CASE("fake driver: a coredump setting as the first cudrv call reaches the driver after cuInit",
          "[fake-driver][coredump]") {
  cudrv::coredump::set_global({.enable_on_exception = true});  // the default is off: a switch reaches the driver
  CHECK(counter("coredump_before_init") == 0);
  CHECK(counter("coredump_set_global") >= 1);
  CHECK(contains(cudrv::test::fake_log(), "coredump set global 1 1\n"));
  // The same value again is not a switch: nothing more reaches the driver.
  const long long sets = counter("coredump_set_global");
  cudrv::coredump::set_global({.enable_on_exception = true});
  CHECK(counter("coredump_set_global") == sets);
}

TEST_CASE("fake driver: switching the process-wide enable_on_exception is refused while a context exists",
          "[fake-driver][coredump]") {
  const cudrv::device dev(1);  // the fake's device 0 refuses contexts
  const bool was = *cudrv::coredump::get_global().enable_on_exception;
  const cudrv::context_ref ctx = dev.primary_context();  // active now
  const long long sets = counter("coredump_set_global");
  const auto refused = cudrv::test::catch_as<cudrv::invalid_argument_error>(
      [&] { cudrv::coredump::set_global({.enable_on_exception = !was}); });
  REQUIRE(refused.has_value());
  CHECK(contains(refused->what(), "while a context exists"));
  CHECK(counter("coredump_set_global") == sets);  // refused before the driver
  CHECK(*cudrv::coredump::get_global().enable_on_exception == was);
  cudrv::coredump::set(ctx, {.enable_on_exception = !was});  // per context it is allowed
  CHECK(*cudrv::coredump::get(ctx).enable_on_exception == !was);
  if (!was) {
    // On, a context's setting cannot switch off again (the driver then refuses every module load in it).
    const long long context_sets = counter("coredump_set_context");
    const auto off =
        catch_as<cudrv::invalid_argument_error>([&] { cudrv::coredump::set(ctx, {.enable_on_exception = false}); });
    REQUIRE(off.has_value());
    CHECK(contains(off->what(), "cannot switch off once on"));
    CHECK(counter("coredump_set_context") == context_sets);
    CHECK(*cudrv::coredump::get(ctx).enable_on_exception);
  }
}

TEST_CASE("fake driver: every process-wide coredump setting round-trips with the driver's sizes",
          "[fake-driver][coredump]") {
  const coredump_settings before = cudrv::coredump::get_global();
  REQUIRE(before.enable_on_exception.has_value());
  REQUIRE(before.file.has_value());
  CHECK(contains(*before.file, "core.cuda."));  // the driver's default pattern
  const long long sets = counter("coredump_set_global");
  const coredump_settings wanted{.enable_on_exception = true,
                                 .trigger_host = false,
                                 .lightweight = true,
                                 .enable_user_trigger = true,
                                 .file = "/tmp/cudrv-dumps/core.%p",
                                 .pipe = "/tmp/cudrv-dumps/pipe",
                                 .generation_flags = coredump_flags::lightweight | coredump_flags::skip_abort};
  cudrv::coredump::set_global(wanted);
  CHECK(counter("coredump_set_global") == sets + 7);  // bools with an int's size would have failed
  const coredump_settings after = cudrv::coredump::get_global();
  CHECK(after.enable_on_exception == wanted.enable_on_exception);
  CHECK(after.trigger_host == wanted.trigger_host);
  CHECK(after.lightweight == wanted.lightweight);
  CHECK(after.enable_user_trigger == wanted.enable_user_trigger);
  CHECK(after.file == wanted.file);
  CHECK(after.pipe == wanted.pipe);
  CHECK(after.generation_flags == wanted.generation_flags);
  CHECK(static_cast<unsigned>(*after.generation_flags) == (CU_COREDUMP_LIGHTWEIGHT_FLAGS | CU_COREDUMP_SKIP_ABORT));
  cudrv::coredump::set_global(before);
  CHECK(cudrv::coredump::get_global().file == before.file);
}

TEST_CASE("fake driver: names over 1023 characters or with a NUL are refused before the driver",
          "[fake-driver][coredump]") {
  const long long sets = counter("coredump_set_global");
  const std::string longest(coredump_settings::max_name_length, 'x');
  for (const std::string& bad : {longest + "x", std::string("core\0x", 6)}) {
    const auto e = catch_as<cudrv::invalid_argument_error>([&] { cudrv::coredump::set_global({.file = bad}); });
    REQUIRE(e.has_value());
    CHECK(contains(e->what(), "CU_COREDUMP_FILE"));
    CHECK(catch_as<cudrv::invalid_argument_error>([&] { cudrv::coredump::set_global({.pipe = bad}); }).has_value());
  }
  CHECK(counter("coredump_set_global") == sets);
  const coredump_settings before = cudrv::coredump::get_global();
  cudrv::coredump::set_global({.file = longest});  // exactly the bound: accepted and read back whole
  CHECK(cudrv::coredump::get_global().file == longest);
  cudrv::coredump::set_global(before);
}

TEST_CASE("fake driver: per-context coredump settings act in the named context and leave the current one alone",
          "[fake-driver][coredump]") {
  const cudrv::device dev(1);
  const cudrv::context_ref ctx = dev.primary_context();
  const CUcontext current = fake_current();
  const long long global_sets = counter("coredump_set_global");
  const long long context_sets = counter("coredump_set_context");

  for (const coredump_settings& refused :
       {coredump_settings{.enable_user_trigger = true}, coredump_settings{.pipe = "/tmp/pipe"}}) {
    const auto e = catch_as<cudrv::invalid_argument_error>([&] { cudrv::coredump::set(ctx, refused); });
    REQUIRE(e.has_value());
    CHECK(contains(e->what(), "only process-wide"));
  }
  CHECK(counter("coredump_set_context") == context_sets);

  const bool global_on_exception = *cudrv::coredump::get_global().enable_on_exception;
  cudrv::coredump::set(ctx, {.enable_on_exception = !global_on_exception, .file = "/tmp/ctx-core"});
  CHECK(counter("coredump_set_context") == context_sets + 2);
  CHECK(counter("coredump_set_global") == global_sets);
  CHECK(fake_current() == current);
  const coredump_settings read = cudrv::coredump::get(ctx);
  CHECK(read.enable_on_exception == !global_on_exception);
  CHECK(read.file == std::string("/tmp/ctx-core"));
  CHECK_FALSE(read.pipe.has_value());  // process-wide only: not read per context
  CHECK_FALSE(read.enable_user_trigger.has_value());
  CHECK(cudrv::coredump::get_global().enable_on_exception == global_on_exception);
  CHECK(fake_current() == current);
}

TEST_CASE("fake driver: scoped_coredump_settings restores exactly what it set", "[fake-driver][coredump]") {
  const coredump_settings before = cudrv::coredump::get_global();
  cudrv::test::destruction_error_counter errors;
  {
    const long long sets = counter("coredump_set_global");
    cudrv::scoped_coredump_settings scope({.enable_on_exception = true, .file = "/tmp/scoped/core.%p"});
    CHECK(counter("coredump_set_global") == sets + 2);  // only the two named settings
    CHECK(scope.previous().enable_on_exception == before.enable_on_exception);
    CHECK(scope.previous().file == before.file);
    CHECK_FALSE(scope.previous().pipe.has_value());
    CHECK(cudrv::coredump::get_global().file == std::string("/tmp/scoped/core.%p"));
    CHECK(*cudrv::coredump::get_global().enable_on_exception);
  }
  const coredump_settings after = cudrv::coredump::get_global();
  CHECK(after.enable_on_exception == before.enable_on_exception);
  CHECK(after.file == before.file);
  CHECK(errors.count() == 0);

  const cudrv::context_ref ctx = cudrv::device(1).primary_context();
  const coredump_settings ctx_before = cudrv::coredump::get(ctx);
  {
    cudrv::scoped_coredump_settings scope(ctx, {.generation_flags = coredump_flags::skip_abort});
    CHECK(cudrv::coredump::get(ctx).generation_flags == coredump_flags::skip_abort);
  }
  CHECK(cudrv::coredump::get(ctx).generation_flags == ctx_before.generation_flags);
  static_assert(!std::is_copy_constructible_v<cudrv::scoped_coredump_settings>);
  static_assert(!std::is_move_constructible_v<cudrv::scoped_coredump_settings>);
}

TEST_CASE("fake driver: a scoped setting that fails puts back those set before it, a failed restore is reported",
          "[fake-driver][coredump]") {
  auto fail_set = cudrv::test::fake_hook<void(int)>("fake_cuda_coredump_fail_set");
  const coredump_settings before = cudrv::coredump::get_global();
  fail_set(CU_COREDUMP_FILE);
  const auto e = catch_as<cudrv::error>([&] {
    cudrv::scoped_coredump_settings scope({.enable_on_exception = !*before.enable_on_exception, .file = "/tmp/x"});
  });
  REQUIRE(e.has_value());
  CHECK(e->result() == CUDA_ERROR_NOT_PERMITTED);
  CHECK(contains(e->what(), "CU_COREDUMP_FILE"));
  CHECK(cudrv::coredump::get_global().enable_on_exception == before.enable_on_exception);  // rolled back
  CHECK(cudrv::coredump::get_global().file == before.file);

  cudrv::test::destruction_error_counter errors;
  {
    cudrv::scoped_coredump_settings scope({.lightweight = !*before.lightweight});
    fail_set(CU_COREDUMP_LIGHTWEIGHT);  // the restore fails: reported, not thrown
  }
  CHECK(errors.count() == 1);
  CHECK(contains(errors.messages(), "CU_COREDUMP_LIGHTWEIGHT"));
  cudrv::coredump::set_global({.lightweight = *before.lightweight});
}
