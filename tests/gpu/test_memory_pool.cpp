// GPU tier: stream-ordered memory pools. Default and current pools, owning pools with properties
// (release threshold, maximum size, IPC handle type), statistics, trimming, access, making a pool
// current and restoring the default, and moving pools.
//
// Each test uses a pool of its own where it reads statistics, so nothing else allocates from it.
// Every test case makes device 0's primary context current for its duration (and restores what was
// current before), and leaves the device's current pool as it found it.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <iostream>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "support/memory_support.hpp"
#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;
using cudrv::test::MiB;
using cudrv::test::mismatch;
using cudrv::test::poison_value;

namespace {

/// Restores the device's current pool when it goes out of scope (also when a check fails).
class current_pool_restorer {
 public:
  explicit current_pool_restorer(const cudrv::device& dev) : dev_(dev), previous_(cudrv::current_memory_pool(dev)) {}
  current_pool_restorer(const current_pool_restorer&) = delete;
  current_pool_restorer& operator=(const current_pool_restorer&) = delete;
  ~current_pool_restorer() {
    try {
      cudrv::set_current_memory_pool(dev_, previous_);
    } catch (const std::exception& e) {
      std::cerr << "could not restore the current memory pool: " << e.what() << std::endl;
    }
  }
  [[nodiscard]] cudrv::memory_pool_ref previous() const { return previous_; }

 private:
  cudrv::device dev_;
  cudrv::memory_pool_ref previous_;
};

}  // namespace

