// Shared helpers for the memory test suites (copies, fills, buffers, pools, bad input).
//
// The memory tests fill every destination with a poison pattern (every byte 0xA5) before a copy or
// fill writes it, and afterwards compare the whole destination bitwise: the written part must hold
// the data, the rest must still hold the poison. Data is random from a seed (cudrv::test::test_seed,
// printed by the tests so CUDRV_TEST_SEED can replay it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace cudrv::test {

inline constexpr std::size_t MiB = std::size_t(1) << 20;

/// A value whose every byte is 0xA5: what destinations hold before a copy or fill writes them.
template <class T>
T poison_value() {
  T value;
  std::memset(static_cast<void*>(&value), 0xA5, sizeof(T));
  return value;
}

/// @p n random elements of T made from the seeded random bytes (random_bytes(n * sizeof(T), seed)).
template <class T>
std::vector<T> random_vector(std::size_t n, std::uint64_t seed) {
  const std::vector<std::uint8_t> bytes = random_bytes(n * sizeof(T), seed);
  std::vector<T> out(n);
  std::memcpy(static_cast<void*>(out.data()), bytes.data(), bytes.size());
  return out;
}

/// Empty when the @p n elements are bitwise equal, otherwise how many differ and where the first is.
template <class T>
std::string mismatch(const T* actual, const T* expected, std::size_t n) {
  std::size_t count = 0;
  std::size_t first = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (std::memcmp(actual + i, expected + i, sizeof(T)) != 0) {
      if (count++ == 0) {
        first = i;
      }
    }
  }
  if (count == 0) {
    return {};
  }
  std::ostringstream out;
  out << count << " of " << n << " elements differ, the first at index " << first << " (got " << +actual[first]
      << ", expected " << +expected[first] << ")";
  return out.str();
}

/// Empty when the vectors have the same size and are bitwise equal, otherwise what differs.
template <class T>
std::string mismatch(const std::vector<T>& actual, const std::vector<T>& expected) {
  if (actual.size() != expected.size()) {
    return "sizes differ: " + std::to_string(actual.size()) + " and " + std::to_string(expected.size());
  }
  return mismatch(actual.data(), expected.data(), actual.size());
}

}  // namespace cudrv::test
