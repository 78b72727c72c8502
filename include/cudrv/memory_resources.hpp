/// @file memory_resources.hpp
/// @brief Deprecated: the former name of builtin_memory_resources.hpp (the resources cudrv builds in),
/// kept for one release. The interface they implement is memory_resource.hpp.
///
/// Layer: memory (docs/design.md, "Source layers").
#pragma once

#include "cudrv/builtin_memory_resources.hpp"
