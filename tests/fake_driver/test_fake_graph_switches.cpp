// Graphs against the stand-in driver (issue 34 part 6): nodes of an executable switched on and off,
// capture into an existing graph, and graphs instantiated for device launch. The fake runs no work: these
// cases check what cudrv refuses before the driver (with the counters of the calls that reached it) and
// what reaches the driver.
#include <catch2/catch.hpp>

#include <cudrv/cudrv.hpp>

#include <cstdlib>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "fake_driver/fake_hooks.hpp"
#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;

namespace {

// Makes the fake accept instantiations for the scope (it refuses them by default).
struct accepting_instantiations {
  accepting_instantiations() { cudrv::test::fake_hook<void(int)>("fake_cuda_accept_instantiations")(1); }
  ~accepting_instantiations() { cudrv::test::fake_hook<void(int)>("fake_cuda_accept_instantiations")(0); }
  accepting_instantiations(const accepting_instantiations&) = delete;
  accepting_instantiations& operator=(const accepting_instantiations&) = delete;
};

// An empty node of g that the fake reports as a node of type (the fake makes no kernel, copy or fill node
// without a kernel or memory).
cudrv::graph_node_ref node_of_type(cudrv::graph& g, int type) {
  static auto* set_type = cudrv::test::fake_hook<void(CUgraphNode, int)>("fake_cuda_set_node_type");
  const cudrv::graph_node_ref n = g.add_empty();
  set_type(n.native_handle(), type);
  return n;
}

template <class E, class Fn>
E refused_before_driver(cudrv::test::fake_probe& f, Fn&& fn) {
  const long long failed = f.counter("failed_calls");
  auto e = catch_as<E>(std::forward<Fn>(fn));
  REQUIRE(e.has_value());
  INFO("what(): " << e->what());
  CHECK(f.counter("failed_calls") == failed);  // no driver call was refused: the refusal is cudrv's
  return *e;
}

}  // namespace

// Switching typed nodes of other kinds does not compile.
template <class Exec, class Node>
concept can_switch = requires(const Exec& e, Node n) {
  e.set_enabled(n, false);
};
template <class Exec, class Node>
concept can_query = requires(const Exec& e, Node n) {
  e.enabled(n);
};
static_assert(can_switch<cudrv::graph_exec, cudrv::kernel_node>);
static_assert(can_switch<cudrv::graph_exec, cudrv::memcpy_node>);
static_assert(can_switch<cudrv::graph_exec_ref, cudrv::memset_node>);
static_assert(can_switch<cudrv::graph_exec, cudrv::graph_node_ref>);
static_assert(!can_switch<cudrv::graph_exec, cudrv::host_node>);
static_assert(!can_switch<cudrv::graph_exec, cudrv::empty_node>);
static_assert(!can_switch<cudrv::graph_exec_ref, cudrv::mem_alloc_node>);
static_assert(!can_query<cudrv::graph_exec, cudrv::child_graph_node>);
static_assert(can_query<cudrv::graph_exec, cudrv::kernel_node>);

// A capture into an existing graph keeps its handle: a temporary graph does not compile.
static_assert(std::is_constructible_v<cudrv::stream_capture, cudrv::stream_ref, cudrv::graph&,
                                      std::vector<cudrv::graph_node_ref>>);
static_assert(!std::is_constructible_v<cudrv::stream_capture, cudrv::stream_ref, cudrv::graph,
                                       std::vector<cudrv::graph_node_ref>>);
static_assert(!std::is_constructible_v<cudrv::stream_capture, cudrv::stream_ref, cudrv::graph&&,
                                       std::vector<cudrv::graph_node_ref>, std::vector<cudrv::edge_data>>);
static_assert(std::is_trivially_copyable_v<cudrv::device_graph_exec> &&
              sizeof(cudrv::device_graph_exec) == sizeof(CUgraphExec));

