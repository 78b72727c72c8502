// cudrv-query: the table describing every CUDA device attribute (CUdevice_attribute) and how to read its value.
//
// The table is data only: nothing here calls the driver. It lists each non-deprecated enumerator of the cuda.h
// this is compiled with, in display order, with a stable JSON key, a readable name, a group, a unit and a kind.
// Enumerators newer than CUDA 12.4 (the oldest supported toolkit) are included only when the toolkit has them.
#pragma once

#include <cuda.h>

#include <span>
#include <string>
#include <string_view>

namespace cudrv_query {

/// How an attribute's integer value is to be read.
enum class attribute_kind {
  integer,      ///< a number, possibly with a unit (see attribute_desc::unit)
  boolean,      ///< 0 or 1
  enumeration,  ///< one value of a driver enum; describe() names it
  bitmask,      ///< OR of driver flags; describe() lists them
};

/// One CUdevice_attribute.
struct attribute_desc {
  CUdevice_attribute id;  ///< the driver attribute
  const char* enum_name;  ///< "CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK"
  const char* key;        ///< stable JSON key: enum_name without the prefix, lower case: "max_threads_per_block"
  const char* name;       ///< readable, sentence case, short: "Max threads per block"
  const char* group;      ///< one of group_names()
  /// "" when none; else one of "bytes", "kHz", "bits", "threads", "blocks", "registers", "multiprocessors",
  /// "engines", "texels" (texture extents), "elements" (surface extents), "layers".
  const char* unit;
  attribute_kind kind;  ///< how the value is to be read
};

/// Every non-deprecated attribute of the cuda.h this is compiled with, grouped: in the order of group_names(), then
/// in a sensible order inside each group. The storage is static; the span stays valid for the whole program.
[[nodiscard]] std::span<const attribute_desc> attribute_table() noexcept;

/// The groups in display order: "identity", "compute", "limits", "memory", "caches", "unified_memory",
/// "memory_pools_and_vmm", "interconnect", "clusters", "features", "textures". Every group holds at least one
/// attribute.
[[nodiscard]] std::span<const char* const> group_names() noexcept;

/// For enumeration and bitmask attributes: the meaning of a value, e.g. "exclusive_process" for compute mode 3,
/// "posix_file_descriptor|fabric" for a handle-type mask of 9, "none" for an empty mask. An unknown enumeration value
/// gives "unknown(N)" (N in decimal); a mask's leftover bits give "unknown(0x..)" after the known names (in
/// lower-case hexadecimal). Empty string for integer and boolean kinds. Names are snake_case words derived from the
/// driver enum's documentation.
[[nodiscard]] std::string describe(const attribute_desc& attribute, long long value);

/// The descriptor whose key is exactly `key`, or nullptr.
[[nodiscard]] const attribute_desc* find_attribute(std::string_view key) noexcept;

}  // namespace cudrv_query
