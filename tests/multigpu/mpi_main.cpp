// The main of cudrv_nccl_mpi_tests: Catch2 on every rank of an MPI job (mpirun -np N, one rank per GPU).
//
//   1. NCCL_NVLS_ENABLE=0 is set before NCCL is touched (unless already set): no NVLink SHARP multicast.
//   2. MPI is started (cudrv::mpi::environment) and what can run is decided collectively
//      (mpi_support.hpp), with the test seed of rank 0 sent to every rank.
//   3. Every rank runs the same Catch session with the same arguments, so the test cases and their
//      collectives come in the same order everywhere. Rank 0 reports to stdout; the other ranks report
//      to a file of their own, shown by rank 0 after the run for each rank that failed (one report
//      instead of N interleaved ones). Lines the cases print themselves carry "[rank r/n]".
//   4. A watchdog (watchdog.hpp) ends a rank that hangs (exit code 124) with a message naming what hung;
//      mpirun then ends the job.
//   5. Pass or fail is combined over the ranks (MPI_Allreduce), so every rank, and mpirun, returns the
//      same status: 0 when every rank passed, 1 otherwise.
//
// CUDRV_TEST_SEED fixes the seed (as in the other suites); CUDRV_TEST_TIMEOUT_SCALE scales the watchdog.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "mpi_support.hpp"
#include "watchdog.hpp"

namespace mg = cudrv::test::multigpu;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

bool names_output(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (a == "-o" || a == "--out" || a.rfind("--out=", 0) == 0) {
      return true;
    }
  }
  return false;
}

// Rank 0 prints the reports of the ranks that failed, in rank order.
void show_failed_reports(bool failed, const std::string& report) {
  const mg::mpi_world& w = mg::world();
  const std::string mine = failed && w.rank != 0 ? report : std::string();
  int length = static_cast<int>(mine.size());
  int flag = failed ? 1 : 0;
  std::vector<int> lengths(static_cast<std::size_t>(w.size));
  std::vector<int> flags(static_cast<std::size_t>(w.size));
  cudrv::mpi::check(MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Gather");
  cudrv::mpi::check(MPI_Gather(&flag, 1, MPI_INT, flags.data(), 1, MPI_INT, 0, MPI_COMM_WORLD), "MPI_Gather");
  std::vector<int> offsets(static_cast<std::size_t>(w.size), 0);
  int total = 0;
  for (int r = 0; r < w.size; ++r) {
    offsets[static_cast<std::size_t>(r)] = total;
    total += lengths[static_cast<std::size_t>(r)];
  }
  std::vector<char> all(static_cast<std::size_t>(total) + 1);
  cudrv::mpi::check(MPI_Gatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, 0,
                                MPI_COMM_WORLD),
                    "MPI_Gatherv");
  if (w.rank != 0) {
    return;
  }
  std::string failed_ranks;
  for (int r = 0; r < w.size; ++r) {
    if (flags[static_cast<std::size_t>(r)] != 0) {
      failed_ranks += (failed_ranks.empty() ? "" : ", ") + std::to_string(r);
    }
  }
  for (int r = 1; r < w.size; ++r) {
    const auto ur = static_cast<std::size_t>(r);
    if (flags[ur] != 0) {
      std::cout << "\n==== Catch report of rank " << r << " (failed) ====\n"
                << std::string(all.data() + offsets[ur], static_cast<std::size_t>(lengths[ur])) << "==== end of rank "
                << r << " ====\n";
    }
  }
  std::cout << "cudrv_nccl_mpi_tests: " << w.size << " ranks; "
            << (failed_ranks.empty() ? "every rank passed" : "failed on rank(s) " + failed_ranks) << std::endl;
}

}  // namespace

int main(int argc, char* argv[]) {
  ::setenv("NCCL_NVLS_ENABLE", "0", 0);  // before the first NCCL call; keeps a value already set
  cudrv::mpi::environment env(argc, argv);
  mg::mpi_world& w = mg::world();
  w.init();
  mg::watchdog::instance().set_prefix("[rank " + std::to_string(w.rank) + "/" + std::to_string(w.size) + "] ");
  if (w.rank == 0) {
    std::ostringstream line;
    line << "cudrv_nccl_mpi_tests: " << w.size << " ranks on " << w.node.nodes << " node(s), " << w.node.local_size
         << " on this node with " << w.device_count << " device(s); seed " << w.seed << " (CUDRV_TEST_SEED=" << w.seed
         << " replays)";
    if (w.gpu_ok) {
      line << "; NCCL " << cudrv::nccl::version() << " (" << cudrv::nccl::library_path() << ")";
    }
    std::cout << line.str() << std::endl;
  }

  std::vector<std::string> args(argv, argv + argc);
  // No colour codes: mpirun hands rank 0 a terminal, ctest's log is not one (the option's name
  // differs in Catch2 v3).
#if CATCH_VERSION_MAJOR >= 3
  args.insert(args.begin() + 1, {"--colour-mode", "none"});
#else
  args.insert(args.begin() + 1, {"--use-colour", "no"});
#endif
  std::string report;
  if (w.rank != 0 && !names_output(args)) {
    report = (std::filesystem::temp_directory_path() /
              ("cudrv_nccl_mpi_tests." + std::to_string(::getpid()) + ".rank" + std::to_string(w.rank) + ".txt"))
                 .string();
    args.emplace_back("--out");
    args.push_back(report);
  }
  std::vector<char*> cargs;
  for (std::string& a : args) {
    cargs.push_back(a.data());
  }
  cargs.push_back(nullptr);

  int rc = 0;
  {
    mg::watchdog_scope whole("the whole test run", std::chrono::seconds(840));
    try {
      Catch::Session session;
      rc = session.run(static_cast<int>(cargs.size()) - 1, cargs.data());
    } catch (const std::exception& e) {
      mg::say(std::string("the test session failed: ") + e.what());
      rc = 1;
    }
    mg::watchdog_scope teardown("destroying the shared communicator", std::chrono::seconds(60));
    w.release();
  }

  const int failed = rc != 0 ? 1 : 0;
  int any_failed = 0;
  cudrv::mpi::check(MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce",
                    "combining the ranks' results");
  show_failed_reports(failed != 0, report.empty() ? std::string() : read_file(report));
  if (!report.empty()) {
    std::error_code ignored;
    std::filesystem::remove(report, ignored);
  }
  return any_failed;
}
