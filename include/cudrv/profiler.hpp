/// @file profiler.hpp
/// @brief Profiler control: @ref cudrv::profiler_range, a scoped `cuProfilerStart`/`cuProfilerStop`
/// range that limits what Nsight Systems or Nsight Compute capture.
///
/// Layer: driver (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include "cudrv/context.hpp"

namespace cudrv {

/// @brief Profiles a region of the program: `cuProfilerStart` in a context when it opens,
/// `cuProfilerStop` when it ends. Move-only; the destructor ends it and never throws.
///
/// A profiler started with a capture range tied to these calls (`nsys profile
/// --capture-range=cudaProfilerApi`, `ncu --profile-from-start off`) records only what runs while a range
/// is open. Without a profiler both calls succeed and do nothing.
///
/// Ranges nest by counting, per context and for the whole process: the first range opened in a
/// context starts the profiler there, the others only count, and the profiler stops when the last
/// of them ends, in whatever order and on whatever thread they end. A library can so open its own range
/// inside its caller's without cutting the caller's short. Calls to `cuProfilerStart`/`cuProfilerStop`
/// made outside cudrv are not counted. End a range before destroying its context.
///
/// @code
/// cudrv::context_ref ctx = dev.primary_context();
/// warm_up();                                  // not captured
/// {
///   cudrv::profiler_range profiled(ctx);      // cuProfilerStart
///   run_the_step_to_study();
/// }                                           // cuProfilerStop
/// @endcode
class profiler_range {
 public:
  /// @brief Opens a range in @p ctx: starts the profiler there (with @p ctx made current for the call)
  /// unless a range of this process is already open in it.
  /// @throws invalid_argument_error when @p ctx is empty
  /// @throws error when the driver refuses `cuProfilerStart` (the range is then not open)
  explicit profiler_range(context_ref ctx);
  /// @brief Takes over the range of @p other, which is left empty.
  profiler_range(profiler_range&& other) noexcept : ctx_(other.ctx_) { other.ctx_ = nullptr; }
  /// @brief Ends this range (as the destructor does), then takes over the range of @p other.
  profiler_range& operator=(profiler_range&& other) noexcept;
  /// @brief Ends the range; a failure of `cuProfilerStop` goes to the destruction handler.
  ~profiler_range();

  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief A range is ended once: not copyable.
  profiler_range(const profiler_range&) = delete;
  /// @brief A range is ended once: not copy-assignable.
  profiler_range& operator=(const profiler_range&) = delete;
  /// @}

  /// @brief Ends the range now (stopping the profiler when it is the last open range of its context);
  /// the range is empty afterwards, also when the driver refuses. Does nothing on an empty range.
  /// @throws error when the driver refuses `cuProfilerStop`
  void end();

  /// @brief Whether the range is open (not ended, not moved from).
  [[nodiscard]] explicit operator bool() const noexcept { return ctx_ != nullptr; }
  /// @brief The context of the range (a null handle when it is empty).
  [[nodiscard]] CUcontext context_handle() const noexcept { return ctx_; }

  /// @brief How many cudrv ranges are open in @p ctx, in this process (0: the profiler is stopped
  /// there, as far as cudrv started it). Never throws.
  [[nodiscard]] static int open_ranges(context_ref ctx) noexcept;

 private:
  void close() noexcept;
  CUcontext ctx_;
};

}  // namespace cudrv
