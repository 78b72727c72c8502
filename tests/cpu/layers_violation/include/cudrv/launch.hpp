/// @file launch.hpp
/// @brief A public header of the execution layer, for the layering check's own test.
///
/// Layer: execution (docs/design.md, "Source layers").
#pragma once
