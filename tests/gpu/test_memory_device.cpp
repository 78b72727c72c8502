// GPU tier: device memory. device_buffer (synchronous and stream-ordered allocation, zero elements,
// moves, release/adopt, the stream a buffer is freed on), device_span views, and memory operations
// made while no context is current.
//
// Every test case makes device 0's primary context current for its duration (and restores what was
// current before), so results do not depend on what an earlier test left current; the case "memory
// operations need no current context" covers the other situation on purpose. Data is checked on
// random bytes (the seed is printed on failure; CUDRV_TEST_SEED replays it) against destinations
// filled with a poison pattern first. "memory operations on a stream work while another context is
// current" covers a third situation: a created context of the same device is current.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "support/memory_support.hpp"
#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;
using cudrv::test::mismatch;
using cudrv::test::poison_value;
using cudrv::test::random_vector;

namespace {

/// Reads device memory back with a synchronous copy into a poisoned host vector.
template <class T>
std::vector<std::remove_const_t<T>> read_back(cudrv::device_span<T> src) {
  std::vector<std::remove_const_t<T>> out(src.size(), poison_value<std::remove_const_t<T>>());
  cudrv::copy(out, src);
  return out;
}

/// Makes no context current for its lifetime, then restores the one that was.
class no_current_context {
 public:
  no_current_context() : previous_(cudrv::test::raw_current_context()) {
    cudrv::test::raw_set_current_context(nullptr);
  }
  no_current_context(const no_current_context&) = delete;
  no_current_context& operator=(const no_current_context&) = delete;
  ~no_current_context() {
    try {
      cudrv::test::raw_set_current_context(previous_);
    } catch (...) {
    }
  }

 private:
  CUcontext previous_;
};

}  // namespace

