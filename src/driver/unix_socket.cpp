// Owning file descriptors and Unix-domain sockets that carry framed messages with SCM_RIGHTS
// descriptors. Operating-system calls only: nothing here touches the CUDA driver.
#include "cudrv/unix_socket.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include "cudrv/file_descriptor.hpp"
#include "driver/system_support.hpp"

namespace cudrv {

namespace {

// The frame in front of every message: payload size and descriptor count, in the sender's byte order
// (both ends are on one host).
struct frame_header {
  std::uint32_t magic;
  std::uint32_t descriptors;
  std::uint64_t payload;
};
static_assert(sizeof(frame_header) == 16);
constexpr std::uint32_t frame_magic = 0x56524443u;  // "CDRV"

using clock = std::chrono::steady_clock;

// The one place a deadline is made from a timeout. It saturates: a timeout too large to add to the
// clock's present time is no deadline at all (time_point::max()), and a negative or zero timeout is an
// immediate deadline. `timeout` is compared in milliseconds before it is converted to the clock's finer
// unit, since milliseconds::max() in nanoseconds overflows (steady_clock counts from boot: now >= 0).
clock::time_point deadline_after(std::chrono::milliseconds timeout) {
  const clock::time_point now = clock::now();
  if (timeout <= std::chrono::milliseconds::zero()) {
    return now;
  }
  if (timeout >= std::chrono::floor<std::chrono::milliseconds>(clock::time_point::max() - now)) {
    return clock::time_point::max();
  }
  return now + std::chrono::duration_cast<clock::duration>(timeout);
}

// A deadline from an optional timeout (none: time_point::max(), never reached); poll() timeouts derived
// from it.
struct deadline {
  clock::time_point at;
  explicit deadline(std::optional<std::chrono::milliseconds> timeout)
      : at(timeout ? deadline_after(*timeout) : clock::time_point::max()) {}
  [[nodiscard]] bool none() const { return at == clock::time_point::max(); }
  [[nodiscard]] bool passed() const { return !none() && clock::now() >= at; }
  // Milliseconds for one poll(): -1 for no deadline, 0 once passed, else the time left rounded up and
  // capped at 2^30 ms (about 12 days; the caller polls again while the deadline is ahead).
  [[nodiscard]] int poll_ms() const {
    if (none()) {
      return -1;
    }
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(at - clock::now()).count();
    return static_cast<int>(std::clamp<long long>(left, 0, 1 << 30));
  }
};

[[noreturn]] void throw_timeout(const char* api, std::optional<std::chrono::milliseconds> timeout,
                                const std::string& what) {
  throw timeout_error(ETIMEDOUT, api,
                      what + " did not complete within " + std::to_string(timeout ? timeout->count() : 0) + " ms");
}

// Waits until fd is ready for events (POLLIN or POLLOUT); EINTR, and a poll() that ended before a
// deadline further away than one poll can wait, restart with the time left. Readiness includes POLLHUP
// and POLLERR: the following call then reports what happened.
void wait_ready(int fd, short events, const deadline& d, const char* api,
                std::optional<std::chrono::milliseconds> timeout, const std::string& what) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, d.poll_ms());
    if (r > 0) {
      return;
    }
    if (r == 0) {
      if (d.passed()) {
        throw_timeout(api, timeout, what);
      }
      continue;
    }
    if (errno != EINTR) {
      throw system_error(errno, "poll", api);
    }
  }
}

bool is_peer_gone(int e) { return e == EPIPE || e == ECONNRESET; }

sockaddr_un make_address(const std::string& path, socklen_t& length, const char* api) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty()) {
    throw invalid_argument_error(api, "the socket path is empty");
  }
  if (path.size() >= sizeof(addr.sun_path)) {
    throw invalid_argument_error(api, "the socket path '" + path + "' is " + std::to_string(path.size()) +
                                          " bytes long; a Unix socket path holds at most " +
                                          std::to_string(sizeof(addr.sun_path) - 1) + " bytes");
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  if (path[0] == '@') {
    addr.sun_path[0] = '\0';  // abstract namespace: no file, the name is the bytes that follow
    length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
  } else {
    length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + 1);
  }
  return addr;
}

