// object_code: reading and writing code files.
#include "cudrv/object_code.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "code/image_check.hpp"
#include "cudrv/error.hpp"

namespace cudrv {

std::string_view to_string(code_kind kind) noexcept {
  switch (kind) {
    case code_kind::ptx: return "ptx";
    case code_kind::cubin: return "cubin";
    case code_kind::fatbin: return "fatbin";
    case code_kind::ltoir: return "ltoir";
    case code_kind::object: return "object";
    case code_kind::library: return "library";
  }
  return "unknown";
}

object_code object_code::from_file(const std::string& path, code_kind kind) {
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw invalid_argument_error("cudrv::object_code::from_file",
                                 "cannot open '" + path + "': " + std::strerror(errno != 0 ? errno : ENOENT));
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) {
    throw invalid_argument_error("cudrv::object_code::from_file", "cannot read '" + path + "'");
  }
  return object_code(kind, std::move(buffer).str(), path);
}

object_code object_code::from_file(const std::string& path) {
  auto dot = path.find_last_of('.');
  auto slash = path.find_last_of('/');
  std::string ext = (dot == std::string::npos || (slash != std::string::npos && dot < slash)) ? "" : path.substr(dot);
  code_kind kind;
  if (ext == ".ptx") {
    kind = code_kind::ptx;
  } else if (ext == ".cubin") {
    kind = code_kind::cubin;
  } else if (ext == ".fatbin" || ext == ".fatbinary") {
    kind = code_kind::fatbin;
  } else if (ext == ".ltoir" || ext == ".lto") {
    kind = code_kind::ltoir;
  } else if (ext == ".o" || ext == ".obj") {
    kind = code_kind::object;
  } else if (ext == ".a" || ext == ".lib") {
    kind = code_kind::library;
  } else {
    throw invalid_argument_error(
        "cudrv::object_code::from_file",
        "cannot tell the code kind of '" + path +
            "' from its extension (known: .ptx .cubin .fatbin .ltoir .o .a); pass a cudrv::code_kind");
  }
  return from_file(path, kind);
}

void object_code::validate() const {
  if (std::string problem = detail::image_problem(kind_, bytes_); !problem.empty()) {
    throw invalid_image_error("cudrv::object_code::validate", "the " + std::string(to_string(kind_)) + " image" +
                                                                  (name_.empty() ? std::string() : " '" + name_ + "'") +
                                                                  " is malformed: " + problem);
  }
}

void object_code::write_to_file(const std::string& path) const {
  errno = 0;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out || !out.write(bytes_.data(), static_cast<std::streamsize>(bytes_.size())) || !out.flush()) {
    throw invalid_argument_error("cudrv::object_code::write_to_file",
                                 "cannot write '" + path + "': " + std::strerror(errno != 0 ? errno : EIO));
  }
}

}  // namespace cudrv
