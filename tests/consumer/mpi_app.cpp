// A user of cudrv's optional MPI component: compiles <cudrv/mpi.hpp> and links cudrv::mpi (and so MPI).
// It starts no MPI job: it asks what needs no running MPI and exits 0.
#include <cudrv/mpi.hpp>

#include <cstdio>

int main() {
  const int ordinal = cudrv::mpi::device_ordinal(1, 2, 2);
  std::printf("cudrv consumer mpi: device_ordinal %d, gpu_aware %s\n", ordinal,
              cudrv::mpi::to_string(cudrv::mpi::gpu_aware()));
  return 0;
}
