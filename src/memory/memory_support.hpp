// Internal helpers shared by the memory sources.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "cudrv/context.hpp"
#include "cudrv/copy.hpp"

namespace cudrv::detail {

// Throws the invalid_argument_error of checked_bytes (count * element_size overflows std::size_t).
[[noreturn]] void throw_size_overflow(const char* api, std::size_t count, std::size_t element_size);

// count * element_size; invalid_argument_error naming api when the product overflows std::size_t.
// Inline, and a multiplication with an overflow flag rather than a division: it is on every
// allocation's path (issue 37).
inline std::size_t checked_bytes(const char* api, std::size_t count, std::size_t element_size) {
  std::size_t bytes = 0;
  if (__builtin_mul_overflow(count, element_size, &bytes)) [[unlikely]] {
    throw_size_overflow(api, count, element_size);
  }
  return bytes;
}

// Throws invalid_argument_error naming api for a null context (a moved-from or released cudrv::context).
void require_context(CUcontext ctx, const char* api);

// The device of the current context (made current by the caller), or unresolved_device when the
// driver cannot say: the device is then found from the context when asked.
int current_device_or_unresolved() noexcept;

// "1.50 GiB (1610612736 bytes)"
std::string format_bytes(std::size_t bytes);

// "0x7f12345000"
std::string format_address(std::uintptr_t address);

// Where a failed allocation was to take its memory from, for the figures of out_of_memory_error.
struct allocation_site {
  std::size_t bytes = 0;        // requested
  CUcontext context = nullptr;  // named by the caller (made current quietly to read free memory), or null
  int device = -1;              // without a context: read free memory only if a context of it is current
  bool host = false;            // pinned host memory: the host's available physical memory
  CUmemoryPool pool = nullptr;  // a pool: its reserved and used bytes
};

// Throws the error of a failed allocation call (status != CUDA_SUCCESS): for CUDA_ERROR_OUT_OF_MEMORY an
// out_of_memory_error with the figures of the moment, read without making current a context nobody
// named; any other status as check() would. where describes the request.
[[noreturn]] void throw_allocation_failure(CUresult status, const char* api, const allocation_site& site,
                                           std::string where);

// check() for allocation calls: the site and the description are built only on failure.
template <class SiteFn>
inline void check_allocation(CUresult status, const char* api, SiteFn&& site_and_where) {
  if (status != CUDA_SUCCESS) [[unlikely]] {
    auto [site, where] = site_and_where();
    throw_allocation_failure(status, api, site, std::move(where));
  }
}

// Throws invalid_argument_error unless c copies at least one byte between two non-null views large
// enough for it.
void check_linear(const char* api, const linear_copy& c);

// Throws invalid_argument_error unless a fill of count elements of element_size bytes at dst is
// non-empty, non-null and aligned to the element size.
void check_fill(const char* api, std::uintptr_t dst, std::size_t count, std::size_t element_size);

// Throws invalid_argument_error unless a pitched copy of src's extent into dst is non-empty, has pitches
// of at least a row, fits the destination and has non-null addresses.
void check_pitched(const char* api, const pitched_layout& dst, const pitched_layout& src);

// "64 bytes x 4 rows x 1 slices (pitch 512)"
std::string describe_layout(const pitched_layout& l);

// "1.00 KiB (1024 bytes) from 0x... to 0x..."
std::string describe_copy(const linear_copy& c);

// Whether this process can open an IMEX channel (/dev/nvidia-caps-imex-channels/channel*), which
// fabric handles need. Never throws.
bool imex_channel_available() noexcept;

// What a quiet_context_scope does when it cannot make its context current.
enum class failed_switch {
  report,  // tell the destruction handler (in destructors: the destruction goes on in the current context)
  quiet,   // say nothing (error paths: the caller asks active() and leaves out what needs the context)
};

// Makes ctx current for the scope, never throwing; a no-op when ctx is null or already current. For
// destructors and error paths, where a failed switch must not throw. A switch that fails (cuCtxGetCurrent
// or cuCtxSetCurrent refused) leaves active() false and, with failed_switch::report, goes to the
// destruction handler, so that a destroy call that then runs in the wrong context is never a silent one;
// a failure to switch back at the end goes there too.
class quiet_context_scope {
 public:
  // Inline for the common case of no context to make current (a stream-ordered free: issue 37).
  explicit quiet_context_scope(CUcontext ctx, failed_switch on_failure = failed_switch::report) noexcept {
    if (ctx != nullptr) {
      enter(ctx, on_failure);
    }
  }
  quiet_context_scope(const quiet_context_scope&) = delete;
  quiet_context_scope& operator=(const quiet_context_scope&) = delete;
  ~quiet_context_scope() {
    if (switched_) {
      leave();
    }
  }
  // Whether the context asked for is current (true for none asked for).
  [[nodiscard]] bool active() const noexcept { return active_; }

 private:
  void enter(CUcontext ctx, failed_switch on_failure) noexcept;
  void leave() noexcept;

  CUcontext previous_ = nullptr;
  bool switched_ = false;
  bool active_ = true;
};

// Makes the context of a stream current for the scope (nothing to do for the default streams,
// which stand for the current context). The driver validates the pointers of cuMemcpy*Async
// against the current context, not against the stream's.
class stream_context_scope {
 public:
  explicit stream_context_scope(CUstream stream);

 private:
  std::optional<context_guard> guard_;
};

// For synchronous copies and fills, which run in the current context and whose addresses the
// driver validates against it: makes the context that owns the device or managed memory among the
// addresses current for the scope (memory names its device, hence that device's primary context when
// the memory names no context); with host memory only, keeps the current context, else uses the
// context pinned memory was allocated in, else none: host_only() is then true and the caller copies
// on the host (the driver refuses a copy with no context current). complete() synchronises the legacy
// default stream, so that the operation has completed when the synchronous call returns (cuMemcpy
// may return before a device-to-device or a pageable host-to-device copy has landed).
class synchronous_scope {
 public:
  synchronous_scope(std::uintptr_t a, std::uintptr_t b);
  // Whether no context is involved (pageable host memory on both sides, none current).
  [[nodiscard]] bool host_only() const noexcept { return host_only_; }
  // Waits for the operation issued in the scope.
  void complete();

 private:
  std::optional<context_guard> guard_;
  bool host_only_ = false;
};

// issue 34 part 7: managed ranges (managed_range.cpp). Checks bytes at address before a managed-memory call:
// non-null, non-empty, no wrap-around; where cuPointerGetAttributes knows the memory, managed memory
// within one allocation. what names the range in the message ("range 2 of 5"); api the caller. Returns
// the managed allocation's context, or null for memory the driver does not know (system memory).
CUcontext check_managed_range(std::uintptr_t address, std::size_t bytes, const char* api, const std::string& what);

}  // namespace cudrv::detail
