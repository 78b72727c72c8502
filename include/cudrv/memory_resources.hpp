/// @file memory_resources.hpp
/// @brief Deprecated: the former name of builtin_memory_resources.hpp (the resources cudrv builds in),
/// kept for one release. The interface they implement is memory_resource.hpp.
#pragma once

#include "cudrv/builtin_memory_resources.hpp"
