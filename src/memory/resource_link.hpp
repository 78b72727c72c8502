// Internal: what a resource_buffer holds of its memory_resource. The resource makes one link when its
// first buffer is allocated and clears it when it is destroyed; each buffer holds a counted reference,
// so a buffer that outlives its resource finds the resource gone instead of calling a destroyed object.
#pragma once

#include <atomic>
#include <cstddef>

#include "cudrv/memory_resource.hpp"

namespace cudrv::detail {

struct resource_link {
  // The resource, null once it was destroyed.
  std::atomic<memory_resource*> resource;
  // One reference for the resource while it lives, one for each buffer allocated from it.
  std::atomic<std::size_t> references{1};

  explicit resource_link(memory_resource* r) noexcept : resource(r) {}
};

// The link of mr, made at the first call (thread-safe); a new counted reference for the caller.
// Throws std::bad_alloc when the link cannot be made.
resource_link* acquire_resource_link(memory_resource& mr, resource_link*& slot);
// Drops a reference taken by acquire_resource_link (null is ignored); the last one deletes the link.
void release_resource_link(resource_link* link) noexcept;

}  // namespace cudrv::detail
