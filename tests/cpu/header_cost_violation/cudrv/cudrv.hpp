// A stand-in umbrella that tests/cpu/check_header_cost.cmake must refuse: it pulls <memory> and <chrono>.
#pragma once

#include <chrono>
#include <memory>
