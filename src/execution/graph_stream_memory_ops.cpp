// Stream memory operations as graph nodes: the operations and checks of the streams layer, added to a
// graph instead of a stream.
#include "cudrv/graph.hpp"
#include "cudrv/stream_memory_ops.hpp"

#include <optional>
#include <string>
#include <vector>

#include "cudrv/error.hpp"
#include "driver/driver_api.hpp"

namespace cudrv::detail {

stream_memory_ops_node add_memory_ops_node(graph_builder& b, const stream_memory_op* ops, std::size_t count) {
  const char* api = "cudrv::batch_memory_ops(graph_builder)";
  if (count == 0) {
    throw invalid_argument_error(api, "the batch holds no operation");
  }
  if (count > 255) {
    throw invalid_argument_error(api, "the batch holds " + std::to_string(count) +
                                          " operations; a stream-memory-operations node takes fewer than 256 (at most "
                                          "255, as cuStreamBatchMemOp): split it");
  }
  std::vector<CUstreamBatchMemOpParams> params(count);
  for (std::size_t i = 0; i < count; ++i) {
    params[i] = ops[i].native();
  }
  CUDA_BATCH_MEM_OP_NODE_PARAMS p{};
  p.ctx = b.context().native_handle();
  p.count = static_cast<unsigned>(count);
  p.paramArray = params.data();
  p.flags = 0;
  const native_node_list deps = native_nodes(b.dependencies());
  CUgraphNode node = nullptr;
  const CUresult status =
      drv::cuGraphAddBatchMemOpNode(&node, b.target().native_handle(), deps.data(), deps.size(), &p);
  if (status != CUDA_SUCCESS) [[unlikely]] {
    std::optional<device> dev;
    try {
      dev = b.context().device();
    } catch (const error&) {
      // no diagnosis: the driver's error as it is
    }
    throw_memory_op_error(status, "cuGraphAddBatchMemOpNode", dev ? &*dev : nullptr, ops, count);
  }
  auto result = stream_memory_ops_node::from_native_handle(node);
  b.advance(result);
  return result;
}

}  // namespace cudrv::detail
