// GPU tier: batched copies (<cudrv/batch_copy.hpp>). 1,000 copies of 4 KiB-64 KiB in every direction
// (device to device, pinned host to device, device to pinned host) through one batch, on the driver's
// batch where it exists and on the forced fallback; attribute runs (during_api_call from a source that
// dies after the call, any, hints, overlap); pitched 2D/3D batches; and the refusals.
//
// Every destination is poisoned (bytes 0xA5) first and checked whole afterwards against a host
// reference: the copied ranges must hold the data, the gaps the poison. Data is random from a seed
// (printed; CUDRV_TEST_SEED replays it).
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "support/catch_support.hpp"
#include "support/memory_support.hpp"
#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;
using cudrv::test::mismatch;
using cudrv::test::poison_value;
using cudrv::test::random_vector;

namespace {

// Copies i of a batch: count elements from src_offset to dst_offset (elements of std::uint32_t), with
// gaps between destinations so that a copy landing too long or at the wrong place is seen.
struct plan {
  struct piece {
    std::size_t src, dst, count;
  };
  std::vector<piece> pieces;
  std::size_t src_total = 0, dst_total = 0;

  plan(std::size_t copies, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<std::size_t> bytes(4096, 65536);
    for (std::size_t i = 0; i < copies; ++i) {
      const std::size_t count = bytes(rng) / sizeof(std::uint32_t);
      pieces.push_back({src_total, dst_total + 16, count});
      src_total += count;
      dst_total += count + 16 + rng() % 64;
    }
    dst_total += 16;
  }
  // What the destination holds after the copies: the poison with every piece copied in.
  std::vector<std::uint32_t> expected(const std::vector<std::uint32_t>& src) const {
    std::vector<std::uint32_t> out(dst_total, poison_value<std::uint32_t>());
    for (const piece& p : pieces) {
      std::copy_n(src.begin() + static_cast<std::ptrdiff_t>(p.src), p.count,
                  out.begin() + static_cast<std::ptrdiff_t>(p.dst));
    }
    return out;
  }
};

const cudrv::batch_copy_mode modes[] = {cudrv::batch_copy_mode::automatic, cudrv::batch_copy_mode::fallback_loop};

const char* mode_name(cudrv::batch_copy_mode m) {
  return m == cudrv::batch_copy_mode::automatic ? "automatic" : "fallback_loop";
}

cudrv::batch_copy_path expected_path(cudrv::batch_copy_mode m) {
  return m == cudrv::batch_copy_mode::automatic && cudrv::batch_copy_supported()
             ? cudrv::batch_copy_path::driver_batch
             : cudrv::batch_copy_path::fallback_loop;
}

}  // namespace

TEST_CASE("1,000 copies through one batch land where single copies would, in every direction", "[gpu][batch_copy]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  cudrv::stream s(dev);
  const auto seed = cudrv::test::test_seed();
  INFO("seed " << seed << ", driver batch " << (cudrv::batch_copy_supported() ? "available" : "absent"));
  const plan p(1000, seed);
  const auto data = random_vector<std::uint32_t>(p.src_total, seed + 1);
  const auto want = p.expected(data);
  const std::vector<std::uint32_t> poison(p.dst_total, poison_value<std::uint32_t>());

  cudrv::device_buffer<std::uint32_t> dev_src(dev, p.src_total);
  cudrv::pinned_buffer<std::uint32_t> host_src(dev, p.src_total);
  std::copy(data.begin(), data.end(), host_src.begin());
  cudrv::copy(dev_src, data, s);
  cudrv::device_buffer<std::uint32_t> dev_dst(dev, p.dst_total);
  cudrv::pinned_buffer<std::uint32_t> host_dst(dev, p.dst_total);
  std::vector<std::uint32_t> readback(p.dst_total);

  for (const auto mode : modes) {
    INFO("mode " << mode_name(mode));
    SECTION(std::string("device to device, ") + mode_name(mode)) {
      cudrv::copy(dev_dst, poison, s);
      cudrv::batch_copy batch;
      for (const auto& piece : p.pieces) {
        batch.add(dev_dst.view().subspan(piece.dst, piece.count), dev_src.view().subspan(piece.src, piece.count));
      }
      CHECK(cudrv::copy(batch, s, mode) == expected_path(mode));
      cudrv::copy(readback, dev_dst, s);
      s.synchronize();
      CHECK(mismatch(readback, want).empty());
    }
    SECTION(std::string("pinned host to device, ") + mode_name(mode)) {
      cudrv::copy(dev_dst, poison, s);
      cudrv::batch_copy batch;
      for (const auto& piece : p.pieces) {
        batch.add(dev_dst.view().subspan(piece.dst, piece.count), host_src.view().subspan(piece.src, piece.count));
      }
      CHECK(cudrv::copy(batch, s, mode) == expected_path(mode));
      cudrv::copy(readback, dev_dst, s);
      s.synchronize();
      CHECK(mismatch(readback, want).empty());
    }
    SECTION(std::string("device to pinned host, ") + mode_name(mode)) {
      std::fill(host_dst.begin(), host_dst.end(), poison_value<std::uint32_t>());
      cudrv::batch_copy batch;
      for (const auto& piece : p.pieces) {
        batch.add(host_dst.view().subspan(piece.dst, piece.count), dev_src.view().subspan(piece.src, piece.count));
      }
      CHECK(cudrv::copy(batch, s, mode) == expected_path(mode));
      s.synchronize();
      CHECK(mismatch(host_dst.data(), want.data(), want.size()).empty());
    }
  }
}

