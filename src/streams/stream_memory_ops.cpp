// Stream memory operations: waits and writes of 32/64-bit flags in stream order, and their batches.
#include "cudrv/stream_memory_ops.hpp"

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "cudrv/context.hpp"
#include "cudrv/error.hpp"
#include "driver/driver_api.hpp"
#include "streams/stream_support.hpp"

namespace cudrv {

namespace {

// CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS and ..._CAN_USE_STREAM_WAIT_VALUE_NOR, by value: the
// CUDA 12 headers named them with a _V2 suffix for a while.
constexpr auto attribute_64_bit = static_cast<CUdevice_attribute>(122);
constexpr auto attribute_nor = static_cast<CUdevice_attribute>(123);

std::string hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

void check_flag(const char* api, CUdeviceptr address, std::size_t count, std::size_t width) {
  if (count == 0) {
    throw invalid_argument_error(api, "the flag's view is empty: it must hold at least one element");
  }
  if (address == 0) {
    throw invalid_argument_error(api, "the flag's view is null (a moved-from or released buffer?)");
  }
  if (address % width != 0) {
    throw invalid_argument_error(api, "the flag at " + hex(address) + " is not aligned to its width of " +
                                          std::to_string(width) + " bytes");
  }
}

// The operation, address and value of a wait or a write (the two have the same layout).
template <class Params>
void set_operand(Params& p, CUstreamBatchMemOpType operation, CUdeviceptr address, std::size_t width,
                 std::uint64_t value) {
  p.operation = operation;
  p.address = address;
  if (width == 4) {
    p.value = static_cast<cuuint32_t>(value);
  } else {
    p.value64 = value;
  }
}

bool is_64(const CUstreamBatchMemOpParams& p) {
  return p.operation == CU_STREAM_MEM_OP_WAIT_VALUE_64 || p.operation == CU_STREAM_MEM_OP_WRITE_VALUE_64;
}
bool is_wait(const CUstreamBatchMemOpParams& p) {
  return p.operation == CU_STREAM_MEM_OP_WAIT_VALUE_32 || p.operation == CU_STREAM_MEM_OP_WAIT_VALUE_64;
}
bool uses_nor(const CUstreamBatchMemOpParams& p) {
  return is_wait(p) && (p.waitValue.flags & 0x3u) == CU_STREAM_WAIT_VALUE_NOR;
}
bool uses_flush(const CUstreamBatchMemOpParams& p) {
  return p.operation == CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES ||
         (is_wait(p) && (p.waitValue.flags & CU_STREAM_WAIT_VALUE_FLUSH) != 0);
}

std::string describe(const CUstreamBatchMemOpParams& p) {
  switch (p.operation) {
    case CU_STREAM_MEM_OP_WAIT_VALUE_32:
      return "wait on the 32-bit flag at " + hex(p.waitValue.address) + " for " + std::to_string(p.waitValue.value) +
             " (flags " + hex(p.waitValue.flags) + ")";
    case CU_STREAM_MEM_OP_WAIT_VALUE_64:
      return "wait on the 64-bit flag at " + hex(p.waitValue.address) + " for " + std::to_string(p.waitValue.value64) +
             " (flags " + hex(p.waitValue.flags) + ")";
    case CU_STREAM_MEM_OP_WRITE_VALUE_32:
      return "write of " + std::to_string(p.writeValue.value) + " to the 32-bit flag at " + hex(p.writeValue.address);
    case CU_STREAM_MEM_OP_WRITE_VALUE_64:
      return "write of " + std::to_string(p.writeValue.value64) + " to the 64-bit flag at " + hex(p.writeValue.address);
    case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES: return "flush of remote writes";
    case CU_STREAM_MEM_OP_BARRIER: return "memory barrier";
    default: return "operation " + std::to_string(static_cast<int>(p.operation));
  }
}

std::string describe(const stream_memory_op* ops, std::size_t count) {
  if (count == 1) {
    return describe(ops[0].native());
  }
  std::string out = std::to_string(count) + " operations: ";
  for (std::size_t i = 0; i < count && i < 4; ++i) {
    out += (i > 0 ? "; " : "") + describe(ops[i].native());
  }
  return out + (count > 4 ? "; ..." : "");
}

// The device of a stream, for the diagnosis of a failure; nothing when it cannot be found.
std::optional<device> device_of(CUstream stream) noexcept {
  try {
    return stream_ref(stream).device();
  } catch (...) {
    return std::nullopt;
  }
}

// Runs call(), an enqueue on stream. Where the driver answers CUDA_ERROR_INVALID_CONTEXT because the
// stream's context is not current (a driver that checks the flag's address against the current
// context, as the copies do), makes the stream's context current for a second try: the caller named
// that context through the stream. The first try costs nothing extra where the driver needs no context.
template <class Call>
CUresult in_stream_context(CUstream stream, Call&& call) {
  const CUresult status = call();
  if (status != CUDA_ERROR_INVALID_CONTEXT || stream == nullptr || stream == CU_STREAM_LEGACY ||
      stream == CU_STREAM_PER_THREAD) {
    return status;
  }
  CUcontext target = nullptr;
  CUcontext current = nullptr;
  if (detail::drv::cuStreamGetCtx(stream, &target) != CUDA_SUCCESS || target == nullptr ||
      detail::drv::cuCtxGetCurrent(&current) != CUDA_SUCCESS || current == target) {
    return status;
  }
  const context_guard guard{context_ref(target)};
  return call();
}

}  // namespace

stream_memory_op_support query_stream_memory_op_support(const device& dev) {
  stream_memory_op_support s;
  s.wait_write_64 = dev.attribute(attribute_64_bit) != 0;
  s.wait_nor = dev.attribute(attribute_nor) != 0;
  s.flush_remote_writes = dev.attribute(CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES) != 0;
  return s;
}

stream_memory_op stream_memory_op::make_wait(CUdeviceptr address, std::size_t count, std::size_t width,
                                             std::uint64_t value, wait_options options) {
  const char* api = "cudrv::stream_memory_op::wait";
  check_flag(api, address, count, width);
  const auto condition = static_cast<unsigned>(options.condition);
  if (condition > CU_STREAM_WAIT_VALUE_NOR) {
    throw invalid_argument_error(api, "the wait condition " + std::to_string(condition) +
                                          " is none of geq, eq, bit_and and nor");
  }
  stream_memory_op op;
  set_operand(op.params_.waitValue, width == 4 ? CU_STREAM_MEM_OP_WAIT_VALUE_32 : CU_STREAM_MEM_OP_WAIT_VALUE_64,
              address, width, value);
  op.params_.waitValue.flags =
      condition | (options.flush_remote_writes ? static_cast<unsigned>(CU_STREAM_WAIT_VALUE_FLUSH) : 0u);
  return op;
}

stream_memory_op stream_memory_op::make_write(CUdeviceptr address, std::size_t count, std::size_t width,
                                              std::uint64_t value) {
  check_flag("cudrv::stream_memory_op::write", address, count, width);
  stream_memory_op op;
  set_operand(op.params_.writeValue, width == 4 ? CU_STREAM_MEM_OP_WRITE_VALUE_32 : CU_STREAM_MEM_OP_WRITE_VALUE_64,
              address, width, value);
  op.params_.writeValue.flags = CU_STREAM_WRITE_VALUE_DEFAULT;
  return op;
}

stream_memory_op stream_memory_op::flush_remote_writes() noexcept {
  stream_memory_op op;
  op.params_.flushRemoteWrites.operation = CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES;
  op.params_.flushRemoteWrites.flags = 0;
  return op;
}

stream_memory_op stream_memory_op::barrier(memory_barrier_scope scope) noexcept {
  stream_memory_op op;
  op.params_.memoryBarrier.operation = CU_STREAM_MEM_OP_BARRIER;
  op.params_.memoryBarrier.flags = static_cast<unsigned>(scope);
  return op;
}

namespace detail {

void throw_memory_op_error(CUresult status, const char* api, const device* dev, const stream_memory_op* ops,
                           std::size_t count) {
  bool needs_64 = false;
  bool needs_nor = false;
  bool needs_flush = false;
  for (std::size_t i = 0; i < count; ++i) {
    needs_64 = needs_64 || is_64(ops[i].native());
    needs_nor = needs_nor || uses_nor(ops[i].native());
    needs_flush = needs_flush || uses_flush(ops[i].native());
  }
  std::optional<stream_memory_op_support> support;
  if (dev != nullptr && (needs_64 || needs_nor || needs_flush)) {
    try {
      support = query_stream_memory_op_support(*dev);
    } catch (const error&) {
      // no diagnosis: report the driver's error as it is
    }
  }
  auto refuse = [&](const char* what, const char* attribute, const char* instead) {
    throw not_supported_error(status, api,
                              "device " + std::to_string(dev->ordinal()) + " does not support " + what + " (" +
                                  attribute + " is 0); " + instead + " [" + describe(ops, count) + "]");
  };
  if (support) {
    if (needs_64 && !support->wait_write_64) {
      refuse("64-bit stream memory operations", "CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS",
             "use 32-bit flags (std::uint32_t)");
    }
    if (needs_nor && !support->wait_nor) {
      refuse("the NOR wait condition", "CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR",
             "wait with geq, eq or bit_and");
    }
    if (needs_flush && !support->flush_remote_writes) {
      refuse("flushes of remote writes", "CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES",
             "leave wait_options::flush_remote_writes off");
    }
  }
  throw_driver_error(status, api, describe(ops, count));
}

void enqueue_memory_op(CUstream stream, const stream_memory_op& op) {
  require_stream(stream, "cudrv::wait_value / write_value");
  const CUstreamBatchMemOpParams& p = op.native();
  CUresult status = CUDA_SUCCESS;
  const char* api = nullptr;
  switch (p.operation) {
    case CU_STREAM_MEM_OP_WAIT_VALUE_32:
      api = "cuStreamWaitValue32";
      status = in_stream_context(stream, [&] {
        return drv::cuStreamWaitValue32(stream, p.waitValue.address, p.waitValue.value, p.waitValue.flags);
      });
      break;
    case CU_STREAM_MEM_OP_WAIT_VALUE_64:
      api = "cuStreamWaitValue64";
      status = in_stream_context(stream, [&] {
        return drv::cuStreamWaitValue64(stream, p.waitValue.address, p.waitValue.value64, p.waitValue.flags);
      });
      break;
    case CU_STREAM_MEM_OP_WRITE_VALUE_32:
      api = "cuStreamWriteValue32";
      status = in_stream_context(stream, [&] {
        return drv::cuStreamWriteValue32(stream, p.writeValue.address, p.writeValue.value, p.writeValue.flags);
      });
      break;
    case CU_STREAM_MEM_OP_WRITE_VALUE_64:
      api = "cuStreamWriteValue64";
      status = in_stream_context(stream, [&] {
        return drv::cuStreamWriteValue64(stream, p.writeValue.address, p.writeValue.value64, p.writeValue.flags);
      });
      break;
    default: enqueue_memory_ops(stream, &op, 1); return;
  }
  if (status != CUDA_SUCCESS) [[unlikely]] {
    const std::optional<device> dev = device_of(stream);
    throw_memory_op_error(status, api, dev ? &*dev : nullptr, &op, 1);
  }
}

void enqueue_memory_ops(CUstream stream, const stream_memory_op* ops, std::size_t count) {
  const char* api = "cudrv::batch_memory_ops";
  require_stream(stream, api);
  if (count == 0) {
    throw invalid_argument_error(api, "the batch holds no operation");
  }
  if (count > 255) {
    throw invalid_argument_error(api,
                                 "the batch holds " + std::to_string(count) +
                                     " operations; cuStreamBatchMemOp takes fewer than 256 (at most 255): split it");
  }
  // The driver takes a non-const array and may use the operations' alias fields: pass a copy.
  CUstreamBatchMemOpParams local[16];
  std::vector<CUstreamBatchMemOpParams> heap;
  CUstreamBatchMemOpParams* params = local;
  if (count > std::size(local)) {
    heap.resize(count);
    params = heap.data();
  }
  for (std::size_t i = 0; i < count; ++i) {
    params[i] = ops[i].native();
  }
  const CUresult status = in_stream_context(stream, [&] {
    return drv::cuStreamBatchMemOp(stream, static_cast<unsigned>(count), params, 0);
  });
  if (status != CUDA_SUCCESS) [[unlikely]] {
    const std::optional<device> dev = device_of(stream);
    throw_memory_op_error(status, "cuStreamBatchMemOp", dev ? &*dev : nullptr, ops, count);
  }
}

}  // namespace detail

}  // namespace cudrv
