// Graphs against the stand-in driver (fake_cuda.cpp): the node a refused instantiation names, of every
// type the driver can report (the fake refuses every instantiation, blaming the graph's last node), and
// the refusals of conditional nodes, classified (the fake answers as driver 580.159.04 did).
#include <catch2/catch.hpp>

#include <cudrv/cudrv.hpp>

#include <cstdint>
#include <string>

#include "fake_driver/fake_hooks.hpp"
#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;

namespace {

// The error of instantiating g, whose last node the fake blames.
cudrv::error refused_instantiation(const cudrv::graph& g, const cudrv::device& dev) {
  auto e = catch_as<cudrv::error>([&] { (void)g.instantiate(dev); });
  REQUIRE(e.has_value());
  INFO("what(): " << e->what());
  CHECK(e->api() == "cuGraphInstantiateWithParams");
  CHECK(e->result() == CUDA_ERROR_INVALID_VALUE);
  return *e;
}

}  // namespace

TEST_CASE("a refused instantiation names the blamed node's kind, also for types cudrv has no name for",
          "[fake-driver][graph]") {
  cudrv::test::fake_probe f;
  auto* set_type = cudrv::test::fake_hook<void(CUgraphNode, int)>("fake_cuda_set_node_type");
  const cudrv::device dev(1);
  struct expectation {
    int type;
    std::string named;
  };
  // Every CUgraphNodeType but the kernel (whose refusal is diagnosed as a launch's, from its parameters),
  // the external-semaphore nodes cudrv cannot make (kind other: the table of names had one entry too few,
  // and naming them read past its end), and a type a newer driver might add.
  const expectation cases[] = {
      {CU_GRAPH_NODE_TYPE_MEMCPY, "(memcpy)"},
      {CU_GRAPH_NODE_TYPE_MEMSET, "(memset)"},
      {CU_GRAPH_NODE_TYPE_HOST, "(host)"},
      {CU_GRAPH_NODE_TYPE_GRAPH, "(child graph)"},
      {CU_GRAPH_NODE_TYPE_EMPTY, "(empty)"},
      {CU_GRAPH_NODE_TYPE_WAIT_EVENT, "(event wait)"},
      {CU_GRAPH_NODE_TYPE_EVENT_RECORD, "(event record)"},
      {CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL,
       "(other, CUgraphNodeType " + std::to_string(CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL) + ")"},
      {CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT,
       "(other, CUgraphNodeType " + std::to_string(CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT) + ")"},
      {CU_GRAPH_NODE_TYPE_MEM_ALLOC, "(memory alloc)"},
      {CU_GRAPH_NODE_TYPE_MEM_FREE, "(memory free)"},
      {CU_GRAPH_NODE_TYPE_BATCH_MEM_OP, "(stream memory operations)"},
      {CU_GRAPH_NODE_TYPE_CONDITIONAL, "(conditional)"},
      {99, "(other, CUgraphNodeType 99)"},
  };
  for (const expectation& c : cases) {
    INFO("CUgraphNodeType " << c.type << ", expected " << c.named);
    cudrv::graph g;
    (void)g.add_empty();
    const cudrv::graph_node_ref blamed = g.add_empty();
    set_type(blamed.native_handle(), c.type);
    const cudrv::error e = refused_instantiation(g, dev);
    INFO("what(): " << e.what());
    CHECK(contains(e.what(), c.named));
  }
}

TEST_CASE("a refused instantiation blaming a real batch memory-operation node calls it that, not other",
          "[fake-driver][graph][stream-memory-ops]") {
  cudrv::test::fake_probe f;
  const cudrv::device dev(1);
  cudrv::device_buffer<std::uint32_t> flag(dev, 1);
  cudrv::graph g;
  cudrv::graph_builder b(g, dev);
  const auto node = cudrv::write_value(b, flag.view(), 1u);
  CHECK(cudrv::graph_node_ref(node).kind() == cudrv::graph_node_kind::stream_memory_ops);
  const cudrv::error e = refused_instantiation(g, dev);
  INFO("what(): " << e.what());
  CHECK(contains(e.what(), "(stream memory operations)"));
  CHECK_FALSE(contains(e.what(), "(other"));
}

// --- conditional nodes --------------------------------------------------------------------------------