file_descriptor new_socket(const char* api, int flags = 0) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | flags, 0);
  if (fd < 0) {
    throw system_error(errno, "socket", api);
  }
  return file_descriptor::from_native_handle(fd);
}

// Clears O_NONBLOCK on a connection made non-blocking for connect or accept: its I/O uses MSG_DONTWAIT
// and poll anyway, and a caller of native_handle() gets an ordinary blocking socket.
void make_blocking(const file_descriptor& fd, const char* api) {
  const int flags = ::fcntl(fd.native_handle(), F_GETFL);
  if (flags < 0 || ::fcntl(fd.native_handle(), F_SETFL, flags & ~O_NONBLOCK) != 0) {
    throw system_error(errno, "fcntl(F_SETFL)", api);
  }
}

}  // namespace

void received_message::check_size(std::size_t bytes, const char* api) const {
  if (payload.size() != bytes) {
    throw system_error(EPROTO, api,
                       "the message holds " + std::to_string(payload.size()) + " bytes, the value " +
                           std::to_string(bytes));
  }
}

// --- unix_socket ----------------------------------------------------------------------------------

void unix_socket::require_socket(const char* api) const {
  if (!fd_) {
    throw invalid_argument_error(
        api, "the socket is empty (a moved-from, released or default-constructed cudrv::unix_socket)");
  }
}

std::pair<unix_socket, unix_socket> unix_socket::pair() {
  int fds[2] = {-1, -1};
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    throw system_error(errno, "socketpair", "cudrv::unix_socket::pair");
  }
  return {unix_socket(file_descriptor::from_native_handle(fds[0])),
          unix_socket(file_descriptor::from_native_handle(fds[1]))};
}

unix_socket unix_socket::connect(const std::string& path, std::optional<std::chrono::milliseconds> wait) {
  const char* api = "cudrv::unix_socket::connect";
  socklen_t length = 0;
  const sockaddr_un addr = make_address(path, length, api);
  const deadline d(wait);
  const auto waited = [&] { return std::to_string(wait ? wait->count() : 0) + " ms"; };
  for (;;) {
    // Non-blocking: a blocking connect to a listener whose backlog is full sleeps until the listener
    // accepts, which may be never. AF_UNIX answers EAGAIN instead, and that is retried below.
    file_descriptor fd = new_socket(api, SOCK_NONBLOCK);
    int e = ::connect(fd.native_handle(), reinterpret_cast<const sockaddr*>(&addr), length) == 0 ? 0 : errno;
    if (e == EINPROGRESS || e == EINTR) {
      // The connection goes on in the background (not seen for AF_UNIX; handled as for any socket):
      // wait until it is writable, then read its outcome.
      wait_ready(fd.native_handle(), POLLOUT, d, api, wait, "connecting to '" + path + "'");
      int err = 0;
      socklen_t len = sizeof(err);
      e = ::getsockopt(fd.native_handle(), SOL_SOCKET, SO_ERROR, &err, &len) == 0 ? err : errno;
    }
    if (e == 0) {
      make_blocking(fd, api);
      return unix_socket(std::move(fd));
    }
    const bool absent = e == ENOENT || e == ECONNREFUSED;
    const bool full = e == EAGAIN || e == EWOULDBLOCK;
    if (full && !wait) {
      throw system_error(EAGAIN, api,
                         "the listener at '" + path +
                             "' takes no connection now: its backlog is full (it does not "
                             "accept fast enough); a connect with a wait retries until then");
    }
    if (!(absent || full) || !wait) {
      throw system_error(e, "connect", path);
    }
    if (d.passed()) {
      throw timeout_error(ETIMEDOUT, api,
                          absent ? "no listener at '" + path + "' within " + waited() +
                                       " (last: " + detail::errno_name(e) + ")"
                                 : "the listener at '" + path + "' took no connection within " + waited() +
                                       ": its backlog stayed full");
    }
    const int left = d.poll_ms();
    std::this_thread::sleep_for(std::chrono::milliseconds(left < 0 ? 5 : std::clamp(left, 1, 5)));
  }
}