TEST_CASE("memory pools: the default pool is current by default and accessible from its device", "[gpu][pool]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  REQUIRE(dev.attribute(cudrv::device_attributes::memory_pools_supported));

  const cudrv::memory_pool_ref def = cudrv::default_memory_pool(dev);
  const cudrv::memory_pool_ref cur = cudrv::current_memory_pool(dev);
  CHECK(def.native_handle() != nullptr);
  CHECK(def == cur);
  CHECK(def.access(dev) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  CHECK(cudrv::default_memory_pool(dev) == def);  // the same pool every time

  cudrv::memory_pool pool(dev);
  CHECK(pool.access(dev) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  pool.set_access(dev, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);  // granting the owner what it has is fine
  CHECK(pool.access(dev) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
  CHECK_FALSE(pool == def);
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("memory pools: release threshold and maximum size are honoured", "[gpu][pool][driver_error]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  {
    cudrv::stream s(dev);
    cudrv::memory_pool pool(dev, {.release_threshold = 16 * MiB, .max_size = 64 * MiB});
    REQUIRE(bool(pool));
    CHECK(pool.release_threshold() == 16 * MiB);
    CHECK(pool.attribute(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) == 16 * MiB);
    pool.set_release_threshold(8 * MiB);
    CHECK(pool.release_threshold() == 8 * MiB);
    pool.set_attribute(CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, 4 * MiB);
    CHECK(pool.release_threshold() == 4 * MiB);
    // An int-valued attribute goes through the same interface.
    pool.set_attribute(CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, 0);
    CHECK(pool.attribute(CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC) == 0);
    pool.set_attribute(CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, 1);
    CHECK(pool.attribute(CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC) == 1);

    // More than max_size: the allocation fails, with a cudrv error of the out-of-memory kind.
    const std::size_t too_much = 128 * MiB;
    auto e = catch_as<cudrv::error>([&] { cudrv::device_buffer<std::uint8_t> huge(pool, s, too_much); });
    REQUIRE(e.has_value());
    INFO(e->what());
    CHECK(e->result() == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(e->api() == "cuMemAllocFromPoolAsync");
    CHECK(contains(e->what(), std::to_string(too_much)));
    CHECK_THROWS_AS(cudrv::device_buffer<std::uint8_t>(pool, s, too_much), cudrv::out_of_memory_error);

    // A normal allocation from the same pool still works, and holds real data.
    const std::uint64_t seed = cudrv::test::test_seed();
    INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");
    const std::vector<std::uint8_t> data = cudrv::test::random_bytes(MiB, seed);
    {
      cudrv::device_buffer<std::uint8_t> ok(pool, s, MiB);
      REQUIRE(bool(ok));
      std::vector<std::uint8_t> back(MiB, poison_value<std::uint8_t>());
      cudrv::copy(ok, data, s);
      cudrv::copy(back, ok, s);
      s.synchronize();
      CHECK(mismatch(back, data).empty());
    }
    s.synchronize();
  }
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("memory pools: statistics, watermarks and trimming", "[gpu][pool]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  {
    cudrv::stream s(dev);

    // A pool that keeps everything it reserved across synchronisations until trimmed.
    cudrv::memory_pool keeper(dev, {.release_threshold = std::numeric_limits<std::size_t>::max()});
    CHECK(keeper.release_threshold() == std::numeric_limits<std::size_t>::max());
    CHECK(keeper.used_current() == 0);
    CHECK(keeper.reserved_current() == 0);
    {
      cudrv::device_buffer<std::uint8_t> a(keeper, s, 8 * MiB);
      cudrv::device_buffer<std::uint8_t> b(keeper, s, 1 * MiB);
      CHECK(keeper.used_current() >= 9 * MiB);
      CHECK(keeper.reserved_current() >= 9 * MiB);
      CHECK(keeper.used_high() >= 9 * MiB);
      CHECK(keeper.reserved_high() >= 9 * MiB);
      { cudrv::device_buffer<std::uint8_t> moved(std::move(a)); }  // a's memory freed on s
      s.synchronize();
      CHECK(keeper.used_current() >= 1 * MiB);
      CHECK(keeper.used_current() < 9 * MiB);
      CHECK(keeper.used_high() >= 9 * MiB);  // the peak stays until reset
      keeper.reset_high_watermarks();
      CHECK(keeper.used_high() < 8 * MiB);  // the 8 MiB peak is gone
      CHECK(keeper.used_high() <= keeper.used_current() + 1 * MiB);
    }
    s.synchronize();
    CHECK(keeper.used_current() == 0);
    const std::size_t kept = keeper.reserved_current();
    CHECK(kept >= 9 * MiB);  // released by the user, still reserved by the pool
    keeper.trim_to(0);
    const std::size_t after_trim = keeper.reserved_current();
    INFO("reserved before trim " << kept << ", after " << after_trim);
    CHECK(after_trim < kept);

    // trim_to keeps at least what it is asked to keep, as far as the pool has it.
    { cudrv::device_buffer<std::uint8_t> c(keeper, s, 8 * MiB); }
    s.synchronize();
    const std::size_t before_partial = keeper.reserved_current();
    CHECK(before_partial >= 8 * MiB);
    keeper.trim_to(before_partial);
    CHECK(keeper.reserved_current() == before_partial);

    // A pool with threshold 0 (the driver's default, not cudrv's) gives memory back to the system at
    // the next synchronisation.
    CHECK(cudrv::memory_pool(dev).release_threshold() == SIZE_MAX);  // cudrv's default keeps it
    cudrv::memory_pool giver(dev, {.release_threshold = 0});
    CHECK(giver.release_threshold() == 0);
    {
      cudrv::device_buffer<std::uint8_t> d(giver, s, 8 * MiB);
      CHECK(giver.reserved_current() >= 8 * MiB);
    }
    const std::size_t reserved_with_allocation = 8 * MiB;
    s.synchronize();
    INFO("reserved after the synchronisation: " << giver.reserved_current());
    CHECK(giver.reserved_current() < reserved_with_allocation);
    CHECK(giver.used_current() == 0);
  }
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("memory pools: an owning pool made current serves stream-ordered allocations, then the default is back",
          "[gpu][pool]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");
  const std::vector<std::uint8_t> data = cudrv::test::random_bytes(2 * MiB + 5, seed);
  const cudrv::memory_pool_ref def = cudrv::default_memory_pool(dev);
  {
    cudrv::memory_pool pool(dev);
    {
      current_pool_restorer restore(dev);
      CHECK(restore.previous() == def);
      cudrv::stream s(dev);
      cudrv::set_current_memory_pool(dev, pool);
      CHECK(cudrv::current_memory_pool(dev) == pool);
      CHECK(cudrv::default_memory_pool(dev) == def);  // the default pool does not change
      {
        cudrv::device_buffer<std::uint8_t> buf(s, data.size());  // from the current pool
        CHECK(pool.used_current() >= data.size());
        std::vector<std::uint8_t> back(data.size(), poison_value<std::uint8_t>());
        cudrv::copy(buf, data, s);
        cudrv::copy(back, buf, s);
        s.synchronize();
        CHECK(cudrv::get_pointer_attributes(buf.data()).pool == pool.native_handle());
        CHECK(mismatch(back, data).empty());
      }
      s.synchronize();
      CHECK(pool.used_current() == 0);

      cudrv::set_current_memory_pool(dev, def);
      CHECK(cudrv::current_memory_pool(dev) == def);
      cudrv::device_buffer<std::uint8_t> from_default(s, 1024);
      s.synchronize();
      CHECK(cudrv::get_pointer_attributes(from_default.data()).pool == def.native_handle());
    }  // from_default freed on s, s destroyed, current pool restored: before the pool is destroyed
    CHECK(cudrv::current_memory_pool(dev) == def);
  }
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("memory pools: moving pools, and destroying a pool while an allocation is alive", "[gpu][pool]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");
  const std::vector<std::uint8_t> data = cudrv::test::random_bytes(MiB, seed);
  {
    cudrv::stream s(dev);
    cudrv::memory_pool a(dev);
    const CUmemoryPool handle = a.native_handle();
    REQUIRE(handle != nullptr);

    cudrv::memory_pool b(std::move(a));
    CHECK_FALSE(bool(a));
    CHECK(a.native_handle() == nullptr);
    CHECK(bool(b));
    CHECK(b.native_handle() == handle);

    // Move-assigning over a live pool destroys the old pool (reported nowhere).
    cudrv::memory_pool c(dev);
    c = std::move(b);
    CHECK(c.native_handle() == handle);
    CHECK_FALSE(bool(b));

    // A moved-from pool can receive a pool again.
    a = std::move(c);
    CHECK(a.native_handle() == handle);
    CHECK_FALSE(bool(c));

    // release() and from_native_handle hand the pool over and back.
    CUmemoryPool raw = a.release();
    CHECK(raw == handle);
    CHECK_FALSE(bool(a));
    cudrv::memory_pool adopted = cudrv::memory_pool::from_native_handle(raw);
    CHECK(adopted.native_handle() == handle);

    // A pool destroyed while an allocation from it is alive goes away once that allocation is freed;
    // the allocation stays usable meanwhile.
    std::vector<std::uint8_t> back(MiB, poison_value<std::uint8_t>());
    {
      std::optional<cudrv::device_buffer<std::uint8_t>> survivor;
      {
        cudrv::memory_pool doomed(std::move(adopted));
        survivor.emplace(doomed, s, MiB);
        cudrv::copy(*survivor, data, s);
        s.synchronize();
      }  // cuMemPoolDestroy with survivor outstanding
      cudrv::copy(back, *survivor, s);
      s.synchronize();
    }  // survivor freed on s
    s.synchronize();
    CHECK(mismatch(back, data).empty());
  }
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("memory pools: a pool exportable as a POSIX file descriptor", "[gpu][pool]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  const unsigned int supported = dev.attribute(cudrv::device_attributes::mempool_supported_handle_types);
  INFO("supported handle types (mask of CUmemAllocationHandleType): " << supported);
  if ((supported & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == 0) {
    std::cout << "note: device 0 does not support POSIX file descriptor pools; the IPC pool is not tested" << std::endl;
    return;
  }
  {
    cudrv::stream s(dev);
    cudrv::memory_pool pool(dev, {.handle_type = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR});
    REQUIRE(bool(pool));
    const std::uint64_t seed = cudrv::test::test_seed();
    INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");
    const std::vector<std::uint8_t> data = cudrv::test::random_bytes(MiB, seed);
    std::vector<std::uint8_t> back(MiB, poison_value<std::uint8_t>());
    {
      cudrv::device_buffer<std::uint8_t> buf(pool, s, MiB);
      CHECK(pool.used_current() >= MiB);
      cudrv::copy(buf, data, s);
      cudrv::copy(back, buf, s);
      s.synchronize();
    }
    s.synchronize();
    CHECK(mismatch(back, data).empty());
    CHECK(pool.used_current() == 0);
  }
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}
