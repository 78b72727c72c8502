// stream_capture: making a graph from the work a stream is given.
#include "cudrv/stream_capture.hpp"

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "code/kernel_support.hpp"
#include "cudrv/graph.hpp"
#include "driver/driver_api.hpp"
#include "execution/graph_support.hpp"
#include "streams/stream_support.hpp"

namespace cudrv {

namespace {
// Begins a capture with begin() (a driver call), counted as running for the libraries a capture keeps
// (capture_began, which may throw, first); the count is taken back when the capture did not begin,
// whether the driver refused it or the entry point is missing (an exception).
template <class Begin>
CUresult begin_counted(Begin&& begin) {
  detail::capture_began();
  CUresult status = CUDA_ERROR_UNKNOWN;
  try {
    status = begin();
  } catch (...) {
    detail::capture_ended();
    throw;
  }
  if (status != CUDA_SUCCESS) {
    detail::capture_ended();
  }
  return status;
}
}  // namespace

capture_status capture_status_of(stream_ref stream) {
  detail::require_stream(stream.native_handle(), "cudrv::capture_status_of");
  CUstreamCaptureStatus status{};
  detail::check(detail::drv::cuStreamIsCapturing(stream.native_handle(), &status), "cuStreamIsCapturing");
  return static_cast<capture_status>(status);
}

capture_info capture_info_of(stream_ref stream) {
  detail::require_stream(stream.native_handle(), "cudrv::capture_info_of");
  CUstreamCaptureStatus status{};
  cuuint64_t id = 0;
  CUgraph g = nullptr;
  const CUgraphNode* deps = nullptr;
  std::size_t count = 0;
  detail::check(detail::drv::cuStreamGetCaptureInfo(stream.native_handle(), &status, &id, &g, &deps, nullptr, &count),
                "cuStreamGetCaptureInfo");
  capture_info info;
  info.status = static_cast<capture_status>(status);
  info.id = status == CU_STREAM_CAPTURE_STATUS_NONE ? 0 : id;
  info.graph = graph_ref::from_native_handle(g);
  for (std::size_t i = 0; i < count; ++i) {
    info.dependencies.push_back(graph_node_ref::from_native_handle(deps[i]));
  }
  return info;
}

stream_capture::stream_capture(stream_ref stream, capture_mode mode) : stream_(stream) {
  constexpr const char* api = "cudrv::stream_capture";
  if (stream.native_handle() == nullptr) {
    throw invalid_argument_error(api, "the stream is empty (a moved-from or released cudrv::stream)");
  }
  if (stream.native_handle() == CU_STREAM_LEGACY) {
    throw invalid_argument_error(api, "the legacy default stream cannot be captured: capture a cudrv::stream");
  }
  detail::check(begin_counted([&] {
                  return detail::drv::cuStreamBeginCapture(stream.native_handle(),
                                                           static_cast<CUstreamCaptureMode>(mode));
                }),
                "cuStreamBeginCapture");
  active_ = true;
}

stream_capture::~stream_capture() {
  if (active_ && into_.native_handle() != nullptr) {
    // A capture into the caller's graph: end it, never destroy that graph, and take out what it added.
    CUgraph g = nullptr;
    CUstream s = stream_.native_handle();
    detail::destroy_noexcept("cuStreamEndCapture", [&] {
      CUresult status = detail::drv::cuStreamEndCapture(s, &g);
      return status == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED ? CUDA_SUCCESS : status;
    });
    remove_appended();
    detail::capture_ended();
    return;
  }
  if (active_) {
    CUgraph g = nullptr;
    CUstream s = stream_.native_handle();
    detail::destroy_noexcept("cuStreamEndCapture", [&] {
      CUresult status = detail::drv::cuStreamEndCapture(s, &g);
      // An invalidated capture ends with this status: the capture is over, which is what we want.
      return status == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED ? CUDA_SUCCESS : status;
    });
    if (g != nullptr) {
      detail::destroy_noexcept("cuGraphDestroy", [g] { return detail::drv::cuGraphDestroy(g); });
    }
    detail::capture_ended();
  }
}

graph stream_capture::end() {
  if (!active_) {
    throw invalid_argument_error("cudrv::stream_capture::end", "the capture has already ended");
  }
  if (into_.native_handle() != nullptr) {
    throw invalid_argument_error("cudrv::stream_capture::end",
                                 "the capture appends to a graph it does not own: end it with end_appended()");
  }
  CUgraph g = nullptr;
  CUresult status = detail::drv::cuStreamEndCapture(stream_.native_handle(), &g);
  if (status != CUDA_SUCCESS && g != nullptr) {
    detail::drv::cuGraphDestroy(g);
  }
  // Still capturing after a failed end (e.g. ended from another thread): the scope keeps it.
  CUstreamCaptureStatus still{};
  active_ = status != CUDA_SUCCESS &&
            detail::drv::cuStreamIsCapturing(stream_.native_handle(), &still) == CUDA_SUCCESS &&
            still != CU_STREAM_CAPTURE_STATUS_NONE;
  // Once over, the capture stops parking libraries, after its graph has taken what it launches.
  struct ended_scope {
    bool over;
    ~ended_scope() {
      if (over) {
        detail::capture_ended();
      }
    }
  } ended{!active_};
  if (status == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) {
    throw error(status, "cuStreamEndCapture",
                "a call during the capture was not allowed (e.g. a synchronous call or a query on a capturing "
                "stream, or from another thread under capture_mode::global) and invalidated it; the capture "
                "has ended");
  }
  detail::check(status, "cuStreamEndCapture");
  graph captured = graph::from_native_handle(g);
  detail::keep_captured_libraries(g);  // on failure, captured destroys the graph
  return captured;
}

std::uint64_t stream_capture::id() const { return capture_info_of(stream_).id; }

// --- issue 34 part 6: capture into an existing graph -----------------------------------------------

namespace {

std::vector<CUgraphNode> graph_nodes(CUgraph g) {
  std::size_t count = 0;
  detail::check(detail::drv::cuGraphGetNodes(g, nullptr, &count), "cuGraphGetNodes");
  std::vector<CUgraphNode> nodes(count);
  if (count > 0) {
    detail::check(detail::drv::cuGraphGetNodes(g, nodes.data(), &count), "cuGraphGetNodes");
    nodes.resize(count);
  }
  return nodes;
}

// The nodes of g that are not in before (sorted), in g's order.
std::vector<CUgraphNode> added_nodes(CUgraph g, const std::vector<CUgraphNode>& before) {
  std::vector<CUgraphNode> added;
  for (CUgraphNode n : graph_nodes(g)) {
    if (!std::binary_search(before.begin(), before.end(), n, std::less<>())) {
      added.push_back(n);
    }
  }
  return added;
}

// The checks cuda.h's CUgraphEdgeData documents, before the driver: known values, a port other than
// completion and a programmatic edge only from a kernel node, a programmatic edge from a kernel's
// programmatic or launch-order port.
void check_edges(const std::vector<graph_node_ref>& after, const std::vector<edge_data>& edges, const char* api) {
  if (edges.size() != after.size()) {
    throw invalid_argument_error(api, std::to_string(edges.size()) + " edges for " + std::to_string(after.size()) +
                                          " dependencies: give one edge_data per dependency, or none");
  }
  for (std::size_t i = 0; i < edges.size(); ++i) {
    const auto type = static_cast<unsigned>(edges[i].type);
    const auto port = static_cast<unsigned>(edges[i].from_port);
    auto which = [&] {  // only for a refusal: describing the node asks the driver
      return "edge " + std::to_string(i) + " (from " + detail::describe_node(after[i].native_handle()) + ")";
    };
    if (type > CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC || port > CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER) {
      throw invalid_argument_error(api, which() + ": edge_type " + std::to_string(type) + " / edge_port " +
                                            std::to_string(port) + " is not a value cudrv knows");
    }
    const bool special = type != CU_GRAPH_DEPENDENCY_TYPE_DEFAULT || port != CU_GRAPH_KERNEL_NODE_PORT_DEFAULT;
    if (special && after[i].kind() != graph_node_kind::kernel) {
      throw invalid_argument_error(api, which() + ": only a kernel node has ports other than completion and "
                                                  "programmatic edges");
    }
    if (type == CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC && port == CU_GRAPH_KERNEL_NODE_PORT_DEFAULT) {
      throw invalid_argument_error(api, which() + ": a programmatic edge leaves from the kernel's programmatic or "
                                                  "launch_order port, not completion");
    }
  }
}

}  // namespace

stream_capture::stream_capture(stream_ref stream, graph_ref into, const std::vector<graph_node_ref>& after,
                               capture_mode mode)
    : stream_(stream), into_(into) {
  begin_to_graph(after, nullptr, mode);
}

stream_capture::stream_capture(stream_ref stream, graph_ref into, const std::vector<graph_node_ref>& after,
                               const std::vector<edge_data>& edges, capture_mode mode)
    : stream_(stream), into_(into) {
  begin_to_graph(after, &edges, mode);
}

void stream_capture::begin_to_graph(const std::vector<graph_node_ref>& after, const std::vector<edge_data>* edges,
                                    capture_mode mode) {
  constexpr const char* api = "cudrv::stream_capture";
  if (stream_.native_handle() == nullptr) {
    throw invalid_argument_error(api, "the stream is empty (a moved-from or released cudrv::stream)");
  }
  if (stream_.native_handle() == CU_STREAM_LEGACY) {
    throw invalid_argument_error(api, "the legacy default stream cannot be captured: capture a cudrv::stream");
  }
  if (into_.native_handle() == nullptr) {
    throw invalid_argument_error(api, "the graph to capture into is empty (a moved-from or released cudrv::graph)");
  }
  for (const graph_node_ref& n : after) {
    if (n.native_handle() == nullptr) {
      throw invalid_argument_error(api, "a dependency is empty (a null CUgraphNode)");
    }
  }
  std::vector<CUgraphEdgeData> data;
  if (edges != nullptr) {
    check_edges(after, *edges, api);
    for (const edge_data& e : *edges) {
      CUgraphEdgeData d{};  // to_port and the reserved bytes zero, as cuda.h requires
      d.type = static_cast<unsigned char>(e.type);
      d.from_port = static_cast<unsigned char>(e.from_port);
      data.push_back(d);
    }
  }
  before_ = graph_nodes(into_.native_handle());
  std::sort(before_.begin(), before_.end(), std::less<>());
  auto deps = detail::native_nodes(after);
  const CUresult begun = begin_counted([&] {
    return detail::drv::cuStreamBeginCaptureToGraph(stream_.native_handle(), into_.native_handle(), deps.data(),
                                                    data.empty() ? nullptr : data.data(), deps.size(),
                                                    static_cast<CUstreamCaptureMode>(mode));
  });
  detail::check(begun, "cuStreamBeginCaptureToGraph", [&] { return std::to_string(after.size()) + " dependencies"; });
  active_ = true;
}

void stream_capture::remove_appended() noexcept {
  // Failures (listing the nodes, or destroying one) go to the destruction handler.
  detail::destroy_noexcept("cuGraphDestroyNode", [this] {
    for (CUgraphNode n : added_nodes(into_.native_handle(), before_)) {
      if (const CUresult status = detail::drv::cuGraphDestroyNode(n); status != CUDA_SUCCESS) {
        return status;
      }
    }
    return CUDA_SUCCESS;
  });
}

namespace {
// The nodes the next captured work on s would depend on (the end of the captured work), read before
// the capture ends; empty when the driver does not say.
std::vector<graph_node_ref> capture_frontier(CUstream s) {
  CUstreamCaptureStatus status{};
  const CUgraphNode* deps = nullptr;
  const CUgraphEdgeData* edges = nullptr;
  std::size_t count = 0;
  detail::check(detail::drv::cuStreamGetCaptureInfo(s, &status, nullptr, nullptr, &deps, &edges, &count),
                "cuStreamGetCaptureInfo");
  std::vector<graph_node_ref> out;
  for (std::size_t i = 0; deps != nullptr && i < count; ++i) {
    out.push_back(graph_node_ref::from_native_handle(deps[i]));
  }
  return out;
}
}  // namespace

appended_nodes stream_capture::end_appended() {
  constexpr const char* api = "cudrv::stream_capture::end_appended";
  if (!active_) {
    throw invalid_argument_error(api, "the capture has already ended");
  }
  if (into_.native_handle() == nullptr) {
    throw invalid_argument_error(api, "the capture made its own graph: end it with end()");
  }
  appended_nodes out;
  out.last = capture_frontier(stream_.native_handle());
  CUgraph g = nullptr;
  const CUresult status = detail::drv::cuStreamEndCapture(stream_.native_handle(), &g);
  CUstreamCaptureStatus still{};
  active_ = status != CUDA_SUCCESS &&
            detail::drv::cuStreamIsCapturing(stream_.native_handle(), &still) == CUDA_SUCCESS &&
            still != CU_STREAM_CAPTURE_STATUS_NONE;
  if (active_) {
    detail::check(status, "cuStreamEndCapture");  // still capturing: the scope keeps it
  }
  struct ended_scope {
    ~ended_scope() { detail::capture_ended(); }
  } ended;
  if (status != CUDA_SUCCESS) {
    remove_appended();
    detail::check(status, "cuStreamEndCapture", [status] {
      return status == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
                 ? std::string("a call during the capture was not allowed and invalidated it; the capture has "
                               "ended and the nodes it added were removed")
                 : std::string();
    });
  }
  try {
    // The nodes stay only with their kernels' libraries kept loaded: on failure they go again.
    const std::vector<CUgraphNode> added = added_nodes(into_.native_handle(), before_);
    detail::keep_captured_libraries(into_.native_handle(), added);
    for (CUgraphNode n : added) {
      out.nodes.push_back(graph_node_ref::from_native_handle(n));
    }
  } catch (...) {
    remove_appended();
    throw;
  }
  before_.clear();
  return out;
}

}  // namespace cudrv
