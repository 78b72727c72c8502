// graph and graph_builder: explicit graph building and instantiation (graph_exec.cpp runs and
// updates the executables, stream_capture.cpp makes graphs from streams).
#include "cudrv/graph.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "code/kernel_support.hpp"
#include "code/launch_attributes.hpp"
#include "cudrv/device.hpp"
#include "cudrv/driver.hpp"
#include "cudrv/graph_exec.hpp"
#include "cudrv/launch.hpp"
#include "cudrv/stream_capture.hpp"
#include "driver/disposal.hpp"
#include "driver/driver_api.hpp"
#include "execution/graph_support.hpp"
#include "execution/launch_support.hpp"
#include "memory/memory_support.hpp"
#include "streams/nvtx_support.hpp"
#include "streams/stream_support.hpp"

namespace cudrv {
namespace detail {

// Building a graph node by node must cost no more than the raw calls (issue 17 measured 1.11x per
// node when each node copied its dependencies into a fresh std::vector). A graph_node_ref is exactly a
// CUgraphNode, so the vector of views already is the array the driver reads (an opaque-handle array
// read only on the other side of the driver's ABI).
static_assert(sizeof(graph_node_ref) == sizeof(CUgraphNode) && alignof(graph_node_ref) == alignof(CUgraphNode));
static_assert(std::is_standard_layout_v<graph_node_ref> && std::is_trivially_copyable_v<graph_node_ref>);

native_node_list native_nodes(const std::vector<graph_node_ref>& nodes) noexcept {
  if (nodes.empty()) {
    return {nullptr, 0};
  }
  return {reinterpret_cast<const CUgraphNode*>(nodes.data()), nodes.size()};
}

namespace {

std::vector<graph_node_ref> wrap_nodes(const std::vector<CUgraphNode>& nodes) {
  std::vector<graph_node_ref> out;
  out.reserve(nodes.size());
  for (CUgraphNode n : nodes) {
    out.push_back(graph_node_ref::from_native_handle(n));
  }
  return out;
}

// The two-call pattern of the graph queries: ask for the count, then fill.
template <class Query>
std::vector<CUgraphNode> query_nodes(const char* api, Query&& query) {
  std::size_t count = 0;
  check(query(nullptr, &count), api);
  std::vector<CUgraphNode> nodes(count);
  if (count > 0) {
    check(query(nodes.data(), &count), api);
    nodes.resize(count);
  }
  return nodes;
}

}  // namespace

// A node and its kind, for error messages; a type cudrv has no name for is given as the driver's number.
std::string describe_node(CUgraphNode node) {
  if (node == nullptr) {
    return "no node named";
  }
  std::ostringstream out;
  out << "node " << static_cast<const void*>(node);
  try {
    int type = 0;
    if (node_type(node, type) == CUDA_SUCCESS) {
      const graph_node_kind kind = node_kind_of(type);
      out << " (" << graph_node_kind_name(kind);
      if (kind == graph_node_kind::other) {
        out << ", CUgraphNodeType " << type;
      }
      out << ")";
    }
  } catch (const error&) {
  }
  return out.str();
}

CUresult node_type(CUgraphNode node, int& type) {
  static_assert(sizeof(CUgraphNodeType) == sizeof(int));
  CUgraphNodeType written{};
  const CUresult status = drv::cuGraphNodeGetType(node, &written);
  std::memcpy(&type, &written, sizeof type);  // the bytes the driver wrote, never loaded as the enum
  return status;
}

graph_node_kind node_kind_of(int type) noexcept {
  switch (type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: return graph_node_kind::kernel;
    case CU_GRAPH_NODE_TYPE_MEMCPY: return graph_node_kind::memcpy;
    case CU_GRAPH_NODE_TYPE_MEMSET: return graph_node_kind::memset;
    case CU_GRAPH_NODE_TYPE_HOST: return graph_node_kind::host;
    case CU_GRAPH_NODE_TYPE_GRAPH: return graph_node_kind::child_graph;
    case CU_GRAPH_NODE_TYPE_EMPTY: return graph_node_kind::empty;
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD: return graph_node_kind::event_record;
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT: return graph_node_kind::event_wait;
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: return graph_node_kind::mem_alloc;
    case CU_GRAPH_NODE_TYPE_MEM_FREE: return graph_node_kind::mem_free;
    case CU_GRAPH_NODE_TYPE_CONDITIONAL: return graph_node_kind::conditional;
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP: return graph_node_kind::stream_memory_ops;
    default: return graph_node_kind::other;
  }
}

const char* graph_node_kind_name(graph_node_kind kind) noexcept {
  // Every enumerator has its case and there is no default label, so that -Wswitch (in -Wall) reports an
  // enumerator added without a name; a value outside the enumerators falls through to the end.
  switch (kind) {
    case graph_node_kind::kernel: return "kernel";
    case graph_node_kind::memcpy: return "memcpy";
    case graph_node_kind::memset: return "memset";
    case graph_node_kind::host: return "host";
    case graph_node_kind::child_graph: return "child graph";
    case graph_node_kind::empty: return "empty";
    case graph_node_kind::event_record: return "event record";
    case graph_node_kind::event_wait: return "event wait";
    case graph_node_kind::mem_alloc: return "memory alloc";
    case graph_node_kind::mem_free: return "memory free";
    case graph_node_kind::conditional: return "conditional";
    case graph_node_kind::stream_memory_ops: return "stream memory operations";
    case graph_node_kind::other: return "other";
  }
  return "unknown kind";
}

// When the node the driver blamed for a failed instantiation is a kernel node, throws the launch_error
// a launch with its configuration would have: the limit it exceeds, with the numbers. Returns otherwise.
void throw_if_kernel_node_refused(CUresult status, const char* api, CUgraphNode node, CUcontext ctx) {
  int type = 0;
  CUDA_KERNEL_NODE_PARAMS params{};
  if (node == nullptr || node_type(node, type) != CUDA_SUCCESS || type != CU_GRAPH_NODE_TYPE_KERNEL ||
      drv::cuGraphKernelNodeGetParams(node, &params) != CUDA_SUCCESS) {
    return;
  }
  launch_config c;
  c.grid = {params.gridDimX, params.gridDimY, params.gridDimZ};
  c.block = {params.blockDimX, params.blockDimY, params.blockDimZ};
  c.dynamic_shared_memory = params.sharedMemBytes;
  std::string name = kernel_name_noexcept(params.kern, nullptr);
  throw launch_error(error_source::driver, status, api, std::move(name),
                     "kernel node " + describe_node(node) + ": " +
                         diagnose_launch(status, params.ctx != nullptr ? params.ctx : ctx, c, params.kern));
}

[[noreturn]] void throw_launch_failure_in_graph(CUresult status, CUlaunchAttributeID refused, CUkernel kernel,
                                                const kernel_signature* sig) {
  if (detail::is_context_lost(status)) [[unlikely]] {
    detail::throw_driver_error(status, "cuGraphKernelNodeSetAttribute",
                               "kernel node of '" + kernel_name_noexcept(kernel, sig) + "'");
  }
  throw launch_error(error_source::driver, status, "cuGraphKernelNodeSetAttribute", kernel_name_noexcept(kernel, sig),
                     std::string("the driver refused a launch attribute of the kernel node (") +
                         launch_attribute_name(refused) + "); the node was removed");
}

CUDA_KERNEL_NODE_PARAMS kernel_node_params(const launch_config& c, CUkernel kernel, CUcontext ctx, void** args,
                                           const kernel_signature* sig) {
  check_shared_memory_fits(c, kernel, sig);
  CUDA_KERNEL_NODE_PARAMS params{};
  params.func = nullptr;
  params.kern = kernel;
  params.ctx = ctx;
  params.gridDimX = c.grid.x;
  params.gridDimY = c.grid.y;
  params.gridDimZ = c.grid.z;
  params.blockDimX = c.block.x;
  params.blockDimY = c.block.y;
  params.blockDimZ = c.block.z;
  params.sharedMemBytes = static_cast<unsigned>(c.dynamic_shared_memory);
  params.kernelParams = args;
  return params;
}

kernel_node add_kernel_node(graph_builder& b, const launch_config& c, CUkernel kernel, void** args,
                            const kernel_signature* sig) {
  constexpr const char* api = "cuGraphAddKernelNode";
  check_launch_attributes(c, graph_path, launch_target{nullptr, b.context().native_handle(), -1, nullptr},
                          "cudrv::launch");
  CUDA_KERNEL_NODE_PARAMS params = kernel_node_params(c, kernel, b.context().native_handle(), args, sig);
  auto deps = native_nodes(b.dependencies());
  CUgraphNode node = nullptr;
  const CUresult added =
      drv::cuGraphAddKernelNode(&node, b.target().native_handle(), deps.data(), deps.size(), &params);
  if (added != CUDA_SUCCESS) [[unlikely]] {
    std::string name = kernel_name_noexcept(kernel, sig);
    if (is_context_lost(added) || added == CUDA_ERROR_OUT_OF_MEMORY) {
      throw_driver_error(added, api, "kernel '" + name + "'");
    }
    // As a refused launch: the limit exceeded, named with the numbers.
    throw launch_error(error_source::driver, added, api, std::move(name),
                       diagnose_launch(added, b.context().native_handle(), c, kernel));
  }
  launch_attribute_array attrs;
  const unsigned count = write_launch_attributes(c, attrs, graph_path);
  for (unsigned i = 0; i < count; ++i) {
    const CUresult status = drv::cuGraphKernelNodeSetAttribute(node, attrs[i].id, &attrs[i].value);
    if (status != CUDA_SUCCESS) {
      drv::cuGraphDestroyNode(node);  // leave no half-configured node behind
      throw_launch_failure_in_graph(status, attrs[i].id, kernel, sig);
    }
  }
  if (sig != nullptr && sig->library != nullptr) {
    try {
      b.keep_library(sig->library);
    } catch (...) {
      drv::cuGraphDestroyNode(node);  // a node whose code could be unloaded under it must not stay
      throw;
    }
  }
  auto result = kernel_node::from_native_handle(node);
  b.advance(result);
  return result;
}

namespace {
// A graph's reference on a library, dropped when the graph's user object goes. That happens on a
// driver thread, where unloading (the last reference's job) is not permitted: the reference is
// dropped on cudrv's disposal thread instead (a function and the pointer, no object made for it).
void CUDA_CB release_library_callback(void* state) {
  if (!dispose_on_disposal_thread([](void* s) noexcept { release_library(static_cast<library_state*>(s)); }, state)) {
    // No thread for the hand-over: the library stays loaded (a leak), never unloaded from here.
    std::fprintf(stderr, "cudrv: could not hand a graph's library reference to the disposal thread; it is leaked\n");
  }
}

// Makes graph keep library loaded (a user object holding a reference).
void keep_library_in_graph(CUgraph graph, library_state* library) {
  retain_library(library);  // the user object's reference, dropped by its destructor
  retain_in_graph(graph, library, &release_library_callback, "a graph launching a library's kernel");
}

}  // namespace

// Makes a graph made by stream capture keep the cudrv libraries of its kernel nodes loaded.
void keep_captured_libraries(CUgraph graph) {
  keep_captured_libraries(graph, query_nodes("cuGraphGetNodes", [&](CUgraphNode* out, std::size_t* n) {
                            return drv::cuGraphGetNodes(graph, out, n);
                          }));
}

void keep_captured_libraries(CUgraph graph, const std::vector<CUgraphNode>& nodes) {
#if CUDA_VERSION >= 12050
  // Kernels launched into a capturing stream become kernel nodes that name their CUkernel; the graph
  // takes a reference on each cudrv library among them, as graph_builder does for the nodes it adds.
  std::vector<library_state*> kept;
  for (CUgraphNode node : nodes) {
    int type = 0;
    check(node_type(node, type), "cuGraphNodeGetType");  // a node left unchecked could lose its code
    if (type != CU_GRAPH_NODE_TYPE_KERNEL) {
      continue;
    }
    CUDA_KERNEL_NODE_PARAMS params{};
    check(drv::cuGraphKernelNodeGetParams(node, &params), "cuGraphKernelNodeGetParams");
    if (params.kern == nullptr) {
      continue;
    }
    CUlibrary lib = nullptr;
    try {
      if (drv::cuKernelGetLibrary(&lib, params.kern) != CUDA_SUCCESS) {
        continue;  // a kernel of no library (a module's, say)
      }
    } catch (const not_supported_error&) {
      return;  // a driver older than 12.5 cannot tell: documented, the kernels must outlive the graph
    }
    kept.reserve(kept.size() + 1);  // before the reference is taken: push_back cannot throw below
    library_state* state = retain_library_of(lib);
    if (state == nullptr) {
      continue;  // not a cudrv library
    }
    bool seen = false;
    for (library_state* k : kept) {
      seen = seen || k == state;
    }
    if (seen) {
      release_library(state);
      continue;
    }
    retain_in_graph(graph, state, &release_library_callback, "a graph captured from a stream");
    kept.push_back(state);
  }
#else
  (void)graph;
  (void)nodes;
#endif
}

void set_kernel_node_attributes(CUgraphNode node, const launch_config& c) {
  constexpr const char* api = "cudrv::kernel_node::set_launch_attributes";
  if (node == nullptr) {
    throw invalid_argument_error(api, "the node is empty");
  }
  check_launch_attributes(c, graph_path, launch_target{nullptr, nullptr, -1, node}, api);
  launch_attribute_array attrs;
  const unsigned count = write_launch_attributes(c, attrs, graph_path);
  for (unsigned i = 0; i < count; ++i) {
    const CUresult status = drv::cuGraphKernelNodeSetAttribute(node, attrs[i].id, &attrs[i].value);
    if (status != CUDA_SUCCESS) [[unlikely]] {
      throw_driver_error(status, "cuGraphKernelNodeSetAttribute",
                         std::string("launch attribute '") + launch_attribute_name(attrs[i].id) + "' of kernel node " +
                             describe_node(node));
    }
  }
}

CUgraphDeviceNode kernel_node_device_handle(CUgraphNode node) {
  constexpr const char* api = "cudrv::kernel_node::device_updatable_handle";
  if (node == nullptr) {
    throw invalid_argument_error(api, "the node is empty");
  }
  CUlaunchAttributeValue v{};
  check(drv::cuGraphKernelNodeGetAttribute(node, CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE, &v),
        "cuGraphKernelNodeGetAttribute", [&] { return "kernel node " + describe_node(node); });
  if (v.deviceUpdatableKernelNode.deviceUpdatable == 0) {
    throw invalid_argument_error(api, "kernel node " + describe_node(node) +
                                          " is not device-updatable: add it with launch_config::device_updatable");
  }
  return v.deviceUpdatableKernelNode.devNode;
}

}  // namespace detail

// --- graph_node_ref -------------------------------------------------------------------------------

graph_node_kind graph_node_ref::kind() const {
  int type = 0;
  detail::check(detail::node_type(node_, type), "cuGraphNodeGetType");
  return detail::node_kind_of(type);
}

std::vector<graph_node_ref> graph_node_ref::dependencies() const {
  return detail::wrap_nodes(detail::query_nodes("cuGraphNodeGetDependencies", [&](CUgraphNode* out, std::size_t* n) {
    return detail::drv::cuGraphNodeGetDependencies(node_, out, nullptr, n);
  }));
}

std::vector<graph_node_ref> graph_node_ref::dependents() const {
  return detail::wrap_nodes(detail::query_nodes("cuGraphNodeGetDependentNodes", [&](CUgraphNode* out, std::size_t* n) {
    return detail::drv::cuGraphNodeGetDependentNodes(node_, out, nullptr, n);
  }));
}

// --- graph_ref --------------------------------------------------------------------------------------

void graph_base::require_handle(const char* api) const {
  if (handle_ == nullptr) [[unlikely]] {
    throw invalid_argument_error(api, "the graph is empty (a moved-from or released cudrv::graph)");
  }
}

std::vector<graph_node_ref> graph_base::nodes() const {
  require_handle("cudrv::graph::nodes");
  return detail::wrap_nodes(detail::query_nodes("cuGraphGetNodes", [&](CUgraphNode* out, std::size_t* n) {
    return detail::drv::cuGraphGetNodes(handle_, out, n);
  }));
}

std::vector<graph_node_ref> graph_base::roots() const {
  require_handle("cudrv::graph::roots");
  return detail::wrap_nodes(detail::query_nodes("cuGraphGetRootNodes", [&](CUgraphNode* out, std::size_t* n) {
    return detail::drv::cuGraphGetRootNodes(handle_, out, n);
  }));
}

std::size_t graph_base::node_count() const {
  require_handle("cudrv::graph::node_count");
  std::size_t count = 0;
  detail::check(detail::drv::cuGraphGetNodes(handle_, nullptr, &count), "cuGraphGetNodes");
  return count;
}

std::vector<std::pair<graph_node_ref, graph_node_ref>> graph_base::edges() const {
  require_handle("cudrv::graph::edges");
  std::size_t count = 0;
  detail::check(detail::drv::cuGraphGetEdges(handle_, nullptr, nullptr, nullptr, &count), "cuGraphGetEdges");
  std::vector<CUgraphNode> from(count), to(count);
  if (count > 0) {
    detail::check(detail::drv::cuGraphGetEdges(handle_, from.data(), to.data(), nullptr, &count), "cuGraphGetEdges");
  }
  std::vector<std::pair<graph_node_ref, graph_node_ref>> out;
  out.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    out.emplace_back(graph_node_ref::from_native_handle(from[i]), graph_node_ref::from_native_handle(to[i]));
  }
  return out;
}

