// heat_halo: the 1-D heat equation on a global grid split into contiguous slabs, one per MPI rank and
// GPU, with one ghost cell on each side of a slab. Every step exchanges the halos (each rank's edge
// cells go into its neighbours' ghost cells), then applies the explicit stencil on the device. The
// exchange is done three ways:
//   gpu-aware  MPI_Sendrecv on device pointers: MPI moves device memory itself. Only when
//              cudrv::mpi::gpu_aware() says yes (or with --force-gpu-aware); otherwise the method is
//              reported as skipped, which is not an error.
//   staged     the edge cells copied into a pinned host buffer on the stream, MPI_Sendrecv on host
//              memory, the received cells copied into the ghost cells on the stream.
//   nccl       a cudrv::nccl::group of send/recv on the device, enqueued on the stream (no host
//              synchronisation per step); the communicator is made with cudrv::mpi::broadcast_unique_id
//              and init_rank. NCCL needs one GPU per rank: ranks that share one are refused before
//              NCCL is called (status 6 for --exchange nccl; skipped under --exchange all).
//
//   mpirun -np N example_heat_halo [cells] [steps] [--exchange gpu-aware|staged|nccl|all]
//                                  [--force-gpu-aware] [--share-devices]
//       cells  global grid cells (default 64M; the GPU tier uses 100003), at least one per rank
//       steps  time steps (default 500; the GPU tier uses 200)
//       --exchange        the method, or all of them in turn (default all)
//       --force-gpu-aware pass device pointers to MPI even when it does not say it is GPU-aware (for
//                         MPIs that cannot be asked; one that is not GPU-aware crashes)
//       --share-devices   let ranks share a GPU (device_policy::shared)
// It runs without mpirun too (one rank).
//
// The field starts as a hash of the global cell index in [0, 1); the temperatures outside the domain
// are fixed at 1 (left) and 0 (right); r = dt / dx^2 = 0.25. Ghost cells that an exchange fills start
// as NaN, so a missed exchange poisons the result. Verification (exit 5): after each method's run the
// slabs are gathered on rank 0 (MPI_Gatherv) and compared with the same steps of the same kernel over
// the whole grid on rank 0's GPU alone. Each cell goes through the same float operations in both, so
// they must be equal bit for bit; the maximum absolute difference is printed.
//
// The figure, one per method: steps per second (the slowest rank's wall time from a barrier to the end
// of the last step), against the steps per second of the whole grid on one GPU: the speedup of N ranks
// over one GPU. Also printed: milliseconds per step, and the exchange's share of a step (1 - the time of
// the same steps without any exchange / the time with it).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "example_main.hpp"
#include "kernels/heat_halo.hpp"
#include "mpi_example.hpp"

namespace {

using u64 = unsigned long long;
constexpr int block_size = 256;
constexpr float r_coefficient = 0.25f;
constexpr float left_boundary = 1.0f;
constexpr float right_boundary = 0.0f;
constexpr int warmup_steps = 10;
const char* const usage =
    "example_heat_halo [cells] [steps] [--exchange gpu-aware|staged|nccl|all] [--force-gpu-aware] [--share-devices]";

enum class method { gpu_aware, staged, nccl, none };

const char* name_of(method m) {
  switch (m) {
    case method::gpu_aware: return "gpu-aware";
    case method::staged: return "staged";
    case method::nccl: return "nccl";
    case method::none: return "none";
  }
  return "?";
}

struct gpu {
  cudrv::device dev;
  cudrv::typed_kernel<void(float*, float*, u64, u64, float, float)> init;
  cudrv::typed_kernel<void(const float*, float*, u64, float)> step;
  u64 full_grid;
};

gpu setup(const cudrv::device& dev) {
  cudrv::library lib = example::compile(dev, "heat_halo.cu", example::heat_halo_kernels::source);
  auto init = lib.get_kernel<void(float*, float*, u64, u64, float, float)>("init");
  auto step = lib.get_kernel<void(const float*, float*, u64, float)>("step");
  const u64 full_grid = static_cast<u64>(dev.attribute(cudrv::device_attributes::multiprocessor_count)) *
                        static_cast<u64>(step.max_active_blocks_per_multiprocessor(dev, block_size));
  return gpu{dev, std::move(init), std::move(step), full_grid};
}

// A field of `count` cells plus two ghosts, in two buffers (the step reads one and writes the other).
struct field {
  field(const gpu& g, u64 first_, u64 count_, float left_, float right_)
      : first(first_), count(count_), left(left_), right(right_), a(g.dev, count_ + 2), b(g.dev, count_ + 2) {}
  u64 first;
  u64 count;
  float left;
  float right;
  cudrv::device_buffer<float> a;
  cudrv::device_buffer<float> b;
  bool current_is_a = true;
  [[nodiscard]] cudrv::device_buffer<float>& u() { return current_is_a ? a : b; }
  [[nodiscard]] cudrv::device_buffer<float>& v() { return current_is_a ? b : a; }

