// GPU tier: primary-context references, owning contexts, the context guard, and the rule that
// cudrv leaves the calling thread's current context as it found it.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <utility>

#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::raw_current_context;

// This test case must not call anything that makes cudrv take its own, process-long reference on
// the primary context (device::primary_context(), streams or events created from a device,
// free_memory, stream_priority_range): ctest runs it in a fresh process, where the primary context
// starts inactive, and it checks that the references it takes are given back.
TEST_CASE("primary_context takes one reference and gives it back", "[gpu][context]") {
  CUDRV_REQUIRE_GPU();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  const bool was_active = dev.primary_context_active();
  const CUcontext before = raw_current_context();
  INFO("primary context active before: " << was_active);

  {
    cudrv::primary_context pc(dev);
    REQUIRE(bool(pc));
    CHECK(pc.native_handle() != nullptr);
    CHECK(pc.native_device() == dev.native_handle());
    CHECK(dev.primary_context_active());
    CHECK(pc.device() == dev);

    // Moving hands the one reference over; nothing is retained or released.
    cudrv::primary_context moved(std::move(pc));
    CHECK_FALSE(bool(pc));
    CHECK(pc.native_handle() == nullptr);
    REQUIRE(bool(moved));
    CHECK(dev.primary_context_active());
    {
      cudrv::primary_context last(std::move(moved));
      CHECK_FALSE(bool(moved));
      CHECK(dev.primary_context_active());
    }
    // `last` released the only reference this test held.
    CHECK(dev.primary_context_active() == was_active);
  }
  CHECK(dev.primary_context_active() == was_active);

  {
    // Move assignment releases the reference the target held and takes the other one.
    cudrv::primary_context a(dev);
    cudrv::primary_context b(dev);  // two references
    a = std::move(b);               // one released
    CHECK_FALSE(bool(b));
    CHECK(bool(a));
    CHECK(dev.primary_context_active());
    cudrv::primary_context& alias = a;
    a = std::move(alias);  // self-move keeps the reference
    CHECK(bool(a));
    CHECK(dev.primary_context_active());
    { cudrv::primary_context last(std::move(a)); }
    CHECK(dev.primary_context_active() == was_active);
  }

  {
    // release() hands the reference to the caller; from_native_handle adopts it back.
    cudrv::primary_context pc(dev);
    const CUcontext handle = pc.native_handle();
    const CUcontext released = pc.release();
    CHECK(released == handle);
    CHECK_FALSE(bool(pc));
    CHECK(dev.primary_context_active());  // still referenced: by the caller now
    {
      cudrv::primary_context adopted = cudrv::primary_context::from_native_handle(dev.native_handle(), released);
      CHECK(adopted.native_handle() == handle);
      CHECK(adopted.native_device() == dev.native_handle());
    }
    CHECK(dev.primary_context_active() == was_active);
  }

  {
    // A stream in a primary context referenced only by this object.
    cudrv::primary_context pc(dev);
    cudrv::stream s(pc);
    CHECK(s.context() == pc);
    s.synchronize();
  }
  CHECK(dev.primary_context_active() == was_active);
  CHECK(raw_current_context() == before);
  CHECK(errors.count() == 0);
}

TEST_CASE("cudrv's own primary-context reference outlives primary_context objects", "[gpu][context]") {
  CUDRV_REQUIRE_GPU();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  const cudrv::context_ref implicit = dev.primary_context();  // cudrv retains it for the process
  CHECK(dev.primary_context_active());
  {
    cudrv::primary_context pc(dev);
    CHECK(pc == implicit);  // the same context
  }
  CHECK(dev.primary_context_active());
  CHECK(dev.primary_context() == implicit);  // cached
  cudrv::stream s(dev);
  CHECK(s.context() == implicit);
  CHECK(errors.count() == 0);
}

