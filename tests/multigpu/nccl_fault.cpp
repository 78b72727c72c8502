// cudrv_nccl_fault_test: the fault path of an NCCL job. One rank dies; every other rank must learn of
// it through the communicator (a typed error from async_error(), or abort() at a deadline) within a
// stated bound, and never hang. In --mode shrink the survivors go on working: they revoke the broken
// communicator, shrink it to the ranks still alive and run a checked collective on the result.
//
// Run with mpirun -np N (N >= 2, one rank per GPU; see tests/multigpu/CMakeLists.txt for the flags):
//
//   1. Every rank makes a non-blocking communicator (broadcast_unique_id, init_rank, wait_ready) and
//      warms it up with a correct all_reduce of the buffer used below (checked), so every connection
//      the all_reduce needs is made before anyone dies.
//   2. The victim is the last rank (--victim R picks another). --mode absent (default): the survivors
//      enqueue a large all_reduce, then all ranks meet in MPI_Barrier, and the victim leaves without
//      joining the collective. --mode mid and --mode shrink: every rank, the victim included, enqueues
//      --repeat large all_reduces, all meet in MPI_Barrier, and the victim dies while they run (its
//      kernels die with its process).
//      The victim dies with std::_Exit(0): mpirun (Open MPI 4.1) must be told not to end the job when
//      a rank exits without MPI_Finalize (--mca orte_allowed_exit_without_sync 1), and a status of 0
//      keeps it from ending the job for a non-zero status.
//   3. Each survivor polls async_error() every 5 ms while its stream is not done, for at most
//      --detect-seconds (default 60). A result other than ncclSuccess/ncclInProgress is the dead peer
//      detected (ncclRemoteError, ncclSystemError, ncclInternalError... whichever NCCL reports). When the
//      bound passes with nothing reported (NCCL may never notice a dead peer whose data it waits for
//      over NVLink or PCIe: no socket of the data path breaks), the survivor goes on all the same.
//   4. --mode absent and mid: the survivor calls comm.abort() (ncclCommAbort), which must return within
//      --abort-seconds (default 30); an nccl_error from it is recorded (typed) and accepted. The stream
//      must then finish within --drain-seconds (default 30): NCCL's kernels see the abort flag and stop.
//      Afterwards the owner is empty: a collective on it is refused with invalid_argument_error.
//   4s. --mode shrink: the communicators are made with communicator_config::timeout = --revoke-seconds
//      (default 30). The survivor calls comm.revoke() (ncclCommRevoke, then a wait bounded by that
//      timeout: timeout_error past it fails the test; another nccl_error is recorded); the stream must
//      then finish within --drain-seconds. A shrink that names this rank is refused
//      (invalid_argument_error, before NCCL). Then comm.shrink({victim}, shrink_mode::abort) with a
//      non-blocking configuration whose timeout is --shrink-seconds (default 60) gives the new
//      communicator: its rank must be the old rank renumbered densely (old rank minus one above the
//      victim) and its size N - 1, as cudrv knows them and as NCCL reports them. An out-of-place
//      all_reduce of 2^20 floats on it, inputs a function of each survivor's OLD rank and the output
//      poisoned with NaN, must give the host's sum over the survivors in every element within
//      --collective-seconds (default 30). Last, the revoked communicator is destroyed (its owner aborts
//      it, never finalizes: a report naming ncclCommFinalize fails the test) within --abort-seconds,
//      a collective on the emptied owner is refused, and the shrunk one is destroyed (finalized with
//      the live survivors; any error reported fails the test).
//   5. Each survivor prints one verdict line, "FAULT TEST PASSED: ..." with the detection (or deadline)
//      time and the times of what followed, or "FAULT TEST FAILED: ...", and ends with std::_Exit(0 or 1)
//      WITHOUT MPI_Finalize: finalizing needs every rank of MPI_COMM_WORLD, and one is dead, so
//      MPI_Finalize could hang (and no MPI call may be made after the death for the same reason; the
//      shrink path uses NCCL alone). mpirun returns the survivors' status (0 when all passed).
//   A watchdog (watchdog.hpp) ends a survivor stuck anywhere (abort(), revoke(), shrink(), the
//   destructors included) after the sum of the bounds + 60 s with "FAULT TEST FAILED: TIMEOUT: ..." and
//   exit code 124.
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
#include <limits>
#include <optional>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/test_support.hpp"
#include "watchdog.hpp"

