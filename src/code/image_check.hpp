// Internal: the structural checks of a PTX, cubin or fatbin image made before the driver (or
// nvJitLink) sees it (object_code::validate, library, linker::add). See image_check.cpp.
#pragma once

#include <string>
#include <string_view>

#include "cudrv/object_code.hpp"

namespace cudrv::detail {

// What is wrong with an image of this kind, or "" when its headers, offsets and sizes are all inside
// the bytes given. Only ptx, cubin and fatbin are checked (other kinds: ""). Reads nothing outside
// image, never throws but std::bad_alloc, and takes time linear in the number of headers. The text
// starts with the kind ("cubin: ...").
std::string image_problem(code_kind kind, std::string_view image);

}  // namespace cudrv::detail
