// One translation of launch_config into the driver's launch attributes (src/code/launch_attributes.hpp):
// the stream launch (cuLaunchKernelEx), the graph kernel node (cuGraphKernelNodeSetAttribute) and the
// cluster occupancy queries hand the driver the same shape and the same attributes for the same
// launch_config, as the stand-in driver (fake_cuda.cpp) records them.
#include <catch2/catch.hpp>

#include <cudrv/cudrv.hpp>

#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "fake_driver/fake_hooks.hpp"
#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;

namespace {

// A kernel without parameters, for device 1 (compute capability 9.0, which has clusters).
cudrv::object_code empty_kernel_ptx() {
  return cudrv::object_code(cudrv::code_kind::ptx,
                            ".version 8.0\n.target sm_90\n.address_size 64\n"
                            ".visible .entry attrs_kernel()\n{\n  ret;\n}\n",
                            "attrs_kernel.ptx");
}

// What one entry point was handed: the shape and the launch attributes.
struct handed {
  std::array<unsigned, 7> shape{};  // grid x, y, z, block x, y, z, dynamic shared memory
  std::vector<CUlaunchAttribute> attributes;
};

// What the fake recorded for api's last call; the test fails when api was never called.
handed handed_to(const char* api) {
  auto* read =
      cudrv::test::fake_hook<int(const char*, unsigned*, CUlaunchAttribute*, int)>("fake_cuda_launch_attributes");
  handed out;
  const int n = read(api, out.shape.data(), nullptr, 0);
  INFO(api);
  REQUIRE(n >= 0);
  out.attributes.resize(static_cast<std::size_t>(n));
  REQUIRE(read(api, out.shape.data(), out.attributes.data(), n) == n);
  return out;
}

// The attributes as comparable text: the id and the value's bytes.
std::vector<std::string> as_text(const std::vector<CUlaunchAttribute>& attributes) {
  std::vector<std::string> out;
  for (const CUlaunchAttribute& a : attributes) {
    std::string text = std::to_string(static_cast<int>(a.id)) + ":";
    const auto* bytes = reinterpret_cast<const unsigned char*>(&a.value);
    for (std::size_t i = 0; i < sizeof a.value; ++i) {
      text += std::to_string(bytes[i]) + (i + 1 < sizeof a.value ? "," : "");
    }
    out.push_back(std::move(text));
  }
  return out;
}

// The attribute the driver should get for id with value set by fill, written out here on its own.
template <class Fill>
CUlaunchAttribute attribute(CUlaunchAttributeID id, Fill fill) {
  CUlaunchAttribute a{};
  a.id = id;
  fill(a.value);
  return a;
}

}  // namespace

