// GPU tier, several ranks under MPI (cudrv_nccl_mpi_tests, run with mpirun -np N, one rank per GPU):
// <cudrv/nccl.hpp> across processes, communicators made with cudrv::mpi::broadcast_unique_id.
//
//   - every collective, for float, double, int32, int64, uint8, half and bfloat16, in place and out of
//     place, every reduction, every root, send/recv as a ring and pairwise, against host-computed
//     results with poisoned destinations (collectives.hpp);
//   - communicators blocking and non-blocking (wait_ready), and split (even and odd ranks, a rank left
//     out) with collectives on the parts;
//   - argument errors that only show with more than one rank (a root or peer outside the
//     communicator's size, gather and scatter buffers not size() times the part): invalid_argument_error
//     before NCCL, on every rank, leaving the communicator usable;
//   - NCCL 2.28's additions (collectives_nccl228.hpp): all_to_all, gather, scatter, all_to_all_v and
//     premul_sum across ranks; nccl::buffer with symmetric windows; group::simulate_end;
//     init_rank_scalable with 1, 2 and nranks unique ids; every new call on a non-blocking communicator
//     (simulate_end aside: see that case);
//     shrink with every rank alive (the excluded rank waits, then destroys its old communicator) and
//     revoke then shrink, blocking and non-blocking;
//   - [shared-device] (hidden; its own ctest run, mpirun -np 2 on ONE device): NCCL refuses two ranks
//     on one device with an nccl_error (ncclInvalidUsage) on every rank in bounded time, or, where an
//     NCCL accepts it, the communicator gives correct results.
//
// Each case starts with CUDRV_MPI_CASE (mpi_support.hpp): a watchdog, and the collective skip.
#include <catch2/catch.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cudrv/mpi.hpp>
#include <cudrv/nccl.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "collectives.hpp"
#include "collectives_nccl228.hpp"
#include "mpi_support.hpp"
#include "support/catch_support.hpp"
#include "support/test_support.hpp"

using cudrv::test::contains;
namespace nccl = cudrv::nccl;
namespace mg = cudrv::test::multigpu;

namespace {

// Sum of every rank's input of make_input<T>(count, input_seed(seed, r, tag)) over the ranks in
// `ranks`, checked against what this rank's communicator computed into `got`.
template <class T>
void check_sum_over(const std::vector<int>& ranks, const std::vector<T>& got, std::size_t count, std::uint64_t tag) {
  std::vector<std::vector<T>> inputs;
  for (int r : ranks) {
    inputs.push_back(mg::make_input<T>(count, mg::input_seed(mg::world().seed, r, tag), mg::values::general));
  }
  CHECK(mg::mismatch(got, mg::reference(inputs, nccl::reduction::sum)) == "");
}

// An all_reduce (sum) of this rank's input on `comm`, whose ranks are the world ranks `members` (in
// the communicator's order), checked on the host.
template <class T>
void all_reduce_and_check(nccl::communicator_ref comm, const std::vector<int>& members, cudrv::stream_ref s,
                          std::uint64_t tag) {
  constexpr std::size_t count = 4099;
  const mg::rank_slot slot{comm, *mg::world().dev, s};
  const int me = mg::world().rank;
  auto buf = mg::upload(slot, mg::make_input<T>(count, mg::input_seed(mg::world().seed, me, tag), mg::values::general));
  comm.all_reduce(buf, nccl::reduction::sum, s);
  comm.wait_ready();
  check_sum_over<T>(members, mg::download(slot, buf), count, tag);
}

std::vector<int> world_ranks_where(bool (*pred)(int)) {
  std::vector<int> out;
  for (int r = 0; r < mg::world().size; ++r) {
    if (pred(r)) {
      out.push_back(r);
    }
  }
  return out;
}

}  // namespace

