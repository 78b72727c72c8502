// A driver-layer file that includes a code-layer header: check_layers.cmake must refuse it.
#include "code/above.hpp"