void graph_base::add_dependency(graph_node_ref from, graph_node_ref to) const {
  require_handle("cudrv::graph::add_dependency");
  CUgraphNode f = from.native_handle();
  CUgraphNode t = to.native_handle();
  detail::check(detail::drv::cuGraphAddDependencies(handle_, &f, &t, nullptr, 1), "cuGraphAddDependencies");
}

void graph_base::remove_dependency(graph_node_ref from, graph_node_ref to) const {
  require_handle("cudrv::graph::remove_dependency");
  CUgraphNode f = from.native_handle();
  CUgraphNode t = to.native_handle();
  detail::check(detail::drv::cuGraphRemoveDependencies(handle_, &f, &t, nullptr, 1), "cuGraphRemoveDependencies");
}

empty_node graph_base::add_empty(const std::vector<graph_node_ref>& dependencies) const {
  require_handle("cudrv::graph::add_empty");
  auto deps = detail::native_nodes(dependencies);
  CUgraphNode node = nullptr;
  detail::check(detail::drv::cuGraphAddEmptyNode(&node, handle_, deps.data(), deps.size()), "cuGraphAddEmptyNode");
  return empty_node::from_native_handle(node);
}

child_graph_node graph_base::add_child_graph(graph_ref child, const std::vector<graph_node_ref>& dependencies) const {
  require_handle("cudrv::graph::add_child_graph");
  child.require_handle("cudrv::graph::add_child_graph");
  auto deps = detail::native_nodes(dependencies);
  CUgraphNode node = nullptr;
  detail::check(detail::drv::cuGraphAddChildGraphNode(&node, handle_, deps.data(), deps.size(), child.handle_),
                "cuGraphAddChildGraphNode");
  return child_graph_node::from_native_handle(node);
}