// Out of line: inline, the span built from the braced list costs every includer compile time
// (docs/design.md, "Header cost").
void unix_socket::send(std::span<const std::byte> payload, std::initializer_list<int> descriptors,
                       std::optional<std::chrono::milliseconds> timeout) const {
  send(payload, std::span<const int>(descriptors.begin(), descriptors.size()), timeout);
}

void unix_socket::send(std::span<const std::byte> payload, std::span<const int> descriptors,
                       std::optional<std::chrono::milliseconds> timeout) const {
  const char* api = "cudrv::unix_socket::send";
  require_socket(api);
  if (descriptors.size() > max_descriptors) {
    throw invalid_argument_error(api, std::to_string(descriptors.size()) + " descriptors in one message; at most " +
                                          std::to_string(max_descriptors) + " (SCM_MAX_FD)");
  }
  for (int fd : descriptors) {
    if (fd < 0) {
      throw invalid_argument_error(api, "descriptor " + std::to_string(fd) +
                                            " is not a file descriptor (an empty cudrv::file_descriptor?)");
    }
  }
  const frame_header header{frame_magic, static_cast<std::uint32_t>(descriptors.size()),
                            static_cast<std::uint64_t>(payload.size())};
  std::vector<unsigned char> control;
  if (!descriptors.empty()) {
    control.assign(CMSG_SPACE(descriptors.size() * sizeof(int)), 0);
  }
  iovec iov[2] = {{const_cast<frame_header*>(&header), sizeof(header)},
                  {const_cast<std::byte*>(payload.data()), payload.size()}};
  std::size_t first = 0;  // the first iovec not yet sent completely
  bool control_sent = descriptors.empty();
  const deadline d(timeout);
  while (first < 2) {
    if (iov[first].iov_len == 0) {
      ++first;
      continue;
    }
    msghdr msg{};
    msg.msg_iov = &iov[first];
    msg.msg_iovlen = 2 - first;
    if (!control_sent) {
      // The descriptors ride on the first byte of the message: attached until a byte went out.
      msg.msg_control = control.data();
      msg.msg_controllen = control.size();
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(descriptors.size() * sizeof(int));
      std::memcpy(CMSG_DATA(c), descriptors.data(), descriptors.size() * sizeof(int));
    }
    const ssize_t n = ::sendmsg(fd_.native_handle(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      const int e = errno;
      if (e == EINTR) {
        continue;
      }
      if (e == EAGAIN || e == EWOULDBLOCK) {
        wait_ready(fd_.native_handle(), POLLOUT, d, api, timeout, "sending a message");
        continue;
      }
      if (is_peer_gone(e)) {
        throw peer_closed_error(e, api, "the peer closed the socket");
      }
      throw system_error(e, "sendmsg", api);
    }
    control_sent = true;
    auto left = static_cast<std::size_t>(n);
    while (left > 0 && first < 2) {  // a short write: go on from where it stopped
      const std::size_t step = std::min(left, iov[first].iov_len);
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + step;
      iov[first].iov_len -= step;
      left -= step;
      if (iov[first].iov_len == 0) {
        ++first;
      }
    }
  }
}

namespace {

// "1 file descriptor", "2 file descriptors".
std::string count_of(std::size_t n, const std::string& what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

enum class message_part { header, payload };

// What one receive saw of the descriptors that came with its message. The kernel hands the descriptors
// of one sendmsg to the first recvmsg that reads one of its bytes, as many as that recvmsg's control
// buffer has room for; it closes the rest itself and says so with MSG_CTRUNC. A sender that follows the
// protocol attaches them to the header's first byte.
struct arrivals {
  std::size_t keep_at_most = 0;       // of those that come with the header; the others are closed at once
  std::size_t with_header = 0;        // arrived with the header's bytes, kept or closed
  std::size_t with_payload = 0;       // arrived with the payload's bytes: never announced, closed at once
  bool discarded = false;             // a recvmsg's buffer was full and the kernel discarded more (MSG_CTRUNC)
  int no_slot = 0;                    // EMFILE or ENFILE: the kernel could not install the header's descriptors
  bool no_slot_with_payload = false;  // nor some attached to the payload's bytes
};

// Handles the descriptors one recvmsg received: each is owned at once; those of the header are kept in
// `kept` while there is room (seen.keep_at_most), every other one is closed as soon as it is counted.
void take_descriptors(msghdr& msg, message_part where, std::vector<file_descriptor>& kept, arrivals& seen) {
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0)) {
      continue;
    }
    const std::size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    const unsigned char* data = CMSG_DATA(c);
    for (std::size_t i = 0; i < n; ++i) {
      int raw = -1;
      std::memcpy(&raw, data + i * sizeof(int), sizeof(int));
      file_descriptor fd = file_descriptor::from_native_handle(raw);
      if (where == message_part::header) {
        ++seen.with_header;
        if (kept.size() < seen.keep_at_most) {
          kept.push_back(std::move(fd));
        }
      } else {
        ++seen.with_payload;
      }
    }  // each `fd` not moved into `kept` was closed at the end of its iteration
  }
}

