// The code of <cudrv/launch.hpp> (execution) in the driver folder: check_layers.cmake must refuse it.