namespace nccl = cudrv::nccl;
namespace mg = cudrv::test::multigpu;
using clock_type = std::chrono::steady_clock;
using seconds_d = std::chrono::duration<double>;

namespace {

struct options {
  std::string mode = "absent";  // absent | mid | shrink
  double detect_seconds = 60;
  double abort_seconds = 30;  // abort(), and in --mode shrink the revoked communicator's destruction
  double drain_seconds = 30;
  double revoke_seconds = 30;      // --mode shrink: the old communicators' timeout (bounds revoke's wait)
  double shrink_seconds = 60;      // --mode shrink: the shrunk communicator's timeout (bounds shrink's wait)
  double collective_seconds = 30;  // --mode shrink: the checked all_reduce on the shrunk communicator
  std::size_t elements = std::size_t{64} << 20;  // floats per all_reduce: 256 MiB
  int repeat = 128;                              // all_reduces enqueued in --mode mid and shrink
  int victim = -1;                               // the rank that dies; -1: the last
};

int g_rank = 0;
int g_size = 1;

void say(const std::string& line) {
  std::ostringstream out;
  out << "[rank " << g_rank << "/" << g_size << "] " << line << '\n';
  std::cout << out.str() << std::flush;
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(
      stderr,
      "cudrv_nccl_fault_test: %s\nusage: cudrv_nccl_fault_test [--mode absent|mid|shrink] [--detect-seconds S] "
      "[--abort-seconds S] [--drain-seconds S] [--revoke-seconds S] [--shrink-seconds S] "
      "[--collective-seconds S] [--elements N] [--repeat K] [--victim R]\n",
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
      if (o.mode != "absent" && o.mode != "mid" && o.mode != "shrink") {
        usage("--mode takes absent, mid or shrink");
      }
    } else if (a == "--detect-seconds") {
      o.detect_seconds = std::stod(value());
    } else if (a == "--abort-seconds") {
      o.abort_seconds = std::stod(value());
    } else if (a == "--drain-seconds") {
      o.drain_seconds = std::stod(value());
    } else if (a == "--revoke-seconds") {
      o.revoke_seconds = std::stod(value());
    } else if (a == "--shrink-seconds") {
      o.shrink_seconds = std::stod(value());
    } else if (a == "--collective-seconds") {
      o.collective_seconds = std::stod(value());
    } else if (a == "--victim") {
      o.victim = std::stoi(value());
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

// Everything below runs after the death: no MPI call.

// What step 3 saw.
struct detection {
  std::optional<nccl::result> detected;  // what reported the dead peer, when something did
  std::string source = "async_error()";  // what reported it
  std::string error;                     // the exception's what(), when one reported it
  bool stream_finished = false;          // the collective finished: nothing was tested
  seconds_d time{0};                     // from the death to the report (or the deadline)
};

// Step 3: polls async_error() every 5 ms while the stream is not done, until the deadline.
detection detect(const nccl::communicator& comm, const cudrv::stream& s, clock_type::time_point death,
                 double bound_seconds) {
  detection d;
  mg::watchdog_scope polling("polling async_error()", seconds_d(bound_seconds + 30));
  const auto deadline = death + std::chrono::duration_cast<clock_type::duration>(seconds_d(bound_seconds));
  while (clock_type::now() < deadline) {
    try {
      const nccl::result r = comm.async_error();
      if (r != nccl::result::success && r != nccl::result::in_progress) {
        d.detected = r;
        break;
      }
    } catch (const cudrv::nccl_error& e) {  // ncclCommGetAsyncError itself failed
      d.detected = static_cast<nccl::result>(e.nccl_result());
      d.source = "async_error() throwing nccl_error";
      d.error = e.what();
      break;
    }
    try {
      if (s.is_done()) {
        d.stream_finished = true;
        break;
      }
    } catch (const cudrv::error& e) {  // the stream failed (the context saw a fault): also a typed error
      d.detected = nccl::result::unhandled_cuda_error;
      d.source = "the stream (cudrv::error)";
      d.error = e.what();
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  d.time = clock_type::now() - death;
  return d;
}

// The verdict's words for step 3. @p next: what the survivor did when nothing was reported.
std::string describe(const detection& d, int victim, double bound_seconds, const char* next) {
  std::ostringstream out;
  if (d.detected) {
    out << d.source << " reported " << result_name(*d.detected) << " " << fixed(d.time.count()) << " s after rank "
        << victim << " died (bound " << fixed(bound_seconds) << " s)";
    if (!d.error.empty()) {
      out << " [" << d.error << "]";
    }
  } else {
    out << "async_error() still reported success at the " << fixed(bound_seconds)
        << " s deadline: NCCL did not notice the dead rank " << victim << "; " << next;
  }
  return out.str();
}

// Polls @p s every 5 ms until its work is done, for at most @p bound_seconds. Returns the wait, or
// nothing at the bound. A stream that fails instead (a cudrv::error) is not running either: the error's
// text goes to @p error and the wait counts as done.
std::optional<seconds_d> wait_for_stream(const cudrv::stream& s, double bound_seconds, std::string& error) {
  const auto start = clock_type::now();
  const auto deadline = start + std::chrono::duration_cast<clock_type::duration>(seconds_d(bound_seconds));
  try {
    while (!s.is_done()) {
      if (clock_type::now() >= deadline) {
        return std::nullopt;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  } catch (const cudrv::error& e) {
    error = e.what();
  }
  return clock_type::now() - start;
}

// What the destructors reported (set_destruction_error_handler) while a communicator was destroyed.
std::vector<std::string> g_destruction_reports;

void collect_destruction_report(const cudrv::error& e) noexcept {
  try {
    g_destruction_reports.emplace_back(e.what());
  } catch (...) {  // out of memory: nothing to do in a handler that must not throw
  }
}

// Destroys @p owner (reset()) under the watchdog, collecting what its destruction reports. Returns the
// time it took.
seconds_d destroy(nccl::communicator& owner, const std::string& label, double bound_seconds,
                  std::vector<std::string>& reports) {
  mg::watchdog_scope scope(label, seconds_d(bound_seconds));
  g_destruction_reports.clear();
  const cudrv::destruction_error_handler previous = cudrv::set_destruction_error_handler(&collect_destruction_report);
  const auto t = clock_type::now();
  owner.reset();
  const seconds_d took = clock_type::now() - t;
  cudrv::set_destruction_error_handler(previous);
  reports = std::move(g_destruction_reports);
  g_destruction_reports.clear();
  return took;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) {
    out += (out.empty() ? "" : " | ") + l;
  }
  return out;
}

// Input of the post-shrink all_reduce: a function of the OLD rank, so every survivor knows every
// survivor's input. Small integers: every partial sum is exact in float, whatever NCCL's order.
float shrink_input(int old_rank, std::size_t i) {
  return static_cast<float>((old_rank + 1) * 4096 + static_cast<int>(i % 61));
}

// Step 4s, the revoke: bounded by the communicator's timeout. Returns NCCL's error when revoke()
// reported one after becoming quiescent (recorded: the shrink decides whether the communicator is
// usable); a timeout_error or anything else fails the test. An NCCL without ncclCommRevoke (before
// 2.28.9): `supported` is false and the communicator is left as it was (shrink_mode::abort stops its
// work instead).
std::string revoke_old(nccl::communicator& comm, int victim, const options& opt, const std::string& so_far,
                       seconds_d& took, bool& supported) {
  supported = true;
  mg::watchdog_scope revoking("comm.revoke() (ncclCommRevoke) after the death of rank " + std::to_string(victim),
                              seconds_d(opt.revoke_seconds + 30));
  const auto t = clock_type::now();
  std::string error;
  try {
    comm.revoke();
  } catch (const nccl::timeout_error& e) {
    finish(false, so_far + "; revoke() did not see the communicator quiescent within its timeout (" +
                      fixed(opt.revoke_seconds) + " s): timeout_error: " + e.what());
  } catch (const cudrv::nccl_error& e) {
    error = e.what();
  } catch (const cudrv::not_supported_error& e) {
    supported = false;
    took = clock_type::now() - t;
    return e.what();
  }
  took = clock_type::now() - t;
  if (!comm.revoked()) {
    finish(false, so_far + "; after revoke() the owner does not say revoked()");
  }
  return error;
}

// Step 4s, the refusals of shrink() on the revoked communicator, before NCCL is called (so it is left
// as it was): a list naming this rank, a rank twice, a rank the communicator does not have.
void check_shrink_refusals(const nccl::communicator& comm, int victim, const std::string& so_far) {
  const int with_me[] = {victim, g_rank};
  const int twice[] = {victim, victim};
  const int outside[] = {victim, g_size};
  const std::pair<const char*, std::span<const int>> lists[] = {{"naming this rank", with_me},
                                                                {"naming a rank twice", twice},
                                                                {"naming a rank out of range", outside}};
  for (const auto& [what, list] : lists) {
    try {
      (void)comm.shrink(list, nccl::shrink_mode::normal);
    } catch (const cudrv::invalid_argument_error&) {
      continue;
    }
    finish(false, so_far + "; a shrink() " + what + " was not refused with invalid_argument_error");
  }
}

// Step 4s, the shrink to the survivors (NCCL_SHRINK_ABORT), after the refusals.
nccl::communicator shrink_old(const nccl::communicator& comm, int victim, const options& opt, const std::string& so_far,
                              seconds_d& took) {
  check_shrink_refusals(comm, victim, so_far);
  nccl::communicator_config cfg;
  cfg.blocking = false;
  cfg.timeout = std::chrono::milliseconds(static_cast<long long>(opt.shrink_seconds * 1000));
  cfg.name = "cudrv-fault-shrunk";
  const int excluded[] = {victim};
  mg::watchdog_scope shrinking("comm.shrink({" + std::to_string(victim) + "}, shrink_mode::abort)",
                               seconds_d(opt.shrink_seconds + opt.revoke_seconds + 30));
  const auto t = clock_type::now();
  try {
    nccl::communicator shrunk = comm.shrink(excluded, nccl::shrink_mode::abort, cfg);
    took = clock_type::now() - t;
    return shrunk;
  } catch (const nccl::timeout_error& e) {
    finish(false, so_far + "; shrink() did not finish within its timeout (" + fixed(opt.shrink_seconds) +
                      " s): timeout_error: " + e.what());
  } catch (const cudrv::error& e) {
    finish(false, so_far + "; shrink() failed after " + fixed((clock_type::now() - t).count()) + " s: " + e.what());
  }
}

// Step 4s, the rank and size of the shrunk communicator, as cudrv keeps them and as NCCL reports them
// (a view from the bare handle asks ncclCommUserRank / ncclCommCount). Returns what is wrong, or empty.
std::string check_renumbering(const nccl::communicator& shrunk, const cudrv::device& dev, int victim) {
  const int want_rank = g_rank - (g_rank > victim ? 1 : 0);
  const int want_size = g_size - 1;
  const nccl::communicator_ref asked = nccl::communicator_ref::from_native_handle(shrunk.native_handle());
  const int kept[2] = {shrunk.rank(), shrunk.size()};
  const int nccl_says[2] = {asked.rank(), asked.size()};
  std::ostringstream wrong;
  if (kept[0] != want_rank || kept[1] != want_size || nccl_says[0] != want_rank || nccl_says[1] != want_size) {
    wrong << "the shrunk communicator is rank " << kept[0] << " of " << kept[1] << " (NCCL: " << nccl_says[0] << " of "
          << nccl_says[1] << "), expected " << want_rank << " of " << want_size << " (old rank " << g_rank << " of "
          << g_size << ", rank " << victim << " excluded)";
  } else if (!(shrunk.device() == dev)) {
    wrong << "the shrunk communicator is on device " << shrunk.device().ordinal() << ", not this rank's device "
          << dev.ordinal();
  }
  return wrong.str();
}

// Step 4s, the collective on the shrunk communicator: out of place, output poisoned, every element
// checked against the host's sum over the survivors' inputs. Returns what is wrong, or empty.
std::string check_all_reduce(const nccl::communicator& shrunk, const cudrv::device& dev, const cudrv::stream& s,
                             int victim, const options& opt, seconds_d& took) {
  const std::size_t n = std::size_t{1} << 20;
  std::vector<float> host(n);
  for (std::size_t i = 0; i < n; ++i) {
    host[i] = shrink_input(g_rank, i);
  }
  cudrv::device_buffer<float> send(dev, n);
  cudrv::device_buffer<float> recv(dev, n);
  cudrv::copy(send, host, s);
  cudrv::fill(recv, std::numeric_limits<float>::quiet_NaN(), s);
  mg::watchdog_scope running("the all_reduce on the shrunk communicator", seconds_d(opt.collective_seconds + 30));
  const auto t = clock_type::now();
  shrunk.all_reduce(send, recv, nccl::reduction::sum, s);
  shrunk.wait_ready();  // enqueued (non-blocking: bounded by the shrunk communicator's timeout)
  std::string stream_error;
  const std::optional<seconds_d> waited = wait_for_stream(s, opt.collective_seconds, stream_error);
  took = clock_type::now() - t;
  if (!waited) {
    return "the all_reduce on the shrunk communicator did not finish within " + fixed(opt.collective_seconds) + " s";
  }
  if (!stream_error.empty()) {
    return "the stream failed during the all_reduce on the shrunk communicator: " + stream_error;
  }
  cudrv::copy(host, recv, s);
  s.synchronize();
  std::size_t bad = 0;
  std::size_t first_bad = n;
  float want_first = 0;
  for (std::size_t i = 0; i < n; ++i) {
    float want = 0;
    for (int r = 0; r < g_size; ++r) {
      want += r == victim ? 0.0f : shrink_input(r, i);
    }
    if (!(host[i] == want)) {  // NaN (never written) is wrong too
      if (bad++ == 0) {
        first_bad = i;
        want_first = want;
      }
    }
  }
  if (bad != 0) {
    std::ostringstream out;
    out << "the all_reduce on the shrunk communicator is wrong at " << bad << " of " << n << " elements (first at "
        << first_bad << ": " << host[first_bad] << ", expected " << want_first << ")";
    return out.str();
  }
  return {};
}

// Step 4s: revoke, shrink, check, destroy; ends the process with the verdict.
[[noreturn]] void survive_by_shrinking(nccl::communicator& comm, const cudrv::stream& s,
                                       cudrv::device_buffer<float>& buf, const cudrv::device& dev, int victim,
                                       const options& opt, const detection& d) {
  std::ostringstream verdict;
  verdict << "mode shrink; " << describe(d, victim, opt.detect_seconds, "revoked it at the deadline");
  seconds_d revoke_time{0};
  bool revocable = true;
  const std::string revoke_error = revoke_old(comm, victim, opt, verdict.str(), revoke_time, revocable);
  if (revocable) {
    verdict << "; revoke() returned after " << fixed(revoke_time.count()) << " s (timeout " << fixed(opt.revoke_seconds)
            << " s)";
    if (!revoke_error.empty()) {
      verdict << " with nccl_error: " << revoke_error;
    }
  } else {
    verdict << "; revoke() refused (not_supported_error: " << revoke_error
            << "): shrink_mode::abort stops the old communicator's work instead";
  }
  // Revoked: its work stops now. Not revocable: shrink(abort) stops it, so the stream drains after.
  auto drain = [&](const char* after) {
    std::string stream_error;
    const std::optional<seconds_d> drained = wait_for_stream(s, opt.drain_seconds, stream_error);
    if (!drained) {
      finish(false, verdict.str() + "; but the stream still ran " + fixed(opt.drain_seconds) + " s after " + after);
    }
    verdict << "; the stream finished " << fixed(drained->count()) << " s after " << after;
    if (!stream_error.empty()) {
      verdict << " (with an error: " << stream_error << ")";
    }
  };
  if (revocable) {
    drain("revoke()");
  }

  seconds_d shrink_time{0};
  nccl::communicator shrunk = shrink_old(comm, victim, opt, verdict.str(), shrink_time);
  if (!revocable) {
    drain("shrink()");
  }
  verdict << "; shrink({" << victim << "}, abort) gave rank " << shrunk.rank() << " of " << shrunk.size() << " (was "
          << g_rank << " of " << g_size << ") after " << fixed(shrink_time.count()) << " s (timeout "
          << fixed(opt.shrink_seconds) << " s; refused: lists naming this rank, a rank twice, a rank out of range)";
  if (const std::string wrong = check_renumbering(shrunk, dev, victim); !wrong.empty()) {
    finish(false, verdict.str() + "; but " + wrong);
  }
  seconds_d collective_time{0};
  if (const std::string wrong = check_all_reduce(shrunk, dev, s, victim, opt, collective_time); !wrong.empty()) {
    finish(false, verdict.str() + "; but " + wrong);
  }
  verdict << "; all_reduce over the " << (g_size - 1) << " survivors right in all 2^20 elements after "
          << fixed(collective_time.count()) << " s";

  std::vector<std::string> old_reports;
  seconds_d old_time{0};
  if (revocable) {
    old_time =
        destroy(comm, "destroying the revoked communicator (abort, never finalize)", opt.abort_seconds, old_reports);
    verdict << "; the revoked communicator destroyed in " << fixed(old_time.count()) << " s";
  } else {  // not revoked: the owner would finalize, which waits for the dead rank; abort it
    mg::watchdog_scope aborting("comm.abort() of the shrunk-from communicator", seconds_d(opt.abort_seconds));
    const auto t = clock_type::now();
    try {
      comm.abort();
    } catch (const cudrv::nccl_error& e) {
      old_reports.push_back(std::string("abort: ") + e.what());
    }
    old_time = clock_type::now() - t;
    verdict << "; the old communicator aborted in " << fixed(old_time.count()) << " s";
  }
  if (!old_reports.empty()) {
    verdict << " (reported: " << joined(old_reports) << ")";
    if (joined(old_reports).find("ncclCommFinalize") != std::string::npos) {
      finish(false, verdict.str() + "; but its owner tried to finalize a revoked communicator");
    }
  }
  bool refused = false;
  try {
    comm.all_reduce(buf, nccl::reduction::sum, s);
  } catch (const cudrv::invalid_argument_error&) {
    refused = true;
  }
  if (!refused) {
    finish(false, verdict.str() + "; but a collective on the destroyed communicator's owner was not refused");
  }
  std::vector<std::string> new_reports;
  const seconds_d new_time = destroy(shrunk, "destroying the shrunk communicator (finalize with the survivors)",
                                     opt.shrink_seconds + 30, new_reports);
  verdict << ", the shrunk one in " << fixed(new_time.count()) << " s";
  if (!new_reports.empty()) {
    finish(false, verdict.str() + "; but its destruction reported: " + joined(new_reports));
  }
  const bool within = d.time.count() <= opt.detect_seconds + 1 && revoke_time.count() <= opt.revoke_seconds + 1 &&
                      shrink_time.count() <= opt.shrink_seconds + 1 && old_time.count() <= opt.abort_seconds;
  finish(within, verdict.str() + (within ? "" : "; outside the bounds"));
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
  const bool shrink = opt.mode == "shrink";
  // The sum of the bounds of what follows the death (shrink: revoke, drain, shrink, the collective, and
  // the two destructions), + 60 s.
  const double bound = opt.detect_seconds + opt.abort_seconds + opt.drain_seconds + 60 +
                       (shrink ? opt.revoke_seconds + 2 * opt.shrink_seconds + opt.collective_seconds + 90 : 0);
  mg::watchdog_scope whole("the fault test (" + opt.mode + ")", seconds_d(bound + 120));
  if (opt.victim < -1 || opt.victim >= g_size) {  // alike on every rank: all stop here
    say("cudrv_nccl_fault_test: --victim " + std::to_string(opt.victim) + " is not a rank of " +
        std::to_string(g_size));
    return 2;
  }

  const cudrv::mpi::node_info node = cudrv::mpi::node_local(MPI_COMM_WORLD);
  if (const std::string skip = decide_skip(node); !skip.empty()) {
    say(skip);
    return 0;  // MPI is finalized normally: nobody died
  }
  const int victim = opt.victim >= 0 ? opt.victim : g_size - 1;
  const bool is_victim = g_rank == victim;
  const cudrv::device dev = cudrv::mpi::select_device(node, cudrv::mpi::device_policy::exclusive);
  if (g_rank == 0) {
    say("NCCL " + std::to_string(nccl::version()) + "; " + std::to_string(g_size) + " ranks; victim rank " +
        std::to_string(victim) + "; mode " + opt.mode + "; " + std::to_string(opt.elements) +
        " floats per all_reduce; bounds: detection " + fixed(opt.detect_seconds) + " s, abort " +
        fixed(opt.abort_seconds) + " s, drain " + fixed(opt.drain_seconds) + " s" +
        (shrink ? ", revoke " + fixed(opt.revoke_seconds) + " s, shrink " + fixed(opt.shrink_seconds) +
                      " s, collective " + fixed(opt.collective_seconds) + " s"
                : std::string()));
  }

  // 1. A non-blocking communicator, warmed up with a checked all_reduce of the same buffer. In --mode
  // shrink its timeout bounds revoke()'s wait.
  nccl::communicator_config config;
  config.blocking = false;
  config.name = "cudrv-fault";
  if (shrink) {
    config.timeout = std::chrono::milliseconds(static_cast<long long>(opt.revoke_seconds * 1000));
  }
  std::optional<nccl::communicator> comm;
  cudrv::stream s(dev);
  cudrv::device_buffer<float> buf(dev, opt.elements);
  try {
    mg::watchdog_scope setup("creating and warming up the communicator", seconds_d(120));
    const nccl::unique_id id = cudrv::mpi::broadcast_unique_id(MPI_COMM_WORLD);
    comm.emplace(nccl::communicator::init_rank(id, g_size, g_rank, dev, config));
    comm->wait_ready(std::chrono::seconds(90));  // within the scope's 120 s: a typed timeout_error first
    cudrv::fill(buf, 1.0f, s);
    comm->all_reduce(buf, nccl::reduction::sum, s);
    comm->wait_ready(std::chrono::seconds(90));
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
  if (opt.mode == "mid" || shrink) {
    enqueue(opt.repeat);
  } else if (!is_victim) {
    enqueue(1);
  }
  cudrv::mpi::check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier", "everyone has entered the collective");
  if (is_victim) {
    say(opt.mode != "absent" ? "victim: dying while its all_reduces run (std::_Exit(0))"
                             : "victim: leaving without joining the all_reduce (std::_Exit(0))");
    std::_Exit(0);
  }
  const auto death = clock_type::now();  // no MPI call from here on

  // 3. Detection.
  const detection d = detect(*comm, s, death, opt.detect_seconds);
  if (d.stream_finished) {
    finish(false, "the collective finished although rank " + std::to_string(victim) + " died (after " +
                      fixed(d.time.count()) + " s): nothing was tested" +
                      (opt.mode != "absent" ? "; raise --repeat or --elements so the victim dies mid-collective" : ""));
  }
  if (shrink) {  // 4s. Revoke, shrink, a checked collective on the survivors; ends the process
    try {
      survive_by_shrinking(*comm, s, buf, dev, victim, opt, d);
    } catch (const std::exception& e) {
      finish(false, "mode shrink; " + describe(d, victim, opt.detect_seconds, "went on at the deadline") +
                        "; then an unexpected error: " + e.what());
    }
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
  verdict << "mode " << opt.mode << "; " << describe(d, victim, opt.detect_seconds, "took the abort path");
  verdict << "; abort() returned after " << fixed(abort_time.count()) << " s (bound " << fixed(opt.abort_seconds)
          << " s)";
  if (!abort_error.empty()) {
    verdict << " with nccl_error: " << abort_error;
  }
  verdict << "; the stream finished " << fixed(drain_time.count()) << " s later";
  if (!stream_error.empty()) {
    verdict << " (with an error: " << stream_error << ")";
  }
  const bool within = d.time.count() <= opt.detect_seconds + 1 && abort_time.count() <= opt.abort_seconds;
  if (!refused_after_abort) {
    finish(false, verdict.str() + "; but a collective on the aborted communicator was not refused");
  }
  finish(within, verdict.str() + (within ? "" : "; outside the bounds"));
}
