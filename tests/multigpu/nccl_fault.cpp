// cudrv_nccl_fault_test: the fault path of an NCCL job. One rank dies; every other rank must learn of
// it through the communicator (a typed error from async_error(), or abort() at a deadline) within a
// stated bound, and never hang.
//
// Run with mpirun -np N (N >= 2, one rank per GPU; see tests/multigpu/CMakeLists.txt for the flags):
//
//   1. Every rank makes a non-blocking communicator (broadcast_unique_id, init_rank, wait_ready) and
//      warms it up with a correct all_reduce of the buffer used below (checked), so every connection
//      the all_reduce needs is made before anyone dies.
//   2. The victim is the last rank. --mode absent (default): the survivors enqueue a large all_reduce,
//      then all ranks meet in MPI_Barrier, and the victim leaves without joining the collective.
//      --mode mid: every rank, the victim included, enqueues --repeat large all_reduces, all meet in
//      MPI_Barrier, and the victim dies while they run (its kernels die with its process).
//      The victim dies with std::_Exit(0): mpirun (Open MPI 4.1) must be told not to end the job when
//      a rank exits without MPI_Finalize (--mca orte_allowed_exit_without_sync 1), and a status of 0
//      keeps it from ending the job for a non-zero status.
//   3. Each survivor polls async_error() every 5 ms while its stream is not done, for at most
//      --detect-seconds (default 60). A result other than ncclSuccess/ncclInProgress is the dead peer
//      detected (ncclRemoteError, ncclSystemError, ncclInternalError... whichever NCCL reports). When the
//      bound passes with nothing reported (NCCL may never notice a dead peer whose data it waits for
//      over NVLink or PCIe: no socket of the data path breaks), the survivor takes the abort path.
//   4. Either way the survivor then calls comm.abort() (ncclCommAbort), which must return within
//      --abort-seconds (default 30); an nccl_error from it is recorded (typed) and accepted. The stream
//      must then finish within --drain-seconds (default 30): NCCL's kernels see the abort flag and stop.
//      Afterwards the owner is empty: a collective on it is refused with invalid_argument_error.
//   5. Each survivor prints one verdict line, "FAULT TEST PASSED: ..." with the detection (or abort)
//      time, or "FAULT TEST FAILED: ...", and ends with std::_Exit(0 or 1) WITHOUT MPI_Finalize:
//      finalizing needs every rank of MPI_COMM_WORLD, and one is dead, so MPI_Finalize could hang (and
//      no MPI call may be made after the death for the same reason). mpirun returns the survivors'
//      status (0 when all passed).
//   A watchdog (watchdog.hpp) ends a survivor stuck anywhere (abort() included) after
//   detect + abort + drain + 60 s with "FAULT TEST FAILED: TIMEOUT: ..." and exit code 124.
//
// Skips (every rank prints "SKIPPED: ...", MPI is finalized normally, exit 0): fewer than 2 ranks, no
// CUDA device or NCCL on some rank, or more ranks on a node than devices ("needs one GPU per rank").
#include <cudrv/cudrv.hpp>
#include <cudrv/mpi.hpp>
#include <cudrv/nccl.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/test_support.hpp"
#include "watchdog.hpp"

namespace nccl = cudrv::nccl;
namespace mg = cudrv::test::multigpu;
using clock_type = std::chrono::steady_clock;
using seconds_d = std::chrono::duration<double>;

