// CPU tier: the names kept for one release after a rename (issue 32, "names that explain themselves")
// still compile, through the forwarding headers too, and mean what the new names mean. Each use warns
// (`[[deprecated]]`); this file silences the warning locally, as a user moving over might.
#include <catch2/catch.hpp>

// The forwarding headers first: each must bring in the renamed header on its own.
#include <cudrv/memory_resources.hpp>
#include <cudrv/pool_buffer.hpp>

#include <cudrv/batch_copy.hpp>
#include <cudrv/graph.hpp>

#include <type_traits>
#include <vector>

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif

// The forwarding headers declare what the renamed headers declare.
static_assert(std::is_base_of_v<cudrv::memory_resource, cudrv::device_memory_resource>);
static_assert(std::is_base_of_v<cudrv::memory_resource, cudrv::pool_memory_resource>);

// Each old name is the new type, not a copy of it.
static_assert(std::is_same_v<cudrv::copy_batch, cudrv::batch_copy>);
static_assert(std::is_same_v<cudrv::copy_batch_3d, cudrv::batch_copy_3d>);
static_assert(std::is_same_v<cudrv::pool_buffer<float>, cudrv::host_accessible_pool_buffer<float>>);
static_assert(std::is_same_v<cudrv::batch_mem_op_node, cudrv::stream_memory_ops_node>);
static_assert(cudrv::graph_node_kind::batch_mem_op == cudrv::graph_node_kind::stream_memory_ops);
static_assert(cudrv::stream_memory_ops_node::node_kind == cudrv::graph_node_kind::batch_mem_op);

TEST_CASE("the deprecated names still work: a copy_batch built through the old name is a batch_copy",
          "[deprecated_names]") {
  std::vector<int> a(4), b(4, 7);
  cudrv::copy_batch old_name;
  old_name.add(a, b);
  const cudrv::batch_copy& as_new = old_name;
  REQUIRE(as_new.size() == 1);
  CHECK(as_new.sizes()[0] == 4 * sizeof(int));
  CHECK(as_new.destinations()[0] == reinterpret_cast<CUdeviceptr>(a.data()));
  CHECK(as_new.sources()[0] == reinterpret_cast<CUdeviceptr>(b.data()));
}

#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
