// cudax-query: prints the CUDA driver and the visible devices.
//
// Exit statuses are listed in query.hpp (exit_status) and in the --help footer. Every failure
// prints exactly one line on stderr, starting "cudax-query: ".
#include <exception>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>
#include <cudax/error.hpp>

#include "query.hpp"

#ifndef CUDAX_QUERY_VERSION
#define CUDAX_QUERY_VERSION "unknown"
#endif

namespace {

using namespace cudax_query;

constexpr const char* footer_text =
    "Exit status:\n"
    "  0  success\n"
    "  1  usage error (unknown option or unexpected argument)\n"
    "  2  no usable CUDA driver (libcuda.so.1 not found, or cuInit failed)\n"
    "  3  the CUDA driver sees no device\n"
    "  4  a CUDA error occurred while querying\n"
    "\n"
    "Environment:\n"
    "  CUDA_VISIBLE_DEVICES  selects and orders the visible devices; the ordinals printed are CUDA's\n"
    "  CUDAX_LIBCUDA         path of the driver library to load instead of libcuda.so.1";

int run(int argc, char** argv) {
  CLI::App app{"cudax-query: prints the CUDA driver version, the CUDA toolkit version it was built with, and\n"
               "one row per visible device: ordinal, name, compute capability, SM count, memory, UUID and\n"
               "PCI bus id. It creates no CUDA context.",
               "cudax-query"};
  app.set_version_flag("--version", std::string("cudax-query ") + CUDAX_QUERY_VERSION,
                       "Print the version of cudax-query and exit");
  app.footer(footer_text);
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return std::string("cudax-query: ") + e.what() + " (run with --help for usage)\n";
  });

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version arrive here too, with exit code 0.
    return app.exit(e) == 0 ? exit_ok : exit_usage;
  }

  system_info info = collect();
  if (!info.driver_available) {
    std::cerr << "cudax-query: no usable CUDA driver: " << info.unavailable_reason << '\n';
    return exit_no_driver;
  }
  if (info.devices.empty()) {
    std::cerr << "cudax-query: the CUDA driver (CUDA " << format_cuda_version(info.driver_version)
              << ") sees no device";
    if (info.visible_devices) {
      std::cerr << " (CUDA_VISIBLE_DEVICES=\"" << *info.visible_devices << "\")";
    }
    std::cerr << '\n';
    return exit_no_device;
  }
  print_text(std::cout, info);
  return exit_ok;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const cudax::driver_unavailable_error& e) {
    std::cerr << "cudax-query: no usable CUDA driver: " << e.what() << '\n';
    return exit_no_driver;
  } catch (const cudax::error& e) {
    std::cerr << "cudax-query: CUDA error: " << e.what() << '\n';
    return exit_cuda_error;
  } catch (const std::exception& e) {
    std::cerr << "cudax-query: error: " << e.what() << '\n';
    return exit_cuda_error;
  } catch (...) {
    std::cerr << "cudax-query: unknown error\n";
    return exit_cuda_error;
  }
}
