/// @file rtc.hpp
/// @brief The fixture's run-time compilation umbrella (empty).
#pragma once