TEST_CASE("creating an owning context leaves the current context unchanged", "[gpu][context]") {
  CUDRV_REQUIRE_GPU();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  const CUcontext before = raw_current_context();
  {
    cudrv::context ctx(dev);
    REQUIRE(bool(ctx));
    CHECK(raw_current_context() == before);
    CHECK(ctx.device() == dev);
    CHECK(raw_current_context() == before);
    CHECK_FALSE(ctx == dev.primary_context());
    ctx.synchronize();
    CHECK(raw_current_context() == before);
    if (before == nullptr) {
      // Still no current context: current() says so.
      auto e = catch_as<cudrv::invalid_argument_error>([] { (void)cudrv::context_ref::current(); });
      CHECK(e.has_value());
    }
  }
  CHECK(raw_current_context() == before);

  {
    cudrv::context ctx(dev, cudrv::context_flags::sched_blocking_sync);
    CHECK((ctx.flags() & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_BLOCKING_SYNC);
    CHECK(raw_current_context() == before);
    const auto [greatest, least] = ctx.stream_priority_range();
    CHECK(greatest <= least);
    CHECK(ctx.limit(CU_LIMIT_STACK_SIZE) > 0);
    ctx.set_limit(CU_LIMIT_PRINTF_FIFO_SIZE, std::size_t(4) << 20);
    CHECK(ctx.limit(CU_LIMIT_PRINTF_FIFO_SIZE) >= (std::size_t(4) << 20));
    CHECK(raw_current_context() == before);
  }
  CHECK(raw_current_context() == before);
  CHECK(errors.count() == 0);
}

TEST_CASE("context_guard makes a context current and restores the previous one", "[gpu][context]") {
  CUDRV_REQUIRE_GPU();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  const CUcontext before = raw_current_context();
  cudrv::context a(dev);
  cudrv::context b(dev);
  REQUIRE(a.native_handle() != b.native_handle());
  {
    cudrv::context_guard guard_b(b);
    CHECK(raw_current_context() == b.native_handle());
    CHECK(cudrv::context_ref::current() == b);
    {
      cudrv::context_guard guard_a(a);
      CHECK(raw_current_context() == a.native_handle());
    }
    CHECK(raw_current_context() == b.native_handle());

    // Restored also when an exception leaves the scope.
    try {
      cudrv::context_guard guard_a(a);
      CHECK(raw_current_context() == a.native_handle());
      throw std::runtime_error("leaving the scope");
    } catch (const std::runtime_error&) {
    }
    CHECK(raw_current_context() == b.native_handle());

    // A guard for the context that is already current changes nothing.
    {
      cudrv::context_guard again(b);
      CHECK(raw_current_context() == b.native_handle());
    }
    CHECK(raw_current_context() == b.native_handle());
  }
  CHECK(raw_current_context() == before);
  CHECK(errors.count() == 0);
}

TEST_CASE("objects created in one context leave another current context alone", "[gpu][context]") {
  CUDRV_REQUIRE_GPU();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  const CUcontext before = raw_current_context();
  cudrv::context a(dev);
  cudrv::context b(dev);
  {
    cudrv::context_guard guard_b(b);
    {
      cudrv::stream s(a);
      CHECK(raw_current_context() == b.native_handle());
      CHECK(s.context() == a);
      CHECK(s.device() == dev);
      cudrv::event e(a);
      CHECK(raw_current_context() == b.native_handle());
      e.record(s);
      s.synchronize();
      CHECK(e.is_done());
      CHECK(raw_current_context() == b.native_handle());
      a.synchronize();
      (void)a.flags();
      (void)a.device();
      CHECK(raw_current_context() == b.native_handle());

      // Creating a third context while b is current leaves b current.
      cudrv::context c(dev);
      CHECK(raw_current_context() == b.native_handle());

      // Streams of the device (primary context) too.
      cudrv::stream p(dev);
      CHECK(p.context() == dev.primary_context());
      CHECK(raw_current_context() == b.native_handle());
    }
    // Destroying them did not change it either.
    CHECK(raw_current_context() == b.native_handle());
  }
  CHECK(raw_current_context() == before);
  CHECK(errors.count() == 0);
}

TEST_CASE("context ownership: move, move-assign, release and adopt", "[gpu][context]") {
  CUDRV_REQUIRE_GPU();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  const CUcontext before = raw_current_context();

  cudrv::context a(dev);
  const CUcontext ha = a.native_handle();
  cudrv::context moved(std::move(a));
  CHECK_FALSE(bool(a));
  CHECK(a.native_handle() == nullptr);
  CHECK(moved.native_handle() == ha);
  moved.synchronize();

  auto e = catch_as<cudrv::invalid_argument_error>([&] { a.synchronize(); });
  REQUIRE(e.has_value());
  CHECK(cudrv::test::contains(e->what(), "empty"));
  CHECK_THROWS_AS(cudrv::context_guard(a), cudrv::invalid_argument_error);
  CHECK_THROWS_AS(cudrv::stream(a), cudrv::invalid_argument_error);

  // Move-assigning a live context over a live one destroys the old one without an error.
  cudrv::context other(dev);
  const CUcontext ho = other.native_handle();
  moved = std::move(other);
  CHECK(moved.native_handle() == ho);
  CHECK_FALSE(bool(other));
  CHECK(moved.device() == dev);

  // release() / from_native_handle.
  const CUcontext released = moved.release();
  CHECK(released == ho);
  CHECK_FALSE(bool(moved));
  cudrv::context adopted = cudrv::context::from_native_handle(released);
  CHECK(adopted.native_handle() == ho);
  CHECK(adopted.device() == dev);

  CHECK(raw_current_context() == before);
  CHECK(errors.count() == 0);
}
