// The persisting part of L2: the scoped limit and the reset of persisting lines.
#include "cudrv/persisting_l2.hpp"

#include <string>

#include "cudrv/device.hpp"
#include "cudrv/error.hpp"
#include "driver/driver_api.hpp"

namespace cudrv {

scoped_persisting_l2_limit::scoped_persisting_l2_limit(context_ref ctx, std::size_t bytes)
    : ctx_(ctx.native_handle()), previous_(0), bytes_(0) {
  constexpr const char* api = "cudrv::scoped_persisting_l2_limit";
  detail::require_context_handle(ctx_, api);
  const cudrv::device dev = ctx.device();
  const int most = dev.attribute(CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE);
  if (most <= 0) {
    throw not_supported_error(error_source::cudrv, CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED",
                              "device " + std::to_string(dev.ordinal()) +
                                  " has no persisting L2 (CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE is 0)",
                              api, {});
  }
  if (bytes > static_cast<std::size_t>(most)) {
    throw invalid_argument_error(api, std::to_string(bytes) + " bytes exceed device " + std::to_string(dev.ordinal()) +
                                          "'s maximum persisting-L2 size of " + std::to_string(most) +
                                          " bytes (CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE)");
  }
  previous_ = ctx.limit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE);
  ctx.set_limit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, bytes);
  try {
    bytes_ = ctx.limit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE);
  } catch (...) {
    // No destructor runs for a constructor that throws: put the previous limit back here.
    detail::destroy_noexcept("cuCtxSetLimit", [&] {
      context_guard guard{context_ref(ctx_)};
      return detail::drv::cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, previous_);
    });
    throw;
  }
}

scoped_persisting_l2_limit::~scoped_persisting_l2_limit() {
  detail::destroy_noexcept("cuCtxSetLimit", [&] {
    context_guard guard{context_ref(ctx_)};
    return detail::drv::cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, previous_);
  });
}

void reset_persisting_l2(context_ref ctx) {
  detail::require_context_handle(ctx.native_handle(), "cudrv::reset_persisting_l2");
  detail::run_in_context(ctx.native_handle(), "cudrv::reset_persisting_l2", [] {
    detail::check(detail::drv::cuCtxResetPersistingL2Cache(), "cuCtxResetPersistingL2Cache");
  });
}

}  // namespace cudrv
