// Internal: the toolkit's header directories for the compile cache (which keys headers under them by
// the toolkit's identity instead of reading them).
#pragma once

#include "cudrv/program.hpp"

namespace cudrv::detail {

// find_toolkit_headers(), or null when the headers cannot be found (never throws).
const toolkit_header_dirs* toolkit_headers_if_found() noexcept;

}  // namespace cudrv::detail