TEST_CASE("batched copies honour their attributes: a during_api_call source may die when the call returns",
          "[gpu][batch_copy]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  cudrv::stream s(dev);
  const auto seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  const auto a = random_vector<std::int32_t>(4096, seed);
  const auto b = random_vector<std::int32_t>(4096, seed + 1);
  cudrv::device_buffer<std::int32_t> dev_a(dev, a.size());
  cudrv::copy(dev_a, a, s);
  cudrv::pinned_buffer<std::int32_t> pinned_b(dev, b.size());
  std::copy(b.begin(), b.end(), pinned_b.begin());
  cudrv::managed_buffer<std::int32_t> managed(dev, 4096);
  std::copy(a.begin(), a.end(), managed.begin());
  s.synchronize();

  for (const auto mode : modes) {
    INFO("mode " << mode_name(mode));
    cudrv::device_buffer<std::int32_t> out(dev, 5 * 4096);
    cudrv::fill(out, poison_value<std::int32_t>(), s);
    std::vector<std::int32_t> ephemeral(b.begin(), b.end());  // pageable, overwritten right after the call
    cudrv::batch_copy batch;
    batch.add(out.view().subspan(0, 4096), dev_a);
    batch.add(out.view().subspan(4096, 4096), ephemeral, {.order = cudrv::source_access_order::during_api_call});
    batch.add(out.view().subspan(2 * 4096, 4096), pinned_b,
              {.order = cudrv::source_access_order::any, .prefer_overlap_with_compute = true});
    batch.add(out.view().subspan(3 * 4096, 4096), managed,
              {.source_hint = cudrv::copy_location_hint::on(dev),
               .destination_hint = cudrv::copy_location_hint::on(dev)});
    batch.add(out.view().subspan(4 * 4096, 100), dev_a, 100);
    REQUIRE(batch.attributes().size() == 5);
    CHECK(cudrv::copy(batch, s, mode) == expected_path(mode));
    std::fill(ephemeral.begin(), ephemeral.end(), -1);  // the promise: the source was read during the call
    std::vector<std::int32_t> got(out.size());
    cudrv::copy(got, out, s);
    s.synchronize();
    std::vector<std::int32_t> want(out.size(), poison_value<std::int32_t>());
    std::copy(a.begin(), a.end(), want.begin());
    std::copy(b.begin(), b.end(), want.begin() + 4096);
    std::copy(b.begin(), b.end(), want.begin() + 2 * 4096);
    std::copy(a.begin(), a.end(), want.begin() + 3 * 4096);
    std::copy_n(a.begin(), 100, want.begin() + 4 * 4096);
    CHECK(mismatch(got, want).empty());
  }
}

