// <cudrv/nccl.hpp> against a stand-in NCCL (tests/fake_nccl/fake_nccl.cpp) and the stand-in driver:
// what cudrv hands NCCL for the calls of NCCL 2.19 to 2.28 (shrink, revoke, windows, ncclMemAlloc,
// premultiplied sums, the uneven all-to-all, scalable init, group simulation), the bounded waits of
// non-blocking communicators, and, with the 2.18 stand-in, the typed refusal of every newer call.
//
// Hidden cases ([.]): each runs in its own process with CUDRV_LIBNCCL naming the stand-in
// (tests/CMakeLists.txt): [fake-nccl] the 2.28 one, [fake-nccl-old] the 2.18 one.
#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <cudrv/cudrv.hpp>
#include <cudrv/nccl.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "fake_driver/fake_hooks.hpp"
#include "support/test_support.hpp"

namespace nccl = cudrv::nccl;
using cudrv::test::catch_as;
using cudrv::test::contains;

namespace {

template <class Fn>
Fn* nccl_hook(const char* name) {
  REQUIRE(nccl::available());
  void* lib = dlopen(nccl::library_path().c_str(), RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(lib != nullptr);
  auto* fn = reinterpret_cast<Fn*>(dlsym(lib, name));
  dlclose(lib);  // cudrv keeps it loaded
  REQUIRE(fn != nullptr);
  return fn;
}

std::string nccl_log() { return nccl_hook<const char*()>("fake_nccl_log")(); }
void clear_log() { nccl_hook<void()>("fake_nccl_clear")(); }
void set_pending(long polls) { nccl_hook<void(const char*, long)>("fake_nccl_set")("pending", polls); }

// How often line occurs in the log.
int occurrences(const std::string& log, const std::string& line) {
  int n = 0;
  for (std::size_t at = log.find(line); at != std::string::npos; at = log.find(line, at + 1)) {
    ++n;
  }
  return n;
}

// An address as the stand-in NCCL prints it (%p).
std::string hex_address(CUdeviceptr p) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", reinterpret_cast<void*>(p));
  return text;
}

cudrv::device fake_device() { return cudrv::device(1); }  // device 0 of the stand-in driver is unavailable

nccl::communicator make_comm(int rank, int nranks, nccl::communicator_config cfg = {}) {
  return nccl::communicator::init_rank(nccl::unique_id::generate(), nranks, rank, fake_device(), cfg);
}

template <class E, class F>
E refused_as(F&& f, const std::string& part) {
  auto e = catch_as<E>(std::forward<F>(f));
  REQUIRE(e.has_value());
  INFO("what(): " << e->what());
  CHECK(contains(e->what(), part));
  return *e;
}

}  // namespace

TEST_CASE("fake nccl: shrink hands NCCL the sorted exclusion list and the mode, and renumbers densely",
          "[.][fake-nccl]") {
  auto comm = make_comm(2, 5, {.timeout = std::chrono::milliseconds(1234)});
  clear_log();
  const std::array<int, 2> lost{4, 0};
  auto smaller = comm.shrink(lost, nccl::shrink_mode::abort);
  CHECK(contains(nccl_log(), "ncclCommShrink flags 1 exclude 0 4"));
  CHECK(smaller.rank() == 1);  // rank 0 below it is gone
  CHECK(smaller.size() == 3);
  CHECK(smaller.timeout() == std::chrono::milliseconds(1234));  // the parent's bound, unless a config says
  auto same = comm.shrink({}, nccl::shrink_mode::normal);       // nothing excluded: a copy of the communicator
  CHECK(contains(nccl_log(), "ncclCommShrink flags 0 exclude\n"));
  CHECK(same.size() == 5);
  const std::string api = "cudrv::nccl::communicator::shrink";
  refused_as<cudrv::invalid_argument_error>([&] { (void)comm.shrink(std::array{2}); }, "this rank (2)");
  refused_as<cudrv::invalid_argument_error>([&] { (void)comm.shrink(std::array{1, 1}); }, "excluded twice");
  refused_as<cudrv::invalid_argument_error>([&] { (void)comm.shrink(std::array{5}); }, "excluded rank 5");
  {
    nccl::group g;
    refused_as<cudrv::invalid_argument_error>([&] { (void)comm.shrink(std::array{4}); }, "inside a cudrv::nccl::group");
    g.end();
  }
  CHECK(occurrences(nccl_log(), "ncclCommShrink") == 2);  // the refusals never reached NCCL
}

