// Pointer attributes (<cudrv/pointer_attributes.hpp>): cuPointerGetAttributes, and the check of memory
// that foreign code describes (a DLPack tensor) against what the driver knows of it.
#include "cudrv/pointer_attributes.hpp"

#include <cstdint>
#include <optional>
#include <string>

#include "cudrv/context.hpp"
#include "cudrv/driver.hpp"
#include "cudrv/error.hpp"
#include "driver/driver_api.hpp"
#include "memory/memory_support.hpp"

namespace cudrv {

pointer_attributes get_pointer_attributes(CUdeviceptr address) {
  pointer_attributes out{};
  unsigned int memory_type = 0;
  int ordinal = -2;
  int managed = 0;
  int mapped = 0;
  CUpointer_attribute which[] = {
      CU_POINTER_ATTRIBUTE_CONTEXT,      CU_POINTER_ATTRIBUTE_MEMORY_TYPE,      CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
      CU_POINTER_ATTRIBUTE_HOST_POINTER, CU_POINTER_ATTRIBUTE_IS_MANAGED,       CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
      CU_POINTER_ATTRIBUTE_BUFFER_ID,    CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
      CU_POINTER_ATTRIBUTE_MAPPED,       CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
  };
  void* data[] = {&out.context,   &memory_type,     &out.device_address, &out.host_pointer, &managed, &ordinal,
                  &out.buffer_id, &out.range_start, &out.range_size,     &mapped,           &out.pool};
  detail::check(detail::drv::cuPointerGetAttributes(static_cast<unsigned int>(std::size(which)), which, data, address),
                "cuPointerGetAttributes", [&] { return detail::format_address(static_cast<std::uintptr_t>(address)); });
  out.memory_type = static_cast<CUmemorytype>(memory_type);
  out.is_managed = managed != 0;
  out.is_mapped = mapped != 0;
  out.device_ordinal = (memory_type == 0 || ordinal < 0) ? -1 : ordinal;
  return out;
}

pointer_attributes get_pointer_attributes(const void* pointer) {
  return get_pointer_attributes(reinterpret_cast<CUdeviceptr>(pointer));
}

}  // namespace cudrv

