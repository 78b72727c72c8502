// Checkpoint and restore of another CUDA process (<cudrv/process_checkpoint.hpp>): the state machine of
// cuda.h's CUDA_CHECKPOINT group, checked before each transition.
#include "cudrv/process_checkpoint.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <string>
#include <vector>

#include "driver/driver_api.hpp"

namespace cudrv {

const char* to_string(process_state state) noexcept {
  switch (state) {
    case process_state::running: return "running";
    case process_state::locked: return "locked";
    case process_state::checkpointed: return "checkpointed";
    case process_state::failed: return "failed";
  }
  return "unknown";
}

process_state_error::process_state_error(error_source source, const std::string& api, int pid, process_state current,
                                         process_state required)
    : error(source, CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE",
            "process " + std::to_string(pid) + " is " + to_string(current) + "; " + api + " needs it " +
                to_string(required),
            api, "pid " + std::to_string(pid)),
      current_(current),
      required_(required) {}

namespace {

#if CUDRV_HAS_PROCESS_CHECKPOINT
static_assert(static_cast<int>(process_state::running) == CU_PROCESS_STATE_RUNNING);
static_assert(static_cast<int>(process_state::locked) == CU_PROCESS_STATE_LOCKED);
static_assert(static_cast<int>(process_state::checkpointed) == CU_PROCESS_STATE_CHECKPOINTED);
static_assert(static_cast<int>(process_state::failed) == CU_PROCESS_STATE_FAILED);

std::string pid_context(int pid) { return "pid " + std::to_string(pid); }

process_state read_state(int pid) {
  CUprocessState state = CU_PROCESS_STATE_RUNNING;
  detail::check(detail::drv::cuCheckpointProcessGetState(pid, &state), "cuCheckpointProcessGetState",
                [&] { return pid_context(pid); });
  return static_cast<process_state>(state);
}

// Refuses (before the driver) an operation whose required state is not the process's state now.
void require_state(int pid, const char* api, process_state required) {
  const process_state now = read_state(pid);
  if (now != required) {
    throw process_state_error(error_source::cudrv, api, pid, now, required);
  }
}

// Checks a transition's status: the driver's ILLEGAL_STATE (the state changed since require_state read it)
// becomes a process_state_error with the state read again.
void check_transition(CUresult status, const char* driver_api, const char* api, int pid, process_state required) {
  if (status == CUDA_ERROR_ILLEGAL_STATE) {
    process_state now = process_state::failed;
    try {
      now = read_state(pid);
    } catch (const error&) {
      // keep "failed": the state cannot be read either
    }
    throw process_state_error(error_source::driver, api, pid, now, required);
  }
  detail::check(status, driver_api, [&] { return pid_context(pid); });
}

void refuse_own_pid(int pid, const char* api) {
  if (pid == static_cast<int>(getpid())) {
    throw invalid_argument_error(api, "process " + std::to_string(pid) +
                                          " is this process: locking it would block its own CUDA calls; "
                                          "checkpoint another process");
  }
}

// The driver's lock call: false when the timeout passed (CUDA_ERROR_NOT_READY), the process still running.
bool lock_with_timeout(int pid, unsigned timeout_ms, const char* api) {
  refuse_own_pid(pid, api);
  require_state(pid, api, process_state::running);
  CUcheckpointLockArgs args{};
  args.timeoutMs = timeout_ms;
  const CUresult status = detail::drv::cuCheckpointProcessLock(pid, &args);
  if (status == CUDA_ERROR_NOT_READY && timeout_ms != 0) {
    return false;
  }
  check_transition(status, "cuCheckpointProcessLock", api, pid, process_state::running);
  return true;
}
#else
[[noreturn]] void unsupported(const char* api) {
  throw not_supported_error(error_source::cudrv, detail::call_requires_newer_driver,
                            error_name(detail::call_requires_newer_driver),
                            "checkpoint and restore need cudrv built with CUDA 12.8 or newer headers", api, {});
}
#endif

unsigned saturated_timeout_ms(std::chrono::milliseconds timeout, const char* api) {
  if (timeout.count() < 1) {
    throw invalid_argument_error(api, "the lock timeout is " + std::to_string(timeout.count()) +
                                          " ms; it must be at least 1 ms (lock() waits without a timeout)");
  }
  if (static_cast<unsigned long long>(timeout.count()) > UINT_MAX) {
    return UINT_MAX;
  }
  return static_cast<unsigned>(timeout.count());
}

}  // namespace

process_checkpoint::process_checkpoint(int pid) : pid_(pid) {
  constexpr const char* api = "cudrv::process_checkpoint";
  if (pid <= 0) {
    throw invalid_argument_error(api, "the process id is " + std::to_string(pid) + "; it must be positive");
  }
  if (kill(pid, 0) != 0 && errno == ESRCH) {
    throw invalid_argument_error(api, "no process has the id " + std::to_string(pid));
  }
}

bool process_checkpoint::supported() noexcept {
#if CUDRV_HAS_PROCESS_CHECKPOINT
  try {
    (void)detail::drv::cuCheckpointProcessGetState_entry.get();
    (void)detail::drv::cuCheckpointProcessGetRestoreThreadId_entry.get();
    (void)detail::drv::cuCheckpointProcessLock_entry.get();
    (void)detail::drv::cuCheckpointProcessCheckpoint_entry.get();
    (void)detail::drv::cuCheckpointProcessRestore_entry.get();
    (void)detail::drv::cuCheckpointProcessUnlock_entry.get();
    return true;
  } catch (...) {
    return false;
  }
#else
  return false;
#endif
}

#if CUDRV_HAS_PROCESS_CHECKPOINT

process_state process_checkpoint::state() const { return read_state(pid_); }

int process_checkpoint::restore_thread_id() const {
  int tid = 0;
  detail::check(detail::drv::cuCheckpointProcessGetRestoreThreadId(pid_, &tid), "cuCheckpointProcessGetRestoreThreadId",
                [&] { return pid_context(pid_); });
  return tid;
}

void process_checkpoint::lock() const { (void)lock_with_timeout(pid_, 0, "cudrv::process_checkpoint::lock"); }

bool process_checkpoint::try_lock_for(std::chrono::milliseconds timeout) const {
  constexpr const char* api = "cudrv::process_checkpoint::try_lock_for";
  return lock_with_timeout(pid_, saturated_timeout_ms(timeout, api), api);
}

void process_checkpoint::checkpoint() const {
  constexpr const char* api = "cudrv::process_checkpoint::checkpoint";
  require_state(pid_, api, process_state::locked);
  CUcheckpointCheckpointArgs args{};
  check_transition(detail::drv::cuCheckpointProcessCheckpoint(pid_, &args), "cuCheckpointProcessCheckpoint", api, pid_,
                   process_state::locked);
}

void process_checkpoint::restore() const {
  constexpr const char* api = "cudrv::process_checkpoint::restore";
  require_state(pid_, api, process_state::checkpointed);
  CUcheckpointRestoreArgs args{};
  check_transition(detail::drv::cuCheckpointProcessRestore(pid_, &args), "cuCheckpointProcessRestore", api, pid_,
                   process_state::checkpointed);
}

void process_checkpoint::restore(std::span<const gpu_remap> remap) const {
  constexpr const char* api = "cudrv::process_checkpoint::restore";
  if (remap.empty() || remap.size() > UINT_MAX) {
    throw invalid_argument_error(api, "the GPU remap has " + std::to_string(remap.size()) +
                                          " pairs; it must name every GPU the process was checkpointed on "
                                          "(use restore() to restore onto the same GPUs)");
  }
#if CUDA_VERSION >= 13000  // GPU remapping in CUcheckpointRestoreArgs (checked in CUDA 13.0's cuda.h)
  std::vector<CUcheckpointGpuPair> pairs(remap.size());
  for (std::size_t i = 0; i < remap.size(); ++i) {
    std::memcpy(pairs[i].oldUuid.bytes, remap[i].checkpointed.bytes.data(), sizeof(pairs[i].oldUuid.bytes));
    std::memcpy(pairs[i].newUuid.bytes, remap[i].restore_onto.bytes.data(), sizeof(pairs[i].newUuid.bytes));
  }
  require_state(pid_, api, process_state::checkpointed);
  CUcheckpointRestoreArgs args{};
  args.gpuPairs = pairs.data();
  args.gpuPairsCount = static_cast<unsigned>(pairs.size());
  check_transition(detail::drv::cuCheckpointProcessRestore(pid_, &args), "cuCheckpointProcessRestore", api, pid_,
                   process_state::checkpointed);
#else
  throw not_supported_error(error_source::cudrv, CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED",
                            "cudrv was built with CUDA " + std::to_string(CUDA_VERSION) +
                                " headers, whose cuCheckpointProcessRestore takes no GPU remap (CUDA 13.0)",
                            api, {});
#endif
}

void process_checkpoint::unlock() const {
  constexpr const char* api = "cudrv::process_checkpoint::unlock";
  require_state(pid_, api, process_state::locked);
  CUcheckpointUnlockArgs args{};
  check_transition(detail::drv::cuCheckpointProcessUnlock(pid_, &args), "cuCheckpointProcessUnlock", api, pid_,
                   process_state::locked);
}

#else  // cudrv built with headers older than CUDA 12.8

process_state process_checkpoint::state() const { unsupported("cuCheckpointProcessGetState"); }
int process_checkpoint::restore_thread_id() const { unsupported("cuCheckpointProcessGetRestoreThreadId"); }
void process_checkpoint::lock() const { unsupported("cuCheckpointProcessLock"); }
bool process_checkpoint::try_lock_for(std::chrono::milliseconds timeout) const {
  (void)saturated_timeout_ms(timeout, "cudrv::process_checkpoint::try_lock_for");
  unsupported("cuCheckpointProcessLock");
}
void process_checkpoint::checkpoint() const { unsupported("cuCheckpointProcessCheckpoint"); }
void process_checkpoint::restore() const { unsupported("cuCheckpointProcessRestore"); }
void process_checkpoint::restore(std::span<const gpu_remap>) const { unsupported("cuCheckpointProcessRestore"); }
void process_checkpoint::unlock() const { unsupported("cuCheckpointProcessUnlock"); }

#endif

process_checkpoint_lock::process_checkpoint_lock(process_checkpoint process) : process_(process) { process_.lock(); }

process_checkpoint_lock::process_checkpoint_lock(process_checkpoint process, std::chrono::milliseconds timeout)
    : process_(process) {
  if (!process_.try_lock_for(timeout)) {
    throw error(error_source::driver, CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY",
                "the process did not lock within " + std::to_string(timeout.count()) + " ms; it is still running",
                "cuCheckpointProcessLock", "pid " + std::to_string(process_.pid()));
  }
}

process_checkpoint_lock::~process_checkpoint_lock() {
  try {
    process_state now = process_.state();
    if (now == process_state::checkpointed) {
      process_.restore();
      now = process_state::locked;
    }
    if (now == process_state::locked) {
      process_.unlock();
    }
  } catch (const error& e) {
    get_destruction_error_handler()(e);
  } catch (...) {
    detail::report_destruction_error(CUDA_ERROR_UNKNOWN, "cudrv::process_checkpoint_lock");
  }
}

}  // namespace cudrv
