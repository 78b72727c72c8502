// heat: the 2D heat equation on an N x N grid, relaxed by Jacobi sweeps until no point changes by
// more than a tolerance, where the whole solve is ONE graph launch. A conditional WHILE node repeats
// its body, k sweeps followed by a check, and the check kernel itself decides whether the body runs
// again (cudaGraphSetConditional): the loop's control flow stays on the device and the host never
// waits for an iteration.
//
//   example_heat [N]          grid size, default 2048 (the GPU tier uses 64: examples/test-sizes.txt)
//
// The edges hold fixed temperatures (hot top, warm left, cool right, cold bottom); the interior starts
// cold. Each sweep replaces every interior point by the mean of its four neighbours, from one buffer
// into the other (ping-pong). The last of every k sweeps also finds the largest change on the device
// (block max, then atomicMax on the float's bits); the check records it, and the loop goes on while
// it is above the tolerance and under the sweep limit.
//
// The same kernels then run from a host loop, the usual way: after every k sweeps it copies the state
// back, waits for it and decides on the host. Both must stop after the same number of sweeps with the
// same field, bit for bit; for N <= 256 a host implementation of the same iteration must agree bit for
// bit as well. The figure is the speedup of the graph over the host loop (median of 3 timed solves
// each, after a warm-up solve).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "example_main.hpp"
#include "kernels/heat.hpp"

namespace {

constexpr int sweeps_per_check = 8;  // k, even: after each round the newest field is in buffer a
constexpr float tolerance = 1e-5f;   // stop once a sweep changes no point by more than this
constexpr int max_sweeps = 200000;   // or after this many sweeps
constexpr std::size_t host_reference_max_n = 256;

// The layout of the device's solver_state.
struct heat_state {
  unsigned update_bits;
  int sweeps;
  float residual;
};

// The host's stopping rule, the same as the device's finish_round.
bool keep_going(const heat_state& s) { return s.residual > tolerance && s.sweeps < max_sweeps; }

// The initial field, as the device's initial_value.
float initial_value(int i, int j, int n) {
  if (i == 0) return 1.0f;
  if (j == 0) return 0.5f;
  if (j == n - 1) return 0.25f;
  return 0.0f;
}

// The same iteration on the host, in the same float operations: the field and the state at the end.
std::vector<float> solve_on_host(int n, heat_state& state) {
  const std::size_t w = static_cast<std::size_t>(n);
  std::vector<float> a(w * w);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      a[i * w + j] = initial_value(i, j, n);
    }
  }
  std::vector<float> b = a;
  state = {0, 0, 0.0f};
  do {
    float largest = 0.0f;
    for (int s = 0; s < sweeps_per_check; ++s) {
      const float* u = (s % 2 == 0 ? a : b).data();
      float* v = (s % 2 == 0 ? b : a).data();
      for (std::size_t i = 1; i + 1 < w; ++i) {
        for (std::size_t c = i * w + 1; c < i * w + w - 1; ++c) {
          v[c] = 0.25f * ((u[c - w] + u[c + w]) + (u[c - 1] + u[c + 1]));
        }
        if (s == sweeps_per_check - 1) {
          for (std::size_t c = i * w + 1; c < i * w + w - 1; ++c) {
            const float change = std::fabs(v[c] - u[c]);
            largest = change > largest ? change : largest;
          }
        }
      }
    }
    state.sweeps += sweeps_per_check;
    state.residual = largest;
  } while (keep_going(state));
  return a;
}

