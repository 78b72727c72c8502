/// @file exchange.hpp
/// @brief Internal: @ref cudrv::detail::exchange, the move operations' light stand-in for `std::exchange`.
///
/// Layer: driver (docs/design.md, "Source layers").
#pragma once

namespace cudrv::detail {

/// @brief Replaces @p object with @p value and returns the old value, like `std::exchange` (internal).
///
/// The move constructors and assignments of the public headers use it in place of `std::exchange`:
/// libstdc++'s computes its `noexcept` from two type traits, instantiated for every pair of types in
/// every translation unit that includes cudrv, which costs measurably in the umbrella's include time
/// (docs/design.md, "Header cost"). This one is `noexcept` outright: cudrv uses it only on handles,
/// pointers, and types whose move does not throw, inside `noexcept` functions.
/// @param object The object to replace.
/// @param value Its new value.
/// @return The value @p object held before.
template <class T, class U = T>
constexpr T exchange(T& object, U&& value) noexcept {
  T old = static_cast<T&&>(object);
  object = static_cast<U&&>(value);
  return old;
}

}  // namespace cudrv::detail