TEST_CASE("pitched 2D and 3D copies through one batch match the pitched copy", "[gpu][batch_copy]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  cudrv::stream s(dev);
  const auto seed = cudrv::test::test_seed();
  INFO("seed " << seed << ", driver 3-D batch " << (cudrv::batch_copy_3d_supported() ? "available" : "absent"));
  struct shape {
    std::size_t w, h, d;
  };
  const shape shapes[] = {{37, 19, 1}, {64, 8, 3}, {5, 40, 7}, {300, 2, 2}};
  for (const auto mode : modes) {
    INFO("mode " << mode_name(mode));
    std::vector<cudrv::pitched_buffer<double>> images;
    std::vector<std::vector<double>> sources;
    cudrv::batch_copy_3d up;
    for (std::size_t i = 0; i < std::size(shapes); ++i) {
      const shape& sh = shapes[i];
      sources.push_back(random_vector<double>(sh.w * sh.h * sh.d, seed + i));
      images.emplace_back(dev, sh.w + 3, sh.h + 2, sh.d);  // larger than the copies: the rest stays poisoned
      // Poison every byte of the image, the padding of each row included (a view as wide as the pitch).
      const std::size_t row = images.back().pitch() / sizeof(double);
      const std::vector<double> poison(row * images.back().height() * sh.d, poison_value<double>());
      cudrv::copy(cudrv::pitched_span<double>{images.back().data(), images.back().pitch(), row, images.back().height(),
                                              sh.d},
                  cudrv::pitched_span<const double>::dense(poison.data(), row, images.back().height(), sh.d), s);
      up.add(images.back().view(), cudrv::pitched_span<const double>::dense(sources.back().data(), sh.w, sh.h, sh.d));
    }
    CHECK(cudrv::copy(up, s, mode) == (mode == cudrv::batch_copy_mode::automatic && cudrv::batch_copy_3d_supported()
                                           ? cudrv::batch_copy_path::driver_batch
                                           : cudrv::batch_copy_path::fallback_loop));
    // Read each image back whole (with its padding) and compare with the host reference.
    for (std::size_t i = 0; i < std::size(shapes); ++i) {
      const shape& sh = shapes[i];
      const std::size_t row = images[i].pitch() / sizeof(double);
      std::vector<double> got(row * images[i].height() * sh.d);
      cudrv::copy(cudrv::pitched_span<double>::dense(got.data(), row, images[i].height(), sh.d),
                  cudrv::pitched_span<const double>{images[i].data(), images[i].pitch(), row, images[i].height(), sh.d},
                  s);
      s.synchronize();
      std::vector<double> want(got.size(), poison_value<double>());
      for (std::size_t z = 0; z < sh.d; ++z) {
        for (std::size_t y = 0; y < sh.h; ++y) {
          for (std::size_t x = 0; x < sh.w; ++x) {
            want[(z * images[i].height() + y) * row + x] = sources[i][(z * sh.h + y) * sh.w + x];
          }
        }
      }
      INFO("image " << i);
      CHECK(mismatch(got, want).empty());
    }
  }
}

TEST_CASE("batched copies refuse what the driver would: empty batches, the legacy stream for the driver's batch",
          "[gpu][batch_copy]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  cudrv::stream s(dev);
  cudrv::device_buffer<int> a(dev, 256), b(dev, 256);
  cudrv::test::require_invalid_argument("empty batch", [&] { (void)cudrv::copy(cudrv::batch_copy{}, s); });
  cudrv::test::require_invalid_argument("larger than the destination",
                                        [&] { cudrv::batch_copy().add(a.view().first(10), b); });
  cudrv::batch_copy batch;
  batch.add(a, b);
  dev.set_current();
  const auto legacy = cudrv::stream_ref::legacy_default();
  auto e = cudrv::test::require_invalid_argument("legacy stream", [&] {
    (void)cudrv::copy(batch, legacy, cudrv::batch_copy_mode::driver_batch);
  });
  CHECK(contains(e.what(), "legacy default stream"));
  CHECK(cudrv::copy(batch, legacy) == cudrv::batch_copy_path::fallback_loop);  // automatic falls back
  legacy.synchronize();
  if (!cudrv::batch_copy_supported()) {
    CHECK(catch_as<cudrv::not_supported_error>(
        [&] { (void)cudrv::copy(batch, s, cudrv::batch_copy_mode::driver_batch); }));
  }
}
