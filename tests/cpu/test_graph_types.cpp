// Graphs without a GPU: the types' shape, flags, and what is refused before any driver call.
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <type_traits>

#include "support/test_support.hpp"

#if defined(CUDRV_TEST_INTERNALS)
#include "execution/graph_support.hpp"
#endif

using cudrv::test::catch_as;

TEST_CASE("graph types: ownership shapes and flag values", "[graph]") {
  STATIC_REQUIRE_FALSE(std::is_copy_constructible_v<cudrv::graph>);
  STATIC_REQUIRE(std::is_nothrow_move_constructible_v<cudrv::graph>);
  STATIC_REQUIRE(std::is_convertible_v<cudrv::graph&, cudrv::graph_ref>);
  STATIC_REQUIRE_FALSE(std::is_copy_constructible_v<cudrv::graph_exec>);
  STATIC_REQUIRE(std::is_nothrow_move_constructible_v<cudrv::graph_exec>);
  STATIC_REQUIRE_FALSE(std::is_copy_constructible_v<cudrv::stream_capture>);
  STATIC_REQUIRE(std::is_trivially_copyable_v<cudrv::graph_node_ref>);
  // Typed node handles convert to the untyped one, never between kinds or back.
  STATIC_REQUIRE(std::is_convertible_v<cudrv::kernel_node, cudrv::graph_node_ref>);
  STATIC_REQUIRE(std::is_convertible_v<cudrv::mem_alloc_node, cudrv::graph_node_ref>);
  STATIC_REQUIRE_FALSE(std::is_convertible_v<cudrv::memcpy_node, cudrv::kernel_node>);
  STATIC_REQUIRE_FALSE(std::is_convertible_v<cudrv::graph_node_ref, cudrv::kernel_node>);
  STATIC_REQUIRE(cudrv::kernel_node::node_kind == cudrv::graph_node_kind::kernel);
  STATIC_REQUIRE(std::is_trivially_copyable_v<cudrv::conditional_handle>);
  STATIC_REQUIRE(sizeof(cudrv::conditional_handle) == sizeof(unsigned long long));
  using flags = cudrv::graph_instantiate_flags;
  CHECK(static_cast<unsigned>(flags::auto_free_on_launch | flags::upload) ==
        (CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD));
  CHECK(static_cast<unsigned>(flags::device_launch) == CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH);
  CHECK(static_cast<int>(cudrv::capture_mode::relaxed) == CU_STREAM_CAPTURE_MODE_RELAXED);
  CHECK(static_cast<int>(cudrv::capture_status::invalidated) == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
}

TEST_CASE("graphs need a driver: a clear error without one, and empty handles are refused first",
          "[graph][driverless]") {
  CUDRV_REQUIRE_DRIVERLESS();
  CHECK(catch_as<cudrv::driver_unavailable_error>([] { cudrv::graph g; }));
  auto empty = cudrv::graph::from_native_handle(nullptr);
  CHECK(catch_as<cudrv::invalid_argument_error>([&] { (void)empty.add_empty(); }));
  CHECK(catch_as<cudrv::invalid_argument_error>(
      [&] { (void)empty.instantiate(cudrv::context_ref(static_cast<CUcontext>(nullptr)), {}); }));
  CHECK(catch_as<cudrv::invalid_argument_error>(
      [&] { cudrv::graph_builder b(empty, cudrv::context_ref(static_cast<CUcontext>(nullptr))); }));
  auto exec = cudrv::graph_exec::from_native_handle(nullptr, cudrv::context_ref(static_cast<CUcontext>(nullptr)));
  CHECK(catch_as<cudrv::invalid_argument_error>([&] { exec.launch(cudrv::stream_ref::legacy_default()); }));
  CHECK(catch_as<cudrv::invalid_argument_error>([] { cudrv::stream_capture c(cudrv::stream_ref::legacy_default()); }));
}

#if defined(CUDRV_TEST_INTERNALS)
TEST_CASE("graph node kinds: every enumerator has a name of its own, and no value reads past a table", "[graph]") {
  using cudrv::graph_node_kind;
  // The enumerators run from kernel (0) to other, the last; a kind added after other must extend this.
  std::set<std::string> names;
  for (int k = static_cast<int>(graph_node_kind::kernel); k <= static_cast<int>(graph_node_kind::other); ++k) {
    const char* name = cudrv::detail::graph_node_kind_name(static_cast<graph_node_kind>(k));
    INFO("graph_node_kind " << k);
    REQUIRE(name != nullptr);
    CHECK(std::string(name) != "unknown kind");
    CHECK(names.insert(name).second);
  }
  CHECK(names.size() == 13);
  CHECK(std::string(cudrv::detail::graph_node_kind_name(graph_node_kind::stream_memory_ops)) ==
        "stream memory operations");
  CHECK(std::string(cudrv::detail::graph_node_kind_name(graph_node_kind::other)) == "other");
  // Values no enumerator has (a cast) get a name too, read from no table.
  for (int k : {static_cast<int>(graph_node_kind::other) + 1, 99, -1}) {
    INFO("value " << k);
    CHECK(std::string(cudrv::detail::graph_node_kind_name(static_cast<graph_node_kind>(k))) == "unknown kind");
  }
  // The driver's types map to the kinds; a type cudrv does not name (external semaphores, a type a newer
  // driver adds) is other.
  CHECK(cudrv::detail::node_kind_of(CU_GRAPH_NODE_TYPE_BATCH_MEM_OP) == graph_node_kind::stream_memory_ops);
  CHECK(cudrv::detail::node_kind_of(CU_GRAPH_NODE_TYPE_CONDITIONAL) == graph_node_kind::conditional);
  CHECK(cudrv::detail::node_kind_of(CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL) == graph_node_kind::other);
  CHECK(cudrv::detail::node_kind_of(CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT) == graph_node_kind::other);
  CHECK(cudrv::detail::node_kind_of(99) == graph_node_kind::other);
}
#endif
