// One translation of launch_config into the driver's launch attributes (src/code/launch_attributes.hpp):
// the stream launch (cuLaunchKernelEx), the graph kernel node (cuGraphKernelNodeSetAttribute) and the
// cluster occupancy queries hand the driver the same shape and the same attributes for the same
// launch_config, as the stand-in driver (fake_cuda.cpp) records them.
#include <catch2/catch.hpp>

#include <cudrv/cudrv.hpp>

#include <array>
#include <cmath>
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

// A stream and a kernel without parameters on the stand-in's device 1 (compute capability 9.0).
struct stream_and_kernel {
  cudrv::test::fake_probe f;
  cudrv::device dev{1};
  cudrv::stream s{dev};
  cudrv::library lib{empty_kernel_ptx(), dev};
  cudrv::kernel k = lib.get_kernel("attrs_kernel");
};

}  // namespace

TEST_CASE(
    "launch attributes: the stream launch, the graph kernel node and the occupancy query hand the driver the same",
    "[fake-driver][launch-attributes]") {
  stream_and_kernel t;
  cudrv::test::fake_probe& f = t.f;
  const cudrv::device& dev = t.dev;
  cudrv::stream& s = t.s;
  const cudrv::kernel& k = t.k;
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

TEST_CASE("launch attributes: a refused cooperative launch is diagnosed in blocks per SM and, with clusters, in "
          "clusters",
          "[fake-driver][launch-attributes]") {
  // The stand-in: 100 SMs, 8 blocks of any shape per SM, 4 clusters at once (cuOccupancyMaxActiveClusters).
  stream_and_kernel t;
  cudrv::stream& s = t.s;
  const cudrv::kernel& k = t.k;
  // The driver refuses the launch as too large; what cudrv's error says about it is the diagnosis's.
  auto refused = [&](const cudrv::launch_config& config) {
    cudrv::test::fake_injection inject;
    const long long call = inject.find([&] { cudrv::launch(s, config, k); }, "cuLaunchKernelEx");
    REQUIRE(call > 0);
    inject.fail_call(call, CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
    auto e = catch_as<cudrv::launch_error>([&] { cudrv::launch(s, config, k); });
    REQUIRE(e);
    CHECK(inject.failed_api() == "cuLaunchKernelEx");
    CHECK(e->result() == CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
    return std::string(e->what());
  };
  SECTION("5 clusters of 2 blocks: within the blocks per SM, beyond the clusters resident at once") {
    const std::string what = refused({.grid = 10, .block = 32, .cluster = {2, 1, 1}, .cooperative = true});
    INFO("what(): " << what);
    CHECK(contains(what, "a cooperative launch of 5 clusters of 2 blocks exceeds the 4 clusters that can be "
                         "resident at once"));
    CHECK_FALSE(contains(what, "blocks that can be resident"));
    // The occupancy query was handed the launch as it is: its cluster shape and the cooperative attribute.
    const handed query = handed_to("cuOccupancyMaxActiveClusters");
    CHECK(query.shape == std::array<unsigned, 7>{10, 1, 1, 32, 1, 1, 0});
    CHECK(as_text(query.attributes) ==
          as_text(
              {attribute(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
                         [](CUlaunchAttributeValue& v) { v.clusterDim.x = 2, v.clusterDim.y = 1, v.clusterDim.z = 1; }),
               attribute(CU_LAUNCH_ATTRIBUTE_COOPERATIVE, [](CUlaunchAttributeValue& v) { v.cooperative = 1; })}));
  }
  SECTION("4 clusters fit: nothing said about clusters") {
    const std::string what = refused({.grid = 8, .block = 32, .cluster = {2, 1, 1}, .cooperative = true});
    INFO("what(): " << what);
    CHECK_FALSE(contains(what, "clusters that can be resident"));
  }
  SECTION("without clusters: 801 blocks against 8 per SM x 100 SMs") {
    const std::string what = refused({.grid = 801, .block = 32, .cooperative = true});
    INFO("what(): " << what);
    CHECK(contains(what, "a cooperative launch of 801 blocks exceeds the 800 blocks that can be resident at once "
                         "(8 per SM x 100 SMs"));
  }
}

// --- issue 34 part 1: every launch attribute ------------------------------------------------------------

namespace {

// A configuration with every launch attribute set (the values differ from the defaults), for device 1.
struct everything {
  cudrv::event programmatic;
  cudrv::event completion;
  cudrv::launch_config config;

  explicit everything(const cudrv::device& dev)
      : programmatic(dev),
        completion(dev),
        config{.grid = {8, 2},
               .block = 64,
               .cluster = {2, 1, 1},
               .cooperative = true,
               .programmatic_stream_serialization = true,
               .priority = -1,
               .access_policy = {.base = reinterpret_cast<const void*>(0x10000),
                                 .bytes = 4u << 20,
                                 .hit_ratio = 0.5f,
                                 .hit = cudrv::access_property::persisting,
                                 .miss = cudrv::access_property::streaming},
               .cluster_scheduling = cudrv::cluster_scheduling_policy::spread,
               .preferred_cluster = {4, 1, 1},
               .programmatic_event = {.event = programmatic, .trigger_at_block_start = true},
               .completion_event = {.event = completion},
               .memory_sync_domain = cudrv::memory_sync_domain::remote,
               .memory_sync_domain_map = cudrv::memory_sync_domain_map{0, 2},
               .shared_memory_carveout = 25,
               .device_updatable = false,
               .nvlink_util_centric_scheduling = true} {}
};

// Each attribute of everything, as the driver should get it, written out here on its own.
std::vector<CUlaunchAttribute> expected_attributes(const everything& e, bool graph, bool occupancy) {
  std::vector<CUlaunchAttribute> out;
  out.push_back(attribute(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, [](CUlaunchAttributeValue& v) {
    v.clusterDim.x = 2, v.clusterDim.y = 1, v.clusterDim.z = 1;
  }));
  out.push_back(attribute(CU_LAUNCH_ATTRIBUTE_COOPERATIVE, [](CUlaunchAttributeValue& v) { v.cooperative = 1; }));
  if (!graph) {
    out.push_back(attribute(CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
                            [](CUlaunchAttributeValue& v) { v.programmaticStreamSerializationAllowed = 1; }));
  }
  out.push_back(attribute(CU_LAUNCH_ATTRIBUTE_PRIORITY, [](CUlaunchAttributeValue& v) { v.priority = -1; }));
  if (!occupancy) {
    out.push_back(attribute(CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, [](CUlaunchAttributeValue& v) {
      v.accessPolicyWindow.base_ptr = reinterpret_cast<void*>(0x10000);
      v.accessPolicyWindow.num_bytes = 4u << 20;
      v.accessPolicyWindow.hitRatio = 0.5f;
      v.accessPolicyWindow.hitProp = CU_ACCESS_PROPERTY_PERSISTING;
      v.accessPolicyWindow.missProp = CU_ACCESS_PROPERTY_STREAMING;
    }));
  }
  out.push_back(attribute(CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE, [](CUlaunchAttributeValue& v) {
    v.clusterSchedulingPolicyPreference = CU_CLUSTER_SCHEDULING_POLICY_SPREAD;
  }));
  if (!occupancy) {
    out.push_back(attribute(CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION, [](CUlaunchAttributeValue& v) {
      v.preferredClusterDim.x = 4, v.preferredClusterDim.y = 1, v.preferredClusterDim.z = 1;
    }));
  }
  if (!graph && !occupancy) {
    out.push_back(attribute(CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT, [&](CUlaunchAttributeValue& v) {
      v.programmaticEvent.event = e.programmatic.native_handle();
      v.programmaticEvent.flags = 0;
      v.programmaticEvent.triggerAtBlockStart = 1;
    }));
    out.push_back(attribute(CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT, [&](CUlaunchAttributeValue& v) {
      v.launchCompletionEvent.event = e.completion.native_handle();
      v.launchCompletionEvent.flags = 0;
    }));
  }
  if (!occupancy) {
    out.push_back(attribute(CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN,
                            [](CUlaunchAttributeValue& v) { v.memSyncDomain = CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE; }));
    out.push_back(attribute(CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP, [](CUlaunchAttributeValue& v) {
      v.memSyncDomainMap.default_ = 0;
      v.memSyncDomainMap.remote = 2;
    }));
  }
  out.push_back(attribute(CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                          [](CUlaunchAttributeValue& v) { v.sharedMemCarveout = 25; }));
  if (!occupancy) {
    out.push_back(attribute(CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING,
                            [](CUlaunchAttributeValue& v) { v.nvlinkUtilCentricScheduling = 1; }));
  }
  if (graph) {
    out.push_back(attribute(CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE,
                            [](CUlaunchAttributeValue& v) { v.deviceUpdatableKernelNode.deviceUpdatable = 1; }));
  }
  return out;
}

// The graph's form of everything: no programmatic stream serialization or events (edges in a graph),
// a device-updatable node.
cudrv::launch_config for_graph(cudrv::launch_config c) {
  c.programmatic_stream_serialization = false;
  c.programmatic_event = {};
  c.completion_event = {};
  c.device_updatable = true;
  return c;
}

}  // namespace

TEST_CASE("launch attributes: every attribute reaches the driver with its id and value on each path that carries it",
          "[fake-driver][launch-attributes]") {
  cudrv::test::fake_probe f;
  const cudrv::device dev(1);
  cudrv::stream s(dev);
  cudrv::library lib(empty_kernel_ptx(), dev);
  const cudrv::kernel k = lib.get_kernel("attrs_kernel");
  const cudrv::kernel_ref bare = cudrv::kernel_ref::from_native_handle(k.native_handle());
  const everything e(dev);
  REQUIRE(e.config.needs_extended_launch());
  const std::array<unsigned, 7> shape = {8, 2, 1, 64, 1, 1, 0};

  SECTION("a stream launch: all but the device-updatable node (graphs only)") {
    cudrv::launch(s, e.config, k);
    const handed stream = handed_to("cuLaunchKernelEx");
    CHECK(stream.shape == shape);
    CHECK(as_text(stream.attributes) == as_text(expected_attributes(e, false, false)));
  }
  SECTION("a graph kernel node: no stream-only attribute, the device-updatable node last, and its handle") {
    cudrv::graph g;
    cudrv::graph_builder b(g, dev);
    const cudrv::kernel_node node = cudrv::launch(b, for_graph(e.config), bare);
    const handed graph = handed_to("cuGraphKernelNodeSetAttribute");
    CHECK(graph.shape == shape);
    CHECK(as_text(graph.attributes) == as_text(expected_attributes(e, true, false)));
    CHECK(node.device_updatable_handle() == reinterpret_cast<CUgraphDeviceNode>(0xde0000));  // the fake's
  }
  SECTION("the occupancy queries: the attributes that shape residency only") {
    CHECK(k.max_active_clusters(dev, e.config) == 4);
    CHECK(as_text(handed_to("cuOccupancyMaxActiveClusters").attributes) ==
          as_text(expected_attributes(e, false, true)));
    CHECK(k.max_potential_cluster_size(dev, e.config) == 8);
    std::vector<CUlaunchAttribute> without_cluster = expected_attributes(e, false, true);
    without_cluster.erase(without_cluster.begin());
    CHECK(as_text(handed_to("cuOccupancyMaxPotentialClusterSize").attributes) == as_text(without_cluster));
  }
  SECTION("a kernel node's attributes changed later, for graph_exec::update to carry") {
    cudrv::graph g;
    cudrv::graph_builder b(g, dev);
    const cudrv::kernel_node node = cudrv::launch(b, {.grid = 8, .block = 64}, bare);
    CHECK(handed_to("cuGraphKernelNodeSetAttribute").attributes.empty());
    CHECK(catch_as<cudrv::invalid_argument_error>([&] { (void)node.device_updatable_handle(); }));
    node.set_launch_attributes({.grid = 8, .block = 64, .priority = 3, .shared_memory_carveout = 0});
    CHECK(as_text(handed_to("cuGraphKernelNodeSetAttribute").attributes) ==
          as_text({attribute(CU_LAUNCH_ATTRIBUTE_PRIORITY, [](CUlaunchAttributeValue& v) { v.priority = 3; }),
                   attribute(CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                             [](CUlaunchAttributeValue& v) { v.sharedMemCarveout = 0; })}));
    auto refused = catch_as<cudrv::not_supported_error>(
        [&] { node.set_launch_attributes({.completion_event = {.event = e.completion}}); });
    REQUIRE(refused);
    CHECK(contains(refused->what(), "launch-completion event"));
  }
}

namespace {

// Whether launching c on s (and adding it to a graph, and asking an occupancy query, where asked) is
// refused with an E whose message names attribute and says what, before the driver is called.
template <class E>
void check_refused(const cudrv::launch_config& c, const cudrv::stream& s, const cudrv::kernel& k,
                   const std::string& attribute, const std::string& what) {
  cudrv::test::fake_probe f;
  INFO(attribute << ": " << what);
  const long long launches = f.counter("launches");
  auto e = catch_as<E>([&] { cudrv::launch(s, c, k); });
  REQUIRE(e);
  INFO("what(): " << e->what());
  CHECK(contains(e->what(), "launch attribute '" + attribute + "'"));
  CHECK(contains(e->what(), what));
  CHECK(f.counter("launches") == launches);
}

}  // namespace

TEST_CASE("launch attributes: values cuda.h documents a rule for are refused before the driver, naming the attribute",
          "[fake-driver][launch-attributes]") {
  const cudrv::device dev(1);
  cudrv::stream s(dev);
  cudrv::library lib(empty_kernel_ptx(), dev);
  const cudrv::kernel k = lib.get_kernel("attrs_kernel");
  const auto* base = reinterpret_cast<const void*>(0x10000);
  using invalid = cudrv::invalid_argument_error;

  check_refused<invalid>({.grid = 4, .block = 32, .access_policy = {.base = base, .bytes = 1024, .hit_ratio = 1.5f}}, s,
                         k, "access-policy window", "hit_ratio 1.5");
  check_refused<invalid>({.grid = 4,
                          .block = 32,
                          .access_policy = {.base = base, .bytes = 1024, .hit_ratio = std::nanf("")}},
                         s, k, "access-policy window", "outside [0, 1]");
  check_refused<invalid>({.grid = 4, .block = 32, .access_policy = {.bytes = 1024}}, s, k, "access-policy window",
                         "both a base address and a size");
  check_refused<invalid>({.grid = 4, .block = 32, .access_policy = {.base = base, .bytes = 134213633}}, s, k,
                         "access-policy window", "exceed the device's maximum window of 134213632 bytes");
  check_refused<invalid>({.grid = 4,
                          .block = 32,
                          .access_policy = {.base = base, .bytes = 1024, .miss = cudrv::access_property::persisting}},
                         s, k, "access-policy window", "normal or streaming");
  check_refused<invalid>({.grid = 4, .block = 32, .preferred_cluster = 4}, s, k, "preferred cluster dimensions",
                         "needs launch_config::cluster");
  check_refused<invalid>({.grid = 12, .block = 32, .cluster = 2, .preferred_cluster = 3}, s, k,
                         "preferred cluster dimensions", "must be a multiple");
  check_refused<invalid>({.grid = {4, 1, 2}, .block = 32, .cluster = {2, 1, 1}, .preferred_cluster = {2, 1, 2}}, s, k,
                         "preferred cluster dimensions", "must be equal to the cluster's 1");
  check_refused<invalid>({.grid = 6, .block = 32, .cluster = 2, .preferred_cluster = 4}, s, k,
                         "preferred cluster dimensions",
                         "grid extent x = 6 is not a multiple of the preferred extent 4");
  cudrv::event moved(dev);
  cudrv::event taken = std::move(moved);
  check_refused<invalid>({.grid = 4, .block = 32, .programmatic_event = {.event = moved}}, s, k, "programmatic event",
                         "the event is empty");
  check_refused<invalid>({.grid = 4, .block = 32, .completion_event = {.event = taken, .record_flags = 1}}, s, k,
                         "launch-completion event", "record_flags 1");
  check_refused<invalid>({.grid = 4, .block = 32, .memory_sync_domain_map = cudrv::memory_sync_domain_map{0, 4}}, s, k,
                         "memory-sync domain map", "domain id 4 is not below device 1's 4 domains");
  check_refused<invalid>({.grid = 4, .block = 32, .shared_memory_carveout = 101}, s, k,
                         "preferred shared-memory carveout", "101 is not a percentage 0..100");
  check_refused<invalid>({.grid = 4,
                          .block = 32,
                          .cluster_scheduling = static_cast<cudrv::cluster_scheduling_policy>(7)},
                         s, k, "cluster scheduling policy", "unknown cluster_scheduling_policy value 7");
  check_refused<invalid>({.grid = 4, .block = 32, .device_updatable = true}, s, k, "device-updatable kernel node",
                         "capturing stream");

  SECTION("a device without L2 windows: not supported, naming the device attribute") {
    auto* no_l2 = cudrv::test::fake_hook<void(int)>("fake_cuda_set_no_l2_persistence");
    no_l2(1);
    check_refused<cudrv::not_supported_error>({.grid = 4, .block = 32, .access_policy = {.base = base, .bytes = 1024}},
                                              s, k, "access-policy window",
                                              "CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE is 0");
    no_l2(0);
  }
  SECTION("a graph kernel node: the stream-only events refused, no node added") {
    cudrv::test::fake_probe f;
    const cudrv::kernel_ref bare = cudrv::kernel_ref::from_native_handle(k.native_handle());
    cudrv::graph g;
    cudrv::graph_builder b(g, dev);
    cudrv::event ev(dev);
    const long long nodes = f.counter("kernel_nodes");
    auto programmatic = catch_as<cudrv::not_supported_error>(
        [&] { (void)cudrv::launch(b, {.grid = 4, .block = 32, .programmatic_event = {.event = ev}}, bare); });
    auto completion = catch_as<cudrv::not_supported_error>(
        [&] { (void)cudrv::launch(b, {.grid = 4, .block = 32, .completion_event = {.event = ev}}, bare); });
    auto window = catch_as<invalid>([&] {
      (void)cudrv::launch(b, {.grid = 4, .block = 32, .access_policy = {.base = base, .bytes = 1, .hit_ratio = -1}},
                          bare);
    });
    REQUIRE(programmatic);
    REQUIRE(completion);
    REQUIRE(window);
    CHECK(contains(programmatic->what(), "launch attribute 'programmatic event'"));
    CHECK(contains(completion->what(), "launch attribute 'launch-completion event'"));
    CHECK(contains(window->what(), "hit_ratio -1"));
    CHECK(f.counter("kernel_nodes") == nodes);
  }
  SECTION("an occupancy query: the carveout it carries is checked") {
    auto e = catch_as<invalid>([&] {
      (void)k.max_active_clusters(dev, {.grid = 4, .block = 32, .cluster = 2, .shared_memory_carveout = 200});
    });
    REQUIRE(e);
    CHECK(contains(e->what(), "200 is not a percentage"));
  }
}

TEST_CASE("scoped_persisting_l2_limit sets the limit for its scope and restores it, reset_persisting_l2 resets",
          "[fake-driver][launch-attributes][persisting-l2]") {
  cudrv::test::fake_probe f;
  const cudrv::device dev(1);
  const cudrv::context_ref ctx = dev.primary_context();
  const std::size_t before = ctx.limit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE);
  {
    cudrv::scoped_persisting_l2_limit l2(ctx, 8u << 20);
    CHECK(l2.previous() == before);
    CHECK(l2.bytes() == 8u << 20);
    CHECK(ctx.limit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE) == 8u << 20);
    {
      cudrv::scoped_persisting_l2_limit most(ctx, 32768000);
      CHECK(ctx.limit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE) == 32768000);
    }
    CHECK(ctx.limit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE) == 8u << 20);  // the inner scope restored the outer's
  }
  CHECK(ctx.limit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE) == before);

  const long long sets = f.counter("persisting_l2_limit_sets");
  auto too_big = catch_as<cudrv::invalid_argument_error>([&] { cudrv::scoped_persisting_l2_limit l2(ctx, 32768001); });
  REQUIRE(too_big);
  CHECK(contains(too_big->what(), "32768001 bytes exceed device 1's maximum persisting-L2 size of 32768000 bytes"));
  CHECK(f.counter("persisting_l2_limit_sets") == sets);  // refused before the driver
  auto* no_l2 = cudrv::test::fake_hook<void(int)>("fake_cuda_set_no_l2_persistence");
  no_l2(1);
  auto none = catch_as<cudrv::not_supported_error>([&] { cudrv::scoped_persisting_l2_limit l2(ctx, 1024); });
  no_l2(0);
  REQUIRE(none);
  CHECK(contains(none->what(), "device 1 has no persisting L2"));
  CHECK(f.counter("persisting_l2_limit_sets") == sets);

  const long long resets = f.counter("persisting_l2_resets");
  cudrv::reset_persisting_l2(ctx);
  CHECK(f.counter("persisting_l2_resets") == resets + 1);
}

