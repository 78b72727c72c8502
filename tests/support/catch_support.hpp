// Catch2 assertions shared by the test suites (needs <catch2/catch.hpp>, unlike test_support.hpp).
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <string>

#include "test_support.hpp"

namespace cudrv::test {

/// Requires f() to throw an invalid_argument_error that cudrv raised itself (a cudrv:: function
/// name, CUDA_ERROR_INVALID_VALUE, a description) and returns it for further checks.
template <class F>
cudrv::invalid_argument_error require_invalid_argument(const char* what, F&& f) {
  INFO(what);
  auto e = catch_as<cudrv::invalid_argument_error>(f);
  REQUIRE(e.has_value());
  INFO("what(): " << e->what());
  CHECK(e->result() == CUDA_ERROR_INVALID_VALUE);
  CHECK(e->source() == cudrv::error_source::cudrv);
  CHECK(e->api().rfind("cudrv::", 0) == 0);  // names the cudrv function
  CHECK_FALSE(e->description().empty());
  return *e;
}

/// Whether bytes start like a CUDA cubin: an ELF header whose e_machine is EM_CUDA (190).
inline bool is_cuda_elf(const std::string& bytes) {
  if (bytes.size() < 20 || bytes.compare(0, 4,
                                         "\x7f"
                                         "ELF") != 0) {
    return false;
  }
  std::uint16_t machine = 0;
  std::memcpy(&machine, bytes.data() + 18, sizeof machine);  // e_machine
  return machine == 190;
}

}  // namespace cudrv::test
