// The MPI helper (<cudrv/mpi.hpp>), run under mpiexec on one node (tests/mpi/CMakeLists.txt):
//   untagged, [driverless]  2 ranks, CUDRV_LIBCUDA naming no library
//   [fake-driver]           2 ranks, the fake driver's two devices (CUDRV_LIBCUDA)
//   [fake-driver][np3]      3 ranks, the fake driver's two devices
//   [no-nccl]               2 ranks, CUDRV_LIBNCCL naming no library
// Every rank runs every case of its run in the same order: a case that makes a collective call makes
// it on every rank, and a case that expects an error expects it on every rank.
#include <catch2/catch.hpp>

#include <cudrv/mpi.hpp>

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <complex>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "support/scratch.hpp"

namespace {

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int world_size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

// Every rank's value, in rank order.
std::vector<int> all_gather(int value, MPI_Comm comm = MPI_COMM_WORLD) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  std::vector<int> all(static_cast<std::size_t>(size));
  MPI_Allgather(&value, 1, MPI_INT, all.data(), 1, MPI_INT, comm);
  return all;
}

using scoped_env = cudrv::test::env_guard;  // sets or unsets a variable for the scope

// The launcher variables, all unset for the scope.
struct no_launcher_variables {
  scoped_env ompi{"OMPI_COMM_WORLD_LOCAL_RANK", std::nullopt};
  scoped_env mpich{"MPI_LOCALRANKID", std::nullopt};
  scoped_env mvapich{"MV2_COMM_WORLD_LOCAL_RANK", std::nullopt};
};

// A duplicate of MPI_COMM_WORLD that returns errors, freed at the end of the scope.
struct returning_comm {
  MPI_Comm comm = MPI_COMM_NULL;
  returning_comm() {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  }
  returning_comm(const returning_comm&) = delete;
  returning_comm& operator=(const returning_comm&) = delete;
  ~returning_comm() { MPI_Comm_free(&comm); }
};

