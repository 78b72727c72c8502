/// @file stream_memory_ops.hpp
/// @brief Stream memory operations: a stream that waits until a 32- or 64-bit flag in memory meets a
/// condition, or writes such a flag, in stream order (`cuStreamWaitValue32/64`,
/// `cuStreamWriteValue32/64`, `cuStreamBatchMemOp`), the support queries, and the typed operations
/// of a batch (@ref cudrv::stream_memory_op). The graph nodes are in graph.hpp.
///
/// Read the page "Memory operations" before enqueueing a wait: a kernel whose code is loaded lazily
/// (at its first launch) can deadlock against a stream that is blocked in a wait.
///
/// Layer: streams (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <type_traits>

#include "cudrv/device.hpp"
#include "cudrv/span.hpp"
#include "cudrv/stream.hpp"

namespace cudrv {

/// @brief The types a stream memory operation reads or writes: a 32-bit or a 64-bit unsigned flag.
template <class T>
concept stream_flag_value = std::same_as<T, std::uint32_t> || std::same_as<T, std::uint64_t>;

/// @brief When a wait is satisfied (`CUstreamWaitValue_flags`), for a flag `*addr` and the operand `value`.
enum class wait_condition : unsigned {
  geq = CU_STREAM_WAIT_VALUE_GEQ,  ///< `(int32_t)(*addr - value) >= 0` (int64_t for 64 bits): a cyclic ≥ that survives
                                   ///< wrap-around.
  eq = CU_STREAM_WAIT_VALUE_EQ,        ///< `*addr == value`.
  bit_and = CU_STREAM_WAIT_VALUE_AND,  ///< `(*addr & value) != 0`.
  nor = CU_STREAM_WAIT_VALUE_NOR,      ///< `~(*addr | value) != 0` (where @ref stream_memory_op_support::wait_nor).
};

/// @brief The options of a wait.
struct wait_options {
  wait_condition condition = wait_condition::geq;  ///< When the wait is satisfied.
  /// @brief Follow the wait with a flush of outstanding remote (RDMA) writes, so that work after the wait
  /// sees the writes that arrived before the flag did (`CU_STREAM_WAIT_VALUE_FLUSH`, where
  /// @ref stream_memory_op_support::flush_remote_writes).
  bool flush_remote_writes = false;
};

/// @brief The scope of a memory barrier operation (`CUstreamMemoryBarrier_flags`).
enum class memory_barrier_scope : unsigned {
  system = CU_STREAM_MEMORY_BARRIER_TYPE_SYS,  ///< Orders memory operations for the whole system.
  device = CU_STREAM_MEMORY_BARRIER_TYPE_GPU,  ///< Orders memory operations for the device only.
};

/// @brief What a device supports among the optional stream memory operations. 32-bit waits and writes
/// need no query: every device of a CUDA 12 driver supports them.
struct stream_memory_op_support {
  bool wait_write_64 = false;  ///< 64-bit waits and writes (`CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS`).
  bool wait_nor = false;       ///< @ref wait_condition::nor (`CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR`).
  bool flush_remote_writes =
      false;  ///< @ref wait_options::flush_remote_writes and
              ///< @ref stream_memory_op::flush_remote_writes (`CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES`).
};

/// @brief The optional stream memory operations device @p dev supports (three attribute queries).
[[nodiscard]] stream_memory_op_support query_stream_memory_op_support(const device& dev);

/// @brief One operation of a batch (`CUstreamBatchMemOpParams`): a wait, a write, a flush of remote
/// writes or a memory barrier. Built by the static functions, which check the flag's view; trivially
/// copyable.
/// @code
/// const cudrv::stream_memory_op ops[] = {
///     cudrv::stream_memory_op::wait(ready.view(), 1u, {.condition = cudrv::wait_condition::eq}),
///     cudrv::stream_memory_op::write(taken.view(), 1u),
/// };
/// cudrv::batch_memory_ops(stream, ops);
/// @endcode
class stream_memory_op {
 public:
  /// @brief Waits until the first element of @p flag meets @p options.condition with @p value.
  /// @throws invalid_argument_error when @p flag is empty, null or not aligned to its width
  template <class T>
  requires stream_flag_value<std::remove_const_t<T>>
  [[nodiscard]] static stream_memory_op wait(device_span<T> flag, std::type_identity_t<std::remove_const_t<T>> value,
                                             wait_options options = {}) {
    return make_wait(flag.data(), flag.size(), sizeof(T), value, options);
  }
  /// @brief Writes @p value to the first element of @p flag (after the work before it on the stream,
  /// with a memory fence before the write).
  /// @throws invalid_argument_error when @p flag is empty, null or not aligned to its width
  template <class T>
  requires stream_flag_value<T>
  [[nodiscard]] static stream_memory_op write(device_span<T> flag, std::type_identity_t<T> value) {
    return make_write(flag.data(), flag.size(), sizeof(T), value);
  }
  /// @brief Flushes outstanding remote writes (`CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES`).
  [[nodiscard]] static stream_memory_op flush_remote_writes() noexcept;
  /// @brief A memory barrier of scope @p scope (`CU_STREAM_MEM_OP_BARRIER`).
  [[nodiscard]] static stream_memory_op barrier(memory_barrier_scope scope = memory_barrier_scope::system) noexcept;

