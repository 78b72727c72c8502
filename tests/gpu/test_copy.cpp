// GPU tier: copies and fills on real data. Every direction (host pageable/pinned, device, managed),
// synchronous and stream-ordered; explicit counts and partial copies; 2D and 3D pitched copies checked
// element by element; fills of 8/16/32-bit elements; pointer attributes; peer copies.
//
// Every destination is filled with a poison pattern (bytes 0xA5) first, and the whole destination is
// checked afterwards: the copied part must hold the data, the rest must still hold the poison. Data is
// random (the seed is printed on failure; CUDRV_TEST_SEED replays it).
//
// Ordering: a "synchronous" copy whose destination is device memory may still be in flight when it
// returns (the driver only promises that the host source may be reused); it is ordered on the
// legacy default stream, which the non-blocking streams of cudrv do not synchronise with. The tests
// therefore read such results back with another synchronous copy (same stream), and synchronise the
// device before host code touches managed memory or before switching between the two modes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <utility>
#include <vector>

#include "support/catch_support.hpp"
#include "support/memory_support.hpp"
#include "support/test_support.hpp"

using cudrv::test::mismatch;
using cudrv::test::poison_value;
using cudrv::test::random_vector;

namespace {

/// @p n poison elements with @p part copied in at @p offset: what a partial copy must leave.
template <class T>
std::vector<T> poisoned_with(std::size_t n, std::size_t offset, const T* part, std::size_t count) {
  std::vector<T> out(n, poison_value<T>());
  std::copy(part, part + count, out.begin() + static_cast<std::ptrdiff_t>(offset));
  return out;
}

/// Runs copies and fills either synchronously or ordered on a stream (then waits for the stream),
/// so one test body checks both forms.
class copier {
 public:
  copier(bool async, cudrv::stream_ref s, cudrv::device dev) : async_(async), stream_(s), dev_(dev) {}

  [[nodiscard]] const char* mode() const { return async_ ? "stream-ordered" : "synchronous"; }

  template <class D, class S>
  void operator()(D&& dst, S&& src) const {
    if (async_) {
      cudrv::copy(dst, src, stream_);
      stream_.synchronize();
    } else {
      cudrv::copy(dst, src);
    }
  }
  template <class D, class S>
  void n(D&& dst, S&& src, std::size_t count) const {
    if (async_) {
      cudrv::copy(dst, src, count, stream_);
      stream_.synchronize();
    } else {
      cudrv::copy(dst, src, count);
    }
  }
  template <class T, class U>
  void pitched(cudrv::pitched_span<T> dst, cudrv::pitched_span<U> src) const {
    if (async_) {
      cudrv::copy(dst, src, stream_);
      stream_.synchronize();
    } else {
      cudrv::copy(dst, src);
    }
  }
  template <class D, class V>
  void fill(D&& dst, const V& value) const {
    if (async_) {
      cudrv::fill(dst, value, stream_);
      stream_.synchronize();
    } else {
      cudrv::fill(dst, value);
    }
  }
  /// Waits for all work of the device (the legacy default stream included).
  void settle() const { dev_.synchronize(); }

 private:
  bool async_;
  cudrv::stream_ref stream_;
  cudrv::device dev_;
};

/// The whole allocation of a pitched buffer as a linear view (for poisoning it).
template <class T>
cudrv::device_span<T> linear(cudrv::pitched_buffer<T>& buf) {
  return {buf.data(), buf.pitch() / sizeof(T) * buf.height() * buf.depth()};
}

}  // namespace