bool run(int n) {
  cudrv::device dev(0);
  dev.set_current();  // stream-ordered copies and fills run in the current context
  const cudrv::context_ref ctx = dev.primary_context();
  cudrv::library lib = example::compile(dev, "heat.cu", example::heat_kernels::source);
  using state_ptr = heat_state*;
  auto init = lib.get_kernel<void(float*, float*, int, state_ptr)>("init");
  auto sweep = lib.get_kernel<void(const float*, float*, int)>("sweep");
  auto sweep_residual = lib.get_kernel<void(const float*, float*, int, state_ptr)>("sweep_residual");
  auto check = lib.get_kernel<void(state_ptr, int, float, int)>("check");
  auto check_graph = lib.get_kernel<void(CUgraphConditionalHandle, state_ptr, int, float, int)>("check_graph");

  const std::size_t cells = static_cast<std::size_t>(n) * n;
  cudrv::device_buffer<float> a(dev, cells), b(dev, cells);
  cudrv::device_buffer<heat_state> state(dev, 1);
  const cudrv::launch_config grid{.grid = {(n + 31) / 32, (n + 7) / 8}, .block = {32, 8}};
  const cudrv::launch_config one_thread{.grid = 1, .block = 1};

  // One round: k sweeps a -> b -> a ..., the last one measuring the largest change. Enqueued on a
  // stream or added to a graph body with the same calls.
  auto enqueue_round = [&](auto& target) {
    for (int s = 0; s < sweeps_per_check; ++s) {
      const float* from = s % 2 == 0 ? a.get() : b.get();
      float* to = s % 2 == 0 ? b.get() : a.get();
      if (s + 1 < sweeps_per_check) {
        cudrv::launch(target, grid, sweep, from, to, n);
      } else {
        cudrv::launch(target, grid, sweep_residual, from, to, n, state.get());
      }
    }
  };

  // Version 1: init, then WHILE (condition) { round; check_graph sets the condition }, as one graph.
  // The condition starts at 1 at every launch, so the body runs at least once, as a do-while loop.
  cudrv::graph g;
  cudrv::graph_builder top(g, ctx);
  cudrv::launch(top, grid, init, a.get(), b.get(), n, state.get());
  const cudrv::conditional_handle condition = g.make_conditional_handle(ctx, 1, /*reset_on_launch=*/true);
  cudrv::conditional_node loop =
      g.add_conditional(condition, cudrv::conditional_kind::while_loop, ctx, 1, top.dependencies());
  cudrv::graph_builder body(loop.bodies[0], ctx);
  enqueue_round(body);
  cudrv::launch(body, one_thread, check_graph, condition.native_handle(), state.get(), sweeps_per_check, tolerance,
                max_sweeps);
  cudrv::graph_exec solve = g.instantiate(ctx);

  // Version 2: the host drives the loop and waits for the state after every round.
  cudrv::pinned_buffer<heat_state> seen(dev, 1);
  auto solve_from_host = [&](cudrv::stream_ref s) {
    cudrv::launch(s, grid, init, a.get(), b.get(), n, state.get());
    do {
      enqueue_round(s);
      cudrv::launch(s, one_thread, check, state.get(), sweeps_per_check, tolerance, max_sweeps);
      cudrv::copy(seen, state, s);
      s.synchronize();  // the round trip the graph avoids
    } while (keep_going(seen[0]));
  };

  // Each version: poison the field (init must write all of it), time, read the field and the state back.
  cudrv::stream stream(dev);
  solve.upload(stream);
  constexpr int repetitions = 3;
  const float poison = std::numeric_limits<float>::quiet_NaN();
  auto measure = [&](auto&& work, std::vector<float>& field, heat_state& end) {
    cudrv::fill(a, poison, stream);
    cudrv::fill(b, poison, stream);
    // time_ms runs work once to warm up, then `repetitions` times between two events. The host loop's
    // synchronisations happen between the events, so their cost is in its time: that is the point.
    const double ms = example::time_ms(dev, stream, repetitions, work);
    field.resize(cells);
    std::vector<heat_state> s(1);
    cudrv::copy(field, a);
    cudrv::copy(s, state);
    end = s[0];
    return ms;
  };
  std::vector<float> graph_field, host_field;
  heat_state graph_end{}, host_end{};
  const double graph_ms = measure([&](cudrv::stream_ref s) { solve.launch(s); }, graph_field, graph_end);
  const double host_ms = measure(solve_from_host, host_field, host_end);

  std::printf("heat: %d x %d grid on %s, tolerance %g, residual checked every %d sweeps\n", n, n, dev.name().c_str(),
              static_cast<double>(tolerance), sweeps_per_check);
  auto print = [&](const char* what, const heat_state& end, double ms) {
    std::printf("  %-40s %7d sweeps in %9.3f ms: %9.0f sweeps/s, final residual %.3e\n", what, end.sweeps, ms,
                end.sweeps / (ms * 1e-3), static_cast<double>(end.residual));
  };
  print("graph (1 launch, conditional WHILE node):", graph_end, graph_ms);
  print("host-driven loop (waits every round):", host_end, host_ms);

  // Checks: the two versions agree bit for bit, and with the host for small grids.
  bool ok = true;
  const bool same = graph_end.sweeps == host_end.sweeps && graph_end.residual == host_end.residual &&
                    std::memcmp(graph_field.data(), host_field.data(), cells * sizeof(float)) == 0;
  std::printf("  graph and host-driven loop: %s\n", same ? "same sweeps, same field (bitwise)" : "DIFFERENT");
  ok = ok && same;
  if (graph_end.sweeps >= max_sweeps) {
    std::printf("  the sweep limit (%d) was reached before the tolerance\n", max_sweeps);
  }
  if (static_cast<std::size_t>(n) <= host_reference_max_n) {
    heat_state ref_end{};
    const std::vector<float> ref = solve_on_host(n, ref_end);
    std::size_t differing = 0;
    for (std::size_t c = 0; c < cells; ++c) {
      differing += std::memcmp(&ref[c], &graph_field[c], sizeof(float)) != 0;
    }
    const bool match = differing == 0 && ref_end.sweeps == graph_end.sweeps && ref_end.residual == graph_end.residual;
    std::printf("  host reference: %d sweeps, residual %.3e, %zu of %zu points differ: %s\n", ref_end.sweeps,
                static_cast<double>(ref_end.residual), differing, cells, match ? "identical" : "WRONG");
    ok = ok && match;
  } else {
    std::printf("  host reference: skipped for N > %zu (compared graph against host loop only)\n",
                host_reference_max_n);
  }

  const double sweeps = graph_end.sweeps;
  const double interior = static_cast<double>(n - 2) * (n - 2);
  example::report({.example = "heat",
                   .metric = "speedup",
                   .value = host_ms / graph_ms,
                   .reference = 1.0,
                   .reference_name = "host-driven loop",
                   .target = 1.0,
                   .detail = std::to_string(n) + "x" + std::to_string(n) + ", " + std::to_string(graph_end.sweeps) +
                             " sweeps, residual checked every " + std::to_string(sweeps_per_check),
                   .bytes = sweeps * interior * 2 * sizeof(float),
                   .flops = sweeps * interior * 4,
                   .seconds = graph_ms * 1e-3});
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  return example::run("heat", [&] {
    const std::size_t n = example::size_arg(argc, argv, 1, 2048, "grid size N");
    if (n < 3 || n > 32768) {
      throw example::usage_error{"usage: example_heat [N], 3 <= N <= 32768 (default 2048)"};
    }
    return run(static_cast<int>(n));
  });
}
