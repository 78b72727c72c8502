// Checkpoint and restore (<cudrv/process_checkpoint.hpp>, issue 34 part 3) against the stand-in driver of
// fake_cuda.cpp, which keeps a checkpoint state per pid with the real driver's transitions: every legal
// transition reaches the driver, every illegal one is refused before it with both states named, a change
// behind cudrv's back is reported the same way, timeouts are bounded, and a driver older than CUDA 12.8
// (the hidden [fake-driver-12.4] case, which ctest runs with FAKE_CUDA_DRIVER_VERSION set) is refused.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cudrv/process_checkpoint.hpp>
#include <functional>
#include <string>
#include <vector>

#include "fake_driver/fake_hooks.hpp"
#include "support/test_support.hpp"

using cudrv::process_state;
using cudrv::test::catch_as;
using cudrv::test::contains;

namespace {

// Another process that exists for the whole test: the one that started this one.
int other_pid() { return static_cast<int>(getppid()); }

process_state fake_state(int pid) {
  return static_cast<process_state>(cudrv::test::fake_hook<int(int)>("fake_cuda_process_state")(pid));
}
void set_fake_state(int pid, process_state s) {
  cudrv::test::fake_hook<void(int, int)>("fake_cuda_set_process_state")(pid, static_cast<int>(s));
}
long long counter(const char* name) { return cudrv::test::fake_counter(name); }

// The transitions, with the state each needs and the driver entry point it calls.
struct transition {
  const char* name;
  const char* entry_point;
  process_state required;
  std::function<void(const cudrv::process_checkpoint&)> run;
};

std::vector<transition> transitions() {
  return {
      {"lock", "cuCheckpointProcessLock", process_state::running, [](const auto& p) { p.lock(); }},
      {"try_lock_for", "cuCheckpointProcessLock", process_state::running,
       [](const auto& p) { (void)p.try_lock_for(std::chrono::milliseconds(100)); }},
      {"checkpoint", "cuCheckpointProcessCheckpoint", process_state::locked, [](const auto& p) { p.checkpoint(); }},
      {"restore", "cuCheckpointProcessRestore", process_state::checkpointed, [](const auto& p) { p.restore(); }},
      {"unlock", "cuCheckpointProcessUnlock", process_state::locked, [](const auto& p) { p.unlock(); }},
  };
}

}  // namespace

TEST_CASE("fake driver: process_checkpoint's legal transitions each reach the driver and move the state",
          "[fake-driver][process_checkpoint]") {
  REQUIRE(cudrv::process_checkpoint::supported());
  const int pid = other_pid();
  set_fake_state(pid, process_state::running);
  const cudrv::process_checkpoint p(pid);
  CHECK(p.pid() == pid);
  CHECK(p.state() == process_state::running);

  struct step {
    const char* entry_point;
    std::function<void()> run;
    process_state after;
  };
  const step steps[] = {
      {"cuCheckpointProcessLock", [&] { p.lock(); }, process_state::locked},
      {"cuCheckpointProcessCheckpoint", [&] { p.checkpoint(); }, process_state::checkpointed},
      {"cuCheckpointProcessRestore", [&] { p.restore(); }, process_state::locked},
      {"cuCheckpointProcessUnlock", [&] { p.unlock(); }, process_state::running},
  };
  for (const step& s : steps) {
    INFO(s.entry_point);
    const long long before = counter(s.entry_point);
    s.run();
    CHECK(counter(s.entry_point) == before + 1);
    CHECK(fake_state(pid) == s.after);
    CHECK(p.state() == s.after);
  }
  CHECK(contains(cudrv::test::fake_log(), "cuCheckpointProcessLock pid=" + std::to_string(pid)));
  CHECK(p.restore_thread_id() == pid + 1);  // the fake's restore thread id
}

