// cudrv-query: the entry point. The command line and the views are in cli.cpp; see
// docs/cudrv-query.md for the manual.
#include <unistd.h>

#include <exception>
#include <iostream>

#include "query.hpp"

int main(int argc, char** argv) {
  try {
    return cudrv_query::run(argc, argv, std::cout, std::cerr, isatty(STDOUT_FILENO) != 0);
  } catch (const std::exception& e) {
    std::cerr << "cudrv-query: error: " << e.what() << '\n';
    return cudrv_query::exit_cuda_error;
  } catch (...) {
    std::cerr << "cudrv-query: unknown error\n";
    return cudrv_query::exit_cuda_error;
  }
}
