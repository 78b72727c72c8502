// GPU tier: CUDA graphs. Captured and explicit graphs against the stream version on random data,
// whole-graph and per-node updates, conditional nodes (while, if/else, switch), host nodes and the
// lifetime of what they own, memory nodes, event nodes, clones, DOT output, and the bad inputs of the
// issue (incompatible update, invalid graph, illegal call during capture, exceptions in a capture).
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/memory_support.hpp"
#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;

namespace {

cudrv::library& kernels() {
  static cudrv::library lib = cudrv::library::from_file(CUDRV_TEST_KERNELS_CUBIN);
  return lib;
}

struct saxpy_data {
  static constexpr std::size_t n = 30011;
  std::vector<float> x, y;
  explicit saxpy_data(std::uint64_t seed) {
    auto rx = cudrv::test::random_vector<std::uint16_t>(n, seed);
    auto ry = cudrv::test::random_vector<std::uint16_t>(n, seed + 1);
    x.assign(rx.begin(), rx.end());
    y.assign(ry.begin(), ry.end());
  }
  // y = alpha * x + y, then x is cleared (the fill), as the pipelines below do.
  std::vector<float> expected_y(float alpha) const {
    std::vector<float> out(n);
    for (std::size_t i = 0; i < n; ++i) {
      out[i] = alpha * x[i] + y[i];
    }
    return out;
  }
};

using saxpy_kernel = cudrv::typed_kernel_ref<void(float, const float*, float*, std::size_t)>;

const cudrv::launch_config saxpy_config{.grid = static_cast<unsigned>((saxpy_data::n + 255) / 256), .block = 256};

}  // namespace

TEST_CASE("captured and explicit graphs compute what the stream computes", "[gpu][graph]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  auto ctx = dev.primary_context();
  auto saxpy = kernels().get_kernel<void(float, const float*, float*, std::size_t)>("saxpy_sized");
  auto seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  saxpy_data data(seed);
  const float alpha = 1.25f;
  cudrv::stream s(dev);
  cudrv::device_buffer<float> x(dev, data.n), y(dev, data.n), staged(dev, data.n);

  // The same three steps each way: stage x, saxpy into y, clear the staging buffer.
  auto reset = [&] {
    cudrv::copy(x, data.x);
    cudrv::copy(y, data.y);
    cudrv::fill(staged, -1.0f);
  };
  auto check = [&](const char* how) {
    INFO(how);
    std::vector<float> out(data.n), cleared(data.n);
    cudrv::copy(out, y);
    cudrv::copy(cleared, staged);
    CHECK(cudrv::test::mismatch(out, data.expected_y(alpha)).empty());
    CHECK(cleared == std::vector<float>(data.n, 0.0f));
  };

  reset();
  cudrv::copy(staged, x, s);
  cudrv::launch(s, saxpy_config, saxpy, alpha, staged.get(), y.get(), data.n);
  cudrv::fill(staged, 0.0f, s);
  s.synchronize();
  check("stream");

  cudrv::graph captured = [&] {
    cudrv::stream_capture capture(s);
    CHECK(cudrv::capture_status_of(s) == cudrv::capture_status::active);
    CHECK(capture.id() != 0);
    cudrv::copy(staged, x, s);
    auto info = cudrv::capture_info_of(s);
    CHECK(info.status == cudrv::capture_status::active);
    CHECK(info.id == capture.id());
    REQUIRE(info.dependencies.size() == 1);
    CHECK(info.dependencies[0].kind() == cudrv::graph_node_kind::memcpy);
    CHECK(info.graph.node_count() == 1);
    cudrv::launch(s, saxpy_config, saxpy, alpha, staged.get(), y.get(), data.n);
    cudrv::fill(staged, 0.0f, s);
    return capture.end();
  }();
  CHECK(cudrv::capture_status_of(s) == cudrv::capture_status::none);
  CHECK(cudrv::capture_info_of(s).id == 0);
  CHECK(captured.node_count() == 3);
  reset();
  captured.instantiate(dev).launch(s);
  s.synchronize();
  check("captured");

  cudrv::graph built;
  cudrv::graph_builder b(built, ctx);
  auto n1 = cudrv::copy(staged, x, b);
  auto n2 = cudrv::launch(b, saxpy_config, saxpy, alpha, staged.get(), y.get(), data.n);
  auto n3 = cudrv::fill(staged, 0.0f, b);
  CHECK(n1.kind() == cudrv::graph_node_kind::memcpy);
  CHECK(n2.kind() == cudrv::graph_node_kind::kernel);
  CHECK(n3.kind() == cudrv::graph_node_kind::memset);
  CHECK(n2.dependencies() == std::vector<cudrv::graph_node_ref>{n1});
  CHECK(n2.dependents() == std::vector<cudrv::graph_node_ref>{n3});
  CHECK(built.edges().size() == 2);
  CHECK(built.roots() == std::vector<cudrv::graph_node_ref>{n1});
  reset();
  auto exec = built.instantiate(dev, cudrv::graph_instantiate_flags::upload);
  exec.launch(s);
  s.synchronize();
  check("explicit");
  // Launch it again: same result from the same inputs.
  reset();
  exec.upload(s);
  exec.launch(s);
  s.synchronize();
  check("explicit, second launch");
}

