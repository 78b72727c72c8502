// GPU tier: bad input to the memory API. Each request must fail with the typed cudrv error and a
// message that says what is wrong, must not touch the destination (its poison stays intact), and must
// leave nothing behind (no destruction errors, nothing leaked under compute-sanitizer).
//
// Test cases tagged [driver_error] make the driver fail on purpose (an allocation larger than the
// device); compute-sanitizer reports those API errors, exclude them with "~[driver_error]" when that
// matters. Every other refusal here happens in cudrv before any driver call.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <sstream>
#include <stdexcept>
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
using cudrv::test::random_vector;

namespace {

/// Empty when every element of @p v is bitwise equal to @p value, otherwise how many are not.
template <class T>
std::string not_all(const std::vector<T>& v, T value) {
  std::size_t count = 0;
  std::size_t first = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (std::memcmp(&v[i], &value, sizeof(T)) != 0 && count++ == 0) {
      first = i;
    }
  }
  if (count == 0) {
    return {};
  }
  std::ostringstream out;
  out << count << " of " << v.size() << " elements changed, the first at index " << first;
  return out.str();
}

/// The device memory viewed by @p src, read back synchronously.
template <class T>
std::vector<T> read_back(cudrv::device_span<const T> src) {
  std::vector<T> out(src.size());
  cudrv::copy(out, src);
  return out;
}

/// Checks that @p fn throws invalid_argument_error, raised by cudrv itself, whose message contains
/// @p phrase.
template <class F>
void check_refused(F&& fn, const std::string& phrase) {
  INFO("expected an invalid_argument_error saying \"" << phrase << "\"");
  auto e = catch_as<cudrv::invalid_argument_error>(std::forward<F>(fn));
  CHECK(e.has_value());
  if (e) {
    INFO("what(): " << e->what());
    CHECK(e->source() == cudrv::error_source::cudrv);
    CHECK(e->result() == CUDA_ERROR_INVALID_VALUE);
    CHECK(e->name() == "CUDA_ERROR_INVALID_VALUE");
    CHECK(contains(e->what(), phrase));
    CHECK(contains(e->description(), phrase));
  }
}

}  // namespace

