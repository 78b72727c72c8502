// cudrv next to NVIDIA CCCL in one translation unit: CCCL's headers, the alias its users write for
// CCCL's experimental library, and cudrv's umbrella header. A CUstream made by cudrv is handed to
// CCCL as a cuda::stream_ref. Exits 0 with or without a driver (1 when a call fails).
#include <cuda/stream_ref>

#include <cudrv/cudrv.hpp>

#include <cstdio>
#include <exception>

// CCCL's experimental library (its own `cudax`) is not shipped with the toolkit; its headers open
// cuda::experimental, which this stands in for.
namespace cuda::experimental {
inline constexpr int coexistence_probe = 42;
}  // namespace cuda::experimental

namespace cudax = cuda::experimental;  // as CCCL's documentation writes it; must not clash with cudrv

static_assert(cudax::coexistence_probe == 42);
static_assert(cudrv::header_version.number() == CUDRV_VERSION);

int main() {
  std::printf("cudrv %s next to CCCL %d.%d.%d\n", cudrv::version_string(), CCCL_MAJOR_VERSION, CCCL_MINOR_VERSION,
              CCCL_PATCH_VERSION);
  if (!cudrv::driver::available()) {
    std::printf("cudrv coexistence: driver available: no (%s)\n", cudrv::driver::unavailable_reason().c_str());
    return 0;
  }
  try {
    if (cudrv::device_count() == 0) {
      std::printf("cudrv coexistence: driver available: yes, no device\n");
      return 0;
    }
    cudrv::device dev(0);
    cudrv::stream s(dev);
    cuda::stream_ref ref(s.native_handle());
    if (reinterpret_cast<CUstream>(ref.get()) != s.native_handle()) {
      std::printf("cudrv coexistence: cuda::stream_ref does not hold cudrv's stream\n");
      return 1;
    }
    std::printf("cudrv coexistence: driver available: yes, cudrv stream %p as cuda::stream_ref\n",
                static_cast<void*>(s.native_handle()));
  } catch (const std::exception& e) {
    std::printf("cudrv coexistence: %s\n", e.what());
    return 1;
  }
  return 0;
}