namespace cudrv::detail {

namespace {

// What the driver knows of one address: its kind and device (cuPointerGetAttributes) and the extent of the
// allocation or mapping that holds it. For memory mapped into a reserved range, the attributes' range is the
// whole reservation, mapped or not (driver 580.159.04: an unmapped address in it has memory type 0), while
// cuMemGetAddressRange gives each mapping on its own and CUDA_ERROR_NOT_FOUND for an unmapped address; but
// cuMemGetAddressRange needs a current context. It runs in the current one, or in the context that owns the
// memory (the pointer's context attribute, null for pool and mapped memory); with neither, the attributes'
// range stands, marked inexact, and the caller checks the last byte too. Pinned host memory is not mapped
// into reservations: its attributes' range is its allocation.
struct known_memory {
  pointer_attributes attributes{};
  std::uintptr_t start = 0;
  std::size_t size = 0;
  bool exact = true;  // the extent is the allocation's or mapping's own
};

known_memory what_driver_knows(std::uintptr_t address) {
  known_memory out;
  try {
    out.attributes = get_pointer_attributes(static_cast<CUdeviceptr>(address));
  } catch (const error& e) {
    if (e.source() != error_source::driver || e.result() != CUDA_ERROR_INVALID_VALUE) {
      throw;
    }
    return out;  // an address the driver refuses to describe is one it does not know
  }
  if (!out.attributes.is_known()) {
    return out;
  }
  out.start = static_cast<std::uintptr_t>(out.attributes.range_start);
  out.size = out.attributes.range_size;
  if (out.attributes.memory_type != CU_MEMORYTYPE_DEVICE && !out.attributes.is_managed) {
    return out;
  }
  CUcontext current = nullptr;
  check(drv::cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  if (current == nullptr && out.attributes.context == nullptr) {
    out.exact = false;
    return out;
  }
  std::optional<context_guard> owner;  // the memory's own context, when none is current
  if (current == nullptr) {
    owner.emplace(context_ref(out.attributes.context));
  }
  CUdeviceptr base = 0;
  std::size_t size = 0;
  const CUresult status = drv::cuMemGetAddressRange(&base, &size, static_cast<CUdeviceptr>(address));
  if (status == CUDA_SUCCESS) {
    out.start = static_cast<std::uintptr_t>(base);
    out.size = size;
  } else {
    out.exact = false;
  }
  return out;
}

const char* kind_of(const pointer_attributes& a) {
  if (!a.is_known()) {
    return "memory the driver does not know";
  }
  if (a.is_managed) {
    return "managed memory";
  }
  return a.memory_type == CU_MEMORYTYPE_HOST ? "pinned host memory" : "device memory";
}

bool fits(const pointer_attributes& a, claimed_memory kind, int device) {
  if (!a.is_known()) {
    return false;
  }
  switch (kind) {
    case claimed_memory::device:  // producers also hand out managed memory as device memory
      return a.is_managed || (a.memory_type == CU_MEMORYTYPE_DEVICE && a.device_ordinal == device);
    case claimed_memory::pinned_host: return !a.is_managed && a.memory_type == CU_MEMORYTYPE_HOST;
    case claimed_memory::managed:
    default: return a.is_managed;
  }
}

}  // namespace

void check_claimed_memory(const char* api, std::uintptr_t address, std::size_t bytes, claimed_memory kind, int device,
                          const std::string& claim) {
  if (bytes == 0 || !driver::available()) {
    return;  // nothing reached, or no driver: nothing in this process can touch CUDA memory
  }
  known_memory m = what_driver_knows(address);
  const pointer_attributes& first = m.attributes;
  if (!fits(first, kind, device)) {
    throw invalid_argument_error(api,
                                 "the memory claims to be " + claim + ", but the driver knows its address as " +
                                     kind_of(first) +
                                     (first.is_known() && !first.is_managed && first.memory_type == CU_MEMORYTYPE_DEVICE
                                          ? " of device " + std::to_string(first.device_ordinal)
                                          : std::string()));
  }
  // Where the first extent is not exact (no context to ask cuMemGetAddressRange in), the last byte must be
  // memory of the kind claimed too: a view into an unmapped part of a reservation ends there.
  if (!m.exact && bytes > 1) {
    const known_memory last = what_driver_knows(address + bytes - 1);
    if (!fits(last.attributes, kind, device)) {
      throw invalid_argument_error(api, "the memory reaches " + std::to_string(bytes) +
                                            " bytes from its address, but "
                                            "its last byte does not lie in " +
                                            claim + " memory the driver knows (it is " + kind_of(last.attributes) +
                                            ")");
    }
  }
  // Every byte reached, piece after piece (at most this many pieces).
  constexpr std::size_t max_pieces = std::size_t{1} << 16;
  const std::uintptr_t end = address + bytes;  // the caller checked that this does not overflow
  std::uintptr_t covered = m.start + m.size;
  for (std::size_t pieces = 1; covered < end; ++pieces) {
    if (m.size == 0 || covered <= m.start || pieces >= max_pieces) {
      throw invalid_argument_error(api, "the driver gives no extent for the memory, or it spans more than " +
                                            std::to_string(max_pieces) + " allocations: " + std::to_string(bytes) +
                                            " bytes from its address");
    }
    m = what_driver_knows(covered);
    if (!fits(m.attributes, kind, device) || m.start != covered) {
      throw invalid_argument_error(api, "the memory reaches " + std::to_string(bytes) +
                                            " bytes from its address, but only " + std::to_string(covered - address) +
                                            " of them lie in " + claim + " memory the driver knows (the rest is " +
                                            kind_of(m.attributes) + ")");
    }
    covered += m.size;
  }
}

}  // namespace cudrv::detail