TEST_CASE("device_buffer: synchronous allocation from a device and from a context", "[gpu][memory]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");
  constexpr std::size_t n = (1u << 18) + 7;
  const std::vector<float> data = random_vector<float>(n, seed);
  {
    cudrv::stream s(dev);
    cudrv::device_buffer<float> a(dev, n);
    cudrv::device_buffer<float> b(dev.primary_context(), n);
    for (cudrv::device_buffer<float>* buf : {&a, &b}) {
      REQUIRE(bool(*buf));
      CHECK(buf->data() != 0);
      CHECK(buf->get() == reinterpret_cast<float*>(buf->data()));
      CHECK(buf->size() == n);
      CHECK(buf->size_bytes() == n * sizeof(float));
      CHECK_FALSE(buf->empty());
      CHECK_FALSE(buf->is_stream_ordered());
      CHECK(buf->context() == dev.primary_context());
      CHECK(buf->view().data() == buf->data());
      CHECK(buf->view().size() == n);

      const cudrv::pointer_attributes attr = cudrv::get_pointer_attributes(buf->data());
      CHECK(attr.memory_type == CU_MEMORYTYPE_DEVICE);
      CHECK(attr.device_ordinal == dev.ordinal());
      CHECK(attr.context == dev.primary_context().native_handle());
      CHECK_FALSE(attr.is_managed);

      // A synchronous buffer has no stream: asking for one, or handing it one, is refused.
      auto e = catch_as<cudrv::invalid_argument_error>([&] { (void)buf->stream(); });
      REQUIRE(e.has_value());
      CHECK(e->api() == "cudrv::device_buffer::stream");
      CHECK(contains(e->what(), "no stream"));
      CHECK_THROWS_AS(buf->set_stream(s), cudrv::invalid_argument_error);
      CHECK_FALSE(buf->is_stream_ordered());
    }
    CHECK(a.data() != b.data());

    // Real values: host -> a -> b -> host, each destination poisoned first.
    cudrv::copy(a, std::vector<float>(n, poison_value<float>()));
    cudrv::copy(b, std::vector<float>(n, poison_value<float>()));
    cudrv::copy(a, data);
    cudrv::copy(b, a);
    CHECK(mismatch(read_back(a.view()), data).empty());
    CHECK(mismatch(read_back(b.view()), data).empty());
  }
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("device_buffer: allocation in a created context lives in that context", "[gpu][memory]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");
  constexpr std::size_t n = 4099;
  const std::vector<std::uint32_t> data = random_vector<std::uint32_t>(n, seed);
  {
    cudrv::context ctx(dev);
    {
      cudrv::device_buffer<std::uint32_t> buf(ctx, n);
      // Allocating in ctx left the primary context current.
      CHECK(cudrv::test::raw_current_context() == dev.primary_context().native_handle());
      REQUIRE(bool(buf));
      CHECK(buf.context() == ctx);
      // Synchronous copies (and pointer queries) run in the current context: use the memory's own.
      cudrv::context_guard in_ctx(ctx);
      CHECK(cudrv::get_pointer_attributes(buf.data()).context == ctx.native_handle());
      cudrv::copy(buf, std::vector<std::uint32_t>(n, poison_value<std::uint32_t>()));
      cudrv::copy(buf, data);
      CHECK(mismatch(read_back(buf.view()), data).empty());
    }  // freed in ctx, before ctx is destroyed
    CHECK(cudrv::test::raw_current_context() == dev.primary_context().native_handle());
  }
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("device_buffer: stream-ordered allocation from the current pool and from a given pool", "[gpu][memory]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");
  constexpr std::size_t n = (1u << 18) + 3;
  const std::vector<std::int32_t> data = random_vector<std::int32_t>(n, seed);
  {
    cudrv::stream s(dev);
    cudrv::device_buffer<std::int32_t> a(s, n);
    REQUIRE(bool(a));
    CHECK(a.size() == n);
    CHECK(a.size_bytes() == n * sizeof(std::int32_t));
    CHECK_FALSE(a.empty());
    CHECK(a.is_stream_ordered());
    CHECK(a.stream() == s);
    CHECK(a.context() == dev.primary_context());

    // Host buffers of stream-ordered copies stay alive until the stream is synchronised.
    const std::vector<std::int32_t> poison(n, poison_value<std::int32_t>());
    std::vector<std::int32_t> back(n, poison_value<std::int32_t>());
    cudrv::copy(a, poison, s);
    cudrv::copy(a, data, s);
    cudrv::copy(back, a, s);
    s.synchronize();
    CHECK(mismatch(back, data).empty());

    const cudrv::pointer_attributes attr_a = cudrv::get_pointer_attributes(a.data());
    CHECK(attr_a.memory_type == CU_MEMORYTYPE_DEVICE);
    CHECK(attr_a.device_ordinal == dev.ordinal());
    CHECK(attr_a.pool == cudrv::current_memory_pool(dev).native_handle());

    cudrv::memory_pool pool(dev);
    cudrv::device_buffer<std::int32_t> b(pool, s, n);
    REQUIRE(bool(b));
    CHECK(b.is_stream_ordered());
    CHECK(b.stream() == s);
    CHECK(b.size() == n);
    CHECK(pool.used_current() >= n * sizeof(std::int32_t));
    s.synchronize();
    const cudrv::pointer_attributes attr_b = cudrv::get_pointer_attributes(b.data());
    CHECK(attr_b.pool == pool.native_handle());
    CHECK(attr_b.device_ordinal == dev.ordinal());

    std::vector<std::int32_t> back_b(n, poison_value<std::int32_t>());
    cudrv::copy(b, poison, s);
    cudrv::copy(b, a, s);  // device to device
    cudrv::copy(back_b, b, s);
    s.synchronize();
    CHECK(mismatch(back_b, data).empty());
  }  // b is freed on s before pool goes; the pool is destroyed with nothing outstanding
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("device_buffer: zero elements hold no memory", "[gpu][memory]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  {
    cudrv::stream s(dev);
    cudrv::device_buffer<double> sync(dev, 0);
    CHECK_FALSE(bool(sync));
    CHECK(sync.empty());
    CHECK(sync.size() == 0);
    CHECK(sync.size_bytes() == 0);
    CHECK(sync.data() == 0);
    CHECK(sync.view().empty());
    CHECK_FALSE(sync.is_stream_ordered());
    CHECK(sync.context() == dev.primary_context());

    cudrv::device_buffer<double> ordered(s, 0);
    CHECK_FALSE(bool(ordered));
    CHECK(ordered.empty());
    CHECK(ordered.data() == 0);
    CHECK(ordered.is_stream_ordered());
    CHECK(ordered.stream() == s);

    cudrv::device_buffer<double> pooled(cudrv::default_memory_pool(dev), s, 0);
    CHECK_FALSE(bool(pooled));
    CHECK(pooled.size() == 0);

    // Moving and move-assigning empty buffers is fine.
    cudrv::device_buffer<double> moved(std::move(sync));
    CHECK(moved.empty());
    moved = std::move(ordered);
    CHECK(moved.empty());
    CHECK(moved.is_stream_ordered());
    s.synchronize();
  }
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("device_buffer: moving live buffers transfers the memory", "[gpu][memory]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");
  constexpr std::size_t n = 100003;
  const std::vector<std::uint32_t> data = random_vector<std::uint32_t>(n, seed);
  const std::vector<std::uint32_t> other = random_vector<std::uint32_t>(n, seed + 1);
  {
    cudrv::stream s(dev);
    cudrv::device_buffer<std::uint32_t> a(dev, n);
    cudrv::copy(a, data);
    const CUdeviceptr address = a.data();

    cudrv::device_buffer<std::uint32_t> b(std::move(a));
    CHECK_FALSE(bool(a));
    CHECK(a.data() == 0);
    CHECK(a.size() == 0);
    CHECK(a.empty());
    CHECK(b.data() == address);
    CHECK(b.size() == n);
    CHECK(mismatch(read_back(b.view()), data).empty());

    // Move-assigning over a live buffer frees the old memory (reported nowhere) and takes the new.
    cudrv::device_buffer<std::uint32_t> c(dev, 17);
    c = std::move(b);
    CHECK_FALSE(bool(b));
    CHECK(b.data() == 0);
    CHECK(b.size() == 0);
    CHECK(c.data() == address);
    CHECK(c.size() == n);
    CHECK(mismatch(read_back(c.view()), data).empty());

    // A moved-from buffer can receive memory again.
    a = std::move(c);
    CHECK(a.data() == address);
    CHECK_FALSE(bool(c));

    // Stream-ordered buffers keep their stream through moves.
    cudrv::device_buffer<std::uint32_t> d(s, n);
    cudrv::copy(d, other, s);
    s.synchronize();
    const CUdeviceptr ordered_address = d.data();
    cudrv::device_buffer<std::uint32_t> e(std::move(d));
    CHECK_FALSE(bool(d));
    CHECK_FALSE(d.is_stream_ordered());
    CHECK_THROWS_AS(d.stream(), cudrv::invalid_argument_error);
    CHECK(e.data() == ordered_address);
    CHECK(e.is_stream_ordered());
    CHECK(e.stream() == s);

    // A stream-ordered buffer assigned over a synchronous one: a's memory is freed with cuMemFree,
    // and a is then freed on s.
    a = std::move(e);
    CHECK(a.data() == ordered_address);
    CHECK(a.is_stream_ordered());
    CHECK(a.stream() == s);
    CHECK(mismatch(read_back(a.view()), other).empty());
    s.synchronize();
  }
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("device_buffer: release and from_native_handle round trip", "[gpu][memory]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");
  constexpr std::size_t n = 65537;
  const std::vector<std::uint16_t> data = random_vector<std::uint16_t>(n, seed);
  {
    cudrv::stream s(dev);

    cudrv::device_buffer<std::uint16_t> a(dev, n);
    cudrv::copy(a, data);
    const CUdeviceptr raw = a.release();
    CHECK(raw != 0);
    CHECK_FALSE(bool(a));
    CHECK(a.size() == 0);
    auto adopted = cudrv::device_buffer<std::uint16_t>::from_native_handle(raw, n, dev.primary_context());
    CHECK(adopted.data() == raw);
    CHECK(adopted.size() == n);
    CHECK_FALSE(adopted.is_stream_ordered());
    CHECK(adopted.context() == dev.primary_context());
    CHECK(mismatch(read_back(adopted.view()), data).empty());

    cudrv::device_buffer<std::uint16_t> b(s, n);
    cudrv::copy(b, data, s);
    const CUdeviceptr raw_ordered = b.release();
    CHECK_FALSE(bool(b));
    CHECK_FALSE(b.is_stream_ordered());
    auto adopted_ordered =
        cudrv::device_buffer<std::uint16_t>::from_native_handle(raw_ordered, n, cudrv::stream_ref(s));
    CHECK(adopted_ordered.data() == raw_ordered);
    CHECK(adopted_ordered.is_stream_ordered());
    CHECK(adopted_ordered.stream() == s);
    std::vector<std::uint16_t> back(n, poison_value<std::uint16_t>());
    cudrv::copy(back, adopted_ordered, s);
    s.synchronize();
    CHECK(mismatch(back, data).empty());
  }  // both adopted buffers are freed by cudrv: nothing leaks, nothing is reported
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("device_buffer: a stream-ordered buffer is freed on the stream it was handed to", "[gpu][memory]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");
  constexpr std::size_t n = std::size_t(4) << 20;
  const std::vector<std::uint8_t> data = cudrv::test::random_bytes(n, seed);
  std::vector<std::uint8_t> back(n, poison_value<std::uint8_t>());
  {
    // A pool of its own, so that its statistics see this buffer only.
    cudrv::memory_pool pool(dev);
    cudrv::stream a(dev);
    cudrv::stream b(dev);
    CHECK(pool.used_current() == 0);
    {
      cudrv::device_buffer<std::uint8_t> buf(pool, a, n);
      CHECK(buf.stream() == a);
      cudrv::copy(buf, data, a);
      cudrv::copy(back, buf, a);
      CHECK(pool.used_current() >= n);
      b.wait(a);  // b's later work (the free) comes after everything queued on a so far
      buf.set_stream(b);
      CHECK(buf.stream() == b);
      CHECK(buf.is_stream_ordered());
    }  // cuMemFreeAsync on b
    b.synchronize();
    CHECK(pool.used_current() == 0);
    a.synchronize();
  }
  CHECK(mismatch(back, data).empty());
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("device_span: subspan, first, last and const views", "[gpu][memory]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");
  static_assert(std::is_trivially_copyable_v<cudrv::device_span<float>>);
  static_assert(std::is_convertible_v<cudrv::device_span<int>, cudrv::device_span<const int>>);
  static_assert(!std::is_convertible_v<cudrv::device_span<const int>, cudrv::device_span<int>>);
  constexpr std::size_t n = 100;
  constexpr std::size_t e = sizeof(std::uint32_t);
  const std::vector<std::uint32_t> data = random_vector<std::uint32_t>(n, seed);
  {
    cudrv::device_buffer<std::uint32_t> buf(dev, n);
    cudrv::copy(buf, data);
    const CUdeviceptr base = buf.data();

    const cudrv::device_span<std::uint32_t> all = buf;
    CHECK(all.data() == base);
    CHECK(all.get() == buf.get());
    CHECK(all.size() == n);
    CHECK(all.size_bytes() == n * e);
    CHECK_FALSE(all.empty());

    const auto mid = all.subspan(10, 20);
    CHECK(mid.data() == base + 10 * e);
    CHECK(mid.size() == 20);
    const auto tail = all.subspan(90);
    CHECK(tail.data() == base + 90 * e);
    CHECK(tail.size() == 10);
    const auto end = all.subspan(n);
    CHECK(end.empty());
    CHECK(end.data() == base + n * e);
    const auto head = all.first(7);
    CHECK(head.data() == base);
    CHECK(head.size() == 7);
    const auto last = all.last(7);
    CHECK(last.data() == base + (n - 7) * e);
    CHECK(last.size() == 7);
    CHECK(all.first(0).empty());
    CHECK(all.last(0).empty());
    CHECK(all.last(n).data() == base);
    const auto nested = mid.subspan(5).first(3);
    CHECK(nested.data() == base + 15 * e);
    CHECK(nested.size() == 3);

    // The views address the right elements: read them back.
    const std::vector<std::uint32_t> mid_back = read_back(mid);
    CHECK(mismatch(mid_back.data(), data.data() + 10, 20).empty());
    const std::vector<std::uint32_t> last_back = read_back(last);
    CHECK(mismatch(last_back.data(), data.data() + n - 7, 7).empty());

    // const views
    const cudrv::device_span<const std::uint32_t> c = all;
    CHECK(c.data() == base);
    CHECK(c.size() == n);
    const auto& const_buf = buf;
    const cudrv::device_span<const std::uint32_t> cv = const_buf;
    CHECK(cv.data() == base);
    CHECK(cv.size() == n);
    CHECK(const_buf.view().subspan(3, 4).data() == base + 3 * e);
    CHECK(mismatch(read_back(c.subspan(50, 25)).data(), data.data() + 50, 25).empty());

    const cudrv::device_span<float> empty_view;
    CHECK(empty_view.empty());
    CHECK(empty_view.data() == 0);
    CHECK(empty_view.size_bytes() == 0);

    // Out of range: refused by cudrv with the range in the message.
    auto err = catch_as<cudrv::invalid_argument_error>([&] { (void)all.subspan(n + 1); });
    REQUIRE(err.has_value());
    CHECK(err->api() == "cudrv::device_span::subspan");
    CHECK(contains(err->what(), "outside a view of 100 elements"));
    CHECK_THROWS_AS(all.subspan(95, 6), cudrv::invalid_argument_error);
    CHECK_THROWS_AS(all.subspan(n + 1, 0), cudrv::invalid_argument_error);
    CHECK_THROWS_AS(all.subspan(1, std::size_t(-1)), cudrv::invalid_argument_error);
    CHECK_THROWS_AS(all.first(n + 1), cudrv::invalid_argument_error);
    CHECK_THROWS_AS(all.last(n + 1), cudrv::invalid_argument_error);
    CHECK_THROWS_AS(mid.subspan(21), cudrv::invalid_argument_error);
    CHECK_THROWS_AS(empty_view.first(1), cudrv::invalid_argument_error);
  }
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("memory operations need no current context", "[gpu][memory][context]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::test::destruction_error_counter errors;
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");
  constexpr std::size_t n = (1u << 16) + 5;
  const std::vector<std::uint8_t> data = cudrv::test::random_bytes(n, seed);
  (void)dev.primary_context();  // cudrv's own reference, taken before the context is cleared
  no_current_context none;
  REQUIRE(cudrv::test::raw_current_context() == nullptr);

  SECTION("synchronous allocation, copies and fill") {
    {
      cudrv::device_buffer<std::uint8_t> buf(dev, n);
      CHECK(cudrv::test::raw_current_context() == nullptr);
      cudrv::copy(buf, data);
      CHECK(cudrv::test::raw_current_context() == nullptr);
      std::vector<std::uint8_t> back(n, poison_value<std::uint8_t>());
      cudrv::copy(back, buf);
      CHECK(mismatch(back, data).empty());
      cudrv::fill(buf.view().first(100), std::uint8_t{0x11});
      std::vector<std::uint8_t> head(100, poison_value<std::uint8_t>());
      cudrv::copy(head, buf.view().first(100));
      CHECK(mismatch(head, std::vector<std::uint8_t>(100, 0x11)).empty());
      CHECK(cudrv::test::raw_current_context() == nullptr);
    }
    CHECK(cudrv::test::raw_current_context() == nullptr);
  }
  SECTION("stream-ordered allocation, copies and fill") {
    cudrv::stream s(dev);
    {
      cudrv::device_buffer<std::uint8_t> buf(s, n);
      std::vector<std::uint8_t> back(n, poison_value<std::uint8_t>());
      cudrv::copy(buf, data, s);
      cudrv::fill(buf.view().last(10), std::uint8_t{0x22}, s);
      cudrv::copy(back, buf, s);
      s.synchronize();
      std::vector<std::uint8_t> expected = data;
      std::fill(expected.end() - 10, expected.end(), std::uint8_t{0x22});
      CHECK(mismatch(back, expected).empty());
      CHECK(cudrv::test::raw_current_context() == nullptr);
    }
    s.synchronize();
    CHECK(cudrv::test::raw_current_context() == nullptr);
  }
  SECTION("pinned, registered and managed memory") {
    {
      cudrv::pinned_buffer<std::uint8_t> pinned(dev, n, cudrv::pinned_flags::portable | cudrv::pinned_flags::mapped);
      CHECK(pinned.device_view().size() == n);
      std::vector<std::uint8_t> host = data;
      cudrv::host_registration reg(dev, std::span(host));
      CHECK(bool(reg));
      cudrv::managed_buffer<std::uint8_t> managed(dev, n);
      std::memcpy(managed.data(), data.data(), n);
      if (dev.attribute(cudrv::device_attributes::concurrent_managed_access)) {
        cudrv::stream s(dev);
        managed.advise(CU_MEM_ADVISE_SET_READ_MOSTLY);
        managed.prefetch(dev, s);
        managed.prefetch(cudrv::memory_location::host(), s);
        s.synchronize();
      }
      CHECK(mismatch(managed.data(), data.data(), n).empty());
      CHECK(cudrv::test::raw_current_context() == nullptr);
    }
    CHECK(cudrv::test::raw_current_context() == nullptr);
  }
  SECTION("pointer attributes") {
    cudrv::device_buffer<std::uint8_t> buf(dev, n);
    const cudrv::pointer_attributes attr = cudrv::get_pointer_attributes(buf.data() + 1);
    CHECK(attr.memory_type == CU_MEMORYTYPE_DEVICE);
    CHECK(attr.device_ordinal == dev.ordinal());
    CHECK(attr.range_start == buf.data());
    std::vector<std::uint8_t> pageable(16);
    CHECK_FALSE(cudrv::get_pointer_attributes(pageable.data()).is_known());
    CHECK(cudrv::test::raw_current_context() == nullptr);
  }
  SECTION("memory pools") {
    cudrv::stream s(dev);
    CHECK(cudrv::default_memory_pool(dev) == cudrv::current_memory_pool(dev));
    cudrv::memory_pool pool(dev);
    {
      cudrv::device_buffer<std::uint8_t> buf(pool, s, n);
      CHECK(pool.used_current() >= n);
      cudrv::copy(buf, data, s);
      std::vector<std::uint8_t> back(n, poison_value<std::uint8_t>());
      cudrv::copy(back, buf, s);
      s.synchronize();
      CHECK(mismatch(back, data).empty());
    }
    s.synchronize();
    pool.trim_to(0);
    CHECK(pool.used_current() == 0);
    CHECK(cudrv::test::raw_current_context() == nullptr);
  }
  SECTION("pitched copies") {
    constexpr std::size_t w = 33;
    constexpr std::size_t h = 9;
    cudrv::stream s(dev);
    cudrv::pitched_buffer<std::uint32_t> img(dev, w, h);
    const std::vector<std::uint32_t> src = random_vector<std::uint32_t>(w * h, seed + 1);
    std::vector<std::uint32_t> out(w * h, poison_value<std::uint32_t>());
    cudrv::copy(img.view(), cudrv::pitched_span<const std::uint32_t>::dense(src.data(), w, h));
    cudrv::copy(cudrv::pitched_span<std::uint32_t>::dense(out.data(), w, h), img.view());
    CHECK(mismatch(out, src).empty());
    std::vector<std::uint32_t> out2(w * h, poison_value<std::uint32_t>());
    cudrv::copy(cudrv::pitched_span<std::uint32_t>::dense(out2.data(), w, h), img.view(), s);
    s.synchronize();
    CHECK(mismatch(out2, src).empty());
    CHECK(cudrv::test::raw_current_context() == nullptr);
  }
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("memory operations on a stream work while another context is current", "[gpu][memory][context]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");
  constexpr std::size_t n = (1u << 16) + 9;
  const std::vector<std::uint8_t> data = cudrv::test::random_bytes(n, seed);
  // A created context on the same device: memory of the primary context is not valid in it, so any
  // operation that ran in the current context instead of the stream's would fail or fault.
  cudrv::context other(dev);
  {
    cudrv::stream s(dev);
    std::vector<std::uint8_t> back(n, poison_value<std::uint8_t>());

    SECTION("stream-ordered copies and fills") {
      cudrv::device_buffer<std::uint8_t> a(dev, n);
      cudrv::device_buffer<std::uint8_t> b(dev, n);
      {
        cudrv::context_guard foreign(other);
        cudrv::copy(a, data, s);
        cudrv::fill(b, std::uint8_t{0x5A}, s);
        cudrv::copy(b.view().first(n / 2), a.view().first(n / 2), s);
        cudrv::copy(back, b, s);
        s.synchronize();
        CHECK(cudrv::test::raw_current_context() == other.native_handle());
      }
      std::vector<std::uint8_t> expected(n, 0x5A);
      std::copy(data.begin(), data.begin() + n / 2, expected.begin());
      CHECK(mismatch(back, expected).empty());
    }
    SECTION("synchronous copies and fills") {
      cudrv::device_buffer<std::uint8_t> a(dev, n);
      cudrv::device_buffer<std::uint8_t> b(dev, n);
      {
        cudrv::context_guard foreign(other);
        cudrv::copy(a, data);
        cudrv::fill(b, std::uint8_t{0x5A});
        cudrv::copy(b.view().first(n / 2), a.view().first(n / 2));
        cudrv::copy(back, b);  // complete on return: read below without any synchronisation
        CHECK(cudrv::test::raw_current_context() == other.native_handle());
      }
      std::vector<std::uint8_t> expected(n, 0x5A);
      std::copy(data.begin(), data.begin() + n / 2, expected.begin());
      CHECK(mismatch(back, expected).empty());
    }
    SECTION("stream-ordered pitched copies") {
      constexpr std::size_t w = 129;
      constexpr std::size_t h = 17;
      cudrv::pitched_buffer<std::uint8_t> img(dev, w, h);
      cudrv::pinned_buffer<std::uint8_t> src(dev, w * h);
      cudrv::pinned_buffer<std::uint8_t> out(dev, w * h);
      std::copy(data.begin(), data.begin() + w * h, src.begin());
      std::fill(out.begin(), out.end(), poison_value<std::uint8_t>());
      {
        cudrv::context_guard foreign(other);
        cudrv::copy(img.view(), cudrv::pitched_span<const std::uint8_t>::dense(src.data(), w, h), s);
        cudrv::copy(cudrv::pitched_span<std::uint8_t>::dense(out.data(), w, h), img.view(), s);
        s.synchronize();
        CHECK(cudrv::test::raw_current_context() == other.native_handle());
      }
      CHECK(mismatch(out.data(), data.data(), w * h).empty());
    }
    SECTION("managed memory: attach, advice and prefetch") {
      cudrv::managed_buffer<std::uint8_t> m(dev, n);
      cudrv::device_buffer<std::uint8_t> d(dev, n);
      std::copy(data.begin(), data.end(), m.begin());
      {
        cudrv::context_guard foreign(other);
        m.attach(s, cudrv::managed_attach::global);
        if (dev.attribute(cudrv::device_attributes::concurrent_managed_access)) {
          m.advise(CU_MEM_ADVISE_SET_READ_MOSTLY);
          m.prefetch(dev, s);
        }
        cudrv::copy(d, m, s);
        cudrv::copy(back, d, s);
        s.synchronize();
        CHECK(cudrv::test::raw_current_context() == other.native_handle());
      }
      CHECK(mismatch(back, data).empty());
    }
    SECTION("stream-ordered allocation") {
      std::optional<cudrv::device_buffer<std::uint8_t>> buf;
      {
        cudrv::context_guard foreign(other);
        buf.emplace(s, n);
        cudrv::copy(*buf, data, s);
        cudrv::copy(back, *buf, s);
        s.synchronize();
        CHECK(cudrv::test::raw_current_context() == other.native_handle());
      }
      CHECK(mismatch(back, data).empty());
    }
    s.synchronize();
  }
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("device_buffer: set_stream orders the new stream after the old one", "[gpu][memory]") {
  CUDRV_REQUIRE_GPU();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::stream a(dev);
  cudrv::stream b(dev);
  {
    cudrv::device_buffer<int> buf(a, 1024);
    cudrv::test::gate g;
    a.enqueue(g.blocker());  // a is busy until the gate opens
    buf.set_stream(b);
    CHECK(buf.stream() == b);
    // b now waits for what was queued on a, so it cannot be done before the gate opens.
    CHECK_FALSE(b.is_done());
    g.open();
    b.synchronize();
    CHECK(a.is_done());
    // Handing the buffer to the stream it already has changes nothing.
    buf.set_stream(b);
    CHECK(buf.stream() == b);
  }
  b.synchronize();
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("device_buffer: default streams", "[gpu][memory]") {
  CUDRV_REQUIRE_GPU();
  cudrv::test::destruction_error_counter errors;
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");

  SECTION("the per-thread default stream is refused: it is another stream on every thread") {
    auto e = catch_as<cudrv::invalid_argument_error>(
        [] { cudrv::device_buffer<int> buf(cudrv::stream_ref::per_thread_default(), 16); });
    REQUIRE(e.has_value());
    CHECK(contains(e->what(), "per-thread default stream"));
  }
  SECTION("a buffer on the legacy default stream is freed in the context it was allocated in") {
    const std::vector<std::uint32_t> data = random_vector<std::uint32_t>(4096, seed);
    std::vector<std::uint32_t> back(data.size(), poison_value<std::uint32_t>());
    cudrv::context other(dev);
    {
      cudrv::device_buffer<std::uint32_t> buf(cudrv::stream_ref::legacy_default(), data.size());
      CHECK(buf.context() == dev.primary_context());
      cudrv::copy(buf, data, cudrv::stream_ref::legacy_default());
      cudrv::copy(back, buf, cudrv::stream_ref::legacy_default());
      cudrv::stream_ref::legacy_default().synchronize();
      cudrv::context_guard foreign(other);  // another context is current when the buffer is freed
    }
    CHECK(mismatch(back, data).empty());
    cudrv::stream_ref::legacy_default().synchronize();
  }
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}