// How many descriptors the kernel installs into one recvmsg with this control buffer at most (its own
// arithmetic: the room left after the control messages placed before SCM_RIGHTS, less one header).
std::size_t descriptor_room(msghdr& msg, std::size_t control_size) {
  std::size_t used = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
      used += CMSG_ALIGN(c->cmsg_len);
    }
  }
  return control_size > used + sizeof(cmsghdr) ? (control_size - used - sizeof(cmsghdr)) / sizeof(int) : 0;
}

// The number of descriptors of the SCM_RIGHTS control messages in msg.
std::size_t rights_count(msghdr& msg) {
  std::size_t n = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len >= CMSG_LEN(0)) {
      n += (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    }
  }
  return n;
}

// Why the kernel installed fewer descriptors than a recvmsg had room for: this process's descriptor
// table is full (EMFILE) or the system's file table (ENFILE). Asked with a duplicate of `fd`, closed at
// once, before any received descriptor is closed; EMFILE when the duplicate succeeds (another thread
// closed a descriptor meanwhile).
int no_slot_errno(int fd) {
  const int probe = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (probe >= 0) {
    (void)::close(probe);
    return EMFILE;
  }
  return errno == ENFILE ? ENFILE : EMFILE;
}

// Reads exactly `bytes` bytes of the message's `where` into `into` (or discards them when into is
// null), handling the descriptors that arrive with them (take_descriptors).
void read_exact(int fd, void* into, std::size_t bytes, message_part where, std::size_t max_fds,
                std::vector<file_descriptor>& kept, arrivals& seen, const deadline& d,
                std::optional<std::chrono::milliseconds> timeout) {
  const char* api = "cudrv::unix_socket::receive";
  std::vector<unsigned char> control(CMSG_SPACE(std::max<std::size_t>(max_fds, 1) * sizeof(int)));
  unsigned char scratch[1 << 14];
  std::size_t done = 0;
  while (done < bytes) {
    iovec iov{};
    if (into != nullptr) {
      iov = {static_cast<char*>(into) + done, bytes - done};
    } else {
      iov = {scratch, std::min(sizeof(scratch), bytes - done)};
    }
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    const ssize_t n = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0) {
      const int e = errno;
      if (e == EINTR) {
        continue;
      }
      if (e == EAGAIN || e == EWOULDBLOCK) {
        wait_ready(fd, POLLIN, d, api, timeout, "receiving a message");
        continue;
      }
      if (is_peer_gone(e)) {
        throw peer_closed_error(e, api, "the peer closed the socket");
      }
      throw system_error(e, "recvmsg", api);
    }
    if ((msg.msg_flags & MSG_CTRUNC) != 0) {
      // Truncated: either the buffer was full (the peer attached more than it has room for), or the
      // kernel stopped installing before that because this process (or the system) has no free slot.
      if (rights_count(msg) >= descriptor_room(msg, control.size())) {
        seen.discarded = true;
      } else if (where == message_part::payload) {
        seen.no_slot_with_payload = true;
      } else if (seen.no_slot == 0) {
        seen.no_slot = no_slot_errno(fd);
      }
    }
    take_descriptors(msg, where, kept, seen);
    if (n == 0) {
      throw peer_closed_error(ENOTCONN, api,
                              where == message_part::payload || done > 0
                                  ? "the peer closed the socket in the middle of a message"
                                  : "the peer closed the socket");
    }
    done += static_cast<std::size_t>(n);
  }
}

