// A library that links NVML at build time (the stand-in, named libnvidia-ml.so.1 by its soname): the
// no-libcuda check must refuse it (cudrv_no_libcuda_linked_refuses_nvml in tests/CMakeLists.txt).
extern "C" int nvmlInit_v2();

extern "C" int cudrv_test_links_nvml() { return nvmlInit_v2(); }