TEMPLATE_TEST_CASE("multigpu mpi: every collective across ranks, in place and out of place", "[gpu][nccl][mpi]", float,
                   double, std::int32_t, std::int64_t, std::uint8_t, __half, __nv_bfloat16) {
  CUDRV_MPI_CASE(std::string("every collective across ranks for ") + mg::type_name<TestType>(), 600);
  cudrv::test::destruction_error_counter errors;
  mg::mpi_world& w = mg::world();
  nccl::communicator& comm = w.comm();
  CHECK(comm.rank() == w.rank);  // CHECK: every rank must go on into the collectives
  CHECK(comm.size() == w.size);
  CHECK(comm.device() == *w.dev);
  const mg::rank_slot slot{comm, *w.dev, w.stream()};
  mg::check_every_collective<TestType>(std::span<const mg::rank_slot>(&slot, 1), w.seed);
  CHECK(comm.async_error() == nccl::result::success);
  CHECK(errors.count() == 0);
}

TEST_CASE("multigpu mpi: communicators from broadcast_unique_id, blocking and non-blocking", "[gpu][nccl][mpi]") {
  CUDRV_MPI_CASE("communicators from broadcast_unique_id", 180);
  cudrv::test::destruction_error_counter errors;
  mg::mpi_world& w = mg::world();
  std::vector<int> everyone = world_ranks_where([](int) { return true; });
  {
    const nccl::unique_id id = cudrv::mpi::broadcast_unique_id(MPI_COMM_WORLD);
    CHECK(id != nccl::unique_id{});
    nccl::communicator comm =
        nccl::communicator::init_rank(id, w.size, w.rank, *w.dev, {.blocking = true, .name = "cudrv-test-blocking"});
    CHECK(comm.rank() == w.rank);
    CHECK(comm.size() == w.size);
    CHECK(comm.device() == *w.dev);
    cudrv::stream s(*w.dev);
    all_reduce_and_check<float>(comm, everyone, s, 101);
    CHECK(comm.async_error() == nccl::result::success);
  }  // destroyed on every rank: ncclCommFinalize waits for the others
  {
    const nccl::unique_id id = cudrv::mpi::broadcast_unique_id(MPI_COMM_WORLD);
    nccl::communicator comm = nccl::communicator::init_rank(id, w.size, w.rank, *w.dev,
                                                            {.blocking = false, .name = "cudrv-test-nonblocking"});
    comm.wait_ready();  // ncclInProgress until every rank has joined
    CHECK(comm.rank() == w.rank);
    CHECK(comm.size() == w.size);
    cudrv::stream s(*w.dev);
    all_reduce_and_check<double>(comm, everyone, s, 102);
    all_reduce_and_check<std::int64_t>(comm, everyone, s, 103);
    CHECK(comm.async_error() == nccl::result::success);
  }  // a non-blocking communicator's finalize is waited for
  CHECK(errors.count() == 0);
}

TEST_CASE("multigpu mpi: split into even and odd ranks, and a rank left out", "[gpu][nccl][mpi]") {
  CUDRV_MPI_CASE("split", 180);
  cudrv::test::destruction_error_counter errors;
  mg::mpi_world& w = mg::world();
  nccl::communicator& world_comm = w.comm();
  {
    const int parity = w.rank % 2;
    nccl::communicator part_comm = world_comm.split(parity, w.rank);
    REQUIRE(part_comm);
    CHECK(part_comm.size() == (w.size - parity + 1) / 2);
    CHECK(part_comm.rank() == w.rank / 2);
    CHECK(part_comm.device() == *w.dev);
    cudrv::stream s(*w.dev);
    const std::vector<int> members = parity == 0 ? world_ranks_where([](int r) { return r % 2 == 0; })
                                                 : world_ranks_where([](int r) { return r % 2 == 1; });
    all_reduce_and_check<float>(part_comm, members, s, 201);
    all_reduce_and_check<std::int32_t>(part_comm, members, s, 202);
    CHECK(part_comm.async_error() == nccl::result::success);
  }
  {
    // Non-blocking children, ordered by descending world rank.
    nccl::communicator part_comm =
        world_comm.split(w.rank % 2, w.size - w.rank, nccl::communicator_config{.blocking = false});
    REQUIRE(part_comm);
    part_comm.wait_ready();
    const int same_parity_above = (w.size - 1 - w.rank) / 2;  // ranks of this parity with a larger world rank
    CHECK(part_comm.rank() == same_parity_above);
    cudrv::stream s(*w.dev);
    std::vector<int> members = w.rank % 2 == 0 ? world_ranks_where([](int r) { return r % 2 == 0; })
                                               : world_ranks_where([](int r) { return r % 2 == 1; });
    all_reduce_and_check<__half>(part_comm, members, s, 203);
  }
  {
    nccl::communicator rest = world_comm.split(w.rank == 0 ? nccl::no_color : 1, w.rank);
    if (w.rank == 0) {
      CHECK_FALSE(rest);
    } else {
      REQUIRE(rest);
      CHECK(rest.size() == w.size - 1);
      CHECK(rest.rank() == w.rank - 1);
      cudrv::stream s(*w.dev);
      all_reduce_and_check<float>(rest, world_ranks_where([](int r) { return r != 0; }), s, 204);
    }
  }
  CHECK(world_comm.async_error() == nccl::result::success);
  CHECK(errors.count() == 0);
}

