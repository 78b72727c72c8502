// launch_config and dims: the one out-of-line piece, the refusal of an extent past 32 bits.
#include "cudrv/launch_config.hpp"

#include <string>

#include "cudrv/error.hpp"

namespace cudrv::detail {

void throw_extent_overflow(unsigned long long value, char axis) {
  throw invalid_argument_error("cudrv::dims::checked", std::string("extent ") + axis + " = " + std::to_string(value) +
                                                           " does not fit the 32 bits of a launch extent");
}

}  // namespace cudrv::detail