event_record_node graph_base::add_event_record(event_ref ev, const std::vector<graph_node_ref>& dependencies) const {
  require_handle("cudrv::graph::add_event_record");
  auto deps = detail::native_nodes(dependencies);
  CUgraphNode node = nullptr;
  detail::check(detail::drv::cuGraphAddEventRecordNode(&node, handle_, deps.data(), deps.size(), ev.native_handle()),
                "cuGraphAddEventRecordNode");
  return event_record_node::from_native_handle(node);
}

event_wait_node graph_base::add_event_wait(event_ref ev, const std::vector<graph_node_ref>& dependencies) const {
  require_handle("cudrv::graph::add_event_wait");
  auto deps = detail::native_nodes(dependencies);
  CUgraphNode node = nullptr;
  detail::check(detail::drv::cuGraphAddEventWaitNode(&node, handle_, deps.data(), deps.size(), ev.native_handle()),
                "cuGraphAddEventWaitNode");
  return event_wait_node::from_native_handle(node);
}

host_node graph_base::add_host_task(detail::host_task* task, const std::vector<graph_node_ref>& dependencies) const {
  try {
    require_handle("cudrv::graph::add_host");
  } catch (...) {
    detail::discard(task);
    throw;
  }
  // The graph owns the task from here on (also when this throws): it lives as long as the graph or
  // any executable made from it, and is destroyed on cudrv's disposal thread.
  detail::retain_in_graph(handle_, task, &detail::dispose_host_task_callback, "cudrv::graph::add_host");
  CUDA_HOST_NODE_PARAMS params{};
  params.fn = &detail::run_graph_host_task;
  params.userData = task;
  auto deps = detail::native_nodes(dependencies);
  CUgraphNode node = nullptr;
  detail::check(detail::drv::cuGraphAddHostNode(&node, handle_, deps.data(), deps.size(), &params),
                "cuGraphAddHostNode");
  return host_node::from_native_handle(node);
}