TEST_CASE("bad input: allocating more than the device has throws out_of_memory_error naming the size",
          "[gpu][bad_input][driver_error]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");
  const std::size_t too_much = dev.total_memory() * 2;
  const std::string size_text = std::to_string(too_much);
  {
    cudrv::stream s(dev);

    auto e = catch_as<cudrv::out_of_memory_error>([&] { cudrv::device_buffer<std::uint8_t> b(dev, too_much); });
    REQUIRE(e.has_value());
    INFO("what(): " << e->what());
    CHECK(e->source() == cudrv::error_source::driver);
    CHECK(e->result() == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(e->name() == "CUDA_ERROR_OUT_OF_MEMORY");
    CHECK(e->api() == "cuMemAlloc");
    CHECK(contains(e->what(), size_text));
    CHECK(contains(e->what(), "device 0"));

    auto ea = catch_as<cudrv::out_of_memory_error>([&] { cudrv::device_buffer<std::uint8_t> b(s, too_much); });
    REQUIRE(ea.has_value());
    INFO("what(): " << ea->what());
    CHECK(ea->result() == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(ea->api() == "cuMemAllocAsync");
    CHECK(contains(ea->what(), size_text));

    auto ep = catch_as<cudrv::out_of_memory_error>(
        [&] { cudrv::device_buffer<std::uint8_t> b(cudrv::default_memory_pool(dev), s, too_much); });
    REQUIRE(ep.has_value());
    CHECK(ep->api() == "cuMemAllocFromPoolAsync");
    CHECK(contains(ep->what(), size_text));

    // Normal allocations succeed afterwards and hold real data.
    const std::vector<std::uint8_t> data = cudrv::test::random_bytes(MiB, seed);
    cudrv::device_buffer<std::uint8_t> sync_ok(dev, MiB);
    cudrv::device_buffer<std::uint8_t> ordered_ok(s, MiB);
    std::vector<std::uint8_t> back(MiB, poison_value<std::uint8_t>());
    cudrv::copy(sync_ok, data, s);
    cudrv::copy(ordered_ok, sync_ok, s);
    cudrv::copy(back, ordered_ok, s);
    s.synchronize();
    CHECK(mismatch(back, data).empty());
  }
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("bad input: an invalid device ordinal is CUDA_ERROR_INVALID_DEVICE", "[gpu][bad_input]") {
  CUDRV_REQUIRE_GPU();
  const int count = cudrv::device_count();
  auto e = catch_as<cudrv::error>([] { (void)cudrv::device(-1); });
  REQUIRE(e.has_value());
  INFO("what(): " << e->what());
  CHECK(e->result() == CUDA_ERROR_INVALID_DEVICE);
  CHECK(contains(e->what(), "ordinal -1"));

  auto e2 = catch_as<cudrv::error>([&] { (void)cudrv::device(count); });
  REQUIRE(e2.has_value());
  INFO("what(): " << e2->what());
  CHECK(e2->result() == CUDA_ERROR_INVALID_DEVICE);
  CHECK(contains(e2->what(), "ordinal " + std::to_string(count)));
  CHECK(contains(e2->what(), "valid ordinals are 0 to " + std::to_string(count - 1)));
  CHECK_NOTHROW(cudrv::device(count - 1));
}

TEST_CASE("bad input: empty and oversized copies are refused before any driver call", "[gpu][bad_input]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");
  constexpr std::size_t n = 1000;
  const std::uint32_t P = poison_value<std::uint32_t>();
  std::vector<std::uint32_t> host_big = random_vector<std::uint32_t>(2 * n, seed);
  {
    cudrv::stream s(dev);
    cudrv::device_buffer<std::uint32_t> small(dev, n);
    cudrv::device_buffer<std::uint32_t> big(dev, 2 * n);
    cudrv::copy(small, std::vector<std::uint32_t>(n, P));
    cudrv::copy(big, host_big);
    std::vector<std::uint32_t> host_small(n, P);
    const cudrv::device_span<const std::uint32_t> empty_device;
    const std::vector<std::uint32_t> empty_host;

    // Nothing to copy: an empty source, or a count of 0.
    check_refused([&] { cudrv::copy(small, empty_device); }, "nothing to copy");
    check_refused([&] { cudrv::copy(small, empty_device, s); }, "nothing to copy");
    check_refused([&] { cudrv::copy(small, empty_host); }, "nothing to copy");
    check_refused([&] { cudrv::copy(host_small, big.view().first(0), s); }, "nothing to copy");
    check_refused([&] { cudrv::copy(small, big, std::size_t{0}); }, "nothing to copy");
    check_refused([&] { cudrv::copy(small, big, std::size_t{0}, s); }, "nothing to copy");
    check_refused([&] { cudrv::fill(small.view().first(0), 1u); }, "nothing to fill");
    check_refused([&] { cudrv::fill(small.view().subspan(n), 1u, s); }, "nothing to fill");

    // A source larger than the destination.
    check_refused([&] { cudrv::copy(small, big); }, "larger than the destination view");
    check_refused([&] { cudrv::copy(small, big, s); }, "larger than the destination view");
    check_refused([&] { cudrv::copy(small, host_big); }, "larger than the destination view");
    check_refused([&] { cudrv::copy(small, host_big, s); }, "larger than the destination view");
    check_refused([&] { cudrv::copy(host_small, big); }, "larger than the destination view");
    check_refused([&] { cudrv::copy(host_small, big, s); }, "larger than the destination view");
    check_refused([&] { cudrv::copy(host_small, host_big); }, "larger than the destination view");
    check_refused([&] { cudrv::copy(small.view().first(10), small.view().first(11)); },
                  "larger than the destination view");
    check_refused([&] { cudrv::copy_peer(small, dev, big, dev, s); }, "larger than the destination view");
    check_refused([&] { cudrv::copy_peer(small, dev.primary_context(), big, dev.primary_context()); },
                  "larger than the destination view");

    // A count larger than the source or the destination.
    check_refused([&] { cudrv::copy(big, small, n + 1); }, "larger than the source view");
    check_refused([&] { cudrv::copy(big, small, n + 1, s); }, "larger than the source view");
    check_refused([&] { cudrv::copy(small, big, n + 1); }, "larger than the destination view");
    check_refused([&] { cudrv::copy(small, big, n + 1, s); }, "larger than the destination view");
    check_refused([&] { cudrv::copy(host_small, big, n + 1, s); }, "larger than the destination view");
    check_refused([&] { cudrv::copy(small, host_big, 2 * n + 1); }, "larger than the source view");
    check_refused([&] { cudrv::copy(small, big, std::numeric_limits<std::size_t>::max() / 4); },
                  "larger than the source view");
    // A count whose byte size overflows must not wrap around to a small copy.
    check_refused([&] { cudrv::copy(small, big, std::numeric_limits<std::size_t>::max() / 4 + 2); },
                  "larger than the source view");
    check_refused([&] { cudrv::copy(small, big, std::numeric_limits<std::size_t>::max() / 4 + 2, s); },
                  "larger than the source view");

    s.synchronize();
    // Nothing was written.
    CHECK(not_all(read_back(std::as_const(small).view()), P).empty());
    CHECK(not_all(host_small, P).empty());
    // The source is intact too.
    CHECK(mismatch(read_back(std::as_const(big).view()), host_big).empty());
  }
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("bad input: pitched copies that do not fit are refused", "[gpu][bad_input][pitched]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  constexpr std::size_t w = 64;
  constexpr std::size_t h = 8;
  const float P = poison_value<float>();
  {
    cudrv::stream s(dev);
    cudrv::pitched_buffer<float> img(dev, w, h);
    const std::size_t all = img.pitch() / sizeof(float) * h;
    cudrv::copy(cudrv::device_span<float>(img.data(), all), std::vector<float>(all, P));
    std::vector<float> host(2 * w * h, 1.0f);  // large enough for every source below, if one ran
    using src_span = cudrv::pitched_span<const float>;

    check_refused([&] { cudrv::copy(img.view(), src_span::dense(host.data(), w + 1, h)); }, "does not fit");
    check_refused([&] { cudrv::copy(img.view(), src_span::dense(host.data(), w, h + 1), s); }, "does not fit");
    check_refused([&] { cudrv::copy(img.view(), src_span::dense(host.data(), w, h, 2)); }, "does not fit");
    check_refused([&] { cudrv::copy(img.view(), src_span::dense(host.data(), 0, h)); }, "nothing to copy");
    check_refused([&] { cudrv::copy(img.view(), src_span::dense(host.data(), w, 0), s); }, "nothing to copy");
    check_refused([&] { cudrv::copy(img.view(), src_span::dense(host.data(), w, h, 0)); }, "nothing to copy");
    const src_span narrow_pitch{reinterpret_cast<std::uintptr_t>(host.data()), w * sizeof(float) - 4, w, h, 1};
    check_refused([&] { cudrv::copy(img.view(), narrow_pitch); }, "pitch is smaller than its row");
    cudrv::pitched_span<float> bad_dst = img.view();
    bad_dst.pitch = 16;
    check_refused([&] { cudrv::copy(bad_dst, src_span::dense(host.data(), w, h), s); },
                  "pitch is smaller than its row");
    check_refused([&] { cudrv::copy(cudrv::pitched_span<float>::dense(host.data(), w - 1, h), img.view(), s); },
                  "does not fit");
    check_refused([&] { cudrv::copy(cudrv::pitched_span<float>{}, img.view()); }, "does not fit");
    s.synchronize();
    // Nothing was written.
    std::vector<float> back(all);
    cudrv::copy(back, cudrv::device_span<const float>(img.data(), all));
    CHECK(not_all(back, P).empty());
  }
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("bad input: views out of range, unknown flags and sizes that overflow", "[gpu][bad_input]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  constexpr std::size_t huge = std::numeric_limits<std::size_t>::max() / 4;
  {
    cudrv::stream s(dev);
    cudrv::device_buffer<float> buf(dev, 100);
    const cudrv::device_span<float> v = buf;

    // Views out of range.
    check_refused([&] { (void)v.subspan(101); }, "outside a view of 100 elements");
    check_refused([&] { (void)v.subspan(50, 51); }, "outside a view of 100 elements");
    check_refused([&] { (void)v.first(101); }, "outside a view of 100 elements");
    check_refused([&] { (void)v.last(101); }, "outside a view of 100 elements");
    check_refused([&] { (void)cudrv::pitched_span<float>::dense(v, 10, 11); }, "outside a view of 100 elements");
    check_refused([&] { (void)cudrv::pitched_span<float>::dense(v, 10, 5, 3); }, "outside a view of 100 elements");
    CHECK_NOTHROW(cudrv::pitched_span<float>::dense(v, 10, 10));

    // Unknown or refused flags.
    check_refused([&] { cudrv::pinned_buffer<int> p(dev, 16, static_cast<cudrv::pinned_flags>(0x100)); },
                  "unknown pinned_flags bits");
    std::vector<std::uint8_t> host(4096);
    check_refused(
        [&] {
          cudrv::host_registration r(dev, host.data(), host.size(), static_cast<cudrv::host_register_flags>(0x100));
        },
        "unknown host_register_flags bits");
    CHECK_FALSE(cudrv::get_pointer_attributes(host.data()).is_known());  // nothing was registered
    check_refused([&] { cudrv::managed_buffer<int> m(dev, 16, cudrv::managed_attach::single); },
                  "managed_attach::global or managed_attach::host");
    check_refused([&] { cudrv::event e(dev, cudrv::event_flags::timing | cudrv::event_flags::interprocess); },
                  "excludes event_flags::timing");
    check_refused([&] { cudrv::event e(dev, static_cast<cudrv::event_flags>(8)); }, "unknown event flags");

    // Empty or null ranges.
    check_refused([&] { cudrv::host_registration r(dev, nullptr, 64); }, "nothing to register");
    check_refused([&] { cudrv::host_registration r(dev, host.data(), 0); }, "nothing to register");
    check_refused([&] { cudrv::pitched_buffer<float> p(dev, 0, 10); }, "non-zero width");
    check_refused([&] { cudrv::pitched_buffer<float> p(dev, 10, 0); }, "non-zero width");
    check_refused([&] { cudrv::pitched_buffer<float> p(dev, 10, 10, 0); }, "non-zero width");

    // Sizes whose byte count overflows.
    check_refused([&] { cudrv::device_buffer<std::uint64_t> b(dev, huge); }, "overflow");
    check_refused([&] { cudrv::device_buffer<std::uint64_t> b(s, huge); }, "overflow");
    check_refused([&] { cudrv::pinned_buffer<std::uint64_t> b(dev, huge); }, "overflow");
    check_refused([&] { cudrv::managed_buffer<std::uint64_t> b(dev, huge); }, "overflow");
    s.synchronize();
  }
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("bad input: moved-from streams, events, contexts, buffers and pools are refused", "[gpu][bad_input]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  constexpr std::size_t n = 256;
  const std::uint32_t P = poison_value<std::uint32_t>();
  {
    cudrv::stream s(dev);
    cudrv::device_buffer<std::uint32_t> d(dev, n);
    cudrv::device_buffer<std::uint32_t> d2(dev, n);
    cudrv::copy(d, std::vector<std::uint32_t>(n, P));
    cudrv::copy(d2, std::vector<std::uint32_t>(n, 7u));
    std::vector<std::uint32_t> host(n, 7u);
    cudrv::managed_buffer<std::uint32_t> m(dev, n);
    cudrv::pitched_buffer<std::uint32_t> img(dev, 16, 4);

    SECTION("a moved-from stream") {
      cudrv::stream gone(dev);
      cudrv::stream keep(std::move(gone));
      const std::string empty = "the stream is empty";
      check_refused([&] { gone.synchronize(); }, "empty");
      check_refused([&] { cudrv::device_buffer<std::uint32_t> b(gone, n); }, empty);
      check_refused([&] { cudrv::device_buffer<std::uint32_t> b(cudrv::default_memory_pool(dev), gone, n); }, empty);
      check_refused([&] { cudrv::copy(d, host, gone); }, empty);
      check_refused([&] { cudrv::copy(d, host, n, gone); }, empty);
      check_refused([&] { cudrv::copy(host, d2, gone); }, empty);
      check_refused([&] { cudrv::copy(d, d2, gone); }, empty);
      check_refused([&] { cudrv::fill(d, 1u, gone); }, empty);
      check_refused([&] { cudrv::copy_peer(d, dev, d2, dev, gone); }, empty);
      check_refused(
          [&] { cudrv::copy(img.view(), cudrv::pitched_span<const std::uint32_t>::dense(host.data(), 16, 4), gone); },
          empty);
      check_refused([&] { m.prefetch(dev, gone); }, empty);
      check_refused([&] { m.attach(gone); }, empty);
      cudrv::device_buffer<std::uint32_t> ordered(s, n);
      check_refused([&] { ordered.set_stream(gone); }, empty);
      CHECK(ordered.stream() == s);  // unchanged: still freed on s
      s.synchronize();
      keep.synchronize();
    }
    SECTION("a moved-from event") {
      cudrv::event e1(dev);
      cudrv::event e2(std::move(e1));
      check_refused([&] { e1.record(s); }, "empty");
      check_refused([&] { e1.synchronize(); }, "empty");
      check_refused([&] { (void)e1.is_done(); }, "empty");
      check_refused([&] { s.wait(e1); }, "empty");
      check_refused([&] { (void)cudrv::elapsed_time(e1, e2); }, "empty");
      e2.record(s);
      e2.synchronize();
    }
    SECTION("a moved-from context") {
      cudrv::context c1(dev);
      cudrv::context c2(std::move(c1));
      const std::string empty = "the context is empty";
      check_refused([&] { cudrv::device_buffer<std::uint32_t> b(c1, n); }, empty);
      check_refused([&] { cudrv::pinned_buffer<std::uint32_t> b(c1, n); }, empty);
      check_refused([&] { cudrv::managed_buffer<std::uint32_t> b(c1, n); }, empty);
      check_refused([&] { cudrv::pitched_buffer<std::uint32_t> b(c1, 4, 4); }, empty);
      check_refused([&] { cudrv::host_registration r(c1, host.data(), n * sizeof(std::uint32_t)); }, empty);
      check_refused([&] { cudrv::copy_peer(d, c1, d2, dev.primary_context(), s); }, "a context is empty");
      CHECK_FALSE(cudrv::get_pointer_attributes(host.data()).is_known());
    }
    SECTION("moved-from buffers as copy source and destination") {
      cudrv::device_buffer<std::uint32_t> src(dev, n);
      cudrv::device_buffer<std::uint32_t> taken(std::move(src));
      check_refused([&] { cudrv::copy(d, src); }, "nothing to copy");
      check_refused([&] { cudrv::copy(d, src, s); }, "nothing to copy");
      check_refused([&] { cudrv::copy(src, host); }, "larger than the destination view");
      check_refused([&] { cudrv::copy(src, host, s); }, "larger than the destination view");
      check_refused([&] { cudrv::copy(src, d2, 10, s); }, "larger than the destination view");
      check_refused([&] { cudrv::fill(src, 1u); }, "nothing to fill");
      check_refused([&] { (void)src.context(); }, "empty");
      check_refused([&] { (void)src.stream(); }, "no stream");

      cudrv::pinned_buffer<std::uint32_t> p1(dev, n);
      cudrv::pinned_buffer<std::uint32_t> p2(std::move(p1));
      check_refused([&] { (void)p1.device_view(); }, "empty");
      check_refused([&] { cudrv::copy(d, p1, s); }, "nothing to copy");

      cudrv::managed_buffer<std::uint32_t> m1(dev, n);
      cudrv::managed_buffer<std::uint32_t> m2(std::move(m1));
      check_refused([&] { m1.prefetch(dev, s); }, "empty");
      check_refused([&] { m1.advise(CU_MEM_ADVISE_SET_READ_MOSTLY); }, "empty");
      check_refused([&] { m1.attach(s); }, "empty");

      cudrv::host_registration r1(dev, host.data(), n * sizeof(std::uint32_t));
      cudrv::host_registration r2(std::move(r1));
      check_refused([&] { (void)r1.device_address(); }, "empty");

      cudrv::pitched_buffer<std::uint32_t> i1(dev, 16, 4);
      cudrv::pitched_buffer<std::uint32_t> i2(std::move(i1));
      CHECK_FALSE(bool(i1));
      check_refused([&] { cudrv::copy(i2.view(), std::as_const(i1).view()); }, "nothing to copy");
      s.synchronize();
    }
    SECTION("a moved-from memory pool") {
      cudrv::memory_pool p1(dev);
      cudrv::memory_pool p2(std::move(p1));
      const std::string empty = "the memory pool is empty";
      check_refused([&] { cudrv::device_buffer<std::uint8_t> b(p1, s, 64); }, empty);
      check_refused([&] { (void)p1.used_current(); }, empty);
      check_refused([&] { (void)p1.reserved_current(); }, empty);
      check_refused([&] { (void)p1.release_threshold(); }, empty);
      check_refused([&] { p1.set_release_threshold(1); }, empty);
      check_refused([&] { p1.trim_to(0); }, empty);
      check_refused([&] { p1.reset_high_watermarks(); }, empty);
      check_refused([&] { p1.set_access(dev); }, empty);
      check_refused([&] { (void)p1.access(dev); }, empty);
      check_refused([&] { cudrv::set_current_memory_pool(dev, p1); }, empty);
      CHECK(cudrv::current_memory_pool(dev) == cudrv::default_memory_pool(dev));
      CHECK(p2.used_current() == 0);
      s.synchronize();
    }

    // Whatever was refused, d kept its poison.
    CHECK(not_all(read_back(std::as_const(d).view()), P).empty());
  }
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("bad input: a host callable that throws is reported by the next synchronize", "[gpu][bad_input]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");
  const std::vector<std::uint8_t> data = cudrv::test::random_bytes(MiB, seed);
  {
    cudrv::stream s(dev);
    cudrv::device_buffer<std::uint8_t> d(dev, MiB);
    std::vector<std::uint8_t> back(MiB, poison_value<std::uint8_t>());
    cudrv::copy(d, data, s);
    s.enqueue([] { throw std::runtime_error("boom from a host callable"); });
    cudrv::copy(back, d, s);  // work queued after the callable still runs

    auto e = catch_as<cudrv::host_callback_error>([&] { s.synchronize(); });
    REQUIRE(e.has_value());
    INFO("what(): " << e->what());
    CHECK(e->api() == "cudrv::stream::enqueue");
    CHECK(contains(e->what(), "a host callable threw"));
    CHECK(contains(e->what(), "boom from a host callable"));
    REQUIRE(e->original() != nullptr);
    try {
      std::rethrow_exception(e->original());
    } catch (const std::runtime_error& original) {
      CHECK(std::string(original.what()) == "boom from a host callable");
    } catch (...) {
      FAIL("original() holds an exception of another type");
    }
    CHECK_NOTHROW(s.synchronize());  // reported once
    CHECK(mismatch(back, data).empty());
  }
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("bad input: a fill at an address misaligned for its element size is refused", "[gpu][bad_input]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  constexpr std::size_t n = 64;
  const float P = poison_value<float>();
  {
    cudrv::stream s(dev);
    cudrv::device_buffer<float> buf(dev, n);
    cudrv::copy(buf, std::vector<float>(n, P));

    const cudrv::device_span<float> misaligned(buf.data() + 1, n - 1);
    check_refused([&] { cudrv::fill(misaligned, 1.0f); }, "not aligned");
    check_refused([&] { cudrv::fill(misaligned, 1.0f, s); }, "not aligned");
    const cudrv::device_span<float> off_by_two(buf.data() + 2, n - 1);
    check_refused([&] { cudrv::fill(off_by_two, 1.0f, s); }, "not aligned to the element size of 4 bytes");
    const cudrv::device_span<std::uint16_t> misaligned16(buf.data() + 1, 10);
    check_refused([&] { cudrv::fill(misaligned16, std::uint16_t{1}, s); },
                  "not aligned to the element size of 2 bytes");
    // Byte fills have no alignment requirement: this one works (and is undone by the check below).
    const cudrv::device_span<std::uint8_t> bytes(buf.data() + 1, 3);
    cudrv::fill(bytes, std::uint8_t{0xA5}, s);
    s.synchronize();
    CHECK(not_all(read_back(std::as_const(buf).view()), P).empty());
  }
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}
