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

/// @brief How a dependency of captured work is satisfied (`CUgraphDependencyType`).
enum class edge_type : unsigned char {
  full = CU_GRAPH_DEPENDENCY_TYPE_DEFAULT,  ///< An ordinary dependency.
  /// The dependent kernel may start early and wait with `cudaGridDependencySynchronize()`; only between
  /// kernel nodes, from their @ref edge_port::programmatic or @ref edge_port::launch_order port.
  programmatic = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC,
};

/// @brief When a dependency on a kernel node is triggered (the kernel node's outgoing port).
enum class edge_port : unsigned char {
  completion = CU_GRAPH_KERNEL_NODE_PORT_DEFAULT,         ///< When the node completes (any node kind).
  programmatic = CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC,  ///< When every block triggered or ended (kernels).
  launch_order = CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER,  ///< When every block has begun (kernels).
};

/// @brief The data of one dependency edge (`CUgraphEdgeData`); the default is an ordinary edge.
struct edge_data {
  edge_type type = edge_type::full;             ///< How the dependency is satisfied.
  edge_port from_port = edge_port::completion;  ///< The port of the node depended on.
};

/// @brief What a capture into an existing graph added to it (see @ref stream_capture::end_appended).
struct appended_nodes {
  std::vector<graph_node_ref> nodes;  ///< Every node the capture added, in the graph's order.
  std::vector<graph_node_ref> last;   ///< The nodes the captured work ended on: what later work depends on.
};

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
  /// @brief Begins capturing @p stream into the existing graph @p into, after the nodes @p after
  /// (`cuStreamBeginCaptureToGraph`): the first captured work depends on them (none: a root). End it
  /// with @ref end_appended; the nodes stay in @p into, which the capture does not own (a graph, or
  /// the body of a conditional node, that outlives the capture). When the scope ends without
  /// @ref end_appended, the capture is ended and the nodes it added are removed again.
  /// @code
  /// cudrv::graph g;
  /// cudrv::graph_builder b(g, dev);
  /// auto first = cudrv::fill(d_x, 1.0f, b);
  /// cudrv::stream_capture capture(stream, g, {first});      // appends after `first`
  /// cudrv::launch(stream, config, kernel, d_x.get(), n);
  /// cudrv::appended_nodes added = capture.end_appended();    // the kernel node, in g
  /// @endcode
  /// @throws invalid_argument_error for an empty or legacy stream, an empty graph, a null dependency
  /// @throws error when the driver refuses (the stream is already capturing, a node of another graph)
  stream_capture(stream_ref stream, graph_ref into, const std::vector<graph_node_ref>& after,
                 capture_mode mode = capture_mode::global);
  /// @brief As above, with the data of each dependency edge (@p edges[i] for @p after[i]).
  /// @throws invalid_argument_error, before the driver, for a number of edges other than of
  ///   dependencies, an edge_type or edge_port that is none of the enumerators, a port other than
  ///   completion, or a programmatic edge, on a node that is not a kernel node, and a programmatic edge
  ///   from the completion port
  stream_capture(stream_ref stream, graph_ref into, const std::vector<graph_node_ref>& after,
                 const std::vector<edge_data>& edges, capture_mode mode = capture_mode::global);
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  stream_capture(const stream_capture&) = delete;
  stream_capture& operator=(const stream_capture&) = delete;
  /// @brief Refused: the capture keeps the graph's handle, and a temporary graph would be gone.
  template <class... Rest>
  stream_capture(stream_ref stream, graph&& into, Rest&&... rest) = delete;
  /// @}
  /// @brief Ends the capture if it is still running and discards its graph; never throws.
  ~stream_capture();

  /// @brief Ends the capture and returns the graph (`cuStreamEndCapture`).
  /// @throws error with `CUDA_ERROR_STREAM_CAPTURE_INVALIDATED` when a call during the capture
  ///   invalidated it (the message says so; the capture is over either way)
  /// @throws invalid_argument_error for a capture into an existing graph (use @ref end_appended)
  [[nodiscard]] graph end();
  /// @brief Ends a capture into an existing graph (`cuStreamEndCapture`) and says what it added;
  /// the nodes stay in that graph.
  /// @throws error with `CUDA_ERROR_STREAM_CAPTURE_INVALIDATED` as @ref end (the nodes the capture
  ///   added are then removed again)
  /// @throws invalid_argument_error for a capture that made its own graph (use @ref end)
  [[nodiscard]] appended_nodes end_appended();
  /// @brief The graph a capture into an existing graph appends to; null for one that makes its own.
  [[nodiscard]] graph_ref target() const noexcept { return into_; }
  /// @brief Whether the capture is still running.
  [[nodiscard]] bool active() const noexcept { return active_; }
  /// @brief The captured stream.
  [[nodiscard]] stream_ref stream() const noexcept { return stream_; }
  /// @brief The capture's unique id (`cuStreamGetCaptureInfo`).
  [[nodiscard]] std::uint64_t id() const;

 private:
  void begin_to_graph(const std::vector<graph_node_ref>& after, const std::vector<edge_data>* edges, capture_mode mode);
  void remove_appended() noexcept;

  stream_ref stream_;
  bool active_ = false;
  graph_ref into_ = graph_ref::from_native_handle(nullptr);  // the graph appended to; null: own graph
  std::vector<CUgraphNode> before_;                          // into_'s nodes at the start, sorted
};

}  // namespace cudrv
