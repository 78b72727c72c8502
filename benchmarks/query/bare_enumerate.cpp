// bare_enumerate: the baseline of cudrv-query's start-up time. It does the least a device listing
// needs, straight on the driver: load libcuda.so.1, cuInit, then name, memory and SM count of every
// device, printed one line each. (dlopen instead of linking -lcuda, so that the build machine, which
// has no driver, can build it; the dynamic loader does the same work either way.)
#include <cuda.h>
#include <dlfcn.h>

#include <cstdio>

int main() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "bare_enumerate: %s\n", dlerror());
    return 2;
  }
  auto init = reinterpret_cast<CUresult (*)(unsigned int)>(dlsym(lib, "cuInit"));
  auto count = reinterpret_cast<CUresult (*)(int*)>(dlsym(lib, "cuDeviceGetCount"));
  auto get = reinterpret_cast<CUresult (*)(CUdevice*, int)>(dlsym(lib, "cuDeviceGet"));
  auto name = reinterpret_cast<CUresult (*)(char*, int, CUdevice)>(dlsym(lib, "cuDeviceGetName"));
  auto total = reinterpret_cast<CUresult (*)(size_t*, CUdevice)>(dlsym(lib, "cuDeviceTotalMem_v2"));
  auto attribute =
      reinterpret_cast<CUresult (*)(int*, CUdevice_attribute, CUdevice)>(dlsym(lib, "cuDeviceGetAttribute"));
  if (!init || !count || !get || !name || !total || !attribute || init(0) != CUDA_SUCCESS) {
    std::fprintf(stderr, "bare_enumerate: the driver could not be initialised\n");
    return 2;
  }
  int n = 0;
  if (count(&n) != CUDA_SUCCESS) {
    return 4;
  }
  for (int i = 0; i < n; ++i) {
    CUdevice d = 0;
    char text[256] = {};
    size_t bytes = 0;
    int sms = 0;
    if (get(&d, i) != CUDA_SUCCESS || name(text, sizeof(text), d) != CUDA_SUCCESS || total(&bytes, d) != CUDA_SUCCESS ||
        attribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d) != CUDA_SUCCESS) {
      return 4;
    }
    std::printf("%d  %s  %zu MiB  %d SMs\n", i, text, bytes >> 20, sms);
  }
  return n > 0 ? 0 : 3;
}