TEST_CASE("updates change what an executable graph computes", "[gpu][graph][driver_error]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  auto ctx = dev.primary_context();
  auto saxpy = kernels().get_kernel<void(float, const float*, float*, std::size_t)>("saxpy_sized");
  saxpy_data data(cudrv::test::test_seed());
  cudrv::stream s(dev);
  cudrv::device_buffer<float> x(dev, data.n), y(dev, data.n), x2(dev, data.n);
  auto build = [&](float alpha, cudrv::kernel_node* kernel_node = nullptr) {
    cudrv::graph g;
    cudrv::graph_builder b(g, ctx);
    auto k = cudrv::launch(b, saxpy_config, saxpy, alpha, x.get(), y.get(), data.n);
    if (kernel_node != nullptr) {
      *kernel_node = k;
    }
    return g;
  };
  auto run = [&](const cudrv::graph_exec& exec, float alpha, const char* how) {
    INFO(how);
    cudrv::copy(x, data.x);
    cudrv::copy(y, data.y);
    exec.launch(s);
    s.synchronize();
    std::vector<float> out(data.n);
    cudrv::copy(out, y);
    CHECK(cudrv::test::mismatch(out, data.expected_y(alpha)).empty());
  };
  cudrv::kernel_node node = cudrv::kernel_node::from_native_handle(nullptr);
  cudrv::graph g1 = build(2.0f, &node);
  cudrv::graph_exec exec = g1.instantiate(dev);
  run(exec, 2.0f, "as built");
  cudrv::graph g3 = build(3.0f);  // named: a temporary owner does not convert to its view
  exec.update(g3);
  run(exec, 3.0f, "after a whole-graph update");
  exec.set_kernel_node(node, ctx, saxpy_config, saxpy, 5.0f, x.get(), y.get(), data.n);
  run(exec, 5.0f, "after a kernel-node update");

  // A copy node pointed at another source.
  cudrv::graph gc;
  cudrv::graph_builder bc(gc, ctx);
  cudrv::device_buffer<float> out(dev, data.n);
  auto copy_node = cudrv::copy(out, x, bc);
  auto copy_exec = gc.instantiate(dev);
  cudrv::copy(x, data.x);
  cudrv::copy(x2, data.y);
  copy_exec.set_copy_node(copy_node, ctx, out, x2);
  copy_exec.launch(s);
  s.synchronize();
  std::vector<float> got(data.n);
  cudrv::copy(got, out);
  CHECK(got == data.y);

  // A memset node pointed at another buffer and value.
  cudrv::graph gf;
  cudrv::graph_builder bf(gf, ctx);
  cudrv::device_buffer<int> first(dev, 64), second(dev, 64);
  auto fill_node = cudrv::fill(first, 1, bf);
  auto fill_exec = gf.instantiate(dev);
  cudrv::fill(first, 0);
  cudrv::fill(second, 0);
  fill_exec.set_fill_node(fill_node, ctx, second, 7);
  fill_exec.launch(s);
  s.synchronize();
  std::vector<int> a(64), b2(64);
  cudrv::copy(a, first);
  cudrv::copy(b2, second);
  CHECK(a == std::vector<int>(64, 0));
  CHECK(b2 == std::vector<int>(64, 7));

  // An update with another topology is refused, saying why.
  cudrv::graph bigger = build(1.0f);
  bigger.add_empty(bigger.nodes());
  auto e = catch_as<cudrv::graph_update_error>([&] { exec.update(bigger); });
  REQUIRE(e);
  CHECK(e->reason() == CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
  CHECK(contains(e->what(), "topology"));
  run(exec, 5.0f, "a refused update leaves the executable as it was");
}

TEST_CASE("conditional nodes: while runs until the device says stop, if/else and switch pick bodies",
          "[gpu][graph][conditional]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  auto ctx = dev.primary_context();
  cudrv::stream s(dev);
  auto countdown = kernels().get_kernel<void(CUgraphConditionalHandle, int*, int*)>("countdown");
  auto set_condition = kernels().get_kernel<void(CUgraphConditionalHandle, unsigned)>("set_condition");
  auto add_value = kernels().get_kernel<void(int*, int)>("add_value");
  cudrv::device_buffer<int> counter(dev, 1), iterations(dev, 1), sum(dev, 1);
  auto read = [](const cudrv::device_buffer<int>& b) {
    std::vector<int> v(1);
    cudrv::copy(v, b);
    return v[0];
  };

  SECTION("while") {
    cudrv::graph g;
    auto handle = g.make_conditional_handle(ctx, 1, true);
    auto loop = g.add_conditional(handle, cudrv::conditional_kind::while_loop, ctx);
    REQUIRE(loop.bodies.size() == 1);
    CHECK(loop.node.kind() == cudrv::graph_node_kind::conditional);
    cudrv::graph_builder body(loop.bodies[0], ctx);
    cudrv::launch(body, {}, countdown, handle.native_handle(), counter.get(), iterations.get());
    auto exec = g.instantiate(dev);
    for (int start : {7, 1, 25}) {
      INFO("counter starts at " << start);
      cudrv::copy(counter, std::vector<int>{start});
      cudrv::fill(iterations, 0);
      exec.launch(s);
      s.synchronize();
      CHECK(read(iterations) == start);
      CHECK(read(counter) == 0);
    }
  }
  SECTION("if / else") {
    if (cudrv::driver::version() < 12080) {
      WARN("SKIPPED: if/else nodes need a CUDA 12.8 driver");
      return;
    }
    cudrv::graph g;
    auto handle = g.make_conditional_handle(ctx);
    cudrv::graph_builder b(g, ctx);
    cudrv::kernel_node set_node = cudrv::launch(b, {}, set_condition, handle.native_handle(), 0u);
    auto branch = g.add_conditional(handle, cudrv::conditional_kind::if_then, ctx, 2, b.dependencies());
    REQUIRE(branch.bodies.size() == 2);
    cudrv::graph_builder then_body(branch.bodies[0], ctx);
    cudrv::launch(then_body, {}, add_value, sum.get(), 10);
    cudrv::graph_builder else_body(branch.bodies[1], ctx);
    cudrv::launch(else_body, {}, add_value, sum.get(), 1000);
    CHECK(b.last() == set_node);
    auto exec = g.instantiate(dev);
    for (unsigned condition : {1u, 0u, 5u}) {
      INFO("condition " << condition);
      exec.set_kernel_node(set_node, ctx, {}, set_condition, handle.native_handle(), condition);
      cudrv::fill(sum, 0);
      exec.launch(s);
      s.synchronize();
      CHECK(read(sum) == (condition != 0 ? 10 : 1000));
    }
  }
  SECTION("switch") {
    if (cudrv::driver::version() < 12080) {
      WARN("SKIPPED: switch nodes need a CUDA 12.8 driver");
      return;
    }
    cudrv::graph g;
    auto handle = g.make_conditional_handle(ctx);
    cudrv::graph_builder b(g, ctx);
    cudrv::kernel_node set_node = cudrv::launch(b, {}, set_condition, handle.native_handle(), 0u);
    auto cases = g.add_conditional(handle, cudrv::conditional_kind::switch_cases, ctx, 3, b.dependencies());
    REQUIRE(cases.bodies.size() == 3);
    for (int i = 0; i < 3; ++i) {
      cudrv::graph_builder body(cases.bodies[i], ctx);
      cudrv::launch(body, {}, add_value, sum.get(), 100 * (i + 1));
    }
    auto exec = g.instantiate(dev);
    for (unsigned value : {0u, 2u, 1u, 7u}) {
      INFO("switch on " << value);
      exec.set_kernel_node(set_node, ctx, {}, set_condition, handle.native_handle(), value);
      cudrv::fill(sum, 0);
      exec.launch(s);
      s.synchronize();
      CHECK(read(sum) == (value < 3 ? 100 * static_cast<int>(value + 1) : 0));
    }
  }
  SECTION("bad shapes are refused before the driver") {
    cudrv::graph g;
    auto handle = g.make_conditional_handle(ctx);
    CHECK(catch_as<cudrv::invalid_argument_error>(
        [&] { (void)g.add_conditional(handle, cudrv::conditional_kind::while_loop, ctx, 2); }));
    CHECK(catch_as<cudrv::invalid_argument_error>(
        [&] { (void)g.add_conditional(handle, cudrv::conditional_kind::if_then, ctx, 3); }));
    CHECK(catch_as<cudrv::invalid_argument_error>(
        [&] { (void)g.add_conditional(handle, cudrv::conditional_kind::switch_cases, ctx, 0); }));
  }
}

TEST_CASE("conditional nodes: a handle the driver refuses is said to be refused, not unsupported",
          "[gpu][graph][conditional][driver_error]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  auto ctx = dev.primary_context();
  // Driver 580.159.04 answers CUDA_ERROR_INVALID_VALUE for a handle of another graph and for a second
  // node testing a handle; cudrv used to call every such answer "does not support it".
  cudrv::graph g;
  cudrv::graph other;
  const auto own = g.make_conditional_handle(ctx);
  // Handles are numbered per graph (measured: another graph's first handle was accepted as g's own first),
  // so the foreign handle is one whose number g has not handed out.
  (void)other.make_conditional_handle(ctx);
  const auto foreign = other.make_conditional_handle(ctx);
  auto refused = [&](const char* what, auto&& add) {
    INFO(what);
    try {
      add();
      FAIL("added");
    } catch (const cudrv::not_supported_error& e) {
      FAIL("not_supported_error: " << e.what());
    } catch (const cudrv::invalid_argument_error& e) {
      FAIL("invalid_argument_error: " << e.what());
    } catch (const cudrv::error& e) {
      INFO("what(): " << e.what());
      CHECK(e.result() == CUDA_ERROR_INVALID_VALUE);
      CHECK(e.api() == "cuGraphAddNode");
      CHECK(contains(e.what(), "refused its conditional handle"));
      CHECK_FALSE(contains(e.what(), "does not support"));
    }
  };
  refused("another graph's handle",
          [&] { (void)g.add_conditional(foreign, cudrv::conditional_kind::while_loop, ctx); });
  (void)g.add_conditional(own, cudrv::conditional_kind::if_then, ctx);
  refused("a handle tested already", [&] { (void)g.add_conditional(own, cudrv::conditional_kind::if_then, ctx); });
  CHECK(g.node_count() == 1);
}

TEST_CASE("host nodes run, and the graph owns their callables", "[gpu][graph]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  cudrv::stream s(dev);
  auto calls = std::make_shared<std::atomic<int>>(0);
  std::weak_ptr<std::atomic<int>> watch = calls;
  std::unique_ptr<cudrv::graph_exec> exec;
  {
    cudrv::graph g;
    auto first = g.add_host([c = calls] { c->fetch_add(1); });
    g.add_host([c = calls] { c->fetch_add(10); }, {first});
    exec = std::make_unique<cudrv::graph_exec>(g.instantiate(dev));
  }  // the graph is gone; the executable keeps the callables
  std::atomic<int>* counter = calls.get();
  calls.reset();
  REQUIRE_FALSE(watch.expired());
  exec->launch(s);
  exec->launch(s);
  s.synchronize();
  CHECK(counter->load() == 22);
  exec.reset();
  dev.synchronize();
  // The driver releases user objects asynchronously; give it a moment.
  CHECK(cudrv::test::wait_until([&] { return watch.expired(); }, std::chrono::seconds(5)));
}

TEST_CASE("host callables enqueued during a capture belong to the graph and run at every launch",
          "[gpu][graph][capture]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  cudrv::test::destruction_error_counter errors;
  cudrv::stream s(dev);
  auto calls = std::make_shared<std::atomic<int>>(0);
  std::weak_ptr<std::atomic<int>> watch = calls;
  cudrv::graph g = [&] {
    cudrv::stream_capture capture(s);
    s.enqueue([c = calls] { c->fetch_add(1); });
    s.enqueue([] { throw std::runtime_error("from a captured callable"); });
    return capture.end();
  }();
  CHECK(g.node_count() == 2);
  std::atomic<int>* counter = calls.get();
  calls.reset();
  {
    auto exec = g.instantiate(dev);
    for (int i = 0; i < 3; ++i) {
      exec.launch(s);
    }
    s.synchronize();  // the captured callables' failures do not come back through the stream
    CHECK(counter->load() == 3);
    CHECK(errors.count() == 3);
  }
  g = cudrv::graph();
  dev.synchronize();
  CHECK(cudrv::test::wait_until([&] { return watch.expired(); }, std::chrono::seconds(5)));
  // Outside a capture, enqueue works as before: run once, failure rethrown at synchronize.
  int once = 0;
  s.enqueue([&] { ++once; });
  s.synchronize();
  CHECK(once == 1);
}

TEST_CASE("graphs outlive what built them: builders, child graphs, memory and event nodes",
          "[gpu][graph][driver_error]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  auto ctx = dev.primary_context();
  cudrv::stream s(dev);
  auto add_value = kernels().get_kernel<void(int*, int)>("add_value");
  cudrv::device_buffer<int> result(dev, 1);
  cudrv::event done(dev);
  cudrv::graph outer;
  {
    // A child graph built and destroyed before the outer graph runs: the node holds a copy.
    cudrv::graph child;
    cudrv::graph_builder cb(child, ctx);
    cudrv::launch(cb, {}, add_value, result.get(), 5);
    cudrv::launch(cb, {}, add_value, result.get(), 7);
    auto c = outer.add_child_graph(child);
    CHECK(c.kind() == cudrv::graph_node_kind::child_graph);
    // Graph-owned memory: allocated, written, copied out, freed.
    auto [alloc, address] = outer.add_mem_alloc(dev, sizeof(int), {c});
    CHECK(alloc.kind() == cudrv::graph_node_kind::mem_alloc);
    cudrv::graph_builder b(outer, ctx, {alloc});
    cudrv::device_span<int> scratch(address, 1);
    cudrv::fill(scratch, 1000, b);
    cudrv::launch(b, {}, add_value, scratch.get(), 1);
    cudrv::copy(result, scratch, b);  // result = 1001 replaces the child's 12
    auto freed = outer.add_mem_free(address, {b.last()});
    CHECK(freed.kind() == cudrv::graph_node_kind::mem_free);
    outer.add_event_record(done, {freed});
  }
  cudrv::fill(result, 0);
  auto exec = outer.instantiate(dev);
  exec.launch(s);
  done.synchronize();
  std::vector<int> v(1);
  cudrv::copy(v, result);
  CHECK(v[0] == 1001);

  // Clones (not of graphs with memory nodes, which the driver refuses) and DOT output.
  auto refused = catch_as<cudrv::not_supported_error>([&] { (void)outer.clone(); });
  REQUIRE(refused);
  CHECK(contains(refused->what(), "memory allocation or free nodes"));
  cudrv::graph plain;
  cudrv::graph_builder pb(plain, ctx);
  cudrv::launch(pb, {}, add_value, result.get(), 1);
  cudrv::launch(pb, {}, add_value, result.get(), 2);
  plain.add_empty({pb.last()});
  auto copy = plain.clone();
  CHECK(copy.node_count() == 3);
  CHECK(copy.edges().size() == plain.edges().size());
  cudrv::fill(result, 0);
  copy.instantiate(dev).launch(s);
  s.synchronize();
  cudrv::copy(v, result);
  CHECK(v[0] == 3);
  std::string dot = outer.dot();
  CHECK(contains(dot, "digraph"));
  CHECK(contains(dot, "MEM_ALLOC"));
  // An event-wait node orders a graph after an event.
  cudrv::graph waiter;
  auto w = waiter.add_event_wait(done);
  CHECK(w.kind() == cudrv::graph_node_kind::event_wait);
  waiter.instantiate(dev).launch(s);
  s.synchronize();
}

TEST_CASE("instantiation flags: auto-free on launch, device launch with upload", "[gpu][graph][driver_error]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  auto ctx = dev.primary_context();
  cudrv::stream s(dev);
  auto add_value = kernels().get_kernel<void(int*, int)>("add_value");
  cudrv::device_buffer<int> result(dev, 1);
  // A graph allocation that is never freed: a second launch needs auto_free_on_launch.
  cudrv::graph g;
  auto [alloc, address] = g.add_mem_alloc(dev, 4 * sizeof(int));
  cudrv::graph_builder b(g, ctx, {alloc});
  cudrv::fill(cudrv::device_span<int>(address, 4), 21, b);
  cudrv::launch(b, {}, add_value, reinterpret_cast<int*>(address), 21);
  cudrv::copy(result, cudrv::device_span<int>(address, 1), b);
  {
    auto plain = g.instantiate(dev);
    plain.launch(s);
    s.synchronize();
    CHECK(catch_as<cudrv::error>([&] {
      plain.launch(s);
      s.synchronize();
    }));
    // A graph with allocation nodes may have one executable at a time.
    auto second = catch_as<cudrv::error>([&] { (void)g.instantiate(dev); });
    REQUIRE(second);
    CHECK(contains(second->what(), "one executable at a time"));
  }
  // The unfreed allocation stays until freed: free it so the next executable starts clean.
  auto free_async =
      reinterpret_cast<PFN_cuMemFreeAsync_v11020>(cudrv::driver::get_entry_point("cuMemFreeAsync", 11020));
  REQUIRE(free_async(address, s.native_handle()) == CUDA_SUCCESS);
  s.synchronize();
  auto freeing = g.instantiate(dev, cudrv::graph_instantiate_flags::auto_free_on_launch);
  for (int i = 0; i < 3; ++i) {
    cudrv::fill(result, 0);
    freeing.launch(s);
    s.synchronize();
    std::vector<int> v(1);
    cudrv::copy(v, result);
    CHECK(v[0] == 42);
  }
  // Auto-free frees before the next launch: the last launch's allocation is the caller's to free.
  REQUIRE(free_async(address, s.native_handle()) == CUDA_SUCCESS);
  s.synchronize();

  // A device-launchable graph (kernel nodes only), uploaded, launched from the host.
  cudrv::graph dg;
  cudrv::graph_builder db(dg, ctx);
  cudrv::launch(db, {}, add_value, result.get(), 5);
  cudrv::launch(db, {}, add_value, result.get(), 6);
  auto device_exec = dg.instantiate(dev, cudrv::graph_instantiate_flags::device_launch);
  device_exec.upload(s);
  cudrv::fill(result, 0);
  device_exec.launch(s);
  s.synchronize();
  std::vector<int> v(1);
  cudrv::copy(v, result);
  CHECK(v[0] == 11);
  // A host node cannot be launched from the device: cudrv says so before the driver (issue 34 part 6).
  cudrv::graph hg;
  hg.add_host([] {});
  auto refused = catch_as<cudrv::invalid_argument_error>(
      [&] { (void)hg.instantiate(dev, cudrv::graph_instantiate_flags::device_launch); });
  REQUIRE(refused);
  CHECK(contains(refused->what(), "(host) is none of them"));
}

TEST_CASE("graph bad inputs: typed errors, capture always ended, nothing leaked", "[gpu][graph][bad-input]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  auto ctx = dev.primary_context();
  cudrv::test::destruction_error_counter errors;
  cudrv::stream s(dev);

  SECTION("an exception inside a capture scope ends the capture") {
    struct failure {};
    cudrv::device_buffer<int> target(dev, 16);
    CHECK_THROWS_AS(
        [&] {
          cudrv::stream_capture capture(s);
          cudrv::fill(target, 1, s);
          throw failure{};
        }(),
        failure);
    CHECK(cudrv::capture_status_of(s) == cudrv::capture_status::none);
    cudrv::device_buffer<int> after(dev, 4);
    cudrv::fill(after, 3, s);  // the stream works normally again
    s.synchronize();
  }
  SECTION("a synchronous call during a global capture is refused and invalidates the capture") {
    cudrv::stream_capture capture(s);
    auto sync = catch_as<cudrv::error>([&] { s.synchronize(); });
    REQUIRE(sync);
    CHECK(sync->result() == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CHECK(cudrv::capture_status_of(s) == cudrv::capture_status::invalidated);
    auto end = catch_as<cudrv::error>([&] { (void)capture.end(); });
    REQUIRE(end);
    CHECK(end->result() == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CHECK(contains(end->what(), "invalidated"));
    CHECK_FALSE(capture.active());
    CHECK(cudrv::capture_status_of(s) == cudrv::capture_status::none);
  }
  SECTION("the legacy default stream cannot be captured; a capture cannot end twice") {
    CHECK(
        catch_as<cudrv::invalid_argument_error>([&] { cudrv::stream_capture c(cudrv::stream_ref::legacy_default()); }));
    cudrv::stream_capture capture(s);
    cudrv::graph g = capture.end();
    CHECK(g.node_count() == 0);
    CHECK(catch_as<cudrv::invalid_argument_error>([&] { (void)capture.end(); }));
  }
  SECTION("a cycle is refused") {
    cudrv::graph g;
    auto a = g.add_empty();
    auto b = g.add_empty({a});
    auto e = catch_as<cudrv::error>([&] {
      g.add_dependency(b, a);
      (void)g.instantiate(dev);
    });
    REQUIRE(e);
    INFO(e->what());
  }
  SECTION("a kernel node is checked like a launch") {
    cudrv::graph g;
    cudrv::graph_builder b(g, ctx);
    cudrv::device_buffer<float> buf(dev, 4);
    auto e = catch_as<cudrv::launch_error>(
        [&] { cudrv::launch(b, {}, kernels().get_kernel("saxpy_sized"), 1.0f, buf.get()); });
    REQUIRE(e);
    CHECK(contains(e->what(), "2 arguments given, but the kernel has 4 parameters"));
    CHECK(g.node_count() == 0);
    CHECK(catch_as<cudrv::invalid_argument_error>([&] { (void)b.last(); }));
  }
  SECTION("launch options a node cannot carry are refused") {
    cudrv::graph g;
    cudrv::graph_builder b(g, ctx);
    cudrv::device_buffer<int> out(dev, 1);
    auto add_value = kernels().get_kernel<void(int*, int)>("add_value");
    auto pss = catch_as<cudrv::not_supported_error>(
        [&] { (void)cudrv::launch(b, {.programmatic_stream_serialization = true}, add_value, out.get(), 1); });
    REQUIRE(pss);
    CHECK(contains(pss->what(), "programmatic edge"));
    CHECK(g.node_count() == 0);
    auto node = cudrv::launch(b, {.priority = 0}, add_value, out.get(), 1);
    auto exec = g.instantiate(dev);
    auto e = catch_as<cudrv::invalid_argument_error>(
        [&] { exec.set_kernel_node(node, ctx, {.priority = 0}, add_value, out.get(), 2); });
    REQUIRE(e);
    CHECK(contains(e->what(), "keeps its own"));
  }
  SECTION("moved-from graphs and executables are refused") {
    cudrv::graph g;
    cudrv::graph moved(std::move(g));
    CHECK(catch_as<cudrv::invalid_argument_error>([&] { (void)g.add_empty(); }));
    auto exec = moved.instantiate(dev);
    CHECK(static_cast<bool>(exec));
    auto taken = std::move(exec);
    CHECK_FALSE(static_cast<bool>(exec));
    CHECK_FALSE(static_cast<bool>(g));
    CHECK(catch_as<cudrv::invalid_argument_error>([&] { exec.launch(s); }));
    cudrv::stream gone(dev);
    cudrv::stream keeper(std::move(gone));
    CHECK(catch_as<cudrv::invalid_argument_error>([&] { taken.launch(gone); }));
  }
  s.synchronize();
  CHECK(errors.count() == 0);
}
