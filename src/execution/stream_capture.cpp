// stream_capture: making a graph from the work a stream is given.
#include "cudrv/stream_capture.hpp"

#include <utility>

#include "code/kernel_support.hpp"
#include "cudrv/graph.hpp"
#include "driver/driver_api.hpp"
#include "execution/graph_support.hpp"
#include "streams/stream_support.hpp"

namespace cudrv {

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
  detail::check(detail::drv::cuStreamBeginCapture(stream.native_handle(), static_cast<CUstreamCaptureMode>(mode)),
                "cuStreamBeginCapture");
  active_ = true;
  detail::capture_began();
}

stream_capture::~stream_capture() {
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

}  // namespace cudrv
