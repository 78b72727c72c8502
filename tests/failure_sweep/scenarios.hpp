// The failure sweep's scenarios (scenarios.cpp).
#pragma once

#include <span>

namespace cudrv::sweep {

/// One realistic use of a part of cudrv's public API, written as user code.
struct scenario {
  const char* name;  ///< What the sweep prints and takes in --scenario.
  void (*run)();     ///< Makes its objects, uses them, destroys them; throws what cudrv throws.
  bool cold;         ///< Runs without the warm-up (the first cudrv calls of the process are its own).
  bool whole;        ///< A sampled sweep runs every point of it all the same (it is small, and guards fixes).
};

/// Every scenario, in the order the sweep runs them.
[[nodiscard]] std::span<const scenario> scenarios() noexcept;

/// What a process does before a scenario that is not cold: loads the driver and retains device 1's
/// primary context, which cudrv then keeps for the process.
void warm_up();

}  // namespace cudrv::sweep
