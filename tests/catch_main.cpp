// The Catch2 main shared by cudrv_cpu_tests and cudrv_gpu_tests (compiled once).
//
// One extra option, used by the CTest scripts (not by Catch):
//   --cudrv-gpu-probe   prints the visible devices, one "device <ordinal>: <name>" line each, and
//                       exits 0 when the GPU tier can run, 77 (with the reason) when it cannot.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstring>
#include <exception>
#include <iostream>

#include "support/test_support.hpp"

namespace {

int gpu_probe() {
  try {
    if (!cudrv::test::gpu_available()) {
      std::cout << "no CUDA device: " << cudrv::test::gpu_unavailable_reason() << '\n';
      return 77;
    }
    for (cudrv::device dev : cudrv::devices()) {
      std::cout << "device " << dev.ordinal() << ": " << dev.name() << '\n';
    }
    return 0;
  } catch (const std::exception& e) {
    std::cout << "no CUDA device: " << e.what() << '\n';
    return 77;
  }
}

}  // namespace

int main(int argc, char* argv[]) {
  if (argc == 2 && std::strcmp(argv[1], "--cudrv-gpu-probe") == 0) {
    return gpu_probe();
  }
  return Catch::Session().run(argc, argv);
}
