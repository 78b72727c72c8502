// The failure sweep's replacement of the global operator new and delete (every form: plain, array,
// aligned, nothrow, sized). All of them allocate with malloc or aligned_alloc and free with free, so that
// AddressSanitizer sees one allocator (no alloc-dealloc mismatch) and LeakSanitizer still reports what
// leaks: the executable's definitions win over the sanitizer runtime's, which would otherwise intercept
// new and delete itself.
//
// While armed on a thread (arm_host_allocations), each allocation of that thread is counted, and the
// k-th one fails: the throwing forms throw std::bad_alloc, the nothrow forms return null. Allocations
// made inside the stand-in driver (its own bookkeeping, which a real driver does not make through the
// program's operator new) are neither counted nor failed.
#include "failure_sweep/host_allocations.hpp"

#include <cstddef>
#include <cstdlib>
#include <new>

// In a sanitizer build, CUDRV_SWEEP_ALLOCATION_STACK=1 prints the stack of the allocation that fails.
extern "C" void __sanitizer_print_stack_trace() __attribute__((weak));

namespace cudrv::sweep {
namespace {

struct host_injection {
  bool armed = false;
  long long count = 0;    // allocations counted since arming
  long long fail_at = 0;  // the allocation that fails (0: none)
  bool fired = false;
};

thread_local host_injection injection;  // per thread: only the arming thread's allocations count

int (*inside_driver)() = nullptr;  // the fake's fake_cuda_in_entry_point, once known

// Whether this allocation is the one that must fail; counts it when armed.
bool must_fail() noexcept {
  host_injection& in = injection;
  if (!in.armed || (inside_driver != nullptr && inside_driver() != 0)) {
    return false;
  }
  if (++in.count != in.fail_at) {
    return false;
  }
  in.fired = true;
  if (__sanitizer_print_stack_trace != nullptr && std::getenv("CUDRV_SWEEP_ALLOCATION_STACK") != nullptr) {
    __sanitizer_print_stack_trace();
  }
  return true;
}

void* allocate(std::size_t size, std::size_t alignment) noexcept {
  if (size == 0) {
    size = 1;
  }
  if (alignment <= __STDCPP_DEFAULT_NEW_ALIGNMENT__) {
    return std::malloc(size);
  }
  // aligned_alloc wants a size that is a multiple of the alignment.
  return std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
}

void* allocate_or_throw(std::size_t size, std::size_t alignment) {
  if (must_fail()) {
    throw std::bad_alloc();
  }
  if (void* p = allocate(size, alignment)) {
    return p;
  }
  throw std::bad_alloc();
}

void* allocate_or_null(std::size_t size, std::size_t alignment) noexcept {
  return must_fail() ? nullptr : allocate(size, alignment);
}

}  // namespace

void set_driver_probe(int (*inside)()) noexcept { inside_driver = inside; }

void arm_host_allocations(long long k) noexcept { injection = host_injection{true, 0, k, false}; }

long long disarm_host_allocations() noexcept {
  injection.armed = false;
  return injection.count;
}

bool host_allocation_failed() noexcept { return injection.fired; }

}  // namespace cudrv::sweep

using cudrv::sweep::allocate_or_null;
using cudrv::sweep::allocate_or_throw;

void* operator new(std::size_t size) { return allocate_or_throw(size, 0); }
void* operator new[](std::size_t size) { return allocate_or_throw(size, 0); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept { return allocate_or_null(size, 0); }
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept { return allocate_or_null(size, 0); }
void* operator new(std::size_t size, std::align_val_t a) {
  return allocate_or_throw(size, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t size, std::align_val_t a) {
  return allocate_or_throw(size, static_cast<std::size_t>(a));
}
void* operator new(std::size_t size, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocate_or_null(size, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t size, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocate_or_null(size, static_cast<std::size_t>(a));
}

void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