std::pair<mem_alloc_node, CUdeviceptr> graph_base::add_mem_alloc(
    const device& dev, std::size_t bytes, const std::vector<graph_node_ref>& dependencies) const {
  require_handle("cudrv::graph::add_mem_alloc");
  if (bytes == 0) {
    throw invalid_argument_error("cudrv::graph::add_mem_alloc", "a graph allocation needs at least one byte");
  }
  CUDA_MEM_ALLOC_NODE_PARAMS params{};
  params.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  params.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  params.poolProps.location.id = dev.ordinal();
  params.bytesize = bytes;
  auto deps = detail::native_nodes(dependencies);
  CUgraphNode node = nullptr;
  detail::check(detail::drv::cuGraphAddMemAllocNode(&node, handle_, deps.data(), deps.size(), &params),
                "cuGraphAddMemAllocNode",
                [&] { return std::to_string(bytes) + " bytes on device " + std::to_string(dev.ordinal()); });
  return {mem_alloc_node::from_native_handle(node), params.dptr};
}

mem_free_node graph_base::add_mem_free(CUdeviceptr address, const std::vector<graph_node_ref>& dependencies) const {
  require_handle("cudrv::graph::add_mem_free");
  auto deps = detail::native_nodes(dependencies);
  CUgraphNode node = nullptr;
  detail::check(detail::drv::cuGraphAddMemFreeNode(&node, handle_, deps.data(), deps.size(), address),
                "cuGraphAddMemFreeNode");
  return mem_free_node::from_native_handle(node);
}

