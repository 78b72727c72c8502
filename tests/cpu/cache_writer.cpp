// Helper of the two-process compile_cache test (tests/cpu/test_compile_cache.cpp): waits for a start
// file to exist, so that the processes started together compile at the same moment, then compiles
// one program to a cubin for sm_90 through a compile_cache and prints the cache's statistics.
//
//   cudrv_test_cache_writer <cache-dir> <start-file> <program-name> <program-source> [toolkit]
//
// With "toolkit" the compilation searches the toolkit's headers (compile_options::toolkit_headers)
// and the output also names where find_toolkit_headers() found them (tests/cpu/test_rtc_cccl.cpp).
// Exit status: 0 when the compilation succeeded and its result was stored, 1 on a usage error or
// an exception, 2 when the start file never appeared, 3 when the result could not be stored.
#include <cudrv/compile_cache.hpp>
#include <cudrv/program.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <string_view>
#include <thread>

int main(int argc, char** argv) {
  const bool toolkit = argc == 6 && std::string_view(argv[5]) == "toolkit";
  if (argc != 5 && !toolkit) {
    std::fprintf(stderr, "usage: %s <cache-dir> <start-file> <program-name> <program-source> [toolkit]\n", argv[0]);
    return 1;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (::access(argv[2], F_OK) != 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "cache_writer: %s never appeared\n", argv[2]);
      return 2;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  try {
    cudrv::compile_cache cache(argv[1]);
    const cudrv::compile_result r = cache.compile(cudrv::program(argv[3], argv[4]), cudrv::code_kind::cubin,
                                                  {.arch = "sm_90", .toolkit_headers = toolkit});
    const auto s = cache.stats();
    if (toolkit) {
      std::printf("toolkit=%s:%s ", cudrv::find_toolkit_headers().found_by.c_str(),
                  cudrv::find_toolkit_headers().cccl.c_str());
    }
    std::printf("hits=%llu misses=%llu corrupt=%llu store_failures=%llu bytes=%zu\n",
                static_cast<unsigned long long>(s.hits), static_cast<unsigned long long>(s.misses),
                static_cast<unsigned long long>(s.corrupt_entries), static_cast<unsigned long long>(s.store_failures),
                r.code.size());
    return r.code.empty() ? 1 : s.store_failures != 0 ? 3 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cache_writer: %s\n", e.what());
    return 1;
  }
}
