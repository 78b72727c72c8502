/// @file forgotten.hpp
/// @brief In neither umbrella of the fixture, and not named.
#pragma once