TEST_CASE("fake nccl: a non-blocking parent's split and shrink are read when its job ends, and a job that never "
          "ends times out typed",
          "[.][fake-nccl]") {
  set_pending(3);
  auto comm = make_comm(1, 3, {.blocking = false, .timeout = std::chrono::milliseconds(150)});
  comm.wait_ready();
  auto part = comm.split(0, 0);  // NCCL answers ncclSuccess and writes the child three polls later
  REQUIRE(part);
  CHECK(part.size() == 1);
  auto smaller = comm.shrink(std::array{0});
  REQUIRE(smaller);
  CHECK(smaller.rank() == 0);
  CHECK(smaller.size() == 2);
  set_pending(-1);  // the job never ends
  auto e = refused_as<nccl::timeout_error>([&] { (void)comm.shrink(std::array{2}); }, "150 ms");
  CHECK(e.api() == "ncclCommShrink");
  // NCCL finishing late writes into the slot cudrv kept for it, not into a finished call's frame.
  nccl_hook<void(ncclComm*)>("fake_nccl_settle")(comm.native_handle());
  CHECK(comm.async_error() == nccl::result::success);
  set_pending(3);
  // A window on a non-blocking communicator: NCCL answers ncclSuccess and writes the window when its job
  // ends (found on H200s: read at once, it was empty and NCCL's late write hit freed memory).
  cudrv::device_span<float> data(0x7f0000000000ULL, 1024);
  {
    nccl::window win(comm, data);
    CHECK(win);
    CHECK(win.native_handle() != nullptr);
    CHECK(comm.async_error() == nccl::result::success);
  }
  set_pending(-1);
  refused_as<nccl::timeout_error>([&] { nccl::window never(comm, data); }, "150 ms");
  nccl_hook<void(ncclComm*)>("fake_nccl_settle")(comm.native_handle());  // the late write lands in the kept slot
  CHECK(comm.async_error() == nccl::result::success);
  set_pending(3);
}

TEST_CASE("fake nccl: what depends on a communicator skips its NCCL call once the communicator is destroyed",
          "[.][fake-nccl]") {
  auto comm = make_comm(0, 2);
  cudrv::device_span<float> data(0x7f0000000000ULL, 1024);
  auto op = std::make_unique<nccl::premul_sum<float>>(comm, 2.0f);
  auto win = std::make_unique<nccl::window>(comm, data, nccl::window_flags::none);
  auto reg = std::make_unique<nccl::registration>(comm, data);
  comm.reset();  // NCCL frees them with the communicator
  clear_log();
  cudrv::test::destruction_error_counter errors;
  op.reset();
  win.reset();
  reg.reset();
  CHECK(nccl_log().empty());  // no call on the freed communicator
  CHECK(errors.count() == 0);
  // A communicator cudrv does not own (a view of a raw handle): its dependents always call NCCL.
  auto owned = make_comm(0, 2);
  ncclComm* raw = owned.release();
  auto view = nccl::communicator_ref::from_native_handle(raw, 0, 2);
  { nccl::premul_sum<float> foreign(view, 3.0f); }
  CHECK(occurrences(nccl_log(), "ncclRedOpDestroy") == 1);
  auto adopted = nccl::communicator::from_native_handle(raw);  // owned again
  CHECK(nccl::group::simulation_supported());
  for (auto f : {nccl::feature::premul_sum, nccl::feature::registration, nccl::feature::memory,
                 nccl::feature::group_simulation, nccl::feature::scalable_init, nccl::feature::windows,
                 nccl::feature::shrink, nccl::feature::all_to_all, nccl::feature::revoke}) {
    CHECK(nccl::supports(f));  // the 2.28 stand-in has every function
  }
}

