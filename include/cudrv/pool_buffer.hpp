/// @file pool_buffer.hpp
/// @brief Deprecated: the former name of host_accessible_pool_buffer.hpp, kept for one release. It
/// includes that header, which also declares the deprecated alias `cudrv::pool_buffer<T>`.
///
/// Layer: memory (docs/design.md, "Source layers").
#pragma once

#include "cudrv/host_accessible_pool_buffer.hpp"