TEST_CASE("fake driver: every illegal transition is refused before the driver, naming both states",
          "[fake-driver][process_checkpoint]") {
  const int pid = other_pid();
  const cudrv::process_checkpoint p(pid);
  for (const process_state now :
       {process_state::running, process_state::locked, process_state::checkpointed, process_state::failed}) {
    for (const transition& t : transitions()) {
      if (t.required == now) {
        continue;
      }
      INFO(t.name << " from " << cudrv::to_string(now));
      set_fake_state(pid, now);
      const long long before = counter(t.entry_point);
      const auto e = catch_as<cudrv::process_state_error>([&] { t.run(p); });
      REQUIRE(e.has_value());
      CHECK(e->source() == cudrv::error_source::cudrv);
      CHECK(e->result() == CUDA_ERROR_ILLEGAL_STATE);
      CHECK(e->current_state() == now);
      CHECK(e->required_state() == t.required);
      CHECK(contains(e->what(), std::string("is ") + cudrv::to_string(now)));
      CHECK(contains(e->what(), std::string("needs it ") + cudrv::to_string(t.required)));
      CHECK(contains(e->what(), std::to_string(pid)));
      CHECK(counter(t.entry_point) == before);  // the driver never saw it
      CHECK(fake_state(pid) == now);
    }
  }
  set_fake_state(pid, process_state::running);
}

TEST_CASE("fake driver: a state changed behind cudrv's back is the driver's refusal, as process_state_error",
          "[fake-driver][process_checkpoint]") {
  const int pid = other_pid();
  set_fake_state(pid, process_state::running);
  const cudrv::process_checkpoint p(pid);
  // Another tool locks the process between cudrv's read (running) and its lock call.
  cudrv::test::fake_hook<void(int, int)>("fake_cuda_checkpoint_race")(pid, static_cast<int>(process_state::locked));
  const long long before = counter("cuCheckpointProcessLock");
  const auto e = catch_as<cudrv::process_state_error>([&] { p.lock(); });
  REQUIRE(e.has_value());
  CHECK(counter("cuCheckpointProcessLock") == before + 1);  // this time the driver refused
  CHECK(e->source() == cudrv::error_source::driver);
  CHECK(e->current_state() == process_state::locked);  // read again after the refusal
  CHECK(e->required_state() == process_state::running);
  set_fake_state(pid, process_state::running);
}

TEST_CASE("fake driver: lock timeouts are at least 1 ms, saturate at UINT_MAX ms, and a timeout leaves it running",
          "[fake-driver][process_checkpoint]") {
  const int pid = other_pid();
  set_fake_state(pid, process_state::running);
  const cudrv::process_checkpoint p(pid);
  const long long before = counter("cuCheckpointProcessLock");
  for (const auto t : {std::chrono::milliseconds(0), std::chrono::milliseconds(-5)}) {
    const auto e = catch_as<cudrv::invalid_argument_error>([&] { (void)p.try_lock_for(t); });
    REQUIRE(e.has_value());
    CHECK(contains(e->what(), "at least 1 ms"));
  }
  CHECK(counter("cuCheckpointProcessLock") == before);

  CHECK(p.try_lock_for(std::chrono::milliseconds(250)));
  CHECK(contains(cudrv::test::fake_log(), "cuCheckpointProcessLock timeout=250\n"));
  p.unlock();
  CHECK(p.try_lock_for(std::chrono::hours(24 * 365)));  // 3.15e10 ms: more than the driver's 32 bits
  CHECK(contains(cudrv::test::fake_log(), "cuCheckpointProcessLock timeout=4294967295\n"));
  p.unlock();
  p.lock();
  CHECK(contains(cudrv::test::fake_log(), "cuCheckpointProcessLock timeout=0\n"));  // lock(): no timeout
  p.unlock();

  auto busy = cudrv::test::fake_hook<void(int, int)>("fake_cuda_checkpoint_busy");
  busy(pid, 1);
  CHECK_FALSE(p.try_lock_for(std::chrono::milliseconds(10)));
  CHECK(p.state() == process_state::running);
  const auto e =
      catch_as<cudrv::error>([&] { cudrv::process_checkpoint_lock scope(p, std::chrono::milliseconds(10)); });
  REQUIRE(e.has_value());
  CHECK(e->result() == CUDA_ERROR_NOT_READY);
  CHECK(fake_state(pid) == process_state::running);
  busy(pid, 0);
}