TEST_CASE("multigpu mpi: roots, peers and buffer sizes outside the communicator are refused before NCCL",
          "[gpu][nccl][mpi]") {
  CUDRV_MPI_CASE("argument errors", 120);
  cudrv::test::destruction_error_counter errors;
  mg::mpi_world& w = mg::world();
  nccl::communicator& comm = w.comm();
  cudrv::stream& s = w.stream();
  const int n = w.size;
  const auto un = static_cast<std::size_t>(n);
  constexpr std::size_t part = 64;
  cudrv::device_buffer<float> a(*w.dev, part);
  cudrv::device_buffer<float> b(*w.dev, part);
  const std::string of_n = "communicator of " + std::to_string(n) + " ranks";
  INFO(n << " ranks");

  // Requires f() to be refused by cudrv (invalid_argument_error, no NCCL call) with `part` in what().
  auto refused = [](const char* what, auto&& f, const std::string& part) {
    const cudrv::invalid_argument_error e = cudrv::test::require_invalid_argument(what, f);
    INFO("what(): " << e.what());
    CHECK(contains(e.what(), part));
  };
  for (int root : {n, n + 3, -1}) {
    INFO("root " << root);
    refused(
        "broadcast from a root outside the communicator", [&] { comm.broadcast(a, b, root, s); }, of_n);
    refused(
        "in-place broadcast from a root outside the communicator", [&] { comm.broadcast(a, root, s); }, of_n);
    refused(
        "reduce to a root outside the communicator", [&] { comm.reduce(a, b, nccl::reduction::sum, root, s); }, of_n);
    refused(
        "in-place reduce to a root outside the communicator", [&] { comm.reduce(a, nccl::reduction::max, root, s); },
        of_n);
  }
  for (int peer : {n, -1}) {
    INFO("peer " << peer);
    refused(
        "send to a peer outside the communicator", [&] { comm.send(a, peer, s); }, of_n);
    refused(
        "recv from a peer outside the communicator", [&] { comm.recv(a, peer, s); }, of_n);
  }
  {
    const std::string gather = std::to_string(n) + " (ranks) times the source";
    const std::string scatter = std::to_string(n) + " (ranks) times the destination";
    const std::string parts = "does not split into " + std::to_string(n) + " equal parts";
    // all_gather: the destination must hold n times the source; reduce_scatter the reverse.
    cudrv::device_buffer<float> one_more(*w.dev, un * part + 1);
    cudrv::device_buffer<float> n_plus_one(*w.dev, (un + 1) * part);
    refused(
        "all_gather into n * part + 1 elements", [&] { comm.all_gather(a, one_more, s); }, gather);
    refused(
        "all_gather into (n + 1) * part elements", [&] { comm.all_gather(a, n_plus_one, s); }, gather);
    refused(
        "reduce_scatter of n * part + 1 elements", [&] { comm.reduce_scatter(one_more, a, nccl::reduction::sum, s); },
        scatter);
    if (n > 1) {
      // Sizes a one-rank communicator takes, refused only because there are n ranks.
      refused(
          "all_gather into as many elements as the source", [&] { comm.all_gather(a, b, s); }, gather);
      refused(
          "reduce_scatter of as many elements as the destination",
          [&] { comm.reduce_scatter(a, b, nccl::reduction::sum, s); }, scatter);
      refused(
          "in-place all_gather of a buffer that does not split into n parts", [&] { comm.all_gather(one_more, s); },
          parts);
      refused(
          "in-place reduce_scatter of a buffer that does not split into n parts",
          [&] { comm.reduce_scatter(one_more, nccl::reduction::sum, s); }, parts);
    }
  }
  // Nothing reached NCCL: the communicator still works, and every rank is still in step.
  all_reduce_and_check<float>(comm, world_ranks_where([](int) { return true; }), s, 301);
  CHECK(comm.async_error() == nccl::result::success);
  CHECK(errors.count() == 0);
}