TEST_CASE("graph_exec::set_enabled: kernel, memcpy and memset nodes reach the driver, others are refused first",
          "[fake-driver][graph][issue34]") {
  cudrv::test::fake_probe f;
  accepting_instantiations accept;
  const cudrv::device dev(1);
  cudrv::graph g;
  const auto kernel = node_of_type(g, CU_GRAPH_NODE_TYPE_KERNEL);
  const auto memset = node_of_type(g, CU_GRAPH_NODE_TYPE_MEMSET);
  const auto host = node_of_type(g, CU_GRAPH_NODE_TYPE_HOST);
  const auto empty = g.add_empty({kernel});
  cudrv::graph_exec exec = g.instantiate(dev);
  REQUIRE(exec);

  const long long switches = f.counter("node_switches");
  CHECK(exec.enabled(kernel));
  exec.set_enabled(kernel, false);
  CHECK_FALSE(exec.enabled(kernel));
  CHECK(exec.enabled(memset));
  // A view carries the graph too, and switches the same executable.
  const cudrv::graph_exec_ref view = exec;
  view.set_enabled(cudrv::kernel_node::from_native_handle(kernel.native_handle()), true);
  CHECK(exec.enabled(kernel));
  CHECK(f.counter("node_switches") == switches + 2);

  for (const cudrv::graph_node_ref& n : std::vector<cudrv::graph_node_ref>{host, empty}) {
    const auto e = refused_before_driver<cudrv::invalid_argument_error>(f, [&] { exec.set_enabled(n, false); });
    CHECK(contains(e.what(), n == host ? "(host)" : "(empty)"));
    CHECK(contains(e.what(), "only kernel, memcpy and memset nodes"));
    CHECK(e.api() == "cudrv::graph_exec::set_enabled");
    const auto q = refused_before_driver<cudrv::invalid_argument_error>(f, [&] { (void)exec.enabled(n); });
    CHECK(q.api() == "cudrv::graph_exec::enabled");
  }
  CHECK(f.counter("node_switches") == switches + 2);
}

TEST_CASE("graph_exec::set_enabled: a node of another graph, a null node and an empty executable are refused first",
          "[fake-driver][graph][issue34]") {
  cudrv::test::fake_probe f;
  accepting_instantiations accept;
  const cudrv::device dev(1);
  cudrv::graph g;
  cudrv::graph other;
  (void)node_of_type(g, CU_GRAPH_NODE_TYPE_KERNEL);
  const auto foreign = node_of_type(other, CU_GRAPH_NODE_TYPE_KERNEL);
  cudrv::graph_exec exec = g.instantiate(dev);
  const long long switches = f.counter("node_switches");

  const auto e = refused_before_driver<cudrv::invalid_argument_error>(f, [&] { exec.set_enabled(foreign, false); });
  CHECK(contains(e.what(), "is not a node of the graph this executable was instantiated from"));
  CHECK(contains(e.what(), "(kernel)"));
  const auto null = refused_before_driver<cudrv::invalid_argument_error>(f, [&] {
    exec.set_enabled(cudrv::graph_node_ref::from_native_handle(nullptr), false);
  });
  CHECK(contains(null.what(), "the node is empty"));

  // An adopted executable does not know its graph: the driver checks, and its refusal names the node.
  const auto adopted = cudrv::graph_exec_ref::from_native_handle(exec.native_handle(), dev.primary_context());
  const auto driver = catch_as<cudrv::error>([&] { adopted.set_enabled(foreign, false); });
  REQUIRE(driver.has_value());
  CHECK(driver->api() == "cuGraphNodeSetEnabled");
  CHECK(driver->result() == CUDA_ERROR_INVALID_VALUE);
  CHECK(contains(driver->what(), "(kernel)"));

  cudrv::graph_exec moved = std::move(exec);
  const auto empty = refused_before_driver<cudrv::invalid_argument_error>(f, [&] {
    exec.set_enabled(foreign, false);
  });  // NOLINT(bugprone-use-after-move): the refusal is the point
  CHECK(contains(empty.what(), "the executable graph is empty"));
  CHECK(f.counter("node_switches") == switches);
  moved.set_enabled(g.nodes().front(), false);  // the moved-to owner kept the graph
  CHECK(f.counter("node_switches") == switches + 1);
}

