// graph_exec and graph_exec_ref: running, uploading and updating executable graphs.
#include "cudrv/graph_exec.hpp"

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "code/kernel_support.hpp"
#include "code/launch_attributes.hpp"
#include "cudrv/device.hpp"
#include "cudrv/driver.hpp"
#include "cudrv/graph.hpp"
#include "cudrv/graph_exec.hpp"
#include "cudrv/launch.hpp"
#include "driver/disposal.hpp"
#include "driver/driver_api.hpp"
#include "execution/graph_support.hpp"
#include "execution/launch_support.hpp"
#include "memory/memory_support.hpp"
#include "streams/nvtx_support.hpp"
#include "streams/stream_support.hpp"

namespace cudrv {

graph_exec::graph_exec(CUgraphExec handle, detail::context_token ctx) noexcept
    : graph_exec_base(handle, ctx.handle), token_(ctx) {}

graph_exec::graph_exec(graph_exec&& other) noexcept
    : graph_exec_base(std::exchange(other.handle_, nullptr), std::exchange(other.ctx_, nullptr)),
      token_(std::exchange(other.token_, {})),
      kept_(std::exchange(other.kept_, {})) {
  source_ = std::exchange(other.source_, nullptr);
}

graph_exec& graph_exec::operator=(graph_exec&& other) noexcept {
  if (this != &other) {
    reset();
    handle_ = std::exchange(other.handle_, nullptr);
    ctx_ = std::exchange(other.ctx_, nullptr);
    source_ = std::exchange(other.source_, nullptr);
    token_ = std::exchange(other.token_, {});
    kept_ = std::exchange(other.kept_, {});
  }
  return *this;
}

void graph_exec::reset() noexcept {
  if (handle_ != nullptr) {
    CUgraphExec h = std::exchange(handle_, nullptr);
    ctx_ = nullptr;
    source_ = nullptr;
    if (!std::exchange(token_, {}).alive()) {
      detail::report_outlived_context("cudrv::graph_exec", "executable graph");
    } else {
      detail::destroy_noexcept("cuGraphExecDestroy", [h] { return detail::drv::cuGraphExecDestroy(h); });
    }
  }
  for (detail::library_state* kept : std::exchange(kept_, {})) {
    detail::release_library(kept);
  }
}

CUgraphExec graph_exec::release() noexcept {
  ctx_ = nullptr;
  source_ = nullptr;
  token_ = {};
  // The caller owns the executable now, and keeps the libraries it launches loaded.
  for (detail::library_state* kept : std::exchange(kept_, {})) {
    detail::release_library(kept);
  }
  return std::exchange(handle_, nullptr);
}

graph_exec::~graph_exec() { reset(); }

namespace {

const char* update_reason(CUgraphExecUpdateResult r) {
  switch (r) {
    case CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED:
      return "the graph's topology differs (nodes or edges added or removed)";
    case CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED: return "a node's type differs";
    case CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED: return "a kernel node launches another function";
    case CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED:
      return "a node's parameters changed in a way that cannot be updated (e.g. a copy's memory kind)";
    case CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED: return "a node changed in a way updates do not support";
    case CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE:
      return "a kernel node's function changed in an unsupported way (e.g. cooperative or not)";
    case CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED: return "a node's attributes changed in an unsupported way";
    default: return "the driver refused the update";
  }
}

// Runs fn in ctx (the executable's context), or in the current context for an adopted executable
// without one.
template <class Fn>
void in_context(CUcontext ctx, Fn&& fn) {
  if (ctx == nullptr) {
    fn();
  } else {
    detail::run_in_context(ctx, "cudrv::graph_exec", fn);
  }
}

void require_exec(CUgraphExec h, const char* api) {
  if (h == nullptr) [[unlikely]] {
    throw invalid_argument_error(api, "the executable graph is empty (a moved-from or released cudrv::graph_exec)");
  }
}
}  // namespace

void graph_exec_base::launch(stream_ref stream) const {
  CUDRV_NVTX_AUTOMATIC_RANGE("cudrv::graph_launch");
  require_exec(handle_, "cudrv::graph_exec::launch");
  detail::require_stream(stream.native_handle(), "cudrv::graph_exec::launch");
  detail::check(detail::drv::cuGraphLaunch(handle_, stream.native_handle()), "cuGraphLaunch");
}

void graph_exec_base::upload(stream_ref stream) const {
  require_exec(handle_, "cudrv::graph_exec::upload");
  detail::require_stream(stream.native_handle(), "cudrv::graph_exec::upload");
  detail::check(detail::drv::cuGraphUpload(handle_, stream.native_handle()), "cuGraphUpload");
}

void graph_exec::set_kernel_raw(graph_node_ref node, context_ref ctx, const launch_config& config, CUkernel kernel,
                                void** args, const detail::kernel_signature* sig) {
  require_exec(handle_, "cudrv::graph_exec::set_kernel_node");
  if (config.needs_extended_launch()) {
    throw invalid_argument_error(
        "cudrv::graph_exec::set_kernel_node",
        "a kernel-node update carries no launch attributes (cuGraphExecKernelNodeSetParams has "
        "none): the node keeps its own; pass a launch_config without them, and change "
        "attributes on the graph's node (kernel_node::set_launch_attributes), then "
        "graph_exec::update(graph)");
  }
  CUDA_KERNEL_NODE_PARAMS params = detail::kernel_node_params(config, kernel, ctx.native_handle(), args, sig);
  // The executable keeps the new kernel's library loaded (its graph's user objects cover only the
  // kernels it was made with).
  detail::library_state* library = sig != nullptr ? sig->library : nullptr;
  bool keep = library != nullptr;
  for (detail::library_state* kept : kept_) {
    keep = keep && kept != library;
  }
  if (keep) {
    kept_.reserve(kept_.size() + 1);
  }
  in_context(ctx_, [&] {
    detail::check(detail::drv::cuGraphExecKernelNodeSetParams(handle_, node.native_handle(), &params),
                  "cuGraphExecKernelNodeSetParams", [&] { return detail::describe_node(node.native_handle()); });
  });
  if (keep) {
    detail::retain_library(library);
    kept_.push_back(library);
  }
}

void graph_exec_base::set_copy_raw(graph_node_ref node, context_ref ctx, const detail::linear_copy& c) const {
  require_exec(handle_, "cudrv::graph_exec::set_copy_node");
  CUDA_MEMCPY3D p = detail::linear_memcpy3d(c);
  in_context(ctx_, [&] {
    detail::check(detail::drv::cuGraphExecMemcpyNodeSetParams(handle_, node.native_handle(), &p, ctx.native_handle()),
                  "cuGraphExecMemcpyNodeSetParams", [&] { return detail::describe_node(node.native_handle()); });
  });
}

void graph_exec_base::set_fill_raw(memset_node node, context_ref ctx, std::uintptr_t dst, std::size_t count,
                                   std::uint32_t pattern, std::size_t element_size) const {
  require_exec(handle_, "cudrv::graph_exec::set_fill_node");
  CUDA_MEMSET_NODE_PARAMS p =
      detail::memset_params("cudrv::graph_exec::set_fill_node", dst, count, pattern, element_size);
  in_context(ctx_, [&] {
    detail::check(detail::drv::cuGraphExecMemsetNodeSetParams(handle_, node.native_handle(), &p, ctx.native_handle()),
                  "cuGraphExecMemsetNodeSetParams", [&] { return detail::describe_node(node.native_handle()); });
  });
}

void graph_exec_base::update(graph_ref g) const {
  require_exec(handle_, "cudrv::graph_exec::update");
  if (g.native_handle() == nullptr) {
    throw invalid_argument_error("cudrv::graph_exec::update",
                                 "the graph is empty (a moved-from or released cudrv::graph)");
  }
  CUgraphExecUpdateResultInfo info{};
  CUresult status = CUDA_SUCCESS;
  in_context(ctx_, [&] { status = detail::drv::cuGraphExecUpdate(handle_, g.native_handle(), &info); });
  if (detail::is_context_lost(status)) [[unlikely]] {
    detail::throw_driver_error(status, "cuGraphExecUpdate", {});
  }
  if (status != CUDA_SUCCESS) {
    std::string what = std::string(update_reason(info.result)) + "; " + detail::describe_node(info.errorNode);
    if (info.errorFromNode != nullptr) {
      what += ", from " + detail::describe_node(info.errorFromNode);
    }
    throw graph_update_error(status, static_cast<int>(info.result), std::move(what));
  }
}

// --- issue 34 part 6: switching nodes, flags, device launch ------------------------------------------

namespace {

// The checks of set_enabled and enabled before the driver: an executable and a node, a kind the driver
// switches (kernel, memcpy, memset: cuda.h, cuGraphNodeSetEnabled), and, when the executable knows its
// graph, a node of that graph.
void check_switchable(CUgraphExec exec, CUgraph source, graph_node_ref node, const char* api) {
  require_exec(exec, api);
  if (node.native_handle() == nullptr) {
    throw invalid_argument_error(api, "the node is empty (a null CUgraphNode)");
  }
  int type = 0;
  detail::check(detail::node_type(node.native_handle(), type), "cuGraphNodeGetType");
  const graph_node_kind kind = detail::node_kind_of(type);
  if (!detail::switchable_node_kind(kind)) {
    throw invalid_argument_error(api, detail::describe_node(node.native_handle()) +
                                          ": the driver enables and disables only kernel, memcpy and memset nodes");
  }
  if (source == nullptr) {
    return;  // an adopted executable: its graph is not known, the driver checks
  }
  std::size_t count = 0;
  detail::check(detail::drv::cuGraphGetNodes(source, nullptr, &count), "cuGraphGetNodes");
  std::vector<CUgraphNode> nodes(count);
  if (count > 0) {
    detail::check(detail::drv::cuGraphGetNodes(source, nodes.data(), &count), "cuGraphGetNodes");
  }
  for (std::size_t i = 0; i < count; ++i) {
    if (nodes[i] == node.native_handle()) {
      return;
    }
  }
  throw invalid_argument_error(api, detail::describe_node(node.native_handle()) +
                                        " is not a node of the graph this executable was instantiated from (nodes "
                                        "of child graphs and conditional bodies are not its own nodes either)");
}

}  // namespace

void graph_exec_base::set_enabled(graph_node_ref node, bool enabled) const {
  check_switchable(handle_, source_, node, "cudrv::graph_exec::set_enabled");
  detail::check(detail::drv::cuGraphNodeSetEnabled(handle_, node.native_handle(), enabled ? 1U : 0U),
                "cuGraphNodeSetEnabled", [&] { return detail::describe_node(node.native_handle()); });
}

bool graph_exec_base::enabled(graph_node_ref node) const {
  check_switchable(handle_, source_, node, "cudrv::graph_exec::enabled");
  unsigned on = 0;
  detail::check(detail::drv::cuGraphNodeGetEnabled(handle_, node.native_handle(), &on), "cuGraphNodeGetEnabled",
                [&] { return detail::describe_node(node.native_handle()); });
  return on != 0;
}

graph_instantiate_flags graph_exec_base::flags() const {
  require_exec(handle_, "cudrv::graph_exec::flags");
  cuuint64_t flags = 0;
  detail::check(detail::drv::cuGraphExecGetFlags(handle_, &flags), "cuGraphExecGetFlags");
  return static_cast<graph_instantiate_flags>(static_cast<unsigned>(flags));
}

device_graph_exec graph_exec_base::device_handle() const {
  constexpr const char* api = "cudrv::graph_exec::device_handle";
  require_exec(handle_, api);
  if ((static_cast<unsigned>(flags()) & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) == 0) {
    throw invalid_argument_error(api, "the executable was not instantiated for device launch: instantiate the graph "
                                      "with graph_instantiate_flags::device_launch");
  }
  return device_graph_exec(handle_);
}

static_assert(sizeof(device_graph_exec) == sizeof(CUgraphExec) && alignof(device_graph_exec) == alignof(CUgraphExec));
static_assert(std::is_trivially_copyable_v<device_graph_exec> && std::is_standard_layout_v<device_graph_exec>);

}  // namespace cudrv
