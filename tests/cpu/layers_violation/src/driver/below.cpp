// A driver-layer file that reaches up three ways: check_layers.cmake must refuse each of them.
#include <code/above.hpp>
#include "code/above.hpp"
#include "cudrv/launch.hpp"