// The refusal of a message whose descriptors could not be installed: no free slot.
std::string no_slot_text(int e, std::uint32_t announced) {
  rlimit limit{};
  std::string soft = "unknown";
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    soft = limit.rlim_cur == RLIM_INFINITY ? "unlimited" : std::to_string(limit.rlim_cur);
  }
  const std::string why =
      e == ENFILE ? "the system's file table is full (ENFILE; this process's RLIMIT_NOFILE soft limit is " + soft + ")"
                  : "the process has no free descriptor slot (RLIMIT_NOFILE soft limit " + soft + ")";
  return why + ": the kernel could not install the file descriptors of the message (it announced " +
         std::to_string(announced) + "); those that arrived were closed and the message is refused";
}

// The refusal of a message whose descriptors are not the ones its header announced.
std::string unannounced_text(std::uint32_t announced, const arrivals& seen) {
  const std::size_t extra = seen.with_header > announced ? seen.with_header - announced : 0;
  const std::size_t unannounced = extra + seen.with_payload;
  std::string text = "the message announced " + count_of(announced, "file descriptor") + "; " +
                     std::to_string(seen.with_header) + " arrived with its header";
  if (seen.with_payload > 0) {
    text += " and " + std::to_string(seen.with_payload) + " with its payload";
  }
  if (unannounced > 0) {
    text += ": " + std::to_string(unannounced) + " unannounced ones arrived and were closed";
  }
  if (seen.discarded) {
    text += "; the peer attached more than this receive has room for (the kernel discarded the rest, MSG_CTRUNC)";
  }
  if (seen.no_slot_with_payload) {
    text += "; more came with its payload that the kernel could not install (no free descriptor slot)";
  }
  return text + "; the message is refused and every descriptor that came with it was closed";
}

}  // namespace

received_message unix_socket::receive(const receive_options& options) const {
  const char* api = "cudrv::unix_socket::receive";
  require_socket(api);
  const std::size_t max_fds = std::min(options.max_descriptors, max_descriptors);
  const deadline d(options.timeout);
  received_message out;
  frame_header header{};
  arrivals seen;
  seen.keep_at_most = max_fds;
  // The descriptors kept are owned by `out.descriptors` at once: on any error below they are closed
  // with it, never leaked into the process; no more than max_fds are ever kept.
  read_exact(fd_.native_handle(), &header, sizeof(header), message_part::header, max_fds, out.descriptors, seen, d,
             options.timeout);
  if (header.magic != frame_magic) {
    throw system_error(EPROTO, api,
                       "the bytes received are not a cudrv::unix_socket message (the peer must send with "
                       "cudrv::unix_socket::send)");
  }
  const bool too_large = header.payload > options.max_payload;
  if (!too_large) {
    out.payload.resize(static_cast<std::size_t>(header.payload));
  }
  // Read (or discard) the payload even when the message is refused, so that the next receive starts at
  // the next message.
  read_exact(fd_.native_handle(), too_large ? nullptr : out.payload.data(), static_cast<std::size_t>(header.payload),
             message_part::payload, max_fds, out.descriptors, seen, d, options.timeout);
  // A refused message's descriptors are closed before the error is made, so that its slots are free again
  // by then (a process out of slots may need one to handle the error).
  auto refuse = [&](int code, std::string text) {
    out.descriptors.clear();
    throw system_error(code, api, std::move(text));
  };
  if (seen.no_slot != 0) {
    refuse(seen.no_slot, no_slot_text(seen.no_slot, header.descriptors));
  }
  if (too_large) {
    refuse(EMSGSIZE, "a message of " + std::to_string(header.payload) + " bytes; this receive accepts at most " +
                         std::to_string(options.max_payload) + " (receive_options::max_payload)");
  }
  if (header.descriptors > max_fds) {
    refuse(EMSGSIZE, "the message announced " + count_of(header.descriptors, "file descriptor") +
                         "; this receive accepts at most " + std::to_string(max_fds) +
                         " (receive_options::max_descriptors); those that arrived were closed");
  }
  if (seen.with_payload > 0 || seen.no_slot_with_payload || seen.with_header != header.descriptors || seen.discarded) {
    refuse(EPROTO, unannounced_text(header.descriptors, seen));
  }
  return out;
}

