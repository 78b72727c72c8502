// Internal: what graph.cpp shares with the tests about node kinds.
#pragma once

#include <cuda.h>

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

}  // namespace cudrv::detail
