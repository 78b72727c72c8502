// The compiled library's version: the macros of the generated <cudrv/version.hpp>, frozen into the
// library when it is compiled, so that a program can compare them with the headers it was built with.
#include "cudrv/version.hpp"

namespace cudrv {

version_info version() noexcept { return header_version; }

const char* version_string() noexcept { return CUDRV_VERSION_STRING; }

}  // namespace cudrv
