// Internal: what graph.cpp shares with graph_exec.cpp, stream_capture.cpp and the tests (node kinds,
// node descriptions, the libraries a captured graph keeps).
#pragma once

#include <cuda.h>

#include <string>
#include <vector>

#include "cudrv/graph.hpp"

namespace cudrv::detail {

// The type of @p node (cuGraphNodeGetType), as the int the driver wrote: a newer driver may report a
// type past the enumerators of the cuda.h cudrv was built with, which a CUgraphNodeType cannot be read as.
CUresult node_type(CUgraphNode node, int& type);

// The kind of a driver node type: every type cudrv knows, graph_node_kind::other for the rest
// (external-semaphore nodes, and types a newer driver adds).
graph_node_kind node_kind_of(int type) noexcept;

// The name of a node kind in error messages ("kernel", "child graph", ...): one for every enumerator,
// and "unknown kind" for a value that is none of them.
const char* graph_node_kind_name(graph_node_kind kind) noexcept;

// A node and its kind, for error messages ("node 0x... (kernel)"); a type cudrv has no name for is
// given as the driver's number, and a null node as "no node named".
std::string describe_node(CUgraphNode node);

// Makes a graph made by stream capture keep the cudrv libraries of its kernel nodes loaded (a user
// object per library); a driver older than 12.5 cannot tell a kernel's library, and nothing is kept.
void keep_captured_libraries(CUgraph graph);

// issue 34 part 6: graphs.
// As above, for the kernel nodes among nodes only (a capture into an existing graph: the nodes it added).
void keep_captured_libraries(CUgraph graph, const std::vector<CUgraphNode>& nodes);

// The rules cuda.h documents for a graph instantiated with CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH
// that cudrv can check before the driver: not with auto-free on launch; only kernel, memcpy, memset and
// child-graph nodes (child graphs checked alike); at least one kernel, memcpy or memset node. Throws
// invalid_argument_error naming the node and its kind; returns when flags do not ask for device launch.
void check_device_launchable(CUgraph graph, unsigned flags, const char* api);

}  // namespace cudrv::detail
