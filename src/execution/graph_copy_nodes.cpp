// Copies and fills as graph nodes: the checks and descriptions of the memory layer, added to a graph
// instead of a stream.
#include "cudrv/copy.hpp"
#include "cudrv/graph.hpp"

#include <string>
#include <vector>

#include "cudrv/error.hpp"
#include "driver/driver_api.hpp"
#include "memory/memory_support.hpp"

namespace cudrv::detail {

CUDA_MEMCPY3D linear_memcpy3d(const linear_copy& c) {
  check_linear("cudrv::copy", c);
  CUDA_MEMCPY3D p{};
  p.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
  p.srcDevice = static_cast<CUdeviceptr>(c.src);
  p.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
  p.dstDevice = static_cast<CUdeviceptr>(c.dst);
  p.WidthInBytes = c.bytes;
  p.Height = 1;
  p.Depth = 1;
  return p;
}

memcpy_node add_copy_node(graph_builder& b, const linear_copy& c) {
  CUDA_MEMCPY3D p = linear_memcpy3d(c);
  const native_node_list deps = native_nodes(b.dependencies());
  CUgraphNode node = nullptr;
  check(drv::cuGraphAddMemcpyNode(&node, b.target().native_handle(), deps.data(), deps.size(), &p,
                                  b.context().native_handle()),
        "cuGraphAddMemcpyNode", [&] { return describe_copy(c); });
  auto result = memcpy_node::from_native_handle(node);
  b.advance(result);
  return result;
}

CUDA_MEMSET_NODE_PARAMS memset_params(const char* api, std::uintptr_t dst, std::size_t count, std::uint32_t pattern,
                                      std::size_t element_size) {
  check_fill(api, dst, count, element_size);
  CUDA_MEMSET_NODE_PARAMS p{};
  p.dst = static_cast<CUdeviceptr>(dst);
  p.pitch = 0;
  p.value = pattern;
  p.elementSize = static_cast<unsigned>(element_size);
  p.width = count;
  p.height = 1;
  return p;
}

memset_node add_fill_node(graph_builder& b, std::uintptr_t dst, std::size_t count, std::uint32_t pattern,
                          std::size_t element_size) {
  CUDA_MEMSET_NODE_PARAMS p = memset_params("cudrv::fill", dst, count, pattern, element_size);
  const native_node_list deps = native_nodes(b.dependencies());
  CUgraphNode node = nullptr;
  check(drv::cuGraphAddMemsetNode(&node, b.target().native_handle(), deps.data(), deps.size(), &p,
                                  b.context().native_handle()),
        "cuGraphAddMemsetNode", [&] {
          return std::to_string(count) + " elements of " + std::to_string(element_size) + " bytes at " +
                 format_address(dst);
        });
  auto result = memset_node::from_native_handle(node);
  b.advance(result);
  return result;
}

}  // namespace cudrv::detail
