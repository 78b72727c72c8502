// bench_graph: CUDA graphs through cudrv against the raw driver calls, in one binary, interleaved.
//
//   bench_graph [--quick]
//
// A graph of 1000 empty kernel nodes in a chain (one block of 32 threads each, the kernel taking a
// pointer, an int and a float, loaded from PTX). Cases, each timed per round and the paired ratio
// (median over the rounds of cudrv/raw within a round) reported:
//   replay       graph_exec::launch of the cudrv-built graph vs cuGraphLaunch of the raw-built
//                one, launch + stream synchronisation, reported per kernel node;
//   instantiate  graph_ref::instantiate of the cudrv-built graph vs cuGraphInstantiateWithFlags of
//                the raw-built one (each executable destroyed after);
//   build        1000 cudrv::launch(graph_builder&, ...) vs 1000 cuGraphAddKernelNode into a new graph.
// Each case also times the raw side twice (A/A): that ratio is the noise floor to read the others by.
// The last line is the same figures as JSON; the goal for each ratio is at most 1.05.
//
// Exit status: 0 success, 1 usage error, 2 no CUDA driver, 3 no CUDA device, 4 CUDA error.
#include <cudaTypedefs.h>

#include <cudrv/cudrv.hpp>

#include "bench_support.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

constexpr int nodes = 1000;