TEST_CASE("device launch: the rules of cuda.h are checked before the driver, and device_handle needs the flag",
          "[fake-driver][graph][issue34]") {
  cudrv::test::fake_probe f;
  accepting_instantiations accept;
  const cudrv::device dev(1);
  using flags = cudrv::graph_instantiate_flags;
  const long long device_instantiations = f.counter("device_graph_instantiations");

  cudrv::graph ok;
  (void)node_of_type(ok, CU_GRAPH_NODE_TYPE_KERNEL);
  (void)node_of_type(ok, CU_GRAPH_NODE_TYPE_MEMCPY);
  cudrv::graph_exec device_exec = ok.instantiate(dev, flags::device_launch | flags::upload);
  CHECK(f.counter("device_graph_instantiations") == device_instantiations + 1);
  CHECK(device_exec.flags() == (flags::device_launch | flags::upload));
  const cudrv::device_graph_exec handle = device_exec.device_handle();
  CHECK(handle.native_handle() == device_exec.native_handle());

  // Not instantiated for device launch: no device handle (asked from the driver: also through a view).
  cudrv::graph_exec host_exec = ok.instantiate(dev);
  const cudrv::graph_exec_ref host_view = cudrv::graph_exec_ref::from_native_handle(host_exec.native_handle());
  const auto no_flag = catch_as<cudrv::invalid_argument_error>([&] { (void)host_view.device_handle(); });
  REQUIRE(no_flag.has_value());
  CHECK(contains(no_flag->what(), "not instantiated for device launch"));

  SECTION("a host node") {
    cudrv::graph g;
    (void)node_of_type(g, CU_GRAPH_NODE_TYPE_KERNEL);
    (void)node_of_type(g, CU_GRAPH_NODE_TYPE_HOST);
    const auto e = refused_before_driver<cudrv::invalid_argument_error>(f, [&] {
      (void)g.instantiate(dev, flags::device_launch);
    });
    CHECK(contains(e.what(), "only kernel, memcpy, memset and child-graph nodes"));
    CHECK(contains(e.what(), "(host)"));
    // Without the flag, the graph is the driver's to judge (the fake accepts it).
    CHECK(static_cast<bool>(g.instantiate(dev)));
  }
  SECTION("an event node and a memory node") {
    for (int type : {CU_GRAPH_NODE_TYPE_EVENT_RECORD, CU_GRAPH_NODE_TYPE_MEM_ALLOC, CU_GRAPH_NODE_TYPE_CONDITIONAL}) {
      cudrv::graph g;
      (void)node_of_type(g, CU_GRAPH_NODE_TYPE_MEMSET);
      (void)node_of_type(g, type);
      const auto e = refused_before_driver<cudrv::invalid_argument_error>(f, [&] {
        (void)g.instantiate(dev, flags::device_launch);
      });
      CHECK(contains(e.what(), "is none of them"));
    }
  }
  SECTION("no node that does work") {
    cudrv::graph g;
    (void)g.add_empty();
    const auto empty_node = refused_before_driver<cudrv::invalid_argument_error>(f, [&] {
      (void)g.instantiate(dev, flags::device_launch);
    });
    CHECK(contains(empty_node.what(), "(empty)"));
    cudrv::graph none;
    const auto e = refused_before_driver<cudrv::invalid_argument_error>(f, [&] {
      (void)none.instantiate(dev, flags::device_launch);
    });
    CHECK(contains(e.what(), "needs at least one kernel, memcpy or memset node"));
  }
  SECTION("with auto-free on launch") {
    const auto e = refused_before_driver<cudrv::invalid_argument_error>(f, [&] {
      (void)ok.instantiate(dev, flags::device_launch | flags::auto_free_on_launch);
    });
    CHECK(contains(e.what(), "cannot be combined with auto_free_on_launch"));
  }
  CHECK(f.counter("device_graph_instantiations") == device_instantiations + 1);
}