TEST_CASE("fake nccl: a revoked communicator is aborted, never finalized, and a healthy one is finalized",
          "[.][fake-nccl]") {
  cudrv::test::destruction_error_counter errors;
  {
    auto comm = make_comm(0, 2);
    clear_log();
    comm.revoke();
    CHECK(comm.revoked());
    CHECK(contains(nccl_log(), "ncclCommRevoke 0"));
    auto moved = std::move(comm);  // the state moves with the handle
    CHECK(moved.revoked());
    CHECK_FALSE(comm.revoked());
  }
  CHECK(contains(nccl_log(), "ncclCommAbort"));
  CHECK_FALSE(contains(nccl_log(), "ncclCommFinalize"));
  clear_log();
  { auto comm = make_comm(0, 2); }
  CHECK(contains(nccl_log(), "ncclCommFinalize\nncclCommDestroy"));
  CHECK(errors.count() == 0);
}

TEST_CASE("fake nccl: every wait for a non-blocking communicator is bounded and typed", "[.][fake-nccl]") {
  set_pending(3);  // three polls in progress after each call, then done
  auto comm = make_comm(0, 2, {.blocking = false, .timeout = std::chrono::milliseconds(200)});
  comm.wait_ready();
  cudrv::stream_ref s = cudrv::stream_ref::legacy_default();
  cudrv::device_span<float> data(0x7f0000000000ULL, 64);
  comm.all_reduce(data, nccl::reduction::sum, s);  // answered ncclInProgress: cudrv waits it out
  CHECK(comm.async_error() == nccl::result::success);

  set_pending(-1);  // in progress for ever
  const auto start = std::chrono::steady_clock::now();
  auto e = refused_as<nccl::timeout_error>([&] { comm.all_reduce(data, nccl::reduction::sum, s); }, "200 ms");
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK(e.code() == 7);
  CHECK(e.api() == "ncclAllReduce");
  CHECK(e.timeout() == std::chrono::milliseconds(200));
  CHECK(waited >= std::chrono::milliseconds(200));
  CHECK(waited < std::chrono::seconds(10));
  refused_as<nccl::timeout_error>([&] { comm.wait_ready(std::chrono::milliseconds(20)); }, "20 ms");
  refused_as<cudrv::invalid_argument_error>([&] { comm.wait_ready(std::chrono::milliseconds(0)); }, "less than 1 ms");
  // Inside a group, the outermost end waits for the communicators the group called.
  set_pending(2);
  nccl_hook<void(ncclComm*)>("fake_nccl_settle")(comm.native_handle());
  comm.wait_ready();
  clear_log();
  {
    nccl::group g;
    comm.all_reduce(data, nccl::reduction::sum, s);
    g.end();
  }
  CHECK(comm.async_error() == nccl::result::success);  // the end waited until the communicator was quiet
  // The owner's reset of a communicator stuck in ncclCommFinalize aborts it at the bound, reported.
  set_pending(-1);
  cudrv::test::destruction_error_counter errors;
  comm.reset();
  CHECK(contains(nccl_log(), "ncclCommFinalize\nncclCommAbort"));
  CHECK(errors.count() == 1);
  CHECK(contains(errors.messages(), "still in progress after 200 ms"));
  set_pending(3);
  refused_as<cudrv::invalid_argument_error>([&] { (void)make_comm(0, 2, {.timeout = std::chrono::milliseconds(0)}); },
                                            "less than 1 ms");
}

