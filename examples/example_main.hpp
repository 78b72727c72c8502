// Shared by the run-time compilation and loading examples: maps the outcome of an example's body to
// the documented exit statuses (0 success, 2 no CUDA driver, 3 no CUDA device, 4 CUDA or compiler
// error, 5 the GPU's result differs from the host's).
#pragma once

#include <cudrv/cudrv.hpp>

#include <cstdio>
#include <exception>

namespace example {

/// Runs body() (which returns true when the GPU's result matched the host's) and returns the exit status.
template <class Body>
int run(const char* name, Body&& body) {
  try {
    if (cudrv::device_count() == 0) {
      std::fprintf(stderr, "%s: the CUDA driver sees no device\n", name);
      return 3;
    }
    return body() ? 0 : 5;
  } catch (const cudrv::driver_unavailable_error& e) {
    std::fprintf(stderr, "%s: no usable CUDA driver: %s\n", name, e.what());
    return 2;
  } catch (const cudrv::error& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", name, e.what());
  }
  return 4;
}

}  // namespace example