TEST_CASE("stream_capture into an existing graph: dependencies and edges reach the driver, added nodes are reported",
          "[fake-driver][graph][issue34]") {
  cudrv::test::fake_probe f;
  const cudrv::device dev(1);
  cudrv::stream s(dev);
  cudrv::graph g;
  const auto a = node_of_type(g, CU_GRAPH_NODE_TYPE_KERNEL);
  const auto b = g.add_empty();
  const long long deps = f.counter("capture_dependencies");
  const long long edges = f.counter("capture_programmatic_edges");

  SECTION("ended: the nodes added stay in the graph, which the capture does not own") {
    cudrv::stream_capture capture(s, g, {a, b},
                                  {cudrv::edge_data{cudrv::edge_type::programmatic, cudrv::edge_port::programmatic},
                                   cudrv::edge_data{}});
    CHECK(capture.active());
    CHECK(capture.target() == g);
    CHECK(f.counter("capture_dependencies") == deps + 2);
    CHECK(f.counter("capture_programmatic_edges") == edges + 1);
    CHECK(cudrv::capture_status_of(s) == cudrv::capture_status::active);
    // The fake captures no work: a node added meanwhile stands for the captured work.
    const auto captured = g.add_empty({a, b});
    // end() is for a capture that makes its own graph.
    CHECK(catch_as<cudrv::invalid_argument_error>([&] { (void)capture.end(); }));
    const cudrv::appended_nodes added = capture.end_appended();
    CHECK_FALSE(capture.active());
    CHECK(added.nodes == std::vector<cudrv::graph_node_ref>{captured});
    CHECK(g.node_count() == 3);
    CHECK(cudrv::capture_status_of(s) == cudrv::capture_status::none);
  }
  SECTION("left without end_appended: the capture ends and its nodes are removed again") {
    {
      cudrv::stream_capture capture(s, g, {a});
      (void)g.add_empty({a});
      CHECK(g.node_count() == 3);
    }
    CHECK(g.node_count() == 2);
    CHECK(f.counter("captures_ended") >= 1);
    CHECK(cudrv::capture_status_of(s) == cudrv::capture_status::none);
  }
  SECTION("refused before the driver") {
    const long long captures = f.counter("captures_to_graph");
    using E = cudrv::invalid_argument_error;
    auto count_mismatch = refused_before_driver<E>(f, [&] {
      cudrv::stream_capture c(s, g, {a, b}, {cudrv::edge_data{}});
    });
    CHECK(contains(count_mismatch.what(), "1 edges for 2 dependencies"));
    auto port_of_empty = refused_before_driver<E>(f, [&] {
      cudrv::stream_capture c(s, g, {b}, {cudrv::edge_data{cudrv::edge_type::full, cudrv::edge_port::launch_order}});
    });
    CHECK(contains(port_of_empty.what(), "only a kernel node has ports"));
    CHECK(contains(port_of_empty.what(), "(empty)"));
    auto programmatic_completion = refused_before_driver<E>(f, [&] {
      cudrv::stream_capture c(s, g, {a}, {cudrv::edge_data{cudrv::edge_type::programmatic}});
    });
    CHECK(contains(programmatic_completion.what(), "not completion"));
    auto unknown = refused_before_driver<E>(f, [&] {
      cudrv::stream_capture c(s, g, {a}, {cudrv::edge_data{static_cast<cudrv::edge_type>(9)}});
    });
    CHECK(contains(unknown.what(), "not a value cudrv knows"));
    auto null_dep = refused_before_driver<E>(f, [&] {
      cudrv::stream_capture c(s, g, {cudrv::graph_node_ref::from_native_handle(nullptr)});
    });
    CHECK(contains(null_dep.what(), "a dependency is empty"));
    cudrv::graph gone = std::move(g);
    auto empty_graph = refused_before_driver<E>(f, [&] {
      cudrv::stream_capture c(s, g, {});  // NOLINT(bugprone-use-after-move): the refusal is the point
    });
    CHECK(contains(empty_graph.what(), "the graph to capture into is empty"));
    auto legacy =
        refused_before_driver<E>(f, [&] { cudrv::stream_capture c(cudrv::stream_ref::legacy_default(), gone, {}); });
    CHECK(contains(legacy.what(), "legacy default stream"));
    CHECK(f.counter("captures_to_graph") == captures);
  }
  SECTION("a node of another graph is the driver's refusal, and the stream is not left capturing") {
    cudrv::graph other;
    const auto foreign = other.add_empty();
    const auto e = catch_as<cudrv::error>([&] { cudrv::stream_capture c(s, g, {foreign}); });
    REQUIRE(e.has_value());
    CHECK(e->api() == "cuStreamBeginCaptureToGraph");
    CHECK(cudrv::capture_status_of(s) == cudrv::capture_status::none);
  }
}

// Run by ctest in a process of its own (tests/CMakeLists.txt): a driver without the entry points of
// these calls (FAKE_CUDA_HIDE, read by the fake's cuGetProcAddress; cudrv resolves them at first use).
TEST_CASE("a driver without the graph entry points: each call is not supported, naming the entry point",
          "[.][graph-entry-points-hidden]") {
  setenv("FAKE_CUDA_HIDE",
         "cuGraphNodeSetEnabled,cuGraphNodeGetEnabled,cuGraphExecGetFlags,cuStreamBeginCaptureToGraph", 1);
  cudrv::test::fake_probe f;
  accepting_instantiations accept;
  const cudrv::device dev(1);
  cudrv::graph g;
  const auto kernel = node_of_type(g, CU_GRAPH_NODE_TYPE_KERNEL);
  cudrv::graph_exec exec = g.instantiate(dev);
  auto named = [](const std::optional<cudrv::not_supported_error>& e, const char* entry_point) {
    REQUIRE(e.has_value());
    INFO("what(): " << e->what());
    CHECK(contains(e->what(), entry_point));
  };
  named(catch_as<cudrv::not_supported_error>([&] { exec.set_enabled(kernel, false); }), "cuGraphNodeSetEnabled");
  named(catch_as<cudrv::not_supported_error>([&] { (void)exec.enabled(kernel); }), "cuGraphNodeGetEnabled");
  named(catch_as<cudrv::not_supported_error>([&] { (void)exec.device_handle(); }), "cuGraphExecGetFlags");
  cudrv::stream s(dev);
  named(catch_as<cudrv::not_supported_error>([&] { cudrv::stream_capture c(s, g, {kernel}); }),
        "cuStreamBeginCaptureToGraph");
  CHECK(cudrv::capture_status_of(s) == cudrv::capture_status::none);
  CHECK(f.counter("captures_to_graph") == 0);
}
