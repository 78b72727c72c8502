// texture_resize: bilinear up- and down-scaling of a float image through a texture. The image goes into
// a CUDA array (cudrv::array<float>), a texture object samples it with linear filtering, clamp
// addressing and normalised coordinates, and one kernel writes each output pixel from one filtered
// fetch (examples/kernels/texture_resize.hpp). Every output pixel of both directions is checked on the
// host against a model of the hardware's filter: the exact bilinear value, within what the texture
// unit's 9-bit fixed-point weights allow (each of the two weights within 1/256 of the exact one, so
// the result within the spread of the four texels / 128).
//
//   example_texture_resize [side]   side of the square input image, default 4096 (64 MiB of floats)
//
// The figure is the upscaling (2x per side) kernel's bytes through device memory (input read once, output
// written once) over its time, against the device-to-device copy bandwidth of the same run; the
// detail line gives output texels per second for both directions.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "example_main.hpp"
#include "kernels/texture_resize.hpp"

namespace {

using resize_fn = void(cudrv::texture_object_ref, float*, int, int);

// Counts the output pixels that differ from the bilinear filter of in (w x h) at their centres by more
// than the hardware's weight resolution allows.
std::size_t count_wrong(const std::vector<float>& in, int w, int h, const std::vector<float>& out, int ow, int oh) {
  std::size_t wrong = 0;
  for (int y = 0; y < oh; ++y) {
    const float v = (y + 0.5f) / static_cast<float>(oh);
    const double sy = static_cast<double>(v) * h - 0.5;
    const double fy = std::floor(sy);
    const double b = sy - fy;
    const int j0 = std::clamp(static_cast<int>(fy), 0, h - 1), j1 = std::clamp(static_cast<int>(fy) + 1, 0, h - 1);
    for (int x = 0; x < ow; ++x) {
      const float u = (x + 0.5f) / static_cast<float>(ow);
      const double sx = static_cast<double>(u) * w - 0.5;
      const double fx = std::floor(sx);
      const double a = sx - fx;
      const int i0 = std::clamp(static_cast<int>(fx), 0, w - 1), i1 = std::clamp(static_cast<int>(fx) + 1, 0, w - 1);
      const double t00 = in[static_cast<std::size_t>(j0) * w + i0], t10 = in[static_cast<std::size_t>(j0) * w + i1];
      const double t01 = in[static_cast<std::size_t>(j1) * w + i0], t11 = in[static_cast<std::size_t>(j1) * w + i1];
      const double exact = (1 - a) * (1 - b) * t00 + a * (1 - b) * t10 + (1 - a) * b * t01 + a * b * t11;
      const double spread = std::max({t00, t10, t01, t11}) - std::min({t00, t10, t01, t11});
      const double got = out[static_cast<std::size_t>(y) * ow + x];
      wrong += !(std::abs(got - exact) <= spread / 128.0 * 1.01 + 1e-5);  // a NaN left by the poison counts
    }
  }
  return wrong;
}

bool run(std::size_t side) {
  if (side > 32768) {
    throw example::usage_error{"side " + std::to_string(side) + " is too large (at most 32768)"};
  }
  const int w = static_cast<int>(side), h = static_cast<int>(side);
  cudrv::device dev(0);
  cudrv::stream stream(dev);
  cudrv::library lib = example::compile(dev, "texture_resize.cu", example::texture_resize_kernels::source);
  auto resize = lib.get_kernel<resize_fn>("resize");

  // A smooth pattern with noise, so that neighbouring texels differ and the filter shows.
  std::vector<float> image(side * side);
  std::mt19937 rng(20251127);
  std::uniform_real_distribution<float> noise(-0.1f, 0.1f);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      image[static_cast<std::size_t>(y) * w + x] = std::sin(0.013f * x) * std::cos(0.007f * y) + noise(rng);
    }
  }
  cudrv::array<float> input(dev, cudrv::array_shape::two_d(side, side));
  cudrv::copy(input, image, stream);
  cudrv::texture_object tex(input, {.address = {cudrv::address_mode::clamp, cudrv::address_mode::clamp},
                                    .filter = cudrv::filter_mode::linear,
                                    .normalized_coordinates = true});

  // Resizes to ow x oh: poisons the output, times the kernel, copies back and checks every pixel.
  // Returns the time in ms, or a negative value when a pixel is wrong.
  auto time_and_check = [&](int ow, int oh, const char* name) {
    const std::size_t count = static_cast<std::size_t>(ow) * oh;
    cudrv::device_buffer<float> out(dev, count);
    cudrv::fill(out, std::numeric_limits<float>::quiet_NaN(), stream);
    const cudrv::launch_config config{.grid = {static_cast<unsigned>((ow + 31) / 32),
                                               static_cast<unsigned>((oh + 7) / 8)},
                                      .block = {32, 8}};
    const double ms = example::time_ms(dev, stream, 20, [&](cudrv::stream_ref s) {
      cudrv::launch(s, config, resize, tex, out.get(), ow, oh);
    });
    std::vector<float> host(count);
    cudrv::copy(host, out, stream);
    stream.synchronize();
    const std::size_t wrong = count_wrong(image, w, h, host, ow, oh);
    if (wrong != 0) {
      std::fprintf(stderr, "texture_resize: %s: %zu of %zu pixels differ from the bilinear filter\n", name, wrong,
                   count);
      return -1.0;
    }
    return ms;
  };
  const int up_w = 2 * w, up_h = 2 * h;
  const int down_w = std::max(1, w / 2), down_h = std::max(1, h / 2);
  const double up_ms = time_and_check(up_w, up_h, "2x upscaling");
  const double down_ms = time_and_check(down_w, down_h, "2x downscaling");
  if (up_ms < 0 || down_ms < 0) {
    return false;
  }

  const double in_bytes = static_cast<double>(side) * side * sizeof(float);
  const double up_bytes = in_bytes + static_cast<double>(up_w) * up_h * sizeof(float);
  const double up_texels = static_cast<double>(up_w) * up_h / (up_ms * 1e6);  // Gtexel/s
  const double down_texels = static_cast<double>(down_w) * down_h / (down_ms * 1e6);
  const double copy_gbs = example::copy_bandwidth_gbs(dev, stream, static_cast<std::size_t>(up_bytes / 2));
  const double up_gbs = up_bytes / (up_ms * 1e6);
  char detail[256];
  std::snprintf(detail, sizeof detail,
                "%d x %d -> %d x %d floats in %.3f ms, %.4g Gtexel/s; down to %d x %d in %.3f ms, %.4g Gtexel/s", w, h,
                up_w, up_h, up_ms, up_texels, down_w, down_h, down_ms, down_texels);
  example::report(
      {.example = "texture_resize",
       .metric = "GB/s",
       .value = up_gbs,
       .reference = copy_gbs,
       .reference_name = "D2D copy",
       .target = 0,  // none yet: the first run on a GPU measures what the texture units allow
       .detail = detail,
       .bytes = up_bytes,
       .seconds = up_ms * 1e-3,
       .json = "\"gtexels_up\": " + std::to_string(up_texels) + ", \"gtexels_down\": " + std::to_string(down_texels)});
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  return example::run("texture_resize", [&] { return run(example::size_arg(argc, argv, 1, 4096, "side")); });
}