TEST_CASE(
    "launch attributes: the stream launch, the graph kernel node and the occupancy query hand the driver the same",
    "[fake-driver][launch-attributes]") {
  cudrv::test::fake_probe f;
  const cudrv::device dev(1);
  cudrv::stream s(dev);
  cudrv::library lib(empty_kernel_ptx(), dev);
  const cudrv::kernel k = lib.get_kernel("attrs_kernel");
  // The graph node takes a view without the library's bookkeeping (the fake has no user objects, which
  // keep a library loaded for a graph).
  const cudrv::kernel_ref bare = cudrv::kernel_ref::from_native_handle(k.native_handle());

  const cudrv::launch_config config{.grid = {4, 2},
                                    .block = {32, 2},
                                    .dynamic_shared_memory = 1024,
                                    .cluster = {2, 1, 1},
                                    .cooperative = true,
                                    .priority = -1};
  const std::vector<CUlaunchAttribute> expected = {
      attribute(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
                [](CUlaunchAttributeValue& v) { v.clusterDim.x = 2, v.clusterDim.y = 1, v.clusterDim.z = 1; }),
      attribute(CU_LAUNCH_ATTRIBUTE_COOPERATIVE, [](CUlaunchAttributeValue& v) { v.cooperative = 1; }),
      attribute(CU_LAUNCH_ATTRIBUTE_PRIORITY, [](CUlaunchAttributeValue& v) { v.priority = -1; }),
  };
  const std::array<unsigned, 7> shape = {4, 2, 1, 32, 2, 1, 1024};

  const long long launches = f.counter("launches");
  cudrv::launch(s, config, k);
  CHECK(f.counter("launches") == launches + 1);
  cudrv::graph g;
  cudrv::graph_builder b(g, dev);
  (void)cudrv::launch(b, config, bare);
  CHECK(k.max_active_clusters(dev, config) == 4);  // the fake's answer

  const handed stream = handed_to("cuLaunchKernelEx");
  const handed node = handed_to("cuGraphKernelNodeSetAttribute");
  const handed occupancy = handed_to("cuOccupancyMaxActiveClusters");
  CHECK(stream.shape == shape);
  CHECK(node.shape == shape);
  CHECK(occupancy.shape == shape);
  CHECK(as_text(stream.attributes) == as_text(expected));
  CHECK(as_text(node.attributes) == as_text(expected));
  CHECK(as_text(occupancy.attributes) == as_text(expected));

  SECTION("the potential cluster size: the same attributes but the cluster, which it ignores") {
    CHECK(k.max_potential_cluster_size(dev, config) == 8);  // the fake's answer
    const handed potential = handed_to("cuOccupancyMaxPotentialClusterSize");
    CHECK(potential.shape == shape);
    CHECK(as_text(potential.attributes) == as_text({expected[1], expected[2]}));
  }
  SECTION("programmatic stream serialization: a stream launch and occupancy attribute, refused by the graph") {
    cudrv::launch_config serialized = config;
    serialized.programmatic_stream_serialization = true;
    std::vector<CUlaunchAttribute> with_serialization = expected;
    with_serialization.insert(with_serialization.begin() + 2,
                              attribute(CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
                                        [](CUlaunchAttributeValue& v) {
                                          v.programmaticStreamSerializationAllowed = 1;
                                        }));
    cudrv::launch(s, serialized, k);
    CHECK(k.max_active_clusters(dev, serialized) == 4);
    CHECK(as_text(handed_to("cuLaunchKernelEx").attributes) == as_text(with_serialization));
    CHECK(as_text(handed_to("cuOccupancyMaxActiveClusters").attributes) == as_text(with_serialization));
    const long long nodes = f.counter("kernel_nodes");
    CHECK(catch_as<cudrv::not_supported_error>([&] { (void)cudrv::launch(b, serialized, bare); }));
    CHECK(f.counter("kernel_nodes") == nodes);
  }
  SECTION("a plain configuration: the plain launch, a node and a query without attributes") {
    const cudrv::launch_config plain{.grid = 3, .block = 64};
    cudrv::launch(s, plain, k);
    CHECK(f.counter("launches") == launches + 2);
    CHECK(handed_to("cuLaunchKernelEx").shape == shape);  // not called again: cuLaunchKernel took it
    (void)cudrv::launch(b, plain, bare);
    (void)k.max_potential_cluster_size(dev, plain);
    const std::array<unsigned, 7> plain_shape = {3, 1, 1, 64, 1, 1, 0};
    CHECK(handed_to("cuGraphKernelNodeSetAttribute").shape == plain_shape);
    CHECK(handed_to("cuGraphKernelNodeSetAttribute").attributes.empty());
    CHECK(handed_to("cuOccupancyMaxPotentialClusterSize").shape == plain_shape);
    CHECK(handed_to("cuOccupancyMaxPotentialClusterSize").attributes.empty());
  }
}

TEST_CASE("launch attributes: a kernel node names the attribute the driver refused",
          "[fake-driver][launch-attributes]") {
  cudrv::test::fake_probe f;
  const cudrv::device dev(1);
  cudrv::library lib(empty_kernel_ptx(), dev);
  const cudrv::kernel_ref bare = cudrv::kernel_ref::from_native_handle(lib.get_kernel("attrs_kernel").native_handle());
  const cudrv::launch_config config{.grid = 2, .block = 32, .cluster = {2, 1, 1}, .cooperative = true, .priority = 0};
  cudrv::graph g;
  cudrv::graph_builder b(g, dev);
  // The second attribute (cooperative) is refused: the error names it, not the first one set.
  cudrv::test::fake_injection inject;
  const long long call = inject.find([&] { (void)cudrv::launch(b, config, bare); }, "cuGraphKernelNodeSetAttribute", 2);
  REQUIRE(call > 0);
  inject.fail_call(call, CUDA_ERROR_INVALID_VALUE);
  const long long nodes = f.counter("kernel_nodes");
  auto e = catch_as<cudrv::launch_error>([&] { (void)cudrv::launch(b, config, bare); });
  REQUIRE(e);
  INFO("what(): " << e->what());
  CHECK(inject.failed_api() == "cuGraphKernelNodeSetAttribute");
  CHECK(e->result() == CUDA_ERROR_INVALID_VALUE);
  CHECK(contains(e->what(), "the driver refused a launch attribute of the kernel node (cooperative)"));
  CHECK(f.counter("kernel_nodes") == nodes + 1);
  CHECK(f.counter("destroyed_kernel_nodes") >= 1);  // the half-configured node was removed
}
