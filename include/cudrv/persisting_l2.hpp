/// @file persisting_l2.hpp
/// @brief The persisting part of L2 (for @ref cudrv::access_policy_window): the scoped setting
/// @ref cudrv::scoped_persisting_l2_limit and @ref cudrv::reset_persisting_l2.
///
/// Layer: driver (docs/design.md, "Source layers").
#pragma once

#include <cstddef>

#include "cudrv/context.hpp"

namespace cudrv {

/// @brief Sets a context's persisting-L2 limit (`CU_LIMIT_PERSISTING_L2_CACHE_SIZE`: how much of L2
/// lines with @ref access_property::persisting may keep) for the object's scope, and restores the
/// previous value when it ends. Neither copyable nor movable.
///
/// The limit is 0 by default, so an @ref access_policy_window that marks lines persisting has no
/// effect until it is raised. Checked against the device's
/// `CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE` before the driver is called.
/// @code
/// const std::size_t most = dev.attribute(CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE);
/// {
///   cudrv::scoped_persisting_l2_limit l2(dev.primary_context(), most);
///   cudrv::launch(stream, {.grid = g, .block = 256, .access_policy = {.base = hot.get(), .bytes = hot.size_bytes()}},
///                 kernel, hot.get(), cold.get());
///   stream.synchronize();
///   cudrv::reset_persisting_l2(dev.primary_context());   // the lines persist no longer
/// }                                                      // the limit is what it was again
/// @endcode
class scoped_persisting_l2_limit {
 public:
  /// @brief Sets @p ctx's persisting-L2 limit to @p bytes (the driver may round it; @ref bytes says what
  /// it took) and remembers the previous one.
  /// @throws not_supported_error when the device has no persisting L2 (its maximum is 0);
  ///   invalid_argument_error when @p bytes exceed the device's maximum, or @p ctx is empty
  scoped_persisting_l2_limit(context_ref ctx, std::size_t bytes);
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  scoped_persisting_l2_limit(const scoped_persisting_l2_limit&) = delete;
  scoped_persisting_l2_limit& operator=(const scoped_persisting_l2_limit&) = delete;
  /// @}
  /// @brief Restores the previous limit (errors go to the destruction handler; never throws).
  ~scoped_persisting_l2_limit();

  /// @brief The limit in force while the object lives, as the driver reports it.
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }
  /// @brief The limit before, restored by the destructor.
  [[nodiscard]] std::size_t previous() const noexcept { return previous_; }

 private:
  CUcontext ctx_;
  std::size_t previous_;
  std::size_t bytes_;
};

/// @brief Returns every persisting line of @p ctx's device's L2 to normal (`cuCtxResetPersistingL2Cache`),
/// so that the next work starts from a cache without lines kept by earlier windows.
/// @throws invalid_argument_error for an empty context; error for what the driver refuses
void reset_persisting_l2(context_ref ctx);

}  // namespace cudrv
