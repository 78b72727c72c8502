/// @file file_descriptor.hpp
/// @brief @ref cudrv::file_descriptor, an owning POSIX file descriptor (closed on destruction), and
/// @ref cudrv::system_error, the error of a failed operating-system call. Used by
/// <cudrv/unix_socket.hpp> and the shareable handles of <cudrv/ipc.hpp>. No CUDA call.
///
/// Layer: driver (docs/design.md, "Source layers").
#pragma once

#include <string>
#include <utility>

#include "cudrv/detail/exchange.hpp"
#include "cudrv/error.hpp"

namespace cudrv {

/// @brief An operating-system call failed. @ref error::source is @ref error_source::system,
/// @ref error::code the `errno` value, @ref error::name its symbolic name (`ECONNRESET`) and
/// @ref error::description the C library's text for it.
///
/// @code
/// try {
///   auto s = cudrv::unix_socket::connect("/run/my-producer.sock");
/// } catch (const cudrv::system_error& e) {
///   std::cerr << e.what() << '\n';   // connect: ENOENT (No such file or directory) [/run/my-producer.sock]
/// }
/// @endcode
class system_error : public error {
 public:
  /// @brief Builds the error.
  /// @param errno_value the `errno` the call left
  /// @param api the call that failed (`sendmsg`, `cudrv::unix_socket::receive`)
  /// @param context where it failed (the socket path, the sizes); may be empty
  system_error(int errno_value, std::string api, std::string context = {});
};

/// @brief An owning POSIX file descriptor, closed when the object is destroyed. Move-only.
///
/// The descriptors cudrv creates or receives are close-on-exec, so they do not leak into programs
/// the process starts. Passing one to another process is done with @ref unix_socket::send; the
/// received copy is a new descriptor in the receiving process that refers to the same open file.
/// @code
/// cudrv::file_descriptor fd = cudrv::file_descriptor::from_native_handle(::memfd_create("x", MFD_CLOEXEC));
/// int raw = fd.native_handle();            // still owned by fd
/// cudrv::file_descriptor copy = fd.duplicate();
/// int mine = fd.release();                 // now the caller closes it
/// @endcode
class file_descriptor {
 public:
  /// @brief An empty object (holds no descriptor).
  constexpr file_descriptor() noexcept = default;
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  file_descriptor(const file_descriptor&) = delete;
  file_descriptor& operator=(const file_descriptor&) = delete;
  /// @}
  /// @brief Takes over @p other's descriptor; @p other becomes empty.
  file_descriptor(file_descriptor&& other) noexcept : fd_(cudrv::detail::exchange(other.fd_, -1)) {}
  /// @brief Closes the held descriptor, then takes over @p other's.
  file_descriptor& operator=(file_descriptor&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = cudrv::detail::exchange(other.fd_, -1);
    }
    return *this;
  }
  /// @brief Closes the descriptor (a failure of close is ignored: the descriptor is gone either way).
  ~file_descriptor() { reset(); }

  /// @brief Takes ownership of @p fd (a negative value gives an empty object).
  [[nodiscard]] static file_descriptor from_native_handle(int fd) noexcept { return file_descriptor(fd); }
  /// @brief The descriptor, still owned by this object; -1 when empty.
  [[nodiscard]] constexpr int native_handle() const noexcept { return fd_; }
  /// @brief Gives up ownership; the caller must close the returned descriptor.
  [[nodiscard]] int release() noexcept { return cudrv::detail::exchange(fd_, -1); }
  /// @brief Closes the descriptor now; the object becomes empty.
  void reset() noexcept;
  /// @brief Whether this object holds a descriptor.
  [[nodiscard]] explicit operator bool() const noexcept { return fd_ >= 0; }
  /// @brief A new descriptor for the same open file (`fcntl(F_DUPFD_CLOEXEC)`).
  /// @throws invalid_argument_error when empty; @ref system_error when the process has no descriptor left
  [[nodiscard]] file_descriptor duplicate() const;

 private:
  explicit file_descriptor(int fd) noexcept : fd_(fd < 0 ? -1 : fd) {}
  int fd_ = -1;
};

}  // namespace cudrv
