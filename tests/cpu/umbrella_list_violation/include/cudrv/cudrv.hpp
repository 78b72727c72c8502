/// @file cudrv.hpp
/// @brief A broken umbrella for the cudrv_umbrella_lists_every_header_refuses test: it names
/// <cudrv/included.hpp> as opt-in but includes it, and forgets the header named forgotten. Opt-in:
/// - `<cudrv/included.hpp>`: said to be left out.
#pragma once
#include "cudrv/included.hpp"
