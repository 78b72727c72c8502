/// @file process_checkpoint.hpp
/// @brief Checkpoint and restore of another CUDA process's GPU state, by process id
/// (@ref cudrv::process_checkpoint, @ref cudrv::process_checkpoint_lock; CUDA 12.8+ driver, Linux).
///
/// Opt-in (not in the umbrella): process-level tooling that most programs never use. See
/// @ref process-checkpoint for a worked example.
///
/// Layer: driver (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <chrono>  // the lock timeout
#include <span>
#include <string>

#include "cudrv/device.hpp"
#include "cudrv/error.hpp"

namespace cudrv {

/// @brief The checkpoint state of a CUDA process, as `cuCheckpointProcessGetState` reports it (the values
/// of the driver's `CUprocessState`).
enum class process_state : int {
  running = 0,       ///< The process runs normally (`CU_PROCESS_STATE_RUNNING`).
  locked = 1,        ///< Its CUDA calls are blocked (`CU_PROCESS_STATE_LOCKED`); also the state after a restore.
  checkpointed = 2,  ///< Its device memory is saved in host memory and released (`CU_PROCESS_STATE_CHECKPOINTED`).
  failed = 3,        ///< A checkpoint or restore failed uncorrectably (`CU_PROCESS_STATE_FAILED`).
};

/// @brief The name of a state ("running", "locked", "checkpointed", "failed"; "unknown" for another value).
[[nodiscard]] const char* to_string(process_state state) noexcept;

/// @brief A checkpoint operation was asked of a process in a state that does not allow it.
///
/// cudrv reads the state from the driver before each transition and throws this error without calling the
/// transition (@ref error::source is @ref error_source::cudrv); when the state changed between the read and
/// the call (another tool acted on the process), the driver's `CUDA_ERROR_ILLEGAL_STATE` is thrown as this
/// error too, with the state read again (source @ref error_source::driver). The code is always
/// `CUDA_ERROR_ILLEGAL_STATE`; `what()` names the operation, the current state and the one it needs.
class process_state_error : public error {
 public:
  /// @brief Builds the error.
  /// @param source @ref error_source::cudrv when cudrv refused, @ref error_source::driver when the driver did
  /// @param api the operation, e.g. `cudrv::process_checkpoint::checkpoint`
  /// @param pid the process
  /// @param current the state the process was in
  /// @param required the state the operation needs
  process_state_error(error_source source, const std::string& api, int pid, process_state current,
                      process_state required);
  /// @brief The state the process was in.
  [[nodiscard]] process_state current_state() const noexcept { return current_; }
  /// @brief The state the refused operation needs.
  [[nodiscard]] process_state required_state() const noexcept { return required_; }

 private:
  process_state current_;
  process_state required_;
};

/// @brief A pair of GPUs for a restore onto other devices (`CUcheckpointGpuPair`): the GPU the process was
/// checkpointed on and the GPU of the same chip type to restore it onto, by UUID (@ref device::uuid).
struct gpu_remap {
  device_uuid checkpointed;  ///< The UUID of a GPU the process used when it was checkpointed.
  device_uuid restore_onto;  ///< The UUID of the GPU to restore that GPU's state onto.
};

/// @brief The checkpoint operations on one other CUDA process, named by its process id.
///
/// A process goes running → @ref lock → locked → @ref checkpoint → checkpointed → @ref restore → locked →
/// @ref unlock → running. Each operation first reads the process's state from the driver and refuses, with a
/// @ref process_state_error naming both states, what the driver documents as illegal (checkpoint needs
/// locked, restore needs checkpointed, unlock needs locked, lock needs running), before calling the driver.
/// The state belongs to the process, not to this object: another tool (`cuda-checkpoint`, another thread)
/// can change it between two calls, and the driver's own refusal is then reported the same way.
///
/// The object holds a process id only (no driver resource: it is copyable). While a process is checkpointed
/// its device memory is released, and its CUDA calls block until it is unlocked. The entry points are in
/// CUDA 12.8+ drivers (Linux); an older driver, or cudrv built with an older toolkit, gives
/// @ref not_supported_error (see @ref supported). The target must be a CUDA process: one that initialised
/// CUDA itself (a child that was only forked from a CUDA process is not, see @ref reliability, "fork()").
///
/// @code
/// cudrv::process_checkpoint worker(pid);
/// worker.lock();            // its CUDA calls now block
/// worker.checkpoint();      // its device memory is saved to host memory and released
/// // ... the GPU is free for someone else, or a CPU checkpointer (CRIU) saves the process ...
/// worker.restore();         // its device memory is back, at the same addresses; still locked
/// worker.unlock();          // it runs on
/// @endcode
class process_checkpoint {
 public:
  /// @brief Names process @p pid.
  /// @throws invalid_argument_error when @p pid is not positive or no process has it (`kill(pid, 0)`
  /// answers `ESRCH`)
  explicit process_checkpoint(int pid);

