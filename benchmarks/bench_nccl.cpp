// bench_nccl: NCCL through cudrv against the raw NCCL (and driver) calls, in one binary, interleaved.
//
//   bench_nccl [sweep|host-cost|peer|window|all] [--quick] [--devices N] [--min-bytes SIZE] [--max-bytes SIZE]
//              [--rounds R] [--method nccl-tests|events|both] [--iters N] [--warmup-iters N] [--max-seconds S]
//              [--batch-ms MS] [--verify-max-bytes SIZE] [--peer-bytes SIZE] [--json FILE] [--mpi | --no-mpi]
//   mpirun -np N -x NCCL_NVLS_ENABLE=0 bench_nccl [sweep|host-cost|window|all] [...]   (one rank per GPU)
//
// SIZE takes a K, M or G suffix (powers of 1024). The MPI mode is chosen when an MPI launcher started
// the program (OMPI_COMM_WORLD_SIZE, PMI_SIZE, MV2_COMM_WORLD_SIZE or PMIX_SIZE set) or with --mpi;
// --no-mpi refuses it; a build without cudrv::mpi refuses to run as one of several launched ranks.
// Without MPI, one process drives every visible GPU (or the first N with --devices N): one
// communicator per GPU from ncclCommInitAll, and each collective is one call per GPU inside one group
// (cudrv::nccl::group against ncclGroupStart/End; with one GPU, plain calls). Under mpirun (only when
// built with cudrv::mpi), each rank drives the GPU of its node-local rank,
// the communicator made from a unique id broadcast over MPI; rank 0 prints. Both paths always use the
// same communicators (the raw calls take
// native_handle() of cudrv's), the same buffers and the same streams: cudrv loads libnccl.so.2 with
// dlopen and this program links the same library, which the program checks at start. The program
// sets NCCL_NVLS_ENABLE=0 before NCCL is touched (unless it is already set): NVLink SHARP multicast
// stays off. Modes:
//
//   sweep (default)  all-reduce, float sum, from --min-bytes (8 B) doubling to --max-bytes (1 GiB).
//                    Per size: one call of each path checked against a host reference (up to
//                    --verify-max-bytes, 4 MiB; the output poisoned first, and the elements just after
//                    it must stay poisoned), then timed by one or both methods (--method, both by
//                    default), --rounds rounds (21) each, cudrv and raw interleaved (the order rotating
//                    from round to round); every time is the median over the rounds.
//                    nccl-tests (what nccl-tests' all_reduce_perf measures, src/common.cu): every size
//                      first warmed up with --warmup-iters (1) calls; a timed run is one call and a wait
//                      (the "sync" call), then --iters (20) calls back to back, each on the buffers
//                      shifted by its size (iteration i at offset (i mod (max/size)) * size, as
//                      nccl-tests does), then a wait that polls each stream (cuStreamQuery) and the
//                      communicator's asynchronous error; time per call = the host clock (steady_clock)
//                      over the calls and the wait / --iters, averaged over the ranks (nccl-tests'
//                      default -a 1). Out of place and in place, like nccl-tests' two column groups.
//                      After the first round, no further one starts once a size has taken --max-seconds (10;
//                      2 with --quick): a slow transport gets fewer rounds at its largest sizes (each
//                      row's "rounds" in the JSON says how many).
//                    events (bench_nccl's earlier method): a batch size K chosen so one batch takes about
//                      --batch-ms (4 ms), K calls between CUDA events on each GPU's stream, the time per
//                      call the slowest GPU's (maximum over the ranks) batch time / K; out of place.
//                    With both, the JSON rows' main fields come from the nccl-tests method and the
//                    events method's go to each row's "events" object, and the smallest size is also
//                    timed by a harness table (variants of the raw path: events or host clock, batch
//                    K or --iters, fixed or shifted buffers) that shows which part of the events
//                    method changes a small all-reduce's time.
//                    nccl-tests' definitions: algbw = bytes / time, busbw = algbw * 2(n-1)/n for n ranks.
//                    With one rank busbw is 0 by that definition, so algbw is compared instead (and
//                    plotted). Ratios are paired (the median over the rounds of one path's time against
//                    the other's in the same round): bandwidth ratio = raw time / cudrv time (>= 0.98 is
//                    the goal at >= 64 MiB), latency ratio = cudrv time / raw time (<= 1.02 at 8 B).
//                    scripts/nccl-compare.py sets the sweep beside all_reduce_perf's output.
//   host-cost        the host time of enqueueing each collective (all_reduce, broadcast, reduce,
//                    all_gather, reduce_scatter, a send/recv pair in a group, 8 B per rank), cudrv
//                    against raw: bursts of 100 calls timed with steady_clock, the streams synchronised
//                    between bursts outside the timed part (so no queue fills), the order of the cases
//                    rotating from round to round, 41 rounds; plus raw all_reduce against itself (the
//                    noise floor). Heap allocations (a replaced operator new) are counted in every
//                    burst of either path: cudrv must add none to what NCCL itself allocates.
//   peer             peer copies between every ordered pair of devices (both directions), cudrv::copy_peer
//                    against raw cuMemcpyPeerAsync on the same stream (of the source device) and
//                    buffers: bandwidth at --peer-bytes (256 MiB) and latency at 8 B, timed like the
//                    sweep's events method; peer access enabled where the devices allow it. Each path's copy checked.
//                    Needs 2 devices: with fewer it prints "skipped: needs 2 devices". Single process only.
//   window           all-reduce (float sum, out of place, the sweep's sizes) through cudrv on three kinds of
//                    memory, interleaved: plain device_buffer (cuMemAlloc), nccl::buffer (ncclMemAlloc)
//                    not registered, and nccl::buffer registered as a symmetric window
//                    (nccl::window, window_flags::collective_symmetric); timed by the nccl-tests method
//                    (out of place). Checked like the sweep. In one process each GPU's thread registers
//                    its own windows (every rank's registration must be in flight at once, and a
//                    cudrv::nccl::window is complete when its constructor returns, so it cannot be
//                    made inside a group). Prints "skipped: ..." (exit 0) when the
//                    loaded NCCL lacks ncclMemAlloc or window registration (not_supported_error) or
//                    registers no window (NCCL offers symmetric memory only where every rank reaches
//                    every other by CUDA peer-to-peer); any other error fails the run (exit 4).
//   all              sweep, host-cost, window, then peer (peer left out under mpirun).
//
// --quick: fewer rounds and shorter batches. --json FILE writes one JSON document with the run's
// identity (devices, driver, NCCL version, ranks, date) and a section per mode; the sweep section is
// what scripts/plot-allreduce.py draws.
//
// For example:
//   build/benchmarks/bench_nccl all --json nccl.json      # every local GPU from one process
//   build/benchmarks/bench_nccl sweep --devices 1         # a one-rank communicator
//   build/benchmarks/bench_nccl sweep --method nccl-tests --json nccl.json
//   .venv/bin/python scripts/nccl-compare.py --png cmp.png all_reduce_perf.txt nccl.json
//   mpirun -np 8 -x NCCL_NVLS_ENABLE=0 build/benchmarks/bench_nccl all --json nccl.json
//   .venv/bin/python scripts/plot-allreduce.py nccl.json allreduce.png
//
// Exit status: 0 success (a skipped peer mode included), 1 usage error, 2 no CUDA driver or no NCCL,
// 3 no CUDA device, 4 CUDA or NCCL error or heap allocations through cudrv, 5 a result came back wrong.
#include <cudaTypedefs.h>
#include <link.h>
#include <nccl.h>
#include <unistd.h>

#include <cudrv/cudrv.hpp>
#include <cudrv/nccl.hpp>
#ifdef CUDRV_BENCH_NCCL_MPI
#include <cudrv/mpi.hpp>
#endif

#include "bench_support.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using steady = std::chrono::steady_clock;

// --- command line -------------------------------------------------------------------------------

// How the sweep times a size (see the comment at the top).
enum class method { nccl_tests, events, both };

struct options {
  bool sweep = true;
  bool host_cost = false;
  bool peer = false;
  bool window = false;
  method timing = method::both;
  int iters = 20;          // nccl-tests' -n
  int warmup_iters = 1;    // nccl-tests' -w
  double max_seconds = 0;  // the nccl-tests method's time per size and memory kind; 0: the default
  bool quick = false;
  int devices = 0;  // 0: every visible device
  std::size_t min_bytes = 8;
  std::size_t max_bytes = std::size_t{1} << 30;
  std::size_t verify_max_bytes = std::size_t{4} << 20;
  std::size_t peer_bytes = std::size_t{256} << 20;
  int rounds = 0;  // 0: each mode's default
  double batch_ms = 4.0;
  std::string json;
  bool force_mpi = false;
  bool no_mpi = false;
};

constexpr const char* usage_text =
    "usage: bench_nccl [sweep|host-cost|peer|window|all] [--quick] [--devices N] [--min-bytes SIZE]\n"
    "                  [--max-bytes SIZE] [--rounds R] [--method nccl-tests|events|both] [--iters N]\n"
    "                  [--warmup-iters N] [--max-seconds S] [--batch-ms MS] [--verify-max-bytes SIZE]\n"
    "                  [--peer-bytes SIZE] [--json FILE] [--mpi | --no-mpi]\n"
    "SIZE takes a K, M or G suffix (powers of 1024). Under mpirun: one rank per GPU (needs a build with cudrv::mpi).\n";

bool parse_size(const char* text, std::size_t& out) {
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text, &end, 10);
  if (end == text || errno != 0 || text[0] == '-') {
    return false;
  }
  unsigned shift = 0;
  if (*end == 'K' || *end == 'k') {
    shift = 10;
  } else if (*end == 'M' || *end == 'm') {
    shift = 20;
  } else if (*end == 'G' || *end == 'g') {
    shift = 30;
  }
  if (shift != 0) {
    ++end;
  }
  if (*end == 'B' || *end == 'b') {
    ++end;
  }
  if (*end != '\0' || v > (ULLONG_MAX >> shift)) {
    return false;
  }
  out = static_cast<std::size_t>(v << shift);
  return true;
}

