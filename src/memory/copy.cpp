// Copies and fills.
#include "cudrv/copy.hpp"

#include <cstring>
#include <optional>
#include <string>

#include "cudrv/error.hpp"
#include "cudrv/pointer_attributes.hpp"
#include "driver/driver_api.hpp"
#include "memory/memory_support.hpp"
#include "streams/nvtx_support.hpp"
#include "streams/stream_support.hpp"

namespace cudrv::detail {

void check_linear(const char* api, const linear_copy& c) {
  const auto [dst, dst_bytes, src, src_bytes, bytes] = c;
  if (bytes == 0) {
    throw invalid_argument_error(api, "nothing to copy: the copy is of zero bytes (an empty source view or count 0)");
  }
  if (bytes > src_bytes) {
    throw invalid_argument_error(api, "the copy of " + format_bytes(bytes) + " is larger than the source view of " +
                                          format_bytes(src_bytes));
  }
  if (bytes > dst_bytes) {
    throw invalid_argument_error(api, "the copy of " + format_bytes(bytes) +
                                          " is larger than the destination view of " + format_bytes(dst_bytes));
  }
  if (dst == 0 || src == 0) {
    throw invalid_argument_error(api, std::string("the ") + (dst == 0 ? "destination" : "source") +
                                          " view is null (a moved-from or released buffer?)");
  }
  // The driver's copies (cuMemcpy and cuMemcpyAsync, the peer copies, the batches, a graph's memcpy nodes)
  // are undefined for overlapping memory. The host path would memmove, but a copy must not change meaning
  // with the path it takes (a context current or not), so every path refuses. With unified addressing a
  // range names the same memory in every context, so this holds for peer copies too.
  if ((dst >= src ? dst - src : src - dst) < bytes) {
    throw invalid_argument_error(api, std::string(dst == src ? "the source and the destination are the same memory"
                                                             : "the source and destination ranges overlap") +
                                          " (" + describe_copy(c) +
                                          "); the driver's copies are undefined for overlapping memory: copy through "
                                          "a separate buffer");
  }
}

std::string describe_copy(const linear_copy& c) {
  return format_bytes(c.bytes) + " from " + format_address(c.src) + " to " + format_address(c.dst);
}

void copy_linear(const linear_copy& c, CUstream stream, bool async) {
  CUDRV_NVTX_AUTOMATIC_RANGE("cudrv::copy", [bytes = c.bytes] { return std::to_string(bytes) + " bytes"; });
  const char* api = "cudrv::copy";
  check_linear(api, c);
  const auto dst = static_cast<CUdeviceptr>(c.dst);
  const auto src = static_cast<CUdeviceptr>(c.src);
  if (async) {
    require_stream(stream, api);
    stream_context_scope scope(stream);
    check(drv::cuMemcpyAsync(dst, src, c.bytes, stream), "cuMemcpyAsync", [&] { return describe_copy(c); });
  } else {
    synchronous_scope scope(c.dst, c.src);
    if (scope.host_only()) {
      std::memmove(reinterpret_cast<void*>(c.dst), reinterpret_cast<const void*>(c.src), c.bytes);
      return;
    }
    check(drv::cuMemcpy(dst, src, c.bytes), "cuMemcpy", [&] { return describe_copy(c); });
    scope.complete();
  }
}

void copy_linear_peer(const linear_copy& c, CUcontext dst_ctx, CUcontext src_ctx, CUstream stream, bool async) {
  CUDRV_NVTX_AUTOMATIC_RANGE("cudrv::copy_peer", [bytes = c.bytes] { return std::to_string(bytes) + " bytes"; });
  const char* api = "cudrv::copy_peer";
  check_linear(api, c);
  if (dst_ctx == nullptr || src_ctx == nullptr) {
    throw invalid_argument_error(api, "a context is empty (a moved-from or released cudrv::context)");
  }
  const auto dst = static_cast<CUdeviceptr>(c.dst);
  const auto src = static_cast<CUdeviceptr>(c.src);
  if (async) {
    require_stream(stream, api);
    // The call names both contexts, and the driver checks each pointer against its own; it needs some
    // context current, not the stream's (a raw cuMemcpyPeerAsync on a stream of another device works
    // the same). So the stream's context is made current only when none is: one cuCtxGetCurrent on the
    // usual path instead of cuStreamGetCtx and a push and pop (the 8-byte latency of a peer copy).
    CUcontext current = nullptr;
    check(drv::cuCtxGetCurrent(&current), "cuCtxGetCurrent");
    std::optional<stream_context_scope> scope;
    if (current == nullptr) {
      scope.emplace(stream);
    }
    check(drv::cuMemcpyPeerAsync(dst, dst_ctx, src, src_ctx, c.bytes, stream), "cuMemcpyPeerAsync",
          [&] { return describe_copy(c); });
  } else {
    synchronous_scope scope(c.dst, c.src);
    check(drv::cuMemcpyPeer(dst, dst_ctx, src, src_ctx, c.bytes), "cuMemcpyPeer", [&] { return describe_copy(c); });
    scope.complete();
  }
}

void check_fill(const char* api, std::uintptr_t dst, std::size_t count, std::size_t element_size) {
  if (count == 0) {
    throw invalid_argument_error(api, "nothing to fill: the view is empty");
  }
  if (dst == 0) {
    throw invalid_argument_error(api, "the view is null (a moved-from or released buffer?)");
  }
  if (dst % element_size != 0) {
    throw invalid_argument_error(api, "the address " + format_address(dst) + " is not aligned to the element size of " +
                                          std::to_string(element_size) + " bytes");
  }
}

void fill_linear(std::uintptr_t dst, std::size_t count, std::uint32_t pattern, std::size_t element_size,
                 CUstream stream, bool async) {
  CUDRV_NVTX_AUTOMATIC_RANGE("cudrv::fill",
                             [bytes = count * element_size] { return std::to_string(bytes) + " bytes"; });
  const char* api = "cudrv::fill";
  check_fill(api, dst, count, element_size);
  auto where = [&] {
    return std::to_string(count) + " elements of " + std::to_string(element_size) + " bytes at " + format_address(dst);
  };
  auto d = static_cast<CUdeviceptr>(dst);
  if (async) {
    require_stream(stream, api);
    stream_context_scope scope(stream);
    switch (element_size) {
      case 1:
        check(drv::cuMemsetD8Async(d, static_cast<unsigned char>(pattern), count, stream), "cuMemsetD8Async", where);
        break;
      case 2:
        check(drv::cuMemsetD16Async(d, static_cast<unsigned short>(pattern), count, stream), "cuMemsetD16Async", where);
        break;
      default:
        check(drv::cuMemsetD32Async(d, static_cast<unsigned int>(pattern), count, stream), "cuMemsetD32Async", where);
        break;
    }
  } else {
    synchronous_scope scope(dst, dst);
    if (scope.host_only()) {
      auto* bytes = reinterpret_cast<unsigned char*>(dst);
      for (std::size_t i = 0; i < count; ++i) {
        std::memcpy(bytes + i * element_size, &pattern, element_size);  // little-endian: the low bytes
      }
      return;
    }
    switch (element_size) {
      case 1: check(drv::cuMemsetD8(d, static_cast<unsigned char>(pattern), count), "cuMemsetD8", where); break;
      case 2: check(drv::cuMemsetD16(d, static_cast<unsigned short>(pattern), count), "cuMemsetD16", where); break;
      default: check(drv::cuMemsetD32(d, static_cast<unsigned int>(pattern), count), "cuMemsetD32", where); break;
    }
    scope.complete();
  }
}

std::string describe_layout(const pitched_layout& l) {
  return std::to_string(l.width_bytes) + " bytes x " + std::to_string(l.height) + " rows x " + std::to_string(l.depth) +
         " slices (pitch " + std::to_string(l.pitch) + ")";
}

namespace {

// Host memory the driver does not know is described as host memory; everything else as unified.
template <class Copy>
void set_side(Copy& c, std::uintptr_t address, bool source) {
  pointer_attributes attr = get_pointer_attributes(static_cast<CUdeviceptr>(address));
  CUmemorytype type = attr.is_known() ? CU_MEMORYTYPE_UNIFIED : CU_MEMORYTYPE_HOST;
  if (source) {
    c.srcMemoryType = type;
    if (type == CU_MEMORYTYPE_HOST) {
      c.srcHost = reinterpret_cast<const void*>(address);
    } else {
      c.srcDevice = static_cast<CUdeviceptr>(address);
    }
  } else {
    c.dstMemoryType = type;
    if (type == CU_MEMORYTYPE_HOST) {
      c.dstHost = reinterpret_cast<void*>(address);
    } else {
      c.dstDevice = static_cast<CUdeviceptr>(address);
    }
  }
}

}  // namespace

void check_pitched(const char* api, const pitched_layout& dst, const pitched_layout& src) {
  if (src.width_bytes == 0 || src.height == 0 || src.depth == 0) {
    throw invalid_argument_error(api, "nothing to copy: the source extent " + describe_layout(src) + " is empty");
  }
  if (src.pitch < src.width_bytes || dst.pitch < dst.width_bytes) {
    throw invalid_argument_error(api, std::string("the ") + (src.pitch < src.width_bytes ? "source" : "destination") +
                                          " pitch is smaller than its row: source " + describe_layout(src) +
                                          ", destination " + describe_layout(dst));
  }
  if (src.width_bytes > dst.width_bytes || src.height > dst.height || src.depth > dst.depth) {
    throw invalid_argument_error(api, "the source " + describe_layout(src) + " does not fit the destination " +
                                          describe_layout(dst));
  }
  if (dst.address == 0 || src.address == 0) {
    throw invalid_argument_error(api, std::string("the ") + (dst.address == 0 ? "destination" : "source") +
                                          " view is null (a moved-from or released buffer?)");
  }
}

void copy_pitched(pitched_layout dst, pitched_layout src, CUstream stream, bool async) {
  CUDRV_NVTX_AUTOMATIC_RANGE("cudrv::copy", [bytes = src.width_bytes * src.height * src.depth] {
    return std::to_string(bytes) + " bytes";
  });
  const char* api = "cudrv::copy";
  check_pitched(api, dst, src);
  if (async) {
    require_stream(stream, api);
  }
  // Make the context the copy runs in current first: the stream's for a stream-ordered copy, the one
  // owning the device memory for a synchronous copy (set_side reads pointer attributes in it).
  stream_context_scope stream_scope(async ? stream : nullptr);
  std::optional<synchronous_scope> sync_scope;
  if (!async) {
    sync_scope.emplace(dst.address, src.address);
    if (sync_scope->host_only()) {
      for (std::size_t z = 0; z < src.depth; ++z) {
        for (std::size_t y = 0; y < src.height; ++y) {
          std::memmove(reinterpret_cast<void*>(dst.address + (z * dst.height + y) * dst.pitch),
                       reinterpret_cast<const void*>(src.address + (z * src.height + y) * src.pitch), src.width_bytes);
        }
      }
      return;
    }
  }
  auto where = [&] { return "source " + describe_layout(src) + ", destination " + describe_layout(dst); };
  if (src.depth == 1) {
    CUDA_MEMCPY2D c{};
    set_side(c, src.address, true);
    set_side(c, dst.address, false);
    c.srcPitch = src.pitch;
    c.dstPitch = dst.pitch;
    c.WidthInBytes = src.width_bytes;
    c.Height = src.height;
    if (async) {
      check(drv::cuMemcpy2DAsync(&c, stream), "cuMemcpy2DAsync", where);
    } else {
      check(drv::cuMemcpy2DUnaligned(&c), "cuMemcpy2DUnaligned", where);
      sync_scope->complete();
    }
    return;
  }
  CUDA_MEMCPY3D c{};
  set_side(c, src.address, true);
  set_side(c, dst.address, false);
  c.srcPitch = src.pitch;
  c.srcHeight = src.height;
  c.dstPitch = dst.pitch;
  c.dstHeight = dst.height;
  c.WidthInBytes = src.width_bytes;
  c.Height = src.height;
  c.Depth = src.depth;
  if (async) {
    check(drv::cuMemcpy3DAsync(&c, stream), "cuMemcpy3DAsync", where);
  } else {
    check(drv::cuMemcpy3D(&c), "cuMemcpy3D", where);
    sync_scope->complete();
  }
}

}  // namespace cudrv::detail
