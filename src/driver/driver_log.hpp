// Internal: the driver's log in errors (issue 34 part 2; docs/reliability.md, "The driver's log in errors").
//
// Where the driver has cuLogsRegisterCallback (CUDA 12.9+), cudrv registers one callback while it loads the
// driver (start_driver_log, from driver.cpp), before any call can fail. The driver calls it on the thread of
// the call that logs; it copies the line into that thread's ring (8 lines of at most 511 bytes, fixed storage
// in a trivially destructible thread_local: no allocation, no lock, harmless at exit). An error of a failed
// driver call takes the lines of its thread's ring (take_driver_log) from its constructor: check()'s
// success path is untouched.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cudrv::detail {

// Called once while the driver loads (inside driver.cpp's state(), so it must not call drv:: entry points
// that are not resolved yet): register_fn and unregister_fn are cuLogsRegisterCallback and
// cuLogsUnregisterCallback from cuGetProcAddress, or null where the driver lacks them. Reads
// CUDRV_DRIVER_LOG, stores the entry points and registers the callback unless the log is switched off.
void start_driver_log(void* register_fn, void* unregister_fn) noexcept;

// The lines logged on the calling thread that no error took yet, not older than one second, the newest
// 8, oldest first; marks them taken. Empty (and nothing allocated) when there are none or the log is off.
std::vector<std::string> take_driver_log() noexcept;

// A mark of the calling thread's log: the number of lines logged on it so far (one thread-local load).
std::uint64_t driver_log_mark() noexcept;

// Forgets the lines logged on the calling thread since mark, so that no error takes them: for a call cudrv
// makes knowing that it fails (the walk over a kernel's parameters ends with a query past the last one,
// which the driver refuses and may log).
void forget_driver_log_since(std::uint64_t mark) noexcept;

}  // namespace cudrv::detail