// Returns -1 when the arguments are good, else the exit status (1; 0 after --help).
int parse(int argc, char** argv, options& o) {
  int i = 1;
  if (i < argc && argv[i][0] != '-') {
    std::string m = argv[i++];
    o.sweep = m == "sweep" || m == "all";
    o.host_cost = m == "host-cost" || m == "all";
    o.peer = m == "peer" || m == "all";
    o.window = m == "window" || m == "all";
    if (!o.sweep && !o.host_cost && !o.peer && !o.window) {
      std::fprintf(stderr, "bench_nccl: unknown mode '%s'\n%s", m.c_str(), usage_text);
      return 1;
    }
  }
  for (; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        return nullptr;
      }
      return argv[++i];
    };
    auto size_option = [&](std::size_t& out) {
      const char* v = value();
      if (v == nullptr || !parse_size(v, out)) {
        std::fprintf(stderr, "bench_nccl: %s takes a size (e.g. 64M)\n%s", a.c_str(), usage_text);
        return false;
      }
      return true;
    };
    if (a == "--help" || a == "-h") {
      std::fputs(usage_text, stdout);
      return 0;
    }
    if (a == "--quick") {
      o.quick = true;
    } else if (a == "--mpi") {
      o.force_mpi = true;
    } else if (a == "--no-mpi") {
      o.no_mpi = true;
    } else if (a == "--devices" || a == "--rounds" || a == "--iters" || a == "--warmup-iters") {
      const char* v = value();
      char* end = nullptr;
      long n = v != nullptr ? std::strtol(v, &end, 10) : 0;
      const long least = a == "--warmup-iters" ? 0 : 1;
      if (v == nullptr || *end != '\0' || n < least || n > 100000) {
        std::fprintf(stderr, "bench_nccl: %s takes a %s integer\n%s", a.c_str(),
                     least == 0 ? "non-negative" : "positive", usage_text);
        return 1;
      }
      (a == "--devices"  ? o.devices
       : a == "--rounds" ? o.rounds
       : a == "--iters"  ? o.iters
                         : o.warmup_iters) = static_cast<int>(n);
    } else if (a == "--method") {
      const char* v = value();
      const std::string m = v != nullptr ? v : "";
      if (m == "nccl-tests") {
        o.timing = method::nccl_tests;
      } else if (m == "events") {
        o.timing = method::events;
      } else if (m == "both") {
        o.timing = method::both;
      } else {
        std::fprintf(stderr, "bench_nccl: --method takes nccl-tests, events or both\n%s", usage_text);
        return 1;
      }
    } else if (a == "--max-seconds") {
      const char* v = value();
      char* end = nullptr;
      double sec = v != nullptr ? std::strtod(v, &end) : 0;
      if (v == nullptr || *end != '\0' || !(sec > 0) || sec > 100000) {
        std::fprintf(stderr, "bench_nccl: --max-seconds takes a positive number of seconds\n%s", usage_text);
        return 1;
      }
      o.max_seconds = sec;
    } else if (a == "--batch-ms") {
      const char* v = value();
      char* end = nullptr;
      double ms = v != nullptr ? std::strtod(v, &end) : 0;
      if (v == nullptr || *end != '\0' || !(ms > 0) || ms > 10000) {
        std::fprintf(stderr, "bench_nccl: --batch-ms takes a positive number of milliseconds\n%s", usage_text);
        return 1;
      }
      o.batch_ms = ms;
    } else if (a == "--min-bytes") {
      if (!size_option(o.min_bytes)) {
        return 1;
      }
    } else if (a == "--max-bytes") {
      if (!size_option(o.max_bytes)) {
        return 1;
      }
    } else if (a == "--verify-max-bytes") {
      if (!size_option(o.verify_max_bytes)) {
        return 1;
      }
    } else if (a == "--peer-bytes") {
      if (!size_option(o.peer_bytes)) {
        return 1;
      }
    } else if (a == "--json") {
      const char* v = value();
      if (v == nullptr || *v == '\0') {
        std::fprintf(stderr, "bench_nccl: --json takes a file name\n%s", usage_text);
        return 1;
      }
      o.json = v;
    } else {
      std::fprintf(stderr, "bench_nccl: unknown argument '%s'\n%s", a.c_str(), usage_text);
      return 1;
    }
  }
  if (o.min_bytes < sizeof(float) || o.min_bytes % sizeof(float) != 0 || o.max_bytes < o.min_bytes ||
      o.peer_bytes < sizeof(float) || o.peer_bytes % sizeof(float) != 0) {
    std::fprintf(stderr, "bench_nccl: sizes must be whole floats (multiples of 4 bytes), --max-bytes >= --min-bytes\n");
    return 1;
  }
  if (o.force_mpi && o.no_mpi) {
    std::fprintf(stderr, "bench_nccl: --mpi and --no-mpi together\n");
    return 1;
  }
  if (o.quick) {
    o.batch_ms = std::min(o.batch_ms, 1.0);
  }
  if (o.max_seconds == 0) {
    o.max_seconds = o.quick ? 2.0 : 10.0;
  }
  return -1;
}

// Whether a mode that makes communicators was asked for.
bool needs_nccl(const options& o) { return o.sweep || o.host_cost || o.window; }

// The world size a launcher (Open MPI, MPICH/Hydra, MVAPICH2, PMIx) put in the environment; 0 when
// none did.
int launcher_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE", "PMIX_SIZE"}) {
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0') {
      return std::atoi(v);
    }
  }
  return 0;
}

// --- raw NCCL -----------------------------------------------------------------------------------

class raw_nccl_error : public std::runtime_error {
 public:
  raw_nccl_error(ncclResult_t r, const char* api)
      : std::runtime_error(std::string(api) + " failed: " + ncclGetErrorString(r) + " (ncclResult_t " +
                           std::to_string(static_cast<int>(r)) + ")") {}
};

/// The raw side checks every status, as cudrv does.
inline void ncheck(ncclResult_t r, const char* api) {
  if (r != ncclSuccess) [[unlikely]] {
    throw raw_nccl_error(r, api);
  }
}

std::string version_string(int v) {
  // NCCL_VERSION_CODE: major*1000 + minor*100 + patch up to 2.8, major*10000 + minor*100 + patch after.
  const int major = v >= 10000 ? v / 10000 : v / 1000;
  const int minor = v >= 10000 ? v % 10000 / 100 : v % 1000 / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(v % 100);
}

std::string real_path(const std::string& p) {
  if (char* r = ::realpath(p.c_str(), nullptr)) {
    std::string s = r;
    std::free(r);
    return s;
  }
  return p;
}

// The real paths of the NCCL libraries loaded in this process (files named libnccl*).
std::vector<std::string> loaded_nccl_libraries() {
  std::vector<std::string> found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        auto& v = *static_cast<std::vector<std::string>*>(data);
        if (info->dlpi_name != nullptr && *info->dlpi_name != '\0') {
          const std::string p = real_path(info->dlpi_name);
          const std::size_t slash = p.rfind('/');
          if (p.compare(slash == std::string::npos ? 0 : slash + 1, 7, "libnccl") == 0 &&
              std::find(v.begin(), v.end(), p) == v.end()) {
            v.push_back(p);
          }
        }
        return 0;
      },
      &found);
  return found;
}

// --- the ranks of this process ------------------------------------------------------------------

struct rank_state {
  cudrv::device dev;
  int rank;  // in the communicator
  cudrv::stream stream;
  cudrv::event start;
  cudrv::event stop;
  cudrv::nccl::communicator comm;  // destroyed first
  rank_state(cudrv::device d, int r, cudrv::nccl::communicator c)
      : dev(d),
        rank(r),
        stream(d),
        start(d, cudrv::event_flags::timing),
        stop(d, cudrv::event_flags::timing),
        comm(std::move(c)) {}
};

struct device_info {
  int rank = 0;
  int ordinal = 0;
  std::string host;
  std::string name;
  std::string pci_bus_id;
};

struct world {
  bool mpi = false;
  int nranks = 1;
  std::vector<rank_state> local;   // one per GPU of this process
  std::vector<device_info> infos;  // every rank's, on rank 0

