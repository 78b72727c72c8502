// Internal: what graph.cpp shares with the tests about node kinds.
#pragma once

#include <cuda.h>

#include "cudrv/graph.hpp"

namespace cudrv::detail {

// The kind of a driver node type: every type cudrv knows, graph_node_kind::other for the rest
// (external-semaphore nodes, and types a newer driver adds).
graph_node_kind node_kind_of(CUgraphNodeType type) noexcept;

// The name of a node kind in error messages ("kernel", "child graph", ...): one for every enumerator,
// and "unknown kind" for a value that is none of them.
const char* graph_node_kind_name(graph_node_kind kind) noexcept;

}  // namespace cudrv::detail