peer_credentials unix_socket::peer() const {
  require_socket("cudrv::unix_socket::peer");
  ucred cred{};
  socklen_t length = sizeof(cred);
  if (::getsockopt(fd_.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &length) != 0) {
    throw system_error(errno, "getsockopt(SO_PEERCRED)", "cudrv::unix_socket::peer");
  }
  return {static_cast<long>(cred.pid), static_cast<unsigned long>(cred.uid), static_cast<unsigned long>(cred.gid)};
}

void unix_socket::shutdown() const {
  require_socket("cudrv::unix_socket::shutdown");
  if (::shutdown(fd_.native_handle(), SHUT_RDWR) != 0 && errno != ENOTCONN) {
    throw system_error(errno, "shutdown", "cudrv::unix_socket::shutdown");
  }
}

// --- unix_listener --------------------------------------------------------------------------------

unix_listener::unix_listener(std::string path, int backlog) {
  const char* api = "cudrv::unix_listener";
  socklen_t length = 0;
  const sockaddr_un addr = make_address(path, length, api);
  file_descriptor fd = new_socket(api);
  if (::bind(fd.native_handle(), reinterpret_cast<const sockaddr*>(&addr), length) != 0) {
    const int e = errno;
    throw system_error(e, "bind",
                       path + (e == EADDRINUSE ? " (the name is taken: another listener, or a socket file "
                                                 "left by a process that died; remove it first)"
                                               : ""));
  }
  path_ = std::move(path);
  if (::listen(fd.native_handle(), backlog) != 0) {
    const int e = errno;
    if (path_[0] != '@') {
      ::unlink(path_.c_str());
    }
    throw system_error(e, "listen", path_);
  }
  fd_ = std::move(fd);
}

unix_listener::unix_listener(unix_listener&& other) noexcept
    : fd_(std::move(other.fd_)), path_(std::exchange(other.path_, std::string())) {}

unix_listener& unix_listener::operator=(unix_listener&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = std::move(other.fd_);
    path_ = std::exchange(other.path_, std::string());
  }
  return *this;
}

void unix_listener::reset() noexcept {
  if (fd_) {
    fd_.reset();
    if (!path_.empty() && path_[0] != '@') {
      (void)::unlink(path_.c_str());
    }
  }
  path_.clear();
}

unix_socket unix_listener::accept(std::optional<std::chrono::milliseconds> timeout) const {
  const char* api = "cudrv::unix_listener::accept";
  if (!fd_) {
    throw invalid_argument_error(api, "the listener is empty (a moved-from cudrv::unix_listener)");
  }
  const deadline d(timeout);
  for (;;) {
    wait_ready(fd_.native_handle(), POLLIN, d, api, timeout, "waiting for a connection on '" + path_ + "'");
    file_descriptor fd = file_descriptor::from_native_handle(
        ::accept4(fd_.native_handle(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (fd) {
      make_blocking(fd, api);  // like connect()'s
      return unix_socket::from_native_handle(std::move(fd));
    }
    const int e = errno;
    if (e == EINTR || e == EAGAIN || e == EWOULDBLOCK || e == ECONNABORTED) {
      continue;
    }
    throw system_error(e, "accept4", path_);
  }
}

}  // namespace cudrv