TEST_CASE("fake nccl: the uneven all-to-all sends and receives each non-empty block at its address in one group",
          "[.][fake-nccl]") {
  auto comm = make_comm(1, 3);
  cudrv::stream_ref s = cudrv::stream_ref::legacy_default();
  const CUdeviceptr in = 0x7f0000000000ULL;
  const CUdeviceptr out = 0x7f1000000000ULL;
  cudrv::device_span<const std::int32_t> send(in, 10);
  cudrv::device_span<std::int32_t> recv(out, 12);
  const std::vector<std::size_t> sc{3, 0, 5}, so{0, 3, 5}, rc{2, 4, 1}, ro{10, 0, 5};
  clear_log();
  comm.all_to_all_v(send, sc, so, recv, rc, ro, s);
  const std::string log = nccl_log();
  auto addr = [](CUdeviceptr p) { return hex_address(p); };
  CHECK(contains(log, "ncclGroupStart\nncclSend " + addr(in) + " 3 to 0\nncclSend " + addr(in + 5 * 4) +
                          " 5 to 2\nncclRecv " + addr(out + 10 * 4) + " 2 from 0\nncclRecv " + addr(out) +
                          " 4 from 1\nncclRecv " + addr(out + 5 * 4) + " 1 from 2\nncclGroupEnd"));
  const std::vector<std::size_t> zero(3, 0);
  clear_log();
  comm.all_to_all_v(send, zero, zero, recv, zero, zero, s);  // nothing to exchange on this rank
  CHECK(nccl_log().empty());
  refused_as<cudrv::invalid_argument_error>(
      [&] {
        comm.all_to_all_v(send, std::vector<std::size_t>{1, 1}, so, recv, rc, ro, s);
      },
      "one entry per rank (3)");
  refused_as<cudrv::invalid_argument_error>(
      [&] {
        comm.all_to_all_v(send, std::vector<std::size_t>{3, 0, 6}, so, recv, rc, ro, s);
      },
      "send block of rank 2 (6 elements at offset 5)");
  refused_as<cudrv::invalid_argument_error>(
      [&] {
        comm.all_to_all_v(send, sc, std::vector<std::size_t>{0, 3, SIZE_MAX}, recv, rc, ro, s);
      },
      "outside the send buffer");
  refused_as<cudrv::invalid_argument_error>(
      [&] {
        comm.all_to_all_v(send, sc, so, recv, rc, std::vector<std::size_t>{10, 0, 3}, s);
      },
      "overlap");
  CHECK(nccl_log().empty());
}

TEST_CASE("fake nccl: all_to_all, gather and scatter pass their per-rank counts and roots", "[.][fake-nccl]") {
  auto comm = make_comm(1, 4);
  cudrv::stream_ref s = cudrv::stream_ref::legacy_default();
  cudrv::device_span<float> a(0x7f0000000000ULL, 64);
  cudrv::device_span<float> b(0x7f1000000000ULL, 64);
  clear_log();
  comm.all_to_all(a, b, s);
  CHECK(contains(nccl_log(), " 16\n"));
  refused_as<cudrv::invalid_argument_error>([&] { comm.all_to_all(a, a.subspan(16), s); }, "differ in size");
  refused_as<cudrv::invalid_argument_error>([&] { comm.all_to_all(a.first(32), a.subspan(16, 32), s); }, "overlap");
  refused_as<cudrv::invalid_argument_error>([&] { comm.all_to_all(a.first(30), b.first(30), s); }, "4 equal parts");
  clear_log();
  comm.gather(a.first(16), cudrv::device_span<float>{}, 0, s);  // not the root: no destination needed
  CHECK(contains(nccl_log(), "ncclGather"));
  CHECK(contains(nccl_log(), " 16 root 0"));
  refused_as<cudrv::invalid_argument_error>([&] { comm.gather(a.first(16), b.first(32), 1, s); }, "4 (ranks) times");
  comm.gather(b, 3, s);  // in place: rank 1 sends part 1
  CHECK(contains(nccl_log(),
                 "ncclGather " + hex_address(b.data() + 16 * 4) + " " + hex_address(b.data()) + " 16 root 3"));
  clear_log();
  comm.scatter(cudrv::device_span<const float>{}, b.first(8), 2, s);
  CHECK(contains(nccl_log(), " 8 root 2"));
  comm.scatter(b, 1, s);  // in place on the root: receives its own part
  CHECK(contains(nccl_log(),
                 "ncclScatter " + hex_address(b.data()) + " " + hex_address(b.data() + 16 * 4) + " 16 root 1"));
  refused_as<cudrv::invalid_argument_error>([&] { comm.scatter(a.first(10), b.first(8), 1, s); }, "4 (ranks) times");
  refused_as<cudrv::invalid_argument_error>([&] { comm.scatter(a, b.first(16), 4, s); }, "root 4");
}

