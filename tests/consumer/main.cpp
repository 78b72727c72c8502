// A minimal cudrv user: reports whether the driver is available and, if so, the devices.
// Exits 0 either way (1 only when the driver is available but a query fails).
#include <cudrv/cudrv.hpp>

#include <cstdio>
#include <exception>

int main() {
  if (!cudrv::driver::available()) {
    std::printf("cudrv consumer: driver available: no (%s)\n", cudrv::driver::unavailable_reason().c_str());
    return 0;
  }
  try {
    int count = cudrv::device_count();
    std::printf("cudrv consumer: driver available: yes (CUDA %d), %d device(s)\n", cudrv::driver::version(), count);
    for (cudrv::device dev : cudrv::devices()) {
      std::printf("cudrv consumer: device %d: %s (%s)\n", dev.ordinal(), dev.name().c_str(), dev.arch().c_str());
    }
  } catch (const cudrv::error& e) {
    std::printf("cudrv consumer: %s (%s)\n", e.what(), cudrv::error_name(e.result()).c_str());
    return 1;
  } catch (const std::exception& e) {
    std::printf("cudrv consumer: %s\n", e.what());
    return 1;
  }
  return 0;
}
