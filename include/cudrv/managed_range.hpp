/// @file managed_range.hpp
/// @brief Managed (unified) memory ranges: typed advice (@ref cudrv::memory_advice, @ref cudrv::advise,
/// `cuMemAdvise`) and typed range attributes (@ref cudrv::managed_range_attributes,
/// `cuMemRangeGetAttributes`), for any managed range: a @ref cudrv::managed_buffer, a view of one, a
/// `__managed__` variable's address.
///
/// Layer: memory (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "cudrv/copy.hpp"
#include "cudrv/memory_location.hpp"

namespace cudrv {

/// @brief A hint about how a managed range is used (`CUmem_advise`, for `cuMemAdvise`).
enum class memory_advice : int {
  /// The range is mostly read: each processor that reads it may keep a read-only copy
  /// (`CU_MEM_ADVISE_SET_READ_MOSTLY`; no location).
  set_read_mostly = CU_MEM_ADVISE_SET_READ_MOSTLY,
  /// Undoes @ref memory_advice::set_read_mostly (`CU_MEM_ADVISE_UNSET_READ_MOSTLY`; no location).
  unset_read_mostly = CU_MEM_ADVISE_UNSET_READ_MOSTLY,
  /// The pages should live at the given location; they migrate there when possible
  /// (`CU_MEM_ADVISE_SET_PREFERRED_LOCATION`; a device, the host or a host NUMA node).
  set_preferred_location = CU_MEM_ADVISE_SET_PREFERRED_LOCATION,
  /// Undoes @ref memory_advice::set_preferred_location (`CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION`; no location).
  unset_preferred_location = CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION,
  /// The given processor accesses the range: keep it mapped there to avoid faults
  /// (`CU_MEM_ADVISE_SET_ACCESSED_BY`; a device or the host).
  set_accessed_by = CU_MEM_ADVISE_SET_ACCESSED_BY,
  /// Undoes @ref memory_advice::set_accessed_by for the given processor (`CU_MEM_ADVISE_UNSET_ACCESSED_BY`).
  unset_accessed_by = CU_MEM_ADVISE_UNSET_ACCESSED_BY,
};

/// @brief Whether @p advice names a processor or a location (set_preferred_location, set_accessed_by,
/// unset_accessed_by); the others ignore it.
[[nodiscard]] constexpr bool advice_takes_location(memory_advice advice) noexcept {
  return advice == memory_advice::set_preferred_location || advice == memory_advice::set_accessed_by ||
         advice == memory_advice::unset_accessed_by;
}

/// @brief What the driver records about a managed range (`cuMemRangeGetAttributes`): the advice that
/// holds for all of it and where it was last prefetched. A location that is not the same for every page
/// (or was never set) is @ref memory_location::none().
struct managed_range_attributes {
  /// Every page of the range has read duplication on (`CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY`).
  bool read_mostly = false;
  /// The preferred location of every page (`CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE` and `_ID`).
  memory_location preferred_location = memory_location::none();
  /// Where every page was last prefetched to (`CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE` and
  /// `_ID`): what was asked, not whether the prefetch has run.
  memory_location last_prefetch_location = memory_location::none();
  /// The processors with @ref memory_advice::set_accessed_by over the whole range
  /// (`CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY`): devices, and the host when the driver lists it.
  std::vector<memory_location> accessed_by{};
};

namespace detail {
void advise_range(std::uintptr_t address, std::size_t bytes, memory_advice advice, const memory_location* where,
                  const char* api);
managed_range_attributes query_managed_range(std::uintptr_t address, std::size_t bytes);
/// @brief The location a range attribute's type and id name (internal; @ref memory_location::none() for
/// `CU_MEM_LOCATION_TYPE_INVALID` and any type cudrv does not model).
memory_location decode_range_location(int type, int id) noexcept;
/// @brief The bytes of a linear view (internal).
template <class R>
std::pair<std::uintptr_t, std::size_t> range_bytes(R& range) {
  auto v = to_linear(range);
  return {v.address, saturating_bytes(v.count, sizeof(typename view_element<decltype(v)>::type))};
}
}  // namespace detail

/// @brief Advises the driver about a managed range (`cuMemAdvise`), typed: @p range is anything
/// `cudrv::copy` takes (a @ref managed_buffer, a `std::span` or `device_span` of managed memory).
/// @code
/// cudrv::advise(weights, cudrv::memory_advice::set_read_mostly);
/// cudrv::advise(weights, cudrv::memory_advice::set_accessed_by, dev);
/// @endcode
/// @throws invalid_argument_error for an empty range, a range that is not managed memory (where the
///   driver can tell: memory it knows as device or pinned memory), a range past the end of its
///   allocation, or an advice without the location it needs
template <linear_view_source R>
void advise(R&& range, memory_advice advice) {
  auto [address, bytes] = detail::range_bytes(range);
  detail::advise_range(address, bytes, advice, nullptr, "cudrv::advise");
}
/// @brief Advises the driver about a managed range, for the processor or location @p where.
/// @throws as the overload without a location, and for @ref memory_location::none()
template <linear_view_source R>
void advise(R&& range, memory_advice advice, memory_location where) {
  auto [address, bytes] = detail::range_bytes(range);
  detail::advise_range(address, bytes, advice, &where, "cudrv::advise");
}

/// @brief The attributes of a managed range (one `cuMemRangeGetAttributes` call); see
/// @ref managed_range_attributes.
/// @code
/// cudrv::managed_range_attributes a = cudrv::get_managed_range_attributes(buf);
/// if (a.last_prefetch_location == cudrv::memory_location(dev)) { /* asked to be on dev */ }
/// @endcode
/// @throws invalid_argument_error as @ref advise
template <linear_view_source R>
[[nodiscard]] managed_range_attributes get_managed_range_attributes(R&& range) {
  auto [address, bytes] = detail::range_bytes(range);
  return detail::query_managed_range(address, bytes);
}
/// @brief The attributes of the @p bytes of managed memory at @p address.
/// @throws invalid_argument_error as @ref advise
[[nodiscard]] inline managed_range_attributes get_managed_range_attributes(CUdeviceptr address, std::size_t bytes) {
  return detail::query_managed_range(static_cast<std::uintptr_t>(address), bytes);
}

}  // namespace cudrv
