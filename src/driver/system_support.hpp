// Internal: the names and texts of errno values, for system_error (src/driver/file_descriptor.cpp) and
// the Unix sockets' messages.
#pragma once

#include <string>

namespace cudrv::detail {

// "ECONNREFUSED" (glibc 2.32+), else "errno 111".
std::string errno_name(int e);

// The C library's text for e ("Connection refused").
std::string errno_text(int e);

}  // namespace cudrv::detail
