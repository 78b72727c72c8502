// The Catch2 main of cudrv_mpi_tests, run under mpiexec: every rank starts MPI through
// cudrv::mpi::environment and runs the same test cases in the same order (declaration order), so the
// collective calls in them match up across ranks.
//
// Each rank writes Catch's report to a file of its own; at the end the ranks add up their failures
// (MPI_Allreduce), rank 0 prints its report and every other rank prints its own only when it failed,
// one after the other. Every rank exits 1 when any rank failed, so mpiexec and ctest fail too.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cudrv/mpi.hpp>

#include <unistd.h>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

int main(int argc, char* argv[]) {
  try {
    cudrv::mpi::environment env(argc, argv);
    int rank = 0;
    int size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    const std::filesystem::path report =
        std::filesystem::temp_directory_path() / ("cudrv_mpi_tests." + std::to_string(::getpid()) + ".txt");
    std::string report_arg = report.string();
    // Catch's report goes to a file, without colour codes (the option's name differs in Catch2 v3).
    std::string out_flag = "--out";
#if CATCH_VERSION_MAJOR >= 3
    std::string colour_flag = "--colour-mode";
    std::string colour_value = "none";
#else
    std::string colour_flag = "--use-colour";
    std::string colour_value = "no";
#endif
    std::vector<char*> args(argv, argv + argc);
    for (std::string* extra : {&out_flag, &report_arg, &colour_flag, &colour_value}) {
      args.push_back(extra->data());
    }

    Catch::Session session;
    int failed = session.applyCommandLine(static_cast<int>(args.size()), args.data()) != 0 ? 1 : 0;
    if (failed == 0) {
      failed = session.run() != 0 ? 1 : 0;
    }
    int ranks_failed = 0;
    MPI_Allreduce(&failed, &ranks_failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);

    std::stringstream text;
    {
      std::ifstream in(report);
      text << in.rdbuf();
    }
    std::error_code ignored;
    std::filesystem::remove(report, ignored);
    for (int r = 0; r < size; ++r) {
      MPI_Barrier(MPI_COMM_WORLD);
      if (r == rank && (rank == 0 || failed != 0)) {
        std::cout << "===== rank " << rank << " of " << size << (failed != 0 ? ": FAILED" : ": passed") << " =====\n"
                  << text.str() << std::flush;
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
      std::cout << "cudrv_mpi_tests: " << ranks_failed << " of " << size << " ranks failed\n" << std::flush;
    }
    return ranks_failed != 0 ? 1 : 0;
  } catch (const std::exception& e) {
    std::cerr << "cudrv_mpi_tests: " << e.what() << '\n';
    // A rank that cannot go on must not leave the others waiting in a collective.
    int initialized = 0;
    int finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized != 0 && finalized == 0) {
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return 1;
  }
}