// Its own ctest run: mpirun -np 2 with both ranks on device 0 (device_policy::shared over one device),
// on a machine with one GPU or more. NCCL (2.28 on the GPU machines) is expected to refuse: every rank
// gets nccl_error ncclInvalidUsage ("Duplicate GPU detected") from ncclCommInitRankConfig, in bounded
// time. Where an NCCL accepts it, the case says so and checks that a collective gives correct results.
// A hang is ended by the watchdog (exit code 124, "TIMEOUT: ...") and ctest's TIMEOUT.
TEST_CASE("multigpu mpi: NCCL refuses two ranks on one device, with a clear error and no hang",
          "[.][shared-device][gpu][nccl][mpi]") {
  using clock = std::chrono::steady_clock;
  constexpr auto init_bound = std::chrono::seconds(60);
  mg::watchdog_scope guard("ncclCommInitRankConfig with every rank on device 0", std::chrono::seconds(90));
  mg::mpi_world& w = mg::world();
  if (!w.gpu_ok) {
    mg::say(w.gpu_skip_message);
    return;
  }
  if (w.size < 2) {
    mg::say("SKIPPED: needs at least 2 ranks to share a device (run with mpirun -np 2)");
    return;
  }
  cudrv::test::destruction_error_counter errors;
  // Every rank of the node on one device: shared placement over a single device (device 0).
  const int ordinal =
      cudrv::mpi::device_ordinal(w.node.local_rank, w.node.local_size, 1, cudrv::mpi::device_policy::shared);
  REQUIRE(ordinal == 0);
  const cudrv::device dev(ordinal);
  if (w.device_count == 1) {  // what select_device gives on a machine with one device
    CHECK(cudrv::mpi::select_device(w.node, cudrv::mpi::device_policy::shared) == dev);
  }

  const nccl::unique_id id = cudrv::mpi::broadcast_unique_id(MPI_COMM_WORLD);
  const auto start = clock::now();
  std::optional<cudrv::nccl_error> refusal;
  nccl::communicator comm;
  try {
    comm = nccl::communicator::init_rank(id, w.size, w.rank, dev, {.name = "cudrv-test-shared-device"});
  } catch (const cudrv::nccl_error& e) {
    refusal = e;
  }
  const std::chrono::duration<double> took = clock::now() - start;
  CHECK(took < init_bound);

  int refused = refusal ? 1 : 0;
  int refused_ranks = 0;
  cudrv::mpi::check(MPI_Allreduce(&refused, &refused_ranks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
  if (refused_ranks == w.size) {
    const cudrv::nccl_error& e = *refusal;
    mg::say("NCCL refused " + std::to_string(w.size) + " ranks on device 0 after " + std::to_string(took.count()) +
            " s, as expected: " + e.what());
    INFO("what(): " << e.what());
    CHECK(e.source() == cudrv::error_source::nccl);
    CHECK(e.api() == "ncclCommInitRankConfig");
    CHECK(e.nccl_result() == static_cast<int>(nccl::result::invalid_usage));
    CHECK(e.name() == "ncclInvalidUsage");
    CHECK_FALSE(e.description().empty());
    // NCCL's own explanation, carried into what() with cudrv's context (rank, size, device).
    CHECK(contains(e.last_error(), "Duplicate GPU detected"));
    CHECK(contains(e.what(), "Duplicate GPU detected"));
    CHECK(contains(e.what(), "rank " + std::to_string(w.rank) + " of " + std::to_string(w.size) + " on device 0"));
    CHECK(contains(e.what(), "ncclInvalidUsage"));
  } else if (refused_ranks == 0) {
    mg::say("NOTE: this NCCL (" + std::to_string(nccl::version()) + ") accepted " + std::to_string(w.size) +
            " ranks on one device (after " + std::to_string(took.count()) + " s); checking that a collective is right");
    cudrv::stream s(dev);
    mg::mpi_world& ww = mg::world();
    const mg::rank_slot slot{comm, dev, s};
    constexpr std::size_t count = 4099;
    auto buf =
        mg::upload(slot, mg::make_input<float>(count, mg::input_seed(ww.seed, ww.rank, 401), mg::values::general));
    comm.all_reduce(buf, nccl::reduction::sum, s);
    check_sum_over<float>(world_ranks_where([](int) { return true; }), mg::download(slot, buf), count, 401);
    CHECK(comm.async_error() == nccl::result::success);
  } else {
    if (refusal) {
      mg::say(std::string("refused here: ") + refusal->what());
    }
    if (comm) {
      comm.abort();  // the ranks that were refused have no communicator: do not wait for them in finalize
    }
    FAIL("NCCL refused the shared device on " << refused_ranks << " of " << w.size
                                              << " ranks only; expected all or none");
  }
  CHECK(errors.count() == 0);
}

// --- NCCL 2.28 (issue 35) ------------------------------------------------------------------------------

namespace {

std::vector<int> world_ranks_except(int excluded) {
  std::vector<int> out;
  for (int r = 0; r < mg::world().size; ++r) {
    if (r != excluded) {
      out.push_back(r);
    }
  }
  return out;
}

// A new communicator over every rank, from a unique id made on rank 0 (collective).
nccl::communicator fresh_world_comm(bool blocking, const char* name) {
  mg::mpi_world& w = mg::world();
  nccl::communicator_config config;
  config.blocking = blocking;
  config.name = name;
  nccl::communicator comm =
      nccl::communicator::init_rank(cudrv::mpi::broadcast_unique_id(MPI_COMM_WORLD), w.size, w.rank, *w.dev, config);
  comm.wait_ready();
  return comm;
}

void barrier(const char* why) { cudrv::mpi::check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier", why); }

}  // namespace

TEMPLATE_TEST_CASE("multigpu mpi: all_to_all gather scatter and all_to_all_v across ranks", "[gpu][nccl][mpi]", float,
                   std::int32_t, nccl::half_t, nccl::bfloat16_t) {
  CUDRV_MPI_CASE(std::string("the NCCL 2.28 copying collectives across ranks for ") + mg::element_name<TestType>(),
                 600);
  cudrv::test::destruction_error_counter errors;
  mg::mpi_world& w = mg::world();
  nccl::communicator& comm = w.comm();
  const mg::rank_slot slot{comm, *w.dev, w.stream()};
  mg::check_new_copy_collectives<TestType>(std::span<const mg::rank_slot>(&slot, 1), w.seed);
  CHECK(comm.async_error() == nccl::result::success);
  CHECK(errors.count() == 0);
}

TEMPLATE_TEST_CASE("multigpu mpi: premul_sum with host and device scalars across ranks", "[gpu][nccl][mpi]", float,
                   double) {
  CUDRV_MPI_CASE(std::string("premul_sum across ranks for ") + mg::type_name<TestType>(), 600);
  cudrv::test::destruction_error_counter errors;
  mg::mpi_world& w = mg::world();
  nccl::communicator& comm = w.comm();
  const mg::rank_slot slot{comm, *w.dev, w.stream()};
  mg::check_premul_sum<TestType>(std::span<const mg::rank_slot>(&slot, 1), w.seed);
  CHECK(comm.async_error() == nccl::result::success);
  CHECK(errors.count() == 0);
}

TEST_CASE("multigpu mpi: nccl::buffer registered as a symmetric window on every rank", "[gpu][nccl][mpi]") {
  CUDRV_MPI_CASE("symmetric windows across ranks", 240);
  cudrv::test::destruction_error_counter errors;
  mg::mpi_world& w = mg::world();
  nccl::communicator& comm = w.comm();
  const mg::rank_slot slot{comm, *w.dev, w.stream()};
  const std::span<const mg::rank_slot> slots(&slot, 1);
  mg::check_window_all_reduce<std::int32_t>(slots, w.seed, (std::size_t{1} << 20) + 3, mg::this_rank_only{});
  mg::check_window_all_reduce<float>(slots, w.seed, 4099, mg::this_rank_only{});
  CHECK(comm.async_error() == nccl::result::success);
  CHECK(errors.count() == 0);
}

TEST_CASE("multigpu mpi: group simulate_end estimates without launching", "[gpu][nccl][mpi]") {
  CUDRV_MPI_CASE("simulate_end across ranks", 180);
  mg::mpi_world& w = mg::world();
  if (w.size < 2) {  // a one-rank collective runs at once, in a group or not: nothing to simulate
    mg::say("NOTE: simulate_end needs 2 ranks or more; not checked with 1");
    return;
  }
  cudrv::test::destruction_error_counter errors;
  nccl::communicator& comm = w.comm();
  const mg::rank_slot slot{comm, *w.dev, w.stream()};
  mg::check_simulate_end(std::span<const mg::rank_slot>(&slot, 1), w.seed);
  CHECK(comm.async_error() == nccl::result::success);
  CHECK(errors.count() == 0);
}

TEST_CASE("multigpu mpi: init_rank_scalable with 1, 2 and nranks unique ids", "[gpu][nccl][mpi]") {
  CUDRV_MPI_CASE("init_rank_scalable", 240);
  cudrv::test::destruction_error_counter errors;
  mg::mpi_world& w = mg::world();
  std::vector<int> id_counts{1, 2, w.size};
  id_counts.erase(std::remove_if(id_counts.begin(), id_counts.end(), [&](int k) { return k > w.size; }),
                  id_counts.end());
  id_counts.erase(std::unique(id_counts.begin(), id_counts.end()), id_counts.end());
  for (int k : id_counts) {
    for (bool blocking : {true, false}) {
      INFO(k << " unique id(s), " << (blocking ? "blocking" : "non-blocking"));
      // Ranks 0 .. k-1 each make one id and broadcast it: every rank holds the same ids in the same order.
      std::vector<nccl::unique_id> ids;
      for (int root = 0; root < k; ++root) {
        ids.push_back(cudrv::mpi::broadcast_unique_id(MPI_COMM_WORLD, root));
      }
      for (std::size_t j = 1; j < ids.size(); ++j) {
        CHECK(ids[j] != ids[j - 1]);
      }
      nccl::communicator_config config;
      config.blocking = blocking;
      config.name = "cudrv-test-scalable";
      nccl::communicator comm = nccl::communicator::init_rank_scalable(ids, w.size, w.rank, *w.dev, config);
      comm.wait_ready();
      CHECK(comm.rank() == w.rank);
      CHECK(comm.size() == w.size);
      CHECK(comm.device() == *w.dev);
      cudrv::stream s(*w.dev);
      all_reduce_and_check<float>(comm, world_ranks_where([](int) { return true; }), s,
                                  700 + static_cast<std::uint64_t>(k) * 2 + (blocking ? 0 : 1));
      CHECK(comm.async_error() == nccl::result::success);
    }
  }
  CHECK(errors.count() == 0);
}

// Only refusals every rank makes alike: a refusal on some ranks alone would leave the others in NCCL,
// waiting for them (so a gather destination of the wrong size, checked on the root only, is not here).
TEST_CASE("multigpu mpi: the new collectives refuse on every rank what only shows with several ranks",
          "[gpu][nccl][mpi]") {
  CUDRV_MPI_CASE("argument errors of the NCCL 2.28 collectives", 120);
  mg::mpi_world& w = mg::world();
  if (w.size < 2) {
    mg::say("NOTE: these refusals need 2 ranks or more; not checked with 1");
    return;
  }
  cudrv::test::destruction_error_counter errors;
  nccl::communicator& comm = w.comm();
  cudrv::stream& s = w.stream();
  const auto un = static_cast<std::size_t>(w.size);
  constexpr std::size_t part = 64;
  cudrv::device_buffer<float> a(*w.dev, un * part + 1);
  cudrv::device_buffer<float> b(*w.dev, un * part + 1);
  cudrv::device_buffer<float> whole(*w.dev, un * part);
  cudrv::device_buffer<float> other(*w.dev, un * part);
  const std::string parts = "does not split into " + std::to_string(w.size) + " equal parts";
  INFO(w.size << " ranks");
  auto refused = [](const char* what, auto&& f, const std::string& text) {
    const cudrv::invalid_argument_error e = cudrv::test::require_invalid_argument(what, f);
    INFO("what(): " << e.what());
    CHECK(contains(e.what(), text));
  };
  refused(
      "all_to_all of n * part + 1 elements", [&] { comm.all_to_all(a, b, s); }, parts);
  refused(
      "in-place gather of a buffer that does not split into n parts", [&] { comm.gather(a, 0, s); }, parts);
  refused(
      "in-place scatter of a buffer that does not split into n parts", [&] { comm.scatter(a, 0, s); }, parts);
  const std::vector<std::size_t> one_count{part};
  const std::vector<std::size_t> one_offset{0};
  std::vector<std::size_t> counts(un, part);
  std::vector<std::size_t> offsets;
  for (std::size_t r = 0; r < un; ++r) {
    offsets.push_back(r * part);
  }
  (void)cudrv::test::require_invalid_argument("all_to_all_v with one count for several ranks", [&] {
    comm.all_to_all_v(whole, one_count, one_offset, other, counts, offsets, s);
  });
  (void)cudrv::test::require_invalid_argument("all_to_all_v with one receive offset for several ranks", [&] {
    comm.all_to_all_v(whole, counts, offsets, other, counts, one_offset, s);
  });
  std::vector<std::size_t> past_end = offsets;
  past_end.back() += 1;  // the last block ends one element past the buffer
  (void)cudrv::test::require_invalid_argument("all_to_all_v with a block past the source's end", [&] {
    comm.all_to_all_v(whole, counts, past_end, other, counts, offsets, s);
  });
  for (int root : {w.size, -1}) {
    INFO("root " << root);
    const std::string of_n = "communicator of " + std::to_string(w.size) + " ranks";
    refused(
        "gather to a root outside the communicator",
        [&] { comm.gather(whole.view().subspan(0, part), other, root, s); }, of_n);
    refused(
        "scatter from a root outside the communicator",
        [&] { comm.scatter(whole, other.view().subspan(0, part), root, s); }, of_n);
  }
  // Nothing reached NCCL: the communicator still works, and every rank is still in step.
  all_reduce_and_check<float>(comm, world_ranks_where([](int) { return true; }), s, 1001);
  CHECK(comm.async_error() == nccl::result::success);
  CHECK(errors.count() == 0);
}

TEST_CASE("multigpu mpi: every new call on a non-blocking communicator", "[gpu][nccl][mpi]") {
  CUDRV_MPI_CASE("the NCCL 2.28 calls on a non-blocking communicator", 420);
  cudrv::test::destruction_error_counter errors;
  mg::mpi_world& w = mg::world();
  {
    nccl::communicator comm = fresh_world_comm(false, "cudrv-test-nonblocking-228");
    cudrv::stream s(*w.dev);
    const mg::rank_slot slot{comm, *w.dev, s};
    const std::span<const mg::rank_slot> slots(&slot, 1);
    // An idle communicator is ready at once, whatever the bound.
    const auto start = std::chrono::steady_clock::now();
    comm.wait_ready(std::chrono::seconds(60));
    const std::chrono::duration<double> waited = std::chrono::steady_clock::now() - start;
    CHECK(waited.count() < 5.0);
    // Each collective is followed by wait_ready (mg::launch) before its result is read.
    mg::check_new_copy_collectives<float>(slots, w.seed, {1031});
    mg::check_new_copy_collectives<nccl::bfloat16_t>(slots, w.seed, {4099});
    mg::check_premul_sum<float>(slots, w.seed, {1031});
    mg::check_window_all_reduce<std::int32_t>(slots, w.seed, 4099, mg::this_rank_only{});
    // Not group::simulate_end: NCCL 2.28 runs a group holding a non-blocking communicator on a thread of
    // its own, without the simulation (src/group.cc, ncclGroupEndInternal): it launches the calls and
    // leaves the estimate unset. cudrv's simulate_end on such a group is the lead's decision (issue 35).
    CHECK(comm.async_error() == nccl::result::success);
  }  // finalize waits (bounded) for the non-blocking communicator
  CHECK(errors.count() == 0);
}

// Every rank alive; the last is left out. The survivors shrink (the last rank must not call it), run
// collectives on the new communicator and destroy it; only then does the last rank go on, so that no
// rank tears down the parent while the others still use it. The parent is untouched by a normal shrink:
// after the barrier every rank, the excluded one included, runs a collective on it, then destroys it.
TEST_CASE("multigpu mpi: shrink leaves the last rank out with every rank alive", "[gpu][nccl][mpi]") {
  CUDRV_MPI_CASE("shrink with every rank alive", 300);
  mg::mpi_world& w = mg::world();
  if (w.size < 2) {
    mg::say("NOTE: shrink needs 2 ranks or more; not checked with 1");
    return;
  }
  cudrv::test::destruction_error_counter errors;
  const int last = w.size - 1;
  const std::vector<int> exclude{last};
  for (bool blocking : {true, false}) {
    INFO((blocking ? "blocking" : "non-blocking") << " parent, rank " << last << " left out");
    nccl::communicator parent = fresh_world_comm(blocking, "cudrv-test-shrink-parent");
    cudrv::stream s(*w.dev);
    if (w.rank == last) {
      (void)cudrv::test::require_invalid_argument("shrink naming this rank", [&] { (void)parent.shrink(exclude); });
    } else {
      nccl::communicator child = parent.shrink(exclude);
      REQUIRE(child);
      CHECK(child.rank() == w.rank);
      CHECK(child.size() == w.size - 1);
      CHECK(child.device() == *w.dev);
      all_reduce_and_check<float>(child, world_ranks_except(last), s, 801);
      const mg::rank_slot slot{child, *w.dev, s};
      mg::check_all_to_all<std::int32_t>(std::span<const mg::rank_slot>(&slot, 1), mg::call_context{w.seed, 1031});
      CHECK(child.async_error() == nccl::result::success);
    }  // the survivors' child is destroyed here (collective over the survivors)
    barrier("the survivors are done with the shrunk communicator");
    all_reduce_and_check<double>(parent, world_ranks_where([](int) { return true; }), s, 802);
    CHECK(parent.async_error() == nccl::result::success);
  }  // the parent, finalized by every rank together
  CHECK(errors.count() == 0);
}

// A live communicator revoked on every rank, then shrunk without rank 0 (shrink_mode::abort, as after a
// fault): the survivors are renumbered one down. Rank 0 waits for them, then destroys its revoked
// parent, which is torn down without finalizing.
TEST_CASE("multigpu mpi: revoke then shrink a live communicator", "[gpu][nccl][mpi]") {
  CUDRV_MPI_CASE("revoke then shrink", 300);
  mg::mpi_world& w = mg::world();
  if (w.size < 2) {
    mg::say("NOTE: shrink needs 2 ranks or more; not checked with 1");
    return;
  }
  if (!nccl::supports(nccl::feature::revoke)) {  // the same NCCL on every rank: all return here
    mg::say("NOTE: the loaded NCCL (" + nccl::library_path() + ") lacks ncclCommRevoke (NCCL 2.28.9); not checked");
    return;
  }
  cudrv::test::destruction_error_counter errors;
  const std::vector<int> exclude{0};
  for (bool blocking : {true, false}) {
    INFO((blocking ? "blocking" : "non-blocking") << " parent, rank 0 left out");
    nccl::communicator parent = fresh_world_comm(blocking, "cudrv-test-revoke-parent");
    cudrv::stream s(*w.dev);
    all_reduce_and_check<float>(parent, world_ranks_where([](int) { return true; }), s, 901);  // in use first
    parent.revoke();
    CHECK(parent.revoked());
    if (w.rank != 0) {
      nccl::communicator child = parent.shrink(exclude, nccl::shrink_mode::abort);
      REQUIRE(child);
      CHECK(child.rank() == w.rank - 1);  // renumbered densely, in the old order
      CHECK(child.size() == w.size - 1);
      all_reduce_and_check<float>(child, world_ranks_except(0), s, 902);
      CHECK(child.async_error() == nccl::result::success);
    }
    barrier("the survivors are done with the shrunk communicator");
  }  // the revoked parent: destroyed without finalizing, on every rank
  CHECK(errors.count() == 0);
}
