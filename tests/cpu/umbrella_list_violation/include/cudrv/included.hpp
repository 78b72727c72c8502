/// @file included.hpp
/// @brief Included by the fixture's umbrella although its comment says it is opt-in.
#pragma once