double time_ns(const std::function<void()>& fn) {
  auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 21;
  bool quick = false;
  if (int status = bench::start("bench_graph", argc, argv, quick); status >= 0) {
    return status;
  }
  if (quick) {
    rounds = 5;
  }
  try {
    bench::args_kernel_fixture fx;
    cudrv::device& dev = fx.dev;
    auto ctx = dev.primary_context();
    cudrv::stream& s = fx.stream;
    cudrv::typed_kernel_ref<void(int*, int, float)> k = fx.typed;
    int* ptr = fx.ptr;
    int n = fx.n;
    float x = fx.x;
    const cudrv::launch_config config{.grid = 1, .block = 32};

    auto raw_add = reinterpret_cast<PFN_cuGraphAddKernelNode_v12000>(
        cudrv::driver::get_entry_point("cuGraphAddKernelNode", 12000));
    auto raw_create =
        reinterpret_cast<PFN_cuGraphCreate_v10000>(cudrv::driver::get_entry_point("cuGraphCreate", 10000));
    auto raw_destroy =
        reinterpret_cast<PFN_cuGraphDestroy_v10000>(cudrv::driver::get_entry_point("cuGraphDestroy", 10000));
    auto raw_instantiate = reinterpret_cast<PFN_cuGraphInstantiateWithFlags_v11040>(
        cudrv::driver::get_entry_point("cuGraphInstantiateWithFlags", 11040));
    auto raw_exec_destroy =
        reinterpret_cast<PFN_cuGraphExecDestroy_v10000>(cudrv::driver::get_entry_point("cuGraphExecDestroy", 10000));
    auto raw_launch =
        reinterpret_cast<PFN_cuGraphLaunch_v10000>(cudrv::driver::get_entry_point("cuGraphLaunch", 10000));
    auto raw_sync =
        reinterpret_cast<PFN_cuStreamSynchronize_v2000>(cudrv::driver::get_entry_point("cuStreamSynchronize", 2000));

    auto build_cudrv = [&] {
      cudrv::graph g;
      cudrv::graph_builder b(g, ctx);
      for (int i = 0; i < nodes; ++i) {
        cudrv::launch(b, config, k, ptr, n, x);
      }
      return g;
    };
    auto build_raw = [&] {
      CUgraph g = nullptr;
      bench::check(raw_create(&g, 0), "cuGraphCreate");
      CUgraphNode prev = nullptr;
      for (int i = 0; i < nodes; ++i) {
        void* args[] = {&ptr, &n, &x};
        CUDA_KERNEL_NODE_PARAMS p{};
        p.kern = k.native_handle();
        p.ctx = ctx.native_handle();
        p.gridDimX = p.gridDimY = p.gridDimZ = 1;
        p.blockDimX = 32;
        p.blockDimY = p.blockDimZ = 1;
        p.kernelParams = args;
        CUgraphNode node = nullptr;
        bench::check(raw_add(&node, g, prev != nullptr ? &prev : nullptr, prev != nullptr ? 1 : 0, &p),
                     "cuGraphAddKernelNode");
        prev = node;
      }
      return g;
    };

    // Two graphs of the same shape: one built through cudrv, one with raw calls; each replayed and
    // instantiated the way it was built.
    cudrv::graph g = build_cudrv();
    cudrv::graph_exec exec = g.instantiate();
    cudrv::graph raw_graph = cudrv::graph::from_native_handle(build_raw());
    CUgraphExec raw_exec = nullptr;
    bench::check(raw_instantiate(&raw_exec, raw_graph.native_handle(), 0), "cuGraphInstantiateWithFlags");
    cudrv::graph_exec raw_exec_owner = cudrv::graph_exec::from_native_handle(raw_exec, ctx);
    CUstream hs = s.native_handle();
    exec.launch(s);
    raw_exec_owner.launch(s);
    s.synchronize();

    // Each round times, per case, the raw side, the cudrv side and the raw side again (an A/A copy that
    // shows how far two identical sides drift apart), in an order that alternates between rounds.
    enum side { raw_side, cudrv_side, copy_side };
    struct series {
      std::vector<double> t[3];
      [[nodiscard]] double ratio(side s) const {
        std::vector<double> r;
        for (std::size_t i = 0; i < t[raw_side].size(); ++i) {
          r.push_back(t[s][i] / t[raw_side][i]);
        }
        return bench::median(r);
      }
    };
    series replay_t, inst_t, build_t;
    for (int r = 0; r < rounds; ++r) {
      auto replay = [&](bool raw) {
        return time_ns([&] {
          if (raw) {
            bench::check(raw_launch(raw_exec, hs), "cuGraphLaunch");
            bench::check(raw_sync(hs), "cuStreamSynchronize");
          } else {
            exec.launch(s);
            s.synchronize();
          }
        });
      };
      auto instantiate = [&](bool raw) {
        return time_ns([&] {
          if (raw) {
            CUgraphExec e = nullptr;
            bench::check(raw_instantiate(&e, raw_graph.native_handle(), 0), "cuGraphInstantiateWithFlags");
            bench::check(raw_exec_destroy(e), "cuGraphExecDestroy");
          } else {
            cudrv::graph_exec e = g.instantiate();
          }
        });
      };
      auto build = [&](bool raw) {
        return time_ns([&] {
          if (raw) {
            bench::check(raw_destroy(build_raw()), "cuGraphDestroy");
          } else {
            cudrv::graph built = build_cudrv();
          }
        });
      };
      static constexpr side orders[3][3] = {{raw_side, cudrv_side, copy_side},
                                            {cudrv_side, copy_side, raw_side},
                                            {copy_side, raw_side, cudrv_side}};
      for (side which : orders[r % 3]) {
        const bool raw = which != cudrv_side;
        replay_t.t[which].push_back(replay(raw) / nodes);
        inst_t.t[which].push_back(instantiate(raw));
        build_t.t[which].push_back(build(raw) / nodes);
      }
      std::fprintf(stderr, "\rbench_graph: round %d/%d", r + 1, rounds);
    }
    std::fprintf(stderr, "\n");
    std::printf("bench_graph: device 0 (%s), driver CUDA %d.%d; graph of %d empty kernel nodes; %d rounds\n",
                dev.name().c_str(), cudrv::driver::version() / 1000, cudrv::driver::version() % 1000 / 10, nodes,
                rounds);
    std::printf(
        "\n| case | raw (median) | cudrv (median) | paired ratio | A/A (raw vs raw) |\n|---|---:|---:|---:|---:|\n");
    struct row {
      const char* name;
      const series* data;
      double scale;
      const char* unit;
    };
    const row rows[] = {{"replay, per kernel node", &replay_t, 1e3, "us"},
                        {"instantiate, whole graph", &inst_t, 1e6, "ms"},
                        {"build, per kernel node", &build_t, 1e3, "us"}};
    for (const row& w : rows) {
      std::printf("| %s | %.3f %s | %.3f %s | %.3f | %.3f |\n", w.name, bench::median(w.data->t[raw_side]) / w.scale,
                  w.unit, bench::median(w.data->t[cudrv_side]) / w.scale, w.unit, w.data->ratio(cudrv_side),
                  w.data->ratio(copy_side));
    }
    std::printf("{\"bench\":\"graph\",\"nodes\":%d,\"rounds\":%d,\"replay_ratio\":%.4f,\"replay_aa\":%.4f,"
                "\"instantiate_ratio\":%.4f,\"instantiate_aa\":%.4f,\"build_ratio\":%.4f,\"build_aa\":%.4f,"
                "\"goal\":1.05}\n",
                nodes, rounds, replay_t.ratio(cudrv_side), replay_t.ratio(copy_side), inst_t.ratio(cudrv_side),
                inst_t.ratio(copy_side), build_t.ratio(cudrv_side), build_t.ratio(copy_side));
    return 0;
  } catch (const cudrv::error& e) {
    std::fprintf(stderr, "bench_graph: %s\n", e.what());
    return 4;
  }
}
