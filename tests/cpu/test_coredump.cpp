// GPU coredump settings (<cudrv/coredump.hpp>, issue 34 part 4) without a GPU: the flags match cuda.h's,
// combine as bits, and a machine without a driver gets driver_unavailable_error, never a call into a
// driver that is not initialised ([driverless]: ctest runs those with CUDRV_LIBCUDA naming no library).
#include <catch2/catch.hpp>

#include <cudrv/coredump.hpp>
#include <type_traits>

#include "support/test_support.hpp"

using cudrv::coredump_flags;
using cudrv::test::catch_as;

TEST_CASE("coredump_flags: cuda.h's CUCoredumpGenerationFlags, combined as bits", "[coredump]") {
#if CUDA_VERSION >= 13000  // the flags as cudrv names them (CUDA 12.4 headers lack them)
  CHECK(static_cast<unsigned>(coredump_flags::none) == CU_COREDUMP_DEFAULT_FLAGS);
  CHECK(static_cast<unsigned>(coredump_flags::skip_nonrelocated_elf_images) ==
        CU_COREDUMP_SKIP_NONRELOCATED_ELF_IMAGES);
  CHECK(static_cast<unsigned>(coredump_flags::skip_global_memory) == CU_COREDUMP_SKIP_GLOBAL_MEMORY);
  CHECK(static_cast<unsigned>(coredump_flags::skip_shared_memory) == CU_COREDUMP_SKIP_SHARED_MEMORY);
  CHECK(static_cast<unsigned>(coredump_flags::skip_local_memory) == CU_COREDUMP_SKIP_LOCAL_MEMORY);
  CHECK(static_cast<unsigned>(coredump_flags::skip_abort) == CU_COREDUMP_SKIP_ABORT);
  CHECK(static_cast<unsigned>(coredump_flags::skip_constbank_memory) == CU_COREDUMP_SKIP_CONSTBANK_MEMORY);
  CHECK(static_cast<unsigned>(coredump_flags::lightweight) == CU_COREDUMP_LIGHTWEIGHT_FLAGS);
#endif
  constexpr coredump_flags both = coredump_flags::lightweight | coredump_flags::skip_abort;
  static_assert((both & coredump_flags::skip_abort) == coredump_flags::skip_abort);
  static_assert((coredump_flags::lightweight & coredump_flags::skip_abort) == coredump_flags::none);
  CHECK(cudrv::coredump_settings::max_name_length == 1023);
  static_assert(!std::is_copy_constructible_v<cudrv::scoped_coredump_settings>);
  static_assert(!std::is_move_constructible_v<cudrv::scoped_coredump_settings>);
}

TEST_CASE("driverless: coredump settings report no driver", "[driverless]") {
  CUDRV_REQUIRE_DRIVERLESS();
  CHECK(catch_as<cudrv::driver_unavailable_error>([] { (void)cudrv::coredump::get_global(); }).has_value());
  CHECK(catch_as<cudrv::driver_unavailable_error>([] {
          cudrv::scoped_coredump_settings s({.enable_on_exception = true});
        }).has_value());
}