conditional_handle graph_base::make_conditional_handle(context_ref ctx, unsigned default_value,
                                                       bool reset_on_launch) const {
  require_handle("cudrv::graph::make_conditional_handle");
  CUgraphConditionalHandle h{};
  detail::check(detail::drv::cuGraphConditionalHandleCreate(&h, handle_, ctx.native_handle(), default_value,
                                                            reset_on_launch ? CU_GRAPH_COND_ASSIGN_DEFAULT : 0),
                "cuGraphConditionalHandleCreate");
  return conditional_handle(h);
}

namespace {

// What a conditional node of one kind and number of bodies is to the driver: its type, what messages
// call it, and the CUDA version a driver needs for it.
struct conditional_shape {
  CUgraphConditionalNodeType type = CU_GRAPH_COND_TYPE_IF;
  const char* what = "if";
  int needs = 12030;  // conditional nodes: CUDA 12.3 (cuGraphAddNode's entry point checks that one)
};

// The shape of a conditional node of kind with bodies; refuses, typed, a number of bodies the kind
// cannot have and a kind cudrv does not know.
conditional_shape conditional_shape_of(conditional_kind kind, unsigned bodies, const char* api) {
  conditional_shape shape;
  switch (kind) {
    case conditional_kind::if_then:
      shape.type = CU_GRAPH_COND_TYPE_IF;
      if (bodies != 1 && bodies != 2) {
        throw invalid_argument_error(api,
                                     "an if node has 1 body (then) or 2 (then, else), not " + std::to_string(bodies));
      }
      shape.what = bodies == 2 ? "if with an else body" : "if";
      shape.needs = bodies == 2 ? 12080 : 12030;
      break;
    case conditional_kind::while_loop:
      shape.type = CU_GRAPH_COND_TYPE_WHILE;
      shape.what = "while";
      if (bodies != 1) {
        throw invalid_argument_error(api, "a while node has exactly 1 body, not " + std::to_string(bodies));
      }
      break;
    case conditional_kind::switch_cases:
#if CUDA_VERSION >= 12080
      shape.type = CU_GRAPH_COND_TYPE_SWITCH;
#else
      throw not_supported_error(error_source::cudrv, CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED",
                                "switch nodes need CUDA 12.8 headers", api, {});
#endif
      shape.what = "switch";
      shape.needs = 12080;
      if (bodies == 0) {
        throw invalid_argument_error(api, "a switch node needs at least 1 body");
      }
      break;
    default:
      throw invalid_argument_error(api, "conditional_kind " + std::to_string(static_cast<int>(kind)) +
                                            " is none of if_then, while_loop, switch_cases");
  }
  return shape;
}

// Refuses, as not supported, a node (described as node) that the installed driver is older than needs
// for. An older driver may answer CUDA_ERROR_INVALID_VALUE for a node type or body count it does not
// know, which would read as a refused handle.
void require_driver_for(const std::string& node, int needs, const char* api) {
  if (const int installed = driver::version(); installed > 0 && installed < needs) {
    throw not_supported_error(error_source::cudrv, CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED",
                              "a " + node + " needs a CUDA " + std::to_string(needs / 1000) + "." +
                                  std::to_string(needs % 1000 / 10) + " driver; the installed driver supports CUDA " +
                                  std::to_string(installed / 1000) + "." + std::to_string(installed % 1000 / 10),
                              api, {});
  }
}

// Throws the error of a cuGraphAddNode that refused a conditional node (described as node), made for
// ctx, with what the code says about its cause; returns on success.
void check_conditional_added(CUresult status, const std::string& node, context_ref ctx) {
  if (status == CUDA_ERROR_NOT_SUPPORTED) {
    int cc = 0;
    try {
      cc = ctx.device().compute_capability().as_int();
    } catch (const error&) {
    }
    detail::check(status, "cuGraphAddNode", [&] {
      return node + ": the driver or device (compute capability " + std::to_string(cc / 10) + "." +
             std::to_string(cc % 10) + ") does not support it; conditional nodes need compute capability 5.0+";
    });
  }
  if (status == CUDA_ERROR_INVALID_VALUE) {
    // The driver knows the node (checked before): what it refuses is the handle (driver 580.159.04: a
    // handle of another graph, one a second node tests, a value no cuGraphConditionalHandleCreate made).
    detail::check(status, "cuGraphAddNode", [&] {
      return node + ": the driver refused its conditional handle; a handle must come from make_conditional_handle "
                    "of this graph (or of a graph this one is a body of), made for the same context, and only one "
                    "conditional node may test it";
    });
  }
  detail::check(status, "cuGraphAddNode", [&] { return node; });
}

}  // namespace