namespace {

struct options {
  std::string mode = "absent";  // absent | mid
  double detect_seconds = 60;
  double abort_seconds = 30;
  double drain_seconds = 30;
  std::size_t elements = std::size_t{64} << 20;  // floats per all_reduce: 256 MiB
  int repeat = 128;                              // all_reduces enqueued in --mode mid
};

int g_rank = 0;
int g_size = 1;

void say(const std::string& line) {
  std::ostringstream out;
  out << "[rank " << g_rank << "/" << g_size << "] " << line << '\n';
  std::cout << out.str() << std::flush;
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "cudrv_nccl_fault_test: %s\nusage: cudrv_nccl_fault_test [--mode absent|mid] [--detect-seconds S] "
               "[--abort-seconds S] [--drain-seconds S] [--elements N] [--repeat K]\n",
               why);
  std::exit(2);
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        usage(("missing value after " + a).c_str());
      }
      return argv[++i];
    };
    if (a == "--mode") {
      o.mode = value();
      if (o.mode != "absent" && o.mode != "mid") {
        usage("--mode takes absent or mid");
      }
    } else if (a == "--detect-seconds") {
      o.detect_seconds = std::stod(value());
    } else if (a == "--abort-seconds") {
      o.abort_seconds = std::stod(value());
    } else if (a == "--drain-seconds") {
      o.drain_seconds = std::stod(value());
    } else if (a == "--elements") {
      o.elements = static_cast<std::size_t>(std::stoull(value()));
    } else if (a == "--repeat") {
      o.repeat = std::stoi(value());
    } else {
      usage(("unknown argument " + a).c_str());
    }
  }
  return o;
}

const char* result_name(nccl::result r) {
  switch (r) {
    case nccl::result::success: return "ncclSuccess";
    case nccl::result::unhandled_cuda_error: return "ncclUnhandledCudaError";
    case nccl::result::system_error: return "ncclSystemError";
    case nccl::result::internal_error: return "ncclInternalError";
    case nccl::result::invalid_argument: return "ncclInvalidArgument";
    case nccl::result::invalid_usage: return "ncclInvalidUsage";
    case nccl::result::remote_error: return "ncclRemoteError";
    case nccl::result::in_progress: return "ncclInProgress";
  }
  return "an unknown ncclResult_t";
}