TEST_CASE("a conditional node refused for its handle says so, not that conditional nodes are unsupported",
          "[fake-driver][graph][conditional]") {
  cudrv::test::fake_probe f;
  const cudrv::device dev(1);
  const cudrv::context_ref ctx = dev.primary_context();
  cudrv::graph g;
  cudrv::graph other;
  const cudrv::conditional_handle own = g.make_conditional_handle(ctx);
  const cudrv::conditional_handle foreign = other.make_conditional_handle(ctx);
  // The driver's answer, classified: a plain error with its code, neither unsupported nor a cudrv refusal.
  auto refused = [&](auto&& add) {
    const long long nodes = f.counter("conditional_nodes");
    std::string what;
    try {
      add();
      FAIL("the conditional node was added");
    } catch (const cudrv::not_supported_error& e) {
      FAIL("not_supported_error: " << e.what());
    } catch (const cudrv::invalid_argument_error& e) {
      FAIL("invalid_argument_error: " << e.what());
    } catch (const cudrv::error& e) {
      what = e.what();
      INFO("what(): " << what);
      CHECK(e.source() == cudrv::error_source::driver);
      CHECK(e.result() == CUDA_ERROR_INVALID_VALUE);
      CHECK(e.api() == "cuGraphAddNode");
    }
    INFO("what(): " << what);
    CHECK(f.counter("conditional_nodes") == nodes);
    CHECK_FALSE(contains(what, "does not support"));
    CHECK(contains(what, "refused its conditional handle"));
    CHECK(contains(what, "make_conditional_handle of this graph"));
    CHECK(contains(what, "only one conditional node may test it"));
    return what;
  };
  SECTION("a handle made by another graph") {
    const std::string what =
        refused([&] { (void)g.add_conditional(foreign, cudrv::conditional_kind::while_loop, ctx); });
    CHECK(contains(what, "conditional node (while, 1 body)"));
  }
  SECTION("a handle another node of the graph tests already") {
    const cudrv::conditional_node first = g.add_conditional(own, cudrv::conditional_kind::if_then, ctx, 2);
    CHECK(first.bodies.size() == 2);
    (void)refused([&] { (void)g.add_conditional(own, cudrv::conditional_kind::if_then, ctx); });
  }
  SECTION("the graph's own handle, once, is accepted") {
    const long long nodes = f.counter("conditional_nodes");
    const cudrv::conditional_node n = g.add_conditional(own, cudrv::conditional_kind::switch_cases, ctx, 3);
    CHECK(n.bodies.size() == 3);
    CHECK(n.node.kind() == cudrv::graph_node_kind::conditional);
    CHECK(f.counter("conditional_nodes") == nodes + 1);
  }
}

TEST_CASE("a conditional node with an empty context or an unknown kind is refused before the driver",
          "[fake-driver][graph][conditional]") {
  cudrv::test::fake_probe f;
  const cudrv::device dev(1);
  cudrv::graph g;
  const cudrv::conditional_handle h = g.make_conditional_handle(dev.primary_context());
  const long long calls = f.counter("failed_calls");
  const long long nodes = f.counter("conditional_nodes");
  auto empty = catch_as<cudrv::invalid_argument_error>([&] {
    (void)g.add_conditional(h, cudrv::conditional_kind::while_loop,
                            cudrv::context_ref(static_cast<CUcontext>(nullptr)));
  });
  REQUIRE(empty.has_value());
  INFO("what(): " << empty->what());
  CHECK(contains(empty->what(), "the context is empty"));
  auto bad_kind = catch_as<cudrv::invalid_argument_error>(
      [&] { (void)g.add_conditional(h, static_cast<cudrv::conditional_kind>(7), dev.primary_context()); });
  REQUIRE(bad_kind.has_value());
  CHECK(contains(bad_kind->what(), "conditional_kind 7"));
  CHECK(f.counter("failed_calls") == calls);  // no driver call was refused: none was made
  CHECK(f.counter("conditional_nodes") == nodes);
  // The handle is still free for a node.
  CHECK(g.add_conditional(h, cudrv::conditional_kind::while_loop, dev.primary_context()).bodies.size() == 1);
}

// Run by ctest with FAKE_CUDA_DRIVER_VERSION=12040: conditional nodes, but no switch and no else body,
// which such a driver refuses with CUDA_ERROR_INVALID_VALUE (the fake answers so).
TEST_CASE("fake driver 12.4: switch nodes and an else body need a 12.8 driver, said before the driver is asked",
          "[.][fake-driver-12.4]") {
  cudrv::test::fake_probe f;
  const cudrv::device dev(1);
  const cudrv::context_ref ctx = dev.primary_context();
  cudrv::graph g;
  const cudrv::conditional_handle h = g.make_conditional_handle(ctx);
  const long long calls = f.counter("failed_calls");
  struct newer_node {
    cudrv::conditional_kind kind;
    unsigned bodies;
    const char* named;
  };
  for (const newer_node& c :
       {newer_node{cudrv::conditional_kind::switch_cases, 2u, "conditional node (switch, 2 bodies)"},
        newer_node{cudrv::conditional_kind::if_then, 2u, "conditional node (if with an else body, 2 bodies)"}}) {
    const char* named = c.named;
    INFO(named);
    auto e = catch_as<cudrv::not_supported_error>([&] { (void)g.add_conditional(h, c.kind, ctx, c.bodies); });
    REQUIRE(e.has_value());
    INFO("what(): " << e->what());
    CHECK(contains(e->what(), named));
    CHECK(contains(e->what(), "needs a CUDA 12.8 driver; the installed driver supports CUDA 12.4"));
    CHECK(e->api() == "cudrv::graph::add_conditional");
  }
  CHECK(f.counter("failed_calls") == calls);
  // What 12.4 has works.
  CHECK(g.add_conditional(h, cudrv::conditional_kind::if_then, ctx, 1).bodies.size() == 1);
}
