// The MPI side of cudrv_nccl_mpi_tests (tests/multigpu/mpi_main.cpp, test_nccl_mpi.cpp): what every
// rank knows about the job, decided once and collectively before any test case runs, so that a case
// is skipped on every rank or on none (a case skipped on some ranks only would leave the others
// waiting in a collective forever).
//
// One rank per GPU (cudrv::mpi::select_device, exclusive). Where a node has more ranks than devices,
// every rank prints "SKIPPED: needs one GPU per rank (N ranks, M devices)"; without a driver or NCCL,
// "SKIPPED: no CUDA device (...)". ctest's SKIP_REGULAR_EXPRESSION turns either into "Skipped".
#pragma once

#include <cudrv/cudrv.hpp>
#include <cudrv/mpi.hpp>
#include <cudrv/nccl.hpp>

#include <chrono>
#include <cstdint>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>

#include "support/test_support.hpp"
#include "watchdog.hpp"

namespace cudrv::test::multigpu {

/// The job as this rank sees it, filled in by init() (collective) before the test session.
struct mpi_world {
  int rank = 0;
  int size = 1;
  cudrv::mpi::node_info node{};
  int device_count = 0;              ///< devices this rank's driver sees (0 without a driver)
  bool gpu_ok = false;               ///< every rank has a driver, a device and NCCL
  bool ready = false;                ///< gpu_ok, and no node has more ranks than devices: one GPU per rank
  std::string skip_message;          ///< this rank's "SKIPPED: ..." line when not ready
  std::string gpu_skip_message;      ///< this rank's "SKIPPED: ..." line when not gpu_ok
  std::optional<cudrv::device> dev;  ///< this rank's device when ready
  std::uint64_t seed = 0;            ///< rank 0's test seed, the same on every rank

  /// The communicator of every rank (blocking, made on first use with broadcast_unique_id and
  /// init_rank; every rank reaches its first use in the same test case) and a stream on dev.
  cudrv::nccl::communicator& comm();
  cudrv::stream& stream();

  /// Decides, on every rank alike, what can run. Collective over MPI_COMM_WORLD.
  void init();
  /// Destroys the communicator (collective) and the stream, before MPI is finalized.
  void release();

 private:
  cudrv::nccl::communicator comm_;
  std::optional<cudrv::stream> stream_;
};

inline mpi_world& world() {
  static mpi_world w;
  return w;
}

/// Prints one line with this rank's prefix ("[rank 1/2] ..."), in one piece.
inline void say(const std::string& line) {
  std::ostringstream out;
  out << "[rank " << world().rank << "/" << world().size << "] " << line << '\n';
  std::cout << out.str() << std::flush;
}

inline void mpi_world::init() {
  cudrv::mpi::check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
  cudrv::mpi::check(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
  node = cudrv::mpi::node_local(MPI_COMM_WORLD);
  const bool has_gpu = cudrv::test::gpu_available();
  const bool has_nccl = has_gpu && cudrv::nccl::available();
  device_count = has_gpu ? cudrv::device_count() : 0;
  const bool enough = node.local_size <= device_count;
  int mine[3] = {has_gpu ? 1 : 0, has_nccl ? 1 : 0, enough ? 1 : 0};
  int all[3] = {0, 0, 0};
  cudrv::mpi::check(MPI_Allreduce(mine, all, 3, MPI_INT, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce",
                    "deciding what the multi-rank tests can run");
  gpu_ok = all[0] == 1 && all[1] == 1;
  ready = gpu_ok && all[2] == 1;
  if (all[0] == 0) {
    gpu_skip_message = has_gpu ? "SKIPPED: no CUDA device on another rank"
                               : "SKIPPED: no CUDA device (" + cudrv::test::gpu_unavailable_reason() + ")";
  } else if (all[1] == 0) {
    gpu_skip_message = has_nccl
                           ? "SKIPPED: no CUDA device usable with NCCL on another rank"
                           : "SKIPPED: no CUDA device usable with NCCL (" + cudrv::nccl::unavailable_reason() + ")";
  }
  if (!gpu_ok) {
    skip_message = gpu_skip_message;
  } else if (!ready) {
    skip_message = enough ? "SKIPPED: needs one GPU per rank (another node has more ranks than devices)"
                          : "SKIPPED: needs one GPU per rank (" + std::to_string(node.local_size) + " ranks, " +
                                std::to_string(device_count) + " devices)";
  }
  if (ready) {
    dev = cudrv::mpi::select_device(node, cudrv::mpi::device_policy::exclusive);
  }
  unsigned long long s = rank == 0 ? cudrv::test::test_seed() : 0;
  cudrv::mpi::check(MPI_Bcast(&s, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD), "MPI_Bcast", "the test seed");
  seed = s;
}

inline cudrv::nccl::communicator& mpi_world::comm() {
  if (!comm_) {
    const cudrv::nccl::unique_id id = cudrv::mpi::broadcast_unique_id(MPI_COMM_WORLD);
    comm_ = cudrv::nccl::communicator::init_rank(id, size, rank, *dev, {.name = "cudrv-test-world"});
  }
  return comm_;
}

inline cudrv::stream& mpi_world::stream() {
  if (!stream_) {
    stream_.emplace(*dev);
  }
  return *stream_;
}

inline void mpi_world::release() {
  comm_.reset();
  stream_.reset();
}

/// Starts a test case that needs one GPU per rank: arms the watchdog for the case and, where the
/// job cannot run it, prints the skip line on every rank and leaves the case (on every rank alike).
#define CUDRV_MPI_CASE(label, limit_s)                                                                \
  ::cudrv::test::multigpu::watchdog_scope cudrv_case_watchdog_(label, std::chrono::seconds(limit_s)); \
  do {                                                                                                \
    if (!::cudrv::test::multigpu::world().ready) {                                                    \
      ::cudrv::test::multigpu::say(::cudrv::test::multigpu::world().skip_message);                    \
      return;                                                                                         \
    }                                                                                                 \
  } while (0)

}  // namespace cudrv::test::multigpu
