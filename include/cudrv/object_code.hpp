/// @file object_code.hpp
/// @brief Device code held in host memory: PTX, cubin, fatbin, LTO-IR, host objects and archives.
///
/// Layer: code (docs/design.md, "Source layers").
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace cudrv {

/// @brief The format of an @ref cudrv::object_code.
enum class code_kind {
  ptx,      ///< PTX assembly text (`.ptx`); the driver JIT-compiles it for the device.
  cubin,    ///< A CUDA binary for one architecture (`.cubin`).
  fatbin,   ///< A fat binary with cubins and/or PTX for several architectures (`.fatbin`).
  ltoir,    ///< NVVM IR for link-time optimisation (`.ltoir`); linked with @ref linker.
  object,   ///< A host object file with embedded device code (`.o`); linked with @ref linker.
  library,  ///< A host archive of such objects (`.a`); linked with @ref linker.
};

/// @brief The name of a kind as cuda.core spells it: `"ptx"`, `"cubin"`, `"fatbin"`, `"ltoir"`,
/// `"object"`, `"library"`.
[[nodiscard]] std::string_view to_string(code_kind kind) noexcept;

/// @brief Device code of one @ref code_kind, owned in host memory.
///
/// It is what @ref program::compile produces, what @ref linker takes and produces, and what
/// @ref library loads. The bytes are kept exactly as given; PTX keeps a terminating NUL after its
/// last byte (the driver needs one), which @ref size does not count.
///
/// @code
/// auto ptx = cudrv::object_code::from_file("kernels/saxpy.ptx");   // kind from the extension
/// auto cubin = cudrv::object_code(cudrv::code_kind::cubin, std::move(bytes), "saxpy.cubin");
/// cudrv::library lib(cubin);
/// @endcode
class object_code {
 public:
  /// @brief An empty object of kind @ref code_kind::ptx; loading it is refused.
  object_code() = default;

  /// @brief Takes ownership of @p bytes.
  /// @param kind the format of the bytes
  /// @param bytes the image or text, kept as given
  /// @param name a name for messages and logs, e.g. the file it came from
  object_code(code_kind kind, std::string bytes, std::string name = {})
      : kind_(kind), bytes_(std::move(bytes)), name_(std::move(name)) {}

  /// @brief Reads a whole file.
  ///
  /// @param path the file to read
  /// @param kind its format
  /// @throws invalid_argument_error when the file cannot be opened or read (the message has the
  ///   path and the system's reason)
  [[nodiscard]] static object_code from_file(const std::string& path, code_kind kind);

  /// @brief Reads a whole file, taking the kind from its extension: `.ptx`, `.cubin`,
  /// `.fatbin`/`.fatbinary`, `.ltoir`/`.lto`, `.o`/`.obj`, `.a`/`.lib`.
  /// @throws invalid_argument_error for an unknown extension or an unreadable file
  [[nodiscard]] static object_code from_file(const std::string& path);

  /// @brief The format.
  [[nodiscard]] code_kind kind() const noexcept { return kind_; }
  /// @brief The bytes (for PTX, followed by a NUL that @ref size does not count).
  [[nodiscard]] const char* data() const noexcept { return bytes_.c_str(); }
  /// @brief The number of bytes.
  [[nodiscard]] std::size_t size() const noexcept { return bytes_.size(); }
  /// @brief `true` when there are no bytes.
  [[nodiscard]] bool empty() const noexcept { return bytes_.empty(); }
  /// @brief The bytes as a string (binary formats included).
  [[nodiscard]] const std::string& bytes() const noexcept { return bytes_; }
  /// @brief The name given at construction or the file name; used in messages.
  [[nodiscard]] const std::string& name() const noexcept { return name_; }

  /// @brief Checks, without any driver, that the bytes are a whole image of their kind; @ref library
  /// and @ref linker::add make the same checks before the driver or nvJitLink sees the bytes.
  ///
  /// PTX: text (no control characters, NUL bytes only as padding at the end) that starts with a
  /// `.version` directive after comments. cubin: a little-endian ELF64 file for EM_CUDA (190) whose
  /// program and section header tables, segments and sections lie inside the bytes, with sane entry
  /// sizes. fatbin: the fatbin magic, a header and body inside the bytes, and every entry's header and
  /// payload inside the body (an uncompressed cubin entry is checked as a cubin). The other kinds are
  /// not checked (nvJitLink reads them). The checks read only headers: an image that passes can still
  /// be refused by the driver (a wrong architecture, bad PTX syntax).
  /// @throws invalid_image_error saying what is wrong, e.g. `cubin: section header table at offset
  ///   4096 + 640 bytes (10 entries) exceeds the image size 2048 (truncated?)`
  void validate() const;

  /// @brief Writes the bytes to a file (replacing it).
  /// @throws invalid_argument_error when the file cannot be written
  void write_to_file(const std::string& path) const;

 private:
  code_kind kind_ = code_kind::ptx;
  std::string bytes_;
  std::string name_;
};

}  // namespace cudrv