TEST_CASE("copy: every direction, byte for byte, synchronous and stream-ordered", "[gpu][copy]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");
  constexpr std::size_t n = (1u << 20) + 13;
  constexpr std::uint8_t P = 0xA5;
  const std::vector<std::uint8_t> data = cudrv::test::random_bytes(n, seed);
  const std::vector<std::uint8_t> poison(n, P);
  {
    cudrv::stream s(dev);
    cudrv::device_buffer<std::uint8_t> d1(dev, n);
    cudrv::device_buffer<std::uint8_t> d2(dev, n);
    cudrv::pinned_buffer<std::uint8_t> p1(dev, n);
    cudrv::pinned_buffer<std::uint8_t> p2(dev, n);
    cudrv::managed_buffer<std::uint8_t> m(dev, n);
    std::copy(data.begin(), data.end(), p1.begin());
    std::vector<std::uint8_t> h(n, P);

    for (const bool async : {false, true}) {
      dev.synchronize();
      const copier cp(async, s, dev);
      INFO("mode: " << cp.mode());

      // pageable host -> device, device -> pageable host
      cp(d1, poison);
      cp(d1, data);
      h.assign(n, P);
      cp(h, d1);
      CHECK(mismatch(h, data).empty());

      // device -> device
      cp(d2, poison);
      cp(d2, d1);
      h.assign(n, P);
      cp(h, d2);
      CHECK(mismatch(h, data).empty());

      // pinned host -> device, device -> pinned host
      cp(d2, poison);
      cp(d2, p1);
      std::fill(p2.begin(), p2.end(), P);
      cp(p2, d2);
      CHECK(mismatch(p2.data(), data.data(), n).empty());

      // host -> host: pageable and pinned on either side
      h.assign(n, P);
      cp(h, data);
      CHECK(mismatch(h, data).empty());
      h.assign(n, P);
      cp(h, p1);
      CHECK(mismatch(h, data).empty());
      std::fill(p2.begin(), p2.end(), P);
      cp(p2, data);
      CHECK(mismatch(p2.data(), data.data(), n).empty());
      std::fill(p2.begin(), p2.end(), P);
      cp(p2, p1);
      CHECK(mismatch(p2.data(), data.data(), n).empty());

      // managed memory as the destination: from pageable, pinned and device memory
      cp.settle();
      std::fill(m.begin(), m.end(), P);
      cp(m, data);
      cp.settle();
      CHECK(mismatch(m.data(), data.data(), n).empty());
      std::fill(m.begin(), m.end(), P);
      cp(m, p1);
      cp.settle();
      CHECK(mismatch(m.data(), data.data(), n).empty());
      std::fill(m.begin(), m.end(), P);
      cp(m, d1);
      cp.settle();
      CHECK(mismatch(m.data(), data.data(), n).empty());

      // managed memory as the source: to device, pageable and pinned memory
      cp(d2, poison);
      cp(d2, m);
      h.assign(n, P);
      cp(h, d2);
      CHECK(mismatch(h, data).empty());
      h.assign(n, P);
      cp(h, m);
      CHECK(mismatch(h, data).empty());
      std::fill(p2.begin(), p2.end(), P);
      cp(p2, m);
      CHECK(mismatch(p2.data(), data.data(), n).empty());
      cp.settle();
    }
  }
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("copy: explicit counts and partial copies leave the rest of the destination untouched", "[gpu][copy]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");
  constexpr std::size_t n = 100000;
  constexpr std::size_t k = 33333;
  constexpr std::size_t off = 1234;
  const std::uint32_t P = poison_value<std::uint32_t>();
  const std::vector<std::uint32_t> data = random_vector<std::uint32_t>(n, seed);
  const std::vector<std::uint32_t> small(data.begin(), data.begin() + k);
  const std::vector<std::uint32_t> poison(n, P);
  {
    cudrv::stream s(dev);
    cudrv::device_buffer<std::uint32_t> src(dev, n);
    cudrv::device_buffer<std::uint32_t> dst(dev, n);
    std::vector<std::uint32_t> got(n, P);
    for (const bool async : {false, true}) {
      dev.synchronize();
      const copier cp(async, s, dev);
      INFO("mode: " << cp.mode());
      cp(src, data);

      // The first k elements, host -> device.
      cp(dst, poison);
      cp.n(dst, data, k);
      got.assign(n, P);
      cp(got, dst);
      CHECK(mismatch(got, poisoned_with(n, 0, data.data(), k)).empty());

      // The first k elements, device -> host.
      got.assign(n, P);
      cp.n(got, src, k);
      CHECK(mismatch(got, poisoned_with(n, 0, data.data(), k)).empty());

      // The first k elements, device -> device.
      cp(dst, poison);
      cp.n(dst, src, k);
      got.assign(n, P);
      cp(got, dst);
      CHECK(mismatch(got, poisoned_with(n, 0, data.data(), k)).empty());

      // The first k elements, host -> host.
      got.assign(n, P);
      cp.n(got, data, k);
      CHECK(mismatch(got, poisoned_with(n, 0, data.data(), k)).empty());

      // A whole smaller source into a larger destination.
      cp(dst, poison);
      cp(dst, small);
      got.assign(n, P);
      cp(got, dst);
      CHECK(mismatch(got, poisoned_with(n, 0, small.data(), k)).empty());

      // Into a subspan in the middle: the neighbours on both sides keep their poison.
      cp(dst, poison);
      cp(dst.view().subspan(off, k), small);
      got.assign(n, P);
      cp(got, dst);
      CHECK(mismatch(got, poisoned_with(n, off, small.data(), k)).empty());

      // From a subspan of the source.
      std::vector<std::uint32_t> part(k, P);
      cp(part, src.view().subspan(off, k));
      CHECK(mismatch(part.data(), data.data() + off, k).empty());

      // Subspan to subspan with a count smaller than both.
      cp(dst, poison);
      cp.n(dst.view().subspan(7), src.view().subspan(off), 1000);
      got.assign(n, P);
      cp(got, dst);
      CHECK(mismatch(got, poisoned_with(n, 7, data.data() + off, 1000)).empty());

      // The last element alone.
      cp(dst, poison);
      cp(dst.view().last(1), src.view().last(1));
      got.assign(n, P);
      cp(got, dst);
      CHECK(mismatch(got, poisoned_with(n, n - 1, data.data() + n - 1, 1)).empty());
    }
  }
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("copy: overlapping device ranges are refused on every linear path, the memory untouched", "[gpu][copy]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");
  constexpr std::size_t n = 4096;
  const std::vector<std::uint32_t> data = random_vector<std::uint32_t>(n, seed);
  cudrv::stream s(dev);
  cudrv::device_buffer<std::uint32_t> d(dev, n);
  cudrv::copy(d, data);
  const auto all = d.view();
  // cuMemcpyAsync of these ranges would be undefined: the copy engine may read bytes it already wrote.
  for (const auto& [dst_at, src_at] : {std::pair<std::size_t, std::size_t>{1, 0}, {0, 1000}, {7, 7}}) {
    INFO("destination at element " << dst_at << ", source at element " << src_at);
    const cudrv::device_span<std::uint32_t> dst = all.subspan(dst_at, 2048);
    const cudrv::device_span<const std::uint32_t> src = all.subspan(src_at, 2048);
    cudrv::test::require_invalid_argument("stream-ordered", [&] { cudrv::copy(dst, src, s); });
    cudrv::test::require_invalid_argument("synchronous", [&] { cudrv::copy(dst, src); });
    cudrv::test::require_invalid_argument("peer", [&] { cudrv::copy_peer(dst, dev, src, dev, s); });
    cudrv::batch_copy batch;
    cudrv::test::require_invalid_argument("batch", [&] { batch.add(dst, src); });
    cudrv::graph g;
    cudrv::graph_builder b(g, dev);
    cudrv::test::require_invalid_argument("graph memcpy node", [&] { (void)cudrv::copy(dst, src, b); });
  }
  s.synchronize();
  std::vector<std::uint32_t> got(n);
  cudrv::copy(got, d);
  CHECK(mismatch(got, data).empty());
  // Ranges that touch without sharing a byte are copied.
  cudrv::copy(all.subspan(2048, 2048), cudrv::device_span<const std::uint32_t>(all.first(2048)), s);
  s.synchronize();
  cudrv::copy(got, d);
  std::vector<std::uint32_t> expected = data;
  std::copy(data.begin(), data.begin() + 2048, expected.begin() + 2048);
  CHECK(mismatch(got, expected).empty());
}