  void enqueue_init(const gpu& g, cudrv::stream_ref s) {
    current_is_a = true;
    const u64 blocks = std::min<u64>(g.full_grid, (count + 2 + block_size - 1) / block_size);
    cudrv::launch(s, {.grid = cudrv::dims::checked(blocks), .block = block_size}, g.init, a.get(), b.get(), first,
                  count, left, right);
  }
  // One step u -> v; v becomes the current field.
  void enqueue_step(const gpu& g, cudrv::stream_ref s) {
    const u64 blocks = std::min<u64>(g.full_grid, (count + block_size - 1) / block_size);
    cudrv::launch(s, {.grid = cudrv::dims::checked(blocks), .block = block_size}, g.step,
                  static_cast<const float*>(u().get()), v().get(), count, r_coefficient);
    current_is_a = !current_is_a;
  }
};

// A rank's slab, its neighbours (MPI_PROC_NULL at the ends of the domain) and the exchanges.
struct slab {
  const example::mpi::world& w;
  const gpu& g;
  cudrv::stream_ref s;
  field f;
  int left_rank;
  int right_rank;
  cudrv::pinned_buffer<float> send;  // [0] this slab's first cell, going left; [1] its last, going right
  cudrv::pinned_buffer<float> recv;  // [0] from the left neighbour, [1] from the right neighbour
  const cudrv::nccl::communicator* comm = nullptr;

  slab(const example::mpi::world& w_, const gpu& g_, cudrv::stream_ref s_, u64 first, u64 count)
      : w(w_),
        g(g_),
        s(s_),
        f(g_, first, count, w_.rank == 0 ? left_boundary : std::numeric_limits<float>::quiet_NaN(),
          w_.rank == w_.size - 1 ? right_boundary : std::numeric_limits<float>::quiet_NaN()),
        left_rank(w_.rank > 0 ? w_.rank - 1 : MPI_PROC_NULL),
        right_rank(w_.rank < w_.size - 1 ? w_.rank + 1 : MPI_PROC_NULL),
        send(g_.dev, 2),
        recv(g_.dev, 2) {}

  // MPI_Sendrecv of one float each way: this rank's first cell to the left and the right neighbour's
  // first cell into right_ghost, then this rank's last cell to the right and the left neighbour's last
  // cell into left_ghost. The pointers are host or (GPU-aware MPI) device pointers.
  void sendrecv(float* first_cell, float* last_cell, float* left_ghost, float* right_ghost) const {
    cudrv::mpi::check(MPI_Sendrecv(first_cell, 1, MPI_FLOAT, left_rank, 0, right_ghost, 1, MPI_FLOAT, right_rank, 0,
                                   w.comm, MPI_STATUS_IGNORE),
                      "MPI_Sendrecv", "halo going left");
    cudrv::mpi::check(MPI_Sendrecv(last_cell, 1, MPI_FLOAT, right_rank, 1, left_ghost, 1, MPI_FLOAT, left_rank, 1,
                                   w.comm, MPI_STATUS_IGNORE),
                      "MPI_Sendrecv", "halo going right");
  }

