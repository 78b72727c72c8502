// Fixture of the test cudrv_dims_64bit_extent_names_checked (tests/cpu/check_dims_diagnostic.cmake): a
// 64-bit grid extent must not compile, and the compiler's error must point the reader to dims::checked.
// With CUDRV_ACCEPTED defined, the same launch configuration written as the error says compiles (the
// control: the refusal comes from the 64-bit extent, not from a mistake in this file).
#include <cudrv/launch_config.hpp>

#include <cstddef>

cudrv::launch_config configure(std::size_t n) {
#ifdef CUDRV_ACCEPTED
  return {.grid = cudrv::dims::checked((n + 255) / 256), .block = 256};
#else
  return {.grid = (n + 255) / 256, .block = 256};
#endif
}
