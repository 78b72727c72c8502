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
      {CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL, "(other, CUgraphNodeType " + std::to_string(CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL) + ")"},
      {CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT, "(other, CUgraphNodeType " + std::to_string(CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT) + ")"},
      {CU_GRAPH_NODE_TYPE_MEM_ALLOC, "(memory alloc)"},
      {CU_GRAPH_NODE_TYPE_MEM_FREE, "(memory free)"},
      {CU_GRAPH_NODE_TYPE_BATCH_MEM_OP, "(batch memory operations)"},
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
          "[fake-driver][graph][stream-memops]") {
  cudrv::test::fake_probe f;
  const cudrv::device dev(1);
  cudrv::device_buffer<std::uint32_t> flag(dev, 1);
  cudrv::graph g;
  cudrv::graph_builder b(g, dev);
  const auto node = cudrv::write_value(b, flag.view(), 1u);
  CHECK(cudrv::graph_node_ref(node).kind() == cudrv::graph_node_kind::batch_mem_op);
  const cudrv::error e = refused_instantiation(g, dev);
  INFO("what(): " << e.what());
  CHECK(contains(e.what(), "(batch memory operations)"));
  CHECK_FALSE(contains(e.what(), "(other"));
}
