/// @file unlayered.hpp
/// @brief A public header that names no layer, for the layering check's own test.
#pragma once