TEST_CASE("fake driver 12.4: attributes newer than the driver are refused before it, naming the CUDA version",
          "[.][fake-driver-12.4]") {
  cudrv::test::fake_probe f;
  REQUIRE(cudrv::driver::version() == 12040);
  const cudrv::device dev(1);
  cudrv::stream s(dev);
  cudrv::library lib(empty_kernel_ptx(), dev);
  const cudrv::kernel k = lib.get_kernel("attrs_kernel");
  check_refused<cudrv::not_supported_error>({.grid = 8, .block = 32, .cluster = 2, .preferred_cluster = 4}, s, k,
                                            "preferred cluster dimensions",
                                            "the driver supports CUDA 12.4; the attribute needs CUDA 12.8");
  check_refused<cudrv::not_supported_error>({.grid = 8, .block = 32, .nvlink_util_centric_scheduling = true}, s, k,
                                            "NVLink-util-centric scheduling", "the attribute needs CUDA 13.0");
  // What 12.4 has reaches it.
  const long long launches = f.counter("launches");
  cudrv::launch(s, {.grid = 8, .block = 32, .shared_memory_carveout = 10}, k);
  CHECK(f.counter("launches") == launches + 1);
}

TEST_CASE("fake driver 12.3: a device-updatable node is refused before the driver, a launch-completion event is not",
          "[.][fake-driver-12.3]") {
  cudrv::test::fake_probe f;
  REQUIRE(cudrv::driver::version() == 12030);
  const cudrv::device dev(1);
  cudrv::stream s(dev);
  cudrv::library lib(empty_kernel_ptx(), dev);
  const cudrv::kernel k = lib.get_kernel("attrs_kernel");
  const cudrv::kernel_ref bare = cudrv::kernel_ref::from_native_handle(k.native_handle());
  cudrv::graph g;
  cudrv::graph_builder b(g, dev);
  const long long nodes = f.counter("kernel_nodes");
  auto e = catch_as<cudrv::not_supported_error>(
      [&] { (void)cudrv::launch(b, {.grid = 8, .block = 32, .device_updatable = true}, bare); });
  REQUIRE(e);
  CHECK(contains(e->what(), "launch attribute 'device-updatable kernel node': the driver supports CUDA 12.3"));
  CHECK(f.counter("kernel_nodes") == nodes);
  cudrv::event started(dev);
  const long long launches = f.counter("launches");
  cudrv::launch(s, {.grid = 8, .block = 32, .completion_event = {.event = started}}, k);
  CHECK(f.counter("launches") == launches + 1);
}