  /// @brief The process id.
  [[nodiscard]] int pid() const noexcept { return pid_; }

  /// @brief Whether the driver has the checkpoint entry points (CUDA 12.8+) and cudrv was built with a
  /// toolkit that declares them. Never throws (false without a driver).
  [[nodiscard]] static bool supported() noexcept;

  /// @brief The process's state now (`cuCheckpointProcessGetState`). It may change right after the call.
  /// @throws not_supported_error without the entry point; @ref error for a pid the driver does not know as a
  /// CUDA process
  [[nodiscard]] process_state state() const;

  /// @brief The id of the thread that restores the process (`cuCheckpointProcessGetRestoreThreadId`), for a
  /// CPU checkpointer that must leave it running.
  [[nodiscard]] int restore_thread_id() const;

  /// @brief Locks the process (`cuCheckpointProcessLock`, no timeout): waits until its CUDA calls in
  /// flight return, then blocks later ones. Needs @ref process_state::running.
  /// @throws process_state_error in another state; invalid_argument_error for this process's own id (its
  /// next cudrv call would block forever)
  void lock() const;

  /// @brief Locks the process, giving up after @p timeout (`CUcheckpointLockArgs::timeoutMs`); the process
  /// then stays running. Needs @ref process_state::running.
  /// @param timeout at least 1 ms; longer than `UINT_MAX` ms (about 49.7 days) saturates to that
  /// @return true when locked, false when the timeout passed (`CUDA_ERROR_NOT_READY`)
  /// @throws invalid_argument_error for a timeout below 1 ms (0 means "wait forever" to the driver: use
  /// @ref lock) or for this process's own id; process_state_error in another state
  [[nodiscard]] bool try_lock_for(std::chrono::milliseconds timeout) const;

  /// @brief Checkpoints the locked process (`cuCheckpointProcessCheckpoint`): its device memory is copied to
  /// host memory and released. Needs @ref process_state::locked.
  void checkpoint() const;

  /// @brief Restores the checkpointed process on the GPUs it used (`cuCheckpointProcessRestore`); it is
  /// locked afterwards. Needs @ref process_state::checkpointed. The driver needs persistence mode, or cuInit
  /// to have run in the calling process (cudrv has run it by then).
  void restore() const;

  /// @brief Restores the checkpointed process onto other GPUs: @p remap must name every GPU it was
  /// checkpointed on (the driver checks that and the chip types).
  /// @throws invalid_argument_error for an empty @p remap or one longer than the driver's count type allows
  void restore(std::span<const gpu_remap> remap) const;

  /// @brief Unlocks the process (`cuCheckpointProcessUnlock`): its CUDA calls go on. Needs
  /// @ref process_state::locked (after @ref lock or @ref restore).
  void unlock() const;

 private:
  int pid_;
};

/// @brief A scope in which another process is locked: the constructor locks it, the destructor brings it
/// back to running, restoring it first if it was left checkpointed.
///
/// A scope guard (it restores a state at the end of a scope and owns nothing): neither copyable nor
/// movable. The destructor reads the state, restores a checkpointed process and unlocks a locked one; a
/// running or failed process is left as it is. It never throws: a failure goes to the destruction handler
/// (@ref set_destruction_error_handler).
///
/// @code
/// {
///   cudrv::process_checkpoint_lock paused(cudrv::process_checkpoint(pid));
///   paused.process().checkpoint();   // the GPU memory of pid is released in this scope
///   run_something_big();
/// }                                  // pid is restored and unlocked, also when run_something_big throws
/// @endcode
class process_checkpoint_lock {
 public:
  /// @brief Locks @p process (@ref process_checkpoint::lock).
  explicit process_checkpoint_lock(process_checkpoint process);
  /// @brief Locks @p process within @p timeout (@ref process_checkpoint::try_lock_for).
  /// @throws error with `CUDA_ERROR_NOT_READY` when the timeout passed (the process stays running)
  process_checkpoint_lock(process_checkpoint process, std::chrono::milliseconds timeout);
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Not copyable: one scope unlocks once.
  process_checkpoint_lock(const process_checkpoint_lock&) = delete;
  /// @brief Not assignable.
  process_checkpoint_lock& operator=(const process_checkpoint_lock&) = delete;
  /// @}
  /// @brief Restores the process if it is checkpointed and unlocks it if it is locked; never throws.
  ~process_checkpoint_lock();

  /// @brief The locked process.
  [[nodiscard]] const process_checkpoint& process() const noexcept { return process_; }

 private:
  process_checkpoint process_;
};

}  // namespace cudrv
