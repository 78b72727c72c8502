// A minimal cudax user: reports whether the driver is available and, if so, the devices.
// Exits 0 either way (1 only when the driver is available but a query fails).
#include <cudax/cudax.hpp>

#include <cstdio>
#include <exception>

int main() {
  if (!cudax::driver::available()) {
    std::printf("cudax consumer: driver available: no (%s)\n", cudax::driver::unavailable_reason().c_str());
    return 0;
  }
  try {
    int count = cudax::device_count();
    std::printf("cudax consumer: driver available: yes (CUDA %d), %d device(s)\n", cudax::driver::version(), count);
    for (cudax::device dev : cudax::devices()) {
      std::printf("cudax consumer: device %d: %s (%s)\n", dev.ordinal(), dev.name().c_str(), dev.arch().c_str());
    }
  } catch (const cudax::error& e) {
    std::printf("cudax consumer: %s (%s)\n", e.what(), cudax::error_name(e.result()).c_str());
    return 1;
  } catch (const std::exception& e) {
    std::printf("cudax consumer: %s\n", e.what());
    return 1;
  }
  return 0;
}