TEST_CASE("fake driver: process ids are checked: positive, existing, and not this process for a lock",
          "[fake-driver][process_checkpoint]") {
  for (const int bad : {0, -1}) {
    const auto e = catch_as<cudrv::invalid_argument_error>([&] { cudrv::process_checkpoint p(bad); });
    REQUIRE(e.has_value());
    CHECK(contains(e->what(), "must be positive"));
  }
  const pid_t gone = fork();  // a process that exited and was reaped: its id names no process
  REQUIRE(gone >= 0);
  if (gone == 0) {
    _exit(0);
  }
  REQUIRE(waitpid(gone, nullptr, 0) == gone);
  const auto missing = catch_as<cudrv::invalid_argument_error>([&] { cudrv::process_checkpoint p(gone); });
  REQUIRE(missing.has_value());
  CHECK(contains(missing->what(), "no process has the id " + std::to_string(gone)));

  const cudrv::process_checkpoint self(static_cast<int>(getpid()));
  const long long before = counter("cuCheckpointProcessLock");
  const auto own = catch_as<cudrv::invalid_argument_error>([&] { self.lock(); });
  REQUIRE(own.has_value());
  CHECK(contains(own->what(), "this process"));
  CHECK(counter("cuCheckpointProcessLock") == before);
  CHECK(self.state() == process_state::running);  // reading its own state is fine
}

TEST_CASE("fake driver: a restore onto other GPUs passes every pair, an empty remap is refused",
          "[fake-driver][process_checkpoint]") {
  const int pid = other_pid();
  set_fake_state(pid, process_state::checkpointed);
  const cudrv::process_checkpoint p(pid);
  const auto e = catch_as<cudrv::invalid_argument_error>([&] { p.restore(std::span<const cudrv::gpu_remap>{}); });
  REQUIRE(e.has_value());
  CHECK(fake_state(pid) == process_state::checkpointed);
  const cudrv::device_uuid a = cudrv::device(0).uuid();
  const cudrv::device_uuid b = cudrv::device(1).uuid();
  const cudrv::gpu_remap pairs[] = {{a, b}, {b, a}};
  p.restore(pairs);
  CHECK(contains(cudrv::test::fake_log(), "cuCheckpointProcessRestore pairs=2\n"));
  CHECK(fake_state(pid) == process_state::locked);
  p.unlock();
}

TEST_CASE("fake driver: process_checkpoint_lock brings the process back to running from locked or checkpointed",
          "[fake-driver][process_checkpoint]") {
  const int pid = other_pid();
  set_fake_state(pid, process_state::running);
  const cudrv::process_checkpoint p(pid);
  cudrv::test::destruction_error_counter errors;
  {
    cudrv::process_checkpoint_lock scope(p);
    CHECK(fake_state(pid) == process_state::locked);
    CHECK(scope.process().pid() == pid);
  }
  CHECK(fake_state(pid) == process_state::running);
  const long long restores = counter("cuCheckpointProcessRestore");
  {
    cudrv::process_checkpoint_lock scope(p);
    scope.process().checkpoint();
    CHECK(fake_state(pid) == process_state::checkpointed);
  }
  CHECK(counter("cuCheckpointProcessRestore") == restores + 1);
  CHECK(fake_state(pid) == process_state::running);
  {
    cudrv::process_checkpoint_lock scope(p);
    set_fake_state(pid, process_state::failed);  // left failed: nothing to undo, nothing reported
  }
  CHECK(fake_state(pid) == process_state::failed);
  CHECK(errors.count() == 0);
  set_fake_state(pid, process_state::running);
  static_assert(!std::is_copy_constructible_v<cudrv::process_checkpoint_lock>);
  static_assert(!std::is_move_constructible_v<cudrv::process_checkpoint_lock>);
}

TEST_CASE("fake driver 12.4: checkpoint and restore are not supported, naming the entry point",
          "[.][fake-driver-12.4]") {
  REQUIRE(cudrv::driver::available());
  CHECK_FALSE(cudrv::process_checkpoint::supported());
  const cudrv::process_checkpoint p(other_pid());
  const auto e = catch_as<cudrv::not_supported_error>([&] { (void)p.state(); });
  REQUIRE(e.has_value());
  CHECK(contains(e->what(), "cuCheckpointProcessGetState"));
  CHECK(catch_as<cudrv::not_supported_error>([&] { p.lock(); }).has_value());
}
