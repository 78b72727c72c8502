// The failure sweep's host-allocation injection (host_allocations.cpp replaces the global operator new
// and delete of the cudrv_failure_sweep executable).
#pragma once

namespace cudrv::sweep {

/// Arms the calling thread: its allocations through operator new are counted from now on, and the
/// @p k-th (from 1) fails (std::bad_alloc, or null from a nothrow form); @p k = 0 only counts. Other
/// threads are not affected.
void arm_host_allocations(long long k) noexcept;

/// Disarms the calling thread; returns the number of allocations counted since it was armed.
long long disarm_host_allocations() noexcept;

/// Whether the armed allocation failed since the calling thread was last armed.
bool host_allocation_failed() noexcept;

/// The stand-in driver's probe, which says whether the calling thread is inside the driver: what the
/// driver allocates is neither counted nor failed.
void set_driver_probe(int (*inside)()) noexcept;

}  // namespace cudrv::sweep