TEST_CASE("fake nccl: a premultiplied sum is made once, used on its communicator only, and destroyed",
          "[.][fake-nccl]") {
  auto comm = make_comm(0, 2);
  auto other = make_comm(1, 2);
  cudrv::stream_ref s = cudrv::stream_ref::legacy_default();
  cudrv::device_span<float> data(0x7f0000000000ULL, 8);
  clear_log();
  {
    nccl::premul_sum<float> half(comm, 0.5f);
    REQUIRE(half);
    CHECK(half.communicator_handle() == comm.native_handle());
    CHECK(contains(nccl_log(), "host 0.500000"));
    comm.all_reduce(data, half, s);
    CHECK(contains(nccl_log(), "op " + std::to_string(half.native_handle())));
    comm.reduce_scatter(data, half, s);
    comm.reduce(data, half, 1, s);
    refused_as<cudrv::invalid_argument_error>([&] { other.all_reduce(data, half, s); }, "another communicator");
    nccl::premul_sum<float> moved = std::move(half);
    refused_as<cudrv::invalid_argument_error>([&] { comm.all_reduce(data, half, s); }, "empty");
    cudrv::device_span<const float> scalar(0x7f2000000000ULL, 1);
    nccl::premul_sum<float> on_device(comm, scalar);
    CHECK(contains(nccl_log(), "device " + hex_address(scalar.data())));
    refused_as<cudrv::invalid_argument_error>(
        [&] { nccl::premul_sum<float> two(comm, cudrv::device_span<const float>(scalar.data(), 2)); }, "one element");
  }
  CHECK(occurrences(nccl_log(), "ncclRedOpDestroy") == 2);
}

TEST_CASE("fake nccl: NCCL's memory and windows are allocated, registered and released in order", "[.][fake-nccl]") {
  auto comm = make_comm(0, 2);
  clear_log();
  const CUcontext before = cudrv::test::raw_current_context();
  {
    nccl::buffer<float> buf(fake_device(), 1000);
    CHECK(buf.size() == 1000);
    CHECK(buf.size_bytes() == 4000);
    CHECK(buf.device() == fake_device());
    CHECK(cudrv::test::raw_current_context() == before);  // the caller's context is put back
    CHECK(contains(nccl_log(), "ncclMemAlloc 4000 at " + hex_address(buf.data())));
    {
      nccl::window win(comm, buf);
      REQUIRE(win);
      CHECK(contains(nccl_log(), "ncclCommWindowRegister " + hex_address(buf.data()) + " 4000 flags 1"));
      nccl::window plain(comm, buf.view().subspan(1), nccl::window_flags::none);  // unaligned is fine unless symmetric
      CHECK(contains(nccl_log(), "flags 0"));
      refused_as<cudrv::invalid_argument_error>([&] { nccl::window bad(comm, buf.view().subspan(1)); },
                                                "aligned to 4096");
      {
        nccl::group g;  // NCCL would write the window only at the group's end
        refused_as<cudrv::invalid_argument_error>([&] { nccl::window in_group(comm, buf); },
                                                  "inside a cudrv::nccl::group");
        g.end();
      }
    }
    CHECK(occurrences(nccl_log(), "ncclCommWindowDeregister") == 2);
    CUdeviceptr p = buf.release();
    CHECK(buf.empty());
    auto again = nccl::buffer<float>::from_native_handle(p, 1000, fake_device());
    CHECK(again.data() == p);
    CHECK_FALSE(contains(nccl_log(), "ncclMemFree"));
  }
  CHECK(occurrences(nccl_log(), "ncclMemFree") == 1);
  refused_as<cudrv::invalid_argument_error>([&] { nccl::buffer<float> none(fake_device(), 0); }, "empty");
}