bool world_errhandler_is_fatal() {
  MPI_Errhandler h = MPI_ERRHANDLER_NULL;
  MPI_Comm_get_errhandler(MPI_COMM_WORLD, &h);
  const bool fatal = h == MPI_ERRORS_ARE_FATAL;
  MPI_Errhandler_free(&h);
  return fatal;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

// --- environment -----------------------------------------------------------------------------------

TEST_CASE("environment: made when MPI is running, it only reads the thread level", "[mpi][environment]") {
  int provided = -1;
  REQUIRE(MPI_Query_thread(&provided) == MPI_SUCCESS);
  {
    cudrv::mpi::environment env(MPI_THREAD_SINGLE);
    CHECK_FALSE(env.started_mpi());
    CHECK(env.thread_level() == provided);
  }
  int argc = 1;
  char name[] = "cudrv_mpi_tests";
  char* args[] = {name, nullptr};
  char** argv = args;
  {
    cudrv::mpi::environment env(argc, argv);  // MPI_THREAD_FUNNELED, which the test main asked for
    CHECK_FALSE(env.started_mpi());
    CHECK(env.thread_level() == provided);
    CHECK(env.thread_level() >= MPI_THREAD_FUNNELED);
  }
  // Destroying an environment that did not start MPI leaves it running.
  int finalized = 1;
  MPI_Finalized(&finalized);
  CHECK(finalized == 0);
  if (provided < MPI_THREAD_MULTIPLE) {
    try {
      cudrv::mpi::environment env(MPI_THREAD_MULTIPLE);
      FAIL("an environment asking for more thread support than MPI provides was made");
    } catch (const cudrv::mpi_error& e) {
      CHECK(e.source() == cudrv::error_source::mpi);
      CHECK(contains(e.what(), "MPI_THREAD_MULTIPLE"));
    }
  }
}

// --- launcher_local_rank ---------------------------------------------------------------------------

TEST_CASE("launcher_local_rank: reads the launchers' variables in order", "[mpi][launcher]") {
  no_launcher_variables none;
  CHECK_FALSE(cudrv::mpi::launcher_local_rank().has_value());
  {
    scoped_env v("OMPI_COMM_WORLD_LOCAL_RANK", "3");
    CHECK(cudrv::mpi::launcher_local_rank() == 3);
  }
  {
    scoped_env v("OMPI_COMM_WORLD_LOCAL_RANK", "0");
    CHECK(cudrv::mpi::launcher_local_rank() == 0);
  }
  for (const char* bad : {"", "abc", "-1", "+1", " 1", "1 ", "12x", "1.5", "99999999999", "2147483648"}) {
    INFO("OMPI_COMM_WORLD_LOCAL_RANK='" << bad << "'");
    scoped_env v("OMPI_COMM_WORLD_LOCAL_RANK", bad);
    CHECK_FALSE(cudrv::mpi::launcher_local_rank().has_value());
  }
  {
    scoped_env v("OMPI_COMM_WORLD_LOCAL_RANK", "2147483647");
    CHECK(cudrv::mpi::launcher_local_rank() == 2147483647);
  }
  {
    scoped_env v("MV2_COMM_WORLD_LOCAL_RANK", "5");
    CHECK(cudrv::mpi::launcher_local_rank() == 5);
    scoped_env w("MPI_LOCALRANKID", "2");
    CHECK(cudrv::mpi::launcher_local_rank() == 2);  // MPICH's before MVAPICH2's
    scoped_env x("OMPI_COMM_WORLD_LOCAL_RANK", "1");
    CHECK(cudrv::mpi::launcher_local_rank() == 1);  // Open MPI's first
  }
  {
    scoped_env v("OMPI_COMM_WORLD_LOCAL_RANK", "garbage");
    scoped_env w("MPI_LOCALRANKID", "4");
    CHECK(cudrv::mpi::launcher_local_rank() == 4);  // a variable that holds no rank is passed over
  }
  CHECK_FALSE(cudrv::mpi::launcher_local_rank().has_value());
}

// --- node_local --------------------------------------------------------------------------------------

TEST_CASE("node_local: two ranks on one node", "[mpi][node]") {
  REQUIRE(world_size() == 2);
  REQUIRE(world_errhandler_is_fatal());
  const cudrv::mpi::node_info node = cudrv::mpi::node_local();
  CHECK(node.rank == world_rank());
  CHECK(node.size == 2);
  CHECK(node.local_size == 2);
  CHECK(node.nodes == 1);
  CHECK(node.node == 0);
  const std::vector<int> locals = all_gather(node.local_rank);
  CHECK(std::set<int>(locals.begin(), locals.end()) == std::set<int>{0, 1});
  CHECK(node.local_rank == node.rank);  // one node: ordered by rank
#ifdef OMPI_MAJOR_VERSION
  // Open MPI's mpiexec sets its variable, and node_local compared it.
  REQUIRE(std::getenv("OMPI_COMM_WORLD_LOCAL_RANK") != nullptr);
  CHECK(node.checked_by == "OMPI_COMM_WORLD_LOCAL_RANK");
#else
  CHECK(node.checked_by.empty() == !cudrv::mpi::launcher_local_rank().has_value());
#endif
  // The helper put MPI_COMM_WORLD's handler back.
  CHECK(world_errhandler_is_fatal());
}

TEST_CASE("node_local: a communicator congruent with MPI_COMM_WORLD is checked too", "[mpi][node]") {
  returning_comm dup;
  const cudrv::mpi::node_info node = cudrv::mpi::node_local(dup.comm);
  CHECK(node.local_size == world_size());
  CHECK(node.checked_by.empty() == !cudrv::mpi::launcher_local_rank().has_value());
  // A communicator that returned errors still does.
  MPI_Errhandler h = MPI_ERRHANDLER_NULL;
  MPI_Comm_get_errhandler(dup.comm, &h);
  CHECK(h == MPI_ERRORS_RETURN);
  MPI_Errhandler_free(&h);
}

TEST_CASE("node_local: a communicator of one rank each", "[mpi][node]") {
  MPI_Comm alone = MPI_COMM_NULL;
  REQUIRE(MPI_Comm_split(MPI_COMM_WORLD, world_rank(), 0, &alone) == MPI_SUCCESS);
  const cudrv::mpi::node_info node = cudrv::mpi::node_local(alone);
  CHECK(node.rank == 0);
  CHECK(node.size == 1);
  CHECK(node.local_rank == 0);
  CHECK(node.local_size == 1);
  CHECK(node.node == 0);
  CHECK(node.nodes == 1);
  CHECK(node.checked_by.empty());  // not MPI_COMM_WORLD: the launcher's variable is not compared
  {
    // Nor does a wrong variable matter there.
    scoped_env lie("OMPI_COMM_WORLD_LOCAL_RANK", "9");
    CHECK_NOTHROW(cudrv::mpi::node_local(alone));
  }
  MPI_Comm_free(&alone);
}

TEST_CASE("node_local: MPI_COMM_NULL is refused", "[mpi][node]") {
  CHECK_THROWS_AS(cudrv::mpi::node_local(MPI_COMM_NULL), cudrv::invalid_argument_error);
}

TEST_CASE("node_local: a launcher variable that disagrees makes every rank throw", "[mpi][node]") {
  REQUIRE(world_size() == 2);
  const int rank = world_rank();
  SECTION("one rank's variable is wrong") {
    std::optional<std::string> value;
    if (rank == 0) {
      value = "7";
    } else if (const char* current = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK")) {
      value = current;
    }
    scoped_env lie("OMPI_COMM_WORLD_LOCAL_RANK", value);
    try {
      (void)cudrv::mpi::node_local();
      FAIL("node_local accepted a launcher variable that disagrees with MPI");
    } catch (const cudrv::error& e) {
      INFO(e.what());
      CHECK(e.source() == cudrv::error_source::mpi);
      CHECK(e.api() == "cudrv::mpi::node_local");
      if (rank == 0) {
        CHECK(contains(e.what(), "OMPI_COMM_WORLD_LOCAL_RANK=7"));
        CHECK(contains(e.what(), "local rank 0 of 2"));
      } else {
        CHECK(contains(e.what(), "on 1 of 2 ranks"));
      }
    }
  }
  SECTION("both ranks' variables are swapped") {
    scoped_env lie("OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(1 - rank));
    try {
      (void)cudrv::mpi::node_local();
      FAIL("node_local accepted a launcher variable that disagrees with MPI");
    } catch (const cudrv::error& e) {
      INFO(e.what());
      CHECK(e.source() == cudrv::error_source::mpi);
      CHECK(contains(e.what(), "OMPI_COMM_WORLD_LOCAL_RANK=" + std::to_string(1 - rank)));
      CHECK(contains(e.what(), "local rank " + std::to_string(rank) + " of 2"));
    }
  }
  SECTION("MPICH's variable, with Open MPI's unset") {
    no_launcher_variables none;
    scoped_env lie("MPI_LOCALRANKID", std::to_string(1 - rank));
    try {
      (void)cudrv::mpi::node_local();
      FAIL("node_local accepted a launcher variable that disagrees with MPI");
    } catch (const cudrv::error& e) {
      INFO(e.what());
      CHECK(contains(e.what(), "MPI_LOCALRANKID=" + std::to_string(1 - rank)));
    }
  }
  // Without any variable nothing is compared.
  no_launcher_variables none;
  const cudrv::mpi::node_info node = cudrv::mpi::node_local();
  CHECK(node.checked_by.empty());
  CHECK(world_errhandler_is_fatal());
}

// --- device_ordinal and select_device ----------------------------------------------------------------

TEST_CASE("device_ordinal: exclusive and shared", "[mpi][device]") {
  using cudrv::mpi::device_ordinal;
  using cudrv::mpi::device_policy;
  CHECK(device_ordinal(0, 1, 1) == 0);
  CHECK(device_ordinal(3, 8, 8) == 3);
  CHECK(device_ordinal(1, 2, 8, device_policy::exclusive) == 1);
  CHECK(device_ordinal(7, 8, 8, device_policy::exclusive) == 7);
  CHECK(device_ordinal(0, 4, 2, device_policy::shared) == 0);
  CHECK(device_ordinal(1, 4, 2, device_policy::shared) == 1);
  CHECK(device_ordinal(2, 4, 2, device_policy::shared) == 0);
  CHECK(device_ordinal(3, 4, 2, device_policy::shared) == 1);
  CHECK(device_ordinal(5, 6, 1, device_policy::shared) == 0);
  CHECK(device_ordinal(2, 3, 8, device_policy::shared) == 2);
}

TEST_CASE("device_ordinal: refusals", "[mpi][device]") {
  using cudrv::mpi::device_ordinal;
  using cudrv::mpi::device_policy;
  try {
    (void)device_ordinal(0, 3, 2);
    FAIL("3 ranks were given 2 devices exclusively");
  } catch (const cudrv::invalid_argument_error& e) {
    INFO(e.what());
    CHECK(e.api() == "cudrv::mpi::device_ordinal");
    CHECK(contains(e.what(), "3 ranks share this node"));
    CHECK(contains(e.what(), "sees 2 devices"));
    CHECK(contains(e.what(), "ppr:2:node"));
    CHECK(contains(e.what(), "device_policy::shared"));
  }
  CHECK_THROWS_AS(device_ordinal(0, 9, 8, device_policy::exclusive), cudrv::invalid_argument_error);
  for (auto policy : {device_policy::exclusive, device_policy::shared}) {
    CHECK_THROWS_AS(device_ordinal(2, 2, 8, policy), cudrv::invalid_argument_error);
    CHECK_THROWS_AS(device_ordinal(-1, 2, 8, policy), cudrv::invalid_argument_error);
    CHECK_THROWS_AS(device_ordinal(0, 0, 8, policy), cudrv::invalid_argument_error);
    try {
      (void)device_ordinal(0, 1, 0, policy);
      FAIL("a node without devices was given one");
    } catch (const cudrv::invalid_argument_error& e) {
      INFO(e.what());
      CHECK(contains(e.what(), "0 devices"));
    }
    CHECK_THROWS_AS(device_ordinal(0, 1, -1, policy), cudrv::invalid_argument_error);
  }
  try {
    (void)device_ordinal(4, 2, 8);
    FAIL("a local rank outside the node was accepted");
  } catch (const cudrv::invalid_argument_error& e) {
    INFO(e.what());
    CHECK(contains(e.what(), "local rank 4"));
    CHECK(contains(e.what(), "[0, 2)"));
  }
}

TEST_CASE("select_device: without a driver", "[mpi][device][driverless]") {
  // The test's registration names a libcuda that does not exist (CUDRV_LIBCUDA).
  const cudrv::mpi::node_info node = cudrv::mpi::node_local();
  CHECK_THROWS_AS(cudrv::mpi::select_device(node), cudrv::driver_unavailable_error);
  CHECK_THROWS_AS(cudrv::mpi::select_device(node, cudrv::mpi::device_policy::shared), cudrv::driver_unavailable_error);
}

namespace {

// A counter of the fake driver (tests/fake_driver/fake_cuda.cpp), loaded through CUDRV_LIBCUDA.
long long fake_counter(const char* name) {
  const char* path = std::getenv("CUDRV_LIBCUDA");
  REQUIRE(path != nullptr);
  void* lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(lib != nullptr);
  auto fn = reinterpret_cast<long long (*)(const char*)>(dlsym(lib, "fake_cuda_counter"));
  REQUIRE(fn != nullptr);
  const long long value = fn(name);
  dlclose(lib);
  return value;
}

}  // namespace

TEST_CASE("select_device: one device per rank, no context made", "[mpi][device][fake-driver]") {
  REQUIRE(world_size() == 2);
  REQUIRE(cudrv::device_count() == 2);  // the fake driver's
  const cudrv::mpi::node_info node = cudrv::mpi::node_local();
  const cudrv::device dev = cudrv::mpi::select_device(node);
  CHECK(dev.ordinal() == node.local_rank);
  const std::vector<int> ordinals = all_gather(dev.ordinal());
  CHECK(ordinals[0] != ordinals[1]);
  CHECK(cudrv::mpi::select_device(node, cudrv::mpi::device_policy::shared).ordinal() == node.local_rank);
  CHECK(fake_counter("contexts_created") == 0);
  CHECK(fake_counter("primary_retain:0") == 0);
  CHECK(fake_counter("primary_retain:1") == 0);
  CHECK(fake_counter("made_current:0") == 0);
  CHECK(fake_counter("made_current:1") == 0);
}

TEST_CASE("select_device: three ranks, two devices", "[mpi][device][fake-driver][np3]") {
  REQUIRE(world_size() == 3);
  REQUIRE(cudrv::device_count() == 2);
  const cudrv::mpi::node_info node = cudrv::mpi::node_local();
  REQUIRE(node.local_size == 3);
  try {
    (void)cudrv::mpi::select_device(node);
    FAIL("3 ranks were given 2 devices exclusively");
  } catch (const cudrv::invalid_argument_error& e) {
    INFO(e.what());
    CHECK(contains(e.what(), "3 ranks share this node but the driver sees 2 devices"));
  }
  const cudrv::device dev = cudrv::mpi::select_device(node, cudrv::mpi::device_policy::shared);
  CHECK(dev.ordinal() == node.local_rank % 2);
  CHECK(all_gather(dev.ordinal()) == std::vector<int>{0, 1, 0});
  CHECK(fake_counter("contexts_created") == 0);
}

// --- broadcast_unique_id -------------------------------------------------------------------------------
// Only where cudrv was built with its NCCL layer (CUDRV_TEST_NCCL, set by tests/mpi/CMakeLists.txt).
#if CUDRV_TEST_NCCL

TEST_CASE("broadcast_unique_id: every rank gets the root's id", "[mpi][nccl]") {
  // NCCL's ncclGetUniqueId needs neither a GPU nor a driver, only the library.
  if (!cudrv::nccl::available()) {
    WARN("NCCL is not available, the unique id is not made: " << cudrv::nccl::unavailable_reason());
    return;  // the same on every rank of this machine
  }
  const int rank = world_rank();
  const int size = world_size();
  const auto gather = [&](const cudrv::nccl::unique_id& id) {
    std::vector<char> all(id.bytes.size() * static_cast<std::size_t>(size));
    MPI_Allgather(id.bytes.data(), static_cast<int>(id.bytes.size()), MPI_BYTE, all.data(),
                  static_cast<int>(id.bytes.size()), MPI_BYTE, MPI_COMM_WORLD);
    return all;
  };
  const cudrv::nccl::unique_id first = cudrv::mpi::broadcast_unique_id();
  CHECK(first != cudrv::nccl::unique_id{});
  const std::vector<char> all = gather(first);
  for (int r = 0; r < size; ++r) {
    CHECK(std::equal(first.bytes.begin(), first.bytes.end(),
                     all.begin() + r * static_cast<std::ptrdiff_t>(first.bytes.size())));
  }
  const cudrv::nccl::unique_id second = cudrv::mpi::broadcast_unique_id(MPI_COMM_WORLD, size - 1);
  CHECK(second != first);
  const std::vector<char> all_second = gather(second);
  for (int r = 0; r < size; ++r) {
    CHECK(std::equal(second.bytes.begin(), second.bytes.end(),
                     all_second.begin() + r * static_cast<std::ptrdiff_t>(second.bytes.size())));
  }
  (void)rank;
  CHECK(world_errhandler_is_fatal());
}

TEST_CASE("broadcast_unique_id: a root that is not a rank, a null communicator", "[mpi][nccl]") {
  CHECK_THROWS_AS(cudrv::mpi::broadcast_unique_id(MPI_COMM_WORLD, world_size()), cudrv::invalid_argument_error);
  CHECK_THROWS_AS(cudrv::mpi::broadcast_unique_id(MPI_COMM_WORLD, -1), cudrv::invalid_argument_error);
  CHECK_THROWS_AS(cudrv::mpi::broadcast_unique_id(MPI_COMM_NULL), cudrv::invalid_argument_error);
}

TEST_CASE("broadcast_unique_id: without NCCL every rank throws", "[mpi][nccl][no-nccl]") {
  // The test's registration names an NCCL that does not exist (CUDRV_LIBNCCL).
  REQUIRE_FALSE(cudrv::nccl::available());
  const int rank = world_rank();
  for (int root = 0; root < world_size(); ++root) {
    INFO("root " << root << ", rank " << rank);
    try {
      (void)cudrv::mpi::broadcast_unique_id(MPI_COMM_WORLD, root);
      FAIL("broadcast_unique_id returned without NCCL");
    } catch (const cudrv::library_unavailable_error& e) {
      INFO(e.what());
      CHECK(rank == root);  // the root's own exception
      CHECK(e.source() == cudrv::error_source::nccl);
      CHECK(contains(e.what(), "/nonexistent/libnccl.so.2"));
    } catch (const cudrv::error& e) {
      INFO(e.what());
      CHECK(rank != root);
      CHECK(e.source() == cudrv::error_source::nccl);
      CHECK(e.api() == "cudrv::mpi::broadcast_unique_id");
      CHECK(contains(e.what(), "rank " + std::to_string(root) + " could not make the NCCL unique id"));
      CHECK(contains(e.what(), "/nonexistent/libnccl.so.2"));  // the root's message, quoted
    }
  }
  CHECK(world_errhandler_is_fatal());
}
#endif  // CUDRV_TEST_NCCL

// --- gpu_aware -------------------------------------------------------------------------------------------

TEST_CASE("gpu_aware: CUDRV_MPI_GPU_AWARE, then MPI's answer", "[mpi][gpu-aware]") {
  using cudrv::mpi::gpu_awareness;
  CHECK(std::string(cudrv::mpi::to_string(gpu_awareness::yes)) == "yes");
  CHECK(std::string(cudrv::mpi::to_string(gpu_awareness::no)) == "no");
  CHECK(std::string(cudrv::mpi::to_string(gpu_awareness::unknown)) == "unknown");
  {
    scoped_env force("CUDRV_MPI_GPU_AWARE", "1");
    CHECK(cudrv::mpi::gpu_aware() == gpu_awareness::yes);
  }
  {
    scoped_env force("CUDRV_MPI_GPU_AWARE", "0");
    CHECK(cudrv::mpi::gpu_aware() == gpu_awareness::no);
  }
  scoped_env unset("CUDRV_MPI_GPU_AWARE", std::nullopt);
  const gpu_awareness answer = cudrv::mpi::gpu_aware();
  CHECK((answer == gpu_awareness::yes || answer == gpu_awareness::no || answer == gpu_awareness::unknown));
  {
    scoped_env other("CUDRV_MPI_GPU_AWARE", "maybe");  // ignored
    CHECK(cudrv::mpi::gpu_aware() == answer);
  }
#if defined(MPIX_CUDA_AWARE_SUPPORT)
  const bool runtime = MPIX_Query_cuda_support() == 1;
  CHECK(answer == (runtime ? gpu_awareness::yes : gpu_awareness::no));
  if (world_rank() == 0) {
    std::printf("cudrv_mpi_tests: gpu_aware() = %s (MPIX_CUDA_AWARE_SUPPORT %d, MPIX_Query_cuda_support() %d)\n",
                cudrv::mpi::to_string(answer), int(MPIX_CUDA_AWARE_SUPPORT), MPIX_Query_cuda_support());
  }
#else
  CHECK(answer == gpu_awareness::unknown);
  if (world_rank() == 0) {
    std::printf("cudrv_mpi_tests: gpu_aware() = %s (this MPI has no MPIX_Query_cuda_support)\n",
                cudrv::mpi::to_string(answer));
  }
#endif
}

// --- datatype ------------------------------------------------------------------------------------------

TEST_CASE("datatype: the MPI datatype of each element type", "[mpi][datatype]") {
  using cudrv::mpi::datatype;
  CHECK(datatype<char>() == MPI_CHAR);
  CHECK(datatype<signed char>() == MPI_SIGNED_CHAR);
  CHECK(datatype<unsigned char>() == MPI_UNSIGNED_CHAR);
  CHECK(datatype<std::byte>() == MPI_UNSIGNED_CHAR);
  CHECK(datatype<bool>() == MPI_CXX_BOOL);
  CHECK(datatype<std::int8_t>() == MPI_SIGNED_CHAR);  // int8_t is signed char
  CHECK(datatype<std::int16_t>() == MPI_INT16_T);
  CHECK(datatype<std::int32_t>() == MPI_INT32_T);
  CHECK(datatype<std::int64_t>() == MPI_INT64_T);
  CHECK(datatype<std::uint8_t>() == MPI_UNSIGNED_CHAR);  // uint8_t is unsigned char
  CHECK(datatype<std::uint16_t>() == MPI_UINT16_T);
  CHECK(datatype<std::uint32_t>() == MPI_UINT32_T);
  CHECK(datatype<std::uint64_t>() == MPI_UINT64_T);
  CHECK(datatype<int>() == MPI_INT32_T);
  CHECK(datatype<long long>() == MPI_INT64_T);
  CHECK(datatype<unsigned long long>() == MPI_UINT64_T);
  CHECK(datatype<float>() == MPI_FLOAT);
  CHECK(datatype<double>() == MPI_DOUBLE);
  CHECK(datatype<std::complex<float>>() == MPI_CXX_FLOAT_COMPLEX);
  CHECK(datatype<std::complex<double>>() == MPI_CXX_DOUBLE_COMPLEX);
  CHECK(datatype<const double>() == MPI_DOUBLE);
  CHECK(datatype<volatile std::int32_t>() == MPI_INT32_T);
  // Each has the size of its type.
  const auto size_of = [](MPI_Datatype t) {
    int size = 0;
    MPI_Type_size(t, &size);
    return size;
  };
  CHECK(size_of(datatype<std::int16_t>()) == 2);
  CHECK(size_of(datatype<std::uint64_t>()) == 8);
  CHECK(size_of(datatype<bool>()) == static_cast<int>(sizeof(bool)));
  CHECK(size_of(datatype<std::complex<double>>()) == 16);
}

TEST_CASE("datatype: reductions with it", "[mpi][datatype]") {
  using cudrv::mpi::datatype;
  const int rank = world_rank();
  const int size = world_size();
  {
    std::array<std::int64_t, 2> v{rank + 1, std::int64_t(1) << 40};
    MPI_Allreduce(MPI_IN_PLACE, v.data(), 2, datatype<std::int64_t>(), MPI_SUM, MPI_COMM_WORLD);
    CHECK(v[0] == std::int64_t(size) * (size + 1) / 2);
    CHECK(v[1] == (std::int64_t(size) << 40));
  }
  {
    double d = 0.5 * rank;
    MPI_Allreduce(MPI_IN_PLACE, &d, 1, datatype<double>(), MPI_MAX, MPI_COMM_WORLD);
    CHECK(d == 0.5 * (size - 1));
  }
  {
    std::complex<double> c(rank, 1.0);
    MPI_Allreduce(MPI_IN_PLACE, &c, 1, datatype<std::complex<double>>(), MPI_SUM, MPI_COMM_WORLD);
    CHECK(c == std::complex<double>(size * (size - 1) / 2.0, size));
  }
  {
    std::uint16_t u = static_cast<std::uint16_t>(1u << rank);
    MPI_Allreduce(MPI_IN_PLACE, &u, 1, datatype<std::uint16_t>(), MPI_BOR, MPI_COMM_WORLD);
    CHECK(u == (1u << size) - 1);
  }
  {
    bool any = rank == 0;
    MPI_Allreduce(MPI_IN_PLACE, &any, 1, datatype<bool>(), MPI_LOR, MPI_COMM_WORLD);
    CHECK(any);
  }
  {
    float f = 1.5f;
    MPI_Allreduce(MPI_IN_PLACE, &f, 1, datatype<float>(), MPI_SUM, MPI_COMM_WORLD);
    CHECK(f == 1.5f * size);
  }
}

// --- mpi_error and check -------------------------------------------------------------------------------------

TEST_CASE("mpi_error: a failed call through check", "[mpi][error]") {
  CHECK_NOTHROW(cudrv::mpi::check(MPI_SUCCESS, "MPI_Barrier"));
  returning_comm comm;
  int buffer[4] = {};
  try {
    cudrv::mpi::check(MPI_Bcast(buffer, -1, MPI_INT, 0, comm.comm), "MPI_Bcast", "a negative count");
    FAIL("MPI_Bcast with a negative count succeeded");
  } catch (const cudrv::mpi_error& e) {
    INFO(e.what());
    CHECK(e.source() == cudrv::error_source::mpi);
    int cls = -1;
    MPI_Error_class(e.code(), &cls);
    CHECK(cls == MPI_ERR_COUNT);
    CHECK(e.name() == "MPI_ERR_COUNT");
    char text[MPI_MAX_ERROR_STRING + 1] = {};
    int length = 0;
    MPI_Error_string(e.code(), text, &length);
    CHECK(e.description() == std::string(text, static_cast<std::size_t>(length)));
    CHECK_FALSE(e.description().empty());
    CHECK(e.api() == "MPI_Bcast");
    CHECK(e.context() == "a negative count");
    CHECK(contains(e.what(), "MPI_Bcast"));
    CHECK(contains(e.what(), "MPI_ERR_COUNT"));
  }
  try {
    cudrv::mpi::check(MPI_Send(buffer, 1, MPI_INT, world_size() + 5, 0, comm.comm), "MPI_Send");
    FAIL("MPI_Send to a rank that does not exist succeeded");
  } catch (const cudrv::mpi_error& e) {
    INFO(e.what());
    CHECK(e.name() == "MPI_ERR_RANK");
  }
}

TEST_CASE("mpi_error: names of the error classes", "[mpi][error]") {
  CHECK(cudrv::mpi_error(MPI_ERR_TRUNCATE, "MPI_Recv").name() == "MPI_ERR_TRUNCATE");
  CHECK(cudrv::mpi_error(MPI_ERR_COMM, "MPI_Bcast").name() == "MPI_ERR_COMM");
  CHECK(cudrv::mpi_error(MPI_ERR_OTHER, "x").name() == "MPI_ERR_OTHER");
  // A class MPI does not name: a user-defined one, with its own string.
  int cls = 0;
  REQUIRE(MPI_Add_error_class(&cls) == MPI_SUCCESS);
  int code = 0;
  REQUIRE(MPI_Add_error_code(cls, &code) == MPI_SUCCESS);
  char text[] = "cudrv test: a made-up failure";
  REQUIRE(MPI_Add_error_string(code, text) == MPI_SUCCESS);
  const cudrv::mpi_error e(code, "MPI_Made_up", "context");
  CHECK(e.code() == code);
  CHECK(e.name() == "MPI error class " + std::to_string(cls));
  CHECK(e.description() == text);
  CHECK(e.context() == "context");
  // A code MPI does not know: MPI_Error_class refuses it, and must not abort the job.
  const cudrv::mpi_error unknown(987654, "MPI_Nothing");
  CHECK(unknown.name() == "MPI error class 987654");
  CHECK(world_errhandler_is_fatal());
}
