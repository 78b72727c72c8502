#include <cudrv/cudrv.hpp>