TEST_CASE("copy: 2D pitched arrays, element by element", "[gpu][copy][pitched]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");
  constexpr std::size_t w = 301;
  constexpr std::size_t h = 37;
  constexpr std::size_t bw = w + 5;  // the larger destination
  constexpr std::size_t bh = h + 3;
  constexpr std::size_t x0 = 2;  // a window of the larger destination
  constexpr std::size_t y0 = 1;
  const float P = poison_value<float>();
  const std::vector<float> src = random_vector<float>(w * h, seed);

  // What the larger destination holds after src was copied to (x, y) = (ox, oy) of it.
  auto expected_big = [&](std::size_t ox, std::size_t oy) {
    std::vector<float> e(bw * bh, P);
    for (std::size_t y = 0; y < h; ++y) {
      for (std::size_t x = 0; x < w; ++x) {
        e[(y + oy) * bw + (x + ox)] = src[y * w + x];
      }
    }
    return e;
  };
  {
    cudrv::stream s(dev);
    cudrv::pitched_buffer<float> a(dev, w, h);
    REQUIRE(bool(a));
    CHECK(a.width() == w);
    CHECK(a.height() == h);
    CHECK(a.depth() == 1);
    CHECK(a.pitch() >= w * sizeof(float));
    CHECK(a.pitch() % sizeof(float) == 0);
    CHECK(a.context() == dev.primary_context());
    CHECK(a.view().address == a.data());
    CHECK(a.view().pitch == a.pitch());
    CHECK(a.view().width == w);
    CHECK(a.view().height == h);
    CHECK(cudrv::get_pointer_attributes(a.data()).memory_type == CU_MEMORYTYPE_DEVICE);
    cudrv::pitched_buffer<float> b(dev, bw, bh);

    // Pageable host memory for the synchronous copies, pinned memory for the stream-ordered ones.
    std::vector<float> pageable_src = src;
    std::vector<float> pageable_out(bw * bh, P);
    cudrv::pinned_buffer<float> pinned_src(dev, w * h);
    cudrv::pinned_buffer<float> pinned_out(dev, bw * bh);
    std::copy(src.begin(), src.end(), pinned_src.begin());

    for (const bool async : {false, true}) {
      dev.synchronize();
      const copier cp(async, s, dev);
      INFO("mode: " << cp.mode());
      const float* host_src = async ? pinned_src.data() : pageable_src.data();
      float* out = async ? pinned_out.data() : pageable_out.data();
      const auto dense_src = cudrv::pitched_span<const float>::dense(host_src, w, h);

      // dense host -> pitched device -> dense host
      cp.fill(linear(a), P);
      cp.pitched(a.view(), dense_src);
      std::fill(out, out + w * h, P);
      cp.pitched(cudrv::pitched_span<float>::dense(out, w, h), a.view());
      CHECK(mismatch(out, src.data(), w * h).empty());

      // pitched device -> larger pitched device: the rows and columns beyond keep their poison
      cp.fill(linear(b), P);
      cp.pitched(b.view(), std::as_const(a).view());
      std::fill(out, out + bw * bh, P);
      cp.pitched(cudrv::pitched_span<float>::dense(out, bw, bh), b.view());
      CHECK(mismatch(out, expected_big(0, 0).data(), bw * bh).empty());

      // dense host -> a window of the larger destination at (x0, y0)
      cp.fill(linear(b), P);
      cudrv::pitched_span<float> window = b.view();
      window.address += y0 * window.pitch + x0 * sizeof(float);
      window.width = w;
      window.height = h;
      cp.pitched(window, dense_src);
      std::fill(out, out + bw * bh, P);
      cp.pitched(cudrv::pitched_span<float>::dense(out, bw, bh), b.view());
      CHECK(mismatch(out, expected_big(x0, y0).data(), bw * bh).empty());

      if (!async) {
        // pitched device -> dense device memory and back (cuMemcpy2DUnaligned takes any pitch; the
        // stream-ordered form may refuse device pitches that cuMemAllocPitch did not choose).
        cudrv::device_buffer<float> lin(dev, w * h);
        cp(lin, std::vector<float>(w * h, P));
        cp.pitched(cudrv::pitched_span<float>::dense(lin.view(), w, h), a.view());
        std::vector<float> lin_back(w * h, P);
        cp(lin_back, lin);
        CHECK(mismatch(lin_back, src).empty());
        cp.fill(linear(a), P);
        cp.pitched(a.view(), cudrv::pitched_span<const float>::dense(std::as_const(lin).view(), w, h));
        std::fill(out, out + w * h, P);
        cp.pitched(cudrv::pitched_span<float>::dense(out, w, h), a.view());
        CHECK(mismatch(out, src.data(), w * h).empty());
      }
    }
    dev.synchronize();
  }
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("copy: 3D pitched arrays, element by element", "[gpu][copy][pitched]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");
  constexpr std::size_t w = 45;
  constexpr std::size_t h = 11;
  constexpr std::size_t d = 5;
  constexpr std::size_t bw = w + 3;
  constexpr std::size_t bh = h + 2;
  constexpr std::size_t bd = d + 1;
  const std::uint16_t P = poison_value<std::uint16_t>();
  const std::vector<std::uint16_t> src = random_vector<std::uint16_t>(w * h * d, seed);
  std::vector<std::uint16_t> expected_big(bw * bh * bd, P);
  for (std::size_t z = 0; z < d; ++z) {
    for (std::size_t y = 0; y < h; ++y) {
      for (std::size_t x = 0; x < w; ++x) {
        expected_big[(z * bh + y) * bw + x] = src[(z * h + y) * w + x];
      }
    }
  }
  {
    cudrv::stream s(dev);
    cudrv::pitched_buffer<std::uint16_t> a(dev, w, h, d);
    REQUIRE(bool(a));
    CHECK(a.width() == w);
    CHECK(a.height() == h);
    CHECK(a.depth() == d);
    CHECK(a.pitch() >= w * sizeof(std::uint16_t));
    CHECK(a.view().depth == d);
    cudrv::pitched_buffer<std::uint16_t> b(dev, bw, bh, bd);

    std::vector<std::uint16_t> pageable_src = src;
    std::vector<std::uint16_t> pageable_out(bw * bh * bd, P);
    cudrv::pinned_buffer<std::uint16_t> pinned_src(dev, w * h * d);
    cudrv::pinned_buffer<std::uint16_t> pinned_out(dev, bw * bh * bd);
    std::copy(src.begin(), src.end(), pinned_src.begin());

    for (const bool async : {false, true}) {
      dev.synchronize();
      const copier cp(async, s, dev);
      INFO("mode: " << cp.mode());
      const std::uint16_t* host_src = async ? pinned_src.data() : pageable_src.data();
      std::uint16_t* out = async ? pinned_out.data() : pageable_out.data();

      // dense host -> pitched device -> dense host
      cp.fill(linear(a), P);
      cp.pitched(a.view(), cudrv::pitched_span<const std::uint16_t>::dense(host_src, w, h, d));
      std::fill(out, out + w * h * d, P);
      cp.pitched(cudrv::pitched_span<std::uint16_t>::dense(out, w, h, d), a.view());
      CHECK(mismatch(out, src.data(), w * h * d).empty());

      // pitched device -> larger pitched device (other pitch, slice height and depth)
      cp.fill(linear(b), P);
      cp.pitched(b.view(), a.view());
      std::fill(out, out + bw * bh * bd, P);
      cp.pitched(cudrv::pitched_span<std::uint16_t>::dense(out, bw, bh, bd), b.view());
      CHECK(mismatch(out, expected_big.data(), bw * bh * bd).empty());
    }
    dev.synchronize();
  }
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("fill: 8, 16 and 32-bit elements, whole views and subspans", "[gpu][copy][fill]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;

  // Poisons @p buf with a copy (not a fill), fills [offset, offset + count) or everything with
  // @p value, and checks every element.
  auto check_fill = [&](const copier& cp, auto& buf, auto value, std::size_t offset, std::size_t count, bool whole) {
    using T = decltype(value);
    const std::size_t n = buf.size();
    cp(buf, std::vector<T>(n, poison_value<T>()));
    if (whole) {
      cp.fill(buf, value);
    } else {
      cp.fill(buf.view().subspan(offset, count), value);
    }
    std::vector<T> got(n, poison_value<T>());
    cp(got, buf);
    std::vector<T> expected(n, poison_value<T>());
    std::fill(expected.begin() + static_cast<std::ptrdiff_t>(offset),
              expected.begin() + static_cast<std::ptrdiff_t>(offset + count), value);
    return mismatch(got, expected);
  };
  {
    cudrv::stream s(dev);
    cudrv::device_buffer<std::uint8_t> d8(dev, 1000);
    cudrv::device_buffer<std::uint16_t> d16(dev, 1001);
    cudrv::device_buffer<float> df(dev, 999);
    cudrv::managed_buffer<std::uint8_t> m(dev, 4096);
    cudrv::pinned_buffer<std::uint32_t> p(dev, 1024, cudrv::pinned_flags::portable | cudrv::pinned_flags::mapped);
    for (const bool async : {false, true}) {
      dev.synchronize();
      const copier cp(async, s, dev);
      INFO("mode: " << cp.mode());

      CHECK(check_fill(cp, d8, std::uint8_t{0x3C}, 0, 1000, true).empty());
      CHECK(check_fill(cp, d8, std::uint8_t{0x3C}, 100, 333, false).empty());
      CHECK(check_fill(cp, d8, std::uint8_t{0x00}, 999, 1, false).empty());
      CHECK(check_fill(cp, d16, std::uint16_t{0xBEEF}, 0, 1001, true).empty());
      CHECK(check_fill(cp, d16, std::uint16_t{0xBEEF}, 7, 501, false).empty());
      CHECK(check_fill(cp, df, -1.5f, 0, 999, true).empty());
      CHECK(check_fill(cp, df, -1.5f, 3, 250, false).empty());
      CHECK(check_fill(cp, df, 0.0f, 998, 1, false).empty());

      // Managed and pinned memory through their device views.
      cp.settle();
      std::fill(m.begin(), m.end(), poison_value<std::uint8_t>());
      cp.fill(m.device_view().subspan(1, 4000), std::uint8_t{0x7E});
      cp.settle();
      std::vector<std::uint8_t> expected_m(4096, poison_value<std::uint8_t>());
      std::fill(expected_m.begin() + 1, expected_m.begin() + 4001, std::uint8_t{0x7E});
      CHECK(mismatch(m.data(), expected_m.data(), 4096).empty());

      std::fill(p.begin(), p.end(), poison_value<std::uint32_t>());
      cp.fill(p.device_view().subspan(5, 100), std::uint32_t{0xDEADBEEF});
      cp.settle();
      std::vector<std::uint32_t> expected_p(1024, poison_value<std::uint32_t>());
      std::fill(expected_p.begin() + 5, expected_p.begin() + 105, std::uint32_t{0xDEADBEEF});
      CHECK(mismatch(p.data(), expected_p.data(), 1024).empty());
    }
  }
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("pointer attributes of device, pool, pinned, managed and pageable memory", "[gpu][copy][memory]") {
  CUDRV_REQUIRE_GPU();
  const cudrv::device dev(0);
  cudrv::context_guard current(dev.primary_context());
  cudrv::test::destruction_error_counter errors;
  constexpr std::size_t big = std::size_t(2) << 20;
  {
    cudrv::stream s(dev);

    cudrv::device_buffer<std::uint8_t> d(dev, big);
    const CUdeviceptr interior = d.data() + 12345;
    const cudrv::pointer_attributes a = cudrv::get_pointer_attributes(interior);
    CHECK(a.is_known());
    CHECK(a.memory_type == CU_MEMORYTYPE_DEVICE);
    CHECK(a.device_ordinal == dev.ordinal());
    CHECK_FALSE(a.is_managed);
    CHECK(a.context == dev.primary_context().native_handle());
    CHECK(a.device_address == interior);
    CHECK(a.range_start == d.data());
    CHECK(a.range_size == big);
    CHECK(a.buffer_id != 0);
    CHECK(a.pool == nullptr);
    CHECK(cudrv::get_pointer_attributes(d.data()).buffer_id == a.buffer_id);
    cudrv::device_buffer<std::uint8_t> d2(dev, 4096);
    CHECK(cudrv::get_pointer_attributes(d2.data()).buffer_id != a.buffer_id);

    cudrv::memory_pool pool(dev);
    cudrv::device_buffer<std::uint8_t> o(pool, s, big);
    s.synchronize();
    const cudrv::pointer_attributes ao = cudrv::get_pointer_attributes(o.data() + 7);
    CHECK(ao.memory_type == CU_MEMORYTYPE_DEVICE);
    CHECK(ao.device_ordinal == dev.ordinal());
    CHECK_FALSE(ao.is_managed);
    CHECK(ao.pool == pool.native_handle());
    CHECK(ao.context == nullptr);  // stream-ordered memory belongs to no context

    cudrv::pinned_buffer<std::uint8_t> p(dev, 4096, cudrv::pinned_flags::portable | cudrv::pinned_flags::mapped);
    const cudrv::pointer_attributes ap = cudrv::get_pointer_attributes(p.data());
    CHECK(ap.memory_type == CU_MEMORYTYPE_HOST);
    CHECK_FALSE(ap.is_managed);
    CHECK(ap.host_pointer == static_cast<void*>(p.data()));
    CHECK(ap.device_address == p.device_view().data());
    INFO("pinned device_ordinal " << ap.device_ordinal);
    CHECK((ap.device_ordinal == -1 || ap.device_ordinal == dev.ordinal()));

    cudrv::managed_buffer<std::uint8_t> m(dev, 4096);
    const cudrv::pointer_attributes am = cudrv::get_pointer_attributes(m.data());
    INFO("managed memory_type " << static_cast<int>(am.memory_type) << ", device_ordinal " << am.device_ordinal);
    CHECK(am.is_known());
    CHECK(am.is_managed);
    CHECK(am.device_address == reinterpret_cast<CUdeviceptr>(m.data()));
    CHECK(am.host_pointer == static_cast<void*>(m.data()));
    CHECK((am.device_ordinal == -1 || am.device_ordinal == dev.ordinal()));

    const std::vector<std::uint8_t> pageable(4096);
    for (const void* host : {static_cast<const void*>(pageable.data()), static_cast<const void*>(&pageable)}) {
      const cudrv::pointer_attributes ah = cudrv::get_pointer_attributes(host);
      CHECK_FALSE(ah.is_known());
      CHECK(ah.memory_type == 0);
      CHECK(ah.device_ordinal == -1);
      CHECK_FALSE(ah.is_managed);
      CHECK(ah.context == nullptr);
      CHECK(ah.range_start == 0);
      CHECK(ah.range_size == 0);
      CHECK(ah.pool == nullptr);
    }
  }
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}

TEST_CASE("copy_peer: between two devices, both ways", "[gpu][copy][peer]") {
  CUDRV_REQUIRE_GPU();
  if (cudrv::device_count() < 2) {
    std::cout << "note: the peer copy test needs two devices; this machine has " << cudrv::device_count()
              << " (nothing checked)" << std::endl;
    return;
  }
  const cudrv::device d0(0);
  const cudrv::device d1(1);
  cudrv::context_guard current(d0.primary_context());
  cudrv::test::destruction_error_counter errors;
  const std::uint64_t seed = cudrv::test::test_seed();
  INFO("seed " << seed << " (CUDRV_TEST_SEED=" << seed << " replays it)");
  constexpr std::size_t n = (1u << 20) + 3;
  constexpr std::uint8_t P = 0xA5;
  const std::vector<std::uint8_t> data0 = cudrv::test::random_bytes(n, seed);
  const std::vector<std::uint8_t> data1 = cudrv::test::random_bytes(n, seed + 1);
  const std::vector<std::uint8_t> poison(n, P);
  std::vector<std::uint8_t> got(n, P);
  {
    cudrv::stream s0(d0);
    cudrv::stream s1(d1);
    cudrv::device_buffer<std::uint8_t> b0(d0, n);
    cudrv::device_buffer<std::uint8_t> b1(d1, n);
    // Work on device 1's stream and memory runs with device 1's context current.
    auto on_device1 = [&](auto&& fn) {
      cudrv::context_guard guard(d1.primary_context());
      fn();
    };

    // 0 -> 1, ordered on device 0's stream.
    cudrv::copy(b0, data0, s0);
    s0.synchronize();
    on_device1([&] {
      cudrv::copy(b1, poison, s1);
      s1.synchronize();
    });
    cudrv::copy_peer(b1, d1, b0, d0, s0);
    s0.synchronize();
    on_device1([&] {
      got.assign(n, P);
      cudrv::copy(got, b1, s1);
      s1.synchronize();
    });
    CHECK(mismatch(got, data0).empty());

    // 1 -> 0, ordered on device 1's stream.
    on_device1([&] {
      cudrv::copy(b1, data1, s1);
      s1.synchronize();
    });
    cudrv::copy(b0, poison, s0);
    s0.synchronize();
    on_device1([&] {
      cudrv::copy_peer(b0, d0, b1, d1, s1);
      s1.synchronize();
    });
    got.assign(n, P);
    cudrv::copy(got, b0, s0);
    s0.synchronize();
    CHECK(mismatch(got, data1).empty());

    // The synchronous form, 0 -> 1 (b0 holds data1 now).
    on_device1([&] {
      cudrv::copy(b1, poison, s1);
      s1.synchronize();
    });
    cudrv::copy_peer(b1, d1.primary_context(), b0, d0.primary_context());
    d0.synchronize();
    d1.synchronize();
    on_device1([&] {
      got.assign(n, P);
      cudrv::copy(got, b1, s1);
      s1.synchronize();
    });
    CHECK(mismatch(got, data1).empty());
  }
  INFO(errors.messages());
  CHECK(errors.count() == 0);
}
