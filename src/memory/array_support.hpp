// Internal helpers shared by arrays (array.cpp) and texture and surface objects (texture.cpp).
#pragma once

#include "cudrv/context.hpp"
#include "driver/driver_api.hpp"
#include "memory/memory_support.hpp"

namespace cudrv::detail {

// Runs the destroy call of an object made in ctx (what: "array", "texture object") with ctx current for
// the call (cuTexObjectDestroy and cuSurfObjectDestroy refuse with CUDA_ERROR_INVALID_CONTEXT when no
// context is current) and reports its failure, or reports that ctx was destroyed first (which destroyed
// the object) and calls nothing.
template <class Destroy>
void destroy_in_context(const context_token& ctx, const char* api, const char* what, const char* call,
                        Destroy&& destroy) noexcept {
  if (!ctx.alive()) {
    report_outlived_context(api, what);
    return;
  }
  quiet_context_scope scope(ctx.handle);
  destroy_noexcept(call, destroy);
}

}  // namespace cudrv::detail
