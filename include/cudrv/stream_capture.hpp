/// @file stream_capture.hpp
/// @brief Stream capture into a graph: @ref cudrv::stream_capture, a scope that always ends the
/// capture, and the capture status of a stream.
///
/// Layer: execution (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <cstdint>
#include <vector>

#include "cudrv/graph.hpp"
#include "cudrv/stream.hpp"

namespace cudrv {

/// @brief How strictly a capture guards against unsafe calls from other threads
/// (`CUstreamCaptureMode`).
enum class capture_mode {
  global = CU_STREAM_CAPTURE_MODE_GLOBAL,  ///< Unsafe calls from any thread invalidate the capture (the default).
  thread_local_only = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,  ///< Only unsafe calls from this thread do.
  relaxed = CU_STREAM_CAPTURE_MODE_RELAXED,                 ///< No call is treated as unsafe.
};

/// @brief Whether a stream is capturing (`CUstreamCaptureStatus`).
enum class capture_status {
  none = CU_STREAM_CAPTURE_STATUS_NONE,                ///< Not capturing.
  active = CU_STREAM_CAPTURE_STATUS_ACTIVE,            ///< Capturing.
  invalidated = CU_STREAM_CAPTURE_STATUS_INVALIDATED,  ///< Capturing, but an error invalidated the capture.
};

/// @brief The capture status of @p stream (`cuStreamIsCapturing`).
[[nodiscard]] capture_status capture_status_of(stream_ref stream);

/// @brief What `cuStreamGetCaptureInfo` says about a stream.
struct capture_info {
  capture_status status = capture_status::none;              ///< Whether the stream is capturing.
  std::uint64_t id = 0;                                      ///< The capture's unique id (0 when not capturing).
  graph_ref graph = graph_ref::from_native_handle(nullptr);  ///< The graph being captured into (owned by the capture).
  std::vector<graph_node_ref> dependencies;                  ///< The nodes the next captured work will depend on.
};

/// @brief The capture information of @p stream.
/// @code
/// cudrv::stream_capture capture(stream);
/// cudrv::launch(stream, config, k, args...);
/// auto info = cudrv::capture_info_of(stream);   // status active, the kernel node as dependency
/// @endcode
[[nodiscard]] capture_info capture_info_of(stream_ref stream);

/// @brief Captures the work enqueued on a stream into a graph, from construction to @ref end.
///
/// The destructor ends a capture that is still running (an exception left the scope) and discards
/// its graph, so a stream is never left capturing; under capture_mode::global and
/// thread_local_only the capture must end on the thread that began it. Work enqueued through cudrv
/// on the stream (launches, copies, fills, event records, host callables) becomes nodes of the
/// graph; a captured host callable is owned by the graph and runs at every launch (its exceptions go
/// to the destruction handler). The graph keeps the libraries of the kernels launched into it loaded
/// (CUDA 12.5+), also those of kernels dropped before `end()`: while a capture runs, a library whose
/// last reference goes is parked, and unloaded only when no graph took it once the last capture ended.
/// @code
/// cudrv::graph g = [&] {
///   cudrv::stream_capture capture(stream);
///   cudrv::copy(d_x, h_x, stream);
///   cudrv::launch(stream, config, kernel, d_x.get(), n);
///   return capture.end();
/// }();
/// cudrv::graph_exec exec = g.instantiate();
/// @endcode
class stream_capture {
 public:
  /// @brief Begins capturing @p stream (`cuStreamBeginCapture`).
  /// @throws invalid_argument_error for the legacy default stream, which cannot be captured, or an
  ///   empty stream; error when the stream is already capturing
  explicit stream_capture(stream_ref stream, capture_mode mode = capture_mode::global);
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  stream_capture(const stream_capture&) = delete;
  stream_capture& operator=(const stream_capture&) = delete;
  /// @}
  /// @brief Ends the capture if it is still running and discards its graph; never throws.
  ~stream_capture();

  /// @brief Ends the capture and returns the graph (`cuStreamEndCapture`).
  /// @throws error with `CUDA_ERROR_STREAM_CAPTURE_INVALIDATED` when a call during the capture
  ///   invalidated it (the message says so; the capture is over either way)
  [[nodiscard]] graph end();
  /// @brief Whether the capture is still running.
  [[nodiscard]] bool active() const noexcept { return active_; }
  /// @brief The captured stream.
  [[nodiscard]] stream_ref stream() const noexcept { return stream_; }
  /// @brief The capture's unique id (`cuStreamGetCaptureInfo`).
  [[nodiscard]] std::uint64_t id() const;

 private:
  stream_ref stream_;
  bool active_ = false;
};

}  // namespace cudrv
