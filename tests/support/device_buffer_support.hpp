// Shared helpers for tests that hold device_buffers: read one back, make one filled with the poison
// pattern of memory_support.hpp.
#pragma once

#include <cudrv/copy.hpp>
#include <cudrv/device.hpp>
#include <cudrv/device_buffer.hpp>

#include <cstddef>
#include <vector>

#include "memory_support.hpp"

namespace cudrv::test {

/// The elements of @p b, copied to the host.
template <class T>
std::vector<T> read_back(const cudrv::device_buffer<T>& b) {
  std::vector<T> out(b.size());
  cudrv::copy(out, b);
  return out;
}

/// A buffer of @p n elements on @p dev, every byte the poison value.
template <class T>
cudrv::device_buffer<T> poisoned_buffer(const cudrv::device& dev, std::size_t n) {
  cudrv::device_buffer<T> b(dev, n);
  const std::vector<T> poison(n, poison_value<T>());
  cudrv::copy(b, poison);
  return b;
}

}  // namespace cudrv::test