conditional_node graph_base::add_conditional(conditional_handle handle, conditional_kind kind, context_ref ctx,
                                             unsigned bodies, const std::vector<graph_node_ref>& dependencies) const {
  constexpr const char* api = "cudrv::graph::add_conditional";
  require_handle(api);
  // What can be checked before the driver: the context, the kind, the number of bodies, and whether
  // the installed driver knows the node (switch nodes and an if with an else body: CUDA 12.8).
  if (ctx.native_handle() == nullptr) {
    throw invalid_argument_error(api, "the context is empty (a moved-from or released cudrv::context); name the "
                                      "context the conditional handle was made for");
  }
  const conditional_shape shape = conditional_shape_of(kind, bodies, api);
  const std::string node = "conditional node (" + std::string(shape.what) + ", " + std::to_string(bodies) +
                           (bodies == 1 ? " body)" : " bodies)");
  require_driver_for(node, shape.needs, api);
  CUgraphNodeParams params{};
  params.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  params.conditional.handle = handle.native_handle();
  params.conditional.type = shape.type;
  params.conditional.size = bodies;
  params.conditional.ctx = ctx.native_handle();
  auto deps = detail::native_nodes(dependencies);
  CUgraphNode added = nullptr;
  const CUresult status = detail::drv::cuGraphAddNode(&added, handle_, deps.data(), nullptr, deps.size(), &params);
  check_conditional_added(status, node, ctx);
  conditional_node out{graph_node_ref::from_native_handle(added), {}};
  for (unsigned i = 0; i < bodies; ++i) {
    out.bodies.push_back(graph_ref::from_native_handle(params.conditional.phGraph_out[i]));
  }
  return out;
}