std::string fixed(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

// Everything below runs before the death and may use MPI.
// Returns the skip line when the job cannot run the test (decided alike on every rank), else empty.
std::string decide_skip(const cudrv::mpi::node_info& node) {
  const bool has_gpu = cudrv::test::gpu_available();
  const bool has_nccl = has_gpu && nccl::available();
  const int devices = has_gpu ? cudrv::device_count() : 0;
  const bool enough = node.local_size <= devices;
  int mine[3] = {has_gpu ? 1 : 0, has_nccl ? 1 : 0, enough ? 1 : 0};
  int all[3] = {0, 0, 0};
  cudrv::mpi::check(MPI_Allreduce(mine, all, 3, MPI_INT, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
  if (g_size < 2) {
    return "SKIPPED: needs at least 2 ranks (one of them dies); run with mpirun -np 2 or more";
  }
  if (all[0] == 0) {
    return has_gpu ? "SKIPPED: no CUDA device on another rank"
                   : "SKIPPED: no CUDA device (" + cudrv::test::gpu_unavailable_reason() + ")";
  }
  if (all[1] == 0) {
    return has_nccl ? "SKIPPED: no CUDA device usable with NCCL on another rank"
                    : "SKIPPED: no CUDA device usable with NCCL (" + nccl::unavailable_reason() + ")";
  }
  if (all[2] == 0) {
    return enough ? "SKIPPED: needs one GPU per rank (another node has more ranks than devices)"
                  : "SKIPPED: needs one GPU per rank (" + std::to_string(node.local_size) + " ranks, " +
                        std::to_string(devices) + " devices)";
  }
  return {};
}

[[noreturn]] void finish(bool passed, const std::string& verdict) {
  say(std::string(passed ? "FAULT TEST PASSED: " : "FAULT TEST FAILED: ") + verdict);
  std::fflush(stdout);
  std::fflush(stderr);
  // No MPI_Finalize and no destructors: a peer is dead (see the top of this file).
  std::_Exit(passed ? 0 : 1);
}

}  // namespace

int main(int argc, char* argv[]) {
  ::setenv("NCCL_NVLS_ENABLE", "0", 0);  // before the first NCCL call; keeps a value already set
  const options opt = parse(argc, argv);
  cudrv::mpi::environment env(argc, argv);
  cudrv::mpi::check(MPI_Comm_rank(MPI_COMM_WORLD, &g_rank), "MPI_Comm_rank");
  cudrv::mpi::check(MPI_Comm_size(MPI_COMM_WORLD, &g_size), "MPI_Comm_size");
  mg::watchdog& dog = mg::watchdog::instance();
  dog.set_prefix("[rank " + std::to_string(g_rank) + "/" + std::to_string(g_size) + "] ");
  dog.set_failure_text("FAULT TEST FAILED: ");
  const double bound = opt.detect_seconds + opt.abort_seconds + opt.drain_seconds + 60;
  mg::watchdog_scope whole("the fault test (" + opt.mode + ")", seconds_d(bound + 120));

  const cudrv::mpi::node_info node = cudrv::mpi::node_local(MPI_COMM_WORLD);
  if (const std::string skip = decide_skip(node); !skip.empty()) {
    say(skip);
    return 0;  // MPI is finalized normally: nobody died
  }
  const int victim = g_size - 1;
  const bool is_victim = g_rank == victim;
  const cudrv::device dev = cudrv::mpi::select_device(node, cudrv::mpi::device_policy::exclusive);
  if (g_rank == 0) {
    say("NCCL " + std::to_string(nccl::version()) + "; " + std::to_string(g_size) + " ranks; victim rank " +
        std::to_string(victim) + "; mode " + opt.mode + "; " + std::to_string(opt.elements) +
        " floats per all_reduce; bounds: detection " + fixed(opt.detect_seconds) + " s, abort " +
        fixed(opt.abort_seconds) + " s, drain " + fixed(opt.drain_seconds) + " s");
  }

  // 1. A non-blocking communicator, warmed up with a checked all_reduce of the same buffer.
  std::optional<nccl::communicator> comm;
  cudrv::stream s(dev);
  cudrv::device_buffer<float> buf(dev, opt.elements);
  try {
    mg::watchdog_scope setup("creating and warming up the communicator", seconds_d(120));
    const nccl::unique_id id = cudrv::mpi::broadcast_unique_id(MPI_COMM_WORLD);
    comm.emplace(nccl::communicator::init_rank(id, g_size, g_rank, dev, {.blocking = false, .name = "cudrv-fault"}));
    comm->wait_ready();
    cudrv::fill(buf, 1.0f, s);
    comm->all_reduce(buf, nccl::reduction::sum, s);
    comm->wait_ready();
    std::vector<float> head(16);
    cudrv::copy(head, buf.view().first(16), s);
    s.synchronize();
    for (float v : head) {
      if (v != static_cast<float>(g_size)) {
        throw std::runtime_error("the warm-up all_reduce gave " + std::to_string(v) + ", expected " +
                                 std::to_string(g_size));
      }
    }
    cudrv::fill(buf, 1.0f, s);
    s.synchronize();
  } catch (const std::exception& e) {
    // Before the death every rank is alive: end the whole job instead of leaving peers waiting.
    say(std::string("FAULT TEST FAILED: setting up: ") + e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  cudrv::mpi::check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier", "everyone warmed up");

  // 2. The death.
  auto enqueue = [&](int times) {
    for (int i = 0; i < times; ++i) {
      comm->all_reduce(buf, nccl::reduction::sum, s);  // non-blocking: may return ncclInProgress
      comm->wait_ready();  // enqueued (a local wait: every connection was made by the warm-up)
    }
  };
  if (opt.mode == "mid") {
    enqueue(opt.repeat);
  } else if (!is_victim) {
    enqueue(1);
  }
  cudrv::mpi::check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier", "everyone has entered the collective");
  if (is_victim) {
    say(opt.mode == "mid" ? "victim: dying while its all_reduces run (std::_Exit(0))"
                          : "victim: leaving without joining the all_reduce (std::_Exit(0))");
    std::_Exit(0);
  }
  const auto death = clock_type::now();  // no MPI call from here on

  // 3. Detection.
  std::optional<nccl::result> detected;
  std::string detect_source = "async_error()";  // what reported the fault
  std::string detect_error;                     // the exception's what(), when one reported it
  bool stream_finished = false;
  seconds_d detect_time{0};
  {
    mg::watchdog_scope polling("polling async_error()", seconds_d(opt.detect_seconds + 30));
    const auto deadline = death + std::chrono::duration_cast<clock_type::duration>(seconds_d(opt.detect_seconds));
    while (clock_type::now() < deadline) {
      try {
        const nccl::result r = comm->async_error();
        if (r != nccl::result::success && r != nccl::result::in_progress) {
          detected = r;
          break;
        }
      } catch (const cudrv::nccl_error& e) {  // ncclCommGetAsyncError itself failed
        detected = static_cast<nccl::result>(e.nccl_result());
        detect_source = "async_error() throwing nccl_error";
        detect_error = e.what();
        break;
      }
      try {
        if (s.is_done()) {
          stream_finished = true;
          break;
        }
      } catch (const cudrv::error& e) {  // the stream failed (the context saw a fault): also a typed error
        detected = nccl::result::unhandled_cuda_error;
        detect_source = "the stream (cudrv::error)";
        detect_error = e.what();
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    detect_time = clock_type::now() - death;
  }
  if (stream_finished) {
    finish(false, "the collective finished although rank " + std::to_string(victim) + " died (after " +
                      fixed(detect_time.count()) + " s): nothing was tested" +
                      (opt.mode == "mid" ? "; raise --repeat or --elements so the victim dies mid-collective" : ""));
  }

  // 4. Abort, bounded.
  std::string abort_error;
  seconds_d abort_time{0};
  {
    mg::watchdog_scope aborting("comm.abort() (ncclCommAbort) after the death of rank " + std::to_string(victim),
                                seconds_d(opt.abort_seconds));
    const auto t = clock_type::now();
    try {
      comm->abort();
    } catch (const cudrv::nccl_error& e) {
      abort_error = e.what();  // typed: NCCL reported an error while aborting
    }
    abort_time = clock_type::now() - t;
  }
  seconds_d drain_time{0};
  std::string stream_error;
  {
    mg::watchdog_scope draining("the stream finishing after abort()", seconds_d(opt.drain_seconds));
    const auto t = clock_type::now();
    try {
      while (!s.is_done()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    } catch (const cudrv::error& e) {
      stream_error = e.what();  // the stream reports an error instead: it is not running either
    }
    drain_time = clock_type::now() - t;
  }
  // The aborted owner is empty: cudrv refuses to use it.
  bool refused_after_abort = false;
  try {
    comm->all_reduce(buf, nccl::reduction::sum, s);
  } catch (const cudrv::invalid_argument_error&) {
    refused_after_abort = true;
  }

  std::ostringstream verdict;
  verdict << "mode " << opt.mode << "; ";
  if (detected) {
    verdict << detect_source << " reported " << result_name(*detected) << " " << fixed(detect_time.count())
            << " s after rank " << victim << " died (bound " << fixed(opt.detect_seconds) << " s)";
    if (!detect_error.empty()) {
      verdict << " [" << detect_error << "]";
    }
  } else {
    verdict << "async_error() still reported success at the " << fixed(opt.detect_seconds)
            << " s deadline: NCCL did not notice the dead rank " << victim << "; took the abort path";
  }
  verdict << "; abort() returned after " << fixed(abort_time.count()) << " s (bound " << fixed(opt.abort_seconds)
          << " s)";
  if (!abort_error.empty()) {
    verdict << " with nccl_error: " << abort_error;
  }
  verdict << "; the stream finished " << fixed(drain_time.count()) << " s later";
  if (!stream_error.empty()) {
    verdict << " (with an error: " << stream_error << ")";
  }
  const bool within = detect_time.count() <= opt.detect_seconds + 1 && abort_time.count() <= opt.abort_seconds;
  if (!refused_after_abort) {
    finish(false, verdict.str() + "; but a collective on the aborted communicator was not refused");
  }
  finish(within, verdict.str() + (within ? "" : "; outside the bounds"));
}
