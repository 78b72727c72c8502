// Owning file descriptors and the error of a failed operating-system call (<cudrv/file_descriptor.hpp>).
#include "cudrv/file_descriptor.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "driver/system_support.hpp"

namespace cudrv {

namespace detail {

std::string errno_name(int e) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
  if (const char* n = strerrorname_np(e)) {
    return n;
  }
#endif
  return "errno " + std::to_string(e);
}

std::string errno_text(int e) {
  char buffer[256];
  buffer[0] = '\0';
#if defined(__GLIBC__) && defined(_GNU_SOURCE)
  return ::strerror_r(e, buffer, sizeof(buffer));
#else
  ::strerror_r(e, buffer, sizeof(buffer));
  return buffer;
#endif
}

}  // namespace detail

system_error::system_error(int errno_value, std::string api, std::string context)
    : error(error_source::system, errno_value, detail::errno_name(errno_value), detail::errno_text(errno_value),
            std::move(api), std::move(context)) {}

void file_descriptor::reset() noexcept {
  if (fd_ >= 0) {
    // close() releases the descriptor even when it fails (EINTR included on Linux): never retry it,
    // the number may already belong to another thread's new file.
    (void)::close(std::exchange(fd_, -1));
  }
}

file_descriptor file_descriptor::duplicate() const {
  if (fd_ < 0) {
    throw invalid_argument_error("cudrv::file_descriptor::duplicate", "the file descriptor is empty");
  }
  const int copy = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) {
    throw system_error(errno, "fcntl(F_DUPFD_CLOEXEC)", "descriptor " + std::to_string(fd_));
  }
  return file_descriptor(copy);
}

}  // namespace cudrv