graph graph_base::clone() const {
  require_handle("cudrv::graph::clone");
  CUgraph copy = nullptr;
  CUresult status = detail::drv::cuGraphClone(&copy, handle_);
  detail::check(status, "cuGraphClone", [status] {
    return status == CUDA_ERROR_NOT_SUPPORTED
               ? std::string("graphs with memory allocation or free nodes, or conditional nodes, cannot be cloned")
               : std::string();
  });
  return graph::from_native_handle(copy);
}

void graph_base::write_dot(const std::string& path, unsigned flags) const {
  require_handle("cudrv::graph::write_dot");
  detail::check(detail::drv::cuGraphDebugDotPrint(handle_, path.c_str(), flags), "cuGraphDebugDotPrint",
                [&] { return "writing '" + path + "'"; });
}

std::string graph_base::dot(unsigned flags) const {
  char path[] = "/tmp/cudrv-graph-XXXXXX";
  int fd = ::mkstemp(path);
  if (fd < 0) {
    throw invalid_argument_error("cudrv::graph::dot", "cannot create a temporary file in /tmp");
  }
  ::close(fd);
  struct remover {
    const char* p;
    ~remover() { std::remove(p); }
  } cleanup{path};
  write_dot(path, flags);
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return std::move(text).str();
}

graph_exec graph_base::instantiate() const { return instantiate(graph_instantiate_flags::none); }

graph_exec graph_base::instantiate(const device& dev, graph_instantiate_flags flags) const {
  return instantiate(dev.primary_context(), flags);
}