  [[nodiscard]] bool root() const { return local.empty() || local.front().rank == 0; }
  void sync() const {
    for (const auto& r : local) {
      r.stream.synchronize();
    }
  }
  // The maximum over every rank of the world (this process's value without MPI).
  void max_all(std::vector<double>& v) const {
#ifdef CUDRV_BENCH_NCCL_MPI
    if (mpi && !v.empty()) {
      cudrv::mpi::check(MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_DOUBLE, MPI_MAX,
                                      MPI_COMM_WORLD),
                        "MPI_Allreduce");
    }
#else
    (void)v;
#endif
  }
  [[nodiscard]] double max_all(double v) const {
#ifdef CUDRV_BENCH_NCCL_MPI
    if (mpi) {
      cudrv::mpi::check(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
    }
#endif
    return v;
  }
  // The sum over every rank of the world (this process's value without MPI).
  [[nodiscard]] double sum_all(double v) const {
#ifdef CUDRV_BENCH_NCCL_MPI
    if (mpi) {
      cudrv::mpi::check(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
    }
#endif
    return v;
  }
  // The mean over the processes of the world: what nccl-tests reports of a time by default (-a 1, the
  // average over its processes and threads; one process driving several GPUs has one host time).
  [[nodiscard]] double mean_all(double v) const { return mpi ? sum_all(v) / nranks : v; }
  [[nodiscard]] long long sum_all(long long v) const {
#ifdef CUDRV_BENCH_NCCL_MPI
    if (mpi) {
      cudrv::mpi::check(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
    }
#endif
    return v;
  }
  void barrier() const {
#ifdef CUDRV_BENCH_NCCL_MPI
    if (mpi) {
      cudrv::mpi::check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    }
#endif
  }
};

device_info describe_device(const cudrv::device& d, int rank) {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) {
    std::strcpy(host, "?");
  }
  return {rank, d.ordinal(), host, d.name(), d.pci_bus_id()};
}

#ifdef CUDRV_BENCH_NCCL_MPI
// Every rank's device_info on rank 0, as fixed-size records.
std::vector<device_info> gather_infos(const device_info& mine, int nranks) {
  struct record {
    int rank;
    int ordinal;
    char host[128];
    char name[128];
    char bus[64];
  };
  record r{};
  r.rank = mine.rank;
  r.ordinal = mine.ordinal;
  std::snprintf(r.host, sizeof r.host, "%s", mine.host.c_str());
  std::snprintf(r.name, sizeof r.name, "%s", mine.name.c_str());
  std::snprintf(r.bus, sizeof r.bus, "%s", mine.pci_bus_id.c_str());
  std::vector<record> all(static_cast<std::size_t>(nranks));
  cudrv::mpi::check(MPI_Gather(&r, sizeof r, MPI_BYTE, all.data(), sizeof r, MPI_BYTE, 0, MPI_COMM_WORLD),
                    "MPI_Gather");
  std::vector<device_info> out;
  if (mine.rank == 0) {
    for (const auto& a : all) {
      out.push_back({a.rank, a.ordinal, a.host, a.name, a.bus});
    }
  }
  return out;
}
#endif

// --- the collectives, through either path -------------------------------------------------------

enum class op { all_reduce, broadcast, reduce, all_gather, reduce_scatter, send_recv };

const char* op_name(op o) {
  switch (o) {
    case op::all_reduce: return "all_reduce";
    case op::broadcast: return "broadcast";
    case op::reduce: return "reduce";
    case op::all_gather: return "all_gather";
    case op::reduce_scatter: return "reduce_scatter";
    case op::send_recv: return "send_recv";
  }
  return "?";
}

// One rank's buffers for one call: what it reads and what it writes.
struct call_args {
  cudrv::device_span<const float> in;
  cudrv::device_span<float> out;
};

// The spans of op @p o with @p count elements per rank (all_gather's output and reduce_scatter's
// input hold nranks * count).
call_args args_for(op o, const cudrv::device_buffer<float>& send, cudrv::device_buffer<float>& recv, std::size_t count,
                   int nranks) {
  const std::size_t all = count * static_cast<std::size_t>(nranks);
  switch (o) {
    case op::all_gather: return {send.view().first(count), recv.view().first(all)};
    case op::reduce_scatter: return {send.view().first(all), recv.view().first(count)};
    default: return {send.view().first(count), recv.view().first(count)};
  }
}

void call_cudrv(op o, const rank_state& r, call_args& a, int nranks) {
  using cudrv::nccl::reduction;
  switch (o) {
    case op::all_reduce: r.comm.all_reduce(a.in, a.out, reduction::sum, r.stream); break;
    case op::broadcast: r.comm.broadcast(a.in, a.out, 0, r.stream); break;
    case op::reduce: r.comm.reduce(a.in, a.out, reduction::sum, 0, r.stream); break;
    case op::all_gather: r.comm.all_gather(a.in, a.out, r.stream); break;
    case op::reduce_scatter: r.comm.reduce_scatter(a.in, a.out, reduction::sum, r.stream); break;
    case op::send_recv:
      r.comm.send(a.in, (r.rank + 1) % nranks, r.stream);
      r.comm.recv(a.out, (r.rank + nranks - 1) % nranks, r.stream);
      break;
  }
}

void call_raw(op o, const rank_state& r, const call_args& a, int nranks) {
  ncclComm_t c = r.comm.native_handle();
  cudaStream_t s = r.stream.native_handle();
  const void* in = reinterpret_cast<const void*>(a.in.data());
  void* out = reinterpret_cast<void*>(a.out.data());
  switch (o) {
    case op::all_reduce:
      ncheck(ncclAllReduce(in, out, a.in.size(), ncclFloat32, ncclSum, c, s), "ncclAllReduce");
      break;
    case op::broadcast: ncheck(ncclBroadcast(in, out, a.in.size(), ncclFloat32, 0, c, s), "ncclBroadcast"); break;
    case op::reduce: ncheck(ncclReduce(in, out, a.in.size(), ncclFloat32, ncclSum, 0, c, s), "ncclReduce"); break;
    case op::all_gather: ncheck(ncclAllGather(in, out, a.in.size(), ncclFloat32, c, s), "ncclAllGather"); break;
    case op::reduce_scatter:
      ncheck(ncclReduceScatter(in, out, a.out.size(), ncclFloat32, ncclSum, c, s), "ncclReduceScatter");
      break;
    case op::send_recv:
      ncheck(ncclSend(in, a.in.size(), ncclFloat32, (r.rank + 1) % nranks, c, s), "ncclSend");
      ncheck(ncclRecv(out, a.out.size(), ncclFloat32, (r.rank + nranks - 1) % nranks, c, s), "ncclRecv");
      break;
  }
}

// One operation: one call on every rank of this process, in one group when there are several (one
// thread drives them all) or for a send/recv pair.
void issue(op o, bool raw, world& w, std::vector<call_args>& args) {
  const bool grouped = w.local.size() > 1 || o == op::send_recv;
  if (raw) {
    if (grouped) {
      ncheck(ncclGroupStart(), "ncclGroupStart");
    }
    for (std::size_t i = 0; i < w.local.size(); ++i) {
      call_raw(o, w.local[i], args[i], w.nranks);
    }
    if (grouped) {
      ncheck(ncclGroupEnd(), "ncclGroupEnd");
    }
  } else if (grouped) {
    cudrv::nccl::group g;
    for (std::size_t i = 0; i < w.local.size(); ++i) {
      call_cudrv(o, w.local[i], args[i], w.nranks);
    }
    g.end();
  } else {
    call_cudrv(o, w.local[0], args[0], w.nranks);
  }
}

// A batch of @p k operations between events on every stream: microseconds per operation, the
// slowest rank's (of the whole world).
double time_batch(world& w, op o, bool raw, std::vector<call_args>& args, int k) {
  w.barrier();
  for (const auto& r : w.local) {
    r.start.record(r.stream);
  }
  for (int i = 0; i < k; ++i) {
    issue(o, raw, w, args);
  }
  for (const auto& r : w.local) {
    r.stop.record(r.stream);
  }
  double ms = 0;
  for (const auto& r : w.local) {
    r.stop.synchronize();
    ms = std::max(ms, static_cast<double>(cudrv::elapsed_time(r.start, r.stop).count()));
  }
  return w.max_all(ms) * 1000.0 / k;
}

// The batch size that makes a batch last about @p batch_ms, from the time of one operation.
int batch_size(double us_per_op, double batch_ms, int max_iterations) {
  if (!(us_per_op > 0)) {
    return max_iterations;
  }
  return static_cast<int>(
      std::clamp(std::ceil(batch_ms * 1000.0 / us_per_op), 1.0, static_cast<double>(max_iterations)));
}

double paired(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> r;
  for (std::size_t i = 0; i < a.size(); ++i) {
    r.push_back(a[i] / b[i]);
  }
  return bench::median(r);
}

// --- nccl-tests' timing (src/common.cu of NVIDIA's nccl-tests: BenchTime, startColl, completeColl) --

// Each GPU's whole send and receive memory of one kind (one entry per GPU of this process).
struct memory_set {
  std::vector<cudrv::device_span<float>> send;
  std::vector<cudrv::device_span<float>> recv;
};

// Waits until every stream of this process is idle: polls each stream (cuStreamQuery) and, while one
// is busy, its communicator's asynchronous error, yielding between rounds of polls when nothing
// changed (nccl-tests' testStreamSynchronize).
void poll_complete(const world& w) {
  std::uint64_t done = 0;  // a bit per GPU of this process
  std::size_t remaining = w.local.size();
  while (remaining != 0) {
    bool idle = true;
    for (std::size_t i = 0; i < w.local.size(); ++i) {
      if ((done >> i & 1u) != 0) {
        continue;
      }
      if (w.local[i].stream.is_done()) {
        done |= std::uint64_t{1} << i;
        --remaining;
        idle = false;
        continue;
      }
      ncclResult_t async = ncclSuccess;
      ncheck(ncclCommGetAsyncError(w.local[i].comm.native_handle(), &async), "ncclCommGetAsyncError");
      ncheck(async, "an all-reduce (the communicator's asynchronous error)");
    }
    if (idle) {
      std::this_thread::yield();
    }
  }
}

// The arguments of iteration @p iter: @p count elements at the offset nccl-tests' startColl gives
// it, (iter mod steps) * count with steps = @p max_count / count, so that consecutive calls use
// different memory; in place, the input is the output. @p shifted false: offset 0 for every iteration.
void iteration_args(const memory_set& m, std::size_t count, std::size_t max_count, int iter, bool in_place,
                    bool shifted, std::vector<call_args>& args) {
  const std::size_t steps = std::max<std::size_t>(1, max_count / count);
  const std::size_t shift = shifted ? count * (static_cast<std::size_t>(iter) % steps) : 0;
  args.resize(m.send.size());
  for (std::size_t i = 0; i < m.send.size(); ++i) {
    const cudrv::device_span<float> out = m.recv[i].subspan(shift, count);
    args[i] = {in_place ? cudrv::device_span<const float>(out) : m.send[i].subspan(shift, count), out};
  }
}

// One all-reduce (float sum) on every GPU of this process, in one group when there are several; in
// place through cudrv's in-place overload (raw: the same pointer twice, as nccl-tests passes it).
void issue_all_reduce(world& w, bool raw, std::vector<call_args>& args, bool in_place) {
  const bool grouped = w.local.size() > 1;
  if (raw) {
    if (grouped) {
      ncheck(ncclGroupStart(), "ncclGroupStart");
    }
    for (std::size_t i = 0; i < w.local.size(); ++i) {
      void* out = reinterpret_cast<void*>(args[i].out.data());
      const void* in = in_place ? out : reinterpret_cast<const void*>(args[i].in.data());
      ncheck(ncclAllReduce(in, out, args[i].out.size(), ncclFloat32, ncclSum, w.local[i].comm.native_handle(),
                           w.local[i].stream.native_handle()),
             "ncclAllReduce");
    }
    if (grouped) {
      ncheck(ncclGroupEnd(), "ncclGroupEnd");
    }
    return;
  }
  auto call = [&](std::size_t i) {
    const auto& r = w.local[i];
    if (in_place) {
      r.comm.all_reduce(args[i].out, cudrv::nccl::reduction::sum, r.stream);
    } else {
      r.comm.all_reduce(args[i].in, args[i].out, cudrv::nccl::reduction::sum, r.stream);
    }
  };
  if (grouped) {
    cudrv::nccl::group g;
    for (std::size_t i = 0; i < w.local.size(); ++i) {
      call(i);
    }
    g.end();
  } else {
    call(0);
  }
}

// How one timed run is made: nccl-tests' own is {iters, true, false}.
struct run_shape {
  int calls = 20;       // calls in the timed part
  bool shifted = true;  // buffers shifted from call to call
  bool events = false;  // CUDA events around the calls on every stream as well
  bool in_place = false;
};

// One timed run: this process's host time per call and, with events, the GPUs' times per call (the
// slowest GPU of this process and the sum over its GPUs), all in microseconds.
struct run_time {
  double host_us = 0;
  double events_max_us = 0;
  double events_sum_us = 0;
};

// nccl-tests' BenchTime for one path: the sync call (one call, a wait, a barrier), then @p shape.calls
// calls timed by the host clock until they have completed (poll_complete).
run_time timed_run(world& w, bool raw, const memory_set& m, std::size_t count, std::size_t max_count,
                   const run_shape& shape, std::vector<call_args>& args) {
  iteration_args(m, count, max_count, 0, shape.in_place, shape.shifted, args);
  issue_all_reduce(w, raw, args, shape.in_place);
  poll_complete(w);
  w.barrier();
  if (shape.events) {
    for (const auto& r : w.local) {
      r.start.record(r.stream);
    }
  }
  const auto t0 = steady::now();
  for (int i = 0; i < shape.calls; ++i) {
    if (shape.shifted) {
      iteration_args(m, count, max_count, i, shape.in_place, true, args);
    }
    issue_all_reduce(w, raw, args, shape.in_place);
  }
  if (shape.events) {
    for (const auto& r : w.local) {
      r.stop.record(r.stream);
    }
  }
  poll_complete(w);
  run_time t;
  t.host_us = std::chrono::duration<double, std::micro>(steady::now() - t0).count() / shape.calls;
  if (shape.events) {
    for (const auto& r : w.local) {
      const double us = static_cast<double>(cudrv::elapsed_time(r.start, r.stop).count()) * 1000.0 / shape.calls;
      t.events_max_us = std::max(t.events_max_us, us);
      t.events_sum_us += us;
    }
  }
  return t;
}

// nccl-tests' warm-up: every size first, @p warmup calls each (shifted like the timed calls) and a
// wait, through both paths.
void warm_up(world& w, const memory_set& m, const std::vector<std::size_t>& sizes, int warmup) {
  const std::size_t max_count = sizes.back() / sizeof(float);
  std::vector<call_args> args;
  for (std::size_t bytes : sizes) {
    const std::size_t count = bytes / sizeof(float);
    for (bool raw : {true, false}) {
      for (int i = 0; i < warmup; ++i) {
        iteration_args(m, count, max_count, i, false, true, args);
        issue_all_reduce(w, raw, args, false);
      }
      poll_complete(w);
    }
  }
  w.barrier();
}

// Per-round times of both paths, in microseconds per call.
struct path_times {
  std::vector<double> cudrv;
  std::vector<double> raw;
};

// The nccl-tests method at one size: @p rounds rounds (fewer past @p budget_s seconds, see
// another_round), each one timed run of each path out of place and in place, the order of the four
// rotating from round to round. Each time is the mean over the processes (nccl-tests' -a 1).
// Whether round @p done (counting from 0) is to be run: always the first of @p rounds, later ones
// only while the rounds so far took less than @p budget_s seconds (by the slowest rank's clock, so
// that every rank decides alike). A slow transport (NCCL's sockets over loopback) then gets fewer
// rounds at its largest sizes instead of hours.
bool another_round(const world& w, int done, int rounds, steady::time_point start, double budget_s) {
  if (done >= rounds) {
    return false;
  }
  return done == 0 || w.max_all(std::chrono::duration<double>(steady::now() - start).count()) < budget_s;
}

void measure_nccl_tests(world& w, const memory_set& m, std::size_t count, std::size_t max_count, int iters, int rounds,
                        double budget_s, path_times& out_of_place, path_times& in_place) {
  std::vector<call_args> args;
  const auto start = steady::now();
  for (int r = 0; another_round(w, r, rounds, start, budget_s); ++r) {
    for (int k = 0; k < 4; ++k) {
      const int which = (k + r) % 4;
      const bool raw = which % 2 == 1;
      run_shape shape;
      shape.calls = iters;
      shape.in_place = which >= 2;
      const double us = w.mean_all(timed_run(w, raw, m, count, max_count, shape, args).host_us);
      path_times& p = shape.in_place ? in_place : out_of_place;
      (raw ? p.raw : p.cudrv).push_back(us);
    }
  }
}

// --- input data and checks ----------------------------------------------------------------------

// Rank r's element i: small integers, so every sum is exact in float whatever NCCL's order.
float input_value(std::size_t i, int rank) {
  return static_cast<float>(static_cast<int>((i * 7 + static_cast<std::size_t>(rank) * 3) % 17) - 8);
}

const float poison = std::bit_cast<float>(0xFFFFFFFFu);  // a NaN no sum produces

bool is_poison(float v) { return std::bit_cast<std::uint32_t>(v) == 0xFFFFFFFFu; }

// Fills the first @p pattern elements of each rank's @p send with input_value, the rest with zeros.
void fill_inputs(world& w, const std::vector<cudrv::device_span<float>>& send, std::size_t pattern) {
  for (std::size_t i = 0; i < w.local.size(); ++i) {
    auto& r = w.local[i];
    const std::size_t n = std::min(pattern, send[i].size());
    std::vector<float> h(n);
    for (std::size_t j = 0; j < n; ++j) {
      h[j] = input_value(j, r.rank);
    }
    cudrv::copy(send[i].first(n), h, r.stream);
    if (send[i].size() > n) {
      cudrv::fill(send[i].subspan(n), 0.0f, r.stream);
    }
  }
  w.sync();
}

// One all-reduce of @p count elements through one path into poisoned outputs, checked on every rank
// against the host's sum; the @p guard elements after the output must stay poisoned. Returns the
// number of wrong elements over the world; the first few are described on stderr.
long long verify_all_reduce(world& w, bool raw, const memory_set& m, std::size_t count) {
  const std::size_t guard = std::min<std::size_t>(16, m.recv[0].size() - count);
  std::vector<call_args> args;
  for (std::size_t i = 0; i < w.local.size(); ++i) {
    cudrv::fill(m.recv[i].first(count + guard), poison, w.local[i].stream);
    args.push_back({m.send[i].first(count), m.recv[i].first(count)});
  }
  issue_all_reduce(w, raw, args, false);
  long long wrong = 0;
  for (std::size_t i = 0; i < w.local.size(); ++i) {
    auto& r = w.local[i];
    std::vector<float> h(count + guard);
    cudrv::copy(h, m.recv[i].first(count + guard), r.stream);
    r.stream.synchronize();
    for (std::size_t j = 0; j < count + guard; ++j) {
      float expected = poison;
      if (j < count) {
        expected = 0;
        for (int k = 0; k < w.nranks; ++k) {
          expected += input_value(j, k);
        }
      }
      const bool ok = j < count ? h[j] == expected : is_poison(h[j]);
      if (!ok) {
        if (wrong < 5 && j < count) {
          std::fprintf(stderr, "bench_nccl: %s all_reduce of %zu floats, rank %d, element %zu: %g, expected %g\n",
                       raw ? "raw" : "cudrv", count, r.rank, j, static_cast<double>(h[j]),
                       static_cast<double>(expected));
        } else if (wrong < 5) {
          std::fprintf(stderr,
                       "bench_nccl: %s all_reduce of %zu floats, rank %d, element %zu (after the output): written "
                       "(%g), expected untouched\n",
                       raw ? "raw" : "cudrv", count, r.rank, j, static_cast<double>(h[j]));
        }
        ++wrong;
      }
    }
  }
  return w.sum_all(wrong);
}

// --- JSON ---------------------------------------------------------------------------------------

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string num(double v) {
  if (!std::isfinite(v)) {
    return "null";
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string human_bytes(std::size_t b) {
  char buf[32];
  if (b >= (std::size_t{1} << 30) && b % (std::size_t{1} << 30) == 0) {
    std::snprintf(buf, sizeof buf, "%zu GiB", b >> 30);
  } else if (b >= (std::size_t{1} << 20) && b % (std::size_t{1} << 20) == 0) {
    std::snprintf(buf, sizeof buf, "%zu MiB", b >> 20);
  } else if (b >= 1024 && b % 1024 == 0) {
    std::snprintf(buf, sizeof buf, "%zu KiB", b >> 10);
  } else {
    std::snprintf(buf, sizeof buf, "%zu B", b);
  }
  return buf;
}

// --- sweep --------------------------------------------------------------------------------------

struct outcome {
  long long wrong = 0;              // wrong elements (exit 5)
  long long extra_allocations = 0;  // heap allocations cudrv added (exit 4)
};

// The events method at one size: a batch size K from a warm-up, then @p rounds rounds each timing one
// batch of K calls per path between CUDA events (the slowest GPU of the world). Returns K.
int measure_events(world& w, const options& o, std::vector<call_args>& args, int rounds, path_times& t) {
  const int max_iterations = 5000;
  // Warm-up, then the batch size: a first guess from 3 raw calls (which overstates the time of a
  // small one: the GPU waits for the host at the start), refined on a batch of a quarter of the length.
  (void)time_batch(w, op::all_reduce, false, args, 3);
  (void)time_batch(w, op::all_reduce, true, args, 3);
  const int guess = batch_size(time_batch(w, op::all_reduce, true, args, 3), o.batch_ms / 4, max_iterations);
  const int k = batch_size(time_batch(w, op::all_reduce, true, args, guess), o.batch_ms, max_iterations);
  for (int r = 0; r < rounds; ++r) {
    const bool raw_first = r % 2 == 1;
    for (bool raw : {raw_first, !raw_first}) {
      (raw ? t.raw : t.cudrv).push_back(time_batch(w, op::all_reduce, raw, args, k));
    }
  }
  return k;
}

// One path's figures at one size, as JSON fields (without braces).
std::string path_json(const std::vector<double>& t, std::size_t bytes, double bus_factor) {
  const double us = bench::median(t);
  const double alg = static_cast<double>(bytes) / (us * 1e-6) / 1e9;
  return "\"time_us\": " + num(us) + ", \"best_time_us\": " + num(*std::min_element(t.begin(), t.end())) +
         ", \"algbw_gbps\": " + num(alg) + ", \"busbw_gbps\": " + num(alg * bus_factor);
}

double busbw_of(const std::vector<double>& t, std::size_t bytes, double bus_factor) {
  return static_cast<double>(bytes) / (bench::median(t) * 1e-6) / 1e9 * bus_factor;
}

// The harness table: the raw path's smallest all-reduce timed by variants between bench_nccl's events
// method and nccl-tests' (see the comment at the top), interleaved over the rounds.
std::string run_harness(world& w, const memory_set& m, std::size_t bytes, std::size_t max_count, int events_k,
                        int iters, int rounds) {
  struct variant {
    const char* name;
    run_shape shape;
    std::vector<double> host, host_max, ev_max, ev_mean;
  };
  std::vector<variant> v;
  v.push_back({"events method: batch K, same buffers", {events_k, false, true, false}, {}, {}, {}, {}});
  v.push_back({"batch --iters, same buffers", {iters, false, true, false}, {}, {}, {}, {}});
  v.push_back({"batch --iters, shifted buffers", {iters, true, true, false}, {}, {}, {}, {}});
  v.push_back({"batch K, shifted buffers, no events", {events_k, true, false, false}, {}, {}, {}, {}});
  v.push_back({"nccl-tests: batch --iters, shifted, no events", {iters, true, false, false}, {}, {}, {}, {}});
  const std::size_t count = bytes / sizeof(float);
  std::vector<call_args> args;
  for (int r = 0; r < rounds; ++r) {
    for (std::size_t k = 0; k < v.size(); ++k) {
      auto& x = v[(k + static_cast<std::size_t>(r)) % v.size()];
      const run_time t = timed_run(w, true, m, count, max_count, x.shape, args);
      x.host.push_back(w.mean_all(t.host_us));
      x.host_max.push_back(w.max_all(t.host_us));
      if (x.shape.events) {
        x.ev_max.push_back(w.max_all(t.events_max_us));
        x.ev_mean.push_back(w.sum_all(t.events_sum_us) / w.nranks);
      }
    }
  }
  std::string rows;
  if (w.root()) {
    std::printf("\n### where the time of a small all-reduce goes: raw ncclAllReduce of %s, %d rounds\n\n"
                "Each variant: a sync call, then its calls timed by the host clock until a polled wait "
                "ends (mean and maximum over the processes), and where it says so by CUDA events on each "
                "GPU's stream too (the slowest GPU, and the mean over the GPUs). K = %d (the events "
                "method's batch), --iters = %d.\n\n"
                "| variant | calls | host time (mean) | host time (max) | events (slowest GPU) | events (mean GPU) |\n"
                "|---|---:|---:|---:|---:|---:|\n",
                human_bytes(bytes).c_str(), rounds, events_k, iters);
  }
  for (const auto& x : v) {
    const double evmax = x.ev_max.empty() ? NAN : bench::median(x.ev_max);
    const double evmean = x.ev_mean.empty() ? NAN : bench::median(x.ev_mean);
    if (w.root()) {
      char ev[96] = "- | -";
      if (x.shape.events) {
        std::snprintf(ev, sizeof ev, "%.2f us | %.2f us", evmax, evmean);
      }
      std::printf("| %s | %d | %.2f us | %.2f us | %s |\n", x.name, x.shape.calls, bench::median(x.host),
                  bench::median(x.host_max), ev);
    }
    rows += std::string(rows.empty() ? "" : ",\n") + "        {\"variant\": " + quoted(x.name) +
            ", \"calls\": " + std::to_string(x.shape.calls) + ", \"shifted\": " + (x.shape.shifted ? "true" : "false") +
            ", \"events\": " + (x.shape.events ? "true" : "false") + ", \"host_us\": " + num(bench::median(x.host)) +
            ", \"host_max_us\": " + num(bench::median(x.host_max)) + ", \"events_max_us\": " + num(evmax) +
            ", \"events_mean_us\": " + num(evmean) + "}";
  }
  return ",\n    \"harness\": {\"bytes\": " + std::to_string(bytes) +
         ", \"path\": \"raw\", \"rounds\": " + std::to_string(rounds) + ", \"rows\": [\n" + rows + "\n    ]}";
}

// The sweep's goals over its rows (the main method's paired ratios).
struct sweep_goals {
  double min_big_ratio = 0;
  bool have_big = false;
  double small_latency_ratio = 0;
};

// One size's row of the sweep: printed (rank 0) and returned as JSON (rank 0; empty elsewhere). @p primary
// gives the usual fields; @p in_place (nccl-tests method) and @p events (the events method beside it)
// add theirs where given. Updates @p goals on every rank.
std::string sweep_row(const world& w, std::size_t bytes, std::size_t count, int iters, const path_times& primary,
                      const path_times* in_place, const path_times* events, int events_k, int verified,
                      double bus_factor, bool smallest, sweep_goals& goals, bool first) {
  const double tc = bench::median(primary.cudrv), tr = bench::median(primary.raw);
  const double alg_c = static_cast<double>(bytes) / (tc * 1e-6) / 1e9,
               alg_r = static_cast<double>(bytes) / (tr * 1e-6) / 1e9;
  const double bw_ratio = paired(primary.raw, primary.cudrv), lat_ratio = paired(primary.cudrv, primary.raw);
  if (bytes >= (std::size_t{64} << 20)) {
    goals.min_big_ratio = goals.have_big ? std::min(goals.min_big_ratio, bw_ratio) : bw_ratio;
    goals.have_big = true;
  }
  if (smallest) {
    goals.small_latency_ratio = lat_ratio;
  }
  if (!w.root()) {
    return {};
  }
  const double metric_factor = w.nranks == 1 ? 1.0 : bus_factor;  // the compared bandwidth: busbw, or algbw
  std::printf("| %s | %d | %.2f us | %.2f us | %.2f GB/s | %.2f GB/s | %.2f GB/s | %.2f GB/s | %.3f | %.3f |",
              human_bytes(bytes).c_str(), iters, tr, tc, alg_r, alg_c, alg_r * bus_factor, alg_c * bus_factor, bw_ratio,
              lat_ratio);
  std::string extra_c, extra_r, extra;
  if (in_place != nullptr) {
    std::printf(" %.2f GB/s | %.2f GB/s |", busbw_of(in_place->raw, bytes, metric_factor),
                busbw_of(in_place->cudrv, bytes, metric_factor));
    auto fields = [&](const std::vector<double>& t) {
      return ", \"in_place_time_us\": " + num(bench::median(t)) +
             ", \"in_place_algbw_gbps\": " + num(busbw_of(t, bytes, 1.0)) +
             ", \"in_place_busbw_gbps\": " + num(busbw_of(t, bytes, bus_factor));
    };
    extra_c = fields(in_place->cudrv);
    extra_r = fields(in_place->raw);
    extra = ", \"in_place_bandwidth_ratio\": " + num(paired(in_place->raw, in_place->cudrv)) +
            ", \"in_place_latency_ratio\": " + num(paired(in_place->cudrv, in_place->raw));
  }
  if (events != nullptr) {
    std::printf(" %d | %.2f us | %.2f us |", events_k, bench::median(events->raw), bench::median(events->cudrv));
    extra += ", \"events\": {\"iterations\": " + std::to_string(events_k) +
             ", \"cudrv_time_us\": " + num(bench::median(events->cudrv)) +
             ", \"raw_time_us\": " + num(bench::median(events->raw)) +
             ", \"bandwidth_ratio\": " + num(paired(events->raw, events->cudrv)) +
             ", \"latency_ratio\": " + num(paired(events->cudrv, events->raw)) + "}";
  }
  std::printf(" %s |\n", verified < 0 ? "-" : verified == 1 ? "ok" : "WRONG");
  std::fflush(stdout);
  return std::string(first ? "" : ",\n") + "      {\"bytes\": " + std::to_string(bytes) +
         ", \"count\": " + std::to_string(count) + ", \"iterations\": " + std::to_string(iters) +
         ", \"rounds\": " + std::to_string(primary.cudrv.size()) + ", \"cudrv\": {" +
         path_json(primary.cudrv, bytes, bus_factor) + extra_c + "}, \"raw\": {" +
         path_json(primary.raw, bytes, bus_factor) + extra_r + "}, \"bandwidth_ratio\": " + num(bw_ratio) +
         ", \"latency_ratio\": " + num(lat_ratio) + extra + ", \"verified\": " +
         (verified < 0    ? "null"
          : verified == 1 ? "true"
                          : "false") +
         "}";
}

std::string run_sweep(world& w, const options& o, outcome& out) {
  const int rounds = o.rounds > 0 ? o.rounds : (o.quick ? 5 : 21);
  std::vector<std::size_t> sizes;
  for (std::size_t b = o.min_bytes; b <= o.max_bytes; b *= 2) {
    sizes.push_back(b / sizeof(float) * sizeof(float));
    if (b > (SIZE_MAX >> 1)) {
      break;
    }
  }
  const std::size_t max_count = sizes.back() / sizeof(float);
  const std::size_t guard = 16;
  std::vector<cudrv::device_buffer<float>> send, recv;
  memory_set plain;
  for (const auto& r : w.local) {
    send.emplace_back(r.dev, max_count);
    recv.emplace_back(r.dev, max_count + guard);
    plain.send.push_back(send.back().view());
    plain.recv.push_back(recv.back().view());
  }
  const std::size_t verify_count = o.verify_max_bytes / sizeof(float);
  fill_inputs(w, plain.send, std::min(max_count, verify_count));

  const bool nt = o.timing != method::events;
  const bool ev = o.timing != method::nccl_tests;
  const bool one = w.nranks == 1;
  const double bus_factor = 2.0 * (w.nranks - 1) / w.nranks;
  if (w.root()) {
    std::printf("\n## all-reduce sweep: float sum, %d rank%s; %d rounds; ", w.nranks, one ? "" : "s", rounds);
    if (nt) {
      std::printf("nccl-tests' method (%d warm-up call%s per size, %d calls timed by the host clock, the mean over "
                  "the processes)%s",
                  o.warmup_iters, o.warmup_iters == 1 ? "" : "s", o.iters, ev ? "; also " : "\n\n");
    }
    if (ev) {
      std::printf("the events method (batches of about %.1f ms between CUDA events, the slowest GPU)\n\n", o.batch_ms);
    }
    if (one) {
      std::printf("One rank: busbw = algbw * 2(n-1)/n is 0 by nccl-tests' definition, so algbw is compared.\n\n");
    }
    std::printf(
        "| size | iters | raw time | cudrv time | raw algbw | cudrv algbw | raw busbw | cudrv busbw | %s ratio | "
        "latency ratio |%s%s checked |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|%s%s---|\n",
        one ? "algbw" : "busbw",
        !nt   ? ""
        : one ? " in place: raw algbw | cudrv algbw |"
              : " in place: raw busbw | cudrv busbw |",
        nt && ev ? " events: iters | raw time | cudrv time |" : "", nt ? "---:|---:|" : "",
        nt && ev ? "---:|---:|---:|" : "");
  }
  if (nt) {
    warm_up(w, plain, sizes, o.warmup_iters);
  }
  std::string rows;
  sweep_goals goals;
  int smallest_k = 0;
  for (std::size_t bytes : sizes) {
    const std::size_t count = bytes / sizeof(float);
    int verified = -1;  // not checked
    if (bytes <= o.verify_max_bytes) {
      long long wrong = verify_all_reduce(w, false, plain, count) + verify_all_reduce(w, true, plain, count);
      out.wrong += wrong;
      verified = wrong == 0 ? 1 : 0;
    }
    std::vector<call_args> args;
    for (std::size_t i = 0; i < w.local.size(); ++i) {
      args.push_back(args_for(op::all_reduce, send[i], recv[i], count, w.nranks));
    }
    path_times events, oop, inp;
    const int k = ev ? measure_events(w, o, args, rounds, events) : 0;
    if (bytes == sizes.front()) {
      smallest_k = k;
    }
    if (nt) {
      measure_nccl_tests(w, plain, count, max_count, o.iters, rounds, o.max_seconds, oop, inp);
    }
    const path_times& primary = nt ? oop : events;
    rows += sweep_row(w, bytes, count, nt ? o.iters : k, primary, nt ? &inp : nullptr, nt && ev ? &events : nullptr, k,
                      verified, bus_factor, bytes == sizes.front(), goals, rows.empty());
  }
  w.sync();
  if (w.root()) {
    std::printf("\n%s bandwidth at >= 64 MiB: ", one ? "algbw" : "busbw");
    if (goals.have_big) {
      std::printf("lowest paired ratio %.3f (goal >= 0.98: %s)\n", goals.min_big_ratio,
                  goals.min_big_ratio >= 0.98 ? "met" : "NOT met");
    } else {
      std::printf("no size measured (--max-bytes below 64 MiB)\n");
    }
    std::printf("latency at %s: paired ratio %.3f (goal <= 1.02: %s)%s\n", human_bytes(sizes.front()).c_str(),
                goals.small_latency_ratio, goals.small_latency_ratio <= 1.02 ? "met" : "NOT met",
                one ? "; one rank: the goals are for the multi-GPU run" : "");
  }
  std::string harness;
  if (nt && ev) {
    harness = run_harness(w, plain, sizes.front(), max_count, smallest_k, o.iters, rounds);
  }
  return std::string(
             "  \"sweep\": {\n    \"collective\": \"all_reduce\", \"type\": \"float32\", \"reduction\": \"sum\", "
             "\"in_place\": false,\n    \"method\": ") +
         (nt ? "\"nccl-tests\"" : "\"events\"") + ", \"events_also\": " + (nt && ev ? "true" : "false") +
         ", \"iters\": " + std::to_string(o.iters) + ", \"warmup_iters\": " + std::to_string(o.warmup_iters) +
         ", \"rank_reduction\": " + (nt ? "\"mean\"" : "\"max\"") +
         ",\n    \"bandwidth_metric\": " + (one ? "\"algbw\"" : "\"busbw\"") +
         ", \"busbw_factor\": " + num(bus_factor) + ", \"rounds\": " + std::to_string(rounds) +
         ", \"batch_ms\": " + num(o.batch_ms) + ", \"verify_max_bytes\": " + std::to_string(o.verify_max_bytes) +
         ",\n    \"min_bandwidth_ratio_64mib_up\": " + (goals.have_big ? num(goals.min_big_ratio) : "null") +
         ", \"latency_ratio_smallest\": " + num(goals.small_latency_ratio) + harness + ",\n    \"rows\": [\n" + rows +
         "\n    ]\n  }";
}

// --- symmetric windows --------------------------------------------------------------------------

// Runs @p fn(i) for every GPU i of this process: directly with one, else from one thread per GPU at
// once (what a collective of several communicators needs when it cannot be grouped). Returns each
// GPU's outcome: empty where fn returned, else the error's message after "not supported: " (a
// not_supported_error) or "error: " (any other).
template <class Fn>
std::vector<std::string> on_every_gpu(const world& w, Fn fn) {
  std::vector<std::string> errors(w.local.size());
  auto guarded = [&](std::size_t i) {
    try {
      fn(i);
    } catch (const cudrv::not_supported_error& e) {
      errors[i] = std::string("not supported: ") + e.what();
    } catch (const std::exception& e) {
      errors[i] = std::string("error: ") + e.what();
    }
  };
  if (w.local.size() == 1) {
    guarded(0);
    return errors;
  }
  std::vector<std::thread> threads;
  threads.reserve(w.local.size());
  for (std::size_t i = 0; i < w.local.size(); ++i) {
    threads.emplace_back(guarded, i);
  }
  for (auto& t : threads) {
    t.join();
  }
  return errors;
}

// The memory of the window mode: nccl::buffer memory, registered as symmetric windows or not.
struct nccl_memory {
  std::vector<cudrv::nccl::buffer<float>> send, recv;
  std::vector<cudrv::nccl::window> send_windows, recv_windows;  // deregistered before the memory is freed
  memory_set spans;
  nccl_memory() = default;
  nccl_memory(const nccl_memory&) = delete;
  nccl_memory& operator=(const nccl_memory&) = delete;
  ~nccl_memory() { deregister(nullptr); }
  // Deregisters every window (in one process from one thread per GPU, in case NCCL waits for the
  // other ranks in it).
  void deregister(const world* w) {
    if (w != nullptr && !send_windows.empty()) {
      (void)on_every_gpu(*w, [&](std::size_t i) {
        recv_windows[i].reset();
        send_windows[i].reset();
      });
    }
    recv_windows.clear();
    send_windows.clear();
  }
};

// Allocates @p count (+ @p guard) elements of nccl::buffer memory per GPU and, with @p windows,
// registers each buffer as a symmetric window. Returns why that cannot be done here (empty when
// done; the same verdict on every rank); throws on any other error.
std::string make_nccl_memory(world& w, nccl_memory& m, std::size_t count, std::size_t guard, bool windows) {
  std::string why;
  try {
    for (const auto& r : w.local) {
      m.send.emplace_back(r.dev, count);
      m.recv.emplace_back(r.dev, count + guard);
      m.spans.send.push_back(m.send.back().view());
      m.spans.recv.push_back(m.recv.back().view());
    }
  } catch (const cudrv::not_supported_error& e) {
    why = std::string("ncclMemAlloc is not supported: ") + e.what();
  }
  if (why.empty() && windows) {
    m.send_windows.resize(w.local.size());
    m.recv_windows.resize(w.local.size());
    // Every rank registers the same windows in the same order. In one process each GPU's thread does
    // its own: NCCL's registration waits for every rank, and a cudrv::nccl::window is made whole by
    // its constructor (inside a group NCCL would fill in the handle only at the group's end).
    const auto errors = on_every_gpu(w, [&](std::size_t i) {
      m.send_windows[i] =
          cudrv::nccl::window(w.local[i].comm, m.send[i], cudrv::nccl::window_flags::collective_symmetric);
      m.recv_windows[i] =
          cudrv::nccl::window(w.local[i].comm, m.recv[i], cudrv::nccl::window_flags::collective_symmetric);
    });
    for (std::size_t i = 0; i < errors.size() && why.empty(); ++i) {
      if (errors[i].rfind("error: ", 0) == 0) {
        throw std::runtime_error("window registration on rank " + std::to_string(w.local[i].rank) + ": " +
                                 errors[i].substr(7));
      }
      if (!errors[i].empty()) {
        why = "window registration is " + errors[i];
      } else if (!m.send_windows[i] || !m.recv_windows[i]) {
        why = "NCCL registered no window (symmetric memory needs CUDA peer-to-peer between all ranks, cuMem "
              "memory and NCCL_WIN_ENABLE=1)";
      }
    }
  }
  if (w.sum_all(static_cast<long long>(why.empty() ? 0 : 1)) != 0 && why.empty()) {
    why = "another rank could not register its windows (see its message)";
  }
  return why;
}

std::string run_window(world& w, const options& o, outcome& out) {
  const int rounds = o.rounds > 0 ? o.rounds : (o.quick ? 5 : 21);
  std::vector<std::size_t> sizes;
  for (std::size_t b = o.min_bytes; b <= o.max_bytes; b *= 2) {
    sizes.push_back(b / sizeof(float) * sizeof(float));
    if (b > (SIZE_MAX >> 1)) {
      break;
    }
  }
  const std::size_t max_count = sizes.back() / sizeof(float);
  const std::size_t guard = 16;
  std::vector<cudrv::device_buffer<float>> send, recv;
  memory_set plain;
  for (const auto& r : w.local) {
    send.emplace_back(r.dev, max_count);
    recv.emplace_back(r.dev, max_count + guard);
    plain.send.push_back(send.back().view());
    plain.recv.push_back(recv.back().view());
  }
  nccl_memory unregistered, windowed;
  std::string why = make_nccl_memory(w, unregistered, max_count, guard, false);
  if (why.empty()) {
    why = make_nccl_memory(w, windowed, max_count, guard, true);
  }
  if (!why.empty()) {
    if (w.root()) {
      std::printf("\n## all-reduce through symmetric windows: skipped: %s\n", why.c_str());
    }
    windowed.deregister(&w);
    return "  \"window\": {\"skipped\": " + quoted(why) + "}";
  }
  const std::size_t verify_count = std::min(max_count, o.verify_max_bytes / sizeof(float));
  const memory_set* kinds[3] = {&plain, &unregistered.spans, &windowed.spans};
  const char* names[3] = {"device_buffer", "nccl::buffer", "nccl::buffer + window"};
  for (const memory_set* m : kinds) {
    fill_inputs(w, m->send, verify_count);
    warm_up(w, *m, sizes, o.warmup_iters);
  }
  const bool one = w.nranks == 1;
  const double bus_factor = 2.0 * (w.nranks - 1) / w.nranks;
  const double metric_factor = one ? 1.0 : bus_factor;
  const char* metric = one ? "algbw" : "busbw";
  if (w.root()) {
    std::printf(
        "\n## all-reduce through symmetric windows: float sum, out of place, through cudrv, %d rank%s; %d "
        "rounds of nccl-tests' method (%d calls)\n\n"
        "| size | %s time | %s time | %s time | %s %s | %s %s | %s %s | window / plain | nccl::buffer / plain | "
        "checked |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
        w.nranks, one ? "" : "s", rounds, o.iters, names[0], names[1], names[2], names[0], metric, names[1], metric,
        names[2], metric);
  }
  std::string rows;
  double min_big_ratio = 0;
  bool have_big = false;
  std::vector<call_args> args;
  for (std::size_t bytes : sizes) {
    const std::size_t count = bytes / sizeof(float);
    int verified = -1;
    if (bytes <= o.verify_max_bytes) {
      long long wrong = 0;
      for (const memory_set* m : kinds) {
        wrong += verify_all_reduce(w, false, *m, count);
      }
      out.wrong += wrong;
      verified = wrong == 0 ? 1 : 0;
    }
    std::vector<double> t[3];
    const auto start = steady::now();
    for (int r = 0; another_round(w, r, rounds, start, o.max_seconds); ++r) {
      for (int k = 0; k < 3; ++k) {
        const int which = (k + r) % 3;
        run_shape shape;
        shape.calls = o.iters;
        t[which].push_back(w.mean_all(timed_run(w, false, *kinds[which], count, max_count, shape, args).host_us));
      }
    }
    const double win_ratio = paired(t[0], t[2]), mem_ratio = paired(t[0], t[1]);
    if (bytes >= (std::size_t{64} << 20)) {
      min_big_ratio = have_big ? std::min(min_big_ratio, win_ratio) : win_ratio;
      have_big = true;
    }
    if (w.root()) {
      std::printf("| %s | %.2f us | %.2f us | %.2f us | %.2f GB/s | %.2f GB/s | %.2f GB/s | %.3f | %.3f | %s |\n",
                  human_bytes(bytes).c_str(), bench::median(t[0]), bench::median(t[1]), bench::median(t[2]),
                  busbw_of(t[0], bytes, metric_factor), busbw_of(t[1], bytes, metric_factor),
                  busbw_of(t[2], bytes, metric_factor), win_ratio, mem_ratio,
                  verified < 0    ? "-"
                  : verified == 1 ? "ok"
                                  : "WRONG");
      std::fflush(stdout);
      rows += std::string(rows.empty() ? "" : ",\n") + "      {\"bytes\": " + std::to_string(bytes) +
              ", \"rounds\": " + std::to_string(t[0].size()) + ", \"plain\": {" + path_json(t[0], bytes, bus_factor) +
              "}, \"nccl_buffer\": {" + path_json(t[1], bytes, bus_factor) + "}, \"window\": {" +
              path_json(t[2], bytes, bus_factor) + "}, \"window_ratio\": " + num(win_ratio) +
              ", \"nccl_buffer_ratio\": " + num(mem_ratio) + ", \"verified\": " +
              (verified < 0    ? "null"
               : verified == 1 ? "true"
                               : "false") +
              "}";
    }
  }
  w.sync();
  if (w.root() && have_big) {
    std::printf("\nwindow against plain memory at >= 64 MiB (%s, paired): lowest ratio %.3f\n", metric, min_big_ratio);
  }
  windowed.deregister(&w);
  return std::string("  \"window\": {\n    \"method\": \"nccl-tests\", \"iters\": ") + std::to_string(o.iters) +
         ", \"rounds\": " + std::to_string(rounds) +
         ", \"flags\": \"collective_symmetric\", \"bandwidth_metric\": " + quoted(metric) +
         ", \"busbw_factor\": " + num(bus_factor) +
         ", \"min_window_ratio_64mib_up\": " + (have_big ? num(min_big_ratio) : "null") + ",\n    \"rows\": [\n" +
         rows + "\n    ]\n  }";
}

// --- host cost ----------------------------------------------------------------------------------

struct hc_case {
  std::string name;
  op o;
  bool raw;
  std::vector<double> ns;  // per operation, per round
  long long allocations = 0;
  long long calls = 0;
};

std::string run_host_cost(world& w, const options& o, outcome& out) {
  const int rounds = o.rounds > 0 ? o.rounds : (o.quick ? 7 : 41);
  const int bursts = o.quick ? 2 : 5;
  const int burst = 100;
  const std::size_t count = 2;  // 8 B per rank
  std::vector<cudrv::device_buffer<float>> send, recv;
  for (const auto& r : w.local) {
    send.emplace_back(r.dev, count * static_cast<std::size_t>(w.nranks));
    recv.emplace_back(r.dev, count * static_cast<std::size_t>(w.nranks));
  }
  std::vector<cudrv::device_span<float>> inputs;
  for (auto& b : send) {
    inputs.push_back(b.view());
  }
  fill_inputs(w, inputs, send[0].size());
  const op ops[] = {op::all_reduce, op::broadcast, op::reduce, op::all_gather, op::reduce_scatter, op::send_recv};
  std::vector<hc_case> cases;
  for (op x : ops) {
    cases.push_back({std::string("raw ") + op_name(x), x, true, {}, 0, 0});
    cases.push_back({std::string("cudrv ") + op_name(x), x, false, {}, 0, 0});
  }
  cases.push_back({"raw all_reduce (A/A copy)", op::all_reduce, true, {}, 0, 0});
  std::vector<std::vector<call_args>> args(cases.size());
  for (std::size_t c = 0; c < cases.size(); ++c) {
    for (std::size_t i = 0; i < w.local.size(); ++i) {
      args[c].push_back(args_for(cases[c].o, send[i], recv[i], count, w.nranks));
    }
  }
  // Warm-up: the first call of each kind sets NCCL's connections up.
  for (std::size_t c = 0; c < cases.size(); ++c) {
    for (int i = 0; i < burst; ++i) {
      issue(cases[c].o, cases[c].raw, w, args[c]);
    }
    w.sync();
  }
  // Each raw burst is timed right next to its cudrv burst (the A/A copy next to raw all_reduce), the
  // order alternating from burst to burst and the pairs rotating from round to round, so that drift
  // and the position in a pair cancel; the ratio is the median over every pair.
  const std::size_t pairs = cases.size() / 2;  // the last pair is raw all_reduce against its A/A copy
  std::vector<std::vector<double>> pair_ratios(pairs + 1);
  auto time_burst = [&](std::size_t c) {
    auto& hc = cases[c];
    w.barrier();
    const long long before = bench::heap_allocations.load();
    const auto t0 = steady::now();
    for (int i = 0; i < burst; ++i) {
      issue(hc.o, hc.raw, w, args[c]);
    }
    const double ns = std::chrono::duration<double, std::nano>(steady::now() - t0).count() / burst;
    hc.allocations += bench::heap_allocations.load() - before;
    hc.calls += burst;
    w.sync();
    hc.ns.push_back(ns);
    return ns;
  };
  for (int round = 0; round < rounds; ++round) {
    for (std::size_t k = 0; k <= pairs; ++k) {
      const std::size_t p = (k + static_cast<std::size_t>(round)) % (pairs + 1);
      // Pair p < pairs: (raw, cudrv) of one operation; pair == pairs: (raw all_reduce, its A/A copy).
      const std::size_t a = p < pairs ? 2 * p : 0;
      const std::size_t b = p < pairs ? 2 * p + 1 : cases.size() - 1;
      for (int burst_index = 0; burst_index < bursts; ++burst_index) {
        double ta = 0;
        double tb = 0;
        if ((burst_index + round) % 2 == 0) {
          ta = time_burst(a);
          tb = time_burst(b);
        } else {
          tb = time_burst(b);
          ta = time_burst(a);
        }
        pair_ratios[p].push_back(tb / ta);
      }
    }
    if (w.root()) {
      std::fprintf(stderr, "\rbench_nccl host-cost: round %d/%d", round + 1, rounds);
    }
  }
  for (auto& r : pair_ratios) {
    w.max_all(r);
  }
  if (w.root()) {
    std::fprintf(stderr, "\n");
  }
  for (auto& hc : cases) {
    w.max_all(hc.ns);
    hc.allocations = w.sum_all(hc.allocations);
    hc.calls = w.sum_all(hc.calls);
  }
  long long cudrv_allocations = 0, raw_allocations = 0;
  std::string rows;
  if (w.root()) {
    std::printf(
        "\n## host cost of enqueueing a collective (8 B per rank), %d rank%s%s; %d rounds x %d bursts of %d\n\n",
        w.nranks, w.nranks == 1 ? "" : "s", w.local.size() > 1 ? ", one operation = one call per GPU in one group" : "",
        rounds, bursts, burst);
    std::printf(
        "| operation | raw (median) | cudrv (median) | best raw | best cudrv | paired ratio | heap allocations per "
        "call, raw | cudrv |\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
  }
  for (std::size_t c = 0; c + 1 < cases.size(); c += 2) {
    const auto& raw = cases[c];
    const auto& cu = cases[c + 1];
    cudrv_allocations += cu.allocations;
    raw_allocations += raw.allocations;
    const double ratio = bench::median(pair_ratios[c / 2]);
    const double per_raw = static_cast<double>(raw.allocations) / static_cast<double>(raw.calls);
    const double per_cu = static_cast<double>(cu.allocations) / static_cast<double>(cu.calls);
    if (cu.allocations > raw.allocations) {
      out.extra_allocations += cu.allocations - raw.allocations;
    }
    if (w.root()) {
      std::printf("| %s | %.3f us | %.3f us | %.3f us | %.3f us | %.3f | %.4f | %.4f |\n", op_name(cu.o),
                  bench::median(raw.ns) / 1000, bench::median(cu.ns) / 1000,
                  *std::min_element(raw.ns.begin(), raw.ns.end()) / 1000,
                  *std::min_element(cu.ns.begin(), cu.ns.end()) / 1000, ratio, per_raw, per_cu);
      rows += std::string(rows.empty() ? "" : ",\n") + "      {\"operation\": " + quoted(op_name(cu.o)) +
              ", \"raw_ns\": " + num(bench::median(raw.ns)) + ", \"cudrv_ns\": " + num(bench::median(cu.ns)) +
              ", \"ratio\": " + num(ratio) + ", \"raw_allocations_per_call\": " + num(per_raw) +
              ", \"cudrv_allocations_per_call\": " + num(per_cu) + "}";
    }
  }
  const auto& aa = cases.back();
  const double aa_ratio = bench::median(pair_ratios[pairs]);
  double worst = 0;
  const char* worst_op = "";
  for (std::size_t c = 0; c + 1 < cases.size(); c += 2) {
    if (const double r = bench::median(pair_ratios[c / 2]); r > worst) {
      worst = r;
      worst_op = op_name(cases[c].o);
    }
  }
  if (w.root()) {
    std::printf("| all_reduce A/A (raw vs raw: the noise floor) | %.3f us | %.3f us | | | %.3f | | |\n",
                bench::median(cases[0].ns) / 1000, bench::median(aa.ns) / 1000, aa_ratio);
    std::printf("\nhost cost: highest paired ratio %.3f (%s; goal <= 1.02: %s)\n", worst, worst_op,
                worst <= 1.02 ? "met" : "NOT met");
    std::printf("heap allocations over every burst: cudrv %lld, raw %lld (cudrv adds %lld; goal 0 per call: %s)\n",
                cudrv_allocations, raw_allocations, out.extra_allocations,
                out.extra_allocations == 0 ? "met" : "NOT met");
  }
  w.sync();
  return "  \"host_cost\": {\n    \"bytes_per_rank\": " + std::to_string(count * sizeof(float)) +
         ", \"rounds\": " + std::to_string(rounds) + ", \"bursts\": " + std::to_string(bursts) +
         ", \"burst\": " + std::to_string(burst) + ", \"grouped\": " + (w.local.size() > 1 ? "true" : "false") +
         ",\n    \"aa_ratio\": " + num(aa_ratio) + ", \"max_ratio\": " + num(worst) +
         ", \"cudrv_allocations\": " + std::to_string(cudrv_allocations) +
         ", \"raw_allocations\": " + std::to_string(raw_allocations) + ",\n    \"rows\": [\n" + rows + "\n    ]\n  }";
}

// --- peer copies --------------------------------------------------------------------------------

std::string run_peer(const std::vector<cudrv::device>& devs, const options& o, outcome& out) {
  if (devs.size() < 2) {
    std::printf("\n## peer copies: skipped: needs 2 devices (%zu visible)\n", devs.size());
    return "  \"peer\": {\"skipped\": \"needs 2 devices\", \"devices\": " + std::to_string(devs.size()) + "}";
  }
  const int rounds = o.rounds > 0 ? o.rounds : (o.quick ? 5 : 15);
  const std::size_t small_bytes = 8;
  const std::size_t verify_bytes = std::min(o.peer_bytes, std::size_t{1} << 20);
  auto raw_peer =
      reinterpret_cast<PFN_cuMemcpyPeerAsync_v4000>(cudrv::driver::get_entry_point("cuMemcpyPeerAsync", 4000));
  struct per_device {
    cudrv::device dev;
    cudrv::context_ref ctx;
    cudrv::stream stream;
    cudrv::event start, stop;
    cudrv::device_buffer<float> src, dst;
  };
  std::vector<per_device> d;
  d.reserve(devs.size());
  const std::size_t n = o.peer_bytes / sizeof(float);
  for (const auto& dev : devs) {
    d.push_back({dev, dev.primary_context(), cudrv::stream(dev), cudrv::event(dev, cudrv::event_flags::timing),
                 cudrv::event(dev, cudrv::event_flags::timing), cudrv::device_buffer<float>(dev, n),
                 cudrv::device_buffer<float>(dev, n)});
    std::vector<float> h(verify_bytes / sizeof(float));
    for (std::size_t j = 0; j < h.size(); ++j) {
      h[j] = input_value(j, dev.ordinal());
    }
    cudrv::copy(d.back().src.view().first(h.size()), h, d.back().stream);
    d.back().stream.synchronize();
  }
  for (std::size_t a = 0; a < d.size(); ++a) {
    for (std::size_t b = 0; b < d.size(); ++b) {
      if (a != b && d[a].dev.can_access_peer(d[b].dev)) {
        d[a].dev.enable_peer_access(d[b].dev);
      }
    }
  }
  std::printf("\n## peer copies: %zu devices, every ordered pair, on the source device's stream; %d rounds\n\n",
              d.size(), rounds);
  std::printf("| src -> dst | peer access | raw bandwidth | cudrv bandwidth | bandwidth ratio | raw latency | "
              "cudrv latency | latency ratio | checked |\n|---|---|---:|---:|---:|---:|---:|---:|---|\n");
  std::string rows;
  long long cudrv_allocations = 0, cudrv_copies = 0;
  for (std::size_t a = 0; a < d.size(); ++a) {
    for (std::size_t b = 0; b < d.size(); ++b) {
      if (a == b) {
        continue;
      }
      auto& sa = d[a];
      auto& sb = d[b];
      const CUstream hs = sa.stream.native_handle();
      const CUcontext ca = sa.ctx.native_handle(), cb = sb.ctx.native_handle();
      auto copy_once = [&](bool raw, cudrv::device_span<float> dst, cudrv::device_span<const float> src) {
        if (raw) {
          bench::check(raw_peer(dst.data(), cb, src.data(), ca, src.size_bytes(), hs), "cuMemcpyPeerAsync");
        } else {
          cudrv::copy_peer(dst, sb.ctx, src, sa.ctx, sa.stream);
        }
      };
      auto batch = [&](bool raw, std::size_t bytes, int k) {
        const auto dst = sb.dst.view().first(bytes / sizeof(float));
        const cudrv::device_span<const float> src = sa.src.view().first(bytes / sizeof(float));
        sa.start.record(sa.stream);
        const long long before = bench::heap_allocations.load();
        for (int i = 0; i < k; ++i) {
          copy_once(raw, dst, src);
        }
        if (!raw) {
          cudrv_allocations += bench::heap_allocations.load() - before;
          cudrv_copies += k;
        }
        sa.stop.record(sa.stream);
        sa.stop.synchronize();
        return static_cast<double>(cudrv::elapsed_time(sa.start, sa.stop).count()) * 1000.0 / k;  // us per copy
      };
      // Each path's copy checked: the destination poisoned, then the source's pattern expected.
      bool ok = true;
      for (bool raw : {false, true}) {
        const std::size_t vn = verify_bytes / sizeof(float);
        cudrv::fill(sb.dst.view().first(vn), poison, sb.stream);
        sb.stream.synchronize();
        copy_once(raw, sb.dst.view().first(vn), sa.src.view().first(vn));
        sa.stream.synchronize();
        std::vector<float> h(vn);
        cudrv::copy(h, sb.dst.view().first(vn), sb.stream);
        sb.stream.synchronize();
        for (std::size_t j = 0; j < vn; ++j) {
          if (h[j] != input_value(j, sa.dev.ordinal())) {
            if (ok) {
              std::fprintf(stderr, "bench_nccl: %s peer copy %d -> %d, element %zu: %g, expected %g\n",
                           raw ? "raw" : "cudrv", sa.dev.ordinal(), sb.dev.ordinal(), j, static_cast<double>(h[j]),
                           static_cast<double>(input_value(j, sa.dev.ordinal())));
            }
            ok = false;
            ++out.wrong;
          }
        }
      }
      double med[2][2] = {}, ratio[2] = {};  // [size: big, small][path: cudrv, raw]
      int iters[2] = {};
      for (int s = 0; s < 2; ++s) {
        const std::size_t bytes = s == 0 ? o.peer_bytes : small_bytes;
        (void)batch(false, bytes, 3);
        (void)batch(true, bytes, 3);
        const int guess = batch_size(batch(true, bytes, 3), o.batch_ms / 4, 5000);
        const int k = batch_size(batch(true, bytes, guess), o.batch_ms, 5000);
        iters[s] = k;
        std::vector<double> tc, tr;
        for (int r = 0; r < rounds; ++r) {
          const bool raw_first = r % 2 == 1;
          for (bool raw : {raw_first, !raw_first}) {
            (raw ? tr : tc).push_back(batch(raw, bytes, k));
          }
        }
        med[s][0] = bench::median(tc);
        med[s][1] = bench::median(tr);
        ratio[s] = s == 0 ? paired(tr, tc) : paired(tc, tr);
      }
      const bool p2p = sa.dev.can_access_peer(sb.dev);
      const double bw_c = static_cast<double>(o.peer_bytes) / (med[0][0] * 1e-6) / 1e9;
      const double bw_r = static_cast<double>(o.peer_bytes) / (med[0][1] * 1e-6) / 1e9;
      std::printf("| %d -> %d | %s | %.1f GB/s | %.1f GB/s | %.3f | %.2f us | %.2f us | %.3f | %s |\n",
                  sa.dev.ordinal(), sb.dev.ordinal(), p2p ? "yes" : "no (staged)", bw_r, bw_c, ratio[0], med[1][1],
                  med[1][0], ratio[1], ok ? "ok" : "WRONG");
      std::fflush(stdout);
      rows += std::string(rows.empty() ? "" : ",\n") + "      {\"src\": " + std::to_string(sa.dev.ordinal()) +
              ", \"dst\": " + std::to_string(sb.dev.ordinal()) + ", \"peer_access\": " + (p2p ? "true" : "false") +
              ", \"bandwidth_iterations\": " + std::to_string(iters[0]) + ", \"cudrv_gbps\": " + num(bw_c) +
              ", \"raw_gbps\": " + num(bw_r) + ", \"bandwidth_ratio\": " + num(ratio[0]) +
              ", \"latency_iterations\": " + std::to_string(iters[1]) + ", \"cudrv_latency_us\": " + num(med[1][0]) +
              ", \"raw_latency_us\": " + num(med[1][1]) + ", \"latency_ratio\": " + num(ratio[1]) +
              ", \"verified\": " + (ok ? "true" : "false") + "}";
    }
  }
  for (auto& x : d) {
    x.stream.synchronize();
  }
  std::printf("\nheap allocations in %lld cudrv::copy_peer calls: %lld\n", cudrv_copies, cudrv_allocations);
  out.extra_allocations += cudrv_allocations;
  return "  \"peer\": {\n    \"bandwidth_bytes\": " + std::to_string(o.peer_bytes) +
         ", \"latency_bytes\": " + std::to_string(small_bytes) + ", \"rounds\": " + std::to_string(rounds) +
         ", \"cudrv_allocations\": " + std::to_string(cudrv_allocations) + ",\n    \"rows\": [\n" + rows +
         "\n    ]\n  }";
}

// --- main ---------------------------------------------------------------------------------------

// Ends every rank of an MPI run that is still going: the others may wait in a collective for this
// one. Nothing without MPI.
void abort_mpi_run([[maybe_unused]] int status) {
#ifdef CUDRV_BENCH_NCCL_MPI
  int started = 0, finished = 0, size = 1;
  if (MPI_Initialized(&started) == MPI_SUCCESS && started != 0 && MPI_Finalized(&finished) == MPI_SUCCESS &&
      finished == 0 && MPI_Comm_size(MPI_COMM_WORLD, &size) == MPI_SUCCESS && size > 1) {
    MPI_Abort(MPI_COMM_WORLD, status);
  }
#endif
}

// The checks every rank makes before it measures. Returns -1 when it can go on, else the exit status
// (under MPI the worst of every rank's, so all stop together). @p raw_version: the linked NCCL's.
int check_start(const options& o, bool use_mpi, int& raw_version) {
  int status = -1;
  std::string why;
  if (!cudrv::driver::available()) {
    why = "no usable CUDA driver: " + cudrv::driver::unavailable_reason();
    status = 2;
  } else if (cudrv::device_count() == 0) {
    why = "the CUDA driver sees no device";
    status = 3;
  } else if (needs_nccl(o) && !cudrv::nccl::available()) {
    why = "NCCL cannot be used: " + cudrv::nccl::unavailable_reason();
    status = 2;
  }
  if (status < 0 && needs_nccl(o)) {
    // The raw calls and cudrv's must reach one library, or a handle of one would be given to the other.
    ncheck(ncclGetVersion(&raw_version), "ncclGetVersion");
    // Every NCCL library in the process (the linked one, and the one cudrv opened if it is another
    // file): there must be one.
    const std::vector<std::string> libraries = loaded_nccl_libraries();
    if (libraries.size() > 1 || raw_version != cudrv::nccl::version()) {
      std::string list;
      for (const auto& l : libraries) {
        list += (list.empty() ? "" : ", ") + l;
      }
      why = "cudrv loaded NCCL " + version_string(cudrv::nccl::version()) + " from " +
            real_path(cudrv::nccl::library_path()) + " but this program is linked with NCCL " +
            version_string(raw_version) + " (NCCL libraries in the process: " + list +
            "): the raw and cudrv paths must use one library (unset CUDRV_LIBNCCL, or point it at the linked one)";
      status = 2;
    }
  }
#ifdef CUDRV_BENCH_NCCL_MPI
  if (use_mpi) {
    int worst = status < 0 ? 0 : status;
    cudrv::mpi::check(MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
    if (worst != 0 && status < 0) {
      status = worst;
      why = "another rank could not start (see its message)";
    }
  }
#else
  (void)use_mpi;
#endif
  if (status >= 0) {
    std::fprintf(stderr, "bench_nccl: %s\n", why.c_str());
  }
  return status;
}

// Makes the communicators (and the devices' list), then runs the modes.
int measure(world& w, std::vector<cudrv::device>& devs, const options& o, bool use_mpi, int raw_version) {
  w.mpi = use_mpi;
  if (use_mpi) {
#ifdef CUDRV_BENCH_NCCL_MPI
    const auto node = cudrv::mpi::node_local();
    cudrv::device dev = cudrv::mpi::select_device(node);
    dev.set_current();
    devs.push_back(dev);
    w.nranks = node.size;
    if (needs_nccl(o)) {
      const auto id = cudrv::mpi::broadcast_unique_id(MPI_COMM_WORLD);
      w.local.reserve(1);
      w.local.emplace_back(dev, node.rank, cudrv::nccl::communicator::init_rank(id, node.size, node.rank, dev));
    }
    w.infos = gather_infos(describe_device(dev, node.rank), node.size);
#endif
  } else {
    const int visible = cudrv::device_count();
    if (o.devices > visible) {
      std::fprintf(stderr, "bench_nccl: --devices %d, but the driver sees %d\n", o.devices, visible);
      return 1;
    }
    const int n = o.devices > 0 ? o.devices : visible;
    for (int i = 0; i < n; ++i) {
      devs.emplace_back(i);
      w.infos.push_back(describe_device(devs.back(), i));
    }
    devs.front().set_current();
    w.nranks = n;
    if (needs_nccl(o)) {
      auto comms = cudrv::nccl::communicator::init_all(devs);
      w.local.reserve(devs.size());
      for (int i = 0; i < n; ++i) {
        w.local.emplace_back(devs[static_cast<std::size_t>(i)], i, std::move(comms[static_cast<std::size_t>(i)]));
      }
    }
  }

  const int drv = cudrv::driver::version();
  const std::string driver = std::to_string(drv / 1000) + "." + std::to_string(drv % 1000 / 10);
  if (w.root()) {
    const std::string ranks =
        w.local.empty() ? std::string() : ", " + std::to_string(w.nranks) + (w.nranks == 1 ? " rank" : " ranks");
    std::printf("bench_nccl: %s%s over %zu device%s: %s (device %d%s), driver CUDA %s",
                use_mpi ? "MPI, one rank per GPU" : "single process", ranks.c_str(), w.infos.size(),
                w.infos.size() == 1 ? "" : "s", w.infos.front().name.c_str(), w.infos.front().ordinal,
                w.infos.size() > 1 ? " first" : "", driver.c_str());
    if (raw_version != 0) {
      std::printf(", NCCL %s (%s)", version_string(raw_version).c_str(), cudrv::nccl::library_path().c_str());
    }
    const char* nvls = std::getenv("NCCL_NVLS_ENABLE");
    std::printf("; NCCL_NVLS_ENABLE=%s\n", nvls != nullptr ? nvls : "(unset)");
  }

  // A raw NCCL program has its device current on the thread (cudaSetDevice): so does this one, for both
  // paths alike. Without a current context each NCCL call would switch to the communicator's device and
  // cudrv would switch back after it (cudrv never leaves a context current that the caller did not
  // make current), a cost of the caller's setup rather than of the call.
  std::optional<cudrv::context_guard> current;
  if (!w.local.empty()) {
    current.emplace(w.local.front().dev.primary_context());
  }
  outcome out;
  std::vector<std::string> sections;
  if (o.sweep) {
    sections.push_back(run_sweep(w, o, out));
  }
  if (o.host_cost) {
    sections.push_back(run_host_cost(w, o, out));
  }
  if (o.window) {
    sections.push_back(run_window(w, o, out));
  }
  if (o.peer) {
    if (use_mpi) {
      if (w.root()) {
        std::printf("\n## peer copies: left out under MPI (run `bench_nccl peer` in one process)\n");
      }
      sections.push_back("  \"peer\": {\"skipped\": \"runs in a single process, not under MPI\"}");
    } else {
      sections.push_back(run_peer(devs, o, out));
    }
  }

  long long json_failed = 0;
  if (w.root() && !o.json.empty()) {
    std::string doc = "{\n  \"benchmark\": \"bench_nccl\",\n  \"date\": " + quoted(utc_now()) +
                      ",\n  \"process_mode\": " + (use_mpi ? "\"mpi\"" : "\"single-process\"") +
                      ",\n  \"ranks\": " + std::to_string(w.local.empty() ? 0 : w.nranks) +
                      ",\n  \"device\": " + quoted(w.infos.front().name) +
                      ",\n  \"driver_cuda_version\": " + std::to_string(drv) + ", \"driver\": " + quoted(driver) +
                      ",\n  \"nccl_version\": " + std::to_string(raw_version) +
                      ", \"nccl\": " + quoted(raw_version != 0 ? version_string(raw_version) : "") +
                      ", \"nccl_library\": " + quoted(raw_version != 0 ? cudrv::nccl::library_path() : "") +
                      ",\n  \"quick\": " + (o.quick ? "true" : "false") + ",\n  \"devices\": [";
    for (std::size_t i = 0; i < w.infos.size(); ++i) {
      const auto& d = w.infos[i];
      doc += std::string(i == 0 ? "\n" : ",\n") + "    {\"rank\": " + std::to_string(d.rank) +
             ", \"host\": " + quoted(d.host) + ", \"ordinal\": " + std::to_string(d.ordinal) +
             ", \"name\": " + quoted(d.name) + ", \"pci_bus_id\": " + quoted(d.pci_bus_id) + "}";
    }
    doc += "\n  ]";
    for (const auto& s : sections) {
      doc += ",\n" + s;
    }
    doc += ",\n  \"wrong_elements\": " + std::to_string(out.wrong) + "\n}\n";
    if (std::FILE* f = std::fopen(o.json.c_str(), "w")) {
      const bool written = std::fwrite(doc.data(), 1, doc.size(), f) == doc.size();
      if (std::fclose(f) != 0 || !written) {
        std::fprintf(stderr, "bench_nccl: could not write %s\n", o.json.c_str());
        json_failed = 1;
      } else {
        std::printf("\nbench_nccl: wrote %s\n", o.json.c_str());
      }
    } else {
      std::fprintf(stderr, "bench_nccl: could not open %s: %s\n", o.json.c_str(), std::strerror(errno));
      json_failed = 1;
    }
  }
  // One verdict on every rank (each rank's exit status is mpirun's): the JSON of rank 0, the extra
  // allocations of every rank, the wrong elements (already summed over the ranks).
  json_failed = w.sum_all(json_failed);
  const long long extra = w.sum_all(out.extra_allocations);
  int rc = 0;
  if (out.wrong != 0) {
    rc = 5;
  } else if (extra != 0 || json_failed != 0) {
    rc = 4;
  }
  if (w.root()) {
    std::printf("bench_nccl: %s\n", rc == 0      ? "every result checked; no heap allocation through cudrv"
                                    : rc == 5    ? "WRONG results (see above)"
                                    : extra != 0 ? "heap allocations through cudrv (see above)"
                                                 : "the JSON document was not written");
  }
  return rc;
}

// Under MPI the world (and its communicators) outlives a failure until every rank is stopped, so
// that no communicator waits for ranks that are gone.
int run(const options& o, bool use_mpi) {
  int raw_version = 0;
  if (int status = check_start(o, use_mpi, raw_version); status >= 0) {
    return status;
  }
  std::vector<cudrv::device> devs;
  world w;
  try {
    return measure(w, devs, o, use_mpi, raw_version);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_nccl: %s\n", e.what());
    abort_mpi_run(4);
    return 4;
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything can load NCCL: NVLink SHARP multicast stays off (a value already set is kept).
  ::setenv("NCCL_NVLS_ENABLE", "0", 0);
  options o;
  if (int status = parse(argc, argv, o); status >= 0) {
    return status;
  }
  const int launched = launcher_world_size();
#ifdef CUDRV_BENCH_NCCL_MPI
  const bool use_mpi = !o.no_mpi && (o.force_mpi || launched > 0);
#else
  if (o.force_mpi || launched > 1) {
    std::fprintf(stderr,
                 "bench_nccl: %s, but this build has no MPI support (cudrv::mpi was not built: MPI not found)\n",
                 o.force_mpi ? "--mpi given" : "started by an MPI launcher with several ranks");
    return 1;
  }
  const bool use_mpi = false;
#endif
  if (use_mpi && o.devices != 0) {
    std::fprintf(stderr, "bench_nccl: --devices is for the single-process mode; under MPI each rank takes one GPU\n");
    return 1;
  }
  if (use_mpi && o.peer && !needs_nccl(o)) {
    std::fprintf(stderr,
                 "bench_nccl: the peer mode runs in a single process; run it without mpirun (or with --no-mpi)\n");
    return 1;
  }
#ifdef CUDRV_BENCH_NCCL_MPI
  std::optional<cudrv::mpi::environment> env;  // finalizes MPI after everything else
#endif
  try {
#ifdef CUDRV_BENCH_NCCL_MPI
    if (use_mpi) {
      env.emplace(argc, argv);
    }
#endif
    return run(o, use_mpi);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_nccl: %s\n", e.what());
    abort_mpi_run(4);
    return 4;
  }
}
