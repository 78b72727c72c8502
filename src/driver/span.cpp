// The out-of-line part of <cudrv/span.hpp>: the error of an element range outside a view.
#include "cudrv/span.hpp"

#include <string>

#include "cudrv/error.hpp"

namespace cudrv::detail {

void throw_out_of_range(const char* api, std::size_t offset, std::size_t count, std::size_t size) {
  throw invalid_argument_error(api, "elements [" + std::to_string(offset) + ", " + std::to_string(offset + count) +
                                        ") are outside a view of " + std::to_string(size) + " elements");
}

}  // namespace cudrv::detail