graph_exec graph_base::instantiate(graph_instantiate_flags flags) const {
  CUcontext ctx = nullptr;
  detail::check(detail::drv::cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
  if (ctx == nullptr) {
    throw invalid_argument_error("cudrv::graph::instantiate",
                                 "no context is current, and an executable graph belongs to a context: name it with "
                                 "instantiate(ctx, flags) (dev.primary_context() for a device), or make one current");
  }
  return instantiate(context_ref(ctx), flags);
}

graph_exec graph_base::instantiate(context_ref ctx, graph_instantiate_flags flags) const {
  require_handle("cudrv::graph::instantiate");
  detail::check_device_launchable(handle_, static_cast<unsigned>(flags), "cudrv::graph::instantiate");
  CUDA_GRAPH_INSTANTIATE_PARAMS params{};
  params.flags = static_cast<cuuint64_t>(flags);
  CUgraphExec exec = nullptr;
  CUresult status = CUDA_SUCCESS;
  detail::run_in_context(ctx.native_handle(), "cudrv::graph::instantiate",
                         [&] { status = detail::drv::cuGraphInstantiateWithParams(&exec, handle_, &params); });
  if (status != CUDA_SUCCESS || params.result_out != CUDA_GRAPH_INSTANTIATE_SUCCESS) {
    const char* why = "the driver refused the graph";
    switch (params.result_out) {
      case CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE:
        why = "the graph's structure is invalid (e.g. a cycle, or a node used in two graphs)";
        break;
      case CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED:
        why = "a node's operation is not supported here (e.g. a device launch of a graph with host nodes)";
        break;
      case CUDA_GRAPH_INSTANTIATE_MULTIPLE_CTXS_NOT_SUPPORTED:
        why = "the graph's nodes span several contexts, which device launch does not allow";
        break;
      default: break;
    }
    if (status == CUDA_ERROR_NOT_SUPPORTED && params.result_out != CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE &&
        params.result_out != CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED &&
        params.result_out != CUDA_GRAPH_INSTANTIATE_MULTIPLE_CTXS_NOT_SUPPORTED) {
      why = "the driver does not support this instantiation (a graph with memory allocation nodes can have only "
            "one executable at a time)";
    }
    const CUresult failed = status != CUDA_SUCCESS ? status : CUDA_ERROR_INVALID_VALUE;
    if (!detail::is_context_lost(failed) && failed != CUDA_ERROR_OUT_OF_MEMORY) {
      detail::throw_if_kernel_node_refused(failed, "cuGraphInstantiateWithParams", params.hErrNode_out,
                                           ctx.native_handle());
    }
    detail::check(failed, "cuGraphInstantiateWithParams",
                  [&] { return std::string(why) + "; " + detail::describe_node(params.hErrNode_out); });
  }
  graph_exec out = graph_exec::from_native_handle(exec, ctx);
  out.source_ = handle_;  // what set_enabled checks its nodes against
  return out;
}

// --- graph -------------------------------------------------------------------------------------------

graph::graph() : graph_base(nullptr) { detail::check(detail::drv::cuGraphCreate(&handle_, 0), "cuGraphCreate"); }

graph& graph::operator=(graph&& other) noexcept {
  if (this != &other) {
    reset();
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

void graph::reset() noexcept {
  if (handle_ != nullptr) {
    CUgraph h = std::exchange(handle_, nullptr);
    detail::destroy_noexcept("cuGraphDestroy", [h] { return detail::drv::cuGraphDestroy(h); });
  }
}

graph::~graph() { reset(); }

// --- graph_builder -------------------------------------------------------------------------------

graph_builder::graph_builder(graph_ref g, context_ref ctx, std::vector<graph_node_ref> dependencies)
    : graph_(g), ctx_(ctx), deps_(std::move(dependencies)) {
  if (g.native_handle() == nullptr) {
    throw invalid_argument_error("cudrv::graph_builder", "the graph is empty (a moved-from or released cudrv::graph)");
  }
  if (ctx.native_handle() == nullptr) {
    throw invalid_argument_error("cudrv::graph_builder", "the context is empty");
  }
}

graph_builder::graph_builder(graph_ref g, const device& dev, std::vector<graph_node_ref> dependencies)
    : graph_builder(g, dev.primary_context(), std::move(dependencies)) {}

namespace {
context_ref context_of(stream_ref s) {
  detail::require_stream(s.native_handle(), "cudrv::graph_builder");
  return s.context();
}
}  // namespace

graph_builder::graph_builder(graph_ref g, stream_ref s, std::vector<graph_node_ref> dependencies)
    : graph_builder(g, context_of(s), std::move(dependencies)) {}

void graph_builder::keep_library(detail::library_state* library) {
  for (detail::library_state* kept : kept_) {
    if (kept == library) {
      return;
    }
  }
  kept_.reserve(kept_.size() + 1);  // may throw before the graph holds anything
  detail::keep_library_in_graph(graph_.native_handle(), library);
  kept_.push_back(library);
}

void graph_builder::depend_on(graph_node_ref node) { deps_.push_back(node); }

void graph_builder::advance(graph_node_ref node) { deps_.assign(1, node); }

graph_node_ref graph_builder::last() const {
  if (deps_.size() != 1) {
    throw invalid_argument_error("cudrv::graph_builder::last", "the builder has " + std::to_string(deps_.size()) +
                                                                   " current dependencies, not one last node");
  }
  return deps_.front();
}

// --- issue 34 part 6: device-launchable graphs -----------------------------------------------------

namespace detail {
namespace {

// Checks the nodes of graph (and of its child graphs) for device launch; counts the nodes that do work.
void check_device_nodes(CUgraph graph, const char* api, int depth, std::size_t& working) {
  for (CUgraphNode node : query_nodes("cuGraphGetNodes", [&](CUgraphNode*out, std::size_t*n) {
         return drv::cuGraphGetNodes(graph, out, n);
       })) {
    int type = 0;
    check(node_type(node, type), "cuGraphNodeGetType");
    const graph_node_kind kind = node_kind_of(type);
    if (kind == graph_node_kind::kernel || kind == graph_node_kind::memcpy || kind == graph_node_kind::memset) {
      ++working;
      continue;
    }
    if (kind == graph_node_kind::child_graph && depth < 64) {
      CUgraph child = nullptr;
      check(drv::cuGraphChildGraphNodeGetGraph(node, &child), "cuGraphChildGraphNodeGetGraph");
      check_device_nodes(child, api, depth + 1, working);
      continue;
    }
    throw invalid_argument_error(api, "a graph instantiated for device launch may hold only kernel, memcpy, memset "
                                      "and child-graph nodes (cuda.h, cuGraphInstantiate); " +
                                          describe_node(node) + (depth > 0 ? " of a child graph" : "") +
                                          " is none of them");
  }
}

}  // namespace

void check_device_launchable(CUgraph graph, unsigned flags, const char* api) {
  if ((flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) == 0) {
    return;
  }
  if ((flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH) != 0) {
    throw invalid_argument_error(api, "graph_instantiate_flags::device_launch cannot be combined with "
                                      "auto_free_on_launch (cuda.h, cuGraphInstantiate)");
  }
  std::size_t working = 0;
  check_device_nodes(graph, api, 0, working);
  if (working == 0) {
    throw invalid_argument_error(api, "a graph instantiated for device launch needs at least one kernel, memcpy or "
                                      "memset node (cuda.h, cuGraphInstantiate); this one has none");
  }
}

}  // namespace detail

}  // namespace cudrv