TEST_CASE("fake nccl: group simulation ends the group without launching, and scalable init passes its ids",
          "[.][fake-nccl]") {
  auto comm = make_comm(0, 2);
  cudrv::stream_ref s = cudrv::stream_ref::legacy_default();
  cudrv::device_span<float> data(0x7f0000000000ULL, 8);
  clear_log();
  {
    nccl::group g;
    comm.all_reduce(data, nccl::reduction::sum, s);
    CHECK(g.simulate_end() == 42.5f);
    CHECK_FALSE(g.is_open());
    refused_as<cudrv::invalid_argument_error>([&] { (void)g.simulate_end(); }, "already ended");
  }
  CHECK(contains(nccl_log(), "ncclGroupSimulateEnd"));
  CHECK_FALSE(contains(nccl_log(), "ncclGroupEnd"));
  {
    nccl::group outer;
    nccl::group inner;
    refused_as<cudrv::invalid_argument_error>([&] { (void)inner.simulate_end(); }, "nested");
  }
  std::vector<nccl::unique_id> ids(3, nccl::unique_id::generate());
  auto scalable = nccl::communicator::init_rank_scalable(ids, 4, 2, fake_device());
  CHECK(contains(nccl_log(), "ncclCommInitRankScalable 2/4 ids 3"));
  CHECK(scalable.rank() == 2);
  CHECK(scalable.size() == 4);
  refused_as<cudrv::invalid_argument_error>(
      [&] { (void)nccl::communicator::init_rank_scalable({}, 4, 2, fake_device()); }, "0 unique ids");
  refused_as<cudrv::invalid_argument_error>(
      [&] { (void)nccl::communicator::init_rank_scalable(std::vector<nccl::unique_id>(5), 4, 2, fake_device()); },
      "5 unique ids");
}

TEST_CASE("fake nccl 2.18: every call of a newer NCCL is refused with the version that has it", "[.][fake-nccl-old]") {
  REQUIRE(nccl::version() == 21805);
  auto comm = make_comm(0, 2);
  cudrv::stream_ref s = cudrv::stream_ref::legacy_default();
  cudrv::device_span<float> a(0x7f0000000000ULL, 8);
  cudrv::device_span<float> b(0x7f1000000000ULL, 8);
  auto needs = [](const std::string& version, auto&& f) {
    auto e = refused_as<cudrv::not_supported_error>(f, "it needs NCCL " + version + " or newer");
    CHECK(e.source() == cudrv::error_source::nccl);
  };
  needs("2.27", [&] { (void)comm.shrink(std::array{1}); });
  needs("2.28.9", [&] { comm.revoke(); });
  CHECK_FALSE(comm.revoked());
  needs("2.28", [&] { comm.all_to_all(a, b, s); });
  needs("2.28", [&] { comm.gather(a.first(4), b, 0, s); });
  needs("2.28", [&] { comm.scatter(a, b.first(4), 0, s); });
  needs("2.19", [&] { nccl::buffer<float> m(fake_device(), 4); });
  needs("2.27", [&] { nccl::window w(comm, a, nccl::window_flags::none); });
  needs("2.19", [&] { nccl::registration r(comm, a); });
  needs("2.23",
        [&] { (void)nccl::communicator::init_rank_scalable(std::vector<nccl::unique_id>(1), 2, 0, fake_device()); });
  {
    nccl::group g;
    CHECK_FALSE(nccl::group::simulation_supported());  // ask before queuing: the calls would be launched
    CHECK_FALSE(nccl::supports(nccl::feature::revoke));
    CHECK_FALSE(nccl::supports(nccl::feature::windows));
    CHECK(nccl::supports(nccl::feature::premul_sum));  // 2.11's
    needs("2.22", [&] { (void)g.simulate_end(); });
  }
  // What 2.18 has still works.
  nccl::premul_sum<float> scaled(comm, 2.0f);
  comm.all_reduce(a, b, scaled, s);
  CHECK(contains(nccl_log(), "ncclAllReduce"));
}