  /// @brief The driver's description of the operation.
  [[nodiscard]] const CUstreamBatchMemOpParams& native() const noexcept { return params_; }

 private:
  stream_memory_op() noexcept : params_{} {}
  static stream_memory_op make_wait(CUdeviceptr address, std::size_t count, std::size_t width, std::uint64_t value,
                                    wait_options options);
  static stream_memory_op make_write(CUdeviceptr address, std::size_t count, std::size_t width, std::uint64_t value);
  CUstreamBatchMemOpParams params_;
};

namespace detail {
/// @brief Enqueues one wait or write through cuStreamWait/WriteValue32/64 (internal).
void enqueue_memory_op(CUstream stream, const stream_memory_op& op);
/// @brief Enqueues a batch through cuStreamBatchMemOp (internal).
void enqueue_memory_ops(CUstream stream, const stream_memory_op* ops, std::size_t count);
/// @brief Throws the typed error for a failed stream memory operation (internal): not_supported_error
/// naming the device attribute when @p dev lacks an optional operation among @p ops, else the driver's error.
[[noreturn]] void throw_memory_op_error(CUresult status, const char* api, const device* dev,
                                        const stream_memory_op* ops, std::size_t count);
}  // namespace detail

/// @brief Makes @p s wait, without blocking the host, until the first element of @p flag meets
/// @p options.condition with @p value (`cuStreamWaitValue32` / `cuStreamWaitValue64`). Work enqueued
/// on @p s after the wait starts once it is satisfied. The flag may be device memory, or pinned or
/// registered host memory (through its device view) that the host or another device writes.
///
/// Warm up (launch once, or load) every kernel that will be launched while the wait blocks: see the
/// lazy-loading deadlock on the page "Memory operations".
/// @code
/// cudrv::wait_value(consumer, flag.view(), 1u);                 // stream B waits for flag >= 1
/// cudrv::launch(consumer, cfg, use, data.get());                 // runs after the release
/// cudrv::launch(producer, cfg, make, data.get());
/// cudrv::write_value(producer, flag.view(), 1u);                 // stream A releases B
/// @endcode
/// @throws invalid_argument_error when @p flag is empty, null or misaligned
/// @throws not_supported_error when the device lacks 64-bit operations, the NOR condition or flushes
template <class T>
requires stream_flag_value<std::remove_const_t<T>>
void wait_value(stream_ref s, device_span<T> flag, std::type_identity_t<std::remove_const_t<T>> value,
                wait_options options = {}) {
  detail::enqueue_memory_op(s.native_handle(), stream_memory_op::wait(flag, value, options));
}

/// @brief Writes @p value to the first element of @p flag in stream order on @p s, after a memory fence
/// (`cuStreamWriteValue32` / `cuStreamWriteValue64`): whoever sees the flag also sees the writes of
/// the work before it.
/// @throws invalid_argument_error when @p flag is empty, null or misaligned
/// @throws not_supported_error when the device lacks 64-bit operations
template <class T>
requires stream_flag_value<T>
void write_value(stream_ref s, device_span<T> flag, std::type_identity_t<T> value) {
  detail::enqueue_memory_op(s.native_handle(), stream_memory_op::write(flag, value));
}

/// @brief Enqueues the operations @p ops on @p s in one call, in order (`cuStreamBatchMemOp`; at most
/// 255 operations: the driver takes fewer than 256).
/// @throws invalid_argument_error for an empty list or more than 255 operations
/// @throws not_supported_error when the device lacks an optional operation used
inline void batch_memory_ops(stream_ref s, std::span<const stream_memory_op> ops) {
  detail::enqueue_memory_ops(s.native_handle(), ops.data(), ops.size());
}

/// @brief As the span form, for a braced list.
inline void batch_memory_ops(stream_ref s, std::initializer_list<stream_memory_op> ops) {
  detail::enqueue_memory_ops(s.native_handle(), ops.begin(), ops.size());
}

}  // namespace cudrv
