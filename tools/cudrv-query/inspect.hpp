// cudrv-query --inspect FILE (issue 36: inspect): the images of a cubin, fatbin, PTX or host ELF file
// and the resources of each kernel, read by cudrv (<cudrv/code_inspection.hpp>) without a driver.
#pragma once

#include <cstddef>
#include <iosfwd>
#include <string>

#include <cudrv/code_inspection.hpp>

#include "query.hpp"

namespace cudrv_query {

/// What --inspect read.
struct inspect_result {
  std::string path;                               ///< FILE as given
  cudrv::code_kind kind = cudrv::code_kind::ptx;  ///< what its first bytes say it is
  std::size_t size = 0;                           ///< its size in bytes
  cudrv::code_inspection inspection;              ///< its images and kernels
};

/// Reads @p path and inspects it, the kind told by its content (cudrv::detect_code_kind).
/// @throws cudrv::invalid_argument_error when it cannot be opened or read, cudrv::invalid_image_error
///   when it is malformed
[[nodiscard]] inspect_result inspect_file(const std::string& path);

/// The text of --inspect: the file, then per image its kind, architecture, sizes and compression,
/// and per kernel its resources in cuobjdump -res-usage's words (REG, STACK, SHARED, LOCAL, CONSTANT[n]).
void print_inspect_text(std::ostream& out, const inspect_result& r, const text_style& style);

/// The JSON document of --inspect (view "inspect"); @p r is null when the file could not be read.
[[nodiscard]] std::string inspect_to_json(const inspect_result* r, const failure* error);

/// Runs --inspect: exit_ok; exit_usage when FILE cannot be opened or is not a regular file; exit_cuda_error when it is
/// not a well-formed image (a typed cudrv error, said on @p err and in the JSON's error).
[[nodiscard]] int run_inspect(const command_line& cmd, std::ostream& out, std::ostream& err, const text_style& style);

}  // namespace cudrv_query
