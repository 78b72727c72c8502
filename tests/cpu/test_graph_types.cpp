// Graphs without a GPU: the types' shape, flags, and what is refused before any driver call.
#include <catch2/catch.hpp>

#include <type_traits>

#include "support/test_support.hpp"

using cudax::test::catch_as;

TEST_CASE("graph types: ownership shapes and flag values", "[graph]") {
  STATIC_REQUIRE_FALSE(std::is_copy_constructible_v<cudax::graph>);
  STATIC_REQUIRE(std::is_nothrow_move_constructible_v<cudax::graph>);
  STATIC_REQUIRE(std::is_convertible_v<cudax::graph&, cudax::graph_ref>);
  STATIC_REQUIRE_FALSE(std::is_copy_constructible_v<cudax::graph_exec>);
  STATIC_REQUIRE(std::is_nothrow_move_constructible_v<cudax::graph_exec>);
  STATIC_REQUIRE_FALSE(std::is_copy_constructible_v<cudax::stream_capture>);
  STATIC_REQUIRE(std::is_trivially_copyable_v<cudax::graph_node_ref>);
  // Typed node handles convert to the untyped one, never between kinds or back.
  STATIC_REQUIRE(std::is_convertible_v<cudax::kernel_node, cudax::graph_node_ref>);
  STATIC_REQUIRE(std::is_convertible_v<cudax::mem_alloc_node, cudax::graph_node_ref>);
  STATIC_REQUIRE_FALSE(std::is_convertible_v<cudax::memcpy_node, cudax::kernel_node>);
  STATIC_REQUIRE_FALSE(std::is_convertible_v<cudax::graph_node_ref, cudax::kernel_node>);
  STATIC_REQUIRE(cudax::kernel_node::node_kind == cudax::graph_node_kind::kernel);
  STATIC_REQUIRE(std::is_trivially_copyable_v<cudax::conditional_handle>);
  STATIC_REQUIRE(sizeof(cudax::conditional_handle) == sizeof(unsigned long long));
  using flags = cudax::graph_instantiate_flags;
  CHECK(static_cast<unsigned>(flags::auto_free_on_launch | flags::upload) ==
        (CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD));
  CHECK(static_cast<unsigned>(flags::device_launch) == CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH);
  CHECK(static_cast<int>(cudax::capture_mode::relaxed) == CU_STREAM_CAPTURE_MODE_RELAXED);
  CHECK(static_cast<int>(cudax::capture_status::invalidated) == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
}

TEST_CASE("graphs need a driver: a clear error without one, and empty handles are refused first",
          "[graph][driverless]") {
  CUDAX_REQUIRE_DRIVERLESS();
  CHECK(catch_as<cudax::driver_unavailable_error>([] { cudax::graph g; }));
  auto empty = cudax::graph::from_native_handle(nullptr);
  CHECK(catch_as<cudax::invalid_argument_error>([&] { (void)empty.add_empty(); }));
  CHECK(catch_as<cudax::invalid_argument_error>([&] { (void)empty.instantiate(cudax::context_ref(static_cast<CUcontext>(nullptr)), {}); }));
  CHECK(catch_as<cudax::invalid_argument_error>(
      [&] { cudax::graph_builder b(empty, cudax::context_ref(static_cast<CUcontext>(nullptr))); }));
  auto exec = cudax::graph_exec::from_native_handle(nullptr, cudax::context_ref(static_cast<CUcontext>(nullptr)));
  CHECK(catch_as<cudax::invalid_argument_error>([&] { exec.launch(cudax::stream_ref::legacy_default()); }));
  CHECK(catch_as<cudax::invalid_argument_error>(
      [] { cudax::stream_capture c(cudax::stream_ref::legacy_default()); }));
}