  void exchange(method m) {
    cudrv::device_buffer<float>& u = f.u();
    const u64 n = f.count;
    switch (m) {
      case method::gpu_aware: {
        // MPI reads and writes device memory outside the stream's order: the last step must be done.
        s.synchronize();
        float* d = u.get();
        sendrecv(d + 1, d + n, d, d + n + 1);
        break;
      }
      case method::staged: {
        cudrv::copy(std::span<float>(send.data(), 1), u.view().subspan(1, 1), s);
        cudrv::copy(std::span<float>(send.data() + 1, 1), u.view().subspan(n, 1), s);
        s.synchronize();  // the edge cells are in send (and the last step's ghost copies out of recv are done)
        sendrecv(send.data(), send.data() + 1, recv.data(), recv.data() + 1);
        if (left_rank != MPI_PROC_NULL) {
          cudrv::copy(u.view().subspan(0, 1), std::span<const float>(recv.data(), 1), s);
        }
        if (right_rank != MPI_PROC_NULL) {
          cudrv::copy(u.view().subspan(n + 1, 1), std::span<const float>(recv.data() + 1, 1), s);
        }
        break;  // the next kernel on s runs after the ghost copies
      }
      case method::nccl: {
        if (w.size == 1) {
          break;
        }
        // Ordered on s after the last step; the next step follows on s after the transfers.
        cudrv::nccl::group grp;
        if (left_rank != MPI_PROC_NULL) {
          comm->send(u.view().subspan(1, 1), left_rank, s);
          comm->recv(u.view().subspan(0, 1), left_rank, s);
        }
        if (right_rank != MPI_PROC_NULL) {
          comm->send(u.view().subspan(n, 1), right_rank, s);
          comm->recv(u.view().subspan(n + 1, 1), right_rank, s);
        }
        grp.end();
        break;
      }
      case method::none: break;
    }
  }

