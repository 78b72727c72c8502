// Checkpoint and restore (<cudrv/process_checkpoint.hpp>, issue 34 part 3) without a GPU: the states'
// names and values, the pid checks (made before any driver call), and what a machine without a driver
// answers ([driverless]: ctest runs those with CUDRV_LIBCUDA naming no library).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cudrv/process_checkpoint.hpp>
#include <string>
#include <type_traits>

#include "support/test_support.hpp"

using cudrv::process_state;
using cudrv::test::catch_as;
using cudrv::test::contains;

TEST_CASE("process_state: the driver's values, with names", "[process_checkpoint]") {
#if CUDA_VERSION >= 12080  // CUprocessState
  CHECK(static_cast<int>(process_state::running) == CU_PROCESS_STATE_RUNNING);
  CHECK(static_cast<int>(process_state::locked) == CU_PROCESS_STATE_LOCKED);
  CHECK(static_cast<int>(process_state::checkpointed) == CU_PROCESS_STATE_CHECKPOINTED);
  CHECK(static_cast<int>(process_state::failed) == CU_PROCESS_STATE_FAILED);
#endif
  CHECK(std::string(cudrv::to_string(process_state::running)) == "running");
  CHECK(std::string(cudrv::to_string(process_state::checkpointed)) == "checkpointed");
  CHECK(std::string(cudrv::to_string(static_cast<process_state>(42))) == "unknown");
  const cudrv::process_state_error e(cudrv::error_source::cudrv, "cudrv::process_checkpoint::unlock", 77,
                                     process_state::checkpointed, process_state::locked);
  CHECK(e.result() == CUDA_ERROR_ILLEGAL_STATE);
  CHECK(contains(e.what(), "process 77 is checkpointed; cudrv::process_checkpoint::unlock needs it locked"));
  static_assert(std::is_base_of_v<cudrv::error, cudrv::process_state_error>);
  static_assert(std::is_copy_constructible_v<cudrv::process_checkpoint>);  // a pid, no resource
  static_assert(!std::is_copy_constructible_v<cudrv::process_checkpoint_lock>);
  static_assert(!std::is_move_constructible_v<cudrv::process_checkpoint_lock>);
}

TEST_CASE("driverless: process_checkpoint checks the pid first and reports no driver", "[driverless]") {
  CUDRV_REQUIRE_DRIVERLESS();
  CHECK(catch_as<cudrv::invalid_argument_error>([] { cudrv::process_checkpoint p(0); }).has_value());
  CHECK_FALSE(cudrv::process_checkpoint::supported());
  const cudrv::process_checkpoint parent(static_cast<int>(getppid()));
  CHECK(catch_as<cudrv::driver_unavailable_error>([&] { (void)parent.state(); }).has_value());
}