  // `steps` steps with the exchange m from the initial field; returns the slowest rank's wall time in ms.
  double run_steps(method m, int steps) {
    f.enqueue_init(g, s);
    s.synchronize();
    cudrv::mpi::check(MPI_Barrier(w.comm), "MPI_Barrier");
    const double t0 = MPI_Wtime();
    for (int k = 0; k < steps; ++k) {
      exchange(m);
      f.enqueue_step(g, s);
    }
    s.synchronize();
    const double ms = (MPI_Wtime() - t0) * 1e3;
    return example::mpi::all_reduce(w, ms, MPI_MAX);
  }
};

// The whole grid on rank 0's GPU: the reference field (cells only) and its time in ms.
std::vector<float> one_gpu_run(const gpu& g, cudrv::stream_ref s, u64 cells, int steps, double& ms) {
  field f(g, 0, cells, left_boundary, right_boundary);
  auto run_all = [&](int k) {
    f.enqueue_init(g, s);
    s.synchronize();
    const double t0 = MPI_Wtime();
    for (int i = 0; i < k; ++i) {
      f.enqueue_step(g, s);
    }
    s.synchronize();
    return (MPI_Wtime() - t0) * 1e3;
  };
  run_all(std::min(steps, warmup_steps));
  ms = run_all(steps);
  std::vector<float> out(cells);
  cudrv::copy(std::span<float>(out), f.u().view().subspan(1, cells), s);
  s.synchronize();
  return out;
}

bool run(const example::mpi::world& w, u64 cells, int steps, const std::string& exchange, bool force_gpu_aware,
         bool share) {
  const u64 first = cells * static_cast<u64>(w.rank) / static_cast<u64>(w.size);
  const u64 count = cells * static_cast<u64>(w.rank + 1) / static_cast<u64>(w.size) - first;

  const cudrv::device dev = example::mpi::phase("heat_halo", w, [&] {
    if (cells < static_cast<u64>(w.size)) {
      throw example::usage_error{"cells = " + std::to_string(cells) + " is less than the number of ranks"};
    }
    return example::mpi::select_device(w, share);
  });
  const std::vector<example::mpi::placement> where = example::mpi::placements("heat_halo", w, dev);
  const int gpus = example::mpi::distinct_devices(where);
  if (exchange == "nccl") {
    example::mpi::refuse_shared_devices("heat_halo", w, where);  // status 6 before any work
  }
  gpu g = example::mpi::phase("heat_halo", w, [&] { return setup(dev); });
  cudrv::stream s(g.dev);
  slab sl(w, g, s, first, count);

  // Which methods run. Every rank decides the same from the same inputs (gpu_aware() is the same MPI
  // library on every rank; its answer is taken from rank 0 all the same).
  int aware = cudrv::mpi::gpu_aware() == cudrv::mpi::gpu_awareness::yes ? 1 : 0;
  cudrv::mpi::check(MPI_Bcast(&aware, 1, MPI_INT, 0, w.comm), "MPI_Bcast");
  const bool all = exchange == "all";
  std::vector<method> methods;
  for (method m : {method::staged, method::gpu_aware, method::nccl}) {
    if (all || exchange == name_of(m)) {
      methods.push_back(m);
    }
  }

  if (w.root()) {
    std::printf("heat_halo: %llu cells, %d steps, %d rank%s on %d GPU%s (%s); MPI GPU-aware: %s%s\n", cells, steps,
                w.size, w.size == 1 ? "" : "s", gpus, gpus == 1 ? "" : "s", g.dev.name().c_str(),
                cudrv::mpi::to_string(cudrv::mpi::gpu_aware()), force_gpu_aware ? " (forced: yes)" : "");
  }

  // The reference on rank 0's GPU (the others wait in the next barrier).
  double one_ms = 0;
  std::vector<float> reference;
  if (w.root()) {
    reference = one_gpu_run(g, s, cells, steps, one_ms);
  }
  // The same steps without exchanges, for the exchange's share.
  sl.run_steps(method::none, std::min(steps, warmup_steps));
  const double compute_ms = sl.run_steps(method::none, steps);

  std::vector<int> counts(static_cast<std::size_t>(w.size));
  std::vector<int> displacements(static_cast<std::size_t>(w.size));
  for (int r = 0; r < w.size; ++r) {
    const u64 f0 = cells * static_cast<u64>(r) / static_cast<u64>(w.size);
    displacements[static_cast<std::size_t>(r)] = static_cast<int>(f0);
    counts[static_cast<std::size_t>(r)] =
        static_cast<int>(cells * static_cast<u64>(r + 1) / static_cast<u64>(w.size) - f0);
  }
  std::vector<float> mine(count);
  std::vector<float> gathered(w.root() ? cells : 0);

  bool ok = true;
  cudrv::nccl::communicator comm;
  for (method m : methods) {
    std::string skipped;
    if (m == method::gpu_aware && aware == 0 && !force_gpu_aware) {
      skipped = std::string("MPI is not GPU-aware (cudrv::mpi::gpu_aware() = ") +
                cudrv::mpi::to_string(cudrv::mpi::gpu_aware()) +
                "); --force-gpu-aware passes device pointers to it anyway";
    }
    if (m == method::nccl) {
      const std::string shared = example::mpi::shared_device(where, w.node.nodes);
      if (all && !shared.empty()) {
        skipped = shared;
      } else if (all && example::mpi::all_reduce(w, cudrv::nccl::available() ? 1 : 0, MPI_MIN) == 0) {
        skipped = "NCCL cannot be loaded: " + cudrv::nccl::unavailable_reason();
      } else {
        comm = example::mpi::make_communicator("heat_halo", w, g.dev, where);  // status 6 when shared
        sl.comm = &comm;
      }
    }
    if (!skipped.empty()) {
      if (w.root()) {
        std::printf("heat_halo: %s exchange skipped: %s\n", name_of(m), skipped.c_str());
        std::printf(
            "{\"example\": \"heat_halo\", \"exchange\": \"%s\", \"ranks\": %d, \"gpus\": %d, \"skipped\": true}\n",
            name_of(m), w.size, gpus);
        std::fflush(stdout);
      }
      continue;
    }

    sl.run_steps(m, std::min(steps, warmup_steps));
    const double ms = sl.run_steps(m, steps);

    // Gather the slabs on rank 0 and compare with the one-GPU field.
    cudrv::copy(std::span<float>(mine), sl.f.u().view().subspan(1, count), s);
    s.synchronize();
    cudrv::mpi::check(MPI_Gatherv(mine.data(), static_cast<int>(count), MPI_FLOAT, gathered.data(), counts.data(),
                                  displacements.data(), MPI_FLOAT, 0, w.comm),
                      "MPI_Gatherv", "gathering the field");
    if (w.root()) {
      std::size_t different = 0;
      double max_diff = 0;
      for (u64 i = 0; i < cells; ++i) {
        if (std::memcmp(&gathered[i], &reference[i], sizeof(float)) != 0) {
          ++different;
          const double d = std::fabs(static_cast<double>(gathered[i]) - static_cast<double>(reference[i]));
          max_diff = std::isnan(d) ? std::numeric_limits<double>::infinity() : std::max(max_diff, d);
        }
      }
      const bool equal = different == 0;
      ok = ok && equal;
      const double ms_per_step = ms / steps;
      const double share_of_exchange = ms > 0 ? std::max(0.0, 1.0 - compute_ms / ms) : 0.0;
      std::printf("  %s: %.4f ms per step (without exchange %.4f), exchange %.1f %% of a step; against one GPU: "
                  "%s (max |diff| %.3g)\n",
                  name_of(m), ms_per_step, compute_ms / steps, 100 * share_of_exchange,
                  equal ? "bitwise equal" : (std::to_string(different) + " cells DIFFERENT").c_str(), max_diff);
      char detail[200];
      std::snprintf(detail, sizeof detail,
                    "%s exchange, %d ranks on %d GPUs, %llu cells, %.4f ms per step, "
                    "exchange %.1f %%, %s",
                    name_of(m), w.size, gpus, cells, ms_per_step, 100 * share_of_exchange,
                    equal ? "bitwise equal to one GPU" : "DIFFERENT from one GPU");
      char json[240];
      std::snprintf(json, sizeof json,
                    "\"exchange\": \"%s\", \"ranks\": %d, \"gpus\": %d, \"ms_per_step\": %.6g, "
                    "\"exchange_share\": %.4f, \"max_abs_diff\": %.6g, \"skipped\": false",
                    name_of(m), w.size, gpus, ms_per_step, share_of_exchange, max_diff);
      example::report({.example = "heat_halo",
                       .metric = "steps/s",
                       .value = steps / (ms * 1e-3),
                       .reference = one_ms > 0 ? steps / (one_ms * 1e-3) : 0,
                       .reference_name = "one GPU, whole grid",
                       .target = 0,
                       .detail = detail,
                       .bytes = 2.0 * sizeof(float) * static_cast<double>(cells) * steps,
                       .seconds = ms * 1e-3,
                       .json = json});
    }
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  return example::mpi::run("heat_halo", argc, argv, [&](const example::mpi::world& w) {
    struct options {
      example::mpi::arguments args;
      u64 cells;
      int steps;
      std::string exchange;
    };
    const options o = example::mpi::phase("heat_halo", w, [&] {
      example::mpi::arguments a =
          example::mpi::parse(argc, argv, {"--exchange=", "--force-gpu-aware", "--share-devices"}, 2, usage);
      const u64 cells = a.size(0, std::size_t{64} << 20, "cell count");
      const std::size_t steps = a.size(1, 500, "step count");
      if (cells > static_cast<u64>(std::numeric_limits<int>::max())) {  // MPI_Gatherv's counts are ints
        throw example::usage_error{"at most 2^31 - 1 cells"};
      }
      if (steps > 1000000000) {
        throw example::usage_error{"at most 10^9 steps"};
      }
      std::string exchange = a.value("--exchange");
      if (exchange.empty()) {
        exchange = "all";
      }
      if (exchange != "all" && exchange != "gpu-aware" && exchange != "staged" && exchange != "nccl") {
        throw example::usage_error{"--exchange takes gpu-aware, staged, nccl or all, not '" + exchange + "'"};
      }
      return options{std::move(a), cells, static_cast<int>(steps), std::move(exchange)};
    });
    return run(w, o.cells, o.steps, o.exchange, o.args.has("--force-gpu-aware"), o.args.has("--share-devices"));
  });
}
